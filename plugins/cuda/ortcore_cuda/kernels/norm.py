"""CUDA kernels of :mod:`ortcore_cuda.ops_norm`: normalizations over rows, and
indexing ops that move elements (any type, as words of 1 to 8 bytes).

* Row normalizations (LayerNormalization over any trailing axes,
  GroupNormalization, InstanceNormalization, RMSNormalization,
  MeanVarianceNormalization): one block per row at a time (a grid-stride loop
  over the rows, so any grid is correct), the row's sums combined in shared
  memory by :data:`BLOCK_SUM`, which takes any block size up to 1024. The
  scale (and bias) element of column ``j`` of row ``r`` is
  ``((r % groups) * cols + j) / div``: ``groups = 1, div = 1`` gives a
  per-column scale (LayerNormalization, RMSNormalization),
  ``div = cols / channels_per_group`` a per-channel one (GroupNormalization,
  InstanceNormalization), ``div = cols`` a per-group one (GroupNormalization-18).
* Indexing (GatherElements, GatherND, ScatterElements, ScatterND, OneHot,
  EyeLike, Tile, fills): grid-stride loops; shapes and strides pass in
  :data:`SHAPE`, up to :data:`MAX_RANK` dimensions. The scatters run each
  group of updates that may hit the same element in one thread, in the order
  of onnx's reference (so the last write wins, and reductions fold in order):
  exact and deterministic. Indices out of range are skipped (scatter) or
  give zero (gather) instead of touching memory outside the tensors.
"""

from __future__ import annotations

from functools import cache

import numpy as np

from .spec import Kernel, Param, Snippet, StructType

__all__ = [
    "BLOCK_SUM",
    "FLOAT_TYPES",
    "INDEX_TYPES",
    "MAX_RANK",
    "MAX_THREADS",
    "ONEHOT_INDEX",
    "REDUCE_TYPES",
    "REDUCTIONS",
    "SHAPE",
    "WORDS",
    "all_kernels",
    "eyelike_kernel",
    "fill_words_kernel",
    "gather_elements_kernel",
    "gather_nd_kernel",
    "layernorm_kernel",
    "mvn_kernel",
    "onehot_kernel",
    "rms_kernel",
    "row_threads",
    "scatter_elements_kernel",
    "scatter_key",
    "scatter_nd_kernel",
    "shape_arg",
    "tile_kernel",
]

FLOAT_TYPES = {"f32": "float", "f16": "__half"}
"""Element types of the arithmetic kernels (computing in float): suffix -> C type."""

WORDS = {1: "unsigned char", 2: "unsigned short", 4: "unsigned int", 8: "unsigned long long"}
"""Element sizes of the data-movement kernels, and their C types."""

INDEX_TYPES = {"i32": "int", "i64": "long long"}
"""Index element types of the gathers and scatters."""

REDUCE_TYPES = {"f32": "float", "f16": "__half", "i32": "int", "i64": "long long"}
"""Element types the scatters' reductions (add, mul, max, min) are generated for."""

ONEHOT_INDEX = {
    "i32": "int",
    "i64": "long long",
    "f32": "float",
    "f16": "__half",
    "f64": "double",
}
"""Index element types of OneHot."""

MAX_RANK = 8
MAX_THREADS = 1024

SHAPE = StructType(
    "NormShape",
    f"struct NormShape {{ i64 dims[{MAX_RANK}]; i64 sa[{MAX_RANK}]; i64 sb[{MAX_RANK}]; }};",
    np.dtype([(f, "<i8", (MAX_RANK,)) for f in ("dims", "sa", "sb")]),
)
"""Dims and two sets of element strides (what each kernel says they are)."""


def shape_arg(
    dims: list[int], sa: list[int] | None = None, sb: list[int] | None = None
) -> np.ndarray:
    """A :data:`SHAPE` value (unused trailing entries: dims 1, strides 0)."""
    if len(dims) > MAX_RANK:
        raise ValueError(f"rank {len(dims)}: the kernels go to {MAX_RANK}")
    pad = MAX_RANK - len(dims)
    return SHAPE.pack(
        dims=[int(d) for d in dims] + [1] * pad,
        sa=[int(v) for v in (sa or [0] * len(dims))] + [0] * pad,
        sb=[int(v) for v in (sb or [0] * len(dims))] + [0] * pad,
    )


