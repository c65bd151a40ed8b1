"""Custom operators on the session side: schemas, output checks, kernels per session.

The operator types (:class:`CustomOp`, :func:`custom_op`, :class:`Param`,
:class:`TensorType`) live in the SDK (:mod:`ep_sdk.custom_ops`), so a plugin
builds the operators of its ``ortcore_custom_ops`` hook from ``ep_sdk``
alone; they are re-exported here and as ``ortcore.custom_op`` and friends
(the same objects). A model author writes::

    import numpy as np
    import ortcore

    scale = ortcore.custom_op(
        domain="my.ops",
        name="Scale",
        inputs=["X: T"],
        outputs=["Y: T"],
        attributes={"alpha": 1.0},
        types={"T": ["float", "double"]},
    )

    @scale.kernel("CPUExecutionProvider")
    def scale_cpu(info):
        alpha = info.attrs["alpha"]
        return lambda x: (x * np.asarray(alpha, dtype=x.dtype),)

    so = ortcore.SessionOptions()
    so.register_custom_ops(scale)

What this module does with a session's operators: registers their schemas
with onnx (``onnx.defs.register_schema``), so ``onnx.checker`` and onnx's
shape inference accept models that use them, the shape function being the
schema's inference function; wraps every kernel so that what it returns is
checked against the op's declaration (:mod:`ortcore.kernel_outputs`); and
gives the kernels to the session's provider instances only
(``ExecutionProvider.add_kernels``): a provider's own registry, which every
session shares, never changes.

Operators can also be offered to every session by a plugin's
``ortcore_custom_ops`` hook (see :mod:`ortcore.hookspecs`).
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterable, Mapping, Sequence

import onnx
import onnx.defs
import onnx_ir as ir

from ep_sdk import (
    Compute,
    ExecutionProvider,
    KernelBuilder,
    KernelDef,
    NodeInfo,
    reset_schema_cache,
    type_string,
)
from ep_sdk.custom_ops import (
    ONNX_DOMAINS,
    CustomOp,
    Param,
    ShapeFunction,
    TensorType,
    custom_op,
)

from .errors import InvalidArgument
from .kernel_outputs import checked_compute, output_specs

__all__ = [
    "ONNX_DOMAINS",
    "CustomOp",
    "Param",
    "ShapeFunction",
    "TensorType",
    "checked_kernels",
    "custom_op",
]


def checked_kernels(
    op: CustomOp, provider: type[ExecutionProvider] | ExecutionProvider
) -> list[KernelDef]:
    """The kernels of ``op`` for ``provider`` (:meth:`CustomOp.kernels_for`),
    each builder wrapped so that its compute functions check what they return:
    the kernel is the user's code, and the graph after it was built for the
    types and shapes the op declares."""
    return [
        dataclasses.replace(k, builder=_checked(op, k.builder, k.context, k.types))
        for k in op.kernels_for(provider)
    ]


def _checked(
    op: CustomOp,
    builder: KernelBuilder,
    context: bool,
    narrowed: Mapping[str | int, frozenset[ir.DataType]],
) -> KernelBuilder:
    """``builder``, whose compute functions check what they return
    (:mod:`ortcore.kernel_outputs`): the kernel is the user's code, and the
    graph after it was built for the types and shapes the op declares."""

    def build(info: NodeInfo) -> Compute:
        fn = builder(info)
        if not callable(fn):
            raise TypeError(
                f"the kernel builder of custom operator {op.qualified_name} returned "
                f"a {type(fn).__name__}, not a compute function"
            )
        return _check_outputs(op, fn, info, context, narrowed)

    build.__wrapped__ = builder  # type: ignore[attr-defined]
    return build


def _check_outputs(
    op: CustomOp,
    fn: Compute,
    info: NodeInfo,
    context: bool,
    narrowed: Mapping[str | int, frozenset[ir.DataType]],
) -> Compute:
    """``fn``, a compute function of this op for the node of ``info``, with
    each call's outputs checked against the op's declaration (see
    :func:`ortcore.kernel_outputs.checked_compute`); ``narrowed`` are the
    kernel's own type constraints, within the op's."""
    host = info.provider is None or info.provider.device.is_host
    n = info.num_outputs
    variadic = bool(op.outputs) and op.outputs[-1].variadic
    # Values for optional outputs past the node's last one are dropped.
    most = len(op.outputs) if all(p.optional for p in op.outputs[n:]) else n
    constraints = dict(op.types)
    for key, allowed in narrowed.items():
        if isinstance(key, str) and key in constraints:
            constraints[key] = [type_string(t) for t in allowed]
    specs = output_specs(
        info,
        output_params=[p.type for p in op.outputs],
        input_params=[p.type for p in op.inputs],
        constraints=constraints,
        host_outputs=[host] * n,
    )
    return checked_compute(
        fn,
        specs,
        f"custom operator {op.qualified_name} (node {info.name!r})",
        context=context,
        host_inputs=host,
        max_outputs=n if variadic else most,
    )


# -- registration ----------------------------------------------------------

_lock = threading.Lock()
_registered: dict[tuple[str, str, int], CustomOp] = {}


def register_schemas(ops: Iterable[CustomOp]) -> None:
    """Register the ops' schemas with onnx (once per op object).

    onnx keeps one schema table per process, so a schema outlives the
    session that registered it; registering another definition of the same
    ``domain::name`` at the same ``since`` replaces the earlier one.

    Raises:
        ValueError: the op would replace a schema onnx itself defines.
    """
    with _lock:
        changed = False
        for op in ops:
            key = (op.domain, op.name, op.since)
            if _registered.get(key) is op:
                continue
            if key in _registered:
                onnx.defs.deregister_schema(op.name, op.since, op.domain)
            elif _has_exact_schema(op):
                raise ValueError(
                    f"custom operator {op.qualified_name} (since {op.since}) is already "
                    "defined by onnx or another library; choose another domain"
                )
            onnx.defs.register_schema(op.schema())
            _registered[key] = op
            changed = True
        if changed:
            # Lookups cached while the op was unknown (or had other defaults).
            reset_schema_cache()


def _has_exact_schema(op: CustomOp) -> bool:
    try:
        schema = onnx.defs.get_schema(op.name, op.since, op.domain)
    except onnx.defs.SchemaError:
        return False
    return bool(schema.since_version == op.since)


def merge_ops(*groups: Iterable[CustomOp]) -> list[CustomOp]:
    """Ops of several sources; a later source's op replaces an earlier one
    with the same ``domain::name`` and ``since``."""
    merged: dict[tuple[str, str, int], CustomOp] = {}
    for group in groups:
        for op in group:
            if not isinstance(op, CustomOp):
                raise TypeError(f"expected an ep_sdk.CustomOp (ortcore.CustomOp), got {op!r}")
            merged[(op.domain, op.name, op.since)] = op
    return list(merged.values())


def session_ops(*groups: Iterable[CustomOp]) -> list[CustomOp]:
    """Merge a session's custom ops (see :func:`merge_ops`) and register their schemas.

    Raises:
        InvalidArgument: an entry is not a ``CustomOp``, or its schema clashes.
    """
    try:
        ops = merge_ops(*groups)
        register_schemas(ops)
    except (TypeError, ValueError) as exc:
        raise InvalidArgument(f"register_custom_ops: {exc}") from exc
    return ops


def attach_kernels(providers: Iterable[ExecutionProvider], ops: Sequence[CustomOp]) -> None:
    """Give each provider instance the custom-op kernels registered for it.

    Raises:
        InvalidArgument: a kernel overlaps one the provider already has.
    """
    for provider in providers:
        defs = [k for op in ops for k in checked_kernels(op, provider)]
        if defs:
            try:
                provider.add_kernels(defs)
            except ValueError as exc:
                raise InvalidArgument(
                    f"custom operator kernels for {provider.name}: {exc}"
                ) from exc
