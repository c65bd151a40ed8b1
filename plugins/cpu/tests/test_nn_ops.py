"""Neural-network op kernels (reductions, normalizations, losses, recurrent
layers, sampling, detection, attention) against onnx.reference."""

from __future__ import annotations

import numpy as np
import pytest
from ep_sdk.testing import KernelKit

from ortcore_cpu.provider import CPUExecutionProvider

kit = KernelKit(CPUExecutionProvider, opset=17, threads=2)
check_node = kit.check_node

RNG = np.random.default_rng(7)


def rand(*shape: int, dtype: type = np.float32) -> np.ndarray:
    return RNG.standard_normal(shape).astype(dtype)


@pytest.mark.parametrize(
    "op", ["ReduceL1", "ReduceL2", "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"]
)
@pytest.mark.parametrize("opset", [11, 13, 18])
@pytest.mark.parametrize("axes", [None, [1], [-1, 0]])
@pytest.mark.parametrize("keepdims", [0, 1])
def test_norm_reductions(op: str, opset: int, axes: list | None, keepdims: int) -> None:
    x = np.abs(rand(3, 4, 5)) + 0.1
    attrs: dict = {"keepdims": keepdims}
    inputs: list = [x]
    if axes is not None:
        if opset >= 18:
            inputs.append(np.array(axes, np.int64))
        else:
            attrs["axes"] = axes
    check_node(op, inputs, attrs, opset=opset, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("op", ["ReduceL1", "ReduceSumSquare", "ReduceLogSumExp"])
def test_norm_reductions_empty_and_double(op: str) -> None:
    check_node(op, [np.zeros((2, 0, 4), np.float32), np.array([1], np.int64)], opset=18)
    check_node(op, [rand(2, 3, dtype=np.float64)], opset=18)


@pytest.mark.parametrize("opset", [18, 21])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_group_norm(opset: int, dtype: type) -> None:
    c, g = 6, 3
    n_par = g if opset == 18 else c
    check_node("GroupNormalization", [rand(2, c, 4, 3, dtype=dtype), rand(n_par, dtype=dtype),
               rand(n_par, dtype=dtype)], {"num_groups": g, "epsilon": 1e-3},
               opset=opset, rtol=1e-4, atol=1e-5)  # fmt: skip


@pytest.mark.parametrize("axis", [0, 1, -1, -2])
def test_rms_norm(axis: int) -> None:
    x = rand(2, 3, 4)
    scale = rand(*x.shape[axis:])
    check_node("RMSNormalization", [x, scale], {"axis": axis}, opset=23, rtol=1e-5)


@pytest.mark.parametrize(("axis", "p"), [(-1, 2), (0, 1), (1, 2)])
def test_lp_norm(axis: int, p: int) -> None:
    # onnx.reference forgets the absolute value for p=1 (and axis=0 falls back
    # to the default), so onnxruntime is the oracle here.
    check_node("LpNormalization", [rand(3, 4, 2)], {"axis": axis, "p": p}, opset=22,
               oracle="onnxruntime")  # fmt: skip


@pytest.mark.parametrize("axes", [None, [1], [0, 2]])
def test_mean_variance_norm(axes: list | None) -> None:
    attrs = {} if axes is None else {"axes": axes}
    check_node("MeanVarianceNormalization", [rand(2, 3, 4, 5)], attrs, opset=13, atol=1e-5)


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("ignore", [None, 1])
def test_losses(reduction: str, weighted: bool, ignore: int | None) -> None:
    x = rand(3, 4, 2)
    t = RNG.integers(0, 4, (3, 2)).astype(np.int64)
    attrs: dict = {"reduction": reduction}
    if ignore is not None:
        attrs["ignore_index"] = ignore
    inputs = [x, t] + ([rand(4)] if weighted else [])
    check_node("NegativeLogLikelihoodLoss", inputs, attrs, opset=13, rtol=1e-5, atol=1e-5)
    check_node("SoftmaxCrossEntropyLoss", inputs, attrs, opset=13, num_outputs=2,
               rtol=1e-5, atol=1e-5)  # fmt: skip


RNN_CASES = [
    {},
    {"direction": "reverse"},
    {"direction": "bidirectional"},
    {"layout": 1},
    {"direction": "bidirectional", "lens": True, "init": True},
    {"direction": "reverse", "lens": True, "clip": 0.5},
]


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("case", range(len(RNN_CASES)))
def test_recurrent(op: str, case: int) -> None:
    cfg = dict(RNN_CASES[case])
    seq, batch, inp, hid = 4, 3, 5, 6
    gates = {"RNN": 1, "GRU": 3, "LSTM": 4}[op]
    nd = 2 if cfg.get("direction") == "bidirectional" else 1
    layout = cfg.get("layout", 0)
    x = rand(batch, seq, inp) if layout else rand(seq, batch, inp)
    inputs: list = [
        x,
        rand(nd, gates * hid, inp),
        rand(nd, gates * hid, hid),
        rand(nd, 2 * gates * hid),
    ]
    lens = np.array([4, 2, 3], np.int32) if cfg.pop("lens", False) else None
    inputs.append(lens)
    if cfg.pop("init", False):
        inputs.append(rand(nd, batch, hid))
        if op == "LSTM":
            inputs += [rand(nd, batch, hid), rand(nd, 3 * hid)]
    attrs = {"hidden_size": hid, **cfg}
    if op == "GRU":
        attrs["linear_before_reset"] = case % 2
    n_out = 3 if op == "LSTM" else 2
    # onnx.reference ignores sequence_lens; onnxruntime honours them.
    oracle = "reference" if lens is None else "onnxruntime"
    check_node(op, inputs, attrs, opset=14, num_outputs=n_out, rtol=1e-4, atol=1e-5, oracle=oracle)


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align", [0, 1])
def test_grid_sample_2d(mode: str, padding: str, align: int) -> None:
    grid = RNG.uniform(-1.3, 1.3, (2, 3, 4, 2)).astype(np.float32)
    attrs = {"mode": mode, "padding_mode": padding, "align_corners": align}
    check_node("GridSample", [rand(2, 3, 5, 6), grid], attrs, opset=20, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_grid_sample_3d(mode: str) -> None:
    grid = RNG.uniform(-1.2, 1.2, (1, 2, 3, 2, 3)).astype(np.float32)
    check_node("GridSample", [rand(1, 2, 3, 4, 5), grid], {"mode": mode}, opset=22, atol=1e-5)


@pytest.mark.parametrize("align", [0, 1])
def test_affine_grid(align: int) -> None:
    check_node("AffineGrid", [rand(2, 2, 3), np.array([2, 1, 4, 5], np.int64)],
               {"align_corners": align}, opset=20, atol=1e-6)  # fmt: skip
    check_node("AffineGrid", [rand(1, 3, 4), np.array([1, 1, 2, 3, 4], np.int64)],
               {"align_corners": align}, opset=20, atol=1e-6)  # fmt: skip


@pytest.mark.parametrize("mode", ["avg", "max"])
@pytest.mark.parametrize("ctm", ["half_pixel", "output_half_pixel"])
def test_roi_align(mode: str, ctm: str) -> None:
    rois = np.array([[0, 0, 4, 4], [1.5, 0.5, 7.2, 5.1], [2, 2, 3, 3]], np.float32)
    attrs = {"mode": mode, "coordinate_transformation_mode": ctm, "output_height": 3,
             "output_width": 2, "sampling_ratio": 0, "spatial_scale": 0.9}  # fmt: skip
    check_node("RoiAlign", [rand(2, 3, 8, 9), rois, np.array([0, 1, 1], np.int64)], attrs,
               opset=16, rtol=1e-4, atol=1e-5)  # fmt: skip


@pytest.mark.parametrize("center", [0, 1])
def test_non_max_suppression(center: int) -> None:
    boxes = RNG.uniform(0, 10, (2, 12, 4)).astype(np.float32)
    scores = RNG.uniform(0, 1, (2, 3, 12)).astype(np.float32)
    inputs = [boxes, scores, np.array([5], np.int64), np.array([0.3], np.float32),
              np.array([0.2], np.float32)]  # fmt: skip
    check_node("NonMaxSuppression", inputs, {"center_point_box": center}, opset=11)


def test_deform_conv() -> None:
    x, w = rand(1, 4, 5, 5), rand(4, 2, 2, 2)
    offset = rand(1, 2 * 2 * 4, 4, 4) * 0.7
    mask = RNG.uniform(0, 1, (1, 2 * 4, 4, 4)).astype(np.float32)
    attrs = {"group": 2, "offset_group": 2}
    check_node("DeformConv", [x, w, offset, rand(4), mask], attrs, opset=19, atol=1e-5)


ATTENTION_CASES = [
    {},
    {"is_causal": 1},
    {"mask": "bool"},
    {"mask": "float", "is_causal": 1},
    {"past": True, "is_causal": 1},
    {"softcap": 2.0, "qk_matmul_output_mode": 1},
    {"qk_matmul_output_mode": 3, "scale": 0.3},
    {"gqa": True, "qk_matmul_output_mode": 2, "mask": "float"},
]


@pytest.mark.parametrize("case", range(len(ATTENTION_CASES)))
@pytest.mark.parametrize("three_d", [False, True])
def test_attention(case: int, three_d: bool) -> None:
    cfg = dict(ATTENTION_CASES[case])
    b, hq, hkv, sq, skv, d = 2, 4, 2 if cfg.pop("gqa", False) else 4, 3, 5, 8
    q, k, v = rand(b, hq, sq, d), rand(b, hkv, skv, d), rand(b, hkv, skv, d)
    attrs = dict(cfg)
    mask_kind = attrs.pop("mask", None)
    past = attrs.pop("past", False)
    total = skv + (2 if past else 0)
    mask = None
    if mask_kind == "bool":
        mask = RNG.uniform(size=(sq, total)) > 0.3
    elif mask_kind == "float":
        mask = rand(b, 1, sq, total)
    if three_d:
        q, k, v = (t.transpose(0, 2, 1, 3).reshape(b, t.shape[2], -1) for t in (q, k, v))
        attrs.update(q_num_heads=hq, kv_num_heads=hkv)
    inputs: list = [q, k, v, mask]
    if past:
        inputs += [rand(b, hkv, 2, d), rand(b, hkv, 2, d)]
    check_node("Attention", inputs, attrs, opset=23, num_outputs=4 if past else 1,
               rtol=1e-4, atol=1e-5)  # fmt: skip


@pytest.mark.parametrize("interleaved", [0, 1])
@pytest.mark.parametrize("rot", [0, 4])
def test_rotary_embedding(interleaved: int, rot: int) -> None:
    half = (rot or 8) // 2
    cos, sin = rand(6, half), rand(6, half)
    pos = np.array([[0, 1, 2], [3, 4, 5]], np.int64)
    attrs = {"interleaved": interleaved, "rotary_embedding_dim": rot}
    check_node("RotaryEmbedding", [rand(2, 2, 3, 8), cos, sin, pos], attrs, opset=23)
    check_node("RotaryEmbedding", [rand(2, 3, 16), cos, sin, pos], {**attrs, "num_heads": 2},
               opset=23)  # fmt: skip


@pytest.mark.parametrize("opset", [11, 18])
def test_lp_pool(opset: int) -> None:
    attrs = {"kernel_shape": [2, 3], "pads": [1, 0, 1, 1], "strides": [2, 1], "p": 3}
    check_node("LpPool", [rand(1, 2, 5, 6)], attrs, opset=opset, rtol=1e-5, atol=1e-5)


def test_swiglu_and_causal_conv() -> None:
    check_node("SwiGLU", [rand(3, 4), rand(3, 4)], {"alpha": 1.7}, opset=28)
    x, w, st = rand(2, 3, 5), rand(3, 1, 4), rand(2, 3, 3)
    check_node("CausalConvWithState", [x, w, rand(3), st], {"activation": "silu"}, opset=27,
               num_outputs=2, atol=1e-5)  # fmt: skip


@pytest.mark.parametrize("rule", ["linear", "gated", "delta", "gated_delta"])
def test_linear_attention(rule: str) -> None:
    b, t, hq, hkv, dk, dv = 2, 3, 4, 2, 4, 5
    inputs: list = [rand(b, t, hq * dk), rand(b, t, hkv * dk), rand(b, t, hkv * dv),
                    rand(b, hkv, dk, dv)]  # fmt: skip
    inputs.append(-np.abs(rand(b, t, hkv)) if "gated" in rule else None)
    inputs.append(RNG.uniform(size=(b, t, hkv)).astype(np.float32) if "delta" in rule else None)
    attrs = {"q_num_heads": hq, "kv_num_heads": hkv, "update_rule": rule}
    check_node("LinearAttention", inputs, attrs, opset=27, num_outputs=2, rtol=1e-4, atol=1e-5)


def test_conv_transpose_output_shape_past_full() -> None:
    # output_shape beyond the full output: the extra rows / columns are zeros.
    attrs = {"strides": [3, 2], "output_shape": [10, 8]}
    check_node("ConvTranspose", [rand(1, 1, 3, 3), rand(1, 2, 3, 3)], attrs, opset=22, atol=1e-5)


def test_max_unpool_and_roi_pool() -> None:
    x = rand(1, 1, 2, 2)
    idx = np.array([[[[5, 7], [13, 15]]]], np.int64)
    attrs = {"kernel_shape": [2, 2], "strides": [2, 2]}
    check_node("MaxUnpool", [x, idx], attrs, opset=11)
    check_node("MaxUnpool", [x, idx, np.array([1, 1, 5, 5], np.int64)], attrs, opset=22)
    rois = np.array([[0, 0, 0, 4, 5], [1, 1.4, 2.6, 7, 7]], np.float32)
    # onnx.reference has no MaxRoiPool.
    check_node("MaxRoiPool", [rand(2, 3, 8, 8), rois], {"pooled_shape": [2, 3]}, opset=21,
               oracle="onnxruntime")  # fmt: skip