BLOCK_SUM = Snippet(
    "norm_block_sum",
    f"""\
// The block's sum of v through shared memory, for any blockDim.x <= {MAX_THREADS}
// (pairs at distance 1, 2, 4, ...: a fixed order); every thread of the block calls it.
__device__ float norm_block_sum(float v) {{
    __shared__ float norm_slots[{MAX_THREADS}];
    norm_slots[threadIdx.x] = v;
    __syncthreads();
    for (unsigned s = 1; s < blockDim.x; s <<= 1) {{
        if (threadIdx.x % (2 * s) == 0 && threadIdx.x + s < blockDim.x)
            norm_slots[threadIdx.x] += norm_slots[threadIdx.x + s];
        __syncthreads();
    }}
    float out = norm_slots[0];
    __syncthreads();  // the slots are reused by the next call
    return out;
}}
""",
)


def row_threads(cols: int) -> int:
    """The block size for rows of ``cols`` elements: a power of two from 32 to 256."""
    n = 32
    while n < cols and n < 256:
        n *= 2
    return n


_LOOP = (
    "for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; "
    "i += (i64)gridDim.x * blockDim.x)"
)
_ROWS = "for (i64 row = blockIdx.x; row < rows; row += gridDim.x)"
_COLS = "for (i64 j = threadIdx.x; j < cols; j += blockDim.x)"


def _check(table: dict, key: object, what: str) -> None:
    if key not in table:
        raise ValueError(f"no {what} kernel for {key!r} (have {', '.join(map(str, table))})")


@cache
def layernorm_kernel(dtype: str, stats: str, bias: bool) -> Kernel:
    """``y = (x - mean) / sqrt(var + eps) * scale[s] + bias[s]`` over each row of
    ``rows x cols``, with the row's mean and ``1 / sqrt(var + eps)`` stored to
    ``mean`` and ``inv`` (element type ``stats``); the scale index ``s`` as in
    the module docstring. Two passes: the mean, then the variance around it."""
    _check(FLOAT_TYPES, dtype, "float")
    _check(FLOAT_TYPES, stats, "float")
    t, st = FLOAT_TYPES[dtype], FLOAT_TYPES[stats]
    name = f"norm_layer_{dtype}_{stats}{'_bias' if bias else ''}"
    bias_param = f"const {t}* __restrict__ bias, " if bias else ""
    plus = " + load_f(bias[s])" if bias else ""
    source = f"""\
extern "C" __global__ void {name}(const {t}* __restrict__ x, const {t}* __restrict__ scale,
        {bias_param}{t}* __restrict__ y, {st}* __restrict__ mean_out, {st}* __restrict__ inv_out,
        i64 rows, i64 cols, i64 groups, i64 div, float epsilon) {{
    {_ROWS} {{
        const {t}* xr = x + row * cols;
        {t}* yr = y + row * cols;
        i64 base = (row % groups) * cols;
        float sum = 0.0f;
        {_COLS} sum += load_f(xr[j]);
        float mean = norm_block_sum(sum) / (float)cols;
        float sq = 0.0f;
        {_COLS} {{ float d = load_f(xr[j]) - mean; sq += d * d; }}
        float inv = 1.0f / sqrtf(norm_block_sum(sq) / (float)cols + epsilon);
        {_COLS} {{
            i64 s = (base + j) / div;
            store_f(&yr[j], (load_f(xr[j]) - mean) * inv * load_f(scale[s]){plus});
        }}
        if (threadIdx.x == 0) {{ store_f(&mean_out[row], mean); store_f(&inv_out[row], inv); }}
    }}
}}
"""
    params = [Param(f"const {t}*", "x"), Param(f"const {t}*", "scale")]
    if bias:
        params.append(Param(f"const {t}*", "bias"))
    params += [
        Param(f"{t}*", "y"),
        Param(f"{st}*", "mean_out"),
        Param(f"{st}*", "inv_out"),
        Param("i64", "rows"),
        Param("i64", "cols"),
        Param("i64", "groups"),
        Param("i64", "div"),
        Param("float", "epsilon"),
    ]
    return Kernel(name, tuple(params), source, (BLOCK_SUM,))


