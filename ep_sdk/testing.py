"""Test helpers for provider authors: run nodes and models through a provider
and compare the results with onnx's reference evaluator.

``onnx.reference`` is a test oracle only: it is used here, never in kernels.
Every helper takes the provider as a name or alias of an installed provider
(``"cpu"``) or as an :class:`~ep_sdk.ExecutionProvider` subclass that is not
installed yet (it is offered to a private plugin manager, next to the
installed providers, so the CPU fallback is still there)::

    from ep_sdk.testing import check_node

    def test_relu():
        x = np.array([[-1.0, 2.0]], dtype=np.float32)
        check_node(MyProvider, "Relu", [x], opset=14)

Each check returns the provider's outputs; it fails (``AssertionError``) when
the node did not run on the provider, or an output differs from the oracle
by more than ``atol + rtol * |expected|``.
"""

from __future__ import annotations

import types
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import onnx
from onnx import helper

from .dtypes import from_numpy
from .provider import ExecutionProvider

if TYPE_CHECKING:
    from ortcore import InferenceSession

__all__ = [
    "assert_close",
    "check_model",
    "check_node",
    "make_node_model",
    "reference_outputs",
    "session",
]

ProviderLike = str | type[ExecutionProvider]


def make_node_model(
    op_type: str,
    inputs: Sequence[np.ndarray | None],
    *,
    attributes: Mapping[str, Any] | None = None,
    num_outputs: int = 1,
    opset: int = 21,
    domain: str = "",
    domain_version: int = 1,
) -> onnx.ModelProto:
    """A model of one node whose inputs are graph inputs ``x0, x1, ...``.

    ``None`` in ``inputs`` leaves that optional input out. Output types are
    left to shape inference.
    """
    names = [f"x{i}" if x is not None else "" for i, x in enumerate(inputs)]
    outputs = [f"y{i}" for i in range(num_outputs)]
    node = helper.make_node(
        op_type, names, outputs, name=f"{op_type}_0", domain=domain, **dict(attributes or {})
    )
    graph_inputs = [
        helper.make_tensor_value_info(n, int(from_numpy(x.dtype)), list(x.shape))
        for n, x in zip(names, inputs)
        if x is not None
    ]
    graph_outputs = [
        helper.make_tensor_value_info(o, onnx.TensorProto.UNDEFINED, None) for o in outputs
    ]
    graph = helper.make_graph([node], f"{op_type}_test", graph_inputs, graph_outputs)
    opsets = [helper.make_opsetid("", opset)]
    if domain:
        opsets.append(helper.make_opsetid(domain, domain_version))
    model = helper.make_model(graph, opset_imports=opsets)
    return onnx.shape_inference.infer_shapes(model)


def session(
    provider: ProviderLike,
    model: onnx.ModelProto | bytes | str,
    *,
    fallback: bool = True,
    optimize: bool = True,
    sess_options: Any = None,
) -> InferenceSession:
    """An ``InferenceSession`` of ``model`` with ``provider`` first.

    Args:
        provider: installed provider name or alias, or a provider class.
        model: the model (proto, serialized bytes or path).
        fallback: keep the CPU provider as fallback; ``False`` makes a node
            the provider declines an error.
        optimize: ``False`` turns graph optimizations off, so that the
            provider's own kernels run every node.
        sess_options: ``SessionOptions`` to start from (e.g. with custom ops).
    """
    import ortcore

    so = sess_options if sess_options is not None else ortcore.SessionOptions()
    if not fallback:
        so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
    if not optimize:
        so.graph_optimization_level = ortcore.GraphOptimizationLevel.ORT_DISABLE_ALL
    data = model.SerializeToString() if isinstance(model, onnx.ModelProto) else model
    if isinstance(provider, str):
        return ortcore.InferenceSession(data, so, providers=[provider])
    return ortcore.InferenceSession(
        data, so, providers=[provider.name], plugin_manager=_manager_with(provider)
    )


def _manager_with(cls: type[ExecutionProvider]) -> Any:
    """A plugin manager with the installed providers plus ``cls``."""
    from ortcore.plugins import PluginManager

    from . import hookimpl

    manager = PluginManager()
    installed = {e.name: e for e in manager.entries()}
    if cls.name in installed and installed[cls.name].cls is cls:
        return manager
    if cls.name in installed:
        # An installed copy of the provider under test: test the given class.
        manager.unregister_plugin(installed[cls.name].plugin)
    plugin = types.ModuleType(f"ep_sdk.testing.{cls.__name__}")

    @hookimpl
    def ortcore_providers() -> list[type[ExecutionProvider]]:
        return [cls]

    plugin.ortcore_providers = ortcore_providers  # type: ignore[attr-defined]
    manager.register_plugin(plugin, name=plugin.__name__)
    return manager


def reference_outputs(model: onnx.ModelProto, feeds: Mapping[str, Any]) -> list[Any]:
    """The outputs of ``model`` according to ``onnx.reference``."""
    import onnx.reference

    return list(onnx.reference.ReferenceEvaluator(model).run(None, dict(feeds)))


def assert_close(
    got: Sequence[Any], want: Sequence[Any], *, rtol: float = 1e-4, atol: float = 1e-6
) -> None:
    """Assert each output has the expected dtype, shape and values."""
    assert len(got) == len(want), f"{len(got)} outputs, expected {len(want)}"
    for i, (g, w) in enumerate(zip(got, want)):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype, f"output {i}: dtype {g.dtype}, expected {w.dtype}"
        assert g.shape == w.shape, f"output {i}: shape {g.shape}, expected {w.shape}"
        if g.dtype.kind in "fc":
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=f"output {i}")
        else:
            np.testing.assert_array_equal(g, w, err_msg=f"output {i}")


def check_model(
    provider: ProviderLike,
    model: onnx.ModelProto,
    feeds: Mapping[str, Any],
    *,
    rtol: float = 1e-4,
    atol: float = 1e-6,
    fallback: bool = True,
    min_nodes: int = 1,
    sess_options: Any = None,
) -> list[Any]:
    """Run ``model`` with ``provider`` (CPU as fallback) and compare with the oracle.

    Args:
        min_nodes: how many nodes the provider must have taken at least.
        sess_options: ``SessionOptions`` to start from.

    Returns:
        the provider's outputs.
    """
    sess = session(provider, model, fallback=fallback, sess_options=sess_options)
    name = sess.get_providers()[0]
    taken = sess.get_partition().counts().get(name, 0)
    assert taken >= min_nodes, (
        f"{name} ran {taken} node(s), expected at least {min_nodes}: "
        f"{sess.get_partition().to_dict()['nodes']}"
    )
    got = sess.run(None, dict(feeds))
    assert_close(got, reference_outputs(model, feeds), rtol=rtol, atol=atol)
    return got


def check_node(
    provider: ProviderLike,
    op_type: str,
    inputs: Sequence[np.ndarray | None],
    *,
    attributes: Mapping[str, Any] | None = None,
    num_outputs: int = 1,
    opset: int = 21,
    rtol: float = 1e-4,
    atol: float = 1e-6,
) -> list[Any]:
    """Run one node on ``provider`` alone (no fallback, no optimizations)
    and compare its outputs with the oracle.

    Returns:
        the provider's outputs.
    """
    model = make_node_model(
        op_type, inputs, attributes=attributes, num_outputs=num_outputs, opset=opset
    )
    feeds = {f"x{i}": x for i, x in enumerate(inputs) if x is not None}
    sess = session(provider, model, fallback=False, optimize=False)
    got = sess.run(None, feeds)
    assert_close(got, reference_outputs(model, feeds), rtol=rtol, atol=atol)
    return got
