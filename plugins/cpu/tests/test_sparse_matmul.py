"""com.microsoft SparseToDenseMatMul on the CPU provider: a sparse input (COO
coordinates, COO linear indices, CSR) times a dense matrix, against numpy on
the dense A and against onnxruntime where it is installed; sparse feeds'
checks (dense given, wrong type, wrong shape)."""

from __future__ import annotations

from typing import Any

import numpy as np
import ortcore
import pytest
from onnx import TensorProto, helper

_ELEM = {
    np.float32: TensorProto.FLOAT,
    np.float64: TensorProto.DOUBLE,
    np.int32: TensorProto.INT32,
    np.int64: TensorProto.INT64,
    np.uint32: TensorProto.UINT32,
    np.uint64: TensorProto.UINT64,
}


def _model(dtype: Any, a_shape: list[int], b_shape: list[int], **attrs: Any) -> bytes:
    elem = _ELEM[dtype]
    node = helper.make_node(
        "SparseToDenseMatMul", ["A", "B"], ["Y"], domain="com.microsoft", **attrs
    )
    graph = helper.make_graph(
        [node],
        "spmm",
        [
            helper.make_sparse_tensor_value_info("A", elem, a_shape),
            helper.make_tensor_value_info("B", elem, b_shape),
        ],
        [helper.make_tensor_value_info("Y", elem, None)],
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)],
    )
    model.ir_version = 8
    return model.SerializeToString()


def _sparse(rt: Any, dense: np.ndarray, fmt: str) -> Any:
    cpu = rt.OrtDevice.make("cpu", 0)
    values = np.ascontiguousarray(dense[dense != 0])
    if fmt == "coo":
        idx = np.ascontiguousarray(np.argwhere(dense).astype(np.int64))
        st = rt.SparseTensor.sparse_coo_from_numpy(list(dense.shape), values, idx, cpu)
    elif fmt == "coo_linear":
        idx = np.ascontiguousarray(np.flatnonzero(dense).astype(np.int64))
        st = rt.SparseTensor.sparse_coo_from_numpy(list(dense.shape), values, idx, cpu)
    else:
        inner = np.ascontiguousarray(np.nonzero(dense)[1].astype(np.int64))
        outer = np.concatenate([[0], np.cumsum((dense != 0).sum(axis=1))]).astype(np.int64)
        st = rt.SparseTensor.sparse_csr_from_numpy(list(dense.shape), values, inner, outer, cpu)
    return rt.OrtValue.ort_value_from_sparse_tensor(st)


def _random(rng: np.random.Generator, shape: tuple[int, int], dtype: Any) -> np.ndarray:
    mask = rng.random(shape) < 0.3
    if np.dtype(dtype).kind == "f":
        return (mask * rng.standard_normal(shape)).astype(dtype)
    return (mask * rng.integers(1, 9, shape)).astype(dtype)


def _run(rt: Any, model: bytes, a: np.ndarray, b: np.ndarray, fmt: str) -> np.ndarray:
    sess = rt.InferenceSession(model, providers=["CPUExecutionProvider"])
    feeds = {"A": _sparse(rt, a, fmt), "B": rt.OrtValue.ortvalue_from_numpy(b)}
    out = sess.run_with_ort_values(["Y"], feeds)[0]
    assert out.is_tensor()
    return np.asarray(out.numpy())


@pytest.mark.parametrize("fmt", ["coo", "coo_linear", "csr"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64, np.uint64])
def test_against_dense_matmul(fmt: str, dtype: Any) -> None:
    rng = np.random.default_rng(7)
    a = _random(rng, (7, 5), dtype)
    b = _random(rng, (5, 3), dtype) + np.ones((5, 3), dtype)
    y = _run(ortcore, _model(dtype, [7, 5], [5, 3]), a, b, fmt)
    assert y.dtype == np.dtype(dtype) and y.shape == (7, 3)
    np.testing.assert_allclose(y, a @ b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("trans_a", "trans_b"), [(0, 0), (1, 0), (0, 1), (1, 1)])
