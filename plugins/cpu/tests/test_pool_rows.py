"""The row path of 2-D pooling, in every build this CPU runs (any strides: padded rows combined column by
column, then each output's taps; rows that end inside a vector or cross
vector boundaries, stride 2 from even lanes), the flat path of small
stride-1 planes, and AveragePool's whole-plane shortcut,
against a brute-force numpy oracle and onnx.reference: strides, pads,
dilations, ceil_mode, windows wider than the input, NaN, non-contiguous
inputs, float16, one and two threads."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest
from ep_sdk.testing import KernelKit

from ortcore_cpu.kernels._isa import runnable_builds
from ortcore_cpu.provider import CPUExecutionProvider

kit = KernelKit(CPUExecutionProvider, opset=19, threads=2)
RNG = np.random.default_rng(15)


def _rand(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def _oracle(x: np.ndarray, k: tuple, s: tuple, pb: tuple, pe: tuple, d: tuple, out: tuple,
            take_max: bool, include_pad: bool) -> np.ndarray:  # fmt: skip
    """Max (NaN and pads never win; -inf for no taps) or mean of each window
    of ``x`` (P, H, W), one output at a time."""
    p_, h, w = x.shape
    y = np.empty((p_, *out), np.float32)
    for p, i, j in itertools.product(range(p_), range(out[0]), range(out[1])):
        vals, n_pad = [], 0
        for a, b in itertools.product(range(k[0]), range(k[1])):
            r, c = i * s[0] - pb[0] + a * d[0], j * s[1] - pb[1] + b * d[1]
            if 0 <= r < h and 0 <= c < w:
                vals.append(float(x[p, r, c]))
            elif r < h + pe[0] and c < w + pe[1]:
                n_pad += 1
        if take_max:
            finite = [v for v in vals if v == v]
            y[p, i, j] = max(finite) if finite else -np.inf
        else:
            n = len(vals) + (n_pad if include_pad else 0)
            y[p, i, j] = sum(vals) / n if n else 0.0
    return y


def _out(size: int, k: int, s: int, pb: int, pe: int, d: int, ceil: bool) -> int:
    span = size + pb + pe - ((k - 1) * d + 1)
    return (-(-span // s) if ceil else span // s) + 1


# (H, W), kernel, strides, pads (begin h, w, end h, w), dilations, ceil_mode
GEOMETRIES = [
    ((9, 11), (3, 3), (2, 2), (0, 0, 0, 0), (1, 1), False),
    ((14, 14), (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), False),
    ((13, 10), (3, 2), (3, 2), (1, 0, 2, 1), (1, 1), True),
    ((12, 12), (3, 3), (2, 2), (0, 0, 0, 0), (2, 1), False),
    ((7, 15), (2, 5), (1, 3), (0, 2, 1, 2), (1, 2), True),
    ((5, 4), (3, 3), (2, 2), (2, 2, 2, 2), (1, 1), True),  # windows of padding only
    ((1, 17), (1, 3), (1, 2), (0, 1, 0, 1), (1, 1), False),
    ((6, 8), (3, 3), (2, 1), (1, 1, 1, 1), (1, 1), False),
    # rows of one vector and more: masked and scalar tails, the overlapping
    # last vector, stride 2 from even lanes, stride 3 on scalar columns
    ((27, 27), (3, 3), (2, 2), (0, 0, 0, 0), (1, 1), False),  # SqueezeNet's
    ((13, 111), (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), False),
    ((9, 33), (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), False),  # 16 outputs + 1
    ((6, 31), (2, 2), (2, 2), (0, 0, 0, 0), (1, 1), False),
    ((28, 28), (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), False),  # stride 1 past the flat path
    ((14, 14), (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), False),  # the flat path
    ((7, 17), (5, 5), (1, 1), (2, 2, 2, 2), (1, 1), False),
    ((11, 40), (3, 3), (3, 3), (1, 1, 1, 1), (1, 1), False),
    ((12, 35), (3, 3), (2, 2), (1, 2, 1, 2), (2, 2), False),
    ((5, 16), (1, 1), (2, 2), (0, 0, 0, 0), (1, 1), False),
    ((4, 1), (3, 1), (1, 1), (1, 0, 1, 0), (1, 1), False),
    ((8, 20), (3, 4), (2, 1), (2, 3, 2, 3), (1, 1), False),
]


BUILDS = runnable_builds("pool")


@pytest.mark.parametrize(("hw", "k", "s", "pads", "d", "ceil"), GEOMETRIES)
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("ext", BUILDS, ids=[m.__name__.rsplit(".", 1)[1] for m in BUILDS])
def test_row_path_against_brute_force(hw: tuple, k: tuple, s: tuple, pads: tuple, d: tuple,
                                      ceil: bool, threads: int, ext: Any) -> None:  # fmt: skip
    pb, pe = pads[:2], pads[2:]
    out = tuple(_out(hw[i], k[i], s[i], pb[i], pe[i], d[i], ceil) for i in range(2))
    x = _rand(4, *hw)
    x[1, 0, 0] = np.nan
    x[3] = np.nan  # a plane of NaNs: max gives -inf everywhere
    x4 = x.reshape(4, 1, *hw)
    got = np.empty((4, 1, *out), np.float32)
    ext.max_pool(x4, got, 1, *k, 1, *s, 0, *pb, 1, *d, threads)
    want = _oracle(x, k, s, pb, pe, d, out, True, False)
    np.testing.assert_array_equal(got[:, 0], want)
    for include_pad in (False, True):
        ext.avg_pool(x4, got, 1, *k, 1, *s, 0, *pb, 0, *pe, 1, *d, include_pad, threads)
        want = _oracle(x, k, s, pb, pe, d, out, False, include_pad)
        np.testing.assert_allclose(got[:, 0], want, rtol=1e-5, atol=1e-6, equal_nan=True)


@pytest.mark.parametrize(("hw", "s", "pads"), [((14, 14), (1, 1), (1, 1)), ((15, 31), (2, 2), (0, 1))],
                         ids=["flat", "rows"])  # fmt: skip
@pytest.mark.parametrize("ext", BUILDS, ids=[m.__name__.rsplit(".", 1)[1] for m in BUILDS])
def test_pools_on_more_threads_than_cores(hw: tuple, s: tuple, pads: tuple, ext: Any) -> None:
    """Eight threads on this machine's cores, repeated: threads the OS holds
    back lag the others, which take over the rest of their shares of planes
    (_steal.h); a plane pooled never shows as NaN (the flat path of small
    stride-1 planes and the row path)."""
    k, d, pb = (3, 3), (1, 1), pads
    out = tuple(_out(hw[i], k[i], s[i], pb[i], pb[i], d[i], False) for i in range(2))
    x = _rand(40, *hw)
    want = _oracle(x, k, s, pb, pb, d, out, True, False)
    x4 = x.reshape(40, 1, *hw)
    got = np.empty((40, 1, *out), np.float32)
    for _ in range(10):
        got.fill(np.nan)
        ext.max_pool(x4, got, 1, *k, 1, *s, 0, *pb, 1, *d, 8)
        np.testing.assert_array_equal(got[:, 0], want)


NODE_CASES = [
    ((1, 24, 56, 56), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((2, 5, 15, 13), {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}),
    ((1, 3, 11, 12), {"kernel_shape": [4, 2], "strides": [3, 2], "dilations": [1, 2]}),
    ((1, 2, 10, 9), {"kernel_shape": [3, 3], "strides": [2, 3], "pads": [2, 0, 1, 2]}),
]


@pytest.mark.parametrize(("shape", "attrs"), NODE_CASES)
@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
def test_strided_pool_nodes(shape: tuple, attrs: dict, op: str) -> None:
    attrs = dict(attrs)
    if op == "AveragePool":
        attrs["count_include_pad"] = 1
    kit.check_node(op, [_rand(*shape)], attrs)


def test_strided_pool_non_contiguous_input() -> None:
    x = _rand(1, 6, 12, 20)[:, ::2, :, ::2]  # a strided view
    attrs = {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}
    kit.check_node("MaxPool", [x], attrs)
    kit.check_node("AveragePool", [x], attrs)


@pytest.mark.parametrize(
    ("shape", "attrs"),
    [
        ((1, 544, 7, 7), {"kernel_shape": [7, 7]}),
        ((2, 3, 5, 6), {"kernel_shape": [5, 6], "strides": [2, 2]}),
        ((2, 3, 9), {"kernel_shape": [9], "ceil_mode": 1}),
        ((1, 2, 3, 4, 5), {"kernel_shape": [3, 4, 5]}),
    ],
)
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_average_pool_over_whole_planes(shape: tuple, attrs: dict, dtype: type) -> None:
    x = _rand(*shape).astype(dtype)
    tol = 1e-3 if dtype == np.float16 else 1e-6
    (got,) = kit.check_node("AveragePool", [x], attrs, rtol=tol, atol=tol)
    assert got.shape == (*shape[:2], *([1] * (len(shape) - 2)))
    assert got.dtype == dtype
