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
convolution, quantization, sequences, axes, contrib, ml); ``_table``
assembles them into :data:`RULES` and indexes them by op. Importing this
package loads only :data:`RULED_OPS`: the table and the rule language load
when a rule is first asked for (a session whose model has no ruled op never
loads them).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._entry import FUSED, ML, MS, Example, OpRules
    from ._table import RULES, rules_for

__all__ = ["FUSED", "ML", "MS", "RULED_OPS", "RULES", "Example", "OpRules", "rules_for"]

RULED_OPS = frozenset(
    {
        "AffineGrid", "AveragePool", "BatchNormalization", "BiasGelu", "CenterCropPad",
        "Clip", "Col2Im", "Conv", "ConvInteger", "ConvTranspose", "CumSum", "DFT",
        "DeformConv", "DequantizeLinear", "FastGelu", "FusedBatchNorm", "FusedConv",
        "FusedConvAdd", "FusedConvConcat", "FusedConvPool", "FusedConvShuffle", "FusedGemm",
        "FusedLayerNorm", "FusedRMSNorm", "GRU", "Gemm", "GridSample", "GroupNormalization",
        "Imputer", "InstanceNormalization", "LSTM", "LayerNormalization", "LinearRegressor",
        "LpPool", "MatMulInteger", "MaxPool", "MaxRoiPool", "MaxUnpool", "NonMaxSuppression",
        "OneHot", "PRelu", "Pad", "QLinearConv", "QLinearMatMul", "QuantizeLinear",
        "RMSNormalization", "RNN", "Range", "Resize", "ReverseSequence", "RoiAlign", "STFT",
        "Scaler", "SkipLayerNormalization", "Slice", "Split", "Tile", "TopK", "Trilu",
        "Upsample",
    }
)  # fmt: skip
"""The op types some entry covers (in any domain): a quick way past every other
node, without loading the table. tests/test_param_checks.py checks it against
:data:`RULES` (an entry added to a family must add its op here)."""

_LAZY = {
    "RULES": "_table",
    "rules_for": "_table",
    "Example": "_entry",
    "OpRules": "_entry",
    "FUSED": "_entry",
    "ML": "_entry",
    "MS": "_entry",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
