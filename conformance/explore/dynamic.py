"""Dimension ``dynamic``: inputs declared with symbolic dimensions, fed at size 1
and at sizes > 1 in one session.

The bug it is there for: a provider that makes its plan or kernel from the
shapes it first sees (a broadcast or reshape precomputed from the first feed,
an engine built for the first shape and reused, an engine keyed by rank only)
and is wrong once a symbolic batch is fed larger than 1, or smaller again.

Each case starts from one of onnx's single-node backend node tests (its node,
attributes and opset; the values of its control inputs). Its data inputs
(tensors of rank >= 1 that are not shapes, axes, indices, pads, ...) get
symbolic dimensions; control inputs and scalars become initializers holding
the node test's values; the outputs' dimensions are left unknown. Two
variants per node test:

* ``<test>_batch``: the leading dimension of the data inputs that share it is
  one symbolic ``batch`` (of the first data input alone when a shared batch
  cannot be changed); data sets at batch 1, 3, then 1 again;
* ``<test>_dims``: every dimension of every data input is symbolic, with
  distinct names; the same three sets, then one where the other dimensions
  grow too (every size >= 2 one larger, preserving which sizes are equal).

Values are drawn from a generator seeded by the case name, within the range of
the node test's own values (so a domain such as ``x > 0`` holds); expected
outputs come from the oracle. A variant is kept only when onnx's checker and
strict shape inference accept its model and every set's shapes, and the
oracle runs every set; otherwise it is skipped and counted
(:func:`skipped`). That probe runs while listing (tiny tensors, a few
milliseconds per variant); values and expected outputs are made again in
``Case.load``.
"""

from __future__ import annotations

import copy
import importlib
import warnings
import zlib
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ..case import Case, DataSet
from ..precision import OP_TOLERANCES, Tolerance

__all__ = ["BATCHES", "QUICK_OPS", "cases", "skipped"]

DIMENSION = "dynamic"
BATCHES = (1, 3, 1)
"""Batch sizes of the data sets, in the order one session runs them."""
GROWN_BATCH = 2
PER_OP = {"quick": 1, "full": 3}
"""Node tests per op (the smallest that give a valid case)."""
QUICK_OPS: dict[str, str] = {
    "Add": "add",
    "Mul": "mul",
    "Where": "where",
    "MatMul": "matmul",
    "Gemm": "gemm",
    "Conv": "conv",
    "MaxPool": "maxpool",
    "GlobalAveragePool": "globalaveragepool",
    "BatchNormalization": "batch_normalization",
    "Softmax": "softmax",
    "LayerNormalization": "layernormalization",
    "Concat": "concat",
    "Transpose": "transpose",
    "Reshape": "reshape",
    "Flatten": "flatten",
    "Expand": "expand",
    "Gather": "gather",
    "Slice": "slice",
    "ReduceMean": "reducemean",
    "Relu": "relu",
    "Tile": "tile",
    "Unsqueeze": "unsqueeze",
    "Split": "split",
    "Pad": "pad",
}
"""Ops explored at depth ``quick`` (op -> module of onnx's node tests)."""
CONTROL_NAMES = frozenset(
    {
        "shape",
        "axes",
        "pads",
        "starts",
        "ends",
        "steps",
        "repeats",
        "split",
        "sizes",
        "scales",
        "roi",
        "k",
        "indices",
        "perm",
        "depth",
        "values",
        "axis",
    }
)
"""Formal input names whose values steer the op rather than being computed on,
when the input is of an integer type (Attention's float ``K`` is data, TopK's
int64 ``K`` is not), or is one of :data:`FLOAT_CONTROL`."""
FLOAT_CONTROL = frozenset({"scales", "roi"})
_FLOAT_TYPES = ("tensor(float)", "tensor(double)", "tensor(float16)", "tensor(bfloat16)")
QUANT_SUFFIXES = ("zero_point", "_scale")
"""Quantization parameters (scalars, or one per channel): they stay as they are."""
RANDOM = frozenset(
    {
        "Bernoulli",
        "Multinomial",
        "RandomNormal",
        "RandomNormalLike",
        "RandomUniform",
        "RandomUniformLike",
    }
)
"""Ops whose outputs are random: nothing to compare."""
TIED: dict[str, tuple[tuple[str, ...], str]] = {
    "AffineGrid": (("batch", "dims"), "theta's batch is the value size[0]"),
    "GatherElements": (("batch", "dims"), "indices address the data's dimensions"),
    "ScatterElements": (("batch", "dims"), "indices address the data's dimensions"),
    "ScatterND": (("batch", "dims"), "indices address the data's dimensions"),
    "ReverseSequence": (("batch", "dims"), "sequence_lens has one entry per batch element"),
    "NonMaxSuppression": (("dims",), "a box has 4 coordinates"),
    "RNN": (("dims",), "the weights' sizes are the hidden_size attribute"),
    "GRU": (("dims",), "the weights' sizes are the hidden_size attribute"),
    "LSTM": (("dims",), "the weights' sizes are the hidden_size attribute"),
}
"""Ops (and variants) whose data shapes are tied to a control input's values or
an attribute in a way neither strict shape inference nor the reference checks:
the reference computes a value for a node the standard calls invalid, and a
provider that refuses it is right. Skipped, and counted."""

