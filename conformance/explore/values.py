"""Dimension ``range``: values spanning each element type's whole range.

The ``dtype`` dimension draws small values, where a uint32 divide done as
signed, an ArgMin taken as the ArgMax of the negation, or bfloat16 computed
through float16 all give the right answer. A ``range`` case gives the data
inputs of one type constraint one element type and draws their values from
all of that type (:func:`draw_span`): for integers the extremes and their
neighbours (``INT_MIN``, unsigned maxima), 0 and +-1, 2^31 and 2^63 where the
type holds them, 2^53 + 1 (no float64 holds it), and uniform values over the
range; for floats +-0, +-1, magnitudes from :data:`TINY` to :data:`BIG` (for
bfloat16 and float32 up to 1e30, beyond float16's 65504, and down to 1e-30,
below float16's smallest normal; float16 itself into its subnormals), and
131072 and 3e-5, just outside float16's normal range.

Only the ops of :data:`FAMILIES` get ``range`` cases: those whose result is
exact (or correctly rounded, judged against the oracle run in float64) for
any value, each family with the limits the standard sets: integer sums and
products kept from overflowing (ONNX does not say signed overflow wraps),
divisors without 0 or -1 (division by zero and ``INT_MIN / -1`` are
undefined), no ``INT_MIN`` where it is negated, casts only of values the
target type holds (an out-of-range float to integer cast is undefined).
Transcendental functions, reductions that sum, pooling and normalization are
left out: their float32 result for huge inputs depends on how intermediates
are formed, and the oracle's naive formulas overflow where a careful kernel
does not.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, replace

import numpy as np
import onnx

from ..case import Case
from .base import base_spec, target_cases, targets
from .dtypes import TYPES
from .seeds import Seed, schema, slots
from .spec import Feed, Spec, np_dtype

__all__ = ["cases_of", "BIG", "FAMILIES", "ORDER", "TINY", "Family", "Span", "cases", "draw_span"]

_T = onnx.TensorProto


@dataclass(frozen=True)
class Span:
    """How one input's values are drawn in a ``range`` case.

    Attributes:
        shrink: integers keep their magnitudes within ``max // shrink``
            (0: within the square root of ``max``, for products).
        divisor: no 0 and, for signed types, no -1.
        negated: signed types leave ``INT_MIN`` out (its negation overflows).
        within: values the element type ``within`` also holds (casts), whole numbers.
    """

    shrink: int = 1
    divisor: bool = False
    negated: bool = False
    within: int | None = None

    def draw(self, f: Feed, rng: np.random.Generator) -> np.ndarray:
        """Values for ``f``, a data input of a ``range`` case (:func:`draw_span`)."""
        return draw_span(replace(f, span=self), rng)


@dataclass(frozen=True)
class Family:
    """Ops judged exactly on any value, with the limits the standard sets.

    Attributes:
        ops: the ops.
        reason: why their results are exact over each type's whole range.
        spans: the span of each data input by position (the last one repeats).
        floats_only: integer types are left out.
        unsigned: unsigned integer types are explored.
        integers_only: float types are left out.
    """

    ops: frozenset[str]
    reason: str
    spans: tuple[Span, ...] = (Span(),)
    floats_only: bool = False
    unsigned: bool = True
    integers_only: bool = False


def _ops(*names: str) -> frozenset[str]:
    return frozenset(names)


FAMILIES: tuple[Family, ...] = (
    Family(
        _ops(
            "Identity",
            "Transpose",
            "Reshape",
            "Flatten",
            "Squeeze",
            "Unsqueeze",
            "Concat",
            "Split",
            "Slice",
            "Gather",
            "GatherElements",
            "GatherND",
            "ScatterND",
            "ScatterElements",
            "Tile",
            "Expand",
            "Pad",
            "DepthToSpace",
            "SpaceToDepth",
            "Compress",
            "ReverseSequence",
            "Trilu",
            "Where",
            "CenterCropPad",
        ),
        "values are moved, never computed on: a kernel that moves them through another "
        "type (int64 through float64, uint64 through int64) loses them",
    ),
    Family(
        _ops(
            "Max",
            "Min",
            "ArgMax",
            "ArgMin",
            "ReduceMax",
            "ReduceMin",
            "TopK",
            "Less",
            "LessOrEqual",
            "Greater",
            "GreaterOrEqual",
            "Equal",
            "Relu",
            "Sign",
            "BitwiseAnd",
            "BitwiseOr",
            "BitwiseXor",
            "BitwiseNot",
        ),
        "comparisons and selections: exact for any value; an unsigned type compared as "
        "signed, or a minimum found by negating, fails at the extremes",
    ),
    Family(
        _ops("Add"),
        "sums: correctly rounded floats over any magnitude; integers within max/8, so "
        "that no signed sum of up to 8 terms overflows (ONNX does not say it wraps)",
        (Span(shrink=8),),
    ),
    Family(
        _ops("Sum"),
        "sums of several terms: integers as for Add; floats left out (over three terms "
        "or more the order of the additions, which ONNX leaves open, decides what "
        "cancels: 1e30 + 1e18 - 1e30 is 0 or 1e18)",
        (Span(shrink=8),),
        integers_only=True,
    ),
    Family(
        _ops("Sub"),
        "differences: as sums; unsigned types left out (a negative difference wraps, "
        "which ONNX does not define)",
        (Span(shrink=8),),
        unsigned=False,
    ),
    Family(
        _ops("Mul"),
        "products: correctly rounded floats; integers within the square root of the type's maximum",
        (Span(shrink=0),),
    ),
    Family(
        _ops("Div", "Mod"),
        "quotients and remainders: exact integers over the whole range but for the "
        "divisors 0 (undefined) and -1 (INT_MIN / -1 overflows); correctly rounded floats",
        (Span(), Span(divisor=True)),
    ),
    Family(
        _ops("Neg", "Abs"),
        "negation: exact, INT_MIN left out (its negation overflows)",
        (Span(negated=True),),
    ),
    Family(
        _ops("Floor", "Ceil", "Round", "Sqrt", "Reciprocal"),
        "correctly rounded float functions, defined (inf, 0, NaN) beyond any type's range",
        floats_only=True,
    ),
    Family(
        _ops("Cast", "CastLike"),
        "conversions of values both types hold (whole numbers where either is an "
        "integer): exact or correctly rounded",
    ),
)
"""The ops with ``range`` cases, by family, each with its reason."""

ORDER = (
    "uint64", "bfloat16", "int32", "uint32", "float", "int64", "float16", "double",
    "int8", "uint8", "int16", "uint16",
)  # fmt: skip
"""Element types in the order they are tried (``quick`` keeps the first few):
the unsigned 64-bit type, bfloat16 (beyond float16's range), a signed type
with ``INT_MIN`` first."""
BUDGET = {"quick": 3, "full": len(ORDER)}
"""``range`` cases per (op, opset, seed): at ``quick`` the first :data:`ORDER` types."""

BIG: dict[int, float] = {_T.FLOAT16: 3.0e4, _T.BFLOAT16: 1e30, _T.FLOAT: 1e30, _T.DOUBLE: 1e100}
"""The largest magnitude drawn for each float type."""
TINY: dict[int, float] = {_T.FLOAT16: 1e-6, _T.BFLOAT16: 1e-30, _T.FLOAT: 1e-30, _T.DOUBLE: 1e-100}
"""The smallest non-zero magnitude drawn for each float type."""
FEW = 12
"""Data inputs with fewer values than this get a leading dimension of :data:`LEAD`."""
LEAD = 4
_NAMES = {v: k for k, v in TYPES.items()}
_FLOATS = {_T.FLOAT16, _T.BFLOAT16, _T.FLOAT, _T.DOUBLE}


def family(op: str) -> Family | None:
    """The family of ``op`` (``None``: no ``range`` cases)."""
    return next((f for f in FAMILIES if op in f.ops), None)


def _bounds(elem: int, span: Span) -> tuple[float, float]:
    """The interval values of ``elem`` are drawn from under ``span``."""
    if elem in _FLOATS:
        big = BIG[elem]
        lo, hi = -big, big
    else:
        info = np.iinfo(np_dtype(elem))
        top = math.isqrt(int(info.max)) if span.shrink == 0 else int(info.max) // span.shrink
        lo, hi = (int(info.min) if span.shrink == 1 else max(int(info.min), -top)), top
    if span.within is not None and span.within != elem:
        if span.within in _FLOATS:
            big = BIG[span.within]
        else:
            other = np.iinfo(np_dtype(span.within))
            lo, hi = max(lo, float(other.min)), min(hi, float(other.max))
            big = max(abs(lo), abs(hi))
        lo, hi = max(lo, -big), min(hi, big)
    return lo, hi


def _int_specials(elem: int, span: Span) -> list[int]:
    lo, hi = (int(b) for b in _bounds(elem, span))
    pts = [lo, lo + 1, -1, 0, 1, 2, hi - 1, hi, 2**31 - 1, 2**31, 2**31 + 1, 2**32]
    pts += [2**53 + 1, -(2**53) - 1, 2**63 - 1, 2**63, 2**63 + 1, -(2**31), -(2**31) - 1]
    out = []
    for p in pts:
        if lo <= p <= hi and p not in out:
            out.append(p)
    return out


def _excluded(elem: int, span: Span, x: np.ndarray) -> np.ndarray:
    """Where the drawn values are ones ``span`` leaves out."""
    bad = np.zeros(x.shape, bool)
    signed = np_dtype(elem).kind == "i"
    if span.divisor:
        bad |= x == 0
        if signed:
            bad |= x == -1
    if span.negated and signed:
        bad |= x == np.iinfo(x.dtype).min
    return bad


def _strata(n: int, rng: np.random.Generator) -> np.ndarray:
    """Which of three strata each of ``n`` values is drawn from (0: the top of
    the range, 1: its bottom, 2: anywhere), every stratum taken in turn from a
    random start, so that even three values reach both ends."""
    return (np.arange(n) + int(rng.integers(0, 3))) % 3


def _int_values(elem: int, span: Span, n: int, rng: np.random.Generator) -> np.ndarray:
    dt = np_dtype(elem)
    lo, hi = (int(b) for b in _bounds(elem, span))
    low = [v for v in (lo, lo + 1, 0, 1, -1) if lo <= v <= hi]
    top = rng.integers(hi - hi // 4, hi, size=n, endpoint=True, dtype=dt)
    bottom = rng.choice(np.asarray(low, dtype=dt), size=n)
    anywhere = rng.integers(lo, hi, size=n, endpoint=True, dtype=dt)
    drawn = np.choose(_strata(n, rng), [top, bottom, anywhere])
    specials = np.asarray(_int_specials(elem, span), dtype=dt)
    return _mix(specials, drawn, rng).astype(dt)


def _float_values(elem: int, span: Span, n: int, rng: np.random.Generator) -> np.ndarray:
    lo, hi = _bounds(elem, span)
    big = max(abs(lo), abs(hi))
    tiny = TINY[elem] if span.within is None else max(TINY[elem], TINY.get(span.within, 1.0))
    whole = span.within is not None and span.within not in _FLOATS
    specials = [0.0, -0.0, 1.0, -1.0, big, -big, tiny, -tiny, 131072.0, -3.0e-5, 65504.0]
    specials = [s for s in specials if abs(s) <= big and (s == 0 or abs(s) >= tiny)]
    edges = [  # log10 bounds of each stratum: huge, tiny, ordinary
        (min(5.0, math.log10(big)), math.log10(big)),
        (math.log10(tiny), max(math.log10(tiny), -5.0)),
        (-3.0, 3.0),
    ]
    strata = _strata(n, rng)
    exps = np.choose(strata, [rng.uniform(a, b, size=n) for a, b in edges])
    mags = np.minimum(10.0**exps, big)
    drawn = np.where(rng.integers(0, 2, size=n) == 1, mags, -mags)
    x = _mix(np.asarray(specials, np.float64), drawn, rng)
    if whole:
        x = np.clip(np.trunc(x), lo, hi)
    return x


def _mix(specials: np.ndarray, drawn: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """``drawn``'s size of values: a third of them specials (each at most
    once), the rest drawn, in a random order."""
    n = drawn.size
    pick = rng.permutation(specials)[: n // 3]
    out = np.concatenate([pick.astype(drawn.dtype), drawn[: n - pick.size]])
    return out[rng.permutation(n)]


def draw_span(f: Feed, rng: np.random.Generator) -> np.ndarray:
    """Values for a data input of a ``range`` case (``f.span`` says its limits)."""
    span = f.span if isinstance(f.span, Span) else Span()
    dt = np_dtype(f.elem)
    n = int(np.prod(f.shape, dtype=np.int64))
    if f.elem in _FLOATS:
        x = _float_values(f.elem, span, n, rng)
        x = np.where(_excluded(f.elem, span, x), 1.0, x)
        return x.astype(dt).reshape(f.shape)
    x = _int_values(f.elem, span, n, rng)
    x[_excluded(f.elem, span, x)] = np.asarray(_bounds(f.elem, span)[1], dtype=dt)
    return x.reshape(f.shape)


def _span(fam: Family, k: int, to: int | None) -> Span:
    s = fam.spans[min(k, len(fam.spans) - 1)]
    return replace(s, within=to) if to is not None else s


def range_specs(s: Seed, opset: int, suffix: str) -> Iterator[Spec]:
    """``range`` candidates: each type constraint of the data inputs of an op of
    :data:`FAMILIES` at each numeric type of :data:`ORDER` its schema allows."""
    fam = family(s.op)
    if fam is None or s.domain:
        return
    base = base_spec(s, opset, "range", "")
    attrs = base.attrs[0]
    if attrs.get("reduction", b"none") not in (b"none", "none", b"min", b"max", "min", "max"):
        return  # scattered sums and products overflow
    sl = slots(schema(s.op, s.domain, opset), len(s.inputs)) or s.slots
    data = [i for i, f in enumerate(base.inputs) if f is not None and f.data]
    params = list(dict.fromkeys(sl[i].type_param for i in data))
    casts = s.op in ("Cast", "CastLike")
    for name in ORDER:
        elem = TYPES[name]
        if fam.integers_only and elem in _FLOATS:
            continue
        if fam.floats_only and elem not in _FLOATS:
            continue
        if not fam.unsigned and np_dtype(elem).kind == "u":
            continue
        if s.op == "Mod" and elem in _FLOATS and not attrs.get("fmod"):
            continue  # its schema: a float Mod must have fmod=1
        for param in params:
            allowed = next(slot.allowed for slot in sl if slot.type_param == param)
            if f"tensor({name})" not in allowed:
                continue
            to = _target(base, attrs) if casts else None
            if casts and (to is None or to not in _NAMES):
                continue
            inputs: list[Feed | None] = list(base.inputs)
            for k, i in enumerate(data):
                f = inputs[i]
                if f is not None and sl[i].type_param == param:
                    inputs[i] = replace(f, elem=elem, span=_span(fam, k, to))
            spec = replace(base, inputs=inputs, detail=f"{param}={name}{suffix}")
            wide = _widened(spec)
            if wide is not None:
                yield wide
            yield spec  # where the wider one is illegal (a rank tied to a control input)


def _widened(spec: Spec) -> Spec | None:
    """``spec`` with a leading dimension of :data:`LEAD` added to its data inputs of
    the largest rank, where they hold fewer than :data:`FEW` values: enough
    values to reach both ends of the range in every input. Not where a control
    input is given (it may be tied to the data's shape)."""
    if any(f is not None and not f.data for f in spec.inputs):
        return None  # a control input may be tied to the data's shape (sequence_lens)
    pos = [i for i, f in enumerate(spec.inputs) if f is not None and f.data]
    sizes = [math.prod(spec.inputs[i].shape) for i in pos]  # type: ignore[union-attr]
    if not pos or max(sizes) >= FEW or 0 in sizes:
        return None
    top = max(len(spec.inputs[i].shape) for i in pos)  # type: ignore[union-attr]
    inputs = list(spec.inputs)
    for i in pos:
        f = inputs[i]
        if f is not None and len(f.shape) == top:
            inputs[i] = replace(f, shape=(LEAD, *f.shape))
    return replace(spec, inputs=inputs)


def _target(base: Spec, attrs: dict[str, object]) -> int | None:
    """A cast's target type: its ``to`` attribute, or CastLike's second input's type."""
    to = attrs.get("to")
    if isinstance(to, int):
        return to
    if len(base.inputs) > 1 and base.inputs[1] is not None:
        return base.inputs[1].elem
    return None


def cases_of(s: Seed, opset: int, suffix: str, depth: str) -> Iterator[Case]:
    """The cases of one target (seed, opset, name suffix) at ``depth``."""
    yield from target_cases(range_specs(s, opset, suffix), s, suffix, BUDGET, depth)


def cases(depth: str) -> Iterator[Case]:
    """The cases of this dimension at ``depth``."""
    for s, opset, suffix in targets(depth):
        yield from cases_of(s, opset, suffix, depth)
