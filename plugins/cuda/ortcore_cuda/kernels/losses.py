"""CUDA kernels of :mod:`ortcore_cuda.ops_losses`: the losses
(SoftmaxCrossEntropyLoss, NegativeLogLikelihoodLoss), the scans (CumSum,
CumProd) and the selections along an axis (Hardmax, TopK, LpNormalization,
ReverseSequence).

Most work along one axis of a tensor viewed as ``[outer, L, inner]`` (the
axis has ``L`` elements, ``inner`` is the product of the dims after it):

* one thread per ``(outer, inner)`` position, in a grid-stride loop, walks
  the ``L`` elements of its line: :func:`scan_kernel`, :func:`hardmax_kernel`,
  :func:`lpnorm_kernel`, :func:`log_softmax_axis_kernel`;
* TopK: one thread per element counts the elements of its line that come
  before it (larger, or equal at a lower index, as ONNX breaks ties): its
  rank; the element goes to output slot ``rank`` when ``rank < k``, so the
  output is sorted with no sort.

The losses: :func:`nll_kernel` gives each position's weighted loss (and its
weight); ``reduction=sum`` and ``mean`` then fold them in one block
(:func:`loss_reduce_kernel`: a strided sum per thread, then a shared-memory
tree), ``mean`` dividing by the sum of the weights.
"""

from __future__ import annotations

from functools import cache

import numpy as np

from .spec import Kernel, Param, Snippet, StructType

__all__ = [
    "LOSS_TYPES",
    "REDUCE_THREADS",
    "SCAN_TYPES",
    "TOPK_TYPES",
    "VALUE_TYPES",
    "WORDS",
    "EINSUM",
    "EINSUM_LETTERS",
    "all_kernels",
    "einsum_kernel",
    "hardmax_kernel",
    "log_softmax_axis_kernel",
    "log_softmax_lines_kernel",
    "loss_reduce_kernel",
    "lpnorm_kernel",
    "nll_kernel",
    "reverse_sequence_kernel",
    "scan_kernel",
    "topk_kernel",
]

_TYPES: dict[str, tuple[str, str]] = {
    "f32": ("float", "float"),
    "f16": ("__half", "float"),
    "f64": ("double", "double"),
    "i32": ("int", "int"),
    "i64": ("i64", "i64"),
    "u64": ("unsigned long long", "unsigned long long"),
}
"""Element types: suffix -> (C type, the type it is computed in)."""

LOSS_TYPES = ("f32", "f16")
"""Element types of the losses."""
VALUE_TYPES = ("f32", "f16", "f64")
"""Element types of Hardmax and LpNormalization."""
SCAN_TYPES = ("f32", "f16", "f64", "i32", "i64")
"""Element types of CumSum and CumProd."""
TOPK_TYPES = ("f32", "f16", "f64", "i32", "i64", "u64")
"""Element types of TopK."""
WORDS = {1: "unsigned char", 2: "unsigned short", 4: "unsigned int", 8: "unsigned long long"}
"""Element sizes ReverseSequence moves, and their C types."""

REDUCE_THREADS = 256
"""The block size of :func:`loss_reduce_kernel` (a power of two)."""

_LOOP = (
    "for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; "
    "i += (i64)gridDim.x * blockDim.x)"
)


def _load(dtype: str, expr: str) -> str:
    """``expr`` (an element of ``dtype``) in its compute type."""
    return f"__half2float({expr})" if dtype == "f16" else f"({_TYPES[dtype][1]})({expr})"


def _store(dtype: str, expr: str) -> str:
    """``expr`` (a compute-type value) as an element of ``dtype``."""
    return f"__float2half({expr})" if dtype == "f16" else f"({_TYPES[dtype][0]})({expr})"


# -- the losses ----------------------------------------------------------------------


