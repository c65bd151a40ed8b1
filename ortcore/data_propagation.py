"""Bound what onnx's data propagation would materialize before letting it run.

With ``data_prop=True``, onnx's shape inference evaluates integer vectors
through the ops that have a data-propagation function (``Shape``, ``Size``,
``Gather``, ``Slice``, ``Concat``, ``Add``, ``Sub``, ``Mul``, ``Cast``,
``Squeeze``, ``Unsqueeze`` in onnx 1.23), so that ``Reshape(x, Concat(
Shape(y)[0], [-1]))`` gets a precise shape. Each vector is kept as a
``TensorShapeProto``, about 76 bytes an element, one copy for every value
along the way, and a vector of unknown values still gets one empty element
each: an op that reads a 1-D tensor of known length N makes N of them. A
69-byte model (``x: float[100000000]``, ``Add(x, x)``) thus asks for 14 GB.
The length can be declared, come from an initializer or from any op's
inferred shape (``Range``, ``ConstantOfShape``, ``Tile``), or be revealed by
data propagation itself (``ConstantOfShape(Gather(Shape(x), 0))`` with
``x: float[100000000, 1]``); a chain of ``Cast`` nodes copies a vector once a node.

:func:`plan_data_propagation` reads the model as shape-inferred *without*
data propagation and walks it in onnx's order (subgraphs at their node),
bounding for each value that data propagation would give data its length
and its largest known element: constants and vectors a data-propagating op
reads (each once, as onnx caches them), and each such op's output by the
op's rule (``Concat`` the sum of its inputs' lengths, ``Shape`` the rank and
the largest dim, ``Mul`` the product of the largest elements, ...). The
lengths add up to the elements data propagation would create, which must
stay within :data:`DATA_PROPAGATION_BUDGET`.

A value whose type data propagation may still change is *tainted*: its op
read propagated data as a shape (``Reshape``, ``Expand``,
``ConstantOfShape``, ``Resize``, ``CenterCropPad``: :data:`SHAPE_READERS`),
or one of its inputs is tainted. Its
dims that are unknown without data propagation are bounded by what the op
could make of its inputs (their elements, the largest propagated element,
its attribute values and small constants), so a tainted vector that a
data-propagating op reads is as long as that bound at most. Data read as a
shape can become a rank, so it is also bounded by :data:`MAX_SHAPE_DATA`.

The walk is in time linear in the graph: a first one keeps no taints (a
node that reads no data costs a dict lookup) and is exact unless a value
whose length or rank a taint could change descends from a node that would
taint; only then does the full walk run. A model with no data-propagating
op, or with nothing they could read as data, is not walked at all.

Model-local functions the inliner kept (their bodies get no inferred types
to bound them by), ops whose data propagation this module does not know and
subgraphs nested past Python's recursion limit are not analysed: such a
model is inferred without data propagation.
"""

from __future__ import annotations

from collections import ChainMap
from collections.abc import Callable, Iterable, MutableMapping
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import onnx
from onnx import numpy_helper

__all__ = [
    "DATA_PROPAGATION_BUDGET",
    "MAX_SHAPE_DATA",
    "PROPAGATED_OPS",
    "Verdict",
    "plan_data_propagation",
]

DATA_PROPAGATION_BUDGET = 1 << 20
"""Most elements data propagation may materialize in one model (about 80 MB).

Shape vectors are as long as a tensor's rank, so a real model with a
hundred thousand shape computations stays well under it; past it the model
is inferred without data propagation (shapes that need it stay symbolic)."""

MAX_SHAPE_DATA = 1024
"""Longest propagated vector an op other than a data-propagating one may
read (``Reshape``'s shape, ``Expand``'s, ``ConstantOfShape``'s input): it can
become a tensor's rank. onnx's ``kMaxMaterializedRank`` is the same bound."""

SMALL_CONSTANT = 4096
"""Constants up to this many elements are read for their largest value
(they may be shapes, pads, scales or repeats that make a dim); longer ones
are weights, whose values become no dims."""

UNBOUNDED = 1 << 62


def _cap(value: int) -> int:
    return value if value < UNBOUNDED else UNBOUNDED


