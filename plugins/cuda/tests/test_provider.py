"""The CUDA provider end to end on the CPU emulation (``ORTCORE_CUDA_EMULATE=1``):
models run with device-resident values against the CPU provider, copies only
where the partition changes device, IO binding on the device, declines with
reasons, options, availability. The GPU backend itself runs only in the
tests marked ``gpu``."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import ortcore
import pytest
from onnx import TensorProto, helper, numpy_helper


def _sessions(manager: Any, model: bytes, **options: str) -> tuple[Any, Any]:
    cuda = ortcore.InferenceSession(
        model, providers=[("cuda", options), "cpu"], plugin_manager=manager
    )
    cpu = ortcore.InferenceSession(model, providers=["cpu"], plugin_manager=manager)
    return cuda, cpu


def _init(name: str, shape: tuple[int, ...], rng: Any, dtype: Any = np.float32) -> Any:
    return numpy_helper.from_array((rng.standard_normal(shape) * 0.3).astype(dtype), name)


def mlp(dtype: int = TensorProto.FLOAT) -> bytes:
    np_type = np.float16 if dtype == TensorProto.FLOAT16 else np.float32
    rng = np.random.default_rng(0)
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h"]),
        helper.make_node("Add", ["h", "b1"], ["hb"]),
        helper.make_node("Relu", ["hb"], ["r"]),
        helper.make_node("Gemm", ["r", "w2", "b2"], ["g"], transB=1, alpha=0.5),
        helper.make_node("Softmax", ["g"], ["y"], axis=-1),
    ]
    graph = helper.make_graph(
        nodes,
        "mlp",
        [helper.make_tensor_value_info("x", dtype, ["N", 16])],
        [helper.make_tensor_value_info("y", dtype, ["N", 10])],
        [
            _init("w1", (16, 32), rng, np_type),
            _init("b1", (32,), rng, np_type),
            _init("w2", (10, 32), rng, np_type),
            _init("b2", (10,), rng, np_type),
        ],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def attention_block(seq: int = 8, hidden: int = 32, heads: int = 4) -> bytes:
    """One BERT-style encoder layer as torch exports it (no fused ops)."""
    rng = np.random.default_rng(1)
    d = hidden // heads
    inits = [
        _init("wq", (hidden, hidden), rng),
        _init("wk", (hidden, hidden), rng),
        _init("wv", (hidden, hidden), rng),
        _init("wo", (hidden, hidden), rng),
        _init("w1", (hidden, 4 * hidden), rng),
        _init("w2", (4 * hidden, hidden), rng),
        _init("gamma", (hidden,), rng),
        _init("beta", (hidden,), rng),
        numpy_helper.from_array(np.array([0, seq, heads, d], np.int64), "heads_shape"),
        numpy_helper.from_array(np.array([0, seq, hidden], np.int64), "merge_shape"),
        numpy_helper.from_array(np.array(math.sqrt(d), np.float32), "scale"),
        numpy_helper.from_array(np.array(math.sqrt(0.5), np.float32), "rsqrt2"),
        numpy_helper.from_array(np.array(1.0, np.float32), "one"),
        numpy_helper.from_array(np.array(0.5, np.float32), "half"),
    ]
    n = helper.make_node
    nodes = [
        n("MatMul", ["x", "wq"], ["q0"]),
        n("MatMul", ["x", "wk"], ["k0"]),
        n("MatMul", ["x", "wv"], ["v0"]),
        n("Reshape", ["q0", "heads_shape"], ["q1"]),
        n("Reshape", ["k0", "heads_shape"], ["k1"]),
        n("Reshape", ["v0", "heads_shape"], ["v1"]),
        n("Transpose", ["q1"], ["q"], perm=[0, 2, 1, 3]),
        n("Transpose", ["k1"], ["kt"], perm=[0, 2, 3, 1]),
        n("Transpose", ["v1"], ["v"], perm=[0, 2, 1, 3]),
        n("MatMul", ["q", "kt"], ["s0"]),
        n("Div", ["s0", "scale"], ["s1"]),
        n("Softmax", ["s1"], ["p"], axis=-1),
        n("MatMul", ["p", "v"], ["c0"]),
        n("Transpose", ["c0"], ["c1"], perm=[0, 2, 1, 3]),
        n("Reshape", ["c1", "merge_shape"], ["c"]),
        n("MatMul", ["c", "wo"], ["o"]),
        n("Add", ["x", "o"], ["r1"]),
        n("LayerNormalization", ["r1", "gamma", "beta"], ["ln"], axis=-1, epsilon=1e-5),
        n("MatMul", ["ln", "w1"], ["f0"]),
        n("Mul", ["f0", "rsqrt2"], ["f1"]),
        n("Erf", ["f1"], ["f2"]),
        n("Add", ["f2", "one"], ["f3"]),
        n("Mul", ["f0", "f3"], ["f4"]),
        n("Mul", ["f4", "half"], ["f5"]),
        n("MatMul", ["f5", "w2"], ["f6"]),
        n("Add", ["ln", "f6"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "layer",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", seq, hidden])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["B", seq, hidden])],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


# -- options and availability ----------------------------------------------------------


def test_options_are_checked() -> None:
    from ortcore_cuda.provider import CUDAExecutionProvider as P

    for key, value in {
        "device_id": "gpu0",
        "gpu_mem_limit": "-1",
        "arena_extend_strategy": "kDouble",
        "cudnn_conv_algo_search": "FAST",
        "do_copy_in_default_stream": "yes",
        "backend": "fpga",
        "trt_fp16_enable": "1",
    }.items():
        with pytest.raises(ValueError, match=key):
            P({key: value})
    p = P({"device_id": "1", "gpu_mem_limit": "1048576", "backend": "emulator"})
    assert p.device == __import__("ep_sdk").Device("cuda", 1) and p.mem_limit == 1 << 20


def test_unavailable_without_pycuda_or_emulation_says_why(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from ortcore_cuda import provider

    monkeypatch.delenv("ORTCORE_CUDA_EMULATE", raising=False)
    monkeypatch.setattr(provider.importlib.util, "find_spec", lambda name: None)
    why = str(provider.CUDAExecutionProvider.unavailable_reason())
    assert "pycuda is not installed" in why and "ORTCORE_CUDA_EMULATE=1" in why
    monkeypatch.setenv("ORTCORE_CUDA_EMULATE", "1")
    assert provider.CUDAExecutionProvider.unavailable_reason() is None
    monkeypatch.setenv("CXX", "/no/such/compiler")
    assert "no C++ compiler" in str(provider.CUDAExecutionProvider.unavailable_reason())


# -- models on the device ------------------------------------------------------------------


def test_mlp_runs_on_the_device_with_one_copy_each_way(emulated: Any) -> None:
    cuda, cpu = _sessions(emulated, mlp())
    part = cuda.get_partition()
    assert part.counts() == {"CUDAExecutionProvider": len(part.nodes)}
    assert sorted((c.op_type, c.name) for c in part.copies) == [
        ("MemcpyFromHost", "x"),
        ("MemcpyToHost", "y"),
    ]
    for batch in (1, 3):
        x = np.random.default_rng(batch).standard_normal((batch, 16)).astype(np.float32)
        np.testing.assert_allclose(
            cuda.run(None, {"x": x})[0], cpu.run(None, {"x": x})[0], rtol=1e-5, atol=1e-6
        )


def test_float16_mlp(emulated: Any) -> None:
    cuda, cpu = _sessions(emulated, mlp(TensorProto.FLOAT16))
    x = np.random.default_rng(0).standard_normal((4, 16)).astype(np.float16)
    np.testing.assert_allclose(
        cuda.run(None, {"x": x})[0].astype(np.float32),
        cpu.run(None, {"x": x})[0].astype(np.float32),
        rtol=5e-3,
        atol=5e-3,
    )


def test_an_encoder_layer_runs_whole_on_the_device(emulated: Any) -> None:
    so = ortcore.SessionOptions()
    so.graph_optimization_level = ortcore.GraphOptimizationLevel.ORT_ENABLE_BASIC
    model = attention_block()
    cuda = ortcore.InferenceSession(model, so, providers=["cuda", "cpu"], plugin_manager=emulated)
    cpu = ortcore.InferenceSession(model, so, providers=["cpu"], plugin_manager=emulated)
    part = cuda.get_partition()
    on_cpu = [(r.op_type, r.declined) for r in part.nodes if r.provider != "CUDAExecutionProvider"]
    assert not on_cpu
    assert len(part.copies) == 2  # x in, y out
    x = np.random.default_rng(2).standard_normal((2, 8, 32)).astype(np.float32)
    np.testing.assert_allclose(
        cuda.run(None, {"x": x})[0], cpu.run(None, {"x": x})[0], rtol=1e-4, atol=1e-5
    )


def test_what_the_kernels_do_not_cover_runs_on_cpu_with_the_reason(emulated: Any) -> None:
    nodes = [
        helper.make_node("Softmax", ["x"], ["s"], axis=0),  # moved last and back
        helper.make_node("Max", ["s", "x", "x"], ["m"]),  # 3 inputs, folded pairwise
        helper.make_node("Pad", ["m", "pads"], ["p"], mode="reflect"),
        helper.make_node("ReduceSum", ["p", "axes"], ["r"], keepdims=1),  # not the last axis
        helper.make_node("Einsum", ["r", "r", "r"], ["l"], equation="ij,ij,ij->ij"),
        helper.make_node("Relu", ["l"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 6])],
        [
            numpy_helper.from_array(np.array([0], np.int64), "axes"),
            numpy_helper.from_array(np.array([0, 1, 0, 1], np.int64), "pads"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    cuda, cpu = _sessions(emulated, model.SerializeToString())
    where = {r.op_type: r for r in cuda.get_partition().nodes}
    for op in ("Softmax", "Max", "Pad", "ReduceSum", "Relu"):
        assert where[op].provider == "CUDAExecutionProvider", op
    assert where["Einsum"].provider == "CPUExecutionProvider"
    assert "Einsum of 3 operands" in where["Einsum"].declined["CUDAExecutionProvider"]
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    np.testing.assert_allclose(cuda.run(None, {"x": x})[0], cpu.run(None, {"x": x})[0], rtol=1e-6)


def test_io_binding_keeps_inputs_and_outputs_on_the_device(emulated: Any, monkeypatch: Any) -> None:
    from ortcore import plugins

    monkeypatch.setattr(plugins, "default_manager", lambda: emulated)
    from ortcore import ortvalue

    monkeypatch.setattr(ortvalue, "_movers", {})
    cuda, cpu = _sessions(emulated, mlp())
    x = np.random.default_rng(5).standard_normal((2, 16)).astype(np.float32)
    device_x = ortcore.OrtValue.ortvalue_from_numpy(x, "cuda", 0)
    assert device_x.device_name() == "cuda"
    binding = cuda.io_binding()
    binding.bind_ortvalue_input("x", device_x)
    binding.bind_output("y", "cuda", 0)
    from ortcore_cuda.provider import _backend

    backend = _backend(True, 0)
    cuda.run_with_iobinding(binding)  # plans the device-in, device-out variant (weights go up)
    before = (backend.uploads, backend.downloads)
    cuda.run_with_iobinding(binding)
    assert (backend.uploads, backend.downloads) == before  # no copy either way
    (y,) = binding.get_outputs()
    assert y.device_name() == "cuda"
    np.testing.assert_allclose(y.numpy(), cpu.run(None, {"x": x})[0], rtol=1e-5, atol=1e-6)


def test_device_memory_is_reused_across_runs(emulated: Any) -> None:
    cuda, _ = _sessions(emulated, mlp())
    x = np.ones((2, 16), np.float32)
    cuda.run(None, {"x": x})
    p = cuda._providers[0]
    raw = p.arena.raw_allocs
    for _ in range(3):
        cuda.run(None, {"x": x})
    assert p.arena.raw_allocs == raw  # every intermediate came from the cache
    assert p.arena.in_use <= p.arena.held


def test_gpu_mem_limit_is_enforced_with_a_clear_error(emulated: Any) -> None:
    cuda, _ = _sessions(emulated, mlp(), gpu_mem_limit="16384")  # the weights fit
    cuda.run(None, {"x": np.ones((2, 16), np.float32)})
    with pytest.raises(Exception, match="would pass gpu_mem_limit=16384"):
        cuda.run(None, {"x": np.ones((256, 16), np.float32)})
    cuda.run(None, {"x": np.ones((2, 16), np.float32)})  # the session goes on


@pytest.mark.gpu
def test_mlp_on_the_gpu_matches_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ORTCORE_CUDA_EMULATE", raising=False)
    from ortcore_cuda.provider import gpu_unavailable_reason

    why = gpu_unavailable_reason()
    if why:
        pytest.skip(why)
    from ortcore.plugins import PluginManager

    import ortcore_cuda.plugin

    pm = PluginManager(autoload=False)
    pm.register_plugin(ortcore_cuda.plugin, name="ortcore_cuda")
    pm.register_plugin(pytest.importorskip("ortcore_cpu.plugin"), name="ortcore_cpu")
    for model in (mlp(), attention_block()):
        cuda, cpu = _sessions(pm, model)
        shape = (2, 16) if model == mlp() else (2, 8, 32)
        x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
        np.testing.assert_allclose(
            cuda.run(None, {"x": x})[0], cpu.run(None, {"x": x})[0], rtol=1e-3, atol=1e-4
        )


def small_cnn() -> bytes:
    """Conv (pads, strides, groups, dilations), BatchNormalization, pools,
    Concat, GlobalAveragePool, Flatten, Gemm: the light zoo's ops."""
    rng = np.random.default_rng(3)
    n = helper.make_node
    nodes = [
        n("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], strides=[2, 2]),
        n("BatchNormalization", ["c1", "g", "be", "mu", "var"], ["bn"], epsilon=1e-3),
        n("Relu", ["bn"], ["r1"]),
        n("MaxPool", ["r1"], ["p1"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
        n("Conv", ["p1", "w2"], ["c2"], group=4, pads=[1, 1, 1, 1], dilations=[1, 1]),
        n("Conv", ["p1", "w3"], ["c3"], auto_pad="SAME_UPPER", dilations=[2, 2]),
        n("Concat", ["c2", "c3"], ["cat0"], axis=1),
        n("LRN", ["cat0"], ["lrn"], size=3, alpha=1e-2, beta=0.75, bias=2.0),
        n("Sum", ["lrn", "cat0", "lrn"], ["cat"]),
        n(
            "AveragePool",
            ["cat"],
            ["p2"],
            kernel_shape=[2, 2],
            strides=[1, 1],
            pads=[0, 0, 1, 1],
            count_include_pad=0,
        ),
        n("GlobalAveragePool", ["p2"], ["gap"]),
        n("Flatten", ["gap"], ["f"]),
        n("Gemm", ["f", "wf", "bf"], ["y"], transB=1),
    ]
    inits = [
        _init("w1", (8, 3, 3, 3), rng),
        _init("b1", (8,), rng),
        _init("g", (8,), rng),
        _init("be", (8,), rng),
        _init("mu", (8,), rng),
        numpy_helper.from_array(rng.uniform(0.5, 2, 8).astype(np.float32), "var"),
        _init("w2", (8, 2, 3, 3), rng),
        _init("w3", (4, 8, 3, 3), rng),
        _init("wf", (5, 12), rng),
        _init("bf", (5,), rng),
    ]
    graph = helper.make_graph(
        nodes,
        "cnn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 17, 15])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 5])],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


@pytest.mark.parametrize("budget", [None, 12000])
def test_a_small_cnn_runs_whole_on_the_device(
    emulated: Any, monkeypatch: pytest.MonkeyPatch, budget: int | None
) -> None:
    """Conv lays out the columns of all the images at once, or (a smaller
    budget) of as many as fit, the last batch of them shorter."""
    if budget is not None:
        from ortcore_cuda import ops_nn

        monkeypatch.setattr(ops_nn, "COLS_BYTES", budget)  # the first Conv 1 image, the others 2
    so = ortcore.SessionOptions()
    so.graph_optimization_level = ortcore.GraphOptimizationLevel.ORT_DISABLE_ALL  # keep BN
    model = small_cnn()
    cuda = ortcore.InferenceSession(model, so, providers=["cuda", "cpu"], plugin_manager=emulated)
    cpu = ortcore.InferenceSession(model, so, providers=["cpu"], plugin_manager=emulated)
    assert cuda.get_partition().counts() == {"CUDAExecutionProvider": 13}
    x = np.random.default_rng(4).standard_normal((3, 3, 17, 15)).astype(np.float32)
    np.testing.assert_allclose(
        cuda.run(None, {"x": x})[0], cpu.run(None, {"x": x})[0], rtol=1e-4, atol=1e-5
    )


def data_movement() -> bytes:
    """Slice (negative step), Split, Expand, Pad, Gather (negative index),
    Where, Less, Clip, Transpose of int64."""
    n = helper.make_node

    def ints(name: str, values: list[int]) -> Any:
        return numpy_helper.from_array(np.array(values, np.int64), name)

    nodes = [
        n("Slice", ["x", "st", "en", "ax", "sp"], ["s"]),
        n("Split", ["x", "parts"], ["a", "b"], axis=1),
        n("Expand", ["a", "eshape"], ["e"]),
        n("Pad", ["b", "pads", "pv"], ["p"]),
        n("Gather", ["x", "idx"], ["g"], axis=1),
        n("Less", ["x", "zero"], ["m"]),
        n("Where", ["m", "x", "g2"], ["w"]),
        n("Clip", ["w", "lo", "hi"], ["c"]),
        n("Transpose", ["i64"], ["t"], perm=[1, 0]),
    ]
    inits = [
        ints("st", [3, -1]),
        ints("en", [0, -100]),
        ints("ax", [1, 0]),
        ints("sp", [-1, -2]),
        ints("parts", [2, 4]),
        ints("eshape", [2, 3, 2]),
        ints("pads", [1, 0, 0, 2]),
        numpy_helper.from_array(np.array(-7.0, np.float32), "pv"),
        ints("idx", [5, -1, 0]),
        numpy_helper.from_array(np.array(0.0, np.float32), "zero"),
        numpy_helper.from_array(np.full((3, 6), 0.5, np.float32), "g2"),
        numpy_helper.from_array(np.array(-0.3, np.float32), "lo"),
        numpy_helper.from_array(np.array(0.4, np.float32), "hi"),
        ints("i64", [1, 2, 3, 4, 5, 6]),
    ]
    inits[-1] = numpy_helper.from_array(np.arange(6, dtype=np.int64).reshape(2, 3), "i64")
    out = helper.make_tensor_value_info
    graph = helper.make_graph(
        nodes,
        "moves",
        [out("x", TensorProto.FLOAT, [3, 6])],
        [
            out(name, TensorProto.INT64 if name == "t" else TensorProto.FLOAT, None)
            for name in ("s", "e", "p", "g", "c", "t")
        ],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]).SerializeToString()


def test_data_movement_ops_on_the_device(emulated: Any) -> None:
    so = ortcore.SessionOptions()
    so.graph_optimization_level = ortcore.GraphOptimizationLevel.ORT_DISABLE_ALL
    model = data_movement()
    cuda = ortcore.InferenceSession(model, so, providers=["cuda", "cpu"], plugin_manager=emulated)
    cpu = ortcore.InferenceSession(model, so, providers=["cpu"], plugin_manager=emulated)
    part = cuda.get_partition()
    assert part.counts() == {"CUDAExecutionProvider": len(part.nodes)}, [
        (r.op_type, r.declined) for r in part.nodes if r.provider != "CUDAExecutionProvider"
    ]
    x = np.random.default_rng(6).standard_normal((3, 6)).astype(np.float32)
    for got, want in zip(cuda.run(None, {"x": x}), cpu.run(None, {"x": x})):
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_gather_refuses_indices_out_of_range(emulated: Any) -> None:
    graph = helper.make_graph(
        [helper.make_node("Gather", ["x", "i"], ["y"])],
        "g",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [3]),
            helper.make_tensor_value_info("i", TensorProto.INT64, [1]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    cuda, _ = _sessions(emulated, model.SerializeToString())
    x = np.arange(3, dtype=np.float32)
    assert cuda.run(None, {"x": x, "i": np.array([-3])})[0].tolist() == [0.0]
    with pytest.raises(Exception, match=r"within \[-3, 2\]"):
        cuda.run(None, {"x": x, "i": np.array([3])})


LIGHT = Path(__import__("onnx").__file__).parent / "backend/test/data/light"


@pytest.mark.parametrize("name", ["light_resnet50", "light_inception_v1", "light_bvlc_alexnet"])
def test_light_zoo_model_runs_whole_on_the_device(emulated: Any, name: str) -> None:
    """Every node on the device (Conv, BatchNorm folded, pools, LRN, Sum,
    Concat, Gemm, Softmax), one copy in and one out, results as the CPU's."""
    path = str(LIGHT / f"{name}.onnx")
    cuda, cpu = _sessions(emulated, path)
    part = cuda.get_partition()
    assert part.counts() == {"CUDAExecutionProvider": len(part.nodes)}
    assert len(part.copies) == 2
    inp = cuda.get_inputs()[0]
    x = np.random.default_rng(0).standard_normal(inp.shape).astype(np.float32)
    np.testing.assert_allclose(
        cuda.run(None, {inp.name: x})[0], cpu.run(None, {inp.name: x})[0], rtol=1e-3, atol=1e-5
    )


def test_shape_arithmetic_stays_on_the_host_without_copies(emulated: Any) -> None:
    """Shape reads a device tensor's dims (no copy); the small int64 tensors
    computed from them stay on the CPU, where Reshape reads its shape; Cast
    and Trilu, Not, Where of an exported causal mask run on the device."""
    n = helper.make_node
    nodes = [
        n("Shape", ["x"], ["shape"]),
        n("Gather", ["shape", "zero"], ["batch"], axis=0),
        n("Unsqueeze", ["batch", "axes"], ["b1"]),
        n("Concat", ["b1", "minus1"], ["target"], axis=0),
        n("Reshape", ["x", "target"], ["flat"]),
        n("Cast", ["mask"], ["maskf"], to=TensorProto.FLOAT),
        n("Trilu", ["ones"], ["tri"], upper=0),
        n("Cast", ["tri"], ["trib"], to=TensorProto.BOOL),
        n("Not", ["trib"], ["hide"]),
        n("Where", ["hide", "neg", "maskf"], ["scores"]),
        n("Relu", ["flat"], ["y"]),
    ]
    inits = [
        numpy_helper.from_array(np.array(0, np.int64), "zero"),
        numpy_helper.from_array(np.array([0], np.int64), "axes"),
        numpy_helper.from_array(np.array([-1], np.int64), "minus1"),
        numpy_helper.from_array(np.ones((4, 4), np.float32), "ones"),
        numpy_helper.from_array(np.array(-1e4, np.float32), "neg"),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", 4, 2]),
            helper.make_tensor_value_info("mask", TensorProto.INT64, ["B", 1, 4]),
        ],
        [
            helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
            helper.make_tensor_value_info("scores", TensorProto.FLOAT, None),
        ],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    so = ortcore.SessionOptions()
    so.graph_optimization_level = ortcore.GraphOptimizationLevel.ORT_DISABLE_ALL
    data = model.SerializeToString()
    cuda = ortcore.InferenceSession(data, so, providers=["cuda", "cpu"], plugin_manager=emulated)
    cpu = ortcore.InferenceSession(data, so, providers=["cpu"], plugin_manager=emulated)
    part = cuda.get_partition()
    on_cpu = {r.op_type for r in part.nodes if r.provider == "CPUExecutionProvider"}
    assert on_cpu == {"Gather", "Unsqueeze", "Concat"}
    reason = next(r for r in part.nodes if r.op_type == "Concat").declined
    assert "shape arithmetic" in reason["CUDAExecutionProvider"]
    # x and mask in, y and scores out: nothing crosses for the shape
    assert sorted(c.name for c in part.copies) == ["mask", "scores", "x", "y"]
    from ortcore.inspection import inspect_partition  # says the same without building

    found = inspect_partition(data, so, ["cuda", "cpu"], plugin_manager=emulated)
    assert sorted((c.op_type, c.name) for c in found.partition.copies) == sorted(
        (c.op_type, c.name) for c in part.copies
    )
    assert [(r.op_type, r.provider) for r in found.partition.nodes] == [
        (r.op_type, r.provider) for r in part.nodes
    ]
    feeds = {
        "x": np.random.default_rng(0).standard_normal((3, 4, 2)).astype(np.float32),
        "mask": np.array([[[1, 1, 0, 0]], [[1, 0, 1, 0]], [[0, 0, 0, 1]]], np.int64),
    }
    for got, want in zip(cuda.run(None, feeds), cpu.run(None, feeds)):
        np.testing.assert_array_equal(got, want)
    # alone, with no provider to leave it to, the provider does the shape arithmetic itself
    so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
    alone = ortcore.InferenceSession(data, so, providers=["cuda"], plugin_manager=emulated)
    assert {r.provider for r in alone.get_partition().nodes} == {"CUDAExecutionProvider"}
    for got, want in zip(alone.run(None, feeds), cpu.run(None, feeds)):
        np.testing.assert_array_equal(got, want)


def test_constants_ranges_and_sizes_are_made_on_the_device(emulated: Any) -> None:
    n = helper.make_node
    nodes = [
        n("Constant", [], ["c"], value=numpy_helper.from_array(np.arange(6, dtype=np.float32))),
        n("Constant", [], ["k"], value_ints=[2, 3]),
        n("ConstantOfShape", ["k"], ["z"], value=numpy_helper.from_array(np.array([7], np.int32))),
        n("Range", ["start", "limit", "delta"], ["r"]),
        n("Size", ["z"], ["s"]),
        n("Add", ["c", "r"], ["y"]),
    ]
    inits = [
        numpy_helper.from_array(np.array(-1.5, np.float32), "start"),
        numpy_helper.from_array(np.array(1.5, np.float32), "limit"),
        numpy_helper.from_array(np.array(0.5, np.float32), "delta"),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [],
        [
            helper.make_tensor_value_info(v, t, None)
            for v, t in (
                ("y", TensorProto.FLOAT),
                ("z", TensorProto.INT32),
                ("s", TensorProto.INT64),
            )
        ],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    so = ortcore.SessionOptions()
    so.graph_optimization_level = ortcore.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
    sess = ortcore.InferenceSession(
        model.SerializeToString(), so, providers=["cuda"], plugin_manager=emulated
    )
    for _ in range(2):  # the constant is uploaded once; every run gets its own copy
        y, z, size = sess.run(None, {})
        np.testing.assert_array_equal(y, np.arange(6) + np.arange(-1.5, 1.5, 0.5))
        np.testing.assert_array_equal(z, np.full((2, 3), 7, np.int32))
        assert size == 6
