"""CUDA kernels of :mod:`ortcore_cuda.ops_attention`.

Attention runs as: :func:`heads_kernel` lays Q and K out as contiguous
``(batch, heads, seq, head_size)`` and scales them by ``sqrt(scale)`` (as the
ONNX function does, so that float16 rounds where it rounds); a batched GEMM
gives the scores ``Q K^T``; :func:`softmax_kernel` turns each row of scores
into probabilities (softcap, the attention mask, the causal and sliding-window
frontiers, the per-batch valid key count, then a softmax; a row with no key
left gives zeros); a second batched GEMM multiplies by V.
"""

from __future__ import annotations

from functools import cache

import numpy as np

from .rows import TREE
from .spec import DTYPES, Kernel, Param, StructType

__all__ = [
    "MASK_BOOL",
    "MASK_FLOAT",
    "MASK_NONE",
    "ROWS",
    "LINEAR",
    "all_kernels",
    "causal_conv_kernel",
    "heads_kernel",
    "linear_attention_kernel",
    "rotary_kernel",
    "softmax_kernel",
]

MASK_NONE, MASK_BOOL, MASK_FLOAT = 0, 1, 2
"""``mask_kind`` of :data:`ROWS`: no mask, a boolean mask (False: not attended),
a float mask of the element type (added to the scores)."""

_ROWS_FIELDS = (
    "rows",
    "q_heads",
    "q_len",
    "kv_len",
    "mask_kind",
    "mask_b",
    "mask_h",
    "mask_q",
    "mask_len",
    "causal",
    "offset",
    "left",
    "right",
    "mode",
)

ROWS = StructType(
    "AttnRows",
    "struct AttnRows {\n" + "".join(f"    i64 {f};\n" for f in _ROWS_FIELDS) + "};\n",
    np.dtype([(f, np.int64) for f in _ROWS_FIELDS]),
)
"""The row kernel's shape and masking arguments:

* ``rows`` = batch * q_heads * q_len, ``q_heads``, ``q_len``, ``kv_len`` (keys, past included);
* ``mask_kind`` (:data:`MASK_NONE`, ...), the mask's element strides along
  batch, head and query (0 where it broadcasts; its keys are contiguous) and
  its key count ``mask_len`` (keys at or past it are masked, as ONNX pads the
  mask with -inf);
* ``causal`` (key ``j`` attended by query ``i`` only when ``j <= i + offset``),
  ``offset`` (the past length; with ``nonpad`` given, ``nonpad[b] - q_len``
  instead), the sliding window ``left`` and ``right`` (-1: unbounded);
* ``mode``: what ``qk_out`` gets (0 the scores, 1 after softcap, 2 with the
  mask added, 3 the probabilities).
"""


@cache
def heads_kernel(dtype: str) -> Kernel:
    """``y[c0, c1, c2, c3] = x[c0 s0 + c1 s1 + c2 s2 + c3 s3] * scale``: a
    strided 4-D view (dims ``d0 x d1 x d2 x d3``, ``n`` elements) copied
    contiguous and scaled (the arithmetic in float, stored in the element type)."""
    ctype = DTYPES[dtype][0]
    name = f"attn_heads_{dtype}"
    source = f"""\
extern "C" __global__ void {name}(const {ctype}* __restrict__ x, {ctype}* __restrict__ y, i64 n,
                                  i64 d1, i64 d2, i64 d3, i64 s0, i64 s1, i64 s2, i64 s3,
                                  float scale) {{
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (i64)gridDim.x * blockDim.x) {{
        i64 r = i;
        i64 c3 = r % d3; r /= d3;
        i64 c2 = r % d2; r /= d2;
        i64 c1 = r % d1;
        i64 c0 = r / d1;
        store_f(&y[i], load_f(x[c0 * s0 + c1 * s1 + c2 * s2 + c3 * s3]) * scale);
    }}
}}
"""
    params = (
        Param(f"const {ctype}*", "x"),
        Param(f"{ctype}*", "y"),
        Param("i64", "n"),
        Param("i64", "d1"),
        Param("i64", "d2"),
        Param("i64", "d3"),
        Param("i64", "s0"),
        Param("i64", "s1"),
        Param("i64", "s2"),
        Param("i64", "s3"),
        Param("float", "scale"),
    )
    return Kernel(name, params, source)


