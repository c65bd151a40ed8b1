"""Models onnxruntime loads: ortcore is no stricter than its loader."""

from __future__ import annotations

from .conftest import Results, same

SNIPPETS = {
    "ir3_initializer_not_an_input": """
        import onnxruntime as ort
        w = helper.make_tensor("W", TensorProto.FLOAT, [3, 2], [1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
        model = graph_model([helper.make_node("Mul", ["X", "W"], ["Y"], name="mul_1")],
                            [fvi("X", [3, 2])], [fvi("Y", [3, 2])], [w], ir_version=3, opset=7)
        sess = ort.InferenceSession(save(model), providers=["CPUExecutionProvider"])
        x = np.arange(6, dtype=np.float32).reshape(3, 2)
        result = ([i.name for i in sess.get_inputs()],
                  [i.name for i in sess.get_overridable_initializers()],
                  sess.run(None, {"X": x})[0])
    """,
    "sparse_initializer": """
        import onnxruntime as ort
        values = numpy_helper.from_array(np.array([1.5, -2.0, 3.0], np.float32), "W")
        indices = numpy_helper.from_array(np.array([0, 4, 5], np.int64), "W_idx")
        sparse = helper.make_sparse_tensor(values, indices, [2, 3])
        graph = helper.make_graph([helper.make_node("Add", ["X", "W"], ["Y"])], "g",
                                  [fvi("X", [2, 3])], [fvi("Y", [2, 3])],
                                  sparse_initializer=[sparse])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        model.ir_version = 8
        sess = ort.InferenceSession(save(model), providers=["CPUExecutionProvider"])
        result = sess.run(None, {"X": np.ones((2, 3), np.float32)})[0]
    """,
    "constant_sparse_value": """
        import onnxruntime as ort
        values = numpy_helper.from_array(np.array([7.0, 8.0], np.float32), "C")
        indices = numpy_helper.from_array(np.array([[0, 1], [1, 2]], np.int64), "C_idx")
        const = helper.make_node("Constant", [], ["C"],
                                 sparse_value=helper.make_sparse_tensor(values, indices, [2, 3]))
        model = graph_model([const, helper.make_node("Mul", ["X", "C"], ["Y"])],
                            [fvi("X", [2, 3])], [fvi("Y", [2, 3])])
        sess = ort.InferenceSession(save(model), providers=["CPUExecutionProvider"])
        result = sess.run(None, {"X": np.full((2, 3), 2.0, np.float32)})[0]
    """,
    "symlinked_model_and_data": """
        # A model hub's cache: snapshots/<rev>/model.onnx and model.data are
        # symlinks into blobs/, under names the blobs do not have.
        import shutil
        import onnxruntime as ort
        w = numpy_helper.from_array(np.arange(600, dtype=np.float32).reshape(2, 300), "W")
        model = graph_model([helper.make_node("Add", ["X", "W"], ["Y"])],
                            [fvi("X", [2, 300])], [fvi("Y", [2, 300])], [w])
        os.makedirs("blobs"); os.makedirs("snapshots/rev")
        onnx.save(model, "staging.onnx", save_as_external_data=True, location="model.data",
                  size_threshold=0)
        shutil.move("staging.onnx", "blobs/1a2b"); shutil.move("model.data", "blobs/3c4d")
        os.symlink("../../blobs/1a2b", "snapshots/rev/model.onnx")
        os.symlink("../../blobs/3c4d", "snapshots/rev/model.data")
        sess = ort.InferenceSession("snapshots/rev/model.onnx", providers=["CPUExecutionProvider"])
        result = sess.run(None, {"X": np.ones((2, 300), np.float32)})[0]
    """,
}


def test_ir3_model_whose_initializer_is_not_an_input_loads(results: Results) -> None:
    inputs, overridable, _ = results.ok("ir3_initializer_not_an_input")
    assert inputs == ["X"] and overridable == []
    same(
        results.ours["ir3_initializer_not_an_input"],
        results.theirs("ir3_initializer_not_an_input"),
    )


def test_sparse_initializer_is_made_dense(results: Results) -> None:
    got = results.ok("sparse_initializer")
    assert got.tolist() == [[2.5, 1.0, 1.0], [1.0, -1.0, 4.0]]
    same(results.ours["sparse_initializer"], results.theirs("sparse_initializer"))


def test_constant_sparse_value_is_made_dense(results: Results) -> None:
    assert results.ok("constant_sparse_value").tolist() == [[0, 14, 0], [0, 0, 16]]
    same(results.ours["constant_sparse_value"], results.theirs("constant_sparse_value"))


def test_external_data_beside_a_symlinked_model(results: Results) -> None:
    got = results.ok("symlinked_model_and_data")
    assert got[0, 0] == 1.0 and got[1, 299] == 600.0
    same(results.ours["symlinked_model_and_data"], results.theirs("symlinked_model_and_data"))


def test_symlinked_model_still_cannot_reach_outside(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Through a symlinked model, external data may lie in the symlink's folder
    or the real model's folder, nowhere else."""
    import os

    import numpy as np
    import onnx
    import pytest
    from onnx import TensorProto, helper, numpy_helper

    import ortcore

    w = numpy_helper.from_array(np.ones((2, 300), np.float32), "W")
    graph = helper.make_graph(
        [helper.make_node("Add", ["X", "W"], ["Y"])],
        "g",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [2, 300])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [2, 300])],
        [w],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    for d in ("blobs", "snap", "elsewhere"):
        (tmp_path / d).mkdir()
    onnx.save(model, tmp_path / "blobs" / "m", save_as_external_data=True, location="w.bin")
    os.replace(tmp_path / "blobs" / "w.bin", tmp_path / "elsewhere" / "w.bin")
    os.symlink(tmp_path / "blobs" / "m", tmp_path / "snap" / "model.onnx")
    os.symlink(tmp_path / "elsewhere" / "w.bin", tmp_path / "snap" / "w.bin")
    with pytest.raises(ortcore.InvalidArgument, match="escapes"):
        ortcore.InferenceSession(str(tmp_path / "snap" / "model.onnx"), providers=["cpu"])
