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

from .spec import DTYPES, Kernel, Param, Snippet

__all__ = [
    "BLOCK_REDUCE",
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
// The block's combined value of v (op: 0 sum, 1 max) through shared memory;
// every thread of the block calls it; blockDim.x a power of two <= {MAX_THREADS}.
__device__ float tree_reduce(float v, int op) {{
    __shared__ float slots[{MAX_THREADS}];
    slots[threadIdx.x] = v;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {{
        if (threadIdx.x < s) {{
            float o = slots[threadIdx.x + s];
            slots[threadIdx.x] = op == 0 ? slots[threadIdx.x] + o : fmaxf(slots[threadIdx.x], o);
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


REDUCTIONS = {"ReduceSum": ("0.0f", "acc + v", 0), "ReduceMax": ("-INFINITY", "fmaxf(acc, v)", 1)}


@cache
def reduce_kernel(op: str, dtype: str) -> Kernel:
    """ReduceSum, ReduceMean or ReduceMax over the last axis: ``y[row]``."""
    ctype = DTYPES[dtype][0]
    base = "ReduceSum" if op == "ReduceMean" else op
    init, step, combine = REDUCTIONS[base]
    name = f"{op.lower()}_last_{dtype}"
    scale = " / (float)cols" if op == "ReduceMean" else ""
    source = f"""\
extern "C" __global__ void {name}(const {ctype}* __restrict__ x, {ctype}* __restrict__ y,
                                  i64 rows, i64 cols) {{
    const {ctype}* xr = x + (i64)blockIdx.x * cols;
    float acc = {init};
    {_ROW} {{ float v = load_f(xr[j]); acc = {step}; }}
    acc = tree_reduce(acc, {combine});
    if (threadIdx.x == 0) store_f(&y[blockIdx.x], acc{scale});
}}
"""
    params = (
        Param(f"const {ctype}*", "x"),
        Param(f"{ctype}*", "y"),
        Param("i64", "rows"),
        Param("i64", "cols"),
    )
    return Kernel(name, params, source, (TREE,))


@cache
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
