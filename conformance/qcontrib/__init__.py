"""Conformance cases for the quantized ops of onnxruntime's contrib domain
``com.microsoft`` (QLinear* ops, QGemm, MatMulIntegerToFloat,
DynamicQuantizeMatMul, QAttention, MatMulNBits, the domain's
Quantize/DequantizeLinear). onnx has no schemas for them, so the schema-driven
exploration cannot build their cases; here a table (:mod:`.ops`,
:mod:`.matmul`) builds them per dimension, each with an oracle: the op's
decomposition into standard ONNX ops run by onnx's reference evaluator
(:mod:`.spec`). These ops are optional: a provider that does not claim one
gets its cases ``skipped``, not graded (:func:`conformance.execute.run_case`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ..case import Case
from .matmul import specs_matmul
from .ops import specs_elementwise
from .spec import QSpec, build, case_seed

__all__ = ["QSpec", "build", "cases", "specs"]


class _Loader:
    """A case's loader: builds the model and data sets of its :class:`QSpec`
    (kept as ``qspec``, which tells these cases from the schema-driven ones)."""

    def __init__(self, qspec: QSpec) -> None:
        self.qspec = qspec

    def __call__(self) -> tuple[Any, list[Any]]:
        return build(self.qspec)


def specs() -> Iterator[QSpec]:
    """Every quantized contrib op case."""
    yield from specs_elementwise()
    yield from specs_matmul()


def cases(depth: str) -> Iterator[Case]:
    """Every quantized contrib case (the same at every depth: they are few),
    kind ``explore``, named ``<Op>/<dimension>/<detail>``."""
    for spec in specs():
        yield Case(
            spec.name,
            "explore",
            _Loader(spec),
            spec.tolerance if not spec.quantized else None,
            dimension=spec.dimension,
            seed=case_seed(spec.name),
        )
