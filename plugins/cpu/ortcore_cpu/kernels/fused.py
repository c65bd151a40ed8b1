"""Kernels of the fused operators ortcore's optimizer emits (domain
``com.ortcore``; their domain and schemas are in ``ep_sdk.fused_ops``).

Each reuses the kernel of the op it fuses: FusedConv, FusedConvAdd (a
residual added too), FusedConvShuffle (its channels shuffled), FusedConvPool
(a max pool of its output, in the Conv's pass where it can), FusedGemm
and FusedMatMul run the Conv, Gemm and
MatMul products and then add the bias and
apply the activation in one Cython pass, in place on their fresh output
(float32; numpy for the other dtypes); FusedBatchNorm clamps (Relu, Clip)
in the normalization's pass; the Gelus and FusedSwish run the
Gelu and Swish kernels; the normalizations run the
LayerNormalization/RMSNormalization kernels; FusedAttention does one
``softmax(Q @ Kt * scale + mask) @ V``. Each builder's float32 path is
marked (``_paths.py``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from ep_sdk import Compute, NodeInfo
from ep_sdk.fused_ops import DOMAIN, POOL_ATTRIBUTES

from .._ext import elementwise as ew
from . import activations, conv, gemm, normalization, pool, registry, shape_ops, unary
from ._common import DT, FLOATS, is_tail, thread_count, threads_for
from ._paths import NATIVE, float32_path
from .unary import Act, native

_T: dict[str | int, frozenset[DT]] = {"T": FLOATS | {DT.BFLOAT16}}
_T_NO_BF16: dict[str | int, frozenset[DT]] = {"T": FLOATS}

Activation = Callable[[np.ndarray], None]
Epilogue = Callable[..., np.ndarray]
"""``epilogue(y, bias=None)``: ``act(y + bias)``, in place on ``y`` where it can."""


def _in_place(ufunc_call: Callable[[np.ndarray], object]) -> Activation:
    def apply(y: np.ndarray) -> None:
        ufunc_call(y)

    return apply


def _native(name: str, p: Sequence[float]) -> tuple[int, float, float]:
    """The Cython activation and its (alpha, beta) for ``activation`` ``name``."""
    if name == "Clip":
        return Act.CLIP, *((float(p[0]), float(p[1])) if len(p) >= 2 else (-np.inf, np.inf))
    if name == "LeakyRelu":
        return Act.LEAKY_RELU, float(p[0]) if p else 0.01, 0.0
    if name == "HardSigmoid":
        return Act.HARD_SIGMOID, *((float(p[0]), float(p[1])) if len(p) >= 2 else (0.2, 0.5))
    ops = {"": Act.IDENTITY, "Relu": Act.RELU, "Sigmoid": Act.SIGMOID, "Tanh": Act.TANH}
    return ops[name], 0.0, 0.0


def _epilogue(info: NodeInfo) -> Epilogue:
    """``act(y + bias)`` for ``info``'s ``activation``, ``y`` a fresh array the
    kernel owns: one Cython pass in place on a C-contiguous float32 ``y``
    whose bias (if any) is along its last axes, else numpy."""
    name = str(info.attrs.get("activation") or "")
    params: Sequence[float] = list(info.attrs.get("activation_params") or [])
    fallback = _activation(info)
    op, alpha, beta = _native(name, params)
    threads = thread_count(info)

    def apply(y: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray:
        if op == Act.IDENTITY and bias is None:
            return y
        if (
            y.dtype == np.float32
            and y.flags.c_contiguous
            and (bias is None or is_tail(bias.shape, y.shape))
        ):
            return unary.activation_f32(
                op, y, alpha=alpha, beta=beta, bias=bias, out=y, threads=threads
            )
        if bias is not None:
            if np.broadcast_shapes(y.shape, bias.shape) == y.shape:
                y += bias.astype(y.dtype, copy=False)
            else:
                y = y + bias.astype(y.dtype, copy=False)
        fallback(y)
        return y

    return apply


def _activation(info: NodeInfo) -> Activation:
    """The in-place numpy activation named by ``info``'s ``activation`` attribute.

    Raises:
        ValueError: an activation not in ``ep_sdk.fused_ops.ACTIVATIONS``.
    """
    name = str(info.attrs.get("activation") or "")
    p: Sequence[float] = list(info.attrs.get("activation_params") or [])
    if name == "":
        return lambda y: None
    if name == "Relu":
        return _in_place(lambda y: np.maximum(y, 0, out=y))
    if name == "Clip":
        lo, hi = (float(p[0]), float(p[1])) if len(p) >= 2 else (-np.inf, np.inf)
        return _in_place(lambda y: np.clip(y, lo, hi, out=y))
    if name == "LeakyRelu":
        alpha = float(p[0]) if p else 0.01
        return _in_place(lambda y: np.multiply(y, y.dtype.type(alpha), out=y, where=y < 0))
    if name == "Tanh":
        return _in_place(lambda y: np.tanh(y, out=y))
    if name == "Sigmoid":

        def sigmoid(y: np.ndarray) -> None:
            with np.errstate(over="ignore"):
                np.negative(y, out=y)
                np.exp(y, out=y)
                y += 1
                np.reciprocal(y, out=y)

        return sigmoid
    if name == "HardSigmoid":
        alpha, beta = (float(p[0]), float(p[1])) if len(p) >= 2 else (0.2, 0.5)

        def hard_sigmoid(y: np.ndarray) -> None:
            y *= y.dtype.type(alpha)
            y += y.dtype.type(beta)
            np.clip(y, 0, 1, out=y)

        return hard_sigmoid
    raise ValueError(f"{info.describe()}: unknown activation {name!r}")


def _clamp(info: NodeInfo) -> tuple[float, float] | None:
    """``(lo, hi)`` when ``info``'s activation is a clamp (none, Relu, Clip)."""
    name = str(info.attrs.get("activation") or "")
    p: Sequence[float] = list(info.attrs.get("activation_params") or [])
    if name == "":
        return (-np.inf, np.inf)
    if name == "Relu":
        return (0.0, np.inf)
    if name == "Clip":
        return (float(p[0]), float(p[1])) if len(p) >= 2 else (-np.inf, np.inf)
    return None