FLOATS = frozenset(
    {
        onnx.TensorProto.FLOAT,
        onnx.TensorProto.DOUBLE,
        onnx.TensorProto.FLOAT16,
        onnx.TensorProto.BFLOAT16,
    }
)

_skipped: Counter[str] = Counter()


def skipped() -> dict[str, int]:
    """Variants the last :func:`cases` call left out, counted by reason."""
    return dict(_skipped)


@dataclass(frozen=True)
class _Input:
    """A data input: its name, element type, the node test's value, its dims."""

    name: str
    elem: int
    original: np.ndarray


@dataclass(frozen=True)
class _Variant:
    """One case: a model with symbolic dims and the shapes of each data set."""

    name: str
    model: onnx.ModelProto
    inputs: tuple[_Input, ...]
    shapes: tuple[tuple[tuple[int, ...], ...], ...]
    seed: int


def _node_tests(depth: str) -> list[Any]:
    """onnx's node tests: of the quick ops only at ``quick`` (their modules
    imported alone, far cheaper than collecting them all), else all."""
    import onnx.backend.test.case.node as node_cases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if depth != "quick":
            return list(node_cases.collect_testcases(None))
        for module in QUICK_OPS.values():
            importlib.import_module(f"{node_cases.__name__}.{module}")
    # the modules append their tests to this list when imported
    collected: list[Any] = node_cases._NodeTestCases
    return [c for c in collected if _op(c) in QUICK_OPS]


def _op(test: Any) -> str:
    model = test.model
    if model is None or len(model.graph.node) != 1:
        return ""
    node = model.graph.node[0]
    return node.op_type if node.domain in ("", "ai.onnx") else ""


def _array(x: Any) -> Any:
    if isinstance(x, onnx.TensorProto):
        return numpy_helper.to_array(x)
    return np.asarray(x) if isinstance(x, np.generic) else x


def _formals(op: str, opset: int, count: int) -> list[Any]:
    """The schema's formal parameter of each of ``count`` inputs (variadic last)."""
    formals = list(onnx.defs.get_schema(op, opset).inputs)
    return [formals[min(i, len(formals) - 1)] for i in range(count)]


def _is_data(value: Any, formal: Any, first: Any) -> bool:
    """A tensor of rank >= 1 that the op computes on: not a shape, axes, ...,
    nor a one-element tensor of a fixed type or of another type than the first
    input's (a threshold or a count: a scalar in all but name)."""
    if not isinstance(value, np.ndarray) or value.size == 0 or value.ndim == 0:
        return False
    fixed_type = formal.type_str.startswith("tensor(")
    if value.size == 1 and (fixed_type or formal.type_str != first.type_str):
        return False
    name = formal.name.lower()
    if name.endswith(QUANT_SUFFIXES):
        return False
    integral = not any(t in formal.types for t in _FLOAT_TYPES)
    return not (name in CONTROL_NAMES and (integral or name in FLOAT_CONTROL))


def _groups(inputs: Sequence[_Input]) -> list[list[int]]:
    """Candidate sets of inputs sharing the batch: those whose leading size is
    the first input's, then the first input alone."""
    head = inputs[0].original.shape[0]
    shared = [i for i, x in enumerate(inputs) if x.original.shape[0] == head]
    # When the inputs that share the first one's leading size cannot change
    # together, that size is tied to something: changing the first alone would
    # make a node the standard calls invalid, which the reference may still run
    # (broadcasting what must match), so the first input goes alone only where
    # no other input shares its leading size.
    return [shared]


def _batched(inputs: Sequence[_Input], group: Sequence[int], batch: int) -> list[tuple[int, ...]]:
    return [
        (batch, *x.original.shape[1:]) if i in group else tuple(x.original.shape)
        for i, x in enumerate(inputs)
    ]


