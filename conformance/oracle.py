"""The suite's oracle: onnx's reference evaluator, corrected where it is wrong.

``onnx.reference`` implements some operators only with the semantics of their
latest version, so models of older opsets (onnx's light models are opset 9)
get wrong expected outputs. :func:`evaluator` gives it these replacements:

* ``Softmax``, ``LogSoftmax``, ``Hardmax`` before opset 13 coerce the input to
  2-D at ``axis`` (default 1) and normalize over everything from ``axis`` on;
  the reference uses opset 13's meaning (one axis, default -1), which gives a
  tensor of ones for a ``[1, 1000, 1, 1]`` Softmax.
* ``BatchNormalization`` before opset 14 with a single output is the inference
  form (``Y`` from the given mean and variance); the reference mixes in the
  batch statistics with the schema's default ``momentum`` (opset 9) or runs
  the training form (opsets 6-8, unless ``is_test``).
* ``LRN`` sums squares over a window of channels; the reference loops over
  the batch dimension instead, so with one image only channel 0 is
  normalized (onnx's node test has as many images as channels).
* ``LogSoftmax`` (every opset) is ``x - max - log(sum(exp(x - max)))``: the
  reference's ``log(softmax(x))`` is -inf where softmax underflows.
* ``Erf`` is computed in float32 whatever the input's dtype, so a float64
  result is only float32-accurate; here it is computed in float64.
* ``Flatten`` reshapes to ``(outer, -1)``, which numpy refuses for an empty
  tensor whose ``outer`` is 0; here both sizes are computed.
* ``Cast`` and ``CastLike`` between numeric types convert with ml_dtypes'
  ``astype``, whose answers changed in ml_dtypes 0.7 (double rounding, out of
  range values); here :func:`.cast_reference.cast_exact` converts exactly.
  Strings go to the reference's own cast.

From opset 13 (14 for BatchNormalization) the reference's own softmax-family
and BatchNormalization implementations run unchanged.
"""

from __future__ import annotations

import importlib
import math
from typing import Any

import numpy as np
import onnx
from onnx.reference import ReferenceEvaluator
from onnx.reference.op_run import OpRun
from onnx.reference.ops.op_cast import cast_to

from .cast_reference import cast_exact

__all__ = ["FIXES", "batchnorm_inference", "evaluator"]


def _opset(op: OpRun) -> int:
    return int(op.run_params["opsets"].get("", 1))


def _has_attr(op: OpRun, name: str) -> bool:
    return any(a.name == name for a in op.onnx_node.attribute)


def _upstream(op: OpRun, module: str, name: str, *args: Any) -> Any:
    """Run ``op``'s node with the reference's own implementation ``module.name``."""
    key = f"_upstream_{name}"
    impl = op.__dict__.get(key)
    if impl is None:
        cls = getattr(importlib.import_module(f"onnx.reference.ops.{module}"), name)
        impl = op.__dict__[key] = cls(op.onnx_node, op.run_params)
    return impl.run(*args)


def _as_2d(x: np.ndarray, axis: int | None, explicit: bool) -> np.ndarray:
    """``x`` coerced to 2-D as opsets 1-12 of the softmax family do."""
    a = (axis if explicit and axis is not None else 1) % max(x.ndim, 1)
    rows = int(np.prod(x.shape[:a], dtype=np.int64))
    return x.reshape(rows, -1)


class _Legacy2D(OpRun):
    """Softmax-family op: opset >= 13 upstream, before that on a 2-D view."""

    op_domain = ""
    _module = ""

    def _run(self, x: np.ndarray, axis: int | None = None) -> Any:
        if _opset(self) >= 13:
            return _upstream(self, self._module, type(self).__name__, x)
        if x.size == 0:
            return (x,)
        flat = _as_2d(x, axis, _has_attr(self, "axis"))
        return (self._apply(flat).reshape(x.shape).astype(x.dtype),)

    def _apply(self, x: np.ndarray) -> np.ndarray:
        raise NotImplementedError


def _softmax_rows(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)  # type: ignore[no-any-return]


class Softmax(_Legacy2D):
    """Softmax with opsets 1-12's 2-D coercion."""

    _module = "op_softmax"

    def _apply(self, x: np.ndarray) -> np.ndarray:
        return _softmax_rows(x)


class LogSoftmax(_Legacy2D):
    """LogSoftmax with opsets 1-12's 2-D coercion."""

    _module = "op_log_softmax"

    def _run(self, x: np.ndarray, axis: int | None = None) -> Any:
        if _opset(self) >= 13:
            if x.size == 0:
                return (x,)
            a = -1 if axis is None else axis
            return (_log_softmax(x, a).astype(x.dtype),)
        return super()._run(x, axis)

    def _apply(self, x: np.ndarray) -> np.ndarray:
        return _log_softmax(x, 1)


def _log_softmax(x: np.ndarray, axis: int) -> np.ndarray:
    """``x - max - log(sum(exp(x - max)))``: finite where ``log(softmax(x))``
    underflows to -inf (a value 1000 below the largest)."""
    wide = np.asarray(x, dtype=np.float64)  # float16/bfloat16/float32 alike, rounded by the caller
    shifted = wide - wide.max(axis=axis, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))  # type: ignore[no-any-return]


class Hardmax(_Legacy2D):
    """Hardmax with opsets 1-12's 2-D coercion."""

    _module = "op_hardmax"

    def _apply(self, x: np.ndarray) -> np.ndarray:
        y = np.zeros_like(x)
        y[np.arange(x.shape[0]), np.argmax(x, axis=1)] = 1
        return y


