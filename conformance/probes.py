"""Small float32 models the contract checks run.

A provider is probed with each; the checks use those it claims. Two families:

* single-node probes, one per op (``Add``, ``Conv``, ...), for providers that
  claim nodes one by one with their kernels;
* multi-node probes (``elementwise_chain``, ``four_outputs``,
  ``conv_relu_pool``, ``matmul_add_gelu``, ``attention``), the patterns
  compile-path providers fuse into groups; ``elementwise_chain`` and
  ``four_outputs`` have several outputs, so a fused group that returns its
  outputs in the wrong order is caught.

Every probe also comes ``big`` (larger inputs, same weights), and derived
forms: :func:`with_constants` (weights redrawn) and :func:`with_shared_inputs`
(intermediates with two readers that are also outputs).

The expected outputs come from the suite's oracle (onnx's reference evaluator,
:mod:`conformance.oracle`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

__all__ = ["OPSET", "Probe", "probes", "with_constants", "with_shared_inputs"]

OPSET = 18
F = TensorProto.FLOAT


@dataclass(frozen=True)
class Probe:
    """One probe model and how to make its inputs.

    Attributes:
        name: the op of a single-node probe, the pattern of a multi-node one.
        model: the model (inputs ``x0``, ``x1``, ...; weights are initializers).
        shapes: the shape of each graph input.
        positive: inputs drawn from [0.5, 2.5] instead of [-2, 2].
    """

    name: str
    model: onnx.ModelProto
    shapes: tuple[tuple[int, ...], ...]
    positive: bool = False

    @property
    def ops(self) -> list[str]:
        """The op types of the probe's nodes, in graph order."""
        return [n.op_type for n in self.model.graph.node]

    @property
    def multi_node(self) -> bool:
        """Whether the probe has more than one node."""
        return len(self.model.graph.node) > 1

    def feeds(self, seed: int) -> dict[str, np.ndarray]:
        """Inputs drawn from a seeded generator."""
        rng = np.random.default_rng(seed)
        out = {}
        for vi, shape in zip(self.model.graph.input, self.shapes):
            x = rng.uniform(-2.0, 2.0, size=shape).astype(np.float32)
            if self.positive:
                x = np.abs(x) + np.float32(0.5)
            out[vi.name] = x
        return out

    def reference(self, feeds: dict[str, np.ndarray]) -> list[Any]:
        """Expected outputs (the suite's oracle)."""
        from .oracle import evaluator

        return list(evaluator(self.model).run(None, feeds))

    @property
    def bytes(self) -> bytes:
        """The serialized model."""
        return self.model.SerializeToString()


def _model(
    name: str,
    nodes: Sequence[onnx.NodeProto],
    inputs: Sequence[tuple[str, tuple[int, ...]]],
    outputs: Sequence[tuple[str, tuple[int, ...]]],
    weights: dict[str, np.ndarray] | None = None,
) -> onnx.ModelProto:
    graph = helper.make_graph(
        list(nodes),
        f"probe_{name}",
        [helper.make_tensor_value_info(n, F, s) for n, s in inputs],
        [helper.make_tensor_value_info(n, F, s) for n, s in outputs],
        [numpy_helper.from_array(v, k) for k, v in (weights or {}).items()],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])


def _probe(op: str, ins: tuple[tuple[int, ...], ...], out: tuple[int, ...], **kw: Any) -> Probe:
    """A single-node probe: ``op(x0, x1, ...) -> y``."""
    positive = bool(kw.pop("positive", False))
    names = [f"x{i}" for i in range(len(ins))]
    node = helper.make_node(op, names, ["y"], name=f"probe_{op}", **kw)
    return Probe(op, _model(op, [node], list(zip(names, ins)), [("y", out)]), ins, positive)


def _weights(seed: int, **shapes: tuple[int, ...]) -> dict[str, np.ndarray]:
    """Seeded weights, scaled by 1/sqrt(fan-in) so activations stay near 1."""
    rng = np.random.default_rng(seed)
    out = {}
    for name, shape in shapes.items():
        fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else 1
        out[name] = (rng.standard_normal(shape) / np.sqrt(fan_in)).astype(np.float32)
    return out


def _scalar(value: float) -> np.ndarray:
    return np.array(value, np.float32)


def _elementwise_chain(big: bool = False) -> Probe:
    """``y0 = Relu(x0 * x1 + x0)``, ``y1 = Sigmoid(-(x0 * x1 + x0 - x1))``: two outputs.

    The intermediates are named so that their names sort against the order
    the nodes make them (``sum`` before ``diff``): a group of the Mul, Add and
    Sub alone has both as outputs, and one that returns them by name is caught.
    """
    n = helper.make_node
    nodes = [
        n("Mul", ["x0", "x1"], ["m"], name="chain_mul"),
        n("Add", ["m", "x0"], ["sum"], name="chain_add"),
        n("Relu", ["sum"], ["y0"], name="chain_relu"),
        n("Sub", ["sum", "x1"], ["diff"], name="chain_sub"),
        n("Neg", ["diff"], ["g"], name="chain_neg"),
        n("Sigmoid", ["g"], ["y1"], name="chain_sigmoid"),
    ]
    m = BIG if big else M
    model = _model("elementwise_chain", nodes, [("x0", m), ("x1", m)], [("y0", m), ("y1", m)])
    return Probe("elementwise_chain", model, (m, m))


