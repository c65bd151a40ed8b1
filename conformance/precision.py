"""Tolerances per dtype, and the error measures reported for every numeric case.

A numeric output passes when every element satisfies
``|got - want| <= atol + rtol * |want|`` (NaN where NaN is expected, the same
infinities). The tolerance of a case is, in order of precedence:

1. a per-test override (the suite's :data:`BUILTIN_OVERRIDES`, then the
   ``[[tolerance]]`` entries of the user's configuration file);
2. otherwise the default of the output's dtype (:data:`DTYPE_TOLERANCES`),
   loosened to the case's own tolerance (as stored by onnx) for float32 and
   narrower floats. float64 outputs keep their own default: onnx stores
   rtol 1e-3 for every node test, which would let a float64 result computed in
   float32 pass.

Integer, boolean and string outputs must match exactly unless overridden.
Every numeric comparison also measures the maximum absolute error, the maximum
relative error (over elements whose expected value is non-zero) and the
maximum distance in units in the last place (ULP) in the output's own dtype.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

__all__ = [
    "BUILTIN_OVERRIDES",
    "DTYPE_TOLERANCES",
    "ErrorStats",
    "OP_TOLERANCES",
    "Tolerance",
    "ToleranceOverride",
    "compare_values",
    "is_float_dtype",
    "measure",
    "tolerance_for",
]


@dataclass(frozen=True)
class Tolerance:
    """Relative and absolute tolerance."""

    rtol: float
    atol: float


@dataclass(frozen=True)
class ToleranceOverride:
    """A tolerance for every case whose id matches ``pattern`` (``re.search``)."""

    pattern: str
    rtol: float
    atol: float
    reason: str = ""

    def matches(self, case_id: str) -> bool:
        """Whether the override applies to ``case_id``."""
        return re.search(self.pattern, case_id) is not None


DTYPE_TOLERANCES: dict[str, Tolerance] = {
    "float64": Tolerance(1e-9, 1e-12),
    "float32": Tolerance(1e-4, 1e-6),
    "float16": Tolerance(2e-3, 1e-3),
    "bfloat16": Tolerance(1.6e-2, 1e-2),
    "float8_e4m3fn": Tolerance(0.125, 1e-2),
    "float8_e4m3fnuz": Tolerance(0.125, 1e-2),
    "float8_e5m2": Tolerance(0.25, 1e-2),
    "float8_e5m2fnuz": Tolerance(0.25, 1e-2),
    "float8_e8m0fnu": Tolerance(0.5, 0.0),
    "float4_e2m1fn": Tolerance(0.5, 0.5),
}
"""Default tolerance per floating dtype; any other dtype must match exactly."""

OP_TOLERANCES: dict[str, Tolerance] = {
    # Exact zeros of a transform (the imaginary part at DC and Nyquist of a real
    # signal) are the cancellation of terms as large as the input: float32
    # arithmetic leaves about 1e-4 there (onnxruntime's FFT does), which an
    # absolute 1e-6 would call wrong.
    "DFT": Tolerance(1e-3, 1e-3),
    "STFT": Tolerance(1e-3, 1e-3),
}
"""Ops whose computed cases (explored) get a tolerance of their own, by op type."""


BUILTIN_OVERRIDES: tuple[ToleranceOverride, ...] = (
    ToleranceOverride(r"^light/test_densenet121$", 2e-3, 1e-7, "deep model, float32 sums"),
    # outputs near 1/K (K >= 1024): the dtype's atol would pass any sum
    ToleranceOverride(
        r"^explore/(Softmax|LpNormalization)/accumulate/.*_float16$", 2e-3, 1e-6, "outputs ~1/K"
    ),
    ToleranceOverride(
        r"^explore/(Softmax|LpNormalization)/accumulate/.*_bfloat16$", 1.6e-2, 1e-5, "outputs ~1/K"
    ),
    # com.microsoft quantized ops (conformance.qcontrib): onnxruntime's kernels
    # round after another order of float32 operations than the QDQ oracle
    ToleranceOverride(
        r"^explore/(QLinear\w+/|QGemm/[^/]+/quantized)", 0.0, 1.0, "one quantum: rounding ties"
    ),
)
"""Per-test tolerances the suite itself applies."""

_ML_FLOATS = {name for name in DTYPE_TOLERANCES if name not in ("float64", "float32", "float16")}
EXACT = Tolerance(0.0, 0.0)


def is_float_dtype(dtype: np.dtype) -> bool:
    """True for numpy floats and the ml_dtypes floats (bfloat16, float8, float4)."""
    return dtype.kind == "f" or dtype.name in _ML_FLOATS


def tolerance_for(
    dtype: np.dtype,
    case_tolerance: Tolerance | None,
    override: Tolerance | None = None,
) -> Tolerance:
    """The tolerance that applies to one output of a case (see the module docstring)."""
    if override is not None:
        return override
    if not is_float_dtype(dtype):
        return EXACT
    base = DTYPE_TOLERANCES.get(dtype.name, DTYPE_TOLERANCES["float32"])
    if case_tolerance is None or dtype.name == "float64":
        return base
    return Tolerance(max(base.rtol, case_tolerance.rtol), max(base.atol, case_tolerance.atol))


@dataclass
class ErrorStats:
    """The worst errors of a case over all its outputs and data sets."""

    max_abs: float = 0.0
    max_rel: float = 0.0
    max_ulp: float = 0.0

    def merge(self, other: ErrorStats) -> None:
        """Keep the larger of each measure."""
        self.max_abs = max(self.max_abs, other.max_abs)
        self.max_rel = max(self.max_rel, other.max_rel)
        self.max_ulp = max(self.max_ulp, other.max_ulp)

    def to_dict(self) -> dict[str, float | None]:
        """JSON-ready form (infinities become ``None``)."""
        return {k: (v if math.isfinite(v) else None) for k, v in vars(self).items()}


@cache
def _ranks(dtype: np.dtype) -> np.ndarray:
    """Every finite value of a small float dtype, sorted (+0 and -0 merged)."""
    bits = np.arange(2 ** (8 * dtype.itemsize), dtype=f"u{dtype.itemsize}")
    values = bits.view(dtype).astype(np.float64)
    return np.unique(values[np.isfinite(values)])


def _ulp_distance(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Units in the last place between finite floats of the same dtype (as float64)."""
    if got.dtype.itemsize >= 4:
        width = 8 * got.dtype.itemsize
        g = got.view(f"i{got.dtype.itemsize}").astype(np.int64)
        w = want.view(f"i{want.dtype.itemsize}").astype(np.int64)
        mask = np.int64((1 << (width - 1)) - 1)
        mg, mw = g & mask, w & mask
        same_sign = (g < 0) == (w < 0)
        # magnitudes are below 2**63, so their difference is exact in int64
        near = np.abs(mg - mw).astype(np.float64)
        far = mg.astype(np.float64) + mw.astype(np.float64)
        return np.where(same_sign | (mg == 0) | (mw == 0), np.maximum(near, 0), far)
    table = _ranks(got.dtype)
    rank = np.searchsorted(table, got.astype(np.float64)).astype(np.float64)
    return np.abs(rank - np.searchsorted(table, want.astype(np.float64)))


