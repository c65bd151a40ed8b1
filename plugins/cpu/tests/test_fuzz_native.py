"""Fuzzing of every operator whose CPU kernel reaches a Cython entry point.

Hypothesis draws small one-node models per operator group (shapes with
zero-size dims, 1-3 spatial dims, one element; the dtypes the Cython paths
take) with valid and hostile attributes: negative and huge pads, strides,
dilations and kernel sizes, kernels wider than the input, unknown
``auto_pad`` values, bad axes and permutations, out-of-range indices, group
counts that do not divide the channels, scale and bias of the wrong shape.
Each model runs through ``ortcore.InferenceSession`` in a child process
(``fuzz_worker.py``, which also judges it), so a crash, an abort or a hang
fails the test with the reproducing case instead of killing pytest. A case
passes when ortcore

- gives the outputs (dtype, shape, values within tolerance) of
  ``onnx.reference``; or of onnxruntime, or a brute-force reading of the
  spec (pooling), where the reference is wrong; or
- raises an ``ortcore.errors.OrtcoreError`` where onnx.reference raises too,
  where onnxruntime refuses the model too, or on a model the generator made
  invalid on purpose (``hostile``).

A raw (non-ortcore) exception, a wrong result (outputs of other types than
the model declares included), an ortcore error on a valid model the oracles
run, a crash and a hang are failures. ``fuzz_worker.py`` lists every verdict.

The draws are derandomized, so CI runs the same cases every time. For a
longer hunt: ``ORTCORE_FUZZ_EXAMPLES=2000 ORTCORE_FUZZ_SEED=7 pytest -q
plugins/cpu/tests/test_fuzz_native.py`` (draws per group; a seed draws
another set). A failure prints the command line that reruns its case alone.
"""

from __future__ import annotations

import collections
import json
import math
import os
import queue
import subprocess
import sys
import tempfile
import threading
import zlib
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, Phase, given, seed, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

WORKER = Path(__file__).with_name("fuzz_worker.py")
EXAMPLES = int(os.environ.get("ORTCORE_FUZZ_EXAMPLES", "0"))
"""Cases per operator; 0 takes each operator's default (sized for CI)."""
SEED = os.environ.get("ORTCORE_FUZZ_SEED")
"""Unset: derandomized draws (the same cases every run); set: that seed."""
START_TIMEOUT = 120.0
"""Seconds a worker may take to import ortcore and start its first case."""
ORTCORE_TIMEOUT = 60.0
"""Seconds ortcore may take on one case (session creation and run)."""
ORACLE_TIMEOUT = 60.0
"""Seconds the oracles may take on one case."""
FAILURES = frozenset({"raw", "mismatch", "spurious", "crash", "hang", "missing", "harness"})
"""Verdicts that fail the test (see ``fuzz_worker.py`` for the others)."""

Case = dict[str, Any]

# -- building blocks -------------------------------------------------------------

HOSTILE_INTS = (
    0, -1, -2, -5, -(2**31), -(2**63), 2**31 - 1, 2**31, 2**32 + 1, 2**40, 2**62, 2**63 - 1,
)  # fmt: skip
"""Attribute values no sane model holds: zero, negative, past int32, near int64's limits."""


def chance(percent: int) -> st.SearchStrategy[bool]:
    """True about ``percent`` % of the time."""
    return st.integers(0, 99).map(lambda v: v < percent)


def ints(n: int, lo: int, hi: int) -> st.SearchStrategy[list[int]]:
    return st.lists(st.integers(lo, hi), min_size=n, max_size=n)


