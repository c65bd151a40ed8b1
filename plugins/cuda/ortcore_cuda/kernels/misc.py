"""CUDA kernels of :mod:`ortcore_cuda.ops_misc`: selections whose output size
depends on the data (NonZero, Unique, NonMaxSuppression), IsInf and IsNaN,
Det, MaxUnpool and AffineGrid.

The data-dependent selections run in three steps, all on the device: a
kernel flags (or counts) what is kept, :func:`scan_kernel` (one block) turns
the counts into offsets and a total, the host reads the total back (one
number) to size the output, and a compaction kernel writes each kept item at
its offset.
"""

from __future__ import annotations

from functools import cache

import numpy as np

from .elementwise import BCAST
from .spec import DTYPES, Kernel, Param, Snippet, StructType, floating

__all__ = [
    "ITEM_TYPES",
    "SCAN_THREADS",
    "affine_grid_kernel",
    "all_kernels",
    "deform_args",
    "deform_conv_kernel",
    "det_kernel",
    "isinfnan_kernel",
    "maxunpool_kernel",
    "nms_select_kernel",
    "nms_write_kernel",
    "nonzero_flags_kernel",
    "nonzero_write_kernel",
    "scan_kernel",
    "unique_first_kernel",
    "unique_rank_kernel",
    "unique_write_kernel",
]

_LOOP = (
    "for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; "
    "i += (i64)gridDim.x * blockDim.x)"
)

ITEM_TYPES: dict[str, tuple[str, str, np.dtype]] = {
    "f32": ("float", "ukey", np.dtype(np.float32)),
    "f16": ("__half", "ukey", np.dtype(np.float16)),
    "f64": ("double", "ukey", np.dtype(np.float64)),
    "bf16": ("unsigned short", "bf16_key", np.dtype(np.uint16)),  # its bits
    "i8": ("signed char", "ukey", np.dtype(np.int8)),
    "i16": ("short", "ukey", np.dtype(np.int16)),
    "i32": ("int", "ukey", np.dtype(np.int32)),
    "i64": ("long long", "ukey", np.dtype(np.int64)),
    "u8": ("unsigned char", "ukey", np.dtype(np.uint8)),
    "u16": ("unsigned short", "ukey", np.dtype(np.uint16)),
    "u32": ("unsigned int", "ukey", np.dtype(np.uint32)),
    "u64": ("unsigned long long", "ukey", np.dtype(np.uint64)),
    "b": ("unsigned char", "ukey", np.dtype(np.bool_)),
}
"""Element types of NonZero and Unique: suffix -> (C type, the function that
makes an element a comparable value, numpy dtype). bfloat16 is read as its
bits and compared as the float they are the top half of."""

KEYS = Snippet(
    "misc_keys",
    """\
// An element as a value to compare: float16 and bfloat16 as float, the others as themselves.
__device__ __forceinline__ float ukey(__half v) { return __half2float(v); }
template <typename T> __device__ __forceinline__ T ukey(T v) { return v; }
__device__ __forceinline__ float bf16_key(unsigned short v) {
    union { unsigned int u; float f; } c;
    c.u = (unsigned int)v << 16;
    return c.f;
}
// Equal, with NaN equal to NaN; less, with NaN after every number (numpy's sort order).
template <typename T> __device__ __forceinline__ bool ueq(T a, T b) {
    return a == b || (a != a && b != b);
}
template <typename T> __device__ __forceinline__ bool ult(T a, T b) {
    return (b != b) ? (a == a) : (a < b);
}
""",
)

SCAN_THREADS = 256
"""The most threads :func:`scan_kernel` is launched with (its shared array)."""


