"""Registration helpers driven by onnx's schemas: the element types a schema
version allows, and one registration per schema version of an op."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable

import onnx
from ep_sdk.registry import KernelBuilder
from onnx_ir import DataType

from . import registry


@functools.cache
def schema_types(op_type: str, version: int, param: str = "T") -> frozenset[DataType]:
    """Return the element types the ai.onnx schema of ``op_type`` in force at
    opset ``version`` allows for type parameter ``param``.

    Raises:
        KeyError: the schema has no such type parameter.
    """
    schema = onnx.defs.get_schema(op_type, version, "")
    for tc in schema.type_constraints:
        if tc.type_param_str == param:
            names = (
                s.removeprefix("tensor(").removesuffix(")").upper() for s in tc.allowed_type_strs
            )
            return frozenset(DataType[n] for n in names if n in DataType.__members__)
    raise KeyError(f"{op_type}-{version} has no type parameter {param!r}")


@functools.cache
def schema_versions(op_type: str) -> tuple[int, ...]:
    """Return the opset versions at which the ai.onnx schema of ``op_type`` changed."""
    return tuple(
        sorted(
            {
                s.since_version
                for s in onnx.defs.get_all_schemas_with_history()
                if s.name == op_type and s.domain == ""
            }
        )
    )


def by_schema(
    *ops: str,
    params: Iterable[str] = ("T",),
    since: int = 1,
    exclude: Iterable[DataType] = (),
) -> Callable[[KernelBuilder], KernelBuilder]:
    """Register a builder for every schema version of each op from ``since``
    on, constraining ``params`` to the types each version allows (minus
    ``exclude``)."""
    excluded = frozenset(exclude)
    params = tuple(params)

    def decorate(builder: KernelBuilder) -> KernelBuilder:
        for op in ops:
            versions = [v for v in schema_versions(op) if v >= since]
            if not versions:
                raise ValueError(f"{op} has no schema version at or after opset {since}")
            for start, nxt in zip(versions, [*versions[1:], None], strict=True):
                types: dict[str | int, frozenset[DataType]] = {
                    p: schema_types(op, start, p) - excluded for p in params
                }
                until = None if nxt is None else nxt - 1
                registry.kernel(op, since=start, until=until, types=types)(builder)
        return builder

    return decorate


__all__ = ["by_schema", "schema_types", "schema_versions"]