class Drawer:
    """The ``draw`` of a composite strategy, and what it made invalid on purpose
    (``hostile``: an ortcore error is then always acceptable)."""

    def __init__(self, draw: Callable[[st.SearchStrategy[Any]], Any]) -> None:
        self.draw = draw
        self.bad: list[str] = []

    def __call__(self, strategy: st.SearchStrategy[Any]) -> Any:
        return self.draw(strategy)

    def chance(self, percent: int) -> bool:
        return bool(self.draw(chance(percent)))

    def pick(self, *options: Any) -> Any:
        return self.draw(st.sampled_from(options))

    def int(self, lo: int, hi: int) -> int:
        return int(self.draw(st.integers(lo, hi)))

    def hostile(self, what: str, percent: int) -> bool:
        """Whether to make ``what`` invalid (about ``percent`` % of the time)."""
        if self.chance(percent):
            self.bad.append(what)
            return True
        return False

    def spoil(self, values: list[int], what: str) -> list[int]:
        """``values`` with one entry made hostile, or its length changed."""
        self.bad.append(what)
        values = list(values)
        if not values or self.chance(20):
            extra = self.int(0, 3)
            return values[:extra] if extra < len(values) else values + [1] * extra
        values[self.int(0, len(values) - 1)] = self.pick(*HOSTILE_INTS)
        return values

    def case(
        self,
        op: str,
        opset: int,
        inputs: list[dict[str, Any] | None],
        outputs: list[str],
        attrs: dict[str, Any] | None = None,
        **extra: Any,
    ) -> Case:
        """A case for the worker: one ``op`` node in a model of ``opset``."""
        while inputs and inputs[-1] is None:
            inputs = inputs[:-1]
        c = {"op": op, "opset": opset, "inputs": inputs, "outputs": outputs,
             "attrs": attrs or {}, **{k: v for k, v in extra.items() if v is not None}}  # fmt: skip
        if self.bad:
            c["hostile"] = sorted(set(self.bad))
        return c


def composite(fn: Callable[..., Case]) -> Callable[..., st.SearchStrategy[Case]]:
    """``st.composite``, handing the function a :class:`Drawer`."""

    @st.composite
    def strategy(draw: Any, *args: Any, **kwargs: Any) -> Case:
        return fn(Drawer(draw), *args, **kwargs)

    return strategy


def tensor(
    dtype: str,
    shape: list[int] | tuple[int, ...],
    *,
    values: list[Any] | None = None,
    const: bool = False,
    special: bool | str = False,
) -> dict[str, Any]:
    """An input spec (see ``fuzz_worker.make_array``); random data unless
    ``values``; ``special`` sprinkles NaN and infinities (``"inf"``: infinities)."""
    spec: dict[str, Any] = {"dtype": dtype, "shape": [int(d) for d in shape]}
    if values is not None:
        spec["values"] = values
    if const:
        spec["const"] = True
    if special:
        spec["special"] = special
    return spec


def float_dtype(d: Drawer, *more: str) -> str:
    return str(d.pick("float32", "float32", "float32", "float16", *more))


def small_shape(d: Drawer, rank: int, hi: int = 4, budget: int = 4096) -> list[int]:
    """A shape of ``rank`` dims up to ``hi`` (zero-size now and then), at most
    ``budget`` elements."""
    lo = 0 if d.chance(15) else 1
    shape: list[int] = d(ints(rank, lo, hi))
    while math.prod(shape) > budget:
        shape[shape.index(max(shape))] //= 2
    return shape


def bad_axis(d: Drawer, rank: int) -> int:
    """An axis out of range for ``rank``."""
    d.bad.append("axis")
    return int(d.pick(rank, -rank - 1, rank + 5, 2**31, -(2**63), 2**63 - 1))


# -- sliding windows: Conv, ConvTranspose, MaxPool, AveragePool ------------------------

AUTO_PADS = ("NOTSET", "NOTSET", "NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER")
BAD_AUTO_PADS = ("", "same_upper", "SAME", "BOGUS", "VALID ")


def window_attrs(
    d: Drawer, nsp: int, *, dilations: bool = True, ceil: bool = False
) -> dict[str, Any]:
    """Window attributes of ``nsp`` spatial dims, hostile about one time in three."""
    a: dict[str, Any] = {"kernel_shape": d(ints(nsp, 1, 4))}
    if d.chance(50):
        a["strides"] = d(ints(nsp, 1, 3))
    if dilations and d.chance(40):
        a["dilations"] = d(ints(nsp, 1, 3))
    auto_pad = d.pick(*AUTO_PADS)
    if auto_pad != "NOTSET" or d.chance(20):
        a["auto_pad"] = auto_pad
    if auto_pad == "NOTSET" and d.chance(50):
        a["pads"] = d(ints(2 * nsp, 0, 3))
    if ceil and d.chance(50):
        a["ceil_mode"] = 1
    if d.chance(35):
        names = ["strides", "pads", "auto_pad", "kernel_shape"]
        names += ["dilations"] if dilations else []
        name = d.pick(*names)
        if name == "auto_pad":
            d.bad.append("auto_pad")
            a["auto_pad"] = d.pick(*BAD_AUTO_PADS, "SAME_UPPER", "VALID")
            a["pads"] = d(ints(2 * nsp, 0, 3))  # pads and auto_pad together
        else:
            default = [0] * (2 * nsp) if name == "pads" else [1] * nsp
            a[name] = d.spoil(a.get(name) or default, name)
    return a