# Each op with a data-propagation function: the inputs it reads as data
# (None: all), and the length and largest element of the data it writes to
# output 0, from those of the data read and input 0's rank and largest dim.
# Their shape inference functions read no propagated data (in onnx 1.23 only
# Reshape, Expand, ConstantOfShape, Resize and CenterCropPad do), so data
# never changes their output types.
_Data = tuple[int, int]  # (length, largest |element| known)
_Rule = tuple[tuple[int, ...] | None, Callable[[list[_Data], int, int], _Data]]


def _first(data: list[_Data], _rank: int, _dim: int) -> _Data:
    return data[0] if data else (0, 0)


def _widest(data: list[_Data], _rank: int, _dim: int) -> _Data:
    return (max(d[0] for d in data), sum(d[1] for d in data)) if data else (0, 0)


def _product(data: list[_Data], _rank: int, _dim: int) -> _Data:
    top = 1
    for d in data:
        top = _cap(top * d[1])
    return (max(d[0] for d in data), top) if data else (0, 0)


_RULES: dict[str, _Rule] = {
    "Shape": ((), lambda _data, rank, dim: (rank, dim)),
    "Size": ((0,), lambda data, _rank, _dim: (1, data[0][0]) if data else (0, 0)),
    "Add": ((0, 1), _widest),
    "Sub": ((0, 1), _widest),
    "Mul": ((0, 1), _product),
    "Cast": ((0,), _first),
    "Squeeze": ((0,), _first),
    "Unsqueeze": ((0,), _first),
    "Slice": (None, _first),
    "Gather": ((0, 1), lambda data, _r, _d: (data[1][0], data[0][1]) if len(data) > 1 else (0, 0)),
    "Concat": (
        None,
        lambda data, _r, _d: (sum(d[0] for d in data), max((d[1] for d in data), default=0)),
    ),
}

PROPAGATED_OPS = frozenset(_RULES)
"""The ops of the default domain whose data propagation is bounded here."""

SHAPE_READERS = {"Reshape": 1, "Expand": 1, "ConstantOfShape": 0, "Resize": 3, "CenterCropPad": 1}
"""The ops of the default domain whose shape inference reads propagated data
(``getShapeInput``), and the input it reads, in every onnx version up to
:data:`CHECKED_ONNX`. With a newer onnx every input of every op that is not
a data-propagating one is taken to be read so."""

# Ops each of whose output dims is one of their inputs' dims, or 1, or less
# (elementwise, broadcasting, reductions, transposes, gathers, MatMul), or
# one of their subgraphs' (If, Loop, Scan): a tainted output's dims are
# bounded by those dims, not by the inputs' sizes.
_SAME_DIMS = frozenset(
    """Abs Acos Acosh Asin Asinh Atan Atanh BitwiseNot Ceil Celu Clip Cos Cosh Elu Erf Exp
    Floor Gelu HardSigmoid HardSwish Identity IsInf IsNaN LeakyRelu Log Mish Neg Not
    Reciprocal Relu Round Selu Shrink Sigmoid Sign Sin Sinh Softplus Softsign Sqrt Tan Tanh
    ThresholdedRelu Cast CastLike Dropout Softmax LogSoftmax Hardmax LpNormalization
    LayerNormalization RMSNormalization InstanceNormalization BatchNormalization Add Sub Mul
    Div Pow Mod BitShift BitwiseAnd BitwiseOr BitwiseXor And Or Xor Equal Greater
    GreaterOrEqual Less LessOrEqual Max Min Mean Sum PRelu Where Transpose Squeeze
    Unsqueeze ReduceSum ReduceMean ReduceMax ReduceMin ReduceProd ReduceL1 ReduceL2
    ReduceLogSum ReduceLogSumExp ReduceSumSquare ArgMax ArgMin MatMul Gemm CumSum Trilu
    Gather GatherElements GatherND ScatterElements ScatterND Slice Split Einsum
    If Loop Scan""".split()
)

# Ops whose subgraphs onnx's shape inference infers (the checker refuses
# graph attributes on other ops of the default domain; other domains' ops
# have no inference that would visit theirs).
_GRAPH_OPS = frozenset({"If", "Loop", "Scan", "SequenceMap"})

CHECKED_ONNX = (1, 23)
"""The newest onnx (major, minor) whose sources these tables were read from."""


