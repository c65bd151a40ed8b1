"""The ``ortcore`` command line: providers, inspect, run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from onnx import helper

from ortcore.cli import main

from .conftest import chain_model, fvi, make_model


@pytest.fixture
def model_file(tmp_path: Path) -> Path:
    path = tmp_path / "chain.onnx"
    path.write_bytes(chain_model(["Add", "Relu", "Mul", "Neg"]))
    return path


def test_providers_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["providers"]) == 0
    out = capsys.readouterr().out
    for name in (
        "MiniExecutionProvider",
        "FakeDeviceExecutionProvider",
        "ClaimingExecutionProvider",
    ):
        assert name in out
    assert "mini" in out and "available" in out
    assert out.splitlines()[0].split()[0] == "name"


def test_providers_table_lists_cpu(cpu: str, capsys: pytest.CaptureFixture[str]) -> None:
    main(["providers"])
    assert cpu in capsys.readouterr().out


def test_providers_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["providers", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    by_name = {e["name"]: e for e in data}
    mini = by_name["MiniExecutionProvider"]
    assert mini["aliases"] == ["mini"]
    assert mini["available"] is True and mini["reason"] == ""
    assert mini["version"] == "1.0" and mini["device"] == "cpu"
    assert by_name["FakeDeviceExecutionProvider"]["device"] == "fake"
    assert mini["plugin"] == "tests.providers"


def test_inspect_table(model_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", str(model_file), "--providers", "fake,mini"]) == 0
    out = capsys.readouterr().out
    assert "providers: FakeDeviceExecutionProvider, MiniExecutionProvider" in out
    for node in ("n0_Add", "n1_Relu", "n2_Mul", "n3_Neg"):
        assert node in out
    neg_line = next(line for line in out.splitlines() if "n3_Neg" in line)
    assert "MiniExecutionProvider" in neg_line
    assert "FakeDeviceExecutionProvider: no kernel for Neg" in neg_line  # the reason
    assert "counts: FakeDeviceExecutionProvider=3, MiniExecutionProvider=1" in out


def test_inspect_json(model_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", str(model_file), "--providers", "mini", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["counts"] == {"MiniExecutionProvider": 4}
    assert [n["node"] for n in data["nodes"]] == ["n0_Add", "n1_Relu", "n2_Mul", "n3_Neg"]
    assert {n["domain"] for n in data["nodes"]} == {"ai.onnx"}
    assert data["providers"][0] == "MiniExecutionProvider"
    assert data["inputs"] == [{"name": "x", "type": "tensor(float)", "shape": [2, 3]}]
    assert data["outputs"][0]["name"] == "y"
    assert data["copies"] == []


def test_inspect_json_lists_copies(model_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", str(model_file), "--providers", "fake,mini", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert {(c["op_type"], c["value"]) for c in data["copies"]} == {
        ("MemcpyFromHost", "x"),
        ("MemcpyToHost", "t2"),
    }


def test_run_prints_latency(model_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", str(model_file), "--providers", "mini", "--repeat", "2"]) == 0
    out = capsys.readouterr().out
    assert "latency: median" in out and "over 2 runs" in out
    assert "MiniExecutionProvider: 4 nodes" in out
    assert "no stored reference outputs" in out


def test_run_checks_stored_outputs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import numpy as np
    from onnx import numpy_helper

    path = tmp_path / "neg.onnx"
    path.write_bytes(
        make_model([helper.make_node("Neg", ["x"], ["y"])], [fvi("x", [2, 2])], [fvi("y", [2, 2])])
    )
    x = np.arange(4).reshape(2, 2) / 4
    good = numpy_helper.from_array(-x.astype(np.float32))
    (tmp_path / "neg_output_0.pb").write_bytes(good.SerializeToString())
    assert main(["run", str(path), "--providers", "mini", "--repeat", "0"]) == 0
    assert "check: output 0 OK" in capsys.readouterr().out
    bad = numpy_helper.from_array(x.astype(np.float32))
    (tmp_path / "neg_output_0.pb").write_bytes(bad.SerializeToString())
    assert main(["run", str(path), "--providers", "mini", "--repeat", "0"]) == 1
    assert "MISMATCH" in capsys.readouterr().out


def test_run_error_exit_code(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"garbage\xff\xff")
    assert main(["inspect", str(bad), "--providers", "mini"]) == 2
    assert "InvalidProtobuf" in capsys.readouterr().err


def test_unknown_model_name_exits(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["inspect", "no_such_model_anywhere"])
    assert "no_such_model_anywhere" in str(info.value.code)


def test_unknown_provider_exit_code(model_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", str(model_file), "--providers", "nosuch"]) == 2
    err = capsys.readouterr().err
    assert "InvalidArgument" in err and "nosuch" in err


@pytest.mark.slow
def test_run_default_light_resnet50(cpu: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--providers", "cpu", "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    assert "light_resnet50" in out
    assert "check: output 0 OK" in out
    assert "CPUExecutionProvider:" in out
    assert "latency: median" in out


@pytest.mark.slow
def test_run_light_resnet50_across_all_providers(
    cpu: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # claiming, fake, mini and CPU share the model, with device copies.
    providers = "claiming,fake,mini,cpu"
    assert main(["run", "light_resnet50", "--repeat", "0", "--providers", providers]) == 0
    out = capsys.readouterr().out
    assert "FakeDeviceExecutionProvider:" in out and "CPUExecutionProvider:" in out
    assert "device copies inserted" in out
    assert "check: output 0 OK" in out


def test_closed_pipe_ends_quietly(cpu: str) -> None:
    """``ortcore conformance --list | head -1`` stops without a traceback."""
    import subprocess
    import sys

    cmd = [sys.executable, "-m", "ortcore", "conformance", "--provider", cpu, "--list"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read().decode()
    proc.wait(timeout=120)
    assert first.strip()
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
