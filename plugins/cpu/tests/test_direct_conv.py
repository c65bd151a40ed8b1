"""The direct convolution (``_direct_conv.h``, ``direct_conv2d`` in every
build of ``conv`` this CPU runs, in row and flat mode) against a numpy
convolution: strides, pads, dilations, width tails, output channels that fill
no whole block, bias, residual and clamp, NaN; its argument checks; and the
Conv kernel's choice of it in each build (with onnx.reference as the oracle)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from ep_sdk.testing import KernelKit
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator
from spies import record_calls

from ortcore_cpu.kernels import conv
from ortcore_cpu.kernels._common import KEPT_PER_NODE
from ortcore_cpu.kernels._isa import runnable_builds
from ortcore_cpu.kernels._window import window
from ortcore_cpu.provider import CPUExecutionProvider

BUILDS = runnable_builds("conv")
IDS = [m.__name__.rsplit(".", 1)[1] for m in BUILDS]
RNG = np.random.default_rng(23)
kit = KernelKit(CPUExecutionProvider, opset=17, threads=2)
INF = float("inf")


def _numpy_conv(
    x: np.ndarray, w: np.ndarray, strides: tuple[int, int], pads: tuple[int, int, int, int],
    dilations: tuple[int, int],
) -> np.ndarray:  # fmt: skip
    """Plain float64 convolution of one image x (C, H, W) with w (M, C, KH, KW)."""
    (sh, sw), (dh, dw) = strides, dilations
    xp = np.pad(x.astype(np.float64), ((0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    m, _, kh, kw = w.shape
    oh = (xp.shape[1] - (kh - 1) * dh - 1) // sh + 1
    ow = (xp.shape[2] - (kw - 1) * dw - 1) // sw + 1
    y = np.zeros((m, oh, ow))
    for ky in range(kh):
        for kx in range(kw):
            patch = xp[:, ky * dh : ky * dh + (oh - 1) * sh + 1 : sh,
                       kx * dw : kx * dw + (ow - 1) * sw + 1 : sw]  # fmt: skip
            y += np.einsum("mc,chw->mhw", w[:, :, ky, kx].astype(np.float64), patch)
    return y


CASES = [
    # (C, H, W), (M, KH, KW), strides, pads (top, left, bottom, right), dilations
    ((3, 9, 13), (5, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),
    ((3, 16, 40), (8, 3, 3), (2, 2), (0, 0, 0, 0), (1, 1)),
    ((2, 11, 30), (7, 7, 7), (2, 2), (3, 3, 3, 3), (1, 1)),
    ((4, 12, 27), (6, 5, 3), (1, 3), (2, 0, 1, 2), (1, 1)),
    ((1, 10, 25), (4, 3, 3), (1, 1), (2, 2, 2, 2), (2, 3)),
    ((16, 7, 7), (9, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),
    ((3, 1, 50), (4, 1, 5), (1, 2), (0, 2, 0, 1), (1, 1)),  # a 1-D convolution as 2-D
    ((2, 5, 8), (3, 2, 2), (1, 1), (0, 0, 0, 0), (1, 1)),  # exactly one vector wide
    ((2, 6, 4), (4, 3, 3), (3, 3), (4, 4, 4, 4), (1, 1)),  # windows wholly in padding
    ((40, 7, 7), (20, 1, 1), (1, 1), (0, 0, 0, 0), (1, 1)),  # 1x1: 49 flat positions
    ((8, 3, 2), (9, 3, 3), (1, 1), (2, 1, 2, 1), (1, 1)),  # more pads than input
    # flat mode's planes past its cache size: items go run by run
    ((8, 128, 130), (20, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),
    # strides in flat mode: row and column phases
    ((5, 14, 14), (9, 3, 3), (2, 2), (0, 0, 1, 1), (1, 1)),
    ((3, 23, 21), (6, 11, 11), (4, 4), (2, 1, 0, 3), (1, 1)),
    ((4, 13, 17), (5, 3, 5), (3, 2), (1, 2, 1, 2), (2, 1)),
    ((20, 30, 30), (8, 1, 1), (2, 2), (0, 0, 0, 0), (1, 1)),  # strided 1x1
    ((6, 9, 9), (5, 3, 3), (2, 1), (1, 1, 1, 1), (1, 1)),
    # rows ending in one vector after steps of three (27, 31 and 55 columns):
    # with AVX2 that vector sums even and odd input channels apart (odd counts
    # leave one channel over; one channel alone has no pair)
    ((5, 6, 27), (6, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),
    ((3, 8, 31), (4, 3, 3), (1, 1), (2, 2, 2, 2), (2, 2)),
    ((8, 3, 55), (5, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),
    ((1, 4, 27), (3, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),
    # the same with row strides, a 5x5 window and a 1x1 one
    ((4, 11, 55), (5, 3, 3), (2, 2), (1, 1, 1, 1), (1, 1)),
    ((3, 7, 29), (4, 5, 5), (1, 1), (2, 2, 2, 2), (1, 1)),
    ((6, 5, 26), (7, 1, 1), (1, 1), (0, 0, 0, 0), (1, 1)),
]


def _conv_case(
    ext: Any, case: tuple[Any, ...], flat: bool = False, vector_threads: int = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A case's input, weights and numpy result, and a scratch of stale
    (NaN) floats for ``ext``'s direct kernels (row mode or ``flat``; with
    ``vector_threads``, the channel-vector kernel's on that many threads)."""
    (c, h, wd), (m, kh, kw), strides, pads, dilations = case
    x = RNG.standard_normal((c, h, wd)).astype(np.float32)
    w = RNG.standard_normal((m, c, kh, kw)).astype(np.float32)
    want = _numpy_conv(x, w, strides, pads, dilations)
    (sh, sw), (dh, dw) = strides, dilations
    if vector_threads:
        size = ext.channel_vector_conv2d_scratch(
            c, *want.shape[1:], m, kh, kw, sh, sw, dh, dw, vector_threads
        )
    else:
        size = ext.direct_conv2d_scratch(c, *want.shape[1:], kh, kw, sh, sw, dh, dw, flat)
    return x, w, want, np.full(size + 3, np.nan, np.float32)  # stale contents must not leak in


