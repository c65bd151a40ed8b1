"""Losses: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss."""

from __future__ import annotations

import numpy as np
from ep_sdk import Compute, NodeInfo

from ._common import FLOATS, INDEX
from ._versions import per_schema_version


def nll_loss(
    logp: np.ndarray,
    target: np.ndarray,
    weight: np.ndarray | None,
    ignore_index: int | None,
    reduction: str,
) -> np.ndarray:
    """Negative log-likelihood of ``target`` classes under ``logp`` (N, C, *D).

    Ignored targets contribute nothing, also to the ``mean`` denominator.
    """
    c = logp.shape[1]
    tgt = target.astype(np.int64)
    keep = np.ones(tgt.shape, bool) if ignore_index is None else tgt != ignore_index
    safe = np.where(keep, tgt, 0)
    if np.any((safe < 0) | (safe >= c)):
        raise ValueError(f"target values must lie in [0, {c}) or equal ignore_index")
    picked = np.take_along_axis(logp, safe[:, None], axis=1)[:, 0]
    w = np.ones(tgt.shape, logp.dtype) if weight is None else weight.astype(logp.dtype)[safe]
    w = np.where(keep, w, 0).astype(logp.dtype)
    loss = -picked * w
    if reduction == "none":
        return loss
    if reduction == "sum":
        return np.asarray(loss.sum(), logp.dtype)
    if reduction == "mean":
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.asarray(loss.sum() / w.sum(), logp.dtype)
    raise ValueError(f"unknown reduction {reduction!r}")


def _work(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float32) if x.dtype.itemsize < 4 else x


def _options(info: NodeInfo) -> tuple[int | None, str]:
    ii = info.attrs.get("ignore_index")
    return (None if ii is None else int(ii)), str(info.attrs.get("reduction", "mean"))


@per_schema_version("NegativeLogLikelihoodLoss", types={"T": FLOATS, "Tind": INDEX})
def negative_log_likelihood_loss(info: NodeInfo) -> Compute:
    """NegativeLogLikelihoodLoss with optional weights and ignore_index."""
    ignore_index, reduction = _options(info)

    def compute(
        x: np.ndarray, target: np.ndarray, weight: np.ndarray | None = None
    ) -> tuple[np.ndarray]:
        loss = nll_loss(_work(x), target, weight, ignore_index, reduction)
        return (loss.astype(x.dtype, copy=False),)

    return compute


@per_schema_version("SoftmaxCrossEntropyLoss", types={"T": FLOATS, "Tind": INDEX})
def softmax_cross_entropy_loss(info: NodeInfo) -> Compute:
    """SoftmaxCrossEntropyLoss: NLL of log-softmax over axis 1; the second
    output, when asked for, is the log-probabilities."""
    ignore_index, reduction = _options(info)
    n_out = info.num_outputs

    def compute(
        scores: np.ndarray, labels: np.ndarray, weight: np.ndarray | None = None
    ) -> tuple[np.ndarray, ...]:
        x = _work(scores)
        if x.ndim == 1:
            x = x[None]
        shifted = x - np.max(x, axis=1, keepdims=True)
        logp = shifted - np.log(np.sum(np.exp(shifted), axis=1, keepdims=True))
        loss = nll_loss(logp, labels, weight, ignore_index, reduction)
        outs = (loss.astype(scores.dtype), logp.reshape(scores.shape).astype(scores.dtype))
        return outs[:n_out]

    return compute
