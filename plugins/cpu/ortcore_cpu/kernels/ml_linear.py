"""Linear and kernel models of ai.onnx.ml: LinearClassifier, LinearRegressor,
SVMClassifier, SVMRegressor.

All samples are scored at once (matrix products in float64); scores come out
as float32 and labels as int64 or strings.
"""

from __future__ import annotations

import numpy as np
from ep_sdk import Compute, NodeInfo

from . import registry
from ._ml_common import ML, as_2d, class_labels, logistic, post_transform, probit, transform_name


def _coefficients(info: NodeInfo, rows: int) -> np.ndarray:
    return np.asarray(info.attrs["coefficients"], np.float64).reshape(rows, -1)


@registry.kernel("LinearClassifier", since=1, domain=ML)
def linear_classifier(info: NodeInfo) -> Compute:
    """Scores X @ coefficients.T + intercepts, the post-transform and the arg-max
    label; a single score with two labels gives (1 - p, p) as onnxruntime does."""
    labels, _ = class_labels(info, "classlabels_ints", "classlabels_strings")
    intercepts = np.asarray(info.attrs.get("intercepts") or [0.0], np.float64)
    transform = transform_name(info)
    all_coef = np.asarray(info.attrs["coefficients"], np.float64)
    has_intercepts = bool(info.attrs.get("intercepts"))

    def compute(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        x2 = as_2d(x).astype(np.float64)
        features = x2.shape[1]
        # As onnxruntime: the class count is the intercepts' count, and the
        # first classes x features coefficients are read (extra ones ignored).
        rows = len(intercepts) if has_intercepts else (all_coef.size // features if features else 1)
        if rows * features > all_coef.size or (
            not has_intercepts and rows * features != all_coef.size
        ):
            raise ValueError(
                f"{info.describe()}: {all_coef.size} coefficients do not cover {rows} classes "
                f"x {features} features"
            )
        coef = all_coef[: rows * features].reshape(rows, features)
        scores = x2 @ coef.T + intercepts
        if scores.shape[1] == 1 and len(labels) == 2:
            # onnxruntime's binary form: (1 - p, p), label from the sign of the raw score
            raw = scores[:, 0]
            p = logistic(raw) if transform == "LOGISTIC" else raw
            return labels[(raw > 0).astype(np.int64)], np.stack([1 - p, p], 1).astype(np.float32)
        scores = post_transform(scores, transform)
        if scores.shape[1] > 1:
            best = np.argmax(scores, axis=1)
            label = labels[best] if len(labels) else best.astype(np.int64)
        else:
            positive = scores[:, 0] >= (0 if transform == "NONE" else 0.5)
            if labels.dtype == object:
                label = np.where(positive, labels[0] if len(labels) else "", "").astype(object)
            else:
                label = np.where(positive, labels[0] if len(labels) else 1, 0).astype(np.int64)
        return label, scores.astype(np.float32)

    return compute


@registry.kernel("LinearRegressor", since=1, domain=ML)
def linear_regressor(info: NodeInfo) -> Compute:
    """X @ coefficients.T + intercepts per target, then the post-transform."""
    targets = int(info.attrs.get("targets", 1))
    coef = _coefficients(info, targets)
    intercepts = np.asarray(info.attrs.get("intercepts") or [0.0], np.float64)
    transform = transform_name(info)

    def compute(x: np.ndarray) -> tuple[np.ndarray]:
        scores = as_2d(x).astype(np.float64) @ coef.T + intercepts
        return (post_transform(scores, transform).astype(np.float32),)

    return compute


class _Kernel:
    """An SVM kernel function between samples and support vectors."""

    def __init__(self, info: NodeInfo) -> None:
        params = list(info.attrs.get("kernel_params") or [0.0, 0.0, 0.0])
        self.gamma, self.coef0, self.degree = float(params[0]), float(params[1]), int(params[2])
        self.kind = str(info.attrs.get("kernel_type", "LINEAR")).upper()

    def __call__(self, x: np.ndarray, sv: np.ndarray) -> np.ndarray:
        """Return the ``[samples, vectors]`` kernel matrix."""
        if self.kind == "RBF":
            sq = (x * x).sum(1)[:, None] + (sv * sv).sum(1)[None, :] - 2 * x @ sv.T
            return np.exp(-self.gamma * np.maximum(sq, 0))
        dot = x @ sv.T
        if self.kind == "POLY":
            return (dot * self.gamma + self.coef0) ** self.degree
        if self.kind == "SIGMOID":
            return np.tanh(dot * self.gamma + self.coef0)
        if self.kind == "LINEAR":
            return dot
        raise ValueError(f"unknown SVM kernel_type {self.kind!r}")


@registry.kernel("SVMRegressor", since=1, domain=ML)
def svm_regressor(info: NodeInfo) -> Compute:
    """Support-vector (or linear, without support vectors) regression; a
    one-class model outputs +1/-1."""
    kernel = _Kernel(info)
    n_sv = int(info.attrs.get("n_supports", 0))
    coef = np.asarray(info.attrs["coefficients"], np.float64)
    rho = float((info.attrs.get("rho") or [0.0])[0])
    one_class = bool(info.attrs.get("one_class", 0))
    sv = np.asarray(info.attrs.get("support_vectors") or [], np.float64)
    transform = transform_name(info)

    def compute(x: np.ndarray) -> tuple[np.ndarray]:
        x2 = as_2d(x).astype(np.float64)
        if n_sv > 0:
            s = kernel(x2, sv.reshape(n_sv, -1)) @ coef + rho
        else:
            s = x2 @ coef + rho
        s = s[:, None]
        if one_class:
            s = np.where(s > 0, 1.0, -1.0)
        return (post_transform(s, transform).astype(np.float32),)

    return compute


def _pairwise_probability(r: np.ndarray, iters: int) -> np.ndarray:
    """Multi-class probabilities from pairwise ones ``r`` ``[N, k, k]`` (libsvm's
    method), iterating every sample until it converges."""
    n, k = r.shape[:2]
    q = -(r * np.swapaxes(r, 1, 2))  # off the diagonal: -r[s, t] * r[t, s]
    diag = (r * r).sum(axis=1) - np.einsum("nii->ni", r * r)  # sum over s != t of r[s, t]^2
    q[:, np.arange(k), np.arange(k)] = diag
    p = np.full((n, k), 1.0 / k)
    todo = np.ones(n, bool)
    eps = 0.005 / k
    for _ in range(iters):
        qp = np.einsum("nij,nj->ni", q, p)
        pqp = (p * qp).sum(1)
        todo &= np.abs(qp - pqp[:, None]).max(1) >= eps
        if not todo.any():
            break
        for t in range(k):
            qtt = q[:, t, t]
            diff = np.where(todo, (-qp[:, t] + pqp) / qtt, 0.0)
            p[:, t] += diff
            pqp = (pqp + diff * (diff * qtt + 2 * qp[:, t])) / (1 + diff) ** 2
            p /= (1 + diff)[:, None]
            qp = (qp + diff[:, None] * q[:, t, :]) / (1 + diff)[:, None]
    return p


@registry.kernel("SVMClassifier", since=1, domain=ML)
def svm_classifier(info: NodeInfo) -> Compute:
    """Support-vector classification: one-vs-one votes (or linear scores),
    optional Platt probabilities, the post-transform and the label."""
    a = info.attrs
    labels, _ = class_labels(info, "classlabels_ints", "classlabels_strings")
    n_classes = max(len(labels), 1)
    kernel = _Kernel(info)
    per_class = [int(v) for v in a.get("vectors_per_class") or []]
    starts = np.concatenate([[0], np.cumsum(per_class)]).astype(int)
    n_sv = int(starts[-1])
    coefs = np.asarray(a["coefficients"], np.float64)
    all_positive = bool(coefs.size) and coefs.min() >= 0
    rho = np.asarray(a.get("rho") or [0.0], np.float64)
    prob_a = np.asarray(a.get("prob_a") or [], np.float64)
    prob_b = np.asarray(a.get("prob_b") or [], np.float64)
    sv = np.asarray(a.get("support_vectors") or [], np.float64)
    transform = transform_name(info)
    pairs = [(i, j) for i in range(n_classes) for j in range(i + 1, n_classes)]

    def scores_of(x2: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        if n_sv == 0:
            return x2 @ coefs.reshape(n_classes, -1).T + rho[0], None
        kmat = kernel(x2, sv.reshape(n_sv, -1))
        c = coefs.reshape(-1, n_sv)
        scores = np.empty((x2.shape[0], len(pairs)))
        votes = np.zeros((x2.shape[0], n_classes))
        for e, (i, j) in enumerate(pairs):
            si, sj = slice(starts[i], starts[i + 1]), slice(starts[j], starts[j + 1])
            s = rho[e] + kmat[:, si] @ c[j - 1, si] + kmat[:, sj] @ c[i, sj]
            scores[:, e] = s
            votes[:, i] += s > 0
            votes[:, j] += s <= 0
        return scores, votes

    def compute(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        x2 = as_2d(x).astype(np.float64)
        scores, votes = scores_of(x2)
        has_proba = prob_a.size > 0 and n_sv > 0
        if has_proba:
            val = 1 - logistic(scores * prob_a + prob_b)
            val = np.clip(val, 1e-7, 1 - 1e-7)
            r = np.zeros((x2.shape[0], n_classes, n_classes))
            for e, (i, j) in enumerate(pairs):
                r[:, i, j] = val[:, e]
                r[:, j, i] = 1 - val[:, e]
            scores = _pairwise_probability(r, max(100, n_classes))
        ranked = votes if votes is not None else scores
        best = np.argmax(ranked, axis=1)
        top = ranked[np.arange(ranked.shape[0]), best]
        second = -1
        if rho.size == 1:
            if len(labels) == 2:
                second = 2
                if not has_proba and all_positive:
                    best = np.where(top >= 0.5, 1, best)
            else:
                best = (top > 0).astype(np.int64)
        if scores.shape[1] >= 2:
            out = post_transform(scores, transform)
        elif transform == "PROBIT":
            out = probit(scores)
        elif second == 2:
            out = post_transform(np.concatenate([-scores, scores], axis=1), transform)
        else:
            out = scores
        if len(labels) and not (rho.size == 1 and len(labels) != 2):
            label = labels[best]
        else:
            label = best.astype(np.int64)
        return label, out.astype(np.float32)

    return compute
