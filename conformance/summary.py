"""From results to the report's numbers: counts, pass rates, grade, matrix, errors.

Pass rates are over operator and model cases (contract checks are counted on
their own): ``pass_rate = passed / total`` and ``pass_rate_attempted =
passed / attempted``, where ``attempted`` leaves out ``unsupported`` and
``waived`` cases; ``passed`` includes unexpected passes of waived cases.
"""

from __future__ import annotations

import datetime
import os
import platform
import statistics
import sys
from collections import Counter
from collections.abc import Sequence
from typing import Any

from .outcomes import (
    FAILURES,
    OUTCOMES,
    PASSED,
    SKIPPED,
    UNEXPECTED_PASS,
    UNSUPPORTED,
    WAIVED,
    CaseResult,
)

__all__ = ["GRADES", "SCHEMA", "build_report", "dimension_of", "failures_by", "grade", "op_of"]

SCHEMA = "ortcore-conformance/1"
GRADES: tuple[tuple[float, str], ...] = ((90.0, "A"), (75.0, "B"), (50.0, "C"), (25.0, "D"))
"""Lowest pass rate (percent of all cases) for each letter; below the last: F."""
CONTRACT_CAP = "D"
"""The best grade a provider failing a contract check can get."""


def grade(pass_rate: float, contract_failed: bool) -> str:
    """Letter for a pass rate in percent; a failed contract check caps it at ``D``."""
    letter = next((g for low, g in GRADES if pass_rate >= low), "F")
    if contract_failed and letter < CONTRACT_CAP:
        return CONTRACT_CAP
    return letter


def _rates(results: Sequence[CaseResult]) -> dict[str, Any]:
    counts = Counter(r.outcome for r in results)
    total = len(results) - counts[SKIPPED]  # the oracle could not judge them
    passed = counts[PASSED] + counts[UNEXPECTED_PASS]
    attempted = total - counts[UNSUPPORTED] - counts[WAIVED]
    return {
        "total": total,
        "passed": passed,
        "failed": sum(counts[o] for o in FAILURES),
        "attempted": attempted,
        "pass_rate": round(100.0 * passed / total, 2) if total else 0.0,
        "pass_rate_attempted": round(100.0 * passed / attempted, 2) if attempted else 0.0,
        "outcomes": {o: counts[o] for o in OUTCOMES},
    }


def _summary(results: Sequence[CaseResult]) -> dict[str, Any]:
    contract = [r for r in results if r.suite == "contract"]
    cases = [r for r in results if r.suite != "contract"]
    out = _rates(cases)
    contract_failed = any(r.outcome in FAILURES for r in contract)
    out["grade"] = grade(out["pass_rate"], contract_failed)
    out["contract"] = {
        "total": len(contract),
        "passed": sum(r.outcome == PASSED for r in contract),
        "failed": [r.id for r in contract if r.outcome in FAILURES],
    }
    out["suites"] = {
        s: _rates([r for r in results if r.suite == s]) for s in ("contract", "operators", "models")
    }
    models = [r for r in results if r.nodes]
    out["model_nodes"] = {
        "total": sum(r.nodes["total"] for r in models if r.nodes),
        "provider": sum(r.nodes["provider"] for r in models if r.nodes),
    }
    out["unexpected_passes"] = [r.id for r in results if r.outcome == UNEXPECTED_PASS]
    return out


def _matrix(results: Sequence[CaseResult]) -> dict[str, Any]:
    """Operator x dtype: passed and total single-node cases in each cell."""
    cells: dict[str, dict[str, dict[str, int]]] = {}
    dtypes: set[str] = set()
    for r in results:
        if r.suite != "operators" or not r.op:
            continue
        dtype = r.dtype or "-"
        dtypes.add(dtype)
        cell = cells.setdefault(r.op, {}).setdefault(
            dtype, {"passed": 0, "failed": 0, "unsupported": 0, "total": 0}
        )
        cell["total"] += 1
        if r.outcome in (PASSED, UNEXPECTED_PASS):
            cell["passed"] += 1
        elif r.outcome == UNSUPPORTED:
            cell["unsupported"] += 1
        elif r.outcome != WAIVED:
            cell["failed"] += 1
    return {"dtypes": sorted(dtypes), "ops": {op: cells[op] for op in sorted(cells)}}


FAMILY_DIMENSIONS: dict[str, str] = {
    "dtype": "dtype",
    "bcast": "rank",
    "empty": "empty",
    "layout": "layout",
    "special": "special",
    "limits": "limits",
    "wide": "wide",
    "large": "large",
    "negaxis": "axis",
    "square": "square",
}
"""A generated case's family (its name's first part) -> the dimension it explores;
a family not listed is its own dimension."""
DETAIL = 300
"""Characters of an example's detail kept in ``failures_by``."""


def dimension_of(r: CaseResult) -> str:
    """What a case varies: an explored case's own dimension; a generated case's
    family's (:data:`FAMILY_DIMENSIONS`); ``node`` for onnx's node tests; the kind
    for the others (``contract``, ``simple``, ``light``, ...)."""
    if r.dimension:
        return r.dimension
    kind, _, name = r.id.partition("/")
    if kind == "explore" and name.count("/") >= 1:  # <Op>/<dimension>/<detail>
        return name.split("/")[1]
    if kind == "generated":
        family = name.split("_", 1)[0]
        return FAMILY_DIMENSIONS.get(family, family)
    return kind


