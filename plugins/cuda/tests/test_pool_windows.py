"""The CUDA provider's pools (1-D and 2-D in ``ops_nn``, 3-D and LpPool in
``ops_image``) take the CPU provider's window rule, which the CPU tests
check against onnxruntime over the geometry space
(``plugins/cpu/tests/test_pool_geometry.py``): a window with no tap on
the input (the lowest finite value of the type pooled in for MaxPool, 0
for the others), a ``ceil_mode`` window that starts in the end pads, a
dilation that steps over the input, a window wider than the padded input
(one output, its size rounded toward zero; AveragePool's
``count_include_pad`` divides it by the whole kernel for opsets 7-18 with
``ceil_mode`` 0), pads as large as the kernel. Each geometry runs on the
emulated device and on the CPU provider."""

from __future__ import annotations

from typing import Any

import numpy as np
import ortcore
import pytest
from onnx import TensorProto, helper

# one axis: (length, kernel, stride, dilation, pad begin, pad end, ceil_mode)
AXES = [
    (1, 4, 3, 2, 1, 3, 1),  # issue 55: the taps at -1, 1, 3, 5 miss the input
    (3, 4, 3, 1, 0, 0, 0),  # a window wider than the input: one output
    (3, 4, 3, 1, 0, 0, 1),
    (6, 2, 2, 1, 0, 3, 1),  # ceil_mode: the last window starts in the end pads
    (1, 2, 1, 2, 1, 1, 0),  # a dilation steps over the input
    (5, 2, 1, 1, 4, 4, 0),  # pads larger than the kernel: windows of pads only
    (7, 3, 2, 1, 1, 1, 0),  # plain
]
TYPES = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.float16): TensorProto.FLOAT16}


def _geometries(rank: int) -> list[tuple[tuple[int, ...], dict[str, Any]]]:
    """(spatial shape, attributes) of ``rank`` axes drawn from :data:`AXES`
    (every axis of the issue's geometry and one other, in both orders)."""
    combos = [(a,) for a in AXES] if rank == 1 else []
    if rank > 1:
        for other in AXES:
            combos.append((AXES[0],) + (other,) * (rank - 1))
            combos.append((other,) * (rank - 1) + (AXES[-1],))
    out = []
    for axes in combos:
        ceil = max(a[6] for a in axes)
        attrs = {
            "kernel_shape": [a[1] for a in axes],
            "strides": [a[2] for a in axes],
            "dilations": [a[3] for a in axes],
            "pads": [a[4] for a in axes] + [a[5] for a in axes],
            "ceil_mode": ceil,
        }
        out.append((tuple(a[0] for a in axes), attrs))
    return out


def _model(op: str, opset: int, dtype: np.dtype, shapes: list[tuple[int, ...]],
           attrs: list[dict[str, Any]]) -> bytes:  # fmt: skip
    nodes, inputs, outputs = [], [], []
    for i, (shape, a) in enumerate(zip(shapes, attrs, strict=True)):
        nodes.append(helper.make_node(op, [f"x{i}"], [f"y{i}"], **a))
        inputs.append(helper.make_tensor_value_info(f"x{i}", TYPES[dtype], [2, 2, *shape]))
        outputs.append(helper.make_tensor_value_info(f"y{i}", TYPES[dtype], None))
    graph = helper.make_graph(nodes, "pools", inputs, outputs)
    return helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8
    ).SerializeToString()


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize(
    ("op", "opset", "extra"),
    [
        ("MaxPool", 12, {}),
        ("AveragePool", 19, {}),
        ("AveragePool", 19, {"count_include_pad": 1}),
        ("AveragePool", 11, {"count_include_pad": 1}),
        ("LpPool", 18, {"p": 2}),
    ],
)
def test_pool_windows_as_the_cpu_provider(
    emulated: Any, op: str, opset: int, extra: dict[str, Any], dtype: Any
) -> None:
    shapes, attrs = [], []
    for rank in (1, 2, 3):
        for shape, a in _geometries(rank):
            if op == "AveragePool" and opset < 19:
                if any(d != 1 for d in a["dilations"]):
                    continue  # no dilations before opset 19
                a = {k: v for k, v in a.items() if k != "dilations"}
            shapes.append(shape)
            attrs.append({**a, **extra})
    model = _model(op, opset, np.dtype(dtype), shapes, attrs)
    rng = np.random.default_rng(55)
    feeds = {
        f"x{i}": (rng.integers(-40, 41, (2, 2, *s)) / 8).astype(dtype) for i, s in enumerate(shapes)
    }
    cuda = ortcore.InferenceSession(model, providers=["cuda", "cpu"], plugin_manager=emulated)
    cpu = ortcore.InferenceSession(model, providers=["cpu"], plugin_manager=emulated)
    assert cuda.get_partition().counts().get("CUDAExecutionProvider", 0) >= len(shapes)
    got, want = cuda.run(None, feeds), cpu.run(None, feeds)
    tol = 2e-3 if dtype == np.float16 else 1e-5
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        where = f"{op}-{opset} {shapes[i]} {attrs[i]}"
        assert g.shape == w.shape, where
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol, err_msg=where)
    lowest = -np.inf if dtype == np.float16 else np.finfo(np.float32).min
    if op == "MaxPool":  # some windows are empty, and give onnxruntime's value
        assert any((g == lowest).any() for g in got)
    assert not any(np.isnan(g).any() for g in got)
