"""The Cython fast paths (Softmax, LayerNormalization, reductions, Transpose,
Concat, Gather, Resize) against onnx.reference / numpy on odd shapes:
non-contiguous inputs, size-1 dims, empty tensors, negative axes, several
thread counts, float32 and float64."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from ep_sdk.testing import KernelKit

from ortcore_cpu.provider import CPUExecutionProvider

kit = KernelKit(CPUExecutionProvider, opset=17, threads=2)
build_node, reference_node = kit.build_node, kit.reference_node

RNG = np.random.default_rng(7)
FLOAT_TYPES = [np.float32, np.float64]


def _rand(shape: Sequence[int], dtype: Any = np.float32) -> np.ndarray:
    return RNG.standard_normal(shape).astype(dtype)


def _strided(x: np.ndarray) -> np.ndarray:
    """A non-contiguous view holding the same values as ``x``."""
    big = np.zeros((*x.shape[:-1], 2 * x.shape[-1] if x.ndim else 1), x.dtype)
    if x.ndim == 0:
        return x
    big[..., ::2] = x
    view = big[..., ::2]
    assert x.size == 0 or not view.flags.c_contiguous or x.shape[-1] <= 1
    return view


def _check(op: str, inputs: list[np.ndarray], attrs: dict[str, Any] | None = None, *,
           opset: int = 18, n_outputs: int = 1, rtol: float = 1e-5, atol: float = 1e-6,
           strided: tuple[int, ...] = (0,), want: list[np.ndarray] | None = None) -> None:  # fmt: skip
    """Run with 1 and 4 threads, on contiguous and strided inputs, and compare
    values, shapes and dtypes with onnx.reference (or ``want``)."""
    if want is None:
        want = reference_node(op, inputs, attrs, opset=opset, num_outputs=n_outputs)
    for threads in (1, 4):
        compute = build_node(op, inputs, attrs, opset=opset, num_outputs=n_outputs, threads=threads)
        variants = [inputs, [(_strided(x) if i in strided else x) for i, x in enumerate(inputs)]]
        for feed in variants:
            before = [x.copy() for x in feed]
            got = compute(*feed)
            for x, b in zip(feed, before, strict=True):
                np.testing.assert_array_equal(x, b)  # inputs untouched
            assert len(got) == len(want)
            for g, w in zip(got, want, strict=True):
                w = np.asarray(w)
                assert g.shape == w.shape and g.dtype == w.dtype, (op, g.shape, w.shape, g.dtype)
                np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=op)


@pytest.mark.parametrize("dtype", FLOAT_TYPES)
@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize(
    ("shape", "axis", "opset"),
    [((3, 5, 7), -1, 13), ((1, 1, 1), 2, 13), ((4, 1000), 1, 13), ((2, 3, 4), 1, 11),
     ((2, 3, 4), -2, 11), ((0, 5), -1, 13), ((3, 0), 1, 11), ((2, 3, 4), 0, 13), ((9,), 0, 13)],
)  # fmt: skip
def test_softmax(op: str, dtype: Any, shape: tuple[int, ...], axis: int, opset: int) -> None:
    x = _rand(shape, dtype) * 10
    want = None
    if opset < 13:  # coerced to 2-D at axis (onnx.reference ignores this)
        rows = int(np.prod(shape[: axis % len(shape)]))
        flat = x.reshape(rows, -1)
        want = [reference_node(op, [flat], {"axis": -1}, opset=13)[0].reshape(shape)]
    _check(op, [x], {"axis": axis}, opset=opset, want=want)


def test_softmax_special_values() -> None:
    """Rows with -inf, NaN or +inf; LogSoftmax stays finite where Softmax underflows."""
    x = np.array([[0.0, -np.inf, 1.0], [-np.inf] * 3, [np.nan, 0, 1], [np.inf, 0, 1],
                  [-200.0, 0.0, -90.0]], np.float32)  # fmt: skip
    x64 = x.astype(np.float64)
    with np.errstate(all="ignore"):
        shifted = x64 - x64.max(axis=1, keepdims=True)
        log_sum = np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    want = {"Softmax": np.exp(shifted - log_sum), "LogSoftmax": shifted - log_sum}
    for op, w in want.items():
        got = build_node(op, [x], {"axis": -1}, opset=13)(x)[0]
        assert got.dtype == np.float32
        np.testing.assert_allclose(got, w, rtol=1e-5, atol=1e-30 if op == "LogSoftmax" else 1e-38)


@pytest.mark.parametrize("dtype", FLOAT_TYPES)
@pytest.mark.parametrize(
    ("shape", "axis", "pshape", "bias"),
    [((4, 8), -1, (8,), True), ((2, 3, 5), 1, (3, 5), True), ((2, 3, 5), -1, (5,), False),
     ((1, 1), 0, (1, 1), True), ((3, 1, 768), -1, (768,), True), ((0, 4), -1, (4,), True),
     ((2, 3, 4), -2, (4,), True)],
)  # fmt: skip
def test_layer_norm(dtype: Any, shape: tuple[int, ...], axis: int, pshape: tuple[int, ...],
                    bias: bool) -> None:  # fmt: skip
    ins = [_rand(shape, dtype), _rand(pshape, dtype)]
    if bias:
        ins.append(_rand(pshape, dtype))
    attrs = {"axis": axis, "epsilon": 1e-3}
    y, mean, inv_std = reference_node("LayerNormalization", ins, attrs, opset=17, num_outputs=3)
    # Mean and InvStdDev are float32 (stash_type=1), as shape inference and
    # onnxruntime type them; onnx.reference gives them the input's type.
    want = [y, np.asarray(mean, np.float32), np.asarray(inv_std, np.float32)]
    _check("LayerNormalization", ins, attrs, n_outputs=3, rtol=1e-4, atol=1e-5, opset=17,
           want=want)  # fmt: skip


@pytest.mark.parametrize("dtype", FLOAT_TYPES)
@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin"])
@pytest.mark.parametrize("keep", [0, 1])
@pytest.mark.parametrize(
    ("shape", "axes"),
    [((3, 4, 5), [-1]), ((3, 4, 5), [2]), ((3, 4, 5), None), ((3, 4, 5), [0, 1, 2]),
     ((200, 700), [1]), ((300, 300), None), ((1, 1), [-1]), ((7,), [0]), ((3, 4, 5), [1]),
     ((2, 0), [0]), ((0, 3), [1])],
)  # fmt: skip
def test_reduce(
    op: str, dtype: Any, keep: int, shape: tuple[int, ...], axes: list[int] | None
) -> None:
    x = _rand(shape, dtype)
    ins = [x] if axes is None else [x, np.array(axes, np.int64)]
    _check(op, ins, {"keepdims": keep}, opset=18, rtol=1e-4, atol=1e-4)


def test_reduce_nan_propagates() -> None:
    x = _rand((4, 100000))
    x[1, 5] = np.nan
    x[3, 99999] = np.nan
    for op in ("ReduceMax", "ReduceMin", "ReduceSum"):
        for axes in ([-1], None):
            ins = [x] if axes is None else [x, np.array(axes, np.int64)]
            got = build_node(op, ins, {"keepdims": 0}, opset=18, threads=4)(*ins)[0]
            want = reference_node(op, ins, {"keepdims": 0}, opset=18)[0]
            np.testing.assert_allclose(got, want, rtol=1e-4)


@pytest.mark.parametrize(
    ("shape", "perm"),
    [((2, 3), [1, 0]), ((1, 12, 128, 64), [0, 2, 1, 3]), ((2, 3, 4, 5), [0, 2, 3, 1]),
     ((2, 3, 4, 5, 6), [4, 0, 3, 1, 2]), ((2, 1, 3, 1, 4, 2), [5, 4, 3, 2, 1, 0]),
     ((37, 45), [1, 0]), ((1, 1, 5), [2, 0, 1]), ((3, 0, 2), [2, 1, 0]), ((70, 3, 33), [2, 1, 0]),
     ((5,), [0])],
)  # fmt: skip
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int8, np.float16, np.bool_, np.int64])
def test_transpose(shape: tuple[int, ...], perm: list[int], dtype: Any) -> None:
    x = (RNG.standard_normal(shape) * 50).astype(dtype)
    _check("Transpose", [x], {"perm": perm})


def test_transpose_default_perm_and_strings() -> None:
    _check("Transpose", [_rand((2, 3, 4))], {})
    s = np.array([["a", "bb"], ["c", "d"]], dtype=object)
    got = build_node("Transpose", [s], {})(s)[0]
    np.testing.assert_array_equal(got, s.T)


@pytest.mark.parametrize(
    ("shapes", "axis"),
    [([(1, 64, 3, 3)] * 4, 1), ([(2, 3), (2, 5)], -1), ([(2, 3), (4, 3)], 0), ([(2, 0, 3), (2, 2, 3)], 1),
     ([(3, 1), (3, 1), (3, 1)], 1), ([(1, 300000), (1, 7)], 1), ([(0, 3), (0, 3)], 0),
     ([(5,)], 0)],
)  # fmt: skip
@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.uint8, np.bool_])
def test_concat(shapes: list[tuple[int, ...]], axis: int, dtype: Any) -> None:
    ins = [(RNG.standard_normal(s) * 10).astype(dtype) for s in shapes]
    _check("Concat", ins, {"axis": axis}, strided=tuple(range(len(ins))))


@pytest.mark.parametrize("outer", [1, 2, 3, 9])
@pytest.mark.parametrize("threads", [1, 2, 3, 4])
def test_concat_pieces(outer: int, threads: int) -> None:
    """The copy kernel cuts blocks of any sizes (empty, under, at and over
    its piece of 64 KiB, one much larger than the others) into the threads'
    shares and writes every byte once."""
    from ortcore_cpu._ext import movement

    sizes = [0, 1, 65535, 65536, 65537, 3 * 65536 + 5, 17, 300_001]
    parts = [RNG.integers(0, 256, (outer, k), dtype=np.uint8) for k in sizes]
    out = np.full((outer, sum(sizes)), 7, np.uint8)
    movement.concat([p.reshape(-1) for p in parts], out.reshape(-1), outer, threads)
    np.testing.assert_array_equal(out, np.concatenate(parts, axis=1))


@pytest.mark.parametrize(
    ("shape", "ishape", "axis"),
    [((30, 8), (5,), 0), ((30, 8), (2, 3), -2), ((4, 6, 5), (3,), 1), ((4, 6, 5), (2, 2), -1),
     ((4, 6, 5), (), 0), ((4, 6, 5), (0,), 1), ((0, 6), (0,), 0), ((5, 1, 16), (7,), 0)],
)  # fmt: skip
@pytest.mark.parametrize("itype", [np.int64, np.int32])
@pytest.mark.parametrize("dtype", [np.float32, np.int16, np.float64])
def test_gather(shape: tuple[int, ...], ishape: tuple[int, ...], axis: int, itype: Any,
                dtype: Any) -> None:  # fmt: skip
    x = (RNG.standard_normal(shape) * 10).astype(dtype)
    n = shape[axis]
    idx = RNG.integers(-n, n, ishape).astype(itype) if n else np.zeros(ishape, itype)
    _check("Gather", [x, idx], {"axis": axis})


def test_gather_out_of_range() -> None:
    x = _rand((10, 8))
    for bad in (10, -11):
        idx = np.array([0, bad], np.int64)
        with pytest.raises(IndexError):
            build_node("Gather", [x, idx], {"axis": 0})(x, idx)


RESIZE_CASES = [
    ("linear", "half_pixel", (1, 3, 5, 7), [1, 1, 2.0, 1.5]),
    ("linear", "align_corners", (2, 2, 6, 4), [1, 1, 0.5, 3.0]),
    ("linear", "asymmetric", (1, 1, 1, 1), [1, 1, 3.0, 2.0]),
    ("linear", "pytorch_half_pixel", (1, 2, 4, 4), [1, 1, 0.25, 2.0]),
    ("nearest", "half_pixel", (1, 3, 5, 7), [1, 1, 2.0, 1.5]),
    ("nearest", "asymmetric", (2, 1, 4, 6), [1, 1, 0.5, 0.7]),
    ("nearest", "align_corners", (1, 2, 3, 3), [1, 1, 1.0, 2.0]),
    ("cubic", "half_pixel", (1, 2, 6, 5), [1, 1, 1.7, 0.6]),
    ("linear", "half_pixel", (1, 3, 5, 7), [1, 2, 2.0, 2.0]),
]


@pytest.mark.parametrize("dtype", FLOAT_TYPES)
@pytest.mark.parametrize(("mode", "coord", "shape", "scales"), RESIZE_CASES)
def test_resize_scales(mode: str, coord: str, shape: tuple[int, ...], scales: list[float],
                       dtype: Any) -> None:  # fmt: skip
    x = _rand(shape, dtype)
    ins = [x, np.zeros(0, np.float32), np.array(scales, np.float32)]
    attrs = {"mode": mode, "coordinate_transformation_mode": coord}
    _check("Resize", ins, attrs, opset=19, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("antialias", [0, 1])
def test_resize_sizes_axes(antialias: int) -> None:
    x = _rand((1, 2, 9, 8))
    sizes = np.array([4, 12], np.int64)
    ins = [x, np.zeros(0, np.float32), np.zeros(0, np.float32), sizes]
    attrs = {"mode": "linear", "axes": [2, 3], "antialias": antialias, "exclude_outside": 1}
    _check("Resize", ins, attrs, opset=19, rtol=1e-4, atol=1e-5)
    _check("Resize", ins, {"mode": "nearest", "axes": [2, 3], "nearest_mode": "ceil"}, opset=19)


_BINARY_SHAPES = [
    ((), ()),  # 0-d operands: the result is still an array
    ((2, 3), (2, 3)),
    ((70000,), (70000,)),  # threaded chunks
    ((2, 3), ()),
    ((1,), (4, 5)),
    ((1, 12, 8, 8), (1, 1, 1, 8)),  # attention mask
    ((1, 12, 8, 8), (1, 1, 8, 8)),  # causal mask
    ((300, 300), (300,)),  # bias row, threaded
    ((5,), (1, 1, 5)),  # the smaller operand has more dims
    ((0, 4), (4,)),
    ((4, 3), (4, 1)),  # declined: general broadcasting
]


@pytest.mark.parametrize(("sa", "sb"), _BINARY_SHAPES)
def test_binary_f32_matches_numpy_or_declines(sa: tuple, sb: tuple) -> None:
    from ortcore_cpu._ext import elementwise as ext

    rng = np.random.default_rng(0)
    a = np.asarray(rng.standard_normal(sa), np.float32)
    b = np.asarray(rng.standard_normal(sb) + 3, np.float32)
    for op, ufunc in enumerate((np.add, np.subtract, np.multiply, np.divide)):
        for x, y in ((a, b), (b, a)):
            out = ext.binary_f32(op, x, y, 2)
            if sb == (4, 1):
                assert out is None
                continue
            assert isinstance(out, np.ndarray) and out.dtype == np.float32
            np.testing.assert_array_equal(out, ufunc(x, y))
    assert ext.binary_f32(0, a.astype(np.float64), b, 1) is None
    strided = np.ones((4, 6), np.float32)[:, ::2]
    assert ext.binary_f32(0, strided, strided, 1) is None  # the caller copies
