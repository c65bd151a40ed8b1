"""Kernel registry: which kernels a provider has, for which opsets and types.

A provider keeps one :class:`KernelRegistry`; kernels are added with the
:meth:`KernelRegistry.kernel` decorator::

    registry = KernelRegistry()

    @registry.kernel("Add", since=7, until=12, types={"T": NUMERIC_TYPES})
    @registry.kernel("Add", since=13, types={"T": NUMERIC_TYPES})
    def add(info):
        return lambda a, b: (np.add(a, b),)

A provider with many kernels may register them lazily (SDK 1.1): it gives
:meth:`KernelRegistry.defer` an index ``(domain, op_type) -> modules``, and a
lookup of that op imports those modules (whose decorators then register into
the registry) the first time it needs them, so that a session imports only
the kernel families its model uses.

Lookup (:meth:`KernelRegistry.lookup`) picks the kernel whose ``[since, until]``
range holds the model's opset for the op's domain and whose type constraints
accept the node's input and output types. A miss returns a
:class:`KernelMiss` whose text says which versions and types exist.
"""

from __future__ import annotations

import functools
import importlib
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import onnx
import onnx_ir as ir

from .dtypes import type_string
from .kernel import Compute, NodeInfo

__all__ = [
    "KernelBuilder",
    "KernelDef",
    "KernelMiss",
    "KernelRegistry",
    "MemoryType",
    "attribute_defaults",
    "reset_schema_cache",
]

KernelBuilder = Callable[[NodeInfo], Compute]
"""Builds the compute function for one node."""

# Where a kernel wants an input, or puts an output: "device", the provider's
# device (the default), or "host", CPU memory, as onnxruntime's OrtMemTypeCPUInput.
MemoryType = str


@dataclass(frozen=True)
class KernelDef:
    """One registered kernel.

    Attributes:
        op_type: operator name.
        domain: operator domain, ``""`` for ai.onnx.
        since: first opset version the kernel implements.
        until: last opset version it implements (``None``: open-ended).
        types: type constraints: a type-parameter name of the op's schema
            (``"T"``) or an input index (``0``) mapped to the element types
            accepted. Unlisted parameters accept anything.
        builder: function that builds the compute function for a node.
        context: the compute function takes a ``RunContext`` first.
        inplace: output index -> input index the kernel may overwrite.
        input_memory: input index -> ``"host"`` for inputs read on the CPU.
        output_memory: output index -> ``"host"`` for outputs made on the CPU.
    """

    op_type: str
    domain: str
    since: int
    until: int | None
    builder: KernelBuilder
    types: Mapping[str | int, frozenset[ir.DataType]] = field(default_factory=dict)
    context: bool = False
    inplace: Mapping[int, int] = field(default_factory=dict)
    input_memory: Mapping[int, MemoryType] = field(default_factory=dict)
    output_memory: Mapping[int, MemoryType] = field(default_factory=dict)

    def covers(self, opset: int) -> bool:
        """Return whether this kernel implements opset version ``opset``."""
        return self.since <= opset and (self.until is None or opset <= self.until)

    def version_range(self) -> str:
        """Return the range as text, e.g. ``7-12`` or ``13+``."""
        return f"{self.since}+" if self.until is None else f"{self.since}-{self.until}"


@dataclass(frozen=True)
class KernelMiss:
    """Why a registry has no kernel for a node; ``str()`` gives the message."""

    message: str

    def __str__(self) -> str:
        return self.message


@functools.lru_cache(maxsize=4096)
def _formal_type_params(
    op_type: str, domain: str, opset: int
) -> tuple[list[str], list[str]] | None:
    """Return the type-parameter name of each formal input and output, if a schema exists."""
    try:
        schema = onnx.defs.get_schema(op_type, opset, domain)
    except onnx.defs.SchemaError:
        return None
    return (
        [p.type_str for p in schema.inputs],
        [p.type_str for p in schema.outputs],
    )


