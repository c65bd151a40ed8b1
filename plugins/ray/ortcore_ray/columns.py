"""Columns of a batch to model feeds, and outputs back to columns.

The rules :mod:`ortcore_ray.inference`'s predictor and Serve deployment share (no Ray
here): which column feeds which input, how a column of array cells becomes a
batch, how a model with a fixed batch size runs a larger batch, and how
session settings given as strings (a command line's) become ``SessionOptions``.
"""

from __future__ import annotations

import enum
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

import numpy as np
from ortcore.errors import InvalidArgument
from ortcore.options import SessionOptions

__all__ = [
    "ModelArg",
    "ModelRunner",
    "SessionSettings",
    "apply_session_options",
    "bind_columns",
    "cast_problem",
    "check_mapping",
    "column_array",
    "declared_io",
    "describe_arg",
    "model_args",
    "output_columns",
    "row_problem",
    "stack_cell",
]

SessionSettings: TypeAlias = "SessionOptions | Mapping[str, Any] | None"
"""A ``SessionOptions``, or a mapping of its attribute names (and of session
config keys, the names with a dot) to values; see :func:`apply_session_options`."""


def apply_session_options(settings: SessionSettings, threads: int) -> SessionOptions:
    """A ``SessionOptions`` from ``settings``, with ``threads`` intra-op threads.

    A mapping's keys are ``SessionOptions`` attribute names
    (``graph_optimization_level``, ``enable_mem_pattern``, ...) or, when they
    contain a dot, session config entries (``session.disable_cpu_ep_fallback``).
    Values may be strings, as from a command line: an enum takes its member's
    name or number, a bool ``1/0/true/false``.

    Raises:
        InvalidArgument: an unknown attribute or a value of the wrong kind.
    """
    if isinstance(settings, SessionOptions):
        import copy

        so = copy.copy(settings)
        so._config = dict(settings._config)
    else:
        so = SessionOptions()
        for key, value in (settings or {}).items():
            if "." in key:
                so.add_session_config_entry(key, str(value))
                continue
            if key.startswith("_") or not hasattr(so, key):
                known = sorted(k for k in vars(so) if not k.startswith("_"))
                raise InvalidArgument(
                    f"session option {key!r} is not a SessionOptions attribute "
                    f"(known: {', '.join(known)}; session config keys contain a dot)"
                )
            setattr(so, key, _coerce(key, getattr(so, key), value))
    so.intra_op_num_threads = threads
    return so


def _coerce(key: str, current: Any, value: Any) -> Any:
    try:
        if isinstance(current, enum.Enum):
            cls = type(current)
            if isinstance(value, str) and not value.lstrip("-").isdigit():
                return cls[value]
            return cls(int(value))
        if isinstance(current, bool):
            if isinstance(value, str):
                if value.lower() not in ("1", "0", "true", "false"):
                    raise ValueError(value)
                return value.lower() in ("1", "true")
            return bool(value)
        if isinstance(current, int):
            return int(value)
        return str(value)
    except (KeyError, ValueError) as exc:
        raise InvalidArgument(
            f"session option {key}={value!r}: expected a value like {current!r}"
        ) from exc


# --------------------------------------------------------------------------- #
# Columns to feeds, outputs to columns
# --------------------------------------------------------------------------- #


@dataclass(frozen=True)
class ModelArg:
    """A model input or output: name, dims (int, symbol or None) and numpy dtype.

    ``ranked`` is False where the model leaves the rank unknown (no shape, or
    a session's ``[]``, which does not tell a scalar from an unknown shape);
    ``kind`` is ``"tensor"``, or the ONNX type of a sequence, map or optional.
    """

    name: str
    shape: tuple[int | str | None, ...]
    dtype: np.dtype | None
    ranked: bool = True
    kind: str = "tensor"

    @property
    def fixed_batch(self) -> int | None:
        """The first dim when the model fixes it (the batch size it accepts)."""
        if self.shape and isinstance(self.shape[0], int) and self.shape[0] > 0:
            return self.shape[0]
        return None


def model_args(node_args: Sequence[Any]) -> list[ModelArg]:
    """The session's ``get_inputs()``/``get_outputs()`` as :class:`ModelArg`
    records (name, numpy dtype, shape) for mapping batch columns."""
    from ep_sdk.dtypes import from_type_string, to_numpy

    out = []
    for a in node_args:
        elem = from_type_string(a.type)
        try:
            dtype = to_numpy(elem) if elem is not None else None
        except TypeError:
            dtype = None
        kind = "tensor" if str(a.type).startswith("tensor(") else str(a.type)
        out.append(ModelArg(a.name, tuple(a.shape), dtype, ranked=bool(a.shape), kind=kind))
    return out


