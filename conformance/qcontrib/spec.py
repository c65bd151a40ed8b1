"""A quantized contrib op case: the com.microsoft node, its inputs, and its
decomposition into standard ONNX ops that onnx's reference evaluator runs as
the oracle (DequantizeLinear -> float op(s) -> QuantizeLinear, for most).

Data inputs are fed; scales, zero points, weights and biases are
initializers (onnxruntime's kernels want most of them constant). A zero
point the contrib node omits is an explicit zero of the data's type in the
decomposition, whose QuantizeLinear would otherwise write uint8.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ..precision import Tolerance

__all__ = [
    "DTYPES",
    "FLOAT_TOL",
    "MS",
    "ONE_UNIT",
    "QSpec",
    "Slot",
    "as_array",
    "build",
    "case_seed",
    "draw_ints",
    "draw_scale",
    "draw_zero",
    "oracle_outputs",
]

MS = "com.microsoft"
OPSET = 21
"""Opset of the decompositions: per-axis and blocked Q/DQ, AveragePool's
opset-19 divisor."""

ONE_UNIT = Tolerance(0.0, 1.0)
"""Quantized outputs: onnxruntime computes some ops in another order of
float32 operations (scale ratios, a zero point added before rounding, lookup
tables), so a value that lands on a rounding tie may differ by one unit."""


@dataclass(frozen=True)
class Slot:
    """One input of the contrib node: its name, value (``None``: omitted)
    and whether it is fed (data) or an initializer."""

    name: str
    value: np.ndarray | None
    fed: bool = False


_DIMENSIONS = {"optional": "inputs", "zero_point": "inputs", "shape": "size"}
"""The table's names for a dimension -> the exploration's (``per_channel``
and ``broadcast`` are the contrib ops' own: scales and zero points per
channel or column; inputs broadcast against each other)."""


@dataclass
class QSpec:
    """One contrib op case (see the module docstring).

    ``decompose(spec)`` returns the standard-ONNX nodes reading the same
    input names and writing the node's output names, plus extra
    initializers; ``redraw(rng)`` draws new values for the fed inputs (the
    second data set).
    """

    op: str
    dimension: str
    detail: str
    slots: list[Slot]
    decompose: Callable[[QSpec], tuple[list[onnx.NodeProto], list[onnx.TensorProto]]]
    attrs: dict[str, Any] = field(default_factory=dict)
    outputs: int = 1
    quantized: bool = True
    tolerance: Tolerance | None = None
    redraw: Callable[[np.random.Generator], list[np.ndarray]] | None = None
    label: str = ""

    def __post_init__(self) -> None:
        # The exploration's vocabulary (docs/conformance.md), so that a report
        # groups these cases with the standard ops' of the same kind.
        self.dimension = _DIMENSIONS.get(self.dimension, self.dimension)

    @property
    def name(self) -> str:
        """``<Op>/<dimension>/<detail>``, the explored cases' naming (``label``
        for Op where ONNX has an op of the same name)."""
        return f"{self.label or self.op}/{self.dimension}/{self.detail}"

    def value(self, name: str) -> np.ndarray | None:
        """The value of input ``name``."""
        return next(s.value for s in self.slots if s.name == name)

    def out(self, i: int = 0) -> str:
        """The name of output ``i``."""
        return f"y{i}"


def case_seed(name: str) -> int:
    """The seed of the case ``<Op>/<dimension>/<detail>``: its name's CRC-32,
    as the explored cases' (the dimension in the exploration's vocabulary)."""
    op, _, rest = name.partition("/")
    dim, _, detail = rest.partition("/")
    return zlib.crc32(f"{op}/{_DIMENSIONS.get(dim, dim)}/{detail}".encode())


def seeded(name: str) -> np.random.Generator:
    """A generator seeded by a case's name (the same values every run)."""
    return np.random.default_rng(case_seed(name))


def _vi(name: str, x: np.ndarray) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(x.dtype), x.shape)