def _four_outputs(big: bool = False) -> Probe:
    """Four outputs declared in an order that is none of the natural ones.

    ``w = x0 * x1`` is read by three nodes and is itself an output. The nodes
    make ``w, v, u, s`` (a fused group returns its outputs in that order); the
    names sort the other way round, for any two of them; the graph declares
    ``v, w, s, u``. A group that returns its outputs by name, in the graph's
    order or reversed is caught (also when it fuses only some of the nodes),
    and so is a kernel that writes into ``w``.
    """
    n = helper.make_node
    nodes = [
        n("Mul", ["x0", "x1"], ["w"], name="four_mul"),
        n("Relu", ["w"], ["v"], name="four_relu"),
        n("Add", ["w", "x0"], ["u"], name="four_add"),
        n("Sub", ["w", "x1"], ["s"], name="four_sub"),
    ]
    m = BIG if big else M
    outs = [(name, m) for name in ("v", "w", "s", "u")]
    model = _model("four_outputs", nodes, [("x0", m), ("x1", m)], outs)
    return Probe("four_outputs", model, (m, m))


def _conv_relu_pool(big: bool = False) -> Probe:
    """``MaxPool(Relu(Conv(x0, W, B)))``, 3x3 kernel, padding 1, 2x2 pooling."""
    n = helper.make_node
    w = _weights(1, W=(8, 3, 3, 3), B=(8,))
    nodes = [
        n("Conv", ["x0", "W", "B"], ["c"], name="crp_conv", pads=[1, 1, 1, 1]),
        n("Relu", ["c"], ["r"], name="crp_relu"),
        n("MaxPool", ["r"], ["y"], name="crp_pool", kernel_shape=[2, 2], strides=[2, 2]),
    ]
    side = 64 if big else 16
    x = (1, 3, side, side)
    y = (1, 8, side // 2, side // 2)
    model = _model("conv_relu_pool", nodes, [("x0", x)], [("y", y)], w)
    return Probe("conv_relu_pool", model, (x,))


def _matmul_add_gelu(big: bool = False) -> Probe:
    """``Gelu(x0 @ W + B)``, Gelu written out as exporters do before opset 20:
    ``0.5 * h * (1 + Erf(h / sqrt(2)))``."""
    n = helper.make_node
    w = _weights(2, W=(32, 64), B=(64,))
    w.update(sqrt2=_scalar(float(np.sqrt(2.0))), one=_scalar(1.0), half=_scalar(0.5))
    nodes = [
        n("MatMul", ["x0", "W"], ["mm"], name="gelu_matmul"),
        n("Add", ["mm", "B"], ["h"], name="gelu_bias"),
        n("Div", ["h", "sqrt2"], ["d"], name="gelu_div"),
        n("Erf", ["d"], ["e"], name="gelu_erf"),
        n("Add", ["e", "one"], ["e1"], name="gelu_add1"),
        n("Mul", ["h", "e1"], ["p"], name="gelu_mul"),
        n("Mul", ["p", "half"], ["y"], name="gelu_half"),
    ]
    rows = 1024 if big else 16
    model = _model("matmul_add_gelu", nodes, [("x0", (rows, 32))], [("y", (rows, 64))], w)
    return Probe("matmul_add_gelu", model, ((rows, 32),))


def _attention(big: bool = False) -> Probe:
    """``Softmax(q @ kᵀ * scale) @ v`` over 2 heads of 8 tokens of width 16."""
    n = helper.make_node
    qkv = (4, 64, 16) if big else (2, 8, 16)
    w = {"scale": _scalar(1.0 / np.sqrt(qkv[-1]))}
    nodes = [
        n("Transpose", ["x1"], ["kt"], name="attn_transpose", perm=[0, 2, 1]),
        n("MatMul", ["x0", "kt"], ["scores"], name="attn_qk"),
        n("Mul", ["scores", "scale"], ["scaled"], name="attn_scale"),
        n("Softmax", ["scaled"], ["probs"], name="attn_softmax", axis=-1),
        n("MatMul", ["probs", "x2"], ["y"], name="attn_pv"),
    ]
    model = _model("attention", nodes, [("x0", qkv), ("x1", qkv), ("x2", qkv)], [("y", qkv)], w)
    return Probe("attention", model, (qkv, qkv, qkv))


M = (32, 64)
BIG = (256, 512)
"""Elementwise probe shapes: everyday, and for the checks that need long runs
(threads: long enough for numpy to release the GIL and runs to overlap)."""


def _single(big: bool) -> list[Probe]:
    m = BIG if big else M
    k = 256 if big else 64
    side = 64 if big else 16
    img = (1, 3, side, side)
    return [
        _probe("Add", (m, m), m),
        _probe("Mul", (m, m), m),
        _probe("Sub", (m, m), m),
        _probe("Div", (m, m), m, positive=True),
        _probe("Relu", (m,), m),
        _probe("Neg", (m,), m),
        _probe("Abs", (m,), m),
        _probe("Sigmoid", (m,), m),
        _probe("Tanh", (m,), m),
        _probe("Exp", (m,), m),
        _probe("Sqrt", (m,), m, positive=True),
        _probe("MatMul", ((k // 2, k), (k, k // 2)), (k // 2, k // 2)),
        _probe("Gemm", ((k // 2, k), (k, k // 2)), (k // 2, k // 2)),
        _probe("Softmax", (m,), m, axis=-1),
        _probe("Transpose", (m,), (m[1], m[0]), perm=[1, 0]),
        _probe("Conv", (img, (4, 3, 3, 3)), (1, 4, side - 2, side - 2)),
        _probe(
            "MaxPool", (img,), (1, 3, side // 2, side // 2), kernel_shape=[2, 2], strides=[2, 2]
        ),
    ]


def _build(big: bool) -> list[Probe]:
    multi = (_elementwise_chain, _four_outputs, _conv_relu_pool, _matmul_add_gelu, _attention)
    return [*_single(big), *(b(big) for b in multi)]


_cache: dict[bool, list[Probe]] = {}


def probes(big: bool = False) -> list[Probe]:
    """Every probe, built once: the single-node ones, then the multi-node ones.

    ``big``: the same probes (same ops, attributes and weights) on larger
    inputs, for the checks that need runs to take a while.
    """
    if big not in _cache:
        _cache[big] = _build(big)
    return _cache[big]


def _derived(probe: Probe, suffix: str, graph: onnx.GraphProto) -> onnx.ModelProto:
    model = helper.make_model(graph, opset_imports=list(probe.model.opset_import))
    model.graph.name = f"{probe.model.graph.name}_{suffix}"
    return model


def with_constants(probe: Probe, seed: int) -> Probe | None:
    """The probe with its weights drawn again from ``seed``: every input but
    the first becomes an initializer, and every initializer of more than one
    element gets new values of the same shape. Scalars (``sqrt2``, ``half``,
    an attention ``scale``) keep theirs, so the pattern stays recognizable.
    ``None`` when the probe has nothing to redraw (one input, no weights).
    """
    g = probe.model.graph
    rng = np.random.default_rng(seed)
    inits = []
    for t in g.initializer:
        value = numpy_helper.to_array(t)
        if value.size > 1:
            value = (rng.standard_normal(value.shape) / np.sqrt(value.shape[-1])).astype(
                value.dtype
            )
        inits.append(numpy_helper.from_array(value, t.name))
    frozen = list(zip(g.input, probe.shapes))[1:]
    if not frozen and not any(numpy_helper.to_array(t).size > 1 for t in g.initializer):
        return None
    for vi, shape in frozen:
        low, high = (0.5, 2.5) if probe.positive else (-2.0, 2.0)
        value = rng.uniform(low, high, size=shape).astype(np.float32)
        inits.append(numpy_helper.from_array(value, vi.name))
    graph = helper.make_graph(list(g.node), g.name, [g.input[0]], list(g.output), inits)
    model = _derived(probe, f"constants{seed}", graph)
    return Probe(probe.name, model, probe.shapes[:1], probe.positive)


def with_shared_inputs(probe: Probe) -> Probe:
    """A single-node probe's op run twice on intermediates that are also outputs.

    Each input ``x_i`` goes through ``h_i = x_i * 1`` (an intermediate made by
    another node); two copies of the probe's node read the ``h_i``; the graph
    outputs are both results and every ``h_i``. A kernel that writes into an
    input it did not get from the user corrupts an output or the second result.
    """
    g = probe.model.graph
    node = g.node[0]
    n = helper.make_node
    names = [vi.name for vi in g.input]
    nodes = [n("Mul", [x, "one"], [f"h{i}"], name=f"shared_pre{i}") for i, x in enumerate(names)]
    hs = [f"h{i}" for i in range(len(names))]
    for k in range(2):
        twin = helper.make_node(node.op_type, hs, [f"y{k}"], name=f"shared_{node.op_type}{k}")
        twin.attribute.extend(node.attribute)
        nodes.append(twin)
    out_type = g.output[0].type
    outs = [helper.make_value_info(f"y{k}", out_type) for k in range(2)]
    outs += [helper.make_tensor_value_info(h, F, shape) for h, shape in zip(hs, probe.shapes)]
    graph = helper.make_graph(
        nodes, g.name, list(g.input), outs, [numpy_helper.from_array(_scalar(1.0), "one")]
    )
    return Probe(probe.name, _derived(probe, "shared", graph), probe.shapes, probe.positive)
