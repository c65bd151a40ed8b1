"""CUDA kernels of :mod:`ortcore_cuda.ops_image`.

* ``resize_<in>_<out>(x, y, n, ResizeArgs a)``: Resize along one axis, the
  input viewed as ``(outer, in_len, inner)`` and the output as ``(outer,
  out_len, inner)``; one thread an output element. Resize is separable, so an
  N-D resize is one launch per resized axis (float32 in between for float16
  tensors). Coordinates and weights are computed in double, as ONNX's
  definition does: nearest (four rounding modes), linear and cubic (Keys,
  ``cubic_coeff_a``), antialias (the kernel widened by ``1 / scale`` when
  downsampling), ``exclude_outside``, the six coordinate transformations and
  ``tf_crop_and_resize``'s extrapolation value. Neighbours past the edges
  read the edge.
* ``col2im_<dtype>(cols, y, n, WinArgs a)``: the sum of the sliding blocks
  ``cols`` (per plane ``(K, L)``: kernel positions by blocks) into images of
  up to three spatial dims; one thread an output pixel gathers the blocks
  that cover it (no atomics). Col2Im, and ConvTranspose after its GEMM.
* ``lppool_<dtype>(x, y, n, WinArgs a, p)``: ``(sum |x| ** p) ** (1 / p)`` over
  each window of up to three spatial dims (pads count as zeros).
* ``gridsample_<dtype>(x, grid, y, n, GridArgs a)``: GridSample over 2 or 3
  spatial dims: nearest (half to even), linear, cubic (Keys, ``a = -0.75``);
  padding zeros, border or reflection; ``align_corners``.

Window problems of fewer than three spatial dims run with leading dims of 1.
"""

from __future__ import annotations

from functools import cache

import numpy as np

from .elementwise import _LOOP
from .nn import LOWEST
from .spec import DTYPES, Kernel, Param, Snippet, StructType

__all__ = [
    "GRID_ARGS",
    "RESIZE_ARGS",
    "WIN_ARGS",
    "WIN_DIMS",
    "all_kernels",
    "col2im_kernel",
    "gridsample_kernel",
    "im2col_nd_kernel",
    "lppool_kernel",
    "pool_nd_kernel",
    "resize_kernel",
]

WIN_DIMS = 3
"""Spatial dims the window kernels take (fewer run with leading dims of 1)."""

RESIZE_MODES = {"nearest": 0, "linear": 1, "cubic": 2}
"""Resize's ``mode`` -> the kernel's code."""
RESIZE_COORDS = {
    "half_pixel": 0,
    "pytorch_half_pixel": 1,
    "align_corners": 2,
    "asymmetric": 3,
    "tf_crop_and_resize": 4,
    "half_pixel_symmetric": 5,
}
"""Resize's ``coordinate_transformation_mode`` -> the kernel's code."""
RESIZE_NEAREST = {"round_prefer_floor": 0, "round_prefer_ceil": 1, "floor": 2, "ceil": 3}
"""Resize's ``nearest_mode`` -> the kernel's code."""

_RESIZE_INTS = ("in_len", "out_len", "inner", "mode", "coord", "nearest", "antialias", "exclude")
_RESIZE_FLOATS = ("scale", "roi0", "roi1", "cubic_a", "extrapolation")
RESIZE_ARGS = StructType(
    "ResizeArgs",
    "struct ResizeArgs { i64 "
    + ", ".join(_RESIZE_INTS)
    + "; double "
    + ", ".join(_RESIZE_FLOATS)
    + "; };",
    np.dtype([(f, "<i8") for f in _RESIZE_INTS] + [(f, "<f8") for f in _RESIZE_FLOATS]),
)
"""One axis of a Resize: lengths, the codes of the modes, scale, the axis's roi."""

_WIN_FIELDS = ("inp", "out", "k", "s", "p", "d", "e")
WIN_ARGS = StructType(
    "WinArgs",
    "struct WinArgs { " + " ".join(f"i64 {f}[{WIN_DIMS}];" for f in _WIN_FIELDS) + " };",
    np.dtype([(f, "<i8", (WIN_DIMS,)) for f in _WIN_FIELDS]),
)
"""A window op over up to three spatial dims: input and output dims, kernel,
strides, pads before, dilations, pads after (for col2im, ``inp`` holds the blocks)."""

