"""Load and check a model: bytes or path in, a checked onnx-ir model out.

Steps: parse; apply what the session options give (initializers, in-memory
external data files); check the opset imports; check every tensor's data
against its type and shape, and every external data reference (only inside
the model's folder, only inside its file); make sparse tensors dense; sort
nodes topologically (refusing cycles); check with ``onnx.checker``; inline
model-local functions, once :mod:`ortcore.inlining` has bounded what that
creates; fix overridden free dimensions; run shape inference (with data
propagation where :mod:`ortcore.data_propagation` bounds what it creates);
convert to onnx-ir; pin external data: read into memory, or memory-mapped by
the session and checked at every run (see :mod:`ortcore.external_data`).

ortcore is no stricter than onnxruntime's loader: IR version 3 models whose
initializers are not graph inputs load (onnx's checker refuses them), sparse
tensors load (made dense, with a warning).
"""

from __future__ import annotations

import logging
import os
import re
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnx_ir as ir
from google.protobuf.message import DecodeError

from .data_propagation import plan_data_propagation
from .errors import (
    InvalidArgumentTypeError,
    InvalidGraph,
    InvalidProtobuf,
    NoSuchFile,
    UndefinedInput,
)
from .external_data import EXTERNAL_DATA_KEY, pin_external_data
from .inlining import inline_functions
from .tensor_data import (
    check_external_data,
    check_tensor_data,
    densify_sparse,
    external_roots,
    is_external,
    proto_tensors,
    read_files_in_memory,
    read_small_external,
    rebase_external,
    replace_initializers,
    save_model,
)

__all__ = [
    "LoadOptions",
    "check_external_data",
    "check_axis_attributes",
    "check_opsets",
    "check_tensor_data",
    "load_model",
    "parse_model",
    "save_model",
]

log = logging.getLogger("ortcore.model")


@dataclass(frozen=True)
class LoadOptions:
    """What a session's options change in how its model loads.

    Attributes:
        free_dims_by_name: symbolic dimension name -> the value it takes
            (``SessionOptions.add_free_dimension_override_by_name``).
        free_dims_by_denotation: dimension denotation of the graph inputs
            (``DATA_BATCH``) -> value (``..._by_denotation``).
        initializers: initializer name -> data that replaces it before any
            external data is read (``add_external_initializers``).
        files_in_memory: external data file name -> its bytes
            (``add_external_initializers_from_files_in_memory``).
        max_tensor_bytes: the largest dense tensor a sparse one may become.
        external_data_read_in_bytes: at most this many bytes of external
            data are read into memory, the rest memory-mapped (``None``: the
            default of :func:`ortcore.external_data.read_in_limit`).
        max_inlined_nodes, max_inlined_bytes: how much inlining the
            model-local functions may grow the model, in nodes and in bytes of
            attribute values and subgraph initializers (``None``: the
            environment variable, else the default; see :mod:`ortcore.inlining`).
    """

    free_dims_by_name: Mapping[str, int] = field(default_factory=dict)
    free_dims_by_denotation: Mapping[str, int] = field(default_factory=dict)
    initializers: Mapping[str, np.ndarray] = field(default_factory=dict)
    files_in_memory: Mapping[str, memoryview] = field(default_factory=dict)
    max_tensor_bytes: int | None = None
    external_data_read_in_bytes: int | None = None
    max_inlined_nodes: int | None = None
    max_inlined_bytes: int | None = None


