"""Pre-flight of ``ortcore batch`` (ortcore_ray.checks) and the rules it shares with the
actors (ortcore_ray.columns): every column against the model input it feeds, before Ray.

No Ray cluster here: the checks are pure functions of the model and the file schemas,
``prepare_batch`` runs without Ray, and the command line refuses a bad job before it
starts Ray.
"""

from __future__ import annotations

import itertools
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from onnx import TensorProto, helper
from ray_models import fvi, make_model

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from ortcore import InvalidArgument  # noqa: E402

from ortcore_ray.checks import (  # noqa: E402
    arrow_column,
    check_column,
    check_ids,
    check_input,
    first_null_row,
    numpy_column,
)
from ortcore_ray.columns import ModelArg, cast_problem, column_array, row_problem  # noqa: E402
from ortcore_ray.run import prepare_batch  # noqa: E402


def arg(shape: Any = ("N", 64), dtype: Any = np.float32, **kw: Any) -> ModelArg:
    return ModelArg("x", tuple(shape), None if dtype is None else np.dtype(dtype), **kw)


def field(t: Any, nullable: bool = True) -> Any:
    return pa.field("col", t, nullable=nullable)


def relu_model(shape: Any = ("N", 64), elem: int = TensorProto.FLOAT) -> bytes:
    return make_model(
        [helper.make_node("Identity", ["x"], ["y"])],
        [fvi("x", shape, elem)],
        [fvi("y", shape, elem)],
    )


# --------------------------------------------------------------------------- #
# Column types from Arrow schemas, against model inputs
# --------------------------------------------------------------------------- #

F32, F64 = pa.float32(), pa.float64()
ARROW_CASES = [
    # (arrow type, model input shape, model dtype, error pattern or None)
    (pa.string(), ("N", 64), np.float32, r"holds strings.*takes numbers, not strings"),
    (pa.large_string(), ("N",), np.int64, r"holds strings"),
    (pa.binary(), ("N",), np.float32, r"holds bytes"),
    (pa.dictionary(pa.int32(), pa.string()), ("N",), np.float32, r"holds strings"),
    (pa.dictionary(pa.int32(), F64), ("N",), np.float32, None),
    (pa.bool_(), ("N",), np.float32, None),
    (pa.int64(), ("N",), np.float32, None),
    (pa.int64(), ("N",), np.int32, None),  # a narrowing cast: values checked in the actor
    (pa.uint8(), ("N",), np.float16, None),
    (F64, ("N",), np.int64, r"float64 does not cast"),
    (F32, ("N",), np.bool_, r"does not cast"),
    (pa.int32(), ("N",), np.bool_, r"does not cast"),
    (pa.timestamp("ns"), ("N",), np.float32, r"not dates or times"),
    (pa.date32(), ("N",), np.int64, r"not dates or times"),
    (pa.duration("s"), ("N",), np.int64, r"not dates or times"),
    (pa.time64("us"), ("N",), np.int64, r"not dates or times"),
    (pa.decimal128(5, 2), ("N",), np.float32, r"decimal128.*no tensor element type"),
    (pa.struct([("a", F32)]), ("N",), np.float32, r"struct.*no tensor element type"),
    (pa.map_(pa.string(), F32), ("N",), np.float32, r"no tensor element type"),
    (pa.null(), ("N",), np.float32, r"only nulls"),
    (pa.string(), ("N",), object, None),  # a string input takes strings
    (pa.binary(), ("N",), object, None),
    (F32, ("N",), object, r"takes strings"),
    (pa.list_(F32), ("N", 64), np.float32, None),  # lengths known only from the rows
    (pa.large_list(F64), ("N", 64), np.float32, None),
    (pa.list_(F32, 32), ("N", 64), np.float32, r"rows of shape \[32\].*\[64\] \(64 elements\)"),
    (pa.list_(F32, 64), ("N", 64), np.float32, None),
    (pa.list_(pa.list_(F32, 8), 8), ("N", 64), np.float32, None),  # 64 elements: reshaped
    (pa.list_(pa.list_(F32, 8), 8), ("N", 8, 8), np.float32, None),
    (pa.list_(pa.list_(F32, 8), 8), ("N", "C", 8), np.float32, None),
    (pa.list_(pa.list_(F32, 8), 8), ("N", "C"), np.float32, r"rank 1"),
    (pa.list_(pa.list_(F32, 8), 8), ("N", "C", 4), np.float32, r"rows of shape \[C, 4\]"),
    (pa.list_(pa.list_(F32)), ("N", "H", "W"), np.float32, None),
    (pa.list_(F32), ("N", "H", "W"), np.float32, r"rank 2"),
    (pa.list_(pa.string()), ("N", 4), np.float32, r"holds strings"),
    (pa.list_(pa.timestamp("s"), 4), ("N", 4), np.float32, r"not dates"),
    (pa.fixed_shape_tensor(F32, [2, 2]), ("N", 2, 2), np.float32, None),
    (pa.fixed_shape_tensor(F32, [2, 2]), ("N", 5), np.float32, r"rows of shape \[2, 2\]"),
    (F64, ("N", 64), np.float32, r"rows of shape \[\].*\[64\]"),
    (F64, ("N", 1), np.float32, None),  # one element a row: reshaped
    (F64, ("N",), np.float32, None),
    (F64, (1,), np.float32, None),  # a fixed batch of 1: run in chunks
    (F64, ("N", -1), np.float32, r"rank 1"),  # -1 (an exporter's unknown) is not fixed
    (pa.list_(F32, 3), ("N", -1), np.float32, None),
]