def _owned(y: np.ndarray, inputs: Sequence[np.ndarray | None]) -> np.ndarray:
    """``y``, copied if it is (a view of) one of the kernel's inputs."""
    if any(x is not None and np.shares_memory(y, x) for x in inputs):
        return y.copy()
    return y


@registry.kernel("FusedConv", domain=DOMAIN, types=_T_NO_BF16)
@float32_path(NATIVE)
def fused_conv(info: NodeInfo) -> Compute:
    """Conv, then the activation applied in place on its output (copied
    first if it is a view of an input). Relu and Clip are a clamp done in
    the pass that adds the Conv's bias (the Conv's output is always fresh)."""
    clamp = _clamp(info)
    if clamp is not None:
        return conv.build_conv(info, clamp=clamp)
    base = conv.conv(info)
    act = _epilogue(info)

    def compute(a: np.ndarray, b: np.ndarray, c: np.ndarray | None = None) -> tuple[np.ndarray]:
        (y,) = base(a, b, c)
        return (act(_owned(y, (a, b, c))),)

    return compute


@registry.kernel("FusedConvConcat", domain=DOMAIN, types=_T_NO_BF16)
@float32_path(NATIVE)
def fused_conv_concat(info: NodeInfo) -> Compute:
    """FusedConv writing its channels of a Concat's output (``channels``,
    ``channel_offset``) into ``Into`` or a new tensor: in place from the
    direct kernel, Relu and Clip in its epilogue; other activations on a
    fresh output, then copied there (see ``conv.concat_buffer``)."""
    channels = int(info.attrs.get("channels", 0))
    offset = int(info.attrs.get("channel_offset", 0))
    clamp = _clamp(info)
    if clamp is not None:
        return conv.build_conv(info, clamp=clamp, concat=(channels, offset))
    whole = fused_conv(info)

    def compute(
        x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None, into: np.ndarray | None = None
    ) -> tuple[np.ndarray]:
        (y,) = whole(x, w, b)
        joined, part = conv.concat_buffer(info, into, (y.shape[0], channels, *y.shape[2:]),
                                          y.dtype, offset, y.shape[1])  # fmt: skip
        part[...] = y
        return (joined,)

    return compute