def _grown(
    inputs: Sequence[_Input], group: Sequence[int], which: Sequence[int]
) -> list[tuple[int, ...]]:
    """Every size >= 2 of the inputs ``which`` one larger (equal sizes stay
    equal), the batch of ``group`` set to :data:`GROWN_BATCH`."""
    out = []
    for i, x in enumerate(inputs):
        dims = [d + 1 if d >= 2 and i in which else d for d in x.original.shape]
        if i in group:
            dims[0] = GROWN_BATCH
        out.append(tuple(dims))
    return out


def _model(
    test: Any,
    data: Sequence[_Input],
    fixed: dict[str, np.ndarray],
    dims: Sequence[Sequence[int | str]],
) -> onnx.ModelProto:
    """The node test's model with data inputs of ``dims`` (ints or names),
    fixed inputs as initializers, outputs of unknown dimensions."""
    model = copy.deepcopy(test.model)
    graph = model.graph
    del graph.input[:]
    for x, shape in zip(data, dims):
        graph.input.append(helper.make_tensor_value_info(x.name, x.elem, list(shape)))
    graph.initializer.extend(numpy_helper.from_array(v, k) for k, v in fixed.items())
    for out in graph.output:
        if out.type.HasField("tensor_type") and out.type.tensor_type.HasField("shape"):
            for d in out.type.tensor_type.shape.dim:
                d.Clear()  # neither a value nor a name: unknown
    return model


def _check(model: onnx.ModelProto) -> None:
    onnx.checker.check_model(model)
    onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)


def _values(variant: _Variant) -> list[list[np.ndarray]]:
    """Each data set's inputs, drawn within the node test's own values."""
    rng = np.random.default_rng(variant.seed)
    sets = []
    for shapes in variant.shapes:
        feeds = []
        for x, shape in zip(variant.inputs, shapes):
            o = x.original
            if o.dtype.kind == "f" or o.dtype.name == "bfloat16":
                wide = o.astype(np.float64)
                lo, hi = float(wide.min()), float(wide.max())
                if np.isfinite(wide).all() and hi > lo:
                    feeds.append(rng.uniform(lo, hi, size=shape).astype(o.dtype))
                    continue
            feeds.append(rng.choice(o.reshape(-1), size=shape))
        sets.append(feeds)
    return sets


def _expected(variant: _Variant) -> list[DataSet]:
    """The data sets with the oracle's outputs.

    Raises:
        ValueError: the oracle cannot run a set, or gives other dtypes than declared.
    """
    from ..oracle import evaluator

    ref = evaluator(variant.model)
    sets: list[DataSet] = []
    declared = [o.type.tensor_type.elem_type for o in variant.model.graph.output]
    for feeds in _values(variant):
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            outs = list(ref.run(None, {x.name: v for x, v in zip(variant.inputs, feeds)}))
        for elem, w in zip(declared, outs):
            if not isinstance(w, np.ndarray) or helper.np_dtype_to_tensor_dtype(w.dtype) != elem:
                raise ValueError(f"{variant.name}: the oracle gives {type(w).__name__} {w!r:.60}")
        sets.append((feeds, outs))
    return sets


def _split(test: Any) -> tuple[list[_Input], dict[str, np.ndarray]] | str:
    """The node test's data inputs and fixed ones, or why it cannot be explored."""
    model = test.model
    node = model.graph.node[0]
    if node.op_type in RANDOM or "training" in test.name:
        return "random outputs"
    graph_types = [vi.type for vi in (*model.graph.input, *model.graph.output)]
    if any(not t.HasField("tensor_type") for t in graph_types):
        return "inputs or outputs that are not tensors"
    values = [_array(v) for v in test.data_sets[0][0]]
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    formals = _formals(node.op_type, opset, len(node.input))
    present = [f for name, f in zip(node.input, formals) if name]
    data: list[_Input] = []
    fixed: dict[str, np.ndarray] = {}
    for vi, v, formal in zip(model.graph.input, values, present):
        if _is_data(v, formal, formals[0]):
            data.append(_Input(vi.name, vi.type.tensor_type.elem_type, v))
        elif isinstance(v, np.ndarray):
            fixed[vi.name] = v
        else:
            return "inputs that are not tensors"
    if not data:
        return "no input with dimensions"
    per_axis = [
        v
        for f, v in zip(present, values)
        if f.name.lower().endswith(QUANT_SUFFIXES) and np.size(v) > 1
    ]
    if per_axis:
        # per-axis or blocked: one parameter per element of a dimension that may change
        return "quantization parameters per axis or per block"
    halves = {onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16}
    scales = [v for f, v in zip(present, values) if f.name.lower().endswith("scale")]
    rounded = [o.type.tensor_type.elem_type not in FLOATS for o in model.graph.output]
    if any(rounded) and any(helper.np_dtype_to_tensor_dtype(v.dtype) in halves for v in scales):
        # where the float16 product of the scales is rounded is not specified
        # (the reference rounds in float16, exact arithmetic may round the other way)
        return "integers rounded from a float16 scale"
    return data, fixed


