"""The pooling window rules over the geometry space (``pool_geometry.py``):
MaxPool (Indices, storage_order), AveragePool (count_include_pad) and
LpPool, 1-3 spatial dims, every ceil_mode, dilation, padding and auto_pad,
against onnxruntime in every build of the CPU provider's pooling loops, and
against the rules written out (``pool_oracle.py``) where onnxruntime
refuses a geometry. A few hundred geometries here;
``ORTCORE_POOL_GEOMETRIES=N`` (or ``python plugins/cpu/tests/pool_geometry.py
--count N --sweep``) runs more.

Where onnxruntime and onnx.reference disagree, ortcore follows onnxruntime;
where onnxruntime breaks the spec's text ortcore follows the spec
(``pool_geometry.DECISIONS``, each tested here):

- a window with no tap on the input (every tap in the pads, a dilation
  stepping over the input, a ``ceil_mode`` window past the data): MaxPool
  gives the lowest finite value of the type pooled in, with the Indices of
  position (-1, ..., -1), as onnxruntime (onnx.reference gives NaN);
  AveragePool and LpPool give 0 (onnx.reference counts taps it should not).
- AveragePool's ``count_include_pad`` counts a window's taps up to the end
  of the end pads, and, for opsets 7-18 with ``ceil_mode`` 0, every tap, as
  onnxruntime's kernels of those opsets (they differ only on a window wider
  than the padded input).
- an output size rounds toward zero: a window wider than the padded input
  still gives one output (onnx.reference and the spec's formula give none).
- pads as large as the kernel: onnxruntime refuses them, the spec allows
  them, ortcore computes them by the same rules.
- SAME padding with dilations: the spec's (and onnx shape inference's)
  output size and pads, not onnxruntime's.
- a MaxPool window of -inf inputs only: -inf (onnxruntime: float32's lowest).
"""

from __future__ import annotations

import math
import os
from typing import Any

import numpy as np
import pool_geometry as geometry
import pytest
from ep_sdk.testing import KernelKit, make_node_model
from onnx import shape_inference

from ortcore_cpu.kernels._isa import runnable_builds
from ortcore_cpu.provider import CPUExecutionProvider

ort = pytest.importorskip("onnxruntime")

SAMPLE = int(os.environ.get("ORTCORE_POOL_GEOMETRIES", "300"))
"""Geometries drawn from the space; the default keeps CI to seconds."""
BUILDS = runnable_builds("pool")
ENGINES = {f"ortcore {m.__name__.rsplit('.', 1)[1]}": geometry.ortcore_engine(m, 2) for m in BUILDS}
kit = KernelKit(CPUExecutionProvider, opset=19, threads=2)


def _assert_agree(cases: list[geometry.Case]) -> geometry.Tally:
    tally, found = geometry.compare(cases, ENGINES, reference=False)
    assert tally.disagreements("rules vs onnxruntime") == 0, tally.report()
    wrong = {name: got for name, got in found.items() if got}
    assert not wrong, "\n".join(
        f"{name}: {c.describe()}: {why}" for name, got in wrong.items() for c, why in got.items()
    )
    return tally


def test_generated_geometries_agree_with_onnxruntime_in_every_build() -> None:
    tally = _assert_agree(geometry.sample_cases(SAMPLE, seed=55))
    compared = sum(n for n in tally.classes["rules vs onnxruntime"].values())
    assert compared > SAMPLE // 2, "most geometries should be ones onnxruntime runs"
    for name in ENGINES:
        seen = {k.rsplit(" ", 1)[0] for k in tally.paths[f"{name} vs onnxruntime"]}
        unit = "masked" if name.endswith("avx512") else "flat"
        assert {"rows", "general", "indices", "numpy", unit} <= seen, (name, seen)


# The issue's geometry: MaxPool of a length-1 input, kernel 4, pads [1, 3],
# strides 3, dilations 2, ceil_mode 1: the taps at -1, 1, 3, 5 miss the input.
ISSUE = {"kernel_shape": 4, "pads": (1, 3), "strides": 3, "dilations": 2, "ceil_mode": 1}
ISSUE_LENGTH = 1