@cache
def softmax_kernel(dtype: str) -> Kernel:
    """One block per row of scores (``rows x kv_len``, a grid-stride loop over
    rows): ``x = softcap(score) + bias``, where the bias is the mask's value
    (or -inf) plus -inf for each key the causal or window frontier or
    ``nonpad`` excludes; ``probs = softmax(x)``, or zeros when every key's
    bias is -inf (the ONNX guard for a fully masked row). ``qk_out`` (may be
    null) gets what ``mode`` says (see :data:`ROWS`). ``mask`` (bool or the
    element type) and ``nonpad`` (int64 per batch) may be null."""
    ctype = DTYPES[dtype][0]
    name = f"attn_softmax_{dtype}"
    bias_fn = f"attn_bias_{dtype}"
    source = f"""\
__device__ __forceinline__ float {bias_fn}(const AttnRows& a, const void* mask,
                                             const i64* nonpad, i64 b, i64 h, i64 i, i64 j) {{
    float bias = 0.0f;
    if (a.mask_kind != 0) {{
        if (j >= a.mask_len) {{
            bias = -INFINITY;
        }} else {{
            i64 at = b * a.mask_b + h * a.mask_h + i * a.mask_q + j;
            if (a.mask_kind == 1)
                bias = ((const unsigned char*)mask)[at] ? 0.0f : -INFINITY;
            else
                bias = load_f(((const {ctype}*)mask)[at]);
        }}
    }}
    i64 offset = nonpad ? nonpad[b] - a.q_len : a.offset;
    i64 diff = i + offset - j;  // how far the key lies before the query
    if (a.causal && diff < 0) bias += -INFINITY;
    if (a.left >= 0 && diff > a.left) bias += -INFINITY;
    if (a.right >= 0 && -diff > a.right) bias += -INFINITY;
    if (nonpad && j >= nonpad[b]) bias += -INFINITY;
    return bias;
}}

extern "C" __global__ void {name}(const {ctype}* __restrict__ scores, {ctype}* __restrict__ probs,
                                  {ctype}* __restrict__ qk_out, const void* __restrict__ mask,
                                  const i64* __restrict__ nonpad, float softcap, AttnRows a) {{
    for (i64 row = blockIdx.x; row < a.rows; row += gridDim.x) {{
        i64 i = row % a.q_len;
        i64 h = (row / a.q_len) % a.q_heads;
        i64 b = row / (a.q_len * a.q_heads);
        const {ctype}* sr = scores + row * a.kv_len;
        {ctype}* pr = probs + row * a.kv_len;
        float bmax = -INFINITY, xmax = -INFINITY;
        for (i64 j = threadIdx.x; j < a.kv_len; j += blockDim.x) {{
            float s = load_f(sr[j]);
            if (softcap > 0.0f) s = tanhf(s / softcap) * softcap;
            float bias = {bias_fn}(a, mask, nonpad, b, h, i, j);
            float x = s + bias;
            bmax = (bmax != bmax || bmax > bias) ? bmax : bias;
            xmax = (xmax != xmax || xmax > x) ? xmax : x;
        }}
        bmax = tree_reduce(bmax, 1);
        xmax = tree_reduce(xmax, 1);
        float base = xmax == -INFINITY ? 0.0f : xmax;
        float sum = 0.0f;
        for (i64 j = threadIdx.x; j < a.kv_len; j += blockDim.x) {{
            float s = load_f(sr[j]);
            if (softcap > 0.0f) s = tanhf(s / softcap) * softcap;
            sum += expf(s + {bias_fn}(a, mask, nonpad, b, h, i, j) - base);
        }}
        sum = tree_reduce(sum, 0);
        if (sum == 0.0f) sum = 1.0f;
        bool dead = bmax == -INFINITY;  // no key attended: zeros, not NaN
        for (i64 j = threadIdx.x; j < a.kv_len; j += blockDim.x) {{
            float raw = load_f(sr[j]);
            float s = softcap > 0.0f ? tanhf(raw / softcap) * softcap : raw;
            float x = s + {bias_fn}(a, mask, nonpad, b, h, i, j);
            float p = dead ? 0.0f : expf(x - base) / sum;
            store_f(&pr[j], p);
            if (qk_out)
                store_f(&qk_out[row * a.kv_len + j],
                        a.mode == 0 ? raw : a.mode == 1 ? s : a.mode == 2 ? x : p);
        }}
    }}
}}
"""
    params = (
        Param(f"const {ctype}*", "scores"),
        Param(f"{ctype}*", "probs"),
        Param(f"{ctype}*", "qk_out"),
        Param("const void*", "mask"),
        Param("const i64*", "nonpad"),
        Param("float", "softcap"),
        Param("AttnRows", "a"),
    )
    return Kernel(name, params, source, (TREE, ROWS))