def _variants(test: Any) -> Iterator[_Variant | str]:
    """The ``batch`` and ``dims`` variants of one node test (or why each is skipped)."""
    split = _split(test)
    if isinstance(split, str):
        yield split
        return
    data, fixed = split
    base = test.name.removeprefix("test_")
    op = test.model.graph.node[0].op_type
    tied = TIED.get(op, ((), ""))[0]
    batch: list[int] | None = None
    found: _Variant | str = "no group of inputs shares a batch"
    for group in _groups(data):
        sets = [_batched(data, group, b) for b in BATCHES]
        dims: list[list[int | str]] = [
            ["batch", *x.original.shape[1:]] if i in group else list(x.original.shape)
            for i, x in enumerate(data)
        ]
        found = _valid(f"{op}/{DIMENSION}/{base}_batch", test, data, fixed, dims, sets)
        if isinstance(found, _Variant):
            batch = group
            break
    yield "shapes tied to values the reference does not check" if "batch" in tied else found
    if "dims" in tied:
        yield "shapes tied to values the reference does not check"
        return
    if batch is None:
        yield "the batch variant was skipped"
        return
    group = batch
    named: list[list[int | str]] = [
        [f"d{i}_{j}" for j in range(x.original.ndim)] for i, x in enumerate(data)
    ]
    sets = [_batched(data, group, b) for b in BATCHES]
    name = f"{op}/{DIMENSION}/{base}_dims"
    for which in (range(len(data)), [0]):
        found = _valid(name, test, data, fixed, named, [*sets, _grown(data, group, which)])
        if isinstance(found, _Variant):
            yield found
            return
    yield _valid(name, test, data, fixed, named, sets)


def _valid(
    name: str,
    test: Any,
    data: Sequence[_Input],
    fixed: dict[str, np.ndarray],
    dims: Sequence[Sequence[int | str]],
    sets: Sequence[Sequence[tuple[int, ...]]],
) -> _Variant | str:
    """The variant when the checker, strict shape inference (of the symbolic
    model and of every set's shapes) and the oracle accept it; else why not."""
    if len({tuple(s) for s in sets}) < 2:
        return "the sets' shapes do not differ"
    model = _model(test, data, fixed, dims)
    try:
        _check(model)
        for shapes in sets:
            _check(_model(test, data, fixed, shapes))
    except Exception:
        return "shape inference refuses the changed shapes"
    variant = _Variant(
        name, model, tuple(data), tuple(tuple(s) for s in sets), zlib.crc32(name.encode())
    )
    try:
        _expected(variant)
    except Exception:
        return "the oracle cannot run the changed shapes"
    return variant


def _smallest_first(tests: list[Any]) -> list[Any]:
    """Tests whose first input has rank >= 2 first (a batch and other
    dimensions), each group smallest first."""

    def key(t: Any) -> tuple[bool, int, str]:
        values = [v for v in map(_array, t.data_sets[0][0]) if isinstance(v, np.ndarray)]
        rank = values[0].ndim if values else 0
        return rank < 2, sum(v.size for v in values), t.name

    return sorted(tests, key=key)


def cases(depth: str) -> Iterator[Case]:
    """The ``dynamic`` cases at ``depth``: per op, the first node tests
    (smallest first) that give valid variants, :data:`PER_OP` of them."""
    _skipped.clear()
    by_op: dict[str, list[Any]] = {}
    for test in _node_tests(depth):
        op = _op(test)
        if op and test.data_sets:
            by_op.setdefault(op, []).append(test)
    for op in sorted(by_op):
        used = 0
        for test in _smallest_first(by_op[op]):
            if used >= PER_OP[depth]:
                break
            made = [v for v in _variants(test)]
            kept = [v for v in made if isinstance(v, _Variant)]
            for reason in (v for v in made if isinstance(v, str)):
                _skipped[reason] += 1
            used += bool(kept)
            for v in kept:
                yield Case(
                    v.name,
                    "explore",
                    _loader(v),
                    OP_TOLERANCES.get(op, Tolerance(test.rtol, test.atol)),
                    dimension=DIMENSION,
                    seed=v.seed,
                )


def _loader(variant: _Variant) -> Any:
    return lambda: (variant.model, _expected(variant))
