"""Generated operator cases, checked against the oracle (onnx's reference evaluator).

Families (the first part of each case name):

* ``dtype``: unary and binary elementwise ops over every dtype their schema
  allows among :data:`SWEEP`;
* ``bcast``: binary ops with broadcasting shapes;
* ``empty``: tensors with a zero-sized dimension;
* ``large``: tensors of a million elements;
* ``negaxis``: ops with axis attributes or inputs given as negative numbers;
* ``wide``: float elementwise ops on values from 1e-3 to 1e2 in magnitude
  (1e-6 to 1e6 where the input must be positive), far outside the [-3, 3]
  of the other families;
* ``special``: float ops on NaN, ±inf, ±0 and ordinary values, every pair of
  them for binary ops (so zero divisors too);
* ``limits``: integer ops on the type's extremes and their neighbours (results
  wrap around as in two's complement), int64 and uint64 beyond 2**32;
* ``layout``: inputs fed as views that are not C-contiguous (column-major,
  strided, reversed; :mod:`conformance.layout`);
* ``square``: Gemm and Transpose on square matrices, where a transpose flag
  or a permutation cannot be guessed from the shapes.

A case whose oracle fails, or gives an output of another dtype than the
model declares, is not generated: the reference cannot judge it.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from .case import Case
from .precision import Tolerance

__all__ = ["OPSET", "SWEEP", "generated_cases"]

OPSET = 18
SWEEP = (
    "float",
    "double",
    "float16",
    "bfloat16",
    "int8",
    "uint8",
    "int16",
    "int32",
    "int64",
    "uint32",
    "uint64",
)
UNARY = (
    "Abs",
    "Neg",
    "Relu",
    "Sigmoid",
    "Tanh",
    "Exp",
    "Log",
    "Sqrt",
    "Floor",
    "Ceil",
    "Reciprocal",
    "Sign",
    "Erf",
    "Sin",
    "Cos",
    "Softplus",
    "Round",
)
BINARY = ("Add", "Sub", "Mul", "Div", "Max", "Min", "Pow", "Equal", "Less", "Greater")
POSITIVE = {"Log", "Sqrt", "Reciprocal", "Pow", "Div"}
BROADCASTS = (
    ((2, 3, 4), (4,)),
    ((2, 1, 4), (3, 1)),
    ((1,), (2, 3)),
    ((), (2, 3)),
    ((5, 1, 1, 3), (1, 4, 1)),
    # as many elements on both sides, yet broadcast to a larger shape
    ((3, 1), (1, 3)),
    ((4,), (4, 1)),
    ((1, 3, 1), (3, 1, 1)),
)
BCAST_OPS = ("Add", "Sub", "Mul", "Div", "Max", "Min", "Pow", "Equal", "Less", "Greater")
WIDE_DTYPES = ("float", "double", "float16")
SPECIAL_VALUES = (np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.0)
NAN_OPEN = {"Sign"}
"""Ops whose result for NaN the standard leaves open (numpy says NaN,
onnxruntime's float16 Sign says 0): their special cases leave NaN out."""


def special_values(op: str) -> tuple[float, ...]:
    """The special values an op's ``special`` cases are made of."""
    if op in NAN_OPEN:
        return tuple(v for v in SPECIAL_VALUES if not np.isnan(v))
    return SPECIAL_VALUES


LIMIT_DTYPES = ("int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64")
LIMIT_OPS = ("Add", "Sub", "Mul", "Max", "Min", "Neg", "Abs")


DEFAULT = Tolerance(1e-4, 1e-6)
"""The generated cases' own tolerance: float32's default (a float64 output keeps
its tighter one, :func:`conformance.precision.tolerance_for`)."""


@dataclass
class Spec:
    """One generated single-node case."""

    name: str
    op: str
    inputs: Sequence[tuple[str, Sequence[int]]]
    attrs: dict[str, Any] = field(default_factory=dict)
    consts: list[np.ndarray] = field(default_factory=list)
    outputs: int = 1
    positive: bool = False
    tolerance: Tolerance = DEFAULT
    values: str = "uniform"
    layout: str = ""


def _np(elem: str) -> np.dtype:
    code = getattr(onnx.TensorProto, elem.upper())
    return np.dtype(helper.tensor_dtype_to_np_dtype(code))


def _wide(dt: np.dtype, shape: Sequence[int], positive: bool, rng: np.random.Generator) -> Any:
    """Magnitudes spread over decades (log-uniform), random signs unless positive."""
    low, high = (-6.0, 6.0) if positive else (-3.0, 2.0)
    if dt == np.float16:  # |x| <= 10: float16 kernels may compute exp(x) in float16
        high = min(high, 4.0 if positive else 1.0)
    x = 10.0 ** rng.uniform(low, high, size=shape)
    if not positive:
        x = x * rng.choice([-1.0, 1.0], size=shape)
    return x.astype(dt)


def _limits(dt: np.dtype) -> np.ndarray:
    """An integer type's extremes, their neighbours and small values; for 64-bit
    types also values beyond 32 bits."""
    info = np.iinfo(dt)
    lo, hi = int(info.min), int(info.max)
    values = {lo, lo + 1, hi - 1, hi, hi // 2 + 1, 0, 1, 2}
    if lo < 0:
        values |= {-1, -2, lo // 2}
    if dt.itemsize == 8:
        values |= {2**31, 2**32 + 5, 3 * 2**40}
        if lo < 0:
            values |= {-(2**31) - 1, -(2**33) - 7}
    return np.array(sorted(values), dtype=dt)


def _pairs(values: np.ndarray, n: int) -> list[np.ndarray]:
    """One input (``n == 1``) or every pair of ``values`` as two inputs."""
    if n == 1:
        return [values.copy()]
    a, b = np.meshgrid(values, values, indexing="ij")
    return [np.ascontiguousarray(a), np.ascontiguousarray(b)]


def _values(spec: Spec, rng: np.random.Generator) -> list[np.ndarray]:
    if spec.values in ("special", "limits"):
        dt = _np(spec.inputs[0][0])
        base = np.array(special_values(spec.op), dt) if spec.values == "special" else _limits(dt)
        return _pairs(base, len(spec.inputs))
    out = []
    for elem, shape in spec.inputs:
        dt = _np(elem)
        if spec.values == "wide" and dt.kind == "f":
            out.append(_wide(dt, shape, spec.positive, rng))
            continue
        if dt.kind in "iu":
            low = 1 if spec.positive or dt.kind == "u" else -10
            x: np.ndarray = rng.integers(low, 10, size=shape).astype(dt)
        elif dt.kind == "b":
            x = rng.integers(0, 2, size=shape).astype(bool)
        else:
            f = rng.uniform(-3.0, 3.0, size=shape)
            if spec.positive:
                f = np.abs(f) + 0.25
            x = f.astype(dt)
        out.append(x)
    return out


def _second(spec: Spec, first: list[np.ndarray]) -> list[np.ndarray]:
    """A second data set of the same shapes and dtypes with other values: drawn
    again, or (special values, integer limits) the same values shifted by one
    place, so that every element changes."""
    if spec.values in ("special", "limits"):
        return [np.roll(x, 1, axis=-1) if x.ndim else x for x in first]
    return _values(spec, np.random.default_rng(zlib.crc32(spec.name.encode()) + 1))


def _build(spec: Spec) -> tuple[onnx.ModelProto, list[np.ndarray]]:
    rng = np.random.default_rng(zlib.crc32(spec.name.encode()))
    names = [f"x{i}" for i in range(len(spec.inputs))]
    const_names = [f"c{i}" for i in range(len(spec.consts))]
    outs = [f"y{i}" for i in range(spec.outputs)]
    node = helper.make_node(spec.op, names + const_names, outs, name=spec.name, **spec.attrs)
    graph = helper.make_graph(
        [node],
        spec.name,
        [
            helper.make_tensor_value_info(n, getattr(onnx.TensorProto, e.upper()), s)
            for n, (e, s) in zip(names, spec.inputs)
        ],
        [helper.make_tensor_value_info(o, 0, None) for o in outs],
        [numpy_helper.from_array(c, n) for c, n in zip(spec.consts, const_names)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    return model, _values(spec, rng)


def materialize(spec: Spec) -> tuple[onnx.ModelProto, list[Any]]:
    """The model and two data sets of the same shapes, with the reference's outputs.

    The second data set has other values (:func:`_second`): a kernel that
    keeps state from one run to the next (a result or a packed weight cached
    by shape, an output buffer it returns again) is caught. The outputs'
    declared types are the reference's, checked by onnx's strict type and
    shape inference.

    Raises:
        ValueError: the reference cannot judge this case.
    """
    from .oracle import evaluator

    model, ins = _build(spec)
    sets = []
    ref = evaluator(model)
    for values in (ins, _second(spec, ins)):
        feeds = {vi.name: x for vi, x in zip(model.graph.input, values)}
        with np.errstate(all="ignore"):  # overflow and NaN are what some cases are about
            sets.append((values, list(ref.run(None, feeds))))
    want = sets[0][1]
    outputs = []
    for vi, w in zip(model.graph.output, want):
        if not isinstance(w, np.ndarray):
            raise ValueError(f"{spec.name}: the reference gives a {type(w).__name__}")
        elem = helper.np_dtype_to_tensor_dtype(w.dtype)
        outputs.append(helper.make_tensor_value_info(vi.name, elem, w.shape))
    del model.graph.output[:]
    model.graph.output.extend(outputs)
    onnx.checker.check_model(model)
    onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
    return model, sets


def _allowed(op: str) -> set[str]:
    schema = onnx.defs.get_schema(op, OPSET)
    tc = schema.type_constraints[0]
    return {t.removeprefix("tensor(").removesuffix(")") for t in tc.allowed_type_strs}


def _specs() -> Iterator[Spec]:
    shape = (3, 4, 5)
    for op in (*UNARY, *BINARY):
        n = 1 if op in UNARY else 2
        for elem in SWEEP:
            if elem not in _allowed(op):
                continue
            yield Spec(f"dtype_{op}_{elem}", op, [(elem, shape)] * n, positive=op in POSITIVE)
    for op in BCAST_OPS:
        for i, (a, b) in enumerate(BROADCASTS):
            yield Spec(f"bcast_{op}_{i}", op, [("float", a), ("float", b)], positive=op in POSITIVE)
            yield Spec(
                f"bcast_{op}_{i}_swapped", op, [("float", b), ("float", a)], positive=op in POSITIVE
            )
    yield from _empty()
    yield from _large()
    yield from _negative_axes()
    yield from _edge_values()
    yield from _layouts()
    yield from _square()


def _edge_values() -> Iterator[Spec]:
    """``wide``, ``special`` and ``limits`` cases (see the module docstring)."""
    for op in (*UNARY, *BINARY):
        n = 1 if op in UNARY else 2
        allowed = _allowed(op)
        for elem in WIDE_DTYPES:
            if elem not in allowed:
                continue
            if op != "Pow":  # most wide pairs overflow
                yield Spec(
                    f"wide_{op}_{elem}",
                    op,
                    [(elem, (4, 50))] * n,
                    positive=op in POSITIVE - {"Div"},
                    values="wide",
                )
            shape = (len(special_values(op)),) * n
            yield Spec(f"special_{op}_{elem}", op, [(elem, shape)] * n, values="special")
    for op in LIMIT_OPS:
        n = 1 if op in ("Neg", "Abs") else 2
        allowed = _allowed(op)
        for elem in LIMIT_DTYPES:
            if elem in allowed and not (op in ("Neg", "Abs") and elem.startswith("u")):
                count = len(_limits(_np(elem)))
                yield Spec(f"limits_{op}_{elem}", op, [(elem, (count,) * n)] * n, values="limits")


def _empty() -> Iterator[Spec]:
    for op in ("Relu", "Exp", "Abs", "Sigmoid"):
        yield Spec(f"empty_{op}_0x3", op, [("float", (0, 3))])
        yield Spec(f"empty_{op}_2x0x4", op, [("float", (2, 0, 4))])
    yield Spec("empty_Add_bcast", "Add", [("float", (0, 3)), ("float", (3,))])
    yield Spec("empty_MatMul_rows", "MatMul", [("float", (0, 4)), ("float", (4, 3))])
    yield Spec("empty_MatMul_inner", "MatMul", [("float", (2, 0)), ("float", (0, 3))])
    yield Spec("empty_Transpose", "Transpose", [("float", (0, 3))], {"perm": [1, 0]})
    yield Spec("empty_Concat", "Concat", [("float", (0, 3)), ("float", (2, 3))], {"axis": 0})
    yield Spec(
        "empty_ReduceSum",
        "ReduceSum",
        [("float", (2, 0, 3))],
        {"keepdims": 1},
        [np.array([1], np.int64)],
    )
    yield Spec("empty_Reshape", "Reshape", [("float", (0, 6))], consts=[np.array([0, 2, 3])])


def _large() -> Iterator[Spec]:
    big = (1024, 1024)
    loose = Tolerance(1e-4, 1e-3)
    yield Spec("large_Add", "Add", [("float", big), ("float", big)])
    yield Spec("large_Relu", "Relu", [("float", (1 << 20,))])
    yield Spec("large_Exp", "Exp", [("float", big)])
    yield Spec(
        "large_MatMul", "MatMul", [("float", (256, 512)), ("float", (512, 256))], tolerance=loose
    )
    yield Spec("large_Softmax", "Softmax", [("float", (256, 4096))], {"axis": -1})
    yield Spec(
        "large_ReduceSum",
        "ReduceSum",
        [("float", big)],
        {"keepdims": 0},
        [np.array([-1], np.int64)],
        tolerance=loose,
    )
    yield Spec("large_Transpose", "Transpose", [("float", (512, 2048))], {"perm": [1, 0]})


def _negative_axes() -> Iterator[Spec]:
    x = [("float", (2, 3, 4))]
    for axis in (-1, -2, -3):
        for op in ("Softmax", "LogSoftmax", "Hardmax"):
            yield Spec(f"negaxis_{op}_{axis}", op, x, {"axis": axis})
        yield Spec(f"negaxis_ArgMax_{axis}", "ArgMax", x, {"axis": axis, "keepdims": 0})
        yield Spec(f"negaxis_Concat_{axis}", "Concat", x * 2, {"axis": axis})
        yield Spec(f"negaxis_Flatten_{axis}", "Flatten", x, {"axis": axis})
        yield Spec(f"negaxis_CumSum_{axis}", "CumSum", x, consts=[np.array(axis, np.int64)])
        yield Spec(
            f"negaxis_Gather_{axis}", "Gather", x, {"axis": axis}, [np.array([1, 0, -1], np.int64)]
        )
        yield Spec(f"negaxis_Unsqueeze_{axis}", "Unsqueeze", x, consts=[np.array([axis])])
    for axes in ([-1], [-2, -1], [-3], [0, -1]):
        tag = "_".join(str(a) for a in axes)
        for op in ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd"):
            for keep in (0, 1):
                yield Spec(
                    f"negaxis_{op}_{tag}_keep{keep}",
                    op,
                    x,
                    {"keepdims": keep},
                    [np.array(axes, np.int64)],
                )
    yield Spec("negaxis_Split", "Split", x, {"axis": -1, "num_outputs": 2}, outputs=2)
    yield Spec("negaxis_Squeeze", "Squeeze", [("float", (2, 3, 1))], consts=[np.array([-1])])
    yield Spec("negaxis_TopK", "TopK", x, {"axis": -1}, [np.array([2], np.int64)], outputs=2)
    yield Spec("negaxis_Slice", "Slice", x, consts=[np.array([-3]), np.array([-1]), np.array([-1])])


LAYOUT_CASES: tuple[tuple[str, tuple[tuple[int, ...], ...], dict[str, Any]], ...] = (
    ("Abs", ((6, 8),), {}),
    ("Neg", ((6, 8),), {}),
    ("Relu", ((6, 8),), {}),
    ("Sigmoid", ((6, 8),), {}),
    ("Exp", ((6, 8),), {}),
    ("Add", ((6, 8), (6, 8)), {}),
    ("Sub", ((6, 8), (8,)), {}),
    ("Mul", ((6, 8), (6, 8)), {}),
    ("Div", ((6, 8), (6, 8)), {}),
    ("MatMul", ((6, 8), (8, 5)), {}),
    ("Gemm", ((6, 8), (8, 5)), {}),
    ("Transpose", ((6, 8),), {"perm": [1, 0]}),
    ("Softmax", ((6, 8),), {"axis": -1}),
    ("Concat", ((6, 8), (3, 8)), {"axis": 0}),
    ("Conv", ((1, 2, 6, 6), (3, 2, 3, 3)), {}),
    ("MaxPool", ((1, 2, 6, 6),), {"kernel_shape": [2, 2]}),
    ("ReduceSum", ((6, 8),), {"keepdims": 0}),
)
"""(op, input shapes, attributes) of the ``layout`` cases."""


def _layouts() -> Iterator[Spec]:
    from .layout import LAYOUTS

    for op, shapes, attrs in LAYOUT_CASES:
        for layout in LAYOUTS:
            yield Spec(
                f"layout_{op}_{layout}",
                op,
                [("float", s) for s in shapes],
                attrs,
                positive=op in POSITIVE,
                layout=layout,
            )


def _square() -> Iterator[Spec]:
    """Gemm with every transpose flag on square matrices; square Transposes."""
    sq = ("float", (5, 5))
    for ta in (0, 1):
        for tb in (0, 1):
            attrs = {"transA": ta, "transB": tb, "alpha": 0.5, "beta": 2.0}
            yield Spec(f"square_Gemm_tA{ta}_tB{tb}", "Gemm", [sq, sq, sq], attrs)
            yield Spec(
                f"square_Gemm_tA{ta}_tB{tb}_noC", "Gemm", [sq, sq], {"transA": ta, "transB": tb}
            )
    yield Spec("square_MatMul", "MatMul", [sq, sq])
    yield Spec("square_Transpose_2d", "Transpose", [sq], {"perm": [1, 0]})
    cube = ("float", (4, 4, 4))
    for perm in ([0, 2, 1], [1, 0, 2], [2, 1, 0], [1, 2, 0], [2, 0, 1]):
        yield Spec(
            f"square_Transpose_{''.join(map(str, perm))}", "Transpose", [cube], {"perm": perm}
        )
    yield Spec("square_Transpose_default", "Transpose", [cube])


def _loader(spec: Spec) -> Any:
    return lambda: materialize(spec)


def generated_cases() -> Iterator[Case]:
    """Every generated case (its model and oracle are built on first use)."""
    for spec in _specs():
        yield Case(spec.name, "generated", _loader(spec), spec.tolerance, layout=spec.layout)
