"""Helpers shared by the ai.onnx.ml kernel modules: the domain name, score
post-transforms and class-label handling."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from ep_sdk import NodeInfo

ML = "ai.onnx.ml"
"""The traditional-ML operator domain."""

POST_TRANSFORMS = ("NONE", "SOFTMAX", "LOGISTIC", "SOFTMAX_ZERO", "PROBIT")
"""Post-transform names, indexed by their enum value (TreeEnsemble v5)."""


def logistic(x: np.ndarray) -> np.ndarray:
    """1 / (1 + exp(-x)), without overflow warnings."""
    with np.errstate(over="ignore"):
        return 1.0 / (1.0 + np.exp(-x))


def softmax(x: np.ndarray) -> np.ndarray:
    """Softmax over the last axis."""
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def softmax_zero(x: np.ndarray) -> np.ndarray:
    """Softmax over the last axis where (near-)zero scores stay zero; a row of
    zeros becomes 0.5 everywhere (onnxruntime's SOFTMAX_ZERO)."""
    top = x.max(axis=-1, keepdims=True)
    nonzero = np.abs(x) > 1e-7
    e = np.where(nonzero, np.exp(x - top), x * np.exp(-top))
    total = e.sum(axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total == 0, 0.5, e / np.where(total == 0, 1, total))


def erf_inv(x: np.ndarray) -> np.ndarray:
    """The closed-form approximation of erf^-1 that onnxruntime uses."""
    sign = np.where(x < 0, -1.0, 1.0)
    y = (1.0 - x) * (1.0 + x)
    with np.errstate(divide="ignore", invalid="ignore"):
        log = np.log(y)
        v = 2.0 / (np.pi * 0.147) + 0.5 * log
        out = sign * np.sqrt(-v + np.sqrt(v * v - log / 0.147))
    return np.where(y == 0, 0.0, out)


def probit(x: np.ndarray) -> np.ndarray:
    """sqrt(2) * erf^-1(2x - 1)."""
    return 1.41421356 * erf_inv(x * 2 - 1)


def post_transform(scores: np.ndarray, name: str) -> np.ndarray:
    """Apply a post-transform (by name) to ``[N, K]`` scores."""
    if name == "NONE":
        return scores
    if name == "LOGISTIC":
        return logistic(scores)
    if name == "SOFTMAX":
        return softmax(scores)
    if name == "SOFTMAX_ZERO":
        return softmax_zero(scores)
    if name == "PROBIT":
        return probit(scores)
    raise ValueError(f"unknown post_transform {name!r}")


def transform_name(info: NodeInfo) -> str:
    """The node's ``post_transform`` as a name (v5 tree ensembles use an enum)."""
    value = info.attrs.get("post_transform", "NONE")
    if isinstance(value, int | np.integer):
        return POST_TRANSFORMS[int(value)]
    return str(value or "NONE")


def class_labels(info: NodeInfo, ints: str, strings: str) -> tuple[np.ndarray, bool]:
    """Return the class labels (int64 or object array) and whether they are strings."""
    labels_s = info.attrs.get(strings)
    if labels_s is not None and len(labels_s):
        return object_array(labels_s), True
    labels_i = info.attrs.get(ints)
    return np.asarray(labels_i if labels_i is not None else [], dtype=np.int64), False


def object_array(values: Sequence[Any]) -> np.ndarray:
    """A 1-D object array of ``values`` (strings stay ``str``)."""
    out = np.empty(len(values), dtype=object)
    out[:] = list(values)
    return out


def as_2d(x: np.ndarray) -> np.ndarray:
    """A feature matrix: 1-D input is one sample, higher ranks flatten the rest."""
    if x.ndim == 1:
        return x.reshape(1, -1)
    return x.reshape(x.shape[0], -1) if x.ndim > 2 else x


def float_attr(info: NodeInfo, name: str, dtype: Any = np.float64) -> np.ndarray | None:
    """A tensor-or-list attribute ``name`` (or ``name + '_as_tensor'``) as an array."""
    value = info.attrs.get(name + "_as_tensor")
    if value is None:
        value = info.attrs.get(name)
    if value is None:
        return None
    return np.asarray(value, dtype=dtype).reshape(-1)
