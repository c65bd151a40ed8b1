"""Data-movement kernels, generated per element size (words of 1, 2, 4 or 8
bytes: they move bytes, whatever the element type) and rank: Transpose and
strided copies, Trilu, Pad, Gather, Where; and the fills.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache

import numpy as np

from .grid import _LOOP, BCAST, MAX_RANK, WORDS, _coords
from .spec import DTYPES, Kernel, Param, StructType, floating

__all__ = [
    "PAD_ARGS",
    "PAD_MODES",
    "WHERE",
    "contiguous",
    "copy_args",
    "fill_kernel",
    "fill_word_kernel",
    "gather_kernel",
    "pad_args",
    "pad_kernel",
    "permute_args",
    "transpose_kernel",
    "trilu_kernel",
    "where_args",
    "where_kernel",
]


@cache
def transpose_kernel(itemsize: int, rank: int) -> Kernel:
    """A strided copy of elements of ``itemsize`` bytes (any type): for each
    index of the iteration space ``Bcast.dims``, ``y[sum(c * sb)] = x[sum(c * sa)]``.
    A transpose (:func:`permute_args`), a broadcast (``sa`` 0 along
    broadcast axes), a slice (``sa`` times the steps, ``x`` offset to the
    starts) or a concatenation's part (``sb`` the output's strides, ``y``
    offset to the part) are all this kernel."""
    if not 1 <= rank <= MAX_RANK:
        raise ValueError(f"rank {rank} is outside 1..{MAX_RANK}")
    word = WORDS[itemsize]
    name = f"transpose_b{itemsize}_r{rank}"
    steps = _coords(rank, ("ox", "sa"), ("oy", "sb"))
    source = f"""\
extern "C" __global__ void {name}(const {word}* __restrict__ x, {word}* __restrict__ y,
                                  i64 n, Bcast s) {{
    {_LOOP} {{
        i64 r = i, ox = 0, oy = 0;
{steps}
        y[oy] = x[ox];
    }}
}}
"""
    params = (
        Param(f"const {word}*", "x"),
        Param(f"{word}*", "y"),
        Param("i64", "n"),
        Param("Bcast", "s"),
    )
    return Kernel(name, params, source, (BCAST,))


def permute_args(shape: Sequence[int], perm: Sequence[int]) -> tuple[tuple[int, ...], np.ndarray]:
    """The output shape of transposing ``shape`` by ``perm``, and the
    ``Bcast`` argument of :func:`transpose_kernel` (a contiguous input)."""
    rank = len(shape)
    strides = [1] * rank
    for k in reversed(range(rank - 1)):
        strides[k] = strides[k + 1] * shape[k + 1]
    out = tuple(shape[p] for p in perm)
    pad = MAX_RANK - rank
    value = BCAST.pack(
        dims=list(out) + [1] * pad,
        sa=[strides[p] for p in perm] + [0] * pad,
        sb=contiguous(out) + [0] * pad,
    )
    return out, value


def contiguous(shape: Sequence[int]) -> list[int]:
    """Element strides of a C-contiguous tensor of ``shape``."""
    strides = [1] * len(shape)
    for k in reversed(range(len(shape) - 1)):
        strides[k] = strides[k + 1] * int(shape[k + 1])
    return strides


def copy_args(dims: Sequence[int], src: Sequence[int], dst: Sequence[int]) -> np.ndarray:
    """The ``Bcast`` argument of a strided copy over ``dims`` with source
    strides ``src`` and destination strides ``dst``."""
    pad = MAX_RANK - len(dims)
    return BCAST.pack(
        dims=[int(d) for d in dims] + [1] * pad,
        sa=[int(v) for v in src] + [0] * pad,
        sb=[int(v) for v in dst] + [0] * pad,
    )


@cache
def trilu_kernel(itemsize: int) -> Kernel:
    """Trilu of the last two axes (``rows x cols`` matrices): keep
    ``col - row >= k`` (upper) or ``col - row <= k`` (lower), else zero."""
    word = WORDS[itemsize]
    name = f"trilu_b{itemsize}"
    source = f"""\
