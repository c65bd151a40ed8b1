"""The losses, scans and selections (:mod:`ortcore_cuda.kernels.losses`,
:mod:`ortcore_cuda.ops_losses`): each kernel's own source under the CPU
emulation against numpy, then the ops end to end on the emulated provider."""

from __future__ import annotations

from typing import Any

import numpy as np
import ortcore
import pytest
from onnx import TensorProto, helper, numpy_helper

from ortcore_cuda.emulator import Emulator, compiler
from ortcore_cuda.kernels import losses

NP = {
    "f32": np.float32,
    "f16": np.float16,
    "f64": np.float64,
    "i32": np.int32,
    "i64": np.int64,
    "u64": np.uint64,
}
TOL: dict[str, dict[str, Any]] = {
    "f32": dict(rtol=1e-5, atol=1e-5),
    "f16": dict(rtol=3e-3, atol=3e-3),
}
TOL["f64"] = TOL["f32"]


@pytest.fixture(scope="module")
def emu(tmp_path_factory: pytest.TempPathFactory) -> Emulator:
    if compiler() is None:
        pytest.skip("no C++ compiler for the emulation")
    return Emulator(losses.all_kernels(), tmp_path_factory.mktemp("emu_losses"))


def _log_softmax(x: np.ndarray) -> np.ndarray:
    z = x.astype(np.float64) - x.astype(np.float64).max(axis=1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=1, keepdims=True))


def _nll_ref(
    logp: np.ndarray,
    target: np.ndarray,
    weight: np.ndarray | None,
    reduction: str,
    ignore: int | None,
) -> np.ndarray:
    """PyTorch's (and the ONNX spec's) negative log likelihood, in float64."""
    n, c = logp.shape[:2]
    x = logp.astype(np.float64).reshape(n, c, -1)
    t = target.reshape(n, -1)
    keep = np.ones(t.shape, bool) if ignore is None else t != ignore
    safe = np.where(keep, t, 0)
    picked = np.take_along_axis(x, safe[:, None, :], axis=1)[:, 0, :]
    w = np.where(keep, 1.0 if weight is None else weight.astype(np.float64)[safe], 0.0)
    loss = -picked * w
    if reduction == "none":
        return loss.reshape(target.shape)
    if reduction == "sum":
        return np.array(loss.sum())
    return np.array(loss.sum() / w.sum())


# -- kernels ----------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["f32", "f16"])
@pytest.mark.parametrize("shape", [(3, 5, 1), (2, 7, 3), (1, 1, 4), (2, 300, 3)], ids=str)
def test_log_softmax_along_axis_1(emu: Emulator, shape: tuple[int, int, int], dtype: str) -> None:
    n, c, d = shape
    x = (np.random.default_rng(c).standard_normal(shape) * 3).astype(NP[dtype])
    want = _log_softmax(x).astype(NP[dtype])
    y = np.empty_like(x)
    emu.launch(f"log_softmax_axis_{dtype}", 2, 32, x, y, n * d, c, d)
    np.testing.assert_allclose(y, want, **TOL[dtype])
    for threads in (32, 128):  # one block a line, any power-of-two block, fewer blocks than lines
        y = np.empty_like(x)
        emu.launch(f"log_softmax_lines_{dtype}", 2, threads, x, y, n * d, c, d)
        np.testing.assert_allclose(y, want, **TOL[dtype])


def test_log_softmax_propagates_nan(emu: Emulator) -> None:
    x = np.array([[[1.0], [np.nan], [2.0]], [[1.0], [2.0], [3.0]]], np.float32)
    y = np.empty_like(x)
    emu.launch("log_softmax_axis_f32", 1, 32, x, y, 2, 3, 1)
    assert np.isnan(y[0]).all() and not np.isnan(y[1]).any()


