"""Selections and odd ops (:mod:`ortcore_cuda.kernels.misc`, :mod:`ortcore_cuda.ops_misc`):
each kernel's own source under the CPU emulation against numpy, then the ops
end to end on the emulated provider."""

from __future__ import annotations

from typing import Any

import numpy as np
import ortcore
import pytest
from onnx import TensorProto, helper

from ortcore_cuda.emulator import Emulator, compiler
from ortcore_cuda.kernels import elementwise as ew
from ortcore_cuda.kernels import misc

NP = {"f32": np.float32, "f16": np.float16, "f64": np.float64}


@pytest.fixture(scope="module")
def emu(tmp_path_factory: pytest.TempPathFactory) -> Emulator:
    if compiler() is None:
        pytest.skip("no C++ compiler for the emulation")
    return Emulator(misc.all_kernels(), tmp_path_factory.mktemp("emu_misc"))


def _scan(emu: Emulator, counts: np.ndarray, threads: int = 32) -> tuple[np.ndarray, int]:
    offsets = np.full(counts.size + 1, -7, np.int64)
    total = np.zeros(1, np.int64)
    emu.launch("misc_scan", 1, threads, counts, offsets, total, counts.size)
    return offsets, int(total[0])


# -- kernels ----------------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 5, 32, 33, 300])
@pytest.mark.parametrize("threads", [32, 64])
def test_scan_is_exclusive_with_the_total(emu: Emulator, n: int, threads: int) -> None:
    counts = np.random.default_rng(n).integers(0, 4, n).astype(np.int64)
    offsets, total = _scan(emu, counts, threads)
    want = np.concatenate([[0], np.cumsum(counts)])
    np.testing.assert_array_equal(offsets, want)
    assert total == counts.sum()
    offsets2 = np.zeros(n + 1, np.int64)
    total2 = np.zeros(1, np.int64)
    emu.launch("misc_scan", 3, threads, counts, offsets2, total2, n)  # other blocks stand by
    np.testing.assert_array_equal(offsets2, want)


@pytest.mark.parametrize("dtype", ["f32", "f16", "f64"])
def test_isinf_and_isnan(emu: Emulator, dtype: str) -> None:
    x = np.array([1.0, -np.inf, np.inf, np.nan, 0.0, -2.5, np.inf], NP[dtype])
    wants = [np.isnan(x), np.isposinf(x), np.isneginf(x), np.isinf(x)]
    for mode, want in enumerate(wants):
        y = np.zeros(x.size, np.uint8)
        emu.launch(f"isinfnan_{dtype}", 2, 32, x, y, x.size, mode)
        np.testing.assert_array_equal(y.astype(bool), want)


@pytest.mark.parametrize(
    ("dtype", "np_type"),
    [("f32", np.float32), ("f16", np.float16), ("i32", np.int32), ("b", np.bool_)],
)
@pytest.mark.parametrize("shape", [(7,), (3, 5), (2, 3, 4)], ids=str)
def test_nonzero(emu: Emulator, dtype: str, np_type: Any, shape: tuple[int, ...]) -> None:
    rng = np.random.default_rng(len(shape))
    x = (rng.integers(-1, 2, shape) * rng.integers(0, 2, shape)).astype(np_type)
    if dtype == "f32":
        x.reshape(-1)[0] = np.nan  # NaN is not zero
    n = x.size
    flags = np.zeros(n, np.int64)
    emu.launch(f"nonzero_flags_{dtype}", 2, 32, x, flags, n)
    offsets, total = _scan(emu, flags)
    y = np.zeros((x.ndim, total), np.int64)
    dims = ew.copy_args(x.shape, [0] * x.ndim, [0] * x.ndim)
    emu.launch("nonzero_write", 2, 32, offsets, y, n, total, x.ndim, dims)
    np.testing.assert_array_equal(y, np.array(np.nonzero(x)))