def declared_io(model: bytes) -> tuple[list[ModelArg], list[ModelArg]]:
    """The graph's inputs (initializers excluded) and outputs, from the model bytes."""
    import onnx
    from ortcore.model import parse_model

    proto, _ = parse_model(model)
    graph = proto.graph
    constants = {t.name for t in graph.initializer}

    def arg(v: onnx.ValueInfoProto) -> ModelArg:
        which = v.type.WhichOneof("value")
        if which not in (None, "tensor_type"):
            return ModelArg(v.name, (), None, ranked=False, kind=which.removesuffix("_type"))
        t = v.type.tensor_type
        dims = tuple(
            d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in t.shape.dim
        )
        try:
            dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(t.elem_type))
        except (KeyError, TypeError, ValueError):
            dtype = None
        return ModelArg(v.name, dims, dtype, ranked=t.HasField("shape"))

    return [arg(v) for v in graph.input if v.name not in constants], [arg(v) for v in graph.output]


def check_mapping(inputs: Sequence[str], mapping: Mapping[str, str] | None) -> None:
    """Check that an input mapping names only inputs of the model.

    Raises:
        InvalidArgument: the unknown names, and the model's inputs.
    """
    unknown = sorted(set(mapping or {}) - set(inputs))
    if unknown:
        raise InvalidArgument(
            f"input mapping names {', '.join(map(repr, unknown))}, which the model does not "
            f"have as inputs (model inputs: {', '.join(map(repr, inputs))})"
        )


def bind_columns(
    inputs: Sequence[str],
    columns: Sequence[str],
    mapping: Mapping[str, str] | None = None,
    passthrough: Sequence[str] = (),
) -> dict[str, str]:
    """Which column feeds each model input: ``{input: column}``.

    An input reads the column ``mapping`` names for it, else the column of its
    own name; a model with one input and no such column reads the only column
    that is not passed through, when there is exactly one.

    Raises:
        InvalidArgument: ``mapping`` names an input the model lacks, or an
            input's column is missing; the message names both and lists the
            columns there are.
    """
    mapping = dict(mapping or {})
    check_mapping(inputs, mapping)
    bound: dict[str, str] = {}
    for name in inputs:
        column = mapping.get(name, name)
        if column in columns:
            bound[name] = column
            continue
        candidates = [c for c in columns if c not in passthrough]
        if name not in mapping and len(inputs) == 1 and len(candidates) == 1:
            bound[name] = candidates[0]
            continue
        how = f"mapped to column {column!r}" if name in mapping else "reads the column of its name"
        raise InvalidArgument(
            f"model input {name!r} {how}, which the data does not have "
            f"(columns: {', '.join(map(repr, columns)) or 'none'}); "
            f"map it to a column with inputs={{{name!r}: 'COLUMN'}} (--input-map {name}=COLUMN)"
        )
    return bound


def column_array(
    values: Any, arg: ModelArg, column: str, *, where: str = "", ids: Any = None
) -> np.ndarray:
    """A column as the batch array of model input ``arg``.

    A column whose cells are arrays (object dtype, as Parquet list columns
    arrive) is stacked; rows whose element count matches the input's fixed
    per-row dims are reshaped to them (a flattened image); the dtype is cast
    to the input's when :func:`cast_problem` allows it (a ``same_kind`` cast:
    float64 -> float32, int -> float, never float -> int), and a narrowing cast
    must keep every value (no integer wrapped, no float overflowed to inf).

    Args:
        values: the column (numpy array, or a sequence of cells).
        arg: the model input it feeds.
        column: its name, for messages.
        where: a prefix for messages (the file it came from).
        ids: the rows' ids, to name the row at fault (positions otherwise).

    Raises:
        InvalidArgument: rows of different shapes, a row shape or a dtype the
            input does not take, a value the cast would change; the message
            names the column, the input and the row.
    """
    array = np.asarray(values)
    if array.dtype == object and array.size:
        array = _stack_rows(array, arg, column, where, ids)
    want = _row(arg)
    if want is not None and _fixed(want) and array.ndim >= 1:
        fixed = tuple(int(d) for d in want)  # type: ignore[arg-type]
        if array.shape[1:] != fixed and math.prod(array.shape[1:]) == math.prod(fixed):
            array = array.reshape((array.shape[0], *fixed))
    if array.ndim >= 1:
        problem = row_problem(array.shape[1:], arg)
        if problem:
            raise InvalidArgument(
                f"{where}column {column!r} has rows of shape {list(array.shape[1:])}, "
                f"model input {describe_arg(arg)} {problem}; reshape the rows, or feed the "
                "input another column"
            )
    if arg.dtype is not None and array.dtype != arg.dtype:
        problem = cast_problem(_element_dtype(array), arg.dtype)
        if problem:
            raise InvalidArgument(
                f"{where}column {column!r} holds {_held(array)}, model input "
                f"{describe_arg(arg)} {problem}"
            )
        if arg.dtype != object:
            with np.errstate(over="ignore", invalid="ignore"):  # checked just below
                cast = array.astype(arg.dtype)
            _check_kept(array, cast, arg, column, where, ids)
            array = cast
    return array


