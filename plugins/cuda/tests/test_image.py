"""The image and window kernels (Resize, Col2Im, LpPool, GridSample) under the
CPU emulation against numpy, and Resize, Upsample, ConvTranspose, Col2Im,
LpPool and GridSample through the provider on the emulation against the CPU
provider."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from onnx import TensorProto, helper

from ortcore_cuda.emulator import Emulator, compiler
from ortcore_cuda.kernels import image as im
from ortcore_cuda.ops_image import conv_transpose_plan, pool_plan, resize_plan

NP = {"f32": np.float32, "f16": np.float16}
TOL = {"f32": 1e-5, "f16": 2e-3}
"""rtol and atol per element type."""


@pytest.fixture(scope="module")
def emu(tmp_path_factory: pytest.TempPathFactory) -> Emulator:
    if compiler() is None:
        pytest.skip("no C++ compiler for the emulation")
    return Emulator(im.all_kernels(), tmp_path_factory.mktemp("emu_image"))


# -- numpy references (straight from ONNX's definitions, one output at a time) -----------


def _cubic(d: float, a: float) -> float:
    d = abs(d)
    if d <= 1:
        return ((a + 2) * d - (a + 3)) * d * d + 1
    if d < 2:
        return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a
    return 0.0


def np_resize_1d(row: np.ndarray, out_len: int, scale: float, **o: Any) -> np.ndarray:
    """One row resized (mode, coord, nearest, antialias, exclude, a, roi, extrapolation)."""
    n = len(row)
    width = scale * n
    y = np.empty(out_len)
    for i in range(out_len):
        coord = o["coord"]
        if coord == "half_pixel":
            x = (i + 0.5) / scale - 0.5
        elif coord == "pytorch_half_pixel":
            x = -0.5 if width == 1 else (i + 0.5) / scale - 0.5
        elif coord == "align_corners":
            x = 0.0 if width == 1 else i * (n - 1) / (width - 1)
        elif coord == "asymmetric":
            x = i / scale
        elif coord == "tf_crop_and_resize":
            r0, r1 = o["roi"]
            x = (r1 - r0) * (n - 1) / 2 if width == 1 else i * (r1 - r0) * (n - 1) / (width - 1)
            x += r0 * (n - 1)
            if x < 0 or x > n - 1:
                y[i] = o["extrapolation"]
                continue
        else:  # half_pixel_symmetric
            x = n / 2 * (1 - out_len / width) + (i + 0.5) / scale - 0.5
        lo = math.floor(x)
        ratio = 1.0 if x == lo else x - lo
        left = lo - 1 if x == lo else lo  # the neighbour left of x, x itself preferred right
        if o["mode"] == "nearest":
            up = {
                "round_prefer_floor": ratio > 0.5,
                "round_prefer_ceil": ratio >= 0.5,
                "floor": False,
                "ceil": True,
            }[o["nearest"]]
            up = up or ratio == 1.0
            y[i] = row[min(max(left + int(up), 0), n - 1)]
            continue
        sc = min(scale, 1.0) if o["antialias"] else 1.0
        half = 1 if o["mode"] == "linear" else 2
        first = math.floor(-half / sc) + 1 if o["antialias"] else 1 - half
        taps = range(first, 2 - first)
        w = np.array(
            [
                max(0.0, 1 - abs((t - ratio) * sc))
                if o["mode"] == "linear"
                else _cubic((t - ratio) * sc, o["a"])
                for t in taps
            ]
        )
        idx = np.array([left + t for t in taps])
        if o["exclude"]:
            w = np.where((idx < 0) | (idx >= n), 0.0, w)
        if o["antialias"] or o["exclude"]:
            w = w / (w.sum() or 1.0)
        y[i] = float(np.dot(w, row[np.clip(idx, 0, n - 1)].astype(np.float64)))
    return y


RESIZES = [
    dict(mode="nearest", coord="half_pixel", nearest="round_prefer_floor"),
    dict(mode="nearest", coord="asymmetric", nearest="floor"),
    dict(mode="nearest", coord="align_corners", nearest="round_prefer_ceil"),
    dict(mode="nearest", coord="half_pixel", nearest="ceil"),
    dict(mode="linear", coord="half_pixel"),
    dict(mode="linear", coord="pytorch_half_pixel"),
    dict(mode="linear", coord="align_corners"),
    dict(mode="linear", coord="half_pixel_symmetric"),
    dict(mode="linear", coord="half_pixel", antialias=1),
    dict(mode="linear", coord="tf_crop_and_resize", roi=(0.2, 0.9), extrapolation=3.0),
    dict(mode="linear", coord="tf_crop_and_resize", roi=(-0.3, 1.2), extrapolation=-2.0),
    dict(mode="cubic", coord="half_pixel"),
    dict(mode="cubic", coord="asymmetric", a=-0.5, exclude=1),
    dict(mode="cubic", coord="half_pixel", antialias=1),
    dict(mode="cubic", coord="align_corners", antialias=1, exclude=1),
]


@pytest.mark.parametrize("dtype", ["f32", "f16"])
@pytest.mark.parametrize("lengths", [(7, 13), (13, 5), (9, 1), (1, 4), (6, 6)], ids=str)
@pytest.mark.parametrize("opts", RESIZES, ids=lambda o: "-".join(f"{v}" for v in o.values()))
def test_resize_axis(emu: Emulator, opts: dict[str, Any], lengths: Any, dtype: str) -> None:
    n, m = lengths
    o: dict[str, Any] = dict(nearest="round_prefer_floor", antialias=0, exclude=0, a=-0.75)
    o.update(roi=(0.0, 1.0), extrapolation=0.0)
    o.update(opts)
    scale = m / n * (1.1 if n == m else 1.0)
    x = np.random.default_rng(n * m).standard_normal((3, n, 5)).astype(NP[dtype])
    y = np.full((3, m, 5), 7, NP[dtype])
    args = im.RESIZE_ARGS.pack(
        in_len=n,
        out_len=m,
        inner=5,
        mode=im.RESIZE_MODES[o["mode"]],
        coord=im.RESIZE_COORDS[o["coord"]],
        nearest=im.RESIZE_NEAREST[o["nearest"]],
        antialias=o["antialias"],
        exclude=o["exclude"],
        scale=scale,
        roi0=o["roi"][0],
        roi1=o["roi"][1],
        cubic_a=o["a"],
        extrapolation=o["extrapolation"],
    )
    # 2 blocks of 32 threads for up to 195 outputs: the grid-stride loop covers the rest
    emu.launch(f"resize_{dtype}_{dtype}", 2, 32, x, y, y.size, args)
    want = np.stack(
        [
            np.stack([np_resize_1d(x[b, :, j], m, scale, **o) for j in range(5)], axis=1)
            for b in range(3)
        ]
    )
    np.testing.assert_allclose(y.astype(np.float64), want, rtol=TOL[dtype], atol=TOL[dtype])


def test_resize_float16_to_float32_and_back(emu: Emulator) -> None:
    x = np.random.default_rng(3).standard_normal((2, 5)).astype(np.float16)
    mid = np.empty((2, 9), np.float32)
    args = im.RESIZE_ARGS.pack(in_len=5, out_len=9, inner=1, mode=1, scale=1.8)
    emu.launch("resize_f16_f32", 1, 32, x, mid, mid.size, args)
    o = dict(mode="linear", coord="half_pixel", antialias=0, exclude=0)
    want = np.stack([np_resize_1d(r, 9, 1.8, **o) for r in x])
    np.testing.assert_allclose(mid, want, rtol=1e-6, atol=1e-6)
    back = np.empty((2, 5), np.float16)
    # nearest, asymmetric: x = 1.8 i rounds (half down) to 0, 2, 4, 5, 7
    args = im.RESIZE_ARGS.pack(in_len=9, out_len=5, inner=1, mode=0, coord=3, scale=5 / 9)
    emu.launch("resize_f32_f16", 1, 32, mid, back, back.size, args)
    np.testing.assert_array_equal(back, mid[:, [0, 2, 4, 5, 7]].astype(np.float16))


def test_resize_plan() -> None:
    assert resize_plan((1, 1, 2, 2), scales=[1, 1, 2, 3], sizes=None)[0] == [1, 1, 4, 6]
    out, scale, _ = resize_plan((1, 1, 2, 4), scales=None, sizes=[1, 1, 1, 3])
    assert out == [1, 1, 1, 3] and scale == [1.0, 1.0, 0.5, 0.75]
    out, scale, _ = resize_plan(
        (1, 1, 2, 4), scales=None, sizes=[1, 3], axes=[2, 3], policy="not_smaller"
    )
    assert out == [1, 1, 2, 3] and scale == [1.0, 1.0, 0.75, 0.75]
    out, scale, _ = resize_plan((1, 1, 2, 2), scales=None, sizes=[7, 8], axes=[3, 2])
    assert out == [1, 1, 8, 7]
    _, _, roi = resize_plan(
        (2, 4, 4), scales=[0.5, 2], sizes=None, axes=[2, 1], roi=[0, 0.1, 1, 0.9]
    )
    assert roi == [0.0, 0.1, 0.0, 1.0, 0.9, 1.0]


# -- Col2Im, LpPool ------------------------------------------------------------------------


def np_col2im(
    cols: np.ndarray,
    img: list[int],
    k: list[int],
    s: list[int],
    p: list[int],
    d: list[int],
    blocks: list[int],
) -> np.ndarray:
    """``cols`` (planes, K, L) summed into (planes, *img) (pads before ``p``)."""
    planes = cols.shape[0]
    y = np.zeros((planes, *img))
    for kk in np.ndindex(*k):
        row = int(np.ravel_multi_index(kk, k))
        for bb in np.ndindex(*blocks):
            col = int(np.ravel_multi_index(bb, blocks))
            pos = [bb[i] * s[i] - p[i] + kk[i] * d[i] for i in range(len(img))]
            if all(0 <= pos[i] < img[i] for i in range(len(img))):
                y[(slice(None), *pos)] += cols[:, row, col].astype(np.float64)
    return y


COL2IMS = [
    # image, kernel, strides, pads before/after, dilations
    ([5], [3], [2], [1, 2], [1]),
    ([7, 6], [2, 3], [1, 2], [0, 1, 1, 0], [2, 1]),
    ([5, 5], [3, 3], [1, 1], [1, 1, 1, 1], [1, 1]),
    ([3, 4, 5], [2, 2, 3], [1, 2, 1], [0, 0, 1, 1, 1, 0], [1, 1, 2]),
]


@pytest.mark.parametrize("dtype", ["f32", "f16"])
@pytest.mark.parametrize("case", COL2IMS, ids=str)
def test_col2im(emu: Emulator, case: Any, dtype: str) -> None:
    img, k, s, p, d = case
    nd = len(img)
    blocks = [(img[i] + p[i] + p[i + nd] - (d[i] * (k[i] - 1) + 1)) // s[i] + 1 for i in range(nd)]
    rng = np.random.default_rng(len(img))
    cols = rng.standard_normal((3, int(np.prod(k)), int(np.prod(blocks)))).astype(NP[dtype])
    y = np.full((3, *img), 7, NP[dtype])
    pad3 = lambda v, f: [f] * (3 - len(v)) + list(v)  # noqa: E731
    args = im.WIN_ARGS.pack(
        inp=pad3(blocks, 1),
        out=pad3(img, 1),
        k=pad3(k, 1),
        s=pad3(s, 1),
        p=pad3(p[:nd], 0),
        d=pad3(d, 1),
    )
    emu.launch(f"col2im_{dtype}", 2, 32, cols, y, y.size, args)
    want = np_col2im(cols, img, k, s, p[:nd], d, blocks)
    np.testing.assert_allclose(y.astype(np.float64), want, rtol=TOL[dtype], atol=TOL[dtype])


@pytest.mark.parametrize("dtype", ["f32", "f16"])
@pytest.mark.parametrize("power", [1.0, 2.0, 3.0])
@pytest.mark.parametrize(
    "case",
    [
        ([9], [3], [2], [1, 1], [1]),
        ([6, 7], [2, 3], [1, 2], [1, 0, 0, 1], [2, 1]),
        ([4, 3, 5], [2, 2, 2], [1, 1, 2], [0, 1, 0, 1, 0, 1], [1, 1, 1]),
    ],
    ids=str,
)
def test_lppool(emu: Emulator, case: Any, power: float, dtype: str) -> None:
    dims, k, s, p, d = case
    nd = len(dims)
    out, pads = pool_plan(dims, k, strides=s, dilations=d, pads=p)
    x = np.random.default_rng(nd).standard_normal((2, *dims)).astype(NP[dtype])
    y = np.full((2, *out), 7, NP[dtype])
    pad3 = lambda v, f: [f] * (3 - len(v)) + list(v)  # noqa: E731
    args = im.WIN_ARGS.pack(
        inp=pad3(dims, 1),
        out=pad3(out, 1),
        k=pad3(k, 1),
        s=pad3(s, 1),
        p=pad3(pads[:nd], 0),
        d=pad3(d, 1),
    )
    emu.launch(f"lppool_{dtype}", 2, 16, x, y, y.size, args, power)
    padded = np.pad(np.abs(x.astype(np.float64)), [(0, 0)] + [(p[i], p[i + nd]) for i in range(nd)])
    want = np.empty((2, *out))
    for o in np.ndindex(*out):
        window = padded[
            (
                slice(None),
                *[slice(o[i] * s[i], o[i] * s[i] + (k[i] - 1) * d[i] + 1, d[i]) for i in range(nd)],
            )
        ]
        want[(slice(None), *o)] = (window**power).reshape(2, -1).sum(1) ** (1 / power)
    np.testing.assert_allclose(y.astype(np.float64), want, rtol=TOL[dtype] * 2, atol=TOL[dtype])


# -- GridSample ---------------------------------------------------------------------------


def _reflect(x: float, lo: float, hi: float) -> float:
    rng = hi - lo
    if rng <= 0:
        return lo
    if x < lo:
        dx = lo - x
        k = int(dx / rng)
        r = dx - k * rng
        return lo + r if k % 2 == 0 else hi - r
    if x > hi:
        dx = x - hi
        k = int(dx / rng)
        r = dx - k * rng
        return hi - r if k % 2 == 0 else lo + r
    return x


def np_gridsample(
    x: np.ndarray, grid: np.ndarray, mode: str, padding: str, align: int
) -> np.ndarray:
    n, c = x.shape[:2]
    dims = x.shape[2:]
    nd = len(dims)
    out = grid.shape[1:-1]
    y = np.zeros((n, c, *out))
    for b in range(n):
        for o in np.ndindex(*out):
            taps = []
            for j in range(nd):
                length = dims[j]
                g = float(grid[(b, *o, nd - 1 - j)])
                lo, hi = (0.0, length - 1.0) if align else (-0.5, length - 0.5)
                raw = (g + 1) / 2 * (length - 1) if align else ((g + 1) * length - 1) / 2
                v = float(np.float32(raw))  # ONNX keeps the coordinates in float32
                if mode == "nearest":
                    v = float(np.rint(v))
                if v < lo or v > hi:
                    if padding == "border":
                        v = min(max(v, 0.0), length - 1.0)
                    elif padding == "reflection":
                        v = float(np.float32(_reflect(v, lo, hi)))
                if mode == "nearest":
                    pts = [(int(v), 1.0)]
                else:
                    f = math.floor(v)
                    r = v - f
                    if mode == "linear":
                        pts = [(f, 1 - r), (f + 1, r)]
                    else:
                        pts = [(f - 1 + t, _cubic(t - 1 - r, -0.75)) for t in range(4)]
                mapped = []
                for i, w in pts:
                    if padding == "zeros":
                        mapped.append((i if 0 <= i < length else None, w))
                    elif padding == "border":
                        mapped.append((min(max(i, 0), length - 1), w))
                    else:
                        mapped.append((int(_reflect(float(i), lo, hi)), w))
                taps.append(mapped)
            acc = np.zeros(c)
            for combo in np.ndindex(*[len(t) for t in taps]):
                picks = [taps[j][combo[j]] for j in range(nd)]
                if any(i is None for i, _ in picks):
                    continue
                w = math.prod(w for _, w in picks)
                acc += w * x[(b, slice(None), *[i for i, _ in picks])].astype(np.float64)
            y[(b, slice(None), *o)] = acc
    return y


@pytest.mark.parametrize("dtype", ["f32", "f16"])
@pytest.mark.parametrize("align", [0, 1])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("dims", [(4, 5), (3, 4, 2)], ids=str)
def test_gridsample(
    emu: Emulator, dims: Any, mode: str, padding: str, align: int, dtype: str
) -> None:
    nd = len(dims)
    if nd == 3 and mode == "cubic":
        pytest.skip("ONNX defines cubic for 2-D only")
    rng = np.random.default_rng(nd)
    x = rng.standard_normal((2, 3, *dims)).astype(NP[dtype])
    out = (3, 5) if nd == 2 else (2, 3, 2)
    grid = (rng.uniform(-1.7, 1.7, (2, *out, nd))).astype(NP[dtype])
    grid[0, 0, 0] = [1.0] * nd  # an edge exactly
    y = np.full((2, 3, *out), 7, NP[dtype])
    args = im.GRID_ARGS.pack(
        nd=nd,
        c=3,
        mode=im.GRID_MODES[mode],
        padding=im.GRID_PADDING[padding],
        align=align,
        inp=[1] * (3 - nd) + list(dims),
        out=[1] * (3 - nd) + list(out),
    )
    emu.launch(f"gridsample_{dtype}", 2, 32, x, grid, y, y.size, args)
    want = np_gridsample(x, grid, mode, padding, align)
    np.testing.assert_allclose(
        y.astype(np.float64),
        want,
        rtol=2e-5 if dtype == "f32" else 4e-3,
        atol=2e-5 if dtype == "f32" else 4e-3,
    )


# -- the plans ------------------------------------------------------------------------------


def test_conv_transpose_plan() -> None:
    assert conv_transpose_plan([3, 3], [3, 3]) == ([5, 5], [0, 0])
    assert conv_transpose_plan([3, 3], [3, 3], strides=[3, 2], output_padding=[1, 1]) == (
        [10, 8],
        [0, 0],
    )
    assert conv_transpose_plan([3, 3], [3, 3], strides=[3, 2], pads=[1, 2, 1, 2]) == (
        [7, 3],
        [1, 2],
    )
    assert conv_transpose_plan([3, 3], [3, 3], strides=[2, 2], auto_pad="SAME_UPPER") == (
        [6, 6],
        [0, 0],
    )
    assert conv_transpose_plan([3, 3], [3, 3], strides=[2, 2], auto_pad="SAME_LOWER") == (
        [6, 6],
        [1, 1],
    )
    assert conv_transpose_plan([3, 3], [3, 3], strides=[3, 2], output_shape=[10, 8]) == (
        [10, 8],
        [0, 0],
    )


# -- the provider end to end ------------------------------------------------------------------


def _check(
    manager: Any,
    nodes: list[Any],
    feeds: dict[str, np.ndarray],
    opset: int,
    host: tuple[str, ...] = (),
    rtol: float = 1e-5,
) -> None:
    """Run ``nodes`` (output ``y``) on the CUDA provider alone and on the CPU provider; compare."""
    import ortcore

    def info(name: str, a: np.ndarray) -> Any:
        t = {
            np.dtype(np.float32): TensorProto.FLOAT,
            np.dtype(np.float16): TensorProto.FLOAT16,
            np.dtype(np.int64): TensorProto.INT64,
        }[a.dtype]
        return helper.make_tensor_value_info(name, t, a.shape)

    y_type = next(iter(feeds.values())).dtype
    out = helper.make_tensor_value_info(
        "y", TensorProto.FLOAT16 if y_type == np.float16 else TensorProto.FLOAT, None
    )
    graph = helper.make_graph(nodes, "g", [info(k, v) for k, v in feeds.items()], [out])
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", opset)]
    ).SerializeToString()
    cuda = ortcore.InferenceSession(model, providers=["cuda", "cpu"], plugin_manager=manager)
    cpu = ortcore.InferenceSession(model, providers=["cpu"], plugin_manager=manager)
    declined = [
        (r.op_type, r.declined)
        for r in cuda.get_partition().nodes
        if r.provider != "CUDAExecutionProvider"
    ]
    assert not declined
    got, want = cuda.run(None, feeds)[0], cpu.run(None, feeds)[0]
    assert got.shape == want.shape and got.dtype == want.dtype
    tol = 3e-3 if y_type == np.float16 else rtol
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_provider_resize(emulated: Any, dtype: Any) -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 5, 7)).astype(dtype)
    n = helper.make_node
    cases = [
        (
            [n("Resize", ["x", "", "s"], ["y"], mode="cubic")],
            {"s": np.array([1, 1, 1.6, 0.7], np.float32)},
        ),
        (
            [n("Resize", ["x", "", "", "z"], ["y"], mode="linear", antialias=1, axes=[3, 2])],
            {"z": np.array([4, 3])},
        ),
        (
            [
                n(
                    "Resize",
                    ["x", "", "", "z"],
                    ["y"],
                    mode="nearest",
                    keep_aspect_ratio_policy="not_larger",
                    axes=[2, 3],
                )
            ],
            {"z": np.array([9, 9])},
        ),
        (
            [
                n(
                    "Resize",
                    ["x", "r", "", "z"],
                    ["y"],
                    mode="linear",
                    coordinate_transformation_mode="tf_crop_and_resize",
                    extrapolation_value=2.0,
                )
            ],
            {
                "r": np.array([0, 0, -0.2, 0.1, 1, 1, 0.9, 1.3], np.float32),
                "z": np.array([2, 3, 4, 6]),
            },
        ),
        (
            [
                n(
                    "Resize",
                    ["x", "", "s"],
                    ["y"],
                    mode="cubic",
                    exclude_outside=1,
                    cubic_coeff_a=-0.5,
                    coordinate_transformation_mode="align_corners",
                )
            ],
            {"s": np.array([1, 1, 2, 0.5], np.float32)},
        ),
    ]
    for nodes, extra in cases:
        _check(emulated, nodes, {"x": x, **extra}, 19)


def test_provider_upsample(emulated: Any) -> None:
    x = np.random.default_rng(1).standard_normal((1, 2, 3, 4)).astype(np.float32)
    s = np.array([1, 1, 2, 3], np.float32)
    _check(
        emulated,
        [helper.make_node("Upsample", ["x", "s"], ["y"], mode="nearest")],
        {"x": x, "s": s},
        9,
    )


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_provider_conv_transpose(emulated: Any, dtype: Any) -> None:
    rng = np.random.default_rng(2)
    n = helper.make_node
    cases: list[tuple[tuple[int, ...], tuple[int, ...], dict[str, Any]]] = [
        (
            (2, 4, 3, 5),
            (4, 3, 3, 2),
            dict(group=2, strides=[2, 1], pads=[1, 0, 0, 1], output_padding=[1, 0]),
        ),
        ((1, 3, 4, 4), (3, 2, 2, 3), dict(dilations=[2, 1], auto_pad="SAME_LOWER", strides=[2, 2])),
        ((2, 2, 6), (2, 3, 4), dict(strides=[3], output_shape=[19])),
        ((1, 2, 3, 2, 3), (2, 2, 2, 3, 2), dict(strides=[1, 2, 1], pads=[0, 1, 0, 1, 0, 0])),
    ]
    for xs, ws, attrs in cases:
        x = rng.standard_normal(xs).astype(dtype)
        w = rng.standard_normal(ws).astype(dtype)
        b = rng.standard_normal(ws[1] * attrs.get("group", 1)).astype(dtype)
        _check(
            emulated,
            [n("ConvTranspose", ["x", "w", "b"], ["y"], **attrs)],
            {"x": x, "w": w, "b": b},
            17,
        )


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_provider_windows(emulated: Any, dtype: Any) -> None:
    rng = np.random.default_rng(3)
    n = helper.make_node
    x = rng.standard_normal((1, 2, 7, 6)).astype(dtype)
    _check(
        emulated,
        [n("LpPool", ["x"], ["y"], kernel_shape=[3, 2], p=3, pads=[1, 0, 1, 1], strides=[2, 1])],
        {"x": x},
        18,
    )
    cols = rng.standard_normal((2, 12, 9)).astype(dtype)
    _check(
        emulated,
        [n("Col2Im", ["x", "i", "k"], ["y"], strides=[2, 1], pads=[1, 0, 0, 1])],
        {"x": cols, "i": np.array([5, 4]), "k": np.array([2, 3])},
        18,
    )
    grid = rng.uniform(-1.2, 1.2, (1, 3, 4, 2)).astype(dtype)
    for mode in ("nearest", "linear", "cubic"):
        _check(
            emulated,
            [
                n(
                    "GridSample",
                    ["x", "g"],
                    ["y"],
                    mode=mode,
                    padding_mode="reflection",
                    align_corners=1,
                )
            ],
            {"x": x, "g": grid},
            20,
        )


def test_provider_declines(emulated: Any) -> None:
    import ortcore

    n = helper.make_node
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 4, 4])
    s = helper.make_tensor_value_info("s", TensorProto.FLOAT, [4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    graph = helper.make_graph(
        [n("Resize", ["x", "", "s"], ["y"], mode="nearest", antialias=1)], "g", [x, s], [y]
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 19)]
    ).SerializeToString()
    sess = ortcore.InferenceSession(model, providers=["cuda", "cpu"], plugin_manager=emulated)
    (row,) = sess.get_partition().nodes
    assert row.declined["CUDAExecutionProvider"] == "CUDA: Resize nearest with antialias"


# -- kernels for 3-D Conv and pooling (ops_nn wires them) -----------------------

POOLS_ND = [
    # dims, kernel, strides, pads before + after, dilations, ceil_mode
    ([4, 5, 6], [2, 3, 2], [2, 1, 2], [1, 0, 1, 0, 1, 1], [1, 1, 2], True),
    ([5, 4, 3], [3, 2, 2], [1, 2, 1], [0, 0, 0, 0, 0, 0], [2, 1, 1], False),
    ([7], [3], [3], [1, 1], [1], True),
]


@pytest.mark.parametrize("dtype", ["f32", "f16"])
@pytest.mark.parametrize("count_pads", [0, 1])
@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize("case", POOLS_ND, ids=str)
def test_pool_nd(emu: Emulator, case: Any, kind: str, count_pads: int, dtype: str) -> None:
    dims, k, s, p, d, ceil = case
    nd = len(dims)
    out, pads = pool_plan(dims, k, strides=s, dilations=d, pads=p, ceil_mode=ceil)
    x = np.random.default_rng(nd).standard_normal((2, *dims)).astype(NP[dtype])
    y = np.full((2, *out), 7, NP[dtype])
    pad3 = lambda v, f: [f] * (3 - len(v)) + list(v)  # noqa: E731
    args = im.WIN_ARGS.pack(
        inp=pad3(dims, 1),
        out=pad3(out, 1),
        k=pad3(k, 1),
        s=pad3(s, 1),
        p=pad3(pads[:nd], 0),
        d=pad3(d, 1),
        e=pad3(pads[nd:], 0),
    )
    emu.launch(f"{kind}pool_nd_{dtype}", 2, 16, x, y, y.size, args, count_pads)
    want = np.empty((2, *out))
    for o in np.ndindex(*out):
        vals, padded = [], 0
        for kk in np.ndindex(*k):
            idx = [o[i] * s[i] - p[i] + kk[i] * d[i] for i in range(nd)]
            if any(idx[i] >= dims[i] + p[nd + i] for i in range(nd)):
                continue
            padded += 1
            if all(0 <= idx[i] < dims[i] for i in range(nd)):
                vals.append(x[(slice(None), *idx)].astype(np.float64))
        stack = np.stack(vals)
        if kind == "max":
            want[(slice(None), *o)] = stack.max(0)
        else:
            want[(slice(None), *o)] = stack.sum(0) / (padded if count_pads else len(vals))
    np.testing.assert_allclose(y.astype(np.float64), want, rtol=TOL[dtype], atol=TOL[dtype])


@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_im2col_nd(emu: Emulator, dtype: str) -> None:
    dims, k, s, p, d = [3, 4, 5], [2, 1, 3], [1, 2, 1], [1, 0, 1], [1, 1, 2]
    out = [(dims[i] + 2 * p[i] - (k[i] - 1) * d[i] - 1) // s[i] + 1 for i in range(3)]
    x = np.random.default_rng(5).standard_normal((3, *dims)).astype(NP[dtype])
    cols = np.full((3 * int(np.prod(k)), int(np.prod(out))), 7, NP[dtype])
    args = im.WIN_ARGS.pack(inp=dims, out=out, k=k, s=s, p=p, d=d)
    emu.launch(f"im2col_nd_{dtype}", 2, 32, x, cols, cols.size, args)
    padded = np.pad(x, [(0, 0)] + [(p[i], p[i]) for i in range(3)])
    want = np.empty_like(cols)
    for c in range(3):
        for kk in np.ndindex(*k):
            row = c * int(np.prod(k)) + int(np.ravel_multi_index(kk, k))
            spans = [
                slice(kk[i] * d[i], kk[i] * d[i] + (out[i] - 1) * s[i] + 1, s[i]) for i in range(3)
            ]
            where: tuple[Any, ...] = (c, *spans)
            window = padded[where]
            want[row] = window.reshape(-1)
    np.testing.assert_array_equal(cols, want)
