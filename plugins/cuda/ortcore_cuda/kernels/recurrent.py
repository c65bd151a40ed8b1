"""CUDA kernels of :mod:`ortcore_cuda.ops_recurrent`.

* Recurrent cells (RNN, GRU, LSTM; float32, float16): the input projections
  and each step's ``H @ R^T`` are GEMMs (cuBLAS); per step one kernel applies
  the gates, elementwise over ``[directions, batch, hidden]``
  (:func:`rnn_step_kernel`), after :func:`rnn_init_kernel` has set the
  states. Activations are chosen at run time from :data:`ACTIVATIONS` (a
  code, alpha and beta per direction and slot, in the :data:`RNN_ACTS`
  struct).
* Signal ops (float32, float16, float64; the sums in double): a direct
  O(N^2) DFT, one thread per output element (:func:`dft_kernel`), the STFT
  likewise per frame and bin (:func:`stft_kernel`), the cosine-sum windows
  (:func:`window_kernel`) and the mel filter bank (:func:`mel_kernel`).
"""

from __future__ import annotations

from functools import cache

import numpy as np

from .spec import DTYPES, Kernel, Param, StructType

__all__ = [
    "ACTIVATIONS",
    "CELLS",
    "RNN_ACTS",
    "RNN_TYPES",
    "SIGNAL_TYPES",
    "all_kernels",
    "dft_kernel",
    "mel_kernel",
    "rnn_init_kernel",
    "rnn_step_kernel",
    "stft_kernel",
    "window_kernel",
]

RNN_TYPES = ("f32", "f16")
"""Element types of the recurrent kernels (those the GEMMs take)."""
SIGNAL_TYPES = ("f32", "f16", "f64")
"""Element types of the signal kernels."""

ACTIVATIONS: dict[str, int] = {
    "sigmoid": 0,
    "tanh": 1,
    "relu": 2,
    "affine": 3,
    "leakyrelu": 4,
    "thresholdedrelu": 5,
    "scaledtanh": 6,
    "hardsigmoid": 7,
    "elu": 8,
    "softsign": 9,
    "softplus": 10,
}
"""Activation functions of the recurrent ops (lower-case names) and their codes."""

_SLOTS = 6  # 2 directions x (f, g, h)

RNN_ACTS = StructType(
    "RnnActs",
    f"struct RnnActs {{ i64 kind[{_SLOTS}]; float alpha[{_SLOTS}]; float beta[{_SLOTS}]; }};\n"
    "__device__ __forceinline__ float rnn_act(const RnnActs& a, i64 k, float x) {\n"
    "    float al = a.alpha[k], be = a.beta[k];\n"
    "    switch (a.kind[k]) {\n"
    "    case 0: return 1.0f / (1.0f + expf(-x));\n"
    "    case 1: return tanhf(x);\n"
    "    case 2: return x > 0.0f ? x : 0.0f;\n"
    "    case 3: return al * x + be;\n"
    "    case 4: return x < 0.0f ? al * x : x;\n"
    "    case 5: return x > al ? x : 0.0f;\n"
    "    case 6: return al * tanhf(be * x);\n"
    "    case 7: return fmaxf(0.0f, fminf(1.0f, al * x + be));\n"
    "    case 8: return x < 0.0f ? al * (expf(x) - 1.0f) : x;\n"
    "    case 9: return x / (1.0f + fabsf(x));\n"
    "    default: return x > 20.0f ? x : log1pf(expf(x));\n"
    "    }\n"
    "}\n"
    "__device__ __forceinline__ float rnn_clip(float x, float c) {\n"
    "    return c < 0.0f ? x : fminf(fmaxf(x, -c), c);\n"
    "}\n",
    np.dtype([("kind", "<i8", (_SLOTS,)), ("alpha", "<f4", (_SLOTS,)), ("beta", "<f4", (_SLOTS,))]),
)
"""Per direction ``d`` and slot ``k`` (f, g, h), at ``d * 3 + k``: the
activation's code (:data:`ACTIVATIONS`), alpha and beta; with
``rnn_act`` and ``rnn_clip`` (``clip < 0``: none)."""

CELLS: dict[str, tuple[int, int]] = {
    "rnn": (1, 1),
    "lstm": (4, 4),
    "gru_lbr": (3, 3),
    "gru_reset": (3, 2),
    "gru": (3, 2),
}
"""Step kernels: gates (of the input projection and the bias) and the width
(in hidden units) of the ``H @ R^T`` rows each reads. ``gru_reset`` and
``gru`` are the two halves of a GRU step without ``linear_before_reset``:
``r * H`` (into ``aux``), then, after the GEMM of that with ``R_h``, the rest."""