def cast_problem(held: np.dtype, want: np.dtype | None) -> str | None:
    """Why elements of dtype ``held`` cannot feed an input of dtype ``want``, or None.

    The rule ``column_array`` applies and ``ortcore batch`` checks before it
    starts: a string input (``want`` object) takes strings or bytes; a numeric
    or bool input takes numbers and bools that numpy casts ``same_kind``
    (bool -> any number, int -> float, int64 -> int32, float64 -> float16),
    never float -> int or number -> bool; strings, bytes, dates, Python objects
    and records feed no numeric input.
    """
    if want is None or held == want:
        return None
    if want.kind == "O":
        if held.kind in "US":
            return None
        return "takes strings: convert the column to strings first"
    if held.kind in "US":
        what = "strings" if held.kind == "U" else "bytes"
        return f"takes numbers, not {what}: convert the column to numbers first"
    if held.kind in "OV":
        return "takes numbers, not Python objects or records: convert the column first"
    if held.kind in "Mm":
        return "takes numbers, not dates or times: convert the column to numbers first"
    if not np.can_cast(held, want, casting="same_kind"):
        return (
            f"takes {want}, which {held} does not cast to without a change of kind "
            "(float to int, signed to unsigned int, number to bool): cast the column first"
        )
    return None


def row_problem(held: Sequence[int | None], arg: ModelArg) -> str | None:
    """Why rows of shape ``held`` (None: a dim that varies or is not known yet)
    cannot feed model input ``arg``, or None when they can or it cannot be told yet.

    An input whose per-row dims are all fixed takes rows of that shape, or of
    any shape with as many elements (reshaped); an input with symbolic dims
    takes rows of its rank whose fixed dims match.
    """
    want = _row(arg)
    if want is None:
        return None
    held = tuple(held)
    if _fixed(want):
        if None in held:
            return None  # the element count is known only row by row
        if held == want or math.prod(held) == math.prod(want):  # type: ignore[arg-type]
            return None
        return f"takes rows of shape {_dims(want)} ({math.prod(want)} elements)"  # type: ignore[arg-type]
    if len(held) != len(want):
        return f"takes rows of rank {len(want)} ({_dims(want)}), not {len(held)}"
    for h, w in zip(held, want):
        if isinstance(w, int) and h is not None and h != w:
            return f"takes rows of shape {_dims(want)}"
    return None


def describe_arg(arg: ModelArg) -> str:
    """``'x' (float32 [N, 64])``: an input's name, element type and dims, for messages."""
    dtype = "string" if arg.dtype == object else (str(arg.dtype) if arg.dtype else "tensor")
    shape = _dims(arg.shape) if arg.ranked else "of any shape"
    return f"{arg.name!r} ({dtype} {shape})"


def _row(arg: ModelArg) -> tuple[int | str | None, ...] | None:
    """The per-row dims of a ranked tensor input (None for a dim not fixed), else None.

    A dim of a negative value is unknown, as exporters write -1.
    """
    if not arg.ranked or not arg.shape or arg.kind != "tensor":
        return None
    return tuple(d if not isinstance(d, int) or d >= 0 else None for d in arg.shape[1:])


def _fixed(dims: Sequence[Any]) -> bool:
    return all(isinstance(d, int) for d in dims)


