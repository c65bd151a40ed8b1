"""Indexing, scatter, rearrangement, Range, Resize/Upsample and Dropout
kernels against onnx.reference (onnxruntime where noted)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from ep_sdk.testing import KernelKit

from ortcore_cpu.provider import CPUExecutionProvider

kit = KernelKit(CPUExecutionProvider, opset=17, threads=2)
check_node, reference_node, run_node = kit.check_node, kit.reference_node, kit.run_node

RNG = np.random.default_rng(11)
I64 = np.int64


def rand(*shape: int, dtype: type = np.float32) -> np.ndarray:
    return RNG.standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("opset", [11, 13])
def test_gather_elements(axis: int, opset: int) -> None:
    x = rand(3, 4)
    dim = x.shape[axis]
    idx = RNG.integers(-dim, dim, size=(2, 4) if axis == 0 else (3, 2)).astype(I64)
    oracle = "onnxruntime" if axis < 0 else "reference"  # the reference rejects axis < 0
    check_node("GatherElements", [x, idx], {"axis": axis}, opset=opset, oracle=oracle)
    check_node("GatherElements", [x, np.zeros((0, 4) if axis == 0 else (3, 0), I64)],
               {"axis": axis}, opset=opset, oracle=oracle)  # fmt: skip


@pytest.mark.parametrize(
    ("xshape", "ishape", "batch_dims"),
    [((2, 3), (4, 2), 0), ((2, 3, 4), (5, 1), 0), ((2, 3, 4), (2, 1), 1), ((2, 3, 4), (2, 5, 2), 1),
     ((2, 3, 4, 2), (2, 3, 1), 2)],
)  # fmt: skip
def test_gather_nd(xshape: tuple, ishape: tuple, batch_dims: int) -> None:
    x = rand(*xshape)
    k = ishape[-1]
    dims = np.array(xshape[batch_dims : batch_dims + k])
    idx = (RNG.integers(0, 1 << 20, size=ishape) % dims) - dims * RNG.integers(0, 2, size=ishape)
    check_node("GatherND", [x, idx.astype(I64)], {"batch_dims": batch_dims}, opset=13)


@pytest.mark.parametrize("axis", [None, 0, 1, -1])
def test_compress(axis: int | None) -> None:
    x = rand(3, 4)
    cond = np.array([True, False, True])
    attrs = {} if axis is None else {"axis": axis}
    check_node("Compress", [x, cond], attrs, opset=11)


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
@pytest.mark.parametrize("axis", [0, -1])
def test_scatter_elements(reduction: str, axis: int) -> None:
    x = rand(4, 5)
    idx = RNG.integers(-4, 4, size=(3, 4)).astype(I64) if axis == 0 else \
        RNG.integers(-5, 5, size=(3, 4)).astype(I64)  # fmt: skip
    if reduction == "none":  # duplicates are undefined without a reduction
        idx = np.array([[0, 1, 2, 3], [1, 2, 3, 0], [2, 3, 0, 1]], I64)
    upd = rand(3, 4)
    check_node("ScatterElements", [x, idx, upd], {"axis": axis, "reduction": reduction}, opset=18)


def test_scatter_deprecated() -> None:
    x = rand(3, 3)
    idx = np.array([[1, 0, 2], [0, 2, 1]], I64)
    upd = rand(2, 3)
    want = reference_node("ScatterElements", [x, idx, upd], {"axis": 0}, opset=11)
    check_node("Scatter", [x, idx, upd], {"axis": 0}, opset=9, expected=want)
    check_node("Scatter", [x, idx, upd], {"axis": 0}, opset=11, expected=want)


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
def test_scatter_nd(reduction: str) -> None:
    x = rand(4, 3, 2)
    idx = np.array([[0], [2], [-1]], I64) if reduction == "none" else np.array([[0], [2], [0]], I64)
    check_node("ScatterND", [x, idx, rand(3, 3, 2)], {"reduction": reduction}, opset=18)
    idx2 = np.array([[[1, 2]], [[3, 0]]], I64)
    check_node("ScatterND", [x, idx2, rand(2, 1, 2)], {"reduction": reduction}, opset=18)


@pytest.mark.parametrize("mode", ["linear", "circular"])
@pytest.mark.parametrize("axis", [-2, 2, 1])
def test_tensor_scatter(mode: str, axis: int) -> None:
    cache = rand(2, 3, 5, 4)
    ushape = list(cache.shape)
    ushape[axis] = 2
    widx = np.array([1, 3], I64) if mode == "linear" and ushape[axis] + 3 <= cache.shape[axis] \
        else np.array([0, 1], I64)  # fmt: skip
    if mode == "circular":
        widx = np.array([4, 2], I64) if cache.shape[axis] == 5 else np.array([2, 1], I64)
    attrs = {"mode": mode, "axis": axis}
    check_node("TensorScatter", [cache, rand(*ushape), widx], attrs, opset=24)
    check_node("TensorScatter", [cache, rand(*ushape)], attrs, opset=24)


@pytest.mark.parametrize("axis", [None, 0, 1, -1])
@pytest.mark.parametrize("sorted_", [0, 1])
def test_unique(axis: int | None, sorted_: int) -> None:
    x = np.array([[2, 1, 2, 1], [0, 3, 0, 3], [2, 1, 2, 1]], np.float32)
    attrs = {"sorted": sorted_} if axis is None else {"sorted": sorted_, "axis": axis}
    if sorted_:
        check_node("Unique", [x], attrs, opset=11, num_outputs=4)
    else:  # onnx.reference mishandles unsorted order
        check_node("Unique", [x], attrs, opset=11, num_outputs=4, oracle="onnxruntime")


def test_unique_unsorted_first_occurrence() -> None:
    x = np.array([2.0, 1.0, 1.0, 3.0, 4.0, 3.0], np.float32)
    y, idx, inv, cnt = run_node("Unique", [x], {"sorted": 0}, opset=11, num_outputs=4)
    np.testing.assert_array_equal(y, [2, 1, 3, 4])
    np.testing.assert_array_equal(idx, [0, 1, 3, 4])
    np.testing.assert_array_equal(inv, [0, 1, 1, 2, 3, 2])
    np.testing.assert_array_equal(cnt, [1, 2, 2, 1])
    (yb,) = run_node("Unique", [x.astype(ml_dtypes.bfloat16)], opset=28)
    assert yb.dtype == ml_dtypes.bfloat16 and list(yb.astype(np.float32)) == [1, 2, 3, 4]


@pytest.mark.parametrize(("batch_axis", "time_axis"), [(1, 0), (0, 1)])
def test_reverse_sequence(batch_axis: int, time_axis: int) -> None:
    x = rand(4, 4, 2)
    lens = np.array([4, 3, 1, 2], I64)
    attrs = {"batch_axis": batch_axis, "time_axis": time_axis}
    check_node("ReverseSequence", [x, lens], attrs, opset=10)


@pytest.mark.parametrize(("mode", "opset"), [("DCR", 13), ("CRD", 13), ("DCR", 1)])
def test_depth_space_roundtrip(mode: str, opset: int) -> None:
    x = rand(2, 8, 3, 2)
    attrs = {"blocksize": 2, "mode": mode} if opset >= 11 else {"blocksize": 2}
    (y,) = check_node("DepthToSpace", [x], attrs, opset=opset)
    check_node(
        "SpaceToDepth", [y], {"blocksize": 2}, opset=13, expected=[x] if mode == "DCR" else None
    )
    (z,) = run_node("SpaceToDepth", [y], {"blocksize": 2, "mode": mode}, opset=28)
    np.testing.assert_array_equal(z, x)


@pytest.mark.parametrize(
    ("shape", "axes"), [([3, 4, 2], None), ([5, 2, 2], None), ([2, 7], [0, 1]), ([6], [-1])]
)
def test_center_crop_pad(shape: list, axes: list | None) -> None:
    x = rand(4, 5, 2)
    attrs = {} if axes is None else {"axes": axes}
    check_node("CenterCropPad", [x, np.array(shape, I64)], attrs, opset=18)


@pytest.mark.parametrize(
    ("attrs", "image", "block"),
    [({}, [5, 5], [1, 5]), ({"pads": [0, 1, 0, 1]}, [5, 5], [1, 5]),
     ({"strides": [2, 2], "dilations": [1, 2]}, [6, 7], [2, 2]), ({}, [4, 3, 3], [2, 1, 2])],
)  # fmt: skip
def test_col2im(attrs: dict, image: list, block: list) -> None:
    nd = len(image)
    dil = attrs.get("dilations", [1] * nd)
    st = attrs.get("strides", [1] * nd)
    pads = attrs.get("pads", [0] * (2 * nd))
    counts = [(image[d] + pads[d] + pads[d + nd] - dil[d] * (block[d] - 1) - 1) // st[d] + 1
              for d in range(nd)]  # fmt: skip
    x = rand(2, 3 * int(np.prod(block)), int(np.prod(counts)))
    check_node("Col2Im", [x, np.array(image, I64), np.array(block, I64)], attrs, opset=18)


@pytest.mark.parametrize(
    ("args", "dtype", "opset"),
    [((1, 10, 3), np.int32, 11), ((10, -4, -3), np.int64, 11), ((0.5, 3.0, 0.7), np.float32, 11),
     ((1, 5, 2), np.int16, 11), ((1, 1, 1), np.int32, 11), ((1.0, 5.0, 0.5), np.float16, 27),
     ((2.0, -3.0, -1.5), ml_dtypes.bfloat16, 27)],
)  # fmt: skip
def test_range(args: tuple, dtype: type, opset: int) -> None:
    ins = [np.array(a, dtype) for a in args]
    if dtype in (np.float16, ml_dtypes.bfloat16):
        s, lim, d = (float(a) for a in args)
        want = np.arange(s, lim, d, dtype=np.float32).astype(dtype)
        check_node("Range", ins, opset=opset, expected=[want])
    else:
        check_node("Range", ins, opset=opset)


@pytest.mark.parametrize(("start", "end"), [(0, None), (1, None), (-2, None), (1, -1), (5, 2)])
def test_shape_slices(start: int, end: int | None) -> None:
    attrs = {"start": start} if end is None else {"start": start, "end": end}
    check_node("Shape", [rand(2, 3, 4)], attrs, opset=15)
    check_node("Shape", [rand(2, 3).astype(ml_dtypes.bfloat16)], opset=24,
               expected=[np.array([2, 3], I64)])  # fmt: skip


@pytest.mark.parametrize("mode", ["nearest", "linear"])
@pytest.mark.parametrize("opset", [7, 9])
def test_upsample(mode: str, opset: int) -> None:
    x = rand(1, 2, 3, 4)
    scales = np.array([1, 1, 2, 3], np.float32)
    if opset == 7:
        check_node("Upsample", [x], {"mode": mode, "scales": list(scales)}, opset=7,
                   oracle="onnxruntime")  # fmt: skip
    else:
        check_node("Upsample", [x, scales], {"mode": mode}, opset=9, oracle="onnxruntime")


@pytest.mark.parametrize("mode", ["linear", "cubic"])
@pytest.mark.parametrize("scale", [0.6, 0.35, 1.5])
@pytest.mark.parametrize("coord", ["half_pixel", "align_corners", "pytorch_half_pixel"])
def test_resize_antialias(mode: str, scale: float, coord: str) -> None:
    x = rand(1, 2, 7, 9)
    scales = np.array([1, 1, scale, scale], np.float32)
    attrs = {"mode": mode, "antialias": 1, "coordinate_transformation_mode": coord}
    check_node("Resize", [x, None, scales], attrs, opset=19, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("mode", ["linear", "cubic"])
def test_resize_align_corners_downsample(mode: str) -> None:
    x = rand(1, 1, 4, 6)
    scales = np.array([1, 1, 0.6, 0.6], np.float32)
    attrs = {"mode": mode, "coordinate_transformation_mode": "align_corners"}
    check_node("Resize", [x, None, scales], attrs, opset=13, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("with_mask", [False, True])
def test_dropout_training_seeded(with_mask: bool) -> None:
    x = rand(3, 4, 5)
    ratio, seed = np.array(0.3, np.float32), 7
    outs = run_node("Dropout", [x, ratio, np.array(True)], {"seed": seed}, opset=13,
                    num_outputs=2 if with_mask else 1)  # fmt: skip
    mask = np.random.RandomState(seed).uniform(0, 1, x.shape) >= 0.3
    np.testing.assert_allclose(outs[0], x * mask / np.float32(0.7), rtol=1e-6)
    assert outs[0].dtype == np.float32
    if with_mask:
        np.testing.assert_array_equal(outs[1], mask)
    state = np.random.get_state()[1][:4].copy()
    run_node("Dropout", [x, ratio, np.array(True)], {"seed": seed}, opset=13)
    np.testing.assert_array_equal(np.random.get_state()[1][:4], state)  # global RNG untouched


def test_old_opsets() -> None:
    x = rand(2, 3, 4)
    check_node("Reshape", [x], {"shape": [4, 0, -1]}, opset=1, expected=[x.reshape(4, 3, -1)])
    check_node("Concat", [x, x], opset=1, expected=[np.concatenate([x, x], axis=1)])
    check_node("Split", [x], {"axis": 2, "split": [1, 3]}, opset=1, num_outputs=2,
               expected=[x[:, :, :1], x[:, :, 1:]])  # fmt: skip
    check_node("Split", [x, np.array([3, 1], I64)], {"axis": 2}, opset=1, num_outputs=2,
               expected=[x[:, :, :3], x[:, :, 3:]])  # fmt: skip
    padded = np.pad(x, [(0, 0), (1, 2), (0, 1)], constant_values=1.5)
    check_node("Pad", [x], {"paddings": [0, 1, 0, 0, 2, 1], "value": 1.5}, opset=1,
               expected=[padded])  # fmt: skip
    (y,) = run_node("Tile", [x, np.array(3, I64), np.array(1, I64)], opset=1)
    np.testing.assert_array_equal(y, np.tile(x, (1, 3, 1)))
    (y,) = run_node("Dropout", [x], {"is_test": 1}, opset=6)
    np.testing.assert_array_equal(y, x)