_LOOP = (
    "for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; "
    "i += (i64)gridDim.x * blockDim.x)"
)


@cache
def rnn_init_kernel(dtype: str) -> Kernel:
    """Set the states ``h`` (``[D, batch, hidden]``, element type) and ``c``
    (float) from ``h0``/``c0`` (null: zeros; ``layout`` 1: ``[batch, D,
    hidden]``), and write them to ``yh``/``yc`` (null: not wanted)."""
    t = DTYPES[dtype][0]
    name = f"rnn_init_{dtype}"
    source = f"""\
extern "C" __global__ void {name}(const {t}* __restrict__ h0, const {t}* __restrict__ c0,
                                  {t}* __restrict__ h, float* __restrict__ c,
                                  {t}* __restrict__ yh, {t}* __restrict__ yc, i64 n,
                                  i64 batch, i64 hidden, i64 ndir, i64 layout) {{
    {_LOOP} {{
        i64 j = i % hidden, b = (i / hidden) % batch, d = i / (hidden * batch);
        i64 so = layout ? (b * ndir + d) * hidden + j : i;
        float hv = h0 ? load_f(h0[so]) : 0.0f;
        store_f(&h[i], hv);
        if (yh) store_f(&yh[so], load_f(h[i]));
        if (c) {{
            float cv = c0 ? load_f(c0[so]) : 0.0f;
            c[i] = cv;
            if (yc) store_f(&yc[so], cv);
        }}
    }}
}}
"""
    params = (
        Param(f"const {t}*", "h0"),
        Param(f"const {t}*", "c0"),
        Param(f"{t}*", "h"),
        Param("float*", "c"),
        Param(f"{t}*", "yh"),
        Param(f"{t}*", "yc"),
        Param("i64", "n"),
        Param("i64", "batch"),
        Param("i64", "hidden"),
        Param("i64", "ndir"),
        Param("i64", "layout"),
    )
    return Kernel(name, params, source)


def _bias(g: int, w: bool = True, r: bool = True) -> str:
    parts = []
    if w:
        parts.append(f"load_f(bias[bo + {g} * hidden])")
    if r:
        parts.append(f"load_f(bias[bo + gh + {g} * hidden])")
    return f"(bias ? {' + '.join(parts)} : 0.0f)"


def _x(g: int) -> str:
    return f"load_f(xr[{g} * hidden])"


def _h(g: int) -> str:
    return f"load_f(hq[{g} * hidden])"


_F, _G, _H = "d * 3", "d * 3 + 1", "d * 3 + 2"
_WRITE = """\
            store_f(&h[i], hn);
            if (y) store_f(&y[yo], load_f(h[i]));
            if (yh) store_f(&yh[so], load_f(h[i]));"""

_BODIES = {
    "rnn": f"""\
            float hn = rnn_act(acts, {_F}, rnn_clip({_x(0)} + {_h(0)} + {_bias(0)}, clip));
{_WRITE}""",
    "lstm": f"""\
            float cp = c[i];
            const {{T}}* pp = p ? p + d * 3 * hidden + j : p;
            float gi = {_x(0)} + {_h(0)} + {_bias(0)} + (p ? load_f(pp[0]) * cp : 0.0f);
            float go = {_x(1)} + {_h(1)} + {_bias(1)};
            float gf = {_x(2)} + {_h(2)} + {_bias(2)} + (p ? load_f(pp[2 * hidden]) * cp : 0.0f);
            float gc = {_x(3)} + {_h(3)} + {_bias(3)};
            float it = rnn_act(acts, {_F}, rnn_clip(gi, clip));
            float ft = forget ? 1.0f - it : rnn_act(acts, {_F}, rnn_clip(gf, clip));
            float ct = rnn_act(acts, {_G}, rnn_clip(gc, clip));
            float cn = ft * cp + it * ct;
            go += p ? load_f(pp[hidden]) * cn : 0.0f;
            float ot = rnn_act(acts, {_F}, rnn_clip(go, clip));
            float hn = ot * rnn_act(acts, {_H}, cn);
            c[i] = cn;
            if (yc) store_f(&yc[so], cn);
{_WRITE}""",
    "gru_lbr": f"""\
            float hp = load_f(h[i]);
            float z = rnn_act(acts, {_F}, rnn_clip({_x(0)} + {_h(0)} + {_bias(0)}, clip));
            float r = rnn_act(acts, {_F}, rnn_clip({_x(1)} + {_h(1)} + {_bias(1)}, clip));
            float hh = rnn_act(acts, {_G},
                               rnn_clip({_x(2)} + {_bias(2, r=False)}
                                        + r * ({_h(2)} + {_bias(2, w=False)}), clip));
            float hn = (1.0f - z) * hh + z * hp;
{_WRITE}""",
    "gru_reset": f"""\
            float r = rnn_act(acts, {_F}, rnn_clip({_x(1)} + {_h(1)} + {_bias(1)}, clip));
            store_f(&aux[i], r * load_f(h[i]));""",
    "gru": f"""\
            float hp = load_f(h[i]);
            float z = rnn_act(acts, {_F}, rnn_clip({_x(0)} + {_h(0)} + {_bias(0)}, clip));
            float hh = rnn_act(acts, {_G},
                               rnn_clip({_x(2)} + load_f(aux[i]) + {_bias(2)}, clip));
            float hn = (1.0f - z) * hh + z * hp;
{_WRITE}""",
}


