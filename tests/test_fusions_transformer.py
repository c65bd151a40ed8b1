"""Extended-level fusions of transformer patterns: MatMul + Add and
activations, GELU, Swish, the normalizations, attention.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import onnx
import onnx.reference
import pytest
from onnx import TensorProto, helper, numpy_helper

from .fusion_helpers import L, _check, _init, _model, _x

# -- MatMul + Add, Gemm/MatMul + activation ----------------------------------


def test_matmul_add_2d_becomes_gemm_and_takes_the_relu(cpu: str, tmp_path: Path) -> None:
    mk = helper.make_node
    nodes = [mk("MatMul", ["x", "w"], ["m"]), mk("Add", ["m", "b"], ["a"])]
    nodes.append(mk("Relu", ["a"], ["y"]))
    model = _model(nodes, {"x": [4, 8]}, ["y"], [_init("w", _x(8, 5)), _init("b", _x(5))])
    assert _check(model, {"x": _x(4, 8)}, tmp_path) == ["com.ortcore:FusedGemm"]


def test_matmul_add_3d_becomes_fused_matmul(cpu: str, tmp_path: Path) -> None:
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["m"]),
        helper.make_node("Add", ["b", "m"], ["y"]),
    ]
    model = _model(nodes, {"x": [2, 4, 8]}, ["y"], [_init("w", _x(8, 5)), _init("b", _x(5))])
    assert _check(model, {"x": _x(2, 4, 8)}, tmp_path) == ["com.ortcore:FusedMatMul"]


def test_matmul_add_not_fused_when_product_is_read_twice(cpu: str, tmp_path: Path) -> None:
    mk = helper.make_node
    nodes = [mk("MatMul", ["x", "w"], ["m"]), mk("Add", ["m", "b"], ["y"]), mk("Neg", ["m"], ["z"])]
    model = _model(nodes, {"x": [4, 8]}, ["y", "z"], [_init("w", _x(8, 5)), _init("b", _x(5))])
    assert _check(model, {"x": _x(4, 8)}, tmp_path) == ["MatMul", "Add", "Neg"]


def test_matmul_sigmoid_becomes_fused_matmul(cpu: str, tmp_path: Path) -> None:
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["m"]),
        helper.make_node("Sigmoid", ["m"], ["y"]),
    ]
    model = _model(nodes, {"x": [2, 3, 8]}, ["y"], [_init("w", _x(8, 5))])
    assert _check(model, {"x": _x(2, 3, 8)}, tmp_path) == ["com.ortcore:FusedMatMul"]


# -- GELU --------------------------------------------------------------------


def _gelu_erf(form: str, c: float = math.sqrt(2)) -> list[onnx.NodeProto]:
    head = [helper.make_node("Div", ["x", "sqrt2"], ["d"]), helper.make_node("Erf", ["d"], ["e"]),
            helper.make_node("Add", ["e", "one"], ["h"])]  # fmt: skip
    mk = helper.make_node
    tails = {
        "x*h*0.5": [mk("Mul", ["x", "h"], ["t"]), mk("Mul", ["t", "half"], ["y"])],
        "x*(h*0.5)": [mk("Mul", ["h", "half"], ["t"]), mk("Mul", ["x", "t"], ["y"])],
        "(x*0.5)*h": [mk("Mul", ["x", "half"], ["t"]), mk("Mul", ["t", "h"], ["y"])],
    }
    return head + tails[form]


GELU_INITS = [_init("sqrt2", math.sqrt(2)), _init("one", 1.0), _init("half", 0.5)]


@pytest.mark.parametrize("form", ["x*h*0.5", "x*(h*0.5)", "(x*0.5)*h"])
@pytest.mark.parametrize("opset", [17, 20])
def test_gelu_erf_forms(cpu: str, tmp_path: Path, form: str, opset: int) -> None:
    model = _model(_gelu_erf(form), {"x": [3, 8]}, ["y"], GELU_INITS, opset=opset)
    ops = _check(model, {"x": _x(3, 8)}, tmp_path)
    assert ops == (["Gelu"] if opset >= 20 else ["com.ortcore:FusedGelu"])


def test_gelu_tanh_form_with_bias(cpu: str, tmp_path: Path) -> None:
    mk = helper.make_node
    nodes = [
        mk("Add", ["x0", "bias"], ["x"]), mk("Pow", ["x", "three"], ["c"]),
        mk("Mul", ["k", "c"], ["kc"]), mk("Add", ["x", "kc"], ["i"]),
        mk("Mul", ["i", "s2pi"], ["o"]), mk("Tanh", ["o"], ["e"]),
        mk("Add", ["one", "e"], ["h"]), mk("Mul", ["x", "h"], ["t"]),
        mk("Mul", ["t", "half"], ["y"]),
    ]  # fmt: skip
    inits = [*GELU_INITS, _init("three", 3.0), _init("k", 0.044715),
             _init("s2pi", math.sqrt(2 / math.pi)), _init("bias", _x(8))]  # fmt: skip
    model = _model(nodes, {"x0": [3, 8]}, ["y"], inits, opset=18)
    assert _check(model, {"x0": _x(3, 8)}, tmp_path) == ["com.ortcore:BiasGelu"]


def test_gelu_not_fused_with_wrong_constant(cpu: str, tmp_path: Path) -> None:
    inits = [_init("sqrt2", 1.3), _init("one", 1.0), _init("half", 0.5)]
    model = _model(_gelu_erf("x*h*0.5"), {"x": [3, 8]}, ["y"], inits, opset=20)
    assert "Erf" in _check(model, {"x": _x(3, 8)}, tmp_path)


@pytest.mark.parametrize("opset", [17, 20])
def test_gelu_tanh_form_as_gpt2_exports(cpu: str, tmp_path: Path, opset: int) -> None:
    # transformers' NewGELUActivation: 0.5 * x * (1 + tanh(c * (x + k * pow(x, 3)))).
    mk = helper.make_node
    nodes = [
        mk("Mul", ["x", "half"], ["hx"]), mk("Pow", ["x", "three"], ["c"]),
        mk("Mul", ["c", "k"], ["kc"]), mk("Add", ["x", "kc"], ["i"]),
        mk("Mul", ["s2pi", "i"], ["o"]), mk("Tanh", ["o"], ["e"]),
        mk("Add", ["e", "one"], ["h"]), mk("Mul", ["hx", "h"], ["y"]),
    ]  # fmt: skip
    inits = [*GELU_INITS, _init("three", 3.0), _init("k", 0.044715),
             _init("s2pi", math.sqrt(2 / math.pi))]  # fmt: skip
    model = _model(nodes, {"x": [4, 8]}, ["y"], inits, opset=opset)
    assert _check(model, {"x": _x(4, 8) * 3}, tmp_path) == (
        ["Gelu"] if opset >= 20 else ["com.ortcore:FusedGelu"]
    )
    (node,) = onnx.load(tmp_path / f"opt{int(L.ORT_ENABLE_ALL)}.onnx").graph.node
    assert helper.get_attribute_value(node.attribute[0]) == b"tanh"


# -- Swish: SiLU, QuickGelu ----------------------------------------------------


def _swish_nodes(alpha: bool, swap: bool) -> list[onnx.NodeProto]:
    """``x * Sigmoid(x)``, or ``x * Sigmoid(a * x)``; ``swap`` flips each Mul."""
    mk = helper.make_node
    nodes = []
    if alpha:
        nodes.append(mk("Mul", ["a", "x"] if swap else ["x", "a"], ["ax"]))
    nodes.append(mk("Sigmoid", ["ax" if alpha else "x"], ["s"]))
    nodes.append(mk("Mul", ["s", "x"] if swap else ["x", "s"], ["y"]))
    return nodes


@pytest.mark.parametrize("swap", [False, True])
@pytest.mark.parametrize("alpha", [False, True], ids=["silu", "quick-gelu"])
@pytest.mark.parametrize("opset", [17, 24])
def test_swish_forms(cpu: str, tmp_path: Path, opset: int, alpha: bool, swap: bool) -> None:
    model = _model(_swish_nodes(alpha, swap), {"x": [3, 8]}, ["y"], [_init("a", 1.702)], opset)
    ops = _check(model, {"x": _x(3, 8) * 4}, tmp_path)
    assert ops == (["Swish"] if opset >= 24 else ["com.ortcore:FusedSwish"])
    (node,) = onnx.load(tmp_path / f"opt{int(L.ORT_ENABLE_ALL)}.onnx").graph.node
    want = np.float32(1.702) if alpha else 1.0
    assert helper.get_attribute_value(node.attribute[0]) == pytest.approx(want)


def test_swish_not_fused_when_the_gate_reads_another_tensor(cpu: str, tmp_path: Path) -> None:
    # GLU-style gating, z * Sigmoid(x), is no Swish.
    mk = helper.make_node
    nodes = [mk("Sigmoid", ["x"], ["s"]), mk("Mul", ["z", "s"], ["y"])]
    model = _model(nodes, {"x": [3, 8], "z": [3, 8]}, ["y"])
    assert _check(model, {"x": _x(3, 8), "z": _x(3, 8)}, tmp_path) == ["Sigmoid", "Mul"]


def test_swish_not_fused_when_the_sigmoid_is_read_twice(cpu: str, tmp_path: Path) -> None:
    mk = helper.make_node
    nodes = [*_swish_nodes(False, False), mk("Neg", ["s"], ["z"])]
    model = _model(nodes, {"x": [3, 8]}, ["y", "z"])
    assert _check(model, {"x": _x(3, 8)}, tmp_path) == ["Sigmoid", "Mul", "Neg"]


def test_quick_gelu_not_fused_with_an_overridable_or_widening_scale(
    cpu: str, tmp_path: Path
) -> None:
    # An alpha a feed may replace is not a constant; a [1, 1] alpha makes a
    # vector 2-D, which Swish would not.
    over = _model(_swish_nodes(True, False), {"x": [3, 8], "a": []}, ["y"], [_init("a", 1.702)])
    assert "Sigmoid" in _check(over, {"x": _x(3, 8)}, tmp_path)
    wide = _model(_swish_nodes(True, False), {"x": [8]}, ["y"], [_init("a", [[1.702]])])
    assert "Sigmoid" in _check(wide, {"x": _x(8)}, tmp_path)


# -- LayerNormalization, RMSNormalization, SkipLayerNormalization ------------


def _layer_norm_nodes(src: str, axes: int = -1) -> list[onnx.NodeProto]:
    mk = helper.make_node
    return [
        mk("ReduceMean", [src], ["m"], axes=[axes]), mk("Sub", [src, "m"], ["d"]),
        mk("Pow", ["d", "two"], ["p"]), mk("ReduceMean", ["p"], ["v"], axes=[axes]),
        mk("Add", ["v", "eps"], ["ve"]), mk("Sqrt", ["ve"], ["s"]), mk("Div", ["d", "s"], ["n"]),
        mk("Mul", ["n", "gamma"], ["g"]), mk("Add", ["g", "beta"], ["y"]),
    ]  # fmt: skip


LN_INITS = [_init("two", 2.0), _init("eps", 1e-5), _init("gamma", _x(8)), _init("beta", _x(8))]


@pytest.mark.parametrize("opset", [13, 17])
def test_layer_norm_from_primitives(cpu: str, tmp_path: Path, opset: int) -> None:
    model = _model(_layer_norm_nodes("x"), {"x": [2, 3, 8]}, ["y"], LN_INITS, opset=opset)
    ops = _check(model, {"x": _x(2, 3, 8)}, tmp_path)
    assert ops == (["LayerNormalization"] if opset >= 17 else ["com.ortcore:FusedLayerNorm"])


def test_layer_norm_not_fused_over_another_axis(cpu: str, tmp_path: Path) -> None:
    inits = [*LN_INITS[:2], _init("gamma", _x(3, 1)), _init("beta", _x(3, 1))]
    model = _model(_layer_norm_nodes("x", axes=1), {"x": [2, 3, 8]}, ["y"], inits)
    assert "ReduceMean" in _check(model, {"x": _x(2, 3, 8)}, tmp_path)


def test_skip_layer_norm_keeps_the_sum(cpu: str, tmp_path: Path) -> None:
    mk = helper.make_node
    nodes = [mk("Add", ["x", "r"], ["sum"]),
             mk("LayerNormalization", ["sum", "gamma", "beta"], ["y"]),
             mk("Neg", ["sum"], ["z"])]  # fmt: skip
    model = _model(nodes, {"x": [2, 3, 8], "r": [2, 3, 8]}, ["y", "z"], LN_INITS)
    ops = _check(model, {"x": _x(2, 3, 8), "r": _x(2, 3, 8)}, tmp_path)
    assert ops == ["com.ortcore:SkipLayerNormalization", "Neg"]


def test_skip_layer_norm_not_fused_with_a_constant_addend(cpu: str, tmp_path: Path) -> None:
    mk = helper.make_node
    nodes = [mk("Add", ["x", "c"], ["sum"]), mk("LayerNormalization", ["sum", "gamma"], ["y"])]
    model = _model(nodes, {"x": [2, 8]}, ["y"], [*LN_INITS, _init("c", _x(8))])
    assert _check(model, {"x": _x(2, 8)}, tmp_path) == ["Add", "LayerNormalization"]


def test_rms_norm_from_primitives(cpu: str, tmp_path: Path) -> None:
    mk = helper.make_node
    nodes = [mk("Mul", ["x", "x"], ["p"]), mk("ReduceMean", ["p"], ["v"], axes=[-1]),
             mk("Add", ["v", "eps"], ["ve"]), mk("Sqrt", ["ve"], ["s"]),
             mk("Reciprocal", ["s"], ["r"]), mk("Mul", ["x", "r"], ["n"]),
             mk("Mul", ["gamma", "n"], ["y"])]  # fmt: skip
    model = _model(nodes, {"x": [2, 3, 8]}, ["y"], LN_INITS)
    assert _check(model, {"x": _x(2, 3, 8)}, tmp_path) == ["com.ortcore:FusedRMSNorm"]


# -- attention ---------------------------------------------------------------


@pytest.mark.parametrize("scale_op", ["Div", "Mul", "both"])
@pytest.mark.parametrize("masked", [False, True])
def test_attention(cpu: str, tmp_path: Path, scale_op: str, masked: bool) -> None:
    mk = helper.make_node
    if scale_op == "both":
        nodes = [mk("Mul", ["q", "c"], ["qs"]), mk("Mul", ["kt", "c"], ["ks"]),
                 mk("MatMul", ["qs", "ks"], ["s"])]  # fmt: skip
    else:
        nodes = [mk("MatMul", ["q", "kt"], ["s0"]), mk(scale_op, ["s0", "c"], ["s"])]
    src = "s"
    if masked:
        nodes.append(mk("Add", ["s", "mask"], ["sm"]))
        src = "sm"
    nodes += [mk("Softmax", [src], ["p"], axis=-1), mk("MatMul", ["p", "v"], ["y"])]
    shapes = {"q": [2, 3, 5, 4], "kt": [2, 3, 4, 6], "v": [2, 3, 6, 4], "mask": [2, 1, 1, 6]}
    if not masked:
        del shapes["mask"]
    model = _model(nodes, shapes, ["y"], [_init("c", 0.7)])
    feeds = {k: _x(*s) for k, s in shapes.items()}
    assert _check(model, feeds, tmp_path) == ["com.ortcore:FusedAttention"]


def test_attention_not_fused_when_softmax_is_read(cpu: str, tmp_path: Path) -> None:
    mk = helper.make_node
    nodes = [mk("MatMul", ["q", "kt"], ["s"]), mk("Softmax", ["s"], ["p"], axis=-1),
             mk("MatMul", ["p", "v"], ["y"])]  # fmt: skip
    shapes = {"q": [2, 5, 4], "kt": [2, 4, 6], "v": [2, 6, 4]}
    model = _model(nodes, shapes, ["y", "p"])
    feeds = {k: _x(*s) for k, s in shapes.items()}
    assert _check(model, feeds, tmp_path) == ["MatMul", "Softmax", "MatMul"]


def _head_split_attention(
    extra_reader: str | None = None, batch: int = 2
) -> tuple[bytes, dict[str, np.ndarray]]:
    """BERT's attention as torch exports it: Q, K, V (batch, seq, hidden)
    reshaped into heads and transposed, the result transposed back."""
    mk = helper.make_node
    nodes = [mk("Reshape", [n, "heads"], [f"{n}4"]) for n in ("q", "k", "v")]
    nodes += [
        mk("Transpose", ["q4"], ["qh"], perm=[0, 2, 1, 3]),
        mk("Transpose", ["k4"], ["kh"], perm=[0, 2, 3, 1]),
        mk("Transpose", ["v4"], ["vh"], perm=[0, 2, 1, 3]),
        mk("MatMul", ["qh", "kh"], ["s0"]),
        mk("Div", ["s0", "c"], ["s"]),
        mk("Add", ["s", "mask"], ["sm"]),
        mk("Softmax", ["sm"], ["p"], axis=-1),
        mk("MatMul", ["p", "vh"], ["o"]),
        mk("Transpose", ["o"], ["ot"], perm=[0, 2, 1, 3]),
        mk("Reshape", ["ot", "merged"], ["y"]),
    ]
    outputs = ["y"]
    if extra_reader is not None:
        nodes.append(mk("Neg", [extra_reader], ["z"]))
        outputs.append("z")
    shapes = {n: [batch, 5, 12] for n in ("q", "k", "v")}
    shapes["mask"] = [batch, 1, 1, 5]
    inits = [
        _init("c", 2.0),
        numpy_helper.from_array(np.array([batch, 5, 3, 4], np.int64), "heads"),
        numpy_helper.from_array(np.array([batch, 5, 12], np.int64), "merged"),
    ]
    feeds = {k: _x(*s) for k, s in shapes.items()}
    return _model(nodes, shapes, outputs, inits), feeds


def test_attention_folds_the_head_transposes(cpu: str, tmp_path: Path) -> None:
    """The four Transposes go into the fused node (its perm_* attributes);
    batch 2 makes the heads' views strided in both leading axes."""
    model, feeds = _head_split_attention()
    ops = _check(model, feeds, tmp_path)
    assert ops == ["Reshape", "Reshape", "Reshape", "com.ortcore:FusedAttention", "Reshape"]
    fused = next(
        n for n in onnx.load(tmp_path / f"opt{int(L.ORT_ENABLE_ALL)}.onnx").graph.node
        if n.op_type == "FusedAttention"
    )  # fmt: skip
    perms = {a.name: list(a.ints) for a in fused.attribute if a.name.startswith("perm")}
    assert perms == {"perm_q": [0, 2, 1, 3], "perm_kt": [0, 2, 3, 1], "perm_v": [0, 2, 1, 3],
                     "perm_out": [0, 2, 1, 3]}  # fmt: skip