@pytest.mark.parametrize("flat", [False, True], ids=["rows", "flat"])
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("case", CASES, ids=[str(i) for i in range(len(CASES))])
@pytest.mark.parametrize("ext", BUILDS, ids=IDS)
def test_direct_conv2d_matches_numpy(
    ext: Any, case: tuple[Any, ...], threads: int, flat: bool
) -> None:
    (_, (m, _, _), (sh, sw), pads, (dh, dw)) = case
    x, w, want, scratch = _conv_case(ext, case, flat)
    oh, ow = want.shape[1:]
    args = (sh, sw, pads[0], pads[1], dh, dw)
    y = np.full((m, oh, ow), np.nan, np.float32)
    wp = _packed(ext, w)
    ext.direct_conv2d(x, wp, y, np.empty(0, np.float32), None, scratch,
                      *args, -INF, INF, threads, flat)  # fmt: skip
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-4)

    # bias, residual and a clamp, applied as the output is written
    b = RNG.standard_normal(m).astype(np.float32)
    z = RNG.standard_normal((m, oh, ow)).astype(np.float32)
    z.flat[0] = np.nan
    ext.direct_conv2d(x, wp, y, b, z, scratch, *args, -0.5, 0.75, threads, flat)
    full = want + b[:, None, None] + z
    np.testing.assert_allclose(y, np.clip(full, -0.5, 0.75), rtol=1e-5, atol=1e-4)
    assert np.isnan(y.flat[0])  # NaN stays NaN through the clamp


@pytest.mark.parametrize(
    "spatial",
    [
        (20, 37),
        # hundreds of items a share: the owners claim batches of them
        # (_steal.h's WS_CLAIM_PART), which the thieves must leave alone
        (90, 97),
    ],
)
@pytest.mark.parametrize("kernel", ["rows", "flat", "vector"])
@pytest.mark.parametrize("ext", BUILDS, ids=IDS)
def test_direct_kernels_on_more_threads_than_cores(
    ext: Any, kernel: str, spatial: tuple[int, int]
) -> None:
    """Eight threads on this machine's cores: a thread the OS holds back
    lags the others, so reading a plane before its copy was made (before
    the direct kernel's barrier, or before the thread that copies a
    channel-vector share's rows is done), or an item handed out twice or
    never (the shares that threads take from each other, _steal.h), shows
    as stale NaN or a wrong sum; repeated, with the scratch made stale
    each time."""
    case = ((24, *spatial), (40, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1))
    (_, (m, kh, kw), (sh, sw), pads, (dh, dw)) = case
    vector = kernel == "vector"
    x, w, want, scratch = _conv_case(ext, case, kernel == "flat", 8 if vector else 0)
    wp = _packed(ext, w, vector)
    y = np.empty((m, *want.shape[1:]), np.float32)
    nothing = np.empty(0, np.float32)
    for _ in range(30 if spatial[0] < 50 else 6):
        scratch.fill(np.nan)
        y.fill(np.nan)
        if vector:
            ext.channel_vector_conv2d(x, wp, y, nothing, None, scratch, kh, kw, sh, sw,
                                      pads[0], pads[1], dh, dw, -INF, INF, 8)  # fmt: skip
        else:
            ext.direct_conv2d(x, wp, y, nothing, None, scratch, sh, sw, pads[0], pads[1],
                              dh, dw, -INF, INF, 8, kernel == "flat")  # fmt: skip
        np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-4)


