"""Compiled models in onnxruntime's EPContext form: reading them.

A compiled model holds, for each group a provider compiled, one
``com.microsoft::EPContext`` node whose inputs and outputs are the group's
and whose attributes are onnxruntime's:

* ``ep_cache_context``: the compiled binary (what the provider's
  ``serialize_compiled`` returned) with ``embed_mode`` = 1; with
  ``embed_mode`` = 0, the path of a file holding it, relative to the
  model's folder (no absolute path, nothing outside that folder);
* ``main_context`` (1: the node holds its own binary; 0, a graph of a shared
  context, is not supported), ``source`` (the provider's name),
  ``partition_name`` (the group's name), ``ep_sdk_version`` (the SDK the
  provider was written against), and where known ``hardware_architecture``
  (the engine's target or the device), ``onnx_model_filename`` and ``notes``
  (JSON: ``{"ortcore": {"nodes": [[name, op_type, domain, declined], ...]}}``,
  the nodes the group held, which ``get_partition()`` reports).

Every other node is an ordinary node with its initializers; the compiled
groups' weights are not in the model. The metadata holds each provider's
compatibility string under ``ep_compatibility_info.<provider name>``
(:mod:`ep_sdk.compiled_context`).

A session loads such a model without the original weights
(:func:`claim_context_nodes`): each EPContext node becomes a fused group of its
``source`` provider, which rebuilds it with ``load_compiled``
(:func:`load_context_group`); other nodes are partitioned as usual. There is
no graph to fall back on, so a node whose provider is not among the
session's, whose binary is missing or refused, or whose provider judges the
compatibility string UNSUPPORTED, fails the session with an error naming the
provider, the node and what is wrong. Writing: :mod:`ortcore.epcontext_write`.
"""

from __future__ import annotations

import json
import logging
import os
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import onnx_ir as ir

from ep_sdk import Claim, ExecutionProvider, FusedGroup
from ep_sdk.compiled_context import COMPATIBILITY_INFO_PREFIX, OrtCompiledModelCompatibility

from .errors import (
    Fail,
    InvalidArgument,
    InvalidGraph,
    NoSuchFile,
    NotImplementedOp,
    StaleSavedSession,
)

if TYPE_CHECKING:
    from .cache import CompiledCache

__all__ = [
    "CONTEXT_EMBED_KEY",
    "CONTEXT_ENABLE_KEY",
    "CONTEXT_NODE_PREFIX_KEY",
    "CONTEXT_PATH_KEY",
    "EPCONTEXT_DOMAIN",
    "EPCONTEXT_OP",
    "FAIL_ON_SUBOPTIMAL_KEY",
    "ContextGroup",
    "claim_context_nodes",
    "context_base",
    "context_domains",
    "is_context_node",
    "load_context_group",
    "resolve_context_path",
]

log = logging.getLogger("ortcore.epcontext")

EPCONTEXT_DOMAIN = "com.microsoft"
EPCONTEXT_OP = "EPContext"
CONTEXT_ENABLE_KEY = "ep.context_enable"
"""Session config entry: ``"1"`` writes the compiled model when the session is created."""
CONTEXT_PATH_KEY = "ep.context_file_path"
"""Where the compiled model goes (default ``<model>_ctx.onnx``); when loading a
compiled model from bytes, the folder its binaries are found in."""
CONTEXT_EMBED_KEY = "ep.context_embed_mode"
"""``"1"``: binaries in the nodes; ``"0"`` (the default): in files beside the model."""
CONTEXT_NODE_PREFIX_KEY = "ep.context_node_name_prefix"
"""A prefix for the EPContext nodes' names (and ``partition_name``)."""
FAIL_ON_SUBOPTIMAL_KEY = "session.fail_on_suboptimal_compiled_model"
"""``"1"``: a PREFER_RECOMPILATION verdict fails the session instead of warning."""