@cache
def rnn_step_kernel(cell: str, dtype: str) -> Kernel:
    """One time step (``step``) of ``cell`` (a key of :data:`CELLS`) for every
    direction, batch item and hidden unit (``n`` of them).

    ``xw``: the input projections ``[D, rows, G * hidden]`` (row ``t * batch
    + b``, or ``b * seq + t`` with ``layout`` 1); ``hr``: ``H @ R^T`` of this
    step, ``[D, batch, W * hidden]``; ``bias``: ``[D, 2 * G * hidden]`` (W's,
    then R's; null: none); ``h``/``c``: the states, updated in place; ``p``:
    LSTM peepholes ``[D, 3 * hidden]`` (null: none); ``lens``: int32
    sequence lengths (null: all ``seq``); ``y``, ``yh``, ``yc``: outputs (null:
    not wanted); ``aux``: a GRU's ``r * H`` (``[D, batch, hidden]``);
    ``rev0``: direction 0 runs in reverse (direction 1 always does). Past an
    item's length the state is kept and ``Y`` is zero."""
    t = DTYPES[dtype][0]
    gates, width = CELLS[cell]
    name = f"rnn_step_{cell}_{dtype}"
    body = _BODIES[cell].replace("{T}", t)
    invalid = "" if cell == "gru_reset" else "if (y) store_f(&y[yo], 0.0f);"
    outs = (
        ""
        if cell == "gru_reset"
        else "        i64 yo = layout ? ((b * seq + t) * ndir + d) * hidden + j\n"
        "                        : ((t * ndir + d) * batch + b) * hidden + j;\n"
        "        i64 so = layout ? (b * ndir + d) * hidden + j : i;"
    )
    source = f"""\
extern "C" __global__ void {name}(const {t}* __restrict__ xw, const {t}* __restrict__ hr,
                                  const {t}* __restrict__ bias, {t}* __restrict__ h,
                                  float* __restrict__ c, const {t}* __restrict__ p,
                                  const int* __restrict__ lens, {t}* __restrict__ y,
                                  {t}* __restrict__ yh, {t}* __restrict__ yc, {t}* aux, i64 n,
                                  i64 batch, i64 hidden, i64 seq, i64 step, i64 rev0,
                                  i64 layout, i64 ndir, i64 forget, float clip, RnnActs acts) {{
    const i64 gh = {gates} * hidden;
    {_LOOP} {{
        i64 j = i % hidden, b = (i / hidden) % batch, d = i / (hidden * batch);
        i64 len = lens ? (i64)lens[b] : seq;
        if (len > seq) len = seq;
        bool rev = d == 1 || rev0;
        i64 t = (step < len && rev) ? len - 1 - step : step;
{outs}
        if (step >= len) {{
            {invalid}
            continue;
        }}
        i64 row = layout ? b * seq + t : t * batch + b;
        const {t}* xr = xw + (d * batch * seq + row) * gh + j;
        const {t}* hq = hr + (d * batch + b) * ({width} * hidden) + j;
        i64 bo = d * 2 * gh + j;
        {{
{body}
        }}
    }}
}}
"""
    params = (
        Param(f"const {t}*", "xw"),
        Param(f"const {t}*", "hr"),
        Param(f"const {t}*", "bias"),
        Param(f"{t}*", "h"),
        Param("float*", "c"),
        Param(f"const {t}*", "p"),
        Param("const int*", "lens"),
        Param(f"{t}*", "y"),
        Param(f"{t}*", "yh"),
        Param(f"{t}*", "yc"),
        Param(f"{t}*", "aux"),
        Param("i64", "n"),
        Param("i64", "batch"),
        Param("i64", "hidden"),
        Param("i64", "seq"),
        Param("i64", "step"),
        Param("i64", "rev0"),
        Param("i64", "layout"),
        Param("i64", "ndir"),
        Param("i64", "forget"),
        Param("float", "clip"),
        Param("RnnActs", "acts"),
    )
    return Kernel(name, params, source, (RNN_ACTS,))


