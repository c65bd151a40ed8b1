"""Waivers, pass rates and grade, the four reports, the CLI and the pytest plugin."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from conformance.report import write_reports
from conformance.summary import build_report, grade
from conformance.waivers import ConfigError, load_config
from ortcore.cli import main as ortcore_main

from .conftest import run

WAIVERS = """
[[waiver]]
pattern = "^node/test_add$"
reason = "Add is off by one half (known bug #1)"

[[waiver]]
pattern = "^node/test_relu$"
reason = "stale: Relu was fixed"

[[tolerance]]
pattern = "^generated/dtype_Add_float$"
rtol = 0.0
atol = 1.0
"""


@pytest.fixture
def waivers(tmp_path: Path) -> str:
    path = tmp_path / "waivers.toml"
    path.write_text(WAIVERS)
    return str(path)


def test_waivers_and_tolerance_overrides(faulty_plugin: str, waivers: str) -> None:
    out = run(
        "faulty-wrong",
        ("node", "generated"),
        r"^(node/test_(add|relu|neg)|generated/dtype_Add_float)$",
        config=waivers,
    )
    r = {x.id: x for x in out.results}
    assert r["node/test_add"].outcome == "waived"
    assert r["node/test_add"].original_outcome == "mismatch"
    assert "#1" in r["node/test_add"].waiver
    assert r["node/test_relu"].outcome == "unexpected_pass"
    assert r["node/test_neg"].outcome == "passed"
    assert r["generated/dtype_Add_float"].outcome == "passed"  # atol 1 covers the 0.5 error
    assert r["generated/dtype_Add_float"].tolerance == {"rtol": 0.0, "atol": 1.0}
    summary = build_report(out)["summary"]
    assert summary["outcomes"]["waived"] == 1
    assert summary["attempted"] == 3 and summary["passed"] == 3
    assert summary["unexpected_passes"] == ["node/test_relu"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[[waiver]]\npattern = "x"\n', "needs a 'reason'"),
        ('[[waiver]]\npattern = "("\nreason = "r"\n', "bad pattern"),
        ('[[waiver]]\npattern = "x"\nreason = "r"\nwhy = 1\n', "unknown key"),
        ('[[waiver]]\npattern = "x"\nreason = "r"\noutcomes = ["passed"]\n', "cannot be waived"),
        ("[[nope]]\n", "unknown table"),
        ("not toml [", "cannot read"),
    ],
)
def test_bad_waivers_file_is_refused_clearly(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "w.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=r"w\.toml") as info:
        load_config(path)
    assert message in str(info.value)


def test_grade_scale() -> None:
    assert [grade(p, False) for p in (95, 80, 60, 30, 10)] == ["A", "B", "C", "D", "F"]
    assert grade(99, True) == "D" and grade(10, True) == "F"


def test_reports_are_written_and_consistent(faulty_plugin: str, tmp_path: Path) -> None:
    out = run(
        "faulty-wrong", ("contract", "generated"), r"contract/(loads|claimed)|dtype_(Add|Neg|Exp)_"
    )
    report = build_report(out)
    paths = write_reports(report, tmp_path / "rep")
    assert sorted(p.name for p in paths) == ["junit.xml", "report.html", "report.json", "report.md"]
    data = json.loads((tmp_path / "rep" / "report.json").read_text())
    assert data["schema"] == "ortcore-conformance/1"
    assert set(data) >= {"environment", "settings", "summary", "matrix", "error_stats", "cases"}
    env = data["environment"]
    assert env["provider"]["name"] == "FaultyWrongExecutionProvider"
    assert set(env["versions"]) >= {"ortcore", "provider", "onnx", "numpy"}
    s = data["summary"]
    assert s["contract"]["failed"] == ["contract/claimed_runs"]
    assert s["grade"] in "ABCDF" and s["total"] == len(data["cases"]) - 2
    add = data["matrix"]["ops"]["Add"]
    assert add["float"]["failed"] == 1 and add["int32"]["unsupported"] == 1
    assert data["matrix"]["ops"]["Neg"]["float"]["passed"] == 1
    assert data["error_stats"]["worst"][0]["id"].startswith("generated/dtype_Add")
    suites = ET.parse(tmp_path / "rep" / "junit.xml").getroot()
    failures = sum(int(s.get("failures", 0)) for s in suites)
    skipped = sum(int(s.get("skipped", 0)) for s in suites)
    assert failures == s["failed"] + 1 and skipped == s["outcomes"]["unsupported"]
    html = (tmp_path / "rep" / "report.html").read_text()
    assert "<script src" not in html and "http" not in html.split("</style>")[0]
    assert "FaultyWrongExecutionProvider" in html and "generated/dtype_Add_float" in html
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "Grade" in md and "| Add |" in md


def test_ortcore_conformance_command(faulty_plugin: str, tmp_path: Path, capsys: Any) -> None:
    code = ortcore_main(
        [
            "conformance",
            "--provider",
            "faulty-shape",
            "--plugin",
            faulty_plugin,
            "--kinds",
            "contract",
            "-k",
            "output_types|loads",
            "--report",
            str(tmp_path),
            "--failures",
        ]
    )
    text = capsys.readouterr().out
    assert code == 1
    assert "wrong_type" in text and "contract/output_types" in text
    assert (tmp_path / "report.html").exists()
    assert (
        ortcore_main(
            [
                "conformance",
                "--provider",
                "faulty-good",
                "--plugin",
                faulty_plugin,
                "--kinds",
                "contract",
                "-k",
                "loads",
            ]
        )
        == 0
    )
    assert (
        ortcore_main(["conformance", "--provider", "no-such-provider", "--kinds", "contract"]) == 2
    )


def test_pytest_plugin(faulty_plugin: str, tmp_path: Path) -> None:
    """The plugin is registered by ortcore's ``pytest11`` entry point: no ``-p`` needed."""
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "--pyargs",
        "conformance",
        "--ortcore-provider",
        "faulty-wrong",
        "--ortcore-plugin",
        faulty_plugin,
        "--ortcore-suites",
        "contract",
        "--ortcore-report",
        str(tmp_path),
        "-q",
        "-p",
        "no:cacheprovider",
        "-k",
        "loads or claimed_runs or unknown",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=Path(__file__).parents[2])
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "1 failed, 2 passed" in proc.stdout, proc.stdout
    assert "contract/claimed_runs" in proc.stdout
    assert json.loads((tmp_path / "report.json").read_text())["summary"]["contract"]["total"] == 3
