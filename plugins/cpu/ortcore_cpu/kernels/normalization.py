"""Normalizations: BatchNormalization, InstanceNormalization,
LayerNormalization, GroupNormalization, RMSNormalization, LpNormalization,
MeanVarianceNormalization, LRN, Softmax, LogSoftmax."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from ep_sdk import Compute, NodeInfo

from .._ext import elementwise as ext
from .._ext import rowwise
from . import registry
from ._common import (
    DT,
    FLOATS,
    constant_input,
    f32_contiguous,
    normalize_axis,
    thread_count,
    threads_for,
    threads_for_memory_bound,
)
from ._isa import activation_module
from ._paths import NATIVE, NUMPY, float32_path
from ._versions import per_schema_version

_FLOATS_BF16 = FLOATS | {DT.BFLOAT16}
_FAST = (np.dtype(np.float32), np.dtype(np.float64))
"""Dtypes of the Cython row-wise kernels."""

_LRN_NATIVE = (np.dtype(np.float32), np.dtype(np.float16))
"""Dtypes LRN computes on the float32 kernel (float16 through float32, as
its numpy path does)."""

_act = activation_module()


def _channel_view(x: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Reshape per-channel vector ``v`` to broadcast over x (N, C, *S)."""
    return v.reshape(-1, *([1] * (x.ndim - 2)))


def _batch_norm_affine(
    scale: np.ndarray, bias: np.ndarray, mean: np.ndarray, var: np.ndarray, eps: float
) -> tuple[np.ndarray, np.ndarray]:
    """Per-channel ``(a, b)`` in float64 with BatchNormalization's ``y = a * x + b``."""
    a64 = scale.astype(np.float64) / np.sqrt(var.astype(np.float64) + eps)
    b64 = bias.astype(np.float64) - mean.astype(np.float64) * a64
    return a64, b64


def _batch_norm_inference(
    x: np.ndarray, scale: np.ndarray, bias: np.ndarray, mean: np.ndarray,
    var: np.ndarray, eps: float, threads: int,
    affine: tuple[np.ndarray, np.ndarray] | None = None,
    clamp: tuple[float, float] | None = None,
) -> np.ndarray:  # fmt: skip
    """y = (x - mean) / sqrt(var + eps) * scale + bias, per channel, clamped
    to ``clamp`` (a fused Relu or Clip) in the same pass for float32;
    ``affine``: :func:`_batch_norm_affine` of these parameters, if known."""
    if x.ndim < 2 or scale.ndim != 1:
        # spatial=0 (opset < 9): parameters are shaped like one sample.
        a = scale / np.sqrt(var + eps)
        y = np.asarray((x - mean) * a + bias, dtype=x.dtype)
        return y if clamp is None else np.clip(y, *clamp, out=y)
    a64, b64 = affine if affine is not None else _batch_norm_affine(scale, bias, mean, var, eps)
    if x.dtype == np.float32 and x.size:
        rows = (x.shape[0] * x.shape[1], -1)
        out = np.empty(x.shape, np.float32)
        ext.channel_affine(
            f32_contiguous(x).reshape(rows), f32_contiguous(a64), f32_contiguous(b64),
            out.reshape(rows), threads_for(x.size, threads),
            *(clamp if clamp is not None else ()),
        )  # fmt: skip
        return out
    # float16 through float32: a * x + b cancels where y is small, and float16
    # products and sums lose what float32 keeps (found by explore/.../dtype/T=float16)
    work = np.float32 if x.dtype == np.float16 else x.dtype
    a, b = a64.astype(work), b64.astype(work)
    y = (x.astype(work, copy=False) * _channel_view(x, a) + _channel_view(x, b)).astype(
        x.dtype, copy=False
    )
    return y if clamp is None else np.clip(y, *clamp, out=y)


