"""Kernels that work along the last axis, one block per row: Softmax,
LogSoftmax, LayerNormalization, and ReduceSum/ReduceMean/ReduceMax over the
last axis.

Each block reduces its row in two steps: every thread folds a strided part
of the row, then the block combines the threads' values. Softmax and the
reductions combine through shared memory (a tree, halving with
``__syncthreads()``; the block size is a power of two up to
:data:`MAX_THREADS`); LayerNormalization through warp shuffles and one
shared slot per warp. Launch: ``grid = (rows,)``, ``block = (row_threads(cols),)``.
"""

from __future__ import annotations

from functools import cache

from .spec import DTYPES, Kernel, Param, Snippet, floating

__all__ = [
    "ARG_TREE",
    "BLOCK_REDUCE",
    "REDUCTIONS",
    "arg_kernel",
    "MAX_THREADS",
    "WARP_REDUCE",
    "layernorm_kernel",
    "reduce_kernel",
    "row_threads",
    "softmax_kernel",
]

MAX_THREADS = 256

TREE = Snippet(
    "tree_reduce",
    f"""\
// The block's combined value of v (op: 0 sum, 1 max, 2 min, 3 product) through shared memory;
// every thread of the block calls it; blockDim.x a power of two <= {MAX_THREADS}.
__device__ float tree_reduce(float v, int op) {{
    __shared__ float slots[{MAX_THREADS}];
    slots[threadIdx.x] = v;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {{
        if (threadIdx.x < s) {{
            float o = slots[threadIdx.x + s];
            float m = slots[threadIdx.x];
            slots[threadIdx.x] = op == 0 ? m + o
                : op == 1 ? ((m != m || m > o) ? m : o)
                : op == 2 ? ((m != m || m < o) ? m : o)
                : m * o;
        }}
        __syncthreads();
    }}
    float out = slots[0];
    __syncthreads();  // slots are reused by the next call
    return out;
}}
""",
)

WARP_REDUCE = Snippet(
    "warp_sum",
    """\
__device__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    return v;
}
""",
)

BLOCK_REDUCE = Snippet(
    "block_sum",
    """\
// The block's sum of v: warp shuffles, then one shared slot per warp.
__device__ float block_sum(float v) {
    __shared__ float partial[32];
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    v = warp_sum(v);
    if (lane == 0) partial[warp] = v;
    __syncthreads();
    int warps = (blockDim.x + 31) / 32;
    v = threadIdx.x < warps ? partial[threadIdx.x] : 0.0f;
    if (warp == 0) v = warp_sum(v);
    if (threadIdx.x == 0) partial[0] = v;
    __syncthreads();
    float out = partial[0];
    __syncthreads();
    return out;
}
""",
)


def row_threads(cols: int) -> int:
    """The block size for rows of ``cols`` elements: the smallest power of
    two >= cols, from 32 to :data:`MAX_THREADS`."""
    n = 32
    while n < cols and n < MAX_THREADS:
        n *= 2
    return n


_ROW = "for (i64 j = threadIdx.x; j < cols; j += blockDim.x)"


@cache
@floating
def softmax_kernel(dtype: str, log: bool = False) -> Kernel:
    """Softmax (or LogSoftmax) over the last axis of a ``rows x cols`` tensor."""
    ctype = DTYPES[dtype][0]
    name = f"{'log' if log else ''}softmax_{dtype}"
    result = "(load_f(xr[j]) - m) - logf(total)" if log else "expf(load_f(xr[j]) - m) / total"
    source = f"""\
extern "C" __global__ void {name}(const {ctype}* __restrict__ x, {ctype}* __restrict__ y,
                                  i64 rows, i64 cols) {{
    const {ctype}* xr = x + (i64)blockIdx.x * cols;
    {ctype}* yr = y + (i64)blockIdx.x * cols;
    float m = -INFINITY;
    {_ROW} m = fmaxf(m, load_f(xr[j]));
    m = tree_reduce(m, 1);
    float sum = 0.0f;
    {_ROW} sum += expf(load_f(xr[j]) - m);
    float total = tree_reduce(sum, 0);
    {_ROW} store_f(&yr[j], {result});
}}
"""
    params = (
        Param(f"const {ctype}*", "x"),
        Param(f"{ctype}*", "y"),
        Param("i64", "rows"),
        Param("i64", "cols"),
    )
    return Kernel(name, params, source, (TREE,))


REDUCTIONS: dict[str, tuple[str, str, int, str]] = {
    "ReduceSum": ("0.0f", "v", 0, "acc"),
    "ReduceMean": ("0.0f", "v", 0, "acc / (float)cols"),
    "ReduceMax": ("-INFINITY", "v", 1, "acc"),
    "ReduceMin": ("INFINITY", "v", 2, "acc"),
    "ReduceProd": ("1.0f", "v", 3, "acc"),
    "ReduceL1": ("0.0f", "fabsf(v)", 0, "acc"),
    "ReduceL2": ("0.0f", "v * v", 0, "sqrtf(acc)"),
    "ReduceSumSquare": ("0.0f", "v * v", 0, "acc"),
    "ReduceLogSum": ("0.0f", "v", 0, "logf(acc)"),
}
"""Row reductions: initial value, what each element adds, how values combine
(:data:`TREE`'s op), and the result from the combined ``acc``."""

_FOLD = {
    0: "acc + t",
    1: "(acc != acc || acc > t) ? acc : t",
    2: "(acc != acc || acc < t) ? acc : t",
    3: "acc * t",
}