@cache
def rotary_kernel(dtype: str) -> Kernel:
    """RotaryEmbedding, one thread per element (a grid-stride loop over
    ``n``): ``x`` is ``(batch, heads, seq, head)`` (``four_d``) or ``(batch,
    seq, heads * head)``; the first ``rot`` elements of each head are rotated
    (halves, or even and odd elements when ``interleaved``) by the angle of
    row ``pos[b, s]`` of ``cos``/``sin`` (``rot / 2`` wide), or of row
    ``b * seq + s`` when ``pos`` is null; the rest are copied."""
    ctype = DTYPES[dtype][0]
    name = f"rotary_{dtype}"
    source = f"""\
extern "C" __global__ void {name}(const {ctype}* __restrict__ x, const {ctype}* __restrict__ cosc,
                                  const {ctype}* __restrict__ sinc, const i64* __restrict__ pos,
                                  {ctype}* __restrict__ y, i64 n, i64 head, i64 seq, i64 heads,
                                  int four_d, i64 rot, int interleaved) {{
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (i64)gridDim.x * blockDim.x) {{
        i64 d = i % head;
        if (d >= rot) {{
            y[i] = x[i];
            continue;
        }}
        i64 bs = four_d ? (i / (heads * seq * head)) * seq + (i / head) % seq
                        : i / (heads * head);
        i64 half = rot / 2;
        i64 row = (pos ? pos[bs] : bs) * half;
        const {ctype}* xr = x + (i - d);
        i64 k, a, b;
        bool first;
        if (interleaved) {{
            k = d / 2; a = 2 * k; b = a + 1; first = d % 2 == 0;
        }} else {{
            first = d < half; k = first ? d : d - half; a = k; b = k + half;
        }}
        float c = load_f(cosc[row + k]), s = load_f(sinc[row + k]);
        float x1 = load_f(xr[a]), x2 = load_f(xr[b]);
        store_f(&y[i], first ? c * x1 - s * x2 : s * x1 + c * x2);
    }}
}}
"""
    params = (
        Param(f"const {ctype}*", "x"),
        Param(f"const {ctype}*", "cosc"),
        Param(f"const {ctype}*", "sinc"),
        Param("const i64*", "pos"),
        Param(f"{ctype}*", "y"),
        Param("i64", "n"),
        Param("i64", "head"),
        Param("i64", "seq"),
        Param("i64", "heads"),
        Param("int", "four_d"),
        Param("i64", "rot"),
        Param("int", "interleaved"),
    )
    return Kernel(name, params, source)


_LINEAR_FIELDS = (
    "batch",
    "len",
    "q_heads",
    "kv_heads",
    "dk",
    "dv",
    "gating",
    "delta",
    "decay_per_key",
    "beta_heads",
)

