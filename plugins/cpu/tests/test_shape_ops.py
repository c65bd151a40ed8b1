"""Shape, indexing and generator ops against onnx.reference."""

from __future__ import annotations

import numpy as np
import pytest
from ep_sdk.testing import KernelKit

from ortcore_cpu.provider import CPUExecutionProvider

kit = KernelKit(CPUExecutionProvider, opset=17, threads=2)
check_node, run_node = kit.check_node, kit.run_node

RNG = np.random.default_rng(5)
I64 = np.int64


def rand(*shape: int, dtype: type = np.float32) -> np.ndarray:
    return RNG.standard_normal(shape).astype(dtype)


@pytest.mark.parametrize(
    ("shape", "allowzero", "opset"),
    [([4, 6], 0, 13), ([-1, 2], 0, 5), ([0, -1], 0, 14), ([2, 0, 12], 0, 14), ([0, 3], 1, 14)],
)
def test_reshape(shape: list, allowzero: int, opset: int) -> None:
    x = rand(2, 3, 4) if shape != [0, 3] else rand(0, 3)
    attrs = {"allowzero": allowzero} if opset >= 14 else {}
    if shape == [2, 0, 12]:
        x = rand(2, 1, 12)
    check_node("Reshape", [x, np.array(shape, I64)], attrs, opset=opset)


@pytest.mark.parametrize(("axis", "opset"), [(0, 9), (1, 9), (3, 11), (-1, 13), (-3, 13)])
def test_flatten(axis: int, opset: int) -> None:
    check_node("Flatten", [rand(2, 3, 4)], {"axis": axis}, opset=opset)


@pytest.mark.parametrize("opset", [1, 11, 13])
@pytest.mark.parametrize("axes", [None, [1], [1, 3]])
def test_squeeze(opset: int, axes: list | None) -> None:
    x = rand(2, 1, 3, 1)
    if opset < 13:
        check_node("Squeeze", [x], {} if axes is None else {"axes": axes}, opset=opset)
    else:
        extra = [] if axes is None else [np.array(axes, I64)]
        check_node("Squeeze", [x, *extra], opset=opset)
    if opset >= 11:
        check_node("Squeeze", [x, np.array([-1], I64)] if opset >= 13 else [x],
                   {} if opset >= 13 else {"axes": [-1]}, opset=opset)  # fmt: skip


@pytest.mark.parametrize(
    ("opset", "axes"), [(1, [0]), (1, [0, 3]), (11, [-1]), (11, [1, -1]), (13, [0, 2]), (13, [-1])]
)
def test_unsqueeze(opset: int, axes: list) -> None:
    x = rand(3, 4)
    if opset < 13:
        check_node("Unsqueeze", [x], {"axes": axes}, opset=opset)
    else:
        check_node("Unsqueeze", [x, np.array(axes, I64)], opset=opset)


@pytest.mark.parametrize("perm", [None, [0, 2, 1], [2, 0, 1]])
def test_transpose(perm: list | None) -> None:
    (y,) = check_node(
        "Transpose", [rand(2, 3, 4)], {} if perm is None else {"perm": perm}, opset=13
    )
    assert y.flags.c_contiguous


@pytest.mark.parametrize(("axis", "opset"), [(0, 4), (1, 11), (-1, 13)])
def test_concat(axis: int, opset: int) -> None:
    shapes = [(2, 3, 4), (2, 3, 4), (2, 3, 4)]
    check_node("Concat", [rand(*s) for s in shapes], {"axis": axis}, opset=opset)
    empty = list(shapes[0])
    empty[axis] = 0
    check_node("Concat", [rand(*shapes[0]), rand(*empty)], {"axis": axis}, opset=opset)


@pytest.mark.parametrize(
    ("attrs", "opset"), [({}, 13), ({"start": 1}, 15), ({"start": -2, "end": -1}, 15)]
)
def test_shape(attrs: dict, opset: int) -> None:
    check_node("Shape", [rand(2, 3, 4)], attrs, opset=opset)
    check_node("Size", [rand(2, 3, 4)], opset=13)


