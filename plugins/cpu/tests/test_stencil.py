"""The stencils of ``_stencil.h`` on small planes: the flat stride-1 ones (max
and average pooling and the
depthwise convolution whose output is as wide as its input, each plane read
as one flat row with column masks) in every build this CPU runs, against
brute-force numpy oracles: symmetric and asymmetric pads, outputs taller
and shorter than the input, dilations, 3x3 and other kernels, one-column and
one-row planes, and NaN and infinities in the first and last columns and
rows, which the masks must keep out of the neighbouring row's outputs; and
the strided depthwise one on column and row phases (st_depthwise_strided),
the same way (and the strided pooling row path next to it)."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest
from ep_sdk.testing import KernelKit

from ortcore_cpu.kernels._isa import runnable_builds
from ortcore_cpu.provider import CPUExecutionProvider

RNG = np.random.default_rng(27)
POOL_BUILDS = runnable_builds("pool")
CONV_BUILDS = runnable_builds("conv")
kit = KernelKit(CPUExecutionProvider, opset=19, threads=2)

# (H, W), kernel, pads (begin h, w, end h, w), dilations; every output is as
# wide as its input (w pads add up to (kw - 1) * dw), as the flat path needs
GEOMETRIES = [
    ((7, 7), (3, 3), (1, 1, 1, 1), (1, 1)),
    ((14, 14), (3, 3), (1, 1, 1, 1), (1, 1)),
    ((5, 9), (5, 5), (2, 2, 2, 2), (1, 1)),
    ((6, 8), (3, 3), (2, 2, 2, 2), (2, 2)),
    ((8, 5), (3, 3), (0, 1, 1, 1), (1, 1)),  # an output one row shorter
    ((4, 6), (3, 3), (3, 1, 3, 1), (1, 1)),  # taller: rows of padding only
    ((9, 1), (3, 1), (1, 0, 1, 0), (1, 1)),  # one column
    ((1, 17), (1, 3), (0, 1, 0, 1), (1, 1)),  # one row
    ((3, 3), (2, 4), (1, 2, 0, 1), (1, 1)),
    ((10, 12), (3, 3), (1, 0, 1, 2), (1, 1)),  # all width pads at the end
    ((11, 13), (3, 5), (1, 4, 1, 4), (1, 2)),
    # planes past the portable flat path's size, on the AVX-512 masked one
    ((28, 28), (3, 3), (1, 1, 1, 1), (1, 1)),
    ((30, 24), (5, 5), (2, 2, 2, 2), (1, 1)),
]

IDS = [f"{g[0][0]}x{g[0][1]}-k{g[1][0]}x{g[1][1]}-p{''.join(map(str, g[2]))}" for g in GEOMETRIES]


def _out(hw: tuple, k: tuple, pads: tuple, d: tuple, s: tuple = (1, 1)) -> tuple[int, int]:
    return tuple(  # type: ignore[return-value]
        (hw[i] + pads[i] + pads[i + 2] - (k[i] - 1) * d[i] - 1) // s[i] + 1 for i in range(2)
    )


def _planes(n: int, hw: tuple) -> np.ndarray:
    """Random planes with NaN and infinities in the first and last columns and rows."""
    x = RNG.standard_normal((n, *hw)).astype(np.float32)
    x[0, :, 0] = np.inf
    x[1, :, -1] = np.nan
    x[2, 0, :] = -np.inf
    x[3, -1, :] = np.inf
    x[4, hw[0] // 2, 0] = np.nan
    return x


def _taps(hw: tuple, k: tuple, pb: tuple, pe: tuple, d: tuple, out: tuple, s: tuple = (1, 1)):
    """For each output: its taps inside the input (a, b, r, c) and its count of pads."""
    h, w = hw
    for i, j in itertools.product(range(out[0]), range(out[1])):
        inside, pads = [], 0
        for a, b in itertools.product(range(k[0]), range(k[1])):
            r, c = i * s[0] - pb[0] + a * d[0], j * s[1] - pb[1] + b * d[1]
            if 0 <= r < h and 0 <= c < w:
                inside.append((a, b, r, c))
            elif r < h + pe[0] and c < w + pe[1]:
                pads += 1
        yield i, j, inside, pads


def _check_pooling(ext: Any, hw: tuple, k: tuple, s: tuple, pads: tuple, d: tuple,
                   threads: int) -> None:  # fmt: skip
    """Max and average pooling (both count_include_pad) of ``ext`` against
    the oracle, on planes with NaN and infinities on their borders."""
    pb, pe = pads[:2], pads[2:]
    out = _out(hw, k, pads, d, s)
    x = _planes(6, hw)
    x4 = x.reshape(6, 1, *hw)
    got = np.empty((6, 1, *out), np.float32)
    ext.max_pool(x4, got, 1, *k, 1, *s, 0, *pb, 1, *d, threads)
    want = np.empty((6, *out), np.float32)
    for i, j, inside, _ in _taps(hw, k, pb, pe, d, out, s):
        for p in range(6):
            finite = [x[p, r, c] for *_, r, c in inside if x[p, r, c] == x[p, r, c]]
            want[p, i, j] = max(finite) if finite else -np.inf
    np.testing.assert_array_equal(got[:, 0], want)
    for include_pad in (False, True):
        ext.avg_pool(x4, got, 1, *k, 1, *s, 0, *pb, 0, *pe, 1, *d, include_pad, threads)
        for i, j, inside, n_pad in _taps(hw, k, pb, pe, d, out, s):
            n = len(inside) + (n_pad if include_pad else 0)
            for p in range(6):
                values = np.array([x[p, r, c] for *_, r, c in inside], np.float64)
                want[p, i, j] = values.sum() / n if n else 0.0
        np.testing.assert_allclose(got[:, 0], want, rtol=1e-5, atol=1e-6, equal_nan=True)


def _check_depthwise(ext: Any, hw: tuple, k: tuple, s: tuple, pads: tuple, d: tuple,
                     threads: int) -> None:  # fmt: skip
    """The depthwise convolution of ``ext``, added to a bias, against the
    oracle, on planes with NaN and infinities on their borders."""
    pb, pe = pads[:2], pads[2:]
    out = _out(hw, k, pads, d, s)
    x = _planes(6, hw)
    w = RNG.standard_normal((6, *k)).astype(np.float32)
    bias = RNG.standard_normal(6).astype(np.float32)
    got = np.repeat(bias[:, None, None], out[0] * out[1], axis=1).reshape(6, *out)
    ext.depthwise2d(x, w, got, *s, *pb, *d, threads)
    want = np.empty((6, *out), np.float64)
    with np.errstate(invalid="ignore"):
        for i, j, inside, _ in _taps(hw, k, pb, pe, d, out, s):
            for p in range(6):
                terms = [np.float64(w[p, a, b]) * x[p, r, c] for a, b, r, c in inside]
                want[p, i, j] = bias[p] + sum(terms)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, equal_nan=True)


POOL_IDS = [m.__name__.rsplit(".", 1)[1] for m in POOL_BUILDS]
CONV_IDS = [m.__name__.rsplit(".", 1)[1] for m in CONV_BUILDS]


@pytest.mark.parametrize(("hw", "k", "pads", "d"), GEOMETRIES, ids=IDS)
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("ext", POOL_BUILDS, ids=POOL_IDS)
def test_flat_pooling_against_brute_force(hw: tuple, k: tuple, pads: tuple, d: tuple,
                                          threads: int, ext: Any) -> None:  # fmt: skip
    assert _out(hw, k, pads, d)[1] == hw[1]  # as wide as the input: the flat path
    _check_pooling(ext, hw, k, (1, 1), pads, d, threads)


@pytest.mark.parametrize(("hw", "k", "pads", "d"), GEOMETRIES, ids=IDS)
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("ext", CONV_BUILDS, ids=CONV_IDS)
def test_flat_depthwise_against_brute_force(hw: tuple, k: tuple, pads: tuple, d: tuple,
                                            threads: int, ext: Any) -> None:  # fmt: skip
    _check_depthwise(ext, hw, k, (1, 1), pads, d, threads)


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
def test_flat_pooling_nodes_match_onnx(op: str) -> None:
    x = RNG.standard_normal((2, 40, 14, 14)).astype(np.float32)
    attrs = {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}
    kit.check_node(op, [x], attrs)
    kit.check_node(op, [x[:, ::2]], {"kernel_shape": [3, 3], "pads": [0, 1, 1, 1]})


# (H, W), kernel, strides, pads (begin h, w, end h, w), dilations: strided
# windows on planes small enough for the phase stencil (st_strided)
STRIDED = [
    ((14, 14), (3, 3), (2, 2), (0, 0, 1, 1), (1, 1)),
    ((13, 13), (3, 3), (2, 2), (1, 1, 1, 1), (1, 1)),
    ((27, 27), (3, 3), (2, 2), (0, 0, 0, 0), (1, 1)),
    ((12, 15), (3, 3), (1, 2), (0, 1, 0, 1), (1, 1)),
    ((15, 12), (3, 3), (2, 1), (1, 0, 1, 0), (1, 1)),
    ((17, 19), (5, 5), (2, 3), (2, 2, 2, 2), (1, 1)),
    ((14, 14), (3, 2), (3, 2), (1, 0, 2, 1), (2, 3)),
    ((9, 10), (3, 3), (2, 2), (0, 0, 0, 0), (2, 2)),
    ((4, 5), (3, 3), (2, 2), (2, 2, 2, 2), (1, 1)),  # windows of padding only
    ((1, 21), (1, 3), (1, 2), (0, 1, 0, 1), (1, 1)),
    ((7, 7), (7, 7), (7, 7), (0, 0, 0, 0), (1, 1)),
]
SIDS = [f"{g[0][0]}x{g[0][1]}-k{g[1][0]}x{g[1][1]}-s{g[2][0]}{g[2][1]}-p{''.join(map(str, g[3]))}"
        for g in STRIDED]  # fmt: skip


@pytest.mark.parametrize(("hw", "k", "s", "pads", "d"), STRIDED, ids=SIDS)
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("ext", POOL_BUILDS, ids=POOL_IDS)
def test_strided_pooling_against_brute_force(hw: tuple, k: tuple, s: tuple, pads: tuple,
                                             d: tuple, threads: int, ext: Any) -> None:  # fmt: skip
    _check_pooling(ext, hw, k, s, pads, d, threads)


@pytest.mark.parametrize(
    ("hw", "k", "s", "pads"),
    [
        ((56, 56), (3, 3), (2, 2), (1, 1, 1, 1)),  # ShuffleNet's and MobileNet's
        ((113, 111), (3, 3), (2, 2), (0, 1, 1, 1)),
        ((226, 226), (3, 3), (2, 2), (1, 1, 1, 1)),  # near the phase stencil's limit
        ((300, 241), (3, 3), (2, 2), (1, 1, 1, 1)),  # past it: column phases
        ((120, 90), (5, 5), (3, 2), (2, 1, 2, 2)),
    ],
)
@pytest.mark.parametrize("ext", CONV_BUILDS, ids=CONV_IDS)
def test_strided_depthwise_on_large_planes(hw: tuple, k: tuple, s: tuple, pads: tuple,
                                           ext: Any) -> None:  # fmt: skip
    """Strided depthwise convolutions on planes up to and past the phase
    stencil's buffer limit, added to a bias, against numpy (float64)."""
    c = 3
    x = RNG.standard_normal((c, *hw)).astype(np.float32)
    w = RNG.standard_normal((c, *k)).astype(np.float32)
    bias = RNG.standard_normal(c).astype(np.float32)
    xp = np.pad(x.astype(np.float64), ((0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    oh = (xp.shape[1] - k[0]) // s[0] + 1
    ow = (xp.shape[2] - k[1]) // s[1] + 1
    want = np.repeat(bias.astype(np.float64)[:, None, None], oh * ow, axis=1).reshape(c, oh, ow)
    for a in range(k[0]):
        for b in range(k[1]):
            taps = xp[:, a : a + (oh - 1) * s[0] + 1 : s[0], b : b + (ow - 1) * s[1] + 1 : s[1]]
            want += w[:, a, b, None, None].astype(np.float64) * taps
    got = np.repeat(bias[:, None, None], oh * ow, axis=1).reshape(c, oh, ow)
    ext.depthwise2d(x, w, got, *s, pads[0], pads[1], 1, 1, 2)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(("hw", "k", "s", "pads", "d"), STRIDED, ids=SIDS)
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("ext", CONV_BUILDS, ids=CONV_IDS)
def test_strided_depthwise_against_brute_force(hw: tuple, k: tuple, s: tuple, pads: tuple,
                                               d: tuple, threads: int, ext: Any) -> None:  # fmt: skip
    _check_depthwise(ext, hw, k, s, pads, d, threads)