def _dims(dims: Sequence[Any]) -> str:
    return "[" + ", ".join("?" if d is None else str(d) for d in dims) + "]"


def _element_dtype(array: np.ndarray) -> np.dtype:
    """The dtype of an array's elements; an object array of str (bytes) counts as strings."""
    if array.dtype == object and array.size:
        first = array.flat[0]
        if isinstance(first, str):
            return np.dtype("U")
        if isinstance(first, bytes):
            return np.dtype("S")
    return array.dtype


def _held(array: np.ndarray) -> str:
    kind = _element_dtype(array)
    if kind.kind == "O" and array.size:
        return f"{type(array.flat[0]).__name__} objects"
    return {"U": "strings", "S": "bytes"}.get(kind.kind, str(kind))


def _row_name(ids: Any, index: int) -> str:
    if ids is not None and index < len(ids):
        return f"the row of id {np.asarray(ids)[index : index + 1].tolist()[0]!r}"
    return f"row {index} of the batch"


def _stack_rows(array: np.ndarray, arg: ModelArg, column: str, where: str, ids: Any) -> np.ndarray:
    """An object column of array cells (lists) stacked; strings and bytes kept as they are."""
    cells = list(array.ravel()) if array.ndim != 1 else list(array)
    for i, cell in enumerate(cells):
        if cell is None:
            raise InvalidArgument(
                f"{where}column {column!r} (model input {arg.name!r}) has a null at "
                f"{_row_name(ids, i)}: a model input needs a value in every row; fill or "
                "drop the nulls"
            )
    if array.ndim != 1 or isinstance(cells[0], (str, bytes)):
        kinds = {type(c) for c in cells}
        if len(kinds) > 1 and arg.dtype == object:
            raise InvalidArgument(
                f"{where}column {column!r} (model input {arg.name!r}) mixes "
                f"{', '.join(sorted(k.__name__ for k in kinds))}: a string input takes "
                "strings (or bytes) in every row"
            )
        return array
    rows = []
    for i, cell in enumerate(cells):
        try:
            row = stack_cell(cell)
        except ValueError:
            row = None
        if row is not None and row.dtype == object and not row.ndim:
            raise InvalidArgument(
                f"{where}column {column!r} holds {type(cell).__name__} objects "
                f"({_row_name(ids, i)}), model input {describe_arg(arg)} takes numbers or "
                "arrays of them: convert the column first"
            )
        if row is None or row.dtype == object:
            raise InvalidArgument(
                f"{where}column {column!r} (model input {arg.name!r}) has a ragged or "
                f"null value inside {_row_name(ids, i)}: a model input needs rows of one "
                "shape, every element set"
            )
        rows.append(row)
    shapes = [r.shape for r in rows]
    differ = "rows of different shapes: " if len(set(shapes)) > 1 else ""
    for i, shape in enumerate(shapes):
        problem = row_problem(shape, arg)
        if problem:
            raise InvalidArgument(
                f"{where}column {column!r} has {differ}a row of shape {list(shape)} at "
                f"{_row_name(ids, i)}, model input {describe_arg(arg)} {problem}; reshape the "
                "rows, or feed the input another column"
            )
    if differ:
        i = next(i for i, shape in enumerate(shapes) if shape != shapes[0])
        raise InvalidArgument(
            f"{where}column {column!r} (model input {arg.name!r}) has {differ}"
            f"{_row_name(ids, 0)} is {list(shapes[0])}, {_row_name(ids, i)} is "
            f"{list(shapes[i])}; a model input needs rows of one shape"
        )
    return np.stack(rows)


def _check_kept(
    source: np.ndarray, cast: np.ndarray, arg: ModelArg, column: str, where: str, ids: Any
) -> None:
    """Refuse a narrowing cast that changed a value: an integer out of range, a float overflowed."""
    if np.can_cast(source.dtype, cast.dtype, casting="safe") or not source.size or not source.ndim:
        return
    bad: np.ndarray | None = None
    if source.dtype.kind in "iu" and cast.dtype.kind in "iu":
        info = np.iinfo(cast.dtype)
        bad = (source < info.min) | (source > info.max)
    elif source.dtype.kind in "iuf" and cast.dtype.kind == "f":
        bad = ~np.isfinite(cast)
        if source.dtype.kind == "f":
            bad &= np.isfinite(source)
    if bad is None or not bad.any():
        return
    flat = int(np.flatnonzero(bad.reshape(len(source), -1).any(axis=1))[0])
    value = source.reshape(len(source), -1)[flat][bad.reshape(len(source), -1)[flat]][0].item()
    raise InvalidArgument(
        f"{where}column {column!r} holds {value!r} at {_row_name(ids, flat)}, which "
        f"{cast.dtype} (model input {arg.name!r}) cannot hold: cast the column yourself, "
        "choosing what such values become"
    )


