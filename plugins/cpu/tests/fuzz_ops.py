"""Case generators of :mod:`test_fuzz_native` for the other native paths: data
movement (Transpose, Concat, Gather), Resize, the row-wise ops (Softmax,
LayerNormalization, reductions) and the elementwise ones (arithmetic with
broadcasting, Relu, Erf, Gelu, BiasGelu, BatchNormalization).
"""

from __future__ import annotations

import math
from typing import Any

from fuzz_draw import (
    Case,
    Drawer,
    bad_axis,
    composite,
    float_dtype,
    small_shape,
    tensor,
)
from hypothesis import strategies as st

# -- data movement: Transpose, Concat, Gather ---------------------------------------

MOVE_DTYPES = ("float32", "float32", "float16", "float64", "int8", "uint8", "int64", "bool")


@composite
def transpose_cases(d: Drawer) -> Case:
    rank = d.int(0, 5) if d.chance(80) else d.int(6, 10)
    shape = small_shape(d, rank, hi=4 if rank < 6 else 2)
    dtype = d.pick(*MOVE_DTYPES)
    a: dict[str, Any] = {}
    if d.chance(85):
        perm = list(d(st.permutations(list(range(rank)))))
        if d.hostile("perm", 30):
            kind = d.pick("dup", "range", "length", "negative")
            if kind == "dup" and rank >= 2:
                perm[0] = perm[1]
            elif kind == "range" and rank:
                perm[d.int(0, rank - 1)] = d.pick(rank, rank + 3, 2**31, 2**63 - 1)
            elif kind == "negative" and rank:
                perm[d.int(0, rank - 1)] = d.pick(-1, -rank, -rank - 1, -(2**63))
            else:
                perm = perm[:-1] if perm and d.chance(50) else [*perm, 0]
        a["perm"] = perm
    return d.case("Transpose", d.pick(13, 21), [tensor(dtype, shape)], [dtype], a)


@composite
def concat_cases(d: Drawer) -> Case:
    rank = d.int(1, 4)
    base = small_shape(d, rank, hi=4, budget=512)
    axis = d.int(-rank, rank - 1)
    dtype = d.pick(*MOVE_DTYPES)
    shapes = []
    for _ in range(d.int(1, 4)):
        s = list(base)
        s[axis] = d.int(0, 4)
        shapes.append(s)
    if d.hostile("shapes", 20):
        if d.chance(50) and rank > 1:
            shapes[-1][(axis + 1) % rank] += 1
        else:
            shapes[-1] = [*shapes[-1], 1]
    if d.chance(8):
        axis = bad_axis(d, rank)
    inputs = [tensor(dtype, s, const=d.chance(10)) for s in shapes]
    return d.case("Concat", 13, inputs, [dtype], {"axis": axis})


@composite
def gather_cases(d: Drawer) -> Case:
    rank = d.int(1, 4)
    shape = small_shape(d, rank, hi=6, budget=2048)
    dtype = d.pick(*MOVE_DTYPES)
    axis = d.int(-rank, rank - 1)
    n = shape[axis]
    idx_shape = small_shape(d, d.int(0, 2), hi=4, budget=16)
    count = math.prod(idx_shape)
    vals = [d.int(-n, n - 1) if n else 0 for _ in range(count)]
    if count and d.hostile("indices", 25):
        vals[d.int(0, count - 1)] = d.pick(
            n, -n - 1, n + 7, 2**31 - 1, -(2**31), 2**63 - 1, -(2**63)
        )
    if d.chance(8):
        axis = bad_axis(d, rank)
    itype = d.pick("int64", "int32")
    if itype == "int32":
        vals = [max(min(v, 2**31 - 1), -(2**31)) for v in vals]
    idx = tensor(itype, idx_shape, values=vals, const=d.chance(25))
    return d.case("Gather", 13, [tensor(dtype, shape), idx], [dtype], {"axis": axis})


# -- Resize ---------------------------------------------------------------------------

COORD_MODES = ("half_pixel", "asymmetric", "pytorch_half_pixel", "align_corners",
               "half_pixel_symmetric", "tf_crop_and_resize")  # fmt: skip
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")
SCALES = (0.5, 1.0, 1.5, 2.0, 3.0, 0.75, 0.3, 1.0 / 3.0, 2.5)
HOSTILE_SCALES = (0.0, -1.0, -2.0, float("nan"), float("inf"), 1e9, 1e-9)