def measure(got: np.ndarray, want: np.ndarray) -> ErrorStats:
    """Error measures of ``got`` against ``want`` (same shape and dtype)."""
    if want.size == 0:
        return ErrorStats()
    g = got.astype(np.float64)
    w = want.astype(np.float64)
    both_nan = np.isnan(g) & np.isnan(w)
    same = (g == w) | both_nan
    if bool(same.all()):
        return ErrorStats()
    with np.errstate(all="ignore"):
        diff = np.where(same, 0.0, np.abs(g - w))
        diff = np.where(np.isnan(diff), np.inf, diff)
        nonzero = w != 0
        rel = np.where(nonzero & ~same, diff / np.abs(np.where(nonzero, w, 1.0)), 0.0)
        if is_float_dtype(want.dtype):
            finite = np.isfinite(g) & np.isfinite(w)
            ulp = _ulp_distance(got, want)
            ulp = np.where(same, 0.0, np.where(finite, ulp, np.inf))
            max_ulp = float(ulp.max())
        else:
            max_ulp = float(diff.max())
    return ErrorStats(float(diff.max()), float(rel.max()), max_ulp)


def _describe_mismatch(got: np.ndarray, want: np.ndarray, ok: np.ndarray, tol: Tolerance) -> str:
    bad = np.argwhere(~ok)
    first = tuple(int(i) for i in bad[0]) if bad.size and ok.ndim else ()
    g, w = (got[first], want[first]) if ok.ndim else (got, want)
    return (
        f"{len(bad) if ok.ndim else 1} of {ok.size} elements differ beyond "
        f"rtol={tol.rtol:g}, atol={tol.atol:g}; first at {list(first)}: got {g!r}, expected {w!r}"
    )


