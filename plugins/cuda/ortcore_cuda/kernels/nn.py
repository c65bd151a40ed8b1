"""Kernels of the convolutional ops: im2col for Conv, 2-D pooling, BatchNormalization.

* ``im2col_<dtype>(x, cols, n, ConvArgs a)``: the columns of ``n / (C * kh
  * kw * oh * ow)`` images, each image's every group at once, laid out
  ``(groups, C/groups * kh * kw, oh * ow)``, so that the convolution is one
  strided-batched GEMM over the images (one group: ``W @ cols[i]``, ``W``'s
  stride 0) or over each image's groups (``W[g] @ cols[g]``). Padding reads
  as zero.
* ``maxpool_<dtype>`` / ``avgpool_<dtype>(x, y, n, PoolArgs a)``: one thread
  per output element over its window (dilations, pads; an average counts the
  pads or not).
* ``batchnorm_<dtype>(x, scale, bias, mean, var, y, n, channels, inner, eps)``:
  inference-mode BatchNormalization, the channel of element ``i`` being
  ``(i / inner) % channels``.

1-D problems run as 2-D ones of height 1.
"""

from __future__ import annotations

from functools import cache

import numpy as np

from .elementwise import _LOOP
from .spec import DTYPES, Kernel, Param, StructType, floating

__all__ = [
    "CONV_ARGS",
    "POOL_ARGS",
    "batchnorm_kernel",
    "im2col_kernel",
    "lrn_kernel",
    "pool_kernel",
]

_CONV_FIELDS = ("c", "h", "w", "kh", "kw", "oh", "ow", "sh", "sw", "ph", "pw", "dh", "dw")
CONV_ARGS = StructType(
    "ConvArgs",
    "struct ConvArgs { i64 " + ", ".join(_CONV_FIELDS) + "; };",
    np.dtype([(f, "<i8") for f in _CONV_FIELDS]),
)
"""Channels (all groups), input height/width, kernel, output, strides, pads, dilations."""

_POOL_FIELDS = (*_CONV_FIELDS[1:], "eh", "ew", "count_pads")
POOL_ARGS = StructType(
    "PoolArgs",
    "struct PoolArgs { i64 " + ", ".join(_POOL_FIELDS) + "; };",
    np.dtype([(f, "<i8") for f in _POOL_FIELDS]),
)
"""As :data:`CONV_ARGS` without channels, the end pads an average with
``count_pads`` counts to, and whether it counts pads."""

LOWEST = {"f32": "-3.4028234663852886e+38f", "f16": "-INFINITY", "f64": "-1.7976931348623157e+308"}
"""A max pool's value for a window with no tap on the input, per element
type: the lowest finite value of the type onnxruntime pools in (float32 for
float16, which rounds it to -inf)."""


@cache
@floating
def im2col_kernel(dtype: str) -> Kernel:
    """The columns of one image (see the module docstring)."""
    ctype = DTYPES[dtype][0]
    name = f"im2col_{dtype}"
    source = f"""\
extern "C" __global__ void {name}(const {ctype}* __restrict__ x, {ctype}* __restrict__ cols,
                                  i64 n, ConvArgs a) {{
    {_LOOP} {{
        i64 plane = a.oh * a.ow, per = a.c * a.kh * a.kw * plane;
        i64 img = i / per, j = i % per, pos = j % plane, row = j / plane;
        i64 oy = pos / a.ow, ox = pos % a.ow;
        i64 ch = img * a.c + row / (a.kh * a.kw), k = row % (a.kh * a.kw);
        i64 iy = oy * a.sh - a.ph + (k / a.kw) * a.dh;
        i64 ix = ox * a.sw - a.pw + (k % a.kw) * a.dw;
        bool inside = iy >= 0 && iy < a.h && ix >= 0 && ix < a.w;
        store_f(&cols[i], inside ? load_f(x[(ch * a.h + iy) * a.w + ix]) : 0.0f);
    }}
}}
"""
    params = (
        Param(f"const {ctype}*", "x"),
        Param(f"{ctype}*", "cols"),
        Param("i64", "n"),
        Param("ConvArgs", "a"),
    )
    return Kernel(name, params, source, (CONV_ARGS,))