GRID_MODES = {"nearest": 0, "linear": 1, "bilinear": 1, "cubic": 2, "bicubic": 2}
"""GridSample's ``mode`` (either opset's names) -> the kernel's code."""
GRID_PADDING = {"zeros": 0, "border": 1, "reflection": 2}
"""GridSample's ``padding_mode`` -> the kernel's code."""

_GRID_FIELDS = ("nd", "c", "mode", "padding", "align")
GRID_ARGS = StructType(
    "GridArgs",
    "struct GridArgs { i64 "
    + ", ".join(_GRID_FIELDS)
    + f"; i64 inp[{WIN_DIMS}]; i64 out[{WIN_DIMS}]; }};",
    np.dtype(
        [(f, "<i8") for f in _GRID_FIELDS]
        + [("inp", "<i8", (WIN_DIMS,)), ("out", "<i8", (WIN_DIMS,))]
    ),
)
"""GridSample: spatial rank, channels, codes of the modes, input and output spatial dims."""


@cache
def pool_nd_kernel(kind: str, dtype: str) -> Kernel:
    """Max (``kind="max"``) or average (``"avg"``) pooling over up to three
    spatial dims, one thread an output element. An average divides by the
    window's elements inside the input, or (``count_pads``) those before the
    end pads ``a.e`` (a ``ceil_mode`` window past them counts only its part
    inside the pads; see ``ops_image.divisor_ends``). A window with no tap on
    the input gives ``nn.LOWEST`` (max) or 0 (average), as onnxruntime."""
    ctype = DTYPES[dtype][0]
    name = f"{kind}pool_nd_{dtype}"
    step = "acc = (v != v || v > acc) ? v : acc;" if kind == "max" else "acc += v;"
    result = (
        f"count ? acc : {LOWEST[dtype]}"
        if kind == "max"
        else "count ? acc / (float)(count_pads ? padded : count) : 0.0f"
    )
    source = f"""\
extern "C" __global__ void {name}(const {ctype}* __restrict__ x, {ctype}* __restrict__ y,
                                  i64 n, WinArgs a, i64 count_pads) {{
    {_LOOP} {{
{_WIN_SPLIT}
        const {ctype}* src = x + plane * a.inp[0] * a.inp[1] * a.inp[2];
        float acc = {"-INFINITY" if kind == "max" else "0.0f"};
        i64 count = 0, padded = 0;
        for (i64 k0 = 0; k0 < a.k[0]; k0++) {{
            i64 i0 = pos[0] * a.s[0] - a.p[0] + k0 * a.d[0];
            if (i0 >= a.inp[0] + a.e[0]) continue;
            for (i64 k1 = 0; k1 < a.k[1]; k1++) {{
                i64 i1 = pos[1] * a.s[1] - a.p[1] + k1 * a.d[1];
                if (i1 >= a.inp[1] + a.e[1]) continue;
                for (i64 k2 = 0; k2 < a.k[2]; k2++) {{
                    i64 i2 = pos[2] * a.s[2] - a.p[2] + k2 * a.d[2];
                    if (i2 >= a.inp[2] + a.e[2]) continue;
                    padded++;
                    if (i0 < 0 || i0 >= a.inp[0] || i1 < 0 || i1 >= a.inp[1] || i2 < 0
                        || i2 >= a.inp[2]) continue;
                    float v = load_f(src[(i0 * a.inp[1] + i1) * a.inp[2] + i2]);
                    {step}
                    count++;
                }}
            }}
        }}
        store_f(&y[i], {result});
    }}
}}
"""
    params = (
        Param(f"const {ctype}*", "x"),
        Param(f"{ctype}*", "y"),
        Param("i64", "n"),
        Param("WinArgs", "a"),
        Param("i64", "count_pads"),
    )
    return Kernel(name, params, source, (WIN_ARGS,))


