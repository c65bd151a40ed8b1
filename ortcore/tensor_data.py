"""A model's tensor data: size checks, external data references, and saving.

Every tensor of a model proto (initializers, sparse initializers and tensor
attributes of the graph, its subgraphs and functions) is checked against its
type and shape without reading external data, and every external reference
against the model's folder and the file it names.

External data is never read into the protobuf, which cannot exceed 2 GiB:
the references stay in the proto, and onnx-ir turns them into
:class:`onnx_ir.ExternalTensor` objects that memory-map their bytes from the
model's folder when an array is first asked for. Only small tensors are read
in (see :data:`SMALL_EXTERNAL_BYTES`).
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir

from .errors import InvalidArgument, InvalidGraph, NoSuchFile

__all__ = [
    "INLINE_SAVE_LIMIT",
    "SMALL_EXTERNAL_BYTES",
    "check_external_data",
    "check_tensor_data",
    "is_external",
    "proto_tensors",
    "read_small_external",
    "save_model",
    "set_external_base",
]

SMALL_EXTERNAL_BYTES = 1024
"""External tensors up to this size are read into the model when it loads.

Shape inference (onnx's, in C++) can only read tensor contents held in the
proto, and it reads them for shape-like inputs (``Reshape``'s shape, ``Slice``'s
starts, ``Resize``'s scales, ...): without them, inference of those nodes fails.
Such inputs are 0-D or 1-D, so those are read up to :data:`SHAPE_LIKE_BYTES`.
"""

SHAPE_LIKE_BYTES = 1 << 20
"""0-D and 1-D external tensors up to this size are read into the model too."""

SMALL_EXTERNAL_BUDGET = 64 << 20
"""At most this many external bytes in all are read into the model at load."""

_EXTERNAL = onnx.TensorProto.EXTERNAL
_PACKED_TYPES = frozenset(
    {
        onnx.TensorProto.INT4,
        onnx.TensorProto.UINT4,
        onnx.TensorProto.FLOAT4E2M1,
        onnx.TensorProto.INT2,
        onnx.TensorProto.UINT2,
    }
)
"""Sub-byte types whose typed field (``int32_data``) holds packed bytes."""
_COMPLEX_TYPES = frozenset({onnx.TensorProto.COMPLEX64, onnx.TensorProto.COMPLEX128})


def _graph_tensors(graph: onnx.GraphProto) -> Iterator[tuple[str, onnx.TensorProto]]:
    where = f"of graph {graph.name!r}"
    for t in graph.initializer:
        yield f"initializer {t.name!r} {where}", t
    for sp in graph.sparse_initializer:
        yield f"sparse initializer {sp.values.name!r} (values) {where}", sp.values
        yield f"sparse initializer {sp.values.name!r} (indices) {where}", sp.indices
    yield from _node_tensors(graph.node)


def _node_tensors(nodes: Iterable[onnx.NodeProto]) -> Iterator[tuple[str, onnx.TensorProto]]:
    for node in nodes:
        for attr in node.attribute:
            where = f"attribute {attr.name!r} of node {node.name!r} ({node.op_type})"
            if attr.HasField("t"):
                yield where, attr.t
            for t in attr.tensors:
                yield where, t
            sparse = [attr.sparse_tensor] if attr.HasField("sparse_tensor") else []
            for sp in [*sparse, *attr.sparse_tensors]:
                yield f"{where} (values)", sp.values
                yield f"{where} (indices)", sp.indices
            if attr.HasField("g"):
                yield from _graph_tensors(attr.g)
            for g in attr.graphs:
                yield from _graph_tensors(g)


def proto_tensors(proto: onnx.ModelProto) -> Iterator[tuple[str, onnx.TensorProto]]:
    """Every tensor of the model, with a phrase saying where it is: initializers
    and attributes of the graph, its subgraphs and the model's functions."""
    yield from _graph_tensors(proto.graph)
    for f in proto.functions:
        yield from _node_tensors(f.node)


def is_external(t: onnx.TensorProto) -> bool:
    """Whether ``t`` keeps its data in an external file."""
    return t.HasField("data_location") and t.data_location == _EXTERNAL


def _describe(where: str, t: onnx.TensorProto) -> str:
    """``Tensor 'w' (initializer 'w' of graph 'g', FLOAT[2, 3])``, to start a sentence."""
    name = onnx.TensorProto.DataType.Name(t.data_type) if _known_type(t) else str(t.data_type)
    return f"Tensor {t.name!r} ({where}, {name}{list(t.dims)})"


def _known_type(t: onnx.TensorProto) -> bool:
    return t.data_type in onnx.TensorProto.DataType.values()


def _data_bytes(t: onnx.TensorProto) -> int | None:
    """Bytes of ``t``'s data (its ``raw_data`` or external data), from its type
    and shape; ``None`` for strings and types without a fixed width."""
    if t.data_type == onnx.TensorProto.STRING or not _known_type(t):
        return None
    try:
        bits = ir.DataType(t.data_type).bitwidth
    except (TypeError, ValueError):
        return None
    return (math.prod(t.dims) * bits + 7) // 8


def _typed_count(t: onnx.TensorProto) -> tuple[str, int] | None:
    """The typed field ``t``'s type uses and how many entries it must hold."""
    if not _known_type(t) or t.data_type == onnx.TensorProto.UNDEFINED:
        return None
    try:
        field = onnx.helper.tensor_dtype_to_field(t.data_type)
    except (KeyError, ValueError, TypeError):
        return None
    n = math.prod(t.dims)
    if t.data_type in _COMPLEX_TYPES:
        return field, 2 * n
    if t.data_type in _PACKED_TYPES:
        return field, (n * ir.DataType(t.data_type).bitwidth + 7) // 8
    return field, n


@dataclass(frozen=True)
class _ExternalRef:
    location: str
    offset: int
    length: int | None


def _external_ref(where: str, t: onnx.TensorProto) -> _ExternalRef:
    """Parse ``t.external_data`` (unknown keys are ignored, as onnx does)."""
    entries = {e.key: e.value for e in t.external_data}
    location = entries.get("location", "")
    if not location:
        raise InvalidGraph(
            f"This is an invalid model. {_describe(where, t)} is stored externally "
            "but has no 'location'"
        )
    numbers: dict[str, int | None] = {}
    for key in ("offset", "length"):
        text = entries.get(key, "")
        numbers[key] = int(text) if text.isascii() and text.isdigit() else None
        if text and numbers[key] is None:
            raise InvalidGraph(
                f"This is an invalid model. {_describe(where, t)} has external data "
                f"{key} {text!r}, which is not a non-negative integer"
            )
    return _ExternalRef(location, numbers["offset"] or 0, numbers["length"])


def check_tensor_data(proto: onnx.ModelProto) -> None:
    """Check that each tensor's data fits its type and shape, reading no external data.

    Covers initializers, sparse initializers and tensor attributes (``Constant``
    values), in the graph, its subgraphs and the model's functions: a
    ``raw_data`` or typed field (``float_data``, ...) of the wrong size, a
    declared external ``length`` other than the type and shape need, a
    negative dimension.

    Raises:
        InvalidGraph: the message names the tensor and both sizes.
    """
    for where, t in proto_tensors(proto):
        if any(d < 0 for d in t.dims):
            raise InvalidGraph(
                f"This is an invalid model. {_describe(where, t)} has a negative dimension"
            )
        need = _data_bytes(t)
        if is_external(t):
            ref = _external_ref(where, t)
            if need is not None and ref.length is not None and ref.length != need:
                raise InvalidGraph(
                    f"This is an invalid model. {_describe(where, t)} declares "
                    f"{ref.length} bytes of external data in {ref.location!r}, but its "
                    f"type and shape need {need} bytes"
                )
        elif t.HasField("raw_data"):
            if need is not None:
                # len() of a bytes field copies it; that copy lives only here.
                have = len(t.raw_data)
                if have != need:
                    raise InvalidGraph(
                        f"This is an invalid model. {_describe(where, t)} has "
                        f"{have} bytes of raw_data, but its type and shape need "
                        f"{need} bytes ({'too many' if have > need else 'too few'})"
                    )
        else:
            typed = _typed_count(t)
            if typed is not None:
                field, count = typed
                have = len(getattr(t, field))
                # An empty field is left to onnx.checker, whose message says
                # which field the values should be in.
                if have and have != count:
                    raise InvalidGraph(
                        f"This is an invalid model. {_describe(where, t)} has "
                        f"{have} values in {field}, but its type and shape need {count}"
                    )


def check_external_data(proto: onnx.ModelProto, base: Path | None) -> None:
    """Check every external data reference, reading no data.

    A reference must be relative, stay inside the model's folder ``base``
    (also after following symlinks), name a regular file with one link, and
    lie inside it: ``offset`` plus ``length`` (or the bytes the tensor's type
    and shape need) at most the file's size.

    Raises:
        InvalidArgument: a location is absolute, escapes ``base``, names a
            hard-linked file, or runs past the end of its file; or the model
            came as bytes.
        NoSuchFile: an external data file is missing.
        InvalidGraph: a reference has no location, or a bad offset or length.
    """
    tensors = [(where, t) for where, t in proto_tensors(proto) if is_external(t)]
    if not tensors:
        return
    if base is None:
        first = {e.key: e.value for e in tensors[0][1].external_data}.get("location", "")
        raise InvalidArgument(
            f"model given as bytes references external data file "
            f"{first!r}; load it from its path instead"
        )
    sizes: dict[Path, int] = {}
    for where, t in tensors:
        ref = _external_ref(where, t)
        location = ref.location
        if os.path.isabs(location) or Path(location).is_absolute():
            raise InvalidArgument(
                f"external data path {location!r} of tensor {t.name!r} is absolute; "
                "only paths inside the model's folder are allowed"
            )
        try:
            target = (base / location).resolve()
        except (OSError, ValueError) as exc:
            raise InvalidArgument(
                f"external data path {location!r} of tensor {t.name!r} is not usable: {exc}"
            ) from exc
        if base != target and base not in target.parents:
            raise InvalidArgument(
                f"external data path {location!r} of tensor {t.name!r} escapes the "
                f"model's folder {str(base)!r}"
            )
        if target not in sizes:
            if not target.is_file():
                raise NoSuchFile(
                    f"external data file {location!r} of tensor {t.name!r} not found "
                    f"in {str(base)!r}"
                )
            st = target.stat()
            if st.st_nlink > 1:
                # onnx and onnx-ir refuse these too: a hard link can smuggle
                # in a file from outside the folder.
                raise InvalidArgument(
                    f"external data file {location!r} of tensor {t.name!r} has "
                    f"{st.st_nlink} hard links; copy it to a file of its own"
                )
            sizes[target] = st.st_size
        size = sizes[target]
        need = ref.length if ref.length is not None else _data_bytes(t)
        if ref.offset > size or (need is not None and ref.offset + need > size):
            span = (
                f"offset {ref.offset}" if need is None else f"{need} bytes at offset {ref.offset}"
            )
            raise InvalidArgument(
                f"external data of tensor {t.name!r} ({where}) runs past the end of "
                f"{location!r}: it needs {span}, but the file holds {size} bytes"
            )


def read_small_external(proto: onnx.ModelProto, base: Path | None) -> None:
    """Read small external tensors into the proto (see :data:`SMALL_EXTERNAL_BYTES`).

    Runs after :func:`check_external_data`, so every reference is known safe
    and inside its file.
    """
    if base is None:
        return
    budget = SMALL_EXTERNAL_BUDGET
    for where, t in proto_tensors(proto):
        if not is_external(t):
            continue
        need = _data_bytes(t)
        if need is None or need > budget:
            continue
        if need > SMALL_EXTERNAL_BYTES and (len(t.dims) > 1 or need > SHAPE_LIKE_BYTES):
            continue
        ref = _external_ref(where, t)
        with open(base / ref.location, "rb") as f:
            f.seek(ref.offset)
            data = f.read(need)
        if len(data) != need:  # the file shrank since it was checked
            raise InvalidArgument(
                f"external data of tensor {t.name!r} ({where}) runs past the end of "
                f"{ref.location!r}"
            )
        del t.external_data[:]
        t.data_location = onnx.TensorProto.DEFAULT
        t.raw_data = data
        budget -= need


def set_external_base(model: ir.Model, base: Path | None) -> None:
    """Point the external tensors of ``model`` at the model's folder."""
    if base is None:
        return
    for tensor in _ir_tensors(model):
        if isinstance(tensor, ir.ExternalTensor):
            tensor.base_dir = str(base)


def _ir_tensors(model: ir.Model) -> Iterator[ir.TensorProtocol]:
    """Initializers and tensor attributes of every graph and function of ``model``."""
    for g in _ir_graphs(model):
        if isinstance(g, ir.Graph):
            for v in g.initializers.values():
                if v.const_value is not None:
                    yield v.const_value
        for node in g:
            for attr in node.attributes.values():
                if attr.is_ref():
                    continue
                if attr.type == ir.AttributeType.TENSOR and attr.value is not None:
                    yield attr.value
                elif attr.type == ir.AttributeType.TENSORS and attr.value is not None:
                    yield from attr.value


def _ir_graphs(model: ir.Model) -> Iterator[ir.Graph | ir.Function]:
    yield from model.graphs()
    for f in model.functions.values():
        yield f
        yield from f.subgraphs()


INLINE_SAVE_LIMIT = 1 << 30
""":func:`save_model` writes tensors inline below this total size (and when
the model has no external tensors): a protobuf cannot exceed 2 GiB."""

_SAVE_THRESHOLD = 1024
"""Tensors over this size go to the data file (onnxruntime's default too)."""


def save_model(model: ir.Model, path: str | os.PathLike[str]) -> None:
    """Write ``model`` to ``path`` (``SessionOptions.optimized_model_filepath``).

    Like onnxruntime, tensors are written inline, unless the model has
    external tensors or its tensors come to :data:`INLINE_SAVE_LIMIT` or more:
    then every initializer over 1 KiB goes to ``<file name>.data`` beside ``path``,
    copied file to file, never gathered into one protobuf.

    Raises:
        InvalidArgument: that data file is one the model reads its own tensors
            from (it would be overwritten while in use).
    """
    tensors = list(_ir_tensors(model))
    external = [t for t in tensors if isinstance(t, ir.ExternalTensor)]
    if not external and sum(t.nbytes for t in tensors) < INLINE_SAVE_LIMIT:
        ir.save(model, path)
        return
    out = Path(path)
    data_name = f"{out.name}.data"
    data_path = (out.parent / data_name).resolve()
    for t in external:
        if Path(t.path).resolve() == data_path:
            raise InvalidArgument(
                f"optimized_model_filepath {str(path)!r} would write its external data "
                f"to {str(data_path)!r}, which the model reads tensor {t.name!r} from; "
                "choose another path"
            )
    # ir.save moves initializers over the threshold to the data file, and
    # loads the external ones under it by closing their memory maps, which
    # arrays taken from them may still use; tensor attributes it leaves
    # alone. Both kinds are read in for the save only.
    restore = _read_in_for_save(model)
    try:
        ir.save(model, path, external_data=data_name, size_threshold_bytes=_SAVE_THRESHOLD)
    finally:
        for undo in restore:
            undo()


def _read_in_for_save(model: ir.Model) -> list[Callable[[], None]]:
    """Put in-memory copies in place of the external tensors :func:`save_model`
    must not hand to ``ir.save``; returns what puts the originals back."""
    restore: list[Callable[[], None]] = []
    for g in _ir_graphs(model):
        if isinstance(g, ir.Graph):
            for value in g.initializers.values():
                tensor = value.const_value
                if isinstance(tensor, ir.ExternalTensor) and tensor.nbytes <= _SAVE_THRESHOLD:
                    value.const_value = _in_memory(tensor)
                    restore.append(functools.partial(setattr, value, "const_value", tensor))
        for node in g:
            for name, attr in list(node.attributes.items()):
                if attr.is_ref() or attr.type not in (
                    ir.AttributeType.TENSOR,
                    ir.AttributeType.TENSORS,
                ):
                    continue
                one = attr.type == ir.AttributeType.TENSOR
                tensors = [attr.value] if one else list(attr.value)
                if not any(isinstance(t, ir.ExternalTensor) for t in tensors):
                    continue
                loaded = [_in_memory(t) for t in tensors]
                node.attributes[name] = (
                    ir.AttrTensor(name, loaded[0]) if one else ir.AttrTensors(name, loaded)
                )
                restore.append(functools.partial(node.attributes.__setitem__, name, attr))
    return restore


def _in_memory(tensor: ir.TensorProtocol) -> ir.TensorProtocol:
    """A copy of an external tensor's data in memory (others as they are)."""
    if not isinstance(tensor, ir.ExternalTensor):
        return tensor
    return ir.Tensor(np.array(tensor.numpy()), dtype=tensor.dtype, name=tensor.name)
