"""The normalization and indexing family (:mod:`ortcore_cuda.ops_norm`):
its kernels under the CPU emulation against numpy, and the ops end to end on
the emulated provider (builders called directly, and whole models through a
session) against numpy."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx_ir as ir
import ortcore
import pytest
from ep_sdk import make_node_info
from onnx import TensorProto, helper, numpy_helper

from ortcore_cuda import ops_norm
from ortcore_cuda.emulator import Emulator, compiler
from ortcore_cuda.kernels import norm
from ortcore_cuda.kernels.spec import translation_unit

NP = {"f32": np.float32, "f16": np.float16}
TOL: dict[str, dict[str, Any]] = {
    "f32": dict(rtol=1e-5, atol=1e-5),
    "f16": dict(rtol=5e-3, atol=5e-3),
}


@pytest.fixture(scope="module")
def emu(tmp_path_factory: pytest.TempPathFactory) -> Emulator:
    if compiler() is None:
        pytest.skip("no C++ compiler for the emulation")
    return Emulator(norm.all_kernels(), tmp_path_factory.mktemp("emu-norm"))


def _ln_ref(x: np.ndarray, axis: int, eps: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    x64 = x.astype(np.float64)
    axes = tuple(range(axis, x.ndim))
    mean = x64.mean(axes, keepdims=True)
    inv = 1 / np.sqrt(x64.var(axes, keepdims=True) + eps)
    return (x64 - mean) * inv, mean, inv


# -- kernels -------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["f32", "f16"])
@pytest.mark.parametrize(
    "rows,cols,grid,block", [(1, 1, 1, 32), (3, 5, 2, 48), (5, 300, 2, 256), (4, 37, 7, 33)]
)
def test_layernorm_rows_any_launch(
    emu: Emulator, dtype: str, rows: int, cols: int, grid: int, block: int
) -> None:
    """Rows in a grid-stride loop (grid smaller or larger than the rows) and
    blocks of any size (not only powers of two)."""
    rng = np.random.default_rng(cols)
    x = (rng.standard_normal((rows, cols)) + 2).astype(NP[dtype])
    scale = rng.standard_normal(cols).astype(NP[dtype])
    bias = rng.standard_normal(cols).astype(NP[dtype])
    y = np.empty_like(x)
    mean = np.empty(rows, np.float32)
    inv = np.empty(rows, np.float32)
    name = f"norm_layer_{dtype}_f32_bias"
    emu.launch(name, grid, block, x, scale, bias, y, mean, inv, rows, cols, 1, 1, 1e-5)
    z, m, i = _ln_ref(x, 1, 1e-5)
    np.testing.assert_allclose(y, (z * scale + bias).astype(NP[dtype]), **TOL[dtype])
    np.testing.assert_allclose(mean, m.reshape(-1), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(inv, i.reshape(-1), rtol=1e-4)


def test_group_scale_index(emu: Emulator) -> None:
    """The scale index ``((row % groups) * cols + j) / div``: per channel of a group."""
    rng = np.random.default_rng(3)
    n, c, g, inner = 2, 6, 3, 5
    x = rng.standard_normal((n, c, inner)).astype(np.float32)
    scale, bias = (
        rng.standard_normal(c).astype(np.float32),
        rng.standard_normal(c).astype(np.float32),
    )
    rows, cols = n * g, (c // g) * inner
    y = np.empty_like(x)
    stats = np.empty(2 * rows, np.float32)
    emu.launch(
        "norm_layer_f32_f32_bias", 2, 64, x, scale, bias, y, stats, stats[rows:], rows, cols, g,
        inner, 1e-5,
    )  # fmt: skip
    z, _, _ = _ln_ref(x.reshape(n, g, cols), 2, 1e-5)
    want = z.reshape(n, c, inner) * scale[:, None] + bias[:, None]
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_rms_and_mvn_rows(emu: Emulator, dtype: str) -> None:
    rng = np.random.default_rng(4)
    rows, cols = 5, 77
    x = rng.standard_normal((rows, cols)).astype(NP[dtype])
    scale = rng.standard_normal(cols).astype(NP[dtype])
    y = np.empty_like(x)
    emu.launch(f"norm_rms_{dtype}", 2, 64, x, scale, y, rows, cols, 1, 1, 1e-3)
    x64 = x.astype(np.float64)
    want = x64 / np.sqrt((x64**2).mean(1, keepdims=True) + 1e-3) * scale
    np.testing.assert_allclose(y, want.astype(NP[dtype]), **TOL[dtype])
    emu.launch(f"norm_mvn_{dtype}", 3, 96, x, y, rows, cols)
    want = (x64 - x64.mean(1, keepdims=True)) / (x64.std(1, keepdims=True) + 1e-9)
    np.testing.assert_allclose(y, want.astype(NP[dtype]), **TOL[dtype])


@pytest.mark.parametrize("index", ["i32", "i64"])
def test_gather_elements(emu: Emulator, index: str) -> None:
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 4, 5)).astype(np.float32)
    idx: np.ndarray = rng.integers(-4, 4, (3, 6, 5)).astype(
        np.int32 if index == "i32" else np.int64
    )
    y = np.empty(idx.shape, np.float32)
    s = norm.shape_arg(list(idx.shape), sa=[20, 5, 1])
    emu.launch(f"norm_gather_elements_b4_{index}", 2, 32, x, idx, y, y.size, 3, 1, 4, s)
    np.testing.assert_array_equal(y, np.take_along_axis(x, idx % 4, 1))


def _scatter_elements_ref(
    data: np.ndarray, idx: np.ndarray, upd: np.ndarray, axis: int, red: str
) -> np.ndarray:
    out = data.copy()
    for pos in np.ndindex(idx.shape):
        target = list(pos)
        target[axis] = idx[pos] % data.shape[axis]
        t = tuple(target)
        a, u = out[t], upd[pos]
        out[t] = {"none": u, "add": a + u, "mul": a * u, "max": u if u > a else a}.get(
            red, u if u < a else a
        )
    return out


@pytest.mark.parametrize("red", norm.REDUCTIONS)
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int64])
def test_scatter_elements_in_order(emu: Emulator, red: str, dtype: Any) -> None:
    """Duplicate indices: the last write wins (none), reductions fold in order."""
    rng = np.random.default_rng(6)
    data = rng.integers(-5, 5, (4, 3, 2)).astype(dtype)
    idx = rng.integers(-4, 4, (6, 3, 2)).astype(np.int64)  # many duplicates along axis 0
    upd = rng.integers(-5, 5, idx.shape).astype(dtype)
    y = data.copy()
    key = norm.scatter_key(data.dtype, red)
    assert key is not None
    lines = [1, 3, 2]
    s = norm.shape_arg(lines, sa=[6, 2, 1], sb=[6, 2, 1])
    emu.launch(f"norm_scatter_elements_{key}_{red}_i64", 2, 32, y, idx, upd, 6, 3, 0, 6, 4, s)
    np.testing.assert_array_equal(y, _scatter_elements_ref(data, idx, upd, 0, red))


@pytest.mark.parametrize("red", norm.REDUCTIONS)
def test_scatter_nd_in_order(emu: Emulator, red: str) -> None:
    rng = np.random.default_rng(7)
    data = rng.standard_normal((4, 3, 5)).astype(np.float32)
    idx = np.array([[1, 2], [0, 0], [1, 2], [-1, 1], [1, 2]], np.int64)
    upd = rng.standard_normal((5, 5)).astype(np.float32)
    want = data.copy()
    for t in range(5):
        at = (idx[t, 0] % 4, idx[t, 1] % 3)
        a, u = want[at], upd[t]
        want[at] = {
            "none": u,
            "add": a + u,
            "mul": a * u,
            "max": np.maximum(a, u),
            "min": np.minimum(a, u),
        }[red]
    y = data.copy()
    key = norm.scatter_key(data.dtype, red)
    s = norm.shape_arg([4, 3], sa=[15, 5])
    emu.launch(f"norm_scatter_nd_{key}_{red}", 2, 2, y, idx, upd, 5, 5, 2, s)
    np.testing.assert_allclose(y, want, rtol=1e-6)


def test_gather_nd_onehot_tile_eyelike_fill(emu: Emulator) -> None:
    rng = np.random.default_rng(8)
    x = rng.integers(0, 100, (2, 3, 4)).astype(np.int16)
    idx = np.array([[[1, 3]], [[-1, 0]]], np.int64)  # batch_dims 1, tuples of 2
    y = np.empty((2, 1), np.int16)
    s = norm.shape_arg([3, 4], sa=[4, 1])
    emu.launch("norm_gather_nd_b2", 1, 32, x, idx, y, 2, 1, 2, 1, 12, s)
    np.testing.assert_array_equal(y, [[x[0, 1, 3]], [x[1, 2, 0]]])

    ind = np.array([[0.0, -1.0, 7.0], [2.0, 1.5, -3.0]], np.float32)
    vals = np.array([5, 9], np.int64)
    out = np.empty((2, 3, 3), np.int64)  # axis 1 of depth 3
    emu.launch("norm_onehot_b8_f32", 2, 8, ind, vals, out, out.size, 3, 3)
    hot = np.stack([np.arange(3)[None, :, None] == np.where(ind < 0, ind + 3, ind)[:, None, :]])
    np.testing.assert_array_equal(out, np.where(hot[0], 9, 5))

    t = rng.integers(0, 9, (2, 3)).astype(np.uint8)
    tiled = np.empty((4, 9), np.uint8)
    emu.launch("norm_tile_b1", 2, 16, t, tiled, tiled.size, 2, norm.shape_arg([4, 9], sa=[2, 3]))
    np.testing.assert_array_equal(tiled, np.tile(t, (2, 3)))

    eye = np.empty((3, 5), np.float64)
    emu.launch("norm_eyelike_b8", 1, 8, eye, np.array([0.0, 1.0]), eye.size, 5, -1)
    np.testing.assert_array_equal(eye, np.eye(3, 5, k=-1))

    mask = np.zeros(70, np.bool_)
    emu.launch("norm_fill_b1", 2, 32, mask, np.ones(1, np.bool_), mask.size)
    assert mask.all()


def test_norm_kernels_compile_with_nvcc(tmp_path: Path) -> None:
    import shutil
    import subprocess

    nvcc = shutil.which("nvcc") or (
        "/usr/local/bin/nvcc" if Path("/usr/local/bin/nvcc").exists() else None
    )
    if nvcc is None:
        pytest.skip("no nvcc")
    src = tmp_path / "norm.cu"
    src.write_text(translation_unit(norm.all_kernels()))
    subprocess.run(
        [nvcc, "--cubin", "-arch=sm_80", "-o", str(tmp_path / "norm.cubin"), str(src)],
        check=True,
        capture_output=True,
    )


# -- the ops on the emulated provider -------------------------------------------------


@pytest.fixture(scope="module")
def provider() -> Any:
    if compiler() is None:
        pytest.skip("no C++ compiler for the emulation")
    from ortcore_cuda.provider import CUDAExecutionProvider

    return CUDAExecutionProvider({"backend": "emulator"})


class _Opsets:
    """What :func:`ops_norm.decline` reads of a ``GraphContext``."""

    def __init__(self, opset: int) -> None:
        self.version = opset

    def opset(self, domain: str) -> int:
        return self.version


def _run_node(
    provider: Any,
    builder: Any,
    op: str,
    inputs: list[np.ndarray],
    n_out: int = 1,
    opset: int = 23,
    host: tuple[int, ...] = (),
    **attrs: Any,
) -> list[np.ndarray]:
    """Build ``op``'s node, its NodeInfo and compute, run on device inputs
    (``host``: inputs passed as numpy, as host-memory inputs are)."""
    names = [f"i{k}" for k in range(len(inputs))]
    outs = [f"o{k}" for k in range(n_out)]
    node = helper.make_node(op, names, outs, **attrs)
    graph = helper.make_graph(
        [node],
        "g",
        [
            helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
            for n, a in zip(names, inputs)
        ],
        [helper.make_tensor_value_info(o, TensorProto.UNDEFINED, None) for o in outs],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    from onnx import shape_inference

    model = shape_inference.infer_shapes(model)
    irm = ir.from_proto(model)
    ir_node = next(iter(irm.graph))
    assert ops_norm.decline(ir_node, _Opsets(opset)) is None  # type: ignore[arg-type]
    compute = builder(make_node_info(ir_node, dict(irm.opset_imports), provider))
    args = [a if k in host else provider.from_host(a) for k, a in enumerate(inputs)]
    return [provider.to_host(t) for t in compute(*args)]


@pytest.mark.parametrize("dtype", ["f32", "f16"])
@pytest.mark.parametrize("axis", [0, 1, -1, 2])
@pytest.mark.parametrize("bias", [True, False])
def test_layer_normalization_any_axis(provider: Any, dtype: str, axis: int, bias: bool) -> None:
    rng = np.random.default_rng(axis + 10)
    x = (rng.standard_normal((2, 3, 7)) * 2 + 1).astype(NP[dtype])
    a = axis % 3
    scale = rng.standard_normal(x.shape[a:]).astype(NP[dtype])
    b = rng.standard_normal((1, x.shape[-1])).astype(
        NP[dtype]
    )  # broadcast over the normalized dims
    inputs = [x, scale, b] if bias else [x, scale]
    y, mean, inv = _run_node(
        provider, ops_norm.layer_normalization, "LayerNormalization", inputs, 3, 17, axis=axis
    )
    z, m, i = _ln_ref(x, a, 1e-5)
    want = z * scale + (b if bias else 0)
    np.testing.assert_allclose(y, want.astype(NP[dtype]), **TOL[dtype])
    np.testing.assert_allclose(mean, m.astype(mean.dtype), **TOL[dtype])
    np.testing.assert_allclose(inv, i.astype(inv.dtype), rtol=1e-3, atol=1e-3)
    assert mean.shape == x.shape[:a] + (1,) * (3 - a)


@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_rms_group_instance_mvn(provider: Any, dtype: str) -> None:
    rng = np.random.default_rng(11)
    t = NP[dtype]
    x = rng.standard_normal((2, 4, 3, 5)).astype(t)
    x64 = x.astype(np.float64)
    scale = rng.standard_normal((3, 5)).astype(t)
    (y,) = _run_node(provider, ops_norm._rms, "RMSNormalization", [x, scale], axis=2, epsilon=1e-3)
    want = x64 / np.sqrt((x64**2).mean((2, 3), keepdims=True) + 1e-3) * scale
    np.testing.assert_allclose(y, want.astype(t), **TOL[dtype])

    s4, b4 = rng.standard_normal(4).astype(t), rng.standard_normal(4).astype(t)
    (y,) = _run_node(
        provider, ops_norm._group_norm, "GroupNormalization", [x, s4, b4], opset=21, num_groups=2
    )
    z, _, _ = _ln_ref(x.reshape(2, 2, 30), 2, 1e-5)
    want = z.reshape(x.shape) * s4[:, None, None] + b4[:, None, None]
    np.testing.assert_allclose(y, want.astype(t), **TOL[dtype])

    (y,) = _run_node(
        provider, ops_norm._instance_norm, "InstanceNormalization", [x, s4, b4], opset=22
    )
    z, _, _ = _ln_ref(x.reshape(2, 4, 15), 2, 1e-5)
    want = z.reshape(x.shape) * s4[:, None, None] + b4[:, None, None]
    np.testing.assert_allclose(y, want.astype(t), **TOL[dtype])

    (y,) = _run_node(provider, ops_norm._mvn, "MeanVarianceNormalization", [x], opset=13)
    m = x64.mean((0, 2, 3), keepdims=True)
    want = (x64 - m) / (x64.std((0, 2, 3), keepdims=True) + 1e-9)
    np.testing.assert_allclose(y, want.astype(t), **TOL[dtype])


def test_data_movement_ops(provider: Any) -> None:
    rng = np.random.default_rng(12)
    x = rng.standard_normal((2, 8, 3, 2)).astype(np.float32)
    (y,) = _run_node(provider, ops_norm._space(True), "DepthToSpace", [x], blocksize=2, mode="CRD")
    tmp = x.reshape(2, 2, 2, 2, 3, 2).transpose(0, 1, 4, 2, 5, 3)
    np.testing.assert_array_equal(y, tmp.reshape(2, 2, 6, 4))
    (back,) = _run_node(
        provider, ops_norm._space(False), "SpaceToDepth", [y], blocksize=2, mode="CRD"
    )
    np.testing.assert_array_equal(back, x)
    (d2s,) = _run_node(provider, ops_norm._space(True), "DepthToSpace", [x], blocksize=2)
    (s2d,) = _run_node(provider, ops_norm._space(False), "SpaceToDepth", [d2s], blocksize=2)
    np.testing.assert_array_equal(s2d, x)

    ints = rng.integers(0, 50, (3, 2)).astype(np.int64)
    (tiled,) = _run_node(
        provider, ops_norm._tile, "Tile", [ints, np.array([2, 3], np.int64)], opset=13, host=(1,)
    )
    np.testing.assert_array_equal(tiled, np.tile(ints, (2, 3)))

    (eye,) = _run_node(
        provider, ops_norm._eyelike, "EyeLike", [ints], opset=22, k=1, dtype=TensorProto.FLOAT16
    )
    np.testing.assert_array_equal(eye, np.eye(3, 2, k=1, dtype=np.float16))

    drop = _run_node(
        provider, ops_norm._dropout, "Dropout", [x, np.array(0.3, np.float32)], 2, 22, host=(1,)
    )
    np.testing.assert_array_equal(drop[0], x)
    assert drop[1].dtype == np.bool_ and drop[1].all()


def test_indexing_ops(provider: Any) -> None:
    rng = np.random.default_rng(13)
    data = rng.standard_normal((3, 4)).astype(np.float32)
    idx = np.array([[0, -1, 2, 1], [2, 2, 0, 0]], np.int32)
    (g,) = _run_node(provider, ops_norm._gather_elements, "GatherElements", [data, idx], opset=13)
    np.testing.assert_array_equal(g, np.take_along_axis(data, idx % 3, 0))

    upd = rng.standard_normal(idx.shape).astype(np.float32)
    (s,) = _run_node(
        provider, ops_norm._scatter_elements, "ScatterElements", [data, idx, upd], opset=18,
        reduction="add",
    )  # fmt: skip
    np.testing.assert_allclose(s, _scatter_elements_ref(data, idx, upd, 0, "add"), rtol=1e-6)

    nd_idx = np.array([[1], [0], [1]], np.int64)
    nd_upd = rng.standard_normal((3, 4)).astype(np.float32)
    (snd,) = _run_node(
        provider, ops_norm._scatter_nd, "ScatterND", [data, nd_idx, nd_upd], opset=18
    )
    want = data.copy()
    want[0], want[1] = nd_upd[1], nd_upd[2]  # the last write to row 1 wins
    np.testing.assert_array_equal(snd, want)

    (gnd,) = _run_node(provider, ops_norm._gather_nd, "GatherND", [data, nd_idx], opset=13)
    np.testing.assert_array_equal(gnd, data[[1, 0, 1]])

    ind = np.array([[1, -2], [5, 0]], np.int64)
    (hot,) = _run_node(
        provider, ops_norm._onehot, "OneHot",
        [ind, np.array(4.0, np.float32), np.array([0.5, 2.0], np.float32)], opset=11,
        host=(1, 2), axis=0,
    )  # fmt: skip
    want = np.where(np.arange(4)[:, None, None] == np.where(ind < 0, ind + 4, ind)[None], 2.0, 0.5)
    np.testing.assert_array_equal(hot, want.astype(np.float32))


# -- through a session, with the registry and declines ---------------------------------


def test_a_model_runs_on_the_device(emulated: Any) -> None:
    rng = np.random.default_rng(14)
    n = helper.make_node
    nodes = [
        n("InstanceNormalization", ["x", "s", "b"], ["a"], epsilon=1e-4),
        n("DepthToSpace", ["a"], ["d"], blocksize=2),
        n("Tile", ["d", "reps"], ["t"]),
        n("RMSNormalization", ["t", "w"], ["r"], axis=-2),
        n("GatherElements", ["r", "gi"], ["y"], axis=3),
    ]
    inits = [
        numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "s"),
        numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "b"),
        numpy_helper.from_array(np.array([1, 1, 2, 1], np.int64), "reps"),
        numpy_helper.from_array(rng.standard_normal((8, 6)).astype(np.float32), "w"),
        numpy_helper.from_array(rng.integers(-6, 6, (2, 1, 8, 3)).astype(np.int64), "gi"),
    ]
    graph = helper.make_graph(
        nodes,
        "m",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4, 2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)])
    sess = ortcore.InferenceSession(
        model.SerializeToString(), providers=["cuda", "cpu"], plugin_manager=emulated
    )
    assert sess.get_partition().counts() == {"CUDAExecutionProvider": 5}
    x = rng.standard_normal((2, 4, 2, 3)).astype(np.float32)
    (got,) = sess.run(None, {"x": x})
    s, b = (numpy_helper.to_array(i) for i in inits[:2])
    z, _, _ = _ln_ref(x, 2, 1e-4)
    a = z * s[:, None, None] + b[:, None, None]
    d = a.reshape(2, 2, 2, 1, 2, 3).transpose(0, 3, 4, 1, 5, 2).reshape(2, 1, 4, 6)
    t = np.tile(d, (1, 1, 2, 1))
    w = numpy_helper.to_array(inits[3])
    r = t / np.sqrt((t.astype(np.float64) ** 2).mean((2, 3), keepdims=True) + 1e-5) * w
    gi = numpy_helper.to_array(inits[4])
    np.testing.assert_allclose(got, np.take_along_axis(r, gi % 6, 3), rtol=1e-4, atol=1e-5)


def test_declines_say_why(emulated: Any) -> None:
    n = helper.make_node
    nodes = [
        n("Dropout", ["x", "r", "train"], ["d"]),
        n("ScatterElements", ["u8", "i", "u8"], ["e"], reduction="mul"),
    ]
    graph = helper.make_graph(
        nodes,
        "m",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
            helper.make_tensor_value_info("r", TensorProto.FLOAT, []),
            helper.make_tensor_value_info("train", TensorProto.BOOL, []),
            helper.make_tensor_value_info("u8", TensorProto.UINT8, [2, 3]),
            helper.make_tensor_value_info("i", TensorProto.INT64, [2, 3]),
        ],
        [
            helper.make_tensor_value_info("d", TensorProto.FLOAT, None),
            helper.make_tensor_value_info("e", TensorProto.UINT8, None),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    sess = ortcore.InferenceSession(
        model.SerializeToString(), providers=["cuda", "cpu"], plugin_manager=emulated
    )
    why = {r.op_type: r.declined.get("CUDAExecutionProvider") for r in sess.get_partition().nodes}
    assert "training mode" in str(why["Dropout"])
    assert why["ScatterElements"] == "CUDA: ScatterElements reduction mul of UINT8"