@pytest.mark.parametrize(("t", "shape", "dtype", "error"), ARROW_CASES, ids=str)
def test_arrow_columns_against_model_inputs(t: Any, shape: Any, dtype: Any, error: Any) -> None:
    info = arrow_column(field(t), "in.parquet")
    if error is None:
        check_column(info, arg(shape, dtype))
        return
    with pytest.raises(InvalidArgument, match=error) as raised:
        check_column(info, arg(shape, dtype))
    message = str(raised.value)
    assert "\n" not in message
    assert "input in.parquet: column 'col'" in message and "model input 'x'" in message


def test_statistics_nulls_and_non_nullable_fields() -> None:
    with pytest.raises(InvalidArgument, match=r"2 null\(s\), the first in row group 3.*fill"):
        check_column(arrow_column(field(F32), "f.parquet", nulls=2, group=3), arg(("N",)))
    assert arrow_column(field(F32, nullable=False), "f.parquet").nulls == 0
    check_column(arrow_column(field(F32), "f.parquet", nulls=0), arg(("N",)))


@pytest.mark.parametrize(
    ("shape", "dtype", "model", "error"),
    [
        ((10, 32), np.float32, ("N", 64), r"rows of shape \[32\]"),
        ((10, 8, 8), np.float64, ("N", 64), None),
        ((10, 64), np.dtype(">f4"), ("N", 64), None),  # big-endian: cast, not misread
        ((10,), np.dtype("U3"), ("N",), r"holds strings"),
        ((10,), np.dtype("S3"), ("N",), r"holds bytes"),
        ((10,), np.dtype("M8[s]"), ("N",), r"dates or times"),
        ((10,), np.complex64, ("N",), r"complex64 does not cast"),
        ((10,), np.dtype([("a", "f4")]), ("N",), r"records"),
        ((10,), np.dtype(object), ("N",), r"Python objects"),
        ((10,), np.dtype(("f4", (4,))), ("N", 4), None),  # a sub-array dtype: its block is the row
    ],
    ids=str,
)
def test_npy_headers_against_model_inputs(shape: Any, dtype: Any, model: Any, error: Any) -> None:
    info = numpy_column("data", shape, np.dtype(dtype), "x.npy")
    if error is None:
        check_column(info, arg(model))
    else:
        with pytest.raises(InvalidArgument, match=error):
            check_column(info, arg(model))


