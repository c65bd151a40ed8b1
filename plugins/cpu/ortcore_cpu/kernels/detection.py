"""Detection ops: NonMaxSuppression, RoiAlign and MaxRoiPool.

Loops run over classes, selected boxes and regions of interest; the work
inside each (IoU against every candidate, sampling every bin of a region over
all channels) is vectorised.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from ep_sdk import Compute, NodeInfo, check_terminate

from ._common import DT, FLOATS, scalar
from ._versions import per_schema_version


def _corners(boxes: np.ndarray, center: bool) -> np.ndarray:
    """Boxes (K, 4) as (y_min, x_min, y_max, x_max) float64 rows."""
    b = boxes.astype(np.float64)
    if center:
        xc, yc, w, h = b[:, 0], b[:, 1], b[:, 2] / 2, b[:, 3] / 2
        return np.stack([yc - h, xc - w, yc + h, xc + w], axis=1)
    return np.stack(
        [
            np.minimum(b[:, 0], b[:, 2]),
            np.minimum(b[:, 1], b[:, 3]),
            np.maximum(b[:, 0], b[:, 2]),
            np.maximum(b[:, 1], b[:, 3]),
        ],
        axis=1,
    )


def _suppressed(box: np.ndarray, others: np.ndarray, iou_threshold: float) -> np.ndarray:
    """Whether each of ``others`` overlaps ``box`` with IoU above the threshold."""
    ih = np.minimum(box[2], others[:, 2]) - np.maximum(box[0], others[:, 0])
    iw = np.minimum(box[3], others[:, 3]) - np.maximum(box[1], others[:, 1])
    inter = np.where((ih > 0) & (iw > 0), ih * iw, 0.0)
    area = (box[2] - box[0]) * (box[3] - box[1])
    areas = (others[:, 2] - others[:, 0]) * (others[:, 3] - others[:, 1])
    union = area + areas - inter
    ok = (inter > 0) & (area > 0) & (areas > 0) & (union > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return ok & (inter / np.where(union > 0, union, 1) > iou_threshold)


def _nms_class(
    corners: np.ndarray, scores: np.ndarray, limit: int, iou: float, threshold: float | None
) -> list[int]:
    order = np.argsort(-scores, kind="stable")
    if threshold is not None:
        order = order[scores[order] > threshold]
    alive = np.ones(order.size, bool)
    chosen: list[int] = []
    for pos in range(order.size):
        if len(chosen) >= limit:
            break
        if not alive[pos]:
            continue
        check_terminate()  # once per kept box: O(boxes) numpy work each
        chosen.append(int(order[pos]))
        rest = order[pos + 1 :]
        alive[pos + 1 :] &= ~_suppressed(corners[order[pos]], corners[rest], iou)
    return chosen


@per_schema_version("NonMaxSuppression", input_memory={2: "host", 3: "host", 4: "host"})
def non_max_suppression(info: NodeInfo) -> Compute:
    """Greedy per-class NMS; returns int64 rows (batch, class, box)."""
    center = bool(info.attrs.get("center_point_box", 0))

    def compute(
        boxes: np.ndarray,
        scores: np.ndarray,
        max_out: np.ndarray | None = None,
        iou: np.ndarray | None = None,
        score_threshold: np.ndarray | None = None,
    ) -> tuple[np.ndarray]:
        limit = 0 if max_out is None or max_out.size == 0 else max(int(scalar(max_out)), 0)
        iou_t = 0.0 if iou is None or iou.size == 0 else float(scalar(iou))
        thr = None
        if score_threshold is not None and score_threshold.size:
            thr = float(scalar(score_threshold))
        rows: list[tuple[int, int, int]] = []
        for b in range(boxes.shape[0] if limit else 0):
            corners = _corners(boxes[b], center)
            for c in range(scores.shape[1]):
                picked = _nms_class(corners, scores[b, c], limit, iou_t, thr)
                rows.extend((b, c, i) for i in picked)
        return (np.array(rows, np.int64).reshape(-1, 3),)

    return compute


def _bilinear_taps(
    coord: np.ndarray, size: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """RoiAlign's sampling along one axis: (low, high, weight_low, weight_high, valid)."""
    valid = (coord >= -1.0) & (coord <= size)
    c = np.maximum(coord, 0)
    low = np.floor(c).astype(np.int64)
    at_end = low >= size - 1
    low = np.where(at_end, size - 1, low)
    high = np.where(at_end, size - 1, low + 1)
    c = np.where(at_end, low, c)
    frac = c - low
    return low, high, 1 - frac, frac, valid