LINEAR = StructType(
    "LinAttn",
    "struct LinAttn {\n" + "".join(f"    i64 {f};\n" for f in _LINEAR_FIELDS) + "};\n",
    np.dtype([(f, np.int64) for f in _LINEAR_FIELDS]),
)
"""The shapes and the update rule of :func:`linear_attention_kernel`:
``batch``, ``len`` (tokens), ``q_heads``, ``kv_heads``, ``dk`` and ``dv``
(the key and value head sizes); ``gating`` (the state decays by
``exp(decay)`` before each token), ``delta`` (the written value is
``beta * (v - S^T k)``); ``decay_per_key`` (the decay has one value per key
dimension, ``(batch, len, kv_heads * dk)``, else one per head, ``(batch,
len, kv_heads)``); ``beta_heads`` (``kv_heads`` or 1: beta's last dim)."""


@cache
def linear_attention_kernel(dtype: str) -> Kernel:
    """LinearAttention's recurrence, one thread per column ``m`` of one
    ``(batch, kv head)``'s state (a grid-stride loop over ``batch * kv_heads
    * dv``): the columns of the ``dk x dv`` state evolve independently under
    every update rule. The state is kept in float in ``state`` (``(batch,
    kv_heads, dk, dv)``), starting from ``past`` (may be null: zeros); token
    by token it decays, takes the (delta-corrected) outer product ``k v^T``,
    and each query head of the kv head's group reads ``scale * q^T S`` into
    ``y`` (``(batch, len, q_heads * dv)``). ``present`` gets the last state.
    ``q``, ``k``, ``v`` are ``(batch, len, heads * size)``; ``decay`` and
    ``beta`` may be null when the rule does not read them."""
    ctype = DTYPES[dtype][0]
    name = f"linear_attention_{dtype}"
    source = f"""\
extern "C" __global__ void {name}(const {ctype}* __restrict__ q, const {ctype}* __restrict__ k,
                                  const {ctype}* __restrict__ v, const {ctype}* __restrict__ past,
                                  const {ctype}* __restrict__ decay,
                                  const {ctype}* __restrict__ beta, {ctype}* __restrict__ y,
                                  float* __restrict__ state, {ctype}* __restrict__ present,
                                  float scale, LinAttn a) {{
    i64 n = a.batch * a.kv_heads * a.dv;
    i64 group = a.q_heads / a.kv_heads;
    for (i64 idx = (i64)blockIdx.x * blockDim.x + threadIdx.x; idx < n;
         idx += (i64)gridDim.x * blockDim.x) {{
        i64 m = idx % a.dv;
        i64 bh = idx / a.dv;
        i64 h = bh % a.kv_heads;
        i64 b = bh / a.kv_heads;
        float* s = state + bh * a.dk * a.dv + m;
        for (i64 d = 0; d < a.dk; ++d)
            s[d * a.dv] = past ? load_f(past[bh * a.dk * a.dv + d * a.dv + m]) : 0.0f;
        for (i64 t = 0; t < a.len; ++t) {{
            i64 bt = b * a.len + t;
            const {ctype}* kt = k + (bt * a.kv_heads + h) * a.dk;
            float vt = load_f(v[(bt * a.kv_heads + h) * a.dv + m]);
            if (a.gating) {{
                if (a.decay_per_key) {{
                    const {ctype}* g = decay + (bt * a.kv_heads + h) * a.dk;
                    for (i64 d = 0; d < a.dk; ++d) s[d * a.dv] *= expf(load_f(g[d]));
                }} else {{
                    float e = expf(load_f(decay[bt * a.kv_heads + h]));
                    for (i64 d = 0; d < a.dk; ++d) s[d * a.dv] *= e;
                }}
            }}
            if (a.delta) {{
                float r = 0.0f;
                for (i64 d = 0; d < a.dk; ++d) r += s[d * a.dv] * load_f(kt[d]);
                float be = load_f(beta[bt * a.beta_heads + (a.beta_heads == 1 ? 0 : h)]);
                vt = be * (vt - r);
            }}
            for (i64 d = 0; d < a.dk; ++d) s[d * a.dv] += load_f(kt[d]) * vt;
            for (i64 g = 0; g < group; ++g) {{
                i64 hq = h * group + g;
                const {ctype}* qt = q + (bt * a.q_heads + hq) * a.dk;
                float o = 0.0f;
                for (i64 d = 0; d < a.dk; ++d) o += load_f(qt[d]) * s[d * a.dv];
                store_f(&y[(bt * a.q_heads + hq) * a.dv + m], scale * o);
            }}
        }}
        for (i64 d = 0; d < a.dk; ++d)
            store_f(&present[bh * a.dk * a.dv + d * a.dv + m], s[d * a.dv]);
    }}
}}
"""
    params = (
        Param(f"const {ctype}*", "q"),
        Param(f"const {ctype}*", "k"),
        Param(f"const {ctype}*", "v"),
        Param(f"const {ctype}*", "past"),
        Param(f"const {ctype}*", "decay"),
        Param(f"const {ctype}*", "beta"),
        Param(f"{ctype}*", "y"),
        Param("float*", "state"),
        Param(f"{ctype}*", "present"),
        Param("float", "scale"),
        Param("LinAttn", "a"),
    )
    return Kernel(name, params, source, (LINEAR,))


