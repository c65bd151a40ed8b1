"""``ortcore batch``: files through a model on Ray Data, resumable after a failure.

The output folder::

    OUTPUT/
      _ortcore_batch.json      the job (model digest, inputs, id mode, columns);
                               "complete": true once every input row is written
      part-<digest>.parquet    one file per written batch: id, kept columns, outputs
      .tmp-*                   a file being written, renamed into place when whole

Every input row has an id: the input's ``id`` column, or its position in file
order (files sorted by name, rows in file order) when there is none. A part
file appears whole or not at all (written aside, then renamed), and its name is
a digest of the ids it holds, so a retried write task replaces its own file.
On a restart the ids in the part files are the rows done: input pieces (a
Parquet row group, a slice of an ``.npy``) whose rows are all done are not read
again, the others drop their done rows as they are read. No row is lost or
written twice.

When OUTPUT ends in ``.npz`` (or ``.npy``, for a model with one output) the
parts go to ``OUTPUT.parts/`` and are gathered, ordered by id, into that one
file at the end (in the driver's memory).

Before anything runs, :func:`prepare_batch` checks every column against the
model input it feeds (:mod:`ortcore.batch_check`), without Ray. What an actor
raises reaches the caller as that exception (:mod:`ortcore.ray_errors`), and
a job that stops leaves the folder as a rerun expects it: whole part files,
the manifest, no ``.tmp-*`` file.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
import uuid
import warnings
import zipfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from ep_sdk.files import write_atomically

from .batch_check import (
    ColumnInfo,
    arrow_column,
    check_ids,
    check_job,
    first_null_row,
    numpy_column,
)
from .batching import (
    ModelArg,
    SessionSettings,
    apply_session_options,
    bind_columns,
    column_array,
    declared_io,
    output_columns,
)
from .errors import InvalidArgument
from .ray import BatchPredictor, default_actors, map_inference, model_payload

__all__ = ["BatchJob", "BatchReport", "prepare_batch", "read_output", "run_batch"]

MANIFEST = "_ortcore_batch.json"
PART_PREFIX = "part-"
TMP_PREFIX = ".tmp-"
ID = "id"
# Rows per .npy piece are chosen so that a piece is about this many bytes.
PIECE_BYTES = 64 << 20


@dataclass
class BatchReport:
    """What ``run_batch`` did.

    Attributes:
        total_rows: rows in the input.
        skipped_rows: rows already in the output when the run started.
        inferred_rows: rows inferred and written by this run.
        files: part files written by this run.
        seconds: wall time of the inference (planning excluded).
        actors: actors in the pool.
        threads: intra-op threads per actor.
        output: the folder of part files (or the gathered file).
    """

    total_rows: int
    skipped_rows: int
    inferred_rows: int
    files: int
    seconds: float
    actors: int
    threads: int
    output: str

    @property
    def rows_per_second(self) -> float:
        """Throughput of this run."""
        return self.inferred_rows / self.seconds if self.seconds > 0 else 0.0


# --------------------------------------------------------------------------- #
# Input plan
# --------------------------------------------------------------------------- #


@dataclass
class _Piece:
    """A unit of reading: one Parquet row group, or a row range of an .npy/.npz file."""

    kind: str
    path: str
    group: int  # Parquet row group
    start: int  # first row inside the file (.npy/.npz)
    rows: int
    first: int  # position of its first row in file order (the generated id)
    skip: list[int] = field(default_factory=list)  # offsets of rows already done


@dataclass
class _Input:
    pieces: list[_Piece]
    columns: list[str]
    ids: str  # "column" or "generated"
    files: list[dict[str, Any]]
    id_values: list[np.ndarray] | None  # per piece, when ids are a column
    row_bytes: dict[str, float]  # bytes a row of each column takes, on average
    schemas: list[dict[str, ColumnInfo]]  # per file, what it says of each column
    kind: str = "parquet"  # or "npy", "npz"

    @property
    def total(self) -> int:
        return sum(p.rows for p in self.pieces)


def _local(path: str) -> bool:
    return "://" not in path


def _filesystem(uri: str) -> tuple[Any, str]:
    """A pyarrow file system and the path in it (local paths made absolute)."""
    from pyarrow import fs

    if _local(uri):
        return fs.LocalFileSystem(), os.path.abspath(uri)
    return fs.FileSystem.from_uri(uri)


def _input_files(uri: str) -> tuple[str, list[str]]:
    """The input's kind and its files, sorted by name."""
    suffix = Path(uri.rstrip("/")).suffix.lower()
    if suffix in (".npy", ".npz"):
        if not _local(uri) or not Path(uri).is_file():
            raise InvalidArgument(f"input {uri}: no such file (.npy/.npz inputs are local files)")
        return suffix[1:], [os.path.abspath(uri)]
    from pyarrow import fs

    filesystem, path = _filesystem(uri)
    info = filesystem.get_file_info(path)
    if info.type == fs.FileType.File:
        return "parquet", [path]
    if info.type != fs.FileType.Directory:
        raise InvalidArgument(f"input {uri}: no such file or folder")
    found = filesystem.get_file_info(fs.FileSelector(path, recursive=True))
    files = sorted(
        f.path
        for f in found
        if f.type == fs.FileType.File
        and f.base_name.endswith(".parquet")
        and not f.base_name.startswith((".", "_"))
    )
    if not files:
        raise InvalidArgument(f"input {uri}: the folder holds no .parquet files")
    return "parquet", files


