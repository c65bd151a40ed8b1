"""Tolerances per dtype and the error measures."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from conformance.precision import Tolerance, compare_values, measure, tolerance_for


@pytest.mark.parametrize(
    "dtype",
    [
        np.float64,
        np.float32,
        np.float16,
        ml_dtypes.bfloat16,
        ml_dtypes.float8_e4m3fn,
        ml_dtypes.float8_e5m2,
    ],
)
def test_one_ulp_apart(dtype: type) -> None:
    a = np.array([1.0, -2.0, 0.0], dtype=dtype)
    info = ml_dtypes.finfo(dtype)
    b = a.copy()
    b[0] = np.array(1.0 + float(info.eps), dtype=dtype)
    assert measure(b, a).max_ulp == 1
    assert measure(a, a).max_ulp == 0
    assert measure(np.array([-0.0], dtype=dtype), np.array([0.0], dtype=dtype)).max_ulp == 0


def test_errors_are_measured_even_when_passing() -> None:
    want = np.array([1.0, 2.0, 0.0], np.float32)
    got = want + np.float32(1e-7)
    verdict, _, stats = compare_values(got, want, Tolerance(1e-3, 1e-6))
    assert verdict == "ok" and 0 < stats.max_abs < 1e-6 and stats.max_ulp >= 1


def test_verdicts() -> None:
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert compare_values(a.astype(np.float64), a, None)[0] == "wrong_type"
    assert compare_values(a.reshape(3, 2), a, None)[0] == "wrong_type"
    assert compare_values(a + 1, a, None)[0] == "mismatch"
    assert compare_values(np.array([np.nan]), np.array([np.nan]), None)[0] == "ok"
    assert compare_values(np.array([np.inf]), np.array([-np.inf]), None)[0] == "mismatch"
    assert compare_values([a, a], [a, a + 1], None)[0] == "mismatch"
    assert compare_values(np.array([3], np.int64), np.array([4], np.int64), None)[0] == "mismatch"


def test_tolerance_rules() -> None:
    case = Tolerance(1e-3, 1e-7)
    assert tolerance_for(np.dtype(np.float32), case) == Tolerance(1e-3, 1e-6)
    assert tolerance_for(np.dtype(ml_dtypes.bfloat16), case).rtol > 1e-3
    assert tolerance_for(np.dtype(np.int32), case) == Tolerance(0.0, 0.0)
    assert tolerance_for(np.dtype(np.float32), case, Tolerance(0.5, 0.5)) == Tolerance(0.5, 0.5)