@cache
def rms_kernel(dtype: str) -> Kernel:
    """``y = x / sqrt(mean(x^2) + eps) * scale[s]`` over each row (scale index as
    in the module docstring)."""
    _check(FLOAT_TYPES, dtype, "float")
    t = FLOAT_TYPES[dtype]
    name = f"norm_rms_{dtype}"
    source = f"""\
extern "C" __global__ void {name}(const {t}* __restrict__ x, const {t}* __restrict__ scale,
        {t}* __restrict__ y, i64 rows, i64 cols, i64 groups, i64 div, float epsilon) {{
    {_ROWS} {{
        const {t}* xr = x + row * cols;
        {t}* yr = y + row * cols;
        i64 base = (row % groups) * cols;
        float sq = 0.0f;
        {_COLS} {{ float v = load_f(xr[j]); sq += v * v; }}
        float inv = 1.0f / sqrtf(norm_block_sum(sq) / (float)cols + epsilon);
        {_COLS} store_f(&yr[j], load_f(xr[j]) * inv * load_f(scale[(base + j) / div]));
    }}
}}
"""
    params = (
        Param(f"const {t}*", "x"),
        Param(f"const {t}*", "scale"),
        Param(f"{t}*", "y"),
        Param("i64", "rows"),
        Param("i64", "cols"),
        Param("i64", "groups"),
        Param("i64", "div"),
        Param("float", "epsilon"),
    )
    return Kernel(name, params, source, (BLOCK_SUM,))


@cache
def mvn_kernel(dtype: str) -> Kernel:
    """MeanVarianceNormalization of each row: ``(x - mean) / (sqrt(var) + 1e-9)``
    (onnx's function: the standard deviation plus 1e-9)."""
    _check(FLOAT_TYPES, dtype, "float")
    t = FLOAT_TYPES[dtype]
    name = f"norm_mvn_{dtype}"
    source = f"""\
extern "C" __global__ void {name}(const {t}* __restrict__ x, {t}* __restrict__ y,
        i64 rows, i64 cols) {{
    {_ROWS} {{
        const {t}* xr = x + row * cols;
        {t}* yr = y + row * cols;
        float sum = 0.0f;
        {_COLS} sum += load_f(xr[j]);
        float mean = norm_block_sum(sum) / (float)cols;
        float sq = 0.0f;
        {_COLS} {{ float d = load_f(xr[j]) - mean; sq += d * d; }}
        float den = sqrtf(norm_block_sum(sq) / (float)cols) + 1e-9f;
        {_COLS} store_f(&yr[j], (load_f(xr[j]) - mean) / den);
    }}
}}
"""
    params = (
        Param(f"const {t}*", "x"),
        Param(f"{t}*", "y"),
        Param("i64", "rows"),
        Param("i64", "cols"),
    )
    return Kernel(name, params, source, (BLOCK_SUM,))


@cache
def fill_words_kernel(itemsize: int) -> Kernel:
    """``y[i] = value[0]`` (any element type: ``value`` a one-element device buffer)."""
    _check(WORDS, itemsize, "word")
    w = WORDS[itemsize]
    name = f"norm_fill_b{itemsize}"
    source = f"""\
extern "C" __global__ void {name}({w}* __restrict__ y, const {w}* __restrict__ value, i64 n) {{
    {w} v = value[0];
    {_LOOP} y[i] = v;
}}
"""
    params = (Param(f"{w}*", "y"), Param(f"const {w}*", "value"), Param("i64", "n"))
    return Kernel(name, params, source)


@cache
def eyelike_kernel(itemsize: int) -> Kernel:
    """EyeLike of a ``rows x cols`` matrix: ``vals[1]`` where ``col - row == k``,
    else ``vals[0]`` (``vals``: zero and one of the output type)."""
    _check(WORDS, itemsize, "word")
    w = WORDS[itemsize]
    name = f"norm_eyelike_b{itemsize}"
    source = f"""\
extern "C" __global__ void {name}({w}* __restrict__ y, const {w}* __restrict__ vals, i64 n,
        i64 cols, i64 k) {{
    {_LOOP} y[i] = (i % cols) - (i / cols) == k ? vals[1] : vals[0];
}}
"""
    params = (
        Param(f"{w}*", "y"),
        Param(f"const {w}*", "vals"),
        Param("i64", "n"),
        Param("i64", "cols"),
        Param("i64", "k"),
    )
    return Kernel(name, params, source)