def _onnx_version() -> tuple[int, int]:
    try:
        major, minor = onnx.__version__.split(".")[:2]
        return int(major), int(minor)
    except ValueError:
        return (UNBOUNDED, 0)


_KNOWN_ONNX = _onnx_version() <= CHECKED_ONNX


@dataclass(frozen=True)
class Verdict:
    """Whether to run onnx's shape inference again with data propagation.

    Attributes:
        propagate: run it: there are values to propagate and they are bounded.
        elements: the bound on the elements it would materialize, where it
            has one (:data:`UNBOUNDED` otherwise).
        reason: why not, when there is something to propagate but it is not
            bounded or over the budget (empty otherwise).
    """

    propagate: bool
    elements: int = 0
    reason: str = ""


class _Unbounded(Exception):
    """Data propagation cannot be bounded; the message says where."""


class _NeedFullWalk(Exception):
    """The quick walk met a subgraph."""


def _dims(t: onnx.TypeProto | None) -> list[int | None] | None:
    """A tensor type's dims (None each where unknown), or None for no rank."""
    if t is None or t.WhichOneof("value") != "tensor_type" or not t.tensor_type.HasField("shape"):
        return None
    return [d.dim_value if d.HasField("dim_value") else None for d in t.tensor_type.shape.dim]


def _unknown(dims: list[int | None] | None) -> bool:
    return dims is None or None in dims


def _show(t: onnx.TypeProto | None) -> str:
    dims = _dims(t)
    if dims is None:
        return "of unknown rank"
    return "[" + ", ".join("?" if d is None else str(d) for d in dims) + "]"


@lru_cache(maxsize=4096)
def _kind(domain: str, op_type: str, version: int) -> tuple[str, int]:
    """("prop" | "body" | "other" | "none", body size) of an op at an opset."""
    try:
        schema = onnx.defs.get_schema(op_type, version, domain)
    except onnx.defs.SchemaError:
        return ("none", 0)
    if schema.has_data_propagation_function:
        return ("prop", 0)
    # (has_function is missing from onnx's type stubs)
    if not schema.has_type_and_shape_inference_function and getattr(schema, "has_function", False):
        # onnx infers such a node through its function body, with the
        # caller's types and data: the body's ops propagate too.
        return ("body", len(schema.function_body.node))
    return ("other", 0)


_INTEGERS = (onnx.TensorProto.INT64, onnx.TensorProto.INT32)

# A constant: an initializer's tensor, or a Constant node (its ``value`` or
# ``value_int(s)``); read on demand, as most are never read as data.
_Source = onnx.TensorProto | onnx.NodeProto


def _constant_tensor(source: _Source) -> onnx.TensorProto | list[int] | None:
    if isinstance(source, onnx.TensorProto):
        return source
    for attr in source.attribute:
        if attr.name == "value" and attr.type == onnx.AttributeProto.TENSOR:
            return attr.t
        if attr.name == "value_ints":
            return list(attr.ints)
        if attr.name == "value_int":
            return [attr.i]
    return None


def _constant_length(source: _Source) -> int:
    """Elements onnx keeps as data for a constant: integer scalars and
    vectors only (``value_int(s)`` become int64 ones)."""
    t = _constant_tensor(source)
    if isinstance(t, list):
        return len(t)
    if t is None or len(t.dims) > 1 or t.data_type not in _INTEGERS:
        return 0
    return max(int(t.dims[0]), 0) if t.dims else 1


def _constant_top(source: _Source) -> int:
    """Largest |value| of a constant of at most :data:`SMALL_CONSTANT` elements (0 otherwise)."""
    t = _constant_tensor(source)
    if isinstance(t, list):
        return max((abs(v) for v in t), default=0)
    if t is None or t.data_location == onnx.TensorProto.EXTERNAL:
        return 0
    if np.prod([max(int(d), 0) for d in t.dims], dtype=np.float64) > SMALL_CONSTANT:
        return 0
    try:
        values = numpy_helper.to_array(t)
        if not values.size or values.dtype.kind not in "iuf":
            return 0
        return int(min(float(np.abs(values.astype(np.float64)).max()), UNBOUNDED))
    except (ValueError, TypeError, OverflowError):  # NaN, or data checked elsewhere
        return UNBOUNDED