def batchnorm_inference(
    x: np.ndarray,
    scale: np.ndarray,
    bias: np.ndarray,
    mean: np.ndarray,
    var: np.ndarray,
    epsilon: float,
) -> np.ndarray:
    """``scale * (x - mean) / sqrt(var + epsilon) + bias`` over axis 1, in ``x``'s dtype."""
    shape = (-1,) + (1,) * (x.ndim - 2)
    y = scale.reshape(shape) * (x - mean.reshape(shape)) / np.sqrt(
        var.reshape(shape) + epsilon
    ) + bias.reshape(shape)
    return y.astype(x.dtype)  # type: ignore[no-any-return]


class BatchNormalization(OpRun):
    """BatchNormalization whose single-output form before opset 14 is inference."""

    op_domain = ""

    def _inference(self) -> bool:
        opset = _opset(self)
        if opset >= 14 or len(self.onnx_node.output) != 1:
            return False
        if opset < 7 and _has_attr(self, "is_test"):
            return bool(next(a.i for a in self.onnx_node.attribute if a.name == "is_test"))
        return True

    def _run(self, x: Any, scale: Any, bias: Any, mean: Any, var: Any, **attrs: Any) -> Any:
        if self._inference():
            eps = attrs.get("epsilon")
            return (batchnorm_inference(x, scale, bias, mean, var, 1e-5 if eps is None else eps),)
        opset = _opset(self)
        name = "BatchNormalization_" + ("14" if opset >= 14 else "9" if opset >= 9 else "6")
        return _upstream(self, "op_batch_normalization", name, x, scale, bias, mean, var)


class LRN(OpRun):
    """LRN over a window of channels: ``x / (bias + alpha / size * sum(x²)) ** beta``."""

    op_domain = ""

    def _run(
        self,
        x: np.ndarray,
        alpha: float = 1e-4,
        beta: float = 0.75,
        bias: float = 1.0,
        size: int = 1,
    ) -> tuple[np.ndarray]:
        alpha = 1e-4 if alpha is None else alpha
        beta = 0.75 if beta is None else beta
        bias = 1.0 if bias is None else bias
        channels = x.shape[1]
        before, after = (size - 1) // 2, size // 2  # floor and ceil of (size - 1) / 2
        squares = x**2
        total = np.zeros_like(x)
        for c in range(channels):
            lo, hi = max(0, c - before), min(channels, c + after + 1)
            total[:, c] = squares[:, lo:hi].sum(axis=1)
        return ((x / (bias + (alpha / size) * total) ** beta).astype(x.dtype),)


class Erf(OpRun):
    """Erf computed in float64 (``math.erf``), then rounded to the input's dtype."""

    op_domain = ""

    def _run(self, x: np.ndarray) -> tuple[np.ndarray]:
        wide = np.asarray(x, dtype=np.float64)
        return (np.vectorize(math.erf, otypes=[np.float64])(wide).astype(x.dtype),)


class Flatten(OpRun):
    """Flatten with both sizes computed: the reference reshapes to
    ``(outer, -1)``, which numpy refuses when ``outer`` is 0."""

    op_domain = ""

    def _run(self, x: np.ndarray, axis: int | None = None) -> tuple[np.ndarray]:
        a = 1 if axis is None else axis
        a = a + x.ndim if a < 0 else a
        outer = int(np.prod(x.shape[:a], dtype=np.int64))
        inner = int(np.prod(x.shape[a:], dtype=np.int64))
        return (x.reshape(outer, inner),)


def _cast(x: np.ndarray, to: int, saturate: Any, round_mode: Any) -> np.ndarray:
    sat = True if saturate is None else bool(saturate)
    mode = "up" if round_mode is None else str(round_mode)
    if to == onnx.TensorProto.STRING or x.dtype == object or x.dtype.kind in "SU":
        return cast_to(x, to, sat, mode)  # type: ignore[arg-type]  # a DataType's value
    return cast_exact(x, onnx.helper.tensor_dtype_to_np_dtype(to), sat, mode)


class Cast(OpRun):
    """Cast between numeric types exactly (:mod:`.cast_reference`)."""

    op_domain = ""

    def _run(
        self, x: np.ndarray, to: Any = None, saturate: Any = None, round_mode: Any = None
    ) -> tuple[np.ndarray]:
        code = onnx.TensorProto.DataType.Value(to.upper()) if isinstance(to, str) else int(to)
        return (_cast(x, code, saturate, round_mode),)


class CastLike(OpRun):
    """CastLike between numeric types exactly (:mod:`.cast_reference`)."""

    op_domain = ""

    def _run(
        self, x: np.ndarray, like: np.ndarray, saturate: Any = None, round_mode: Any = None
    ) -> tuple[np.ndarray]:
        code = onnx.helper.np_dtype_to_tensor_dtype(like.dtype)
        return (_cast(x, code, saturate, round_mode),)


FIXES: tuple[type[OpRun], ...] = (
    Softmax,
    LogSoftmax,
    Hardmax,
    BatchNormalization,
    LRN,
    Erf,
    Flatten,
    Cast,
    CastLike,
)
"""The replacements :func:`evaluator` installs."""


def evaluator(model: onnx.ModelProto, extra: tuple[type[OpRun], ...] = ()) -> ReferenceEvaluator:
    """onnx's reference evaluator for ``model``, with :data:`FIXES` (and ``extra``) installed."""
    fixes = {c.__name__: c for c in (*FIXES, *extra)}
    return ReferenceEvaluator(model, new_ops=list(fixes.values()))
