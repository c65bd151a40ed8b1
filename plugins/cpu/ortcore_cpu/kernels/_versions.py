"""Registration helpers driven by onnx's schemas: the element types a schema
version allows, and one registration per schema version of an op.

Every kernel that covers several opsets is registered with
:func:`per_schema_version` (or :func:`by_schema`, its shorthand for kernels
whose types are exactly the schema's): the opset ranges come from the
versions at which onnx changed the op's schema, never from a hand-kept list::

    @per_schema_version("Reshape", input_memory={1: "host"})
    def reshape(info): ...

registers Reshape 1-4, 5-12, 13, ..., 25+ (input 1, the shape, exists from
opset 5: it is read on the host where the schema has it).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping

import onnx
from ep_sdk.registry import KernelBuilder, MemoryType
from onnx_ir import DataType

from . import registry


@functools.cache
def schema_types(
    op_type: str, version: int, param: str = "T", domain: str = ""
) -> frozenset[DataType]:
    """Return the element types the schema of ``op_type`` (in ``domain``) in
    force at opset ``version`` allows for type parameter ``param``.

    Raises:
        KeyError: the schema has no such type parameter.
    """
    schema = onnx.defs.get_schema(op_type, version, domain)
    for tc in schema.type_constraints:
        if tc.type_param_str == param:
            names = (
                s.removeprefix("tensor(").removesuffix(")").upper() for s in tc.allowed_type_strs
            )
            return frozenset(DataType[n] for n in names if n in DataType.__members__)
    raise KeyError(f"{op_type}-{version} has no type parameter {param!r}")


def schema_versions(op_type: str, domain: str = "") -> tuple[int, ...]:
    """Return the opset versions at which the schema of ``op_type`` (in
    ``domain``, ``""`` for ai.onnx) changed."""
    found = _VERSIONS.get((op_type, domain))
    if found is None:
        found = _walk_versions(op_type, domain)
        if found:  # an unknown op is asked again: a custom op's schema may come later
            _VERSIONS[(op_type, domain)] = found
    return found


_VERSIONS: dict[tuple[str, str], tuple[int, ...]] = {}
"""(op, domain) -> its schema versions, for the ops onnx knows."""


def _walk_versions(op_type: str, domain: str) -> tuple[int, ...]:
    """One op's schema versions, walked down from its newest: a handful of
    lookups. (Walking onnx's whole history table converts some two thousand
    schemas, 25 ms: most of the first session's kernel imports.)"""
    try:
        schema = onnx.defs.get_schema(op_type, domain)
    except onnx.defs.SchemaError:
        return ()
    found = [schema.since_version]
    while found[-1] > 1:
        try:
            schema = onnx.defs.get_schema(op_type, found[-1] - 1, domain)
        except onnx.defs.SchemaError:
            break  # the op's first version
        if schema.since_version >= found[-1]:
            break
        found.append(schema.since_version)
    return tuple(reversed(found))


@functools.cache
def _input_count(op_type: str, version: int, domain: str) -> int | None:
    """The number of formal inputs of the schema in force at ``version``;
    ``None`` when the last one is variadic (every index is an input)."""
    schema = onnx.defs.get_schema(op_type, version, domain)
    inputs = schema.inputs
    if inputs and inputs[-1].option == onnx.defs.OpSchema.FormalParameterOption.Variadic:
        return None
    return len(inputs)


def schema_ranges(
    op_type: str,
    *,
    domain: str = "",
    since: int | None = None,
    until: int | None = None,
    newest: int | None = None,
) -> list[tuple[int, int | None]]:
    """Return the ``(since, until)`` opset range of each schema version of
    ``op_type`` from ``since`` (default: its first version) to ``until``
    (default: open-ended).

    ``newest`` stops the split at that schema version: later versions fold
    into its range (a kernel checked against versions onnx added since, or
    one whose registration predates them).

    Raises:
        ValueError: no schema version starts in ``[since, until]``, or
            ``since`` is not a schema version.
    """
    versions = [
        v
        for v in schema_versions(op_type, domain)
        if (since is None or v >= since)
        and (until is None or v <= until)
        and (newest is None or v <= newest)
    ]
    if not versions:
        raise ValueError(
            f"{op_type} (domain {domain!r}) has no schema version in opsets "
            f"[{since}, {until}]; it has {list(schema_versions(op_type, domain))}"
        )
    if since is not None and versions[0] != since:
        raise ValueError(
            f"{op_type} (domain {domain!r}): since={since} is not a schema version; "
            f"they are {list(schema_versions(op_type, domain))}"
        )
    ends = [v - 1 for v in versions[1:]]
    return list(zip(versions, [*ends, until], strict=True))


def per_schema_version(
    *ops: str,
    domain: str = "",
    since: int | None = None,
    until: int | None = None,
    newest: int | None = None,
    types: Mapping[str | int, Iterable[DataType]] | None = None,
    params: Iterable[str] = (),
    exclude: Iterable[DataType] = (),
    input_memory: Mapping[int, MemoryType] | None = None,
    context: bool = False,
) -> Callable[[KernelBuilder], KernelBuilder]:
    """Register a builder once for every schema version of each op.

    Args:
        ops: the ops the builder implements.
        domain: their domain (``""``: ai.onnx).
        since, until, newest: the opsets covered; see :func:`schema_ranges`.
        types: type constraints, the same at every version.
        params: type parameters constrained to the types each schema version
            allows (minus ``exclude``); one a version lacks is skipped there.
        exclude: element types left out of the ``params`` constraints.
        input_memory: input index -> ``"host"``, applied at the versions whose
            schema has that input (e.g. Reshape's shape input, from opset 5).
        context: the compute function takes a ``RunContext`` first.

    Raises:
        ValueError: an op has no schema version in the range (see
            :func:`schema_ranges`), or none of its versions has a type
            parameter named in ``params``.
    """
    excluded = frozenset(exclude)
    params = tuple(params)
    fixed = {k: frozenset(v) for k, v in (types or {}).items()}
    input_memory_ = dict(input_memory or {})

    def decorate(builder: KernelBuilder) -> KernelBuilder:
        # Everything is checked before the first registration: a refused
        # call leaves the registry as it was.
        planned = [(op, start, end) for op in ops for start, end in _ranges(op)]
        kernels = [
            (op, start, end, _types(op, start), _memory(op, start)) for op, start, end in planned
        ]
        for op in ops:
            found = {p for o, _, _, types, _ in kernels if o == op for p in types}
            if missing := [p for p in params if p not in found]:
                raise ValueError(f"{op} (domain {domain!r}) has no type parameter {missing}")
        for op, start, end, types, memory in kernels:
            registry.kernel(
                op,
                domain=domain,
                since=start,
                until=end,
                types=types,
                context=context,
                input_memory=memory,
            )(builder)
        return builder

    def _ranges(op: str) -> list[tuple[int, int | None]]:
        return schema_ranges(op, domain=domain, since=since, until=until, newest=newest)

    def _types(op: str, version: int) -> dict[str | int, frozenset[DataType]]:
        types: dict[str | int, frozenset[DataType]] = dict(fixed)
        for p in params:
            try:
                types[p] = schema_types(op, version, p, domain) - excluded
            except KeyError:
                continue  # a parameter this version lacks
        return types

    def _memory(op: str, version: int) -> dict[int, MemoryType]:
        count = _input_count(op, version, domain)
        return {i: m for i, m in input_memory_.items() if count is None or i < count}

    return decorate


def by_schema(
    *ops: str,
    params: Iterable[str] = ("T",),
    since: int = 1,
    exclude: Iterable[DataType] = (),
) -> Callable[[KernelBuilder], KernelBuilder]:
    """Register a builder for every schema version of each op from opset
    ``since`` on, constraining ``params`` to the types each version allows
    (minus ``exclude``): :func:`per_schema_version` for kernels whose types
    are the schema's.

    Raises:
        KeyError: a version lacks one of ``params``.
        ValueError: an op has no schema version at or after ``since``.
    """
    params = tuple(params)

    def decorate(builder: KernelBuilder) -> KernelBuilder:
        for op in ops:
            first = next((v for v in schema_versions(op) if v >= since), None)
            if first is None:
                raise ValueError(f"{op} has no schema version at or after opset {since}")
            for start, _ in schema_ranges(op, since=first):
                for p in params:
                    schema_types(op, start, p)  # a missing parameter raises KeyError
            per_schema_version(op, since=first, params=params, exclude=exclude)(builder)
        return builder

    return decorate


__all__ = [
    "by_schema",
    "per_schema_version",
    "schema_ranges",
    "schema_types",
    "schema_versions",
]