@cache
def im2col_nd_kernel(dtype: str) -> Kernel:
    """One image's columns over up to three spatial dims: ``(C * K, L)``, row
    ``c * K + k`` (kernel position ``k``), column the output position; pads read as zero."""
    ctype = DTYPES[dtype][0]
    name = f"im2col_nd_{dtype}"
    source = f"""\
extern "C" __global__ void {name}(const {ctype}* __restrict__ x, {ctype}* __restrict__ cols,
                                  i64 n, WinArgs a) {{
    {_LOOP} {{
        i64 L = a.out[0] * a.out[1] * a.out[2], K = a.k[0] * a.k[1] * a.k[2];
        i64 col = i % L, row = i / L, ch = row / K, k = row % K;
        i64 o2 = col % a.out[2], o1 = (col / a.out[2]) % a.out[1], o0 = col / (a.out[2] * a.out[1]);
        i64 k2 = k % a.k[2], k1 = (k / a.k[2]) % a.k[1], k0 = k / (a.k[2] * a.k[1]);
        i64 i0 = o0 * a.s[0] - a.p[0] + k0 * a.d[0];
        i64 i1 = o1 * a.s[1] - a.p[1] + k1 * a.d[1];
        i64 i2 = o2 * a.s[2] - a.p[2] + k2 * a.d[2];
        bool inside = i0 >= 0 && i0 < a.inp[0] && i1 >= 0 && i1 < a.inp[1] && i2 >= 0
                      && i2 < a.inp[2];
        const {ctype}* src = x + ch * a.inp[0] * a.inp[1] * a.inp[2];
        store_f(&cols[i], inside ? load_f(src[(i0 * a.inp[1] + i1) * a.inp[2] + i2]) : 0.0f);
    }}
}}
"""
    params = (
        Param(f"const {ctype}*", "x"),
        Param(f"{ctype}*", "cols"),
        Param("i64", "n"),
        Param("WinArgs", "a"),
    )
    return Kernel(name, params, source, (WIN_ARGS,))


_GS_REFLECT = Snippet(
    "gs_reflect",
    """\
__device__ __forceinline__ double gs_reflect(double x, double lo, double hi) {
    double range = hi - lo;
    if (range <= 0.0) return lo;
    if (x < lo) {
        double dx = lo - x, r;
        i64 k = (i64)(dx / range);
        r = dx - (double)k * range;
        return k % 2 == 0 ? lo + r : hi - r;
    }
    if (x > hi) {
        double dx = x - hi, r;
        i64 k = (i64)(dx / range);
        r = dx - (double)k * range;
        return k % 2 == 0 ? hi - r : lo + r;
    }
    return x;
}
""",
)
"""GridSample's reflection of a coordinate into ``[lo, hi]`` (a shared device helper)."""


