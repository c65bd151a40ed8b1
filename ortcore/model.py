"""Load and check a model: bytes or path in, a checked onnx-ir model out.

Steps: parse; check the opset imports; check every tensor's data against its
type and shape, and every external data reference (only inside the model's
folder, only inside its file); sort nodes topologically (refusing cycles);
check with ``onnx.checker``; inline model-local functions; run shape
inference; convert to onnx-ir. External data stays on disk, memory-mapped
when read (see :mod:`ortcore.tensor_data`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import onnx
import onnx.inliner
import onnx_ir as ir
from google.protobuf.message import DecodeError

from .errors import InvalidArgument, InvalidGraph, InvalidProtobuf, NoSuchFile
from .tensor_data import (
    check_external_data,
    check_tensor_data,
    is_external,
    proto_tensors,
    read_small_external,
    save_model,
    set_external_base,
)

__all__ = [
    "check_external_data",
    "check_opsets",
    "check_tensor_data",
    "load_model",
    "parse_model",
    "save_model",
]


def parse_model(
    path_or_bytes: str | os.PathLike[str] | bytes,
) -> tuple[onnx.ModelProto, Path | None]:
    """Parse a model from a path or bytes, without external data.

    Returns:
        the proto and the folder external data is read from (``None`` for bytes).

    Raises:
        NoSuchFile: the path does not exist.
        InvalidProtobuf: the content is not an ONNX model.
    """
    if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
        data = bytes(path_or_bytes)
        where = "bytes"
        base: Path | None = None
    elif isinstance(path_or_bytes, (str, os.PathLike)):
        path = Path(path_or_bytes)
        if not path.is_file():
            raise NoSuchFile(f"Load model from {path} failed: File doesn't exist")
        data = path.read_bytes()
        where = str(path)
        base = path.resolve().parent
    else:
        raise InvalidArgument(f"model must be a path or bytes, not {type(path_or_bytes).__name__}")
    if not data:
        raise InvalidProtobuf(f"Load model from {where} failed: the file is empty")
    proto = onnx.ModelProto()
    try:
        proto.ParseFromString(data)
    except (DecodeError, RuntimeError, ValueError) as exc:
        raise InvalidProtobuf(
            f"Load model from {where} failed: Protobuf parsing failed ({exc})"
        ) from exc
    if not proto.HasField("graph"):
        raise InvalidProtobuf(f"Load model from {where} failed: no graph in the model")
    return proto, base


# -- opsets -------------------------------------------------------------------------


def check_opsets(proto: onnx.ModelProto) -> None:
    """Refuse ``ai.onnx`` and ``ai.onnx.ml`` opsets newer than the installed onnx knows.

    The schemas (and so the checker, shape inference and the kernels' opset
    ranges) stop at those versions; a newer opset may change any operator's
    meaning. Other domains are left to their providers.

    Raises:
        InvalidGraph: an opset import of the model or of one of its functions
            is newer; the message names the domain and both versions.
    """
    newest = {
        "": onnx.defs.onnx_opset_version(),
        "ai.onnx": onnx.defs.onnx_opset_version(),
        "ai.onnx.ml": onnx.defs.onnx_ml_opset_version(),
    }
    imports = [("The model", op) for op in proto.opset_import]
    for f in proto.functions:
        imports.extend((f"Function {f.domain}:{f.name}", op) for op in f.opset_import)
    for owner, op in imports:
        limit = newest.get(op.domain)
        if limit is not None and op.version > limit:
            domain = op.domain or "ai.onnx"
            raise InvalidGraph(
                f"This is an invalid model. {owner} imports opset {op.version} of domain "
                f"{domain!r}, but the newest this installation supports is {limit} "
                f"(onnx {onnx.__version__}). Export the model for opset {limit} or "
                "lower, or upgrade onnx."
            )


def _sort_graph(graph: onnx.GraphProto, outer: set[str]) -> None:
    """Sort ``graph.node`` topologically in place; raise on a cycle."""
    available = set(outer)
    available.update(i.name for i in graph.input)
    available.update(i.name for i in graph.initializer)
    available.update(i.name for i in graph.sparse_initializer)
    available.add("")
    nodes = list(graph.node)
    produced_by: dict[str, int] = {}
    for idx, n in enumerate(nodes):
        for o in n.output:
            if o:
                produced_by[o] = idx
    needs: list[set[int]] = []
    for n in nodes:
        deps = set()
        for name in _node_reads(n):
            if name not in available and name in produced_by:
                deps.add(produced_by[name])
        needs.append(deps)
    users: dict[int, list[int]] = {}
    for i, deps in enumerate(needs):
        for d in deps:
            users.setdefault(d, []).append(i)
    pending = [len(d) for d in needs]
    ready = [i for i, p in enumerate(pending) if p == 0]
    order: list[int] = []
    while ready:
        i = ready.pop(0)
        order.append(i)
        for u in users.get(i, ()):
            pending[u] -= 1
            if pending[u] == 0:
                ready.append(u)
    if len(order) != len(nodes):
        stuck = [nodes[i] for i in range(len(nodes)) if pending[i] > 0]
        names = ", ".join(f"{n.op_type} {n.name!r}" for n in stuck[:5])
        raise InvalidGraph(
            f"This is an invalid model. Graph {graph.name!r} is not acyclic: "
            f"a cycle runs through {len(stuck)} node(s): {names}"
        )
    if order != list(range(len(nodes))):
        sorted_nodes = [nodes[i] for i in order]
        del graph.node[:]
        graph.node.extend(sorted_nodes)
    scope = available | set(produced_by)
    for n in graph.node:
        for attr in n.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                _sort_graph(attr.g, scope)
            elif attr.type == onnx.AttributeProto.GRAPHS:
                for g in attr.graphs:
                    _sort_graph(g, scope)


def _node_reads(node: onnx.NodeProto) -> Iterator[str]:
    """Names a node reads, including outer-scope names its subgraphs read."""
    yield from node.input
    for attr in node.attribute:
        graphs = [attr.g] if attr.type == onnx.AttributeProto.GRAPH else list(attr.graphs)
        for g in graphs:
            local = {i.name for i in g.input} | {i.name for i in g.initializer}
            for sub in g.node:
                local.update(sub.output)
            for sub in g.node:
                for name in _node_reads(sub):
                    if name not in local:
                        yield name


def _check(proto: onnx.ModelProto) -> None:
    """Run ``onnx.checker`` without refusing graph inputs/outputs of unknown rank.

    The checker wants a ``shape`` field on every graph input and output, but a
    tensor of unknown rank (``make_tensor_value_info(name, type, None)``) is
    common and valid for onnxruntime. Such fields get a placeholder shape for
    the check only and are cleared again afterwards.

    Given a proto rather than a path, the checker looks for external data
    files relative to the working directory. :func:`check_external_data` has
    checked them more strictly already, so for the check only each external
    tensor is shown as an empty one (no location, zero elements) and restored after.
    """
    patched = []
    for vi in [*proto.graph.input, *proto.graph.output]:
        t = vi.type
        if t.WhichOneof("value") == "tensor_type" and not t.tensor_type.HasField("shape"):
            t.tensor_type.shape.SetInParent()
            patched.append(t.tensor_type)
    hidden = [
        (t, list(t.dims), [(e.key, e.value) for e in t.external_data])
        for _, t in proto_tensors(proto)
        if is_external(t)
    ]
    for t, _, _ in hidden:
        t.data_location = onnx.TensorProto.DEFAULT
        del t.external_data[:]
        t.dims[:] = [0]
    try:
        onnx.checker.check_model(proto)
    except onnx.checker.ValidationError as exc:
        raise InvalidGraph(f"This is an invalid model. {exc}") from exc
    finally:
        for tensor_type in patched:
            tensor_type.ClearField("shape")
        for t, dims, entries in hidden:
            t.dims[:] = dims
            for key, value in entries:
                t.external_data.add(key=key, value=value)
            t.data_location = onnx.TensorProto.EXTERNAL


def load_model(path_or_bytes: str | os.PathLike[str] | bytes) -> ir.Model:
    """Load, check, inline and shape-infer a model.

    External tensors, but for small ones, stay on disk: they come back as
    :class:`onnx_ir.ExternalTensor` objects whose ``numpy()`` memory-maps the bytes.

    Raises:
        NoSuchFile, InvalidProtobuf, InvalidArgument, InvalidGraph: see
        :mod:`ortcore.errors`; each message names the model and the fault.
    """
    proto, base = parse_model(path_or_bytes)
    check_opsets(proto)
    check_tensor_data(proto)
    check_external_data(proto, base)
    read_small_external(proto, base)
    _sort_graph(proto.graph, set())
    _check(proto)
    if proto.functions:
        try:
            proto = onnx.inliner.inline_local_functions(proto)
        except Exception as exc:
            raise InvalidGraph(f"inlining model-local functions failed: {exc}") from exc
    proto = infer_shapes(proto)
    map_types = _strip_map_types(proto.graph)
    try:
        model = ir.from_proto(proto)
    except Exception as exc:
        raise InvalidGraph(f"This is an invalid model. {exc}") from exc
    set_external_base(model, base)
    model.meta[MAP_TYPES_KEY] = map_types
    return model


# One error of onnx's strict shape inference: "(op_type:X, node name: N): [Kind] text".
_INFERENCE_ERROR = re.compile(r"\(op_type:([^,]*), node name: ([^)]*)\): \[(\w+)\] ([^\n]*)")


def infer_shapes(proto: onnx.ModelProto) -> onnx.ModelProto:
    """Run onnx shape inference as onnxruntime does: attribute and shape errors fail.

    Strict mode reports what onnxruntime refuses at load (``pads`` with negative
    values, strides of 0, shapes that contradict the declared ones). Its
    ``TypeInferenceError``s alone are tolerated, as onnxruntime tolerates them:
    they come from upstream ops whose schemas infer no output type (several
    ``ai.onnx.ml`` ops), not from a fault of the model; inference then runs
    again without strict mode and keeps what it can infer.

    Raises:
        InvalidGraph: naming the op, the node and onnx's message.
    """
    try:
        return onnx.shape_inference.infer_shapes(
            proto, check_type=False, strict_mode=True, data_prop=True
        )
    except Exception as exc:
        found = _INFERENCE_ERROR.findall(str(exc))
        if not found or any(kind != "TypeInferenceError" for _, _, kind, _ in found):
            raise InvalidGraph(f"This is an invalid model. Shape inference failed: {exc}") from exc
    try:
        return onnx.shape_inference.infer_shapes(
            proto, check_type=False, strict_mode=False, data_prop=True
        )
    except Exception as exc:
        raise InvalidGraph(f"This is an invalid model. Shape inference failed: {exc}") from exc


MAP_TYPES_KEY = "ortcore.map_types"
"""``model.meta`` key: value name -> onnxruntime type string of map-typed values."""


def type_proto_string(t: onnx.TypeProto) -> str:
    """onnxruntime's spelling of a type: ``tensor(float)``, ``seq(map(int64,tensor(float)))``."""
    from ep_sdk.dtypes import type_string

    which = t.WhichOneof("value")
    if which == "tensor_type":
        return type_string(ir.DataType(t.tensor_type.elem_type))
    if which == "sequence_type":
        return f"seq({type_proto_string(t.sequence_type.elem_type)})"
    if which == "optional_type":
        return f"optional({type_proto_string(t.optional_type.elem_type)})"
    if which == "map_type":
        key = type_string(ir.DataType(t.map_type.key_type))[len("tensor(") : -1]
        return f"map({key},{type_proto_string(t.map_type.value_type)})"
    return str(which)


def _has_map(t: onnx.TypeProto) -> bool:
    which = t.WhichOneof("value")
    if which == "map_type":
        return True
    if which == "sequence_type":
        return _has_map(t.sequence_type.elem_type)
    if which == "optional_type":
        return _has_map(t.optional_type.elem_type)
    return False


def _strip_map_types(graph: onnx.GraphProto) -> dict[str, str]:
    """Remove map types (which onnx-ir cannot hold) and return them as type strings.

    Map values (ZipMap, DictVectorizer) are plain Python dicts at run time;
    only their declared type is lost, and the session reports it from here.
    """
    found: dict[str, str] = {}
    for vi in [*graph.input, *graph.output, *graph.value_info]:
        if vi.HasField("type") and _has_map(vi.type):
            found[vi.name] = type_proto_string(vi.type)
            vi.ClearField("type")
    for node in graph.node:
        for attr in node.attribute:
            subs = [attr.g] if attr.type == onnx.AttributeProto.GRAPH else list(attr.graphs)
            for g in subs:
                found.update(_strip_map_types(g))
    return found