def _unique(emu: Emulator, x: np.ndarray, dtype: str, sorted_: int) -> tuple[np.ndarray, ...]:
    """Unique of the rows of 2-D ``x`` through the three kernels and the scan."""
    n, length = x.shape
    first = np.zeros(n, np.int64)
    flags = np.zeros(n, np.int64)
    emu.launch(f"unique_first_{dtype}", 2, 32, x, first, flags, n, length)
    _, total = _scan(emu, flags)
    pos = np.zeros(n, np.int64)
    emu.launch(f"unique_rank_{dtype}", 2, 32, x, first, pos, n, length, sorted_)
    y = np.zeros((total, length), x.dtype)
    indices = np.zeros(total, np.int64)
    inverse = np.zeros(n, np.int64)
    counts = np.zeros(total, np.int64)
    emu.launch(
        f"unique_write_b{x.dtype.itemsize}", 2, 32, x, first, pos, y, indices, inverse, counts,
        n, length,
    )  # fmt: skip
    return y, indices, inverse, counts


@pytest.mark.parametrize(
    ("dtype", "np_type"),
    [("f32", np.float32), ("f16", np.float16), ("f64", np.float64), ("i64", np.int64)],
)
@pytest.mark.parametrize("length", [1, 3])
@pytest.mark.parametrize("sorted_", [1, 0])
def test_unique(emu: Emulator, dtype: str, np_type: Any, length: int, sorted_: int) -> None:
    x = np.random.default_rng(length).integers(-3, 3, (37, length)).astype(np_type)
    y, indices, inverse, counts = _unique(emu, x, dtype, sorted_)
    wy, wi, wv, wc = np.unique(x, True, True, True, axis=0)
    if not sorted_:  # in order of first occurrence, as ONNX
        order = np.argsort(wi)
        rank = np.empty_like(order)
        rank[order] = np.arange(order.size)
        wy, wi, wc, wv = wy[order], wi[order], wc[order], rank[wv.reshape(-1)]
    np.testing.assert_array_equal(y, wy)
    np.testing.assert_array_equal(indices, wi)
    np.testing.assert_array_equal(inverse, wv.reshape(-1))
    np.testing.assert_array_equal(counts, wc)


def test_unique_nan_and_bfloat16_bits(emu: Emulator) -> None:
    x = np.array([[2.0], [np.nan], [-1.0], [np.nan], [2.0]], np.float32)
    y, indices, inverse, counts = _unique(emu, x, "f32", 1)
    np.testing.assert_array_equal(y.reshape(-1), [-1.0, 2.0, np.nan])
    np.testing.assert_array_equal(indices, [2, 0, 1])
    np.testing.assert_array_equal(inverse, [1, 2, 0, 2, 1])
    np.testing.assert_array_equal(counts, [1, 2, 2])
    bits = (np.array([[3.0], [-2.0], [3.0], [0.5]], np.float32).view(np.uint32) >> 16).astype(
        np.uint16
    )
    y, indices, _, counts = _unique(emu, bits, "bf16", 1)
    values = (y.astype(np.uint32) << 16).view(np.float32).reshape(-1)
    np.testing.assert_array_equal(values, [-2.0, 0.5, 3.0])
    np.testing.assert_array_equal(counts, [1, 1, 2])


def _iou_suppress(a: np.ndarray, b: np.ndarray, center: int, iou: float) -> bool:
    if center:
        a = np.array([a[1] - a[3] / 2, a[0] - a[2] / 2, a[1] + a[3] / 2, a[0] + a[2] / 2])
        b = np.array([b[1] - b[3] / 2, b[0] - b[2] / 2, b[1] + b[3] / 2, b[0] + b[2] / 2])
    ay0, ay1 = sorted((a[0], a[2]))
    ax0, ax1 = sorted((a[1], a[3]))
    by0, by1 = sorted((b[0], b[2]))
    bx0, bx1 = sorted((b[1], b[3]))
    iw, ih = min(ax1, bx1) - max(ax0, bx0), min(ay1, by1) - max(ay0, by0)
    if iw <= 0 or ih <= 0:
        return False
    inter = iw * ih
    union = (ax1 - ax0) * (ay1 - ay0) + (bx1 - bx0) * (by1 - by0) - inter
    return bool(inter / union > iou)


def _nms_ref(
    boxes: np.ndarray, scores: np.ndarray, limit: int, iou: float, thr: float | None, center: int
) -> np.ndarray:
    out = []
    for b in range(scores.shape[0]):
        for c in range(scores.shape[1]):
            s = scores[b, c]
            cand = [i for i in range(s.size) if thr is None or s[i] > thr]
            cand.sort(key=lambda i: (-s[i], i))
            kept: list[int] = []
            for i in cand:
                if len(kept) >= limit:
                    break
                if not any(_iou_suppress(boxes[b, i], boxes[b, k], center, iou) for k in kept):
                    kept.append(i)
            out += [[b, c, i] for i in kept]
    return np.array(out, np.int64).reshape(-1, 3)


