"""CUDA kernels of :mod:`ortcore_cuda.ops_cast`: Cast to and from bfloat16, the
float8 types (e4m3fn, e4m3fnuz, e5m2, e5m2fnuz, e8m0), float4e2m1 and the 4- and
2-bit integers.

Elements are stored as numpy holds them (``ml_dtypes``): bfloat16 in 2 bytes,
every other type here in one byte per element, the 4- and 2-bit types in the
low bits of their byte (read masked; written with the high bits zero).

One kernel per (source, destination) pair, ``castx_<src>_<dst>(const S* x,
D* y, i64 n, int sat, int mode)``, converting by bit manipulation in shared
``__device__`` helpers (:data:`HELPERS`):

* a float source (float32, float16, float64, or one of these floats, decoded
  exactly to float) is rounded once, to nearest even, from its double value;
  an integer source from its exact 64-bit magnitude, so int64 rounds once too;
* ``sat`` (Cast's ``saturate``) applies to the four float8 types: out of range
  and infinities go to the largest finite value when set, otherwise to NaN
  (e4m3fn: sign kept; the fnuz types: 0x80) or infinity (e5m2). bfloat16
  overflows to infinity; float4e2m1 always saturates and, as ``ml_dtypes``,
  takes NaN to a zero of the opposite sign;
* float8e8m0 rounds the float32 value's exponent as ``mode`` says
  (:data:`E8M0_MODES`: up, down, nearest), as ``onnx.numpy_helper.to_float8e8m0``;
  ``sat`` keeps the largest exponent from rounding up to NaN;
* to the 4- and 2-bit integers: an integer keeps its low bits (two's
  complement), a float truncates toward zero and is 0 when out of range (or
  NaN), as ``ml_dtypes``;
* from these floats to the standard integers: truncation toward zero, 0 when
  out of range or NaN, as ``ml_dtypes`` (ONNX leaves it undefined).
"""

from __future__ import annotations

from functools import cache

import numpy as np
import onnx_ir as ir

from .elementwise import _LOOP, CAST_TYPES
from .spec import Kernel, Param, Snippet

__all__ = [
    "E8M0_MODES",
    "EXOTIC",
    "HELPERS",
    "all_kernels",
    "cast_suffixes",
    "castx_kernel",
]

EXOTIC: dict[str, tuple[str, np.dtype]] = {
    "bf16": ("unsigned short", ir.DataType.BFLOAT16.numpy()),
    "e4m3fn": ("unsigned char", ir.DataType.FLOAT8E4M3FN.numpy()),
    "e4m3fnuz": ("unsigned char", ir.DataType.FLOAT8E4M3FNUZ.numpy()),
    "e5m2": ("unsigned char", ir.DataType.FLOAT8E5M2.numpy()),
    "e5m2fnuz": ("unsigned char", ir.DataType.FLOAT8E5M2FNUZ.numpy()),
    "e8m0": ("unsigned char", ir.DataType.FLOAT8E8M0.numpy()),
    "f4e2m1": ("unsigned char", ir.DataType.FLOAT4E2M1.numpy()),
    "i4": ("unsigned char", ir.DataType.INT4.numpy()),
    "u4": ("unsigned char", ir.DataType.UINT4.numpy()),
    "i2": ("unsigned char", ir.DataType.INT2.numpy()),
    "u2": ("unsigned char", ir.DataType.UINT2.numpy()),
}
"""The element types of these kernels: suffix -> (C storage type, numpy dtype)."""

E8M0_MODES = {"up": 0, "down": 1, "nearest": 2}
"""Cast's ``round_mode`` (to float8e8m0) -> the kernels' ``mode`` argument."""

