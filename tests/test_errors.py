"""The error types: hierarchy, and one clear error (never a crash) for each fault."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import ep_sdk
import ortcore
from ep_sdk import Capability, Claim, Device, ExecutionProvider, KernelRegistry

from .conftest import chain_model, manager_with, no_fallback
from .providers import ClaimingProvider

X = np.ones((2, 3), np.float32)


@pytest.mark.parametrize(
    ("exc", "bases"),
    [
        (ortcore.InvalidArgument, (ortcore.OrtcoreError, ValueError)),
        (ortcore.NoSuchFile, (ortcore.OrtcoreError, FileNotFoundError, OSError)),
        (ortcore.InvalidProtobuf, (ortcore.OrtcoreError, ValueError)),
        (ortcore.InvalidGraph, (ortcore.OrtcoreError, ValueError)),
        (ortcore.NotImplementedOp, (ortcore.OrtcoreError, NotImplementedError)),
        (ortcore.Fail, (ortcore.OrtcoreError, RuntimeError)),
        (ortcore.RuntimeException, (ortcore.Fail, RuntimeError)),
        (ortcore.EPFail, (ortcore.Fail, RuntimeError)),
        (ortcore.AllocationError, (ortcore.Fail, MemoryError)),
        (ortcore.RunTerminated, (RuntimeError,)),
        (ortcore.ProviderOptionError, (ValueError,)),
    ],
)
def test_hierarchy(exc: type, bases: tuple[type, ...]) -> None:
    for base in bases:
        assert issubclass(exc, base)


def test_sdk_and_core_share_exceptions() -> None:
    assert ortcore.RunTerminated is ep_sdk.RunTerminated
    assert ortcore.ProviderOptionError is ep_sdk.ProviderOptionError


def test_provider_option_error_from_provider_directly() -> None:
    from .providers import MiniProvider

    with pytest.raises(ortcore.ProviderOptionError, match="colour"):
        MiniProvider({"colour": "red"})
    assert MiniProvider({"flavour": 1}).options == {"flavour": "1"}


def _one(cls: type) -> Any:
    return manager_with(cls)


def test_kernel_registry_failure_is_ep_fail() -> None:
    class NoKernels(ExecutionProvider):
        name = "NoKernelsExecutionProvider"

        def get_capability(self, graph: Any) -> Capability:
            return Capability(claims=[Claim.node(n) for n in graph.nodes])

        def kernel_registry(self) -> KernelRegistry:
            raise ImportError("compiled module _kernels missing")

    with pytest.raises(ortcore.EPFail, match=r"NoKernelsExecutionProvider.*_kernels missing"):
        ortcore.InferenceSession(
            chain_model(["Neg"]),
            providers=["NoKernelsExecutionProvider"],
            plugin_manager=_one(NoKernels),
        )


def test_provider_without_kernels_declines_everything() -> None:
    class Empty(ExecutionProvider):
        name = "EmptyExecutionProvider"

    with pytest.raises(
        ortcore.NotImplementedOp, match="EmptyExecutionProvider: provider has no kernels"
    ):
        ortcore.InferenceSession(
            chain_model(["Neg"]),
            providers=["EmptyExecutionProvider"],
            plugin_manager=_one(Empty),
        )


def test_compile_failure_is_ep_fail() -> None:
    class BadCompiler(ClaimingProvider):
        name = "BadCompilerExecutionProvider"
        aliases = ()

        def get_capability(self, graph: Any) -> Capability:
            return Capability(claims=[Claim.group(graph.nodes, name="grp")])

        def compile(self, group: Any) -> Any:
            raise RuntimeError("compiler crashed")

    with pytest.raises(
        ortcore.EPFail, match=r"BadCompilerExecutionProvider.*'grp'.*compiler crashed"
    ):
        ortcore.InferenceSession(
            chain_model(["Neg", "Relu"]),
            providers=["BadCompilerExecutionProvider"],
            plugin_manager=_one(BadCompiler),
        )


def test_fused_group_without_compile_is_ep_fail() -> None:
    class NoCompile(ExecutionProvider):
        name = "NoCompileExecutionProvider"

        def get_capability(self, graph: Any) -> Capability:
            return Capability(claims=[Claim.group(graph.nodes)])

    with pytest.raises(ortcore.EPFail, match="does not implement compile"):
        ortcore.InferenceSession(
            chain_model(["Neg"]),
            providers=["NoCompileExecutionProvider"],
            plugin_manager=_one(NoCompile),
        )


def test_device_provider_without_data_transfer_fails_clearly() -> None:
    class NoTransfer(ExecutionProvider):
        name = "NoTransferExecutionProvider"
        device = Device("weird", 0)

        def kernel_registry(self) -> KernelRegistry:
            reg = KernelRegistry()
            reg.kernel("Neg", since=6)(lambda info: lambda x: (x,))
            return reg

    sess = ortcore.InferenceSession(
        chain_model(["Neg"]),
        providers=["NoTransferExecutionProvider"],
        plugin_manager=_one(NoTransfer),
    )
    with pytest.raises(ortcore.RuntimeException, match="from_host") as info:
        sess.run(None, {"x": X})
    assert "MemcpyFromHost" in str(info.value)


def test_no_provider_at_all() -> None:
    from ortcore.plugins import PluginManager

    with pytest.raises(ortcore.InvalidArgument, match="No execution provider"):
        ortcore.InferenceSession(
            chain_model(["Neg"]), providers=None, plugin_manager=PluginManager(autoload=False)
        )


@pytest.mark.parametrize(
    "model",
    [b"", b"\x00\x01garbage", chain_model(["Add"])[:-3], "/nonexistent/model.onnx"],
    ids=["empty", "garbage", "truncated", "missing"],
)
def test_bad_models_raise_ortcore_errors(model: Any) -> None:
    with pytest.raises(ortcore.OrtcoreError):
        ortcore.InferenceSession(model, no_fallback(), providers=["mini"])


def test_errors_do_not_poison_the_session() -> None:
    sess = ortcore.InferenceSession(chain_model(["Add", "Neg"]), no_fallback(), providers=["mini"])
    for bad in ({}, {"x": X[0]}, {"x": X.astype(np.int32)}):
        with pytest.raises(ortcore.InvalidArgument):
            sess.run(None, bad)
    np.testing.assert_array_equal(sess.run(None, {"x": X})[0], -(X + X))


def test_onnxruntime_exception_module_path() -> None:
    """Code catching onnxruntime's exceptions by their module path keeps working."""
    from ortcore.capi import onnxruntime_pybind11_state as state

    assert state.InvalidArgument is ortcore.InvalidArgument
    assert state.NoSuchFile is ortcore.NoSuchFile
    assert state.NotImplemented is ortcore.NotImplementedOp
    with pytest.raises(state.NoSuchFile):
        ortcore.InferenceSession("/nonexistent/model.onnx")