def test_inputs_a_batch_job_cannot_feed() -> None:
    with pytest.raises(InvalidArgument, match=r"'x' is a sequence: .*tensor inputs only"):
        check_input(ModelArg("x", (), None, ranked=False, kind="sequence"))
    with pytest.raises(InvalidArgument, match=r"'x' is a scalar .*batch"):
        check_input(arg(()))
    check_input(arg((), ranked=False))  # no shape declared: anything goes


@pytest.mark.parametrize(
    ("t", "nulls", "error"),
    [
        (pa.int64(), None, None),
        (pa.string(), 0, None),
        (pa.float64(), 0, r"integers or strings"),
        (pa.list_(pa.int64()), 0, r"integers or strings"),
        (pa.timestamp("s"), 0, r"integers or strings"),
        (pa.int64(), 3, r"3 null\(s\).*every row needs an id"),
    ],
    ids=str,
)
def test_id_columns(t: Any, nulls: Any, error: Any) -> None:
    info = arrow_column(pa.field("id", t), "f.parquet", nulls=nulls, group=0)
    if error is None:
        check_ids(info)
    else:
        with pytest.raises(InvalidArgument, match=error):
            check_ids(info)


@pytest.mark.parametrize(
    ("array", "row"),
    [
        (pa.array([1.0, 2.0, None]), 2),
        (pa.array([[1.0], None, [2.0]]), 1),
        (pa.array([[1.0, 2.0], [3.0, None]]), 1),
        (pa.array([[[1.0]], [[2.0], None], [[3.0]]]), 1),
        (pa.array([[[1.0]], [[2.0]], [[3.0, None]]]), 2),
        (pa.array([[1, 2], [3, None]], type=pa.list_(pa.int64(), 2)), 1),
        (pa.array(["a", None]).dictionary_encode(), 1),
        (pa.chunked_array([pa.array([1.0, 2.0]), pa.array([3.0, None])]), 3),
        (pa.array([[1.0], [2.0]]), None),
        (pa.array([float("nan")]), None),  # NaN is a value, not a null
    ],
    ids=str,
)
def test_first_null_row_at_any_depth(array: Any, row: Any) -> None:
    assert first_null_row(array) == row


# --------------------------------------------------------------------------- #
# The pre-flight and the actors apply one rule
# --------------------------------------------------------------------------- #

DTYPES = [np.bool_, np.int8, np.uint8, np.int32, np.int64, np.uint64, np.float16, np.float32]
DTYPES += [np.float64, np.dtype("U2"), np.dtype("S2"), np.dtype("M8[s]"), np.complex64]


@pytest.mark.parametrize(("held", "want"), list(itertools.product(DTYPES, [*DTYPES[:9], object])))
def test_cast_rule_is_what_column_array_does(held: Any, want: Any) -> None:
    """Pre-flight refuses a dtype exactly when an actor would (values that fit every dtype)."""
    held, want = np.dtype(held), np.dtype(want)
    values = np.array([0, 1, 1, 0]).astype(held)
    refused = cast_problem(held, want) is not None
    try:
        out = column_array(values, arg(("N",), want), "col")
    except InvalidArgument:
        assert refused
    else:
        assert not refused
        assert want.kind == "O" or out.dtype == want


ROWS = [(), (1,), (3,), (64,), (8, 8), (2, 32), (4, 4, 4), (3, 8)]
MODELS = [("N",), ("N", 1), ("N", 64), ("N", 8, 8), ("N", "C"), ("N", "C", 8), ("N", 3, "W")]


@pytest.mark.parametrize(("row", "model"), list(itertools.product(ROWS, MODELS)), ids=str)
def test_row_rule_is_what_column_array_does(row: Any, model: Any) -> None:
    """For every row shape and model shape: refused by the schema rule iff by the actor,
    and a row the rule calls ragged-unknown (a list) is decided once its rows are seen."""
    values = np.zeros((2, *row), np.float32)
    refused = row_problem(row, arg(model)) is not None
    try:
        column_array(values, arg(model), "col")
    except InvalidArgument as exc:
        assert refused, exc
    else:
        assert not refused
    if row:  # a list column of unknown length accepts what its rows may turn out to be
        unknown = (None, *row[1:])
        assert row_problem(unknown, arg(model)) is None or refused


