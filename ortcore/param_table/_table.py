"""Which parameter of which op must fit which dimension: one table, read off
the operators' schemas (``onnx.defs``; onnxruntime's contrib schemas for
``com.microsoft``; :mod:`ep_sdk.fused_ops` for ``com.ortcore``).

Every entry names an op, the opsets it covers, its inputs in schema order,
and its :class:`~ortcore.param_rules.Check` list (in the language of
:mod:`ortcore.param_rules`). :mod:`ortcore.param_checks` applies them to
every node, at load and, where shapes are symbolic, at run time.

The rules refuse what onnxruntime refuses (a BatchNormalization ``scale``
of 2 values for 4 channels; a per-axis scale of the wrong length) and allow
what onnx allows (a LayerNormalization ``Scale`` that broadcasts to ``X``,
a scalar or one-value zero point, a Gemm ``C`` that broadcasts to (M, N)).
Where onnx's text allows a form onnxruntime's CPU kernels do not implement
(a per-row zero point of MatMulInteger's ``A``, a per-channel zero point of
ConvInteger's ``w``), the rule follows onnx.

Each entry carries an ``example`` (and ``variants``): valid instances
(input shapes or values, attributes), which the tests turn into models that
must run, and into models that break each check and must be refused.

The entries are kept by op family, one module each (normalization,
convolution, quantization, sequences, axes, contrib, ml); this module
assembles them into :data:`RULES` and indexes them by op.
"""

from __future__ import annotations

from . import axes, contrib, convolution, ml, normalization, quantization, sequences
from ._entry import FUSED as FUSED
from ._entry import ML as ML
from ._entry import MS as MS
from ._entry import Example, OpRules

__all__ = ["RULED_OPS", "RULES", "Example", "OpRules", "rules_for"]

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


RULED_OPS = frozenset(op for _, op in _INDEX)
"""The op types some entry covers (in any domain): a quick way past every other node."""


def rules_for(domain: str, op_type: str, opset: int) -> OpRules | None:
    """The entry for ``op_type`` of ``domain`` at ``opset`` (``"ai.onnx"`` is ``""``)."""
    entries = _INDEX.get(("" if domain == "ai.onnx" else domain, op_type))
    if entries is None:
        return None
    for entry in entries:
        if entry.covers(opset):
            return entry
    return None
