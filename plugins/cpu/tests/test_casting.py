"""Cast, CastLike, QuantizeLinear and DequantizeLinear into ml_dtypes' types
against an exact reference (:func:`conformance.cast_reference.cast_exact`),
under whichever ml_dtypes is installed: the conversions whose ``astype``
answers changed in ml_dtypes 0.7 (sub-byte integers from out-of-range, NaN and
infinite values; float64 and 64-bit integers to bfloat16, float8 and float4;
bfloat16/float8/float4 to integers out of range)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from conformance.cast_reference import cast_exact
from ep_sdk.testing import KernelKit
from onnx_ir import DataType

from ortcore_cpu.kernels.casting import cast_array
from ortcore_cpu.provider import CPUExecutionProvider

kit = KernelKit(CPUExecutionProvider, opset=21, threads=2)

SUB_BYTE = [DataType.INT4, DataType.UINT4, DataType.INT2, DataType.UINT2]
FLOAT8 = [
    DataType.FLOAT8E4M3FN,
    DataType.FLOAT8E4M3FNUZ,
    DataType.FLOAT8E5M2,
    DataType.FLOAT8E5M2FNUZ,
]
ROUNDED = [DataType.BFLOAT16, *FLOAT8, DataType.FLOAT4E2M1]
ML_FLOATS = [*ROUNDED, DataType.FLOAT8E8M0]
NUMPY_FLOATS = [DataType.FLOAT16, DataType.FLOAT, DataType.DOUBLE]
INTS = [
    DataType.INT8, DataType.INT16, DataType.INT32, DataType.INT64,
    DataType.UINT8, DataType.UINT16, DataType.UINT32, DataType.UINT64,
]  # fmt: skip

# out of every sub-byte range, ties, just inside and outside the bounds, specials
EDGES = [0.0, -0.0, 0.5, -0.5, 0.9, -0.9, 1.5, -1.5, 2.5, -2.5, 3.0, 3.99, 4.0, -4.0, 7.0, 7.9,
         8.0, -8.0, -8.5, -8.9, -9.0, 15.0, 15.9, 16.0, 100.0, -100.0, 320.0, -320.0, 1e10,
         -1e10, 1e300, np.nan, -np.nan, np.inf, -np.inf]  # fmt: skip


def _bits(a: np.ndarray) -> np.ndarray:
    return a.view(f"u{a.itemsize}") if a.dtype != np.bool_ else a


def _same(got: np.ndarray, want: np.ndarray, what: str) -> None:
    assert got.dtype == want.dtype, what
    bad = np.nonzero(_bits(got) != _bits(want))[0]
    assert not bad.size, (
        f"{what}: {bad.size} differ, e.g. got {_bits(got)[bad[:6]]} want {_bits(want)[bad[:6]]}"
    )


def _values(t: DataType) -> np.ndarray:
    """Values of type ``t``: every bit pattern of the byte-sized ml_dtypes types,
    :data:`EDGES` of numpy's floats, the bounds and a spread of the integers."""
    d = np.dtype(t.numpy())
    if t in ML_FLOATS or t in SUB_BYTE:
        n = 16 if t in (DataType.FLOAT4E2M1, DataType.INT4, DataType.UINT4) else 256
        n = 4 if t in (DataType.INT2, DataType.UINT2) else n
        if t == DataType.BFLOAT16:
            return np.arange(0, 1 << 16, 7, dtype=np.uint16).view(d)
        return np.arange(n, dtype=np.uint8).view(d)
    if d.kind == "f":
        with np.errstate(over="ignore"):
            return np.array(EDGES, np.float64).astype(d)
    info = np.iinfo(d)
    ints = [info.min, info.max, info.min + 1, info.max - 1, *range(-20, 21), 127, 128, 255, 256]
    ints += [300, -300, 2**31 - 1, -(2**31), 2**63 - 1, 2**64 - 1]
    return np.array([v for v in ints if info.min <= v <= info.max], d)


@pytest.mark.parametrize("to", SUB_BYTE, ids=lambda t: t.name)
@pytest.mark.parametrize("src", [*NUMPY_FLOATS, *ML_FLOATS, *INTS, *SUB_BYTE], ids=lambda t: t.name)
def test_cast_to_sub_byte_ints(src: DataType, to: DataType) -> None:
    """Floats truncate, 0 when NaN, infinite or out of range; integers keep their low bits."""
    if src == to:
        return
    x = _values(src)
    _same(cast_array(x, to), cast_exact(x, to.numpy()), f"{src.name}->{to.name}")


def test_sub_byte_casts_out_of_range_spelled_out() -> None:
    x = np.array([7.9, 8.0, -8.9, -9.0, 100.0, np.nan, np.inf, -np.inf], np.float32)
    got = cast_array(x, DataType.INT4).astype(np.int8)
    np.testing.assert_array_equal(got, [7, 0, -8, 0, 0, 0, 0, 0])
    ints = cast_array(np.array([100, -100, 16, -17], np.int64), DataType.INT4).astype(np.int8)
    np.testing.assert_array_equal(ints, [4, -4, 0, -1])
    small = cast_array(np.array([-5, 7, -8], ml_dtypes.int4), DataType.INT2).astype(np.int8)
    np.testing.assert_array_equal(small, [-1, -1, 0])


def _near_midpoints(t: DataType) -> np.ndarray:
    """float64 values on, just above and just below the midpoints between
    neighbours of type ``t``, closer than float32 can tell apart from them."""
    d = np.dtype(t.numpy())
    every = np.arange(1 << 16, dtype=np.uint16).view(d) if d.itemsize == 2 else _values(t)
    grid = np.unique(every.astype(np.float64))
    grid = grid[np.isfinite(grid)]
    mids = (grid[1:] + grid[:-1]) / 2
    mids = mids[mids != 0]
    out = np.concatenate([mids, mids * (1 + 2.0**-30), mids * (1 - 2.0**-30), grid])
    assert d.itemsize <= 2
    return np.concatenate([out, -out, np.array(EDGES)])


