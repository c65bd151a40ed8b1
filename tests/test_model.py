"""Model loading: paths, bytes, functions, subgraphs, external data, bad input."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from onnx import TensorProto, helper, numpy_helper

import ortcore
from ortcore.model import load_model

from .conftest import chain_model, chain_reference, fvi, make_model, no_fallback

X = np.array([[1.0, -2.0, 3.0], [-4.0, 5.0, -6.0]], np.float32)


def _run_mini(model, feeds, **kw):
    sess = ortcore.InferenceSession(model, no_fallback(), providers=["mini"], **kw)
    return sess.run(None, feeds)


# -- path and bytes -----------------------------------------------------------


def test_load_from_path_and_bytes_agree(tmp_path: Path) -> None:
    data = chain_model(["Add", "Relu", "Mul"])
    path = tmp_path / "m.onnx"
    path.write_bytes(data)
    want = chain_reference(["Add", "Relu", "Mul"], X)
    (from_bytes,) = _run_mini(data, {"x": X})
    (from_path,) = _run_mini(str(path), {"x": X})
    (from_pathlike,) = _run_mini(path, {"x": X})
    np.testing.assert_allclose(from_bytes, want)
    np.testing.assert_allclose(from_path, want)
    np.testing.assert_allclose(from_pathlike, want)


def test_load_model_returns_ir_model() -> None:
    model = load_model(chain_model(["Neg"]))
    assert isinstance(model, ir.Model)
    assert [n.op_type for n in model.graph] == ["Neg"]
    assert model.graph.outputs[0].name == "y"


def test_model_of_wrong_type_is_invalid_argument() -> None:
    with pytest.raises(ortcore.InvalidArgument, match="path or bytes"):
        load_model(12345)  # type: ignore[arg-type]


# -- model-local functions ------------------------------------------------------


def _function_model() -> bytes:
    # AddRelu(a, b) = Relu(Add(a, b)), a model-local function in domain "local".
    fn = helper.make_function(
        "local",
        "AddRelu",
        ["a", "b"],
        ["c"],
        [
            helper.make_node("Add", ["a", "b"], ["s"]),
            helper.make_node("Relu", ["s"], ["c"]),
        ],
        opset_imports=[helper.make_opsetid("", 17)],
    )
    graph = helper.make_graph(
        [
            helper.make_node("AddRelu", ["x", "x"], ["t"], domain="local", name="f1"),
            helper.make_node("Neg", ["t"], ["y"], name="neg"),
        ],
        "g",
        [fvi("x", [2, 3])],
        [fvi("y", [2, 3])],
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("local", 1)],
        functions=[fn],
        ir_version=8,
    )
    return model.SerializeToString()


def test_local_functions_are_inlined() -> None:
    model = load_model(_function_model())
    ops = [n.op_type for n in model.graph]
    assert "AddRelu" not in ops
    assert sorted(ops) == ["Add", "Neg", "Relu"]


def test_local_function_model_runs_on_mini() -> None:
    (y,) = _run_mini(_function_model(), {"x": X})
    np.testing.assert_allclose(y, -np.maximum(X + X, 0))


# -- subgraphs -------------------------------------------------------------------


def if_model(then_reads: str = "a", else_reads: str = "b") -> bytes:
    """cond ? then_reads + x : else_reads - x, where a = x + x and b = -x (outer scope)."""
    then_g = helper.make_graph(
        [helper.make_node("Add", [then_reads, "x"], ["then_out"], name="then_add")],
        "then_g",
        [],
        [fvi("then_out", [2, 3])],
    )
    else_g = helper.make_graph(
        [helper.make_node("Sub", [else_reads, "x"], ["else_out"], name="else_sub")],
        "else_g",
        [],
        [fvi("else_out", [2, 3])],
    )
    nodes = [
        helper.make_node("Add", ["x", "x"], ["a"], name="make_a"),
        helper.make_node("Neg", ["x"], ["b"], name="make_b"),
        helper.make_node(
            "If", ["cond"], ["y"], name="the_if", then_branch=then_g, else_branch=else_g
        ),
    ]
    return make_model(
        nodes, [fvi("cond", [], TensorProto.BOOL), fvi("x", [2, 3])], [fvi("y", [2, 3])]
    )


def test_if_subgraphs_are_kept_as_graph_attributes() -> None:
    model = load_model(if_model())
    (node,) = [n for n in model.graph if n.op_type == "If"]
    then_g = node.attributes["then_branch"].value
    else_g = node.attributes["else_branch"].value
    assert isinstance(then_g, ir.Graph)
    assert isinstance(else_g, ir.Graph)
    assert [n.op_type for n in then_g] == ["Add"]
    assert [n.op_type for n in else_g] == ["Sub"]


def test_loop_body_is_kept() -> None:
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["cond_in"], ["cond_out"]),
            helper.make_node("Add", ["acc_in", "x"], ["acc_out"]),
        ],
        "body",
        [
            fvi("i", [], TensorProto.INT64),
            fvi("cond_in", [], TensorProto.BOOL),
            fvi("acc_in", [2, 3]),
        ],
        [fvi("cond_out", [], TensorProto.BOOL), fvi("acc_out", [2, 3])],
    )
    nodes = [helper.make_node("Loop", ["n", "", "x"], ["y"], body=body, name="loop")]
    data = make_model(
        nodes, [fvi("n", [], TensorProto.INT64), fvi("x", [2, 3])], [fvi("y", [2, 3])]
    )
    model = load_model(data)
    (loop,) = list(model.graph)
    body_g = loop.attributes["body"].value
    assert isinstance(body_g, ir.Graph)
    assert sorted(n.op_type for n in body_g) == ["Add", "Identity"]


# -- save back -------------------------------------------------------------------------


def test_optimized_model_filepath_writes_loadable_model(tmp_path: Path) -> None:
    ops = ["Add", "Relu", "Mul", "Neg"]
    out = tmp_path / "optimized.onnx"
    so = no_fallback()
    so.optimized_model_filepath = str(out)
    sess = ortcore.InferenceSession(chain_model(ops), so, providers=["mini"])
    (want,) = sess.run(None, {"x": X})
    assert out.is_file() and out.stat().st_size > 0
    onnx.checker.check_model(onnx.load(str(out)))
    (again,) = _run_mini(str(out), {"x": X})
    np.testing.assert_allclose(again, want)
    np.testing.assert_allclose(again, chain_reference(ops, X))


# -- external data -------------------------------------------------------------------


def _weight_model() -> onnx.ModelProto:
    w = np.arange(6, dtype=np.float32).reshape(2, 3)
    return onnx.load_from_string(
        make_model(
            [helper.make_node("Add", ["x", "w"], ["y"], name="add_w")],
            [fvi("x", [2, 3])],
            [fvi("y", [2, 3])],
            initializers=[numpy_helper.from_array(w, "w")],
        )
    )


def _point_external(model: onnx.ModelProto, location: str) -> onnx.ModelProto:
    """Mark initializer ``w`` as stored at ``location``."""
    t = model.graph.initializer[0]
    raw = numpy_helper.to_array(t).tobytes()
    t.ClearField("raw_data")
    t.ClearField("float_data")
    t.data_location = TensorProto.EXTERNAL
    del t.external_data[:]
    for k, v in (("location", location), ("offset", "0"), ("length", str(len(raw)))):
        entry = t.external_data.add()
        entry.key, entry.value = k, v
    return model


def test_external_data_inside_the_folder_loads(tmp_path: Path) -> None:
    model = _weight_model()
    path = tmp_path / "m.onnx"
    onnx.save_model(
        model, str(path), save_as_external_data=True, location="w.bin", size_threshold=0
    )
    assert (tmp_path / "w.bin").is_file()
    (y,) = _run_mini(str(path), {"x": X})
    np.testing.assert_allclose(y, X + np.arange(6, dtype=np.float32).reshape(2, 3))


def test_external_data_in_a_subfolder_loads(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    w = np.arange(6, dtype=np.float32).reshape(2, 3)
    (tmp_path / "data" / "w.bin").write_bytes(w.tobytes())
    model = _point_external(_weight_model(), "data/w.bin")
    path = tmp_path / "m.onnx"
    path.write_bytes(model.SerializeToString())
    (y,) = _run_mini(str(path), {"x": X})
    np.testing.assert_allclose(y, X + w)


def test_external_data_escaping_the_folder_is_refused(tmp_path: Path) -> None:
    w = np.arange(6, dtype=np.float32).reshape(2, 3)
    (tmp_path / "x.bin").write_bytes(w.tobytes())
    sub = tmp_path / "model"
    sub.mkdir()
    path = sub / "m.onnx"
    path.write_bytes(_point_external(_weight_model(), "../x.bin").SerializeToString())
    with pytest.raises(ortcore.InvalidArgument, match=r"\.\./x\.bin"):
        ortcore.InferenceSession(str(path), providers=["mini"])


def test_external_data_absolute_path_is_refused(tmp_path: Path) -> None:
    w = np.arange(6, dtype=np.float32).reshape(2, 3)
    target = tmp_path / "abs.bin"
    target.write_bytes(w.tobytes())
    path = tmp_path / "m.onnx"
    path.write_bytes(_point_external(_weight_model(), str(target)).SerializeToString())
    with pytest.raises(ortcore.InvalidArgument, match="absolute") as info:
        ortcore.InferenceSession(str(path), providers=["mini"])
    assert str(target) in str(info.value)


def test_external_data_symlink_escaping_the_folder_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    w = np.arange(6, dtype=np.float32).reshape(2, 3)
    (outside / "w.bin").write_bytes(w.tobytes())
    folder = tmp_path / "model"
    folder.mkdir()
    try:
        os.symlink(outside / "w.bin", folder / "w.bin")
    except OSError:
        pytest.skip("symlinks not supported")
    path = folder / "m.onnx"
    path.write_bytes(_point_external(_weight_model(), "w.bin").SerializeToString())
    with pytest.raises(ortcore.InvalidArgument, match=r"w.bin"):
        ortcore.InferenceSession(str(path), providers=["mini"])


def test_external_data_with_bytes_model_is_refused() -> None:
    data = _point_external(_weight_model(), "w.bin").SerializeToString()
    with pytest.raises(ortcore.InvalidArgument, match=r"w.bin"):
        ortcore.InferenceSession(data, providers=["mini"])


def test_missing_external_data_file_is_no_such_file(tmp_path: Path) -> None:
    path = tmp_path / "m.onnx"
    path.write_bytes(_point_external(_weight_model(), "gone.bin").SerializeToString())
    with pytest.raises(ortcore.NoSuchFile, match=r"gone.bin"):
        ortcore.InferenceSession(str(path), providers=["mini"])


# -- bad files -----------------------------------------------------------------------


def test_missing_file_is_no_such_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.onnx"
    with pytest.raises(ortcore.NoSuchFile) as info:
        ortcore.InferenceSession(str(missing), providers=["mini"])
    assert isinstance(info.value, FileNotFoundError)
    assert "nope.onnx" in str(info.value)


def test_directory_is_no_such_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        ortcore.InferenceSession(str(tmp_path), providers=["mini"])


@pytest.mark.parametrize(
    "data",
    [
        b"this is not an onnx model \xff\xff\xff",
        chain_model(["Add", "Relu"])[:-7],
        chain_model(["Add", "Relu"])[:20],
    ],
    ids=["garbage", "truncated-end", "truncated-head"],
)
def test_malformed_bytes_are_invalid_protobuf(data: bytes) -> None:
    with pytest.raises(ortcore.InvalidProtobuf) as info:
        ortcore.InferenceSession(data, providers=["mini"])
    assert isinstance(info.value, ValueError)


def test_malformed_file_is_invalid_protobuf_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "bad.onnx"
    path.write_bytes(b"\x08\x07\x12\xff\xff\xff\xff\xff\xff")
    with pytest.raises(ortcore.InvalidProtobuf, match=r"bad.onnx"):
        ortcore.InferenceSession(str(path), providers=["mini"])


def test_empty_file_is_invalid_protobuf(tmp_path: Path) -> None:
    path = tmp_path / "empty.onnx"
    path.write_bytes(b"")
    with pytest.raises(ortcore.InvalidProtobuf, match="empty"):
        ortcore.InferenceSession(str(path), providers=["mini"])
    with pytest.raises(ortcore.InvalidProtobuf):
        ortcore.InferenceSession(b"", providers=["mini"])


def test_model_without_graph_is_invalid_protobuf() -> None:
    data = onnx.ModelProto(ir_version=8).SerializeToString()
    with pytest.raises(ortcore.InvalidProtobuf, match="graph"):
        ortcore.InferenceSession(data, providers=["mini"])


# -- graph order ------------------------------------------------------------------------


def test_cyclic_graph_is_invalid_graph() -> None:
    nodes = [
        helper.make_node("Add", ["x", "t2"], ["t1"], name="A"),
        helper.make_node("Relu", ["t1"], ["t2"], name="B"),
        helper.make_node("Neg", ["t1"], ["y"], name="C"),
    ]
    data = make_model(nodes, [fvi("x", [2, 3])], [fvi("y", [2, 3])])
    with pytest.raises(ortcore.InvalidGraph, match=r"acyclic|cycle") as info:
        ortcore.InferenceSession(data, providers=["mini"])
    assert "'A'" in str(info.value) and "'B'" in str(info.value)


def test_unsorted_acyclic_graph_loads_and_runs() -> None:
    nodes = [
        helper.make_node("Mul", ["t1", "x"], ["y"], name="third"),
        helper.make_node("Relu", ["t0"], ["t1"], name="second"),
        helper.make_node("Add", ["x", "x"], ["t0"], name="first"),
    ]
    data = make_model(nodes, [fvi("x", [2, 3])], [fvi("y", [2, 3])])
    model = load_model(data)
    assert [n.name for n in model.graph] == ["first", "second", "third"]
    (y,) = _run_mini(data, {"x": X})
    np.testing.assert_allclose(y, np.maximum(X + X, 0) * X)


def test_invalid_model_is_invalid_graph() -> None:
    # A node reads a value nobody produces.
    nodes = [helper.make_node("Add", ["x", "ghost"], ["y"], name="add")]
    data = make_model(nodes, [fvi("x", [2, 3])], [fvi("y", [2, 3])])
    with pytest.raises(ortcore.InvalidGraph):
        ortcore.InferenceSession(data, providers=["mini"])


def test_outputs_of_unknown_rank_are_accepted() -> None:
    """``make_tensor_value_info(name, type, None)`` is valid for onnxruntime, so for us too."""
    from onnx import helper

    from ortcore.model import load_model

    node = helper.make_node("Relu", ["x"], ["y"])
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", 1, None)],
        [helper.make_tensor_value_info("y", 1, None)],
    )
    model = load_model(helper.make_model(graph).SerializeToString())
    assert model.graph.outputs[0].name == "y"
    assert model.graph.inputs[0].shape is None
