"""Compiled models in onnxruntime's EPContext form: writing them.

:func:`build_context_model` turns a planned session into a compiled model
(the format: :mod:`ortcore.epcontext`): each group of the main graph that a
provider compiled and can serialize (``serialize_compiled`` returns bytes)
becomes one ``com.microsoft::EPContext`` node; every other node is kept as
it is, with the initializers it reads (their bytes in the model, or in an
external initializers file); the compiled groups' weights are left out.
Each provider with EPContext nodes states its compatibility string in the
metadata (``ep_compatibility_info.<name>``).

Used by ``ortcore.ModelCompiler`` (:mod:`ortcore.compile_api`) and the
``ep.context_enable`` session config entry (:func:`write_session_context`,
which a session calls when it is created), and by saved sessions
(:mod:`ortcore.saved_session`), whose nodes point at the compiled-artifact
cache's entries instead of files of their own.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import onnx
import onnx_ir as ir

from ep_sdk import Claim, ExecutionProvider, FusedGroup
from ep_sdk.compiled_context import COMPATIBILITY_INFO_PREFIX, sdk_version
from ep_sdk.files import write_atomically
from ep_sdk.graph import is_constant

from .epcontext import (
    CONTEXT_EMBED_KEY,
    CONTEXT_ENABLE_KEY,
    CONTEXT_NODE_PREFIX_KEY,
    CONTEXT_PATH_KEY,
    EPCONTEXT_DOMAIN,
    EPCONTEXT_OP,
)
from .errors import Fail, InvalidArgument

if TYPE_CHECKING:
    from .planner import GraphPlanner
    from .session import InferenceSession

__all__ = [
    "ContextModel",
    "ExternalInitializers",
    "build_context_model",
    "context_exists_error",
    "context_of",
    "default_context_path",
    "write_context_files",
    "write_session_context",
]

log = logging.getLogger("ortcore.epcontext")

_ALIGN = 4096  # external initializers start on page boundaries, as onnx's own writer aligns them


@dataclass
class ExternalInitializers:
    """Where kept initializers larger than ``threshold`` bytes go: the file
    ``location`` (relative to the compiled model's folder)."""

    location: str
    threshold: int = 1024


@dataclass
class ContextModel:
    """A compiled model and the files it needs beside it.

    Attributes:
        proto: the model.
        files: path relative to the model's folder -> content (binaries with
            ``embed_mode`` = 0, the external initializers file).
        compiled: how many EPContext nodes it has.
    """

    proto: onnx.ModelProto
    files: dict[str, bytes] = field(default_factory=dict)
    compiled: int = 0


def _file_part(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name) or "provider"


def _engine_target(provider: ExecutionProvider, group: FusedGroup) -> str:
    try:
        parts = provider.compile_cache_key_parts(group)
    except Exception:
        parts = {}
    return str(parts.get("engine_target") or provider.device)


def _context_node(
    provider: ExecutionProvider,
    group: FusedGroup,
    name: str,
    blob: bytes | str,
    embed: int,
    members: list[list[Any]],
    source_file: str,
) -> onnx.NodeProto:
    attrs: dict[str, Any] = {
        "main_context": 1,
        "embed_mode": embed,
        "ep_cache_context": blob,
        "source": provider.name,
        "partition_name": name,
        "ep_sdk_version": sdk_version(),
        "hardware_architecture": _engine_target(provider, group),
        "notes": json.dumps({"ortcore": {"nodes": members}}),
    }
    if source_file:
        attrs["onnx_model_filename"] = source_file
    return onnx.helper.make_node(
        EPCONTEXT_OP,
        [v.name or "" for v in group.inputs],
        [v.name or "" for v in group.outputs],
        name=name,
        domain=EPCONTEXT_DOMAIN,
        **attrs,
    )


def _tensor_proto(value: ir.Value) -> onnx.TensorProto:
    """The initializer with its bytes in it (never a reference to the source
    model's external data file, which the compiled model must not need)."""
    tensor = value.const_value
    assert tensor is not None
    proto = ir.serde.serialize_tensor(tensor)
    if proto.data_location == onnx.TensorProto.EXTERNAL or proto.external_data:
        del proto.external_data[:]
        proto.data_location = onnx.TensorProto.DEFAULT
        proto.raw_data = tensor.tobytes()
    proto.name = value.name or ""
    return proto


def _externalize(proto: onnx.TensorProto, spec: ExternalInitializers, data: bytearray) -> None:
    if not proto.HasField("raw_data") or len(proto.raw_data) <= spec.threshold:
        return
    offset = -len(data) % _ALIGN + len(data)
    length = len(proto.raw_data)
    data.extend(b"\0" * (offset - len(data)))
    data.extend(proto.raw_data)
    proto.ClearField("raw_data")
    proto.data_location = onnx.TensorProto.EXTERNAL
    for key, val in (("location", spec.location), ("offset", str(offset)), ("length", str(length))):
        proto.external_data.add(key=key, value=val)


def build_context_model(
    model: ir.Model,
    planner: GraphPlanner,
    *,
    embed: bool,
    stem: str,
    node_prefix: str = "",
    source_file: str = "",
    cache_keys: Mapping[str, str] | None = None,
    external: ExternalInitializers | None = None,
) -> ContextModel | None:
    """The compiled model of a planned session.

    Args:
        embed: binaries in the nodes (``embed_mode`` = 1), else in files
            ``<stem>_<provider>[_<n>].bin`` beside the model.
        node_prefix: ``ep.context_node_name_prefix``.
        source_file: the source model's file name (``onnx_model_filename``).
        cache_keys: a saved session's: group name -> its compiled-artifact cache
            entry; each node then names ``<provider>/<key>.bin`` (relative to
            the cache folder), and the result is ``None`` unless every node
            of the model is in such a group.
        external: where large initializers of kept nodes go (default: in the model).

    Raises:
        Fail: a provider's ``compiled_model_compatibility_info`` raised.
    """
    from .model import MAP_TYPES_KEY
    from .nodeinfo import node_reads
    from .planner import unit_order

    saved = cache_keys is not None
    graph = model.graph
    part = planner.partition_of(graph)
    group_of = part.group_of if part is not None else {}
    units = unit_order(list(graph), group_of)
    if saved and (model.meta.get(MAP_TYPES_KEY) or not units):
        return None  # map-typed values: their types are not in the IR
    out = ContextModel(onnx.ModelProto())
    nodes: list[onnx.NodeProto] = []
    reads: set[ir.Value] = set()
    produced: set[ir.Value] = set()
    written: dict[str, tuple[ExecutionProvider, list[FusedGroup]]] = {}
    blobs: list[tuple[int, ExecutionProvider, bytes]] = []  # (node index, provider, binary)
    for unit in units:
        record = planner.compiled_groups.get(unit) if isinstance(unit, Claim) else None
        blob: bytes | str | None = None
        if record is not None:
            provider, group, fn = record
            if saved:
                key = cache_keys.get(group.name) if cache_keys else None
                constant_in = any(is_constant(v) for v in group.inputs)
                blob = None if key is None or constant_in else f"{provider.name}/{key}.bin"
            else:
                try:
                    data = provider.serialize_compiled(group, fn)
                    blob = None if data is None else bytes(data)
                except Exception:
                    log.warning(
                        "%s could not serialize its compiled group %s: its nodes stay as they are",
                        provider.name,
                        group.name,
                        exc_info=True,
                    )
        if blob is None:
            if saved:
                return None  # a saved session holds compiled groups only
            kept = [n for n in graph if n in unit.nodes] if isinstance(unit, Claim) else [unit]
            for n in kept:
                nodes.append(ir.serde.serialize_node(n))
                reads.update(v for v in node_reads(n) if v is not None)
                produced.update(n.outputs)
            continue
        assert record is not None
        provider, group, _ = record
        declined = part.declined if part is not None else {}
        members = [[n.name or "", n.op_type, n.domain, declined.get(n, {})] for n in group.nodes]
        name = f"{node_prefix}{group.name}"
        if isinstance(blob, bytes):
            if not embed:
                blobs.append((len(nodes), provider, blob))
            node = _context_node(
                provider, group, name, blob if embed else "", int(embed), members, source_file
            )
        else:
            node = _context_node(provider, group, name, blob, 0, members, source_file)
        nodes.append(node)
        reads.update(group.inputs)
        produced.update(group.outputs)
        written.setdefault(provider.name, (provider, []))[1].append(group)
        out.compiled += 1
    _name_binaries(nodes, blobs, stem, out.files)
    g = out.proto.graph
    g.name = graph.name or "main_graph"
    if graph.doc_string:
        g.doc_string = graph.doc_string
    g.node.extend(nodes)
    g.input.extend(ir.serde.serialize_value(v) for v in graph.inputs)
    g.output.extend(ir.serde.serialize_value(v) for v in graph.outputs)
    keep = reads | set(graph.inputs) | set(graph.outputs)
    ext = bytearray()
    for value in graph.initializers.values():
        if value in keep and value.const_value is not None:
            tensor = _tensor_proto(value)
            if external is not None:
                _externalize(tensor, external, ext)
            g.initializer.append(tensor)
    if ext:
        assert external is not None
        out.files[external.location] = bytes(ext)
    outer = set(graph.inputs) | set(graph.outputs) | set(graph.initializers.values())
    for n in graph:  # the types of intermediate values: an EPContext node's cannot be inferred
        for v in n.outputs:
            if v in produced and v not in outer and v.type is not None:
                g.value_info.append(ir.serde.serialize_value(v))
    # a saved session's entries are checked by the cache (key parts) and its record
    # (providers): its metadata stays the model's own
    _model_fields(model, out.proto, {} if saved else written, bool(out.compiled))
    return out


def _name_binaries(
    nodes: list[onnx.NodeProto],
    blobs: list[tuple[int, ExecutionProvider, bytes]],
    stem: str,
    files: dict[str, bytes],
) -> None:
    """Give each binary of ``embed_mode`` = 0 its file: ``<stem>_<provider>.bin``,
    numbered when a provider has several (onnxruntime's naming)."""
    count: dict[str, int] = {}
    for _, provider, _ in blobs:
        count[provider.name] = count.get(provider.name, 0) + 1
    seen: dict[str, int] = {}
    for index, provider, blob in blobs:
        n = seen[provider.name] = seen.get(provider.name, 0) + 1
        suffix = f"_{n}" if count[provider.name] > 1 else ""
        location = f"{_file_part(stem)}_{_file_part(provider.name)}{suffix}.bin"
        files[location] = blob
        for attr in nodes[index].attribute:
            if attr.name == "ep_cache_context":
                attr.s = location.encode()


def _model_fields(
    model: ir.Model,
    proto: onnx.ModelProto,
    written: Mapping[str, tuple[ExecutionProvider, list[FusedGroup]]],
    any_: bool,
) -> None:
    proto.ir_version = model.ir_version
    proto.producer_name = model.producer_name or ""
    proto.producer_version = model.producer_version or ""
    proto.domain = model.domain or ""
    proto.model_version = model.model_version or 0
    if model.doc_string:
        proto.doc_string = model.doc_string
    opsets = dict(model.opset_imports)
    if any_:
        opsets.setdefault(EPCONTEXT_DOMAIN, 1)
    for domain, version in opsets.items():
        proto.opset_import.add(domain=domain, version=version)
    meta = dict(model.metadata_props)
    for name, (provider, groups) in written.items():
        try:
            meta[COMPATIBILITY_INFO_PREFIX + name] = provider.compiled_model_compatibility_info(
                groups
            )
        except Exception as exc:
            raise Fail(f"{name} could not state its compatibility information: {exc!r}") from exc
    for key, value in meta.items():
        proto.metadata_props.add(key=key, value=value)


def default_context_path(path: str | os.PathLike[str]) -> Path:
    """onnxruntime's default output: ``model.onnx`` -> ``model_ctx.onnx``."""
    p = Path(path)
    return p.with_name(f"{p.stem if p.suffix == '.onnx' else p.name}_ctx.onnx")


def context_exists_error(path: Path) -> Fail:
    """onnxruntime's error for a compiled model's file that exists already."""
    return Fail(
        f"Failed to generate EP context model since the file {str(path)!r} exists already. "
        "Please remove the EP context model if you want to re-generate it."
    )


def write_context_files(folder: Path, ctx: ContextModel, model_path: Path | None) -> None:
    """Write the binaries (first: a model is never there without them), then the model."""
    for location, data in ctx.files.items():
        target = folder / location
        target.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(target, data)
    if model_path is not None:
        write_atomically(model_path, ctx.proto.SerializeToString())


def context_of(
    session: InferenceSession, embed: bool, stem: str, external: ExternalInitializers | None = None
) -> ContextModel:
    """The compiled model of a created session."""
    config = session._sess_options.config_entries
    ctx = build_context_model(
        session._model,
        session._plans.planner,
        embed=embed,
        stem=stem,
        node_prefix=config.get(CONTEXT_NODE_PREFIX_KEY, ""),
        source_file=Path(session._model_path).name if session._model_path else "",
        external=external,
    )
    assert ctx is not None  # only a saved session's is ever None
    return ctx


def write_session_context(
    session: InferenceSession, path_or_bytes: str | os.PathLike[str] | bytes
) -> None:
    """Write the session's compiled model if its config asks (``ep.context_enable``
    = ``"1"``): to ``ep.context_file_path`` (default ``<model>_ctx.onnx``),
    binaries embedded with ``ep.context_embed_mode`` = ``"1"``, else in files
    beside it. Nothing is written when no group was compiled (as onnxruntime).

    Raises:
        InvalidArgument: a model given as bytes and no ``ep.context_file_path``.
        Fail: the compiled model's file exists already (onnxruntime's message).
    """
    config = session._sess_options.config_entries
    if config.get(CONTEXT_ENABLE_KEY, "0").strip() != "1":
        return
    target = config.get(CONTEXT_PATH_KEY, "")
    if target:
        out = Path(target)
    elif isinstance(path_or_bytes, (str, os.PathLike)):
        out = default_context_path(path_or_bytes)
    else:
        raise InvalidArgument(
            f"{CONTEXT_ENABLE_KEY}=1 for a model given as bytes needs {CONTEXT_PATH_KEY}: "
            "the path the compiled model is written to"
        )
    if out.exists():
        raise context_exists_error(out)
    embed = config.get(CONTEXT_EMBED_KEY, "0").strip() == "1"
    ctx = context_of(session, embed, out.stem)
    if ctx.compiled == 0:
        log.info("no group was compiled: %s is not written", out)
        return
    write_context_files(out.parent, ctx, out)
