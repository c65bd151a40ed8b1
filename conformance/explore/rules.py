"""Candidates dropped before they become cases, each for a stated reason.

Shape inference accepts some models the standard forbids (a ``sequence_lens``
that no longer matches the batch once the shape changes), and the oracle has
a few known gaps. A dropped candidate is counted by reason
(:data:`DROPPED`), never run. The rules read the schema where they can
(what its documentation says broadcasts, which inputs are images); the
table :data:`UNJUDGED` names the rest, each with its reason.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from .seeds import schema
from .spec import Spec

__all__ = ["DROPPED", "UNJUDGED", "dropped"]

DROPPED: Counter[str] = Counter()
"""Candidates dropped, by reason."""


@dataclass(frozen=True)
class Unjudged:
    """Cases whose name matches ``pattern`` are not generated, for ``reason``."""

    pattern: str
    reason: str


UNJUDGED: tuple[Unjudged, ...] = (
    Unjudged(r"^(RNN|GRU|LSTM)/.*clip=", "onnx.reference ignores the clip attribute"),
    Unjudged(
        r"^TreeEnsemble/.*aggregate_function=[23]",
        "min or max over a target no leaf feeds is unspecified (onnxruntime 0, the reference "
        "FLT_MAX)",
    ),
    Unjudged(
        r"^ReverseSequence/(rank|empty|attribute|pair|axis)/",
        "sequence_lens must have one value per batch and none past the time axis; shape "
        "inference does not check it, so a changed shape or axis makes an invalid model",
    ),
    Unjudged(r"^NonMaxSuppression/(rank|empty)/", "boxes must be [B, N, 4] and scores [B, C, N]"),
    Unjudged(r"^(RNN|GRU|LSTM)/empty/", "a sequence or batch of length 0 (onnxruntime refuses it)"),
    Unjudged(r"^LSTM/.*input_forget=", "onnx.reference ignores input_forget"),
    Unjudged(
        r"^TreeEnsemble/.*post_transform=[1-9]",
        "onnx.reference's post_transform differs from onnxruntime's (which the CPU provider "
        "matches)",
    ),
    Unjudged(
        r"^(MaxPool|AveragePool|LpPool)/(attribute|pair)/.*(pads|auto_pad|ceil_mode|strides|"
        r"dilations)=",
        "onnx.reference's pooling windows with ceil_mode, auto_pad or changed pads differ from "
        "onnxruntime's (which the CPU provider matches); pads as large as the kernel are invalid",
    ),
    Unjudged(
        r"^ReduceMean/empty/",
        "the schema says a reduction over an empty set yields undefined for ReduceMean "
        "(numpy and the reference give NaN, onnxruntime 0)",
    ),
    Unjudged(r"^TopK/.*sorted=0", "with sorted=0 the order of the outputs is unspecified"),
    Unjudged(
        r"^NonZero/rank/r0", "NonZero of a scalar: (0, n) or (1, n) (onnxruntime and onnx differ)"
    ),
    Unjudged(r"^ReduceL2/dtype/T=u?int", "the integer square root's rounding is unspecified"),
    Unjudged(
        r"^(Softmax|LogSoftmax|Hardmax)/(rank|empty)/r[01]@v",
        "opsets 1-12: the default axis 1 needs rank 2",
    ),
    Unjudged(
        r"^(QuantizeLinear|DequantizeLinear|Compress|DeformConv)/empty/",
        "a control input (a blocked scale, a condition, a bias) tied to the emptied dimension",
    ),
    Unjudged(
        r"^BatchNormalization/.*spatial=0",
        "spatial=0 needs parameters shaped like one sample; the seed's are per channel",
    ),
    Unjudged(r"^ConvTranspose/.*auto_pad=.*output_shape=", "auto_pad with output_shape"),
    Unjudged(
        r"^TfIdfVectorizer/empty/",
        "a batch of 0 rows: onnxruntime refuses it (and the CPU provider, which matches it)",
    ),
    Unjudged(
        r"^GridSample/dtype/T1=(u?int|bool)",
        "onnx.reference interpolates integer and bool data with weights of the data's type, "
        "truncated to 0 (linear: [0, 10] at the midpoint gives 0); the standard does not say "
        "how integers are interpolated or rounded",
    ),
    Unjudged(
        r"^(GridSample|DeformConv)/.*=double",
        "onnx.reference computes them with float32 intermediates: not float64-accurate",
    ),
)
"""Candidates the suite cannot judge, by name."""


def _image_inputs(spec: Spec) -> set[int]:
    """Positions of inputs the schema documents as ``N x C x ...`` images."""
    sch = schema(spec.op, spec.domain, spec.opset)
    formal = list(sch.inputs)
    return {
        i
        for i in range(len(spec.inputs))
        if i < len(formal)
        and ("N x C" in formal[i].description or "(N, C" in formal[i].description)
    }


def _axis_out_of_range(spec: Spec) -> bool:
    ranks = [len(f.shape) for f in spec.inputs if f is not None and f.data]
    if not ranks:
        return False
    r = ranks[0]
    attr = schema(spec.op, spec.domain, spec.opset).attributes.get("axis")
    default = None
    if attr is not None and attr.default_value is not None and attr.default_value.type:
        default = attr.default_value.i
    for attrs in spec.attrs:
        a = attrs.get("axis", default)
        if (isinstance(a, int) and not -r <= a < max(r, 1)) or (a is not None and r == 0):
            return True
    return False


def reason(spec: Spec, seed_shapes: dict[int, tuple[int, ...]] | None = None) -> str | None:
    """Why ``spec`` is not generated (``None``: it is)."""
    for rule in UNJUDGED:
        if re.search(rule.pattern, spec.name):
            return rule.reason
    if spec.detail.startswith("bcast_"):
        if "broadcast" not in schema(spec.op, spec.domain, spec.opset).doc.lower():
            return "broadcasting where the schema documents none"
    for i in _image_inputs(spec):
        f = spec.inputs[i]
        if f is not None and len(f.shape) < 3:
            return "an N x C x ... image input below rank 3"
        if f is not None and 0 in f.shape[2:]:
            return "an N x C x ... image input with no pixels (onnxruntime refuses it)"
    if _axis_out_of_range(spec):
        return "an axis attribute outside the data input's rank"
    if seed_shapes:
        # a control input shaped like a data input (MaxUnpool's indices) must follow it
        for f in spec.inputs:
            if f is None or f.data or f.value is None:
                continue
            for j, shape in seed_shapes.items():
                g = spec.inputs[j] if j < len(spec.inputs) else None
                if g is not None and g.data and tuple(f.value.shape) == shape != g.shape:
                    return "a control input shaped like a data input whose shape changed"
    return None


def dropped(spec: Spec, seed_shapes: dict[int, tuple[int, ...]] | None = None) -> bool:
    """Whether ``spec`` is dropped (counted in :data:`DROPPED`)."""
    why = reason(spec, seed_shapes)
    if why is not None:
        DROPPED[why] += 1
        return True
    return False
