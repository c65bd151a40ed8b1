"""Dimension ``accumulate``: float16 and bfloat16 reductions long enough to
expose an accumulator of the input's own precision.

The bug it is there for: a kernel that sums K products or values in float16
(or bfloat16) instead of float32. With K >= 1024 positive terms (values drawn
uniformly from [0, 1), so nothing cancels), a float16 running sum soon has a
unit in the last place as large as the terms it adds: most of each addition
is rounded away, and the result is off by far more than the dtype's tolerance
(float16 rtol 2e-3, bfloat16 1.6e-2), while a float32 accumulator stays within
half a unit of the output's dtype.

Ops: MatMul, Gemm, Einsum, Conv (channels x kernel >= K), ConvTranspose,
ReduceSum/Mean/SumSquare/L1/L2/LogSumExp, CumSum, Softmax and LogSoftmax over
a long axis, LayerNormalization, GroupNormalization, InstanceNormalization,
GlobalAveragePool, AveragePool with a K-element window, LpNormalization (p 1
and 2), each in every dtype of float16 and bfloat16 its schema allows at
:data:`OPSET`. K is 1024 at depth ``quick``, also 4096 at ``full``.

Expected outputs are not the reference's float16 arithmetic: the same model
in float64 runs on the inputs as rounded to the dtype, and its outputs are
rounded to the dtype.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ..case import Case, DataSet

__all__ = ["DTYPES", "LENGTHS", "OPSET", "cases"]

DIMENSION = "accumulate"
OPSET = 22
"""The first opset whose Conv, pooling and normalization schemas allow bfloat16."""
DTYPES = ("float16", "bfloat16")
LENGTHS = {"quick": (1024,), "full": (1024, 4096)}
"""The reduction lengths K explored at each depth."""
REDUCE = ("ReduceSum", "ReduceMean", "ReduceSumSquare", "ReduceL1", "ReduceL2", "ReduceLogSumExp")


@dataclass(frozen=True)
class Spec:
    """One case: an op whose float inputs (values in [0, 1)) have ``shapes``;
    ``consts`` are int64 initializers that follow them (axes)."""

    op: str
    detail: str
    shapes: tuple[tuple[int, ...], ...]
    attrs: dict[str, Any] = field(default_factory=dict)
    consts: tuple[np.ndarray, ...] = ()


def specs(k: int) -> Iterator[Spec]:
    """The cases whose reductions have ``k`` terms."""
    # 16 rows: the worst of 16 independent sums (an accumulator's error varies
    # from one to the next, and the case must fail whatever the seed)
    rows = (16, k)
    yield Spec("MatMul", f"16x{k}x8", (rows, (k, 8)))
    yield Spec("Gemm", f"16x{k}x8", (rows, (k, 8), (8,)))
    yield Spec("Einsum", f"ij_jk_{k}", (rows, (k, 8)), {"equation": "ij,jk->ik"})
    c = math.ceil(k / 9)
    yield Spec("Conv", f"c{c}_3x3", ((1, c, 4, 4), (4, c, 3, 3)))
    c = k // 4  # every interior output sums c channels x a 2x2 kernel
    yield Spec("ConvTranspose", f"c{c}_2x2", ((1, c, 3, 3), (c, 4, 2, 2)))
    axes = np.array([-1], np.int64)
    for op in REDUCE:
        yield Spec(op, f"16x{k}", (rows,), {"keepdims": 0}, (axes,))
    yield Spec("CumSum", f"2x{k}", ((2, k),), consts=(np.array(1, np.int64),))
    yield Spec("Softmax", f"16x{k}", (rows,), {"axis": -1})
    yield Spec("LogSoftmax", f"16x{k}", (rows,), {"axis": -1})
    yield Spec("LayerNormalization", f"16x{k}", (rows, (k,), (k,)), {"axis": -1})
    yield Spec(
        "GroupNormalization", f"2x4x{k // 2}_g2", ((2, 4, k // 2), (4,), (4,)), {"num_groups": 2}
    )
    yield Spec("InstanceNormalization", f"2x4x{k}", ((2, 4, k), (4,), (4,)))
    side = math.isqrt(k)
    yield Spec("GlobalAveragePool", f"{side}x{side}", ((2, 4, side, side),))
    yield Spec(
        "AveragePool",
        f"{side}x{side}_window",
        ((1, 4, side, side + 2),),
        {"kernel_shape": [side, side]},
    )
    for p in (1, 2):
        yield Spec("LpNormalization", f"p{p}_16x{k}", (rows,), {"axis": -1, "p": p})


def allows(op: str, dtype: str) -> bool:
    """Whether ``op``'s schema at :data:`OPSET` takes ``dtype`` as its first input."""
    schema = onnx.defs.get_schema(op, OPSET)
    return f"tensor({dtype})" in schema.inputs[0].types