@registry.kernel("FusedConvShuffle", domain=DOMAIN, types=_T_NO_BF16)
@float32_path(NATIVE)
def fused_conv_shuffle(info: NodeInfo) -> Compute:
    """FusedConv whose output channels come out shuffled in
    ``shuffle_groups`` groups (ShuffleNet's Reshape/Transpose/Reshape after
    a grouped 1x1 Conv): a 1x1 Conv in as many groups on the packed GEMM
    writes them so, Relu and Clip in its epilogue; any other Conv is
    shuffled after, in one copy (``conv.shuffle_channels``).

    Raises:
        ValueError: ``shuffle_groups`` is below 1 (at build), or does not
            divide the output's channels (at run).
    """
    groups = int(info.attrs.get("shuffle_groups", 1))
    if groups < 1:
        raise ValueError(f"{info.describe()}: shuffle_groups is {groups}, not a positive count")
    clamp = _clamp(info)
    threads = thread_count(info)
    run: Compute
    if clamp is not None:
        run = conv.build_conv(info, clamp=clamp, shuffle=groups)
    else:
        whole = fused_conv(info)

        def run(x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None) -> tuple[np.ndarray]:
            (y,) = whole(x, w, b)
            return (conv.shuffle_channels(y, groups, threads),)

    def compute(x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None) -> tuple[np.ndarray]:
        if w.ndim < 1 or w.shape[0] % groups:
            raise ValueError(
                f"{info.describe()}: {w.shape[0] if w.ndim else 0} output channels do not "
                f"split into shuffle_groups={groups}"
            )
        (y,) = run(x, w, b)
        return (y,)

    return compute


def _pool_info(info: NodeInfo) -> NodeInfo:
    """A MaxPool's NodeInfo (opset 12) for FusedConvPool ``info``'s pool."""
    attrs: dict[str, Any] = {"auto_pad": "NOTSET", "storage_order": 0, "ceil_mode": 0}
    for fused_name, name in POOL_ATTRIBUTES.items():
        value = info.attrs.get(fused_name)
        if value is not None:
            attrs[name] = int(value) if name == "ceil_mode" else [int(v) for v in value]
    if "kernel_shape" not in attrs:
        raise ValueError(f"{info.describe()}: pool_kernel_shape is missing")
    return NodeInfo(
        info.node, opset=12, attrs=attrs, input_types=info.output_types[:1],
        input_shapes=(None,), output_types=info.output_types[:1],
        output_shapes=info.output_shapes[:1], provider=info.provider,
    )  # fmt: skip


@registry.kernel("FusedConvPool", domain=DOMAIN, types=_T_NO_BF16)
@float32_path(NATIVE)
def fused_conv_pool(info: NodeInfo) -> Compute:
    """FusedConv, then a MaxPool (the ``pool_*`` attributes) of its output:
    where the direct kernel takes the Conv (flat mode, one group, float32)
    and the activation is none, Relu or Clip, one pass that pools the
    Conv's rows a band at a time while they are in the cache
    (``direct_conv2d_maxpool``), so the Conv's output is never written
    whole; else the FusedConv's kernel, then the MaxPool's.

    Raises:
        ValueError: ``pool_kernel_shape`` is missing, or a pool attribute is
            out of range (at build).
    """
    pool_info = _pool_info(info)
    max_pool = pool.max_pool(pool_info)
    clamp = _clamp(info)
    if clamp is not None:
        stage = conv.PoolStage(pool.pool_windows(pool_info), max_pool)
        return conv.build_conv(info, clamp=clamp, pool=stage)
    whole = fused_conv(info)

    def compute(
        x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None
    ) -> tuple[np.ndarray, ...]:
        (y,) = whole(x, w, b)
        return tuple(max_pool(y))

    return compute


