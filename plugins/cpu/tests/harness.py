"""A tiny stand-in for the ortcore core, enough to test kernels on their own.

``run_node`` builds one ONNX node, looks its kernel up in the CPU provider's
registry the way the core does, builds it from an ``ep_sdk.NodeInfo`` and runs
it; ``reference_node`` runs the same node with ``onnx.reference`` (the test
oracle); ``run_graph`` executes a whole model node by node.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import ep_sdk
import numpy as np
import onnx
import onnx_ir as ir
from onnx import helper
from onnx.reference import ReferenceEvaluator

from ortcore_cpu.provider import CPUExecutionProvider


def _provider(threads: int) -> CPUExecutionProvider:
    return CPUExecutionProvider(config=ep_sdk.SessionConfig(intra_op_num_threads=threads))


def _tensor_type(x: np.ndarray | None) -> int:
    if x is None:
        return onnx.TensorProto.UNDEFINED
    return int(ep_sdk.from_numpy(x.dtype))


def make_node_model(
    op: str,
    inputs: Sequence[np.ndarray | None],
    attrs: Mapping[str, Any],
    opset: int,
    n_outputs: int,
) -> onnx.ModelProto:
    """An ONNX model holding one node of ``op`` fed by graph inputs."""
    in_names = [f"x{i}" if x is not None else "" for i, x in enumerate(inputs)]
    out_names = [f"y{i}" for i in range(n_outputs)]
    node = helper.make_node(op, in_names, out_names, **attrs)
    graph_inputs = [
        helper.make_tensor_value_info(name, _tensor_type(x), list(x.shape))
        for name, x in zip(in_names, inputs, strict=True)
        if x is not None
    ]
    graph_outputs = [helper.make_value_info(name, onnx.TypeProto()) for name in out_names]
    graph = helper.make_graph([node], "g", graph_inputs, graph_outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8 if opset < 21 else 10
    return model


def node_info(node: ir.Node, opset: int, provider: ep_sdk.ExecutionProvider) -> ep_sdk.NodeInfo:
    """Build the NodeInfo the core would build for ``node``."""
    attrs = dict(ep_sdk.attribute_defaults(node.op_type, node.domain, opset))
    for name, attr in node.attributes.items():
        value = attr.value
        if isinstance(value, ir.TensorProtocol):
            value = value.numpy()
        elif isinstance(value, Sequence) and not isinstance(value, str):
            value = list(value)
        attrs[name] = value
    ins, outs = ep_sdk.node_types(node)
    in_shapes = [
        tuple(d if isinstance(d, int) else None for d in v.shape)
        if v is not None and v.shape is not None
        else None
        for v in node.inputs
    ]
    return ep_sdk.NodeInfo(
        node, opset=opset, attrs=attrs, input_types=ins, input_shapes=in_shapes,
        output_types=outs, output_shapes=[None] * len(outs), provider=provider,
    )  # fmt: skip


def build_kernel(node: ir.Node, opset: int, threads: int = 2) -> ep_sdk.Compute:
    """Look ``node`` up in the CPU registry and build its compute function."""
    provider = _provider(threads)
    registry = provider.kernel_registry()
    ins, outs = ep_sdk.node_types(node)
    found = registry.lookup(node.op_type, node.domain, opset, ins, outs)
    if isinstance(found, ep_sdk.KernelMiss):
        raise LookupError(str(found))
    return found.builder(node_info(node, opset, provider))


def build_node(
    op: str,
    inputs: Sequence[np.ndarray | None],
    attrs: Mapping[str, Any] | None = None,
    *,
    opset: int = 17,
    n_outputs: int = 1,
    threads: int = 2,
) -> ep_sdk.Compute:
    """Build the CPU provider's compute function for one node of ``op``."""
    model = make_node_model(op, inputs, attrs or {}, opset, n_outputs)
    return build_kernel(ir.from_proto(model).graph[0], opset, threads)