# Small floats: mantissa bits, exponent bias, sign bit, largest finite encoding,
# saturate obeys ``sat``, and the encodings of NaN, of infinity and of overflow
# (C expressions of the sign ``s`` and ``sat``), and whether zero keeps its sign.
_SMALL: dict[str, tuple[int, int, int, int, str, str, str, bool]] = {
    # name: (mb, bias, sign bit, max, nan, inf, overflow, signed zero)
    "bf16": (7, 127, 15, 0x7F7F, "(s << 15) | 0x7FC0u", "(s << 15) | 0x7F80u",
             "(s << 15) | 0x7F80u", True),
    "e4m3fn": (3, 7, 7, 0x7E, "(s << 7) | 0x7Fu", "(s << 7) | (sat ? 0x7Eu : 0x7Fu)",
               "(s << 7) | (sat ? 0x7Eu : 0x7Fu)", True),
    "e4m3fnuz": (3, 8, 7, 0x7F, "0x80u", "sat ? (s << 7) | 0x7Fu : 0x80u",
                 "sat ? (s << 7) | 0x7Fu : 0x80u", False),
    "e5m2": (2, 15, 7, 0x7B, "(s << 7) | 0x7Eu", "(s << 7) | (sat ? 0x7Bu : 0x7Cu)",
             "(s << 7) | (sat ? 0x7Bu : 0x7Cu)", True),
    "e5m2fnuz": (2, 16, 7, 0x7F, "0x80u", "sat ? (s << 7) | 0x7Fu : 0x80u",
                 "sat ? (s << 7) | 0x7Fu : 0x80u", False),
    "f4e2m1": (1, 1, 3, 0x7, "s ? 0x0u : 0x8u", "(s << 3) | 0x7u", "(s << 3) | 0x7u", True),
}  # fmt: skip

_SMALL_INTS = {"i4": (4, True), "u4": (4, False), "i2": (2, True), "u2": (2, False)}
"""The sub-byte integers: bits, signed."""


def _small_float_helpers(name: str) -> str:
    mb, bias, sb, top, nan, inf, over, signed_zero = _SMALL[name]
    zero = f"s << {sb}" if signed_zero else "0u"
    fin_zero = f"(s << {sb}) | enc" if signed_zero else f"enc == 0 ? 0u : (s << {sb}) | enc"
    enc = f"""\
__device__ __forceinline__ unsigned int cx_fin_{name}(unsigned int s, unsigned int enc, int sat) {{
    if (enc > {top:#x}u) return {over};
    return {fin_zero};
}}
__device__ __forceinline__ unsigned int cx_enc_{name}(double v, int sat) {{
    cx_u64 b = cx_dbits(v);
    unsigned int s = (unsigned int)(b >> 63);
    int ef = (int)((b >> 52) & 0x7FF);
    cx_u64 mant = b & 0xFFFFFFFFFFFFFull;
    if (ef == 0x7FF) return mant ? ({nan}) : ({inf});
    if (ef == 0 && mant == 0) return {zero};
    cx_u64 m = ef ? mant | (1ull << 52) : mant;
    return cx_fin_{name}(s, cx_round(m, (ef ? ef : 1) - 1075, {mb}, {bias}), sat);
}}
__device__ __forceinline__ unsigned int cx_enci_{name}(cx_u64 mag, unsigned int s, int sat) {{
    return mag ? cx_fin_{name}(s, cx_round(mag, 0, {mb}, {bias}), sat) : 0u;
}}
"""
    if name == "bf16":
        dec = """\
__device__ __forceinline__ float cx_dec_bf16(unsigned int b) { return cx_fbits(b << 16); }
"""
    else:
        mask = (1 << sb) - 1
        special = {
            "e4m3fn": f"if ((b & {mask:#x}u) == 0x7Fu) return cx_fbits((s << 31) | 0x7FC00000u);",
            "e4m3fnuz": "if (b == 0x80u) return cx_fbits(0xFFC00000u);",
            "e5m2": "if ((b & 0x7Cu) == 0x7Cu) "
            "return cx_fbits((s << 31) | ((b & 3u) ? 0x7FC00000u : 0x7F800000u));",
            "e5m2fnuz": "if (b == 0x80u) return cx_fbits(0xFFC00000u);",
            "f4e2m1": "",
        }[name]
        dec = f"""\
__device__ __forceinline__ float cx_dec_{name}(unsigned int b) {{
    b &= {(1 << (sb + 1)) - 1:#x}u;
    unsigned int s = b >> {sb}, ef = (b & {mask:#x}u) >> {mb}, m = b & {(1 << mb) - 1:#x}u;
    {special}
    float v = ef ? (float)(m | {1 << mb}u) * cx_pow2f((int)ef - {bias + mb})
                 : (float)m * cx_pow2f({1 - bias - mb});
    return cx_fbits(cx_ubits(v) | (s << 31));
}}
"""
    return enc + dec