@pytest.mark.parametrize("dtype", ["f32", "f16"])
@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("ignore", [None, 2, -1])
def test_nll_and_its_reduction(
    emu: Emulator, dtype: str, reduction: str, weighted: bool, ignore: int | None
) -> None:
    rng = np.random.default_rng(7)
    n, c, d = 3, 5, 7
    logp = _log_softmax(rng.standard_normal((n, c, d))).astype(NP[dtype])
    target = rng.integers(0, c, (n, d)).astype(np.int64)
    if ignore is not None:
        target[0, :3] = ignore
    weight = rng.uniform(0.5, 2.0, c).astype(NP[dtype]) if weighted else None
    want = _nll_ref(logp, target, weight, reduction, ignore)
    w_arg: Any = weight if weight is not None else 0
    ii, has = (ignore, 1) if ignore is not None else (0, 0)
    if reduction == "none":
        y = np.empty((n, d), NP[dtype])
        emu.launch(f"nll_{dtype}", 2, 32, logp, target, w_arg, y, 0, 0, n * d, c, d, ii, has, 0)
    else:
        loss = np.empty(n * d, np.float32)
        wsum = np.empty(n * d, np.float32)
        emu.launch(
            f"nll_{dtype}", 2, 32, logp, target, w_arg, 0, loss, wsum, n * d, c, d, ii, has, 1
        )
        y = np.empty((), NP[dtype])
        emu.launch(f"loss_reduce_{dtype}", 1, 64, loss, wsum, y, n * d, int(reduction == "mean"))
    np.testing.assert_allclose(y, want.astype(NP[dtype]), **TOL[dtype])


def test_a_target_out_of_range_gives_nan(emu: Emulator) -> None:
    logp = np.zeros((2, 3, 1), np.float32)
    target = np.array([[1], [7]], np.int64)
    y = np.empty((2, 1), np.float32)
    emu.launch("nll_f32", 1, 32, logp, target, 0, y, 0, 0, 2, 3, 1, 0, 0, 0)
    assert y[0, 0] == 0 and np.isnan(y[1, 0])


@pytest.mark.parametrize("threads", [1, 32, 256])
def test_loss_reduce_is_one_block_of_any_size(emu: Emulator, threads: int) -> None:
    rng = np.random.default_rng(3)
    loss = rng.standard_normal(1001).astype(np.float32)
    wsum = rng.uniform(0, 1, 1001).astype(np.float32)
    y = np.empty((), np.float32)
    emu.launch("loss_reduce_f32", 1, threads, loss, wsum, y, 1001, 1)
    want = loss.astype(np.float64).sum() / wsum.astype(np.float64).sum()
    np.testing.assert_allclose(y, want, rtol=1e-5)
    emu.launch("loss_reduce_f32", 1, threads, loss, wsum, y, 0, 0)  # nothing to sum
    assert y == 0


def _scan_ref(x: np.ndarray, axis: int, op: str, exclusive: bool, reverse: bool) -> np.ndarray:
    v = np.flip(x, axis) if reverse else x
    acc = np.cumsum(v, axis=axis, dtype=x.dtype) if op == "sum" else np.cumprod(v, axis, x.dtype)
    if exclusive:
        first = np.full_like(np.take(acc, [0], axis=axis), 0 if op == "sum" else 1)
        acc = np.concatenate([first, np.delete(acc, -1, axis=axis)], axis=axis)
    return np.flip(acc, axis) if reverse else acc


@pytest.mark.parametrize("dtype", losses.SCAN_TYPES)
@pytest.mark.parametrize("op", ["sum", "prod"])
@pytest.mark.parametrize("flags", [(0, 0), (1, 0), (0, 1), (1, 1)])
def test_scans(emu: Emulator, dtype: str, op: str, flags: tuple[int, int]) -> None:
    rng = np.random.default_rng(5)
    shape = (3, 5, 4)
    if dtype.startswith("i"):
        x = rng.integers(-3, 4, shape).astype(NP[dtype])
    else:
        x = rng.uniform(0.5, 1.5, shape).astype(NP[dtype])
    exclusive, reverse = flags
    for axis in range(3):
        outer = int(np.prod(shape[:axis]))
        inner = int(np.prod(shape[axis + 1 :]))
        y = np.empty_like(x)
        emu.launch(
            f"cum{op}_{dtype}", 2, 32, x, y, outer * inner, shape[axis], inner, exclusive, reverse
        )
        want = _scan_ref(x, axis, op, bool(exclusive), bool(reverse))
        if dtype.startswith("i"):
            np.testing.assert_array_equal(y, want)
        else:
            np.testing.assert_allclose(y, want, **TOL[dtype])


