"""Small float32 models the contract checks run.

A provider is probed with each; the checks use those it claims. Two families:

* single-node probes, one per op (``Add``, ``Conv``, ...), for providers that
  claim nodes one by one with their kernels;
* multi-node probes (``elementwise_chain``, ``conv_relu_pool``,
  ``matmul_add_gelu``, ``attention``), the patterns compile-path providers
  fuse into groups; ``elementwise_chain`` has two outputs, so a fused group
  that returns its outputs in the wrong order is caught.

The expected outputs come from the suite's oracle (onnx's reference evaluator,
:mod:`conformance.oracle`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

__all__ = ["OPSET", "Probe", "probes"]

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


def _elementwise_chain() -> Probe:
    """``y0 = Relu(x0 * x1 + x0)``, ``y1 = Sigmoid(-(x0 * x1 + x0 - x1))``: two outputs."""
    n = helper.make_node
    nodes = [
        n("Mul", ["x0", "x1"], ["m"], name="chain_mul"),
        n("Add", ["m", "x0"], ["a"], name="chain_add"),
        n("Relu", ["a"], ["y0"], name="chain_relu"),
        n("Sub", ["a", "x1"], ["s"], name="chain_sub"),
        n("Neg", ["s"], ["g"], name="chain_neg"),
        n("Sigmoid", ["g"], ["y1"], name="chain_sigmoid"),
    ]
    m = (32, 64)
    model = _model("elementwise_chain", nodes, [("x0", m), ("x1", m)], [("y0", m), ("y1", m)])
    return Probe("elementwise_chain", model, (m, m))


def _conv_relu_pool() -> Probe:
    """``MaxPool(Relu(Conv(x0, W, B)))``, 3x3 kernel, padding 1, 2x2 pooling."""
    n = helper.make_node
    w = _weights(1, W=(8, 3, 3, 3), B=(8,))
    nodes = [
        n("Conv", ["x0", "W", "B"], ["c"], name="crp_conv", pads=[1, 1, 1, 1]),
        n("Relu", ["c"], ["r"], name="crp_relu"),
        n("MaxPool", ["r"], ["y"], name="crp_pool", kernel_shape=[2, 2], strides=[2, 2]),
    ]
    x = (1, 3, 16, 16)
    model = _model("conv_relu_pool", nodes, [("x0", x)], [("y", (1, 8, 8, 8))], w)
    return Probe("conv_relu_pool", model, (x,))


def _matmul_add_gelu() -> Probe:
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
    model = _model("matmul_add_gelu", nodes, [("x0", (16, 32))], [("y", (16, 64))], w)
    return Probe("matmul_add_gelu", model, ((16, 32),))


def _attention() -> Probe:
    """``Softmax(q @ kᵀ * scale) @ v`` over 2 heads of 8 tokens of width 16."""
    n = helper.make_node
    qkv = (2, 8, 16)
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
_BUILDERS: list[Callable[[], Probe]] = [
    lambda: _probe("Add", (M, M), M),
    lambda: _probe("Mul", (M, M), M),
    lambda: _probe("Sub", (M, M), M),
    lambda: _probe("Div", (M, M), M, positive=True),
    lambda: _probe("Relu", (M,), M),
    lambda: _probe("Neg", (M,), M),
    lambda: _probe("Abs", (M,), M),
    lambda: _probe("Sigmoid", (M,), M),
    lambda: _probe("Tanh", (M,), M),
    lambda: _probe("Exp", (M,), M),
    lambda: _probe("Sqrt", (M,), M, positive=True),
    lambda: _probe("MatMul", ((32, 64), (64, 32)), (32, 32)),
    lambda: _probe("Gemm", ((32, 64), (64, 32)), (32, 32)),
    lambda: _probe("Softmax", (M,), M, axis=-1),
    lambda: _probe("Transpose", (M,), (64, 32), perm=[1, 0]),
    lambda: _probe("Conv", ((1, 3, 16, 16), (4, 3, 3, 3)), (1, 4, 14, 14)),
    lambda: _probe("MaxPool", ((1, 3, 16, 16),), (1, 3, 8, 8), kernel_shape=[2, 2], strides=[2, 2]),
    _elementwise_chain,
    _conv_relu_pool,
    _matmul_add_gelu,
    _attention,
]

_cache: list[Probe] | None = None


def probes() -> list[Probe]:
    """Every probe, built once: the single-node ones, then the multi-node ones."""
    global _cache
    if _cache is None:
        _cache = [b() for b in _BUILDERS]
    return _cache