def spatial_shape(d: Drawer, nsp: int, hi: int = 6) -> list[int]:
    return list(d(ints(nsp, 0 if d.chance(15) else 1, hi)))


def pool_pads_checked(d: Drawer, a: dict[str, Any]) -> None:
    """Count pads >= kernel as invalid: onnxruntime refuses them (and the
    spec leaves windows of padding only undefined)."""
    kernel, pads = a.get("kernel_shape") or [], a.get("pads") or []
    if len(pads) == 2 * len(kernel) and any(
        p >= k for p, k in zip(pads, [*kernel, *kernel], strict=True)
    ):
        d.bad.append("pads >= kernel")


@composite
def max_pool_cases(d: Drawer) -> Case:
    opset = d.pick(8, 10, 11, 12, 22)
    nsp = d.int(1, 3)
    dtype = d.pick("float32", "float32", "float16", "int8", "uint8")
    if opset < 12 and dtype in ("int8", "uint8"):
        dtype = "float32"
    a = window_attrs(d, nsp, dilations=opset >= 10, ceil=opset >= 10)
    pool_pads_checked(d, a)
    indices = d.chance(35)
    if indices and d.chance(50):
        a["storage_order"] = 1
        if d.hostile("storage_order", 20):
            a["storage_order"] = d.pick(2, -1)
    shape = [d.int(0, 2), d.int(0, 3), *spatial_shape(d, nsp)]
    outs = [dtype, "int64"] if indices else [dtype]
    # MaxPool lets no NaN win (as onnxruntime); the oracles let it: infinities only
    x = tensor(dtype, shape, special=dtype.startswith("float") and d.chance(10) and "inf")
    return d.case("MaxPool", opset, [x], outs, a)


@composite
def average_pool_cases(d: Drawer) -> Case:
    opset = d.pick(7, 10, 11, 19, 22)
    nsp = d.int(1, 3)
    dtype = float_dtype(d)
    a = window_attrs(d, nsp, dilations=opset >= 19, ceil=opset >= 10)
    pool_pads_checked(d, a)
    if d.chance(50):
        a["count_include_pad"] = d.pick(1, 1, 0)
        if d.hostile("count_include_pad", 10):
            a["count_include_pad"] = 3
    shape = [d.int(0, 2), d.int(0, 3), *spatial_shape(d, nsp)]
    return d.case("AveragePool", opset, [tensor(dtype, shape)], [dtype], a)


@composite
def global_pool_cases(d: Drawer) -> Case:
    op = d.pick("GlobalAveragePool", "GlobalMaxPool")
    rank = d.int(2, 5) if d.chance(90) else d.pick(0, 1)
    shape = list(d(ints(rank, 0 if d.chance(20) else 1, 6)))
    dtype = float_dtype(d, "float64")
    x = tensor(dtype, shape, special=d.chance(15))
    # Below rank 3 onnx.reference returns nonsense and onnxruntime refuses:
    # only a crash or a raw exception is a failure there. onnx.reference's
    # GlobalMaxPool is right for rank 4 only: ReduceMax is the oracle.
    ref = None
    if op == "GlobalMaxPool":
        node = {"op": "ReduceMax", "inputs": ["x0"], "outputs": ["y0"],
                "attrs": {"axes": list(range(2, rank)), "keepdims": 1}}  # fmt: skip
        ref = {"nodes": [node], "opset": 13}
    return d.case(op, d.pick(1, 22), [x], [dtype], crash_only=rank < 3 or None, ref=ref)


def weight_kernel(d: Drawer, a: dict[str, Any], nsp: int) -> list[int]:
    """The spatial dims of a convolution weight for the drawn attributes:
    ``kernel_shape`` stays an attribute now and then, and always where it was
    made hostile (the weight keeps a sane shape)."""
    kernel = list(a.pop("kernel_shape"))
    sane = [k if 1 <= k <= 4 else 2 for k in kernel[:nsp]] + [2] * (nsp - len(kernel))
    if kernel != sane or d.chance(30):
        a["kernel_shape"] = kernel
    return sane