def test_integer_scans_wrap_as_numpy(emu: Emulator) -> None:
    x = np.array([2**31 - 1, 1, 5], np.int32)
    y = np.empty_like(x)
    emu.launch("cumsum_i32", 1, 32, x, y, 1, 3, 1, 0, 0)
    np.testing.assert_array_equal(y, np.cumsum(x, dtype=np.int32))


@pytest.mark.parametrize("dtype", losses.VALUE_TYPES)
def test_hardmax_takes_the_first_largest(emu: Emulator, dtype: str) -> None:
    x = np.array([[1, 3, 3, 0], [2, 2, 2, 2], [0, np.nan, 5, np.nan], [-1, -2, -3, -4]])
    x = x.astype(NP[dtype])
    y = np.empty_like(x)
    emu.launch(f"hardmax_{dtype}", 1, 32, x, y, 4, 4, 1)
    want = np.zeros_like(x)
    want[np.arange(4), np.argmax(x, axis=1)] = 1
    np.testing.assert_array_equal(y, want)
    assert want[2, 1] == 1  # the first NaN, as numpy's argmax
    xt = np.ascontiguousarray(x.T)  # along axis 0: inner 4
    y = np.empty_like(xt)
    emu.launch(f"hardmax_{dtype}", 1, 32, xt, y, 4, 4, 4)
    np.testing.assert_array_equal(y, want.T)


@pytest.mark.parametrize("dtype", losses.VALUE_TYPES)
@pytest.mark.parametrize("p", [1, 2])
def test_lpnorm(emu: Emulator, dtype: str, p: int) -> None:
    x = np.random.default_rng(p).standard_normal((3, 4, 5)).astype(NP[dtype])
    x[1, :, 2] = 0
    y = np.empty_like(x)
    emu.launch(f"lpnorm_{dtype}", 2, 32, x, y, 15, 4, 5, p)
    norm = np.linalg.norm(x.astype(np.float64), ord=p, axis=1, keepdims=True)
    want = np.where(norm == 0, 0, x / np.where(norm == 0, 1, norm))
    np.testing.assert_allclose(y, want.astype(NP[dtype]), **TOL[dtype])


def _topk_ref(x: np.ndarray, k: int, axis: int, largest: bool) -> tuple[np.ndarray, np.ndarray]:
    """onnx's order: by value (NaN largest), ties to the lower index."""
    idx = np.indices(x.shape)[axis]
    order = np.lexsort((-idx if largest else idx, x), axis=axis)
    if largest:
        order = np.flip(order, axis=axis)
    order = np.take(order, np.arange(k), axis=axis)
    return np.take_along_axis(x, order, axis=axis), order


@pytest.mark.parametrize("dtype", losses.TOPK_TYPES)
@pytest.mark.parametrize("largest", [1, 0])
def test_topk_sorted_with_ties_to_the_lower_index(emu: Emulator, dtype: str, largest: int) -> None:
    rng = np.random.default_rng(11)
    x = rng.integers(0, 4, (2, 9, 3)).astype(NP[dtype])  # many ties
    if dtype.startswith("f"):
        x[0, 4, 1] = x[1, 0, 0] = x[1, 6, 0] = np.nan
    for axis, k in ((1, 4), (2, 3), (0, 1), (1, 0), (1, 9)):
        shape = x.shape
        outer, length = int(np.prod(shape[:axis])), shape[axis]
        inner = int(np.prod(shape[axis + 1 :]))
        out = list(shape)
        out[axis] = k
        values = np.zeros(out, x.dtype)
        indices = np.zeros(out, np.int64)
        emu.launch(f"topk_{dtype}", 2, 32, x, values, indices, x.size, length, inner, k, largest)
        want_v, want_i = _topk_ref(x, k, axis, bool(largest))
        np.testing.assert_array_equal(indices, want_i)
        np.testing.assert_array_equal(values, want_v)
        assert outer * k * inner == values.size