@cache
def log_softmax_axis_kernel(dtype: str) -> Kernel:
    """LogSoftmax over axis 1 of ``[N, C, D]``: one thread per ``(n, d)``
    (``n`` positions in all), the max, then the log of the sum of exps.
    NaN propagates along its line."""
    ctype = _TYPES[dtype][0]
    name = f"log_softmax_axis_{dtype}"
    source = f"""\
extern "C" __global__ void {name}(const {ctype}* __restrict__ x, {ctype}* __restrict__ y,
                                  i64 n, i64 C, i64 D) {{
    {_LOOP} {{
        i64 base = (i / D) * C * D + i % D;
        float m = -INFINITY;
        for (i64 c = 0; c < C; ++c) {{
            float v = {_load(dtype, "x[base + c * D]")};
            m = (v > m || v != v) ? v : m;
        }}
        float s = 0.0f;
        for (i64 c = 0; c < C; ++c) s += expf({_load(dtype, "x[base + c * D]")} - m);
        float lse = logf(s);
        for (i64 c = 0; c < C; ++c)
            y[base + c * D] = {_store(dtype, f"({_load(dtype, 'x[base + c * D]')} - m) - lse")};
    }}
}}
"""
    params = (
        Param(f"const {ctype}*", "x"),
        Param(f"{ctype}*", "y"),
        Param("i64", "n"),
        Param("i64", "C"),
        Param("i64", "D"),
    )
    return Kernel(name, params, source)


LINE_TREE = Snippet(
    "loss_line_tree",
    f"""\
// The block's max (op 1) or sum (op 0) of v through shared memory; every thread
// calls it; blockDim.x a power of two <= {REDUCE_THREADS}. NaN wins a max.
__device__ float loss_line_tree(float v, int op) {{
    __shared__ float slots[{REDUCE_THREADS}];
    slots[threadIdx.x] = v;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {{
        if (threadIdx.x < s) {{
            float o = slots[threadIdx.x + s], m = slots[threadIdx.x];
            slots[threadIdx.x] = op ? ((o > m || o != o) ? o : m) : m + o;
        }}
        __syncthreads();
    }}
    float out = slots[0];
    __syncthreads();
    return out;
}}
""",
)


@cache
def log_softmax_lines_kernel(dtype: str) -> Kernel:
    """LogSoftmax over axis 1 of ``[N, C, D]`` for long lines: one block per
    ``(n, d)`` (grid-stride over the ``n`` lines), its threads striding over
    ``C``, combined by a shared-memory tree (launch with a power-of-two
    block up to :data:`REDUCE_THREADS`)."""
    ctype = _TYPES[dtype][0]
    name = f"log_softmax_lines_{dtype}"
    x_at = _load(dtype, "x[base + c * D]")
    source = f"""\
extern "C" __global__ void {name}(const {ctype}* __restrict__ x, {ctype}* __restrict__ y,
                                  i64 n, i64 C, i64 D) {{
    for (i64 line = blockIdx.x; line < n; line += gridDim.x) {{
        i64 base = (line / D) * C * D + line % D;
        float m = -INFINITY;
        for (i64 c = threadIdx.x; c < C; c += blockDim.x) {{
            float v = {x_at};
            m = (v > m || v != v) ? v : m;
        }}
        m = loss_line_tree(m, 1);
        float s = 0.0f;
        for (i64 c = threadIdx.x; c < C; c += blockDim.x) s += expf({x_at} - m);
        float lse = logf(loss_line_tree(s, 0));
        for (i64 c = threadIdx.x; c < C; c += blockDim.x)
            y[base + c * D] = {_store(dtype, f"({x_at} - m) - lse")};
    }}
}}
"""
    params = (
        Param(f"const {ctype}*", "x"),
        Param(f"{ctype}*", "y"),
        Param("i64", "n"),
        Param("i64", "C"),
        Param("i64", "D"),
    )
    return Kernel(name, params, source, (LINE_TREE,))