class _Utf8Noise(logging.Filter):
    """onnx-ir warns about every binary (not UTF-8) ``ep_cache_context``: that is the format."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "ep_cache_context" not in record.getMessage()


logging.getLogger("onnx_ir.serde").addFilter(_Utf8Noise())


def is_context_node(node: ir.Node) -> bool:
    """Whether ``node`` is a ``com.microsoft::EPContext`` node."""
    return node.op_type == EPCONTEXT_OP and node.domain == EPCONTEXT_DOMAIN


def context_domains(model: ir.Model) -> set[str]:
    """``{"com.microsoft"}`` when the model's every node of that domain is an
    EPContext node (no plugin's custom ops are needed for it), else nothing."""
    seen = False
    for node in model.graph.all_nodes():
        if node.domain == EPCONTEXT_DOMAIN:
            if node.op_type != EPCONTEXT_OP:
                return set()
            seen = True
    return {EPCONTEXT_DOMAIN} if seen else set()


@dataclass(frozen=True)
class ContextGroup:
    """The claim payload of an EPContext node: where its binary is, and the
    nodes it holds.

    Attributes:
        node: the EPContext node's name.
        data: the binary (``embed_mode`` = 1), else ``None``.
        path: the binary's file (``embed_mode`` = 0), resolved, else ``None``.
        cache_key: for a saved session, the compiled-artifact cache entry the
            binary is (loaded through the cache, which checks it), else ``None``.
        members: ``(name, op_type, domain, declined)`` of each node the group
            held, for ``get_partition()``.
    """

    node: str
    data: bytes | None
    path: Path | None
    cache_key: str | None
    members: tuple[tuple[str, str, str, dict[str, str]], ...]


def _attrs(node: ir.Node) -> dict[str, Any]:
    return {a.name: a.value for a in node.attributes.values()}


def _as_bytes(value: Any) -> bytes:
    if isinstance(value, str):  # onnx-ir decodes a binary that happens to be UTF-8
        return value.encode("utf-8")
    return bytes(value)


def resolve_context_path(base: Path, location: str, what: str) -> Path:
    """The file ``location`` names, relative to ``base``, under the rules of
    external data: relative, not leading out of ``base`` (no ``..`` first,
    nor through a symlink), a regular file with one link.

    Raises:
        InvalidArgument: absolute, escaping ``base``, hard-linked or not a file.
        NoSuchFile: it does not exist.
    """
    if not location or os.path.isabs(location) or Path(location).is_absolute():
        raise InvalidArgument(
            f"{what}: ep_cache_context {location!r} must be a path relative to the "
            f"model's folder {str(base)!r}"
        )
    root = base.resolve()
    lexical = os.path.normpath(location)
    try:
        target = (base / location).resolve()
    except (OSError, ValueError) as exc:
        raise InvalidArgument(
            f"{what}: ep_cache_context {location!r} is not usable: {exc}"
        ) from exc
    if lexical == os.pardir or lexical.startswith(os.pardir + os.sep) or root not in target.parents:
        raise InvalidArgument(
            f"{what}: ep_cache_context {location!r} escapes the model's folder {str(base)!r}"
        )
    try:
        st = target.stat()
    except OSError:
        raise NoSuchFile(
            f"{what}: the compiled binary {location!r} is not in {str(base)!r}"
        ) from None
    if not stat.S_ISREG(st.st_mode):
        raise InvalidArgument(f"{what}: the compiled binary {location!r} is not a regular file")
    if st.st_nlink > 1:
        raise InvalidArgument(
            f"{what}: the compiled binary {location!r} has {st.st_nlink} hard links; "
            "copy it to a file of its own"
        )
    return target


def _members(notes: Any, node: ir.Node) -> tuple[tuple[str, str, str, dict[str, str]], ...]:
    """The nodes a context node's ``notes`` say it holds (itself when they say nothing)."""
    try:
        listed = json.loads(_as_bytes(notes).decode("utf-8"))["ortcore"]["nodes"]
        return tuple(
            (str(a), str(b), str(c), {str(k): str(v) for k, v in dict(d).items()})
            for a, b, c, d in listed
        )
    except Exception:
        return ((node.name or "", EPCONTEXT_OP, EPCONTEXT_DOMAIN, {}),)


def context_base(
    model_path: str | None, config: Mapping[str, str], saved: Any = None
) -> Path | None:
    """The folder an EPContext node's ``embed_mode`` = 0 path is relative to:
    a saved session's cache folder, the model file's folder, or for a model
    given as bytes the folder of ``ep.context_file_path`` (the path itself if
    it is a folder), else ``None``."""
    if saved is not None:
        return Path(saved.cache_dir)
    if model_path is not None:
        return Path(model_path).parent
    given = config.get(CONTEXT_PATH_KEY, "")
    if not given:
        return None
    p = Path(given)
    return p if p.is_dir() else p.parent


def _provider_for(source: str, providers: Sequence[ExecutionProvider]) -> ExecutionProvider | None:
    for p in providers:
        if source == p.name or source in p.aliases:
            return p
    return None


def claim_context_nodes(
    model: ir.Model,
    providers: Sequence[ExecutionProvider],
    base: Path | None,
    config: Mapping[str, str],
    *,
    saved: bool = False,
) -> int:
    """Check the model's compatibility strings, then give each EPContext node of
    its main graph to its ``source`` provider as a fused group of one node.

    Args:
        base: the folder ``embed_mode`` = 0 paths are relative to (the model's,
            or ``ep.context_file_path``'s for a model given as bytes), or ``None``.
        saved: the model is a saved session's: ``<provider>/<key>.bin`` paths
            are entries of the compiled-artifact cache at ``base``.

    Returns:
        how many EPContext nodes there are.

    Raises:
        NotImplementedOp: a node's provider is not among ``providers``.
        InvalidGraph: a node's attributes are not usable.
        InvalidArgument, NoSuchFile: its binary's path is refused or missing.
        Fail: a provider judged its compatibility string UNSUPPORTED (or
            PREFER_RECOMPILATION under ``session.fail_on_suboptimal_compiled_model``).
    """
    from .partition import Assignment, assign

    nodes = [n for n in model.graph if is_context_node(n)]
    owners: list[ExecutionProvider] = []
    claimed: dict[str, list[ir.Node]] = {}
    for node in nodes:
        source = str(_attrs(node).get("source", ""))
        provider = _provider_for(source, providers)
        if provider is None:
            names = ", ".join(p.name for p in providers)
            raise NotImplementedOp(
                f"EPContext node {node.name!r} was compiled by {source or '(no source)'!r}, "
                f"which is not among this session's providers ({names}): add that provider "
                "to the session (the compiled model has no original graph to run elsewhere)"
            )
        owners.append(provider)
        claimed.setdefault(provider.name, []).append(node)
    # before the binaries: a stale context is refused for what differs, not for a symptom
    check_compatibility(model, providers, claimed, config)
    for node, provider in zip(nodes, owners):
        payload = _payload(node, provider, base, saved)
        name = str(_attrs(node).get("partition_name") or node.name or "")
        assign(node, Assignment(provider, Claim.group([node], name, payload=payload)))
    return len(nodes)


def _payload(
    node: ir.Node, provider: ExecutionProvider, base: Path | None, saved: bool
) -> ContextGroup:
    """Where an EPContext node's binary is (checked, not read)."""
    what = f"EPContext node {node.name!r} of {provider.name}"
    attrs = _attrs(node)
    if int(attrs.get("main_context", 1)) != 1:
        raise InvalidGraph(f"{what}: main_context=0 (a graph of a shared context) is not supported")
    if "ep_cache_context" not in attrs:
        raise InvalidGraph(f"{what} has no ep_cache_context attribute")
    blob = attrs["ep_cache_context"]
    embed = int(attrs.get("embed_mode", 1))
    data = path = key = None
    if embed == 1:
        data = _as_bytes(blob)
    elif embed == 0:
        location = _as_bytes(blob).decode("utf-8", "replace")
        if base is None:
            raise InvalidArgument(
                f"{what}: its binary is the file {location!r}, but the model came as "
                f"bytes: set the session config entry {CONTEXT_PATH_KEY} to the model's "
                "path (its folder is where the file is looked up)"
            )
        if saved:
            key = _cache_key(location, provider)
        if key is None:
            path = resolve_context_path(base, location, what)
    else:
        raise InvalidGraph(f"{what}: embed_mode must be 0 or 1, not {embed}")
    return ContextGroup(node.name or "", data, path, key, _members(attrs.get("notes"), node))


def _cache_key(location: str, provider: ExecutionProvider) -> str | None:
    """The cache key a saved session's ``<provider>/<key>.bin`` path names."""
    folder, _, name = location.partition("/")
    key, dot, ext = name.partition(".")
    if folder == provider.name and dot and ext == "bin" and len(key) == 64:
        return key
    return None


def _placeholder(node: ir.Node) -> FusedGroup:
    """A group for an EPContext node, before the planner makes the real one."""
    from ep_sdk.graph import group_model

    name = node.name or ""
    inputs = [v for v in node.inputs if v is not None]
    outputs = [v for v in node.outputs if v is not None]
    return FusedGroup(
        name=name,
        nodes=[node],
        inputs=inputs,
        outputs=outputs,
        export=lambda: group_model(name, [node], inputs, outputs, {}, []),
    )


def check_compatibility(
    model: ir.Model,
    providers: Sequence[ExecutionProvider],
    claimed: Mapping[str, list[ir.Node]],
    config: Mapping[str, str],
) -> None:
    """Have each provider judge the compatibility string the model holds for it
    (onnxruntime checks every provider the model has a string for).

    Raises:
        Fail: UNSUPPORTED, or PREFER_RECOMPILATION under
            ``session.fail_on_suboptimal_compiled_model`` = ``"1"``, or the
            provider's judgement raised; the message names the provider and why.
    """
    strict = config.get(FAIL_ON_SUBOPTIMAL_KEY, "0").strip() == "1"
    for provider in providers:
        info = model.metadata_props.get(COMPATIBILITY_INFO_PREFIX + provider.name)
        if info is None:
            continue
        groups = [_placeholder(n) for n in claimed.get(provider.name, [])]
        try:
            status, reason = provider.validate_compiled_model_compatibility_info(info, groups)
            status = OrtCompiledModelCompatibility(status)
        except Exception as exc:
            raise Fail(
                f"Failed to validate compiled model compatibility for {provider.name}: {exc!r}"
            ) from exc
        log.info("%s: compiled model compatibility %s", provider.name, status.name)
        if status == OrtCompiledModelCompatibility.EP_UNSUPPORTED:
            raise Fail(
                f"Compiled model is not supported by execution provider {provider.name}: "
                f"{reason or 'the provider refused its compatibility string'}. Compile the "
                "model again for this provider (ortcore.ModelCompiler)"
            )
        if status == OrtCompiledModelCompatibility.EP_SUPPORTED_PREFER_RECOMPILATION:
            message = (
                f"Compiled model is suboptimal for execution provider {provider.name}"
                f"{': ' + reason if reason else ''}. Recompilation recommended"
            )
            if strict:
                raise Fail(f"{message} ({FAIL_ON_SUBOPTIMAL_KEY}=1)")
            log.warning("%s", message)


def _read(path: Path, mapped: bool) -> bytes | memoryview:
    from .cache.files import map_file

    if mapped:
        view = map_file(path, path.stat().st_size)
        if view is not None:
            return view
    return path.read_bytes()


def load_context_group(
    cache: CompiledCache | None, provider: ExecutionProvider, group: FusedGroup, ctx: ContextGroup
) -> Any:
    """The provider's function for an EPContext node: its binary, loaded.

    Raises:
        StaleSavedSession: a saved session's cache entry is gone or does not match.
        NoSuchFile: the binary's file went away.
        Fail: ``load_compiled`` raised or is not implemented (naming the node).
    """
    what = f"EPContext node {ctx.node!r} of {provider.name}"
    data: bytes | memoryview | None = ctx.data
    if ctx.cache_key is not None:
        if cache is None:
            raise StaleSavedSession("the session has no compiled-artifact cache")
        try:
            data = cache.load(
                provider,
                group,
                key=ctx.cache_key,
                parts=cache.key_parts(provider, group),
                mapped=provider.load_compiled_mapped,
            )
        except Exception as exc:
            raise StaleSavedSession(f"{group.name}: {exc!r}") from exc
        if data is None:
            raise StaleSavedSession(f"{group.name}: the compiled artifact {ctx.cache_key} is gone")
    elif ctx.path is not None:
        try:
            data = _read(ctx.path, provider.load_compiled_mapped)
        except OSError as exc:
            raise NoSuchFile(f"{what}: its binary {str(ctx.path)!r} cannot be read: {exc}") from exc
    elif provider.load_compiled_mapped:
        data = memoryview(bytearray(data or b""))  # writable, as a mapped entry is
    if not data:
        raise Fail(f"{what}: its compiled binary is empty")
    if type(provider).load_compiled is ExecutionProvider.load_compiled:
        raise Fail(f"{what}: the provider does not implement load_compiled()")
    try:
        return provider.load_compiled(group, data)  # type: ignore[arg-type]
    except Exception as exc:
        if ctx.cache_key is not None:
            raise StaleSavedSession(f"{group.name}: load_compiled raised {exc!r}") from exc
        raise Fail(
            f"{what}: {provider.name} could not load its compiled binary "
            f"({exc!r}); the binary is corrupt or was compiled for something else"
        ) from exc
