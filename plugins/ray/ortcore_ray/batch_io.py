"""Reading and writing for ``ortcore batch``: pieces into checked rows, results into part files.

The readers turn one piece of the plan (:mod:`ortcore_ray.plan`) into
batches of rows with their ids, checked (and converted) for the model inputs
they feed; the writers write each batch of results as a Parquet part file,
whole or not at all, named by a digest of its ids. The output folder's
manifest, the ids already written, the clean-up of half-written files and the
gathering into one ``.npz``/``.npy`` file are here too (see
:mod:`ortcore_ray.run` for the folder's layout).
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from ep_sdk.files import write_atomically
from ortcore.errors import InvalidArgument

from .checks import first_null_row
from .columns import ModelArg, column_array
from .plan import ID, _filesystem, _local, _Piece

__all__ = ["read_output"]

MANIFEST = "_ortcore_batch.json"
PART_PREFIX = "part-"
TMP_PREFIX = ".tmp-"


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
    from .columns import stack_cell

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


def _parts_folder(output: str) -> tuple[str, str | None]:
    """The folder of part files and, for an .npz/.npy output, the file to gather into."""
    suffix = Path(output).suffix.lower()
    if suffix in (".npz", ".npy"):
        if not _local(output):
            raise InvalidArgument(f"output {output}: .npz/.npy outputs are local files")
        return output + ".parts", output
    return output, None


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