def _neighbours() -> list[tuple[int, dict[str, Any]]]:
    """The issue's 1-D geometry and every geometry one step from it (each
    value up or down one, ``ceil_mode`` both ways)."""
    out = []
    steps = [("length", d) for d in (-1, 1)] + [
        (k, d) for k in ("kernel_shape", "strides", "dilations", "pad0", "pad1") for d in (-1, 1)
    ]
    for (what, step), ceil in [*[(s, c) for s in steps for c in (0, 1)], (("length", 0), 1)]:
        a = dict(ISSUE, ceil_mode=ceil)
        n = ISSUE_LENGTH + step if what == "length" else ISSUE_LENGTH
        if what.startswith("pad"):
            pads = list(a["pads"])
            pads[int(what[-1])] += step
            a["pads"] = tuple(pads)
        elif what != "length":
            a[what] += step
        if n >= 1 and min(a["pads"]) >= 0 and min(a["kernel_shape"], a["strides"]) >= 1:
            out.append((n, a))
    return out


def _case(op: str, opset: int, dtype: str, n: int, geo: dict[str, Any], rank: int = 1,
          indices: bool = False, **extra: Any) -> geometry.Case:  # fmt: skip
    """A case whose last spatial axis has ``geo`` (length ``n``) and any
    others a plain 3-wide window over 5 values."""
    lead = rank - 1
    attrs: dict[str, Any] = {
        "kernel_shape": [3] * lead + [geo["kernel_shape"]],
        "strides": [1] * lead + [geo["strides"]],
        "pads": [1] * lead + [geo["pads"][0]] + [1] * lead + [geo["pads"][1]],
        **extra,
    }
    if geo["dilations"] != 1 and (op != "AveragePool" or opset >= 19):
        attrs["dilations"] = [1] * lead + [geo["dilations"]]
    if geo["ceil_mode"]:
        attrs["ceil_mode"] = 1
    shape = (2, 2, *[5] * lead, n)
    return geometry.Case(op, opset, dtype, shape, geometry._frozen(attrs), indices, seed=n)


VARIANTS: list[tuple[str, int, str, dict[str, Any], bool]] = [
    ("MaxPool", 12, "float32", {}, False),
    ("MaxPool", 12, "float32", {}, True),
    ("MaxPool", 22, "float32", {"storage_order": 1}, True),
    ("MaxPool", 12, "float16", {}, False),
    ("MaxPool", 12, "float64", {}, True),
    ("MaxPool", 12, "int8", {}, False),
    ("MaxPool", 22, "uint8", {}, False),
    ("AveragePool", 19, "float32", {}, False),
    ("AveragePool", 19, "float32", {"count_include_pad": 1}, False),
    ("AveragePool", 11, "float32", {"count_include_pad": 1}, False),
    ("AveragePool", 22, "float16", {"count_include_pad": 1}, False),
    ("AveragePool", 19, "float64", {}, False),
    ("LpPool", 18, "float32", {"p": 1}, False),
    ("LpPool", 18, "float32", {"p": 2}, False),
    ("LpPool", 22, "float32", {"p": 3}, False),
]


@pytest.mark.parametrize(("op", "opset", "dtype", "extra", "indices"), VARIANTS,
                         ids=[f"{v[0]}-{v[1]}-{v[2]}-{i}" for i, v in enumerate(VARIANTS)])  # fmt: skip
def test_the_issue_geometry_and_its_neighbours(
    op: str, opset: int, dtype: str, extra: dict[str, Any], indices: bool
) -> None:
    cases = [
        _case(op, opset, dtype, n, geo, rank, indices, **extra)
        for rank in (1, 2, 3)
        for n, geo in (_neighbours() if rank == 1 else [(ISSUE_LENGTH, ISSUE)])
    ]
    _assert_agree(cases)


def _run(op: str, x: np.ndarray, attrs: dict[str, Any], opset: int,
         num_outputs: int = 1) -> tuple[list[np.ndarray], list[np.ndarray]]:  # fmt: skip
    """(ortcore's outputs, onnxruntime's)."""
    got = kit.run_node(op, [x], attrs, opset=opset, num_outputs=num_outputs)
    model = make_node_model(op, [x], attributes=attrs, opset=opset, num_outputs=num_outputs)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return list(got), list(sess.run(None, {"x0": x}))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.int8])