def channels(d: Drawer, c: int, a: dict[str, Any]) -> int:
    """Draw ``group`` into ``a`` (one, depthwise, a divisor of ``c``, or
    hostile); return the group count the weight is shaped for."""
    kind = d.pick("one", "one", "depthwise", "depthwise", "divisor", "bad")
    group = 1
    if kind == "depthwise":
        group = c
    elif kind == "divisor":
        group = d.pick(*[g for g in range(1, c + 1) if c % g == 0])
    elif kind == "bad":
        d.bad.append("group")
        a["group"] = d.pick(c + 1, 2 * c + 1, 0, -1, -c, 2**31, 2**63 - 1)
        return 1
    a["group"] = group
    return group


@composite
def conv_cases(d: Drawer, fused: bool = False) -> Case:
    opset = d.pick(11, 22)
    nsp = d.int(1, 3) if d.chance(90) else 4
    dtype = float_dtype(d, "float64")
    a = window_attrs(d, nsp)
    kernel = weight_kernel(d, a, nsp)
    n, c = d.int(0, 2), d.int(1, 6)
    g = channels(d, c, a)
    mg = 1 if g == c and d.chance(50) else d.int(1, 3)
    cw = c // g
    if d.hostile("weight channels", 8):
        cw = d.pick(0, cw + 1, c + 1)
    x_shape = [n, c, *spatial_shape(d, nsp)]
    inputs = [tensor(dtype, x_shape), tensor(dtype, [g * mg, cw, *kernel], const=d.chance(30))]
    if d.chance(50):
        blen = g * mg
        if d.hostile("bias length", 10):
            blen = d.pick(0, 1 if blen > 1 else 2, blen + 1)
        inputs.append(tensor(dtype, [blen], const=d.chance(30)))
    if not fused:
        return d.case("Conv", opset, inputs, [dtype], a)
    act, params = d.pick(
        ("Relu", []), ("LeakyRelu", [0.1]), ("Clip", [-0.5, 0.5]), ("Sigmoid", []),
        ("Tanh", []), ("HardSigmoid", [0.2, 0.5]),
    )  # fmt: skip
    return conv_fused_case(d, opset, inputs, dtype, a, act, params)


def conv_fused_case(
    d: Drawer, opset: int, inputs: list[Any], dtype: str, a: dict[str, Any], act: str,
    params: list[float],
) -> Case:  # fmt: skip
    """FusedConv (com.ortcore), checked against Conv then the activation."""
    names = [f"x{i}" for i in range(len(inputs))]
    act_attrs: dict[str, Any] = {}
    act_inputs = ["t"]
    if act == "LeakyRelu":
        act_attrs = {"alpha": params[0]}
    elif act == "HardSigmoid":
        act_attrs = {"alpha": params[0], "beta": params[1]}
    ref_nodes = [{"op": "Conv", "inputs": names, "outputs": ["t"], "attrs": a}]
    ref_inputs = list(inputs)
    if act == "Clip":
        ref_inputs += [tensor(dtype, [], values=[params[0]], const=True),
                       tensor(dtype, [], values=[params[1]], const=True)]  # fmt: skip
        act_inputs += [f"x{len(inputs)}", f"x{len(inputs) + 1}"]
    ref_nodes.append({"op": act, "inputs": act_inputs, "outputs": ["y0"], "attrs": act_attrs})
    attrs = {**a, "activation": act}
    if params:
        attrs["activation_params"] = [float(p) for p in params]
    return d.case(
        "FusedConv", opset, inputs, [dtype], attrs, domain="com.ortcore",
        opsets={"com.ortcore": 1},
        ref={"nodes": ref_nodes, "inputs": ref_inputs, "opsets": {}},
    )  # fmt: skip


