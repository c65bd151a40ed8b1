"""Conformance cases for the quantized ops of onnxruntime's contrib domain
``com.microsoft`` (QLinear* ops, QGemm, MatMulIntegerToFloat,
DynamicQuantizeMatMul, QAttention, MatMulNBits, the domain's
Quantize/DequantizeLinear). onnx has no schemas for them, so the schema-driven
exploration cannot build their cases; here a table (:mod:`.ops`,
:mod:`.matmul`) builds them per dimension, each with an oracle: the op's
decomposition into standard ONNX ops run by onnx's reference evaluator
(:mod:`.spec`). A provider without these ops gets them ``unsupported``.
"""

from __future__ import annotations

from collections.abc import Iterator

from ..cases import Case
from .ops import specs
from .spec import QSpec, build

__all__ = ["QSpec", "build", "cases", "specs"]


def cases(depth: str) -> Iterator[Case]:
    """Every quantized contrib case (the same at every depth: they are few),
    kind ``explore``, named ``<Op>/<dimension>/<detail>``."""
    for spec in specs():
        yield Case(
            spec.name,
            "explore",
            lambda s=spec: build(s),  # type: ignore[misc]
            spec.tolerance if not spec.quantized else None,
            dimension=spec.dimension,
        )