def test_the_issue_example_gives_onnxruntimes_values(dtype: type) -> None:
    """x = [[[5]]]: no tap of the window is on the input. onnxruntime gives
    the lowest finite value pooled in (float16 pools in float32: -inf) and
    Indices -1 (position -1 of the plane); ortcore gave -inf and 0."""
    x = np.array([[[5]]], dtype)
    attrs = {"kernel_shape": [4], "pads": [1, 3], "strides": [3], "dilations": [2],
             "ceil_mode": 1}  # fmt: skip
    got, want = _run("MaxPool", x, attrs, 12, num_outputs=2)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])
    if dtype in (np.float64, np.int8):
        return  # onnxruntime has no AveragePool or LpPool of those types
    for op, extra in (("AveragePool", {}), ("AveragePool", {"count_include_pad": 1}),
                      ("LpPool", {"p": 2})):  # fmt: skip
        got, want = _run(op, x, {**attrs, **extra}, 19 if op == "AveragePool" else 18)
        np.testing.assert_array_equal(got[0], want[0])


# (shape, attrs, dtype): geometries that take each of ortcore's max loops
MAX_LOOPS = [
    ((1, 2, 4, 4), {"kernel_shape": [2, 2], "pads": [1, 1, 0, 0]}, np.float32),  # flat/masked
    ((1, 2, 4, 4), {"kernel_shape": [2, 2], "pads": [1, 1, 1, 1], "strides": [2, 2]},
     np.float32),  # rows
    ((1, 2, 3, 4, 4), {"kernel_shape": [2, 2, 2], "pads": [1] * 6}, np.float32),  # general
    ((1, 2, 4, 4), {"kernel_shape": [2, 2], "pads": [1, 1, 1, 1]}, np.float64),  # numpy
]  # fmt: skip


@pytest.mark.parametrize(("shape", "attrs", "dtype"), MAX_LOOPS)
@pytest.mark.parametrize("indices", [False, True])
def test_a_window_of_minus_inf_only_is_minus_inf(
    shape: tuple[int, ...], attrs: dict[str, Any], dtype: type, indices: bool
) -> None:
    """DECISIONS["all -inf window"]: the max of -inf values is -inf in every
    loop (onnxruntime's MLAS kernel gives float32's lowest); a plane beside
    it with one finite value gives that value where a window reaches it."""
    x = np.full(shape, -np.inf, dtype)
    x[0, 1].flat[0] = 1.0
    got = kit.run_node("MaxPool", [x], attrs, opset=12, num_outputs=2 if indices else 1)
    assert np.isneginf(got[0][0, 0]).all()
    assert got[0][0, 1].max() == 1.0


@pytest.mark.parametrize("opset", [7, 11, 19, 22])
@pytest.mark.parametrize("ceil_mode", [0, 1])
def test_count_include_pad_divisor_of_a_window_wider_than_the_padded_input(
    opset: int, ceil_mode: int
) -> None:
    """A 4-wide window over 3 values and no pads gives one output (the size
    rounds toward zero, as onnxruntime). onnxruntime's kernel of opsets
    7-18 divides its sum by 4 with ceil_mode 0, that of opset 19 by the 3
    positions before the padded end; ortcore follows each."""
    x = np.arange(1, 2 * 9 + 1, dtype=np.float32).reshape(1, 2, 3, 3)
    attrs: dict[str, Any] = {"kernel_shape": [4, 2], "strides": [3, 1], "count_include_pad": 1}
    if opset >= 10:
        attrs["ceil_mode"] = ceil_mode
    elif ceil_mode:
        pytest.skip("no ceil_mode before opset 10")
    got, want = _run("AveragePool", x, attrs, opset)
    assert got[0].shape == want[0].shape == (1, 2, 1, 2)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-6)
    whole = opset < 19 and not ceil_mode
    first = x[0, 0, :, 0:2].sum() / (8 if whole else 6)
    np.testing.assert_allclose(got[0][0, 0, 0, 0], first, rtol=1e-6)