def stack_cell(value: Any) -> np.ndarray:
    """One cell of an object column; nested object arrays (lists of lists) stacked."""
    cell = np.asarray(value)
    if cell.dtype == object and cell.size and isinstance(cell.flat[0], np.ndarray):
        return np.stack([stack_cell(v) for v in cell])
    return cell


def output_columns(
    outputs: Sequence[str] | Mapping[str, str] | None, names: Sequence[str]
) -> dict[str, str]:
    """``{output: column}`` for the outputs wanted."""
    if outputs is None:
        chosen = {n: n for n in names}
    elif isinstance(outputs, Mapping):
        chosen = dict(outputs)
    else:
        chosen = {n: n for n in outputs}
    unknown = sorted(set(chosen) - set(names))
    if unknown:
        raise InvalidArgument(
            f"outputs {', '.join(map(repr, unknown))} are not outputs of the model "
            f"(outputs: {', '.join(map(repr, names))})"
        )
    return chosen


class ModelRunner:
    """One session, and the rules that turn columns into feeds and outputs into columns."""

    def __init__(
        self,
        model: str | os.PathLike[str] | bytes,
        *,
        providers: Sequence[Any] | None,
        provider_options: Sequence[Mapping[str, Any]] | None,
        session_options: SessionSettings,
        threads: int,
        outputs: Sequence[str] | Mapping[str, str] | None,
    ) -> None:
        from ortcore.session import InferenceSession

        so = apply_session_options(session_options, threads)
        self.session = InferenceSession(
            model,
            so,
            providers=list(providers) if providers else None,
            provider_options=list(provider_options) if provider_options else None,
            enable_fallback=0,  # a misspelt provider is an error, not a run on the CPU
        )
        self.inputs = model_args(self.session.get_inputs())
        self.outputs = model_args(self.session.get_outputs())
        self.output_columns = output_columns(outputs, [a.name for a in self.outputs])
        fixed = {a.fixed_batch for a in self.inputs} - {None}
        # A model exported with a fixed batch size (1 for most image classifiers)
        # runs the batch in chunks of that size.
        self.chunk: int | None = min(fixed) if fixed else None  # type: ignore[type-var]

    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Run the session over ``feeds`` (input name -> batch); ``{column: array}``."""
        wanted = list(self.output_columns)
        rows = len(next(iter(feeds.values()))) if feeds else 0
        if self.chunk is None or rows == self.chunk:
            results = [self.session.run(wanted, dict(feeds))]
        else:
            results = []
            k = self.chunk
            for start in range(0, rows, k):
                part = {n: v[start : start + k] for n, v in feeds.items()}
                short = k - len(next(iter(part.values())))
                if short:  # pad the last chunk with its last row; trimmed below
                    part = {
                        n: np.concatenate([v, np.repeat(v[-1:], short, 0)]) for n, v in part.items()
                    }
                results.append(self.session.run(wanted, part))
        columns: dict[str, np.ndarray] = {}
        for i, name in enumerate(wanted):
            parts = [np.asarray(r[i]) for r in results]
            for p in parts:
                if p.ndim == 0 or (self.chunk is None and len(p) != rows):
                    raise InvalidArgument(
                        f"output {name!r} has shape {p.shape}, whose first dim is not the batch "
                        f"({rows} rows): it cannot become a column (leave it out with outputs=)"
                    )
            columns[self.output_columns[name]] = (
                parts[0] if len(parts) == 1 else np.concatenate(parts)
            )[:rows]
        return columns

    def empty_outputs(self) -> dict[str, np.ndarray]:
        """Zero-row output columns (a batch with no rows runs nothing)."""
        out = {}
        for a in self.outputs:
            if a.name in self.output_columns:
                dims = [d if isinstance(d, int) else 0 for d in a.shape[1:]]
                out[self.output_columns[a.name]] = np.zeros((0, *dims), a.dtype or np.float32)
        return out