@cache
def scan_kernel() -> Kernel:
    """``offsets[i] = counts[0] + ... + counts[i-1]`` for ``i <= n`` and
    ``total[0] = offsets[n]``: an exclusive scan of int64 counts by the first
    block alone (any other block returns), in chunks of ``blockDim.x``
    (at most :data:`SCAN_THREADS`), each scanned in shared memory."""
    name = "misc_scan"
    source = f"""\
extern "C" __global__ void {name}(const i64* __restrict__ counts, i64* __restrict__ offsets,
                                  i64* __restrict__ total, i64 n) {{
    __shared__ i64 part[{SCAN_THREADS}];
    if (blockIdx.x != 0) return;
    i64 carry = 0;
    for (i64 base = 0; base < n; base += blockDim.x) {{
        i64 i = base + threadIdx.x;
        i64 v = i < n ? counts[i] : 0;
        part[threadIdx.x] = v;
        __syncthreads();
        for (unsigned s = 1; s < blockDim.x; s <<= 1) {{
            i64 add = threadIdx.x >= s ? part[threadIdx.x - s] : 0;
            __syncthreads();
            part[threadIdx.x] += add;
            __syncthreads();
        }}
        if (i < n) offsets[i] = carry + part[threadIdx.x] - v;
        carry += part[blockDim.x - 1];
        __syncthreads();
    }}
    if (threadIdx.x == 0) {{
        offsets[n] = carry;
        total[0] = carry;
    }}
}}
"""
    params = (
        Param("const i64*", "counts"),
        Param("i64*", "offsets"),
        Param("i64*", "total"),
        Param("i64", "n"),
    )
    return Kernel(name, params, source)


@cache
@floating
def isinfnan_kernel(dtype: str) -> Kernel:
    """``y[i]`` (bool) whether ``x[i]`` is NaN (``mode`` 0), +inf (1), -inf
    (2) or either infinity (3)."""
    ctype = DTYPES[dtype][0]
    name = f"isinfnan_{dtype}"
    source = f"""\
extern "C" __global__ void {name}(const {ctype}* __restrict__ x, unsigned char* __restrict__ y,
                                  i64 n, int mode) {{
    {_LOOP} {{
        float v = load_f(x[i]);
        bool r = mode == 0 ? v != v
               : mode == 1 ? v == INFINITY
               : mode == 2 ? v == -INFINITY
               : (v == INFINITY || v == -INFINITY);
        y[i] = r ? 1 : 0;
    }}
}}
"""
    params = (
        Param(f"const {ctype}*", "x"),
        Param("unsigned char*", "y"),
        Param("i64", "n"),
        Param("int", "mode"),
    )
    return Kernel(name, params, source)


# -- NonZero ----------------------------------------------------------------------------


@cache
def nonzero_flags_kernel(dtype: str) -> Kernel:
    """``flags[i] = x[i] != 0`` (as int64; NaN is not zero) of an :data:`ITEM_TYPES` type."""
    ctype, key, _ = ITEM_TYPES[dtype]
    name = f"nonzero_flags_{dtype}"
    source = f"""\
extern "C" __global__ void {name}(const {ctype}* __restrict__ x, i64* __restrict__ flags, i64 n) {{
    {_LOOP} flags[i] = {key}(x[i]) != 0 ? 1 : 0;
}}
"""
    params = (Param(f"const {ctype}*", "x"), Param("i64*", "flags"), Param("i64", "n"))
    return Kernel(name, params, source, (KEYS,))


@cache
def nonzero_write_kernel() -> Kernel:
    """For each flagged ``i`` (``offsets[i+1] > offsets[i]``): its coordinates
    over ``s.dims`` (``rank`` of them) to ``y[k * total + offsets[i]]``."""
    name = "nonzero_write"
    source = f"""\
extern "C" __global__ void {name}(const i64* __restrict__ offsets, i64* __restrict__ y, i64 n,
                                  i64 total, int rank, Bcast s) {{
    {_LOOP} {{
        i64 at = offsets[i];
        if (offsets[i + 1] == at) continue;
        i64 r = i;
        for (int k = rank - 1; k >= 0; --k) {{
            y[k * total + at] = r % s.dims[k];
            r /= s.dims[k];
        }}
    }}
}}
"""
    params = (
        Param("const i64*", "offsets"),
        Param("i64*", "y"),
        Param("i64", "n"),
        Param("i64", "total"),
        Param("int", "rank"),
        Param("Bcast", "s"),
    )
    return Kernel(name, params, source, (BCAST,))


# -- Unique -------------------------------------------------------------------------------


