"""CUDA kernels of :mod:`ortcore_cuda.ops_quant`: linear quantization and the
integer matrix products and convolutions.

* ``quantize_<q>(x, xt, scale, st, zp, has_zp, y, n, QAxis a, prec, sat)``:
  ``y = saturate(round(x / scale) + zp)`` into quantized type ``q``
  (:data:`QTYPES`). ``x`` and ``scale`` are floats whose type is a run-time
  code (:data:`FLOAT_CODES`: float32, float16, bfloat16); the division is done
  in float and rounded to the precision ``prec`` (a code: both operands and the
  quotient are rounded to it, as numpy computes in that type). Integers round
  half to even and saturate to the type's range (the 4- and 2-bit types are
  one byte an element, as ``ml_dtypes``, written with the high bits zero);
  the float8 types encode the quotient by :mod:`.cast`'s helpers (``sat``:
  saturate), their zero point unused (as onnx's reference); float4e2m1 adds
  its zero point and always saturates.
* ``dequantize_<q>(x, scale, st, zp, has_zp, y, yt, n, QAxis a)``:
  ``y = (x - zp) * scale`` in float, stored as the float type code ``yt``
  (float8e8m0 scales too). The float types' zero point is unused.
* Which scale (and zero point) element applies to element ``i`` of ``x`` is
  :data:`QAXIS`'s arithmetic: ``i`` split as ``(outer, axis, inner)`` and the
  scale's offset ``o * so + (k / block) * sa + j * si``, covering per-tensor
  (all strides 0), per-axis and blocked quantization (see :func:`qaxis_args`).
* ``dynquant_stats(x, n, scale, zp)``: one block reduces ``x``'s min and max
  (a shared-memory tree) and writes DynamicQuantizeLinear's scale and zero
  point; ``dynquant_apply(x, scale, zp, y, n)`` then quantizes to uint8.
* ``qgemm_<a>_<b>_<out>``: integer matrix product, one thread an output
  element with the K loop inside, products accumulated in int32 (exact), the
  zero points subtracted first (``azp`` per row or per tensor, ``bzp`` per
  column or per tensor). ``out`` ``i32`` stores the sum (MatMulInteger);
  ``u8``/``i8`` requantize it (QLinearMatMul): ``rint(acc * mult + yzp)``
  saturated, ``mult`` a double per column (or per tensor).
* ``qconv_<x>_<w>_<out>``: the same for 1-D and 2-D convolutions (ConvInteger,
  QLinearConv): one thread an output element over its window, groups,
  an int32 bias, ``wzp`` and ``mult`` per output channel or per tensor.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache

import numpy as np

from .cast import HELPERS
from .elementwise import _LOOP
from .nn import CONV_ARGS
from .spec import Kernel, Param, Snippet, StructType

__all__ = [
    "FLOAT_CODES",
    "GEMM_OUT",
    "GEMM_TYPES",
    "QAXIS",
    "QTYPES",
    "all_kernels",
    "dequantize_kernel",
    "dynquant_apply_kernel",
    "dynquant_stats_kernel",
    "qaxis_args",
    "qconv_kernel",
    "qgemm_kernel",
    "quantize_kernel",
]

FLOAT_CODES = {"f32": 0, "f16": 1, "bf16": 2, "e8m0": 3}
"""Run-time codes of the float types a scale, an input or an output may have
(float8e8m0: scales only)."""

QTYPES: dict[str, tuple[str, int | None, int | None]] = {
    "u8": ("unsigned char", 0, 255),
    "i8": ("signed char", -128, 127),
    "u16": ("unsigned short", 0, 65535),
    "i16": ("short", -32768, 32767),
    "u4": ("unsigned char", 0, 15),
    "i4": ("unsigned char", -8, 7),
    "u2": ("unsigned char", 0, 3),
    "i2": ("unsigned char", -2, 1),
    "i32": ("int", None, None),
    "e4m3fn": ("unsigned char", None, None),
    "e4m3fnuz": ("unsigned char", None, None),
    "e5m2": ("unsigned char", None, None),
    "e5m2fnuz": ("unsigned char", None, None),
    "f4e2m1": ("unsigned char", None, None),
}
"""Quantized types: suffix -> (C storage type, range of the integers or ``None``
for the floats and int32). int32 is dequantized only."""

_SUB_BYTE = ("u4", "i4", "u2", "i2")
_QFLOATS = ("e4m3fn", "e4m3fnuz", "e5m2", "e5m2fnuz", "f4e2m1")

QAXIS = StructType(
    "QAxis",
    "struct QAxis { i64 inner, d, block, so, sa, si; };",
    np.dtype([(f, "<i8") for f in ("inner", "d", "block", "so", "sa", "si")]),
)
"""Where element ``i``'s scale is (see the module docstring)."""