@cache
def onehot_kernel(itemsize: int, index: str) -> Kernel:
    """OneHot: ``y[o, d, r] = idx[o, r] (+ depth if negative) == d ? vals[1] : vals[0]``
    over ``outer x depth x inner`` (the index compared as a double, as onnx's
    reference compares it: 1.5 matches nothing)."""
    _check(WORDS, itemsize, "word")
    _check(ONEHOT_INDEX, index, "OneHot index")
    w, it = WORDS[itemsize], ONEHOT_INDEX[index]
    load = "(double)load_f(idx[o * inner + r])" if index == "f16" else "(double)idx[o * inner + r]"
    name = f"norm_onehot_b{itemsize}_{index}"
    source = f"""\
extern "C" __global__ void {name}(const {it}* __restrict__ idx, const {w}* __restrict__ vals,
        {w}* __restrict__ y, i64 n, i64 depth, i64 inner) {{
    {_LOOP} {{
        i64 r = i % inner, d = (i / inner) % depth, o = i / (inner * depth);
        double v = {load};
        if (v < 0.0) v += (double)depth;
        y[i] = v == (double)d ? vals[1] : vals[0];
    }}
}}
"""
    params = (
        Param(f"const {it}*", "idx"),
        Param(f"const {w}*", "vals"),
        Param(f"{w}*", "y"),
        Param("i64", "n"),
        Param("i64", "depth"),
        Param("i64", "inner"),
    )
    return Kernel(name, params, source)


@cache
def tile_kernel(itemsize: int) -> Kernel:
    """Tile: ``y[c] = x[c mod s.sa]`` for each index ``c`` of the output dims
    ``s.dims`` (``s.sa``: the input's dims)."""
    _check(WORDS, itemsize, "word")
    w = WORDS[itemsize]
    name = f"norm_tile_b{itemsize}"
    source = f"""\
extern "C" __global__ void {name}(const {w}* __restrict__ x, {w}* __restrict__ y, i64 n,
        int rank, NormShape s) {{
    {_LOOP} {{
        i64 r = i, ox = 0, stride = 1;
        for (int k = rank - 1; k >= 0; --k) {{
            i64 c = r % s.dims[k];
            r /= s.dims[k];
            ox += (c % s.sa[k]) * stride;
            stride *= s.sa[k];
        }}
        y[i] = x[ox];
    }}
}}
"""
    params = (
        Param(f"const {w}*", "x"),
        Param(f"{w}*", "y"),
        Param("i64", "n"),
        Param("int", "rank"),
        Param("NormShape", "s"),
    )
    return Kernel(name, params, source, (SHAPE,))


@cache
def gather_elements_kernel(itemsize: int, index: str) -> Kernel:
    """GatherElements: for each index ``c`` of the indices' dims ``s.dims``,
    ``y[c] = x[c with c[axis] = idx[c]]`` (``s.sa``: the data's strides;
    a negative index counts from the end; one out of range gives 0)."""
    _check(WORDS, itemsize, "word")
    _check(INDEX_TYPES, index, "index")
    w, it = WORDS[itemsize], INDEX_TYPES[index]
    name = f"norm_gather_elements_b{itemsize}_{index}"
    source = f"""\
extern "C" __global__ void {name}(const {w}* __restrict__ x, const {it}* __restrict__ idx,
        {w}* __restrict__ y, i64 n, int rank, int axis, i64 axis_len, NormShape s) {{
    {_LOOP} {{
        i64 r = i, ox = 0;
        i64 j = (i64)idx[i];
        if (j < 0) j += axis_len;
        for (int k = rank - 1; k >= 0; --k) {{
            i64 c = r % s.dims[k];
            r /= s.dims[k];
            ox += (k == axis ? j : c) * s.sa[k];
        }}
        y[i] = (j >= 0 && j < axis_len) ? x[ox] : ({w})0;
    }}
}}
"""
    params = (
        Param(f"const {w}*", "x"),
        Param(f"const {it}*", "idx"),
        Param(f"{w}*", "y"),
        Param("i64", "n"),
        Param("int", "rank"),
        Param("int", "axis"),
        Param("i64", "axis_len"),
        Param("NormShape", "s"),
    )
    return Kernel(name, params, source, (SHAPE,))