def _rows(dtype: str) -> Snippet:
    ctype, key, _ = ITEM_TYPES[dtype]
    return Snippet(
        f"misc_rows_{dtype}",
        f"""\
// Items a and b (rows of len elements) equal, and a before b in lexicographic order.
__device__ __forceinline__ bool row_eq_{dtype}(const {ctype}* x, i64 a, i64 b, i64 len) {{
    for (i64 k = 0; k < len; ++k)
        if (!ueq({key}(x[a * len + k]), {key}(x[b * len + k]))) return false;
    return true;
}}
__device__ __forceinline__ bool row_lt_{dtype}(const {ctype}* x, i64 a, i64 b, i64 len) {{
    for (i64 k = 0; k < len; ++k) {{
        if (ueq({key}(x[a * len + k]), {key}(x[b * len + k]))) continue;
        return ult({key}(x[a * len + k]), {key}(x[b * len + k]));
    }}
    return false;
}}
""",
    )


@cache
def unique_first_kernel(dtype: str) -> Kernel:
    """``first[i]``: the first item equal to item ``i`` (of ``n`` items of ``len`` elements);
    ``flags[i] = first[i] == i``."""
    ctype = ITEM_TYPES[dtype][0]
    name = f"unique_first_{dtype}"
    source = f"""\
extern "C" __global__ void {name}(const {ctype}* __restrict__ x, i64* __restrict__ first,
                                  i64* __restrict__ flags, i64 n, i64 len) {{
    {_LOOP} {{
        i64 f = i;
        for (i64 j = 0; j < i; ++j)
            if (row_eq_{dtype}(x, j, i, len)) {{ f = j; break; }}
        first[i] = f;
        flags[i] = f == i ? 1 : 0;
    }}
}}
"""
    params = (
        Param(f"const {ctype}*", "x"),
        Param("i64*", "first"),
        Param("i64*", "flags"),
        Param("i64", "n"),
        Param("i64", "len"),
    )
    return Kernel(name, params, source, (KEYS, _rows(dtype)))


@cache
def unique_rank_kernel(dtype: str) -> Kernel:
    """For each first occurrence ``i``: ``pos[i]``, the number of distinct
    items before it (in sorted order when ``sorted``, else in order of first
    occurrence)."""
    ctype = ITEM_TYPES[dtype][0]
    name = f"unique_rank_{dtype}"
    source = f"""\
extern "C" __global__ void {name}(const {ctype}* __restrict__ x, const i64* __restrict__ first,
                                  i64* __restrict__ pos, i64 n, i64 len, int sorted) {{
    {_LOOP} {{
        if (first[i] != i) continue;
        i64 p = 0;
        for (i64 j = 0; j < n; ++j)
            if (first[j] == j && (sorted ? row_lt_{dtype}(x, j, i, len) : j < i)) ++p;
        pos[i] = p;
    }}
}}
"""
    params = (
        Param(f"const {ctype}*", "x"),
        Param("const i64*", "first"),
        Param("i64*", "pos"),
        Param("i64", "n"),
        Param("i64", "len"),
        Param("int", "sorted"),
    )
    return Kernel(name, params, source, (KEYS, _rows(dtype)))


@cache
def unique_write_kernel(itemsize: int) -> Kernel:
    """For each item ``i``: ``inverse[i] = pos[first[i]]``; for a first
    occurrence, its row to ``y[pos[i]]``, ``indices[pos[i]] = i`` and
    ``counts[pos[i]]``, the number of items equal to it."""
    word = {1: "unsigned char", 2: "unsigned short", 4: "unsigned int", 8: "unsigned long long"}[
        itemsize
    ]
    name = f"unique_write_b{itemsize}"
    source = f"""\
extern "C" __global__ void {name}(const {word}* __restrict__ x, const i64* __restrict__ first,
                                  const i64* __restrict__ pos, {word}* __restrict__ y,
                                  i64* __restrict__ indices, i64* __restrict__ inverse,
                                  i64* __restrict__ counts, i64 n, i64 len) {{
    {_LOOP} {{
        i64 f = first[i];
        i64 p = pos[f];
        inverse[i] = p;
        if (f != i) continue;
        indices[p] = i;
        for (i64 k = 0; k < len; ++k) y[p * len + k] = x[i * len + k];
        i64 c = 0;
        for (i64 j = i; j < n; ++j) c += first[j] == i;
        counts[p] = c;
    }}
}}
"""
    params = (
        Param(f"const {word}*", "x"),
        Param("const i64*", "first"),
        Param("const i64*", "pos"),
        Param(f"{word}*", "y"),
        Param("i64*", "indices"),
        Param("i64*", "inverse"),
        Param("i64*", "counts"),
        Param("i64", "n"),
        Param("i64", "len"),
    )
    return Kernel(name, params, source)


