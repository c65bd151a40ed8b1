"""Scale-out on Ray: the predictor, map_inference, ``ortcore batch`` (resume, a killed
actor) and the Serve deployment, on a local 2-CPU Ray cluster started in-process."""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from onnx import TensorProto, helper

from ..conftest import fvi, make_model

ray = pytest.importorskip("ray")
pytest.importorskip("ray.data")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from ortcore import InvalidArgument  # noqa: E402
from ortcore.batching import apply_session_options  # noqa: E402
from ortcore.ray import BatchPredictor, map_inference  # noqa: E402
from ortcore.ray_batch import read_output, run_batch  # noqa: E402


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

    from ortcore.ray import serve_application

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
