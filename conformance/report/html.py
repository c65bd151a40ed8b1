"""``report.html``: one self-contained page (inline CSS and script, no network)."""

from __future__ import annotations

import html
import json
from typing import Any

from ..outcomes import OUTCOMES

__all__ = ["render_html"]

CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:2em;color:#222}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:2px 6px}
th{background:#f4f4f4;position:sticky;top:0}.grade{font-size:3em;font-weight:bold}
.passed,.ok{background:#d8f5d0}.fail{background:#f8d0d0}.partial{background:#fbeec0}
.unsupported{background:#eee;color:#888}.waived{background:#e0e8ff}
td.detail{font-family:monospace;font-size:12px;max-width:60em;word-break:break-all}
"""
SCRIPT = """
function filt(){const q=document.getElementById('q').value.toLowerCase();
const o=document.getElementById('o').value;
for(const tr of document.querySelectorAll('#cases tbody tr')){
const t=tr.textContent.toLowerCase();
tr.style.display=(t.includes(q)&&(!o||tr.dataset.o===o))?'':'none';}}
"""
_CLASS = {"passed": "passed", "unsupported": "unsupported", "waived": "waived"}


def _e(x: Any) -> str:
    return html.escape(str(x))


def _num(v: Any) -> str:
    return "inf" if v is None else f"{v:.3g}" if isinstance(v, float) else _e(v)


def _summary(report: dict[str, Any]) -> str:
    s, env = report["summary"], report["environment"]
    rows = "".join(
        f"<tr><td>{_e(OUTCOMES[o])}</td><td>{n}</td></tr>" for o, n in s["outcomes"].items() if n
    )
    versions = ", ".join(f"{k} {_e(v)}" for k, v in env["versions"].items())
    c = s["contract"]
    return (
        f"<p><span class=grade>{_e(s['grade'])}</span> "
        f"{s['passed']}/{s['total']} passed: <b>{s['pass_rate']:.2f}%</b> of all, "
        f"<b>{s['pass_rate_attempted']:.2f}%</b> of {s['attempted']} attempted. "
        f"Contract checks {c['passed']}/{c['total']} passed"
        f"{'; failed: ' + _e(', '.join(c['failed'])) if c['failed'] else ''}.</p>"
        f"<p>Device: {_e(env['device'])}. Versions: {versions}. Run took "
        f"{report['seconds']:.0f} s.</p>"
        f"<table><tr><th>outcome</th><th>cases</th></tr>{rows}</table>"
    )


def _matrix(report: dict[str, Any]) -> str:
    m = report["matrix"]
    if not m["ops"]:
        return ""
    head = "".join(f"<th>{_e(d)}</th>" for d in m["dtypes"])
    body = []
    for op, row in m["ops"].items():
        cells = []
        for d in m["dtypes"]:
            c = row.get(d)
            if c is None:
                cells.append("<td></td>")
                continue
            if c["unsupported"] == c["total"]:
                cls, text = "unsupported", "·"
            else:
                cls = "ok" if c["passed"] == c["total"] else "fail" if c["failed"] else "partial"
                text = f"{c['passed']}/{c['total']}"
            cells.append(f"<td class={cls}>{text}</td>")
        body.append(f"<tr><th>{_e(op)}</th>{''.join(cells)}</tr>")
    return f"<h2>Operators by dtype</h2><table><tr><th>op</th>{head}</tr>{''.join(body)}</table>"


def _failures_by(report: dict[str, Any]) -> str:
    fb = report.get("failures_by") or {}
    if not fb.get("ops"):
        return ""
    dims = list(fb["dimensions"])
    head = "".join(f"<th>{_e(d)} ({fb['dimensions'][d]})</th>" for d in dims)
    body = []
    for op, row in fb["ops"].items():
        cells = []
        for d in dims:
            c = row.get(d)
            if c is None:
                cells.append("<td></td>")
                continue
            title = _e(c["repro"] or c["detail"])
            cells.append(
                f"<td class=fail title='{title}'><b>{c['count']}</b> "
                f"<small>{_e(c['example'])}</small></td>"
            )
        body.append(f"<tr><th>{_e(op)}</th>{''.join(cells)}</tr>")
    return (
        "<h2>Failures by op and dimension</h2><p>Failed cases per op and dimension explored; "
        "each cell names its first failing case (hover: its reproducer).</p>"
        f"<table><tr><th>op</th>{head}</tr>{''.join(body)}</table>"
    )


def _errors(report: dict[str, Any]) -> str:
    rows = "".join(
        f"<tr><td>{_e(d)}</td><td>{st['cases']}</td><td>{st['exact']}</td>"
        f"<td>{_num(st['max_abs'])}</td><td>{_num(st['max_rel'])}</td>"
        f"<td>{_num(st['max_ulp'])}</td><td>{_num(st['median_ulp'])}</td></tr>"
        for d, st in report["error_stats"]["by_dtype"].items()
    )
    return (
        "<h2>Numeric error</h2><table><tr><th>dtype</th><th>cases</th><th>exact</th>"
        f"<th>max abs</th><th>max rel</th><th>max ULP</th><th>median ULP</th></tr>{rows}</table>"
    )


def _cases(report: dict[str, Any]) -> str:
    options = "".join(f"<option value={o}>{_e(o)}</option>" for o in OUTCOMES)
    rows = []
    for c in report["cases"]:
        err = c.get("error") or {}
        cls = _CLASS.get(c["outcome"], "fail")
        nodes = f"{c['nodes']['provider']}/{c['nodes']['total']}" if c.get("nodes") else ""
        rows.append(
            f"<tr data-o={c['outcome']}><td>{_e(c['id'])}</td><td class={cls}>{c['outcome']}</td>"
            f"<td>{_num(err.get('max_abs', ''))}</td><td>{_num(err.get('max_ulp', ''))}</td>"
            f"<td>{nodes}</td><td>{c['seconds']:.3f}</td>"
            f"<td class=detail>{_e(c['waiver'] or c['detail'])[:600]}"
            f"{'<br>' + _e(c.get('repro', '')) if c.get('repro') else ''}</td></tr>"
        )
    return (
        "<h2>Cases</h2><p><input id=q placeholder='filter' oninput=filt()> "
        f"<select id=o onchange=filt()><option value=''>all outcomes</option>{options}</select></p>"
        "<table id=cases><thead><tr><th>case</th><th>outcome</th><th>max abs</th><th>max ULP</th>"
        "<th>nodes on provider</th><th>s</th><th>detail</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>"
    )


def render_html(report: dict[str, Any]) -> str:
    """The whole page."""
    name = report["environment"]["provider"]["name"]
    data = json.dumps(report["summary"]).replace("</", "<\\/")
    return (
        f"<!doctype html><html><head><meta charset=utf-8><title>Conformance: {_e(name)}</title>"
        f"<style>{CSS}</style></head><body><h1>Conformance of {_e(name)} "
        f"{_e(report['environment']['provider']['version'])}</h1>"
        f"{_summary(report)}{_failures_by(report)}{_matrix(report)}{_errors(report)}{_cases(report)}"
        f"<script type=application/json id=summary>{data}</script><script>{SCRIPT}</script>"
        "</body></html>\n"
    )
