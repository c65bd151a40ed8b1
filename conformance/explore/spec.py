"""One explored case: its specification, its model, its values and its oracle.

A :class:`Spec` is what a dimension makes of a seed: the op at one opset, its
inputs (element type, shape, data or control, the seed's values), the
attributes of each node (two nodes for ``pair``). :func:`legal` checks it
when cases are listed (onnx's node checker and strict shape inference: fast,
no oracle); :func:`materialize` builds it when the case is loaded: values
drawn by a generator seeded from the case's name, the oracle run (in float64
where the inputs are narrower floats and the schema allows double, then
rounded to the declared type), and every output checked to be of the type
shape inference declares. A candidate the oracle cannot judge raises
:class:`conformance.outcomes.CaseSkipped`: the executor counts it as
``skipped``, never as a pass or a failure.
"""

from __future__ import annotations

import zlib
from collections import Counter
from dataclasses import dataclass, field, replace
from functools import cache
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ..case import Case
from ..outcomes import CaseSkipped
from ..precision import OP_TOLERANCES, Tolerance

__all__ = ["REJECTED", "Feed", "Spec", "legal", "make_case", "materialize"]

MAX_ELEMENTS = 1 << 16
"""An explored case's outputs hold at most this many elements (statically inferred)."""
NARROW = {onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16}
EXACT_OPS = frozenset(
    {"Cast", "CastLike", "QuantizeLinear", "DynamicQuantizeLinear", "IsNaN", "IsInf", "Bitcast"}
)
"""Ops whose result depends on the input's type, not only its precision: never
recomputed in float64."""
REJECTED: Counter[str] = Counter()
"""Candidates dropped when listing (illegal by the schema), by dimension."""


@dataclass(frozen=True)
class Feed:
    """One input of a spec.

    Attributes:
        elem: its ``TensorProto`` element type.
        shape: its static shape.
        data: computed on (values drawn) or control (``value`` fed as an initializer).
        value: the control value, or the seed's values whose range data is drawn from.
        span: where set (a :class:`conformance.explore.values.Span`: its ``draw``), data is drawn
            over its element type's whole range instead (the ``range`` dimension).
    """

    elem: int
    shape: tuple[int, ...]
    data: bool
    value: np.ndarray | None = field(default=None, compare=False, repr=False)
    span: Any = None


@dataclass
class Spec:
    """One explored case before it is built (see the module docstring)."""

    op: str
    domain: str
    opset: int
    inputs: list[Feed | None]
    attrs: list[dict[str, Any]]
    outputs: int
    dimension: str
    detail: str
    tolerance: tuple[float, float] = (1e-3, 1e-7)

    @property
    def name(self) -> str:
        """``<Op>/<dimension>/<detail>``."""
        return f"{self.op}/{self.dimension}/{self.detail}"

    @property
    def seed(self) -> int:
        """The seed of the value generator: derived from the name."""
        return zlib.crc32(self.name.encode())

    def describe(self) -> str:
        """A one-line reproducer: op, opset, attributes, inputs, seed."""
        ins = ", ".join(
            "-"
            if f is None
            else f"{_elem_name(f.elem)}{list(f.shape)}" + ("" if f.data else f"={_short(f.value)}")
            for f in self.inputs
        )
        attrs = " | ".join(str(_printable(a)) for a in self.attrs)
        dom = f"{self.domain}." if self.domain else ""
        return f"{dom}{self.op} opset {self.opset} attrs {attrs} inputs ({ins}) seed {self.seed}"


def _elem_name(elem: int) -> str:
    return str(onnx.TensorProto.DataType.Name(elem)).lower()


def _short(v: np.ndarray | None) -> str:
    if v is None:
        return "?"
    flat = v.ravel().tolist()
    return str(flat if len(flat) <= 8 else [*flat[:8], "..."])


def _printable(attrs: dict[str, Any]) -> dict[str, Any]:
    return {
        k: (v.decode() if isinstance(v, bytes) else f"<tensor {v.dims}>")
        if isinstance(v, (bytes, onnx.TensorProto))
        else v
        for k, v in sorted(attrs.items())
    }


def np_dtype(elem: int) -> np.dtype:
    """numpy's dtype for an ONNX element type."""
    return np.dtype(helper.tensor_dtype_to_np_dtype(elem))


def _opsets(spec: Spec) -> list[onnx.OperatorSetIdProto]:
    ids = [helper.make_opsetid(spec.domain, spec.opset)]
    if spec.domain:
        ids.append(helper.make_opsetid("", 18))
    return ids