class _Walk:
    """One pass over the graphs in onnx's inference order (see module doc)."""

    def __init__(self, model: onnx.ModelProto) -> None:
        self.opsets = {_domain(o.domain): o.version for o in model.opset_import}
        self.functions = {(_domain(f.domain), f.name, f.overload) for f in model.functions}
        self.kinds: dict[tuple[str, str], tuple[str, int]] = {}
        # By id of a TypeProto or constant the maps below hold (alive as long).
        self.dims_cache: dict[int, list[int | None] | None] = {}
        self.top_cache: dict[int, int] = {}
        self.data: dict[str, _Data] = {}  # onnx's one map of propagated data
        self.bound: dict[str, int] = {}  # tainted values: their largest possible dim
        self.total = 0
        # A quick walk (see plan_data_propagation) taints nothing: it notes
        # the nodes that would taint and the values whose length or rank a
        # taint could change, and gives up on subgraphs.
        self.quick = False
        self.sources: set[int] = set()  # positions of the nodes that would taint
        self.position = 0
        self.unsure: list[str] = []

    def kind(self, domain: str, op_type: str) -> tuple[str, int]:
        key = (domain, op_type)
        found = self.kinds.get(key)
        if found is None:
            version = self.opsets.get(_domain(domain))
            found = _kind(_domain(domain), op_type, version) if version is not None else ("none", 0)
            if found[0] == "none" and any(
                f[0] == _domain(domain) and f[1] == op_type for f in self.functions
            ):
                found = ("call", 0)
            elif (
                _KNOWN_ONNX
                and found[0] in ("other", "none")
                and not (
                    op_type in _GRAPH_OPS or (_domain(domain) == "" and op_type in SHAPE_READERS)
                )
            ):
                found = ("plain", 0)
            self.kinds[key] = found
        return found

    def dims_of(
        self,
        name: str,
        types: MutableMapping[str, onnx.TypeProto],
        consts: MutableMapping[str, _Source],
    ) -> list[int | None] | None:
        """``name``'s dims without data propagation (an initializer's if untyped)."""
        t = types.get(name)
        if t is None:
            source = consts.get(name)
            if isinstance(source, onnx.TensorProto):
                return [int(d) for d in source.dims]
            return None
        key = id(t)  # the maps hold t: its id stays its own
        if key not in self.dims_cache:
            self.dims_cache[key] = _dims(t)
        return self.dims_cache[key]

    def constant_top(self, source: _Source) -> int:
        key = id(source)
        if key not in self.top_cache:
            self.top_cache[key] = _constant_top(source)
        return self.top_cache[key]

    def graph(
        self,
        g: onnx.GraphProto,
        types: MutableMapping[str, onnx.TypeProto],
        consts: MutableMapping[str, _Source],
        input_bound: int,
    ) -> int:
        """Walk ``g``; return the largest bound of what became tainted in it (-1: nothing)."""
        for vi in (*g.input, *g.output, *g.value_info):
            types[vi.name] = vi.type
        for t in g.initializer:
            consts[t.name] = t
        worst = -1
        if input_bound >= 0:
            for vi in g.input:
                self.bound[vi.name] = input_bound
            worst = input_bound
        for position, node in enumerate(g.node):
            self.position = position
            worst = max(worst, self.node(node, types, consts))
        return worst

    def node(
        self,
        node: onnx.NodeProto,
        types: MutableMapping[str, onnx.TypeProto],
        consts: MutableMapping[str, _Source],
    ) -> int:
        """Walk one node; return the bound its outputs got if tainted, else -1."""
        op_type, raw_domain = node.op_type, node.domain
        kind, body = self.kind(raw_domain, op_type)
        if kind == "plain" and not self.bound:
            # Reads no data and no input is tainted: nothing to do, fast
            # (a large graph is mostly such nodes).
            if op_type == "Constant" and _domain(raw_domain) == "":
                consts[node.output[0]] = node
            return -1
        domain = _domain(raw_domain)
        if kind == "call":
            raise _Unbounded(
                f"{_where(node)} calls model-local function {domain or 'ai.onnx'}:{op_type},"
                " which the inliner kept (its opsets differ from the model's)"
            )
        if self.quick and op_type in _GRAPH_OPS:
            raise _NeedFullWalk
        raw_inputs = list(node.input)
        bound_of = self.bound
        tainted = any(name in bound_of for name in raw_inputs if name)
        top = 0  # largest element of the data the node reads
        if kind == "prop":
            top = self.propagate(node, op_type, domain, raw_inputs, types, consts)
        elif kind == "body":
            read = [self.read(node, name, types, consts) for name in raw_inputs if name]
            length = max((d[0] for d in read), default=0)
            top = max((d[1] for d in read), default=0)
            if length:
                self.add(node, _cap(length * (body + 1)), "its function body")
                for out in node.output:
                    if out:
                        self.data[out] = (length, top)
                tainted = True
        else:
            for name in self.shape_inputs(op_type, domain, raw_inputs):
                if name in self.data and name not in consts:
                    length, value = self.data[name]
                    if length > MAX_SHAPE_DATA:
                        raise _Unbounded(
                            f"{_where(node)} reads {name!r} as {length} propagated values"
                            f" (more than {MAX_SHAPE_DATA}: a shape that long is not a shape)"
                        )
                    top = max(top, value)
                    tainted = True
        inner = -1
        if op_type in _GRAPH_OPS:
            for attr in node.attribute:
                for sub in _graphs(attr):
                    start = self.output_bound(node, domain, types, consts, top) if tainted else -1
                    inner = max(
                        inner, self.graph(sub, ChainMap({}, types), ChainMap({}, consts), start)
                    )
        elif op_type == "Constant" and domain == "":
            consts[node.output[0]] = node
        if not tainted and inner < 0:
            return -1
        if self.quick:
            self.sources.add(self.position)
            return -1
        outputs = [out for out in node.output if out]
        bound = 0  # a bound is only read where a dim is unknown
        if any(_unknown(self.dims_of(out, types, consts)) for out in outputs):
            bound = max(inner, self.output_bound(node, domain, types, consts, top))
        for out in outputs:
            bound_of[out] = max(bound_of.get(out, 0), bound)
        return max(bound, inner)

    @staticmethod
    def shape_inputs(op_type: str, domain: str, inputs: list[str]) -> list[str]:
        """The inputs whose propagated data the op's shape inference reads."""
        if not _KNOWN_ONNX:
            return [name for name in inputs if name]
        index = SHAPE_READERS.get(op_type, -1) if domain == "" else -1
        return [inputs[index]] if 0 <= index < len(inputs) and inputs[index] else []

    def output_bound(
        self,
        node: onnx.NodeProto,
        domain: str,
        types: MutableMapping[str, onnx.TypeProto],
        consts: MutableMapping[str, _Source],
        top: int,
    ) -> int:
        """Largest dim a tainted ``node`` could give an output (or a subgraph input)."""
        if domain == "" and node.op_type in _SAME_DIMS:
            return max((self.largest_dim(n, types, consts) for n in node.input if n), default=0)
        return self.dim_bound(node, types, consts, top)

    def dim_bound(
        self,
        node: onnx.NodeProto,
        types: MutableMapping[str, onnx.TypeProto],
        consts: MutableMapping[str, _Source],
        top: int,
    ) -> int:
        """Largest dim ``node`` could give an output from what data propagation
        may reveal: it is made of its inputs' elements, the propagated values it
        reads, its constants' values and its attributes' numbers, at most
        (1 + the elements and numbers added up) x (1 + the largest value)."""
        total = 1
        largest = top
        for name in node.input:
            if not name:
                continue
            total = _cap(total + self.elements(name, types, consts))
            if name in consts:
                largest = max(largest, self.constant_top(consts[name]))
        for attr in node.attribute:
            total = _cap(total + abs(attr.i) + sum(abs(i) for i in attr.ints))
            floats = [abs(attr.f), *(abs(f) for f in attr.floats)]
            largest = max(largest, int(min(max(floats), UNBOUNDED)))
        return _cap(total * (1 + largest))

    def largest_dim(
        self,
        name: str,
        types: MutableMapping[str, onnx.TypeProto],
        consts: MutableMapping[str, _Source],
    ) -> int:
        """Bound on the largest dim ``name`` has as data propagation would type it."""
        dims = self.dims_of(name, types, consts)
        bound = self.bound.get(name)
        known = max((d for d in dims or () if d is not None), default=0)
        if bound is not None and (dims is None or None in dims):
            return max(known, bound)
        return known

    def elements(
        self,
        name: str,
        types: MutableMapping[str, onnx.TypeProto],
        consts: MutableMapping[str, _Source],
    ) -> int:
        """Bound on the elements ``name`` has as data propagation would type it
        (an unknown dim it cannot change counts 1: it gives no number)."""
        dims = self.dims_of(name, types, consts)
        bound = self.bound.get(name)
        if dims is None:
            return UNBOUNDED if bound is not None else 1
        total = 1
        for d in dims:
            total = _cap(total * (d if d is not None else (bound if bound is not None else 1)))
        return total

    def propagate(
        self,
        node: onnx.NodeProto,
        op_type: str,
        domain: str,
        inputs: list[str],
        types: MutableMapping[str, onnx.TypeProto],
        consts: MutableMapping[str, _Source],
    ) -> int:
        """Account for what a data-propagating op reads and writes; return
        the largest element it reads."""
        rule = _RULES.get(op_type) if domain == "" else None
        if rule is None:
            raise _Unbounded(
                f"{_where(node)}: onnx propagates data through {domain or 'ai.onnx'}:"
                f"{op_type}, which ortcore cannot bound"
            )
        reads, output_data = rule
        positions = range(len(inputs)) if reads is None else [i for i in reads if i < len(inputs)]
        data = [
            self.read(node, inputs[i], types, consts) if inputs[i] else (0, 0) for i in positions
        ]
        rank, dim = 0, 0
        if op_type == "Shape":
            source = inputs[0] if inputs else ""
            dims = self.dims_of(source, types, consts)
            bound = self.bound.get(source)
            if dims is None:
                if self.quick:
                    self.unsure.append(source)
                if bound is not None:
                    raise _Unbounded(
                        f"{_where(node)} reads {source!r}, whose rank only data propagation"
                        " would know"
                    )
                return 0  # no rank: no data, now or with data propagation
            rank = len(dims)
            dim = max((d if d is not None else (bound or 0) for d in dims), default=0)
        length, top = output_data(data, rank, dim)
        if length:
            out = node.output[0] if node.output else ""
            if out:
                self.add(node, length, f"output {out!r}")
                self.data[out] = (length, top)
        return max((d[1] for d in data), default=0)

    def read(
        self,
        node: onnx.NodeProto,
        name: str,
        types: MutableMapping[str, onnx.TypeProto],
        consts: MutableMapping[str, _Source],
    ) -> _Data:
        """What onnx materializes when ``node`` reads ``name`` as data."""
        if name in self.data:
            return self.data[name]
        if name in consts:
            length = _constant_length(consts[name])
            found = (length, self.constant_top(consts[name]) if length else 0)
        else:
            t = types.get(name)
            dims = self.dims_of(name, types, consts)
            bound = self.bound.get(name)
            if dims is not None and len(dims) == 1 and dims[0] is not None:
                length = dims[0]  # N unknown values for a 1-D tensor of length N
            elif self.quick and (dims is None or len(dims) == 1):
                self.unsure.append(name)
                length = 0
            elif bound is not None and (dims is None or len(dims) == 1):
                if bound >= UNBOUNDED:
                    raise _Unbounded(
                        f"{_where(node)} reads {name!r} ({_show(t)} without data"
                        " propagation), whose length only data propagation would know"
                    )
                length = bound
            else:
                length = 0
            found = (length, 0)
        if found[0]:
            self.add(node, found[0], f"input {name!r} ({_show(types.get(name))})")
            self.data[name] = found
        return found

    def add(self, node: onnx.NodeProto, elements: int, what: str) -> None:
        self.total = _cap(self.total + elements)
        if self.total > DATA_PROPAGATION_BUDGET:
            raise _Unbounded(
                f"{_where(node)}, {what}: data propagation would materialize more than"
                f" {DATA_PROPAGATION_BUDGET} values ({elements} here at most)"
            )