def test_identity_and_dropout() -> None:
    x = rand(2, 3)
    check_node("Identity", [x], opset=13)
    for opset in (7, 10, 12, 13):
        y, mask = run_node("Dropout", [x], opset=opset, num_outputs=2)
        np.testing.assert_array_equal(y, x)
        assert mask.dtype == (np.float32 if opset < 10 else np.bool_) and mask.all()


def test_dropout_training_mode() -> None:
    x = np.ones((100, 100), np.float32)
    args = [x, np.array(0.5, np.float32), np.array(True)]
    y, mask = run_node("Dropout", args, {"seed": 3}, opset=13, num_outputs=2)
    np.testing.assert_allclose(y[mask], 2.0)
    assert (y[~mask] == 0).all() and 0.4 < mask.mean() < 0.6
    (same,) = run_node("Dropout", [x, np.array(0.5, np.float32), np.array(False)], opset=13)
    np.testing.assert_array_equal(same, x)


def test_expand_and_tile() -> None:
    x = rand(3, 1)
    check_node("Expand", [x, np.array([2, 3, 4], I64)], opset=13)
    check_node("Expand", [x, np.array([1, 1], I64)], opset=8)
    check_node("Tile", [rand(2, 3), np.array([2, 1], I64)], opset=13)
    check_node("Tile", [rand(2, 3), np.array([0, 2], I64)], opset=6)


@pytest.mark.parametrize(
    ("src", "to"),
    [(np.float32, 7), (np.float32, 6), (np.float64, 1), (np.int64, 1), (np.float32, 9),
     (np.int32, 10), (np.bool_, 1), (np.float32, 2)],
)  # fmt: skip
def test_cast(src: type, to: int) -> None:
    x = (rand(3, 4) * 10).astype(src)
    if to == 2:
        x = np.abs(x)
    check_node("Cast", [x], {"to": to}, opset=13)


def test_constant_variants() -> None:
    value = rand(2, 3)
    from onnx import numpy_helper

    check_node("Constant", [], {"value": numpy_helper.from_array(value)}, opset=9)
    check_node("Constant", [], {"value_float": 2.5}, opset=12)
    check_node("Constant", [], {"value_ints": [1, 2, 3]}, opset=13)


def test_constant_of_shape() -> None:
    from onnx import numpy_helper

    check_node("ConstantOfShape", [np.array([2, 3], I64)], opset=9)
    v = numpy_helper.from_array(np.array([7], np.int32))
    check_node("ConstantOfShape", [np.array([2, 0], I64)], {"value": v}, opset=20)


@pytest.mark.parametrize(
    ("start", "limit", "delta", "dtype"),
    [
        (0, 10, 3, np.int64),
        (10, 0, -3, np.int32),
        (0.5, 2.0, 0.25, np.float32),
        (5, 1, 1, np.int64),
    ],
)
def test_range(start: float, limit: float, delta: float, dtype: type) -> None:
    args = [np.array(v, dtype) for v in (start, limit, delta)]
    check_node("Range", args, opset=11)


@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("indices", [[0, 2], [[1, -1]], 1, []])
def test_gather(axis: int, indices: object) -> None:
    idx = np.array(indices, I64)
    check_node("Gather", [rand(3, 4, 5), idx], {"axis": axis}, opset=13)
    check_node("Gather", [rand(3, 4, 5), idx.astype(np.int32)], {"axis": axis}, opset=11)


SLICE_CASES = [
    ([0, 1], [2, 3], None, None),
    ([1], [-1], [1], None),
    ([-1], [-1000], [0], [-1]),
    ([10], [0], [2], [-2]),
    ([0, 0], [100, 100], [1, 2], [2, 3]),
    ([2], [1], [0], None),  # empty
]


