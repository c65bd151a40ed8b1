"""Scale-out on Ray: the predictor, map_inference, ``ortcore batch`` (resume, a killed
actor) and the Serve deployment, on a local 2-CPU Ray cluster started in-process."""

from __future__ import annotations

import os
import re
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from onnx import TensorProto, helper
from ray_models import fvi, make_model

ray = pytest.importorskip("ray")
pytest.importorskip("ray.data")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from ortcore import InvalidArgument  # noqa: E402

from ortcore_ray.columns import apply_session_options  # noqa: E402
from ortcore_ray.inference import BatchPredictor, map_inference  # noqa: E402
from ortcore_ray.run import read_output, run_batch  # noqa: E402

# Ray pickles the predictor classes defined here by value: a worker cannot import
# this module by the name pytest gives it (after its folder, on no worker's path).
ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])


def affine_model(batch: int | str = "N") -> bytes:
    """x [batch, 3] -> y = 2x + 1 [batch, 3], s = sum(x, axis 1) [batch]."""
    two = helper.make_tensor("two", TensorProto.FLOAT, [], [2.0])
    one = helper.make_tensor("one", TensorProto.FLOAT, [], [1.0])
    axes = helper.make_tensor("axes", TensorProto.INT64, [1], [1])
    nodes = [
        helper.make_node("Mul", ["x", "two"], ["t"]),
        helper.make_node("Add", ["t", "one"], ["y"]),
        helper.make_node("ReduceSum", ["x", "axes"], ["s"], keepdims=0),
    ]
    return make_model(
        nodes, [fvi("x", [batch, 3])], [fvi("y", [batch, 3]), fvi("s", [batch])], [two, one, axes]
    )