@pytest.mark.parametrize("itemsize", sorted(losses.WORDS))
@pytest.mark.parametrize("batch_first", [0, 1])
def test_reverse_sequence(emu: Emulator, itemsize: int, batch_first: int) -> None:
    dt = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[itemsize]
    t_len, batch = 5, 4
    shape = (batch, t_len, 3) if batch_first else (t_len, batch, 3)
    x = np.arange(np.prod(shape)).reshape(shape).astype(dt)
    lens = np.array([0, 1, 5, 3], np.int64)
    y = np.empty_like(x)
    emu.launch(
        f"reverse_sequence_b{itemsize}",
        2,
        32,
        x,
        y,
        lens,
        x.size,
        shape[0],
        shape[1],
        3,
        batch_first,
    )
    want = x.copy()
    for b, n in enumerate(lens):
        if batch_first:
            want[b, :n] = x[b, :n][::-1]
        else:
            want[:n, b] = x[:n, b][::-1]
    np.testing.assert_array_equal(y, want)


EINSUMS = [
    ("ij->ji", [(3, 4)]),
    ("ij->i", [(3, 4)]),
    ("...ii->...i", [(3, 5, 5)]),
    ("i,i", [(5,), (5,)]),
    ("bij,bjk->bik", [(5, 2, 3), (5, 3, 4)]),
    ("...ij,...jk", [(2, 1, 3, 4), (5, 4, 2)]),
    ("ij,kj->ik", [(3, 4), (2, 4)]),
]


@pytest.mark.parametrize("dtype", losses.VALUE_TYPES)
@pytest.mark.parametrize(("equation", "shapes"), EINSUMS, ids=[e for e, _ in EINSUMS])
def test_einsum(emu: Emulator, dtype: str, equation: str, shapes: list[Any]) -> None:
    from ortcore_cuda.ops_losses import einsum_plan

    rng = np.random.default_rng(len(equation))
    xs = [rng.standard_normal(s).astype(NP[dtype]) for s in shapes]
    out, sizes, strides = einsum_plan(equation, shapes)
    pad = [0] * (losses.EINSUM_LETTERS - len(sizes))
    args = losses.EINSUM.pack(
        dims=sizes + [1] * len(pad),
        sa=strides[0] + pad,
        sb=(strides[1] if len(xs) > 1 else [0] * len(sizes)) + pad,
    )
    y = np.empty(out, NP[dtype])
    nsum = int(np.prod(sizes[len(out) :]))
    emu.launch(
        f"einsum_{dtype}", 2, 32, xs[0], xs[-1], y, y.size, args, len(out),
        len(sizes) - len(out), nsum, int(len(xs) > 1),
    )  # fmt: skip
    want = np.einsum(equation, *[x.astype(np.float64) for x in xs])
    np.testing.assert_allclose(y, want.astype(NP[dtype]), **TOL[dtype])


# -- the provider on the emulation ---------------------------------------------------------


def _model(node: Any, inputs: list[Any], outputs: list[Any], opset: int, inits: Any = ()) -> bytes:
    graph = helper.make_graph([node], "g", inputs, outputs, list(inits))
    return helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", opset)]
    ).SerializeToString()