_HELPERS = Snippet(
    "quant_helpers",
    """\
__device__ __forceinline__ float qx_load(const void* p, i64 i, int t) {
    if (t == 0) return ((const float*)p)[i];
    if (t == 1) return __half2float(((const __half*)p)[i]);
    if (t == 2) return cx_dec_bf16(((const unsigned short*)p)[i]);
    return cx_dec_e8m0(((const unsigned char*)p)[i]);
}
__device__ __forceinline__ void qx_store(void* p, i64 i, float v, int t) {
    if (t == 0) ((float*)p)[i] = v;
    else if (t == 1) ((__half*)p)[i] = __float2half(v);
    else ((unsigned short*)p)[i] = (unsigned short)cx_enc_bf16((double)v, 1);
}
__device__ __forceinline__ float qx_round(float v, int t) {  // to the precision of type t
    if (t == 1) return __half2float(__float2half(v));
    if (t == 2) return cx_dec_bf16(cx_enc_bf16((double)v, 1));
    return v;
}
__device__ __forceinline__ i64 qx_at(i64 i, QAxis a) {  // the scale of element i
    i64 j = i % a.inner, t = i / a.inner, k = t % a.d, o = t / a.d;
    return o * a.so + (k / a.block) * a.sa + j * a.si;
}
""",
)

GEMM_TYPES = ("u8", "i8")
"""Input types of the integer products."""
GEMM_OUT = ("i32", "u8", "i8")
"""Output types of the integer products: int32 sums, or requantized."""


def _decode(q: str, v: str) -> str:
    """The C expression of stored element ``v`` of type ``q`` as a number."""
    if q in _SUB_BYTE or q in _QFLOATS:
        return f"cx_dec_{q}({v})"
    return f"(float){v}"