def _domain(domain: str) -> str:
    return "" if domain == "ai.onnx" else domain


def _where(node: onnx.NodeProto) -> str:
    return f"{node.op_type} node {node.name!r}"


def _graphs(attr: onnx.AttributeProto) -> list[onnx.GraphProto]:
    if attr.type == onnx.AttributeProto.GRAPH:
        return [attr.g]
    if attr.type == onnx.AttributeProto.GRAPHS:
        return list(attr.graphs)
    return []


def _has_vector(infos: Iterable[onnx.ValueInfoProto]) -> bool:
    """Whether a value info types a 1-D tensor of known length (distinct
    types only: a large graph has few)."""
    for key in {vi.type.SerializeToString() for vi in infos}:
        dims = _dims(onnx.TypeProto.FromString(key))
        if dims is not None and len(dims) == 1 and dims[0] is not None:
            return True
    return False


def _nothing_to_propagate(model: onnx.ModelProto, walk: _Walk) -> bool:
    """A quick look (one pass over the op types) for models to which data
    propagation gives no data at all: no data-propagating op, or only ones
    that read data which no integer constant and no 1-D tensor of known
    length could give, and no ``Shape`` (which always gives some)."""
    graphs, stack = [], [model.graph]
    found: set[str] = set()
    while stack:
        g = stack.pop()
        ops = {(n.domain, n.op_type) for n in g.node}
        graphs.append((g, any(op == "Constant" for _, op in ops)))
        for key in ops:
            kind = walk.kind(*key)[0]
            if kind in ("body", "call"):
                return False
            if kind == "prop" and (_domain(key[0]) != "" or key[1] not in _RULES):
                return False
            if kind == "prop":
                found.add(key[1])
        if any(op in _GRAPH_OPS for _, op in ops):
            for node in g.node:
                if node.op_type in _GRAPH_OPS:
                    for attr in node.attribute:
                        stack.extend(_graphs(attr))
    if not found:
        return True
    if "Shape" in found:
        return False
    for g, constants in graphs:
        if any(t.data_type in _INTEGERS and len(t.dims) <= 1 for t in g.initializer):
            return False
        if constants and any(n.op_type == "Constant" and _constant_length(n) for n in g.node):
            return False
        if _has_vector(g.value_info) or _has_vector(g.input) or _has_vector(g.output):
            return False
    return True