def parse_model(
    path_or_bytes: str | os.PathLike[str] | bytes,
) -> tuple[onnx.ModelProto, Path | None]:
    """Parse a model from a path or bytes, without external data.

    Returns:
        the proto and the folder external data is read from (``None`` for
        bytes): the folder of ``path`` as given, a symlink's folder rather
        than its target's, as onnxruntime reads it.

    Raises:
        NoSuchFile: the path does not exist.
        InvalidProtobuf: the content is not an ONNX model.
        InvalidArgumentTypeError: neither a path nor bytes.
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
        base = Path(os.path.abspath(path)).parent
    else:
        # onnxruntime raises TypeError here.
        raise InvalidArgumentTypeError(
            f"Unable to load from type '{type(path_or_bytes)}': the model must be a "
            f"path or bytes, not {type(path_or_bytes).__name__}"
        )
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
    """Sort ``graph.node`` topologically in place; raise on a cycle.

    A graph in order already (as exporters write them) is found so in one
    pass and keeps its order; only another one is sorted (Kahn's algorithm,
    breadth-first, linear in the graph).
    """
    available = set(outer)
    available.update(i.name for i in graph.input)
    available.update(i.name for i in graph.initializer)
    available.update(i.name for i in graph.sparse_initializer)
    available.add("")
    scope = _scope_if_in_order(graph, available)
    if scope is None:
        scope = _sort_nodes(graph, available)
    for n in graph.node:
        for attr in n.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                _sort_graph(attr.g, scope)
            elif attr.type == onnx.AttributeProto.GRAPHS:
                for g in attr.graphs:
                    _sort_graph(g, scope)


_GRAPH_ATTRIBUTES = (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)


def _scope_if_in_order(graph: onnx.GraphProto, available: set[str]) -> set[str] | None:
    """Every name ``graph``'s nodes may read, if each node reads only names
    defined before it (``None`` if one does not: the graph needs sorting)."""
    seen = set(available)
    for n in graph.node:
        reads: Iterable[str] = n.input
        if n.attribute and any(a.type in _GRAPH_ATTRIBUTES for a in n.attribute):
            reads = _node_reads(n)
        for name in reads:
            if name not in seen:
                return None
        seen.update(n.output)
    return seen


def _sort_nodes(graph: onnx.GraphProto, available: set[str]) -> set[str]:
    """Sort ``graph.node`` topologically; return the names its nodes may read.

    Raises:
        UndefinedInput: a node reads a name nothing defines.
        InvalidGraph: the graph has a cycle.
    """
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
            elif name not in available:
                raise UndefinedInput(
                    f"This is an invalid model. Node input '{name}' of {n.op_type} node "
                    f"{n.name!r} in graph {graph.name!r} is not a graph input, initializer, "
                    "or output of a previous node."
                )
        needs.append(deps)
    users: dict[int, list[int]] = {}
    for i, deps in enumerate(needs):
        for d in deps:
            users.setdefault(d, []).append(i)
    pending = [len(d) for d in needs]
    ready = deque(i for i, p in enumerate(pending) if p == 0)
    order: list[int] = []
    while ready:
        i = ready.popleft()
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
    return available | set(produced_by)


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


def _sort_and_check(proto: onnx.ModelProto) -> None:
    """Sort the graphs topologically (:func:`_sort_graph`) and check the model
    (:func:`_check`), sorting only a model the check refuses.

    The checker refuses a graph whose nodes are out of order (a subgraph's
    too, outer-scope reads included), so a model it passes is in order and
    the walk of every node in Python is saved; one it refuses is sorted, or
    refused by the sort (an undefined input, a cycle), and checked again.

    Raises:
        UndefinedInput, InvalidGraph: as :func:`_sort_graph` and :func:`_check`.
    """
    try:
        _check(proto)
        return
    except InvalidGraph:
        pass
    _sort_graph(proto.graph, set())
    _check(proto)


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
    # Before IR version 4 every initializer had to be a graph input too; the
    # checker insists, onnxruntime's loader does not (its own mul_1.onnx is
    # such a model). The check runs as IR version 4 for those.
    ir_version = proto.ir_version
    inputs = {i.name for i in proto.graph.input}
    if ir_version < 4 and any(t.name not in inputs for t in proto.graph.initializer):
        proto.ir_version = 4
    try:
        onnx.checker.check_model(proto)
    except onnx.checker.ValidationError as exc:
        raise InvalidGraph(f"This is an invalid model. {exc}") from exc
    finally:
        proto.ir_version = ir_version
        for tensor_type in patched:
            tensor_type.ClearField("shape")
        for t, dims, entries in hidden:
            t.dims[:] = dims
            for key, value in entries:
                t.external_data.add(key=key, value=value)
            t.data_location = onnx.TensorProto.EXTERNAL


def load_model(
    path_or_bytes: str | os.PathLike[str] | bytes, options: LoadOptions | None = None
) -> ir.Model:
    """Load, check, inline and shape-infer a model.

    External tensors come back as :class:`ortcore.external_data.PinnedTensor`
    objects (``onnx_ir.ExternalTensor`` subclasses), read into memory or
    memory-mapped by the model's :class:`~ortcore.external_data.ExternalData`,
    which ``model.meta[EXTERNAL_DATA_KEY]`` holds (a session checks it at every run).

    Args:
        path_or_bytes: the model file's path, or its bytes.
        options: what the session's options change (:class:`LoadOptions`).

    Raises:
        NoSuchFile, InvalidProtobuf, InvalidArgument, InvalidGraph: see
        :mod:`ortcore.errors`; each message names the model and the fault.
        AllocationError: external data to read in does not fit in memory.
    """
    options = options or LoadOptions()
    proto, base = parse_model(path_or_bytes)
    roots = (
        external_roots(os.fspath(path_or_bytes), base)
        if base is not None and isinstance(path_or_bytes, (str, os.PathLike))
        else None
    )
    replace_initializers(proto, options.initializers)
    read_files_in_memory(proto, options.files_in_memory)
    check_opsets(proto)
    check_tensor_data(proto)
    identities = check_external_data(proto, base, roots)
    external_files = sorted(
        {
            {e.key: e.value for e in t.external_data}.get("location", "")
            for _, t in proto_tensors(proto)
            if is_external(t)
        }
    )
    read_small_external(proto, base)
    sparse_outputs = [o.name for o in proto.graph.output if o.type.HasField("sparse_tensor_type")]
    densify_sparse(proto, base, options.max_tensor_bytes)
    _sort_and_check(proto)
    check_axis_attributes(proto)
    # Bounded before anything is copied; shape inference would expand the
    # functions the inliner keeps just the same, so they are counted too.
    proto = inline_functions(proto, options.max_inlined_nodes, options.max_inlined_bytes)
    _fix_free_dims(proto.graph, options.free_dims_by_name, options.free_dims_by_denotation)
    base = rebase_external(proto, base, roots)
    declared = _unk_dims(proto.graph)
    try:
        proto = infer_shapes(proto)
    except InvalidGraph as exc:
        _explain_parameters(proto, exc)
        raise
    map_types = _strip_map_types(proto.graph)
    try:
        model = _ir_from_proto(proto)
    except Exception as exc:
        raise InvalidGraph(f"This is an invalid model. {exc}") from exc
    model.meta[EXTERNAL_DATA_KEY] = pin_external_data(
        model,
        base,
        identities=identities,
        read_in_bytes=options.external_data_read_in_bytes,
        model_path=(
            os.fspath(path_or_bytes) if isinstance(path_or_bytes, (str, os.PathLike)) else "<bytes>"
        ),
        has_external=bool(external_files),
    )
    model.meta[MAP_TYPES_KEY] = map_types
    model.meta[EXTERNAL_FILES_KEY] = external_files
    model.meta[INVENTED_DIMS_KEY] = frozenset(_unk_dims(proto.graph) - declared)
    model.meta[SPARSE_OUTPUTS_KEY] = frozenset(sparse_outputs)
    return model


def _unk_dims(graph: onnx.GraphProto) -> set[str]:
    """The ``unk__N`` dimension names of ``graph``'s inputs, outputs and value
    infos (those onnx's shape inference gives the dimensions it cannot name)."""
    return {
        d.dim_param
        for vi in (*graph.input, *graph.output, *graph.value_info)
        if vi.type.WhichOneof("value") == "tensor_type"
        for d in vi.type.tensor_type.shape.dim
        if d.dim_param.startswith("unk__")
    }


def _ir_from_proto(proto: onnx.ModelProto) -> ir.Model:
    """``onnx_ir.from_proto``, with the main graph's plain value infos (a type,
    no doc string or metadata: what shape inference writes, one per
    intermediate value) given to the values afterwards, one onnx-ir type and
    (frozen) shape object for each distinct type: a large graph has few
    distinct ones, and deserializing each value's own took a third of the
    conversion's time and memory. ``proto`` loses those value infos.
    """
    graph = proto.graph
    if len(graph.value_info) < 64:
        return ir.from_proto(proto)
    kept = []
    plain: dict[str, bytes] = {}
    for vi in graph.value_info:
        if vi.doc_string or len(vi.metadata_props):
            kept.append(vi)
        else:
            plain[vi.name] = vi.type.SerializeToString()
    graph.ClearField("value_info")
    graph.value_info.extend(kept)
    model = ir.from_proto(proto)
    known: dict[bytes, tuple[Any, Any]] = {}
    for node in model.graph:
        for value in node.outputs:
            key = plain.get(value.name or "")
            if key is None or value.type is not None or value.shape is not None:
                continue
            found = known.get(key)
            if found is None:
                type_proto = onnx.TypeProto.FromString(key)
                found = known[key] = (
                    ir.serde.deserialize_type_proto_for_type(type_proto),
                    ir.serde.deserialize_type_proto_for_shape(type_proto),
                )
            value.type, value.shape = found
    return model


_INT32 = 1 << 31


def _is_axis_name(name: str) -> bool:
    return name.endswith(("axis", "axes")) or name == "perm"


def check_axis_attributes(proto: onnx.ModelProto) -> None:
    """Refuse axis attributes (``axis``, ``axes``, ``*_axis``, ``perm``) outside int32.

    An axis indexes a tensor's dims, so no valid model has one past int32;
    onnx's C++ shape inference truncates some to ``int`` and then indexes
    memory with them (LayerNormalization with ``axis`` = 2**32 segfaults), so
    they are refused before inference runs.

    Raises:
        InvalidGraph: naming the node, the attribute and its value.
    """
    graphs = [proto.graph, *(f for f in proto.functions)]
    while graphs:
        g = graphs.pop()
        for node in g.node:
            if not node.attribute:
                continue
            for attr in node.attribute:
                if attr.type == onnx.AttributeProto.GRAPH:
                    graphs.append(attr.g)
                elif attr.type == onnx.AttributeProto.GRAPHS:
                    graphs.extend(attr.graphs)
                elif _is_axis_name(attr.name):
                    values = [attr.i] if attr.type == onnx.AttributeProto.INT else attr.ints
                    bad = [v for v in values if not -_INT32 <= v < _INT32]
                    if bad:
                        raise InvalidGraph(
                            f"This is an invalid model. {node.op_type} node {node.name!r}: "
                            f"attribute {attr.name} {bad[0]} is out of range"
                        )


def _fix_free_dims(
    graph: onnx.GraphProto, by_name: Mapping[str, int], by_denotation: Mapping[str, int]
) -> None:
    """Give symbolic dims their overridden values: by name in the graph's
    inputs, outputs and value infos, by denotation in its inputs."""
    if not by_name and not by_denotation:
        return
    for kind, infos in (("input", graph.input), ("other", [*graph.output, *graph.value_info])):
        for vi in infos:
            if vi.type.WhichOneof("value") != "tensor_type":
                continue
            for dim in vi.type.tensor_type.shape.dim:
                value = by_name.get(dim.dim_param) if dim.HasField("dim_param") else None
                if value is None and kind == "input" and dim.denotation:
                    value = by_denotation.get(dim.denotation)
                if value is not None and not dim.HasField("dim_value"):
                    dim.dim_value = value


# One error of onnx's strict shape inference: "(op_type:X, node name: N): [Kind] text".
_INFERENCE_ERROR = re.compile(r"\(op_type:([^,)]*)(?:, node name: ([^)]*))?\): \[(\w+)\] ([^\n]*)")
_NESTED = "Inference error(s)"


def _fatal_inference_errors(message: str) -> list[str]:
    """The errors of a strict-inference failure that onnxruntime would refuse too.

    Tolerated: ``TypeInferenceError`` (an upstream op inferred no type), and
    errors raised inside the expansion of a function op's body (onnx checks
    a generic body, e.g. MeanVarianceNormalization's ``Constant`` that takes
    its value from an attribute reference, and fails where the node is valid).
    """
    fatal: list[str] = []
    inside = -1
    for m in _INFERENCE_ERROR.finditer(message):
        if m.start() < inside:
            continue  # an error of a function body reported by the entry before
        kind, text = m.group(3), m.group(4)
        if text.startswith(_NESTED):
            inside = m.end()
        elif kind != "TypeInferenceError":
            fatal.append(m.group(0))
    return fatal


def infer_shapes(proto: onnx.ModelProto) -> onnx.ModelProto:
    """Run onnx shape inference as onnxruntime does: attribute and shape errors fail.

    Strict mode reports what onnxruntime refuses at load (``pads`` with negative
    values, strides of 0, shapes that contradict the declared ones). Its
    ``TypeInferenceError``s and errors inside function-op bodies are tolerated,
    as onnxruntime tolerates them (see :func:`_fatal_inference_errors`): they
    come from onnx's generic checks, not from a fault of the model; inference
    then runs again without strict mode and keeps what it can infer.

    Inference runs first without data propagation, whose memory a tiny
    model can make unbounded (:mod:`ortcore.data_propagation`); it runs
    again with it only where there are values to propagate and
    :func:`~ortcore.data_propagation.plan_data_propagation` bounds them
    (otherwise the shapes that need it stay symbolic, and a debug log says why).

    Raises:
        InvalidGraph: naming the op, the node and onnx's message.
    """
    aside = _set_aside_weights(proto)
    try:
        inferred = _infer(proto, data_prop=False)
        verdict = plan_data_propagation(inferred)
        if verdict.propagate:
            del inferred
            inferred = _infer(proto, data_prop=True)
        elif verdict.reason:
            log.debug("shape inference without data propagation: %s", verdict.reason)
    finally:
        _put_back_weights(proto, aside)
    _put_back_weights(inferred, aside)
    return inferred


# onnx's Python binding copies the whole model four times a pass (serialize,
# parse, infer, serialize, parse); shape inference reads no tensor of rank 2
# or more as values, nor a large vector other than an integer one. Such
# weights are set aside while it runs, when the initializers are large.
_ASIDE_TENSOR_BYTES = 1 << 16
_ASIDE_MODEL_BYTES = 1 << 24
_INTEGER_TYPES = (onnx.TensorProto.INT64, onnx.TensorProto.INT32)


def _set_aside_weights(proto: onnx.ModelProto) -> list[tuple[int, bytes]]:
    """Take the ``raw_data`` of the main graph's large weights out of ``proto``
    (their index and bytes): a sum of sizes first, cheap for many small ones."""
    sizes = [t.ByteSize() for t in proto.graph.initializer]
    if sum(sizes) < _ASIDE_MODEL_BYTES:
        return []
    aside = []
    for i, size in enumerate(sizes):
        t = proto.graph.initializer[i]
        if size >= _ASIDE_TENSOR_BYTES and (len(t.dims) > 1 or t.data_type not in _INTEGER_TYPES):
            if t.HasField("raw_data"):
                aside.append((i, t.raw_data))
                t.ClearField("raw_data")
    return aside


def _put_back_weights(proto: onnx.ModelProto, aside: list[tuple[int, bytes]]) -> None:
    for i, data in aside:
        proto.graph.initializer[i].raw_data = data


def _infer(proto: onnx.ModelProto, *, data_prop: bool) -> onnx.ModelProto:
    try:
        return onnx.shape_inference.infer_shapes(
            proto, check_type=False, strict_mode=True, data_prop=data_prop
        )
    except Exception as exc:
        message = str(exc)
        if not _INFERENCE_ERROR.search(message) or _fatal_inference_errors(message):
            raise InvalidGraph(f"This is an invalid model. Shape inference failed: {exc}") from exc
    try:
        return onnx.shape_inference.infer_shapes(
            proto, check_type=False, strict_mode=False, data_prop=data_prop
        )
    except Exception as exc:
        raise InvalidGraph(f"This is an invalid model. Shape inference failed: {exc}") from exc


def _explain_parameters(proto: onnx.ModelProto, exc: InvalidGraph) -> None:
    """Where strict inference refused a parameter that does not fit (onnx
    says "Dimension mismatch in unification between 2 and 4"), raise the
    parameter table's sentence instead, which names the input and the
    dimension (:mod:`ortcore.param_checks`); else return.

    Raises:
        InvalidGraph: from :func:`ortcore.param_checks.check_model`.
    """
    from .param_checks import check_model

    try:
        inferred = onnx.shape_inference.infer_shapes(proto, check_type=False, strict_mode=False)
    except Exception:  # a schema's Python inference raises even so: no inferred shapes
        inferred = proto
    try:
        model = ir.from_proto(inferred)
    except Exception:
        return
    try:
        check_model(model)
    except InvalidGraph as precise:
        raise precise from exc


MAP_TYPES_KEY = "ortcore.map_types"
"""``model.meta`` key: value name -> onnxruntime type string of map-typed values."""

INVENTED_DIMS_KEY = "ortcore.invented_dims"
"""``model.meta`` key: the dimension names onnx's shape inference invented
(``unk__N``, not in the model as written); onnxruntime shows such a dimension
as ``None`` in ``NodeArg.shape``."""

SPARSE_OUTPUTS_KEY = "ortcore.sparse_outputs"
"""``model.meta`` key: names of the graph outputs the model declares sparse
(made dense at load; runs hand them back as COO sparse tensors)."""

EXTERNAL_FILES_KEY = "ortcore.external_files"
"""``model.meta`` key: the sorted ``location`` of every external data file the
model file references, relative to its folder, as written in the file (before
small tensors are read in and locations rebased)."""


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
        if vi.type.WhichOneof("value") in (None, "tensor_type"):
            continue  # no type, or a tensor's: most values
        if _has_map(vi.type):
            found[vi.name] = type_proto_string(vi.type)
            vi.ClearField("type")
    for node in graph.node:
        if not node.attribute:
            continue
        for attr in node.attribute:
            subs = [attr.g] if attr.type == onnx.AttributeProto.GRAPH else list(attr.graphs)
            for g in subs:
                found.update(_strip_map_types(g))
    return found
