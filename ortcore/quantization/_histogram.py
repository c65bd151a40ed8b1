"""Histograms of calibration tensors and the ranges chosen from them.

Entropy (KL divergence between the clipped and the quantized distribution),
Percentile and Distribution (mean and deviation, for float 8), computed as
onnxruntime's HistogramCollector computes them so that both tools choose the
same thresholds from the same data.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._calib_data import TensorData

__all__ = ["HistogramCollector"]


def _smooth(p: np.ndarray, eps: float = 0.0001) -> np.ndarray | None:
    """Move ``eps`` mass onto the empty bins (KL divergence needs no zero in q)."""
    is_zero = (p == 0).astype(np.float32)
    is_nonzero = (p != 0).astype(np.float32)
    n_zero = is_zero.sum()
    n_nonzero = p.size - n_zero
    if not n_nonzero:
        return None
    eps1 = eps * float(n_zero) / float(n_nonzero)
    hist = p.astype(np.float32)
    hist += eps * is_zero + (-eps1) * is_nonzero
    return hist


def _entropy(pk: np.ndarray, qk: np.ndarray) -> np.floating:
    pk = np.asarray(pk).astype(np.float32)
    pk = 1.0 * pk / np.sum(pk, keepdims=True)
    qk = np.asarray(qk).astype(np.float32)
    qk = 1.0 * qk / np.sum(qk, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        vec = pk * np.log(pk / qk)
    # onnxruntime's order: zero where pk == 0, then inf wherever either is not
    # positive (which overrides the zeros; smoothed inputs have no zeros).
    vec[(pk == 0) & (qk >= 0)] = 0
    vec[~((pk > 0) & (qk > 0))] = np.inf
    return np.sum(vec).astype(pk.dtype)


class HistogramCollector:
    """Per-tensor histograms, merged across batches; ``compute_collection_result`` picks ranges."""

    def __init__(
        self,
        method: str,
        symmetric: bool,
        num_bins: int,
        num_quantized_bins: int,
        percentile: float,
        scenario: str,
    ) -> None:
        if method not in ("entropy", "percentile", "distribution"):
            raise ValueError(
                f"unknown histogram method {method!r}; expected entropy, percentile or distribution"
            )
        self.histogram_dict: dict[str, tuple[Any, ...]] = {}
        self.method = method
        self.symmetric = symmetric
        self.num_bins = num_bins
        self.num_quantized_bins = num_quantized_bins
        self.percentile = percentile
        self.scenario = scenario

    def get_histogram_dict(self) -> dict[str, tuple[Any, ...]]:
        """``{tensor: (hist, edges, min, max[, threshold])}``."""
        return self.histogram_dict

    def collect(self, name_to_arr: dict[str, list[np.ndarray]]) -> None:
        """Add the values of one or more batches to each tensor's histogram."""
        if self.method == "percentile" and self.symmetric:
            self._collect_absolute(name_to_arr)
        else:
            self._collect_value(name_to_arr)

    @staticmethod
    def _flat(arrays: list[np.ndarray] | np.ndarray) -> np.ndarray:
        if isinstance(arrays, np.ndarray):
            return arrays.ravel()
        return (
            np.concatenate([np.asarray(a).ravel() for a in arrays])
            if arrays
            else np.zeros(0, np.float32)
        )

    def _collect_absolute(self, name_to_arr: dict[str, list[np.ndarray]]) -> None:
        for tensor, arrays in name_to_arr.items():
            data = self._flat(arrays)
            if data.size:
                lo, hi = np.nanmin(data), np.nanmax(data)
            else:
                lo = hi = np.array(0, dtype=data.dtype)
            data = np.absolute(data)
            if tensor not in self.histogram_dict:
                hist, edges = np.histogram(data, bins=self.num_bins)
                self.histogram_dict[tensor] = (hist, edges.astype(data.dtype), lo, hi)
                continue
            old_hist, old_edges, old_lo, old_hi = self.histogram_dict[tensor]
            amax = np.nanmax(data) if data.size else 0
            if amax > old_edges[-1]:
                width = old_edges[1] - old_edges[0]
                extra = np.arange(old_edges[-1] + width, amax + width, width)
                old_edges = np.hstack((old_edges, extra))
            hist, edges = np.histogram(data, bins=old_edges)
            hist[: len(old_hist)] += old_hist
            self.histogram_dict[tensor] = (
                hist,
                edges.astype(data.dtype),
                min(old_lo, lo),
                max(old_hi, hi),
            )

    def _collect_value(self, name_to_arr: dict[str, list[np.ndarray]]) -> None:
        for tensor, arrays in name_to_arr.items():
            data = self._flat(arrays)
            if data.size:
                lo, hi = np.nanmin(data), np.nanmax(data)
            else:
                lo = hi = np.array(0, dtype=data.dtype)
            threshold = np.array(max(abs(lo), abs(hi)), dtype=data.dtype)
            if tensor in self.histogram_dict:
                self.histogram_dict[tensor] = self._merge(
                    self.histogram_dict[tensor], data, lo, hi, threshold
                )
            else:
                # Python floats: same bin dtype (the data's) as the 0-d arrays under NEP 50.
                bounds = (-float(threshold), float(threshold))
                hist, edges = np.histogram(data, self.num_bins, range=bounds)
                self.histogram_dict[tensor] = (hist, edges, lo, hi, threshold)

    @staticmethod
    def _merge(
        old: tuple[Any, ...], data: np.ndarray, lo: Any, hi: Any, threshold: Any
    ) -> tuple[Any, ...]:
        old_hist, old_edges, old_lo, old_hi, old_threshold = old
        if threshold <= old_threshold:
            hist, _ = np.histogram(data, len(old_hist), range=(-old_threshold, old_threshold))
            return hist + old_hist, old_edges, min(old_lo, lo), max(old_hi, hi), old_threshold
        if old_threshold == 0:
            hist, edges = np.histogram(data, len(old_hist), range=(-threshold, threshold))
            hist += old_hist
        else:
            # Widen by whole old bins on both sides so the old counts land on bins.
            old_bins = len(old_hist)
            stride = 2 * old_threshold / old_bins
            half = int((threshold - old_threshold) // stride + 1)
            bins = old_bins + 2 * half
            threshold = half * stride + old_threshold
            hist, edges = np.histogram(data, bins, range=(-threshold, threshold))
            hist[half : bins - half] += old_hist
        return hist, edges, min(old_lo, lo), max(old_hi, hi), threshold

    def compute_collection_result(self) -> dict[str, Any]:
        """``{tensor: (lowest, highest, hist, edges)}`` (or TensorData for ``distribution``)."""
        if not self.histogram_dict:
            raise ValueError("no histogram collected: run collect() on calibration data first")
        if self.method == "entropy":
            return {
                t: (*self._entropy_threshold(h), *h[:2]) for t, h in self.histogram_dict.items()
            }
        if self.method == "percentile":
            return self._percentile()
        return self._distribution()

    def _percentile(self) -> dict[str, Any]:
        if not 0 <= self.percentile <= 100:
            raise ValueError(f"percentile must be in [0, 100], got {self.percentile}")
        out: dict[str, Any] = {}
        for tensor, h in self.histogram_dict.items():
            hist, edges = h[0], h[1]
            cdf = np.cumsum(hist / hist.sum())
            if self.symmetric:
                right = np.searchsorted(cdf, self.percentile / 100.0)
                lo_t, hi_t = (
                    -np.array(edges[right], edges.dtype),
                    np.array(edges[right], edges.dtype),
                )
            else:
                cut = (100.0 - self.percentile) / 200.0
                right = np.searchsorted(cdf, 1.0 - cut)
                left = np.searchsorted(cdf, cut)
                lo_t, hi_t = np.array(edges[left], edges.dtype), np.array(edges[right], edges.dtype)
            if lo_t < h[2]:
                lo_t = h[2]
            if hi_t > h[3]:
                hi_t = h[3]
            out[tensor] = (lo_t, hi_t, *hist[:2])
        return out

    @staticmethod
    def _avg_std(
        hist: np.ndarray, edges: np.ndarray, power: float = 1
    ) -> tuple[np.ndarray, np.ndarray]:
        values = (edges[:-1] + edges[1:]) * 0.5
        if power == 1:
            avg = (hist * values).sum() / hist.sum()
            std = ((hist * values**2).sum() / hist.sum() - avg**2) ** 0.5
            return np.array(avg, dtype=edges.dtype), np.array(std, dtype=edges.dtype)
        with np.errstate(divide="ignore", invalid="ignore"):
            fact = np.abs(values) / values
        fact[~np.isfinite(fact)] = 1
        values = np.abs(values) ** power * fact
        avg = (hist * values).sum() / hist.sum()
        std = ((hist * values**2).sum() / hist.sum() - avg**2) ** 0.5
        return np.array(avg, dtype=edges.dtype), np.array(std, dtype=edges.dtype)

    def _distribution(self) -> dict[str, Any]:
        if self.num_bins < 512:
            raise ValueError(f"Distribution calibration needs num_bins >= 512, got {self.num_bins}")
        if self.scenario not in ("same", "p3"):
            raise ValueError(
                f"unknown Distribution scenario {self.scenario!r}; expected 'same' or 'p3'"
            )
        out: dict[str, Any] = {}
        for tensor, h in self.histogram_dict.items():
            hist, edges = h[0], h[1]
            avg, std = self._avg_std(hist, edges, 1 if self.scenario == "same" else 1.0 / 3.0)
            out[tensor] = TensorData(
                avg=avg,
                std=std,
                hist=hist,
                hist_edges=edges,
                lowest=edges.min(),
                highest=edges.max(),
            )
        return out

    def _entropy_threshold(self, histogram: tuple[Any, ...]) -> tuple[Any, Any]:
        hist, edges = histogram[0], histogram[1]
        nq = self.num_quantized_bins
        num_bins = hist.size
        zero_bin = num_bins // 2
        half_q = nq // 2
        dtype = edges.dtype
        count = zero_bin - half_q + 1
        if count <= 0:
            return histogram[2], histogram[3]
        kl = np.zeros(count)
        thresholds: list[tuple[Any, Any]] = [(np.array(0, dtype), np.array(0, dtype))] * count
        cum = np.concatenate([[0], np.cumsum(hist)])
        total = cum[-1]
        for i in range(half_q, zero_bin + 1):
            start = zero_bin - i
            end = min(zero_bin + i + 1, num_bins)
            thresholds[i - half_q] = (edges[start], edges[end])
            sliced = hist[start:end]
            p = sliced.copy()
            p[0] += cum[start]
            p[-1] += total - cum[end]
            nonzeros = (p != 0).astype(np.int64)
            merged = sliced.size // nq
            quantized = (
                np.add.reduceat(sliced[: nq * merged], np.arange(0, nq * merged, merged))
                if merged
                else (np.zeros(nq, np.int64))
            )
            quantized = np.asarray(quantized, dtype=np.int64)
            quantized[-1] += sliced[nq * merged :].sum()
            q = np.zeros(p.size, dtype=np.int64)
            if merged:
                norms = nonzeros[: nq * merged].reshape(nq, merged).sum(axis=1)
                for index in np.nonzero(norms)[0]:
                    q[index * merged : (index + 1) * merged] = quantized[index] / norms[index]
            ps, qs = _smooth(p), _smooth(q)
            kl[i - half_q] = np.inf if ps is None or qs is None else _entropy(ps, qs)
        best = thresholds[int(np.argmin(kl))]
        lo, hi = best
        if lo < histogram[2]:
            lo = histogram[2]
        if hi > histogram[3]:
            hi = histogram[3]
        return lo, hi