@pytest.mark.parametrize("center", [0, 1])
@pytest.mark.parametrize(("limit", "thr"), [(3, None), (100, 0.3), (2, 0.9)])
@pytest.mark.parametrize("threads", [32, 64])
def test_nms(emu: Emulator, center: int, limit: int, thr: float | None, threads: int) -> None:
    rng = np.random.default_rng(center + limit)
    nb, nc, n = 2, 3, 41
    corners = rng.uniform(0, 10, (nb, n, 2)).astype(np.float32)
    sizes = rng.uniform(0.5, 4, (nb, n, 2)).astype(np.float32)
    if center:
        boxes = np.concatenate([corners, sizes], axis=2)
    else:
        boxes = np.concatenate([corners, corners + sizes], axis=2)
    scores = rng.uniform(0, 1, (nb, nc, n)).astype(np.float32)
    scores[0, 0, 5] = scores[0, 0, 9]  # a tie: the lower index first
    pairs = nb * nc
    order = np.zeros(pairs * n, np.int64)
    sel = np.zeros(pairs * n, np.int64)
    counts = np.zeros(pairs, np.int64)
    emu.launch(
        "nms_select", 2, threads, boxes, scores, order, sel, counts, nc, n, pairs, limit, 0.4,
        thr or 0.0, int(thr is not None), center,
    )  # fmt: skip
    offsets, total = _scan(emu, counts)
    y = np.zeros((total, 3), np.int64)
    emu.launch("nms_write", 2, 32, sel, offsets, y, nc, n, pairs * n)
    np.testing.assert_array_equal(y, _nms_ref(boxes, scores, limit, 0.4, thr, center))


@pytest.mark.parametrize("dtype", ["f32", "f16", "f64"])
@pytest.mark.parametrize("m", [1, 2, 5])
def test_det(emu: Emulator, dtype: str, m: int) -> None:
    rng = np.random.default_rng(m)
    x = rng.standard_normal((7, m, m)).astype(NP[dtype])
    x[0] = 0  # singular
    if m > 1:
        x[1, 0] = 0  # a zero leading pivot: a swap
    y = np.zeros(7, NP[dtype])
    work = np.zeros(7 * m * m, np.float64 if dtype == "f64" else np.float32)
    emu.launch(f"det_{dtype}", 2, 32, x, work, y, 7, m)
    want = np.linalg.det(x.astype(np.float64))
    tol = {"f32": 1e-5, "f16": 5e-3, "f64": 1e-12}[dtype]
    np.testing.assert_allclose(y.astype(np.float64), want, rtol=tol * 10, atol=tol * 10)


@pytest.mark.parametrize("dtype", ["f32", "f16", "f64"])
def test_maxunpool_scatter(emu: Emulator, dtype: str) -> None:
    x = np.arange(1, 7, dtype=NP[dtype])
    idx = np.array([3, 0, 9, 5, 11, 42], np.int64)  # 42: out of range, skipped
    y = np.zeros(12, NP[dtype])
    emu.launch(f"maxunpool_{dtype}", 2, 32, x, idx, y, 6, 12)
    want = np.zeros(12, NP[dtype])
    want[idx[:5]] = x[:5]
    np.testing.assert_array_equal(y, want)


def _affine_ref(theta: np.ndarray, size: list[int], align: int) -> np.ndarray:
    def base(n: int) -> np.ndarray:
        if align:
            return -1 + np.arange(n) * (2.0 / (n - 1)) if n > 1 else np.array([-1.0])
        step = 2.0 / n
        return -1 + step / 2 + np.arange(n) * step

    grids = np.meshgrid(*[base(s) for s in size[2:]], indexing="ij")[::-1]  # x along W first
    homo = np.stack([*grids, np.ones_like(grids[0])], axis=-1)
    return np.einsum("nkj,...j->n...k", theta.astype(np.float64), homo)