@cache
def resize_kernel(src: str, dst: str) -> Kernel:
    """Resize along one axis from element type ``src`` to ``dst`` (see the module docstring)."""
    sctype, dctype = DTYPES[src][0], DTYPES[dst][0]
    name = f"resize_{src}_{dst}"
    source = f"""\
extern "C" __global__ void {name}(const {sctype}* __restrict__ x, {dctype}* __restrict__ y,
                                  i64 n, ResizeArgs a) {{
    {_LOOP} {{
        i64 in_i = i % a.inner, t = i / a.inner, o = t % a.out_len, outer = t / a.out_len;
        const {sctype}* src = x + outer * a.in_len * a.inner + in_i;
        double len = (double)a.in_len, width = a.scale * len, xo, od = (double)o;
        switch (a.coord) {{
        case 0: xo = (od + 0.5) / a.scale - 0.5; break;
        case 1: xo = width == 1.0 ? -0.5 : (od + 0.5) / a.scale - 0.5; break;
        case 2: xo = width == 1.0 ? 0.0 : od * (len - 1.0) / (width - 1.0); break;
        case 3: xo = od / a.scale; break;
        case 4: {{
            double r = a.roi1 - a.roi0;
            xo = width == 1.0 ? r * (len - 1.0) / 2.0 : od * r * (len - 1.0) / (width - 1.0);
            xo = xo + a.roi0 * (len - 1.0);
            break;
        }}
        default: {{
            double offset = len / 2.0 * (1.0 - (double)a.out_len / width);
            xo = offset + (od + 0.5) / a.scale - 0.5;
        }}
        }}
        if (a.coord == 4 && (xo < 0.0 || xo > len - 1.0)) {{
            store_f(&y[i], (float)a.extrapolation);
            continue;
        }}
        double c = ceil(xo), ratio = xo - (c - 1.0);  // in (0, 1]: the left neighbour preferred
        i64 base = (i64)c - 1;
        if (a.mode == 0) {{
            bool up = true;
            if (ratio != 1.0) {{
                switch (a.nearest) {{
                case 0: up = ratio > 0.5; break;
                case 1: up = ratio >= 0.5; break;
                case 2: up = false; break;
                default: up = true;
                }}
            }}
            i64 j = base + (up ? 1 : 0);
            j = j < 0 ? 0 : (j >= a.in_len ? a.in_len - 1 : j);
            store_f(&y[i], load_f(src[j * a.inner]));
            continue;
        }}
        double sc = a.antialias ? fmin(a.scale, 1.0) : 1.0, A = a.cubic_a;
        i64 first = a.mode == 1 ? (a.antialias ? (i64)floor(-1.0 / sc) + 1 : 0)
                                : (a.antialias ? (i64)floor(-2.0 / sc) + 1 : -1);
        i64 taps = 2 - 2 * first;
        double acc = 0.0, wsum = 0.0;
        for (i64 k = 0; k < taps; k++) {{
            i64 j = base + first + k;
            if (a.exclude && (j < 0 || j >= a.in_len)) continue;
            double d = fabs(((double)(first + k) - ratio) * sc), w;
            if (a.mode == 1) {{
                w = d < 1.0 ? 1.0 - d : 0.0;
            }} else if (d <= 1.0) {{
                w = ((A + 2.0) * d - (A + 3.0)) * d * d + 1.0;
            }} else if (d < 2.0) {{
                w = ((A * d - 5.0 * A) * d + 8.0 * A) * d - 4.0 * A;
            }} else {{
                w = 0.0;
            }}
            j = j < 0 ? 0 : (j >= a.in_len ? a.in_len - 1 : j);
            acc += w * (double)load_f(src[j * a.inner]);
            wsum += w;
        }}
        if ((a.antialias || a.exclude) && wsum != 0.0) acc /= wsum;
        store_f(&y[i], (float)acc);
    }}
}}
"""
    params = (
        Param(f"const {sctype}*", "x"),
        Param(f"{dctype}*", "y"),
        Param("i64", "n"),
        Param("ResizeArgs", "a"),
    )
    return Kernel(name, params, source, (RESIZE_ARGS,))


_WIN_SPLIT = """\
        i64 pos[3], r = i;
        for (int t = 2; t >= 0; t--) { pos[t] = r % a.out[t]; r /= a.out[t]; }
        i64 plane = r;"""