_TAU = "6.283185307179586"


@cache
def dft_kernel(dtype: str) -> Kernel:
    """A direct DFT along one axis, one thread per output element, in double.

    ``x`` is ``[outer, n_in, inner, c_in]`` (``c_in`` 1: real, 2: complex),
    ``y`` ``[outer, n_out, inner, 2]``; ``len`` is the DFT length (the signal
    zero-padded or cut to it); ``inverse`` conjugates the twiddles and
    divides by ``len``. With ``irfft``, ``x`` is a one-sided spectrum and ``y``
    the real signal ``[outer, len, inner, 1]`` it is the spectrum of (the
    imaginary parts of the DC and Nyquist bins ignored, as numpy's irfft)."""
    t = DTYPES[dtype][0]
    name = f"dft_{dtype}"
    source = f"""\
extern "C" __global__ void {name}(const {t}* __restrict__ x, {t}* __restrict__ y, i64 n,
                                  i64 n_in, i64 inner, i64 c_in, i64 len, i64 n_out,
                                  i64 inverse, i64 irfft) {{
    {_LOOP} {{
        i64 q = i % inner, k = (i / inner) % n_out, o = i / (inner * n_out);
        const {t}* base = x + (o * n_in * inner + q) * c_in;
        const i64 stride = inner * c_in;
        double re = 0.0, im = 0.0;
        if (!irfft) {{
            i64 m = n_in < len ? n_in : len;
            double sgn = inverse ? 1.0 : -1.0;
            for (i64 s = 0; s < m; ++s) {{
                double a = sgn * {_TAU} * (double)((k * s) % len) / (double)len;
                double xr = (double)load_f(base[s * stride]);
                double xi = c_in == 2 ? (double)load_f(base[s * stride + 1]) : 0.0;
                double cs = cos(a), sn = sin(a);
                re += xr * cs - xi * sn;
                im += xr * sn + xi * cs;
            }}
            if (inverse) {{
                re /= (double)len;
                im /= (double)len;
            }}
            store_f(&y[i * 2], re);
            store_f(&y[i * 2 + 1], im);
        }} else {{
            i64 half = len / 2 + 1;
            i64 m = n_in < half ? n_in : half;
            for (i64 f = 0; f < m; ++f) {{
                double a = {_TAU} * (double)((f * k) % len) / (double)len;
                double xr = (double)load_f(base[f * stride]);
                double xi = c_in == 2 ? (double)load_f(base[f * stride + 1]) : 0.0;
                double w = (f == 0 || 2 * f == len) ? 1.0 : 2.0;
                double term = xr * cos(a);
                if (f != 0 && 2 * f != len) term -= xi * sin(a);
                re += w * term;
            }}
            store_f(&y[i], re / (double)len);
        }}
    }}
}}
"""
    params = (
        Param(f"const {t}*", "x"),
        Param(f"{t}*", "y"),
        Param("i64", "n"),
        Param("i64", "n_in"),
        Param("i64", "inner"),
        Param("i64", "c_in"),
        Param("i64", "len"),
        Param("i64", "n_out"),
        Param("i64", "inverse"),
        Param("i64", "irfft"),
    )
    return Kernel(name, params, source)


@cache
def stft_kernel(dtype: str) -> Kernel:
    """The short-time Fourier transform, one thread per (batch, frame, bin), in
    double: ``x`` ``[batch, siglen, c_in]``, ``w`` the window (``flen`` long;
    null: ones), ``y`` ``[batch, frames, bins, 2]``; frame ``f`` starts at
    ``f * step``."""
    t = DTYPES[dtype][0]
    name = f"stft_{dtype}"
    source = f"""\
extern "C" __global__ void {name}(const {t}* __restrict__ x, const {t}* __restrict__ w,
                                  {t}* __restrict__ y, i64 n, i64 siglen, i64 c_in,
                                  i64 frames, i64 bins, i64 flen, i64 step) {{
    {_LOOP} {{
        i64 k = i % bins, f = (i / bins) % frames, b = i / (bins * frames);
        const {t}* base = x + (b * siglen + f * step) * c_in;
        double re = 0.0, im = 0.0;
        for (i64 s = 0; s < flen; ++s) {{
            double wt = w ? (double)load_f(w[s]) : 1.0;
            double a = -{_TAU} * (double)((k * s) % flen) / (double)flen;
            double xr = (double)load_f(base[s * c_in]) * wt;
            double xi = c_in == 2 ? (double)load_f(base[s * c_in + 1]) * wt : 0.0;
            double cs = cos(a), sn = sin(a);
            re += xr * cs - xi * sn;
            im += xr * sn + xi * cs;
        }}
        store_f(&y[i * 2], re);
        store_f(&y[i * 2 + 1], im);
    }}
}}
"""
    params = (
        Param(f"const {t}*", "x"),
        Param(f"const {t}*", "w"),
        Param(f"{t}*", "y"),
        Param("i64", "n"),
        Param("i64", "siglen"),
        Param("i64", "c_in"),
        Param("i64", "frames"),
        Param("i64", "bins"),
        Param("i64", "flen"),
        Param("i64", "step"),
    )
    return Kernel(name, params, source)