@pytest.mark.parametrize("dtype", ["f32", "f16", "f64"])
@pytest.mark.parametrize("size", [[2, 1, 3, 5], [1, 1, 2, 3, 4]], ids=str)
@pytest.mark.parametrize("align", [0, 1])
def test_affine_grid(emu: Emulator, dtype: str, size: list[int], align: int) -> None:
    dims = len(size) - 2
    theta = np.random.default_rng(dims).standard_normal((size[0], dims, dims + 1)).astype(NP[dtype])
    d, h, w = [1, *size[2:]][-3:]
    out = np.zeros((size[0], *size[2:], dims), NP[dtype])
    points = out.size // dims
    emu.launch(f"affine_grid_{dtype}", 2, 32, theta, out, points, d, h, w, dims, align)
    want = _affine_ref(theta, size, align)
    tol = {"f32": 1e-6, "f16": 2e-3, "f64": 1e-12}[dtype]
    np.testing.assert_allclose(out.astype(np.float64), want, rtol=tol, atol=tol)


# -- the provider on the emulation ---------------------------------------------------------


def _model(node: Any, inputs: list[Any], outputs: list[Any], opset: int, inits: Any = ()) -> bytes:
    graph = helper.make_graph([node], "g", inputs, outputs, list(inits))
    return helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", opset)]
    ).SerializeToString()


def _run(manager: Any, model: bytes, feeds: dict[str, np.ndarray], provider: str) -> list[Any]:
    sess = ortcore.InferenceSession(model, providers=[provider], plugin_manager=manager)
    if provider == "cuda":
        part = sess.get_partition()
        assert [r.provider for r in part.nodes] == ["CUDAExecutionProvider"], [
            (r.op_type, r.declined) for r in part.nodes
        ]
    return list(sess.run(None, feeds))


def _same_as_cpu(manager: Any, model: bytes, feeds: dict[str, np.ndarray]) -> None:
    got = _run(manager, model, feeds, "cuda")
    want = _run(manager, model, feeds, "cpu")
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(
            np.asarray(g, np.float64), np.asarray(w, np.float64), rtol=1e-5, atol=1e-6
        )


def _info(name: str, elem: int, shape: Any) -> Any:
    return helper.make_tensor_value_info(name, elem, shape)


F, H, I64 = TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.INT64


def test_nonzero_and_isinf_on_the_provider(emulated: Any) -> None:
    x = np.array([[0.0, np.inf, 2.0], [-np.inf, 0.0, np.nan]], np.float32)
    node = helper.make_node("NonZero", ["x"], ["y"])
    model = _model(node, [_info("x", F, [2, 3])], [_info("y", I64, None)], 13)
    _same_as_cpu(emulated, model, {"x": x})
    node = helper.make_node("IsInf", ["x"], ["y"], detect_negative=0)
    model = _model(node, [_info("x", F, [2, 3])], [_info("y", TensorProto.BOOL, None)], 20)
    _same_as_cpu(emulated, model, {"x": x})


@pytest.mark.parametrize("axis", [None, 1, -1])
@pytest.mark.parametrize("sorted_", [1, 0])
def test_unique_on_the_provider(emulated: Any, axis: int | None, sorted_: int) -> None:
    x = np.array([[1, 0, 1, 0], [2, 3, 2, 3], [1, 0, 1, 0]], np.float32)
    kw: dict[str, Any] = {} if axis is None else {"axis": axis}
    node = helper.make_node("Unique", ["x"], ["y", "i", "v", "c"], sorted=sorted_, **kw)
    outs = [_info("y", F, None)] + [_info(n, I64, None) for n in "ivc"]
    model = _model(node, [_info("x", F, [3, 4])], outs, 11)
    _same_as_cpu(emulated, model, {"x": x})


def test_nms_on_the_provider(emulated: Any) -> None:
    boxes = np.array(
        [[[0, 0, 1, 1], [0, 0.1, 1, 1.1], [0, -0.1, 1, 0.9], [0, 10, 1, 11], [0, 10.1, 1, 11.1]]],
        np.float32,
    )
    scores = np.array([[[0.9, 0.75, 0.6, 0.95, 0.5], [0.1, 0.2, 0.3, 0.4, 0.5]]], np.float32)
    node = helper.make_node("NonMaxSuppression", ["b", "s", "m", "iou", "st"], ["y"])
    inits = [
        helper.make_tensor("m", I64, [1], [2]),
        helper.make_tensor("iou", F, [1], [0.5]),
        helper.make_tensor("st", F, [1], [0.15]),
    ]
    model = _model(
        node, [_info("b", F, [1, 5, 4]), _info("s", F, [1, 2, 5])], [_info("y", I64, None)], 11,
        inits,
    )  # fmt: skip
    _same_as_cpu(emulated, model, {"b": boxes, "s": scores})


