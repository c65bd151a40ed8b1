"""Every build of the pooling kernels (baseline, AVX2, AVX-512, as this CPU
runs them) against a float64 reference, on 2-D windows whose rows end inside
a vector and cross vector boundaries: the row path's masked and scalar tails,
its stride-2 even-lane reads, and the flat path of small stride-1 planes."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest

from ortcore_cpu.kernels._isa import runnable_builds

BUILDS = runnable_builds("pool")
IDS = [m.__name__.rsplit(".", 1)[1] for m in BUILDS]


def _reference(
    x: np.ndarray, k: tuple[int, int], s: tuple[int, int], p: tuple[int, int],
    d: tuple[int, int], out: tuple[int, int], take_max: bool, include_pad: bool,
) -> np.ndarray:  # fmt: skip
    """2-D pooling of x (P, H, W) in float64, one window at a time."""
    planes, h, w = x.shape
    y = np.empty((planes, *out))
    for oy, ox in itertools.product(range(out[0]), range(out[1])):
        rows = [oy * s[0] - p[0] + i * d[0] for i in range(k[0])]
        cols = [ox * s[1] - p[1] + j * d[1] for j in range(k[1])]
        inside_r = [r for r in rows if 0 <= r < h]
        inside_c = [c for c in cols if 0 <= c < w]
        vals = x[:, inside_r][:, :, inside_c].reshape(planes, -1).astype(np.float64)
        if take_max:
            # NaN never wins; a window of pads and NaNs gives -inf
            vals = np.where(np.isnan(vals), -np.inf, vals)
            y[:, oy, ox] = vals.max(axis=1) if vals.shape[1] else -np.inf
        else:
            if include_pad:  # positions inside the padded extent
                n_r = sum(1 for r in rows if r < h + p[0])
                n_c = sum(1 for c in cols if c < w + p[1])
            else:
                n_r, n_c = len(inside_r), len(inside_c)
            y[:, oy, ox] = vals.sum(axis=1) / (n_r * n_c) if n_r * n_c else 0.0
    return y


GEOMETRIES = [
    # (H, W, kernel, strides, pads, dilations)
    (27, 27, (3, 3), (2, 2), (0, 0), (1, 1)),  # SqueezeNet's 3x3 stride 2
    (13, 111, (3, 3), (2, 2), (1, 1), (1, 1)),  # wide rows: several vectors and a tail
    (9, 33, (3, 3), (2, 2), (1, 1), (1, 1)),  # 16 outputs + 1: a second vector of one lane
    (6, 31, (2, 2), (2, 2), (0, 0), (1, 1)),
    (28, 28, (3, 3), (1, 1), (1, 1), (1, 1)),  # stride 1 past the flat path's size
    (14, 14, (3, 3), (1, 1), (1, 1), (1, 1)),  # the flat path
    (7, 17, (5, 5), (1, 1), (2, 2), (1, 1)),
    (11, 40, (3, 3), (3, 3), (1, 1), (1, 1)),  # stride 3: the scalar columns
    (12, 35, (3, 3), (2, 2), (1, 2), (2, 2)),  # dilated
    (5, 16, (1, 1), (2, 2), (0, 0), (1, 1)),
    (4, 1, (3, 1), (1, 1), (1, 0), (1, 1)),  # one column
    (8, 20, (3, 4), (2, 1), (2, 3), (1, 1)),  # pads up to the window's reach
]


def _out_size(size: int, k: int, s: int, p: int, d: int) -> int:
    return (size + 2 * p - (k - 1) * d - 1) // s + 1


@pytest.mark.parametrize("ext", BUILDS, ids=IDS)
@pytest.mark.parametrize(
    "geometry",
    GEOMETRIES,
    ids=lambda g: "x".join(map(str, g[:2])) + f"k{g[2]}s{g[3]}p{g[4]}d{g[5]}",
)
@pytest.mark.parametrize("kind", ["max", "avg", "avg_pad"])
def test_pool_build_against_float64(ext: Any, geometry: tuple[Any, ...], kind: str) -> None:
    h, w, k, s, p, d = geometry
    out = (_out_size(h, k[0], s[0], p[0], d[0]), _out_size(w, k[1], s[1], p[1], d[1]))
    rng = np.random.default_rng(h * 1000 + w)
    planes = 5
    x = rng.standard_normal((planes, 1, h, w)).astype(np.float32)
    if kind == "max":
        x[0, 0, 0, : min(w, 3)] = np.nan  # never wins
        x[1, 0] = np.nan  # a plane of NaNs: every window -inf
    y = np.full((planes, 1, *out), 7.0, np.float32)
    for threads in (1, 2):
        if kind == "max":
            ext.max_pool(x, y, 1, *k, 1, *s, 0, *p, 1, *d, threads)
        else:
            ext.avg_pool(x, y, 1, *k, 1, *s, 0, *p, 0, *p, 1, *d, kind == "avg_pad", threads)
        expect = _reference(x[:, 0], k, s, p, d, out, kind == "max", kind == "avg_pad")
        np.testing.assert_allclose(y[:, 0], expect, rtol=1e-5, atol=1e-5)
