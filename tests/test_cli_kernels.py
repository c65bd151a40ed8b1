"""``ortcore providers --kernels [NAMES]``: by op as well as by provider, and
within the terminal's width."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ortcore.cli import main

pytest.importorskip("ortcore_cpu")


def test_an_op_name_lists_its_kernels_in_every_provider(capsys: Any) -> None:
    assert main(["providers", "--kernels", "Conv", "--json"]) == 0
    pages = json.loads(capsys.readouterr().out)
    cpu = next(p for p in pages if p["provider"] == "CPUExecutionProvider")
    assert cpu["kernels"] and {k["op_type"] for k in cpu["kernels"]} == {"Conv"}
    assert all(k["op_type"] == "Conv" for p in pages for k in p["kernels"])


def test_op_names_match_without_case_and_combine_with_a_provider(capsys: Any) -> None:
    assert main(["providers", "--kernels", "cpu,conv,RELU", "--width", "0"]) == 0
    out = capsys.readouterr().out
    rows = [line.split()[0] for line in out.splitlines()[3:] if line.strip()]
    assert set(rows) == {"Conv", "Relu"}
    assert out.startswith("CPUExecutionProvider: ")


def test_a_name_that_matches_nothing_is_named(capsys: Any) -> None:
    assert main(["providers", "--kernels", "NoSuchOp"]) == 2
    err = capsys.readouterr().err
    assert "'NoSuchOp' matched nothing: no provider of that name or alias, and no kernel" in err
    assert "CPUExecutionProvider" in err
    # one name of two matching nothing: the rest is listed, the other named
    assert main(["providers", "--kernels", "Conv,Nope", "--width", "0"]) == 0
    out, err = capsys.readouterr()
    assert "'Nope' matched nothing" in err and "Conv" in out


@pytest.mark.parametrize("width", [60, 100])
def test_rows_fit_the_width(width: int, capsys: Any) -> None:
    assert main(["providers", "--kernels", "cpu", "--width", str(width)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert max(len(line) for line in lines) <= width
    assert lines[-1] == f"(cut to {width} columns: --width 0 or --json shows every type)"


def test_the_terminal_width_is_the_default(monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    monkeypatch.setenv("COLUMNS", "72")
    assert main(["providers", "--kernels", "cpu"]) == 0
    assert max(len(line) for line in capsys.readouterr().out.splitlines()) <= 72
    assert main(["providers", "--kernels", "cpu", "--width", "0"]) == 0
    assert max(len(line) for line in capsys.readouterr().out.splitlines()) > 72