@registry.kernel("GrowingConcat", domain=DOMAIN, types=_T)
@float32_path(NATIVE)
def growing_concat(info: NodeInfo) -> Compute:
    """Concat of X and Y along axis 1, for one image written into a tensor
    of ``capacity`` channels that the chain's next links extend in place
    (see ``shape_ops.grow_concat``)."""
    capacity = int(info.attrs.get("capacity", 0))
    threads = thread_count(info)

    def compute(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray]:
        return (shape_ops.grow_concat(x, y, capacity, threads),)

    return compute


@registry.kernel("FusedConvAdd", domain=DOMAIN, types=_T_NO_BF16)
@float32_path(NATIVE)
def fused_conv_add(info: NodeInfo) -> Compute:
    """``activation(Conv(X, W, B) + Z)``: the residual ``Z`` is added in the
    pass that adds the bias, and Relu or Clip clamp in it too; the other
    activations run in place on the sum (the Conv's output is always fresh)."""
    clamp = _clamp(info)
    if clamp is not None:
        return conv.build_conv(info, clamp=clamp, residual=True)
    base = conv.build_conv(info, residual=True)
    act = _epilogue(info)

    def compute(
        x: np.ndarray, w: np.ndarray, z: np.ndarray, b: np.ndarray | None = None
    ) -> tuple[np.ndarray]:
        (y,) = base(x, w, z, b)
        return (act(_owned(y, (x, w, z, b))),)

    return compute


@registry.kernel("FusedBatchNorm", domain=DOMAIN, types=_T_NO_BF16)
@float32_path(NATIVE)
def fused_batch_norm(info: NodeInfo) -> Compute:
    """BatchNormalization with its running statistics, then the activation:
    Relu and Clip clamp in the normalization's own pass, the others run in
    place on its fresh output."""
    clamp = _clamp(info)
    if clamp is not None:
        return normalization.build_batch_norm(info, clamp=clamp)
    base = normalization.build_batch_norm(info)
    act = _epilogue(info)

    def compute(
        x: np.ndarray, scale: np.ndarray, bias: np.ndarray, mean: np.ndarray, var: np.ndarray
    ) -> tuple[np.ndarray]:
        (y,) = base(x, scale, bias, mean, var)
        return (act(_owned(y, (x, scale, bias, mean, var))),)

    return compute


@registry.kernel("FusedGemm", domain=DOMAIN, types=_T_NO_BF16)
@float32_path(NATIVE)
def fused_gemm(info: NodeInfo) -> Compute:
    """Gemm, then the activation applied in place on its output; for float32
    with ``beta`` 1, C is added in the activation's pass."""
    base = gemm.gemm(info)
    act = _epilogue(info)
    c_in_epilogue = float(info.attrs.get("beta", 1.0)) == 1.0

    def compute(a: np.ndarray, b: np.ndarray, c: np.ndarray | None = None) -> tuple[np.ndarray]:
        if c is not None and c_in_epilogue and a.dtype == np.float32:
            (y,) = base(a, b)  # alpha A' B', a fresh array
            return (act(y, c),)
        (y,) = base(a, b, c)
        return (act(_owned(y, (a, b, c))),)

    return compute


@registry.kernel("FusedMatMul", domain=DOMAIN, types=_T_NO_BF16)
@float32_path(NATIVE)
def fused_matmul(info: NodeInfo) -> Compute:
    """``activation(A @ B + bias)``; the bias add and activation are one pass,
    in place, or, on the packed GEMM (constant B), the bias added in the
    product and the activation after."""
    act = _epilogue(info)
    packed = gemm.packed_product(info)

    def compute(a: np.ndarray, b: np.ndarray, bias: np.ndarray | None = None) -> tuple[np.ndarray]:
        if packed is not None:
            y = packed(a, b, bias)
            if y is not None:
                return (act(y),)
        dtype = a.dtype
        if dtype.itemsize < 4:
            a, b = a.astype(np.float32), b.astype(np.float32)
        y = act(np.matmul(a, b), bias)
        return (y.astype(dtype, copy=False),)

    return compute


@registry.kernel("FusedGelu", domain=DOMAIN, types=_T_NO_BF16)
@float32_path(NATIVE)
def gelu(info: NodeInfo) -> Compute:
    """onnx Gelu-20, for models of an older opset."""
    return unary.gelu(info)