@composite
def resize_cases(d: Drawer) -> Case:
    opset = d.pick(11, 13, 18, 19)
    rank = 4 if d.chance(80) else d.pick(1, 2, 3, 5)
    shape = small_shape(d, rank, hi=6, budget=600)
    dtype = d.pick("float32", "float32", "float64", "float16", "uint8", "int8")
    mode = d.pick("nearest", "linear", "cubic")
    a: dict[str, Any] = {"mode": mode}
    modes = COORD_MODES if opset >= 19 else COORD_MODES[:-2] + COORD_MODES[-1:]
    a["coordinate_transformation_mode"] = d.pick(*modes)
    if mode == "nearest":
        a["nearest_mode"] = d.pick(*NEAREST_MODES)
    if mode == "cubic" and d.chance(50):
        a["cubic_coeff_a"] = d.pick(-0.5, -0.75, 0.0)
    if (mode == "cubic" and d.chance(30)) or d.hostile("exclude_outside", 5):
        a["exclude_outside"] = 1  # onnxruntime: cubic only
    axes = list(range(rank))
    if opset >= 18:
        if mode != "nearest" and d.chance(30):
            a["antialias"] = 1
        if rank >= 2 and d.chance(40):
            axes = d.pick([rank - 2, rank - 1], [-2, -1], [rank - 1, rank - 2])
            a["axes"] = axes
        if d.chance(20):
            a["keep_aspect_ratio_policy"] = d.pick("not_larger", "not_smaller")
    lead_ones = d.chance(75)
    n_axes = len(axes)
    roi: dict[str, Any] | None = None
    if a["coordinate_transformation_mode"] == "tf_crop_and_resize":
        lo = [d.pick(0.0, 0.1, 0.25) for _ in range(n_axes)]
        hi = [d.pick(1.0, 0.9, 0.6) for _ in range(n_axes)]
        roi = tensor("float32", [2 * n_axes], values=lo + hi, const=True)
        if d.chance(50):
            a["extrapolation_value"] = d.pick(0.0, -1.0, 7.5)
    use_sizes = d.chance(50)
    if use_sizes:
        vals = [d.int(0 if d.chance(15) else 1, 9) for _ in range(n_axes)]
        if lead_ones and "axes" not in a and rank >= 2:
            vals[: rank - 2] = shape[: rank - 2]
        if d.chance(25):
            vals = d.spoil(vals, "sizes")
        given = tensor("int64", [len(vals)], values=vals, const=d.chance(70))
    else:
        fvals = [d.pick(*SCALES) for _ in range(n_axes)]
        if lead_ones and "axes" not in a and rank >= 2:
            fvals[: rank - 2] = [1.0] * (rank - 2)
        if d.hostile("scales", 25):
            fvals[d.int(0, n_axes - 1)] = d.pick(*HOSTILE_SCALES)
            if d.chance(20):
                fvals = fvals[:-1]
        given = tensor("float32", [len(fvals)], values=fvals, const=d.chance(70))
    if d.hostile("mode", 6):
        a["mode"] = d.pick("bilinear", "area", "")
    if d.hostile("coordinate_transformation_mode", 4):
        a["coordinate_transformation_mode"] = "bogus"
    empty = tensor("float32", [0], values=[], const=True)
    if use_sizes:
        inputs = [tensor(dtype, shape), roi or (empty if opset < 13 else None),
                  empty if opset < 13 else None, given]  # fmt: skip
    else:
        inputs = [tensor(dtype, shape), roi or (empty if opset < 13 else None), given]
    # integers: interpolated values may round either way at .5
    int_atol = 1 if dtype in ("int8", "uint8") and mode != "nearest" else None
    return d.case("Resize", opset, inputs, [dtype], a, int_atol=int_atol)


# -- row-wise: Softmax, LogSoftmax, LayerNormalization, reductions ---------------------


@composite
def softmax_cases(d: Drawer) -> Case:
    op = d.pick("Softmax", "LogSoftmax")
    opset = d.pick(11, 13)
    rank = d.int(0, 4)
    shape = small_shape(d, rank, hi=6)
    if d.chance(15) and rank:
        shape[-1] = d.pick(33, 257, 600)
    dtype = float_dtype(d, "float64", "float64")
    a: dict[str, Any] = {}
    if d.chance(70):
        a["axis"] = d.int(-rank, max(rank - 1, 0))
        if d.chance(12):
            a["axis"] = bad_axis(d, rank)
    # -inf only (masked scores): the oracles disagree with each other on +inf and NaN
    x = tensor(dtype, shape, special=d.chance(20) and "-inf")
    return d.case(op, opset, [x], [dtype], a)