def run_node(
    op: str,
    inputs: Sequence[np.ndarray | None],
    attrs: Mapping[str, Any] | None = None,
    *,
    opset: int = 17,
    n_outputs: int = 1,
    threads: int = 2,
) -> list[np.ndarray]:
    """Run one node of ``op`` with the CPU provider's kernel."""
    compute = build_node(op, inputs, attrs, opset=opset, n_outputs=n_outputs, threads=threads)
    while inputs and inputs[-1] is None:
        inputs = inputs[:-1]
    return list(compute(*inputs))


def reference_node(
    op: str,
    inputs: Sequence[np.ndarray | None],
    attrs: Mapping[str, Any] | None = None,
    *,
    opset: int = 17,
    n_outputs: int = 1,
) -> list[np.ndarray]:
    """Run one node of ``op`` with onnx.reference."""
    model = make_node_model(op, inputs, attrs or {}, opset, n_outputs)
    feeds = {f"x{i}": x for i, x in enumerate(inputs) if x is not None}
    return list(ReferenceEvaluator(model).run(None, feeds))


def ort_node(
    op: str,
    inputs: Sequence[np.ndarray | None],
    attrs: Mapping[str, Any] | None = None,
    *,
    opset: int = 17,
    n_outputs: int = 1,
) -> list[np.ndarray]:
    """Run one node of ``op`` with onnxruntime (oracle where onnx.reference is wrong)."""
    import onnxruntime as ort

    model = make_node_model(op, inputs, attrs or {}, opset, n_outputs)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    feeds = {f"x{i}": x for i, x in enumerate(inputs) if x is not None}
    return list(sess.run(None, feeds))


def check_node(
    op: str,
    inputs: Sequence[np.ndarray | None],
    attrs: Mapping[str, Any] | None = None,
    *,
    opset: int = 17,
    n_outputs: int = 1,
    rtol: float = 1e-5,
    atol: float = 1e-6,
    expected: Sequence[np.ndarray] | None = None,
    oracle: str = "reference",
) -> list[np.ndarray]:
    """Run ``op`` with both the kernel and the oracle (onnx.reference, or
    onnxruntime where the reference is known to be wrong), or compare with
    ``expected``; assert equal values, shapes and dtypes."""
    got = run_node(op, inputs, attrs, opset=opset, n_outputs=n_outputs)
    if expected is not None:
        want = list(expected)
    elif oracle == "onnxruntime":
        want = ort_node(op, inputs, attrs, opset=opset, n_outputs=n_outputs)
    else:
        want = reference_node(op, inputs, attrs, opset=opset, n_outputs=n_outputs)
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        w = np.asarray(w)
        g = np.asarray(g)
        assert g.shape == w.shape, f"{op}: shape {g.shape} != {w.shape}"
        assert g.dtype == w.dtype, f"{op}: dtype {g.dtype} != {w.dtype}"
        if g.dtype.kind in "fc":
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=op)
        else:
            np.testing.assert_array_equal(g, w, err_msg=op)
    return got


class GraphRunner:
    """Runs a whole (subgraph-free) model with the CPU kernels, in node order."""

    def __init__(self, model: onnx.ModelProto, threads: int = 2) -> None:
        self.model = ir.from_proto(model)
        opset = self.model.opset_imports.get("", 1)
        self.steps = []
        for node in self.model.graph:
            compute = build_kernel(node, opset, threads)
            ins = [v.name if v is not None else None for v in node.inputs]
            outs = [v.name for v in node.outputs]
            self.steps.append((compute, ins, outs))
        self.constants = {
            name: v.const_value.numpy()
            for name, v in self.model.graph.initializers.items()
            if v.const_value is not None
        }
        self.outputs = [v.name for v in self.model.graph.outputs]

    def run(self, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        """Return the graph outputs for ``feeds``."""
        values: dict[str | None, Any] = {**self.constants, **feeds, None: None}
        for compute, ins, outs in self.steps:
            args = [values[n] for n in ins]
            while args and args[-1] is None:
                args.pop()
            for name, value in zip(outs, compute(*args), strict=False):
                values[name] = value
        return [values[n] for n in self.outputs]
