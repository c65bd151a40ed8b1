"""Subcommands other packages add to ``ortcore`` through the ``ortcore.cli`` entry points."""

from __future__ import annotations

import argparse
import ast
import logging
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest

import ortcore.cli
from ortcore.cli import SUBCOMMAND_GROUP, build_parser, main

ROOT = Path(__file__).resolve().parents[1]


class FakeEntryPoint:
    """What ``importlib.metadata.entry_points`` returns, enough for the CLI."""

    def __init__(self, name: str, load: Any, value: str = "fake.module") -> None:
        self.name, self.value, self._load = name, value, load

    def load(self) -> Any:
        return self._load()


def _command(tag: str) -> types.ModuleType:
    mod = types.ModuleType(f"fake_{tag}")
    mod.__doc__ = f"Say {tag}.\n\nA longer description."

    def add_arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--loud", action="store_true")

    def run(ns: argparse.Namespace) -> int:
        print(tag.upper() if ns.loud else tag)
        return 3

    mod.add_arguments, mod.run = add_arguments, run  # type: ignore[attr-defined]
    return mod


def _fake_group(monkeypatch: pytest.MonkeyPatch, *eps: FakeEntryPoint) -> None:
    def entry_points(group: str) -> list[FakeEntryPoint]:
        assert group == SUBCOMMAND_GROUP
        return list(eps)

    monkeypatch.setattr(ortcore.cli.importlib.metadata, "entry_points", entry_points)


def test_the_core_imports_neither_conformance_nor_ortcore_ray() -> None:
    files = sorted((ROOT / "ortcore" / "cli").glob("*.py"))
    assert len(files) >= 8  # a module per subcommand
    imported = [
        n.module if isinstance(n, ast.ImportFrom) else a.name
        for f in files
        for n in ast.walk(ast.parse(f.read_text()))
        if isinstance(n, (ast.Import, ast.ImportFrom))
        for a in (n.names if isinstance(n, ast.Import) else [n])
    ]
    assert "argparse" in imported  # the walk sees the imports
    assert not [m for m in imported if m and m.split(".")[0] in ("conformance", "ortcore_ray")]


def test_conformance_comes_from_its_entry_point() -> None:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert "conformance" in sub.choices
    import conformance.cli

    assert sub.choices["conformance"].get_default("func") is conformance.cli.run


def test_ortcore_conformance_runs_as_a_command(cpu: str) -> None:
    cmd = [sys.executable, "-m", "ortcore", "conformance", "--provider", cpu, "--list"]
    cmd += ["--suites", "contract", "-k", "^contract/claims$"]
    out = subprocess.run(cmd, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "contract/claims\n"


def test_plugin_subcommand_runs(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _fake_group(monkeypatch, FakeEntryPoint("hello", lambda: _command("hello")))
    assert main(["hello", "--loud"]) == 3
    assert capsys.readouterr().out == "HELLO\n"
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "Say hello." in capsys.readouterr().out  # the first line of its docstring


def test_broken_or_clashing_subcommands_are_left_out(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken() -> Any:
        raise ImportError("no module named fake_broken")

    _fake_group(
        monkeypatch,
        FakeEntryPoint("run", lambda: _command("takeover")),  # a built-in name
        FakeEntryPoint("broken", broken),
        FakeEntryPoint("hello", lambda: _command("hello")),
        FakeEntryPoint("hello", lambda: _command("again"), "other.module"),
    )
    with caplog.at_level(logging.WARNING, logger="ortcore.cli"):
        parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert "broken" not in sub.choices
    assert sub.choices["run"].get_default("func") is ortcore.cli.cmd_run
    assert sub.choices["hello"].get_default("func")(argparse.Namespace(loud=False)) == 3
    text = caplog.text
    assert "'run' (run = fake.module) left out: the name is taken" in text
    assert "'broken' (broken = fake.module) failed to load" in text
    assert "'hello' (hello = other.module) left out: the name is taken" in text