@pytest.mark.parametrize("target", [[3, 8], [6, 2], [5, 5]])
def test_center_crop_pad_on_the_provider(emulated: Any, target: list[int]) -> None:
    x = np.arange(40, dtype=np.float16).reshape(2, 4, 5)
    node = helper.make_node("CenterCropPad", ["x", "s"], ["y"], axes=[1, -1])
    inits = [helper.make_tensor("s", I64, [2], target)]
    model = _model(node, [_info("x", H, [2, 4, 5])], [_info("y", H, None)], 18, inits)
    got = _run(emulated, model, {"x": x}, "cuda")[0]
    want = np.zeros((2, *target), np.float16)
    src = [slice(None)] + [
        slice((d - t) // 2, (d - t) // 2 + t) if t < d else slice(None)
        for d, t in zip((4, 5), target)
    ]
    dst = [slice(None)] + [
        slice((t - d) // 2, (t - d) // 2 + d) if t > d else slice(None)
        for d, t in zip((4, 5), target)
    ]
    want[tuple(dst)] = x[tuple(src)]
    np.testing.assert_array_equal(got, want)


def test_bitcast_on_the_provider(emulated: Any) -> None:
    x = np.array([[1.5, -2.0], [np.inf, 0.0]], np.float32)
    node = helper.make_node("BitCast", ["x"], ["y"], to=TensorProto.INT32)
    model = _model(node, [_info("x", F, [2, 2])], [_info("y", TensorProto.INT32, None)], 26)
    (y,) = _run(emulated, model, {"x": x}, "cuda")
    np.testing.assert_array_equal(y, x.view(np.int32))


def test_det_maxunpool_affine_grid_on_the_provider(emulated: Any) -> None:
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, 3, 3)).astype(np.float32)
    node = helper.make_node("Det", ["x"], ["y"])
    model = _model(node, [_info("x", F, [2, 3, 3, 3])], [_info("y", F, None)], 11)
    _same_as_cpu(emulated, model, {"x": x})

    x = np.array([[[[5, 6], [7, 8]]]], np.float32)
    idx = np.array([[[[5, 7], [13, 15]]]], np.int64)
    node = helper.make_node(
        "MaxUnpool", ["x", "i", "s"], ["y"], kernel_shape=[2, 2], strides=[2, 2]
    )
    inits = [helper.make_tensor("s", I64, [4], [1, 1, 5, 5])]
    model = _model(
        node, [_info("x", F, [1, 1, 2, 2]), _info("i", I64, [1, 1, 2, 2])], [_info("y", F, None)],
        11, inits,
    )  # fmt: skip
    (y,) = _run(emulated, model, {"x": x, "i": idx}, "cuda")
    flat = np.zeros(16, np.float32)
    flat[[5, 7, 13, 15]] = [5, 6, 7, 8]
    want = np.zeros((1, 1, 5, 5), np.float32)
    want[0, 0, :4, :4] = flat.reshape(4, 4)
    np.testing.assert_array_equal(y, want)

    theta = rng.standard_normal((2, 2, 3)).astype(np.float32)
    node = helper.make_node("AffineGrid", ["t", "s"], ["y"], align_corners=1)
    inits = [helper.make_tensor("s", I64, [4], [2, 1, 3, 4])]
    model = _model(node, [_info("t", F, [2, 2, 3])], [_info("y", F, None)], 20, inits)
    (y,) = _run(emulated, model, {"t": theta}, "cuda")
    np.testing.assert_allclose(y, _affine_ref(theta, [2, 1, 3, 4], 1), rtol=1e-5, atol=1e-6)


