"""Small single-node float32 models the contract checks run.

A provider is probed with each; the checks use those it claims. The expected
outputs come from onnx's reference evaluator.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper

__all__ = ["OPSET", "Probe", "probes"]

OPSET = 18
F = TensorProto.FLOAT


@dataclass(frozen=True)
class Probe:
    """One probe model and how to make its inputs."""

    op: str
    model: onnx.ModelProto
    shapes: tuple[tuple[int, ...], ...]
    positive: bool = False

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
        """Expected outputs (onnx's reference evaluator)."""
        from onnx.reference import ReferenceEvaluator

        return list(ReferenceEvaluator(self.model).run(None, feeds))

    @property
    def bytes(self) -> bytes:
        """The serialized model."""
        return self.model.SerializeToString()


def _model(
    op: str,
    in_shapes: tuple[tuple[int, ...], ...],
    out_shape: tuple[int, ...],
    **attrs: Any,
) -> onnx.ModelProto:
    names = [f"x{i}" for i in range(len(in_shapes))]
    node = helper.make_node(op, names, ["y"], name=f"probe_{op}", **attrs)
    graph = helper.make_graph(
        [node],
        f"probe_{op}",
        [helper.make_tensor_value_info(n, F, s) for n, s in zip(names, in_shapes)],
        [helper.make_tensor_value_info("y", F, out_shape)],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])


def _probe(op: str, ins: tuple[tuple[int, ...], ...], out: tuple[int, ...], **kw: Any) -> Probe:
    positive = bool(kw.pop("positive", False))
    return Probe(op, _model(op, ins, out, **kw), ins, positive)


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
]

_cache: list[Probe] | None = None


def probes() -> list[Probe]:
    """Every probe, built once."""
    global _cache
    if _cache is None:
        _cache = [b() for b in _BUILDERS]
    return _cache