@cache
def nll_kernel(dtype: str) -> Kernel:
    """Each position's negative log likelihood, ``-x[n, t, d] * w`` with
    ``t = target[n, d]`` and ``w = weight[t]`` (1 without weights, 0 where
    ``t`` is the ignore index). ``x`` is ``[N, C, D]``, ``n`` = N * D
    positions. With ``reduce`` 0 the loss goes to ``y`` (``[N, D]``);
    else the loss and the weight go to the float buffers ``loss`` and
    ``wsum`` for :func:`loss_reduce_kernel`. A target outside ``[0, C)``
    (and not ignored) gives NaN. Null pointers stand for what is unused."""
    ctype = _TYPES[dtype][0]
    name = f"nll_{dtype}"
    source = f"""\
extern "C" __global__ void {name}(const {ctype}* __restrict__ x, const i64* __restrict__ target,
                                  const {ctype}* __restrict__ weight, {ctype}* __restrict__ y,
                                  float* __restrict__ loss, float* __restrict__ wsum,
                                  i64 n, i64 C, i64 D, i64 ignore_index, int has_ignore,
                                  int reduce) {{
    {_LOOP} {{
        i64 t = target[i];
        float l, w;
        if (has_ignore && t == ignore_index) {{
            l = 0.0f;
            w = 0.0f;
        }} else if (t < 0 || t >= C) {{
            l = NAN;
            w = NAN;
        }} else {{
            w = weight ? {_load(dtype, "weight[t]")} : 1.0f;
            l = -{_load(dtype, "x[((i / D) * C + t) * D + i % D]")} * w;
        }}
        if (reduce) {{
            loss[i] = l;
            wsum[i] = w;
        }} else {{
            y[i] = {_store(dtype, "l")};
        }}
    }}
}}
"""
    params = (
        Param(f"const {ctype}*", "x"),
        Param("const i64*", "target"),
        Param(f"const {ctype}*", "weight"),
        Param(f"{ctype}*", "y"),
        Param("float*", "loss"),
        Param("float*", "wsum"),
        Param("i64", "n"),
        Param("i64", "C"),
        Param("i64", "D"),
        Param("i64", "ignore_index"),
        Param("int", "has_ignore"),
        Param("int", "reduce"),
    )
    return Kernel(name, params, source)


PAIR_TREE = Snippet(
    "loss_pair_tree",
    f"""\
// The block's sums of a and b through shared memory; every thread calls it;
// blockDim.x a power of two <= {REDUCE_THREADS}.
__device__ void loss_pair_tree(float *a, float *b) {{
    __shared__ float sa[{REDUCE_THREADS}];
    __shared__ float sb[{REDUCE_THREADS}];
    sa[threadIdx.x] = *a;
    sb[threadIdx.x] = *b;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {{
        if (threadIdx.x < s) {{
            sa[threadIdx.x] += sa[threadIdx.x + s];
            sb[threadIdx.x] += sb[threadIdx.x + s];
        }}
        __syncthreads();
    }}
    *a = sa[0];
    *b = sb[0];
    __syncthreads();
}}
""",
)


@cache
def loss_reduce_kernel(dtype: str) -> Kernel:
    """``y[0] = sum(loss)`` (``mean`` 0) or ``sum(loss) / sum(wsum)``
    (``mean`` 1), over ``n`` floats, in one block (launch ``<<<1,
    REDUCE_THREADS>>>``; any power of two up to it works)."""
    ctype = _TYPES[dtype][0]
    name = f"loss_reduce_{dtype}"
    source = f"""\
extern "C" __global__ void {name}(const float* __restrict__ loss, const float* __restrict__ wsum,
                                  {ctype}* __restrict__ y, i64 n, int mean) {{
    float a = 0.0f, b = 0.0f;
    for (i64 i = threadIdx.x; i < n; i += blockDim.x) {{
        a += loss[i];
        b += wsum[i];
    }}
    loss_pair_tree(&a, &b);
    if (threadIdx.x == 0 && blockIdx.x == 0) y[0] = {_store(dtype, "mean ? a / b : a")};
}}
"""
    params = (
        Param("const float*", "loss"),
        Param("const float*", "wsum"),
        Param(f"{ctype}*", "y"),
        Param("i64", "n"),
        Param("int", "mean"),
    )
    return Kernel(name, params, source, (PAIR_TREE,))