# -- NonMaxSuppression ------------------------------------------------------------------

_SUPPRESS = Snippet(
    "nms_suppress",
    """\
// Whether box a suppresses box b: their intersection over union > iou (ONNX's reference,
// corners in any order, or centers and sizes when center != 0).
__device__ bool nms_suppress(const float* a, const float* b, int center, float iou) {
    float ax0, ax1, ay0, ay1, bx0, bx1, by0, by1;
    if (center == 0) {
        ax0 = fminf(a[1], a[3]); ax1 = fmaxf(a[1], a[3]);
        bx0 = fminf(b[1], b[3]); bx1 = fmaxf(b[1], b[3]);
        ay0 = fminf(a[0], a[2]); ay1 = fmaxf(a[0], a[2]);
        by0 = fminf(b[0], b[2]); by1 = fmaxf(b[0], b[2]);
    } else {
        float aw = a[2] / 2.0f, ah = a[3] / 2.0f, bw = b[2] / 2.0f, bh = b[3] / 2.0f;
        ax0 = a[0] - aw; ax1 = a[0] + aw; bx0 = b[0] - bw; bx1 = b[0] + bw;
        ay0 = a[1] - ah; ay1 = a[1] + ah; by0 = b[1] - bh; by1 = b[1] + bh;
    }
    float ix0 = fmaxf(ax0, bx0), ix1 = fminf(ax1, bx1);
    if (ix1 <= ix0) return false;
    float iy0 = fmaxf(ay0, by0), iy1 = fminf(ay1, by1);
    if (iy1 <= iy0) return false;
    float inter = (ix1 - ix0) * (iy1 - iy0);
    if (inter <= 0.0f) return false;
    float area_a = (ax1 - ax0) * (ay1 - ay0);
    float area_b = (bx1 - bx0) * (by1 - by0);
    float uni = area_a + area_b - inter;
    if (area_a <= 0.0f || area_b <= 0.0f || uni <= 0.0f) return false;
    return inter / uni > iou;
}
""",
)


@cache
def nms_select_kernel() -> Kernel:
    """One block per (batch, class) (grid-stride over them): the candidate
    boxes (score above ``score_thr`` when ``has_thr``) ranked by score
    (ties: the lower index first) into ``order``, then greedily selected
    in that order, a box kept unless a kept one suppresses it (the block's
    threads test the kept boxes in parallel), at most ``max_out``:
    ``sel[bc * nboxes + k]`` the k-th kept box, ``counts[bc]`` how many."""
    name = "nms_select"
    source = f"""\
extern "C" __global__ void {name}(const float* __restrict__ boxes, const float* __restrict__ scores,
                                  i64* __restrict__ order, i64* __restrict__ sel,
                                  i64* __restrict__ counts, i64 classes, i64 nboxes, i64 pairs,
                                  i64 max_out, float iou, float score_thr, int has_thr,
                                  int center) {{
    __shared__ i64 m;
    __shared__ i64 kept;
    __shared__ int keep;
    for (i64 bc = blockIdx.x; bc < pairs; bc += gridDim.x) {{
        const float* s = scores + bc * nboxes;
        const float* bx = boxes + (bc / classes) * nboxes * 4;
        i64* ord = order + bc * nboxes;
        i64* out = sel + bc * nboxes;
        for (i64 i = threadIdx.x; i < nboxes; i += blockDim.x) {{
            if (has_thr && !(s[i] > score_thr)) continue;
            i64 r = 0;
            for (i64 j = 0; j < nboxes; ++j) {{
                if (has_thr && !(s[j] > score_thr)) continue;
                if (s[j] > s[i] || (s[j] == s[i] && j < i)) ++r;
            }}
            ord[r] = i;
        }}
        if (threadIdx.x == 0) {{
            i64 c = 0;
            for (i64 j = 0; j < nboxes; ++j) c += !has_thr || s[j] > score_thr;
            m = c;
            kept = 0;
        }}
        __syncthreads();
        for (i64 k = 0; k < m && kept < max_out; ++k) {{
            i64 i = ord[k];
            if (threadIdx.x == 0) keep = 1;
            __syncthreads();
            for (i64 t = threadIdx.x; t < kept; t += blockDim.x)
                if (nms_suppress(bx + i * 4, bx + out[t] * 4, center, iou)) keep = 0;
            __syncthreads();
            if (threadIdx.x == 0 && keep) {{
                out[kept] = i;
                kept = kept + 1;
            }}
            __syncthreads();
        }}
        if (threadIdx.x == 0) counts[bc] = kept;
        __syncthreads();
    }}
}}
"""
    params = (
        Param("const float*", "boxes"),
        Param("const float*", "scores"),
        Param("i64*", "order"),
        Param("i64*", "sel"),
        Param("i64*", "counts"),
        Param("i64", "classes"),
        Param("i64", "nboxes"),
        Param("i64", "pairs"),
        Param("i64", "max_out"),
        Param("float", "iou"),
        Param("float", "score_thr"),
        Param("int", "has_thr"),
        Param("int", "center"),
    )
    return Kernel(name, params, source, (_SUPPRESS,))