def _norm_shape(d: Drawer, norm: list[int], what: str, suffix: bool) -> list[int]:
    """The normalized shape ``norm``, a suffix of it (broadcast), or a wrong shape."""
    shape = list(norm)
    if suffix and len(norm) > 1 and d.chance(25):
        shape = norm[1:]
    if d.hostile(what, 10):
        shape = [d.int(0, 6) for _ in range(d.int(0, 3))]
        if shape == norm:
            shape = [*shape, 2]
    return shape


@composite
def layer_norm_cases(d: Drawer) -> Case:
    rank = d.int(1, 4)
    shape = small_shape(d, rank, hi=6)
    dtype = float_dtype(d, "float64", "float64")
    axis = d.int(-rank, rank - 1)
    norm = shape[axis:]
    a: dict[str, Any] = {"axis": axis}
    if d.chance(8):
        a["axis"] = bad_axis(d, rank)
    if d.chance(30):
        a["epsilon"] = d.pick(1e-5, 0.0, 1.0)
    if d.hostile("epsilon", 5):
        a["epsilon"] = -1.0
    inputs: list[Any] = [tensor(dtype, shape),
                         tensor(dtype, _norm_shape(d, norm, "scale", True), const=d.chance(30))]  # fmt: skip
    if d.chance(50):
        inputs.append(tensor(dtype, _norm_shape(d, norm, "bias", True)))
    if d.chance(20):
        ref = {"op": "LayerNormalization", "opset": 17, "outputs": [dtype]}
        return d.case("FusedLayerNorm", 17, inputs, [dtype], a, domain="com.ortcore",
                      opsets={"com.ortcore": 1}, ref=ref)  # fmt: skip
    n_out = d.pick(1, 1, 2, 3)
    return d.case("LayerNormalization", d.pick(17, 22), inputs,
                  [dtype, "float32", "float32"][:n_out], a)  # fmt: skip


REDUCE_OPS = ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin")