def qaxis_args(
    shape: Sequence[int], scale_shape: Sequence[int], axis: int, block: int
) -> np.ndarray:
    """The :data:`QAXIS` record of ``x`` of ``shape`` and a scale of
    ``scale_shape``: per-tensor when the scale has one element, per-axis along
    ``axis`` (non-negative) when ``block`` is 0, else blocked.

    Raises:
        ValueError: the shapes do not fit the granularity.
    """
    size = int(np.prod(scale_shape, dtype=np.int64))
    if size == 1:
        return QAXIS.pack(inner=1, d=1, block=1, so=0, sa=0, si=0)
    if not 0 <= axis < len(shape):
        raise ValueError(f"axis {axis} out of range for shape {tuple(shape)}")
    d = int(shape[axis])
    inner = int(np.prod(shape[axis + 1 :], dtype=np.int64))
    if not block:
        if len(scale_shape) != 1 or scale_shape[0] != d:
            raise ValueError(
                f"per-axis scale of shape {tuple(scale_shape)} for axis {axis} of {tuple(shape)}"
            )
        return QAXIS.pack(inner=inner, d=d, block=1, so=0, sa=1, si=0)
    nb = -(-d // block)
    want = [*shape[:axis], nb, *shape[axis + 1 :]]
    if list(scale_shape) != want:
        raise ValueError(
            f"blocked scale of shape {tuple(scale_shape)} for {tuple(shape)}, axis {axis}, "
            f"block_size {block}: expected {tuple(want)}"
        )
    return QAXIS.pack(inner=inner, d=d, block=block, so=nb * inner, sa=inner, si=1)


@cache
def quantize_kernel(q: str) -> Kernel:
    """QuantizeLinear into ``q`` (a key of :data:`QTYPES` but ``i32``)."""
    ctype, lo, hi = QTYPES[q]
    if q == "i32":
        raise ValueError("quantize_kernel: int32 is not a quantized output type")
    name = f"quantize_{q}"
    if q in _QFLOATS and q != "f4e2m1":
        store = f"y[i] = ({ctype})cx_enc_{q}((double)v, sat);"
    elif q == "f4e2m1":
        store = f"""if (has_zp) v += cx_dec_f4e2m1(zp[j]);
        y[i] = ({ctype})cx_enc_f4e2m1((double)v, 1);"""
    else:
        zero = _decode(q, "zp[j]")
        wrap = f"cx_wrap_{q}((cx_u64)(long long)r)" if q in _SUB_BYTE else f"({ctype})r"
        store = f"""double r = (double)rintf(v) + (has_zp ? (double)({zero}) : 0.0);
        r = fmin(fmax(r, {lo}.0), {hi}.0);  // NaN goes to the low end
        y[i] = {wrap};"""
    source = f"""\
extern "C" __global__ void {name}(const void* __restrict__ x, int xt,
                                  const void* __restrict__ s, int st,
                                  const {ctype}* __restrict__ zp, int has_zp,
                                  {ctype}* __restrict__ y, i64 n, QAxis a, int prec, int sat) {{
    {_LOOP} {{
        i64 j = qx_at(i, a);
        float v = qx_round(qx_round(qx_load(x, i, xt), prec) / qx_round(qx_load(s, j, st), prec),
                           prec);
        {store}
    }}
}}
"""
    params = (
        Param("const void*", "x"),
        Param("int", "xt"),
        Param("const void*", "s"),
        Param("int", "st"),
        Param(f"const {ctype}*", "zp"),
        Param("int", "has_zp"),
        Param(f"{ctype}*", "y"),
        Param("i64", "n"),
        Param("QAxis", "a"),
        Param("int", "prec"),
        Param("int", "sat"),
    )
    return Kernel(name, params, source, (HELPERS, QAXIS, _HELPERS))


@cache
def dequantize_kernel(q: str) -> Kernel:
    """DequantizeLinear from ``q`` (a key of :data:`QTYPES`)."""
    ctype = QTYPES[q][0]
    name = f"dequantize_{q}"
    zero = "" if q in _QFLOATS else f"if (has_zp) v -= {_decode(q, 'zp[j]')};"
    source = f"""\
extern "C" __global__ void {name}(const {ctype}* __restrict__ x,
                                  const void* __restrict__ s, int st,
                                  const {ctype}* __restrict__ zp, int has_zp,
                                  void* __restrict__ y, int yt, i64 n, QAxis a) {{
    {_LOOP} {{
        i64 j = qx_at(i, a);
        float v = {_decode(q, "x[i]")};
        {zero}
        qx_store(y, i, v * qx_load(s, j, st), yt);
    }}
}}
"""
    params = (
        Param(f"const {ctype}*", "x"),
        Param("const void*", "s"),
        Param("int", "st"),
        Param(f"const {ctype}*", "zp"),
        Param("int", "has_zp"),
        Param("void*", "y"),
        Param("int", "yt"),
        Param("i64", "n"),
        Param("QAxis", "a"),
    )
    return Kernel(name, params, source, (HELPERS, QAXIS, _HELPERS))


DYNQUANT_THREADS = 256
"""Threads of the one block of :func:`dynquant_stats_kernel` (a power of two, at most this)."""


@cache
def dynquant_stats_kernel() -> Kernel:
    """DynamicQuantizeLinear's scale and zero point from float32 ``x``: one
    block of a power-of-two number of threads (at most :data:`DYNQUANT_THREADS`)."""
    name = "dynquant_stats"
    source = f"""\
extern "C" __global__ void {name}(const float* __restrict__ x, i64 n, float* __restrict__ scale,
                                  unsigned char* __restrict__ zp) {{
    __shared__ float lo[{DYNQUANT_THREADS}], hi[{DYNQUANT_THREADS}];
    float mn = 0.0f, mx = 0.0f;  // the range always holds 0
    for (i64 i = threadIdx.x; i < n; i += blockDim.x) {{
        float v = x[i];
        mn = fminf(mn, v);
        mx = fmaxf(mx, v);
    }}
    lo[threadIdx.x] = mn;
    hi[threadIdx.x] = mx;
    __syncthreads();
    for (unsigned int half = blockDim.x / 2; half > 0; half >>= 1) {{
        if (threadIdx.x < half) {{
            lo[threadIdx.x] = fminf(lo[threadIdx.x], lo[threadIdx.x + half]);
            hi[threadIdx.x] = fmaxf(hi[threadIdx.x], hi[threadIdx.x + half]);
        }}
        __syncthreads();
    }}
    if (threadIdx.x == 0) {{
        float a = lo[0], b = hi[0];
        float s = (b == a ? 1.0f : b - a) / 255.0f;
        float z = 0.0f - a / s;
        z = fminf(fmaxf(z, 0.0f), 255.0f);
        *scale = s;
        *zp = (unsigned char)rintf(z);
    }}
}}
"""
    params = (
        Param("const float*", "x"),
        Param("i64", "n"),
        Param("float*", "scale"),
        Param("unsigned char*", "zp"),
    )
    return Kernel(name, params, source)


@cache
def dynquant_apply_kernel() -> Kernel:
    """``y = saturate(rint(x / scale) + zp)`` to uint8, ``scale`` and ``zp`` read
    from device memory (written by :func:`dynquant_stats_kernel`)."""
    name = "dynquant_apply"
    source = f"""\
extern "C" __global__ void {name}(const float* __restrict__ x, const float* __restrict__ scale,
                                  const unsigned char* __restrict__ zp,
                                  unsigned char* __restrict__ y, i64 n) {{
    float s = *scale, z = (float)*zp;
    {_LOOP} {{
        float r = rintf(x[i] / s) + z;
        y[i] = (unsigned char)fminf(fmaxf(r, 0.0f), 255.0f);  // NaN goes to 0
    }}
}}
"""
    params = (
        Param("const float*", "x"),
        Param("const float*", "scale"),
        Param("const unsigned char*", "zp"),
        Param("unsigned char*", "y"),
        Param("i64", "n"),
    )
    return Kernel(name, params, source)


def _requant(out: str) -> str:
    """The statements that store ``acc`` (and column/channel ``c``) as ``out``."""
    if out == "i32":
        return "y[i] = acc;"
    ctype, lo, hi = QTYPES[out]
    return f"""double rq = rint((double)acc * mult[c * ms] + (double)yzp);
        y[i] = ({ctype})fmin(fmax(rq, {lo}.0), {hi}.0);"""


def _gemm_check(a: str, b: str, out: str) -> None:
    if a not in GEMM_TYPES or b not in GEMM_TYPES or out not in GEMM_OUT:
        raise ValueError(f"integer product of {a} and {b} to {out}")


@cache
def qgemm_kernel(a: str, b: str, out: str) -> Kernel:
    """``y[p, m, n] = sum_k (A[m, k] - azp) * (B[k, n] - bzp)`` for each batch
    item ``p``, ``A`` and ``B`` at the element offsets ``offs[2p]`` and
    ``offs[2p + 1]``; ``out`` ``i32`` stores the sum, ``u8``/``i8`` requantize it."""
    _gemm_check(a, b, out)
    ta, tb, ty = QTYPES[a][0], QTYPES[b][0], QTYPES[out][0]
    name = f"qgemm_{a}_{b}_{out}"
    source = f"""\
extern "C" __global__ void {name}(const {ta}* __restrict__ A, const {tb}* __restrict__ B,
                                  const i64* __restrict__ offs, i64 M, i64 N, i64 K,
                                  const int* __restrict__ azp, i64 azs,
                                  const int* __restrict__ bzp, i64 bzs,
                                  const double* __restrict__ mult, i64 ms, int yzp,
                                  {ty}* __restrict__ y, i64 n) {{
    {_LOOP} {{
        i64 c = i % N, r = (i / N) % M, p = i / (M * N);
        const {ta}* ra = A + offs[2 * p] + r * K;
        const {tb}* cb = B + offs[2 * p + 1] + c;
        int za = azp[r * azs], zb = bzp[c * bzs];
        int acc = 0;
        for (i64 k = 0; k < K; k++) acc += ((int)ra[k] - za) * ((int)cb[k * N] - zb);
        {_requant(out)}
    }}
}}
"""
    params = (
        Param(f"const {ta}*", "A"),
        Param(f"const {tb}*", "B"),
        Param("const i64*", "offs"),
        Param("i64", "M"),
        Param("i64", "N"),
        Param("i64", "K"),
        Param("const int*", "azp"),
        Param("i64", "azs"),
        Param("const int*", "bzp"),
        Param("i64", "bzs"),
        Param("const double*", "mult"),
        Param("i64", "ms"),
        Param("int", "yzp"),
        Param(f"{ty}*", "y"),
        Param("i64", "n"),
    )
    return Kernel(name, params, source)


@cache
def qconv_kernel(x: str, w: str, out: str) -> Kernel:
    """2-D convolution of integers (1-D as height 1), ``y`` of shape ``(N, M,
    oh, ow)``: ``sum (X - xzp) * (W[m] - wzp[m])`` over the group's channels and
    the window (pads read as ``xzp``, i.e. contribute 0), plus ``bias[m]`` when
    ``has_bias``; ``out`` ``i32`` stores it, ``u8``/``i8`` requantize it with
    ``mult`` per output channel (``ms`` 1) or per tensor (``ms`` 0)."""
    _gemm_check(x, w, out)
    tx, tw, ty = QTYPES[x][0], QTYPES[w][0], QTYPES[out][0]
    name = f"qconv_{x}_{w}_{out}"
    source = f"""\
extern "C" __global__ void {name}(const {tx}* __restrict__ X, const {tw}* __restrict__ W,
                                  ConvArgs a, i64 M, i64 groups, int xzp,
                                  const int* __restrict__ wzp, i64 wzs,
                                  const int* __restrict__ bias, int has_bias,
                                  const double* __restrict__ mult, i64 ms, int yzp,
                                  {ty}* __restrict__ y, i64 n) {{
    {_LOOP} {{
        i64 plane = a.oh * a.ow, pos = i % plane, c = (i / plane) % M, img = i / (plane * M);
        i64 oy = pos / a.ow, ox = pos % a.ow;
        i64 cg = a.c / groups, mg = M / groups, g = c / mg;
        const {tx}* src = X + (img * a.c + g * cg) * a.h * a.w;
        const {tw}* ker = W + c * cg * a.kh * a.kw;
        int zw = wzp[c * wzs];
        int acc = has_bias ? bias[c] : 0;
        for (i64 ch = 0; ch < cg; ch++) {{
            for (i64 ky = 0; ky < a.kh; ky++) {{
                i64 iy = oy * a.sh - a.ph + ky * a.dh;
                if (iy < 0 || iy >= a.h) continue;
                for (i64 kx = 0; kx < a.kw; kx++) {{
                    i64 ix = ox * a.sw - a.pw + kx * a.dw;
                    if (ix < 0 || ix >= a.w) continue;
                    int xv = (int)src[(ch * a.h + iy) * a.w + ix] - xzp;
                    acc += xv * ((int)ker[(ch * a.kh + ky) * a.kw + kx] - zw);
                }}
            }}
        }}
        {_requant(out)}
    }}
}}
"""
    params = (
        Param(f"const {tx}*", "X"),
        Param(f"const {tw}*", "W"),
        Param("ConvArgs", "a"),
        Param("i64", "M"),
        Param("i64", "groups"),
        Param("int", "xzp"),
        Param("const int*", "wzp"),
        Param("i64", "wzs"),
        Param("const int*", "bias"),
        Param("int", "has_bias"),
        Param("const double*", "mult"),
        Param("i64", "ms"),
        Param("int", "yzp"),
        Param(f"{ty}*", "y"),
        Param("i64", "n"),
    )
    return Kernel(name, params, source, (CONV_ARGS,))


def all_kernels() -> list[Kernel]:
    """Every kernel of this module (for compiling them all at once)."""
    out = [quantize_kernel(q) for q in QTYPES if q != "i32"]
    out += [dequantize_kernel(q) for q in QTYPES]
    out += [dynquant_stats_kernel(), dynquant_apply_kernel()]
    for a in GEMM_TYPES:
        for b in GEMM_TYPES:
            for o in GEMM_OUT:
                out += [qgemm_kernel(a, b, o), qconv_kernel(a, b, o)]
    return out
