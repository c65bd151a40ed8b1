"""Profiling: onnxruntime-style Chrome traces, the zero-cost default, ``ortcore bench``."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import ortcore
from ortcore.cli import main
from ortcore.executor import Plan
from ortcore.profiling import load_trace, summarize

from .conftest import chain_model, chain_reference, no_fallback

X = np.array([[1.0, -2.0, 3.0], [-4.0, 5.0, -6.0]], np.float32)
OPS = ["Add", "Relu", "Neg", "Mul"]  # fake, fake, mini, fake


def _profiled(tmp_path: Path, providers: list[str], ops: list[str] = OPS) -> Any:
    so = no_fallback()
    so.enable_profiling = True
    so.profile_file_prefix = str(tmp_path / "trace")
    return ortcore.InferenceSession(chain_model(ops), so, providers=providers)


def test_profiling_off_runs_the_plain_loop() -> None:
    sess = ortcore.InferenceSession(chain_model(OPS), no_fallback(), providers=["fake", "mini"])
    assert sess._runner.execute is Plan.run
    assert sess.end_profiling() == ""
    assert sess.get_profiling_start_time_ns() == 0


def test_trace_has_session_events_and_one_node_event_per_step(tmp_path: Path) -> None:
    sess = _profiled(tmp_path, ["fake", "mini"])
    for _ in range(2):
        (y,) = sess.run(None, {"x": X})
        np.testing.assert_allclose(y, chain_reference(OPS, X))
    path = sess.end_profiling()
    assert Path(path).parent == tmp_path and Path(path).name.startswith("trace_")
    assert path.endswith(".json")
    events = json.loads(Path(path).read_text())
    assert isinstance(events, list)
    names = [e["name"] for e in events if e["cat"] == "Session"]
    assert names.count("model_loading_array") == 1
    assert names.count("session_initialization") == 1
    assert names.count("model_run") == 2
    for e in events:
        assert e["ph"] == "X" and e["pid"] == os.getpid()
        assert isinstance(e["ts"], int) and isinstance(e["dur"], int) and e["dur"] >= 0
        assert isinstance(e["tid"], int)
    nodes = [e for e in events if e["cat"] == "Node"]
    # 4 nodes + 4 copies (x and t2 to the device, t1 and y back) per run
    assert len(nodes) == 16
    by_name = {e["name"]: e for e in nodes}
    add = by_name["n0_Add_kernel_time"]["args"]
    assert add["op_name"] == "Add" and add["provider"] == "FakeDeviceExecutionProvider"
    neg = by_name["n2_Neg_kernel_time"]["args"]
    assert neg["op_name"] == "Neg" and neg["provider"] == "MiniExecutionProvider"
    assert neg["input_type_shape"] == [{"float": [2, 3]}]
    assert neg["output_type_shape"] == [{"float": [2, 3]}]
    copies = [e for e in nodes if e["args"]["op_name"].startswith("Memcpy")]
    assert len(copies) == 8
    assert {e["args"]["provider"] for e in copies} == {"FakeDeviceExecutionProvider"}
    # timestamps are ordered and node events lie inside their run
    runs = [e for e in events if e["name"] == "model_run"]
    for e in nodes:
        assert any(r["ts"] <= e["ts"] <= r["ts"] + r["dur"] + 1 for r in runs)
    assert sess.get_profiling_start_time_ns() > 0


def test_end_profiling_stops_recording(tmp_path: Path) -> None:
    sess = _profiled(tmp_path, ["mini"], ["Neg"])
    sess.run(None, {"x": X})
    path = sess.end_profiling()
    assert Path(path).exists()
    assert sess.end_profiling() == ""
    (y,) = sess.run(None, {"x": X})  # still runs, no longer recorded
    np.testing.assert_array_equal(y, -X)
    assert len(list(tmp_path.iterdir())) == 1


def test_default_prefix_is_onnxruntime_s(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    so = ortcore.SessionOptions()
    so.enable_profiling = True
    sess = ortcore.InferenceSession(chain_model(["Neg"]), so, providers=["mini"])
    sess.run(None, {"x": X})
    assert Path(sess.end_profiling()).name.startswith("onnxruntime_profile_")


def test_summary_counts_ops_providers_copies(tmp_path: Path) -> None:
    sess = _profiled(tmp_path, ["fake", "mini"])
    for _ in range(3):
        sess.run(None, {"x": X})
    s = summarize(load_trace(sess.end_profiling()), top=3)
    assert s["runs"] == 3
    ops = {r["name"]: r["count"] for r in s["by_op"]}
    assert ops == {"Add": 3, "Relu": 3, "Neg": 3, "Mul": 3, "MemcpyFromHost": 6, "MemcpyToHost": 6}
    providers = {r["name"]: r["count"] for r in s["by_provider"]}
    assert providers == {"FakeDeviceExecutionProvider": 21, "MiniExecutionProvider": 3}
    assert s["copies"]["count"] == 12 and s["copies"]["bytes"] == 12 * X.nbytes
    assert len(s["slowest"]) == 3 and all(r["calls"] == 3 for r in s["slowest"])


def test_trace_has_the_fields_onnxruntime_writes(tmp_path: Path) -> None:
    ort = pytest.importorskip("onnxruntime")
    data = chain_model(["Add", "Relu"])
    so = ort.SessionOptions()
    so.enable_profiling = True
    so.profile_file_prefix = str(tmp_path / "ort")
    ref = ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])
    ref.run(None, {"x": X})
    theirs = load_trace(ref.end_profiling())
    sess = _profiled(tmp_path, ["mini"], ["Add", "Relu"])
    sess.run(None, {"x": X})
    mine = load_trace(sess.end_profiling())

    def node(events: list[dict[str, Any]]) -> dict[str, Any]:
        return next(e for e in events if e["cat"] == "Node" and e["args"]["op_name"] == "Add")

    a, b = node(theirs), node(mine)
    assert set(a) == set(b)
    for key in ("op_name", "provider", "input_type_shape", "output_type_shape"):
        assert key in a["args"] and key in b["args"]
    assert a["args"]["input_type_shape"] == b["args"]["input_type_shape"]
    assert a["args"]["output_type_shape"] == b["args"]["output_type_shape"]
    assert a["name"] == b["name"] == "n0_Add_kernel_time"
    # the summary reads onnxruntime's traces too
    assert {r["name"] for r in summarize(theirs)["by_op"]} == {"Add", "Relu"}


def test_bench_command_summarises_a_profiled_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = tmp_path / "chain.onnx"
    model.write_bytes(chain_model(OPS))
    assert main(["bench", str(model), "--providers", "fake,mini", "--runs", "2"]) == 0
    out = capsys.readouterr().out
    assert "op type" in out and "Add" in out and "MemcpyFromHost" in out
    assert "FakeDeviceExecutionProvider" in out and "MiniExecutionProvider" in out
    assert "device copies: 8" in out and "slowest nodes" in out
    assert main(["bench", str(model), "--providers", "mini", "--runs", "2", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["runs"] == 2 and data["copies"]["count"] == 0
    assert list(tmp_path.iterdir()) == [model]  # the trace went to a temporary folder


def test_bench_summarises_a_saved_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sess = _profiled(tmp_path, ["fake", "mini"])
    for _ in range(3):
        sess.run(None, {"x": X})
    trace = sess.end_profiling()
    assert main(["bench", "--trace", trace, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["runs"] == 3
    assert {r["name"] for r in data["by_op"]} >= {"Add", "Relu", "Neg", "Mul"}
    assert data["copies"]["count"] > 0
    assert main(["bench", "--trace", trace]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"trace: {trace}") and "slowest nodes" in out
    # bad traces and contradictory arguments get one clear line, exit status 2
    bad = tmp_path / "bad.json"
    bad.write_text('{"traceEvents": 3}')
    missing = tmp_path / "missing.json"
    for args, words in (
        (["--trace", str(bad)], "not a Chrome trace"),
        (["--trace", str(missing)], "missing.json"),
        (["model.onnx", "--trace", trace], "not both"),
    ):
        assert main(["bench", *args]) == 2
        err = capsys.readouterr().err
        assert err.startswith("ortcore: InvalidArgument: bench") and words in err, err