@per_schema_version("BatchNormalization", params=("T", "U", "T1", "T2"), exclude={DT.BFLOAT16})
def batch_norm(info: NodeInfo) -> Compute:
    """BatchNormalization.

    Inference uses the running statistics. Training statistics are computed
    when ``training_mode=1`` (opset 14+) or, before opset 14, when the node
    asks for the extra outputs (mean, var, saved_mean, saved_var; opset 6-13).
    ``spatial=0`` (opset 6-8) takes per-element parameters.
    """
    return build_batch_norm(info)


def build_batch_norm(info: NodeInfo, *, clamp: tuple[float, float] | None = None) -> Compute:
    """The BatchNormalization kernel of ``info``; with ``clamp`` its output
    is clamped to ``(lo, hi)`` in the same pass (FusedBatchNorm's Relu and
    Clip; inference only)."""
    eps = float(info.attrs.get("epsilon", 1e-5))
    momentum = float(info.attrs.get("momentum", 0.9))
    threads = thread_count(info)
    if info.opset >= 14:
        training = bool(info.attrs.get("training_mode", 0))
    else:
        training = info.num_outputs > 1
    n_out = info.num_outputs
    # constant parameters: their per-channel affine form is kept (it cost
    # several numpy calls per run), checked by the arrays' identity
    keep = all(constant_input(info, i) for i in range(1, 5))
    kept: list[Any] = []

    def affine_of(
        scale: np.ndarray, bias: np.ndarray, mean: np.ndarray, var: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray] | None:
        if not keep or scale.ndim != 1:
            return None
        params = (scale, bias, mean, var)
        last = kept[0] if kept else None  # one read: safe if runs overlap
        if last is not None and all(p is q for p, q in zip(params, last[0], strict=True)):
            return last[1]
        affine = _batch_norm_affine(scale, bias, mean, var, eps)
        kept[:] = [(params, affine)]
        return affine

    def compute(
        x: np.ndarray, scale: np.ndarray, bias: np.ndarray, mean: np.ndarray, var: np.ndarray
    ) -> tuple[np.ndarray, ...]:
        if not training:
            affine = affine_of(scale, bias, mean, var)
            y = _batch_norm_inference(x, scale, bias, mean, var, eps, threads, affine, clamp)
            extra = (mean, var, mean, var)[: n_out - 1]
            return (y, *extra)
        axes = (0, *range(2, x.ndim))
        bmean = x.mean(axis=axes, dtype=np.float64)
        bvar = x.var(axis=axes, dtype=np.float64)
        y = _batch_norm_inference(x, scale, bias, bmean, bvar, eps, threads)
        run_mean = (mean * momentum + bmean * (1 - momentum)).astype(mean.dtype)
        run_var = (var * momentum + bvar * (1 - momentum)).astype(var.dtype)
        if info.opset >= 14:
            return (y, run_mean, run_var)[:n_out]
        inv_std = 1 / np.sqrt(bvar + eps)
        saved = (run_mean, run_var, bmean.astype(x.dtype), inv_std.astype(x.dtype))
        return (y, *saved[: n_out - 1])

    return compute


@per_schema_version("InstanceNormalization", types={"T": FLOATS})
def instance_norm(info: NodeInfo) -> Compute:
    """Normalize each (sample, channel) plane over its spatial positions."""
    eps = float(info.attrs.get("epsilon", 1e-5))

    def compute(x: np.ndarray, scale: np.ndarray, bias: np.ndarray) -> tuple[np.ndarray]:
        axes = tuple(range(2, x.ndim))
        work = x.astype(np.float32) if x.dtype == np.float16 else x
        mean = work.mean(axis=axes, keepdims=True)
        var = work.var(axis=axes, keepdims=True)
        y = (work - mean) / np.sqrt(var + eps)
        y = y * _channel_view(x, scale.astype(work.dtype)) + _channel_view(
            x, bias.astype(work.dtype)
        )
        return (y.astype(x.dtype, copy=False),)

    return compute