@cache
def causal_conv_kernel(dtype: str) -> Kernel:
    """CausalConvWithState: ``x`` is ``(rows, len)`` with ``rows = batch *
    channels``, left-padded by ``past`` (``(rows, k - 1)``; null: zeros);
    ``y[r, t] = act(round(sum_j w[c, j] padded[r, t + j] + bias[c]))`` with
    ``c = r % channels``, the sum in float rounded to the element type, then
    SiLU (``silu``) in float; ``state`` gets the last ``k - 1`` positions of
    the padded input. ``bias`` may be null. Grid-stride loops over both."""
    ctype = DTYPES[dtype][0]
    name = f"causal_conv_{dtype}"
    source = f"""\
extern "C" __global__ void {name}(const {ctype}* __restrict__ x, const {ctype}* __restrict__ w,
                                  const {ctype}* __restrict__ bias,
                                  const {ctype}* __restrict__ past, {ctype}* __restrict__ y,
                                  {ctype}* __restrict__ state, i64 rows, i64 channels, i64 len,
                                  i64 k, int silu) {{
    i64 pad = k - 1;
    i64 step = (i64)gridDim.x * blockDim.x;
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < rows * len; i += step) {{
        i64 t = i % len;
        i64 r = i / len;
        i64 c = r % channels;
        float acc = 0.0f;
        for (i64 j = 0; j < k; ++j) {{
            i64 p = t + j;
            float xv = p >= pad ? load_f(x[r * len + p - pad])
                                : past ? load_f(past[r * pad + p]) : 0.0f;
            acc += load_f(w[c * k + j]) * xv;
        }}
        if (bias) acc += load_f(bias[c]);
        {ctype} rounded;
        store_f(&rounded, acc);
        acc = load_f(rounded);
        if (silu) acc = acc / (1.0f + expf(-acc));
        store_f(&y[i], acc);
    }}
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < rows * pad; i += step) {{
        i64 r = i / pad;
        i64 p = len + i % pad;
        if (p >= pad)
            state[i] = x[r * len + p - pad];
        else if (past)
            state[i] = past[r * pad + p];
        else
            store_f(&state[i], 0.0f);
    }}
}}
"""
    params = (
        Param(f"const {ctype}*", "x"),
        Param(f"const {ctype}*", "w"),
        Param(f"const {ctype}*", "bias"),
        Param(f"const {ctype}*", "past"),
        Param(f"{ctype}*", "y"),
        Param(f"{ctype}*", "state"),
        Param("i64", "rows"),
        Param("i64", "channels"),
        Param("i64", "len"),
        Param("i64", "k"),
        Param("int", "silu"),
    )
    return Kernel(name, params, source)


def all_kernels() -> list[Kernel]:
    """Every kernel of this module (for compiling them all at once)."""
    kernels = [k(dtype) for dtype in DTYPES for k in (heads_kernel, softmax_kernel, rotary_kernel)]
    return kernels + [
        k(dtype) for dtype in ("f32", "f16") for k in (linear_attention_kernel, causal_conv_kernel)
    ]