def _elem(dtype: str) -> int:
    return int(getattr(onnx.TensorProto, dtype.upper()))


def model(spec: Spec, elem: int) -> onnx.ModelProto:
    """The single-node model of ``spec`` with float tensors of type ``elem``."""
    names = [f"x{i}" for i in range(len(spec.shapes))]
    consts = [f"c{i}" for i in range(len(spec.consts))]
    node = helper.make_node(spec.op, names + consts, ["y"], **spec.attrs)
    graph = helper.make_graph(
        [node],
        f"{spec.op}_{DIMENSION}",
        [helper.make_tensor_value_info(n, elem, s) for n, s in zip(names, spec.shapes)],
        [helper.make_tensor_value_info("y", elem, None)],
        [numpy_helper.from_array(v, n) for v, n in zip(spec.consts, consts)],
    )
    made = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    # the output's shape from strict shape inference (which also validates the
    # node); a function op's (GroupNormalization's) is its input's shape
    made = onnx.shape_inference.infer_shapes(made, check_type=True, strict_mode=True)
    out = made.graph.output[0].type.tensor_type
    if not out.HasField("shape"):
        out.shape.CopyFrom(made.graph.input[0].type.tensor_type.shape)
    return made


def inputs(spec: Spec, dtype: str, seed: int) -> list[np.ndarray]:
    """Values uniform in [0, 1), rounded to ``dtype``."""
    rng = np.random.default_rng(seed)
    dt = helper.tensor_dtype_to_np_dtype(_elem(dtype))
    return [rng.uniform(0.0, 1.0, size=s).astype(dt) for s in spec.shapes]


def expected(spec: Spec, dtype: str, values: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The float64 model's outputs on ``values`` (exactly widened), rounded to ``dtype``."""
    from ..oracle import evaluator

    wide = evaluator(model(spec, onnx.TensorProto.DOUBLE))
    feeds = {f"x{i}": v.astype(np.float64) for i, v in enumerate(values)}
    dt = helper.tensor_dtype_to_np_dtype(_elem(dtype))
    return [np.asarray(y).astype(dt) for y in wide.run(None, feeds)]


def _load(spec: Spec, dtype: str, seed: int) -> tuple[onnx.ModelProto, list[DataSet]]:
    m = model(spec, _elem(dtype))
    onnx.checker.check_model(m)
    values = inputs(spec, dtype, seed)
    return m, [(values, expected(spec, dtype, values))]


def cases(depth: str) -> Iterator[Case]:
    """The ``accumulate`` cases at ``depth`` (K of :data:`LENGTHS`)."""
    for k in LENGTHS[depth]:
        for spec in specs(k):
            for dtype in DTYPES:
                if not allows(spec.op, dtype):
                    continue
                name = f"{spec.op}/{DIMENSION}/{spec.detail}_{dtype}"
                seed = zlib.crc32(name.encode())
                yield Case(
                    name,
                    "explore",
                    lambda s=spec, d=dtype, r=seed: _load(s, d, r),  # type: ignore[misc]
                    dimension=DIMENSION,
                    seed=seed,
                )
