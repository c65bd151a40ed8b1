"""What a session tells about its model: inputs and outputs, metadata, the partition.

These are plain frozen records (``onnxruntime.NodeArg`` and
``onnxruntime.ModelMetadata`` keep their onnxruntime names and fields);
``ortcore.session`` re-exports them.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

import onnx_ir as ir

from ep_sdk import type_string

from .executor import StepInfo
from .planner import NodeRecord

__all__ = ["ModelMetadata", "NodeArg", "Partition", "node_arg"]


@dataclass(frozen=True)
class NodeArg:
    """An input or output of the model (``onnxruntime.NodeArg``).

    Attributes:
        name: value name.
        type: onnxruntime type string, e.g. ``tensor(float)``.
        shape: dims as ints, symbolic dims as strings, unknown as ``None``.
    """

    name: str
    type: str
    shape: list[int | str | None]

    def __str__(self) -> str:
        return f"NodeArg(name={self.name!r}, type={self.type!r}, shape={self.shape})"


@dataclass(frozen=True)
class ModelMetadata:
    """The model's metadata (``onnxruntime.ModelMetadata``)."""

    producer_name: str
    graph_name: str
    domain: str
    description: str
    graph_description: str
    version: int
    custom_metadata_map: dict[str, str]

    @classmethod
    def of(cls, model: ir.Model) -> ModelMetadata:
        """The metadata of ``model`` (empty strings and 0 where it has none)."""
        return cls(
            producer_name=model.producer_name or "",
            graph_name=model.graph.name or "",
            domain=model.domain or "",
            description=model.doc_string or "",
            graph_description=model.graph.doc_string or "",
            version=model.model_version or 0,
            custom_metadata_map=dict(model.metadata_props),
        )


@dataclass(frozen=True)
class Partition:
    """Where each node runs, and why other providers declined it.

    Attributes:
        providers: provider names in priority order.
        nodes: one record per node (top-level graph and subgraphs).
        copies: copy steps the core inserted between devices.
    """

    providers: tuple[str, ...]
    nodes: tuple[NodeRecord, ...]
    copies: tuple[StepInfo, ...]
    compiled: Mapping[str, str] = field(default_factory=dict)
    """Fused group name -> where its compiled function came from: a cache
    hit, a miss (compiled and stored), a saved session, ... (the values of
    ``ortcore.cache.SOURCES``); empty where nothing was compiled."""

    def __str__(self) -> str:
        """The report as text: nodes per provider, each fused group with its
        node count and where it came from, and each provider's declines."""
        from .partition import decline_lines

        lines = ["nodes: " + ", ".join(f"{p}={n}" for p, n in self.counts().items())]
        groups: dict[str, tuple[str, int]] = {}
        for r in self.nodes:
            if r.group:
                provider, n = groups.get(r.group, (r.provider, 0))
                groups[r.group] = (provider, n + 1)
        for name, (provider, n) in groups.items():
            where = self.compiled.get(name, "not compiled")
            lines.append(f"group {name} ({provider}, {n} nodes): {where}")
        if self.copies:
            lines.append(f"device copies: {len(self.copies)}")
        lines += decline_lines(r.declined for r in self.nodes)
        return "\n".join(lines)

    def counts(self) -> dict[str, int]:
        """Number of nodes per provider."""
        out: dict[str, int] = {}
        for r in self.nodes:
            out[r.provider] = out.get(r.provider, 0) + 1
        return out

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "providers": list(self.providers),
            "counts": self.counts(),
            "nodes": [r.to_dict() for r in self.nodes],
            "copies": [
                {"op_type": c.op_type, "value": c.name, "provider": c.provider} for c in self.copies
            ],
            "compiled": dict(self.compiled),
        }


def node_arg(v: ir.Value, map_types: Mapping[str, str], invented: Collection[str] = ()) -> NodeArg:
    """The :class:`NodeArg` of value ``v``.

    Args:
        map_types: type strings of map-typed values (which the IR cannot
            represent), by value name.
        invented: dimension names shape inference made up (``unk__N``):
            shown as ``None``, as onnxruntime shows a dimension without a name.
    """
    shape: list[int | str | None] = []
    if v.shape is not None:
        for d in v.shape:
            if isinstance(d, int):
                shape.append(d)
            else:
                name = getattr(d, "value", None)
                shape.append(None if name is None or name in invented else name)
    t = v.type
    name = v.name or ""
    if name in map_types:
        type_str = map_types[name]
    elif t is None or isinstance(t, ir.TensorType):
        type_str = type_string(v.dtype)
    else:
        type_str = _type_text(t)
    return NodeArg(name, type_str, shape)


def _type_text(t: Any) -> str:
    if isinstance(t, ir.TensorType):
        return type_string(t.dtype)
    if isinstance(t, ir.SparseTensorType):
        return "sparse_" + type_string(t.dtype)
    if isinstance(t, ir.SequenceType):
        return f"seq({_type_text(t.elem_type)})"
    if isinstance(t, ir.OptionalType):
        return f"optional({_type_text(t.elem_type)})"
    return str(t)