@composite
def winograd_cases(d: Drawer) -> Case:
    """Conv shapes that take the Winograd F(2x2, 3x3) path (16+ channels,
    3x3, stride 1, enough tiles), and near misses."""
    c, m = d.pick(16, 17, 24), d.pick(16, 20, 32)
    const = d.chance(70)
    side = d.int(4, 10) if const else d.int(14, 18)
    h, w = side, d.int(side - 2, side + 2)
    a: dict[str, Any] = {"kernel_shape": [3, 3]}
    if d.chance(50):
        a["pads"] = d(ints(4, 0, 2))
    elif d.chance(50):
        a["auto_pad"] = d.pick("SAME_UPPER", "SAME_LOWER", "VALID")
    if d.chance(25):
        a["pads"] = d.spoil(a.get("pads") or [1, 1, 1, 1], "pads")
        a.pop("auto_pad", None)
    n = d.int(1, 2)
    inputs = [tensor("float32", [n, c, h, w]), tensor("float32", [m, c, 3, 3], const=const)]
    if d.chance(50):
        inputs.append(tensor("float32", [m]))
    return d.case("Conv", d.pick(11, 22), inputs, ["float32"], a)


@composite
def conv_transpose_cases(d: Drawer) -> Case:
    opset = d.pick(11, 22)
    nsp = d.int(1, 3)
    dtype = float_dtype(d)
    a = window_attrs(d, nsp)
    kernel = weight_kernel(d, a, nsp)
    strides = a.get("strides") or [1] * nsp
    if d.chance(30):
        top = [max(1, min(int(s), 3)) - 1 for s in strides]
        a["output_padding"] = [d.int(0, t) for t in top]
        if d.chance(30):
            a["output_padding"] = d.spoil(a["output_padding"], "output_padding")
    n, c = d.int(0, 2), d.int(1, 4)
    g = channels(d, c, a)
    mg = d.int(1, 3)
    x_shape = [n, c, *spatial_shape(d, nsp, hi=5)]
    if d.chance(20):
        out = [d.int(0, 12) for _ in range(nsp)]
        a["output_shape"] = d.spoil(out, "output_shape") if d.chance(25) else out
    inputs = [tensor(dtype, x_shape), tensor(dtype, [c, mg, *kernel], const=d.chance(30))]
    if d.chance(50):
        blen = g * mg
        if d.hostile("bias length", 10):
            blen = d.pick(0, blen + 1)
        inputs.append(tensor(dtype, [blen]))
    return d.case("ConvTranspose", opset, inputs, [dtype], a)


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


# -- the table -----------------------------------------------------------------------


STRATEGIES: dict[str, tuple[Callable[[], st.SearchStrategy[Case]], int]] = {
    "MaxPool": (max_pool_cases, 600),
    "AveragePool": (average_pool_cases, 440),
    "GlobalPool": (global_pool_cases, 120),
    "Conv": (conv_cases, 500),
    "Conv-Winograd": (winograd_cases, 100),
    "FusedConv": (lambda: conv_cases(fused=True), 120),
    "ConvTranspose": (conv_transpose_cases, 400),
    "Transpose": (transpose_cases, 240),
    "Concat": (concat_cases, 200),
    "Gather": (gather_cases, 240),
    "Resize": (resize_cases, 500),
    "Softmax": (softmax_cases, 200),
    "LayerNormalization": (layer_norm_cases, 240),
    "Reduce": (reduce_cases, 280),
    "Binary": (binary_cases, 240),
    "Unary": (unary_cases, 200),
    "BiasGelu": (bias_gelu_cases, 100),
    "BatchNormalization": (batch_norm_cases, 120),
}
"""Name -> (strategy of cases, default number of cases per CI run)."""


def _pytorch_half_pixel_one(c: Case) -> bool:
    """A cubic or antialiased pytorch_half_pixel Resize with an axis resized to
    one element."""
    a, ins = c["attrs"], c["inputs"]
    if c["op"] != "Resize" or a.get("coordinate_transformation_mode") != "pytorch_half_pixel":
        return False
    if a.get("mode") != "cubic" and not a.get("antialias"):
        return False
    shape = ins[0]["shape"]
    axes = a.get("axes") or list(range(len(shape)))
    if len(ins) > 3 and ins[3] is not None:
        return 1 in ins[3]["values"]
    try:
        return 1 in [
            math.floor(shape[ax] * f) for ax, f in zip(axes, ins[2]["values"], strict=False)
        ]
    except (ValueError, OverflowError, IndexError):  # hostile scales or axes
        return False


