"""Sparse tensors as onnxruntime runs them: a sparse graph input fed to
com.microsoft SparseToDenseMatMul (COO and CSR), a sparse initializer that is
a graph output coming back as a COO sparse tensor, and a ``Constant`` with
``sparse_value``."""

from __future__ import annotations

import numpy as np

from .conftest import Results, same

_SPMM = """
        import onnxruntime as ort
        node = helper.make_node("SparseToDenseMatMul", ["sparse_A", "dense_B"], ["dense_Y"],
                                domain="com.microsoft")
        graph = helper.make_graph(
            [node], "g",
            [helper.make_sparse_tensor_value_info("sparse_A", TensorProto.FLOAT, [9, 9]),
             fvi("dense_B", [9, 9])],
            [fvi("dense_Y", [9, 9])])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                        helper.make_opsetid("com.microsoft", 1)])
        model.ir_version = 8
        sess = ort.InferenceSession(save(model), providers=["CPUExecutionProvider"])
        rng = np.random.default_rng(0)
        a = ((rng.random((9, 9)) < 0.4) * np.arange(1, 82).reshape(9, 9)).astype(np.float32)
        b = rng.integers(0, 50, (9, 9)).astype(np.float32)
        cpu = ort.OrtDevice.make("cpu", 0)
"""

_SPARSE_OUT = """
        import onnxruntime as ort
        values = helper.make_tensor("values", TensorProto.FLOAT, [3], [1.75, 0.5, 0.25])
        indices = helper.make_tensor("indices", TensorProto.INT64, [3], [2, 3, 5])
        sparse = helper.make_sparse_tensor(values, indices, [3, 3])
        out = helper.make_sparse_tensor_value_info("values", TensorProto.FLOAT, [3, 3])
        graph = helper.make_graph([], "g", [], [out], sparse_initializer=[sparse])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        model.ir_version = 8
        sess = ort.InferenceSession(save(model), providers=["CPUExecutionProvider"])
"""

SNIPPETS = {
    "spmm_coo": _SPMM
    + """
        idx = np.ascontiguousarray(np.argwhere(a).astype(np.int64))
        st = ort.SparseTensor.sparse_coo_from_numpy([9, 9], a[a != 0], idx, cpu)
        res = sess.run_with_ort_values(
            ["dense_Y"], {"sparse_A": ort.OrtValue.ort_value_from_sparse_tensor(st),
                          "dense_B": ort.OrtValue.ortvalue_from_numpy(b)})
        y = res[0]
        result = (len(res), y.is_tensor(), y.data_type(), y.shape(), y.numpy(),
                  [(i.name, i.type, i.shape) for i in sess.get_inputs()])
    """,
    "spmm_csr_run": _SPMM
    + """
        inner = np.ascontiguousarray(np.nonzero(a)[1].astype(np.int64))
        outer = np.concatenate([[0], np.cumsum((a != 0).sum(axis=1))]).astype(np.int64)
        st = ort.SparseTensor.sparse_csr_from_numpy([9, 9], a[a != 0], inner, outer, cpu)
        result = sess.run(None, {"sparse_A": ort.OrtValue.ort_value_from_sparse_tensor(st),
                                 "dense_B": b})[0]
    """,
    "spmm_dense_fed": _SPMM + "        sess.run(None, {'sparse_A': a, 'dense_B': b})\n",
    "sparse_output": _SPARSE_OUT
    + """
        res = sess.run_with_ort_values(["values"], {})
        v = res[0]
        sp = v.as_sparse_tensor()
        result = (len(res), isinstance(v, ort.OrtValue), v.is_sparse_tensor(), v.data_type(),
                  sp.dense_shape(), sp.values(), sp.as_coo_view().indices(), int(sp.format()))
    """,
    "sparse_output_run": _SPARSE_OUT
    + """
        sp = sess.run(None, {})[0]
        result = (sp.dense_shape(), sp.values(), sp.as_coo_view().indices())
    """,
    "sparse_constant": """
        import onnxruntime as ort
        values = helper.make_tensor("v", TensorProto.FLOAT, [2], [4.0, -2.0])
        indices = helper.make_tensor("i", TensorProto.INT64, [2, 2], [0, 1, 1, 2])
        node = helper.make_node("Constant", [], ["c"],
                                sparse_value=helper.make_sparse_tensor(values, indices, [2, 3]))
        add = helper.make_node("Add", ["c", "x"], ["y"])
        m = graph_model([node, add], [fvi("x", [2, 3])], [fvi("y", [2, 3])])
        sess = ort.InferenceSession(save(m), providers=["CPUExecutionProvider"])
        result = sess.run(None, {"x": np.ones((2, 3), np.float32)})[0]
    """,
}


def test_sparse_input_matmul(results: Results) -> None:
    n, is_tensor, dtype, shape, y, inputs = results.ok("spmm_coo")
    assert (n, is_tensor, dtype, shape) == (1, True, "tensor(float)", [9, 9])
    assert inputs[0] == ("sparse_A", "sparse_tensor(float)", [9, 9])
    rng = np.random.default_rng(0)
    a = ((rng.random((9, 9)) < 0.4) * np.arange(1, 82).reshape(9, 9)).astype(np.float32)
    b = rng.integers(0, 50, (9, 9)).astype(np.float32)
    np.testing.assert_array_equal(y, a @ b)
    np.testing.assert_array_equal(results.ok("spmm_csr_run"), a @ b)
    same(results.ours["spmm_coo"], results.theirs("spmm_coo"))
    same(results.ours["spmm_csr_run"], results.theirs("spmm_csr_run"))


def test_dense_feed_for_sparse_input(results: Results) -> None:
    _, msg, catchers = results.raised("spmm_dense_fed")
    assert "sparse_A" in msg and "sparse_tensor" in msg and "ValueError" in catchers
    same(results.ours["spmm_dense_fed"], results.theirs("spmm_dense_fed"))


def test_sparse_initializer_output(results: Results) -> None:
    n, is_ortvalue, is_sparse, dtype, shape, values, indices, fmt = results.ok("sparse_output")
    assert (n, is_ortvalue, is_sparse, dtype, shape, fmt) == (
        1,
        True,
        True,
        "sparse_tensor(float)",
        [3, 3],
        1,
    )
    np.testing.assert_array_equal(values, np.array([1.75, 0.5, 0.25], np.float32))
    np.testing.assert_array_equal(indices, [2, 3, 5])
    same(results.ours["sparse_output"], results.theirs("sparse_output"))
    shape, values, indices = results.ok("sparse_output_run")
    assert shape == [3, 3]
    np.testing.assert_array_equal(indices, [2, 3, 5])


def test_sparse_constant(results: Results) -> None:
    want = np.ones((2, 3), np.float32)
    want[0, 1] += 4
    want[1, 2] -= 2
    np.testing.assert_array_equal(results.ok("sparse_constant"), want)
    same(results.ours["sparse_constant"], results.theirs("sparse_constant"))