@cache
def nms_write_kernel() -> Kernel:
    """The selected boxes as rows ``(batch, class, box)`` of ``y``, pair
    ``bc``'s ``k``-th at row ``offsets[bc] + k``."""
    name = "nms_write"
    source = f"""\
extern "C" __global__ void {name}(const i64* __restrict__ sel, const i64* __restrict__ offsets,
                                  i64* __restrict__ y, i64 classes, i64 nboxes, i64 n) {{
    {_LOOP} {{
        i64 bc = i / nboxes, k = i % nboxes;
        if (k >= offsets[bc + 1] - offsets[bc]) continue;
        i64* row = y + (offsets[bc] + k) * 3;
        row[0] = bc / classes;
        row[1] = bc % classes;
        row[2] = sel[i];
    }}
}}
"""
    params = (
        Param("const i64*", "sel"),
        Param("const i64*", "offsets"),
        Param("i64*", "y"),
        Param("i64", "classes"),
        Param("i64", "nboxes"),
        Param("i64", "n"),
    )
    return Kernel(name, params, source)


# -- Det, MaxUnpool, AffineGrid --------------------------------------------------------------


@cache
@floating
def det_kernel(dtype: str) -> Kernel:
    """One thread per matrix (grid-stride over ``n`` of them, each ``m x m``):
    its LU decomposition with partial pivoting in ``work`` (float, ``n*m*m``),
    the determinant the product of the pivots, its sign flipped per swap."""
    ctype = DTYPES[dtype][0]
    name = f"det_{dtype}"
    source = f"""\
extern "C" __global__ void {name}(const {ctype}* __restrict__ x, float* __restrict__ work,
                                  {ctype}* __restrict__ y, i64 n, i64 m) {{
    {_LOOP} {{
        float* a = work + i * m * m;
        for (i64 k = 0; k < m * m; ++k) a[k] = load_f(x[i * m * m + k]);
        float det = 1.0f;
        for (i64 c = 0; c < m; ++c) {{
            i64 p = c;
            for (i64 r = c + 1; r < m; ++r)
                if (fabsf(a[r * m + c]) > fabsf(a[p * m + c])) p = r;
            if (p != c) {{
                for (i64 k = 0; k < m; ++k) {{
                    float t = a[c * m + k]; a[c * m + k] = a[p * m + k]; a[p * m + k] = t;
                }}
                det = -det;
            }}
            float pivot = a[c * m + c];
            det *= pivot;
            if (pivot == 0.0f) break;
            for (i64 r = c + 1; r < m; ++r) {{
                float f = a[r * m + c] / pivot;
                for (i64 k = c; k < m; ++k) a[r * m + k] -= f * a[c * m + k];
            }}
        }}
        store_f(&y[i], det);
    }}
}}
"""
    params = (
        Param(f"const {ctype}*", "x"),
        Param("float*", "work"),
        Param(f"{ctype}*", "y"),
        Param("i64", "n"),
        Param("i64", "m"),
    )
    return Kernel(name, params, source)