@composite
def reduce_cases(d: Drawer) -> Case:
    op = d.pick(*REDUCE_OPS)
    opset = d.pick(11, 13, 18, 20)
    rank = d.int(0, 4)
    shape = small_shape(d, rank, hi=6)
    if d.chance(10) and rank:
        shape[-1] = d.pick(700, 70000 // max(1, math.prod(shape[:-1])))
    dtype = d.pick("float32", "float32", "float64", "float16")
    a: dict[str, Any] = {}
    if d.chance(30):
        a["keepdims"] = d.pick(0, 1)
    axes: list[int] | None = None
    if d.chance(75):
        kind = d.pick("last", "all", "some", "some", "bad")
        if kind == "last" and rank:
            axes = [d.pick(rank - 1, -1)]
        elif kind == "all":
            axes = list(range(rank))
        elif kind == "some" and rank:
            axes = list(d(st.lists(st.integers(-rank, rank - 1), min_size=1, max_size=rank,
                                   unique=True)))  # fmt: skip
        else:
            axes = [bad_axis(d, rank)] if rank == 0 or d.chance(50) else [0, 0]
            d.bad.append("axes")
    input_axes = opset >= 18 or (op == "ReduceSum" and opset >= 13)
    inputs: list[Any] = [tensor(dtype, shape, special=d.chance(15))]
    if input_axes:
        if d.chance(30):
            a["noop_with_empty_axes"] = 1
        if axes is not None:
            inputs.append(tensor("int64", [len(axes)], values=axes, const=d.chance(60)))
        elif d.chance(20):
            inputs.append(tensor("int64", [0], values=[], const=True))
    elif axes is not None:
        a["axes"] = axes
    return d.case(op, opset, inputs, [dtype], a)


# -- elementwise: arithmetic with broadcasting, Relu, Erf, Gelu, BiasGelu, BatchNormalization


@composite
def binary_cases(d: Drawer) -> Case:
    op = d.pick("Add", "Sub", "Mul", "Div", "Add", "Sum", "Mean")
    rank = d.int(0, 4)
    if d.chance(12):
        full = [d.pick(1, 2, 3), 33000]  # chunked, multithreaded loops
        rank = 2
    else:
        full = small_shape(d, rank, hi=5)
    kind = d.pick("same", "scalar", "channel", "tail", "general", "bad")
    if kind == "same":
        other = list(full)
    elif kind == "scalar":
        other = [1] * d.int(0, rank)
    elif kind == "channel" and rank >= 2:
        ax = d.int(0, rank - 1)
        other = [1] * rank
        other[ax] = full[ax]
        other = other[d.int(0, ax) :]
    elif kind == "tail" and rank:
        other = [*([1] * d.int(0, 2)), *full[d.int(0, rank - 1) :]]
    elif kind == "general" and rank:
        other = [v if d.chance(50) else 1 for v in full]
        if d.chance(40):
            full = [v if d.chance(70) else 1 for v in full]
    else:
        d.bad.append("shapes")
        other = [v + 1 for v in full] if full else [2]
    if d.chance(50):
        full, other = other, full
    dtype = "float32" if d.chance(85) else d.pick("float16", "float64")
    inputs = [tensor(dtype, full, special=d.chance(20)), tensor(dtype, other, const=d.chance(20))]
    return d.case(op, d.pick(7, 13, 14), inputs, [dtype])


def _approximate(d: Drawer, a: dict[str, Any]) -> None:
    if d.chance(40):
        a["approximate"] = d.pick("tanh", "none")
    if d.hostile("approximate", 8):
        a["approximate"] = d.pick("exact", "", "TANH")


@composite
def unary_cases(d: Drawer) -> Case:
    op = d.pick("Relu", "Erf", "Gelu", "Gelu", "FusedGelu")
    shape = small_shape(d, d.int(0, 4), hi=6)
    if d.chance(12):
        shape = [2, 33000]
    dtypes = {"Relu": ["float32", "float32", "float16", "float64", "int8", "int32"],
              "Erf": ["float32", "float32", "float16", "float64", "int32", "int64"]}  # fmt: skip
    dtype = d.pick(*dtypes.get(op, ["float32", "float32", "float16", "float64"]))
    x = tensor(dtype, shape, special=d.chance(15))
    a: dict[str, Any] = {}
    if op in ("Gelu", "FusedGelu"):
        _approximate(d, a)
    if op == "FusedGelu":
        ref = {"op": "Gelu", "opset": 20}
        return d.case(op, 17, [x], [dtype], a, domain="com.ortcore", opsets={"com.ortcore": 1},
                      ref=ref, rtol=1e-3)  # fmt: skip
    opset = {"Relu": 14, "Erf": 13}.get(op, 20)
    return d.case(op, opset, [x], [dtype], a, rtol=1e-3 if op == "Gelu" else None)


@composite
def bias_gelu_cases(d: Drawer) -> Case:
    shape = small_shape(d, d.int(1, 4), hi=6)
    dtype = d.pick("float32", "float32", "float32", "float16", "float64")
    b_shape = shape[-1:]
    if d.chance(15):
        b_shape = d.pick([], [1], shape[-2:])  # broadcasts: valid, but not the fused path
    if d.hostile("bias shape", 8):
        b_shape = [shape[-1] + 1]
    a: dict[str, Any] = {}
    _approximate(d, a)
    nodes = [
        {"op": "Add", "inputs": ["x0", "x1"], "outputs": ["t"]},
        {"op": "Gelu", "inputs": ["t"], "outputs": ["y0"], "attrs": a},
    ]
    inputs = [tensor(dtype, shape), tensor(dtype, b_shape, const=d.chance(30))]
    return d.case("BiasGelu", 20, inputs, [dtype], a, domain="com.ortcore",
                  opsets={"com.ortcore": 1}, ref={"nodes": nodes, "opsets": {}}, rtol=1e-3)  # fmt: skip


@composite
def batch_norm_cases(d: Drawer) -> Case:
    opset = d.pick(9, 14, 15)
    rank = d.int(2, 5)
    shape = small_shape(d, rank, hi=5)
    c = shape[1]
    dtype = float_dtype(d, "float64")
    shapes = [[c]] * 4
    if d.hostile("parameter shape", 12):
        shapes = list(shapes)
        shapes[d.int(0, 3)] = d.pick([c + 1], [], [c, 1], [0])
    inputs: list[Any] = [tensor(dtype, shape)]
    for k, s in enumerate(shapes):
        vals = None
        if k == 3:  # a variance: not negative
            vals = [float(d.pick(0.0, 0.5, 1.0, 2.0)) for _ in range(math.prod(s))]
        inputs.append(tensor(dtype, s, values=vals, const=d.chance(50)))
    a: dict[str, Any] = {}
    if d.chance(30):
        a["epsilon"] = d.pick(1e-5, 0.0, 0.5)
    return d.case("BatchNormalization", opset, inputs, [dtype], a)