KNOWN_DIVERGENCES: list[tuple[str, Callable[[Case], bool]]] = [
    (
        "Resize pytorch_half_pixel to one element: ortcore (as onnx.reference) samples "
        "at -0.5, the spec text and onnxruntime at 0; only cubic and antialias differ",
        _pytorch_half_pixel_one,
    ),
    (
        "Resize nearest tf_crop_and_resize: ortcore computes coordinates in float64, "
        "onnxruntime in float32, so a coordinate on a .5 tie (roi 0.1 * 5) may round "
        "the other way",
        lambda c: (
            c["op"] == "Resize"
            and c["attrs"].get("coordinate_transformation_mode") == "tf_crop_and_resize"
            and c["attrs"].get("mode") == "nearest"
        ),
    ),
]
"""Wrong-looking results (``mismatch``, ``spurious``) of cases that match a
known, deliberate or reported divergence: counted as ``known`` instead of
failing. Crashes, hangs and raw exceptions are never excused."""


KNOWN_CRASHES: list[tuple[str, Callable[[Case], bool]]] = []
"""Crashes outside the CPU provider that are reported and not fixed yet: a
group whose only failures are these is an expected failure (xfail), never a
pass. Remove an entry once its crash is fixed."""


def known_crash(c: Case, r: dict[str, Any]) -> str | None:
    """The known crash a ``crash`` verdict is, or None."""
    if r["verdict"] != "crash":
        return None
    return next((why for why, applies in KNOWN_CRASHES if applies(c)), None)


def known_divergence(c: Case, r: dict[str, Any]) -> str | None:
    """The known divergence that explains a mismatch or spurious error, or None."""
    if r["verdict"] not in ("mismatch", "spurious"):
        return None
    return next((why for why, applies in KNOWN_DIVERGENCES if applies(c)), None)


def draw_cases(name: str) -> list[Case]:
    """The cases of ``STRATEGIES[name]``, drawn by hypothesis (generation
    only: cases are judged in a child process, so there is nothing to shrink)."""
    make, default = STRATEGIES[name]
    n = EXAMPLES or default
    cases: list[Case] = []

    @settings(
        max_examples=n,
        derandomize=SEED is None,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(make())
    def collect(c: Case) -> None:
        cases.append(c)

    if SEED is not None:
        collect = seed(int(SEED) ^ zlib.crc32(name.encode()))(collect)
    collect()
    unique = list({json.dumps(c, sort_keys=True): c for c in cases}.values())
    for i, c in enumerate(unique):
        c["seed"] = i
    return unique


# -- running cases in child processes ------------------------------------------------


def _reader(stream: Any, out: queue.Queue[str | None]) -> None:
    for line in stream:
        out.put(line)
    out.put(None)


def _run_from(path: str, start: int, results: list[dict[str, Any] | None]) -> int:
    """Run cases ``start``... of ``path`` in one worker until it ends, dies or
    hangs; fill ``results``; return the index to resume from."""
    with tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(
            [sys.executable, str(WORKER), path, str(start)],
            stdout=subprocess.PIPE, stderr=err, text=True,
        )  # fmt: skip
        lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=_reader, args=(proc.stdout, lines), daemon=True).start()
        current, phase, ours = None, None, None
        timeouts = {None: START_TIMEOUT, "done": START_TIMEOUT, "start": ORTCORE_TIMEOUT,
                    "ortcore": ORACLE_TIMEOUT}  # fmt: skip
        try:
            while True:
                try:
                    line = lines.get(timeout=timeouts[phase])
                except queue.Empty:
                    proc.kill()
                    proc.wait()
                    if current is None or phase == "done":
                        raise RuntimeError(
                            f"fuzz worker stalled between cases after {current}"
                        ) from None
                    if phase == "start":
                        results[current] = {
                            "verdict": "hang",
                            "detail": f"no result in {ORTCORE_TIMEOUT:.0f} s",
                        }
                    else:
                        results[current] = {"verdict": "oracle_timeout", "ortcore": ours}
                    return current + 1
                if line is None:
                    break
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue
                current, phase = rec["i"], rec["phase"]
                if phase == "ortcore":
                    ours = rec["outcome"]
                elif phase == "done":
                    results[current] = {k: v for k, v in rec.items() if k not in ("i", "phase")}
            rc = proc.wait()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        err.seek(0)
        tail = err.read()[-3000:]
    if phase in (None, "done"):
        if rc != 0 or (current is None and start < len(results)):
            raise RuntimeError(f"fuzz worker failed (rc {rc}) outside a case:\n{tail}")
        return len(results) if current is None else current + 1
    assert current is not None
    verdict = "crash" if phase == "start" else "oracle_crash"
    results[current] = {"verdict": verdict, "detail": f"exit status {rc}\n{tail}"}
    return current + 1