def test_column_array_names_the_row_at_fault() -> None:
    ids = np.array([100, 101, 102])
    cells = np.empty(3, dtype=object)
    cells[:] = [np.zeros(64, np.float32), np.zeros(64, np.float32), np.zeros(32, np.float32)]
    with pytest.raises(InvalidArgument, match=r"row of shape \[32\] at the row of id 102"):
        column_array(cells, arg(), "col", where="input f.parquet: ", ids=ids)
    cells[:] = [np.zeros(3), np.zeros(3), np.zeros(2)]
    with pytest.raises(
        InvalidArgument, match=r"different shapes.*id 100 is \[3\].*id 102 is \[2\]"
    ):
        column_array(cells, arg(("N", "C")), "col", ids=ids)
    cells[:] = [np.zeros(3), None, np.zeros(3)]
    with pytest.raises(InvalidArgument, match=r"null at the row of id 101"):
        column_array(cells, arg(("N", "C")), "col", ids=ids)


@pytest.mark.parametrize(
    ("values", "want", "error"),
    [
        (np.array([1, 2**40], np.int64), np.int32, r"1099511627776 at row 1.*int32"),
        (np.array([-1, 300], np.int16), np.int8, r"300 at row 1"),
        (np.array([-1], np.int64), np.uint8, r"signed to unsigned"),
        (np.array([2**63], np.uint64), np.int64, r"9223372036854775808"),
        (np.array([1.0, 1e300], np.float64), np.float32, r"1e\+300 at row 1"),
        (np.array([70000], np.int32), np.float16, r"70000"),
        (np.array([1, 2**31 - 1], np.int64), np.int32, None),
        (np.array([np.inf, np.nan], np.float64), np.float32, None),  # not made by the cast
    ],
    ids=str,
)
def test_narrowing_casts_keep_every_value(values: Any, want: Any, error: Any) -> None:
    if error is None:
        np.testing.assert_array_equal(column_array(values, arg(("N",), want), "c"), values)
    else:
        with pytest.raises(InvalidArgument, match=error):
            column_array(values, arg(("N",), want), "c")


# --------------------------------------------------------------------------- #
# prepare_batch: files and folders, without Ray
# --------------------------------------------------------------------------- #


def write_parquet(path: Path, columns: dict[str, Any], **kw: Any) -> Path:
    pq.write_table(pa.table(columns), path, **kw)
    return path


@pytest.fixture
def model(tmp_path: Path) -> Path:
    path = tmp_path / "m.onnx"
    path.write_bytes(relu_model())
    return path


def rows(n: int, width: int = 64) -> list[list[float]]:
    return np.arange(n * width, dtype=np.float32).reshape(n, width).tolist()


def test_prepare_refuses_before_touching_the_output(model: Path, tmp_path: Path) -> None:
    data = write_parquet(tmp_path / "s.parquet", {"x": ["a", "b"]})
    out = tmp_path / "out"
    with pytest.raises(InvalidArgument, match=rf"input {data}: column 'x' holds strings"):
        prepare_batch(model, str(data), str(out))
    assert not out.exists()


def test_prepare_reads_the_first_rows_of_a_list_column(model: Path, tmp_path: Path) -> None:
    data = write_parquet(tmp_path / "r.parquet", {"x": rows(40, 32)})
    with pytest.raises(
        InvalidArgument, match=r"column 'x' has rows of shape \[32\].*takes rows of shape \[64\]"
    ):
        prepare_batch(model, str(data), str(tmp_path / "out"))
    ragged = rows(40)
    ragged[3] = ragged[3][:10]
    data = write_parquet(tmp_path / "g.parquet", {"x": ragged})
    with pytest.raises(InvalidArgument, match=r"row of shape \[10\] at the row of id 3"):
        prepare_batch(model, str(data), str(tmp_path / "out"))