@pytest.mark.parametrize(("starts", "ends", "axes", "steps"), SLICE_CASES)
def test_slice(starts: list, ends: list, axes: list | None, steps: list | None) -> None:
    x = rand(4, 5, 6)
    inputs = [x, np.array(starts, I64), np.array(ends, I64)]
    if axes is not None or steps is not None:
        inputs.append(np.array(axes if axes is not None else list(range(len(starts))), I64))
    if steps is not None:
        inputs.append(np.array(steps, I64))
    check_node("Slice", inputs, opset=13)
    if steps is None:
        attrs: dict = {"starts": starts, "ends": ends}
        if axes is not None:
            attrs["axes"] = axes
        check_node("Slice", [x], attrs, opset=1)


@pytest.mark.parametrize("opset", [2, 11, 13, 18])
def test_split(opset: int) -> None:
    x = rand(6, 4)
    check_node("Split", [x], {"axis": 0}, opset=opset, num_outputs=3)
    if opset < 13:
        check_node("Split", [x], {"axis": 0, "split": [1, 5]}, opset=opset, num_outputs=2)
    else:
        check_node("Split", [x, np.array([1, 5], I64)], {"axis": 0}, opset=opset, num_outputs=2)
    if opset >= 18:
        check_node("Split", [rand(7, 2)], {"axis": 0, "num_outputs": 3}, opset=opset, num_outputs=3)


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge"])
@pytest.mark.parametrize("opset", [2, 11, 18, 19])
def test_pad(mode: str, opset: int) -> None:
    x = rand(3, 4)
    pads = [1, 2, 0, 1]
    if opset < 11:
        check_node("Pad", [x], {"pads": pads, "mode": mode, "value": 1.5}, opset=opset)
        return
    inputs = [x, np.array(pads, I64), np.array(1.5, np.float32)]
    check_node("Pad", inputs, {"mode": mode}, opset=opset)
    # onnx.reference refuses negative pads (cropping): use onnxruntime.
    check_node("Pad", [x, np.array([-1, 1, 0, -2], I64)], {"mode": mode}, opset=opset,
               oracle="onnxruntime")  # fmt: skip
    if opset >= 18:
        check_node("Pad", [x, np.array([1, 2], I64), np.array(0, np.float32), np.array([1], I64)],
                   {"mode": mode}, opset=opset)  # fmt: skip
    if opset >= 19:
        check_node("Pad", [x, np.array(pads, I64)], {"mode": "wrap"}, opset=opset)


@pytest.mark.parametrize("largest", [0, 1])
@pytest.mark.parametrize("axis", [-1, 0])
@pytest.mark.parametrize("dtype", [np.float32, np.int64])
def test_topk(largest: int, axis: int, dtype: type) -> None:
    x = RNG.integers(0, 5, (4, 6)).astype(dtype)  # ties
    k = np.array([3], I64)
    check_node("TopK", [x, k], {"axis": axis, "largest": largest}, opset=11, num_outputs=2)


def test_topk_opsets() -> None:
    x = rand(4, 6)
    check_node("TopK", [x], {"k": 2}, opset=1, num_outputs=2)
    check_node("TopK", [x, np.array([2], I64)], opset=10, num_outputs=2)


def test_transpose_node_checks_its_perm_per_input_rank() -> None:
    """Without ``perm`` a Transpose reverses the axes of any rank it is fed;
    with one, an input of another rank is refused, each time."""
    x3 = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    reverse = kit.build_node("Transpose", [x3], {})
    for x in (x3, x3[0], x3.reshape(2, 3, 2, 2), x3):
        (y,) = reverse(x)
        np.testing.assert_array_equal(y, x.transpose())
        assert y.flags.c_contiguous
    keep_last = kit.build_node("Transpose", [x3], {"perm": [1, 0, 2]})
    (y,) = keep_last(x3)
    np.testing.assert_array_equal(y, x3.transpose(1, 0, 2))
    assert y.flags.c_contiguous
    for _ in range(2):
        with pytest.raises(ValueError, match="not a permutation"):
            keep_last(x3.reshape(2, 3, 2, 2))