@per_schema_version("RoiAlign", types={"T1": FLOATS, "T2": {DT.INT64}})
def roi_align(info: NodeInfo) -> Compute:
    """RoiAlign, ``avg`` or ``max`` of bilinear samples on a regular grid per bin.

    Opset 10 always uses ``output_half_pixel`` coordinates (no half-pixel
    offset, regions at least 1x1); 16+ follows
    ``coordinate_transformation_mode`` (default ``half_pixel``).
    """
    a = info.attrs
    out_h, out_w = int(a.get("output_height", 1)), int(a.get("output_width", 1))
    ratio = int(a.get("sampling_ratio", 0))
    scale = float(a.get("spatial_scale", 1.0))
    take_max = str(a.get("mode", "avg")) == "max"
    mode = str(a.get("coordinate_transformation_mode", "half_pixel"))
    half_pixel = info.opset >= 16 and mode == "half_pixel"

    def one_roi(img: np.ndarray, roi: np.ndarray) -> np.ndarray:
        h, w = img.shape[1:]
        # sample positions in the image's type and onnxruntime's order of
        # operations: a sample that lands exactly on the far edge stays valid
        ft = img.dtype.type
        offset = ft(0.5 if half_pixel else 0.0)
        x0, y0, x1, y1 = (ft(v) * ft(scale) - offset for v in roi)
        rw, rh = x1 - x0, y1 - y0
        if not half_pixel:
            rw, rh = max(rw, ft(1.0)), max(rh, ft(1.0))
        bh, bw = rh / ft(out_h), rw / ft(out_w)
        gh = ratio if ratio > 0 else math.ceil(rh / out_h)
        gw = ratio if ratio > 0 else math.ceil(rw / out_w)

        def grid(start: Any, n: int, g: int, b: Any) -> np.ndarray:
            cells = start + np.arange(n, dtype=ft)[:, None] * b
            return cells + (np.arange(g, dtype=ft)[None, :] + ft(0.5)) * b / ft(g)

        ys, xs = grid(y0, out_h, gh, bh), grid(x0, out_w, gw, bw)
        yl, yh, wyl, wyh, vy = _bilinear_taps(ys.reshape(-1), h)
        xl, xh, wxl, wxh, vx = _bilinear_taps(xs.reshape(-1), w)
        valid = (vy[:, None] & vx[None, :]).astype(img.dtype)
        terms = [
            img[:, yy[:, None], xx[None, :]] * (wy[:, None] * wx[None, :] * valid)
            for yy, wy in ((yl, wyl), (yh, wyh))
            for xx, wx in ((xl, wxl), (xh, wxh))
        ]  # each (C, out_h*gh, out_w*gw)
        c = img.shape[0]
        if take_max:
            v = np.maximum(np.maximum(terms[0], terms[1]), np.maximum(terms[2], terms[3]))
            v = v.reshape(c, out_h, gh, out_w, gw)
            return v.max(axis=(2, 4)) if gh * gw else np.zeros((c, out_h, out_w))
        v = (terms[0] + terms[1] + terms[2] + terms[3]).reshape(c, out_h, gh, out_w, gw)
        return v.sum(axis=(2, 4)) / max(gh * gw, 1)

    def compute(x: np.ndarray, rois: np.ndarray, batch: np.ndarray) -> tuple[np.ndarray]:
        work = x.astype(np.float64 if x.dtype == np.float64 else np.float32)
        y = np.zeros((rois.shape[0], x.shape[1], out_h, out_w), work.dtype)
        for r in range(rois.shape[0]):
            check_terminate()
            y[r] = one_roi(work[int(batch[r])], rois[r])
        return (y.astype(x.dtype, copy=False),)

    return compute


def _round_half_away(v: float) -> int:
    """C's ``round``: halves go away from zero (Python's ``round`` goes to even)."""
    return int(math.copysign(math.floor(abs(v) + 0.5), v))


@per_schema_version("MaxRoiPool", types={"T": FLOATS})
def max_roi_pool(info: NodeInfo) -> Compute:
    """MaxRoiPool: max over each of ``pooled_shape`` bins of every region
    (batch, x1, y1, x2, y2); empty bins give 0."""
    ph_n, pw_n = (int(v) for v in info.attrs["pooled_shape"])
    scale = float(info.attrs.get("spatial_scale", 1.0))

    def bins(start: int, length: int, count: int, size: int) -> list[tuple[int, int]]:
        step = length / count
        out = []
        for i in range(count):
            lo = min(max(math.floor(i * step) + start, 0), size)
            hi = min(max(math.ceil((i + 1) * step) + start, 0), size)
            out.append((lo, hi))
        return out

    def compute(x: np.ndarray, rois: np.ndarray) -> tuple[np.ndarray]:
        h, w = x.shape[2:]
        y = np.zeros((rois.shape[0], x.shape[1], ph_n, pw_n), x.dtype)
        for r, roi in enumerate(rois):
            check_terminate()
            b = int(roi[0])
            x0, y0, x1, y1 = (_round_half_away(float(v) * scale) for v in roi[1:])
            rows = bins(y0, max(y1 - y0 + 1, 1), ph_n, h)
            cols = bins(x0, max(x1 - x0 + 1, 1), pw_n, w)
            for i, (hs, he) in enumerate(rows):
                for j, (ws, we) in enumerate(cols):
                    if he > hs and we > ws:
                        y[r, :, i, j] = x[b, :, hs:he, ws:we].max(axis=(1, 2))
        return (y,)

    return compute


__all__ = ["max_roi_pool", "non_max_suppression", "roi_align"]
