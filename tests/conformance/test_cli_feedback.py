"""What the suite tells its user: progress from the first second, a cheap --list,
failures grouped by op and dimension, reproducers, --repro folders, plain help."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from conformance import cli, nodeindex, progress, repro
from conformance.cases import Case
from conformance.execute import Target
from conformance.outcomes import CaseResult
from conformance.report import write_reports
from conformance.suite import RunOutput, Settings
from conformance.summary import build_report, dimension_of, failures_by, op_of
from conformance.waivers import Config

from .conftest import run


class Clock:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    c = Clock()
    monkeypatch.setattr(progress.time, "monotonic", c)
    return c


# progress


def test_progress_mode_follows_the_stream() -> None:
    assert progress.Progress(stream=io.StringIO()).mode == "lines"
    assert progress.Progress(stream=Tty()).mode == "bar"
    assert progress.Progress(stream=Tty(), enabled=False).mode == "off"
    assert progress.Progress(stream=io.StringIO(), enabled=True).mode == "bar"
    with pytest.raises(ValueError, match="unknown progress mode"):
        progress.Progress(mode="fancy")


def test_plain_lines_say_the_phase_at_once_then_every_tenth_or_ten_seconds(clock: Clock) -> None:
    out = io.StringIO()
    p = progress.Progress(stream=out)
    p.status("loading the suite...")
    assert out.getvalue() == "ortcore conformance: loading the suite...\n"  # the first second
    clock.now += 0.2
    p.status("loading cases (node)...")  # a quick phase after it says nothing
    clock.now += 3
    p.status("loading cases (explore)...")  # after a slow one, it does
    assert out.getvalue().count("\n") == 2 and "explore" in out.getvalue()
    p.start(1000)
    for i in range(99):  # under a tenth: no line, however many results
        clock.now += 0.05
        p.update(f"node/t{i}", "passed", False)
    assert out.getvalue().count("\n") == 3
    clock.now += 0.05
    p.update("node/t99", "mismatch", True)  # a tenth, a second after the last line
    last = out.getvalue().splitlines()[-1]
    assert "100/1000 (10%)" in last and "passed 99" in last and "failed 1" in last
    assert "\r" not in out.getvalue()
    clock.now += progress.EVERY  # slow cases: a line every EVERY seconds anyway
    p.update("node/slow", "passed", False)
    assert "101/1000" in out.getvalue().splitlines()[-1]
    p.close()  # the last count is written once
    assert out.getvalue().count("101/1000") == 1


def test_plain_lines_end_with_the_last_count(clock: Clock) -> None:
    out = io.StringIO()
    p = progress.Progress(stream=out)
    p.start(5)
    for i in range(5):  # a quick run: nothing between the start and the end
        p.update(f"c{i}", "passed", False)
    p.close()
    lines = out.getvalue().splitlines()
    assert lines[0] == "ortcore conformance: running 5 cases"
    assert len(lines) == 2 and "5/5 (100%)" in lines[1]


def test_bar_shows_the_phase_then_redraws_in_place(clock: Clock) -> None:
    out = Tty()
    p = progress.Progress(stream=out)
    p.status("loading provider cpu...")
    assert out.getvalue().startswith("\r[  0s] loading provider cpu...")
    p.start(4)
    p.status("starting 2 workers...")
    assert "0/4" in out.getvalue() and "starting 2 workers" in out.getvalue()
    clock.now += 1
    p.update("node/test_abs", "passed", False)
    assert "1/4  passed 1" in out.getvalue() and "node/test_abs" in out.getvalue()
    written = len(out.getvalue())
    p.update("node/test_add", "passed", False)  # within 50 ms: not redrawn
    assert len(out.getvalue()) == written
    p.close()
    assert out.getvalue().endswith("\r") and "\n" not in out.getvalue()


def test_progress_off_writes_nothing(clock: Clock) -> None:
    out = Tty()
    p = progress.Progress(stream=out, enabled=False)
    p.status("x")
    p.start(3)
    p.update("a", "passed", False)
    p.close()
    assert out.getvalue() == "" and p.done == 1


def test_first_output_comes_before_the_suite_is_loaded(
    monkeypatch: pytest.MonkeyPatch, capsys: Any, faulty_plugin: str
) -> None:
    """The CLI says what it does before importing onnx or resolving the provider."""
    seen: list[str] = []
    real = progress.Progress.status

    def status(self: progress.Progress, text: str) -> None:
        seen.append(text)
        real(self, text)

    monkeypatch.setattr(progress.Progress, "status", status)
    code = cli.main(["--provider", "faulty-good", "--kinds", "contract", "-k", "loads"])
    assert code == 0
    assert seen[0] == "loading the suite..."
    assert seen[1].startswith("loading provider")
    assert "loading cases (contract)..." in seen
    assert capsys.readouterr().err.startswith("ortcore conformance: loading the suite...")


# listing


def test_list_builds_no_model(monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    """--list needs names only: no case is built, no oracle run."""

    def boom(self: Case) -> Any:
        raise AssertionError(f"{self.id} was built for --list")

    monkeypatch.setattr(Case, "materialize", boom)
    monkeypatch.setattr("conformance.generated.materialize", boom)
    assert (
        cli.main(["--provider", "cpu", "--list", "--kinds", "node,generated", "-k", "Relu|relu"])
        == 0
    )
    ids = capsys.readouterr().out.split()
    assert "node/test_relu" in ids and "generated/dtype_Relu_float" in ids
    assert all("relu" in i.lower() for i in ids)


def test_node_index_is_cached_and_matches_onnx(
    monkeypatch: pytest.MonkeyPatch, light_cache: Path, tmp_path: Path
) -> None:
    """The index (built in this session's cache folder by a fresh process, the first
    time node cases were listed) names onnx's node tests in onnx's order."""
    from onnx.backend.test.case.node import collect_testcases

    nodeindex.load_index.cache_clear()
    try:
        first = nodeindex.load_index()
        assert list(light_cache.glob("node-index-*.json"))
        assert all(module.startswith(nodeindex.PACKAGE) for _, module, _, _ in first)
        name, module, _, _ = next(e for e in first if e[0] == "test_relu")
        assert nodeindex.node_test(name, module).model.graph.node[0].op_type == "Relu"
        with pytest.raises(KeyError):
            nodeindex.node_test("test_no_such_thing", module)
        want = [c.name for c in collect_testcases(None) if c.model and c.data_sets]
        assert [e[0] for e in first] == want  # every test, in onnx's order
        # Every module is imported now: a new index cannot tell them apart; it is
        # right (names, order) but not cached, and its cases are built by collecting.
        monkeypatch.setenv("ORTCORE_CONFORMANCE_CACHE", str(tmp_path))
        nodeindex.load_index.cache_clear()
        again = nodeindex.load_index()
        assert [e[0] for e in again] == want and {e[1] for e in again} == {""}
        assert not list(tmp_path.iterdir())
        assert nodeindex.node_test("test_relu", "").name == "test_relu"
        monkeypatch.delenv("ORTCORE_CONFORMANCE_CACHE")
        monkeypatch.setenv("ORTCORE_CONFORMANCE_CACHE", str(light_cache))
        nodeindex.load_index.cache_clear()
        monkeypatch.setattr(nodeindex, "build_index", lambda: pytest.fail("index rebuilt"))
        assert nodeindex.load_index() == first  # read from the cache
    finally:
        nodeindex.load_index.cache_clear()


def test_a_broken_cache_file_is_rebuilt(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("ORTCORE_CONFORMANCE_CACHE", str(tmp_path))
    nodeindex.load_index.cache_clear()
    try:
        file = nodeindex._cache_file()
        file.write_text("{not json")
        entries = [("test_x", "some.module", 1e-3, 1e-7)]
        monkeypatch.setattr(nodeindex, "build_index", lambda: entries)
        assert nodeindex.load_index() == tuple(entries)
        assert json.loads(file.read_text()) == [list(e) for e in entries]
    finally:
        nodeindex.load_index.cache_clear()


# failures by op and dimension


def _r(case_id: str, outcome: str = "mismatch", **kw: Any) -> CaseResult:
    kind = case_id.split("/", 1)[0]
    suite = {"contract": "contract", "simple": "models", "light": "models"}.get(kind, "operators")
    return CaseResult(case_id, suite, outcome, detail=f"detail of {case_id}", **kw)


SYNTHETIC = [
    _r("explore/Gemm/attribute/transA=1", op="Gemm", dimension="attribute", repro="Gemm(...)"),
    _r("explore/Gemm/attribute/alpha=0", op="Gemm", dimension="attribute"),
    _r("explore/Gemm/rank/3d", "run_error", op="Gemm", dimension="rank"),
    _r("explore/Gemm/dtype/double", "passed", op="Gemm", dimension="dtype"),
    _r("explore/Conv/empty/batch0", "crash"),  # a crashed worker: no op, no dimension
    _r("generated/bcast_Add_3", op="Add"),
    _r("generated/negaxis_Softmax_-1", op="Softmax"),
    _r("generated/negaxis_Softmax_-2", "load_error"),  # not built: op from the name
    _r("node/test_relu", op="Relu"),
    _r("node/test_softmax_expanded", ops=["Exp", "ReduceSum", "Div", "Sub"]),
    _r("contract/output_types", "wrong_type"),
    _r("simple/test_gradient", "unsupported"),
    _r("light/test_resnet50", "mismatch"),
    _r("node/test_neg", "unexpected_pass", op="Neg"),
]


def test_dimension_and_op_of_each_kind() -> None:
    r = {x.id: x for x in SYNTHETIC}
    assert dimension_of(r["explore/Gemm/rank/3d"]) == "rank"
    assert dimension_of(r["explore/Conv/empty/batch0"]) == "empty"  # read off the name
    assert op_of(r["explore/Conv/empty/batch0"]) == "Conv"
    assert dimension_of(r["generated/bcast_Add_3"]) == "rank"
    assert dimension_of(r["generated/negaxis_Softmax_-1"]) == "axis"
    assert op_of(r["generated/negaxis_Softmax_-2"]) == "Softmax"
    assert dimension_of(_r("generated/newfamily_Abs_float")) == "newfamily"
    assert dimension_of(r["node/test_relu"]) == "node"
    assert op_of(r["node/test_softmax_expanded"]) == "Exp+ReduceSum+Div+…"
    assert (op_of(r["contract/output_types"]), dimension_of(r["contract/output_types"])) == (
        "(contract)",
        "contract",
    )
    assert (op_of(r["light/test_resnet50"]), dimension_of(r["light/test_resnet50"])) == (
        "(models)",
        "light",
    )


def test_failures_by_groups_failed_cases_with_a_first_example() -> None:
    fb = failures_by(SYNTHETIC)
    gemm = fb["ops"]["Gemm"]
    assert next(iter(fb["ops"])) == "Gemm"  # most failures first
    assert gemm["attribute"] == {
        "count": 2,
        "example": "explore/Gemm/attribute/transA=1",
        "detail": "detail of explore/Gemm/attribute/transA=1",
        "repro": "Gemm(...)",
    }
    assert gemm["rank"]["count"] == 1 and "dtype" not in gemm  # a pass is no failure
    assert fb["ops"]["Softmax"]["axis"]["count"] == 2
    assert fb["ops"]["Conv"]["empty"]["count"] == 1
    assert "unsupported" not in json.dumps(fb) and "(models)" in fb["ops"]
    assert fb["ops"]["Neg"]["node"]["count"] == 1  # an unexpected pass fails the run
    assert sum(fb["dimensions"].values()) == sum(r.failed for r in SYNTHETIC)
    assert list(fb["dimensions"])[:3] == ["node", "attribute", "axis"]  # most first, by name


def _report(results: list[CaseResult]) -> dict[str, Any]:
    settings = Settings("CPUExecutionProvider", progress=False)
    out = RunOutput(Target("CPUExecutionProvider"), results, 1.0, settings, Config())
    return build_report(out)


def test_reports_carry_failures_by(tmp_path: Path) -> None:
    report = _report(SYNTHETIC)
    write_reports(report, tmp_path)
    data = json.loads((tmp_path / "report.json").read_text())
    assert data["failures_by"]["ops"]["Gemm"]["attribute"]["count"] == 2
    cases = {c["id"]: c for c in data["cases"]}
    assert cases["explore/Gemm/attribute/transA=1"]["repro"] == "Gemm(...)"
    md = (tmp_path / "report.md").read_text()
    section = md.split("## Failures by op and dimension")[1].split("\n## ")[0]
    assert "| attribute (2) |" in section.replace(" | ", " |\n| ").replace("\n", "") or (
        "attribute (2)" in section
    )
    gemm_row = next(line for line in section.splitlines() if line.startswith("| Gemm |"))
    assert "**2** `explore/Gemm/attribute/transA=1`" in gemm_row
    html = (tmp_path / "report.html").read_text()
    assert "Failures by op and dimension" in html and "title='Gemm(...)'" in html


def test_terminal_table_is_compact() -> None:
    lines = cli.failure_table(_report(SYNTHETIC))
    assert lines[0].startswith("Failures by op and dimension")
    gemm = next(line for line in lines if line.strip().startswith("Gemm"))
    assert gemm.split()[-1] == "explore/Gemm/attribute/transA=1"
    assert cli.failure_table(_report([_r("node/test_abs", "passed", op="Abs")])) == []
    many = [
        _r(f"explore/Op{i}/d{j}/x", op=f"Op{i}", dimension=f"d{j}")
        for i in range(30)
        for j in range(12)
    ]
    lines = cli.failure_table(_report(many))
    assert len(lines) == 2 + cli.MAX_ROWS + 1 and "10 more ops with 120 failures" in lines[-1]
    header = lines[1].split()
    assert header[-2] == "other" and len(header) == 1 + cli.MAX_COLUMNS + 2


# reproducers


def _gemm_model() -> onnx.ModelProto:
    node = helper.make_node("Gemm", ["a", "b", "c"], ["y"], alpha=0.5, transA=1)
    graph = helper.make_graph(
        [node],
        "g",
        [
            helper.make_tensor_value_info("a", onnx.TensorProto.FLOAT, [4, 3]),
            helper.make_tensor_value_info("b", onnx.TensorProto.FLOAT, [4, 5]),
        ],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.array([1, 2], np.float32), "c")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def test_describe_a_single_node() -> None:
    a, b = np.zeros((4, 3), np.float32), np.zeros((4, 5), np.float32)
    line = repro.describe(_gemm_model(), [a, b], seed=7, layout="fortran")
    assert line == (
        "Gemm(alpha=0.5, transA=1) a=float32[4,3], b=float32[4,5], c=const float32[2]; "
        "opset 18; seed 7; inputs fed fortran"
    )
    idx = np.array([0, -1], np.int64)
    node = helper.make_node("Gather", ["x", "i", ""], ["y"], axis=-1)
    graph = helper.make_graph(
        [node],
        "g",
        [
            helper.make_tensor_value_info("x", onnx.TensorProto.DOUBLE, [2, 0]),
            helper.make_tensor_value_info("i", onnx.TensorProto.INT64, [2]),
        ],
        [helper.make_tensor_value_info("y", onnx.TensorProto.DOUBLE, None)],
    )
    model = helper.make_model(graph)
    text = repro.describe(model, [np.zeros((2, 0)), idx])
    assert text.startswith("Gather(axis=-1) x=float64[2,0], i=int64[2]=[0,-1], _; opset")


def test_describe_a_graph_names_its_ops() -> None:
    nodes = [
        helper.make_node("Relu", ["x"], ["a"]),
        helper.make_node("Relu", ["a"], ["b"]),
        helper.make_node("Add", ["a", "b"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [3])],
    )
    line = repro.describe(helper.make_model(graph), [np.ones(3, np.float32)])
    assert line.startswith("graph of 3 nodes (Relu*2, Add) x=float32[3]; opset")


def test_reproducer_never_raises() -> None:
    case = Case("x", "generated", lambda: pytest.fail("not called"))
    assert repro.reproducer(case, onnx.ModelProto(), [([object()], [])]).startswith("graph of 0")
    assert "no reproducer" in repro.reproducer(case, None, [])  # type: ignore[arg-type]


def test_failed_cases_carry_their_reproducer(faulty_plugin: str) -> None:
    out = run("faulty-wrong", ("generated",), r"^generated/(dtype_Add_float|dtype_Neg_float)$")
    r = {x.id: x for x in out.results}
    assert r["generated/dtype_Add_float"].outcome == "mismatch"
    assert r["generated/dtype_Add_float"].repro.startswith(
        "Add() x0=float32[3,4,5], x1=float32[3,4,5]; opset 18"
    )
    assert r["generated/dtype_Neg_float"].repro == ""  # passed: nothing to reproduce


def test_repro_writes_a_case_that_reruns(faulty_plugin: str, tmp_path: Path, capsys: Any) -> None:
    import ortcore

    code = cli.main(
        [
            "--provider",
            "faulty-wrong",
            "--plugin",
            faulty_plugin,
            "--no-progress",
            "--failures",
            "--repro",
            str(tmp_path),
            "generated/layout_Add_fortran",
            "generated/dtype_Neg_float",
        ]
    )
    text = capsys.readouterr().out
    assert code == 1
    folder = tmp_path / "generated__layout_Add_fortran"
    assert f"-> {folder}" in text and "repro: Add() x0=float32[6,8]" in text
    assert not (tmp_path / "generated__dtype_Neg_float").exists()  # it passed
    assert sorted(p.name for p in (folder / "test_data_set_0").iterdir()) == [
        "input_0.pb",
        "input_1.pb",
        "output_0.pb",
    ]
    meta = json.loads((folder / "case.json").read_text())
    assert meta["layout"] == "fortran" and meta["provider"] == "FaultyWrongExecutionProvider"
    feeds, expected = repro.load_data(folder)
    assert not feeds["x0"].flags.c_contiguous  # fed as the suite fed it
    sess = ortcore.InferenceSession(
        str(folder / "model.onnx"), repro.session_options(folder), providers=["cpu"]
    )
    assert repro.compare(sess.run(None, feeds), expected, folder) == "ok"
    snippet = next(line for line in text.splitlines() if "import ortcore" in line)
    assert snippet.strip().startswith("import ortcore, conformance.repro as repro; d = ")
    assert repro.main([str(folder), "--plugin", faulty_plugin]) == 1  # the bug, reproduced
    assert repro.main([str(folder), "--provider", "cpu"]) == 0
    assert "data set 1: ok" in capsys.readouterr().out


def test_help_is_plain_text(capsys: Any) -> None:
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    text = capsys.readouterr().out
    assert "``" not in text and "::" not in text and ":func:" not in text
    assert "Exit status: 0" in text and "--depth" in text and "--repro DIR" in text
    parser = __import__("argparse").ArgumentParser()
    cli.add_arguments(parser)
    for action in parser._actions:
        assert action.help, action.dest  # every option says what it does


def test_a_case_whose_worker_died_is_described_by_the_parent() -> None:
    from conformance.suite import _fill_from_case

    r = CaseResult("generated/dtype_Relu_float", "operators", "crash", "worker died")
    _fill_from_case(r)
    assert (r.op, r.dtype) == ("Relu", "float")
    assert r.repro.startswith("Relu() x0=float32[3,4,5]; opset 18")
    gone = CaseResult("generated/no_such_case", "operators", "crash")
    _fill_from_case(gone)  # an unknown id: nothing to read, nothing raised
    assert gone.repro == "" and gone.op == ""


def test_a_crash_report_holds_only_the_crashed_case_stderr() -> None:
    """A worker's stderr is one file for every case it runs: the report of a
    crash quotes what was written since that case began, not an earlier case's
    warnings."""
    import os
    import tempfile

    from conformance.pool import Worker

    w = Worker([])
    w.stderr = tempfile.TemporaryFile("w+", encoding="utf-8")
    w.stderr.write("NotImplementedOp: an earlier case's decline\n")
    w.stderr.flush()
    w._mark = w.stderr.seek(0, os.SEEK_END)  # as run() does when a case starts
    w.stderr.write("Fatal Python error: this case's crash\n")
    w.stderr.flush()
    assert w._tail() == "Fatal Python error: this case's crash"
