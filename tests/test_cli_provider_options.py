"""``--provider-option KEY=VALUE`` on ``ortcore run``, ``inspect``, ``bench``, ``conformance``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from ortcore.cli import main
from ortcore.plugins import default_manager

from .conftest import chain_model


@pytest.fixture
def model_file(tmp_path: Path) -> Path:
    path = tmp_path / "chain.onnx"
    path.write_bytes(chain_model(["Add", "Relu", "Mul", "Neg"]))
    return path


@pytest.fixture
def faulty() -> Iterator[str]:
    """The conformance suite's faulty providers (``faulty-tunable`` has an option)."""
    from tests.conformance import faulty as module

    name = "tests.conformance.faulty"
    default_manager().register_plugin(module, name=name)
    yield name
    default_manager().unregister_plugin(name)


@pytest.mark.parametrize("command", ["run", "inspect", "bench"])
def test_known_option_reaches_the_first_provider(
    command: str, model_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = [command, str(model_file), "--providers", "mini", "--provider-option", "flavour=hot"]
    assert main(args) == 0, capsys.readouterr().err
    assert "MiniExecutionProvider" in capsys.readouterr().out


@pytest.mark.parametrize("command", ["run", "inspect", "bench"])
def test_unknown_option_is_one_line_naming_it(
    command: str, model_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = [command, str(model_file), "--providers", "mini,fake"]
    assert main([*args, "--provider-option", "no_such=1", "--provider-option", "flavour=x"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.startswith(f"ortcore {command}: MiniExecutionProvider: unknown provider option")
    assert "no_such" in err and "known options: flavour" in err


def test_option_without_providers_is_refused(
    model_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", str(model_file), "--provider-option", "flavour=x"]) == 2
    assert "--provider-option needs --providers" in capsys.readouterr().err


@pytest.mark.parametrize("bad", ["flavour", "=x"])
def test_option_must_be_key_value(bad: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["inspect", "--providers", "mini", "--provider-option", bad])
    assert info.value.code == 2
    assert "expected KEY=VALUE" in capsys.readouterr().err


def test_conformance_refuses_unknown_option_in_one_line(
    cpu: str, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["conformance", "--provider", "cpu", "--provider-option", "no_such=1", "--no-progress"]
    assert main([*args, "-k", "^contract/loads$"]) == 2
    err = capsys.readouterr().err
    assert err == (
        "ortcore conformance: CPUExecutionProvider: unknown provider option(s) no_such; "
        "known options: none\n"
    )


def test_conformance_options_reach_every_session(
    faulty: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``add_offset`` breaks Add only when given: in the contract checks, the
    cases, and the worker processes of ``--jobs``."""
    args = ["conformance", "--provider", "faulty-tunable", "--no-progress", "--failures"]
    args += ["--plugin", faulty, "--kinds", "contract,generated"]
    args += ["-k", r"^(contract/(loads|claimed_runs)|generated/dtype_Add_float)$"]
    assert main(args) == 0, capsys.readouterr().out
    capsys.readouterr()
    report = tmp_path / "report"
    broken = [*args, "--provider-option", "add_offset=0.5", "--jobs", "2", "--report", str(report)]
    assert main(broken) == 1
    out = capsys.readouterr().out
    assert "mismatch         contract/claimed_runs: Add:" in out
    assert "mismatch         generated/dtype_Add_float:" in out
    data = json.loads((report / "report.json").read_text())
    assert data["settings"]["options"] == {"add_offset": "0.5"}