@cache
def maxunpool_kernel(dtype: str) -> Kernel:
    """``y[indices[i]] = x[i]`` (indices into the flattened output of ``size``
    elements; one out of range is skipped)."""
    ctype = DTYPES[dtype][0]
    name = f"maxunpool_{dtype}"
    source = f"""\
extern "C" __global__ void {name}(const {ctype}* __restrict__ x, const i64* __restrict__ indices,
                                  {ctype}* __restrict__ y, i64 n, i64 size) {{
    {_LOOP} {{
        i64 at = indices[i];
        if (at >= 0 && at < size) y[at] = x[i];
    }}
}}
"""
    params = (
        Param(f"const {ctype}*", "x"),
        Param("const i64*", "indices"),
        Param(f"{ctype}*", "y"),
        Param("i64", "n"),
        Param("i64", "size"),
    )
    return Kernel(name, params, source)


_AFFINE_BASE = Snippet(
    "affine_base",
    """\
// The normalized coordinate of index i of size (numpy's arange, as ONNX's reference).
__device__ __forceinline__ double affine_base(i64 i, i64 size, int align) {
    if (align) return size > 1 ? -1.0 + (double)i * (2.0 / (double)(size - 1)) : -1.0;
    double step = 2.0 / (double)size;
    return -1.0 + step / 2.0 + (double)i * step;
}
""",
)


@cache
def affine_grid_kernel(dtype: str) -> Kernel:
    """AffineGrid: for each output point ``(b, [d,] h, w)`` of ``n``, the
    normalized coordinates (``x`` along W, ``y`` along H, ``z`` along D;
    ``-1 + (2i+1)/size``, or ``-1 + 2i/(size-1)`` with ``align``) mapped by
    ``theta[b]`` (``dims x (dims+1)``), computed in double. ``dims`` is 2 or 3
    (``depth`` 1 for 2)."""
    ctype = DTYPES[dtype][0]
    name = f"affine_grid_{dtype}"
    acc = "double" if dtype == "f64" else "float"
    source = f"""\
extern "C" __global__ void {name}(const {ctype}* __restrict__ theta, {ctype}* __restrict__ y,
                                  i64 n, i64 depth, i64 height, i64 width, int dims, int align) {{
    {_LOOP} {{
        i64 r = i;
        i64 w = r % width; r /= width;
        i64 h = r % height; r /= height;
        i64 d = r % depth; r /= depth;
        double base[4];
        base[0] = affine_base(w, width, align);
        base[1] = affine_base(h, height, align);
        base[2] = affine_base(d, depth, align);
        base[dims] = 1.0;
        const {ctype}* t = theta + r * dims * (dims + 1);
        for (int k = 0; k < dims; ++k) {{
            double v = 0.0;
            for (int j = 0; j <= dims; ++j) v += (double)load_f(t[k * (dims + 1) + j]) * base[j];
            store_f(&y[i * dims + k], ({acc})v);
        }}
    }}
}}
"""
    params = (
        Param(f"const {ctype}*", "theta"),
        Param(f"{ctype}*", "y"),
        Param("i64", "n"),
        Param("i64", "depth"),
        Param("i64", "height"),
        Param("i64", "width"),
        Param("int", "dims"),
        Param("int", "align"),
    )
    return Kernel(name, params, source, (_AFFINE_BASE,))


DEFORM = StructType(
    "DeformArgs",
    "struct DeformArgs { i64 v[16]; };",
    np.dtype([("v", "<i8", (16,))]),
)
"""DeformConv's sizes (see :func:`deform_args`)."""


def deform_args(
    n: int,
    ic: int,
    ih: int,
    iw: int,
    oc: int,
    oh: int,
    ow: int,
    kh: int,
    kw: int,
    sh: int,
    sw: int,
    ph: int,
    pw: int,
    dh: int,
    dw: int,
    groups: int,
    offset_groups: int,
) -> np.ndarray:
    """The ``DeformArgs`` of a 2-D DeformConv (groups and offset groups share
    the last slot: ``groups << 32 | offset_groups``)."""
    values = [n, ic, ih, iw, oc, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw]
    values.append((groups << 32) | offset_groups)
    return DEFORM.pack(v=values)


