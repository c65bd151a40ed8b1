"""A base for providers that hand fused groups to a foreign engine.

A bridge (to TensorRT, OpenVINO, a vendor compiler, another runtime) is a
subclass of :class:`BridgeExecutionProvider` that overrides a few small
methods, each one job:

* **say what the engine runs**: :meth:`~BridgeExecutionProvider.supports_node`
  (a per-node answer) and/or :meth:`~BridgeExecutionProvider.query_model` (the
  engine's own answer on a whole exported model). The base groups the nodes
  the engine accepts (:func:`~ep_sdk.group_nodes`), asks the engine about
  each group, splits off what it rejects and asks again, until every group is
  accepted; every node it leaves out is declined with the engine's reason,
  which ``session.get_partition()`` and ``ortcore inspect`` show;
* **build**: :meth:`~BridgeExecutionProvider.build` turns the group's model
  (:meth:`~BridgeExecutionProvider.export`: ONNX bytes with the group's
  constants as initializers) into an engine object;
* **run**: :meth:`~BridgeExecutionProvider.run` runs it on the group's
  non-constant inputs;
* **cache** (optional): :meth:`~BridgeExecutionProvider.serialize` and
  :meth:`~BridgeExecutionProvider.deserialize` let ortcore's compiled-artifact
  cache keep built engines, keyed by the group's structure, its constants'
  bytes, the provider's name/version/options and
  :meth:`~BridgeExecutionProvider.engine_version` /
  :meth:`~BridgeExecutionProvider.engine_target`.

The engine's :meth:`~BridgeExecutionProvider.query_model` answers are kept
too, in the process and, when the session has a compiled-artifact cache
(``SessionConfig.cache_dir``), in ``<cache_dir>/<provider>/query-<key>.json``:
a session made again with a warm cache asks the engine nothing. The key
covers the candidate's structure (nodes, attributes, value types and shapes,
the constants' names, types and shapes, not their values: whether an engine
runs an op does not depend on its weights), the provider's name, version and
options, and the engine's version and target.

Required: :meth:`build` and :meth:`run`. Everything else has a default.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections.abc import Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import onnx
import onnx_ir as ir

from .capability import Capability, Claim, FusedGroup, GraphContext
from .files import write_atomically
from .graph import group_digest, group_io, group_model, group_nodes, is_constant, node_reads
from .kernel import SessionConfig, is_provider_folder_name
from .provider import ExecutionProvider, ProviderOptionError

__all__ = [
    "Answer",
    "BridgeExecutionProvider",
    "candidate_names",
    "export_candidate",
    "forget_answers",
    "structure_digest",
]

log = logging.getLogger("ep_sdk.bridge")

Answer = bool | str
"""An engine's answer about a node: ``True`` (it runs it), ``False`` (it
does not), or a string: it does not, and this is why."""


class BridgeExecutionProvider(ExecutionProvider):
    """Base class of providers that compile groups with a foreign engine.

    Class attributes, besides :class:`~ep_sdk.ExecutionProvider`'s:

    * ``engine_name``: the engine in messages (default: the provider's name);
    * ``min_group_size``: groups with fewer nodes are declined; the option
      ``min_group_size`` sets it per session (a subclass that has options of
      its own extends ``BridgeExecutionProvider.default_options`` to keep it).
    """

    engine_name: ClassVar[str] = ""
    min_group_size: ClassVar[int] = 1
    default_options: ClassVar[Mapping[str, str]] = {"min_group_size": ""}  # "": the class's

    def __init__(
        self, options: Mapping[str, Any] | None = None, config: SessionConfig | None = None
    ) -> None:
        super().__init__(options, config)
        raw = self.provider_options.get("min_group_size") or str(type(self).min_group_size)
        try:
            self.min_size = int(raw)
        except ValueError:
            self.min_size = 0
        if self.min_size < 1:
            raise ProviderOptionError(
                f"{self.name}: min_group_size must be a whole number >= 1, got {raw!r}"
            )

    # -- what the engine runs (override one or both) ------------------------

    def supports_node(self, node: ir.Node, graph: GraphContext) -> Answer:
        """The engine's answer about one node (default: ``True``, leaving
        the decision to :meth:`query_model`)."""
        return True

    def query_model(self, model: onnx.ModelProto) -> Collection[str] | Mapping[str, Answer] | None:
        """Ask the engine which nodes of ``model`` (a candidate group, exported
        with its constants; every node has a unique name) it can run.

        Return the names of the nodes it runs, or a mapping from node name to
        an :data:`Answer` (a string gives the reason of a refusal); a node
        the answer leaves out is refused. ``None`` (the default): the engine
        has no model-level query, the per-node answers stand.
        """
        return None

    def engine_version(self) -> str:
        """The engine's version, for the compiled-artifact cache key."""
        return ""

    def engine_target(self) -> str:
        """What the engine compiles for (device model, instruction sets),
        for the compiled-artifact cache key."""
        return str(self.device)

    # -- build, run, cache ---------------------------------------------------

    def export(self, group: FusedGroup) -> bytes:
        """The group as ONNX bytes for :meth:`build` (default: ``group.model``)."""
        model = group.model
        return model if isinstance(model, bytes) else bytes(model.SerializeToString())

    def build(self, model: bytes, group: FusedGroup) -> Any:
        """Build an engine object from the group's ONNX bytes (required)."""
        raise NotImplementedError(f"{self.name} does not implement build()")

    def run(self, engine: Any, inputs: Sequence[Any]) -> Sequence[Any]:
        """Run ``engine`` on the values of ``group.inputs``; return the
        values of ``group.outputs``, in order (required). Sessions may run
        from many threads at once: keep per-run state out of ``engine``, or
        guard it."""
        raise NotImplementedError(f"{self.name} does not implement run()")

    def serialize(self, engine: Any) -> bytes | None:
        """The built engine as bytes for the cache, or ``None`` (the default:
        nothing is cached)."""
        return None

    def deserialize(self, data: bytes, group: FusedGroup) -> Any:
        """Rebuild an engine from :meth:`serialize`'s bytes (a ``memoryview``
        of the mapped cache entry when the class sets
        :attr:`~ep_sdk.ExecutionProvider.load_compiled_mapped`). If it raises,
        ortcore logs it and builds the group again."""
        raise NotImplementedError(f"{self.name} does not implement deserialize()")

    # -- the ExecutionProvider side (rarely overridden) ---------------------

    def get_capability(self, graph: GraphContext) -> Capability:
        """Group the nodes the engine accepts, asking it until it accepts
        every group; decline the rest with its reasons.

        Each round groups the nodes still in play (:func:`~ep_sdk.group_nodes`)
        and asks :meth:`query_model` about every group not yet accepted. Of
        the nodes refused in a group, only the first ones (no refused node
        upstream of them in the group) are dropped: a refusal further down may
        only follow from them (an engine cannot type what an op it does not
        know produces), so those nodes are asked again in their new group.
        Every round drops a node or ends, so this ends.
        """
        declined: dict[ir.Node, str] = {}
        pool: set[ir.Node] = set()
        errors = EngineErrors()
        for node in graph.nodes:
            answer = self._node_answer(node, graph, errors)
            if answer is True:
                pool.add(node)
            else:
                declined[node] = self._reason(node, answer)
        accepted: set[frozenset[ir.Node]] = set()
        asks = type(self).query_model is not BridgeExecutionProvider.query_model
        while True:
            claims = group_nodes(graph, pool.__contains__)
            dropped = False
            for claim in claims:
                key = frozenset(claim.nodes)
                if not asks or len(claim.nodes) < self.min_size or key in accepted:
                    continue
                failed = len(errors)
                answers = self._ask(graph, claim.nodes, errors)
                if answers is None:  # no model-level query after all
                    asks = False
                    break
                refused = {n: a for n, a in answers.items() if a is not True}
                for node, answer in refused.items():
                    declined[node] = self._reason(node, answer)
                # an engine that raised says nothing about any one node: asking
                # it again about every smaller group would only raise again
                first = claim.nodes if len(errors) > failed else _first(claim.nodes, refused)
                for node in first:
                    pool.discard(node)
                    dropped = True
                if not refused:
                    accepted.add(key)
            if not dropped:
                break
        out: list[Claim] = []
        for claim in claims:
            if len(claim.nodes) >= self.min_size:
                out.append(claim)
                for node in claim.nodes:
                    declined.pop(node, None)  # refused once, accepted in a later group
                continue
            for node in claim.nodes:
                declined.setdefault(
                    node,
                    f"{self._engine}: a group of {len(claim.nodes)} node(s), fewer than "
                    f"min_group_size={self.min_size}",
                )
        errors.log(self.name)
        return Capability(claims=out, declined=declined)

    def compile(self, group: FusedGroup) -> Any:
        """Export and :meth:`build` the group; the function runs it with :meth:`run`."""
        return _Bridged(self, self.build(self.export(group), group))

    def serialize_compiled(self, group: FusedGroup, compiled: Any) -> bytes | None:
        """:meth:`serialize` of the built engine."""
        return self.serialize(compiled.engine) if isinstance(compiled, _Bridged) else None

    def load_compiled(self, group: FusedGroup, data: bytes) -> Any:
        """:meth:`deserialize` the engine."""
        return _Bridged(self, self.deserialize(data, group))

    def compile_cache_key_parts(self, group: FusedGroup) -> Mapping[str, str]:
        """The engine's name, version and target."""
        return {
            "engine": self._engine,
            "engine_version": self.engine_version(),
            "engine_target": self.engine_target(),
        }

    # -- helpers ---------------------------------------------------------------

    @property
    def _engine(self) -> str:
        return type(self).engine_name or self.name

    def _reason(self, node: ir.Node, answer: Answer) -> str:
        if isinstance(answer, str) and answer:
            return answer
        op = f"{node.domain}::{node.op_type}" if node.domain else node.op_type
        return f"{self._engine} does not support {op}"

    def _node_answer(
        self, node: ir.Node, graph: GraphContext, errors: EngineErrors | None = None
    ) -> Answer:
        if set(node_reads(node)) - set(node.inputs):
            # group_io and the exported model know only a node's explicit inputs
            return (
                f"{self._engine}: its subgraphs read values of the enclosing graph, "
                "which a bridged group does not export yet"
            )
        try:
            answer = self.supports_node(node, graph)
        except Exception as exc:  # a broken answer declines the node, never the session
            log.debug("%s: supports_node(%r) raised", self.name, node.name, exc_info=True)
            if errors is not None:
                errors.add("supports_node", exc, 1)
            return f"{self._engine}: supports_node raised {exc!r}"
        return answer if isinstance(answer, str) else bool(answer)

    def _ask(
        self,
        graph: GraphContext,
        nodes: Sequence[ir.Node],
        errors: EngineErrors | None = None,
    ) -> dict[ir.Node, Answer] | None:
        """The engine's answer for each node of a candidate group (kept, see
        the module docstring)."""
        ordered, by_name = candidate_names(graph.graph, nodes)
        key = self._query_key(structure_digest(graph.graph, ordered, by_name, graph.opsets))
        answers = _QUERIES.get(key) or self._read_query(key)
        if answers is None:
            model, _ = export_candidate(graph.graph, nodes, graph.opsets)
            try:
                result = self.query_model(model)
            except Exception as exc:
                log.debug(
                    "%s: query_model raised on %d nodes", self.name, len(nodes), exc_info=True
                )
                if errors is not None:
                    errors.add("query_model", exc, len(nodes))
                return dict.fromkeys(nodes, f"{self._engine} failed to read the group: {exc}")
            if result is None:
                return None
            if isinstance(result, Mapping):
                answers = {str(k): v for k, v in result.items()}
            else:
                answers = dict.fromkeys(map(str, result), True)
            self._write_query(key, answers)
        _QUERIES.put(key, answers)
        return {
            node: answers.get(name, f"{self._engine} refuses it (not in its query answer)")
            for name, node in by_name.items()
        }

    def _query_key(self, structure: str) -> str:
        """What an engine's answer about a candidate of this ``structure``
        (:func:`structure_digest`) depends on (see the module docstring)."""
        h = hashlib.sha256()
        parts = {
            "provider": self.name,
            "version": str(self.version),
            "options": dict(sorted(self.provider_options.items())),
            "engine": self._engine,
            "engine_version": self.engine_version(),
            "engine_target": self.engine_target(),
        }
        h.update(json.dumps(parts, sort_keys=True).encode())
        h.update(structure.encode())
        return h.hexdigest()

    def _query_file(self, key: str) -> Path | None:
        folder = self.session_config.cache_dir
        if not folder or not is_provider_folder_name(self.name):
            return None  # no folder can be named for this provider
        return Path(folder) / self.name / f"query-{key}.json"

    def _read_query(self, key: str) -> dict[str, Answer] | None:
        file = self._query_file(key)
        if file is None:
            return None
        try:
            data = json.loads(file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(data, dict) or data.get("key") != key:
            return None
        answers = data.get("answers")
        if not isinstance(answers, dict) or not all(
            isinstance(v, (bool, str)) for v in answers.values()
        ):
            return None
        return {str(k): v for k, v in answers.items()}

    def _write_query(self, key: str, answers: Mapping[str, Answer]) -> None:
        file = self._query_file(key)
        if file is None:
            return
        try:
            file.parent.mkdir(parents=True, exist_ok=True)
            text = json.dumps({"key": key, "answers": dict(answers)})
            write_atomically(file, text.encode())  # a leftover is a cache temp file
        except OSError:
            log.warning("%s: could not keep the query answer in %s", self.name, file)


class EngineErrors:
    """The exceptions an engine raised during one :meth:`~BridgeExecutionProvider.get_capability`,
    tallied by method and error: each is logged once, with counts, at warning
    level (the tracebacks went to debug level as they happened)."""

    def __init__(self) -> None:
        self._seen: dict[tuple[str, str], list[int]] = {}

    def __len__(self) -> int:
        return sum(calls for calls, _ in self._seen.values())

    def add(self, method: str, exc: BaseException, nodes: int) -> None:
        """Count one call of ``method`` that raised ``exc`` about ``nodes`` nodes."""
        text = (str(exc).strip().splitlines() or [""])[0]
        why = f"{type(exc).__name__}: {text[:200]}" if text else type(exc).__name__
        tally = self._seen.setdefault((method, why), [0, 0])
        tally[0] += 1
        tally[1] += nodes

    def log(self, provider: str) -> None:
        """One warning per method and error (nothing when none raised)."""
        for (method, why), (calls, nodes) in self._seen.items():
            what = (
                "node(s)" if method == "supports_node" else f"node(s) in {calls} candidate group(s)"
            )
            log.warning(
                "%s: %s raised %s for %d %s, which it declines; debug logging "
                "(ortcore --verbose) shows each traceback",
                provider,
                method,
                why,
                nodes,
                what,
            )


def _first(nodes: Sequence[ir.Node], refused: Collection[ir.Node]) -> list[ir.Node]:
    """The refused nodes with no refused node upstream of them within ``nodes``
    (which are in topological order)."""
    members = set(nodes)
    downstream: set[ir.Node] = set()  # nodes with a refused node upstream
    first: list[ir.Node] = []
    for node in nodes:
        producers = {v.producer() for v in node_reads(node)} & members
        if any(p in refused or p in downstream for p in producers):
            downstream.add(node)
        elif node in refused:
            first.append(node)
    return first


class _Bridged:
    """The compiled function of a bridged group: ``run(engine, inputs)``."""

    __slots__ = ("engine", "provider")

    def __init__(self, provider: BridgeExecutionProvider, engine: Any) -> None:
        self.provider = provider
        self.engine = engine

    def __call__(self, *inputs: Any) -> Sequence[Any]:
        return self.provider.run(self.engine, inputs)


class _Answers:
    """The engines' query answers of this process, by key (the most recent few)."""

    LIMIT = 256

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: dict[str, dict[str, Answer]] = {}

    def get(self, key: str) -> dict[str, Answer] | None:
        with self._lock:
            return self._items.get(key)

    def put(self, key: str, answers: dict[str, Answer]) -> None:
        with self._lock:
            self._items.pop(key, None)
            self._items[key] = answers
            while len(self._items) > self.LIMIT:
                del self._items[next(iter(self._items))]


_QUERIES = _Answers()


def forget_answers() -> None:
    """Drop the query answers this process keeps (those in cache folders stay):
    after an engine's plugins or devices changed, or between tests."""
    global _QUERIES
    _QUERIES = _Answers()


def structure_digest(
    graph: ir.Graph,
    ordered: Sequence[ir.Node],
    names: Mapping[str, ir.Node],
    opsets: Mapping[str, int],
) -> str:
    """SHA-256 of a candidate group without its weights' values
    (:func:`ep_sdk.graph.group_digest` of what :func:`export_candidate`
    exports: each node under its name in the exported model). Computed on the
    graph, so a kept answer is found without exporting the candidate."""
    name_of = {node: name for name, node in names.items()}
    _, inputs, outputs = group_io(graph, ordered)
    constants = [v for v in inputs if is_constant(v)]
    feeds = [v for v in inputs if v not in constants]
    node_names = [name_of.get(n, "") for n in ordered]
    return group_digest("candidate", ordered, feeds, outputs, opsets, constants, node_names)


def candidate_names(
    graph: ir.Graph, nodes: Iterable[ir.Node]
) -> tuple[list[ir.Node], dict[str, ir.Node]]:
    """The candidate's nodes in graph order, and the unique name each gets in
    the exported model (see :func:`export_candidate`)."""
    ordered, _, _ = group_io(graph, nodes)
    taken = {v.name for n in ordered for v in (*n.inputs, *n.outputs) if v is not None}
    counts: dict[str, int] = {}
    for n in ordered:
        counts[n.name or ""] = counts.get(n.name or "", 0) + 1
    by_name: dict[str, ir.Node] = {}
    for node in ordered:
        name = node.name or ""
        if not name or counts[name] > 1 or name in taken or name in by_name:
            i = len(by_name)
            while f"{node.op_type}_{i}" in taken or f"{node.op_type}_{i}" in counts:
                i += 1
            name = f"{node.op_type}_{i}"
            taken.add(name)
        by_name[name] = node
    return ordered, by_name


def export_candidate(
    graph: ir.Graph, nodes: Iterable[ir.Node], opsets: Mapping[str, int]
) -> tuple[onnx.ModelProto, dict[str, ir.Node]]:
    """Export ``nodes`` of ``graph`` as a standalone model, with their
    constants, for an engine's query; every node gets a unique name.

    Returns:
        the model, and which node each name in it is. A node keeps its own
        name when that is not empty and unique in the model and among its
        values; the others are named ``<op type>_<n>``.
    """
    ordered, inputs, outputs = group_io(graph, nodes)
    constants = [v for v in inputs if is_constant(v)]
    feeds = [v for v in inputs if v not in constants]
    model = group_model("candidate", ordered, feeds, outputs, opsets, constants)
    _, by_name = candidate_names(graph, ordered)
    for proto, name in zip(model.graph.node, by_name):
        proto.name = name
    return model, by_name