@cache
def col2im_kernel(dtype: str) -> Kernel:
    """Col2Im: every output pixel the sum of the block entries that land on it."""
    ctype = DTYPES[dtype][0]
    name = f"col2im_{dtype}"
    source = f"""\
extern "C" __global__ void {name}(const {ctype}* __restrict__ cols, {ctype}* __restrict__ y,
                                  i64 n, WinArgs a) {{
    {_LOOP} {{
{_WIN_SPLIT}
        i64 blocks = a.inp[0] * a.inp[1] * a.inp[2];
        const {ctype}* src = cols + plane * a.k[0] * a.k[1] * a.k[2] * blocks;
        float acc = 0.0f;
        for (i64 k0 = 0; k0 < a.k[0]; k0++) {{
            i64 t0 = pos[0] + a.p[0] - k0 * a.d[0];
            if (t0 < 0 || t0 % a.s[0] != 0 || t0 / a.s[0] >= a.inp[0]) continue;
            for (i64 k1 = 0; k1 < a.k[1]; k1++) {{
                i64 t1 = pos[1] + a.p[1] - k1 * a.d[1];
                if (t1 < 0 || t1 % a.s[1] != 0 || t1 / a.s[1] >= a.inp[1]) continue;
                for (i64 k2 = 0; k2 < a.k[2]; k2++) {{
                    i64 t2 = pos[2] + a.p[2] - k2 * a.d[2];
                    if (t2 < 0 || t2 % a.s[2] != 0 || t2 / a.s[2] >= a.inp[2]) continue;
                    i64 row = (k0 * a.k[1] + k1) * a.k[2] + k2;
                    i64 col = ((t0 / a.s[0]) * a.inp[1] + t1 / a.s[1]) * a.inp[2] + t2 / a.s[2];
                    acc += load_f(src[row * blocks + col]);
                }}
            }}
        }}
        store_f(&y[i], acc);
    }}
}}
"""
    params = (
        Param(f"const {ctype}*", "cols"),
        Param(f"{ctype}*", "y"),
        Param("i64", "n"),
        Param("WinArgs", "a"),
    )
    return Kernel(name, params, source, (WIN_ARGS,))


@cache
def lppool_kernel(dtype: str) -> Kernel:
    """LpPool: the p-norm of each window (see the module docstring)."""
    ctype = DTYPES[dtype][0]
    name = f"lppool_{dtype}"
    source = f"""\
extern "C" __global__ void {name}(const {ctype}* __restrict__ x, {ctype}* __restrict__ y,
                                  i64 n, WinArgs a, float p) {{
    {_LOOP} {{
{_WIN_SPLIT}
        const {ctype}* src = x + plane * a.inp[0] * a.inp[1] * a.inp[2];
        float acc = 0.0f;
        for (i64 k0 = 0; k0 < a.k[0]; k0++) {{
            i64 i0 = pos[0] * a.s[0] - a.p[0] + k0 * a.d[0];
            if (i0 < 0 || i0 >= a.inp[0]) continue;
            for (i64 k1 = 0; k1 < a.k[1]; k1++) {{
                i64 i1 = pos[1] * a.s[1] - a.p[1] + k1 * a.d[1];
                if (i1 < 0 || i1 >= a.inp[1]) continue;
                for (i64 k2 = 0; k2 < a.k[2]; k2++) {{
                    i64 i2 = pos[2] * a.s[2] - a.p[2] + k2 * a.d[2];
                    if (i2 < 0 || i2 >= a.inp[2]) continue;
                    float v = fabsf(load_f(src[(i0 * a.inp[1] + i1) * a.inp[2] + i2]));
                    acc += powf(v, p);
                }}
            }}
        }}
        store_f(&y[i], powf(acc, 1.0f / p));
    }}
}}
"""
    params = (
        Param(f"const {ctype}*", "x"),
        Param(f"{ctype}*", "y"),
        Param("i64", "n"),
        Param("WinArgs", "a"),
        Param("float", "p"),
    )
    return Kernel(name, params, source, (WIN_ARGS,))


