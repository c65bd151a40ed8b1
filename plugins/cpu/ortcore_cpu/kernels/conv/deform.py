"""DeformConv: every kernel tap samples the input bilinearly at its offset
position (times the optional mask), then one matmul per group; numpy.
"""

from __future__ import annotations

import numpy as np
from ep_sdk import Compute, NodeInfo

from .. import registry
from .._common import FLOATS
from .._window import check_window_attrs


def _bilinear_gather(
    planes: np.ndarray, y: np.ndarray, x: np.ndarray, h: int, w: int
) -> np.ndarray:
    """Bilinear samples of ``planes`` (N, G, Cg, H*W) at pixel coordinates y, x
    (N, G, P); taps outside the image read zero."""
    y0, x0 = np.floor(y), np.floor(x)
    out = np.zeros((*planes.shape[:3], y.shape[-1]), planes.dtype)
    for dy, dx in ((0, 0), (0, 1), (1, 0), (1, 1)):
        yy, xx = y0 + dy, x0 + dx
        wt = (1 - np.abs(y - yy)) * (1 - np.abs(x - xx))
        ok = (yy >= 0) & (yy < h) & (xx >= 0) & (xx < w)
        idx = (np.clip(yy, 0, h - 1) * w + np.clip(xx, 0, w - 1)).astype(np.int64)
        vals = np.take_along_axis(planes, idx[:, :, None, :], axis=3)
        out += vals * np.where(ok, wt, 0).astype(planes.dtype)[:, :, None, :]
    return out


@registry.kernel("DeformConv", since=19, until=21, types={"T": FLOATS})
@registry.kernel("DeformConv", since=22, types={"T": FLOATS})
def deform_conv(info: NodeInfo) -> Compute:
    """2-D deformable convolution: every kernel tap samples the input
    bilinearly at its offset position (times the optional mask)."""
    check_window_attrs(info.attrs)
    a = info.attrs
    group = int(a.get("group", 1))
    offset_group = int(a.get("offset_group", 1))

    def compute(
        x: np.ndarray,
        w: np.ndarray,
        offset: np.ndarray,
        b: np.ndarray | None = None,
        mask: np.ndarray | None = None,
    ) -> tuple[np.ndarray]:
        if x.ndim != 4:
            raise ValueError(f"{info.describe()}: only 2-D DeformConv is supported")
        n, c, h, wd = x.shape
        m = w.shape[0]
        kh, kw = (int(k) for k in (a.get("kernel_shape") or w.shape[2:]))
        sh, sw = a.get("strides") or (1, 1)
        dh, dw = a.get("dilations") or (1, 1)
        pads = a.get("pads") or (0, 0, 0, 0)
        oh, ow = offset.shape[2:]
        k = kh * kw
        work = np.float64 if x.dtype == np.float64 else np.float32
        planes = x.astype(work).reshape(n, offset_group, c // offset_group, h * wd)
        off = offset.astype(work).reshape(n, offset_group, k, 2, oh * ow)
        msk = None if mask is None else mask.astype(work).reshape(n, offset_group, k, -1)
        base_y = (np.arange(oh) * sh - pads[0])[:, None].repeat(ow, 1).reshape(-1)
        base_x = (np.arange(ow) * sw - pads[1])[None, :].repeat(oh, 0).reshape(-1)
        col = np.empty((n, offset_group, c // offset_group, k, oh * ow), work)
        for t in range(k):
            i, j = divmod(t, kw)
            y = base_y + i * dh + off[:, :, t, 0]
            xx = base_x + j * dw + off[:, :, t, 1]
            s = _bilinear_gather(planes, y, xx, h, wd)
            col[:, :, :, t] = s if msk is None else s * msk[:, :, t, None, :]
        col = col.reshape(n, group, (c // group) * k, oh * ow)
        y_out = np.matmul(w.astype(work).reshape(group, m // group, -1), col)
        y_out = y_out.reshape(n, m, oh, ow)
        if b is not None:
            y_out += b.astype(work).reshape(1, m, 1, 1)
        return (y_out.astype(x.dtype),)

    return compute
