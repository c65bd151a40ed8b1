"""The table assembled: every family's entries in :data:`RULES`, indexed by op
(loaded by :mod:`ortcore.param_table` when first asked for a rule)."""

from __future__ import annotations

from . import axes, contrib, convolution, ml, normalization, quantization, sequences
from ._entry import FUSED as FUSED
from ._entry import ML as ML
from ._entry import MS as MS
from ._entry import Example, OpRules

__all__ = ["RULES", "Example", "OpRules", "rules_for"]

RULES: tuple[OpRules, ...] = (
    *normalization.RULES,
    *convolution.RULES,
    *quantization.RULES,
    *sequences.RULES,
    *axes.RULES,
    *contrib.RULES,
    *ml.RULES,
)
"""Every rule, by op and opset range."""

_INDEX: dict[tuple[str, str], tuple[OpRules, ...]] = {}
for _entry in RULES:
    _INDEX[(_entry.domain, _entry.op)] = (*_INDEX.get((_entry.domain, _entry.op), ()), _entry)


def rules_for(domain: str, op_type: str, opset: int) -> OpRules | None:
    """The entry for ``op_type`` of ``domain`` at ``opset`` (``"ai.onnx"`` is ``""``)."""
    entries = _INDEX.get(("" if domain == "ai.onnx" else domain, op_type))
    if entries is None:
        return None
    for entry in entries:
        if entry.covers(opset):
            return entry
    return None
