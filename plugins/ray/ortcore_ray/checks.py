"""Pre-flight of ``ortcore batch``: every input column against the model input it feeds.

Run in the driver before any Ray actor starts, from what the input files say
about themselves: a Parquet file's Arrow schema and row-group statistics, an
``.npy`` header (each array of an ``.npz``). The checks are pure functions of
those descriptions (:class:`ColumnInfo`) and of the model's declared inputs
(:class:`ortcore_ray.columns.ModelArg`), with the rules the actors apply
(:func:`ortcore_ray.columns.cast_problem`, :func:`ortcore_ray.columns.row_problem`),
so a job the pre-flight passes fails in an actor only on what no schema
shows: rows of a list column whose lengths differ or do not fit, a null
inside a list, a value a narrowing cast would change, a model or provider
error. :func:`first_null_row` is the actors' check for nulls, on Arrow data.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from ortcore.errors import InvalidArgument

from .columns import ModelArg, _dims, cast_problem, describe_arg, row_problem

__all__ = [
    "ColumnInfo",
    "arrow_column",
    "check_column",
    "check_ids",
    "check_job",
    "first_null_row",
    "numpy_column",
]


@dataclass(frozen=True)
class ColumnInfo:
    """What an input file says about one of its columns.

    Attributes:
        name: the column.
        file: the file it is in, for messages.
        type: the file's own description (``list<element: float>``, ``.npy float64``).
        dtype: the numpy dtype its elements arrive as (``U`` strings, ``S``
            bytes, ``M8`` dates and times); None when the type is no tensor
            element type at all (``problem`` says why).
        row: the per-row dims, ``None`` for a dim that may vary from row to
            row (a Parquet list); ``()`` for scalars.
        nulls: nulls the file's statistics count (None: not counted).
        null_group: the first row group holding one.
        problem: why the column can feed no tensor input.
    """

    name: str
    file: str
    type: str
    dtype: np.dtype | None
    row: tuple[int | None, ...]
    nulls: int | None = None
    null_group: int | None = None
    problem: str | None = None


# --------------------------------------------------------------------------- #
# Column descriptions, from Arrow schemas and .npy headers
# --------------------------------------------------------------------------- #


def arrow_column(
    field: Any, file: str, nulls: int | None = None, group: int | None = None
) -> ColumnInfo:
    """A :class:`ColumnInfo` from a ``pyarrow.Field`` (and the statistics' null count)."""
    import pyarrow as pa

    t = field.type
    row: list[int | None] = []
    while True:
        if isinstance(t, pa.FixedShapeTensorType):
            row += [int(d) for d in t.shape]
            t = t.value_type
        elif isinstance(t, pa.BaseExtensionType):
            t = t.storage_type  # read as its storage (a list, a fixed-size list)
        elif pa.types.is_dictionary(t):
            t = t.value_type  # decoded as it is read
        elif pa.types.is_fixed_size_list(t):
            row.append(int(t.list_size))
            t = t.value_type
        elif _is_list(t):
            row.append(None)
            t = t.value_type
        else:
            break
    dtype, problem = _arrow_dtype(t)
    if not field.nullable:
        nulls = 0
    return ColumnInfo(field.name, file, str(field.type), dtype, tuple(row), nulls, group, problem)


def _is_list(t: Any) -> bool:
    import pyarrow as pa

    checks = ("is_list", "is_large_list", "is_list_view", "is_large_list_view")
    return any(_has(pa.types, c, t) for c in checks)


def _has(types: Any, check: str, t: Any) -> bool:
    """``types.<check>(t)``; False where this pyarrow has no such type (views: pyarrow 16)."""
    return bool(getattr(types, check, lambda _: False)(t))


def _arrow_dtype(t: Any) -> tuple[np.dtype | None, str | None]:
    """The numpy dtype an Arrow element type arrives as, or why it is no tensor element."""
    import pyarrow as pa

    types = pa.types
    if types.is_integer(t) or types.is_floating(t) or types.is_boolean(t):
        return np.dtype(t.to_pandas_dtype()), None
    if types.is_string(t) or types.is_large_string(t) or _has(types, "is_string_view", t):
        return np.dtype("U"), None
    if (
        types.is_binary(t)
        or types.is_large_binary(t)
        or types.is_fixed_size_binary(t)
        or _has(types, "is_binary_view", t)
    ):
        return np.dtype("S"), None
    if types.is_timestamp(t) or types.is_date(t):
        return np.dtype("M8[ns]"), None
    if types.is_time(t) or types.is_duration(t) or types.is_interval(t):
        return np.dtype("m8[ns]"), None
    if types.is_null(t):
        return None, "holds only nulls"
    return None, f"holds {t} values, which are no tensor element type"


def numpy_column(name: str, shape: Sequence[int], dtype: np.dtype, file: str) -> ColumnInfo:
    """A :class:`ColumnInfo` from an ``.npy`` header: the array's shape and dtype."""
    described = f".npy array of {dtype} {list(shape)}"
    row: tuple[int | None, ...] = tuple(int(d) for d in shape[1:])
    problem = None
    if dtype.subdtype is not None:  # a dtype with its own shape: each element is a block
        base, block = dtype.subdtype
        dtype, row = base, (*row, *block)
    if dtype.hasobject:
        problem = (
            "holds Python objects (a pickled array), which ortcore batch does not load; "
            "save the array with a numeric or string dtype"
        )
    elif dtype.names:
        problem = "holds records (a structured dtype): save each field as its own array (.npz)"
    elif not len(shape):
        problem = "is 0-d: it has no rows"
    return ColumnInfo(name, file, described, None if problem else dtype, row, 0, None, problem)


# --------------------------------------------------------------------------- #
# The checks
# --------------------------------------------------------------------------- #


def check_column(info: ColumnInfo, arg: ModelArg) -> None:
    """Check that column ``info`` can feed model input ``arg``.

    Raises:
        InvalidArgument: one line naming the file, the column, the model input,
            what the input takes and what the column holds.
    """
    check_input(arg)
    where = f"input {info.file}: column {info.name!r}"
    wants = f"model input {describe_arg(arg)}"
    if info.problem:
        raise InvalidArgument(f"{where} ({info.type}) {info.problem}; {wants} reads it")
    if info.dtype is not None:
        problem = cast_problem(info.dtype, arg.dtype)
        if problem:
            raise InvalidArgument(f"{where} holds {_held(info)}, {wants} {problem}")
    problem = row_problem(info.row, arg)
    if problem:
        raise InvalidArgument(
            f"{where} has rows of shape {_dims(info.row)} ({info.type}), {wants} {problem}; "
            f"{_RESHAPE}"
        )
    if info.nulls:
        raise InvalidArgument(
            f"{where} has {info.nulls} null(s), the first in row group {info.null_group}: "
            f"{wants} needs a value in every row; fill or drop the nulls"
        )


_RESHAPE = "reshape the rows, or feed the input another column (--input-map)"


def check_input(arg: ModelArg) -> None:
    """Check that a batch job can feed model input ``arg`` at all (a tensor with a batch dim).

    Raises:
        InvalidArgument: a sequence, map or optional input, or a scalar one.
    """
    if arg.kind != "tensor":
        raise InvalidArgument(
            f"model input {arg.name!r} is a {arg.kind}: ortcore batch feeds tensor inputs only"
        )
    if arg.ranked and not arg.shape:
        raise InvalidArgument(
            f"model input {arg.name!r} is a scalar (rank 0): ortcore batch feeds each input "
            "a batch of rows, so each needs a first (batch) dim"
        )


def check_ids(info: ColumnInfo) -> None:
    """Check an ``id`` column: integers or strings, one per row, no nulls.

    Raises:
        InvalidArgument: naming the file and what the column holds.
    """
    where = f"input {info.file}: the id column ({info.type})"
    if info.problem or info.dtype is None or info.dtype.kind not in "iuUS" or info.row:
        raise InvalidArgument(
            f"{where} does not hold one integer or string per row: ids must be unique "
            "integers or strings (they say which rows are done); rename the column to use "
            "generated ids"
        )
    if info.nulls:
        raise InvalidArgument(
            f"{where} has {info.nulls} null(s), the first in row group {info.null_group}: "
            "every row needs an id; fill them, or rename the column to use generated ids"
        )


def check_job(
    inputs: Sequence[ModelArg],
    bound: Mapping[str, str],
    files: Sequence[Mapping[str, ColumnInfo]],
    *,
    id_column: str | None = None,
) -> None:
    """Check every model input against its column in every input file.

    Args:
        inputs: the model's declared inputs.
        bound: ``{model input: column}``.
        files: per input file, its columns.
        id_column: the id column, when the input has one.

    Raises:
        InvalidArgument: the first mismatch (see :func:`check_column`).
    """
    args = {a.name: a for a in inputs}
    for a in inputs:
        check_input(a)
    for columns in files:
        if id_column is not None:
            check_ids(columns[id_column])
        for name, column in bound.items():
            check_column(columns[column], args[name])


def first_null_row(array: Any) -> int | None:
    """The first row of an Arrow array holding a null at any depth (in a list, a list of lists).

    Float columns read nulls as NaN and integer columns turn into floats:
    a null must be refused where it is still a null.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if isinstance(array, pa.ExtensionArray):
        array = array.storage
    if pa.types.is_dictionary(array.type):
        array = array.dictionary_decode()
    if array.null_count:
        return int(pc.index(array.is_null(), True).as_py())
    if pa.types.is_fixed_size_list(array.type) or _is_list(array.type):
        inner = first_null_row(array.flatten())
        if inner is not None:
            return int(pc.list_parent_indices(array)[inner].as_py())
    return None


def _held(info: ColumnInfo) -> str:
    kind = info.dtype.kind if info.dtype is not None else ""
    what = {"U": "strings", "S": "bytes", "M": "dates", "m": "times"}.get(kind, str(info.dtype))
    return f"{what} ({info.type})"