def op_of(r: CaseResult) -> str:
    """The op a case tests, for grouping: its single node's op; else read off an
    explored or generated case's name; ``a+b`` for a few ops; ``(contract)`` and
    ``(models)`` for the contract checks and model cases."""
    if r.suite == "contract":
        return "(contract)"
    if r.suite == "models":
        return "(models)"
    if r.op:
        return r.op
    kind, _, name = r.id.partition("/")
    if kind == "explore" and "/" in name:
        return name.split("/", 1)[0]
    if kind == "generated" and name.count("_") >= 1:
        return name.split("_")[1]
    if r.ops:
        joined = "+".join(r.ops[:3]) + ("+…" if len(r.ops) > 3 else "")
        return joined
    return "?"


def failures_by(results: Sequence[CaseResult]) -> dict[str, Any]:
    """Failed cases grouped by op and dimension: where a bug's pattern shows.

    ``{"dimensions": {dim: count}, "ops": {op: {dim: {"count", "example",
    "detail", "repro"}}}}``; ops and dimensions with the most failures first,
    each cell's example its first failed case in run order.
    """
    cells: dict[str, dict[str, dict[str, Any]]] = {}
    dims: Counter[str] = Counter()
    totals: Counter[str] = Counter()
    for r in results:
        if not r.failed:
            continue
        op, dim = op_of(r), dimension_of(r)
        dims[dim] += 1
        totals[op] += 1
        row = cells.setdefault(op, {})
        cell = row.get(dim)
        if cell is None:
            row[dim] = {
                "count": 1,
                "example": r.id,
                "detail": r.detail[:DETAIL],
                "repro": r.repro,
            }
        else:
            cell["count"] += 1
    ops = {
        op: dict(sorted(cells[op].items(), key=lambda kv: (-kv[1]["count"], kv[0])))
        for op, _ in sorted(totals.items(), key=lambda kv: (-kv[1], kv[0]))
    }
    return {"dimensions": dict(sorted(dims.items(), key=lambda kv: (-kv[1], kv[0]))), "ops": ops}


def _ulp_key(r: CaseResult) -> float:
    """Largest ULP error first; an infinite one (``None``) before all."""
    ulp = (r.error or {}).get("max_ulp", 0.0)
    return -float("inf") if ulp is None else -ulp


def _error_stats(results: Sequence[CaseResult]) -> dict[str, Any]:
    by: dict[str, list[CaseResult]] = {}
    for r in results:
        if r.error is not None:
            by.setdefault(r.output_dtype or r.dtype or "-", []).append(r)

    def worst(rs: Sequence[CaseResult], key: str) -> float | None:
        vals = [r.error[key] for r in rs if r.error is not None]
        return None if any(v is None for v in vals) else max(vals or [0.0])  # type: ignore[type-var]

    by_dtype = {}
    for dtype, rs in sorted(by.items()):
        ulps = [r.error["max_ulp"] for r in rs if r.error and r.error["max_ulp"] is not None]
        by_dtype[dtype] = {
            "cases": len(rs),
            "exact": sum(1 for r in rs if r.error and r.error["max_abs"] == 0),
            "max_abs": worst(rs, "max_abs"),
            "max_rel": worst(rs, "max_rel"),
            "max_ulp": worst(rs, "max_ulp"),
            "median_ulp": statistics.median(ulps) if ulps else 0.0,
        }
    numeric = [r for rs in by.values() for r in rs]
    numeric.sort(key=_ulp_key)
    return {
        "by_dtype": by_dtype,
        "worst": [{"id": r.id, "outcome": r.outcome, **(r.error or {})} for r in numeric[:15]],
    }


def _device_text(device: str) -> str:
    if device != "cpu":
        return device
    name = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    name = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"cpu: {name}, {os.cpu_count()} logical cores"


def _version(module: str) -> str:
    try:
        return str(__import__(module).__version__)
    except Exception:
        return "not installed"


def environment(provider: str) -> dict[str, Any]:
    """Versions and the device: what a report's numbers depend on."""
    import ortcore
    from ortcore.plugins import default_manager

    e = default_manager().resolve(provider)
    return {
        "provider": {
            "name": e.name,
            "aliases": list(e.aliases),
            "version": e.version,
            "plugin": e.plugin,
            "device": e.device,
        },
        "device": _device_text(e.device),
        "versions": {
            "ortcore": ortcore.__version__,
            "provider": e.version,
            "onnx": _version("onnx"),
            "numpy": _version("numpy"),
            "ml_dtypes": _version("ml_dtypes"),
            "python": sys.version.split()[0],
        },
        "platform": platform.platform(),
    }


def build_report(out: Any) -> dict[str, Any]:
    """The ``report.json`` object of a :class:`conformance.suite.RunOutput`."""
    s = out.settings
    return {
        "schema": SCHEMA,
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "seconds": round(out.seconds, 2),
        "environment": environment(out.target.provider),
        "settings": {
            "provider": s.provider,
            "options": dict(out.target.options),
            "kinds": list(s.kinds),
            "pattern": s.pattern,
            "jobs": s.jobs,
            "isolate": s.isolate,
            "timeout": s.timeout,
            "waivers": out.config.path or None,
        },
        "summary": _summary(out.results),
        "matrix": _matrix(out.results),
        "error_stats": _error_stats(out.results),
        "failures_by": failures_by(out.results),
        "cases": [r.to_dict() for r in out.results],
    }