# -- scans and selections along an axis ---------------------------------------------------

_SCAN_ACC = {
    "f32": "float",
    "f16": "float",
    "f64": "double",
    "i32": "unsigned int",  # wraps as numpy does, without signed overflow
    "i64": "unsigned long long",
}


@cache
def scan_kernel(op: str, dtype: str) -> Kernel:
    """CumSum (``op`` ``"sum"``) or CumProd (``"prod"``) along the middle axis
    of ``[outer, L, inner]``, ``n`` = outer * inner lines: ``exclusive``
    leaves the element itself out, ``reverse`` runs from the end."""
    ctype, _ = _TYPES[dtype]
    acc = _SCAN_ACC[dtype]
    name = f"cum{op}_{dtype}"
    init, fold = ("0", "acc + v") if op == "sum" else ("1", "acc * v")
    load = "__half2float(x[at])" if dtype == "f16" else f"({acc})x[at]"
    source = f"""\
extern "C" __global__ void {name}(const {ctype}* __restrict__ x, {ctype}* __restrict__ y,
                                  i64 n, i64 L, i64 inner, int exclusive, int reverse) {{
    {_LOOP} {{
        i64 base = (i / inner) * L * inner + i % inner;
        {acc} acc = ({acc}){init};
        for (i64 s = 0; s < L; ++s) {{
            i64 at = base + (reverse ? L - 1 - s : s) * inner;
            {acc} v = {load};
            if (exclusive) {{
                y[at] = {_store(dtype, "acc")};
                acc = {fold};
            }} else {{
                acc = {fold};
                y[at] = {_store(dtype, "acc")};
            }}
        }}
    }}
}}
"""
    params = (
        Param(f"const {ctype}*", "x"),
        Param(f"{ctype}*", "y"),
        Param("i64", "n"),
        Param("i64", "L"),
        Param("i64", "inner"),
        Param("int", "exclusive"),
        Param("int", "reverse"),
    )
    return Kernel(name, params, source)


@cache
def hardmax_kernel(dtype: str) -> Kernel:
    """Hardmax along the middle axis of ``[outer, L, inner]`` (``n`` lines):
    1 at the first largest element (the first NaN, if any, as numpy's
    argmax), 0 elsewhere."""
    ctype, comp = _TYPES[dtype]
    name = f"hardmax_{dtype}"
    source = f"""\
extern "C" __global__ void {name}(const {ctype}* __restrict__ x, {ctype}* __restrict__ y,
                                  i64 n, i64 L, i64 inner) {{
    {_LOOP} {{
        i64 base = (i / inner) * L * inner + i % inner;
        i64 best = 0;
        {comp} m = {_load(dtype, "x[base]")};
        for (i64 j = 1; j < L && m == m; ++j) {{
            {comp} v = {_load(dtype, "x[base + j * inner]")};
            if (v > m || v != v) {{ m = v; best = j; }}
        }}
        for (i64 j = 0; j < L; ++j) y[base + j * inner] = {_store(dtype, "j == best ? 1 : 0")};
    }}
}}
"""
    params = (
        Param(f"const {ctype}*", "x"),
        Param(f"{ctype}*", "y"),
        Param("i64", "n"),
        Param("i64", "L"),
        Param("i64", "inner"),
    )
    return Kernel(name, params, source)