def run_cases(cases: list[Case]) -> list[dict[str, Any]]:
    """Judge every case in child processes (a new one after a crash or hang)."""
    results: list[dict[str, Any] | None] = [None] * len(cases)
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(cases, f)
    try:
        start = 0
        while start < len(cases):
            start = _run_from(f.name, start, results)
    finally:
        os.unlink(f.name)
    for i, r in enumerate(results):
        if r is not None and r["verdict"] in ("crash", "hang"):
            alone = _run_alone(cases[i])
            r["detail"] += f"\n(run alone in a fresh process: {alone})"
    return [r if r is not None else {"verdict": "missing"} for r in results]


def _run_alone(c: Case) -> str:
    try:
        proc = subprocess.run(
            [sys.executable, str(WORKER), json.dumps(c)], capture_output=True, text=True,
            timeout=ORTCORE_TIMEOUT + ORACLE_TIMEOUT,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return "hangs again"
    if proc.returncode != 0:
        return f"fails again, exit status {proc.returncode}"
    return "passes: an earlier case may have corrupted memory"


def describe(c: Case, r: dict[str, Any]) -> str:
    """A failure report: verdict, the case, and the command that reruns it."""
    ins = ", ".join(
        "None" if s is None else
        f"{s['dtype']}{s['shape']}" + (f"={s['values']}" if "values" in s else "")
        + (" const" if s.get("const") else "") + (" +nan/inf" if s.get("special") else "")
        for s in c["inputs"]
    )  # fmt: skip
    op = f"{c.get('domain') or 'ai.onnx'}:{c['op']}-{c['opset']}"
    hostile = f" hostile={c['hostile']}" if c.get("hostile") else ""
    worker = WORKER.relative_to(Path.cwd()) if WORKER.is_relative_to(Path.cwd()) else WORKER
    return (
        f"[{r['verdict']}] {op} attrs={c['attrs']} inputs=({ins}){hostile}\n"
        f"    {str(r.get('detail', '')).strip()[:1500]}\n"
        f"    rerun: python {worker} '{json.dumps(c)}'"
    )


# -- the tests ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def outcomes(request: pytest.FixtureRequest) -> Iterator[dict[str, tuple[list[Case], list[Any]]]]:
    """Cases and verdicts of every operator group selected in this session:
    drawn here (hypothesis in one thread), judged two groups at a time (one
    child process each)."""
    here = Path(__file__)
    wanted = [
        item.callspec.params["group"]
        for item in request.session.items
        if Path(str(item.fspath)) == here and hasattr(item, "callspec")
    ]
    drawn = {name: draw_cases(name) for name in STRATEGIES if name in wanted}
    with ThreadPoolExecutor(max_workers=2) as pool:
        judged = dict(zip(drawn, pool.map(run_cases, drawn.values()), strict=True))
    yield {name: (cases, judged[name]) for name, cases in drawn.items()}


@pytest.mark.parametrize("group", list(STRATEGIES))
def test_fuzz_native(group: str, outcomes: dict[str, tuple[list[Case], list[Any]]]) -> None:
    """Every generated case of ``group`` ends in a clean ortcore error or in
    the oracles' outputs; never in a crash, a hang or a raw exception."""
    cases, results = outcomes[group]
    for c, r in zip(cases, results, strict=True):
        why = known_divergence(c, r)
        if why is not None:
            r["verdict"], r["detail"] = "known", f"{why}; {r.get('detail', '')}"
    counts = collections.Counter(r["verdict"] for r in results)
    print(f"{group}: {len(cases)} cases, {dict(sorted(counts.items()))}")
    failed = [(c, r) for c, r in zip(cases, results, strict=True) if r["verdict"] in FAILURES]
    bad = [describe(c, r) for c, r in failed if known_crash(c, r) is None]
    assert not bad, f"{group}: {len(bad)} of {len(cases)} cases failed\n" + "\n".join(bad[:15])
    known = sorted({str(known_crash(c, r)) for c, r in failed})
    if known:
        pytest.xfail(f"{len(failed)} case(s) hit known crashes: " + "; ".join(known))