def _param_of(index: int, params: list[str]) -> str | None:
    if not params:
        return None
    # A variadic last formal parameter covers every following index.
    return params[index] if index < len(params) else params[-1]


_schema_generation = 0
"""Bumped by :func:`reset_schema_cache`; a registry's kept lookups are of one generation."""


class KernelRegistry:
    """The kernels of one provider, indexed by ``(domain, op_type)``."""

    def __init__(self) -> None:
        self._kernels: dict[tuple[str, str], list[KernelDef]] = {}
        # (domain, op_type) -> modules to import before that op is looked up
        # (:meth:`defer`); an entry goes once its modules are imported.
        self._deferred: dict[tuple[str, str], tuple[str, ...]] = {}
        self._loading = threading.RLock()

    def defer(self, index: Mapping[tuple[str, str], Iterable[str]]) -> None:
        """Register kernels lazily (new in SDK 1.1; optional).

        ``index`` maps ``(domain, op_type)`` to the modules whose import
        registers that op's kernels into this registry (with :meth:`kernel` or
        :meth:`register`). The modules are imported the first time a lookup
        asks for the op; iterating the registry (``len()``, ``for``,
        :meth:`with_kernels`) imports them all. :meth:`ops` answers from the
        index without importing. The index must name every module that
        registers a kernel of the op: a provider should check it against its
        eagerly built registry in a test (the CPU provider does).
        """
        with self._loading:
            for key, modules in index.items():
                merged = dict.fromkeys((*self._deferred.get(key, ()), *modules))
                self._deferred[key] = tuple(merged)

    def _load(self, key: tuple[str, str]) -> None:
        """Import the modules :meth:`defer` gave for ``key``, once."""
        if key not in self._deferred:
            return
        with self._loading:  # another thread may be importing them: wait for it
            modules = self._deferred.get(key)
            if modules is None:
                return
            for module in modules:
                importlib.import_module(module)
            del self._deferred[key]

    def _load_all(self) -> None:
        """Import every deferred module (the registry is listed whole)."""
        for key in list(self._deferred):
            self._load(key)

    def _found(self) -> dict[tuple[Any, ...], KernelDef | KernelMiss]:
        """The answers :meth:`lookup` gave, kept until a kernel is registered
        or onnx's schemas change (:func:`reset_schema_cache`): a graph of many
        nodes of few kinds asks the same questions many times."""
        found: dict[tuple[Any, ...], KernelDef | KernelMiss] | None = self.__dict__.get(
            "_found_cache"
        )
        if found is None or self.__dict__.get("_found_generation") != _schema_generation:
            found = self.__dict__["_found_cache"] = {}
            self.__dict__["_found_generation"] = _schema_generation
        return found

    def register(self, kernel: KernelDef) -> None:
        """Add ``kernel``.

        Raises:
            ValueError: its opset range overlaps a kernel already registered
                for the same op with overlapping types.
        """
        if kernel.until is not None and kernel.until < kernel.since:
            raise ValueError(
                f"kernel {kernel.op_type}: until={kernel.until} < since={kernel.since}"
            )
        entries = self._kernels.setdefault((kernel.domain, kernel.op_type), [])
        for other in entries:
            if _ranges_overlap(other, kernel) and _types_overlap(other, kernel):
                raise ValueError(
                    f"kernel {kernel.op_type!r} (domain {kernel.domain!r}) opsets "
                    f"{kernel.version_range()} overlaps the registered range "
                    f"{other.version_range()}"
                )
        entries.append(kernel)
        entries.sort(key=lambda k: k.since)
        self.__dict__.pop("_found_cache", None)

    def kernel(
        self,
        op_type: str,
        *,
        since: int = 1,
        until: int | None = None,
        domain: str = "",
        types: Mapping[str | int, Iterable[ir.DataType]] | None = None,
        context: bool = False,
        inplace: Mapping[int, int] | None = None,
        input_memory: Mapping[int, MemoryType] | None = None,
        output_memory: Mapping[int, MemoryType] | None = None,
    ) -> Callable[[KernelBuilder], KernelBuilder]:
        """Decorator registering a kernel builder; see :class:`KernelDef`.

        Stack it to register one builder for several ranges or ops.
        """

        def decorate(builder: KernelBuilder) -> KernelBuilder:
            self.register(
                KernelDef(
                    op_type=op_type,
                    domain=domain,
                    since=since,
                    until=until,
                    builder=builder,
                    types={k: frozenset(v) for k, v in (types or {}).items()},
                    context=context,
                    inplace=dict(inplace or {}),
                    input_memory=dict(input_memory or {}),
                    output_memory=dict(output_memory or {}),
                )
            )
            return builder

        return decorate

    def with_kernels(self, extra: Iterable[KernelDef]) -> KernelRegistry:
        """Return a new registry holding this one's kernels plus ``extra``.

        This registry is not changed: the core uses it to give one session's
        custom-operator kernels to a provider without touching the
        provider's own registry, which every session shares.

        Raises:
            ValueError: an extra kernel overlaps one already registered.
        """
        self._load_all()  # the copy's kernels must be complete: it has no index
        out = KernelRegistry()
        out._kernels = {key: list(entries) for key, entries in self._kernels.items()}
        for kernel in extra:
            out.register(kernel)
        return out

    def __iter__(self) -> Iterator[KernelDef]:
        self._load_all()
        for entries in list(self._kernels.values()):
            yield from entries

    def __len__(self) -> int:
        self._load_all()
        return sum(len(e) for e in list(self._kernels.values()))

    def ops(self) -> list[tuple[str, str]]:
        """Return the ``(domain, op_type)`` pairs that have at least one kernel
        (deferred ones included, without importing them)."""
        return sorted({*self._kernels, *self._deferred})

    def lookup_node(self, node: ir.Node, opsets: Mapping[str, int]) -> KernelDef | KernelMiss:
        """:meth:`lookup` for ``node`` at the model's opset of its domain, with
        its inputs' and outputs' static element types."""
        ins, outs = node_types(node)
        return self.lookup(node.op_type, node.domain, opsets.get(node.domain, 1), ins, outs)

    def lookup(
        self,
        op_type: str,
        domain: str,
        opset: int,
        input_types: Sequence[ir.DataType | None] = (),
        output_types: Sequence[ir.DataType | None] = (),
    ) -> KernelDef | KernelMiss:
        """Find the kernel for an op at ``opset`` with the given element types.

        Unknown types (``None``) match any constraint.

        Returns:
            the matching :class:`KernelDef`, or a :class:`KernelMiss` that says
            which versions and types exist.
        """
        found = self._found()
        key = (op_type, domain, opset, tuple(input_types), tuple(output_types))
        hit = found.get(key)
        if hit is None:
            hit = found[key] = self._lookup(op_type, domain, opset, input_types, output_types)
        return hit

    def _lookup(
        self,
        op_type: str,
        domain: str,
        opset: int,
        input_types: Sequence[ir.DataType | None],
        output_types: Sequence[ir.DataType | None],
    ) -> KernelDef | KernelMiss:
        """:meth:`lookup`, without its memory."""
        self._load((domain, op_type))
        entries = self._kernels.get((domain, op_type))
        dom = domain or "ai.onnx"
        if not entries:
            return KernelMiss(f"no kernel for {op_type} in domain {dom!r}")
        in_range = [k for k in entries if k.covers(opset)]
        if not in_range:
            have = ", ".join(k.version_range() for k in entries)
            return KernelMiss(
                f"no kernel for {op_type}({dom}) at opset {opset}; "
                f"registered opset versions: {have}"
            )
        params = _formal_type_params(op_type, domain, opset)
        rejected = ""
        for k in in_range:
            bad = _type_mismatch(k, params, input_types, output_types)
            if bad is None:
                return k
            rejected = bad
        return KernelMiss(f"no kernel for {op_type}({dom}) opset {opset} with {rejected}")