@cache
def lpnorm_kernel(dtype: str) -> Kernel:
    """LpNormalization along the middle axis of ``[outer, L, inner]`` (``n``
    lines): ``x / ||x||_p`` for ``p`` 1 (the sum of absolute values) or 2;
    0 where the norm is 0."""
    ctype, comp = _TYPES[dtype]
    name = f"lpnorm_{dtype}"
    source = f"""\
extern "C" __global__ void {name}(const {ctype}* __restrict__ x, {ctype}* __restrict__ y,
                                  i64 n, i64 L, i64 inner, int p) {{
    {_LOOP} {{
        i64 base = (i / inner) * L * inner + i % inner;
        {comp} s = 0;
        for (i64 j = 0; j < L; ++j) {{
            {comp} v = {_load(dtype, "x[base + j * inner]")};
            s += p == 1 ? (v < 0 ? -v : v) : v * v;
        }}
        {comp} norm = p == 1 ? s : {"sqrt" if comp == "double" else "sqrtf"}(s);
        for (i64 j = 0; j < L; ++j) {{
            {comp} v = {_load(dtype, "x[base + j * inner]")};
            y[base + j * inner] = {_store(dtype, "norm == 0 ? 0 : v / norm")};
        }}
    }}
}}
"""
    params = (
        Param(f"const {ctype}*", "x"),
        Param(f"{ctype}*", "y"),
        Param("i64", "n"),
        Param("i64", "L"),
        Param("i64", "inner"),
        Param("int", "p"),
    )
    return Kernel(name, params, source)


@cache
def topk_kernel(dtype: str) -> Kernel:
    """TopK along the middle axis of ``[outer, L, inner]``, ``n`` = outer * L
    * inner elements, one thread each: its rank is the number of elements
    of its line that come first (``largest``: larger; else smaller; ties to
    the lower index; NaN counts as larger than any number, as numpy's sort
    puts it last); ranks under ``k`` go to ``values`` and ``indices``
    (``[outer, k, inner]``), so the output is sorted."""
    ctype, comp = _TYPES[dtype]
    name = f"topk_{dtype}"
    source = f"""\
extern "C" __global__ void {name}(const {ctype}* __restrict__ x, {ctype}* __restrict__ values,
                                  i64* __restrict__ indices, i64 n, i64 L, i64 inner, i64 k,
                                  int largest) {{
    {_LOOP} {{
        i64 r = i % inner, j = (i / inner) % L, o = i / (inner * L);
        i64 base = o * L * inner + r;
        {comp} v = {_load(dtype, "x[i]")};
        bool vnan = v != v;
        i64 rank = 0;
        for (i64 q = 0; q < L && rank < k; ++q) {{
            if (q == j) continue;
            {comp} u = {_load(dtype, "x[base + q * inner]")};
            bool unan = u != u;
            bool first;
            if (unan || vnan) first = unan && vnan ? q < j : (largest ? unan : vnan);
            else first = largest ? (u > v || (u == v && q < j)) : (u < v || (u == v && q < j));
            rank += first;
        }}
        if (rank < k) {{
            i64 at = (o * k + rank) * inner + r;
            values[at] = x[i];
            indices[at] = j;
        }}
    }}
}}
"""
    params = (
        Param(f"const {ctype}*", "x"),
        Param(f"{ctype}*", "values"),
        Param("i64*", "indices"),
        Param("i64", "n"),
        Param("i64", "L"),
        Param("i64", "inner"),
        Param("i64", "k"),
        Param("int", "largest"),
    )
    return Kernel(name, params, source)


@cache
def reverse_sequence_kernel(itemsize: int) -> Kernel:
    """ReverseSequence of ``[d0, d1, inner]`` (``n`` elements) with the time
    axis ``d0`` and the batch axis ``d1`` (``batch_first`` 0) or the other
    way round: the first ``lens[b]`` time steps of batch ``b`` reversed
    (``lens`` clamped to ``[0, T]``), the rest copied."""
    word = WORDS[itemsize]
    name = f"reverse_sequence_b{itemsize}"
    source = f"""\
extern "C" __global__ void {name}(const {word}* __restrict__ x, {word}* __restrict__ y,
                                  const i64* __restrict__ lens, i64 n, i64 d0, i64 d1,
                                  i64 inner, int batch_first) {{
    {_LOOP} {{
        i64 r = i % inner, a = (i / inner) / d1, b = (i / inner) % d1;
        i64 t = batch_first ? b : a, batch = batch_first ? a : b;
        i64 T = batch_first ? d1 : d0;
        i64 len = lens[batch];
        len = len < 0 ? 0 : (len > T ? T : len);
        i64 st = t < len ? len - 1 - t : t;
        i64 src = batch_first ? (a * d1 + st) * inner + r : (st * d1 + b) * inner + r;
        y[i] = x[src];
    }}
}}
"""
    params = (
        Param(f"const {word}*", "x"),
        Param(f"{word}*", "y"),
        Param("const i64*", "lens"),
        Param("i64", "n"),
        Param("i64", "d0"),
        Param("i64", "d1"),
        Param("i64", "inner"),
        Param("int", "batch_first"),
    )
    return Kernel(name, params, source)