@cache
def gridsample_kernel(dtype: str) -> Kernel:
    """GridSample, ``x`` and ``grid`` of one element type (see the module docstring)."""
    ctype = DTYPES[dtype][0]
    name = f"gridsample_{dtype}"
    source = f"""\
extern "C" __global__ void {name}(const {ctype}* __restrict__ x,
                                  const {ctype}* __restrict__ grid, {ctype}* __restrict__ y,
                                  i64 n, GridArgs a) {{
    {_LOOP} {{
        i64 outsz = a.out[0] * a.out[1] * a.out[2], insz = a.inp[0] * a.inp[1] * a.inp[2];
        i64 op = i % outsz, t = i / outsz, ch = t % a.c, img = t / a.c;
        const {ctype}* g = grid + (img * outsz + op) * a.nd;
        const {ctype}* src = x + (img * a.c + ch) * insz;
        i64 idx[3][4];
        float w[3][4];
        int taps[3];
        for (int t = 0; t < 3; t++) {{
            int j = t - (3 - (int)a.nd);  // the spatial dim; the grid lists them last first
            if (j < 0) {{
                idx[t][0] = 0; w[t][0] = 1.0f; taps[t] = 1;
                continue;
            }}
            double len = (double)a.inp[t], gv = (double)load_f(g[a.nd - 1 - j]);
            double lo = a.align ? 0.0 : -0.5, hi = a.align ? len - 1.0 : len - 0.5;
            float xf = a.align ? (float)((gv + 1.0) / 2.0 * (len - 1.0))
                               : (float)(((gv + 1.0) * len - 1.0) / 2.0);
            if (a.mode == 0) xf = rintf(xf);
            if (xf < lo || xf > hi) {{
                if (a.padding == 1) xf = xf < 0.0f ? 0.0f : fminf(xf, (float)(len - 1.0));
                else if (a.padding == 2) xf = (float)gs_reflect((double)xf, lo, hi);
            }}
            i64 x0;
            if (a.mode == 0) {{
                x0 = (i64)xf; taps[t] = 1; w[t][0] = 1.0f;
            }} else {{
                float fl = floorf(xf), r = xf - fl;
                x0 = (i64)fl;
                if (a.mode == 1) {{
                    taps[t] = 2; w[t][0] = 1.0f - r; w[t][1] = r;
                }} else {{
                    const float A = -0.75f;
                    float r1 = r + 1.0f, q = 1.0f - r, q1 = 2.0f - r;
                    taps[t] = 4; x0 -= 1;
                    w[t][0] = ((A * r1 - 5.0f * A) * r1 + 8.0f * A) * r1 - 4.0f * A;
                    w[t][1] = ((A + 2.0f) * r - (A + 3.0f)) * r * r + 1.0f;
                    w[t][2] = ((A + 2.0f) * q - (A + 3.0f)) * q * q + 1.0f;
                    w[t][3] = ((A * q1 - 5.0f * A) * q1 + 8.0f * A) * q1 - 4.0f * A;
                }}
            }}
            for (int k = 0; k < taps[t]; k++) {{
                i64 v = x0 + k, L = a.inp[t];
                if (a.padding == 0) idx[t][k] = (v < 0 || v >= L) ? -1 : v;
                else if (a.padding == 1) idx[t][k] = v < 0 ? 0 : (v >= L ? L - 1 : v);
                else idx[t][k] = (i64)gs_reflect((double)v, lo, hi);
            }}
        }}
        float acc = 0.0f;
        for (int k0 = 0; k0 < taps[0]; k0++) {{
            if (idx[0][k0] < 0) continue;
            for (int k1 = 0; k1 < taps[1]; k1++) {{
                if (idx[1][k1] < 0) continue;
                for (int k2 = 0; k2 < taps[2]; k2++) {{
                    if (idx[2][k2] < 0) continue;
                    float v = load_f(src[(idx[0][k0] * a.inp[1] + idx[1][k1]) * a.inp[2]
                                         + idx[2][k2]]);
                    acc += w[0][k0] * w[1][k1] * w[2][k2] * v;
                }}
            }}
        }}
        store_f(&y[i], acc);
    }}
}}
"""
    params = (
        Param(f"const {ctype}*", "x"),
        Param(f"const {ctype}*", "grid"),
        Param(f"{ctype}*", "y"),
        Param("i64", "n"),
        Param("GridArgs", "a"),
    )
    return Kernel(name, params, source, (GRID_ARGS, _GS_REFLECT))


def all_kernels() -> list[Kernel]:
    """Every kernel of this module (for compiling them all at once)."""
    out: list[Kernel] = [resize_kernel(a, b) for a in DTYPES for b in DTYPES]
    for dtype in DTYPES:
        out += [col2im_kernel(dtype), lppool_kernel(dtype), gridsample_kernel(dtype)]
        out += [pool_nd_kernel(kind, dtype) for kind in ("max", "avg")] + [im2col_nd_kernel(dtype)]
    return out