@pytest.mark.parametrize("alpha", [1.0, 2.5])
def test_transposes_and_alpha_as_onnxruntime(trans_a: int, trans_b: int, alpha: float) -> None:
    rng = np.random.default_rng(trans_a * 2 + trans_b)
    # square operands: onnxruntime's shape inference ignores transA/transB
    a, b = _random(rng, (6, 6), np.float32), rng.standard_normal((6, 6)).astype(np.float32)
    model = _model(np.float32, [6, 6], [6, 6], alpha=alpha, transA=trans_a, transB=trans_b)
    y = _run(ortcore, model, a, b, "coo")
    want = alpha * (a.T if trans_a else a) @ (b.T if trans_b else b)
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)
    ort = pytest.importorskip("onnxruntime")
    np.testing.assert_allclose(y, _run(ort, model, a, b, "coo"), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [np.float64, np.int64])
def test_alpha_only_scales_float32_as_in_onnxruntime(dtype: Any) -> None:
    rng = np.random.default_rng(3)
    a, b = _random(rng, (4, 4), dtype), _random(rng, (4, 4), dtype) + np.ones((4, 4), dtype)
    model = _model(dtype, [4, 4], [4, 4], alpha=2.0)
    y = _run(ortcore, model, a, b, "coo")
    np.testing.assert_allclose(y, a @ b, rtol=1e-12, atol=1e-12)  # not 2 * (a @ b)
    ort = pytest.importorskip("onnxruntime")
    np.testing.assert_allclose(y, _run(ort, model, a, b, "coo"), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("fmt", ["coo", "csr"])
def test_matches_onnxruntime(fmt: str) -> None:
    ort = pytest.importorskip("onnxruntime")
    rng = np.random.default_rng(11)
    a, b = _random(rng, (9, 9), np.float32), rng.standard_normal((9, 9)).astype(np.float32)
    model = _model(np.float32, [9, 9], [9, 9])
    np.testing.assert_allclose(
        _run(ortcore, model, a, b, fmt), _run(ort, model, a, b, fmt), rtol=1e-5, atol=1e-5
    )


def test_empty_and_all_zero_rows() -> None:
    a = np.zeros((3, 4), np.float32)
    a[1, 2] = 5
    b = np.arange(8, dtype=np.float32).reshape(4, 2)
    y = _run(ortcore, _model(np.float32, [3, 4], [4, 2]), a, b, "csr")
    np.testing.assert_array_equal(y, a @ b)
    zero = _run(ortcore, _model(np.float32, [3, 4], [4, 2]), np.zeros((3, 4), np.float32), b, "coo")
    np.testing.assert_array_equal(zero, np.zeros((3, 2), np.float32))


def test_sparse_feed_checks() -> None:
    sess = ortcore.InferenceSession(
        _model(np.float32, [3, 4], [4, 2]), providers=["CPUExecutionProvider"]
    )
    assert [(i.name, i.type) for i in sess.get_inputs()] == [
        ("A", "sparse_tensor(float)"),
        ("B", "tensor(float)"),
    ]
    b = np.ones((4, 2), np.float32)
    with pytest.raises(ortcore.InvalidArgument, match="'A' expected to be of type: sparse_tensor"):
        sess.run(None, {"A": np.ones((3, 4), np.float32), "B": b})
    wrong_type = _sparse(ortcore, np.eye(3, 4, dtype=np.float64), "coo")
    with pytest.raises(ortcore.InvalidArgument, match=r"sparse_tensor\(double\).*'A'"):
        sess.run(None, {"A": wrong_type, "B": b})
    wrong_shape = _sparse(ortcore, np.eye(5, 4, dtype=np.float32), "coo")
    with pytest.raises(ortcore.InvalidArgument, match="invalid dimensions for input: A"):
        sess.run(None, {"A": wrong_shape, "B": b})
    # run() takes the OrtValue, and the SparseTensor itself
    a = np.eye(3, 4, dtype=np.float32)
    value = _sparse(ortcore, a, "coo")
    np.testing.assert_array_equal(sess.run(None, {"A": value, "B": b})[0], a @ b)
    np.testing.assert_array_equal(sess.run(None, {"A": value.as_sparse_tensor(), "B": b})[0], a @ b)


def test_inner_dimension_mismatch_names_the_node() -> None:
    # B's declared shape is free, so the mismatch is found when the kernel runs
    sess = ortcore.InferenceSession(
        _model(np.float32, [3, 4], ["k", 2]), providers=["CPUExecutionProvider"]
    )
    a = _sparse(ortcore, np.eye(3, 4, dtype=np.float32), "coo")
    with pytest.raises(ortcore.RuntimeException, match="inner dimensions"):
        sess.run(None, {"A": a, "B": np.ones((5, 2), np.float32)})
