"""A model's tensor data: size checks, external data references, and saving.

Every tensor of a model proto (initializers, sparse initializers and tensor
attributes of the graph, its subgraphs and functions) is checked against its
type and shape without reading external data, and every external reference
against the model's folder and the file it names.

A model reached through a symlink (a model hub's cache: ``snapshots/x/model.onnx``
pointing into ``blobs/``) finds its external data beside the symlink, as
onnxruntime does; a reference may then lead, through symlinks, into the
symlink's folder or into the model file's own folder, nowhere else.

Sparse tensors (sparse initializers, ``Constant`` nodes with ``sparse_value``)
are made dense at load (:func:`densify_sparse`); ortcore's kernels are dense.

External data is never read into the protobuf, which cannot exceed 2 GiB:
the references stay in the proto (only small tensors are read into it, see
:data:`SMALL_EXTERNAL_BYTES`), and once the model is in onnx-ir,
:mod:`ortcore.external_data` reads the rest into memory or maps it, in a way
that a file changed under a live session cannot crash it.
"""

from __future__ import annotations

import functools
import logging
import math
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import onnx.numpy_helper
import onnx_ir as ir

from ep_sdk.limits import TensorTooLarge, check_tensor_size

from .errors import AllocationError, InvalidArgument, InvalidGraph, NoSuchFile

__all__ = [
    "INLINE_SAVE_LIMIT",
    "SMALL_EXTERNAL_BYTES",
    "check_external_data",
    "check_tensor_data",
    "densify_sparse",
    "external_roots",
    "is_external",
    "proto_tensors",
    "read_files_in_memory",
    "read_small_external",
    "rebase_external",
    "replace_initializers",
    "save_model",
]

log = logging.getLogger("ortcore.model")

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
        attrs = node.attribute
        if not attrs:  # most nodes: cheaper than iterating nothing
            continue
        for attr in attrs:
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


# onnxruntime's words for a location it refuses, which programs may match on.
_VALIDATION_FAILED = "External data path validation failed for initializer: "


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


def external_roots(path: str | os.PathLike[str], base: Path) -> tuple[Path, ...]:
    """The folders external data of the model at ``path`` may lie in, once
    symlinks are followed: the folder of ``path`` (``base``, where references
    are looked up) and, when ``path`` is a symlink, the real model file's folder."""
    roots = [base.resolve()]
    real = Path(path).resolve().parent
    if real not in roots:
        roots.append(real)
    return tuple(roots)