def _deform_ref(
    x: np.ndarray,
    w: np.ndarray,
    off: np.ndarray,
    b: np.ndarray,
    mask: np.ndarray,
    group: int,
    og: int,
    stride: int,
    pad: int,
) -> np.ndarray:
    n, ic, ih, iw = x.shape
    oc, icpg, kh, kw = w.shape
    oh, ow = off.shape[2:]
    off = off.reshape(n, og, kh, kw, 2, oh, ow).astype(np.float64)
    mask = mask.reshape(n, og, kh, kw, oh, ow).astype(np.float64)
    y = np.zeros((n, oc, oh, ow)) + b.astype(np.float64).reshape(1, -1, 1, 1)

    def sample(img: np.ndarray, h: float, v: float) -> float:
        h0, w0 = int(np.floor(h)), int(np.floor(v))
        total = 0.0
        for dy in (0, 1):
            for dx in (0, 1):
                hh, ww = h0 + dy, w0 + dx
                if 0 <= hh < ih and 0 <= ww < iw:
                    wt = (h - h0 if dy else 1 - (h - h0)) * (v - w0 if dx else 1 - (v - w0))
                    total += wt * float(img[hh, ww])
        return total

    for bi in range(n):
        for o in range(oc):
            g = o // (oc // group)
            for cg in range(icpg):
                c = g * icpg + cg
                gi = c // (ic // og)
                for i in range(oh):
                    for j in range(ow):
                        for ki in range(kh):
                            for kj in range(kw):
                                h = i * stride - pad + ki + off[bi, gi, ki, kj, 0, i, j]
                                v = j * stride - pad + kj + off[bi, gi, ki, kj, 1, i, j]
                                y[bi, o, i, j] += (
                                    sample(x[bi, c], h, v)
                                    * float(w[o, cg, ki, kj])
                                    * mask[bi, gi, ki, kj, i, j]
                                )
    return y


@pytest.mark.parametrize("dtype", ["f32", "f16", "f64"])
@pytest.mark.parametrize(("group", "og"), [(1, 1), (2, 2), (1, 2)])
def test_deform_conv(emu: Emulator, dtype: str, group: int, og: int) -> None:
    rng = np.random.default_rng(group * 3 + og)
    n, ic, ih, iw, oc, k, stride, pad = 2, 4, 5, 6, 4, 2, 2, 1
    oh, ow = (ih + 2 * pad - k) // stride + 1, (iw + 2 * pad - k) // stride + 1
    x = rng.standard_normal((n, ic, ih, iw)).astype(NP[dtype])
    w = rng.standard_normal((oc, ic // group, k, k)).astype(NP[dtype])
    off = (rng.standard_normal((n, og * k * k * 2, oh, ow)) * 1.5).astype(NP[dtype])
    b = rng.standard_normal(oc).astype(NP[dtype])
    mask = rng.uniform(0, 1, (n, og * k * k, oh, ow)).astype(NP[dtype])
    y = np.zeros((n, oc, oh, ow), NP[dtype])
    args = misc.deform_args(
        n, ic, ih, iw, oc, oh, ow, k, k, stride, stride, pad, pad, 1, 1, group, og
    )
    emu.launch(f"deform_conv_{dtype}", 2, 32, x, w, off, b, mask, y, y.size, args, 1, 1)
    want = _deform_ref(x, w, off, b, mask, group, og, stride, pad)
    tol = {"f32": 1e-4, "f16": 2e-2, "f64": 1e-10}[dtype]
    np.testing.assert_allclose(y.astype(np.float64), want, rtol=tol, atol=tol)


# -- found by the conformance exploration ----------------------------------------------


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
def test_softmax_of_an_empty_tensor_keeps_its_shape(emulated: Any, op: str) -> None:
    """The axis is not the last: an empty input was not moved, yet moved back."""
    node = helper.make_node(op, ["x"], ["y"], axis=1)
    model = _model(node, [_info("x", F, [0, 4, 5])], [_info("y", F, None)], 13)
    got = _run(emulated, model, {"x": np.zeros((0, 4, 5), np.float32)}, "cuda")
    assert got[0].shape == (0, 4, 5)


@pytest.mark.parametrize(
    "op", ["ReduceSumSquare", "ReduceLogSum", "ReduceL1", "ReduceSum", "ReduceLogSumExp"]
)
def test_reduce_noop_without_axes_keeps_the_elementwise_part(emulated: Any, op: str) -> None:
    """noop_with_empty_axes=1 and no axes: nothing is reduced, yet ReduceSumSquare
    squares and ReduceLogSum takes the log, as onnxruntime and the standard say."""
    node = helper.make_node(op, ["x"], ["y"], noop_with_empty_axes=1)
    model = _model(node, [_info("x", F, [3, 4])], [_info("y", F, None)], 18)
    x = np.random.default_rng(5).uniform(0.5, 3.0, (3, 4)).astype(np.float32)
    _same_as_cpu(emulated, model, {"x": x})