def _wide_ints(dtype: type) -> np.ndarray:
    """Integers past float32's 24 bits near ties of bfloat16 (8 bits): a tie,
    one above and one below, at every scale the type holds."""
    info = np.iinfo(dtype)
    vals = []
    for k in range(1, 64):
        for m in (0x101, 0x103, 0x1FF):
            for off in (-1, 0, 1):
                v = (m << k) + off
                for s in (v, -v):
                    if info.min <= s <= info.max:
                        vals.append(s)
    vals += [info.min, info.max]
    return np.array(vals, dtype)


@pytest.mark.parametrize("saturate", [True, False])
@pytest.mark.parametrize("to", ROUNDED, ids=lambda t: t.name)
def test_float64_rounds_once(to: DataType, saturate: bool) -> None:
    x = _near_midpoints(to)
    want = cast_exact(x, to.numpy(), saturate)
    _same(cast_array(x, to, saturate), want, f"float64->{to.name}")
    (node,) = kit.run_node("Cast", [x], {"to": int(to), "saturate": int(saturate)}, opset=25)
    _same(node, want, f"Cast node float64->{to.name}")


@pytest.mark.parametrize("saturate", [True, False])
@pytest.mark.parametrize("to", ROUNDED, ids=lambda t: t.name)
@pytest.mark.parametrize("src", [np.int32, np.uint32, np.int64, np.uint64])
def test_wide_integers_round_once(src: type, to: DataType, saturate: bool) -> None:
    x = _wide_ints(src)
    _same(cast_array(x, to, saturate), cast_exact(x, to.numpy(), saturate), f"{src}->{to.name}")


def test_rounding_once_spelled_out() -> None:
    """1 + 2**-8 + 2**-30 lies above bfloat16's tie between 1 and 1 + 2**-7;
    through float32 it would be the tie itself and round to 1."""
    x = np.array([1 + 2.0**-8 + 2.0**-30, (0x101 << 40) + 1], np.float64)
    got = cast_array(x, DataType.BFLOAT16).astype(np.float64)
    np.testing.assert_array_equal(got, [1 + 2.0**-7, 0x102 << 40])
    big = cast_array(np.array([(0x101 << 40) + 1], np.int64), DataType.BFLOAT16)
    assert float(big[0]) == float(0x102 << 40)


@pytest.mark.parametrize("to", INTS, ids=lambda t: t.name)
@pytest.mark.parametrize("src", ML_FLOATS, ids=lambda t: t.name)
def test_ml_floats_to_integers(src: DataType, to: DataType) -> None:
    """Truncated toward zero; 0 when NaN, infinite or out of ``to``'s range."""
    x = _values(src)
    _same(cast_array(x, to), cast_exact(x, to.numpy()), f"{src.name}->{to.name}")


def test_ml_floats_to_integers_spelled_out() -> None:
    x = np.array([320.0, -320.0, 96.0, np.inf, np.nan], np.float32).astype(ml_dtypes.float8_e5m2)
    np.testing.assert_array_equal(cast_array(x, DataType.INT8), [0, 0, 96, 0, 0])
    np.testing.assert_array_equal(cast_array(x, DataType.UINT8), [0, 0, 96, 0, 0])


def test_castlike_to_int4_node() -> None:
    x = np.arange(-12, 13, dtype=np.float16).reshape(5, 5) + np.float16(0.5)
    like = np.zeros(1, ml_dtypes.int4)
    (got,) = kit.run_node("CastLike", [x, like])
    _same(got, cast_exact(x, ml_dtypes.int4), "CastLike float16->int4")


def test_quantize_int32_to_float8_rounds_once() -> None:
    """int32 / scale is float64 here; 1.0625 + 2**-28 must round up to 1.125."""
    x = np.array(
        [int(1.0625 * 2**30) + 4, int(1.0625 * 2**30), -(int(1.0625 * 2**30) + 4)], np.int32
    )
    s = np.array(2.0**30, np.float32)
    zp = np.zeros((), ml_dtypes.float8_e4m3fn)
    (got,) = kit.run_node("QuantizeLinear", [x, s, zp])
    want = cast_exact(x.astype(np.float64) / 2.0**30, ml_dtypes.float8_e4m3fn)
    _same(got, want, "QuantizeLinear int32->e4m3fn")
    np.testing.assert_array_equal(got.astype(np.float32), [1.125, 1.0, -1.125])


def test_dequantize_int32_to_bfloat16_rounds_once() -> None:
    x = np.array([0x101 * 2**20 + 1, -(0x101 * 2**20 + 1), 0x101 * 2**20, 3], np.int32)
    s = np.array(1.0, ml_dtypes.bfloat16)
    (got,) = kit.run_node("DequantizeLinear", [x, s])
    _same(got, cast_exact(x.astype(np.float64), ml_dtypes.bfloat16), "DequantizeLinear int32->bf16")


def test_quantize_float16_by_bfloat16_scale() -> None:
    """numpy promotes float16 with bfloat16 (to float32) only under ml_dtypes 0.7."""
    x = np.array([1.0, -3.5, 100.0, 0.25], np.float16)
    s = np.array(0.5, ml_dtypes.bfloat16)
    zp = np.zeros((), np.int8)
    (got,) = kit.run_node("QuantizeLinear", [x, s, zp], opset=23)
    np.testing.assert_array_equal(got, [2, -7, 127, 0])