def test_prepare_checks_every_file_of_a_folder(model: Path, tmp_path: Path) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    write_parquet(folder / "a.parquet", {"x": pa.array(rows(4), pa.list_(F32, 64))})
    write_parquet(folder / "b.parquet", {"x": pa.array(rows(4, 32), pa.list_(F32, 32))})
    with pytest.raises(InvalidArgument, match=r"b\.parquet: column 'x' has rows of shape \[32\]"):
        prepare_batch(model, str(folder), str(tmp_path / "out"))


def test_prepare_counts_nulls_from_statistics(tmp_path: Path) -> None:
    model = tmp_path / "m.onnx"
    model.write_bytes(relu_model(("N",), TensorProto.INT64))
    data = write_parquet(tmp_path / "n.parquet", {"x": [1, 2, None, 4]}, row_group_size=2)
    with pytest.raises(InvalidArgument, match=r"1 null\(s\), the first in row group 1"):
        prepare_batch(model, str(data), str(tmp_path / "out"))


@pytest.mark.parametrize(
    ("ids", "error"),
    [
        (pa.array([0.5, 1.5]), r"the id column \(double\).*integers or strings"),
        (pa.array([1, None]), r"null\(s\).*every row needs an id"),
        (pa.array(["a", "a"]), r"repeats id 'a'"),
    ],
    ids=str,
)
def test_prepare_checks_the_id_column(model: Path, tmp_path: Path, ids: Any, error: str) -> None:
    data = write_parquet(tmp_path / "i.parquet", {"id": ids, "x": rows(2)})
    with pytest.raises(InvalidArgument, match=error):
        prepare_batch(model, str(data), str(tmp_path / "out"))


def test_prepare_reads_numpy_headers_only(model: Path, tmp_path: Path) -> None:
    np.save(tmp_path / "objects.npy", np.array([[1.0] * 64, None], dtype=object))
    with pytest.raises(InvalidArgument, match=r"Python objects \(a pickled array\)"):
        prepare_batch(model, str(tmp_path / "objects.npy"), str(tmp_path / "o1"))
    np.save(tmp_path / "short.npy", np.zeros((10, 32), np.float32))
    with pytest.raises(InvalidArgument, match=r"column 'data' has rows of shape \[32\]"):
        prepare_batch(model, str(tmp_path / "short.npy"), str(tmp_path / "o2"))
    np.save(tmp_path / "cut.npy", np.zeros((10, 64), np.float32))
    raw = (tmp_path / "cut.npy").read_bytes()
    (tmp_path / "cut.npy").write_bytes(raw[:-100])
    with pytest.raises(InvalidArgument, match=r"truncated"):
        prepare_batch(model, str(tmp_path / "cut.npy"), str(tmp_path / "o3"))
    (tmp_path / "junk.npy").write_bytes(b"not an array at all")
    with pytest.raises(InvalidArgument, match=r"not a readable \.npy array"):
        prepare_batch(model, str(tmp_path / "junk.npy"), str(tmp_path / "o4"))
    np.savez(tmp_path / "z.npz", x=np.zeros((4, 64), np.float32), keep=np.array([{}] * 4))
    with pytest.raises(InvalidArgument, match=r"array 'keep' holds Python objects"):
        prepare_batch(model, str(tmp_path / "z.npz"), str(tmp_path / "o5"), keep=["keep"])
    np.savez(tmp_path / "s.npz", x=np.zeros(3), y=np.float32(1))
    with pytest.raises(InvalidArgument, match=r"array 'y' is 0-d"):
        prepare_batch(model, str(tmp_path / "s.npz"), str(tmp_path / "o6"))
    (tmp_path / "junk.npz").write_bytes(b"PK not a zip")
    with pytest.raises(InvalidArgument, match=r"not a readable \.npz"):
        prepare_batch(model, str(tmp_path / "junk.npz"), str(tmp_path / "o7"))


