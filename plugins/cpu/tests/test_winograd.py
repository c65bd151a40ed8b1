"""The Winograd F(2x2, 3x3) path of float32 Conv: accuracy against float64
and onnx.reference, when it is taken, and its filter-transform cache."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import onnx
import pytest
from ep_sdk.testing import KernelKit
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from ortcore_cpu._ext import winograd as wino
from ortcore_cpu.kernels import conv
from ortcore_cpu.kernels._window import Window, window
from ortcore_cpu.provider import CPUExecutionProvider

kit = KernelKit(CPUExecutionProvider, opset=17, threads=2)
check_node = kit.check_node

RNG = np.random.default_rng(7)
RTOL, ATOL = 1e-4, 1e-5


def _data(n: int, c: int, h: int, w: int, m: int) -> tuple[np.ndarray, np.ndarray]:
    """Input N(0, 1) and weights scaled so that outputs are about N(0, 1)."""
    x = RNG.standard_normal((n, c, h, w)).astype(np.float32)
    wt = (RNG.standard_normal((m, c, 3, 3)) / np.sqrt(9 * c)).astype(np.float32)
    return x, wt


def _win(x: np.ndarray, pads: tuple[int, int, int, int], **kw: Any) -> Window:
    return window(x.shape[2:], (3, 3), pads=list(pads), **kw)


def _reference(x: np.ndarray, w: np.ndarray, win: Window) -> np.ndarray:
    """The convolution in float64 (numpy path)."""
    return conv._conv_numpy(x.astype(np.float64), w.astype(np.float64), win, 1)


@pytest.fixture(autouse=True)
def _narrow_direct_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    """Conv chooses its path as a build with narrow vectors does: the
    AVX-512 build computes these convolutions directly, never by Winograd."""
    monkeypatch.setattr(conv.selection, "DIRECT_WIDE_VECTOR", 1 << 30)


@pytest.fixture
def winograd_calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[int, ...]]]:
    """Records the input shape of every call of the Winograd path (with the
    channel-vector kernel, which takes Winograd's Convs of few channels
    first, off: these tests are about Winograd's rule)."""
    calls: list[tuple[int, ...]] = []
    real = conv._conv_winograd

    def spy(x: np.ndarray, *args: Any) -> np.ndarray:
        calls.append(x.shape)
        return real(x, *args)

    monkeypatch.setattr(conv.winograd, "_conv_winograd", spy)
    monkeypatch.setattr(conv.selection, "CHANNEL_VECTOR", False)
    yield calls


# (N, C, H, W, M, pads top/left/bottom/right)
SHAPES = [
    (1, 1, 3, 3, 1, (0, 0, 0, 0)),  # one tile, C=1
    (1, 1, 5, 5, 1, (1, 1, 1, 1)),
    (1, 3, 4, 4, 2, (0, 0, 0, 0)),  # 2x2 output: exactly one tile
    (1, 2, 7, 9, 3, (0, 0, 0, 0)),  # odd output: partial edge tiles
    (1, 4, 8, 8, 5, (1, 1, 1, 1)),
    (2, 5, 9, 6, 7, (0, 1, 1, 0)),  # N>1, asymmetric pads
    (3, 6, 6, 11, 4, (1, 0, 0, 1)),
    (1, 8, 10, 7, 9, (1, 1, 0, 0)),
    (2, 16, 13, 13, 33, (1, 1, 1, 1)),
    (1, 17, 12, 15, 19, (0, 0, 1, 1)),
    (1, 3, 1, 1, 2, (1, 1, 1, 1)),  # 1x1 image: only pads around it
    (1, 2, 2, 5, 3, (2, 1, 1, 2)),  # pads of 2
    (2, 32, 30, 17, 24, (1, 1, 1, 1)),
    (1, 20, 70, 9, 16, (1, 1, 1, 1)),  # tall
    (1, 3, 5, 140, 4, (1, 1, 1, 1)),  # wide: tile rows longer than one chunk
]


@pytest.mark.parametrize(("n", "c", "h", "w", "m", "pads"), SHAPES)
def test_winograd_matches_float64(
    n: int, c: int, h: int, w: int, m: int, pads: tuple[int, int, int, int]
) -> None:
    x, wt = _data(n, c, h, w, m)
    win = _win(x, pads)
    for threads in (1, 2):
        y = conv._conv_winograd(x, conv.winograd_filter(wt), win, threads)
        np.testing.assert_allclose(y, _reference(x, wt, win), rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize(("n", "c", "h", "w", "m", "pads"), SHAPES[4:10])
def test_winograd_matches_im2col(
    n: int, c: int, h: int, w: int, m: int, pads: tuple[int, int, int, int]
) -> None:
    x = RNG.standard_normal((n, c, h, w)).astype(np.float32)
    wt = RNG.standard_normal((m, c, 3, 3)).astype(np.float32)
    win = _win(x, pads)
    y = conv._conv_winograd(x, conv.winograd_filter(wt), win, 2)
    np.testing.assert_allclose(y, conv._conv_f32(x, wt, win, 1, 2)[0], rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize(
    ("n", "c", "h", "w", "m", "pads"), [*SHAPES[4:], (1, 32, 27, 27, 128, (1,) * 4)]
)
def test_products_one_per_thread(
    monkeypatch: pytest.MonkeyPatch,
    n: int,
    c: int,
    h: int,
    w: int,
    m: int,
    pads: tuple[int, int, int, int],
) -> None:
    """The 16 products on the packed GEMM, one per thread, the filter
    transform packed once (the narrow build's rule, taken here for any step
    on two threads), give what BLAS gives."""
    if conv.gemm.ext.VECTOR < 8:
        pytest.skip("the portable GEMM build is not used for these products")
    calls: list[tuple[int, ...]] = []
    real = conv.gemm.ext.batched_sgemm_packed_a

    def spy(ap: np.ndarray, rows: int, b: np.ndarray, out: np.ndarray, nt: int) -> None:
        calls.append(b.shape)
        real(ap, rows, b, out, nt)

    monkeypatch.setattr(conv.gemm.ext, "batched_sgemm_packed_a", spy)
    monkeypatch.setattr(conv.selection, "WINOGRAD_BATCHED_MAX_WORK", 1 << 40)
    x, wt = _data(n, c, h, w, m)
    win = _win(x, pads)
    want = _reference(x, wt, win)
    filters = conv.WinogradFilters()
    for threads in (1, 2, 2):  # the second two-thread call takes the kept packing
        u = filters.transform(wt)
        y = conv._conv_winograd(x, u, win, threads, filters.packed)
        np.testing.assert_allclose(y, want, rtol=RTOL, atol=ATOL)
    y = conv._conv_winograd(x, conv.winograd_filter(wt), win, 2)  # packed at the call
    np.testing.assert_allclose(y, want, rtol=RTOL, atol=ATOL)
    assert calls and all(shape[0] == 16 and shape[1] == c for shape in calls)


def test_packed_products_match_matmul() -> None:
    """``batched_sgemm_packed_a`` on any rows (a partial last panel too),
    strided B and a wider output row than N."""
    g = conv.gemm.ext
    for rows, k, cols in [(1, 1, 1), (7, 5, 33), (13, 40, 17), (64, 9, 100)]:
        a = RNG.standard_normal((3, rows, k)).astype(np.float32)
        b = RNG.standard_normal((3, cols, k)).astype(np.float32).transpose(0, 2, 1)
        out = np.full((3, rows, cols + 5), np.nan, np.float32)[:, :, :cols]
        for nt in (1, 2, 4):
            g.batched_sgemm_packed_a(g.pack_a_batch(a), rows, b, out, nt)
            np.testing.assert_allclose(out, a @ b, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="do not match"):
        g.batched_sgemm_packed_a(g.pack_a_batch(a), rows + 1, b, out, 2)


def test_packed_products_read_rows_of_b_in_place() -> None:
    """B with contiguous rows, as Winograd's transformed input is: its whole
    panels are read in place (a last partial one packed) while the rows fit
    one block, and packed past it; K past one slice of the kernel; rows of
    B wider than N (a slice of them), and every product alike; B wider than
    one chunk of the row-panel order (several chunks, the last partial)."""
    g = conv.gemm.ext
    nr = 2 * g.VECTOR
    for rows, k, cols in [(32, 128, 4 * nr), (33, 20, 4 * nr + 3), (250, 7, 9 * nr + 1),
                          (6, 400, 5 * nr - 1), (17, 3, 3 * nr), (13, 100, 45 * nr + 5)]:  # fmt: skip
        a = RNG.standard_normal((4, rows, k)).astype(np.float32)
        b = RNG.standard_normal((4, k, cols + 7)).astype(np.float32)[:, :, 3 : cols + 3]
        out = np.full((4, rows, cols), np.nan, np.float32)
        for nt in (1, 2):
            g.batched_sgemm_packed_a(g.pack_a_batch(a), rows, b, out, nt)
            np.testing.assert_allclose(out, a @ b, rtol=1e-4, atol=1e-4)


def test_products_one_per_thread_rule() -> None:
    """Small products on two threads take the packed GEMM; one thread or
    large products keep BLAS."""
    if conv.gemm.ext.VECTOR < 8:
        pytest.skip("the portable GEMM build is not used for these products")
    assert conv._winograd_batched(196, 128, 32, 2)
    assert conv._winograd_batched(16, 512, 512, 2)
    assert not conv._winograd_batched(196, 128, 32, 1)
    assert not conv._winograd_batched(504, 128, 128, 2)


@pytest.mark.parametrize("block", [1, 3000, 200_000])
def test_bands_and_image_groups(monkeypatch: pytest.MonkeyPatch, block: int) -> None:
    """A small V + M budget splits images into bands of tile rows (down to
    one row); a larger one takes several images per step."""
    monkeypatch.setattr(conv.winograd, "_WINOGRAD_BLOCK_BYTES", block)
    x, wt = _data(5, 6, 11, 10, 7)
    win = _win(x, (1, 0, 1, 1))
    y = conv._conv_winograd(x, conv.winograd_filter(wt), win, 2)
    np.testing.assert_allclose(y, _reference(x, wt, win), rtol=RTOL, atol=ATOL)


def test_filter_transform() -> None:
    wt = RNG.standard_normal((5, 3, 3, 3)).astype(np.float32)
    g = np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]])
    want = (g @ wt.astype(np.float64) @ g.T).reshape(5, 3, 16).transpose(2, 0, 1)
    u = conv.winograd_filter(wt)
    assert u.shape == (16, 5, 3) and u.dtype == np.float32
    np.testing.assert_allclose(u, want, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(conv.winograd_filter(wt.astype(np.float16)).dtype, np.float32)


def test_filter_cache_by_identity() -> None:
    cache = conv.WinogradFilters()
    wt = RNG.standard_normal((4, 2, 3, 3)).astype(np.float32)
    u = cache.transform(wt)
    assert cache.transform(wt) is u
    other = wt.copy()
    u2 = cache.transform(other)
    assert u2 is not u
    np.testing.assert_array_equal(u2, u)


def test_plane_size_avoids_4k_strides() -> None:
    for n in (1, 15, 16, 17, 1024, 50176, 12345):
        size = conv._plane_size(n)
        assert size >= n and size % 16 == 0 and (size // 16) % 2 == 1


def test_transform_argument_checks() -> None:
    x = np.zeros((1, 2, 4, 4), np.float32)
    with pytest.raises(ValueError, match="wrong shape"):
        wino.input_transform(x, np.zeros((16, 1), np.float32), 0, 0, 0, 1, 1, 1)
    with pytest.raises(ValueError, match="negative"):
        wino.input_transform(x, np.zeros((16, 64), np.float32), -1, 0, 0, 1, 1, 1)
    y = np.zeros((1, 2, 2, 2), np.float32)
    with pytest.raises(ValueError, match="wrong shape"):
        wino.output_transform(np.zeros((16, 1), np.float32), y, 0, 1, 1, 1)
    with pytest.raises(ValueError, match="does not fit"):
        wino.output_transform(np.zeros((16, 64), np.float32), y, 0, 1, 3, 1)
    with pytest.raises(ValueError, match="rows are not contiguous"):
        wino.output_transform(
            np.zeros((16, 64), np.float32), np.zeros((1, 2, 2, 4), np.float32)[..., ::2], 0, 1, 1, 1
        )
    with pytest.raises(ValueError, match="bias of 3 values for 2 channels"):
        wino.output_transform(
            np.zeros((16, 64), np.float32), y, 0, 1, 1, 1, np.zeros(3, np.float32)
        )


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("n", [1, 2])
def test_epilogue_into_a_window_of_channels(threads: int, n: int) -> None:
    """The bias and clamp in the output transform, written into channels
    [3, 3 + M) of a larger tensor (a FusedConvConcat's), NaN kept; the
    other channels untouched."""
    x, w = _data(n, 6, 9, 7, 5)
    x[0, 1, 4, 3] = np.nan  # reaches the outputs around it in every channel
    b = RNG.standard_normal(5).astype(np.float32)
    win = _win(x, (1, 1, 1, 1))
    ref = _reference(x, w, win) + b.reshape(1, 5, 1, 1)
    full = np.full((n, 11, 9, 7), 5.0, np.float32)
    got = conv._conv_winograd(x, conv.winograd_filter(w), win, threads, None, b, (0.0, 1.0),
                              full[:, 3:8])  # fmt: skip
    want = np.clip(ref, 0.0, 1.0)  # np.clip keeps NaN
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)
    assert np.shares_memory(got, full)
    assert np.isnan(full[0, 3:8, 4, 3]).all() and not np.isnan(full[1:]).any()
    assert (full[:, :3] == 5.0).all() and (full[:, 8:] == 5.0).all()
    with pytest.raises(ValueError, match="bias of shape"):
        conv._conv_winograd(x, conv.winograd_filter(w), win, 1, None, b[:4])


# --- when the path is taken ---------------------------------------------------


def _decide(xs: tuple[int, ...], m: int, cached: bool = True, group: int = 1, **kw: Any) -> bool:
    x = np.empty(xs, np.float32)
    w = np.empty((m, xs[1] // group, 3, 3), np.float32)
    return conv._use_winograd(x, w, window(xs[2:], (3, 3), **kw), group, cached)


def test_eligibility_rules() -> None:
    p = {"pads": [1, 1, 1, 1]}
    assert _decide((1, 64, 56, 56), 64, **p)
    assert _decide((1, 512, 7, 7), 512, **p)  # 16 tiles
    assert _decide((1, 16, 8, 8), 32, **p)
    assert _decide((4, 64, 4, 4), 64, **p)  # tiles of all images count
    assert _decide((1, 64, 14, 14), 256, **p)  # 4x the channels, enough tiles
    assert _decide((1, 64, 7, 7), 256, **p)  # ... or few: a small image
    assert _decide((1, 32, 27, 27), 128, **p)  # 4x the channels, C < 64, 196 tiles
    assert _decide((1, 48, 13, 13), 192, **p)
    assert not _decide((1, 32, 56, 56), 128, **p)  # ... but not 784 tiles
    assert not _decide((1, 32, 13, 13), 160, **p)  # over 4x the channels, C < 64
    assert _decide((1, 16, 32, 32), 64, **p)  # 4x the channels: 256 tiles, the most
    assert not _decide((1, 16, 34, 34), 64, **p)  # ... 289 tiles
    assert not _decide((1, 512, 5, 5), 512, **p)  # 9 tiles
    assert not _decide((1, 8, 56, 56), 64, **p)  # few input channels
    assert not _decide((1, 64, 56, 56), 8, **p)  # few output channels
    assert not _decide((1, 64, 56, 56), 64, strides=[2, 2], **p)
    assert not _decide((1, 64, 56, 56), 64, strides=[1, 2], **p)
    assert not _decide((1, 64, 56, 56), 64, dilations=[2, 2], **p)
    assert not _decide((1, 64, 56, 56), 64, group=2, **p)
    assert not _decide((1, 64, 56, 56), 64, group=64, **p)  # depthwise
    # uncached (weight not constant): needs 64 tiles
    assert _decide((1, 64, 16, 16), 64, cached=False, **p)
    assert not _decide((1, 64, 14, 14), 64, cached=False, **p)
    x = np.empty((1, 64, 56, 56), np.float32)
    w5 = np.empty((64, 64, 5, 5), np.float32)
    assert not conv._use_winograd(x, w5, window((56, 56), (5, 5)), 1, True)
    x3 = np.empty((1, 64, 8, 8, 8), np.float32)
    w3 = np.empty((64, 64, 3, 3, 3), np.float32)
    assert not conv._use_winograd(x3, w3, window((8, 8, 8), (3, 3, 3)), 1, True)


CONV_CASES = [
    # (x shape, w shape, attrs, takes the Winograd path)
    ((1, 16, 16, 16), (16, 16, 3, 3), {"pads": [1, 1, 1, 1]}, True),
    ((2, 24, 15, 17), (20, 24, 3, 3), {"pads": [0, 1, 1, 0]}, True),
    ((1, 32, 17, 18), (48, 32, 3, 3), {}, True),
    ((1, 16, 16, 16), (16, 16, 3, 3), {"auto_pad": "SAME_UPPER"}, True),
    ((1, 16, 16, 16), (16, 16, 3, 3), {"pads": [1, 1, 1, 1], "strides": [2, 2]}, False),
    ((1, 16, 16, 16), (16, 16, 3, 3), {"pads": [2, 2, 2, 2], "dilations": [2, 2]}, False),
    ((1, 32, 16, 16), (16, 16, 3, 3), {"pads": [1, 1, 1, 1], "group": 2}, False),
    ((1, 16, 16, 16), (16, 1, 3, 3), {"pads": [1, 1, 1, 1], "group": 16}, False),
    ((1, 16, 16, 16), (16, 16, 5, 5), {"pads": [2, 2, 2, 2]}, False),
]


@pytest.mark.parametrize(("xs", "ws", "attrs", "taken"), CONV_CASES)
def test_conv_node_paths(
    winograd_calls: list[tuple[int, ...]], xs: tuple, ws: tuple, attrs: dict, taken: bool
) -> None:
    """Conv nodes with the weight as a graph input (transform at each call),
    with a bias, against onnx.reference."""
    inputs = [
        RNG.standard_normal(xs).astype(np.float32),
        RNG.standard_normal(ws).astype(np.float32),
        RNG.standard_normal(ws[0]).astype(np.float32),
    ]
    check_node("Conv", inputs, attrs, opset=11, rtol=RTOL, atol=1e-4)
    assert bool(winograd_calls) == taken


def test_float16_conv(winograd_calls: list[tuple[int, ...]]) -> None:
    x = RNG.standard_normal((1, 16, 16, 16)).astype(np.float16)
    w = (RNG.standard_normal((16, 16, 3, 3)) / 12).astype(np.float16)
    got = check_node("Conv", [x, w], {"pads": [1, 1, 1, 1]}, rtol=1e-2, atol=1e-2)
    assert got[0].dtype == np.float16
    assert winograd_calls


# --- sessions: constant weights, fused Conv + Relu ----------------------------


def _reference_model(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[Any]:
    """onnx.reference's outputs for ``model``."""
    return list(ReferenceEvaluator(model).run(None, feeds))


def _conv_model(n: int, c: int, hw: int, m: int, relu: bool) -> tuple[onnx.ModelProto, Any]:
    w = (RNG.standard_normal((m, c, 3, 3)) / np.sqrt(9 * c)).astype(np.float32)
    b = RNG.standard_normal(m).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1])]
    nodes.append(helper.make_node("Relu" if relu else "Identity", ["c"], ["y"]))
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n, c, hw, hw])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [onnx.numpy_helper.from_array(w, "w"), onnx.numpy_helper.from_array(b, "b")],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model, (w, b)