VECTOR_CASES = [
    # output channels filling no block of 16, one block, and more than two
    ((16, 55, 55), (64, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),  # 3025 positions: 16 runs
    ((7, 5, 5), (33, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),  # 25: tiles of 5
    ((4, 3, 3), (16, 3, 3), (1, 1), (0, 0, 0, 0), (1, 1)),  # one position
    ((9, 4, 2), (20, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),  # 8: tiles of 4 across rows
    # many runs of positions, each of several blocks
    ((80, 40, 41), (24, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),
    ((96, 28, 28), (40, 3, 3), (2, 2), (1, 1, 1, 1), (1, 1)),
    # AVX-512's tiles of up to 12 positions and blocks of 32 channels: 49
    # positions (tiles of 9 and 10 or of 6 and 7), 15 (tiles of 8 and 7 or
    # of 5), 11 (one tile, or 6 and 5); a block and a quarter, two and a half
    ((32, 7, 7), (72, 1, 1), (1, 1), (0, 0, 0, 0), (1, 1)),
    ((5, 3, 5), (48, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),
    ((6, 1, 11), (40, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),
]


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize(
    "case", CASES + VECTOR_CASES, ids=[str(i) for i in range(len(CASES) + len(VECTOR_CASES))]
)
@pytest.mark.parametrize("ext", BUILDS, ids=IDS)
def test_channel_vector_conv2d_matches_numpy(ext: Any, case: tuple[Any, ...], threads: int) -> None:
    ((c, _, _), (m, kh, kw), (sh, sw), pads, (dh, dw)) = case
    x, w, want, scratch = _conv_case(ext, case, vector_threads=threads)
    oh, ow = want.shape[1:]
    args = (kh, kw, sh, sw, pads[0], pads[1], dh, dw)
    y = np.full((m, oh, ow), np.nan, np.float32)
    wp = _packed(ext, w, vector=True)
    assert wp.shape == (-(-m // ext.CHANNEL_VECTOR_BLOCK), c, kh * kw, ext.CHANNEL_VECTOR_BLOCK)
    ext.channel_vector_conv2d(x, wp, y, np.empty(0, np.float32), None, scratch, *args,
                              -INF, INF, threads)  # fmt: skip
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-4)

    # bias, residual and a clamp, applied as the output is written; the
    # output a slice of channels of a larger tensor (a FusedConvConcat's)
    b = RNG.standard_normal(m).astype(np.float32)
    z = RNG.standard_normal((m, oh, ow)).astype(np.float32)
    z.flat[0] = np.nan
    joined = np.full((m + 5, oh, ow), 7.0, np.float32)
    ext.channel_vector_conv2d(x, wp, joined[2 : m + 2], b, z, scratch, *args, -0.5, 0.75,
                              threads)  # fmt: skip
    full = want + b[:, None, None] + z
    np.testing.assert_allclose(joined[2 : m + 2], np.clip(full, -0.5, 0.75), rtol=1e-5, atol=1e-4)
    assert np.isnan(joined[2, 0, 0])  # NaN stays NaN through the clamp
    assert (joined[:2] == 7).all() and (joined[m + 2 :] == 7).all()  # the rest untouched


@pytest.mark.parametrize("ext", BUILDS, ids=IDS)
def test_channel_vector_items_are_blocks_times_runs(ext: Any) -> None:
    block = ext.CHANNEL_VECTOR_BLOCK
    assert ext.channel_vector_items(block, 1) == 1
    assert ext.channel_vector_items(block + 1, 49) == 2
    assert ext.channel_vector_items(2 * block, 3025) == 32  # 16 runs of 55x55 in every build
    assert ext.channel_vector_items(0, 49) == 0
    with pytest.raises(ValueError, match="negative size"):
        ext.channel_vector_items(-1, 49)


@pytest.mark.parametrize("ext", BUILDS, ids=IDS)
def test_channel_vector_scratch_holds_each_threads_rows(ext: Any) -> None:
    # 16 -> 64 channels on 55x55: 16 runs of positions; on 2 threads each
    # copies the padded rows its 8 runs read (rows 0-29 and 27-56 of 57)
    case = VECTOR_CASES[0]
    one = ext.channel_vector_conv2d_scratch(16, 55, 55, 64, 3, 3, 1, 1, 1, 1, 1)
    two = ext.channel_vector_conv2d_scratch(16, 55, 55, 64, 3, 3, 1, 1, 1, 1, 2)
    # 57 padded rows of 55 columns rounded up to whole vectors, and 2 of the window
    cols = -(-55 // ext.DIRECT_VECTOR) * ext.DIRECT_VECTOR + 2
    assert one == 16 * 57 * cols
    assert two == 2 * 16 * 30 * cols
    assert ext.channel_vector_conv2d_scratch(16, 55, 55, 0, 3, 3, 1, 1, 1, 1, 2) == 0
    with pytest.raises(ValueError, match="negative size"):
        ext.channel_vector_conv2d_scratch(-1, 55, 55, 64, 3, 3, 1, 1, 1, 1, 2)
    x, w, want, scratch = _conv_case(ext, case, vector_threads=2)
    wp = _packed(ext, w, vector=True)
    y = np.full(want.shape, np.nan, np.float32)
    geometry = (3, 3, 1, 1, 1, 1, 1, 1)
    with pytest.raises(ValueError, match="scratch of"):  # enough for one thread only
        ext.channel_vector_conv2d(x, wp, y, np.empty(0, np.float32), None, scratch[:one],
                                  *geometry, -INF, INF, 2)  # fmt: skip
    assert np.isnan(y).all()  # refused before anything was written
    ext.channel_vector_conv2d(x, wp, y, np.empty(0, np.float32), None, scratch, *geometry,
                              -INF, INF, 2)  # fmt: skip
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("ext", BUILDS, ids=IDS)
def test_channel_vector_conv2d_refuses_what_it_cannot_do_safely(ext: Any) -> None:
    x = np.zeros((3, 8, 8), np.float32)
    wp = _packed(ext, np.zeros((5, 3, 3, 3), np.float32), vector=True)
    y = np.zeros((5, 8, 8), np.float32)
    none = np.empty(0, np.float32)
    ok = np.zeros(ext.channel_vector_conv2d_scratch(3, 8, 8, 5, 3, 3, 1, 1, 1, 1, 1), np.float32)
    geometry = (3, 3, 1, 1, 1, 1, 1, 1)
    ext.channel_vector_conv2d(x, wp, y, none, None, ok, *geometry, -INF, INF, 1)
    with pytest.raises(ValueError, match="scratch of"):
        ext.channel_vector_conv2d(x, wp, y, none, None, ok[:-1], *geometry, -INF, INF, 1)
    more = np.zeros((5 + ext.CHANNEL_VECTOR_BLOCK, 8, 8), np.float32)
    with pytest.raises(ValueError, match="packed weights"):
        ext.channel_vector_conv2d(x, wp, more, none, None, ok, *geometry, -INF, INF, 1)
    with pytest.raises(ValueError, match="packed weights"):
        ext.channel_vector_conv2d(x[:2], wp, y, none, None, ok, *geometry, -INF, INF, 1)
    with pytest.raises(ValueError, match="packed weights"):  # another window
        ext.channel_vector_conv2d(x, wp, y, none, None, ok, 1, 5, 1, 1, 0, 2, 1, 1, -INF, INF, 1)
    with pytest.raises(ValueError, match="bias of 2"):
        ext.channel_vector_conv2d(x, wp, y, np.zeros(2, np.float32), None, ok, *geometry,
                                  -INF, INF, 1)  # fmt: skip
    with pytest.raises(ValueError, match="residual"):
        ext.channel_vector_conv2d(x, wp, y, none, y[:, :4].copy(), ok, *geometry, -INF, INF, 1)
    with pytest.raises(ValueError, match="pads must be >= 0"):
        ext.channel_vector_conv2d(x, wp, y, none, None, ok, 3, 3, 1, 1, -1, 1, 1, 1, -INF, INF, 1)


def _packed(ext: Any, w: np.ndarray, vector: bool = False) -> np.ndarray:
    """``w`` packed for ``ext``'s block of output channels (``vector``: for
    its channel-vector kernel)."""
    real = conv.common.ext
    conv.common.ext = ext
    try:
        return conv.channel_vector_filter(w) if vector else conv.direct_filter(w)
    finally:
        conv.common.ext = real


@pytest.mark.parametrize("ext", BUILDS, ids=IDS)
def test_direct_conv2d_refuses_what_it_cannot_do_safely(ext: Any) -> None:
    x = np.zeros((3, 8, 8), np.float32)
    wp = _packed(ext, np.zeros((5, 3, 3, 3), np.float32))
    y = np.zeros((5, 8, 8), np.float32)
    none = np.empty(0, np.float32)
    need = ext.direct_conv2d_scratch(3, 8, 8, 3, 3, 1, 1, 1, 1)
    ok = np.zeros(need, np.float32)
    ext.direct_conv2d(x, wp, y, none, None, ok, 1, 1, 1, 1, 1, 1, -INF, INF, 1)
    with pytest.raises(ValueError, match="scratch of"):
        ext.direct_conv2d(x, wp, y, none, None, ok[:-1], 1, 1, 1, 1, 1, 1, -INF, INF, 1)
    more = np.zeros((5 + ext.DIRECT_BLOCK, 8, 8), np.float32)  # one block more than packed
    with pytest.raises(ValueError, match="packed weights"):
        ext.direct_conv2d(x, wp, more, none, None, ok, 1, 1, 1, 1, 1, 1, -INF, INF, 1)
    with pytest.raises(ValueError, match="packed weights"):
        ext.direct_conv2d(x[:2], wp, y, none, None, ok, 1, 1, 1, 1, 1, 1, -INF, INF, 1)
    with pytest.raises(ValueError, match="bias of 2"):
        ext.direct_conv2d(x, wp, y, np.zeros(2, np.float32), None, ok,
                          1, 1, 1, 1, 1, 1, -INF, INF, 1)  # fmt: skip
    with pytest.raises(ValueError, match="residual"):
        ext.direct_conv2d(x, wp, y, none, y[:, :4].copy(), ok, 1, 1, 1, 1, 1, 1, -INF, INF, 1)
    with pytest.raises(ValueError, match="pads must be >= 0"):
        ext.direct_conv2d(x, wp, y, none, None, ok, 1, 1, -1, 1, 1, 1, -INF, INF, 1)
    with pytest.raises(ValueError, match="strides must be >= 1"):
        ext.direct_conv2d_scratch(3, 8, 8, 3, 3, 0, 1, 1, 1)
    flat = np.zeros(ext.direct_conv2d_scratch(3, 8, 8, 3, 3, 1, 1, 1, 1, True), np.float32)
    ext.direct_conv2d(x, wp, y, none, None, flat, 1, 1, 1, 1, 1, 1, -INF, INF, 1, True)
    with pytest.raises(ValueError, match="scratch of"):
        ext.direct_conv2d(x, wp, y, none, None, flat[:-1], 1, 1, 1, 1, 1, 1, -INF, INF, 1, True)
    strided = np.zeros(ext.direct_conv2d_scratch(3, 4, 4, 3, 3, 2, 2, 1, 1, True), np.float32)
    with pytest.raises(ValueError, match="scratch of"):
        ext.direct_conv2d(x, wp, np.zeros((5, 4, 4), np.float32), none, None, strided[:-1],
                          2, 2, 1, 1, 1, 1, -INF, INF, 1, True)  # fmt: skip


def _reference(x: np.ndarray, w: np.ndarray, b: np.ndarray, **attrs: Any) -> np.ndarray:
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], **attrs)
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info(n, 1, None) for n in "xwb"],
        [helper.make_tensor_value_info("y", 1, None)],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return ReferenceEvaluator(model).run(None, {"x": x, "w": w, "b": b})[0]


@pytest.mark.parametrize(
    ("xs", "ws", "attrs", "direct"),
    [
        # direct: (in a build with narrow vectors, in one with wide vectors)
        ((2, 3, 30, 30), (16, 3, 7, 7), {"strides": [2, 2], "pads": [3, 3, 3, 3]}, (True, True)),
        ((1, 5, 20, 20), (10, 5, 5, 5), {"pads": [2, 2, 2, 2]}, (True, True)),
        ((1, 4, 80), (6, 4, 31), {"strides": [2], "dilations": [2], "pads": [1, 3]}, (True, True)),
        ((1, 3, 19, 19), (8, 3, 5, 5), {"auto_pad": "SAME_UPPER", "strides": [2, 2]}, (True, True)),
        ((1, 3, 9, 9), (8, 3, 3, 3), {"auto_pad": "SAME_UPPER"}, (False, True)),  # few taps
        # an image's channels, strided: 3x3 is enough
        ((1, 3, 17, 17), (8, 3, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}, (True, True)),
        ((1, 5, 33, 33), (8, 5, 3, 3), {"strides": [2, 2]}, (False, True)),  # 5 channels
        ((1, 3, 17, 17), (8, 3, 2, 2), {"strides": [2, 2]}, (False, True)),  # 4 taps
        ((1, 32, 16, 16), (8, 32, 5, 5), {}, (False, True)),  # too deep (800) for narrow
        ((1, 32, 12, 12), (8, 32, 5, 5), {}, (True, True)),  # unless the output is small
        # 5x5 and wider windows over a few dozen channels: flat mode in narrow builds
        ((1, 11, 16, 16), (8, 11, 5, 5), {}, (True, True)),  # depth 275
        ((1, 16, 27, 27), (12, 16, 5, 5), {"pads": [2, 2, 2, 2]}, (True, True)),  # 400
        ((1, 16, 20, 20), (8, 16, 7, 7), {"pads": [3, 3, 3, 3]}, (True, True)),  # 784
        ((1, 16, 31, 31), (8, 16, 5, 5), {"strides": [2, 2]}, (False, True)),  # strided
        ((1, 32, 12, 12), (32, 32, 3, 3), {"pads": [1, 1, 1, 1]}, (False, True)),  # Winograd
        ((1, 40, 10, 10), (8, 40, 3, 3), {"strides": [2, 2]}, (True, True)),  # deep, to 4x4
        ((1, 40, 10, 100), (8, 40, 3, 3), {"strides": [2, 2]}, (False, True)),  # deep, wide
        ((2, 24, 7, 7), (40, 24, 1, 1), {}, (False, True)),  # 1x1
        ((1, 24, 8, 8), (40, 24, 1, 1), {"strides": [2, 2]}, (False, True)),  # strided 1x1
        ((1, 24, 9, 11), (40, 24, 1, 1), {"strides": [3, 2]}, (False, True)),
        ((1, 5, 30), (9, 5, 1), {"strides": [4]}, (False, True)),  # 1-D strided 1x1
        ((1, 6, 8, 8), (7, 6, 1, 1), {"strides": [2, 2], "pads": [1, 0, 0, 1]}, (False, True)),
        ((1, 4, 10, 10), (8, 2, 3, 3), {"group": 2}, (False, True)),  # 4 filters a group
        ((1, 8, 10, 10), (16, 4, 3, 3), {"group": 2, "pads": [1, 1, 1, 1]}, (False, True)),
        ((1, 12, 7, 7), (24, 4, 1, 1), {"group": 3}, (False, True)),  # grouped 1x1
        ((1, 12, 8, 8), (24, 4, 1, 1), {"group": 3, "strides": [2, 2]}, (False, True)),
        ((1, 6, 9, 11), (48, 2, 3, 3), {"group": 3, "strides": [2, 2]}, (False, True)),
        ((1, 6, 9, 11), (30, 2, 3, 3), {"group": 3}, (False, True)),  # 10 a group: 16 computed
        ((1, 4, 6, 6, 6), (8, 4, 3, 3, 3), {}, (False, False)),  # 3-D
        # 16 channels a group or more: direct in the narrow build too
        ((1, 32, 9, 9), (24, 16, 3, 3), {"group": 2, "pads": [1, 1, 1, 1]}, (True, True)),
        ((1, 64, 7, 7), (64, 16, 1, 1), {"group": 4}, (True, True)),
        ((1, 8, 56, 56), (16, 8, 3, 3), {"pads": [1, 1, 1, 1]}, (True, True)),  # few channels
        ((1, 32, 56, 56), (16, 32, 3, 3), {"pads": [1, 1, 1, 1]}, (False, True)),
        ((1, 48, 11, 11), (30, 16, 3, 3), {"group": 3, "strides": [2, 2]}, (True, True)),
        # to at most 64 positions: direct in flat mode at any depth, unless Winograd
        ((1, 40, 6, 6), (12, 40, 3, 3), {"pads": [1, 1, 1, 1]}, (True, True)),  # 9 tiles
        ((1, 72, 14, 14), (20, 72, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}, (True, True)),
        ((1, 40, 13, 13), (12, 40, 3, 3), {"strides": [2, 2]}, (True, True)),  # 6x6
        ((1, 72, 28, 28), (20, 72, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}, (False, True)),
    ],
)
@pytest.mark.parametrize("ext", BUILDS, ids=IDS)
def test_conv_kernel_takes_the_direct_path_where_it_should(
    monkeypatch: pytest.MonkeyPatch, ext: Any, xs: tuple[int, ...], ws: tuple[int, ...],
    attrs: dict[str, Any], direct: tuple[bool, bool],
) -> None:  # fmt: skip
    calls: list[int] = []
    real = conv._conv_direct

    def spy(*args: Any, **kwargs: Any) -> np.ndarray:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(conv.common, "ext", ext)
    monkeypatch.setattr(conv.direct, "_conv_direct", spy)
    monkeypatch.setattr(conv.selection, "CHANNEL_VECTOR", False)  # its choice: the test below
    x = RNG.standard_normal(xs).astype(np.float32)
    w = RNG.standard_normal(ws).astype(np.float32)
    b = RNG.standard_normal(ws[0]).astype(np.float32)
    compute = kit.build_node("Conv", [x, w, b], attrs, opset=17)
    (y,) = compute(x, w, b)
    np.testing.assert_allclose(y, _reference(x, w, b, **attrs), rtol=1e-4, atol=1e-4)
    wide = ext.DIRECT_VECTOR >= conv.DIRECT_WIDE_VECTOR
    assert bool(calls) == direct[wide]


@pytest.mark.parametrize(
    ("xs", "ws", "attrs", "vector"),  # (AVX2 build, AVX-512 build)
    [
        # windows of 5x5 and more, strided 3x3, few channels: the channel-vector kernel
        ((2, 3, 30, 30), (16, 3, 7, 7), {"strides": [2, 2], "pads": [3, 3, 3, 3]}, (True, False)),
        ((1, 32, 16, 16), (20, 32, 5, 5), {}, (True, False)),
        ((1, 16, 31, 31), (8, 16, 5, 5), {"strides": [2, 2], "dilations": [2, 1]}, (True, False)),
        ((1, 40, 10, 100), (8, 40, 3, 3), {"strides": [2, 2]}, (True, False)),
        ((1, 16, 55, 55), (64, 16, 3, 3), {"pads": [1, 1, 1, 1]}, (True, True)),
        # Winograd's else
        ((1, 32, 12, 12), (40, 32, 3, 3), {"auto_pad": "SAME_UPPER"}, (True, True)),
        # 32 out, 196 positions
        ((1, 96, 14, 14), (32, 96, 3, 3), {"pads": [1, 1, 1, 1]}, (True, True)),
        # 64 in, 784 positions
        ((1, 64, 28, 28), (96, 64, 3, 3), {"pads": [1, 1, 1, 1]}, (True, True)),
        # 27 deep, whole blocks
        ((1, 3, 33, 33), (32, 3, 3, 3), {"strides": [2, 2]}, (True, False)),
        # not: Winograd's (64+ channels in and out, or on more than 28x28), the RGB image's 3x3
        # (27 deep) unless its output fills blocks of 16, strided to small planes (the direct kernel's flat mode), 1x1,
        # groups, 1-D and 3-D
        # (AVX-512: stride 1 on planes up to 55x55, at least 2 work items)
        ((1, 64, 30, 30), (64, 64, 3, 3), {"pads": [1, 1, 1, 1]}, (False, True)),
        ((1, 96, 30, 30), (32, 96, 3, 3), {"pads": [1, 1, 1, 1]}, (False, True)),
        ((1, 3, 33, 33), (24, 3, 3, 3), {"strides": [2, 2]}, (False, False)),  # a block and a half
        ((1, 2, 20, 20), (16, 2, 3, 3), {}, (False, False)),  # 18 deep
        ((1, 64, 14, 14), (64, 64, 3, 3), {"strides": [2, 2], "pads": [1] * 4}, (False, False)),
        ((1, 24, 9, 9), (40, 24, 1, 1), {}, (False, False)),
        ((1, 32, 9, 9), (24, 16, 3, 3), {"group": 2, "pads": [1, 1, 1, 1]}, (False, False)),
        ((1, 8, 80), (6, 8, 31), {"pads": [15, 15]}, (False, False)),
        ((1, 4, 6, 6, 6), (8, 4, 3, 3, 3), {}, (False, False)),
        ((1, 64, 56, 56), (64, 64, 3, 3), {"pads": [1, 1, 1, 1]}, (False, False)),  # 3136
        ((1, 128, 7, 7), (32, 128, 3, 3), {"pads": [1, 1, 1, 1]}, (True, False)),  # 1 item
    ],
)
@pytest.mark.parametrize("ext", BUILDS, ids=IDS)
def test_conv_kernel_takes_the_channel_vector_kernel_where_it_should(
    monkeypatch: pytest.MonkeyPatch, ext: Any, xs: tuple[int, ...], ws: tuple[int, ...],
    attrs: dict[str, Any], vector: tuple[bool, bool],
) -> None:  # fmt: skip
    calls: list[bool] = []
    real = conv._conv_direct

    def spy(*args: Any) -> np.ndarray:
        calls.append(args[9].vector)  # the _DirectCall
        return real(*args)

    monkeypatch.setattr(conv.common, "ext", ext)
    monkeypatch.setattr(conv.direct, "_conv_direct", spy)
    x = RNG.standard_normal(xs).astype(np.float32)
    w = RNG.standard_normal(ws).astype(np.float32)
    b = RNG.standard_normal(ws[0]).astype(np.float32)
    compute = kit.build_node("Conv", [x, w, b], {"group": 1, **attrs}, opset=17)
    (y,) = compute(x, w, b)
    (y2,) = compute(x, w, b)  # the packed weights kept
    np.testing.assert_allclose(y, _reference(x, w, b, **attrs), rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(y, y2)
    # the AVX2 and AVX-512 builds by their own rules; the baseline one's sums
    # would not fit in its registers
    wide = ext.DIRECT_VECTOR >= conv.DIRECT_WIDE_VECTOR
    assert (True in calls) == (vector[wide] and ext.CHANNEL_VECTOR_NATIVE)


@pytest.mark.parametrize("ext", BUILDS, ids=IDS)
def test_direct_path_rule(monkeypatch: pytest.MonkeyPatch, ext: Any) -> None:
    monkeypatch.setattr(conv.common, "ext", ext)
    wide = ext.DIRECT_VECTOR >= conv.DIRECT_WIDE_VECTOR
    assert wide == (ext.DIRECT_VECTOR == 16)
    x = np.zeros((1, 3, 224, 224), np.float32)
    w7 = np.zeros((64, 3, 7, 7), np.float32)
    win = window((224, 224), (7, 7), strides=[2, 2], pads=[3, 3, 3, 3])
    assert conv._use_direct(x, w7, win, 1, True)
    assert conv._flat(win) == wide  # strided too: on row and column phases
    w11 = np.zeros((96, 3, 11, 11), np.float32)  # depth 363: BLAS as fast in narrow builds
    win11 = window((224, 224), (11, 11), strides=[4, 4])
    assert conv._use_direct(x, w11, win11, 1, True) == wide
    # 5x5 windows: row mode to depth 256, flat mode to 784 in narrow builds
    win5 = window((27, 27), (5, 5), pads=[2] * 4)
    for c, flat in ((8, wide), (16, True), (31, True)):
        xc, wc = np.zeros((1, c, 27, 27), np.float32), np.zeros((32, c, 5, 5), np.float32)
        assert conv._use_direct(xc, wc, win5, 1, True, 1)
        assert conv._flat(win5, 1, c) == flat
    x32, w32 = np.zeros((1, 32, 27, 27), np.float32), np.zeros((32, 32, 5, 5), np.float32)
    assert conv._use_direct(x32, w32, win5, 1, True) == wide
    w3 = np.zeros((64, 3, 3, 3), np.float32)  # few taps: im2col and BLAS in narrow builds
    win3 = window((224, 224), (3, 3))
    assert conv._use_direct(x, w3, win3, 1, True, 1) == wide  # on one thread
    assert conv._flat(win3) == wide
    # few channels on a large plane, two threads: direct in every build
    assert conv._use_direct(x, w3, win3, 1, True)
    x16 = np.zeros((1, 16, 55, 55), np.float32)
    win55 = window((55, 55), (3, 3), pads=[1] * 4)
    assert conv._use_direct(x16, np.zeros((64, 16, 3, 3), np.float32), win55, 1, True)
    x112 = np.zeros((1, 16, 112, 112), np.float32)  # Winograd's otherwise
    win112 = window((112, 112), (3, 3), pads=[1] * 4)
    assert conv._use_direct(x112, np.zeros((32, 16, 3, 3), np.float32), win112, 1, True)
    x32c = np.zeros((1, 32, 55, 55), np.float32)  # 32 channels: BLAS in narrow builds
    assert conv._use_direct(x32c, np.zeros((64, 32, 3, 3), np.float32), win55, 1, True) == wide
    x28c = np.zeros((1, 16, 28, 28), np.float32)  # a small plane: the same
    w28c = np.zeros((64, 16, 3, 3), np.float32)
    win28c = window((28, 28), (3, 3), pads=[1] * 4)
    assert conv._use_direct(x28c, w28c, win28c, 1, True) == wide
    # strided on an image's channels: direct in every build
    assert conv._use_direct(x, w3, window((224, 224), (3, 3), strides=[2, 2]), 1, True)
    x8 = np.zeros((1, 16, 32, 32), np.float32)
    win8 = window((32, 32), (3, 3))
    assert conv._use_direct(x8, np.zeros((32, 8, 3, 3), np.float32), win8, 2, True) == wide
    win1 = window((32, 32), (1, 1))
    assert conv._use_direct(x8, np.zeros((32, 4, 1, 1), np.float32), win1, 4, True) == wide
    assert conv._use_direct(x8, np.zeros((16, 4, 3, 3), np.float32), win8, 4, True) == wide
    assert not conv._use_direct(
        x8, np.zeros((16, 1, 3, 3), np.float32), win8, 16, True
    )  # depthwise
    # 16 channels a group: direct in every build, in the narrow one on 2+ threads
    x32, w16 = np.zeros((1, 32, 32, 32), np.float32), np.zeros((32, 16, 3, 3), np.float32)
    assert conv._use_direct(x32, w16, win8, 2, True)
    assert conv._use_direct(x32, w16, win8, 2, True, 1) == wide
    assert conv._flat(win8, 2)
    assert not conv._use_direct(x[:, :, :0], w7, win, 1, True)  # empty
    w1 = np.zeros((64, 3, 1, 1), np.float32)  # 1x1: direct, unless turned off
    assert conv._use_direct(x, w1, window((224, 224), (1, 1)), 1, True) == wide
    monkeypatch.setattr(conv.selection, "DIRECT_POINTWISE", False)
    assert not conv._use_direct(x, w1, window((224, 224), (1, 1)), 1, True)
    # 3x3 with 128+ channels each way on 28x28 or more: Winograd, not the
    # direct kernel; on 14x14, or with 64 channels, the direct kernel
    w128 = np.zeros((128, 128, 3, 3), np.float32)
    win28, win14 = window((28, 28), (3, 3), pads=[1] * 4), window((14, 14), (3, 3), pads=[1] * 4)
    x28, x14 = np.zeros((1, 128, 28, 28), np.float32), np.zeros((1, 128, 14, 14), np.float32)
    assert conv._use_winograd(x28, w128, win28, 1, True)
    assert not conv._use_direct(x28, w128, win28, 1, True)
    assert conv._use_direct(x14, w128, win14, 1, True) == wide
    x64 = np.zeros((1, 64, 28, 28), np.float32)
    assert conv._use_direct(x64, np.zeros((128, 64, 3, 3), np.float32), win28, 1, True) == wide
    # strided 3x3 to 7x7 at any depth: direct in flat mode in every build, on any
    # number of threads; to 14x14 (196 positions) only in the wide one
    w512 = np.zeros((512, 512, 3, 3), np.float32)
    x512 = np.zeros((1, 512, 14, 14), np.float32)
    win7 = window((14, 14), (3, 3), strides=[2, 2], pads=[1] * 4)
    assert conv._use_direct(x512, w512, win7, 1, True, 1) and conv._flat(win7)
    win14 = window((28, 28), (3, 3), strides=[2, 2], pads=[1] * 4)
    x512w = np.zeros((1, 512, 28, 28), np.float32)
    assert conv._use_direct(x512w, w512, win14, 1, True) == wide
    assert conv._flat(win14) == wide
    assert conv._flat(window((14, 14), (1, 1), strides=[2, 2])) == wide  # 1x1: BLAS there
    # unstrided to 6x6 (9 Winograd tiles, too few): the same; to 7x7 (16) Winograd's
    w256 = np.zeros((256, 256, 3, 3), np.float32)
    win6 = window((6, 6), (3, 3), pads=[1] * 4)
    assert conv._use_direct(np.zeros((1, 256, 6, 6), np.float32), w256, win6, 1, True, 1)
    assert conv._flat(win6)
    win7u = window((7, 7), (3, 3), pads=[1] * 4)
    x7 = np.zeros((1, 256, 7, 7), np.float32)
    assert conv._use_winograd(x7, w256, win7u, 1, True)
    assert conv._use_direct(x7, w256, win7u, 1, True) == wide


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_fused_conv_add_on_the_direct_path(monkeypatch: pytest.MonkeyPatch, dtype: type) -> None:
    from ortcore.fused_ops import DOMAIN, register_fused_schemas

    register_fused_schemas()
    calls: list[int] = []
    real = conv._conv_direct
    monkeypatch.setattr(conv.direct, "_conv_direct", lambda *a: calls.append(1) or real(*a))
    x = RNG.standard_normal((2, 3, 15, 21)).astype(dtype)
    w = RNG.standard_normal((5, 3, 5, 5)).astype(dtype)
    b = RNG.standard_normal(5).astype(dtype)
    attrs = {"strides": [2, 2], "pads": [2, 2, 2, 2]}
    want = _reference(x.astype(np.float32), w.astype(np.float32), b.astype(np.float32), **attrs)
    z = RNG.standard_normal(want.shape).astype(dtype)
    fused = {**attrs, "activation": "Relu"}
    compute = kit.build_node("FusedConvAdd", [x, w, z, b], fused, opset=17, domain=DOMAIN)
    (y,) = compute(x, w, z, b)
    assert calls and y.dtype == dtype
    tol = 1e-4 if dtype == np.float32 else 2e-2
    want = np.maximum(want + z.astype(np.float32), 0)
    np.testing.assert_allclose(y.astype(np.float32), want, rtol=tol, atol=tol * 10)


def test_conv_kernel_keeps_one_window_per_input_size() -> None:
    """A Conv node fed inputs of many sizes (more than the windows it keeps)
    computes each with its own pads and output size, in any order."""
    w = RNG.standard_normal((4, 3, 3, 3)).astype(np.float32)
    b = RNG.standard_normal(4).astype(np.float32)
    attrs = {"auto_pad": "SAME_UPPER", "strides": [2, 1]}
    x0 = RNG.standard_normal((1, 3, 5, 5)).astype(np.float32)
    compute = kit.build_node("Conv", [x0, w, b], attrs, opset=17)
    sizes = [5 + i for i in range(KEPT_PER_NODE + 3)]
    for h in [*sizes, *reversed(sizes)]:
        x = RNG.standard_normal((1, 3, h, 12 - h % 4)).astype(np.float32)
        (y,) = compute(x, w, b)
        np.testing.assert_allclose(y, _reference(x, w, b, **attrs), rtol=1e-4, atol=1e-4)


GROUP_CASES = [
    # (C, H, W), (M, KH, KW), strides, pads, dilations, group
    ((8, 7, 7), (16, 1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 4),
    ((24, 30, 30), (112, 1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 4),  # ShuffleNet-like: 28 a group
    ((6, 12, 10), (30, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 3),
    ((4, 11, 13), (10, 3, 3), (2, 2), (0, 1, 1, 0), (1, 2), 2),
    ((9, 5, 6), (27, 2, 2), (1, 1), (0, 0, 0, 0), (1, 1), 9),  # 1 channel, 3 filters a group
]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("case", GROUP_CASES, ids=[str(i) for i in range(len(GROUP_CASES))])
@pytest.mark.parametrize("ext", BUILDS, ids=IDS)
def test_direct_conv2d_groups_match_numpy(ext: Any, case: tuple[Any, ...], threads: int) -> None:
    """Grouped convolutions in flat mode, all groups in one call, with bias,
    residual and clamp, against each group computed on its own."""
    (c, h, wd), (m, kh, kw), strides, pads, dilations, group = case
    cg, mg = c // group, m // group
    x = RNG.standard_normal((c, h, wd)).astype(np.float32)
    w = RNG.standard_normal((m, cg, kh, kw)).astype(np.float32)
    want = np.concatenate([
        _numpy_conv(x[g * cg:(g + 1) * cg], w[g * mg:(g + 1) * mg], strides, pads, dilations)
        for g in range(group)
    ])  # fmt: skip
    oh, ow = want.shape[1:]
    (sh, sw), (dh, dw) = strides, dilations
    scratch = np.full(ext.direct_conv2d_scratch(c, oh, ow, kh, kw, sh, sw, dh, dw, True) + 3,
                      np.nan, np.float32)  # fmt: skip
    real = conv.common.ext
    conv.common.ext = ext
    try:
        wp = conv.direct_filter(w, group)
    finally:
        conv.common.ext = real
    b = RNG.standard_normal(m).astype(np.float32)
    z = RNG.standard_normal((m, oh, ow)).astype(np.float32)
    y = np.full((m, oh, ow), np.nan, np.float32)
    ext.direct_conv2d(x, wp, y, b, z, scratch, sh, sw, pads[0], pads[1], dh, dw,
                      -1.0, 1.5, threads, True, group)  # fmt: skip
    full = want + b[:, None, None] + z
    np.testing.assert_allclose(y, np.clip(full, -1.0, 1.5), rtol=1e-5, atol=1e-4)
    with pytest.raises(ValueError, match="groups need flat mode"):
        ext.direct_conv2d(x, wp, y, b, z, scratch, sh, sw, pads[0], pads[1], dh, dw,
                          -1.0, 1.5, threads, False, group)  # fmt: skip
    with pytest.raises(ValueError, match="packed weights"):
        ext.direct_conv2d(x, wp[:-1], y, b, z, scratch, sh, sw, pads[0], pads[1], dh, dw,
                          -1.0, 1.5, threads, True, group)  # fmt: skip
    with pytest.raises(ValueError, match="in 5 groups"):
        ext.direct_conv2d(x, wp, y, b, z, scratch, sh, sw, pads[0], pads[1], dh, dw,
                          -1.0, 1.5, threads, True, 5)  # fmt: skip

    # the groups' channels written interleaved (a channel shuffle): channel j
    # of group g goes to channel j * group + g; no residual then
    y.fill(np.nan)
    ext.direct_conv2d(x, wp, y, b, None, scratch, sh, sw, pads[0], pads[1], dh, dw,
                      -1.0, 1.5, threads, True, group, True)  # fmt: skip
    clipped = np.clip(want + b[:, None, None], -1.0, 1.5)
    shuffled = clipped.reshape(group, mg, oh, ow).transpose(1, 0, 2, 3).reshape(m, oh, ow)
    np.testing.assert_allclose(y, shuffled, rtol=1e-5, atol=1e-4)
    with pytest.raises(ValueError, match="interleaved output needs groups and no residual"):
        ext.direct_conv2d(x, wp, y, b, z, scratch, sh, sw, pads[0], pads[1], dh, dw,
                          -1.0, 1.5, threads, True, group, True)  # fmt: skip


WIDE = [m for m in BUILDS if m.DIRECT_VECTOR >= conv.DIRECT_WIDE_VECTOR]
"""The builds this CPU runs whose direct kernel takes grouped Convs."""


@pytest.mark.skipif(not WIDE, reason="no build this CPU runs computes grouped Convs directly")
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize(("n", "shuffle", "k"), [(1, 4, 1), (2, 4, 1), (1, 2, 1), (1, 4, 3)])
def test_shuffled_grouped_conv_nodes_on_the_direct_kernel(
    monkeypatch: pytest.MonkeyPatch, threads: int, n: int, shuffle: int, k: int
) -> None:
    """ShuffleNet's grouped Conv, Relu and channel shuffle in the build whose
    direct kernel takes grouped Convs: one FusedConvShuffle, its channels
    written shuffled by the kernel when the shuffle's groups are the Conv's,
    shuffled after otherwise."""
    ortcore = pytest.importorskip("ortcore")
    monkeypatch.setattr(conv.common, "ext", WIDE[-1])
    interleaved = record_calls(monkeypatch, conv.common, "direct_conv2d")  # its last argument
    xs = (n, 32, 7, 7)
    p = (k - 1) // 2
    w = (RNG.standard_normal((32, 8, k, k)) / 8).astype(np.float32)
    b = RNG.standard_normal(32).astype(np.float32)
    graph = helper.make_graph(
        [
            helper.make_node("Conv", ["x", "w", "b"], ["c"], group=4, pads=[p] * 4),
            helper.make_node("Relu", ["c"], ["a"]),
            helper.make_node("Reshape", ["a", "s1"], ["r1"]),
            helper.make_node("Transpose", ["r1"], ["t"], perm=[0, 2, 1, 3, 4]),
            helper.make_node("Reshape", ["t", "s2"], ["y"]),
        ],
        "g",
        [helper.make_tensor_value_info("x", 1, list(xs))],
        [helper.make_tensor_value_info("y", 1, None)],
        [
            numpy_helper.from_array(w, "w"),
            numpy_helper.from_array(b, "b"),
            numpy_helper.from_array(np.array([n, shuffle, 32 // shuffle, 7, 7], np.int64), "s1"),
            numpy_helper.from_array(np.array(xs, np.int64), "s2"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    so = ortcore.SessionOptions()
    so.intra_op_num_threads = threads
    sess = ortcore.InferenceSession(model.SerializeToString(), so, providers=["cpu"])
    x = RNG.standard_normal(xs).astype(np.float32)
    got = sess.run(None, {"x": x})[0]
    want = ReferenceEvaluator(model).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    assert interleaved and all(i == (shuffle == 4) for i in interleaved)


def test_direct_path_picks_its_threads_at_each_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """A Conv node keeps its direct kernel's call per input shape, but not its
    thread count: the run's share of the cores changes from run to run."""
    if conv.ext.DIRECT_VECTOR < conv.DIRECT_WIDE_VECTOR:
        pytest.skip("the direct path of this build takes few Convs")
    seen = record_calls(monkeypatch, conv.common, "direct_conv2d", 14)  # nthreads
    x = RNG.standard_normal((1, 64, 56, 56)).astype(np.float32)
    w = RNG.standard_normal((64, 64, 3, 3)).astype(np.float32)
    b = RNG.standard_normal(64).astype(np.float32)
    compute = kit.build_node("Conv", [x, w, b], {"pads": [1, 1, 1, 1]}, opset=17)
    for share in (2, 1, 2):
        monkeypatch.setattr(
            conv.direct, "threads_for", lambda work, threads, s=share: min(s, threads)
        )
        compute(x, w, b)
    assert seen == [2, 1, 2]
