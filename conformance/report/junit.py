"""``junit.xml``: one testsuite per suite, one testcase per case."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

__all__ = ["render_junit"]

_FAIL = {"mismatch", "wrong_type", "unexpected_pass"}
_ERROR = {"load_error", "run_error", "crash", "timeout"}


def render_junit(report: dict[str, Any]) -> str:
    """The report as JUnit XML (failures, errors, skipped for unsupported and waived)."""
    provider = report["environment"]["provider"]["name"]
    root = ET.Element("testsuites", name=f"ortcore conformance: {provider}")
    suites: dict[str, ET.Element] = {}
    stats: dict[str, dict[str, float]] = {}
    for case in report["cases"]:
        suite = case["suite"]
        if suite not in suites:
            suites[suite] = ET.SubElement(root, "testsuite", name=f"{provider}.{suite}")
            stats[suite] = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0, "time": 0.0}
        st = stats[suite]
        kind, _, name = case["id"].partition("/")
        tc = ET.SubElement(
            suites[suite],
            "testcase",
            classname=f"{suite}.{kind}",
            name=name,
            time=f"{case['seconds']:.4f}",
        )
        st["tests"] += 1
        st["time"] += case["seconds"]
        outcome, detail = case["outcome"], case["detail"]
        if outcome in _FAIL:
            ET.SubElement(tc, "failure", type=outcome, message=detail[:500]).text = detail
            st["failures"] += 1
        elif outcome in _ERROR:
            ET.SubElement(tc, "error", type=outcome, message=detail[:500]).text = detail
            st["errors"] += 1
        elif outcome in ("unsupported", "waived", "skipped"):
            why = case["waiver"] if outcome == "waived" else detail
            ET.SubElement(tc, "skipped", type=outcome, message=f"{outcome}: {why}"[:500])
            st["skipped"] += 1
        if case.get("error"):
            props = ET.SubElement(tc, "properties")
            for k, v in case["error"].items():
                ET.SubElement(props, "property", name=k, value=str(v))
    for suite, el in suites.items():
        for k, v in stats[suite].items():
            el.set(k, f"{v:.3f}" if k == "time" else str(int(v)))
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