@cache
def gather_nd_kernel(itemsize: int) -> Kernel:
    """GatherND: ``y[t, r] = x[batch(t), idx[t, 0..k-1], r]`` over ``n`` outputs of
    ``inner`` elements per index tuple ``t`` (``per_batch`` tuples a batch,
    ``batch_stride`` data elements a batch; ``s.dims``, ``s.sa``: the dims and
    strides of the data's indexed axes; negative indices count from the end,
    a tuple out of range gives zeros)."""
    _check(WORDS, itemsize, "word")
    w = WORDS[itemsize]
    name = f"norm_gather_nd_b{itemsize}"
    source = f"""\
extern "C" __global__ void {name}(const {w}* __restrict__ x, const long long* __restrict__ idx,
        {w}* __restrict__ y, i64 n, i64 inner, int k, i64 per_batch, i64 batch_stride,
        NormShape s) {{
    {_LOOP} {{
        i64 r = i % inner, t = i / inner;
        i64 ox = (t / per_batch) * batch_stride + r;
        bool ok = true;
        for (int q = 0; q < k; ++q) {{
            i64 j = idx[t * k + q];
            if (j < 0) j += s.dims[q];
            ok = ok && j >= 0 && j < s.dims[q];
            ox += j * s.sa[q];
        }}
        y[i] = ok ? x[ox] : ({w})0;
    }}
}}
"""
    params = (
        Param(f"const {w}*", "x"),
        Param("const long long*", "idx"),
        Param(f"{w}*", "y"),
        Param("i64", "n"),
        Param("i64", "inner"),
        Param("int", "k"),
        Param("i64", "per_batch"),
        Param("i64", "batch_stride"),
        Param("NormShape", "s"),
    )
    return Kernel(name, params, source, (SHAPE,))


REDUCTIONS = ("none", "add", "mul", "max", "min")

_ELEMENT_FOLD = {  # ScatterElements, as onnx's reference: Python's max and min
    "add": "a + u",
    "mul": "a * u",
    "max": "u > a ? u : a",
    "min": "u < a ? u : a",
}
_ND_FOLD = {  # ScatterND, as onnx's reference: numpy's maximum and minimum (NaN wins)
    "add": "a + u",
    "mul": "a * u",
    "max": "(u != u || u > a) ? u : a",
    "min": "(u != u || u < a) ? u : a",
}


def _scatter_ctype(key: str, reduction: str) -> str:
    """The C element type of the scatters' ``key`` (a word for ``none``)."""
    if reduction == "none":
        size = int(key[1:]) if key.startswith("b") and key[1:].isdigit() else 0
        _check(WORDS, size, "word")
        return WORDS[size]
    _check(REDUCE_TYPES, key, "scatter reduction")
    return REDUCE_TYPES[key]


def _fold(key: str, reduction: str, folds: dict[str, str], target: str, update: str) -> str:
    if reduction == "none":
        return f"{target} = {update};"
    if key in FLOAT_TYPES:
        return (
            f"{{ float a = load_f({target}), u = load_f({update}); "
            f"store_f(&{target}, {folds[reduction]}); }}"
        )
    return f"{{ auto a = {target}, u = {update}; {target} = {folds[reduction]}; }}"


@cache
def scatter_elements_kernel(key: str, reduction: str, index: str) -> Kernel:
    """ScatterElements into ``y`` (a copy of the data): thread per line of the
    updates along ``axis`` (the updates that may hit the same element), each
    line in order: ``y[c with c[axis] = idx[c]] = f(that, upd[c])``. ``key``: a
    word (``b4``) for reduction ``none``, else an element type of
    :data:`REDUCE_TYPES`. ``s.dims``: the indices' dims with the axis 1;
    ``s.sa``: the indices' strides; ``s.sb``: the data's."""
    if reduction not in REDUCTIONS:
        raise ValueError(f"no scatter reduction {reduction!r}")
    _check(INDEX_TYPES, index, "index")
    t = _scatter_ctype(key, reduction)
    it = INDEX_TYPES[index]
    name = f"norm_scatter_elements_{key}_{reduction}_{index}"
    fold = _fold(key, reduction, _ELEMENT_FOLD, "y[oy + j * s.sb[axis]]", "upd[ou]")
    source = f"""\
extern "C" __global__ void {name}({t}* __restrict__ y, const {it}* __restrict__ idx,
        const {t}* __restrict__ upd, i64 n, int rank, int axis, i64 count, i64 axis_len,
        NormShape s) {{
    {_LOOP} {{
        i64 r = i, ou = 0, oy = 0;
        for (int k = rank - 1; k >= 0; --k) {{
            i64 c = r % s.dims[k];
            r /= s.dims[k];
            ou += c * s.sa[k];
            oy += c * s.sb[k];
        }}
        for (i64 q = 0; q < count; ++q, ou += s.sa[axis]) {{
            i64 j = (i64)idx[ou];
            if (j < 0) j += axis_len;
            if (j < 0 || j >= axis_len) continue;
            {fold}
        }}
    }}
}}
"""
    params = (
        Param(f"{t}*", "y"),
        Param(f"const {it}*", "idx"),
        Param(f"const {t}*", "upd"),
        Param("i64", "n"),
        Param("int", "rank"),
        Param("int", "axis"),
        Param("i64", "count"),
        Param("i64", "axis_len"),
        Param("NormShape", "s"),
    )
    return Kernel(name, params, source, (SHAPE,))


