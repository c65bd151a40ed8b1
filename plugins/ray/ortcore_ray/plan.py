"""The input plan of ``ortcore batch``: the input's files cut into pieces, and the rows done.

A piece is a unit of reading: one Parquet row group, or a row range of an
``.npy`` file (an ``.npz`` file is one piece). Planning reads only what the
files say about themselves (Parquet metadata and statistics, ``.npy``
headers) and, when the input has an ``id`` column, that column; it needs no
Ray. :func:`_skip_done` marks the rows already in the output, so that a rerun
reads only the pieces with rows still to do.
"""

from __future__ import annotations

import os
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from ortcore.errors import InvalidArgument

from .checks import ColumnInfo, arrow_column, check_ids, numpy_column

ID = "id"
"""The id column: the input's own, or generated from each row's position in file order."""
# Rows per .npy piece are chosen so that a piece is about this many bytes.
PIECE_BYTES = 64 << 20


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