def _run_on_cuda(manager: Any, model: bytes, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    sess = ortcore.InferenceSession(model, providers=["cuda", "cpu"], plugin_manager=manager)
    part = sess.get_partition()
    assert [r.provider for r in part.nodes] == ["CUDAExecutionProvider"], [
        (r.op_type, r.declined) for r in part.nodes
    ]
    return list(sess.run(None, feeds))


def _info(name: str, elem: int, shape: Any) -> Any:
    return helper.make_tensor_value_info(name, elem, shape)


F, H, I64 = TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.INT64


@pytest.mark.parametrize("elem", [F, H])
def test_softmax_cross_entropy_with_log_prob(emulated: Any, elem: int) -> None:
    np_t = np.float16 if elem == H else np.float32
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 5, 2, 3)).astype(np_t)
    target = rng.integers(0, 5, (3, 2, 3)).astype(np.int64)
    target[1, 0, 0] = -1
    weight = rng.uniform(0.5, 1.5, 5).astype(np_t)
    node = helper.make_node(
        "SoftmaxCrossEntropyLoss", ["x", "t", "w"], ["loss", "logp"], ignore_index=-1
    )
    model = _model(
        node,
        [_info("x", elem, [3, 5, 2, 3]), _info("t", I64, [3, 2, 3]), _info("w", elem, [5])],
        [_info("loss", elem, []), _info("logp", elem, [3, 5, 2, 3])],
        13,
    )
    loss, logp = _run_on_cuda(emulated, model, {"x": x, "t": target, "w": weight})
    want_logp = _log_softmax(x)
    tol = TOL["f16" if elem == H else "f32"]
    np.testing.assert_allclose(logp, want_logp.astype(np_t), **tol)
    np.testing.assert_allclose(loss, _nll_ref(want_logp, target, weight, "mean", -1), **tol)