def _plan_parquet(uri: str, files: list[str]) -> _Input:
    import pyarrow.parquet as pq

    filesystem, _ = _filesystem(uri)
    pieces: list[_Piece] = []
    described = []
    schemas = []
    columns: list[str] | None = None
    first = 0
    sizes: dict[str, float] = {}
    for path in files:
        meta = _open_parquet(path, filesystem)
        names = list(meta.schema_arrow.names)
        if columns is None:
            columns = names
        elif names != columns:
            raise InvalidArgument(
                f"input file {path} has columns {names}, the first file {files[0]} has "
                f"{columns}: every input file needs the same columns"
            )
        nulls: dict[str, list[int | None]] = {}
        for g in range(meta.num_row_groups):
            group = meta.metadata.row_group(g)
            pieces.append(_Piece("parquet", path, g, 0, group.num_rows, first))
            first += group.num_rows
            for c in range(group.num_columns):
                chunk = group.column(c)
                name = chunk.path_in_schema.split(".")[0]
                sizes[name] = sizes.get(name, 0) + chunk.total_uncompressed_size
                if chunk.path_in_schema == name:  # a flat column: its statistics count nulls
                    stats = chunk.statistics
                    counted = stats is not None and stats.has_null_count
                    nulls.setdefault(name, []).append(stats.null_count if counted else None)
        schemas.append({f.name: _arrow_info(f, path, nulls.get(f.name)) for f in meta.schema_arrow})
        described.append({"path": path, "rows": meta.metadata.num_rows})
    assert columns is not None
    ids = "column" if ID in columns else "generated"
    values = None
    if ids == "column":
        for schema in schemas:
            check_ids(schema[ID])
        values = []
        for p in pieces:
            table = pq.ParquetFile(p.path, filesystem=filesystem).read_row_group(
                p.group, columns=[ID]
            )
            values.append(table.column(ID).to_numpy(zero_copy_only=False))
    row_bytes = {name: size / max(first, 1) for name, size in sizes.items()}
    return _Input(pieces, columns, ids, described, values, row_bytes, schemas)


def _open_parquet(path: str, filesystem: Any) -> Any:
    """A ``ParquetFile``; a file that is not one is an :class:`InvalidArgument` naming it."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        return pq.ParquetFile(path, filesystem=filesystem)
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise InvalidArgument(f"input {path}: not a readable Parquet file ({exc})") from exc


def _arrow_info(field: Any, path: str, nulls: list[int | None] | None) -> ColumnInfo:
    """A column's :class:`ColumnInfo`, with the nulls its row groups' statistics count."""
    counted = [n or 0 for n in nulls or []]
    known = nulls is not None and None not in nulls
    total = sum(counted)
    group = next((g for g, n in enumerate(counted) if n), None)
    return arrow_column(field, path, total if total or known else None, group)


def _npy_header(f: Any, size: int, where: str) -> tuple[tuple[int, ...], np.dtype]:
    """An ``.npy`` stream's shape and dtype, from its header, checked against its ``size``."""
    try:
        version = np.lib.format.read_magic(f)
        read_header = (
            np.lib.format.read_array_header_1_0
            if version == (1, 0)
            else np.lib.format.read_array_header_2_0
        )
        shape, _, dtype = read_header(f)
        dtype = np.dtype(dtype)
    except (ValueError, OSError, EOFError, TypeError, SyntaxError) as exc:
        raise InvalidArgument(f"input {where}: not a readable .npy array ({exc})") from exc
    data = dtype.itemsize * int(np.prod(shape, dtype=np.int64))
    if not dtype.hasobject and f.tell() + data > size:
        raise InvalidArgument(
            f"input {where}: the header says {dtype} {list(shape)} ({data} bytes), the file "
            f"holds {size - f.tell()}: it is truncated"
        )
    return tuple(shape), dtype


def _npz_members(path: str) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    """The shapes and dtypes of an .npz file's arrays, read from their headers only."""
    shapes = {}
    try:
        with zipfile.ZipFile(path) as archive:
            for info in archive.infolist():
                if not info.filename.endswith(".npy"):
                    continue
                name = info.filename[: -len(".npy")]
                with archive.open(info) as f:
                    shapes[name] = _npy_header(f, info.file_size, f"{path} (array {name!r})")
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        raise InvalidArgument(f"input {path}: not a readable .npz file ({exc})") from exc
    return shapes


