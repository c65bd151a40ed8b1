"""External data files changed under a live session: truncated, rewritten,
replaced, deleted, grown. Never a crash: read-in data is immune, mapped data
fails every run from the change on with ``ExternalDataChanged``.

Every scenario that could crash (a mapped page past a file's new end is a
SIGBUS) runs in a child process, so a regression fails a test instead of
killing pytest."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from onnx import TensorProto, helper, numpy_helper

import ortcore
from ortcore import external_data
from ortcore.external_data import (
    EXTERNAL_DATA_KEY,
    READ_ALL,
    READ_IN_CONFIG,
    READ_IN_ENV,
    PinnedTensor,
    read_in_limit,
)
from ortcore.model import LoadOptions, load_model
from ortcore.tensor_data import save_model

from .conftest import fvi, make_model

ROWS, COLS = 16, 64  # 4 KiB of float32: rank 2 and over 1 KiB, so never read into the proto
W = (np.arange(ROWS * COLS, dtype=np.float32) / 7.0).reshape(ROWS, COLS)
OFFSET = 4096  # W lies after a page of other bytes, so a file cut at OFFSET ends just before it
X = np.ones((ROWS, COLS), np.float32)


def _external(t: TensorProto, location: str, offset: int) -> TensorProto:
    t.ClearField("raw_data")
    t.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", str(offset))):
        t.external_data.add(key=key, value=value)
    return t


def _w(name: str = "w") -> TensorProto:
    return _external(numpy_helper.from_array(W, name), "w.data", OFFSET)


def _model(kind: str) -> tuple[bytes, dict[str, Any]]:
    """A model reading ``W`` from ``w.data`` in one of the ways a model can:
    an initializer, a subgraph's initializer, a Constant's value; and its feeds."""
    x = fvi("x", [ROWS, COLS])
    y = fvi("y", [ROWS, COLS])
    if kind == "initializer":
        nodes = [helper.make_node("Add", ["x", "w"], ["y"], name="add")]
        return make_model(nodes, [x], [y], initializers=[_w()]), {"x": X}
    if kind == "constant":
        nodes = [
            helper.make_node("Constant", [], ["c"], value=_w("c"), name="const"),
            helper.make_node("Add", ["x", "c"], ["y"], name="add"),
        ]
        return make_model(nodes, [x], [y]), {"x": X}
    assert kind == "subgraph"
    then_g = helper.make_graph(
        [helper.make_node("Add", ["x", "tw"], ["then_out"])],
        "then_g",
        [],
        [fvi("then_out", [ROWS, COLS])],
        [_w("tw")],
    )
    else_g = helper.make_graph(
        [helper.make_node("Neg", ["x"], ["else_out"])], "else_g", [], [fvi("else_out", None)]
    )
    node = helper.make_node("If", ["cond"], ["y"], then_branch=then_g, else_branch=else_g)
    cond = fvi("cond", [], TensorProto.BOOL)
    return make_model([node], [cond, x], [y]), {"cond": np.array(True), "x": X}


def _pristine(folder: Path, kind: str) -> tuple[Path, dict[str, Any]]:
    """``folder/m.onnx`` and its ``w.data`` (a page of zeros, then W), dated
    an hour back so that any write changes the modification time."""
    folder.mkdir(parents=True, exist_ok=True)
    model, feeds = _model(kind)
    (folder / "m.onnx").write_bytes(model)
    data = folder / "w.data"
    data.write_bytes(bytes(OFFSET) + W.tobytes())
    past = time.time() - 3600
    os.utime(data, (past, past))
    return folder / "m.onnx", feeds


# -- every change, every way of reading, in child processes -----------------------------

_SCENARIOS = textwrap.dedent(
    """
    import json, os, shutil, sys
    from pathlib import Path
    import numpy as np
    import ortcore

    spec = json.loads(sys.argv[1])
    offset, nbytes = spec["offset"], spec["nbytes"]

    def mutate(data, how):
        if how == "truncate0":
            os.truncate(data, 0)
        elif how == "truncate_before":
            os.truncate(data, offset)
        elif how == "truncate_mid":
            os.truncate(data, offset + nbytes // 2 + 4)
        elif how == "rewrite":
            with open(data, "r+b") as f:
                f.seek(offset)
                f.write(b"\\x7f" * nbytes)
        elif how == "rename":
            new = data.with_name("w.new")
            new.write_bytes(b"\\x7f" * (offset + nbytes))
            os.replace(new, data)
        elif how == "unlink":
            os.unlink(data)
        elif how == "grow":
            with open(data, "ab") as f:
                f.write(b"\\x7f" * 4096)
        elif how == "regrow":
            size = os.stat(data).st_size
            os.truncate(data, 0)
            os.truncate(data, size)
        else:
            raise AssertionError(how)

    def run(sess, group, feeds, want):
        try:
            if group["api"] == "iobinding":
                binding = sess.io_binding()
                for name, value in feeds.items():
                    binding.bind_cpu_input(name, value)
                binding.bind_output("y")
                sess.run_with_iobinding(binding)
                (y,) = binding.copy_outputs_to_cpu()
            else:
                (y,) = sess.run(None, feeds)
            return {"equal": bool(np.array_equal(y, want))}
        except Exception as exc:
            return {"error": type(exc).__name__, "message": str(exc)}

    want = np.array(spec["want"], np.float32)
    for group in spec["groups"]:
        pristine = Path(group["pristine"])
        feeds = {k: np.array(v, dtype=group["dtypes"][k]) for k, v in group["feeds"].items()}
        os.environ.pop("ORTCORE_EXTERNAL_DATA_READ_IN_BYTES", None)
        os.environ.update(group["env"])
        for how, when in group["cases"]:
            case = [group["name"], how, when]
            print(json.dumps({"start": case}), flush=True)
            folder = Path(spec["work"]) / "-".join(case)
            shutil.copytree(pristine, folder)  # copy2: the past mtime is kept
            so = ortcore.SessionOptions()
            for key, value in group["config"].items():
                so.add_session_config_entry(key, value)
            sess = ortcore.InferenceSession(str(folder / "m.onnx"), so, providers=["cpu"])
            runs = []
            if when == "between_runs":
                runs.append(run(sess, group, feeds, want))
            mutate(folder / "w.data", how)
            runs.append(run(sess, group, feeds, want))
            runs.append(run(sess, group, feeds, want))
            print(json.dumps({"case": case, "runs": runs}), flush=True)
    """
)

KINDS = ["initializer", "subgraph", "constant"]
MUTATIONS = [
    "truncate0",
    "truncate_before",
    "truncate_mid",
    "rewrite",
    "rename",
    "unlink",
    "grow",
    "regrow",
]
HARMLESS_TO_MAPPED = {"rename", "unlink"}  # the kernel keeps the mapped inode
Results = dict[tuple[str, str, str], list[dict[str, Any]]]


def _need_cpu() -> None:
    if "CPUExecutionProvider" not in ortcore.get_available_providers():
        pytest.skip("ortcore-cpu is not installed")


def _group(
    root: Path,
    name: str,
    kind: str,
    config: dict[str, str],
    *,
    env: dict[str, str] | None = None,
    api: str = "run",
    mutations: list[str] = MUTATIONS,
) -> dict[str, Any]:
    """Scenarios on one model: every mutation, before the first run and between runs."""
    path, feeds = _pristine(root / "pristine" / name, kind)
    return {
        "name": name,
        "pristine": str(path.parent),
        "feeds": {k: np.asarray(v).tolist() for k, v in feeds.items()},
        "dtypes": {k: str(np.asarray(v).dtype) for k, v in feeds.items()},
        "config": config,
        "env": env or {},
        "api": api,
        "cases": [[how, when] for how in mutations for when in ("first_run", "between_runs")],
    }


def _run_child(root: Path, groups: list[dict[str, Any]]) -> Results:
    """Run the scenarios in one child process (a crash fails, naming the scenario)."""
    spec = {
        "work": str(root / "work"),
        "want": (X + W).tolist(),
        "offset": OFFSET,
        "nbytes": W.nbytes,
        "groups": groups,
    }
    proc = subprocess.run(
        [sys.executable, "-c", _SCENARIOS, json.dumps(spec)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    started = [line["start"] for line in lines if "start" in line]
    assert proc.returncode == 0, (
        f"child died with {proc.returncode} during {started[-1] if started else None}: "
        f"{proc.stderr[-3000:]}"
    )
    results = {tuple(line["case"]): line["runs"] for line in lines if "case" in line}
    assert len(results) == sum(len(g["cases"]) for g in groups)
    return results  # type: ignore[return-value]


@pytest.fixture(scope="module")
def mapped_results(tmp_path_factory: pytest.TempPathFactory) -> Results:
    """Sessions forced to map (``"0"``), and one that maps because of the
    environment variable; one of them runs through IO binding."""
    _need_cpu()
    root = tmp_path_factory.mktemp("mapped")
    groups = [_group(root, kind, kind, {READ_IN_CONFIG: "0"}) for kind in KINDS]
    groups.append(
        _group(
            root,
            "iobinding",
            "initializer",
            {READ_IN_CONFIG: "0"},
            api="iobinding",
            mutations=["truncate0", "unlink"],
        )
    )
    groups.append(
        _group(root, "env", "initializer", {}, env={READ_IN_ENV: "0"}, mutations=["truncate0"])
    )
    return _run_child(root, groups)


@pytest.fixture(scope="module")
def read_in_results(tmp_path_factory: pytest.TempPathFactory) -> Results:
    """Sessions under the default limit, and one whose ``all`` wins over an
    environment that maps everything."""
    _need_cpu()
    root = tmp_path_factory.mktemp("read_in")
    groups = [_group(root, kind, kind, {}) for kind in KINDS]
    groups.append(
        _group(root, "all", "initializer", {READ_IN_CONFIG: "all"}, env={READ_IN_ENV: "0"})
    )
    return _run_child(root, groups)


def _of(results: Results, name: str) -> dict[tuple[str, str], list[dict[str, Any]]]:
    return {(how, when): runs for (group, how, when), runs in results.items() if group == name}


@pytest.mark.parametrize("kind", KINDS)
def test_mapped_data_changed_fails_every_later_run_cleanly(
    mapped_results: Results, kind: str
) -> None:
    for (how, when), runs in _of(mapped_results, kind).items():
        if when == "between_runs":
            assert runs[0] == {"equal": True}, (how, runs)
        after = runs[-2:]
        if how in HARMLESS_TO_MAPPED:
            assert after == [{"equal": True}] * 2, (how, when, after)
            continue
        for r in after:  # the run after the change, and the next one: both refused
            assert r.get("error") == "ExternalDataChanged", (how, when, r)
            message = r["message"]
            assert "w.data" in message and "m.onnx" in message, message
            assert "create the session again" in message and READ_IN_CONFIG in message
        first = after[0]["message"]
        expected = {
            "truncate0": "truncated to 0 bytes",
            "truncate_before": f"truncated to {OFFSET:,} bytes",
            "truncate_mid": "truncated to",
            "rewrite": "written to",
            "grow": "grew from",
            "regrow": "written to",  # the same size again, but written: still refused
        }[how]
        assert expected in first, (how, first)
        assert after[1]["message"] == first


def test_io_binding_runs_are_checked_too(mapped_results: Results) -> None:
    for (how, _), runs in _of(mapped_results, "iobinding").items():
        want = "ExternalDataChanged" if how == "truncate0" else None
        assert runs[-1].get("error") == want, (how, runs)


def test_environment_variable_sets_the_default(mapped_results: Results) -> None:
    runs = _of(mapped_results, "env")
    assert runs and all(r[-1].get("error") == "ExternalDataChanged" for r in runs.values()), runs


@pytest.mark.parametrize("kind", KINDS)
def test_read_in_data_is_immune_to_its_file(read_in_results: Results, kind: str) -> None:
    """Under the default limit a small model's data is read in at load:
    runs give the original values whatever happens to the file."""
    runs = _of(read_in_results, kind)
    assert len(runs) == 2 * len(MUTATIONS)
    for case, r in runs.items():
        assert all(x == {"equal": True} for x in r), (case, r)


def test_read_in_all_overrides_a_mapping_default(read_in_results: Results) -> None:
    runs = _of(read_in_results, "all")
    assert len(runs) == 2 * len(MUTATIONS)
    for case, r in runs.items():
        assert all(x == {"equal": True} for x in r), (case, r)


# -- changes while a session is created or a run goes on, and other reads ----------------

_MISC = textwrap.dedent(
    """
    import json, os, sys, threading
    from pathlib import Path
    import numpy as np
    import ortcore
    import ortcore.session_build as session_module
    from ortcore.external_data import EXTERNAL_DATA_KEY
    from ortcore.model import LoadOptions, load_model

    folders = json.loads(sys.argv[1])
    x = np.ones((16, 64), np.float32)
    mapped = ortcore.SessionOptions()
    mapped.add_session_config_entry("session.external_data_read_in_bytes", "0")

    def grow(data):
        with open(data, "ab") as f:
            f.write(b"\\0" * 4096)

    def report(section, value):
        print(json.dumps({section: value}), flush=True)

    def error(call):
        try:
            call()
            return "no error"
        except Exception as exc:
            return [type(exc).__name__, str(exc)]

    # A mapped file that grows while the session is created (after optimizing).
    folder = Path(folders["creation"])
    optimize = session_module.optimize
    def optimize_then_grow(*args, **kw):
        optimize(*args, **kw)
        grow(folder / "w.data")
    session_module.optimize = optimize_then_grow
    report("creation", error(
        lambda: ortcore.InferenceSession(str(folder / "m.onnx"), mapped, providers=["cpu"])))
    session_module.optimize = optimize

    # A mapped file that grows, from another thread, while a run is going on.
    folder = Path(folders["run"])
    sess = ortcore.InferenceSession(str(folder / "m.onnx"), mapped, providers=["cpu"])
    real_run = sess._runner.run
    def run_while_it_grows(*args, **kw):
        result = real_run(*args, **kw)
        t = threading.Thread(target=grow, args=(folder / "w.data",))
        t.start()
        t.join()
        return result
    sess._runner.run = run_while_it_grows
    report("run", [error(lambda: sess.run(None, {"x": x})) for _ in range(2)])

    # Read-in data while another thread truncates, regrows and rewrites its file.
    folder = Path(folders["vandal"])
    data = folder / "w.data"
    sess = ortcore.InferenceSession(str(folder / "m.onnx"), providers=["cpu"])
    (want,) = sess.run(None, {"x": x})
    size = os.stat(data).st_size
    stop = threading.Event()
    def vandal():
        while not stop.is_set():
            os.truncate(data, 0)
            os.truncate(data, size)
            with open(data, "r+b") as f:
                f.write(b"\\x7f" * size)
    t = threading.Thread(target=vandal)
    t.start()
    try:
        same = [bool(np.array_equal(sess.run(None, {"x": x})[0], want)) for _ in range(200)]
    finally:
        stop.set()
        t.join()
    report("vandal", {"same": all(same), "runs": len(same)})

    # The optimized-model writer writes again the data file another session maps.
    folder = Path(folders["resave"])
    so = ortcore.SessionOptions()
    so.optimized_model_filepath = str(folder / "opt.onnx")
    so.add_session_config_entry(
        "session.optimized_model_external_initializers_min_size_in_bytes", "0")
    ortcore.InferenceSession(str(folder / "m.onnx"), so, providers=["cpu"])
    sess = ortcore.InferenceSession(str(folder / "opt.onnx"), mapped, providers=["cpu"])
    files = [p.name for p in sess._model.meta[EXTERNAL_DATA_KEY].mapped_files]
    (want,) = sess.run(None, {"x": x})
    ortcore.InferenceSession(str(folder / "m.onnx"), so, providers=["cpu"])
    same = error(lambda: np.testing.assert_array_equal(sess.run(None, {"x": x})[0], want))
    report("resave", {"mapped": files, "second_run": same})

    # The bytes of a tensor of a truncated mapped file, and the model's check.
    folder = Path(folders["tobytes"])
    model = load_model(folder / "m.onnx", LoadOptions(external_data_read_in_bytes=0))
    tensor = model.graph.initializers["w"].const_value
    os.truncate(folder / "w.data", 0)
    report("tobytes", [error(tensor.tobytes), error(model.meta[EXTERNAL_DATA_KEY].check)])
    """
)


@pytest.fixture(scope="module")
def misc_results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    _need_cpu()
    root = tmp_path_factory.mktemp("misc")
    sections = ["creation", "run", "vandal", "resave", "tobytes"]
    folders = {s: str(_pristine(root / s, "initializer")[0].parent) for s in sections}
    proc = subprocess.run(
        [sys.executable, "-c", _MISC, json.dumps(folders)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    out: dict[str, Any] = {}
    for line in proc.stdout.splitlines():
        if line.startswith("{"):
            out.update(json.loads(line))
    assert proc.returncode == 0, (
        f"child died with {proc.returncode} after {list(out)}: {proc.stderr[-3000:]}"
    )
    return out


def test_mapped_file_changed_while_the_session_is_created_fails_creation(
    misc_results: dict[str, Any],
) -> None:
    kind, message = misc_results["creation"]
    assert kind == "ExternalDataChanged" and "grew from" in message, message


def test_mapped_file_changed_during_a_run_fails_that_run(misc_results: dict[str, Any]) -> None:
    """The run's outputs are not handed back (they may come from changed
    weights), and the next run is refused too."""
    runs = misc_results["run"]
    assert [r[0] for r in runs] == ["ExternalDataChanged"] * 2, runs


def test_read_in_data_survives_a_file_vandalized_during_runs(
    misc_results: dict[str, Any],
) -> None:
    assert misc_results["vandal"] == {"same": True, "runs": 200}


def test_optimized_model_written_again_leaves_a_session_on_its_data_running(
    misc_results: dict[str, Any],
) -> None:
    """``optimized_model_filepath`` replaces its data file (a new file renamed
    over it): a session mapping the old one runs on."""
    assert misc_results["resave"] == {"mapped": ["opt.onnx.data"], "second_run": "no error"}


def test_bytes_of_a_truncated_mapped_file_are_an_error(misc_results: dict[str, Any]) -> None:
    """``tobytes`` (what saving the optimized model uses) reads the descriptor:
    a truncated file is an error, never a fault."""
    for kind, message in misc_results["tobytes"]:
        assert kind == "ExternalDataChanged", message


# -- what loading pins, and how ------------------------------------------------------------


def _load(path: Path, limit: int | None) -> ir.Model:
    return load_model(path, LoadOptions(external_data_read_in_bytes=limit))


def _pinned(model: ir.Model) -> PinnedTensor:
    tensor = model.graph.initializers["w"].const_value
    assert isinstance(tensor, PinnedTensor)
    return tensor


def test_limit_decides_read_in_or_mapped(tmp_path: Path) -> None:
    path, _ = _pristine(tmp_path, "initializer")
    read = _load(path, W.nbytes)
    mapped = _load(path, W.nbytes - 1)
    assert not _pinned(read).mapped and _pinned(mapped).mapped
    assert read.meta[EXTERNAL_DATA_KEY].read_in_bytes == W.nbytes
    assert not read.meta[EXTERNAL_DATA_KEY].mapped
    data = mapped.meta[EXTERNAL_DATA_KEY]
    assert data.mapped_bytes == W.nbytes and data.mapped_files == [(tmp_path / "w.data").resolve()]
    for model in (read, mapped):
        array = _pinned(model).numpy()
        np.testing.assert_array_equal(array, W)
        assert not array.flags.writeable


def test_limit_is_spent_on_the_smallest_files(tmp_path: Path) -> None:
    """Over the limit, whole data files are read in smallest first while it
    lasts; only the others are mapped (and checked)."""
    sizes = {"a": 1, "b": 2, "c": 4}  # in blocks of 8 rows of 64 float32 (2 KiB, over 1 KiB)
    inits, nodes, prev = [], [], "x"
    for name, blocks in sizes.items():
        rows = 8 * blocks
        (tmp_path / f"{name}.data").write_bytes(np.ones((rows, COLS), np.float32).tobytes())
        t = numpy_helper.from_array(np.ones((rows, COLS), np.float32), name)
        inits.append(_external(t, f"{name}.data", 0))
        out = f"s{name}"
        nodes.append(helper.make_node("ReduceSum", [name], [out], keepdims=0))
        nodes.append(helper.make_node("Add", [prev, out], [f"t{name}"]))
        prev = f"t{name}"
    nodes.append(helper.make_node("Identity", [prev], ["y"]))
    path = tmp_path / "m.onnx"
    path.write_bytes(make_model(nodes, [fvi("x", [COLS])], [fvi("y", [COLS])], initializers=inits))
    block = 8 * COLS * 4  # bytes
    for limit, mapped in [
        (7 * block, []),
        (7 * block - 1, ["c"]),
        (3 * block, ["c"]),
        (3 * block - 1, ["b", "c"]),
        (0, ["a", "b", "c"]),
    ]:
        model = _load(path, limit)
        data = model.meta[EXTERNAL_DATA_KEY]
        assert sorted(p.stem for p in data.mapped_files) == mapped, limit
        assert data.mapped_bytes == sum(sizes[n] for n in mapped) * block
        assert data.read_in_bytes == 7 * block - data.mapped_bytes
        for name in sizes:
            tensor = model.graph.initializers[name].const_value
            assert isinstance(tensor, PinnedTensor) and tensor.mapped == (name in mapped)


def test_pinned_data_is_read_through_the_file_it_loaded(tmp_path: Path) -> None:
    """A file replaced by rename after load: the tensor's bytes, the array and
    the optimized model written from it are still the file it loaded."""
    path, _ = _pristine(tmp_path, "initializer")
    model = _load(path, 0)
    new = tmp_path / "w.new"
    new.write_bytes(b"\x7f" * (OFFSET + W.nbytes))
    os.replace(new, tmp_path / "w.data")
    tensor = _pinned(model)
    assert tensor.tobytes() == W.tobytes()
    np.testing.assert_array_equal(tensor.numpy(), W)
    model.meta[EXTERNAL_DATA_KEY].check()  # the mapped inode is unchanged
    out = tmp_path / "out"
    out.mkdir()
    save_model(model, out / "opt.onnx")
    again = onnx.load(str(out / "opt.onnx"))
    np.testing.assert_array_equal(numpy_helper.to_array(again.graph.initializer[0]), W)


def test_file_swapped_between_check_and_open_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ortcore import model as model_module

    path, _ = _pristine(tmp_path, "initializer")
    check = model_module.check_external_data

    def check_then_swap(*args: Any, **kw: Any) -> Any:
        identities = check(*args, **kw)
        new = tmp_path / "w.new"
        new.write_bytes((tmp_path / "w.data").read_bytes())
        os.replace(new, tmp_path / "w.data")
        return identities

    monkeypatch.setattr(model_module, "check_external_data", check_then_swap)
    with pytest.raises(ortcore.InvalidArgument, match=r"w\.data.*replaced by another file"):
        _load(path, 0)


_DTYPES = [d for d in ir.DataType if d not in (ir.DataType.UNDEFINED, ir.DataType.STRING)]


@pytest.mark.parametrize("mapped", [False, True], ids=["read-in", "mapped"])
def test_pinned_tensors_match_onnx_ir_for_every_type(tmp_path: Path, mapped: bool) -> None:
    """The arrays of pinned tensors are those onnx-ir's own external tensors
    give, for every fixed-size type (sub-byte types unpacked)."""
    rng = np.random.default_rng(0)
    shape = [3, 5]
    blob = bytearray()
    inits = []
    for d in _DTYPES:
        nbytes = (15 * d.bitwidth + 7) // 8
        t = TensorProto(name=f"t_{d.name}", data_type=int(d), dims=shape)
        _external(t, "all.data", len(blob))
        raw = rng.integers(0, 256, nbytes, dtype=np.uint8)
        if (15 * d.bitwidth) % 8:  # padding bits must be zero (onnx-ir checks some)
            raw[-1] &= (1 << (15 * d.bitwidth) % 8) - 1
        blob += raw.tobytes()
        blob += bytes(-len(blob) % 8)
        inits.append(t)
    (tmp_path / "all.data").write_bytes(bytes(blob))
    graph = helper.make_graph([], "g", [], [], inits)
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)])
    (tmp_path / "m.onnx").write_bytes(proto.SerializeToString())
    model = ir.from_proto(proto)
    for v in model.graph.initializers.values():
        assert isinstance(v.const_value, ir.ExternalTensor)
        v.const_value.base_dir = str(tmp_path)
    theirs = {name: v.const_value for name, v in model.graph.initializers.items()}
    data = external_data.pin_external_data(model, tmp_path, read_in_bytes=0 if mapped else READ_ALL)
    assert data.mapped == mapped
    for name, v in model.graph.initializers.items():
        mine, ref = v.const_value, theirs[name]
        assert isinstance(mine, PinnedTensor) and mine.mapped == mapped
        a, b = mine.numpy(), ref.numpy()
        assert (a.dtype, a.shape) == (b.dtype, b.shape), name
        assert a.tobytes() == b.tobytes(), name
        assert mine.tobytes() == ref.tobytes(), name


def test_sub_byte_tensor_with_bad_padding_is_an_invalid_model(tmp_path: Path) -> None:
    (tmp_path / "p.bin").write_bytes(b"\xff" * 12)  # 15 six-bit values: the last 6 bits pad
    t = _external(TensorProto(name="p", data_type=TensorProto.FLOAT6E2M3, dims=[15]), "p.bin", 0)
    proto = helper.make_model(
        helper.make_graph([], "g", [], [], [t]), opset_imports=[helper.make_opsetid("", 23)]
    )
    model = ir.from_proto(proto)
    with pytest.raises(ortcore.InvalidGraph, match=r"'p' .*FLOAT6E2M3.*p\.bin.*padding"):
        external_data.pin_external_data(model, tmp_path)


def test_external_string_tensor_is_an_invalid_model(tmp_path: Path) -> None:
    (tmp_path / "s.bin").write_bytes(b"abcdefgh" * 4)
    t = _external(TensorProto(name="s", data_type=TensorProto.STRING, dims=[2]), "s.bin", 0)
    path = tmp_path / "m.onnx"
    path.write_bytes(
        make_model(
            [helper.make_node("Identity", ["s"], ["y"])],
            [],
            [fvi("y", [2], TensorProto.STRING)],
            initializers=[t],
        )
    )
    with pytest.raises(ortcore.InvalidGraph, match=r"'s' of type STRING.*external"):
        load_model(path)


# -- the read-in limit ---------------------------------------------------------------------


def test_read_in_limit_values(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(READ_IN_ENV, raising=False)
    default = read_in_limit({})
    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    assert default == min(512 << 20, physical // 8)
    assert read_in_limit({READ_IN_CONFIG: "0"}) == 0
    assert read_in_limit({READ_IN_CONFIG: "1e6"}) == 1_000_000
    assert read_in_limit({READ_IN_CONFIG: " All "}) == READ_ALL
    monkeypatch.setenv(READ_IN_ENV, "123")
    assert read_in_limit({}) == 123
    assert read_in_limit({READ_IN_CONFIG: "7"}) == 7  # the session's entry wins
    for bad in ("-1", "lots", "nan", "inf"):
        with pytest.raises(ortcore.InvalidArgument, match=rf"{READ_IN_CONFIG}.*'all'"):
            read_in_limit({READ_IN_CONFIG: bad})
    monkeypatch.setenv(READ_IN_ENV, "lots")
    with pytest.raises(ortcore.InvalidArgument, match=READ_IN_ENV):
        read_in_limit({})


def test_a_bad_limit_fails_session_creation(tmp_path: Path) -> None:
    path, _ = _pristine(tmp_path, "initializer")
    so = ortcore.SessionOptions()
    so.add_session_config_entry(READ_IN_CONFIG, "-5")
    with pytest.raises(ortcore.InvalidArgument, match=READ_IN_CONFIG):
        ortcore.InferenceSession(str(path), so, providers=["mini"])


# -- the cost of the check -----------------------------------------------------------------


def test_the_per_run_check_is_cheap(tmp_path: Path, cpu: str) -> None:
    """One fstat per mapped file: microseconds, against a run's tens of them."""
    path, feeds = _pristine(tmp_path, "initializer")
    so = ortcore.SessionOptions()
    so.add_session_config_entry(READ_IN_CONFIG, "0")
    sess = ortcore.InferenceSession(str(path), so, providers=[cpu])
    check = sess._model.meta[EXTERNAL_DATA_KEY].check
    n = 2000
    t0 = time.perf_counter()
    for _ in range(n):
        check()
    per_check = (time.perf_counter() - t0) / n
    assert per_check < 50e-6, f"{per_check * 1e6:.1f} us per check"
    np.testing.assert_array_equal(sess.run(None, feeds)[0], X + W)