def test_softmax_cross_entropy_of_long_rows(emulated: Any) -> None:
    """Rows of 300 classes take the block-per-line LogSoftmax."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 300)).astype(np.float32)
    target = rng.integers(0, 300, 4).astype(np.int64)
    node = helper.make_node("SoftmaxCrossEntropyLoss", ["x", "t"], ["loss"], reduction="none")
    model = _model(
        node, [_info("x", F, [4, 300]), _info("t", I64, [4])], [_info("loss", F, [4])], 13
    )
    (loss,) = _run_on_cuda(emulated, model, {"x": x, "t": target})
    np.testing.assert_allclose(
        loss, _nll_ref(_log_softmax(x), target, None, "none", None), rtol=1e-5, atol=1e-5
    )


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
def test_negative_log_likelihood(emulated: Any, reduction: str) -> None:
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 4, 3)).astype(np.float32)
    target = rng.integers(0, 4, (2, 3)).astype(np.int64)
    target[0, 1] = 1
    node = helper.make_node(
        "NegativeLogLikelihoodLoss", ["x", "t"], ["y"], reduction=reduction, ignore_index=1
    )
    out_shape = [2, 3] if reduction == "none" else []
    model = _model(
        node, [_info("x", F, [2, 4, 3]), _info("t", I64, [2, 3])], [_info("y", F, out_shape)], 22
    )
    (y,) = _run_on_cuda(emulated, model, {"x": x, "t": target})
    np.testing.assert_allclose(y, _nll_ref(x, target, None, reduction, 1), rtol=1e-5, atol=1e-6)


def test_cumsum_with_a_host_axis(emulated: Any) -> None:
    x = np.random.default_rng(3).standard_normal((2, 3, 4)).astype(np.float32)
    node = helper.make_node("CumSum", ["x", "axis"], ["y"], exclusive=1, reverse=1)
    axis = numpy_helper.from_array(np.array(-2, np.int64), "axis")
    model = _model(node, [_info("x", F, [2, 3, 4])], [_info("y", F, [2, 3, 4])], 14, [axis])
    (y,) = _run_on_cuda(emulated, model, {"x": x})
    np.testing.assert_allclose(y, _scan_ref(x, 1, "sum", True, True), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("opset", [11, 13])
def test_hardmax_flattens_before_opset_13(emulated: Any, opset: int) -> None:
    x = np.random.default_rng(4).standard_normal((2, 3, 4)).astype(np.float32)
    node = helper.make_node("Hardmax", ["x"], ["y"], axis=1)
    model = _model(node, [_info("x", F, [2, 3, 4])], [_info("y", F, [2, 3, 4])], opset)
    (y,) = _run_on_cuda(emulated, model, {"x": x})
    if opset < 13:
        flat = x.reshape(2, 12)
        hot = np.zeros_like(flat)
        hot[np.arange(2), flat.argmax(1)] = 1
        want = hot.reshape(x.shape)
    else:
        want = np.zeros_like(x)
        np.put_along_axis(want, x.argmax(1)[:, None, :], 1, axis=1)
    np.testing.assert_array_equal(y, want)


def test_topk_smallest(emulated: Any) -> None:
    x = np.array([[3, 1, 2, 1], [0, 0, 5, -1]], np.float32)
    node = helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=-1, largest=0)
    k = numpy_helper.from_array(np.array([3], np.int64), "k")
    model = _model(
        node,
        [_info("x", F, [2, 4])],
        [_info("v", F, [2, 3]), _info("i", I64, [2, 3])],
        11,
        [k],
    )
    v, i = _run_on_cuda(emulated, model, {"x": x})
    np.testing.assert_array_equal(i, [[1, 3, 2], [3, 0, 1]])
    np.testing.assert_array_equal(v, [[1, 1, 2], [-1, 0, 0]])


def test_lpnormalization_and_its_decline(emulated: Any) -> None:
    x = np.random.default_rng(5).standard_normal((3, 4)).astype(np.float32)
    node = helper.make_node("LpNormalization", ["x"], ["y"], axis=0, p=1)
    model = _model(node, [_info("x", F, [3, 4])], [_info("y", F, [3, 4])], 13)
    (y,) = _run_on_cuda(emulated, model, {"x": x})
    np.testing.assert_allclose(y, x / np.abs(x).sum(0, keepdims=True), rtol=1e-5)
    node = helper.make_node("LpNormalization", ["x"], ["y"], p=3)
    model = _model(node, [_info("x", F, [3, 4])], [_info("y", F, [3, 4])], 13)
    from ortcore.inspection import inspect_partition  # without building (no one runs p=3)

    found = inspect_partition(model, providers=["cuda", "cpu"], plugin_manager=emulated)
    (row,) = found.partition.nodes
    assert row.declined["CUDAExecutionProvider"] == "CUDA: LpNormalization with p=3 (1 and 2 only)"


@pytest.mark.parametrize("axis", [None, 1])
def test_compress_reads_its_condition_on_the_host(emulated: Any, axis: int | None) -> None:
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    cond = np.array([True, False, True], bool)
    node = helper.make_node("Compress", ["x", "c"], ["y"])
    if axis is not None:
        node.attribute.append(helper.make_attribute("axis", axis))
    model = _model(
        node,
        [_info("x", F, [3, 4]), _info("c", TensorProto.BOOL, [3])],
        [_info("y", F, None)],
        11,
    )
    (y,) = _run_on_cuda(emulated, model, {"x": x, "c": cond})
    np.testing.assert_array_equal(y, np.compress(cond, x, axis=axis))


def test_reverse_sequence_on_the_provider(emulated: Any) -> None:
    x = np.arange(20, dtype=np.float32).reshape(4, 5)
    node = helper.make_node("ReverseSequence", ["x", "l"], ["y"], batch_axis=1, time_axis=0)
    model = _model(node, [_info("x", F, [4, 5]), _info("l", I64, [5])], [_info("y", F, [4, 5])], 10)
    lens = np.array([1, 2, 3, 4, 0], np.int64)
    (y,) = _run_on_cuda(emulated, model, {"x": x, "l": lens})
    want = x.copy()
    for b, n in enumerate(lens):
        want[:n, b] = x[:n, b][::-1]
    np.testing.assert_array_equal(y, want)


def test_einsum_on_the_provider(emulated: Any) -> None:
    rng = np.random.default_rng(6)
    a = rng.standard_normal((2, 3, 4)).astype(np.float32)
    b = rng.standard_normal((2, 4, 5)).astype(np.float32)
    node = helper.make_node("Einsum", ["a", "b"], ["y"], equation="bij, bjk -> bik")
    model = _model(
        node,
        [_info("a", F, [2, 3, 4]), _info("b", F, [2, 4, 5])],
        [_info("y", F, [2, 3, 5])],
        12,
    )
    (y,) = _run_on_cuda(emulated, model, {"a": a, "b": b})
    np.testing.assert_allclose(y, a @ b, rtol=1e-5, atol=1e-5)