def build(spec: Spec, values: list[np.ndarray | None] | None = None) -> onnx.ModelProto:
    """The model of ``spec``: data inputs as graph inputs, control inputs as
    initializers, outputs untyped (shape inference types them)."""
    names, graph_in, inits = [], [], []
    for i, f in enumerate(spec.inputs):
        if f is None:
            names.append("")
            continue
        name = f"x{i}" if f.data else f"c{i}"
        names.append(name)
        if f.data:
            graph_in.append(helper.make_tensor_value_info(name, f.elem, f.shape))
        else:
            v = values[i] if values is not None else _control(f)
            inits.append(numpy_helper.from_array(np.asarray(v), name))
    nodes, outs = [], []
    for k, attrs in enumerate(spec.attrs):
        node_outs = [f"y{k}_{j}" for j in range(spec.outputs)]
        outs += node_outs
        nodes.append(
            helper.make_node(spec.op, names, node_outs, name=f"n{k}", domain=spec.domain, **attrs)
        )
    graph = helper.make_graph(
        nodes, spec.name, graph_in, [helper.make_tensor_value_info(o, 0, None) for o in outs], inits
    )
    opsets = _opsets(spec)
    return helper.make_model(
        graph, opset_imports=opsets, ir_version=max(helper.find_min_ir_version_for(opsets), 7)
    )


def _control(f: Feed) -> np.ndarray:
    assert f.value is not None
    return np.asarray(f.value).astype(np_dtype(f.elem))


def infer(model: onnx.ModelProto) -> list[tuple[int, tuple[int | None, ...] | None]]:
    """Each output's inferred (element type, dims; ``None`` where unknown).

    Raises:
        onnx.checker.ValidationError, onnx.shape_inference.InferenceError: illegal.
    """
    ctx = onnx.checker.C.CheckerContext()
    ctx.ir_version = model.ir_version
    ctx.opset_imports = {o.domain: o.version for o in model.opset_import}
    for node in model.graph.node:
        onnx.checker.check_node(node, ctx)
    inferred = onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
    out = []
    for vi in inferred.graph.output:
        t = vi.type.tensor_type
        dims = (
            tuple(d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim)
            if t.HasField("shape")
            else None
        )
        out.append((t.elem_type, dims))
    return out


def legal(spec: Spec, count: bool = True) -> bool:
    """Checked by onnx's node checker and strict shape inference; every output
    typed and, where its shape is known, at most :data:`MAX_ELEMENTS` elements.
    An illegal spec is counted in :data:`REJECTED` (unless ``count`` is false)."""
    try:
        outs = infer(build(spec))
    except Exception:
        REJECTED[spec.dimension] += count
        return False
    for elem, dims in outs:
        if not elem or (dims is not None and None not in dims and _size(dims) > MAX_ELEMENTS):
            REJECTED[spec.dimension] += count
            return False
    return True


def _size(dims: tuple[int | None, ...]) -> int:
    return int(np.prod([d or 0 for d in dims], dtype=np.int64))


def draw(f: Feed, rng: np.random.Generator) -> np.ndarray:
    """Values for a data input: the seed's range (its sign, its bounds, whether
    it holds whole numbers, no 0 for integers if it holds none) in the feed's
    type; small numbers for an integer type the seed did not have, so that
    products do not overflow."""
    if f.span is not None:  # a range case's span draws its own values
        return f.span.draw(f, rng)
    dt = np_dtype(f.elem)
    ref = f.value
    if dt.kind == "b":
        return rng.integers(0, 2, size=f.shape).astype(bool)
    if dt.kind == "O":  # strings: the seed's own (as text, if it held numbers)
        seen = ref.ravel().tolist() if ref is not None and ref.size else ["a", "b", "c"]
        text = sorted({v.decode() if isinstance(v, bytes) else str(v) for v in seen})
        return rng.choice(np.array(text, dtype=object), size=f.shape)
    lo, hi, whole = -3.0, 3.0, False
    if ref is not None and ref.size and ref.dtype.kind in "iuf":
        finite = ref[np.isfinite(ref)] if ref.dtype.kind == "f" else ref
        if finite.size:
            lo, hi = float(finite.min()), float(finite.max())
            whole = bool(np.all(finite == np.round(finite)))
    if dt.kind in "iu":
        same = ref is not None and ref.dtype == dt
        if not same:  # a type the seed did not have: small values
            lo, hi = max(lo, -4.0), min(hi, 4.0)
            if hi < lo:
                lo, hi = -4.0, 4.0
        if dt.kind == "u":
            lo, hi = max(lo, 0.0), max(hi, 0.0)
        info = np.iinfo(dt)
        lo, hi = max(lo, float(info.min)), min(hi, float(info.max))
        if hi <= lo:
            hi = min(lo + 3, float(info.max))
        drawn = rng.integers(int(lo), int(hi), size=f.shape, endpoint=True).astype(dt)
        if ref is not None and ref.size and not np.any(ref == 0):
            # the seed holds no 0 (a divisor): integer division by 0 is undefined
            drawn[drawn == 0] = -1 if hi < 1 and lo <= -1 else 1
        return drawn
    if hi <= lo:
        hi = lo + 2.0
    if whole:
        x = rng.integers(int(np.floor(lo)), int(np.floor(hi)), size=f.shape, endpoint=True)
        return np.asarray(x).astype(dt)
    return np.asarray(rng.uniform(lo, hi, size=f.shape)).astype(dt)


