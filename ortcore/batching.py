"""Columns of a batch to model feeds, and outputs back to columns.

The rules :mod:`ortcore.ray`'s predictor and Serve deployment share (no Ray
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

from .errors import InvalidArgument
from .options import SessionOptions

__all__ = [
    "ModelArg",
    "ModelRunner",
    "SessionSettings",
    "apply_session_options",
    "bind_columns",
    "check_mapping",
    "column_array",
    "declared_io",
    "model_args",
    "output_columns",
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
    """A model input or output: name, dims (int, symbol or None) and numpy dtype."""

    name: str
    shape: tuple[int | str | None, ...]
    dtype: np.dtype | None

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
        out.append(ModelArg(a.name, tuple(a.shape), dtype))
    return out


def declared_io(model: bytes) -> tuple[list[ModelArg], list[ModelArg]]:
    """The graph's inputs (initializers excluded) and outputs, from the model bytes."""
    import onnx

    from .model import parse_model

    proto, _ = parse_model(model)
    graph = proto.graph
    constants = {t.name for t in graph.initializer}

    def arg(v: onnx.ValueInfoProto) -> ModelArg:
        t = v.type.tensor_type
        dims = tuple(
            d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in t.shape.dim
        )
        try:
            dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(t.elem_type))
        except (KeyError, TypeError, ValueError):
            dtype = None
        return ModelArg(v.name, dims, dtype)

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


def column_array(values: Any, arg: ModelArg, column: str) -> np.ndarray:
    """A column as the batch array of model input ``arg``.

    A column whose cells are arrays (object dtype, as Parquet list columns
    arrive) is stacked; rows whose element count matches the input's fixed
    per-row dims are reshaped to them (a flattened image); the dtype is cast
    to the input's when numpy calls that ``same_kind`` (float64 -> float32).

    Raises:
        InvalidArgument: rows of different shapes, or a dtype that cannot be
            cast; the message names the column and the input.
    """
    array = np.asarray(values)
    if array.dtype == object and array.size and not isinstance(array.flat[0], (str, bytes)):
        try:
            array = np.stack([stack_cell(v) for v in array])
        except ValueError as exc:
            shapes = sorted({np.shape(stack_cell(v)) for v in array})[:3]
            raise InvalidArgument(
                f"column {column!r} (model input {arg.name!r}) has rows of different shapes "
                f"{shapes}: a model input needs rows of one shape"
            ) from exc
    row = arg.shape[1:]
    if row and all(isinstance(d, int) for d in row) and array.ndim >= 1:
        want = tuple(int(d) for d in row)  # type: ignore[arg-type]
        if array.shape[1:] != want and math.prod(array.shape[1:]) == math.prod(want):
            array = array.reshape((array.shape[0], *want))
    if arg.dtype is not None and array.dtype != arg.dtype and arg.dtype != object:
        if not np.can_cast(array.dtype, arg.dtype, casting="same_kind"):
            raise InvalidArgument(
                f"column {column!r} holds {array.dtype}, model input {arg.name!r} takes "
                f"{arg.dtype}: cast the column first"
            )
        array = array.astype(arg.dtype)
    return array


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
        from .session import InferenceSession

        so = apply_session_options(session_options, threads)
        self.session = InferenceSession(
            model,
            so,
            providers=list(providers) if providers else None,
            provider_options=list(provider_options) if provider_options else None,
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
