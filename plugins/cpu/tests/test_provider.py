"""The provider class, the plugin hook and the kernel registry."""

from __future__ import annotations

import subprocess
import sys

import ep_sdk
import onnx_ir

import ortcore_cpu
from ortcore_cpu import plugin
from ortcore_cpu.provider import CPUExecutionProvider


def test_provider_identity() -> None:
    assert CPUExecutionProvider.name == "CPUExecutionProvider"
    assert CPUExecutionProvider.aliases == ("cpu",)
    assert CPUExecutionProvider.priority == 0
    assert CPUExecutionProvider.version == ortcore_cpu.__version__
    assert issubclass(CPUExecutionProvider, ep_sdk.ExecutionProvider)


def test_hook_returns_provider() -> None:
    assert plugin.ortcore_providers() == [CPUExecutionProvider]


def test_registry_is_cached_and_covers_light_ops() -> None:
    p = CPUExecutionProvider()
    reg = p.kernel_registry()
    assert reg is CPUExecutionProvider().kernel_registry()
    light_ops = ["ConstantOfShape", "Conv", "Relu", "LRN", "MaxPool", "Reshape", "Gemm",
                 "Dropout", "Softmax", "BatchNormalization", "Unsqueeze", "Mul", "Add",
                 "Concat", "AveragePool", "GlobalAveragePool", "Sum", "Transpose"]  # fmt: skip
    for op in light_ops:
        found = reg.lookup(op, "", 9)
        assert isinstance(found, ep_sdk.KernelDef), f"{op}: {found}"


def test_registry_rejects_unsupported_types() -> None:
    reg = CPUExecutionProvider().kernel_registry()
    miss = reg.lookup("Conv", "", 11, [onnx_ir.DataType.INT32])
    assert isinstance(miss, ep_sdk.KernelMiss)


def test_importing_the_plugin_is_light() -> None:
    code = (
        "import sys, ortcore_cpu.plugin, ortcore_cpu.provider\n"
        "heavy = [m for m in sys.modules if m.startswith('ortcore_cpu.kernels')"
        " or m.startswith('ortcore_cpu._ext.')]\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_threads_from_session_config() -> None:
    from ortcore_cpu.kernels._common import thread_count

    class Info:
        provider = CPUExecutionProvider(config=ep_sdk.SessionConfig(intra_op_num_threads=3))

    assert thread_count(Info()) == 3  # type: ignore[arg-type]
    Info.provider = CPUExecutionProvider()
    assert thread_count(Info()) >= 1  # type: ignore[arg-type]