def _small_int_helpers(name: str) -> str:
    bits, signed = _SMALL_INTS[name]
    mask = (1 << bits) - 1
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, mask)
    value = f"(long long)(b & {mask:#x}u)"
    if signed:
        value = f"((long long)(b & {mask:#x}u) ^ {1 << (bits - 1)}) - {1 << (bits - 1)}"
    return f"""\
__device__ __forceinline__ long long cx_dec_{name}(unsigned int b) {{ return {value}; }}
__device__ __forceinline__ unsigned char cx_wrap_{name}(cx_u64 v) {{
    return (unsigned char)(v & {mask:#x}u);
}}
__device__ __forceinline__ unsigned char cx_trunc_{name}(double v) {{
    return (unsigned char)((long long)cx_trunc_in(v, {lo}.0, {hi + 1}.0) & {mask:#x});
}}
"""


HELPERS = Snippet(
    "cast_helpers",
    """\
typedef unsigned long long cx_u64;
__device__ __forceinline__ cx_u64 cx_dbits(double v) {
    union { double d; cx_u64 u; } c; c.d = v; return c.u;
}
__device__ __forceinline__ unsigned int cx_ubits(float v) {
    union { float f; unsigned int u; } c; c.f = v; return c.u;
}
__device__ __forceinline__ float cx_fbits(unsigned int u) {
    union { float f; unsigned int u; } c; c.u = u; return c.f;
}
__device__ __forceinline__ float cx_pow2f(int k) {  // 2^k, -126 <= k <= 127
    return cx_fbits((unsigned int)(k + 127) << 23);
}
__device__ __forceinline__ int cx_msb(cx_u64 m) {  // m != 0
#ifdef ORTCORE_CUDA_EMU
    return 63 - __builtin_clzll(m);
#else
    return 63 - __clzll((long long)m);
#endif
}
// m * 2^e (m > 0) rounded to nearest even on a float of mb mantissa bits and
// exponent bias `bias`, without sign: (exponent field << mb) + mantissa, which
// exceeds the largest finite encoding on overflow (the caller checks).
__device__ __forceinline__ unsigned int cx_round(cx_u64 m, int e, int mb, int bias) {
    int big = cx_msb(m) + e;  // m * 2^e lies in [2^big, 2^(big + 1))
    int emin = 1 - bias;
    int q = (big < emin ? emin : big) - mb;  // the exponent of one unit in the last place
    int shift = q - e;
    cx_u64 r;
    if (shift <= 0) {
        r = m << -shift;
    } else if (shift > 64) {
        r = 0;  // below a quarter unit
    } else {
        cx_u64 half = 1ull << (shift - 1);
        cx_u64 rem = m & ((half << 1) - 1);
        r = shift == 64 ? 0ull : m >> shift;
        if (rem > half || (rem == half && (r & 1ull))) r++;
    }
    if (big < emin) return (unsigned int)r;  // subnormal (r == 2^mb: the smallest normal)
    return ((unsigned int)(big - emin + 1) << mb) + (unsigned int)r - (1u << mb);
}
// float8e8m0 from float32's exponent: mode 0 rounds up, 1 down, 2 to nearest
// (ties up, but for subnormals), as onnx.numpy_helper.to_float8e8m0.
__device__ __forceinline__ unsigned char cx_enc_e8m0(float v, int sat, int mode) {
    unsigned int b = cx_ubits(v), ex = (b >> 23) & 0xFFu;
    if (ex == 0xFFu) return 0xFF;
    int up = mode == 0 ? (b & 0x7FFFFFu) != 0
           : mode == 2 ? (b & 0x400000u) != 0 && ((b & 0x3FFFFFu) != 0 || ex > 0) : 0;
    if (sat && ex == 0xFEu) up = 0;
    return (unsigned char)(ex + up);
}
__device__ __forceinline__ float cx_dec_e8m0(unsigned int b) {
    b &= 0xFFu;
    return cx_fbits(b == 0xFFu ? 0x7FC00000u : b == 0 ? 0x00400000u : b << 23);
}
// To an integer type: truncated toward zero, 0 when out of [lo, hi) or NaN (as ml_dtypes).
__device__ __forceinline__ double cx_trunc_in(double v, double lo, double hi) {
    double t = trunc(v);
    return (t >= lo && t < hi) ? t : 0.0;
}
"""
    + "".join(_small_float_helpers(n) for n in _SMALL)
    + "".join(_small_int_helpers(n) for n in _SMALL_INTS),
)
"""The shared ``__device__`` helpers: decoders (``cx_dec_<t>``) and encoders of each type."""