def _descends(g: onnx.GraphProto, walk: _Walk) -> bool:
    """Whether one of ``walk.unsure`` descends from one of ``walk.sources``
    (a search up from the values, through the producers of a graph without
    subgraphs)."""
    producer: dict[str, int] = {}
    for position, node in enumerate(g.node):
        for out in node.output:
            producer[out] = position
    seen: set[str] = set()
    stack = list(walk.unsure)
    while stack:
        name = stack.pop()
        if name in seen:
            continue
        seen.add(name)
        made_by = producer.get(name)
        if made_by is None:
            continue
        if made_by in walk.sources:
            return True
        stack.extend(n for n in g.node[made_by].input if n and n not in seen)
    return False


def plan_data_propagation(inferred: onnx.ModelProto) -> Verdict:
    """Decide whether to infer ``inferred``'s shapes again with data propagation.

    Args:
        inferred: the model after onnx's shape inference *without* data
            propagation (the bounds are computed from its value infos).

    Returns:
        ``propagate`` False with no reason when no value would be propagated
        (data propagation would infer the same shapes); False with a reason
        naming the node and value when it cannot be bounded or goes over
        :data:`DATA_PROPAGATION_BUDGET`; True otherwise.
    """
    walk = _Walk(inferred)
    if _nothing_to_propagate(inferred, walk):
        return Verdict(False, 0, "")
    try:
        # First without taints (most nodes then cost a dict lookup): exact
        # unless a value whose length or rank a taint could change descends
        # from a node that would taint.
        walk.quick = True
        try:
            walk.graph(inferred.graph, {}, {}, -1)
            if walk.unsure and walk.sources and _descends(inferred.graph, walk):
                raise _NeedFullWalk
        except _NeedFullWalk:
            walk = _Walk(inferred)
            walk.graph(inferred.graph, {}, {}, -1)
    except _Unbounded as exc:
        return Verdict(False, UNBOUNDED, str(exc))
    except RecursionError:
        return Verdict(False, UNBOUNDED, "subgraphs nest too deeply to bound data propagation")
    if not walk.data:
        return Verdict(False, 0, "")
    return Verdict(True, walk.total, "")