def _type_mismatch(
    k: KernelDef,
    params: tuple[list[str], list[str]] | None,
    input_types: Sequence[ir.DataType | None],
    output_types: Sequence[ir.DataType | None],
) -> str | None:
    if not k.types:
        return None
    in_params, out_params = params if params is not None else ([], [])
    for seq, formal, what in (
        (input_types, in_params, "input"),
        (output_types, out_params, "output"),
    ):
        for i, t in enumerate(seq):
            if t is None:
                continue
            keys: list[str | int] = [i] if what == "input" else []
            name = _param_of(i, formal)
            if name is not None:
                keys.append(name)
            for key in keys:
                allowed = k.types.get(key)
                if allowed is not None and t not in allowed:
                    supported = ", ".join(sorted(type_string(a) for a in allowed))
                    return (
                        f"{what} {i} of type {type_string(t)} "
                        f"(constraint {key!r} supports {supported})"
                    )
    return None


def _ranges_overlap(a: KernelDef, b: KernelDef) -> bool:
    a_end = a.until if a.until is not None else 1 << 30
    b_end = b.until if b.until is not None else 1 << 30
    return a.since <= b_end and b.since <= a_end


def _types_overlap(a: KernelDef, b: KernelDef) -> bool:
    for key in set(a.types) & set(b.types):
        if not (a.types[key] & b.types[key]):
            return False
    return True


