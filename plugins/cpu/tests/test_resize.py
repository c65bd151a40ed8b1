"""Resize against onnx.reference."""

from __future__ import annotations

import numpy as np
import pytest
from ep_sdk.testing import KernelKit

from ortcore_cpu.provider import CPUExecutionProvider

kit = KernelKit(CPUExecutionProvider, opset=17, threads=2)
check_node = kit.check_node

RNG = np.random.default_rng(6)
F32 = np.float32

COORDS = ["half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel"]


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("coord", COORDS)
@pytest.mark.parametrize("scales", [[1, 1, 2, 2], [1, 1, 0.5, 0.75], [1, 1, 1.5, 3]])
def test_resize_scales(mode: str, coord: str, scales: list) -> None:
    x = RNG.random((1, 2, 4, 6)).astype(F32)
    attrs = {"mode": mode, "coordinate_transformation_mode": coord}
    # With a fractional output length, align_corners follows onnx's backend
    # tests (test_resize_downsample_scales_*_align_corners) and its reference:
    # the unrounded length ``scale * in_len``; onnxruntime uses the rounded one.
    inputs = [x, np.array([], F32), np.array(scales, F32)]
    check_node("Resize", inputs, attrs, opset=13, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "nearest_mode", ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]
)
def test_resize_nearest_modes(nearest_mode: str) -> None:
    x = RNG.random((1, 1, 5, 5)).astype(F32)
    attrs = {"mode": "nearest", "nearest_mode": nearest_mode}
    check_node("Resize", [x, None, None, np.array([1, 1, 8, 3], np.int64)], attrs, opset=13)


def test_resize_sizes_opset11() -> None:
    x = RNG.random((1, 1, 4, 4)).astype(F32)
    empty = np.array([], F32)
    check_node("Resize", [x, empty, empty, np.array([1, 1, 7, 3], np.int64)],
               {"mode": "linear"}, opset=11, rtol=1e-5, atol=1e-6)  # fmt: skip


def test_resize_opset10_nearest() -> None:
    x = RNG.random((1, 1, 3, 3)).astype(F32)
    scales = np.array([1, 1, 2, 2], F32)
    want = x.repeat(2, axis=2).repeat(2, axis=3)
    check_node("Resize", [x, scales], {"mode": "nearest"}, opset=10, expected=[want])


def test_resize_axes_and_policy_opset18() -> None:
    x = RNG.random((1, 1, 4, 6)).astype(F32)
    attrs = {"mode": "linear", "axes": [2, 3], "keep_aspect_ratio_policy": "not_larger"}
    check_node("Resize", [x, None, None, np.array([8, 8], np.int64)], attrs, opset=18,
               rtol=1e-5, atol=1e-6)  # fmt: skip


def test_resize_tf_crop_and_resize() -> None:
    x = RNG.random((1, 1, 4, 4)).astype(F32)
    roi = np.array([0, 0, 0.2, 0.2, 1, 1, 1.2, 0.9], F32)
    attrs = {"mode": "linear", "coordinate_transformation_mode": "tf_crop_and_resize",
             "extrapolation_value": 10.0}  # fmt: skip
    check_node("Resize", [x, roi, None, np.array([1, 1, 3, 3], np.int64)], attrs, opset=13,
               rtol=1e-5, atol=1e-6)  # fmt: skip
