"""Activations of onnxruntime's contrib domain ``com.microsoft`` that model
exporters and onnxruntime's transformer optimizer write: Gelu, BiasGelu,
FastGelu (the tanh Gelu, bias optional) and QuickGelu
(``x * sigmoid(alpha * x)``). Float32 runs in Cython (a bias in the same
pass), float16 and float64 in numpy.

onnx has no schemas for this domain: types are constrained per input, and
attributes default as onnxruntime's contrib schemas say.
"""

from __future__ import annotations

from ep_sdk import Compute, NodeInfo

from . import registry
from ._common import DT, FLOATS
from ._paths import NATIVE, float32_path
from .activations import swish_numpy
from .unary import Act, gelu_numpy, native_activation, native_activation_with_bias

MS_DOMAIN = "com.microsoft"
"""onnxruntime's contrib operator domain."""

_X: dict[str | int, frozenset[DT]] = {0: FLOATS}
_X_BIAS: dict[str | int, frozenset[DT]] = {0: FLOATS, 1: FLOATS}


@registry.kernel("Gelu", domain=MS_DOMAIN, types=_X)
@float32_path(NATIVE)
def gelu(info: NodeInfo) -> Compute:
    """Gelu, exact (erf) form."""
    return native_activation(info, Act.GELU, gelu_numpy("none"))


@registry.kernel("BiasGelu", domain=MS_DOMAIN, types=_X_BIAS)
@float32_path(NATIVE)
def bias_gelu(info: NodeInfo) -> Compute:
    """``Gelu(A + B)``, exact form; B is a bias along A's last axis."""
    return native_activation_with_bias(info, Act.GELU, gelu_numpy("none"))


@registry.kernel("FastGelu", domain=MS_DOMAIN, types=_X_BIAS)
@float32_path(NATIVE)
def fast_gelu(info: NodeInfo) -> Compute:
    """Gelu's tanh form of ``X + bias`` (bias optional)."""
    return native_activation_with_bias(info, Act.GELU_TANH, gelu_numpy("tanh"))


@registry.kernel("QuickGelu", domain=MS_DOMAIN, types=_X)
@float32_path(NATIVE)
def quick_gelu(info: NodeInfo) -> Compute:
    """``x * sigmoid(alpha * x)``, ``alpha`` 1.702 by default."""
    alpha = float(info.attrs.get("alpha", 1.702))
    return native_activation(info, Act.SWISH, swish_numpy(alpha), alpha)


__all__ = ["MS_DOMAIN", "bias_gelu", "fast_gelu", "gelu", "quick_gelu"]