def attribute_defaults(op_type: str, domain: str, opset: int) -> dict[str, Any]:
    """Return the schema's default attribute values for an op (empty if no schema)."""
    return dict(_attribute_defaults(op_type, domain, opset))


def reset_schema_cache() -> None:
    """Forget what ep_sdk has read from onnx's operator schemas.

    Why it exists: :meth:`KernelRegistry.lookup` and :func:`attribute_defaults`
    read onnx's schema table once per ``(op_type, domain, opset)`` and keep the
    answer, "no such schema" included. onnx's table can change while a process
    runs (``onnx.defs.register_schema`` / ``deregister_schema``: ortcore's fused
    operators, a session's custom operators), and the kept answers would then
    be stale: a new op's attribute defaults missing, its type parameters
    unknown to lookup. Whoever changes onnx's table calls this afterwards.
    It is cheap; later lookups read the schemas again.
    """
    global _schema_generation
    _attribute_defaults.cache_clear()
    _formal_type_params.cache_clear()
    _schema_generation += 1  # registries forget the lookups they kept


@functools.lru_cache(maxsize=4096)
def _attribute_defaults(op_type: str, domain: str, opset: int) -> dict[str, Any]:
    try:
        schema = onnx.defs.get_schema(op_type, opset, domain)
    except onnx.defs.SchemaError:
        return {}
    out: dict[str, Any] = {}
    for name, attr in schema.attributes.items():
        proto = attr.default_value
        if proto is None or proto.type == onnx.AttributeProto.UNDEFINED:
            continue
        value = onnx.helper.get_attribute_value(proto)
        if isinstance(value, bytes):
            value = value.decode("utf-8")
        elif isinstance(value, list) and value and isinstance(value[0], bytes):
            value = [v.decode("utf-8") for v in value]
        elif isinstance(value, onnx.TensorProto):
            value = onnx.numpy_helper.to_array(value)
        out[name] = value
    return out


def node_types(
    node: ir.Node,
) -> tuple[list[ir.DataType | None], list[ir.DataType | None]]:
    """Return the static element types of a node's inputs and outputs."""
    ins = [v.dtype if v is not None else None for v in node.inputs]
    outs = [v.dtype for v in node.outputs]
    return ins, outs
