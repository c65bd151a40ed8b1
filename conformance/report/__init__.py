"""Write the reports: ``report.json``, ``junit.xml``, ``report.md``, ``report.html``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .html import render_html
from .junit import render_junit
from .markdown import render_markdown

__all__ = ["render_html", "render_junit", "render_markdown", "write_reports"]


def write_reports(report: dict[str, Any], directory: str | Path) -> list[Path]:
    """Write the four reports into ``directory`` (created if needed); return their paths."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    files = {
        "report.json": json.dumps(report, indent=1, allow_nan=False) + "\n",
        "junit.xml": render_junit(report),
        "report.md": render_markdown(report),
        "report.html": render_html(report),
    }
    paths = []
    for name, text in files.items():
        (d / name).write_text(text, encoding="utf-8")
        paths.append(d / name)
    return paths