@registry.kernel("LayerNormalization", since=17, types={"T": _FLOATS_BF16, "U": _FLOATS_BF16})
@float32_path(NATIVE)
def layer_norm(info: NodeInfo) -> Compute:
    """Normalize over the dims from ``axis`` on; Mean and InvStdDev outputs
    are optional and computed in float32 (``stash_type=1``) or the input type.
    With ``stash_type=1`` they are float32, as the schema types them (a
    float64 input is still normalized in float64)."""
    axis_attr = int(info.attrs.get("axis", -1))
    eps = float(info.attrs.get("epsilon", 1e-5))
    stash = int(info.attrs.get("stash_type", 1))
    n_out = info.num_outputs
    threads = thread_count(info)

    def stats_typed(outs: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
        if stash != 1 or n_out < 2:
            return outs[:n_out]
        return (outs[0], *(o.astype(np.float32, copy=False) for o in outs[1:n_out]))

    def compute(
        x: np.ndarray, scale: np.ndarray, bias: np.ndarray | None = None
    ) -> tuple[np.ndarray, ...]:
        axis = normalize_axis(axis_attr, x.ndim)
        fast = _layer_norm_fast(x, scale, bias, axis, eps, threads)
        if fast is not None:
            return stats_typed(fast)
        axes = tuple(range(axis, x.ndim))
        work = _stash(x, stash)
        mean = work.mean(axis=axes, keepdims=True)
        d = work - mean
        var = np.mean(np.square(d), axis=axes, keepdims=True)
        inv_std = 1 / np.sqrt(var + np.asarray(eps, var.dtype))
        y = d * inv_std * scale.astype(work.dtype, copy=False)
        if bias is not None:
            y = y + bias.astype(work.dtype, copy=False)
        return stats_typed((y.astype(x.dtype, copy=False), mean, inv_std))

    return compute


def _layer_norm_fast(
    x: np.ndarray, scale: np.ndarray, bias: np.ndarray | None, axis: int, eps: float, threads: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """LayerNormalization of a float32/float64 ``x`` whose scale and bias have
    the normalized shape (or a suffix of it), in Cython; None if not such a case."""
    tail = x.shape[axis:]
    if x.dtype not in _FAST or x.size == 0:
        return None
    for p in (scale, bias):
        if p is not None and (p.dtype != x.dtype or p.shape != tail[len(tail) - p.ndim :]):
            return None
        if p is not None and p.size != math.prod(tail):
            return None
    rows = math.prod(x.shape[:axis])
    flat = np.ascontiguousarray(x).reshape(rows, -1)
    out = np.empty(x.shape, x.dtype)
    stat_shape = (*x.shape[:axis], *([1] * len(tail)))
    mean = np.empty(stat_shape, x.dtype)
    inv_std = np.empty(stat_shape, x.dtype)
    b = None if bias is None else np.ascontiguousarray(bias).reshape(-1)
    rowwise.layer_norm(
        flat, np.ascontiguousarray(scale).reshape(-1), b, out.reshape(rows, -1),
        mean.reshape(-1), inv_std.reshape(-1), eps, threads_for(x.size // 4, threads),
    )  # fmt: skip
    return out, mean, inv_std


def _stash(x: np.ndarray, stash: int) -> np.ndarray:
    """``x`` in the type statistics are computed in: float32 for 16-bit
    inputs with ``stash_type=1``, else the input type."""
    return x.astype(np.float32) if stash == 1 and x.dtype.itemsize < 4 else x


@per_schema_version("GroupNormalization", until=20, types={"T": FLOATS})
@per_schema_version("GroupNormalization", since=21, types={"T": _FLOATS_BF16})
def group_norm(info: NodeInfo) -> Compute:
    """Normalize each group of ``num_groups`` channel groups per sample; scale
    and bias are per group (opset 18) or per channel (21+)."""
    groups = int(info.attrs["num_groups"])
    eps = float(info.attrs.get("epsilon", 1e-5))
    stash = int(info.attrs.get("stash_type", 1))
    per_group = info.opset < 21

    def compute(x: np.ndarray, scale: np.ndarray, bias: np.ndarray) -> tuple[np.ndarray]:
        n, c = x.shape[:2]
        if c % groups:
            raise ValueError(f"{info.describe()}: {c} channels not divisible by {groups} groups")
        work = _stash(x, stash).reshape(n, groups, -1)
        mean = work.mean(axis=2, keepdims=True)
        var = np.mean(np.square(work - mean), axis=2, keepdims=True)
        y = ((work - mean) / np.sqrt(var + np.asarray(eps, var.dtype))).reshape(x.shape)
        if per_group:
            scale, bias = np.repeat(scale, c // groups), np.repeat(bias, c // groups)
        y = y * _channel_view(x, scale.astype(y.dtype)) + _channel_view(x, bias.astype(y.dtype))
        return (y.astype(x.dtype, copy=False),)

    return compute


@registry.kernel("RMSNormalization", since=23, types={"T": _FLOATS_BF16, "V": _FLOATS_BF16})
@float32_path(NUMPY)
def rms_norm(info: NodeInfo) -> Compute:
    """Y = X / sqrt(mean(X^2 over the dims from ``axis``) + epsilon) * scale."""
    axis_attr = int(info.attrs.get("axis", -1))
    eps = float(info.attrs.get("epsilon", 1e-5))
    stash = int(info.attrs.get("stash_type", 1))

    def compute(x: np.ndarray, scale: np.ndarray) -> tuple[np.ndarray]:
        axis = normalize_axis(axis_attr, x.ndim)
        work = _stash(x, stash)
        ms = np.mean(np.square(work), axis=tuple(range(axis, x.ndim)), keepdims=True)
        y = work / np.sqrt(ms + np.asarray(eps, ms.dtype)) * scale.astype(work.dtype)
        return (y.astype(x.dtype, copy=False),)

    return compute


@per_schema_version("LpNormalization", types={"T": FLOATS})
def lp_norm(info: NodeInfo) -> Compute:
    """Divide by the L1 or L2 norm along ``axis`` (zero vectors stay zero)."""
    axis_attr = int(info.attrs.get("axis", -1))
    p = int(info.attrs.get("p", 2))
    if p not in (1, 2):
        raise ValueError(f"{info.describe()}: p must be 1 or 2, got {p}")

    def compute(x: np.ndarray) -> tuple[np.ndarray]:
        axis = normalize_axis(axis_attr, x.ndim)
        work = x.astype(np.float32) if x.dtype == np.float16 else x
        if p == 1:
            norm = np.sum(np.abs(work), axis=axis, keepdims=True)
        else:
            norm = np.sqrt(np.sum(np.square(work), axis=axis, keepdims=True))
        # A zero norm gives zeros, as onnxruntime does.
        y = work / np.where(norm == 0, 1, norm)
        return (y.astype(x.dtype, copy=False),)

    return compute


@per_schema_version("MeanVarianceNormalization", types={"T": FLOATS})
def mean_variance_norm(info: NodeInfo) -> Compute:
    """(X - mean) / (std + 1e-9) over ``axes`` (default N, H, W)."""
    axes_attr = [int(a) for a in info.attrs.get("axes", [0, 2, 3])]

    def compute(x: np.ndarray) -> tuple[np.ndarray]:
        axes = tuple(normalize_axis(a, x.ndim) for a in axes_attr)
        work = x.astype(np.float32) if x.dtype == np.float16 else x
        mean = work.mean(axis=axes, keepdims=True)
        var = np.maximum(np.mean(np.square(work), axis=axes, keepdims=True) - mean**2, 0)
        y = (work - mean) / (np.sqrt(var) + np.asarray(1e-9, work.dtype))
        return (y.astype(x.dtype, copy=False),)

    return compute


@per_schema_version("LRN", types={"T": FLOATS})
@float32_path(NATIVE)
def lrn(info: NodeInfo) -> Compute:
    """Local response normalization across channels: float32 and float16
    on the native kernel (``lrn_f32``, threads over runs of positions),
    float64 in numpy."""
    size = int(info.attrs["size"])
    if size < 1:
        raise ValueError(f"LRN attribute size must be at least 1, got {size}")
    alpha = float(info.attrs.get("alpha", 1e-4))
    beta = float(info.attrs.get("beta", 0.75))
    bias = float(info.attrs.get("bias", 1.0))
    before = (size - 1) // 2
    after = math.ceil((size - 1) / 2)

    threads = thread_count(info)

    def compute(x: np.ndarray) -> tuple[np.ndarray]:
        if x.ndim < 2:
            raise ValueError(f"LRN input X of rank {x.ndim}: it needs (N, C, ...)")
        if x.dtype in _LRN_NATIVE:
            x32 = f32_contiguous(x)
            out = np.empty(x32.shape, np.float32)
            n, c = x32.shape[:2]
            shape3 = (n, c, x32.size // max(n * c, 1))
            _act.lrn_f32(
                x32.reshape(shape3), out.reshape(shape3), size, alpha, beta, bias,
                threads_for_memory_bound(x32.size * (size + 8), threads),
            )  # fmt: skip
            return (out.astype(x.dtype, copy=False),)
        sq = np.square(x)
        c = x.shape[1]
        # Window sums over channels from a prefix sum along axis 1.
        csum = np.zeros((x.shape[0], c + 1, *x.shape[2:]), sq.dtype)
        np.cumsum(sq, axis=1, out=csum[:, 1:])
        hi = np.minimum(np.arange(c) + after + 1, c)
        lo = np.maximum(np.arange(c) - before, 0)
        window_sum = csum[:, hi] - csum[:, lo]
        denom = window_sum * (alpha / size) + bias
        y = x / np.power(denom, beta, dtype=denom.dtype)
        return (y.astype(x.dtype, copy=False),)

    return compute


def _softmax(x: np.ndarray, axis: int, log: bool) -> np.ndarray:
    work = x.astype(np.float32) if x.dtype.itemsize < 4 else x
    m = np.max(work, axis=axis, keepdims=True) if work.size else work
    # Rows of -inf give NaN, as the ONNX definition does.
    with np.errstate(invalid="ignore"):
        e = work - m
    if log:
        out = e - np.log(np.sum(np.exp(e), axis=axis, keepdims=True))
    else:
        np.exp(e, out=e)
        out = e / np.sum(e, axis=axis, keepdims=True)
    return out.astype(x.dtype, copy=False)


@per_schema_version("Softmax", "LogSoftmax", params=("T",))
def softmax(info: NodeInfo) -> Compute:
    """Softmax / LogSoftmax.

    Before opset 13 the input is coerced to 2-D at ``axis`` (default 1) and
    normalized over the flattened trailing dims; from 13 over the single
    ``axis`` (default -1).
    """
    log = info.op_type == "LogSoftmax"
    axis_attr = int(info.attrs.get("axis", -1 if info.opset >= 13 else 1))
    coerce = info.opset < 13
    threads = thread_count(info)

    def compute(x: np.ndarray) -> tuple[np.ndarray]:
        if x.size == 0:
            return (x.copy(),)
        if x.ndim == 0:
            return (_softmax(x.reshape(1), 0, log).reshape(()),)
        axis = normalize_axis(axis_attr, x.ndim)
        if x.dtype in _FAST and (coerce or axis == x.ndim - 1):
            rows = math.prod(x.shape[:axis]) if coerce else x.size // x.shape[-1]
            out = np.empty(x.shape, x.dtype)
            flat = np.ascontiguousarray(x).reshape(rows, -1)
            rowwise.softmax(flat, out.reshape(rows, -1), log, threads_for(x.size, threads))
            return (out,)
        if coerce:
            rows = math.prod(x.shape[:axis])
            flat = x.reshape(rows, -1)
            return (_softmax(flat, 1, log).reshape(x.shape),)
        return (_softmax(x, axis, log),)

    return compute