def expected(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    x = x.astype(np.float32)
    return 2 * x + 1, x.sum(axis=1)


@pytest.fixture(scope="module")
def cluster() -> Iterator[None]:
    """A local Ray cluster of 2 CPUs for this module's tests."""
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    if started:
        ray.shutdown()


@pytest.fixture
def model_path(tmp_path: Path) -> Path:
    path = tmp_path / "affine.onnx"
    path.write_bytes(affine_model())
    return path


def parquet_input(folder: Path, rows: int, *, with_id: bool = False) -> np.ndarray:
    """Two Parquet files of ``rows`` rows in all, list cells, several row groups."""
    x = np.arange(rows * 3, dtype=np.float64).reshape(rows, 3) / 7
    folder.mkdir()
    half = rows // 2
    for name, part in (("a.parquet", slice(0, half)), ("b.parquet", slice(half, rows))):
        columns: dict[str, Any] = {"features": pa.array(x[part].tolist())}
        if with_id:
            columns = {"id": pa.array([f"row{i}" for i in range(rows)][part]), **columns}
        pq.write_table(pa.table(columns), folder / name, row_group_size=max(half // 3, 1))
    return x


# --------------------------------------------------------------------------- #
# The predictor, called directly
# --------------------------------------------------------------------------- #


def test_predictor_maps_columns_casts_and_keeps_ids(cpu: str) -> None:
    predictor = BatchPredictor(affine_model(), inputs={"x": "features"})
    x = np.arange(12, dtype=np.float64).reshape(4, 3)
    cells = np.empty(4, dtype=object)
    cells[:] = list(x)  # a Parquet list column arrives as an object column of arrays
    out = predictor({"id": np.arange(4), "features": cells, "other": np.zeros(4)})
    assert sorted(out) == ["id", "s", "y"]
    y, s = expected(x)
    np.testing.assert_allclose(out["y"], y)
    np.testing.assert_allclose(out["s"], s)
    assert out["y"].dtype == np.float32
    np.testing.assert_array_equal(out["id"], np.arange(4))


def test_predictor_names_the_missing_column_and_unknown_names(cpu: str) -> None:
    predictor = BatchPredictor(affine_model(), passthrough=[])
    with pytest.raises(InvalidArgument, match=r"model input 'x'.*columns: 'a', 'b'"):
        predictor({"a": np.zeros((2, 3)), "b": np.zeros((2, 3))})
    with pytest.raises(InvalidArgument, match=r"'z'.*model inputs: 'x'"):
        BatchPredictor(affine_model(), inputs={"z": "features"})
    with pytest.raises(InvalidArgument, match=r"'q' are not outputs.*'y', 's'"):
        BatchPredictor(affine_model(), outputs=["q"])
    with pytest.raises(InvalidArgument, match="passthrough column"):
        BatchPredictor(affine_model(), passthrough=["id"])({"x": np.zeros((1, 3))})
    with pytest.raises(InvalidArgument, match="rows of different shapes"):
        ragged = np.empty(2, dtype=object)
        ragged[:] = [np.zeros(3), np.zeros(2)]
        predictor({"x": ragged})


def test_one_input_reads_the_only_other_column_and_outputs_rename(cpu: str) -> None:
    predictor = BatchPredictor(affine_model(), outputs={"s": "total"})
    out = predictor({"id": np.array([7, 8]), "pixels": np.ones((2, 3), np.float32)})
    assert sorted(out) == ["id", "total"]
    np.testing.assert_allclose(out["total"], [3.0, 3.0])


@pytest.mark.parametrize("fixed", [1, 2])
def test_fixed_batch_model_runs_in_chunks(cpu: str, fixed: int) -> None:
    predictor = BatchPredictor(affine_model(batch=fixed))
    x = np.random.default_rng(0).random((5, 3)).astype(np.float32)
    out = predictor({"x": x})  # 5 rows: chunks of `fixed`, the last one padded
    y, s = expected(x)
    np.testing.assert_allclose(out["y"], y, rtol=1e-6)
    np.testing.assert_allclose(out["s"], s, rtol=1e-6)


def test_session_options_from_strings() -> None:
    so = apply_session_options(
        {
            "graph_optimization_level": "ORT_ENABLE_BASIC",
            "enable_mem_pattern": "0",
            "session.disable_cpu_ep_fallback": "1",
        },
        threads=3,
    )
    assert so.graph_optimization_level.name == "ORT_ENABLE_BASIC"
    assert so.enable_mem_pattern is False
    assert so.intra_op_num_threads == 3
    assert so.get_session_config_entry("session.disable_cpu_ep_fallback") == "1"
    with pytest.raises(InvalidArgument, match="not a SessionOptions attribute"):
        apply_session_options({"intra_op_threads": 2}, threads=1)


# --------------------------------------------------------------------------- #
# On Ray
# --------------------------------------------------------------------------- #


def test_map_inference_puts_the_model_once(
    cpu: str, cluster: None, model_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = model_path.read_bytes()
    puts: list[Any] = []
    real_put = ray.put

    def counting_put(value: Any, **kw: Any) -> Any:
        if value == model:
            puts.append(value)
        return real_put(value, **kw)

    monkeypatch.setattr(ray, "put", counting_put)
    # Recorded by replacing warnings.warn, not with pytest.warns: warnings.catch_warnings
    # is process-global state, and Ray Data's threads enter and leave it concurrently.
    warned: list[str] = []
    real_warn = warnings.warn

    def recording_warn(message: Any, *args: Any, **kw: Any) -> None:
        warned.append(str(message))
        real_warn(message, *args, **kw)

    monkeypatch.setattr(warnings, "warn", recording_warn)
    x = np.random.default_rng(1).random((64, 3)).astype(np.float32)
    ds = ray.data.from_items([{"id": i, "x": x[i]} for i in range(64)], override_num_blocks=8)
    result = map_inference(ds, model_path, actors=2, batch_size=8).take_all()
    assert any("reserve every CPU" in w for w in warned), warned  # from_items reads nothing
    assert len(puts) == 1  # once for every actor and batch
    rows = sorted(result, key=lambda r: r["id"])
    assert [r["id"] for r in rows] == list(range(64))
    y, s = expected(x)
    np.testing.assert_allclose(np.stack([r["y"] for r in rows]), y, rtol=1e-6)
    np.testing.assert_allclose([r["s"] for r in rows], s, rtol=1e-6)


def test_map_inference_fails_in_the_driver_on_a_missing_column(
    cpu: str, cluster: None, model_path: Path
) -> None:
    ds = ray.data.from_items([{"id": 0, "pixels": [1.0, 2.0, 3.0], "more": 1}])
    with pytest.raises(InvalidArgument, match=r"model input 'x'.*'pixels', 'more'"):
        map_inference(ds, model_path)


def test_batch_cli_writes_every_row_once_and_resumes(
    cpu: str, cluster: None, model_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from ortcore.cli import main

    x = parquet_input(tmp_path / "in", 120)
    out = tmp_path / "out"
    args = ["batch", str(model_path), str(tmp_path / "in"), str(out)]
    args += ["--actors", "2", "--batch-size", "8", "--rows-per-file", "16"]
    assert main([*args, "--input-map", "x=features"]) == 0
    assert "120 rows" in capsys.readouterr().err
    got = read_output(out)
    np.testing.assert_array_equal(got["id"], np.arange(120))  # generated, file order
    y, s = expected(x)
    np.testing.assert_allclose(got["y"], y, rtol=1e-6)
    np.testing.assert_allclose(got["s"], s, rtol=1e-6)

    # A run that died: some parts never written, one left half-written.
    parts = sorted(out.glob("part-*.parquet"))
    lost = sum(pq.read_metadata(p).num_rows for p in parts[::2])
    for p in parts[::2]:
        p.unlink()
    (out / ".tmp-deadbeef.parquet").write_bytes(b"PAR1 half")
    report = run_batch(
        model_path, str(tmp_path / "in"), str(out), inputs={"x": "features"}, actors=1
    )
    assert (report.skipped_rows, report.inferred_rows) == (120 - lost, lost)
    assert not list(out.glob(".tmp-*"))
    got = read_output(out)
    np.testing.assert_array_equal(got["id"], np.arange(120))
    np.testing.assert_allclose(got["y"], y, rtol=1e-6)

    # Nothing left to do; another model is refused.
    assert (
        run_batch(
            model_path, str(tmp_path / "in"), str(out), inputs={"x": "features"}
        ).inferred_rows
        == 0
    )
    other = tmp_path / "other.onnx"
    other.write_bytes(affine_model(batch="B"))
    with pytest.raises(InvalidArgument, match=r"another job.*model_sha256"):
        run_batch(other, str(tmp_path / "in"), str(out), inputs={"x": "features"})


def test_killed_actor_loses_and_duplicates_no_row(
    cpu: str, cluster: None, model_path: Path, tmp_path: Path
) -> None:
    parquet_input(tmp_path / "in", 96, with_id=True)
    marker = tmp_path / "killed"

    class DiesOnce(BatchPredictor):
        """Kills its own process on the batch holding row40, the first time only."""

        def __call__(self, batch: Any) -> Any:
            if "row40" in set(batch["id"].tolist()) and not marker.exists():
                marker.write_text(str(os.getpid()))
                os._exit(1)
            return super().__call__(batch)

    report = run_batch(
        model_path,
        str(tmp_path / "in"),
        str(tmp_path / "out"),
        inputs={"x": "features"},
        actors=2,
        batch_size=8,
        rows_per_file=16,
        predictor=DiesOnce,
        progress=False,
    )
    assert marker.exists()  # the actor did die
    got = read_output(tmp_path / "out")
    assert sorted(got["id"].tolist()) == sorted(f"row{i}" for i in range(96))
    assert report.inferred_rows == 96


def test_npy_and_npz_inputs_and_outputs(
    cpu: str, cluster: None, model_path: Path, tmp_path: Path
) -> None:
    x = np.random.default_rng(2).random((30, 3)).astype(np.float32)
    y, s = expected(x)
    np.save(tmp_path / "x.npy", x)
    run_batch(
        model_path, str(tmp_path / "x.npy"), str(tmp_path / "y.npy"), outputs=["s"], progress=False
    )
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), s, rtol=1e-6)

    ids = np.arange(100, 130)
    np.savez(tmp_path / "x.npz", id=ids, x=x)
    run_batch(model_path, str(tmp_path / "x.npz"), str(tmp_path / "out.npz"), progress=False)
    with np.load(tmp_path / "out.npz") as got:
        np.testing.assert_array_equal(got["id"], ids)
        np.testing.assert_allclose(got["y"], y, rtol=1e-6)


# --------------------------------------------------------------------------- #
# Ray Serve
# --------------------------------------------------------------------------- #


def test_serve_deployment_answers_numpy_and_json(cpu: str, cluster: None, model_path: Path) -> None:
    serve = pytest.importorskip("ray.serve", reason="ray[serve] is not installed")
    requests = pytest.importorskip("requests")
    import socket

    from ortcore_ray.inference import serve_application

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    try:
        handle = serve.run(serve_application(model_path), name="affine", route_prefix="/affine")
        x = np.arange(6, dtype=np.float32).reshape(2, 3)
        out = handle.remote({"x": x}).result(timeout_s=120)
        np.testing.assert_allclose(out["y"], expected(x)[0])
        reply = requests.post(
            f"http://127.0.0.1:{port}/affine", json={"inputs": {"x": x.tolist()}}, timeout=60
        )
        assert reply.status_code == 200
        np.testing.assert_allclose(reply.json()["outputs"]["s"], expected(x)[1])
        bad = requests.post(f"http://127.0.0.1:{port}/affine", json={"z": [1]}, timeout=60)
        assert bad.status_code == 400 and "missing" in bad.json()["error"]
    finally:
        serve.shutdown()


# --------------------------------------------------------------------------- #
# Errors inside actors: the actor's own message, the output left resumable
# --------------------------------------------------------------------------- #


def test_job_error_finds_what_the_task_raised() -> None:
    from ortcore.errors import Fail
    from ray import exceptions as rx

    from ortcore_ray.errors import ClusterError, job_error

    def task_error(cause: BaseException, text: str = "Traceback ...") -> BaseException:
        error = rx.RayTaskError("f", text, cause, proctitle="p", pid=1, ip="127.0.0.1")
        return error.as_instanceof_cause()

    note = "\nFailed to apply UDF transform after 1/1 attempts (total backoff 0.0s).\nTo change"
    cause = InvalidArgument("input f: column 'x' is bad" + note)
    got = job_error(task_error(cause))
    assert got is cause and str(got) == "input f: column 'x' is bad"  # Ray Data's note cut

    # Ray kept only the text (Ray Data's UserCodeException, a constructor that raised)
    text = (
        "\x1b[36mray::MapWorker(MapBatches(BatchPredictor)).submit()\x1b[39m (pid=1, ip=x)\n"
        '  File "ortcore/batching.py", line 1, in column_array\n'
        "ortcore.errors.InvalidArgument: input f: column 'x' is bad\n\n"
        "The above exception was the direct cause of the following exception:\n\n"
        "ray.exceptions.UserCodeException: UDF failed to process a data block."
    )
    got = job_error(task_error(rx.UserCodeException("UDF failed"), text))
    assert type(got) is InvalidArgument and str(got) == "input f: column 'x' is bad"

    got = job_error(task_error(TypeError("boom")))
    assert isinstance(got, Fail) and "raised TypeError: boom" in str(got)
    for infra in (rx.ActorDiedError(), rx.RaySystemError("the GCS is gone")):
        assert isinstance(job_error(infra), ClusterError)
    plain = ValueError("not from Ray")
    assert job_error(plain) is plain


def fails_to_run_model(batch: int | str = "N") -> bytes:
    """x [batch, 3] -> Reshape to [7, -1]: fails at run for a batch of 8."""
    shape = helper.make_tensor("shape", TensorProto.INT64, [2], [7, -1])
    node = helper.make_node("Reshape", ["x", "shape"], ["y"], name="bad_reshape")
    return make_model([node], [fvi("x", [batch, 3])], [fvi("y", None)], [shape])


def check_resumable(out: Path, ids: set[Any]) -> None:
    """After a failed job: the manifest says incomplete, every part whole, no row twice."""
    import json

    manifest = json.loads((out / "_ortcore_batch.json").read_text())
    assert manifest["complete"] is False
    assert not list(out.glob(".tmp-*"))
    written = [i for p in out.glob("part-*.parquet") for i in pq.read_table(p)["id"].to_pylist()]
    assert len(written) == len(set(written)) and set(written) <= ids


def test_a_ragged_row_stops_the_job_with_its_id_and_a_fixed_rerun_completes(
    cpu: str, cluster: None, model_path: Path, tmp_path: Path
) -> None:
    x = parquet_input(tmp_path / "in", 96, with_id=True)
    table = pq.read_table(tmp_path / "in" / "b.parquet")
    cells = table["features"].to_pylist()
    cells[42] = cells[42][:2]  # row90: far past the rows the pre-flight reads
    bad = table.set_column(1, "features", pa.array(cells))
    pq.write_table(bad, tmp_path / "in" / "b.parquet", row_group_size=16)
    out = tmp_path / "out"
    kw: dict[str, Any] = {"inputs": {"x": "features"}, "actors": 1, "progress": False}
    with pytest.raises(InvalidArgument) as raised:
        run_batch(model_path, str(tmp_path / "in"), str(out), batch_size=8, rows_per_file=8, **kw)
    message = str(raised.value)
    assert "b.parquet" in message and "'features'" in message and "'row90'" in message
    assert "model input 'x'" in message and "\n" not in message
    check_resumable(out, {f"row{i}" for i in range(96)})

    pq.write_table(table, tmp_path / "in" / "b.parquet", row_group_size=16)  # fixed
    report = run_batch(model_path, str(tmp_path / "in"), str(out), **kw)
    assert report.skipped_rows + report.inferred_rows == 96
    got = read_output(out)
    assert sorted(got["id"].tolist()) == sorted(f"row{i}" for i in range(96))
    order = np.argsort([int(i[3:]) for i in got["id"]])
    np.testing.assert_allclose(got["y"][order], expected(x)[0], rtol=1e-6)


class RaisesTypeError(BatchPredictor):
    """A predictor with a bug."""

    def __call__(self, batch: Any) -> Any:
        raise TypeError("a bug in a predictor")


@pytest.mark.parametrize(
    ("model", "kw", "error"),
    [
        (fails_to_run_model, {}, r"RuntimeException:.*'bad_reshape'"),
        (affine_model, {"providers": ["nosuch"]}, r"Unknown provider 'nosuch'"),
        (affine_model, {"predictor": RaisesTypeError}, r"Fail:.*TypeError: a bug in a predictor"),
    ],
    ids=["model run", "provider", "predictor bug"],
)
def test_errors_raised_in_actors_reach_the_caller_as_ortcore_errors(
    cpu: str, cluster: None, tmp_path: Path, model: Any, kw: dict[str, Any], error: str
) -> None:
    from ortcore.errors import OrtcoreError

    path = tmp_path / "m.onnx"
    path.write_bytes(model())
    np.save(tmp_path / "x.npy", np.ones((16, 3), np.float32))
    with pytest.raises(OrtcoreError) as raised:
        run_batch(
            path,
            str(tmp_path / "x.npy"),
            str(tmp_path / "out"),
            batch_size=8,
            actors=1,
            progress=False,
            **kw,
        )
    assert re.search(error, f"{type(raised.value).__name__}: {raised.value}"), raised.value
    assert "Traceback" not in str(raised.value) and "ray::" not in str(raised.value)
    check_resumable(tmp_path / "out", set(range(16)))


class DiesAlways(BatchPredictor):
    """An actor whose process dies on every batch (a crash, the OOM killer)."""

    def __call__(self, batch: Any) -> Any:
        os._exit(1)


def test_actors_that_die_for_good_are_a_cluster_error(
    cpu: str, cluster: None, model_path: Path, tmp_path: Path
) -> None:
    from ortcore_ray.errors import ClusterError

    np.save(tmp_path / "x.npy", np.ones((8, 3), np.float32))
    with pytest.raises(ClusterError, match=r"run the job again to resume"):
        run_batch(
            model_path,
            str(tmp_path / "x.npy"),
            str(tmp_path / "out"),
            actors=1,
            predictor=DiesAlways,
            max_restarts=0,
            max_task_retries=0,
            progress=False,
        )
    check_resumable(tmp_path / "out", set(range(8)))


def test_cli_reports_an_actor_error_in_a_few_lines_and_resumes(
    cpu: str, cluster: None, model_path: Path, tmp_path: Path
) -> None:
    import subprocess
    import sys

    address = ray.get_runtime_context().gcs_address
    x = np.random.default_rng(3).random((64, 3))
    cells = [list(r) for r in x]
    cells[50] = cells[50][:2]
    pq.write_table(pa.table({"x": cells}), tmp_path / "in.parquet", row_group_size=16)
    cmd = [sys.executable, "-m", "ortcore", "batch", str(model_path), str(tmp_path / "in.parquet")]
    cmd += [str(tmp_path / "out"), "--address", address, "--actors", "1", "--batch-size", "8"]
    got = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert got.returncode == 2, got.stderr
    lines = got.stderr.strip().splitlines()
    assert len(lines) <= 6, got.stderr  # our progress line, one or two of Ray's, our error
    error = next(line for line in lines if "InvalidArgument" in line)
    assert "column 'x'" in error and "model input 'x'" in error and "id 50" in error
    assert "Traceback" not in got.stderr
    check_resumable(tmp_path / "out", set(range(64)))

    cells[50] = list(x[50])
    pq.write_table(pa.table({"x": cells}), tmp_path / "in.parquet", row_group_size=16)
    got = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert got.returncode == 0, got.stderr
    got_out = read_output(tmp_path / "out")
    np.testing.assert_array_equal(got_out["id"], np.arange(64))
    np.testing.assert_allclose(got_out["y"], expected(x)[0], rtol=1e-6)