def cast_suffixes() -> dict[str, tuple[str, np.dtype]]:
    """Every element type these kernels convert between: suffix -> (C type, numpy dtype)."""
    out = {s: (c, d) for s, (c, d) in CAST_TYPES.items() if isinstance(d, np.dtype)}
    return {**out, **EXOTIC}


def _load(src: str) -> tuple[str, str]:
    """The kind of value a source element is read as (``f``: float, ``d``:
    double, ``i``: long long, ``u``: unsigned long long) and the C expression."""
    if src in _SMALL or src == "e8m0":
        return "f", f"cx_dec_{src}(x[i])"
    if src in _SMALL_INTS:
        return "i", f"cx_dec_{src}(x[i])"
    if src in ("f32", "f16"):
        return "f", "load_f(x[i])"
    if src == "f64":
        return "d", "x[i]"
    if src == "b":
        return "i", "(long long)(x[i] != 0)"
    if src == "u64":
        return "u", "x[i]"
    return "i", "(long long)x[i]"


def _store(dst: str, kind: str, v: str) -> str:
    """The statement that stores value ``v`` (of ``kind``) as ``dst`` into ``y[i]``."""
    ctype = cast_suffixes()[dst][0]
    if dst in _SMALL:
        if kind in "fd":
            value = f"cx_enc_{dst}((double){v}, sat)"
        elif kind == "u":
            value = f"cx_enci_{dst}({v}, 0u, sat)"
        else:
            value = f"cx_enci_{dst}(a < 0 ? 0ull - (cx_u64)a : (cx_u64)a, a < 0 ? 1u : 0u, sat)"
            return f"{{ long long a = {v}; y[i] = ({ctype})({value}); }}"
        return f"y[i] = ({ctype})({value});"
    if dst == "e8m0":
        return f"y[i] = cx_enc_e8m0((float){v}, sat, mode);"
    if dst in _SMALL_INTS:
        if kind in "fd":
            return f"y[i] = cx_trunc_{dst}((double){v});"
        return f"y[i] = cx_wrap_{dst}((cx_u64){v});"
    if dst == "b":
        return f"y[i] = (unsigned char)({v} != 0);"
    if dst in ("f32", "f16"):
        return f"store_f(&y[i], (float){v});"
    if dst == "f64" or kind in "iu":
        return f"y[i] = ({ctype}){v};"
    info = np.iinfo(cast_suffixes()[dst][1])
    return f"y[i] = ({ctype})cx_trunc_in((double){v}, {info.min}.0, {info.max + 1}.0);"


@cache
def castx_kernel(src: str, dst: str) -> Kernel:
    """``y = (dst) x`` where ``src`` or ``dst`` is a type of :data:`EXOTIC` (the
    other one of :data:`EXOTIC` or of :data:`~.elementwise.CAST_TYPES`); the
    kernel also takes ``int sat`` and ``int mode`` (see the module's doc).

    Raises:
        ValueError: neither type is one of :data:`EXOTIC`, or they are the same.
    """
    types = cast_suffixes()
    if src == dst or (src not in EXOTIC and dst not in EXOTIC):
        raise ValueError(f"castx_kernel({src!r}, {dst!r}): one (other) type must be exotic")
    a, b = types[src][0], types[dst][0]
    kind, value = _load(src)
    name = f"castx_{src}_{dst}"
    source = f"""\
extern "C" __global__ void {name}(const {a}* __restrict__ x, {b}* __restrict__ y, i64 n,
                                  int sat, int mode) {{
    {_LOOP} {_store(dst, kind, value)}
}}
"""
    params = (
        Param(f"const {a}*", "x"),
        Param(f"{b}*", "y"),
        Param("i64", "n"),
        Param("int", "sat"),
        Param("int", "mode"),
    )
    return Kernel(name, params, source, (HELPERS,))


def all_kernels() -> list[Kernel]:
    """Every kernel of this module (for compiling them all at once)."""
    types = cast_suffixes()
    return [
        castx_kernel(s, d) for s in types for d in types if s != d and (s in EXOTIC or d in EXOTIC)
    ]