@pytest.mark.parametrize("relu", [False, True])
def test_session_constant_weight(
    monkeypatch: pytest.MonkeyPatch, winograd_calls: list[tuple[int, ...]], relu: bool
) -> None:
    """A constant weight's filter transform is computed once per session."""
    ortcore = pytest.importorskip("ortcore")
    transforms: list[int] = []
    real_filter = conv.winograd_filter

    def count(w: np.ndarray) -> np.ndarray:
        transforms.append(w.shape[0])
        return real_filter(w)

    monkeypatch.setattr(conv.winograd, "winograd_filter", count)
    model, _ = _conv_model(2, 24, 9, 20, relu)
    sess = ortcore.InferenceSession(model.SerializeToString(), providers=["cpu"])
    for _ in range(3):
        x = RNG.standard_normal((2, 24, 9, 9)).astype(np.float32)
        (y,) = sess.run(None, {"x": x})
        (want,) = _reference_model(model, {"x": x})
        np.testing.assert_allclose(y, want, rtol=RTOL, atol=1e-4)
    assert len(winograd_calls) == 3
    assert transforms == [20]


def test_session_fed_initializer_is_not_cached(
    monkeypatch: pytest.MonkeyPatch, winograd_calls: list[tuple[int, ...]]
) -> None:
    """An initializer that is also a graph input may be fed: no cache then."""
    ortcore = pytest.importorskip("ortcore")
    model, (w, _) = _conv_model(1, 16, 16, 16, False)
    model.graph.input.append(helper.make_tensor_value_info("w", TensorProto.FLOAT, w.shape))
    sess = ortcore.InferenceSession(model.SerializeToString(), providers=["cpu"])
    x = RNG.standard_normal((1, 16, 16, 16)).astype(np.float32)
    for weight in (w, w * 2, w):
        (y,) = sess.run(None, {"x": x, "w": weight})
        (want,) = _reference_model(model, {"x": x, "w": weight})
        np.testing.assert_allclose(y, want, rtol=RTOL, atol=1e-4)
    assert len(winograd_calls) == 3
