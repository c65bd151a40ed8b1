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
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

from .seeds import schema
from .spec import Spec

__all__ = ["DROPPED", "UNJUDGED", "broadcast_positions", "broadcasting", "dropped"]

DROPPED: Counter[str] = Counter()
"""Candidates dropped, by reason."""


@dataclass(frozen=True)
class Unjudged:
    """Cases whose name matches ``pattern`` (and, where ``when`` is given, with a
    node whose attributes it holds for) are not generated, for ``reason``."""

    pattern: str
    reason: str
    when: Callable[[dict[str, Any]], bool] | None = None
    typed: Callable[[Spec], bool] | None = None

    def matches(self, spec: Spec) -> bool:
        """Whether ``spec`` is one of these cases (``typed``: a condition on the
        whole spec, such as its input types)."""
        if not re.search(self.pattern, spec.name):
            return False
        if self.typed is not None and not self.typed(spec):
            return False
        return self.when is None or any(self.when(_plain(node)) for node in spec.attrs)


def _plain(attrs: dict[str, Any]) -> dict[str, Any]:
    return {k: v.decode() if isinstance(v, bytes) else v for k, v in attrs.items()}


def _float_data(spec: Spec) -> bool:
    floats = {1, 10, 11, 16}  # float, float16, double, bfloat16
    return any(f is not None and f.data and f.elem in floats for f in spec.inputs)


def _integer_data(spec: Spec) -> bool:
    return any(
        f is not None and f.data and f.elem in {2, 3, 4, 5, 6, 7, 12, 13} for f in spec.inputs
    )


def _fmod_required(spec: Spec) -> bool:
    """The schema says floats need ``fmod=1`` (Mod before opset 28)."""
    doc = " ".join(schema(spec.op, spec.domain, spec.opset).doc.split())
    says = "`fmod` attribute must be set to 1" in doc or "constrained to integer" in doc
    return says and _float_data(spec)


UNJUDGED: tuple[Unjudged, ...] = (
    Unjudged(
        r"^Gemm/",
        "integer Gemm with a fractional alpha or beta: how a float factor applies to "
        "integers is not specified (onnxruntime has no integer Gemm; the reference "
        "computes in float, a kernel may cast the factor)",
        when=lambda a: any(
            float(a.get(k, 1.0)) != round(float(a.get(k, 1.0))) for k in ("alpha", "beta")
        ),
        typed=lambda spec: not _float_data(spec),
    ),
    Unjudged(r"^(RNN|GRU|LSTM)/.*clip=", "onnx.reference ignores the clip attribute"),
    Unjudged(
        r"^TreeEnsemble/.*aggregate_function=[23]",
        "min or max over a target no leaf feeds is unspecified (onnxruntime 0, the reference "
        "FLT_MAX)",
    ),
    Unjudged(
        r"^ReverseSequence/(rank|empty|attribute|pair|axis|size|inputs)/",
        "sequence_lens must have one value per batch and none past the time axis; shape "
        "inference does not check it, so a changed shape or axis makes an invalid model",
    ),
    Unjudged(
        r"^NonMaxSuppression/(rank|empty|size)/", "boxes must be [B, N, 4] and scores [B, C, N]"
    ),
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
        r"^(QuantizeLinear|DequantizeLinear|Compress|DeformConv)/(empty|size)/",
        "a control input (a blocked scale, a condition, a bias) tied to the emptied or resized "
        "dimension",
    ),
    Unjudged(
        r"^BatchNormalization/.*spatial=0",
        "spatial=0 needs parameters shaped like one sample; the seed's are per channel",
    ),
    Unjudged(
        r"^ConvTranspose/",
        "auto_pad with output_shape",
        lambda a: "output_shape" in a and a.get("auto_pad", "NOTSET") != "NOTSET",
    ),
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
    Unjudged(
        r"^StringNormalizer/",
        "onnx.reference matches stopwords case-sensitively when case_change_action is NONE, "
        "whatever is_case_sensitive=0 says",
        lambda a: (
            a.get("case_change_action", "NONE") == "NONE" and not a.get("is_case_sensitive", 0)
        ),
    ),
    Unjudged(
        r"^Gemm/(opset/v6|.*@v6$)",
        "onnx.reference's Gemm-6 adds C without beta when broadcast=0",
        lambda a: not a.get("broadcast", 0) and a.get("beta", 1.0) != 1.0,
    ),
    Unjudged(
        r"^(RNN|GRU|LSTM)/(size/|.*layout=)",
        "sequence_lens and the initial states are the seed's, tied to its batch (shape "
        "inference does not check): another size or layout makes the model invalid, and "
        "onnx.reference ignores sequence_lens",
    ),
    Unjudged(r"^LpNormalization/.*p=(?!(1|2)(\D|$))", "the schema supports p = 1 or 2 only"),
    Unjudged(
        r"^(QuantizeLinear|DequantizeLinear)/.*block_size=",
        "block_size needs a scale blocked along the axis; the seed's is per tensor or per axis "
        "(shape inference does not check)",
    ),
    Unjudged(r"^Trilu/dtype/T=string", "onnx.reference fills a string tensor with the integer 0"),
    Unjudged(
        r"^Mod/",
        "the schema version says floating-point inputs need fmod=1",
        lambda a: not a.get("fmod", 0),
        _fmod_required,
    ),
    Unjudged(
        r"^Resize/",
        "how an interpolated integer is rounded is unspecified (onnxruntime rounds, "
        "onnx.reference truncates)",
        lambda a: a.get("mode", "nearest") != "nearest",
        _integer_data,
    ),
    Unjudged(
        r"^ScatterND/(rank|size|empty)/",
        "updates must be shaped indices.shape[:-1] + data.shape[indices.shape[-1]:]; the "
        "indices are the seed's and shape inference does not check it",
    ),
    Unjudged(
        r"^AveragePool/(opset/v1(_|$)|.*@v1$)",
        "onnx.reference's AveragePool-1 counts the padding in the average; the schema excludes it",
    ),
)
"""Candidates the suite cannot judge, by name."""