def test_attention_keeps_a_transpose_read_elsewhere(cpu: str, tmp_path: Path) -> None:
    """K's Transpose has another reader (a cache output): it stays, and the
    fused node reads its output; the others are folded."""
    model, feeds = _head_split_attention(extra_reader="kh", batch=1)
    ops = _check(model, feeds, tmp_path)
    assert ops.count("Transpose") == 1 and "com.ortcore:FusedAttention" in ops


def test_attention_in_a_branch_keeps_an_outer_transpose(cpu: str, tmp_path: Path) -> None:
    """Q's Transpose is in the outer graph and read only by the attention in
    an If branch: the branch's attention is fused, the outer Transpose stays
    where it is (a pass never moves a node of another graph)."""
    mk = helper.make_node
    then = helper.make_graph(
        [mk("MatMul", ["qh", "kt"], ["s"]), mk("Softmax", ["s"], ["p"], axis=-1),
         mk("MatMul", ["p", "v"], ["o"])],
        "then", [], [helper.make_tensor_value_info("o", TensorProto.FLOAT, None)],
    )  # fmt: skip
    other = helper.make_graph(
        [mk("Identity", ["alt"], ["o2"])],
        "else", [], [helper.make_tensor_value_info("o2", TensorProto.FLOAT, None)],
    )  # fmt: skip
    nodes = [
        mk("Transpose", ["q4"], ["qh"], perm=[0, 2, 1, 3]),
        mk("If", ["c"], ["y"], then_branch=then, else_branch=other),
    ]
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info("c", TensorProto.BOOL, [])]
        + [helper.make_tensor_value_info(n, TensorProto.FLOAT, s)
           for n, s in {"q4": [1, 5, 2, 4], "kt": [1, 2, 4, 6], "v": [1, 2, 6, 4],
                        "alt": [1, 2, 5, 4]}.items()],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    feeds = {"c": np.array(True), "q4": _x(1, 5, 2, 4), "kt": _x(1, 2, 4, 6), "v": _x(1, 2, 6, 4),
             "alt": _x(1, 2, 5, 4)}  # fmt: skip
    assert _check(model.SerializeToString(), feeds, tmp_path) == ["Transpose", "If"]
    saved = onnx.load(tmp_path / f"opt{int(L.ORT_ENABLE_ALL)}.onnx")
    branch = next(a.g for a in saved.graph.node[1].attribute if a.name == "then_branch")
    assert [n.op_type for n in branch.node] == ["FusedAttention"]
    assert not [a for a in branch.node[0].attribute if a.name == "perm_q"]