def _plan_numpy(kind: str, path: str) -> _Input:
    if kind == "npy":
        with open(path, "rb") as f:
            shapes = {"data": _npy_header(f, os.fstat(f.fileno()).st_size, path)}
    else:
        shapes = _npz_members(path)
        if not shapes:
            raise InvalidArgument(f"input {path}: the .npz file holds no arrays")
    for name, (shape, _) in shapes.items():
        if not shape:
            raise InvalidArgument(
                f"input {path}: array {name!r} is 0-d: it has no rows (each array is a "
                "column, with one entry per row)"
            )
    schema = {name: numpy_column(name, s, d, path) for name, (s, d) in shapes.items()}
    row_bytes = {
        name: float(dtype.itemsize * int(np.prod(shape[1:])))
        for name, (shape, dtype) in shapes.items()
    }
    # an .npz file is read whole, in one piece; an .npy file is memory-mapped
    step = max(1, int(PIECE_BYTES // max(sum(row_bytes.values()), 1))) if kind == "npy" else 0
    lengths = {name: s[0] for name, (s, _) in shapes.items()}
    if len(set(lengths.values())) != 1:
        raise InvalidArgument(
            f"input {path}: arrays of different lengths {lengths}: each array is a column "
            "and needs one entry per row"
        )
    rows = int(next(iter(lengths.values())))
    step = step or max(rows, 1)
    pieces = [_Piece(kind, path, 0, s, min(step, rows - s), s) for s in range(0, rows, step)]
    columns = list(shapes)
    ids = "column" if ID in columns else "generated"
    values = None
    if ids == "column":
        check_ids(schema[ID])
        with np.load(path) as npz:
            column = npz[ID]
        values = [column[p.start : p.start + p.rows] for p in pieces]
    files = [{"path": path, "rows": rows}]
    return _Input(pieces, columns, ids, files, values, row_bytes, [schema], kind)


def _plan(uri: str) -> _Input:
    kind, files = _input_files(uri)
    plan = _plan_parquet(uri, files) if kind == "parquet" else _plan_numpy(kind, files[0])
    if plan.id_values is not None and plan.id_values:
        ids = np.concatenate(plan.id_values)
        unique, counts = np.unique(ids, return_counts=True)
        if len(unique) != len(ids):
            raise InvalidArgument(
                f"input {uri}: the id column repeats id {unique[counts > 1][0]!r}: ids must be "
                "unique (they say which rows are done); rename the column to use generated ids"
            )
    return plan


@dataclass(frozen=True)
class _Checks:
    """The model inputs each column feeds, checked (and converted) as the rows are read.

    A column feeding one input, and not copied to the output, is converted
    to that input's dtype and row shape in the reader, once.
    """

    inputs: dict[str, tuple[ModelArg, ...]] = field(default_factory=dict)
    kept: frozenset[str] = frozenset()

    def apply(self, data: dict[str, np.ndarray], where: str) -> dict[str, np.ndarray]:
        """Check (and convert) the columns of one chunk; ``where`` names the file."""
        for column, args in self.inputs.items():
            for arg in args:
                array = column_array(data[column], arg, column, where=where, ids=data[ID])
                if len(args) == 1 and column not in self.kept:
                    data[column] = array
        return data


def _read_piece(
    batch: Mapping[str, Any], columns: Sequence[str], chunk: int, checks: _Checks | None = None
) -> Iterator[dict[str, np.ndarray]]:
    """``map_batches`` function: the rows of one piece, ``chunk`` at a time, with ids.

    Rows already done (``piece.skip``) are dropped; list cells of one shape
    are stacked into a tensor column here, once, rather than in each actor;
    the columns of model inputs are checked against them (``checks``): a
    null, a ragged row, a row shape or value the input does not take stops
    the job with a message naming the file, the column and the row.
    """
    (piece,) = _pieces(batch)
    checks = checks or _Checks()
    skip = np.asarray(piece.skip, dtype=np.int64)
    offset = 0
    for data in _piece_chunks(piece, columns, chunk, checks):
        n = len(next(iter(data.values()))) if data else 0
        if n == 0:
            continue
        if ID not in data:
            data[ID] = np.arange(piece.first + offset, piece.first + offset + n, dtype=np.int64)
        if len(skip):
            keep = ~np.isin(np.arange(offset, offset + n), skip)
            data = {k: v[keep] for k, v in data.items()}
        offset += n
        if len(data[ID]):
            yield checks.apply(data, f"input {piece.path}: ")


def _pieces(batch: Mapping[str, Any]) -> list[_Piece]:
    """The piece descriptors of a ``map_batches`` batch of ``from_items`` rows."""
    count = len(batch["path"])
    out = []
    for i in range(count):
        row = {k: batch[k][i] for k in batch}
        out.append(
            _Piece(
                kind=str(row["kind"]),
                path=str(row["path"]),
                group=int(row["group"]),
                start=int(row["start"]),
                rows=int(row["rows"]),
                first=int(row["first"]),
                skip=[int(x) for x in np.asarray(row["skip"]).ravel()],
            )
        )
    return out


def _piece_chunks(
    piece: _Piece, columns: Sequence[str], chunk: int, checks: _Checks
) -> Iterator[dict[str, np.ndarray]]:
    import pyarrow as pa

    try:
        if piece.kind == "parquet":
            yield from _parquet_chunks(piece, columns, chunk, checks)
            return
        if piece.kind == "npy":
            data = {"data": np.load(piece.path, mmap_mode="r")}
        else:
            with np.load(piece.path) as npz:
                data = {k: npz[k] for k in columns}
        for s in range(piece.start, piece.start + piece.rows, chunk):
            e = min(s + chunk, piece.start + piece.rows)
            yield {k: np.array(data[k][s:e]) for k in columns}
    except (pa.ArrowException, OSError, ValueError, EOFError) as exc:
        if isinstance(exc, InvalidArgument):
            raise
        where = (
            f"row group {piece.group}" if piece.kind == "parquet" else f"rows from {piece.start}"
        )
        raise InvalidArgument(
            f"input {piece.path}: {where} cannot be read ({type(exc).__name__}: {exc}); was "
            "the file changed or damaged after the job started?"
        ) from exc


def _parquet_chunks(
    piece: _Piece, columns: Sequence[str], chunk: int, checks: _Checks
) -> Iterator[dict[str, np.ndarray]]:
    """A Parquet row group's rows, ``chunk`` at a time; nulls in model inputs refused."""
    import pyarrow.parquet as pq

    filesystem, _ = _filesystem(piece.path)
    f = pq.ParquetFile(piece.path, filesystem=filesystem)
    row = 0
    for rb in f.iter_batches(batch_size=chunk, row_groups=[piece.group], columns=list(columns)):
        for column, args in checks.inputs.items():
            bad = first_null_row(rb.column(column))
            if bad is not None:
                raise InvalidArgument(
                    f"input {piece.path}: column {column!r} has a null in row {row + bad} of "
                    f"row group {piece.group} (row {piece.first + row + bad} of the input): "
                    f"model input {args[0].name!r} needs a value in every row, every element "
                    "set; fill or drop the nulls"
                )
        yield {name: _dense(_numpy(rb.column(name))) for name in rb.schema.names}
        row += rb.num_rows


def _dense(values: np.ndarray) -> np.ndarray:
    """An object column of equally shaped arrays (a Parquet list column) as one array."""
    if values.dtype != object or not len(values) or not isinstance(values[0], np.ndarray):
        return values
    from .batching import stack_cell

    try:
        return np.stack([stack_cell(v) for v in values])
    except ValueError:
        return values  # rows of different shapes: the actor names the column


# --------------------------------------------------------------------------- #
# Output
# --------------------------------------------------------------------------- #


def _arrow(array: np.ndarray) -> Any:
    """A numpy column as an Arrow array; fixed-shape tensors as Arrow's canonical type."""
    import pyarrow as pa

    if array.ndim >= 2:
        return pa.FixedShapeTensorArray.from_numpy_ndarray(np.ascontiguousarray(array))
    if array.dtype == object and len(array) and isinstance(array[0], np.ndarray):
        return pa.array([np.asarray(v).tolist() for v in array])
    return pa.array(array)


def _numpy(column: Any) -> np.ndarray:
    """An Arrow column (chunked) back as numpy; tensor columns as n-d arrays."""
    import pyarrow as pa

    column = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if isinstance(column.type, pa.FixedShapeTensorType):
        return np.asarray(column.to_numpy_ndarray())
    return np.asarray(column.to_numpy(zero_copy_only=False))


def _digest(ids: np.ndarray) -> str:
    ids = np.asarray(ids)
    data = (
        "\0".join(map(str, ids.tolist())).encode()
        if ids.dtype == object or ids.dtype.kind in "US"
        else np.ascontiguousarray(ids).tobytes() + str(ids.dtype).encode()
    )
    return hashlib.sha1(data).hexdigest()[:24]


class _PieceReader:
    """``map_batches`` callable class: :func:`_read_piece` in a long-lived actor."""

    def __init__(self, columns: Sequence[str], chunk: int, checks: _Checks | None = None) -> None:
        self.columns = list(columns)
        self.chunk = chunk
        self.checks = checks

    def __call__(self, batch: Mapping[str, Any]) -> Iterator[dict[str, np.ndarray]]:
        yield from _read_piece(batch, self.columns, self.chunk, self.checks)


class _PartWriter:
    """``map_batches`` callable class: :func:`_write_part` in a long-lived actor."""

    def __init__(self, root: str) -> None:
        self.root = root

    def __call__(self, batch: Mapping[str, np.ndarray]) -> dict[str, list[Any]]:
        return _write_part(batch, self.root)


def _io_actors(actors: int) -> int:
    """Reader (and writer) actors for a pool of ``actors``: one per four, at least one.

    A batch is read or written in milliseconds and inferred in about a second.
    """
    return max(1, (actors + 3) // 4)


def _write_part(batch: Mapping[str, np.ndarray], root: str) -> dict[str, list[Any]]:
    """``map_batches`` function: write one batch of results as a part file, atomically."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    filesystem, folder = _filesystem(root)
    ids = np.asarray(batch[ID])
    name = f"{PART_PREFIX}{_digest(ids)}.parquet"
    table = pa.table({k: _arrow(np.asarray(v)) for k, v in batch.items()})
    tmp = f"{folder}/{TMP_PREFIX}{uuid.uuid4().hex}.parquet"
    pq.write_table(table, tmp, filesystem=filesystem)
    # A retried task rewrites the same rows under the same name: replacing it is harmless.
    filesystem.move(tmp, f"{folder}/{name}")
    return {"file": [name], "rows": [len(ids)]}


def _parts(root: str) -> list[str]:
    from pyarrow import fs

    filesystem, folder = _filesystem(root)
    if filesystem.get_file_info(folder).type != fs.FileType.Directory:
        return []
    infos = filesystem.get_file_info(fs.FileSelector(folder))
    return sorted(
        i.path
        for i in infos
        if i.base_name.startswith(PART_PREFIX) and i.base_name.endswith(".parquet")
    )


def _done_ids(root: str) -> np.ndarray:
    """The ids in the part files already written (their ``id`` column only)."""
    import pyarrow.parquet as pq

    filesystem, _ = _filesystem(root)
    chunks = []
    for path in _parts(root):
        try:
            table = pq.read_table(path, columns=[ID], filesystem=filesystem)
        except Exception as exc:  # pyarrow raises several kinds for a damaged file
            raise InvalidArgument(
                f"output part {path} cannot be read ({exc}); it was not written by this job, "
                "or was damaged after: remove it and rerun to recompute its rows"
            ) from exc
        chunks.append(_numpy(table.column(ID)))
    return np.concatenate(chunks) if chunks else np.zeros(0, np.int64)


def read_output(folder: str | os.PathLike[str]) -> dict[str, np.ndarray]:
    """Every part file of an ``ortcore batch`` output folder, as columns ordered by id."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    root = os.fspath(folder)
    filesystem, _ = _filesystem(root)
    tables = [pq.read_table(p, filesystem=filesystem) for p in _parts(root)]
    if not tables:
        return {}
    table = pa.concat_tables(tables)
    columns = {name: _numpy(table.column(name)) for name in table.column_names}
    order = np.argsort(columns[ID], kind="stable")
    return {name: values[order] for name, values in columns.items()}


def _clean_tmp(root: str) -> None:
    """Remove files a killed writer left half-written (only ours: ``.tmp-*.parquet``)."""
    from pyarrow import fs

    filesystem, folder = _filesystem(root)
    if filesystem.get_file_info(folder).type != fs.FileType.Directory:
        return
    for info in filesystem.get_file_info(fs.FileSelector(folder)):
        if info.base_name.startswith(TMP_PREFIX) and info.base_name.endswith(".parquet"):
            filesystem.delete_file(info.path)


def _manifest(root: str, job: dict[str, Any]) -> None:
    """Check the folder's job against this one, or record this one in an empty folder."""
    filesystem, folder = _filesystem(root)
    filesystem.create_dir(folder, recursive=True)
    path = f"{folder}/{MANIFEST}"
    try:
        with filesystem.open_input_stream(path) as f:
            recorded = json.loads(f.read().decode())
    except FileNotFoundError:
        recorded = None
    except ValueError as exc:  # not JSON, not UTF-8
        raise InvalidArgument(
            f"output {root}: {MANIFEST} cannot be read ({exc}); it was damaged after the "
            "job wrote it: remove the folder to start over"
        ) from exc
    if recorded is not None and not isinstance(recorded, dict):
        raise InvalidArgument(f"output {root}: {MANIFEST} is not a job record: remove the folder")
    if recorded is None:
        if _parts(root):
            raise InvalidArgument(
                f"output {root} holds part files but no {MANIFEST}: it is not the output of "
                "an ortcore batch job; choose an empty folder"
            )
        _write_json(filesystem, path, {**job, "complete": False})
        return
    differs = [k for k in job if recorded.get(k) != job[k]]
    if differs and not _parts(root):
        # A job that failed before writing a row (its input or model fixed since):
        # nothing of it to keep or to mix with this one.
        _write_json(filesystem, path, {**job, "complete": False})
        return
    if differs:
        raise InvalidArgument(
            f"output {root} holds results of another job (its {', '.join(differs)} "
            "differ from this one's): choose another output folder, or remove this one "
            "to start over"
        )


def _write_json(filesystem: Any, path: str, data: dict[str, Any]) -> None:
    tmp = f"{path}{TMP_PREFIX}{uuid.uuid4().hex}"
    with filesystem.open_output_stream(tmp) as f:
        f.write(json.dumps(data, indent=2).encode())
    filesystem.move(tmp, path)


# --------------------------------------------------------------------------- #
# Progress
# --------------------------------------------------------------------------- #


class _Progress:
    """Rows written out of rows to do: a bar on a terminal, a line every 10 s otherwise."""

    def __init__(self, total: int, enabled: bool) -> None:
        self.total, self.done, self.enabled = total, 0, enabled and total > 0
        self.tty = sys.stderr.isatty()
        self.start = self.last = time.perf_counter()

    def update(self, rows: int) -> None:
        self.done += rows
        now = time.perf_counter()
        if self.enabled and (
            now - self.last >= (0.2 if self.tty else 10) or self.done >= self.total
        ):
            self.last = now
            self._show(now)

    def _show(self, now: float) -> None:
        elapsed = now - self.start
        rate = self.done / elapsed if elapsed > 0 else 0.0
        left = (self.total - self.done) / rate if rate > 0 else float("nan")
        width = 30
        filled = int(width * self.done / self.total)
        text = (
            f"[{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total} rows "
            f"{rate:.1f} rows/s, {elapsed:.0f}s elapsed, ~{left:.0f}s left"
        )
        end = "\n" if not self.tty or self.done >= self.total else ""
        print(("\r" if self.tty else "") + text, end=end, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- #
# The job
# --------------------------------------------------------------------------- #


def _parts_folder(output: str) -> tuple[str, str | None]:
    """The folder of part files and, for an .npz/.npy output, the file to gather into."""
    suffix = Path(output).suffix.lower()
    if suffix in (".npz", ".npy"):
        if not _local(output):
            raise InvalidArgument(f"output {output}: .npz/.npy outputs are local files")
        return output + ".parts", output
    return output, None


@dataclass
class BatchJob:
    """A batch job checked against its model and ready to run (:func:`prepare_batch`).

    Attributes:
        root: the folder of part files.
        gathered: the ``.npz``/``.npy`` file gathered at the end, if any.
        total_rows: rows in the input.
        done_rows: rows already in the output.
    """

    root: str
    gathered: str | None
    total_rows: int
    done_rows: int
    _payload: str | bytes
    _job: dict[str, Any]
    _read: list[str]
    _checks: _Checks
    _todo: list[_Piece]
    _row_bytes: float
    _options: dict[str, Any]
    _output: str
    _progress: bool
    _rows_per_file: int

    def run(self) -> BatchReport:
        """Run the job on the running Ray (``ray.init``): every row not done yet.

        Returns:
            a :class:`BatchReport`.

        Raises:
            OrtcoreError: what an actor raised (a row the model does not take,
                a model or provider error), as the actor raised it; see
                :func:`ortcore.ray_errors.job_error`. Rows written before it
                are kept: fix the cause and run the job again to resume.
            ClusterError: Ray itself failed (an actor or node died for good,
                an object was lost); run the job again to resume.
            InvalidArgument: rows missing at the end.
        """
        import ray.data

        from .ray_errors import job_error

        o = self._options
        actors = o["actors"] or default_actors(o["threads"], o["gpus_per_actor"])
        todo_rows = sum(p.rows - len(p.skip) for p in self._todo)
        report = BatchReport(
            self.total_rows, self.done_rows, 0, 0, 0.0, actors, o["threads"], self._output
        )
        if self._progress:
            print(
                f"ortcore batch: {self.total_rows} rows, {self.done_rows} already in "
                f"{self.root}, {todo_rows} to infer with {actors} actor(s) x {o['threads']} "
                "thread(s)",
                file=sys.stderr,
            )
        context = ray.data.DataContext.get_current()
        # Our progress line replaces Ray Data's bars and its "starting execution"
        # lines. A task's exception reaches the driver as it was raised, not as
        # Ray Data's UserCodeException, which keeps only its text.
        settings = {
            "enable_progress_bars": False,
            "print_on_execution_start": False,
            "raise_original_map_exception": True,
            # A read task's batches are merged into blocks of up to this size, and a
            # block goes to one actor: with Ray's 128 MB a piece (a whole row group)
            # would run on one actor however many there are. Blocks of about one
            # batch spread the rows.
            "target_max_block_size": max(int(self._row_bytes * o["batch_size"]), 1),
        }
        saved = {k: getattr(context, k) for k in settings if hasattr(context, k)}
        for k in saved:
            setattr(context, k, settings[k])
        t0 = time.perf_counter()
        try:
            if self._todo:
                report.inferred_rows, report.files = _execute(
                    self._todo,
                    self._read,
                    self._payload,
                    self.root,
                    progress=_Progress(todo_rows, self._progress),
                    options={**o, "actors": actors, "predictor": _deferring(o["predictor"])},
                    checks=self._checks,
                    rows_per_file=self._rows_per_file,
                )
        except Exception as exc:
            try:  # what a writer stopped mid-file left; the next run removes it too
                _clean_tmp(self.root)
            except OSError:
                pass
            error = job_error(exc)
            if error is exc:
                raise
            raise error from exc
        finally:
            for k, v in saved.items():
                setattr(context, k, v)
        report.seconds = time.perf_counter() - t0
        _finish(self.root, self._job, self.total_rows)
        if self.gathered:
            _gather(self.root, self.gathered, list(self._job["columns"]["outputs"]))
        return report


def run_batch(
    model: str | os.PathLike[str] | bytes,
    input: str,
    output: str,
    *,
    providers: Sequence[Any] | None = None,
    provider_options: Sequence[Mapping[str, Any]] | None = None,
    session_options: SessionSettings = None,
    inputs: Mapping[str, str] | None = None,
    outputs: Sequence[str] | None = None,
    keep: Sequence[str] = (),
    actors: int | None = None,
    threads: int = 1,
    gpus_per_actor: float = 0,
    batch_size: int = 32,
    rows_per_file: int = 1024,
    max_restarts: int = 3,
    max_task_retries: int = 3,
    progress: bool = True,
    predictor: type[BatchPredictor] = BatchPredictor,
) -> BatchReport:
    """Run ``model`` over every row of ``input`` into ``output``, skipping rows done before.

    Needs a running Ray (``ray.init``), local or a cluster; the input and output
    must be visible to every node (a shared file system, or ``s3://``-style
    URIs for Parquet). See the module docstring for the output layout and
    how a rerun resumes. The job is checked first (:func:`prepare_batch`),
    then run (:meth:`BatchJob.run`).

    Args:
        model: path or bytes of the model.
        input: a Parquet file, a folder of Parquet files, an ``.npy`` file
            (column ``data``) or an ``.npz`` file (one column per array).
        output: a folder of Parquet part files, or an ``.npz``/``.npy`` file.
        inputs: ``{model input: column}`` where the names differ.
        outputs: the outputs to write (all by default).
        keep: input columns copied into the output besides ``id``.
        actors: size of the actor pool (default: CPUs // threads).
        rows_per_file: rows per part file; a failure loses at most the rows
            of the part files being filled.
        providers: provider names in priority order (``["cuda", "cpu"]``).
        provider_options: one options dict per provider.
        session_options: a ``SessionOptions`` or a mapping of its settings
            (strings are parsed: :func:`ortcore.batching.apply_session_options`).
        threads: intra-op threads, and CPUs reserved, per actor.
        gpus_per_actor: GPUs reserved per actor.
        batch_size: rows per model call (and per block read).
        max_restarts: restarts of an actor whose process died.
        max_task_retries: retries of the batches of an actor that died.
        predictor: a :class:`ortcore.ray.BatchPredictor` subclass.
        progress: show rows written on stderr.

    Returns:
        a :class:`BatchReport`.

    Raises:
        InvalidArgument: unreadable input, names that do not match, a column
            the model input it feeds does not take, an output folder of
            another job, or rows missing at the end.
        OrtcoreError: what an actor raised (:meth:`BatchJob.run`).
        ClusterError: Ray itself failed; run again to resume.
    """
    return prepare_batch(
        model,
        input,
        output,
        providers=providers,
        provider_options=provider_options,
        session_options=session_options,
        inputs=inputs,
        outputs=outputs,
        keep=keep,
        actors=actors,
        threads=threads,
        gpus_per_actor=gpus_per_actor,
        batch_size=batch_size,
        rows_per_file=rows_per_file,
        max_restarts=max_restarts,
        max_task_retries=max_task_retries,
        progress=progress,
        predictor=predictor,
    ).run()


def prepare_batch(
    model: str | os.PathLike[str] | bytes,
    input: str,
    output: str,
    *,
    providers: Sequence[Any] | None = None,
    provider_options: Sequence[Mapping[str, Any]] | None = None,
    session_options: SessionSettings = None,
    inputs: Mapping[str, str] | None = None,
    outputs: Sequence[str] | None = None,
    keep: Sequence[str] = (),
    actors: int | None = None,
    threads: int = 1,
    gpus_per_actor: float = 0,
    batch_size: int = 32,
    rows_per_file: int = 1024,
    max_restarts: int = 3,
    max_task_retries: int = 3,
    progress: bool = True,
    predictor: type[BatchPredictor] = BatchPredictor,
) -> BatchJob:
    """Check a batch job before anything runs, without Ray; record it in ``output``.

    Reads the model's declared inputs and what the input files say about
    their columns (Parquet schemas and statistics, ``.npy`` headers, the
    first rows of the first file for list columns) and checks every column
    against the model input it feeds (:mod:`ortcore.batch_check`): element
    type, rank and per-row shape, nulls. A job that fails here leaves
    ``output`` as it was. Then records the job in ``output`` and finds the
    rows already done. Arguments as :func:`run_batch`'s.

    Returns:
        a :class:`BatchJob`; its :meth:`~BatchJob.run` needs a running Ray.

    Raises:
        InvalidArgument: as :func:`run_batch`, before any actor starts; one
            line naming the file, the column, the model input, what the
            input takes and what the column holds.
    """
    _check_numbers(
        actors=actors or 0,
        threads=threads,
        gpus_per_actor=gpus_per_actor,
        batch_size=batch_size,
        rows_per_file=rows_per_file,
        max_restarts=max_restarts,
        max_task_retries=max_task_retries,
    )
    root, gathered = _parts_folder(output)
    payload = model_payload(model)
    data = payload if isinstance(payload, bytes) else Path(payload).read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    plan = _plan(input)
    model_inputs, model_outputs = declared_io(data)
    missing = [c for c in keep if c not in plan.columns]
    if missing:
        raise InvalidArgument(
            f"--keep column(s) {', '.join(map(repr, missing))} are not in the input "
            f"(columns: {', '.join(map(repr, plan.columns))})"
        )
    passthrough = [ID, *[c for c in keep if c != ID]]
    bound = bind_columns([a.name for a in model_inputs], plan.columns, inputs, passthrough)
    chosen = output_columns(outputs, [a.name for a in model_outputs])
    if gathered and gathered.lower().endswith(".npy") and len(chosen) != 1:
        raise InvalidArgument(
            f"output {gathered}: an .npy file holds one output, the model writes "
            f"{len(chosen)} ({', '.join(chosen)}): choose one with --outputs, or write .npz"
        )
    apply_session_options(session_options, threads)  # a bad option fails here, not per actor
    read = sorted({*bound.values(), *passthrough} & set(plan.columns))
    checks = _preflight(plan, model_inputs, bound, read, passthrough, batch_size)
    job = {
        "model_sha256": digest,
        "inputs": plan.files,
        "ids": plan.ids,
        "columns": {"inputs": bound, "outputs": list(chosen), "keep": list(passthrough)},
        "total_rows": plan.total,
    }
    _manifest(root, job)
    _clean_tmp(root)
    done = _done_ids(root)
    todo = _skip_done(plan, done)
    options = {
        "providers": providers,
        "provider_options": provider_options,
        "session_options": session_options,
        "inputs": dict(inputs or {}),
        "outputs": list(chosen) if outputs else None,
        "passthrough": passthrough,
        "actors": actors,
        "threads": threads,
        "gpus_per_actor": gpus_per_actor,
        "batch_size": batch_size,
        "max_restarts": max_restarts,
        "max_task_retries": max_task_retries,
        "predictor": predictor,
    }
    row_bytes = sum(plan.row_bytes.get(c, 8.0) for c in {*read, ID})
    return BatchJob(
        root,
        gathered,
        plan.total,
        len(done),
        payload,
        job,
        read,
        checks,
        todo,
        row_bytes,
        options,
        output,
        progress,
        rows_per_file,
    )


def _check_numbers(**values: float) -> None:
    """Refuse counts out of range here, not as a Ray error after the cluster started."""
    least = {"gpus_per_actor": 0, "max_restarts": -1, "max_task_retries": -1, "actors": 0}
    for name, value in values.items():
        low = least.get(name, 1)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= low:
            raise InvalidArgument(
                f"{name} (--{name.replace('_', '-')}) must be a number of at least {low}, "
                f"got {value!r}"
            )
        if name != "gpus_per_actor" and value != int(value):
            raise InvalidArgument(f"{name} must be a whole number, got {value!r}")


def _preflight(
    plan: _Input,
    model_inputs: Sequence[ModelArg],
    bound: Mapping[str, str],
    read: Sequence[str],
    kept: Sequence[str],
    batch_size: int,
) -> _Checks:
    """Check the input's columns against the model before anything runs; the readers' checks.

    Raises:
        InvalidArgument: see :func:`ortcore.batch_check.check_job`.
    """
    check_job(model_inputs, bound, plan.schemas)
    if plan.kind != "parquet":  # np.load refuses object arrays, and reads no records
        for schema in plan.schemas:
            for column in read:
                if schema[column].problem:
                    raise InvalidArgument(
                        f"input {schema[column].file}: array {column!r} {schema[column].problem}"
                    )
    args = {a.name: a for a in model_inputs}
    feeds: dict[str, tuple[ModelArg, ...]] = {}
    for name, column in bound.items():
        feeds[column] = (*feeds.get(column, ()), args[name])
    checks = _Checks(feeds, frozenset(kept))
    # A list column's row length is in its rows, not its schema: the first rows
    # of the first file are read and checked here, as a reader will.
    varying = [c for c in feeds if None in plan.schemas[0][c].row]
    head = next((p for p in plan.pieces if p.rows), None)
    if plan.kind == "parquet" and varying and head is not None:
        piece = {k: [v] for k, v in asdict(replace(head, skip=[])).items()}
        for _ in _read_piece(piece, read, min(batch_size, 16), checks):
            break
    return checks


def _deferring(predictor: type[BatchPredictor]) -> type[BatchPredictor]:
    """``predictor``, with what its constructor raises raised by its first batch instead.

    Ray retries an actor whose constructor raises (Ray Data's retries, then
    ``max_restarts``), printing each traceback, and hands the driver only the
    error's text; raised by a batch, the error stops the job at once and
    reaches the driver as it was raised.
    """

    class Deferred(predictor):  # type: ignore[valid-type,misc]
        _init_error: BaseException | None = None

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            try:
                super().__init__(*args, **kwargs)
            except Exception as exc:
                self._init_error = exc

        def __call__(self, batch: Any) -> Any:
            if self._init_error is not None:
                raise self._init_error
            return super().__call__(batch)

    # The operator keeps the predictor's name; the qualified name stays this
    # function's, so that Ray pickles the class by value, not as `predictor`.
    Deferred.__name__ = predictor.__name__
    return Deferred


def _skip_done(plan: _Input, done: np.ndarray) -> list[_Piece]:
    """The pieces with rows still to do, each with the offsets of its done rows."""
    if not len(done):
        return list(plan.pieces)
    todo = []
    if plan.id_values is None:
        ordered = np.sort(done.astype(np.int64))
        for p in plan.pieces:
            lo, hi = np.searchsorted(ordered, [p.first, p.first + p.rows])
            if hi - lo < p.rows:
                p.skip = (ordered[lo:hi] - p.first).tolist()
                todo.append(p)
    else:
        for p, ids in zip(plan.pieces, plan.id_values):
            mask = np.isin(ids, done)
            if not mask.all():
                p.skip = np.flatnonzero(mask).tolist()
                todo.append(p)
    return todo


def _execute(
    pieces: list[_Piece],
    columns: list[str],
    payload: str | bytes,
    root: str,
    *,
    progress: _Progress,
    options: dict[str, Any],
    checks: _Checks,
    rows_per_file: int,
) -> tuple[int, int]:
    import ray
    import ray.data

    actors = options["actors"]
    # Reading and writing reserve no CPU (the inference actors hold every core
    # they are given; a task waiting for a CPU the pool holds would wait for
    # ever) and run in a few long-lived actors, not in tasks: Ray keeps no idle
    # worker process beyond a node's CPU count, so each write task, seconds
    # after the last, started a fresh Python process (about 3 s of CPU, taken
    # from the inference actors: 2 actors ran at 1.33x one, not 1.8x).
    io: dict[str, Any] = {
        "num_cpus": 0,
        "compute": ray.data.ActorPoolStrategy(size=_io_actors(actors)),
        "max_restarts": options["max_restarts"],
        "max_task_retries": options["max_task_retries"],
    }
    items = [asdict(p) for p in pieces]
    ds: Any = ray.data.from_items(items, override_num_blocks=len(items))
    model_ref = ray.put(payload) if isinstance(payload, bytes) else payload
    with warnings.catch_warnings():
        # Our reads and writes need no CPU: a pool holding every CPU is what we want.
        warnings.filterwarnings("ignore", message=".*reserve every CPU.*")
        # max_restarts/max_task_retries reach an actor only through **ray_remote_args.
        warnings.filterwarnings("ignore", message=".*ray_remote_args.*")
        ds = ds.map_batches(
            _PieceReader,
            batch_size=1,
            fn_constructor_kwargs={
                "columns": columns,
                "chunk": options["batch_size"],
                "checks": checks,
            },
            **io,
        )
        ds = map_inference(ds, model_ref, **options)
        ds = ds.map_batches(
            _PartWriter, batch_size=rows_per_file, fn_constructor_kwargs={"root": root}, **io
        )
    rows = files = 0
    with warnings.catch_warnings():
        # Ray Data counts a piece as one input; its rows stream to every actor.
        warnings.filterwarnings("ignore", message=r".*only received \d+ input\(s\).*")
        for written in ds.iter_rows():
            rows += int(written["rows"])
            files += 1
            progress.update(int(written["rows"]))
    del model_ref
    return rows, files


def _finish(root: str, job: dict[str, Any], total: int) -> None:
    """Check every row is written exactly once; mark the job complete."""
    done = _done_ids(root)
    unique = np.unique(done)
    if len(unique) != len(done):
        raise InvalidArgument(f"output {root}: some ids are written twice (a bug: please report)")
    if len(done) != total:
        raise InvalidArgument(
            f"output {root}: {len(done)} of {total} rows written; rerun to finish the rest"
        )
    filesystem, folder = _filesystem(root)
    _write_json(filesystem, f"{folder}/{MANIFEST}", {**job, "complete": True})


def _gather(root: str, path: str, names: list[str]) -> None:
    columns = read_output(root)
    savez: Any = np.savez  # numpy's stub reads **columns as its own keywords
    write_atomically(
        path,
        (lambda f: np.save(f, columns[names[0]]))
        if path.lower().endswith(".npy")
        else (lambda f: savez(f, **columns)),
        prefix=f"{Path(path).name}{TMP_PREFIX}",
    )