def _values(spec: Spec) -> list[np.ndarray | None]:
    rng = np.random.default_rng(spec.seed)
    return [None if f is None else draw(f, rng) if f.data else _control(f) for f in spec.inputs]


def _run_oracle(model: onnx.ModelProto, values: list[np.ndarray | None]) -> list[Any]:
    from ..oracle import evaluator

    feeds = {vi.name: v for vi, v in zip(model.graph.input, [v for v in _data(model, values)])}
    with np.errstate(all="ignore"):
        return list(evaluator(model).run(None, feeds))


def _data(model: onnx.ModelProto, values: list[np.ndarray | None]) -> list[np.ndarray]:
    node = model.graph.node[0]
    return [v for name, v in zip(node.input, values) if name.startswith("x") and v is not None]


def _widened(spec: Spec) -> Spec | None:
    """``spec`` with its narrow float inputs in float64 (``None``: nothing to widen)."""
    if spec.op in EXACT_OPS or not any(f is not None and f.elem in NARROW for f in spec.inputs):
        return None
    wide = [
        None if f is None else replace(f, elem=onnx.TensorProto.DOUBLE) if f.elem in NARROW else f
        for f in spec.inputs
    ]
    return replace(spec, inputs=wide)


def _oracle(spec: Spec, model: onnx.ModelProto, values: list[np.ndarray | None]) -> list[Any]:
    """The oracle's outputs: recomputed in float64 and rounded to the declared
    types where the inputs are narrower floats and the schema allows double."""
    declared = infer(model)
    wide = _widened(spec)
    if wide is not None:
        try:
            wmodel = build(wide, [None if v is None else _as_double(v) for v in values])
            wdecl = infer(wmodel)
            if len(wdecl) == len(declared):
                wvalues = [None if v is None else _as_double(v) for v in values]
                got = _run_oracle(wmodel, wvalues)
                out = []
                for (elem, _), g in zip(declared, got):
                    g = np.asarray(g)
                    if g.dtype == np.float64 and elem in NARROW:
                        with np.errstate(over="ignore"):  # beyond the type: inf
                            g = g.astype(np_dtype(elem))
                    elif g.dtype != np_dtype(elem):
                        raise ValueError("types differ")
                    out.append(g)
                return out
        except Exception:
            pass  # the schema has no float64 form, or the oracle has none: run as declared
    return _run_oracle(model, values)


def _as_double(v: np.ndarray) -> np.ndarray:
    if v.dtype.kind == "f" or v.dtype == np_dtype(onnx.TensorProto.BFLOAT16):
        if v.dtype != np.float64:
            return v.astype(np.float64)
    return v


@cache
def by_function(op: str, domain: str) -> bool:
    """Whether onnx.reference runs ``op`` through its schema's function body."""
    from onnx.reference.ops import load_op

    from ..oracle import FIXES

    if any(c.__name__ == op for c in FIXES):
        return False
    try:
        load_op(domain, op)
    except Exception:
        return True
    return False


def _float64_accurate(
    spec: Spec, model: onnx.ModelProto, values: list[np.ndarray | None], got: list[Any]
) -> None:
    """Skip a float64 case the oracle cannot compute to float64 accuracy: an op
    run through its function body (whose constants are float32), or one whose
    result is the same when the float64 inputs are rounded to float32 first."""
    if by_function(spec.op, spec.domain):
        raise CaseSkipped("float64 through the op's function body (float32 constants)")
    with np.errstate(over="ignore"):  # beyond float32: inf, which differs
        rounded = [
            v.astype(np.float32).astype(np.float64)
            if v is not None and v.dtype == np.float64
            else v
            for v in values
        ]
    if all(v is None or r is None or np.array_equal(v, r) for v, r in zip(values, rounded)):
        return
    try:
        again = _run_oracle(model, rounded)
    except Exception:
        return
    same = all(
        isinstance(a, np.ndarray) and a.dtype == np.float64 and a.size and np.array_equal(a, b)
        for a, b in zip(got, again)
        if isinstance(a, np.ndarray) and a.dtype == np.float64
    )
    if same:
        raise CaseSkipped("the oracle computes this float64 case in float32")