def test_prepare_refuses_a_damaged_parquet_file_and_bad_counts(model: Path, tmp_path: Path) -> None:
    (tmp_path / "bad.parquet").write_bytes(b"PAR1 not really")
    with pytest.raises(InvalidArgument, match=r"bad\.parquet: not a readable Parquet file"):
        prepare_batch(model, str(tmp_path / "bad.parquet"), str(tmp_path / "out"))
    data = write_parquet(tmp_path / "g.parquet", {"x": rows(2)})
    for option, value in [("batch_size", 0), ("threads", 0), ("rows_per_file", -1)]:
        with pytest.raises(InvalidArgument, match=rf"{option}.*at least 1"):
            prepare_batch(model, str(data), str(tmp_path / "out"), **{option: value})
    with pytest.raises(InvalidArgument, match=r"session option 'nope'"):
        prepare_batch(model, str(data), str(tmp_path / "out"), session_options={"nope": 1})


def test_a_failed_job_without_rows_leaves_a_manifest_a_fixed_job_replaces(
    model: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    first = write_parquet(tmp_path / "a.parquet", {"x": rows(3)})
    job = prepare_batch(model, str(first), str(out))  # recorded; then say its run failed
    assert json.loads((out / "_ortcore_batch.json").read_text())["total_rows"] == 3
    fixed = write_parquet(tmp_path / "a.parquet", {"x": rows(5)})  # fixed: other rows
    job = prepare_batch(model, str(fixed), str(out))
    assert job.total_rows == 5 and job.done_rows == 0
    (out / "part-0.parquet").write_bytes(b"")  # a job with rows written keeps its folder
    with pytest.raises(InvalidArgument, match=r"another job"):
        prepare_batch(model, str(write_parquet(tmp_path / "b.parquet", {"x": rows(2)})), str(out))
    (out / "_ortcore_batch.json").write_text("{ damaged")
    with pytest.raises(InvalidArgument, match=r"cannot be read.*remove the folder"):
        prepare_batch(model, str(fixed), str(out))


# --------------------------------------------------------------------------- #
# The command line: one line, status 2, before Ray starts
# --------------------------------------------------------------------------- #


def run_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "ortcore", "batch", *args, "--no-progress"]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def cli_inputs(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    """Bad inputs for a model taking float32 [N, 64]: the file and what stderr must name."""
    with_null: list[Any] = [*rows(2), None]
    out = {
        "strings": (write_parquet(tmp_path / "s.parquet", {"x": ["a", "b"]}), "strings"),
        "rows of 32": (write_parquet(tmp_path / "r.parquet", {"x": rows(3, 32)}), r"\[32\]"),
        "a null row": (write_parquet(tmp_path / "n.parquet", {"x": with_null}), "null in row 2"),
    }
    np.save(tmp_path / "w.npy", np.zeros((5, 63), np.float32))
    out["npy"] = (tmp_path / "w.npy", r"\[63\]")
    return out


def test_cli_refuses_a_bad_column_in_one_line_before_ray(model: Path, tmp_path: Path) -> None:
    pytest.importorskip("ray")
    for name, (data, named) in cli_inputs(tmp_path).items():
        column = "data" if data.suffix == ".npy" else "x"
        got = run_cli(str(model), str(data), str(tmp_path / f"out-{data.stem}"))
        assert got.returncode == 2, (name, got.stderr)
        lines = got.stderr.strip().splitlines()
        assert len(lines) == 1, (name, got.stderr)  # nothing of Ray: it never started
        assert f"column '{column}'" in lines[0] and "model input 'x'" in lines[0], lines
        assert str(data) in lines[0]
        assert re.search(named, lines[0]), (name, lines[0])
        assert not (tmp_path / f"out-{data.stem}").exists()


def test_cli_missing_model_and_unreachable_cluster(model: Path, tmp_path: Path) -> None:
    pytest.importorskip("ray")
    data = write_parquet(tmp_path / "g.parquet", {"x": rows(2)})
    got = run_cli(str(tmp_path / "nope.onnx"), str(data), str(tmp_path / "out"))
    assert got.returncode == 2 and "nope.onnx" in got.stderr
    assert len(got.stderr.strip().splitlines()) == 1
    import socket

    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    got = run_cli(str(model), str(data), str(tmp_path / "out"), "--address", f"127.0.0.1:{port}")
    assert got.returncode == 3, got.stderr
    assert "ClusterError" in got.stderr and f"127.0.0.1:{port}" in got.stderr
