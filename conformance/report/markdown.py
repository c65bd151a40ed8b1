"""``report.md``: the summary a provider's documentation can include."""

from __future__ import annotations

from typing import Any

from ..outcomes import OUTCOMES

__all__ = ["render_markdown", "summary_lines"]

MAX_LISTED = 200


def _fmt(v: Any) -> str:
    if v is None:
        return "inf"
    if isinstance(v, float):
        return f"{v:.3g}"
    return str(v)


def summary_lines(report: dict[str, Any]) -> list[str]:
    """The headline: provider, grade, pass rates, outcome counts (Markdown)."""
    env, s = report["environment"], report["summary"]
    c = s["contract"]
    lines = [
        f"# Conformance of {env['provider']['name']} {env['provider']['version']}",
        "",
        f"**Grade {s['grade']}** — {s['passed']}/{s['total']} cases passed "
        f"(**{s['pass_rate']:.2f}%** of all, **{s['pass_rate_attempted']:.2f}%** of the "
        f"{s['attempted']} attempted); contract checks {c['passed']}/{c['total']} passed"
        + (f", failed: {', '.join(c['failed'])}" if c["failed"] else "")
        + ".",
        "",
        "| suite | total | passed | attempted | pass rate | pass rate (attempted) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, r in s["suites"].items():
        if r["total"]:
            lines.append(
                f"| {name} | {r['total']} | {r['passed']} | {r['attempted']} | "
                f"{r['pass_rate']:.2f}% | {r['pass_rate_attempted']:.2f}% |"
            )
    lines += ["", "| outcome | cases |", "|---|---:|"]
    lines += [f"| {OUTCOMES[o]} | {n} |" for o, n in s["outcomes"].items() if n]
    mn = s["model_nodes"]
    if mn["total"]:
        lines += ["", f"Model cases: the provider took {mn['provider']} of {mn['total']} nodes."]
    v = env["versions"]
    lines += [
        "",
        f"Environment: ortcore {v['ortcore']}, onnx {v['onnx']}, numpy {v['numpy']}, "
        f"Python {v['python']}; device {env['device']}; {report['seconds']:.0f} s.",
    ]
    return lines


def _matrix(report: dict[str, Any]) -> list[str]:
    m = report["matrix"]
    if not m["ops"]:
        return []
    dtypes = m["dtypes"]
    lines = [
        "",
        "## Operators by dtype",
        "",
        "Passed/total single-node cases; `-` no case, `·` all unsupported.",
        "",
        "| op | " + " | ".join(dtypes) + " |",
        "|---|" + "---:|" * len(dtypes),
    ]
    for op, row in m["ops"].items():
        cells = []
        for d in dtypes:
            cell = row.get(d)
            if cell is None:
                cells.append("-")
            elif cell["unsupported"] == cell["total"]:
                cells.append("·")
            else:
                mark = "" if cell["passed"] == cell["total"] else " ✗" if cell["failed"] else ""
                cells.append(f"{cell['passed']}/{cell['total']}{mark}")
        lines.append(f"| {op} | " + " | ".join(cells) + " |")
    return lines


def _errors(report: dict[str, Any]) -> list[str]:
    e = report["error_stats"]
    lines = [
        "",
        "## Numeric error",
        "",
        "| dtype | cases | exact | max abs | max rel | max ULP | median ULP |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for d, st in e["by_dtype"].items():
        lines.append(
            f"| {d} | {st['cases']} | {st['exact']} | {_fmt(st['max_abs'])} | "
            f"{_fmt(st['max_rel'])} | {_fmt(st['max_ulp'])} | {_fmt(st['median_ulp'])} |"
        )
    if e["worst"]:
        lines += [
            "",
            "Largest errors:",
            "",
            "| case | outcome | max abs | max rel | max ULP |",
            "|---|---|---:|---:|---:|",
        ]
        for w in e["worst"]:
            lines.append(
                f"| `{w['id']}` | {w['outcome']} | {_fmt(w['max_abs'])} | "
                f"{_fmt(w['max_rel'])} | {_fmt(w['max_ulp'])} |"
            )
    return lines


MAX_OPS = 100


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _failures_by(report: dict[str, Any]) -> list[str]:
    """Failed cases by op and dimension: counts, and each cell's first case."""
    fb = report.get("failures_by") or {}
    if not fb.get("ops"):
        return []
    dims = list(fb["dimensions"])
    lines = [
        "",
        "## Failures by op and dimension",
        "",
        "Failed cases per op (rows) and dimension explored (columns), with the first "
        "failing case of each cell; its detail and reproducer are in report.json.",
        "",
        "| op | " + " | ".join(f"{d} ({fb['dimensions'][d]})" for d in dims) + " |",
        "|---|" + "---|" * len(dims),
    ]
    ops = list(fb["ops"].items())
    for op, row in ops[:MAX_OPS]:
        cells = [
            f"**{row[d]['count']}** `{_md(row[d]['example'])}`" if d in row else "" for d in dims
        ]
        lines.append(f"| {_md(op)} | " + " | ".join(cells) + " |")
    if len(ops) > MAX_OPS:
        lines.append(f"| … {len(ops) - MAX_OPS} more ops in report.json |" + " |" * len(dims))
    return lines


def _cases(report: dict[str, Any]) -> list[str]:
    bad = [c for c in report["cases"] if c["outcome"] not in ("passed", "unsupported", "skipped")]
    if not bad:
        return []
    lines = [
        "",
        "## Cases not passed (unsupported and skipped ones left out)",
        "",
        "| case | outcome | detail |",
        "|---|---|---|",
    ]
    for c in bad[:MAX_LISTED]:
        detail = (c["waiver"] or c["detail"]).replace("|", "\\|").replace("\n", " ")[:200]
        lines.append(f"| `{c['id']}` | {c['outcome']} | {detail} |")
    if len(bad) > MAX_LISTED:
        lines.append(f"| … | | {len(bad) - MAX_LISTED} more in report.json |")
    return lines


def render_markdown(report: dict[str, Any]) -> str:
    """The whole Markdown report."""
    lines = (
        summary_lines(report)
        + _failures_by(report)
        + _cases(report)
        + _matrix(report)
        + _errors(report)
    )
    return "\n".join(lines) + "\n"