@cache
def window_kernel(dtype: str) -> Kernel:
    """A cosine-sum window of ``n`` points: ``a0 - a1 cos(2 pi i / denom) +
    a2 cos(4 pi i / denom)``, in double (Hann, Hamming, Blackman)."""
    t = DTYPES[dtype][0]
    name = f"window_{dtype}"
    source = f"""\
extern "C" __global__ void {name}({t}* __restrict__ y, i64 n, double denom, double a0,
                                  double a1, double a2) {{
    {_LOOP} {{
        double a = {_TAU} * (double)i / denom;
        store_f(&y[i], a0 - a1 * cos(a) + a2 * cos(2.0 * a));
    }}
}}
"""
    params = (
        Param(f"{t}*", "y"),
        Param("i64", "n"),
        Param("double", "denom"),
        Param("double", "a0"),
        Param("double", "a1"),
        Param("double", "a2"),
    )
    return Kernel(name, params, source)


@cache
def mel_kernel(dtype: str) -> Kernel:
    """The mel filter bank ``[dft_length / 2 + 1, nmel]``: triangles between
    ``nmel + 2`` points evenly spaced in mel from ``low`` to ``high`` hertz,
    each point's spectrogram bin ``floor((dft_length + 1) * hz / rate)``, in
    double."""
    t = DTYPES[dtype][0]
    name = f"mel_{dtype}"
    source = f"""\
__device__ __forceinline__ i64 mel_edge_{dtype}(double low_mel, double mel_step, i64 q,
                                                i64 dft_length, i64 rate) {{
    double hz = 700.0 * expm1((low_mel + (double)q * mel_step) / 2595.0 * log(10.0));
    return (i64)floor((double)(dft_length + 1) * hz / (double)rate);
}}
extern "C" __global__ void {name}({t}* __restrict__ y, i64 n, i64 nmel, i64 dft_length,
                                  i64 rate, double low, double high) {{
    double low_mel = 2595.0 * log1p(low / 700.0) / log(10.0);
    double high_mel = 2595.0 * log1p(high / 700.0) / log(10.0);
    double mel_step = (high_mel - low_mel) / (double)(nmel + 2);
    {_LOOP} {{
        i64 m = i % nmel, j = i / nmel;
        i64 lo = mel_edge_{dtype}(low_mel, mel_step, m, dft_length, rate);
        i64 ce = mel_edge_{dtype}(low_mel, mel_step, m + 1, dft_length, rate);
        i64 hi = mel_edge_{dtype}(low_mel, mel_step, m + 2, dft_length, rate);
        double v = 0.0;
        if (ce == lo) {{
            if (j == ce) v = 1.0;
        }} else if (j >= lo && j <= ce) {{
            v = (double)(j - lo) / (double)(ce - lo);
        }}
        if (hi > ce && j >= ce && j < hi) v = (double)(hi - j) / (double)(hi - ce);
        store_f(&y[i], v);
    }}
}}
"""
    params = (
        Param(f"{t}*", "y"),
        Param("i64", "n"),
        Param("i64", "nmel"),
        Param("i64", "dft_length"),
        Param("i64", "rate"),
        Param("double", "low"),
        Param("double", "high"),
    )
    return Kernel(name, params, source)


def all_kernels() -> list[Kernel]:
    """Every kernel of this module (for compiling them all at once)."""
    out: list[Kernel] = []
    for dtype in RNN_TYPES:
        out.append(rnn_init_kernel(dtype))
        out += [rnn_step_kernel(cell, dtype) for cell in CELLS]
    for dtype in SIGNAL_TYPES:
        out += [dft_kernel(dtype), stft_kernel(dtype), window_kernel(dtype), mel_kernel(dtype)]
    return out
