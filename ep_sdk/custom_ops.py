"""Custom operators defined in Python: schema, shape function, kernels (new in SDK 1.1).

An operator is described once (:func:`custom_op`) and given kernels for the
providers that should run it::

    import ep_sdk
    import numpy as np

    scale = ep_sdk.custom_op(
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

A plugin offers such operators to every session from its
``ortcore_custom_ops`` hook; a program registers them for one session with
``SessionOptions.register_custom_ops``. ``ortcore.custom_op``,
``ortcore.CustomOp``, ``ortcore.Param`` and ``ortcore.TensorType`` are these
same objects (they lived in ``ortcore.custom_ops`` before SDK 1.1).

What the host does with them, not here: it registers the schema with onnx
(``onnx.defs.register_schema``: ``onnx.checker`` and onnx's shape inference
then accept models that use the op; the shape function, ``shape=`` or
``@op.shape_function``, is the schema's inference function), checks every
output a kernel returns against the op's declaration, and gives the kernels to
the session's provider instances only (``ExecutionProvider.add_kernels``): a
provider's own registry, which every session shares, never changes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import onnx
import onnx.defs
import onnx_ir as ir

from .dtypes import type_string
from .registry import KernelBuilder, KernelDef

if TYPE_CHECKING:
    from .provider import ExecutionProvider

__all__ = [
    "ONNX_DOMAINS",
    "CustomOp",
    "Param",
    "ShapeFunction",
    "TensorType",
    "custom_op",
]

ONNX_DOMAINS = frozenset({"", "ai.onnx", "ai.onnx.ml", "ai.onnx.preview.training"})
"""The op domains onnx defines; an op of any other domain is a custom operator
(of the session, of a plugin, or of the model's own functions)."""


@dataclass(frozen=True)
class TensorType:
    """A tensor's static type, as a shape function sees and returns it.

    Attributes:
        dtype: element type (``None``: unknown).
        shape: dims (ints, symbolic names, or ``None`` for unknown dims);
            ``None`` when even the rank is unknown.
    """

    dtype: ir.DataType | None = None
    shape: tuple[int | str | None, ...] | None = None


ShapeFunction = Callable[[list[TensorType], dict[str, Any]], Sequence[TensorType | None]]
"""``(input types, attributes with defaults) -> one TensorType (or None) per output``."""


@dataclass(frozen=True)
class Param:
    """A formal input or output of a custom operator.

    ``"X"``, ``"X: T"``, ``"X: T?"`` (optional) and ``"X: T..."`` (variadic)
    are accepted wherever a ``Param`` is.

    Attributes:
        name: the parameter's name.
        type: its type parameter (a key of the op's ``types``).
        optional: the input or output may be omitted.
        variadic: it takes any number of values (only the last one).
    """

    name: str
    type: str = "T"
    optional: bool = False
    variadic: bool = False

    @classmethod
    def parse(cls, spec: str | Param) -> Param:
        """Build a ``Param`` from its text form (or return it unchanged)."""
        if isinstance(spec, Param):
            return spec
        name, _, tp = (part.strip() for part in spec.partition(":"))
        optional = tp.endswith("?")
        variadic = tp.endswith("...")
        tp = tp.rstrip("?.").strip() or "T"
        if not name.isidentifier():
            raise ValueError(f"custom op parameter {spec!r}: {name!r} is not a valid name")
        return cls(name, tp, optional, variadic)


_ATTR_TYPES: Mapping[Any, onnx.defs.OpSchema.AttrType] = {
    float: onnx.defs.OpSchema.AttrType.FLOAT,
    int: onnx.defs.OpSchema.AttrType.INT,
    str: onnx.defs.OpSchema.AttrType.STRING,
    np.ndarray: onnx.defs.OpSchema.AttrType.TENSOR,
}
_LIST_TYPES: Mapping[Any, onnx.defs.OpSchema.AttrType] = {
    float: onnx.defs.OpSchema.AttrType.FLOATS,
    int: onnx.defs.OpSchema.AttrType.INTS,
    str: onnx.defs.OpSchema.AttrType.STRINGS,
}


def _tensor_type_strings(types: Iterable[str | ir.DataType]) -> list[str]:
    out = []
    for t in types:
        if isinstance(t, ir.DataType):
            out.append(type_string(t))
        elif t.startswith(("tensor(", "seq(", "optional(")):
            out.append(t)
        else:
            out.append(f"tensor({t})")
    return sorted(set(out))


_ALL_TENSORS = _tensor_type_strings(
    ["float", "double", "float16", "bfloat16", "bool", "string"]
    + [f"{s}int{b}" for s in ("", "u") for b in (8, 16, 32, 64)]
)


class CustomOp:
    """One operator defined in Python; see :func:`custom_op`.

    Attributes:
        domain: the operator's domain.
        name: the op type.
        since: the first opset version of ``domain`` that has it.
        inputs: formal inputs.
        outputs: formal outputs.
        attributes: name -> default value (``None`` for required ones).
        types: type parameter -> allowed type strings (``tensor(float)``).
    """

    def __init__(
        self,
        *,
        domain: str,
        name: str,
        inputs: Sequence[str | Param],
        outputs: Sequence[str | Param],
        attributes: Mapping[str, Any] | None = None,
        types: Mapping[str, Iterable[str | ir.DataType]] | None = None,
        shape: ShapeFunction | None = None,
        since: int = 1,
        doc: str = "",
    ) -> None:
        if not domain or domain in ("ai.onnx", "ai.onnx.ml"):
            raise ValueError(
                f"custom op {name!r}: give it a domain of your own (e.g. 'my.ops'), not {domain!r}"
            )
        self.domain = domain
        self.name = name
        self.since = since
        self.doc = doc
        self.inputs = [Param.parse(p) for p in inputs]
        self.outputs = [Param.parse(p) for p in outputs]
        self._attr_specs = dict(attributes or {})
        params = {p.type for p in [*self.inputs, *self.outputs]}
        given = {k: _tensor_type_strings(v) for k, v in (types or {}).items()}
        unknown = sorted(set(given) - params)
        if unknown:
            raise ValueError(f"custom op {self.qualified_name}: unused type parameters {unknown}")
        self.types = {p: given.get(p, _ALL_TENSORS) for p in sorted(params)}
        self._shape = shape
        self._kernels: dict[str, list[KernelDef]] = {}
        self._schema: onnx.defs.OpSchema | None = None

    # -- description -----------------------------------------------------

    @property
    def qualified_name(self) -> str:
        """``domain::name``, as error messages spell it."""
        return f"{self.domain}::{self.name}"

    @property
    def attributes(self) -> dict[str, Any]:
        """Attribute name -> default value (``None`` for required attributes)."""
        return {k: (None if isinstance(v, type) else v) for k, v in self._attr_specs.items()}

    def shape_function(self, fn: ShapeFunction) -> ShapeFunction:
        """Decorator that sets the op's shape function (see :data:`ShapeFunction`)."""
        self._shape = fn
        self._schema = None
        return fn

    def __call__(self, fn: ShapeFunction) -> CustomOp:
        """Using the op as a decorator sets its shape function and returns the op."""
        self.shape_function(fn)
        return self

    def kernel(
        self,
        provider: str,
        *,
        types: Mapping[str | int, Iterable[ir.DataType]] | None = None,
        context: bool = False,
    ) -> Callable[[KernelBuilder], KernelBuilder]:
        """Decorator registering a kernel builder of this op for ``provider``.

        The builder receives an :class:`ep_sdk.NodeInfo` (attributes with the
        op's defaults applied) and returns the compute function, exactly as a
        provider's own kernels do. The host checks what the compute function
        returns against the op's declaration when it gives the kernel to a
        session's provider (ortcore: ``ortcore.kernel_outputs``).

        Args:
            provider: provider name or alias (``CPUExecutionProvider``, ``cpu``).
            types: type constraints, as ``KernelRegistry.kernel`` takes them.
            context: the compute function takes an ``ep_sdk.RunContext`` first.
        """

        def decorate(builder: KernelBuilder) -> KernelBuilder:
            narrowed = {k: frozenset(v) for k, v in (types or {}).items()}
            self._kernels.setdefault(provider, []).append(
                KernelDef(
                    op_type=self.name,
                    domain=self.domain,
                    since=self.since,
                    until=None,
                    builder=builder,
                    types=narrowed,
                    context=context,
                )
            )
            return builder

        return decorate

    def kernels_for(self, provider: type[ExecutionProvider] | ExecutionProvider) -> list[KernelDef]:
        """The kernels given for ``provider`` (matched by name or alias), as
        registered: the host wraps their builders with its checks."""
        names = {provider.name.lower(), *(a.lower() for a in provider.aliases)}
        return [k for key, defs in self._kernels.items() if key.lower() in names for k in defs]

    @property
    def kernel_providers(self) -> list[str]:
        """Names the kernels were registered for."""
        return sorted(self._kernels)

    # -- onnx schema -------------------------------------------------------

    def schema(self) -> onnx.defs.OpSchema:
        """The ``onnx.defs.OpSchema`` of this op (with its inference function)."""
        if self._schema is not None:
            return self._schema
        S = onnx.defs.OpSchema
        option = {
            (False, False): S.FormalParameterOption.Single,
            (True, False): S.FormalParameterOption.Optional,
            (False, True): S.FormalParameterOption.Variadic,
            (True, True): S.FormalParameterOption.Variadic,
        }

        def formal(p: Param) -> Any:
            return S.FormalParameter(
                p.name, p.type, "", param_option=option[p.optional, p.variadic]
            )

        schema = S(
            self.name,
            self.domain,
            self.since,
            self.doc,
            inputs=[formal(p) for p in self.inputs],
            outputs=[formal(p) for p in self.outputs],
            type_constraints=[(k, v, "") for k, v in self.types.items()],
            attributes=[self._attribute(k, v) for k, v in self._attr_specs.items()],
        )
        schema.set_type_and_shape_inference_function(self._infer)
        self._schema = schema
        return schema

    def _attribute(self, name: str, spec: Any) -> Any:
        S = onnx.defs.OpSchema
        if isinstance(spec, type):
            if spec not in _ATTR_TYPES:
                raise ValueError(f"custom op {self.qualified_name}: attribute {name!r} type {spec}")
            return S.Attribute(name, _ATTR_TYPES[spec], "", required=True)
        value = np.asarray(spec) if isinstance(spec, np.ndarray) else spec
        if isinstance(value, np.ndarray):
            proto = onnx.helper.make_attribute(name, onnx.numpy_helper.from_array(value))
        else:
            proto = onnx.helper.make_attribute(name, value)
        return S.Attribute(name, proto, "")

    def _defaults(self) -> dict[str, Any]:
        return {k: v for k, v in self.attributes.items() if v is not None}

    def _infer(self, ctx: Any) -> None:
        inputs = []
        for i in range(ctx.get_num_inputs()):
            t = ctx.get_input_type(i) if ctx.has_input(i) else None
            inputs.append(_tensor_type(t))
        attrs = self._defaults()
        for name in self._attr_specs:
            proto = ctx.get_attribute(name)
            if proto is not None:
                attrs[name] = _attribute_value(proto)
        try:
            results = (
                self._shape(inputs, attrs) if self._shape is not None else self._same_type(inputs)
            )
        except Exception as exc:
            raise ValueError(
                f"the shape function of custom operator {self.qualified_name} failed: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        results = list(results)
        n = ctx.get_num_outputs()
        # Types for optional outputs past the node's last one are dropped,
        # as the kernel's values for them are.
        if n < len(results) <= len(self.outputs) and all(p.optional for p in self.outputs[n:]):
            results = results[:n]
        if len(results) > n and not self.outputs[-1:][0].variadic:
            raise ValueError(
                f"the shape function of custom operator {self.qualified_name} returned "
                f"{len(results)} types for {ctx.get_num_outputs()} outputs"
            )
        for i, r in enumerate(results[: ctx.get_num_outputs()]):
            if r is None or r.dtype is None:
                continue
            shape = None if r.shape is None else list(r.shape)
            ctx.set_output_type(i, onnx.helper.make_tensor_type_proto(int(r.dtype), shape))

    def _same_type(self, inputs: list[TensorType]) -> list[TensorType | None]:
        """Default inference: an output gets the element type of the first
        input with the same type parameter; its shape stays unknown."""
        out: list[TensorType | None] = []
        for o in self.outputs:
            match = next(
                (
                    t
                    for p, t in zip(self.inputs, inputs)
                    if p.type == o.type and t.dtype is not None
                ),
                None,
            )
            out.append(TensorType(match.dtype) if match is not None else None)
        return out

    def __repr__(self) -> str:
        return f"<CustomOp {self.qualified_name} since {self.since}>"


def custom_op(
    *,
    domain: str,
    name: str,
    inputs: Sequence[str | Param],
    outputs: Sequence[str | Param],
    attributes: Mapping[str, Any] | None = None,
    types: Mapping[str, Iterable[str | ir.DataType]] | None = None,
    shape: ShapeFunction | None = None,
    since: int = 1,
    doc: str = "",
) -> CustomOp:
    """Define a custom operator.

    Args:
        domain: the op's domain (your own, e.g. ``"my.ops"``); a model that
            uses the op imports this domain at version ``since`` or later.
        name: the op type.
        inputs: formal inputs, ``"X"``, ``"X: T"``, ``"X: T?"`` (optional)
            or ``"X: T..."`` (variadic), or :class:`Param` objects.
        outputs: formal outputs, written the same way.
        attributes: name -> default value (``float``, ``int``, ``str``,
            lists of those, numpy arrays), or a type (``float``) for a
            required attribute.
        types: type parameter -> allowed element types (``"float"``,
            ``"tensor(int64)"`` or ``ir.DataType``); unlisted parameters
            allow every tensor type.
        shape: the shape function (or set it later with
            ``@op.shape_function``); without one an output gets the element
            type of the first input that shares its type parameter.
        since: first opset version of ``domain`` with this op.
        doc: description, kept in the schema.

    Returns:
        the :class:`CustomOp`; add kernels with ``@op.kernel("provider")``.
        Used as a decorator, it takes the decorated function as its shape
        function.
    """
    return CustomOp(
        domain=domain,
        name=name,
        inputs=inputs,
        outputs=outputs,
        attributes=attributes,
        types=types,
        shape=shape,
        since=since,
        doc=doc,
    )


def _tensor_type(t: onnx.TypeProto | None) -> TensorType:
    if t is None or t.WhichOneof("value") != "tensor_type":
        return TensorType()
    tt = t.tensor_type
    dtype = ir.DataType(tt.elem_type) if tt.elem_type else None
    if not tt.HasField("shape"):
        return TensorType(dtype)
    dims: list[int | str | None] = []
    for d in tt.shape.dim:
        which = d.WhichOneof("value")
        dims.append(
            d.dim_value if which == "dim_value" else d.dim_param if which == "dim_param" else None
        )
    return TensorType(dtype, tuple(dims))


def _attribute_value(proto: onnx.AttributeProto) -> Any:
    value = onnx.helper.get_attribute_value(proto)
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if isinstance(value, list) and value and isinstance(value[0], bytes):
        return [v.decode("utf-8") for v in value]
    if isinstance(value, onnx.TensorProto):
        return onnx.numpy_helper.to_array(value)
    return value
