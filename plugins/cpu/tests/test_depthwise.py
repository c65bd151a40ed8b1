"""The direct depthwise convolution (``depthwise2d``) in every build this CPU
runs, against a brute-force numpy oracle: stride 1 (padded plane; as wide as
the input, masked loads in the AVX-512 build), 3x3 stride 2 (rows in
vectors), other column strides of 1 or 2 (row by row with masked loads in
the AVX-512 build), column strides > 1 (phases) and the general loop; pads,
dilations, odd and non-square kernels, 1-D, non-contiguous inputs, one and
two threads."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest
from ep_sdk.testing import KernelKit

from ortcore_cpu.kernels._isa import runnable_builds
from ortcore_cpu.provider import CPUExecutionProvider

kit = KernelKit(CPUExecutionProvider, opset=17, threads=2)
RNG = np.random.default_rng(15)
BUILDS = runnable_builds("conv")


def _rand(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def _oracle(x: np.ndarray, w: np.ndarray, out: tuple, s: tuple, p: tuple, d: tuple):
    c, h, wd = x.shape
    y = np.zeros((c, *out), np.float64)
    for ky, kx in itertools.product(range(w.shape[1]), range(w.shape[2])):
        for i, j in itertools.product(range(out[0]), range(out[1])):
            r, q = i * s[0] - p[0] + ky * d[0], j * s[1] - p[1] + kx * d[1]
            if 0 <= r < h and 0 <= q < wd:
                y[:, i, j] += w[:, ky, kx] * x[:, r, q]
    return y


# (H, W), kernel, strides, pads (h, w), dilations
GEOMETRIES = [
    ((56, 56), (3, 3), (2, 2), (1, 1), (1, 1)),
    ((13, 11), (3, 3), (2, 2), (1, 1), (1, 1)),
    ((12, 15), (3, 3), (1, 2), (0, 1), (1, 1)),
    ((15, 12), (3, 3), (2, 1), (1, 0), (1, 1)),
    ((17, 19), (5, 5), (2, 3), (2, 2), (1, 1)),
    ((14, 14), (3, 2), (3, 2), (1, 0), (2, 3)),
    ((9, 10), (3, 3), (2, 2), (0, 0), (2, 2)),
    ((1, 21), (1, 3), (1, 2), (0, 1), (1, 1)),  # a 1-D convolution
    ((7, 7), (3, 3), (1, 1), (1, 1), (1, 1)),
    ((4, 5), (3, 3), (2, 2), (2, 2), (1, 1)),  # pads wider than the kernel reach
    # 3x3 stride 2 row by row in vectors: rows of outputs that end inside a
    # vector, fill one, or cross vector boundaries, with and without pads
    ((14, 14), (3, 3), (2, 2), (1, 1), (1, 1)),  # 7 outputs a row
    ((16, 17), (3, 3), (2, 2), (0, 0), (1, 1)),  # 7x8
    ((34, 34), (3, 3), (2, 2), (1, 1), (1, 1)),  # 17
    ((9, 66), (3, 3), (2, 2), (1, 1), (1, 1)),  # 33
    ((3, 3), (3, 3), (2, 2), (0, 0), (1, 1)),  # one output
    ((2, 31), (3, 3), (2, 2), (1, 0), (1, 1)),
    # stride 1 with the output as wide as the input: the AVX-512 build's
    # masked loads on the planes in place (vectors that cross rows, rows
    # read wholly outside the plane, a column, a kernel wider than the
    # plane, dilations, 49 taps)
    ((14, 14), (3, 3), (1, 1), (1, 1), (1, 1)),
    ((28, 28), (3, 3), (1, 1), (1, 1), (1, 1)),
    ((6, 9), (3, 3), (1, 1), (2, 1), (1, 1)),  # 8 output rows of 6
    ((20, 1), (3, 1), (1, 1), (1, 0), (1, 1)),
    ((5, 3), (5, 5), (1, 1), (2, 2), (1, 1)),
    ((9, 10), (3, 3), (1, 1), (2, 2), (2, 2)),
    ((1, 40), (1, 3), (1, 1), (0, 1), (1, 1)),
    ((23, 37), (7, 7), (1, 1), (3, 3), (1, 1)),
    ((11, 13), (3, 5), (1, 1), (1, 2), (1, 1)),
    # column strides of 1 or 2 elsewhere: row by row, masked loads in the
    # AVX-512 build (rows of several vectors, 25 and 49 taps)
    ((40, 70), (5, 5), (2, 2), (2, 2), (1, 1)),  # 35 outputs a row
    ((23, 45), (7, 7), (2, 2), (3, 3), (1, 1)),
    ((30, 33), (3, 3), (3, 1), (0, 0), (1, 1)),
]


@pytest.mark.parametrize(("hw", "k", "s", "p", "d"), GEOMETRIES)
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("ext", BUILDS, ids=[m.__name__.rsplit(".", 1)[1] for m in BUILDS])
@pytest.mark.parametrize("bias_arg", [False, True], ids=["onto-out", "bias-arg"])
def test_depthwise2d_against_brute_force(hw: tuple, k: tuple, s: tuple, p: tuple, d: tuple,
                                         threads: int, ext: Any, bias_arg: bool) -> None:  # fmt: skip
    out = tuple((hw[i] + 2 * p[i] - (k[i] - 1) * d[i] - 1) // s[i] + 1 for i in range(2))
    x, w = _rand(5, *hw), _rand(5, *k)
    bias = _rand(5)
    if bias_arg:  # the kernel starts from b: out's stale values are not read
        y = np.full((5, *out), np.nan, np.float32)
        ext.depthwise2d(x, w, y, *s, *p, *d, threads, bias)
    else:  # it adds onto out
        y = np.repeat(bias, out[0] * out[1]).reshape(5, *out)
        ext.depthwise2d(x, w, y, *s, *p, *d, threads)
    want = _oracle(x, w, out, s, p, d) + bias[:, None, None]
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("ext", BUILDS, ids=[m.__name__.rsplit(".", 1)[1] for m in BUILDS])
def test_depthwise2d_bias_of_the_wrong_length(ext: Any) -> None:
    x, w = _rand(4, 6, 6), _rand(4, 3, 3)
    y = np.zeros((4, 6, 6), np.float32)
    with pytest.raises(ValueError, match="bias of 3 values for 4 channels"):
        ext.depthwise2d(x, w, y, 1, 1, 1, 1, 1, 1, 1, _rand(3))


@pytest.mark.parametrize(
    ("shape", "attrs"),
    [
        ((1, 112, 56, 56), {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
        ((2, 6, 11, 13), {"strides": [2, 3], "pads": [1, 0, 2, 1], "dilations": [1, 2]}),
        ((1, 4, 9, 9), {"strides": [2, 2], "auto_pad": "SAME_UPPER"}),
    ],
)
def test_strided_depthwise_conv_nodes(shape: tuple, attrs: dict) -> None:
    c = shape[1]
    x, w, b = _rand(*shape), _rand(c, 1, 3, 3), _rand(c)
    kit.check_node("Conv", [x, w, b], {"group": c, **attrs}, rtol=1e-4, atol=1e-5)


def test_strided_depthwise_conv_non_contiguous_input() -> None:
    x = _rand(1, 8, 12, 24)[:, ::2, :, ::2]  # a strided view
    w = _rand(4, 1, 3, 3)
    kit.check_node("Conv", [x, w], {"group": 4, "strides": [2, 2], "pads": [1, 1, 1, 1]},
                   rtol=1e-4, atol=1e-5)  # fmt: skip