_UNIDIRECTIONAL = re.compile(
    r"\((?:tensors?\s+)?([^()]+?)\s+should be unidirectional broadcastable", re.IGNORECASE
)


@cache
def broadcasting(op: str, domain: str, opset: int) -> tuple[str, frozenset[str]]:
    """How the schema says ``op`` broadcasts: (``multi``, every input) for
    multidirectional (numpy-style) broadcasting; (``uni``, the formal inputs
    that broadcast to another) for unidirectional broadcasting, read from the
    doc (``tensor C should be unidirectional broadcastable to ...``) and the
    inputs' descriptions; (``""``, none) otherwise."""
    sch = schema(op, domain, opset)
    doc = " ".join(sch.doc.split())
    names = frozenset(f.name for f in sch.inputs)
    low = doc.lower()
    if "multidirectional" in low or "numpy-style broadcasting" in low:
        return "multi", names
    told = {w for m in _UNIDIRECTIONAL.finditer(doc) for w in re.findall(r"\w+", m.group(1))} | {
        f.name for f in sch.inputs if "broadcastable" in f.description.lower()
    }
    told &= names
    return ("uni", frozenset(told)) if told else ("", frozenset())


def broadcast_positions(spec: Spec) -> list[int]:
    """Positions of ``spec``'s data inputs that the schema lets broadcast."""
    _, names = broadcasting(spec.op, spec.domain, spec.opset)
    sch = schema(spec.op, spec.domain, spec.opset)
    formal = [f.name for f in sch.inputs]
    out = []
    for i, f in enumerate(spec.inputs):
        name = formal[min(i, len(formal) - 1)] if formal else ""
        if f is not None and f.data and name in names:
            out.append(i)
    return out


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


def _indexed(spec: Spec) -> bool:
    """Whether ``spec`` has a control input of indices."""
    formal = [f.name.lower() for f in schema(spec.op, spec.domain, spec.opset).inputs]
    return any(
        f is not None and not f.data and i < len(formal) and "indices" in formal[i]
        for i, f in enumerate(spec.inputs)
    )


def _smaller_than_kernel(spec: Spec) -> bool:
    """An image input whose spatial size, padded, is below the dilated kernel
    (``kernel_shape``, else the second data input's spatial dims)."""
    images = sorted(_image_inputs(spec))
    if not images or spec.inputs[images[0]] is None:
        return False
    x = spec.inputs[images[0]]
    assert x is not None
    spatial = x.shape[2:]
    for attrs in spec.attrs:
        if str(_plain(attrs).get("auto_pad", "NOTSET")).startswith("SAME"):
            continue
        kernel = attrs.get("kernel_shape")
        if kernel is None:
            w = [f for f in spec.inputs[images[0] + 1 :] if f is not None and f.data][:1]
            kernel = list(w[0].shape[2:]) if w and len(w[0].shape) == len(x.shape) else None
        if not kernel or len(kernel) != len(spatial):
            continue
        dil = attrs.get("dilations") or [1] * len(kernel)
        pads = attrs.get("pads") or [0] * (2 * len(kernel))
        for k, (size, kk) in enumerate(zip(spatial, kernel)):
            if size + pads[k] + pads[k + len(kernel)] < (kk - 1) * dil[k] + 1:
                return True
    return False


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
        if rule.matches(spec):
            return rule.reason
    for attrs in spec.attrs:
        count = attrs.get("num_outputs")
        if isinstance(count, int) and count != spec.outputs:
            # onnx's shape inference aborts the process (an unchecked index)
            return "num_outputs differs from the node's number of outputs"
    if spec.detail.startswith("bcast_"):
        allowed = broadcast_positions(spec)
        moved = {int(i) for i in re.findall(r"x(\d+)=", spec.detail)}
        if not moved <= set(allowed):
            return "broadcasting where the schema documents none"
    for i in _image_inputs(spec):
        f = spec.inputs[i]
        if f is not None and len(f.shape) < 3:
            return "an N x C x ... image input below rank 3"
        if f is not None and 0 in f.shape[2:]:
            return "an N x C x ... image input with no pixels (onnxruntime refuses it)"
    if _smaller_than_kernel(spec):
        return "an N x C x ... image smaller than the kernel"
    if spec.dimension == "size" and seed_shapes and _indexed(spec):
        for j, shape in seed_shapes.items():
            g = spec.inputs[j] if j < len(spec.inputs) else None
            if (
                g is not None
                and len(g.shape) == len(shape)
                and any(a < b for a, b in zip(g.shape, shape))
            ):
                return "indices kept from the seed may point past a dimension made smaller"
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