@pytest.mark.parametrize("auto_pad", ["SAME_UPPER", "SAME_LOWER"])
@pytest.mark.parametrize("op", ["MaxPool", "AveragePool", "LpPool"])
def test_same_padding_with_dilations_follows_the_spec(op: str, auto_pad: str) -> None:
    """DECISIONS["SAME with dilations"]: the output is ceil(input / stride),
    as onnx shape inference says, padded for the dilated kernel; its
    values are onnxruntime's on those pads written out."""
    x = np.random.default_rng(4).standard_normal((1, 2, 7, 9)).astype(np.float32)
    attrs = {"kernel_shape": [3, 2], "strides": [2, 3], "dilations": [2, 3], "auto_pad": auto_pad}
    opset = 19 if op != "LpPool" else 18
    (got,) = kit.run_node(op, [x], attrs, opset=opset)
    model = make_node_model(op, [x], attributes=attrs, opset=opset)
    inferred = shape_inference.infer_shapes(model).graph.output[0].type.tensor_type.shape
    assert got.shape == tuple(d.dim_value for d in inferred.dim) == (1, 2, 4, 3)
    spans = [(3 - 1) * 2 + 1, (2 - 1) * 3 + 1]
    total = [max((o - 1) * s + k - n, 0) for o, s, k, n in zip((4, 3), (2, 3), spans, (7, 9))]
    first = [t // 2 if auto_pad == "SAME_UPPER" else t - t // 2 for t in total]
    pads = first + [t - f for t, f in zip(total, first, strict=True)]
    explicit = {k: v for k, v in attrs.items() if k != "auto_pad"} | {"pads": pads}
    _, want = _run(op, x, explicit, opset)
    np.testing.assert_allclose(got, want[0], rtol=1e-5, atol=1e-6)


def test_max_unpool_refuses_the_index_of_an_empty_window() -> None:
    """A MaxPool window with no tap on the input has Indices -1 of its plane,
    as onnxruntime; MaxUnpool refuses such an index (numpy would count it
    from the end: a silent wrong answer), as onnxruntime does."""
    x = np.arange(1, 9, dtype=np.float32).reshape(1, 2, 4)
    pool = {"kernel_shape": [2], "strides": [2], "pads": [0, 0]}
    y, idx = kit.run_node("MaxPool", [x], pool, opset=12, num_outputs=2)
    (back,) = kit.run_node("MaxUnpool", [y, idx], pool, opset=11)
    np.testing.assert_array_equal(back, np.where(np.arange(8).reshape(1, 2, 4) % 2, x, 0))
    bad = idx.copy()
    bad[0, 1, 0] = -1
    with pytest.raises(Exception, match=r"index value out of bounds in input I: got -1"):
        kit.run_node("MaxUnpool", [y, bad], pool, opset=11)
    bad[0, 1, 0] = 8
    with pytest.raises(Exception, match=r"got 8, valid range is \[0, 8\)"):
        kit.run_node("MaxUnpool", [y, bad], pool, opset=11)
    with pytest.raises(Exception, match="must have the shape of input X"):
        kit.run_node("MaxUnpool", [y, idx[:, :1]], pool, opset=11)
    with pytest.raises(Exception, match="it must have 3 dimensions"):
        kit.run_node("MaxUnpool", [y[..., None], idx[..., None]], pool, opset=11)


def test_windows_without_taps_per_axis() -> None:
    """The geometry helper the kernels fill empty windows by: per axis, the
    output positions with no tap on the input."""
    from ortcore_cpu.kernels._window import window, windows_without_taps

    win = window([1, 6], [4, 2], pads=[1, 0, 3, 0], strides=[3, 2], dilations=[2, 1],
                 ceil_mode=True)  # fmt: skip
    assert win.out == (1, 3)
    assert windows_without_taps(win, [1, 6]) == ((0,), ())
    win = window([5], [2], pads=[4, 4], strides=[1])
    empty = windows_without_taps(win, [5])
    starts = [o - 4 for o in range(win.out[0])]
    assert empty == (tuple(o for o, s in enumerate(starts) if s + 1 < 0 or s >= 5),)
    assert math.prod(win.out) == 12