@cache
@floating
def deform_conv_kernel(dtype: str) -> Kernel:
    """2-D DeformConv, one thread per output element (grid-stride over ``n``
    of them): the sum over its group's input channels and the kernel taps of
    the input sampled bilinearly (zeros outside) at the tap's position moved
    by its offset, times the weight and the mask (``has_mask``), plus the
    bias (``has_bias``)."""
    ctype = DTYPES[dtype][0]
    name = f"deform_conv_{dtype}"
    source = f"""\
extern "C" __global__ void {name}(const {ctype}* __restrict__ x, const {ctype}* __restrict__ w,
                                  const {ctype}* __restrict__ off, const {ctype}* __restrict__ bias,
                                  const {ctype}* __restrict__ mask, {ctype}* __restrict__ y,
                                  i64 n, DeformArgs a, int has_bias, int has_mask) {{
    i64 IC = a.v[1], IH = a.v[2], IW = a.v[3], OC = a.v[4], OH = a.v[5], OW = a.v[6];
    i64 KH = a.v[7], KW = a.v[8], SH = a.v[9], SW = a.v[10], PH = a.v[11], PW = a.v[12];
    i64 DH = a.v[13], DW = a.v[14];
    i64 G = a.v[15] >> 32, OG = a.v[15] & 0xffffffffLL;
    i64 icpg = IC / G, ocpg = OC / G, icpog = IC / OG;
    {_LOOP} {{
        i64 r = i;
        i64 oj = r % OW; r /= OW;
        i64 oi = r % OH; r /= OH;
        i64 oc = r % OC; i64 b = r / OC;
        float acc = has_bias ? load_f(bias[oc]) : 0.0f;
        i64 g = oc / ocpg;
        for (i64 cg = 0; cg < icpg; ++cg) {{
            i64 ic = g * icpg + cg, og = ic / icpog;
            const {ctype}* xc = x + (b * IC + ic) * IH * IW;
            for (i64 ki = 0; ki < KH; ++ki) {{
                for (i64 kj = 0; kj < KW; ++kj) {{
                    i64 tap = ((b * OG + og) * KH + ki) * KW + kj;
                    i64 at = oi * OW + oj, plane = OH * OW;
                    const {ctype}* o = off + tap * 2 * plane + at;
                    float ph = (float)(SH * oi + ki * DH - PH) + load_f(o[0]);
                    float pw = (float)(SW * oj + kj * DW - PW) + load_f(o[plane]);
                    float m = has_mask ? load_f(mask[tap * plane + at]) : 1.0f;
                    float h0f = floorf(ph), w0f = floorf(pw);
                    float fh = ph - h0f, fw = pw - w0f;
                    i64 h0 = (i64)h0f, w0 = (i64)w0f;
                    float v = 0.0f;
                    for (int dy = 0; dy < 2; ++dy) {{
                        for (int dx = 0; dx < 2; ++dx) {{
                            i64 hh = h0 + dy, ww = w0 + dx;
                            if (hh < 0 || hh >= IH || ww < 0 || ww >= IW) continue;
                            float wt = (dy ? fh : 1.0f - fh) * (dx ? fw : 1.0f - fw);
                            v += wt * load_f(xc[hh * IW + ww]);
                        }}
                    }}
                    acc += v * load_f(w[((oc * icpg + cg) * KH + ki) * KW + kj]) * m;
                }}
            }}
        }}
        store_f(&y[i], acc);
    }}
}}
"""
    params = (
        Param(f"const {ctype}*", "x"),
        Param(f"const {ctype}*", "w"),
        Param(f"const {ctype}*", "off"),
        Param(f"const {ctype}*", "bias"),
        Param(f"const {ctype}*", "mask"),
        Param(f"{ctype}*", "y"),
        Param("i64", "n"),
        Param("DeformArgs", "a"),
        Param("int", "has_bias"),
        Param("int", "has_mask"),
    )
    return Kernel(name, params, source, (DEFORM,))


def all_kernels() -> list[Kernel]:
    """Every kernel of this module (for compiling them all at once)."""
    out: list[Kernel] = [scan_kernel(), nonzero_write_kernel()]
    out += [nms_select_kernel(), nms_write_kernel()]
    for dtype in DTYPES:
        out += [isinfnan_kernel(dtype), det_kernel(dtype), maxunpool_kernel(dtype)]
        out += [affine_grid_kernel(dtype), deform_conv_kernel(dtype)]
    for dtype in ITEM_TYPES:
        out += [nonzero_flags_kernel(dtype), unique_first_kernel(dtype), unique_rank_kernel(dtype)]
    out += [unique_write_kernel(size) for size in (1, 2, 4, 8)]
    return out
