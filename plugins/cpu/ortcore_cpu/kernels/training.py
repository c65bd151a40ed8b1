"""Optimizers of the ai.onnx.preview.training domain: Momentum, Adagrad, Adam.

Each takes a learning rate ``R`` and step count ``T`` followed by groups of
tensors (all the Xs, then all the Gs, then each state), and returns the
updated tensors grouped the same way. Outputs keep each input's dtype.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from ep_sdk import Compute, NodeInfo

from . import registry

_DOMAIN = "ai.onnx.preview.training"

# One update: (r, t, x, g, *states) -> (x_new, *states_new)
_Update = Callable[..., tuple[np.ndarray, ...]]


def _grouped(update: _Update, n_states: int) -> Compute:
    """Apply ``update`` to each of the N (X, G, states...) groups."""

    def compute(r: np.ndarray, t: np.ndarray, *tensors: np.ndarray) -> list[np.ndarray]:
        width = 2 + n_states
        if len(tensors) % width:
            raise ValueError(f"expected a multiple of {width} tensors after R and T")
        n = len(tensors) // width
        rate, step = float(np.asarray(r).reshape(())), int(np.asarray(t).reshape(()))
        results = [
            update(rate, step, *(tensors[k * n + i] for k in range(width))) for i in range(n)
        ]
        out: list[np.ndarray] = []
        for j in range(1 + n_states):
            ins = tensors[0:n] if j == 0 else tensors[(j + 1) * n : (j + 2) * n]
            out.extend(
                res[j].astype(x.dtype, copy=False) for res, x in zip(results, ins, strict=True)
            )
        return out

    return compute


@registry.kernel("Momentum", since=1, domain=_DOMAIN)
def momentum(info: NodeInfo) -> Compute:
    """SGD with momentum (``mode`` ``standard`` or ``nesterov``)."""
    alpha = float(info.attrs["alpha"])
    beta = float(info.attrs["beta"])
    norm = float(info.attrs["norm_coefficient"])
    nesterov = info.attrs.get("mode", "standard") == "nesterov"

    def update(r: float, t: int, x: np.ndarray, g: np.ndarray, v: np.ndarray) -> tuple:
        g_reg = norm * x + g
        v_new = alpha * v + (beta if t > 0 else 1.0) * g_reg
        x_new = x - r * (g_reg + alpha * v_new) if nesterov else x - r * v_new
        return x_new, v_new

    return _grouped(update, 1)


@registry.kernel("Adagrad", since=1, domain=_DOMAIN)
def adagrad(info: NodeInfo) -> Compute:
    """Adagrad with learning-rate decay."""
    decay = float(info.attrs.get("decay_factor", 0.0))
    eps = float(info.attrs.get("epsilon", 0.0))
    norm = float(info.attrs.get("norm_coefficient", 0.0))

    def update(r: float, t: int, x: np.ndarray, g: np.ndarray, h: np.ndarray) -> tuple:
        rate = r / (1 + t * decay)
        g_reg = norm * x + g
        h_new = h + g_reg * g_reg
        return x - rate * g_reg / (np.sqrt(h_new) + eps), h_new

    return _grouped(update, 1)


@registry.kernel("Adam", since=1, domain=_DOMAIN)
def adam(info: NodeInfo) -> Compute:
    """Adam with bias correction after the first step and optional post-update decay."""
    alpha = float(info.attrs.get("alpha", 0.9))
    beta = float(info.attrs.get("beta", 0.999))
    eps = float(info.attrs.get("epsilon", 0.0))
    norm = float(info.attrs.get("norm_coefficient", 0.0))
    norm_post = float(info.attrs.get("norm_coefficient_post", 0.0))

    def update(
        r: float, t: int, x: np.ndarray, g: np.ndarray, v: np.ndarray, h: np.ndarray
    ) -> tuple:
        g_reg = norm * x + g
        v_new = alpha * v + (1 - alpha) * g_reg
        h_new = beta * h + (1 - beta) * (g_reg * g_reg)
        rate = r * np.sqrt(1 - beta**t) / (1 - alpha**t) if t > 0 else r
        x_new = x - rate * (v_new / (np.sqrt(h_new) + eps))
        return (1 - norm_post) * x_new, v_new, h_new

    return _grouped(update, 2)