@cache
@floating
def reduce_kernel(op: str, dtype: str) -> Kernel:
    """A reduction of each row (the reduced axes, moved last): ``y[row]``
    (a key of :data:`REDUCTIONS`, or ReduceLogSumExp: the row's max, then
    the log of the sum of ``exp(v - max)``, plus the max)."""
    ctype = DTYPES[dtype][0]
    name = f"{op.lower()}_last_{dtype}"
    if op == "ReduceLogSumExp":
        body = f"""\
    float m = -INFINITY;
    {_ROW} m = fmaxf(m, load_f(xr[j]));
    m = tree_reduce(m, 1);
    float acc = 0.0f;
    {_ROW} acc += expf(load_f(xr[j]) - m);
    acc = tree_reduce(acc, 0);
    if (threadIdx.x == 0) store_f(&y[blockIdx.x], m == -INFINITY ? m : logf(acc) + m);"""
    else:
        init, pre, combine, post = REDUCTIONS[op]
        body = f"""\
    float acc = {init};
    {_ROW} {{ float v = load_f(xr[j]); float t = {pre}; acc = {_FOLD[combine]}; }}
    acc = tree_reduce(acc, {combine});
    if (threadIdx.x == 0) store_f(&y[blockIdx.x], {post});"""
    source = f"""\
extern "C" __global__ void {name}(const {ctype}* __restrict__ x, {ctype}* __restrict__ y,
                                  i64 rows, i64 cols) {{
    const {ctype}* xr = x + (i64)blockIdx.x * cols;
{body}
}}
"""
    params = (
        Param(f"const {ctype}*", "x"),
        Param(f"{ctype}*", "y"),
        Param("i64", "rows"),
        Param("i64", "cols"),
    )
    return Kernel(name, params, source, (TREE,))


ARG_TREE = Snippet(
    "arg_reduce",
    f"""\
// The block's best (value, index): largest (sign 1) or smallest (sign -1);
// ties go to the first index, or the last when last != 0; NaN wins, as numpy.
__device__ void arg_reduce(float *v, i64 *k, float sign, int last) {{
    __shared__ float vals[{MAX_THREADS}];
    __shared__ i64 idx[{MAX_THREADS}];
    vals[threadIdx.x] = *v;
    idx[threadIdx.x] = *k;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {{
        if (threadIdx.x < s) {{
            float a = vals[threadIdx.x], b = vals[threadIdx.x + s];
            i64 ia = idx[threadIdx.x], ib = idx[threadIdx.x + s];
            bool take = ib >= 0 && (ia < 0 || (b != b && a == a)
                || (a == a && b == b && (sign * b > sign * a
                    || (b == a && (last ? ib > ia : ib < ia)))));
            if (a != a && b != b && (last ? ib > ia : ib < ia)) take = true;
            if (take) {{ vals[threadIdx.x] = b; idx[threadIdx.x] = ib; }}
        }}
        __syncthreads();
    }}
    *v = vals[0];
    *k = idx[0];
    __syncthreads();
}}
""",
)


@cache
@floating
def arg_kernel(op: str, dtype: str) -> Kernel:
    """ArgMax or ArgMin of each row: ``y[row]`` (int64)."""
    ctype = DTYPES[dtype][0]
    name = f"{op.lower()}_last_{dtype}"
    sign = "1.0f" if op == "ArgMax" else "-1.0f"
    source = f"""\
extern "C" __global__ void {name}(const {ctype}* __restrict__ x, i64* __restrict__ y,
                                  i64 rows, i64 cols, int last) {{
    const {ctype}* xr = x + (i64)blockIdx.x * cols;
    float best = 0.0f;
    i64 at = -1;
    {_ROW} {{
        float v = load_f(xr[j]);
        bool take = at < 0 || (v != v && best == best)
            || (best == best && v == v && ({sign} * v > {sign} * best || (v == best && last)));
        if (best != best && v != v && last) take = true;
        if (take) {{ best = v; at = j; }}
    }}
    arg_reduce(&best, &at, {sign}, last);
    if (threadIdx.x == 0) y[blockIdx.x] = at < 0 ? 0 : at;
}}
"""
    params = (
        Param(f"const {ctype}*", "x"),
        Param("i64*", "y"),
        Param("i64", "rows"),
        Param("i64", "cols"),
        Param("int", "last"),
    )
    return Kernel(name, params, source, (ARG_TREE,))


@cache
@floating
def layernorm_kernel(dtype: str) -> Kernel:
    """LayerNormalization over the last axis: ``(x - mean) / sqrt(var + eps) * scale + bias``
    (two passes over the row: the mean, then the variance around it)."""
    ctype = DTYPES[dtype][0]
    name = f"layernorm_{dtype}"
    source = f"""\
extern "C" __global__ void {name}(const {ctype}* __restrict__ x, const {ctype}* __restrict__ scale,
                       const {ctype}* __restrict__ bias, {ctype}* __restrict__ y,
                       i64 rows, i64 cols, float epsilon) {{
    const {ctype}* xr = x + (i64)blockIdx.x * cols;
    {ctype}* yr = y + (i64)blockIdx.x * cols;
    float sum = 0.0f;
    {_ROW} sum += load_f(xr[j]);
    float mean = block_sum(sum) / (float)cols;
    float sq = 0.0f;
    {_ROW} {{ float d = load_f(xr[j]) - mean; sq += d * d; }}
    float inv = rsqrtf(block_sum(sq) / (float)cols + epsilon);
    {_ROW} store_f(&yr[j], (load_f(xr[j]) - mean) * inv * load_f(scale[j]) + load_f(bias[j]));
}}
"""
    params = (
        Param(f"const {ctype}*", "x"),
        Param(f"const {ctype}*", "scale"),
        Param(f"const {ctype}*", "bias"),
        Param(f"{ctype}*", "y"),
        Param("i64", "rows"),
        Param("i64", "cols"),
        Param("float", "epsilon"),
    )
    return Kernel(name, params, source, (WARP_REDUCE, BLOCK_REDUCE))