def _empty_outputs(
    spec: Spec, declared: list[tuple[int, tuple[int | None, ...] | None]]
) -> list[Any] | None:
    """What a zero-size case must give when the oracle fails on it: where an
    input is empty and strict shape inference gives every output a fully
    static shape with a 0, each output is the empty array of that shape and
    type (there is nothing to compute); ``None`` otherwise.

    Only where no control input is given (indices into the emptied
    dimension would be out of range) and the same case with each 0 made 1
    is one the oracle computes, to the shapes inference gives it: an
    oracle failure that does not come from the emptiness (inputs that do not
    fit together) is no empty result."""
    if not any(f is not None and f.data and 0 in f.shape for f in spec.inputs):
        return None
    if any(f is not None and not f.data for f in spec.inputs):
        return None
    out = []
    for elem, dims in declared:
        if dims is None or None in dims or 0 not in dims or not elem:
            return None
        out.append(np.empty(tuple(int(d or 0) for d in dims), dtype=np_dtype(elem)))
    filled = replace(
        spec,
        inputs=[
            None if f is None else replace(f, shape=tuple(d or 1 for d in f.shape))
            for f in spec.inputs
        ],
    )
    try:
        model = build(filled)
        want = infer(model)
        got = _oracle(filled, model, _values(filled))
    except Exception:
        return None
    for (_, dims), g in zip(want, got):
        if dims is None or tuple(np.shape(g)) != dims:
            return None
    return out


def materialize(spec: Spec) -> tuple[onnx.ModelProto, list[Any]]:
    """The model, with outputs declared as inferred, and one data set with the
    oracle's outputs.

    Raises:
        CaseSkipped: the oracle fails, or gives a value of another type or
            shape than shape inference declares.
    """
    model = build(spec)
    declared = infer(model)
    values = _values(spec)
    try:
        got = _oracle(spec, model, values)
    except Exception as exc:
        empty = _empty_outputs(spec, declared)
        if empty is None:
            raise CaseSkipped(f"the oracle fails: {type(exc).__name__}: {str(exc)[:200]}") from None
        got = empty
    if any(e == onnx.TensorProto.DOUBLE for e, _ in declared):
        _float64_accurate(spec, model, values, got)
    if len(got) != len(declared):
        raise CaseSkipped(f"the oracle gives {len(got)} outputs, the node has {len(declared)}")
    outputs = []
    for k, (vi, (elem, dims), g) in enumerate(zip(model.graph.output, declared, got)):
        if isinstance(g, np.ndarray) and elem == onnx.TensorProto.STRING and g.dtype.kind == "U":
            g = got[k] = g.astype(object)
        if not isinstance(g, np.ndarray) or (g.dtype == object and elem != onnx.TensorProto.STRING):
            raise CaseSkipped(f"the oracle gives a {type(g).__name__} for {vi.name}")
        want = np_dtype(elem)
        if g.dtype != want and not (g.dtype.kind == "O" and elem == onnx.TensorProto.STRING):
            raise CaseSkipped(f"the oracle gives {g.dtype} for {vi.name}, the schema {want}")
        if dims is not None and (
            len(dims) != g.ndim or any(d is not None and d != s for d, s in zip(dims, g.shape))
        ):
            raise CaseSkipped(f"the oracle gives shape {g.shape} for {vi.name}, inferred {dims}")
        outputs.append(helper.make_tensor_value_info(vi.name, elem, g.shape))
    del model.graph.output[:]
    model.graph.output.extend(outputs)
    onnx.checker.check_model(model)
    return model, [(_data(model, values), got)]


class Loader:
    """``Case.load`` of an explored case; ``spec`` is there to describe it."""

    def __init__(self, spec: Spec) -> None:
        self.spec = spec

    def __call__(self) -> tuple[onnx.ModelProto, list[Any]]:
        return materialize(self.spec)


def make_case(spec: Spec) -> Case:
    """The lazy case of ``spec`` (nothing is built until it is loaded)."""
    return Case(
        spec.name,
        "explore",
        Loader(spec),
        OP_TOLERANCES.get(spec.op, Tolerance(*spec.tolerance)),
        dimension=spec.dimension,
        seed=spec.seed,
    )