EINSUM_LETTERS = 8
"""The most distinct letters (output and summed) an Einsum kernel takes."""

EINSUM = StructType(
    "Einsum",
    f"struct Einsum {{ i64 dims[{EINSUM_LETTERS}]; i64 sa[{EINSUM_LETTERS}]; "
    f"i64 sb[{EINSUM_LETTERS}]; }};",
    np.dtype(
        [
            ("dims", "<i8", (EINSUM_LETTERS,)),
            ("sa", "<i8", (EINSUM_LETTERS,)),
            ("sb", "<i8", (EINSUM_LETTERS,)),
        ]
    ),
)
"""Each letter's size and its element stride in either operand (0 where it
is absent or broadcast; the sum of the strides of a repeated letter, which
walks a diagonal): the ``rout`` output letters first, then the summed ones."""


@cache
def einsum_kernel(dtype: str) -> Kernel:
    """Einsum of one operand (``two`` 0) or two: one thread per output
    element (``n`` in all) sums, over the ``nsum`` combinations of the summed
    letters, ``a[...]`` (times ``b[...]``), in float (double for float64)."""
    ctype, comp = _TYPES[dtype]
    name = f"einsum_{dtype}"
    source = f"""\
extern "C" __global__ void {name}(const {ctype}* __restrict__ a, const {ctype}* __restrict__ b,
                                  {ctype}* __restrict__ y, i64 n, Einsum s, int rout, int rsum,
                                  i64 nsum, int two) {{
    {_LOOP} {{
        i64 r = i, oa = 0, ob = 0;
        for (int d = rout - 1; d >= 0; --d) {{
            i64 c = r % s.dims[d];
            r /= s.dims[d];
            oa += c * s.sa[d];
            ob += c * s.sb[d];
        }}
        {comp} acc = 0;
        for (i64 q = 0; q < nsum; ++q) {{
            i64 rq = q, pa = oa, pb = ob;
            for (int d = rout + rsum - 1; d >= rout; --d) {{
                i64 c = rq % s.dims[d];
                rq /= s.dims[d];
                pa += c * s.sa[d];
                pb += c * s.sb[d];
            }}
            {comp} v = {_load(dtype, "a[pa]")};
            if (two) v *= {_load(dtype, "b[pb]")};
            acc += v;
        }}
        y[i] = {_store(dtype, "acc")};
    }}
}}
"""
    params = (
        Param(f"const {ctype}*", "a"),
        Param(f"const {ctype}*", "b"),
        Param(f"{ctype}*", "y"),
        Param("i64", "n"),
        Param("Einsum", "s"),
        Param("int", "rout"),
        Param("int", "rsum"),
        Param("i64", "nsum"),
        Param("int", "two"),
    )
    return Kernel(name, params, source, (EINSUM,))


def all_kernels() -> list[Kernel]:
    """Every kernel of this module (for compiling them all at once)."""
    out: list[Kernel] = []
    for t in LOSS_TYPES:
        out += [log_softmax_axis_kernel(t), log_softmax_lines_kernel(t)]
        out += [nll_kernel(t), loss_reduce_kernel(t)]
    for t in SCAN_TYPES:
        out += [scan_kernel("sum", t), scan_kernel("prod", t)]
    out += [hardmax_kernel(t) for t in VALUE_TYPES] + [lpnorm_kernel(t) for t in VALUE_TYPES]
    out += [topk_kernel(t) for t in TOPK_TYPES]
    out += [reverse_sequence_kernel(size) for size in WORDS]
    out += [einsum_kernel(t) for t in VALUE_TYPES]
    return out