@cache
@floating
def pool_kernel(kind: str, dtype: str) -> Kernel:
    """2-D max (``kind="max"``) or average (``"avg"``) pooling, one thread an
    output element. A window with no tap on the input gives :data:`LOWEST`
    (max) or 0 (average); an average divides by its taps on the input, or
    (``count_pads``) by those before the end pads ``eh``, ``ew``."""
    ctype = DTYPES[dtype][0]
    name = f"{kind}pool_{dtype}"
    if kind == "max":
        init, step = "-INFINITY", "acc = (v != v || v > acc) ? v : acc;"
        result = f"count ? acc : {LOWEST[dtype]}"
    else:
        init, step = "0.0f", "acc += v;"
        result = "count ? acc / (float)(a.count_pads ? ny * nx : count) : 0.0f"
    source = f"""\
extern "C" __global__ void {name}(const {ctype}* __restrict__ x, {ctype}* __restrict__ y,
                                  i64 n, PoolArgs a) {{
    {_LOOP} {{
        i64 plane = a.oh * a.ow, pos = i % plane, img = i / plane;
        i64 oy = pos / a.ow, ox = pos % a.ow;
        const {ctype}* src = x + img * a.h * a.w;
        float acc = {init};
        i64 count = 0, ny = 0, nx = 0;
        for (i64 ky = 0; ky < a.kh; ky++) ny += oy * a.sh - a.ph + ky * a.dh < a.h + a.eh;
        for (i64 kx = 0; kx < a.kw; kx++) nx += ox * a.sw - a.pw + kx * a.dw < a.w + a.ew;
        for (i64 ky = 0; ky < a.kh; ky++) {{
            i64 iy = oy * a.sh - a.ph + ky * a.dh;
            if (iy < 0 || iy >= a.h) continue;
            for (i64 kx = 0; kx < a.kw; kx++) {{
                i64 ix = ox * a.sw - a.pw + kx * a.dw;
                if (ix < 0 || ix >= a.w) continue;
                float v = load_f(src[iy * a.w + ix]);
                {step}
                count++;
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
        Param("PoolArgs", "a"),
    )
    return Kernel(name, params, source, (POOL_ARGS,))


@cache
@floating
def batchnorm_kernel(dtype: str) -> Kernel:
    """Inference-mode BatchNormalization (see the module docstring)."""
    ctype = DTYPES[dtype][0]
    name = f"batchnorm_{dtype}"
    source = f"""\
extern "C" __global__ void {name}(const {ctype}* __restrict__ x,
                                  const {ctype}* __restrict__ scale,
                                  const {ctype}* __restrict__ bias,
                                  const {ctype}* __restrict__ mean,
                                  const {ctype}* __restrict__ var, {ctype}* __restrict__ y, i64 n,
                                  i64 channels, i64 inner, float epsilon) {{
    {_LOOP} {{
        i64 c = (i / inner) % channels;
        float g = load_f(scale[c]) * rsqrtf(load_f(var[c]) + epsilon);
        store_f(&y[i], (load_f(x[i]) - load_f(mean[c])) * g + load_f(bias[c]));
    }}
}}
"""
    params = (
        Param(f"const {ctype}*", "x"),
        Param(f"const {ctype}*", "scale"),
        Param(f"const {ctype}*", "bias"),
        Param(f"const {ctype}*", "mean"),
        Param(f"const {ctype}*", "var"),
        Param(f"{ctype}*", "y"),
        Param("i64", "n"),
        Param("i64", "channels"),
        Param("i64", "inner"),
        Param("float", "epsilon"),
    )
    return Kernel(name, params, source)


@cache
@floating
def lrn_kernel(dtype: str) -> Kernel:
    """LocalResponseNormalization across channels:
    ``y = x / (bias + alpha / size * sum(x[c'] ** 2)) ** beta`` over the
    ``size`` channels around ``c`` (``(size - 1) // 2`` before, the rest after)."""
    ctype = DTYPES[dtype][0]
    name = f"lrn_{dtype}"
    source = f"""\
extern "C" __global__ void {name}(const {ctype}* __restrict__ x, {ctype}* __restrict__ y, i64 n,
                                  i64 channels, i64 inner, i64 size, float alpha, float beta,
                                  float bias) {{
    {_LOOP} {{
        i64 r = i % inner, c = (i / inner) % channels, img = i / (inner * channels);
        i64 lo = c - (size - 1) / 2, hi = c + size / 2;
        float sq = 0.0f;
        for (i64 k = lo < 0 ? 0 : lo; k <= hi && k < channels; k++) {{
            float v = load_f(x[(img * channels + k) * inner + r]);
            sq += v * v;
        }}
        store_f(&y[i], load_f(x[i]) / powf(bias + alpha / (float)size * sq, beta));
    }}
}}
"""
    params = (
        Param(f"const {ctype}*", "x"),
        Param(f"{ctype}*", "y"),
        Param("i64", "n"),
        Param("i64", "channels"),
        Param("i64", "inner"),
        Param("i64", "size"),
        Param("float", "alpha"),
        Param("float", "beta"),
        Param("float", "bias"),
    )
    return Kernel(name, params, source)