@registry.kernel("BiasGelu", domain=DOMAIN, types=_T_NO_BF16)
@float32_path(NATIVE)
def bias_gelu(info: NodeInfo) -> Compute:
    """``Gelu(X + bias)``, ``approximate`` as Gelu's."""
    op = unary.gelu_op(info)
    fn = unary.gelu_numpy("none" if op == Act.GELU else "tanh")
    return unary.native_activation_with_bias(info, op, fn)


@registry.kernel("FusedSwish", domain=DOMAIN, types=_T_NO_BF16)
@float32_path(NATIVE)
def fused_swish(info: NodeInfo) -> Compute:
    """onnx Swish-24 (``x * sigmoid(alpha * x)``), for models of an older opset."""
    return activations.swish(info)


registry.kernel("FusedLayerNorm", domain=DOMAIN, types=_T)(normalization.layer_norm)
registry.kernel("FusedRMSNorm", domain=DOMAIN, types=_T)(normalization.rms_norm)


def _add(a: np.ndarray, b: np.ndarray, threads: int) -> np.ndarray:
    """``a + b``: in Cython for C-contiguous float32 operands of one shape,
    or one along the other's last axes (``elementwise.binary_f32``), else numpy."""
    s = ew.binary_f32(ew.ADD, a, b, threads)
    return a + b if s is None else s


@registry.kernel("SkipLayerNormalization", domain=DOMAIN, types=_T_NO_BF16)
@float32_path(NATIVE)
def skip_layer_norm(info: NodeInfo) -> Compute:
    """``LayerNormalization(X + skip [+ bias])``; output 1, if asked, is the sum."""
    ln_compute = normalization.layer_norm(info)
    n_out = info.num_outputs
    threads = thread_count(info)

    def compute(
        x: np.ndarray,
        skip: np.ndarray,
        gamma: np.ndarray,
        beta: np.ndarray | None = None,
        bias: np.ndarray | None = None,
    ) -> tuple[np.ndarray, ...]:
        s = _add(x, skip, threads)
        if bias is not None:
            s = _add(s, bias, threads)
        y = ln_compute(s, gamma, beta)[0]
        return (y, s)[:n_out]

    return compute


@registry.kernel("FusedAttention", domain=DOMAIN, types=_T_NO_BF16)
@float32_path(NATIVE)
def fused_attention(info: NodeInfo) -> Compute:
    """``softmax(Q @ Kt * scale + mask, axis=-1) @ V``, Q, Kt and V first
    transposed by ``perm_q``, ``perm_kt``, ``perm_v`` and the result by
    ``perm_out`` where given. For float32, the products one head per thread
    on views of the heads where they lie (``gemm.batched_matmul``), the
    result written straight into its transposed layout, and the scale, the
    mask and the softmax in one Cython pass per row of scores
    (``attention_softmax``); numpy and BLAS otherwise."""
    scale = float(info.attrs.get("scale", 1.0))
    threads = thread_count(info)
    masks: dict[tuple[Any, ...], np.ndarray] = {}
    names = ("perm_q", "perm_kt", "perm_v")
    perms = [_perm(info, name) for name in names]
    perm_out = _perm(info, "perm_out")
    back = None if perm_out is None else tuple(int(i) for i in np.argsort(perm_out))

    def compute(
        q: np.ndarray, kt: np.ndarray, v: np.ndarray, mask: np.ndarray | None = None
    ) -> tuple[np.ndarray]:
        dtype = q.dtype
        if dtype.itemsize < 4:
            q, kt, v = (t.astype(np.float32) for t in (q, kt, v))
        q, kt, v = (_permuted(info, t, p, n) for t, p, n in zip((q, kt, v), perms, names))
        s = gemm.batched_matmul(q, kt, threads)
        if s is None:
            s = np.matmul(q, kt)
        rows = _mask_rows(s, mask, masks)
        if rows is not None:
            native.attention_softmax(
                s.reshape(-1, s.shape[-1]), *rows, scale, threads_for(s.size, threads)
            )
        else:
            _softmax_numpy(s, scale, mask)
        y = None
        if perm_out is not None and back is not None and s.dtype == np.float32:
            shape = (*s.shape[:-1], v.shape[-1])
            if len(perm_out) != len(shape):
                raise ValueError(
                    f"{info.describe()}: perm_out {list(perm_out)} does not fit a result of "
                    f"rank {len(shape)}"
                )
            merged = np.empty([shape[i] for i in perm_out], np.float32)
            if gemm.batched_matmul(s, v, threads, out=merged.transpose(back)) is not None:
                y = merged
        if y is None:
            y = gemm.batched_matmul(s, v, threads)
            if y is None:
                y = np.matmul(s, v)
            if perm_out is not None:
                y = _permuted(info, y, perm_out, "perm_out").copy()
        return (y.astype(dtype, copy=False),)

    return compute