def check_external_data(
    proto: onnx.ModelProto, base: Path | None, roots: Sequence[Path] | None = None
) -> dict[Path, tuple[int, int]]:
    """Check every external data reference, reading no data.

    A reference must be relative, stay inside the model's folder ``base``
    (written without ``..`` leading out of it), lead, after following
    symlinks, into one of ``roots`` (default: ``base`` itself; see
    :func:`external_roots`), name a regular file with one link, and lie
    inside it: ``offset`` plus ``length`` (or the bytes the tensor's type and
    shape need) at most the file's size.

    Returns:
        each data file's resolved path -> its ``(st_dev, st_ino)``, so that
        whoever opens it later can tell it is the file checked here
        (:func:`ortcore.external_data.pin_external_data`).

    Raises:
        InvalidArgument: a location is absolute, escapes ``base``, names a
            hard-linked file, or runs past the end of its file; or the model
            came as bytes.
        NoSuchFile: an external data file is missing.
        InvalidGraph: a reference has no location, or a bad offset or length.
    """
    tensors = [(where, t) for where, t in proto_tensors(proto) if is_external(t)]
    if not tensors:
        return {}
    if base is None:
        first = {e.key: e.value for e in tensors[0][1].external_data}.get("location", "")
        raise InvalidArgument(
            f"model given as bytes references external data file "
            f"{first!r}; load it from its path instead"
        )
    allowed = tuple(roots) if roots else (base.resolve(),)
    sizes: dict[Path, int] = {}
    identities: dict[Path, tuple[int, int]] = {}
    for where, t in tensors:
        ref = _external_ref(where, t)
        location = ref.location
        if os.path.isabs(location) or Path(location).is_absolute():
            raise InvalidArgument(
                f"{_VALIDATION_FAILED}{t.name}. Error: external data path {location!r} "
                "is absolute; only paths inside the model's folder are allowed"
            )
        try:
            target = (base / location).resolve()
        except (OSError, ValueError) as exc:
            raise InvalidArgument(
                f"external data path {location!r} of tensor {t.name!r} is not usable: {exc}"
            ) from exc
        lexical = os.path.normpath(location)
        outside = all(root != target and root not in target.parents for root in allowed)
        if lexical == os.pardir or lexical.startswith(os.pardir + os.sep) or outside:
            raise InvalidArgument(
                f"{_VALIDATION_FAILED}{t.name}. Error: external data path {location!r} "
                f"escapes the model's folder {str(base)!r}"
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
            identities[target] = (st.st_dev, st.st_ino)
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
    return identities


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


def read_files_in_memory(proto: onnx.ModelProto, files: Mapping[str, memoryview]) -> None:
    """Read external tensors whose ``location`` is one of ``files`` from memory
    (``SessionOptions.add_external_initializers_from_files_in_memory``): their
    data goes into the proto and no file is opened.

    Raises:
        InvalidArgument: a tensor's bytes run past the end of its buffer.
    """
    if not files:
        return
    by_name = {os.path.normpath(k): v for k, v in files.items()}
    for where, t in proto_tensors(proto):
        if not is_external(t):
            continue
        ref = _external_ref(where, t)
        buf = by_name.get(os.path.normpath(ref.location))
        if buf is None:
            continue
        need = ref.length if ref.length is not None else _data_bytes(t)
        end = ref.offset + (need or 0)
        if need is None or end > buf.nbytes:
            raise InvalidArgument(
                f"external data of tensor {t.name!r} ({where}) runs past the end of the "
                f"in-memory file {ref.location!r}: it needs {need} bytes at offset "
                f"{ref.offset}, the buffer holds {buf.nbytes}"
            )
        del t.external_data[:]
        t.data_location = onnx.TensorProto.DEFAULT
        t.raw_data = bytes(buf[ref.offset : end])


def replace_initializers(proto: onnx.ModelProto, values: Mapping[str, np.ndarray]) -> None:
    """Replace initializers of the main graph by ``values``
    (``SessionOptions.add_external_initializers``): their external data, if
    any, is not read. Names the model lacks are ignored.

    Raises:
        InvalidArgument: a value's element type or shape differs from the model's.
    """
    if not values:
        return
    for t in proto.graph.initializer:
        arr = values.get(t.name)
        if arr is None:
            continue
        new = onnx.numpy_helper.from_array(np.ascontiguousarray(arr), t.name)
        if new.data_type != t.data_type or list(new.dims) != list(t.dims):
            want = onnx.TensorProto.DataType.Name(t.data_type) if _known_type(t) else t.data_type
            raise InvalidArgument(
                f"add_external_initializers: initializer {t.name!r} is {want}{list(t.dims)} "
                f"in the model, but the value given is "
                f"{onnx.TensorProto.DataType.Name(new.data_type)}{list(new.dims)}"
            )
        t.CopyFrom(new)


def _graphs_of(graph: onnx.GraphProto) -> Iterator[onnx.GraphProto]:
    yield graph
    for node in graph.node:
        if node.attribute:
            yield from _subgraphs(node)


def _subgraphs(node: onnx.NodeProto) -> Iterator[onnx.GraphProto]:
    for attr in node.attribute:
        if attr.HasField("g"):
            yield from _graphs_of(attr.g)
        for g in attr.graphs:
            yield from _graphs_of(g)


def _all_nodes(proto: onnx.ModelProto) -> Iterator[onnx.NodeProto]:
    for g in _graphs_of(proto.graph):
        yield from g.node
    for f in proto.functions:
        for node in f.node:
            yield node
            for g in _subgraphs(node):
                yield from g.node


def densify_sparse(
    proto: onnx.ModelProto, base: Path | None, limit: int | None = None
) -> list[str]:
    """Make sparse tensors dense: every sparse initializer becomes an
    initializer and every ``Constant`` with ``sparse_value`` a ``Constant``
    with ``value``, as onnxruntime's loader does. A warning names them.

    Args:
        proto: the model, changed in place.
        base: the model's folder (sparse values may be external data).
        limit: the largest dense tensor allowed, in bytes (default: the
            process limit, see :mod:`ep_sdk.limits`).

    Returns:
        where each converted tensor was.

    Raises:
        InvalidGraph: indices that do not fit the values or the dense shape.
        AllocationError: a dense tensor over ``limit``.
    """
    done: list[str] = []
    base_dir = str(base) if base is not None else ""
    for g in _graphs_of(proto.graph):
        for sp in g.sparse_initializer:
            where = f"sparse initializer {sp.values.name!r} of graph {g.name!r}"
            g.initializer.append(_dense(sp, sp.values.name, where, base_dir, limit))
            done.append(where)
        _declare_dense(g, {sp.values.name for sp in g.sparse_initializer})
        del g.sparse_initializer[:]
    for node in _all_nodes(proto):
        if node.op_type != "Constant" or node.domain not in ("", "ai.onnx"):
            continue
        for i, attr in enumerate(node.attribute):
            if attr.name == "sparse_value" and attr.HasField("sparse_tensor"):
                where = f"sparse_value of Constant node {node.name!r}"
                dense = _dense(attr.sparse_tensor, node.output[0], where, base_dir, limit)
                node.attribute[i].CopyFrom(onnx.helper.make_attribute("value", dense))
                done.append(where)
    if done:
        log.warning(
            "ortcore runs sparse tensors as dense ones: %s made dense at load", ", ".join(done)
        )
    return done


def _declare_dense(g: onnx.GraphProto, names: set[str]) -> None:
    """Declare the values named ``names``, made dense, as tensors where the
    graph declares them sparse (an output that is a sparse initializer):
    shape inference refuses a dense value declared sparse."""
    for vi in [*g.output, *g.value_info]:
        if vi.name in names and vi.type.HasField("sparse_tensor_type"):
            sparse = vi.type.sparse_tensor_type
            dense = onnx.TypeProto()
            dense.tensor_type.elem_type = sparse.elem_type
            if sparse.HasField("shape"):
                dense.tensor_type.shape.CopyFrom(sparse.shape)
            vi.type.CopyFrom(dense)


def _dense(
    sp: onnx.SparseTensorProto, name: str, where: str, base_dir: str, limit: int | None
) -> onnx.TensorProto:
    """The dense tensor of a sparse one (COO indices, linear or coordinates)."""
    dims = [int(d) for d in sp.dims]
    try:
        dtype = onnx.helper.tensor_dtype_to_np_dtype(sp.values.data_type)
    except (KeyError, ValueError, TypeError) as exc:
        raise InvalidGraph(f"This is an invalid model. {where} has an unknown type") from exc
    try:
        check_tensor_size(dims, dtype, where, limit=limit)
    except TensorTooLarge as exc:
        raise AllocationError(str(exc)) from exc
    except ValueError as exc:
        raise InvalidGraph(f"This is an invalid model. {exc}") from exc
    values = onnx.numpy_helper.to_array(sp.values, base_dir).reshape(-1)
    idx = onnx.numpy_helper.to_array(sp.indices, base_dir).astype(np.int64)
    total = math.prod(dims)
    n = values.size
    if idx.ndim == 1 and idx.size == n:
        flat = idx
    elif idx.size == n * len(dims) and len(dims) > 0:
        coords = idx.reshape(n, len(dims))
        if (coords < 0).any() or (coords >= np.asarray(dims)).any():
            raise InvalidGraph(f"This is an invalid model. {where} has an index out of {dims}")
        flat = np.asarray(np.ravel_multi_index(tuple(coords.T), dims), dtype=np.int64)
    else:
        raise InvalidGraph(
            f"This is an invalid model. {where} has {idx.size} indices for {n} values "
            f"of shape {dims}"
        )
    if n and ((flat < 0).any() or (flat >= total).any()):
        raise InvalidGraph(f"This is an invalid model. {where} has an index out of {dims}")
    dense = np.zeros(total, dtype=dtype)
    dense[flat] = values
    return onnx.numpy_helper.from_array(dense.reshape(dims), name)


def rebase_external(
    proto: onnx.ModelProto, base: Path | None, roots: Sequence[Path] | None
) -> Path | None:
    """The folder to read the model's external data from once loaded.

    That is ``base``, unless the data files, followed through symlinks, lie
    in another of the ``roots`` (a model hub's ``blobs/`` folder, reached
    from symlinks beside a symlinked model): then their ``location`` fields
    are rewritten relative to that folder, which is returned, so that the
    loaded tensors read the real files without following a symlink out of
    their base folder (which onnx-ir refuses). Runs after
    :func:`check_external_data`.

    Raises:
        InvalidArgument: the data files are spread over several of ``roots``.
    """
    if base is None or not roots:
        return base
    targets = {
        id(t): (t, (base / _external_ref(where, t).location).resolve())
        for where, t in proto_tensors(proto)
        if is_external(t)
    }
    if not targets:
        return base
    for root in [base.resolve(), *roots]:
        if all(root == p or root in p.parents for _, p in targets.values()):
            break
    else:
        raise InvalidArgument(
            f"the external data files of the model in {str(base)!r} lie, through "
            f"symlinks, in several folders ({', '.join(map(str, roots))}); keep them in one"
        )
    if root == base.resolve():
        return base
    for t, target in targets.values():
        for entry in t.external_data:
            if entry.key == "location":
                entry.value = os.path.relpath(target, root)
    return root


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


def save_model(
    model: ir.Model,
    path: str | os.PathLike[str],
    *,
    data_file: str | None = None,
    min_size: int | None = None,
) -> None:
    """Write ``model`` to ``path`` (``SessionOptions.optimized_model_filepath``).

    Like onnxruntime, tensors are written inline, unless ``data_file`` is
    given, the model has external tensors or its tensors come to
    :data:`INLINE_SAVE_LIMIT` or more: then every initializer of
    ``min_size`` bytes or more (default 1 KiB) goes to a data file beside
    ``path`` (``data_file``, default ``<file name>.data``), copied file to
    file, never gathered into one protobuf.

    Args:
        model: the model.
        path: the file to write.
        data_file: the data file's name, relative to ``path``'s folder
            (``session.optimized_model_external_initializers_file_name``).
        min_size: the smallest initializer moved to the data file, in bytes
            (``session.optimized_model_external_initializers_min_size_in_bytes``).

    Raises:
        InvalidArgument: the data file name is absolute or leaves the folder,
            or it is a file the model reads its own tensors from (it would be
            overwritten while in use).
    """
    tensors = list(_ir_tensors(model))
    external = [t for t in tensors if isinstance(t, ir.ExternalTensor)]
    if data_file is None and not external and sum(t.nbytes for t in tensors) < INLINE_SAVE_LIMIT:
        ir.save(model, path)
        return
    out = Path(path)
    data_name = f"{out.name}.data" if data_file is None else data_file
    lexical = os.path.normpath(data_name)
    if os.path.isabs(data_name) or lexical == os.pardir or lexical.startswith(os.pardir + os.sep):
        raise InvalidArgument(
            f"optimized model external initializers file {data_name!r} must be a path "
            f"relative to the folder of {str(path)!r}, inside it"
        )
    threshold = _SAVE_THRESHOLD if min_size is None else max(int(min_size), 0)
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
    restore = _read_in_for_save(model, threshold)
    try:
        ir.save(model, path, external_data=data_name, size_threshold_bytes=threshold)
    finally:
        for undo in restore:
            undo()


def _read_in_for_save(model: ir.Model, threshold: int) -> list[Callable[[], None]]:
    """Put in-memory copies in place of the external tensors :func:`save_model`
    must not hand to ``ir.save``; returns what puts the originals back."""
    restore: list[Callable[[], None]] = []
    for g in _ir_graphs(model):
        if isinstance(g, ir.Graph):
            for value in g.initializers.values():
                tensor = value.const_value
                if isinstance(tensor, ir.ExternalTensor) and tensor.nbytes <= threshold:
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