extern "C" __global__ void {name}(const {word}* __restrict__ x, {word}* __restrict__ y, i64 n,
                                  i64 rows, i64 cols, i64 k, int upper) {{
    {_LOOP} {{
        i64 c = i % cols, r = (i / cols) % rows;
        bool keep = upper ? (c - r >= k) : (c - r <= k);
        y[i] = keep ? x[i] : ({word})0;
    }}
}}
"""
    params = (
        Param(f"const {word}*", "x"),
        Param(f"{word}*", "y"),
        Param("i64", "n"),
        Param("i64", "rows"),
        Param("i64", "cols"),
        Param("i64", "k"),
        Param("int", "upper"),
    )
    return Kernel(name, params, source)


@cache
@floating
def fill_kernel(dtype: str) -> Kernel:
    """``y[i] = value``."""
    ctype = DTYPES[dtype][0]
    name = f"fill_{dtype}"
    source = f"""\
extern "C" __global__ void {name}({ctype}* __restrict__ y, i64 n, float value) {{
    {_LOOP} store_f(&y[i], value);
}}
"""
    return Kernel(
        name, (Param(f"{ctype}*", "y"), Param("i64", "n"), Param("float", "value")), source
    )


@cache
def fill_word_kernel(itemsize: int) -> Kernel:
    """``y[i] = bits``: any element type of ``itemsize`` bytes, its value given as its bits."""
    word = WORDS[itemsize]
    name = f"fill_b{itemsize}"
    source = f"""\
extern "C" __global__ void {name}({word}* __restrict__ y, i64 n, unsigned long long bits) {{
    {_LOOP} y[i] = ({word})bits;
}}
"""
    params = (Param(f"{word}*", "y"), Param("i64", "n"), Param("unsigned long long", "bits"))
    return Kernel(name, params, source)


_PAD_FIELDS = ("out", "in", "before", "lo", "len")
PAD_ARGS = StructType(
    "PadArgs",
    "struct PadArgs { i64 rank; " + " ".join(f"i64 {f}[{MAX_RANK}];" for f in _PAD_FIELDS) + " };",
    np.dtype([("rank", "<i8")] + [(f, "<i8", (MAX_RANK,)) for f in _PAD_FIELDS]),
)
"""Pad's output and input dims, and per axis the pads before the kept part
(at least 0), where the kept part starts (negative pads crop) and its length."""


def pad_args(
    shape: Sequence[int], before: Sequence[int], after: Sequence[int]
) -> tuple[list[int], int, np.ndarray]:
    """The output dims of padding ``shape`` by ``before`` and ``after`` per
    axis (negative: cropped, then the rest padded), the number of elements
    kept of the input, and the ``PadArgs`` of :func:`pad_kernel`."""
    rank = len(shape)
    if rank > MAX_RANK:
        raise ValueError(f"Pad of rank {rank}: the kernels go to {MAX_RANK}")
    dims = [d + b + e for d, b, e in zip(shape, before, after)]
    lo = [max(-b, 0) for b in before]
    kept = [d - s - max(-e, 0) for d, s, e in zip(shape, lo, after)]
    pad = [0] * (MAX_RANK - rank)
    args = PAD_ARGS.pack(
        rank=rank,
        out=dims + pad,
        before=[max(b, 0) for b in before] + pad,
        lo=lo + pad,
        len=kept + pad,
        **{"in": list(shape) + pad},
    )
    return dims, int(np.prod(kept)) if min(kept, default=1) > 0 else 0, args


PAD_MODES = {
    "constant": "if (c < 0 || c >= d) { outside = true; break; }",
    "edge": "c = c < 0 ? 0 : (c >= d ? d - 1 : c);",
    "reflect": (
        "if (d == 1) c = 0; else { i64 p = 2 * (d - 1); c = ((c % p) + p) % p; "
        "if (c >= d) c = p - c; }"
    ),
    "wrap": "c = ((c % d) + d) % d;",
}
"""Pad's modes: how a coordinate ``c`` outside ``[0, d)`` maps into the input."""