@cache
def scatter_nd_kernel(key: str, reduction: str) -> Kernel:
    """ScatterND into ``y`` (a copy of the data): thread per element ``r`` of a
    slice (``inner`` elements), each going through the ``count`` index tuples
    in order: ``y[idx[t], r] = f(that, upd[t, r])``. ``s.dims``, ``s.sa``: the
    dims and strides of the data's ``k`` indexed axes (negative indices count
    from the end; a tuple out of range is skipped). ``key`` as for
    :func:`scatter_elements_kernel`."""
    if reduction not in REDUCTIONS:
        raise ValueError(f"no scatter reduction {reduction!r}")
    t = _scatter_ctype(key, reduction)
    name = f"norm_scatter_nd_{key}_{reduction}"
    fold = _fold(key, reduction, _ND_FOLD, "y[oy + i]", "upd[q * inner + i]")
    source = f"""\
extern "C" __global__ void {name}({t}* __restrict__ y, const long long* __restrict__ idx,
        const {t}* __restrict__ upd, i64 n, i64 count, int k, NormShape s) {{
    i64 inner = n;
    {_LOOP} {{
        for (i64 q = 0; q < count; ++q) {{
            i64 oy = 0;
            bool ok = true;
            for (int p = 0; p < k; ++p) {{
                i64 j = idx[q * k + p];
                if (j < 0) j += s.dims[p];
                ok = ok && j >= 0 && j < s.dims[p];
                oy += j * s.sa[p];
            }}
            if (!ok) continue;
            {fold}
        }}
    }}
}}
"""
    params = (
        Param(f"{t}*", "y"),
        Param("const long long*", "idx"),
        Param(f"const {t}*", "upd"),
        Param("i64", "n"),
        Param("i64", "count"),
        Param("int", "k"),
        Param("NormShape", "s"),
    )
    return Kernel(name, params, source, (SHAPE,))


def scatter_key(dtype: np.dtype, reduction: str) -> str | None:
    """The ``key`` of the scatter kernels for elements of ``dtype``, or ``None``
    when there is no kernel (a reduction of a type outside :data:`REDUCE_TYPES`)."""
    dtype = np.dtype(dtype)
    if reduction == "none":
        return f"b{dtype.itemsize}" if dtype.itemsize in WORDS else None
    return {
        np.dtype(np.float32): "f32",
        np.dtype(np.float16): "f16",
        np.dtype(np.int32): "i32",
        np.dtype(np.int64): "i64",
    }.get(dtype)


def all_kernels() -> list[Kernel]:
    """Every kernel of this module (for compiling them all at once)."""
    out: list[Kernel] = []
    for d in FLOAT_TYPES:
        out += [layernorm_kernel(d, s, b) for s in FLOAT_TYPES for b in (False, True)]
        out += [rms_kernel(d), mvn_kernel(d)]
    for size in WORDS:
        out += [fill_words_kernel(size), eyelike_kernel(size), tile_kernel(size)]
        out += [gather_nd_kernel(size)] + [onehot_kernel(size, i) for i in ONEHOT_INDEX]
        out += [gather_elements_kernel(size, i) for i in INDEX_TYPES]
        out += [scatter_elements_kernel(f"b{size}", "none", i) for i in INDEX_TYPES]
        out += [scatter_nd_kernel(f"b{size}", "none")]
    for key in REDUCE_TYPES:
        for red in REDUCTIONS[1:]:
            out += [scatter_elements_kernel(key, red, i) for i in INDEX_TYPES]
            out += [scatter_nd_kernel(key, red)]
    return out