def _perm(info: NodeInfo, name: str) -> tuple[int, ...] | None:
    """The node's permutation attribute ``name``, None if absent; checked to
    be a permutation (of its own length: the rank is checked at run time)."""
    value = info.attrs.get(name)
    if value is None:
        return None
    perm = tuple(int(i) for i in value)
    if sorted(perm) != list(range(len(perm))):
        raise ValueError(f"{info.describe()}: {name} {list(perm)} is not a permutation")
    return perm


def _permuted(info: NodeInfo, x: np.ndarray, perm: tuple[int, ...] | None, name: str) -> np.ndarray:
    """``x.transpose(perm)`` (a view), ``x`` without a perm."""
    if perm is None:
        return x
    if len(perm) != x.ndim:
        raise ValueError(
            f"{info.describe()}: {name} {list(perm)} does not fit an input of rank {x.ndim}"
        )
    return x.transpose(perm)


def _mask_rows(
    s: np.ndarray,
    mask: np.ndarray | None,
    cache: dict[tuple[Any, ...], np.ndarray],
) -> tuple[np.ndarray, np.ndarray] | None:
    """``attention_softmax``'s ``(mask, mask_row)`` for float32 scores ``s``:
    the mask's distinct rows and, per row of ``s``, the one it adds (no rows:
    no mask). ``None`` where numpy must do it: other types, scores not
    C-contiguous, or a mask that is not float32 or does not broadcast to
    ``s`` without growing it. The row map is kept in ``cache`` per shape."""
    if s.dtype != np.float32 or s.ndim < 2 or s.size == 0 or not s.flags.c_contiguous:
        return None
    if mask is None:
        return _NO_MASK
    if mask.dtype != np.float32 or mask.ndim > s.ndim:
        return None
    if mask.ndim == 0:
        mask = mask.reshape(1)
    key = (mask.shape, s.shape)
    row = cache.get(key)
    if row is None:
        try:
            if np.broadcast_shapes(s.shape, mask.shape) != s.shape:
                return None
        except ValueError:
            return None
        lead = mask.shape[:-1]
        ids = np.arange(math.prod(lead), dtype=np.intp).reshape(lead)
        row = np.ascontiguousarray(np.broadcast_to(ids, s.shape[:-1]).reshape(-1))
        cache[key] = row
    wide = np.broadcast_to(mask, (*mask.shape[:-1], s.shape[-1]))
    return np.ascontiguousarray(wide, np.float32).reshape(-1, s.shape[-1]), row


_NO_MASK = (np.zeros((0, 1), np.float32), np.zeros(0, np.intp))
"""``attention_softmax``'s arguments for no mask."""


def _softmax_numpy(s: np.ndarray, scale: float, mask: np.ndarray | None) -> None:
    """``s = softmax(s * scale + mask)`` along the last axis with numpy, in place."""
    if scale != 1.0:
        s *= s.dtype.type(scale)
    if mask is not None:
        s += mask.astype(s.dtype, copy=False)
    s -= s.max(axis=-1, keepdims=True)
    np.exp(s, out=s)
    s /= s.sum(axis=-1, keepdims=True)


__all__ = [
    "bias_gelu",
    "fused_attention",
    "fused_conv",
    "fused_conv_add",
    "fused_conv_concat",
    "fused_gemm",
    "fused_matmul",
    "fused_swish",
    "gelu",
    "skip_layer_norm",
]