@cache
def pad_kernel(itemsize: int, mode: str) -> Kernel:
    """Pad (any element type of ``itemsize`` bytes) in ``mode`` (a key of
    :data:`PAD_MODES`): one thread an output element, its coordinate in the
    kept part of the input (what negative pads leave) per axis its own minus
    the pads before, mapped into it by the mode (``bits``: the constant)."""
    word = WORDS[itemsize]
    name = f"pad_{mode}_b{itemsize}"
    source = f"""\
extern "C" __global__ void {name}(const {word}* __restrict__ x, {word}* __restrict__ y, i64 n,
                                  PadArgs a, unsigned long long bits) {{
    {_LOOP} {{
        i64 r = i, src = 0, stride = 1;
        bool outside = false;
        for (i64 k = a.rank - 1; k >= 0; k--) {{
            i64 d = a.len[k], c = r % a.out[k] - a.before[k];
            r /= a.out[k];
            {PAD_MODES[mode]}
            src += (c + a.lo[k]) * stride;
            stride *= a.in[k];
        }}
        y[i] = outside ? ({word})bits : x[src];
    }}
}}
"""
    params = (
        Param(f"const {word}*", "x"),
        Param(f"{word}*", "y"),
        Param("i64", "n"),
        Param("PadArgs", "a"),
        Param("unsigned long long", "bits"),
    )
    return Kernel(name, params, source, (PAD_ARGS,))


@cache
def gather_kernel(itemsize: int) -> Kernel:
    """Gather along an axis: ``y[o, j, r] = x[o, idx[j], r]`` (``idx`` int64,
    already checked and made non-negative on the host)."""
    word = WORDS[itemsize]
    name = f"gather_b{itemsize}"
    source = f"""\
extern "C" __global__ void {name}(const {word}* __restrict__ x, const i64* __restrict__ idx,
                                  {word}* __restrict__ y, i64 n, i64 count, i64 axis_len,
                                  i64 inner) {{
    {_LOOP} {{
        i64 r = i % inner, j = (i / inner) % count, o = i / (inner * count);
        y[i] = x[(o * axis_len + idx[j]) * inner + r];
    }}
}}
"""
    params = (
        Param(f"const {word}*", "x"),
        Param("const i64*", "idx"),
        Param(f"{word}*", "y"),
        Param("i64", "n"),
        Param("i64", "count"),
        Param("i64", "axis_len"),
        Param("i64", "inner"),
    )
    return Kernel(name, params, source)


WHERE = StructType(
    "Where",
    f"struct Where {{ i64 dims[{MAX_RANK}]; i64 sc[{MAX_RANK}]; i64 sa[{MAX_RANK}]; "
    f"i64 sb[{MAX_RANK}]; }};",
    np.dtype([(f, "<i8", (MAX_RANK,)) for f in ("dims", "sc", "sa", "sb")]),
)


@cache
def where_kernel(itemsize: int, rank: int) -> Kernel:
    """``y = cond ? a : b`` with numpy broadcasting of the three (any element type)."""
    word = WORDS[itemsize]
    name = f"where_b{itemsize}_r{rank}"
    steps = _coords(rank, ("oc", "sc"), ("oa", "sa"), ("ob", "sb"))
    source = f"""\
extern "C" __global__ void {name}(const unsigned char* __restrict__ cond,
                                  const {word}* __restrict__ a, const {word}* __restrict__ b,
                                  {word}* __restrict__ y, i64 n, Where s) {{
    {_LOOP} {{
        i64 r = i, oc = 0, oa = 0, ob = 0;
{steps}
        y[i] = cond[oc] ? a[oa] : b[ob];
    }}
}}
"""
    params = (
        Param("const unsigned char*", "cond"),
        Param(f"const {word}*", "a"),
        Param(f"const {word}*", "b"),
        Param(f"{word}*", "y"),
        Param("i64", "n"),
        Param("Where", "s"),
    )
    return Kernel(name, params, source, (WHERE,))


def where_args(
    cond: Sequence[int], a: Sequence[int], b: Sequence[int]
) -> tuple[tuple[int, ...], int, np.ndarray]:
    """Output shape, rank and ``Where`` argument of broadcasting three shapes."""
    out = tuple(np.broadcast_shapes(tuple(cond), tuple(a), tuple(b)))
    rank = max(len(out), 1)
    if rank > MAX_RANK:
        raise ValueError(f"Where output of rank {rank}: the kernels go to {MAX_RANK}")
    dims = list(out) if out else [1]

    def strides(shape: Sequence[int]) -> list[int]:
        padded = [1] * (rank - len(shape)) + list(shape)
        full = contiguous(padded)
        return [0 if padded[k] == 1 and dims[k] != 1 else full[k] for k in range(rank)]

    pad = MAX_RANK - rank
    value = WHERE.pack(
        dims=dims + [1] * pad,
        sc=strides(cond) + [0] * pad,
        sa=strides(a) + [0] * pad,
        sb=strides(b) + [0] * pad,
    )
    return out, rank, value