def _graph(
    spec: QSpec,
    nodes: Sequence[onnx.NodeProto],
    extra: Sequence[onnx.TensorProto],
    outs: Sequence[np.ndarray] | None,
    opsets: Sequence[onnx.OperatorSetIdProto],
) -> onnx.ModelProto:
    fed = [s for s in spec.slots if s.fed and s.value is not None]
    inits = [
        numpy_helper.from_array(np.asarray(s.value), s.name)
        for s in spec.slots
        if not s.fed and s.value is not None
    ]
    if outs is None:
        outputs = [helper.make_tensor_value_info(spec.out(i), 0, None) for i in range(spec.outputs)]
    else:
        outputs = [_vi(spec.out(i), o) for i, o in enumerate(outs)]
    graph = helper.make_graph(
        list(nodes),
        spec.name.replace("/", "_"),
        [_vi(s.name, s.value) for s in fed],  # type: ignore[arg-type]
        outputs,
        [*inits, *extra],
    )
    model = helper.make_model(graph, opset_imports=list(opsets))
    model.ir_version = 10
    return model


def node_model(spec: QSpec, outs: Sequence[np.ndarray]) -> onnx.ModelProto:
    """The model of the contrib node alone, its outputs typed like ``outs``."""
    names = [s.name if s.value is not None else "" for s in spec.slots]
    while names and not names[-1]:
        names.pop()
    node = helper.make_node(
        spec.op,
        names,
        [spec.out(i) for i in range(spec.outputs)],
        name=spec.name.replace("/", "_"),
        domain=MS,
        **spec.attrs,
    )
    opsets = [helper.make_opsetid("", OPSET), helper.make_opsetid(MS, 1)]
    return _graph(spec, [node], [], outs, opsets)


def oracle_outputs(spec: QSpec, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """The decomposition's outputs for ``feeds``, by onnx's reference evaluator."""
    from ..oracle import evaluator

    nodes, extra = spec.decompose(spec)
    model = _graph(spec, nodes, extra, None, [helper.make_opsetid("", OPSET)])
    with np.errstate(all="ignore"):
        return [np.asarray(o) for o in evaluator(model).run(None, feeds)]


def feeds_of(spec: QSpec, values: Sequence[np.ndarray] | None = None) -> dict[str, np.ndarray]:
    """The fed inputs by name (``values`` replacing them in order)."""
    fed = [s for s in spec.slots if s.fed and s.value is not None]
    vals = list(values) if values is not None else [s.value for s in fed]
    return {s.name: v for s, v in zip(fed, vals)}  # type: ignore[misc]


def build(spec: QSpec) -> tuple[onnx.ModelProto, list[tuple[list[Any], list[Any]]]]:
    """The contrib node's model and two data sets with the oracle's outputs.

    Raises:
        ValueError: the oracle cannot judge the case (it fails, or gives no array).
    """
    sets = []
    first = feeds_of(spec)
    second = first
    if spec.redraw is not None:
        second = feeds_of(spec, spec.redraw(seeded(spec.name + "/2")))
    for feeds in (first, second):
        try:
            outs = oracle_outputs(spec, feeds)
        except Exception as exc:  # the reference cannot judge this case
            raise ValueError(f"{spec.name}: the oracle fails: {exc}") from exc
        sets.append((list(feeds.values()), outs))
    return node_model(spec, sets[0][1]), sets


DTYPES = (np.uint8, np.int8)
FLOAT_TOL = Tolerance(1e-4, 1e-4)
"""Float outputs of integer products: the oracle multiplies dequantized
float32 values, the kernels sum exact integers and scale once."""


def as_array(x: Any) -> np.ndarray:
    """``x`` as an array."""
    return np.asarray(x)


def draw_ints(rng: np.random.Generator, dt: Any, shape: tuple[int, ...]) -> np.ndarray:
    """Integers over the whole range of ``dt``."""
    info = np.iinfo(dt)
    return rng.integers(info.min, int(info.max) + 1, shape).astype(dt)


def draw_zero(rng: np.random.Generator, dt: Any, n: int | None = None) -> np.ndarray:
    """A zero point (``n`` of them: per channel) near the middle of ``dt``'s range."""
    lo, hi = (0, 20) if dt == np.uint8 else (-10, 10)
    return rng.integers(lo, hi, n if n else ()).astype(dt)


def draw_scale(rng: np.random.Generator, n: int | None = None, lo: float = 0.01) -> np.ndarray:
    """A positive float32 scale (``n`` of them) in ``[lo, 4 lo)``."""
    return rng.uniform(lo, lo * 4, n if n else ()).astype(np.float32)
