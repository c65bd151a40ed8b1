"""Kernels of the fused operators ortcore's optimizer emits (domain
``com.ortcore``; their domain and schemas are in ``ep_sdk.fused_ops``).

Each reuses the kernel of the op it fuses: FusedConv and FusedGemm run the
Conv and Gemm kernels and apply the activation in place on their fresh
output; the normalizations run the LayerNormalization/RMSNormalization
kernels; FusedAttention does one ``softmax(Q @ Kt * scale + mask) @ V``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from ep_sdk import Compute, NodeInfo
from ep_sdk.fused_ops import DOMAIN

from . import conv, gemm, normalization, registry, unary
from ._common import DT, FLOATS, thread_count

_T: dict[str | int, frozenset[DT]] = {"T": FLOATS | {DT.BFLOAT16}}
_T_NO_BF16: dict[str | int, frozenset[DT]] = {"T": FLOATS}

Activation = Callable[[np.ndarray], None]


def _in_place(ufunc_call: Callable[[np.ndarray], object]) -> Activation:
    def apply(y: np.ndarray) -> None:
        ufunc_call(y)

    return apply


def _activation(info: NodeInfo) -> Activation:
    """The in-place activation named by ``info``'s ``activation`` attribute."""
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


def _owned(y: np.ndarray, inputs: Sequence[np.ndarray | None]) -> np.ndarray:
    """``y``, copied if it is (a view of) one of the kernel's inputs."""
    if any(x is not None and np.shares_memory(y, x) for x in inputs):
        return y.copy()
    return y


def _then_activation(info: NodeInfo, base: Compute) -> Compute:
    """``base`` (a three-input kernel with one output), then the node's
    activation applied in place on that output (copied first if it is a
    view of an input)."""
    act = _activation(info)

    def compute(a: np.ndarray, b: np.ndarray, c: np.ndarray | None = None) -> tuple[np.ndarray]:
        (y,) = base(a, b, c)
        y = _owned(y, (a, b, c))
        act(y)
        return (y,)

    return compute


@registry.kernel("FusedConv", domain=DOMAIN, types=_T_NO_BF16)
def fused_conv(info: NodeInfo) -> Compute:
    """Conv, then the activation applied in place on its output."""
    return _then_activation(info, conv.conv(info))


@registry.kernel("FusedGemm", domain=DOMAIN, types=_T_NO_BF16)
def fused_gemm(info: NodeInfo) -> Compute:
    """Gemm, then the activation applied in place on its output."""
    return _then_activation(info, gemm.gemm(info))


@registry.kernel("FusedMatMul", domain=DOMAIN, types=_T_NO_BF16)
def fused_matmul(info: NodeInfo) -> Compute:
    """``activation(A @ B + bias)``; the bias add and activation are in place."""
    act = _activation(info)

    def compute(a: np.ndarray, b: np.ndarray, bias: np.ndarray | None = None) -> tuple[np.ndarray]:
        dtype = a.dtype
        if dtype.itemsize < 4:
            a, b = a.astype(np.float32), b.astype(np.float32)
        y = np.matmul(a, b)
        if bias is not None:
            if np.broadcast_shapes(y.shape, bias.shape) == y.shape:
                y += bias.astype(y.dtype, copy=False)
            else:
                y = y + bias.astype(y.dtype, copy=False)
        act(y)
        return (y.astype(dtype, copy=False),)

    return compute


@registry.kernel("FusedGelu", domain=DOMAIN, types=_T_NO_BF16)
def gelu(info: NodeInfo) -> Compute:
    """onnx Gelu-20, for models of an older opset."""
    return unary.gelu(info)


@registry.kernel("BiasGelu", domain=DOMAIN, types=_T_NO_BF16)
def bias_gelu(info: NodeInfo) -> Compute:
    """``Gelu(X + bias)``."""
    gelu_compute = unary.gelu(info)
    exact = info.attrs.get("approximate", "none") == "none"
    threads = thread_count(info)

    def compute(x: np.ndarray, bias: np.ndarray) -> tuple[np.ndarray]:
        if (
            exact
            and x.dtype == np.float32
            and bias.dtype == np.float32
            and bias.ndim == 1
            and x.ndim >= 1
            and bias.shape[0] == x.shape[-1]
            and x.size
        ):
            return (unary.gelu_f32(x, bias, threads),)  # bias add fused in
        return (gelu_compute(x + bias)[0],)

    return compute


registry.kernel("FusedLayerNorm", domain=DOMAIN, types=_T)(normalization.layer_norm)
registry.kernel("FusedRMSNorm", domain=DOMAIN, types=_T)(normalization.rms_norm)


@registry.kernel("SkipLayerNormalization", domain=DOMAIN, types=_T_NO_BF16)
def skip_layer_norm(info: NodeInfo) -> Compute:
    """``LayerNormalization(X + skip [+ bias])``; output 1, if asked, is the sum."""
    ln_compute = normalization.layer_norm(info)
    n_out = info.num_outputs

    def compute(
        x: np.ndarray,
        skip: np.ndarray,
        gamma: np.ndarray,
        beta: np.ndarray | None = None,
        bias: np.ndarray | None = None,
    ) -> tuple[np.ndarray, ...]:
        s = x + skip
        if bias is not None:
            s += bias
        y = ln_compute(s, gamma, beta)[0]
        return (y, s)[:n_out]

    return compute


@registry.kernel("FusedAttention", domain=DOMAIN, types=_T_NO_BF16)
def fused_attention(info: NodeInfo) -> Compute:
    """``softmax(Q @ Kt * scale + mask, axis=-1) @ V`` with numpy matmuls."""
    scale = float(info.attrs.get("scale", 1.0))

    def compute(
        q: np.ndarray, kt: np.ndarray, v: np.ndarray, mask: np.ndarray | None = None
    ) -> tuple[np.ndarray]:
        dtype = q.dtype
        if dtype.itemsize < 4:
            q, kt, v = (t.astype(np.float32) for t in (q, kt, v))
        s = np.matmul(q, kt)
        if scale != 1.0:
            s *= s.dtype.type(scale)
        if mask is not None:
            m = mask.astype(s.dtype, copy=False)
            if np.broadcast_shapes(s.shape, m.shape) == s.shape:
                s += m
            else:
                s = s + m
        s -= s.max(axis=-1, keepdims=True)
        np.exp(s, out=s)
        s /= s.sum(axis=-1, keepdims=True)
        return (np.matmul(s, v).astype(dtype, copy=False),)

    return compute


__all__ = [
    "bias_gelu",
    "fused_attention",
    "fused_conv",
    "fused_gemm",
    "fused_matmul",
    "gelu",
    "skip_layer_norm",
]