def compare_values(
    got: Any,
    want: Any,
    case_tolerance: Tolerance | None,
    override: Tolerance | None = None,
    where: str = "output",
) -> tuple[str, str, ErrorStats]:
    """Compare one output with its expected value.

    Returns:
        ``(verdict, detail, errors)``: verdict ``"ok"``, ``"mismatch"`` (values)
        or ``"wrong_type"`` (kind, dtype or shape), a message for failures,
        and the error measures (zero for exact, non-numeric outputs).
    """
    stats = ErrorStats()
    if isinstance(want, (list, tuple)):
        if not isinstance(got, (list, tuple)):
            return "wrong_type", f"{where}: expected a sequence, got {type(got).__name__}", stats
        if len(got) != len(want):
            return "wrong_type", f"{where}: sequence length {len(got)} != {len(want)}", stats
        verdict, detail = "ok", ""
        for i, (g, w) in enumerate(zip(got, want)):
            v, d, s = compare_values(g, w, case_tolerance, override, f"{where}[{i}]")
            stats.merge(s)
            if verdict == "ok" and v != "ok":
                verdict, detail = v, d
        return verdict, detail, stats
    if want is None:
        if got is not None:
            return "wrong_type", f"{where}: expected an empty optional, got a value", stats
        return "ok", "", stats
    if not isinstance(got, np.ndarray):
        if got is None or isinstance(got, (list, tuple)):
            return "wrong_type", f"{where}: expected a tensor, got {type(got).__name__}", stats
        got = np.asarray(got)
    want = np.asarray(want)
    if got.dtype != want.dtype and not (got.dtype.kind in "OUS" and want.dtype.kind in "OUS"):
        return "wrong_type", f"{where}: dtype {got.dtype} != expected {want.dtype}", stats
    if got.shape != want.shape:
        return "wrong_type", f"{where}: shape {got.shape} != expected {want.shape}", stats
    if want.dtype.kind in "OUS":
        if not np.array_equal(got.astype(object), want.astype(object)):
            return "mismatch", f"{where}: string values differ", stats
        return "ok", "", stats
    stats = measure(got, want)
    tol = tolerance_for(want.dtype, case_tolerance, override)
    if want.size == 0:
        return "ok", "", stats
    g, w = got.astype(np.float64), want.astype(np.float64)
    ok = np.isclose(g, w, rtol=tol.rtol, atol=tol.atol, equal_nan=True)
    if tol.rtol == 0 and tol.atol == 0:
        ok = (g == w) | (np.isnan(g) & np.isnan(w))
    if bool(np.all(ok)):
        return "ok", "", stats
    return "mismatch", f"{where}: {_describe_mismatch(got, want, ok, tol)}", stats


def override_for(case_id: str, overrides: Sequence[ToleranceOverride]) -> Tolerance | None:
    """The last override whose pattern matches ``case_id`` (user entries come last)."""
    found = None
    for o in (*BUILTIN_OVERRIDES, *overrides):
        if o.matches(case_id):
            found = Tolerance(o.rtol, o.atol)
    return found
