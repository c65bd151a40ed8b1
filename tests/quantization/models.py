"""Small generated float models the quantization tests quantize."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17


def _init(name: str, array: np.ndarray) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(array), name)


def cnn(seed: int = 0) -> onnx.ModelProto:
    """Conv/Relu/MaxPool, a residual Add, Concat, GlobalAveragePool, Flatten, Gemm, Softmax."""
    rng = np.random.default_rng(seed)
    w1 = rng.normal(0, 0.3, (8, 3, 3, 3)).astype(np.float32)
    b1 = rng.normal(0, 0.1, (8,)).astype(np.float32)
    w2 = rng.normal(0, 0.2, (8, 8, 3, 3)).astype(np.float32)
    b2 = rng.normal(0, 0.1, (8,)).astype(np.float32)
    w3 = rng.normal(0, 0.2, (4, 8, 1, 1)).astype(np.float32)
    wg = rng.normal(0, 0.3, (12, 10)).astype(np.float32)
    bg = rng.normal(0, 0.1, (10,)).astype(np.float32)
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node(
            "MaxPool", ["r1"], ["p1"], name="pool1", kernel_shape=[2, 2], strides=[2, 2]
        ),
        helper.make_node("Conv", ["p1", "w2", "b2"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
        helper.make_node("Add", ["r2", "p1"], ["a1"], name="add1"),
        helper.make_node("Conv", ["a1", "w3"], ["c3"], name="conv3"),
        helper.make_node("Concat", ["a1", "c3"], ["cat"], name="concat1", axis=1),
        helper.make_node(
            "AveragePool", ["cat"], ["ap"], name="avgpool1", kernel_shape=[2, 2], strides=[2, 2]
        ),
        helper.make_node("GlobalAveragePool", ["ap"], ["gap"], name="gap1"),
        helper.make_node("Flatten", ["gap"], ["flat"], name="flatten1", axis=1),
        helper.make_node("Gemm", ["flat", "wg", "bg"], ["logits"], name="gemm1"),
        helper.make_node("Softmax", ["logits"], ["y"], name="softmax1", axis=-1),
    ]
    graph = helper.make_graph(
        nodes,
        "cnn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])],
        [
            _init(n, a)
            for n, a in [
                ("w1", w1),
                ("b1", b1),
                ("w2", w2),
                ("b2", b2),
                ("w3", w3),
                ("wg", wg),
                ("bg", bg),
            ]
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    return model


def transformer(seed: int = 1, seq: int = 8, hidden: int = 16) -> onnx.ModelProto:
    """One attention block.

    Q/K/V MatMul+Add, scores MatMul, Softmax, residual Add, LayerNorm, MLP.
    """
    rng = np.random.default_rng(seed)

    def w(*shape: int) -> np.ndarray:
        return rng.normal(0, 0.25, shape).astype(np.float32)

    inits = {
        "wq": w(hidden, hidden),
        "bq": w(hidden),
        "wk": w(hidden, hidden),
        "bk": w(hidden),
        "wv": w(hidden, hidden),
        "bv": w(hidden),
        "wo": w(hidden, hidden),
        "bo": w(hidden),
        "gamma": (1 + w(hidden)).astype(np.float32),
        "beta": w(hidden),
        "w1": w(hidden, 2 * hidden),
        "b1": w(2 * hidden),
        "w2": w(2 * hidden, hidden),
        "perm_scale": np.array(1.0 / np.sqrt(hidden), np.float32),
    }
    nodes = [
        helper.make_node("MatMul", ["x", "wq"], ["q0"], name="mm_q"),
        helper.make_node("Add", ["q0", "bq"], ["q"], name="add_q"),
        helper.make_node("MatMul", ["x", "wk"], ["k0"], name="mm_k"),
        helper.make_node("Add", ["k0", "bk"], ["k"], name="add_k"),
        helper.make_node("MatMul", ["x", "wv"], ["v0"], name="mm_v"),
        helper.make_node("Add", ["v0", "bv"], ["v"], name="add_v"),
        helper.make_node("Transpose", ["k"], ["kt"], name="tr_k", perm=[0, 2, 1]),
        helper.make_node("MatMul", ["q", "kt"], ["s0"], name="mm_s"),
        helper.make_node("Mul", ["s0", "perm_scale"], ["s"], name="mul_s"),
        helper.make_node("Softmax", ["s"], ["p"], name="softmax", axis=-1),
        helper.make_node("MatMul", ["p", "v"], ["ctx"], name="mm_ctx"),
        helper.make_node("MatMul", ["ctx", "wo"], ["o0"], name="mm_o"),
        helper.make_node("Add", ["o0", "bo"], ["o"], name="add_o"),
        helper.make_node("Add", ["o", "x"], ["res"], name="add_res"),
        helper.make_node(
            "LayerNormalization", ["res", "gamma", "beta"], ["ln"], name="ln", axis=-1, epsilon=1e-5
        ),
        helper.make_node("MatMul", ["ln", "w1"], ["h0"], name="mm_1"),
        helper.make_node("Add", ["h0", "b1"], ["h1"], name="add_1"),
        helper.make_node("Relu", ["h1"], ["h"], name="relu"),
        helper.make_node("MatMul", ["h", "w2"], ["y"], name="mm_2"),
    ]
    graph = helper.make_graph(
        nodes,
        "transformer",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, seq, hidden])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, seq, hidden])],
        [_init(n, a) for n, a in inits.items()],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])


def shared_weights(seed: int = 2) -> onnx.ModelProto:
    """Two MatMuls and a Gemm reading one weight; a Sigmoid, a LeakyRelu, a Gather on a table."""
    rng = np.random.default_rng(seed)
    wt = rng.normal(0, 0.4, (8, 8)).astype(np.float32)
    table = rng.normal(0, 1.0, (10, 8)).astype(np.float32)
    nodes = [
        helper.make_node("Gather", ["table", "ids"], ["emb"], name="gather"),
        helper.make_node("Add", ["x", "emb"], ["xe"], name="add_in"),
        helper.make_node("MatMul", ["xe", "w"], ["m1"], name="mm_a"),
        helper.make_node("Sigmoid", ["m1"], ["s1"], name="sig"),
        helper.make_node("MatMul", ["s1", "w"], ["m2"], name="mm_b"),
        helper.make_node("LeakyRelu", ["m2"], ["l2"], name="lrelu", alpha=0.1),
        helper.make_node("Gemm", ["l2", "w"], ["g"], name="gemm", transB=1),
        helper.make_node("Mul", ["g", "m1"], ["y"], name="mul_out"),
    ]
    graph = helper.make_graph(
        nodes,
        "shared",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8]),
            helper.make_tensor_value_info("ids", TensorProto.INT64, [4]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8])],
        [_init("w", wt), _init("table", table)],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])


def with_subgraph(seed: int = 3) -> onnx.ModelProto:
    """An If whose branches each hold a MatMul on an outer-scope weight."""
    rng = np.random.default_rng(seed)
    w = rng.normal(0, 0.4, (8, 8)).astype(np.float32)
    w_else = rng.normal(0, 0.4, (8, 8)).astype(np.float32)

    def branch(name: str, weight: str) -> onnx.GraphProto:
        return helper.make_graph(
            [helper.make_node("MatMul", ["h", weight], [f"{name}_out"], name=f"{name}_mm")],
            name,
            [],
            [helper.make_tensor_value_info(f"{name}_out", TensorProto.FLOAT, [4, 8])],
        )

    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["h"], name="mm_outer"),
        helper.make_node(
            "If",
            ["cond"],
            ["y"],
            name="if1",
            then_branch=branch("then", "w"),
            else_branch=branch("else", "w_else"),
        ),
    ]
    graph = helper.make_graph(
        nodes,
        "subgraph",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8]),
            helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8])],
        [_init("w", w), _init("w_else", w_else)],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])


def feeds(model: onnx.ModelProto, count: int, seed: int = 10) -> list[dict[str, np.ndarray]]:
    """``count`` random feeds for the model's graph inputs."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        feed: dict[str, np.ndarray] = {}
        for vi in model.graph.input:
            shape = [d.dim_value for d in vi.type.tensor_type.shape.dim]
            elem = vi.type.tensor_type.elem_type
            if elem == TensorProto.INT64:
                feed[vi.name] = rng.integers(0, 10, shape).astype(np.int64)
            elif elem == TensorProto.BOOL:
                feed[vi.name] = np.array(rng.random() < 0.5)
            else:
                feed[vi.name] = rng.normal(0, 1, shape).astype(np.float32)
        out.append(feed)
    return out


class ListReader:
    """A calibration data reader over a list of feeds (duck-typed like onnxruntime's)."""

    def __init__(self, data: list[dict[str, np.ndarray]]) -> None:
        self.data = data
        self._it: Iterator[dict[str, np.ndarray]] = iter(data)

    def get_next(self) -> dict[str, np.ndarray] | None:
        return next(self._it, None)

    def rewind(self) -> None:
        self._it = iter(self.data)
