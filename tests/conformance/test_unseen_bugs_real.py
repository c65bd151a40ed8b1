"""Each bug of :mod:`tests.conformance.faulty_unseen` is real: a model that
shows it makes the faulty provider answer differently from its healthy
counterpart (so the suite's tests on them are never vacuous)."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from typing import Any

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

import ortcore as ort
from ortcore.plugins import default_manager

from . import faulty_unseen
from .unseen_runs import PLUGIN


@pytest.fixture(scope="module", autouse=True)
def unseen() -> Iterator[str]:
    """Register the providers of :mod:`faulty_unseen` for this module."""
    default_manager().register_plugin(faulty_unseen, name=PLUGIN)
    yield PLUGIN
    default_manager().unregister_plugin(PLUGIN)


def model(
    nodes: list[Any],
    inputs: list[tuple[str, int, list[Any]]],
    outputs: list[tuple[str, int, list[Any] | None]],
    opset: int = 18,
    inits: dict[str, np.ndarray] | None = None,
) -> bytes:
    """A model of ``nodes`` (onnx.helper nodes), serialized."""
    g = h.make_graph(
        nodes,
        "g",
        [h.make_tensor_value_info(n, t, s) for n, t, s in inputs],
        [h.make_tensor_value_info(n, t, s) for n, t, s in outputs],
        initializer=[onnx.numpy_helper.from_array(v, k) for k, v in (inits or {}).items()],
    )
    m = h.make_model(g, opset_imports=[h.make_opsetid("", opset)])
    return bytes(m.SerializeToString())


def runs(provider: str, data: bytes, feeds: list[dict[str, Any]], write: bool = False) -> Any:
    """Outputs of each run (the exception's type name where it raised);
    ``write``: the caller writes into every output between runs."""
    try:
        s = ort.InferenceSession(data, providers=[provider])
        out = []
        for f in feeds:
            got = s.run(None, f)
            out.append([np.array(g, copy=True) for g in got])
            if write:
                for g in got:
                    g[...] = 7
        return out
    except Exception as exc:  # the bug may be an error
        return type(exc).__name__


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, str) or isinstance(b, str):
        return a == b
    return all(
        x.shape == y.shape and x.dtype == y.dtype and np.allclose(x, y, rtol=2e-3, equal_nan=True)
        for r, q in zip(a, b)
        for x, y in zip(r, q)
    )


F32 = T.FLOAT
x34 = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
Demo = tuple[bytes, list[dict[str, Any]]]


def _demos() -> dict[str, Callable[[], Demo]]:
    rng = np.random.default_rng(1)
    n = h.make_node
    return {
        "unseen-softmax-rank2": lambda: (
            model([n("Softmax", ["x"], ["y"], axis=0)], [("x", F32, [3, 4])], [("y", F32, None)]),
            [{"x": x34}],
        ),
        "unseen-transpose-rank5": lambda: (
            model(
                [n("Transpose", ["x"], ["y"])], [("x", F32, [2, 3, 1, 2, 2])], [("y", F32, None)]
            ),
            [{"x": rng.standard_normal((2, 3, 1, 2, 2)).astype(np.float32)}],
        ),
        "unseen-scalar-binary": lambda: (
            model(
                [n("Add", ["a", "b"], ["y"])], [("a", F32, []), ("b", F32, [])], [("y", F32, None)]
            ),
            [{"a": np.array(1, np.float32), "b": np.array(2, np.float32)}],
        ),
        "unseen-gather-scalar-index": lambda: (
            model(
                [n("Gather", ["x", "i"], ["y"], axis=1)],
                [("x", F32, [3, 4]), ("i", T.INT64, [])],
                [("y", F32, None)],
            ),
            [{"x": x34, "i": np.array(2, np.int64)}],
        ),
        "unseen-argmax-keepdims": lambda: (
            model(
                [n("ArgMax", ["x"], ["y"], axis=1)], [("x", F32, [3, 4])], [("y", T.INT64, None)]
            ),
            [{"x": x34}],
        ),
        "unseen-split-uneven": lambda: (
            model(
                [n("Split", ["x"], ["a", "b", "c"], num_outputs=3)],
                [("x", F32, [7])],
                [("a", F32, None), ("b", F32, None), ("c", F32, None)],
            ),
            [{"x": np.arange(7, dtype=np.float32)}],
        ),
        "unseen-softmax-opset11": lambda: (
            model([n("Softmax", ["x"], ["y"])], [("x", F32, [2, 3, 4])], [("y", F32, None)], 11),
            [{"x": rng.standard_normal((2, 3, 4)).astype(np.float32)}],
        ),
        "unseen-gemm-bias-column": lambda: (
            model(
                [n("Gemm", ["a", "b", "c"], ["y"])],
                [("a", F32, [3, 4]), ("b", F32, [4, 3]), ("c", F32, [3, 1])],
                [("y", F32, None)],
            ),
            [{"a": x34, "b": x34.T.copy(), "c": np.arange(3, dtype=np.float32).reshape(3, 1)}],
        ),
        "unseen-layernorm-no-bias": lambda: (
            model(
                [n("LayerNormalization", ["x", "w"], ["y"])],
                [("x", F32, [3, 4]), ("w", F32, [4])],
                [("y", F32, None)],
                17,
            ),
            [{"x": x34, "w": np.full(4, 2.0, np.float32)}],
        ),
        "unseen-reduce-noop": lambda: (
            model(
                [n("ReduceSum", ["x"], ["y"], noop_with_empty_axes=1)],
                [("x", F32, [3, 4])],
                [("y", F32, None)],
                13,
            ),
            [{"x": x34}],
        ),
        "unseen-matmul-f16-acc": lambda: (
            model(
                [n("MatMul", ["a", "b"], ["y"])],
                [("a", T.FLOAT16, [2, 2048]), ("b", T.FLOAT16, [2048, 2])],
                [("y", T.FLOAT16, None)],
            ),
            [
                {
                    "a": rng.uniform(0, 1, (2, 2048)).astype(np.float16),
                    "b": rng.uniform(0, 1, (2048, 2)).astype(np.float16),
                }
            ],
        ),
        "unseen-unsigned-div": lambda: (
            model(
                [n("Div", ["a", "b"], ["y"])],
                [("a", T.UINT32, [2]), ("b", T.UINT32, [2])],
                [("y", T.UINT32, None)],
            ),
            [{"a": np.array([3_000_000_000, 9], np.uint32), "b": np.array([3, 3], np.uint32)}],
        ),
        "unseen-bf16-via-f16": lambda: (
            model(
                [n("Mul", ["a", "b"], ["y"])],
                [("a", T.BFLOAT16, [2]), ("b", T.BFLOAT16, [2])],
                [("y", T.BFLOAT16, None)],
            ),
            [
                {
                    "a": np.array([1000, 2], ml_dtypes.bfloat16),
                    "b": np.array([1000, 3], ml_dtypes.bfloat16),
                }
            ],
        ),
        "unseen-argmin-negate": lambda: (
            model(
                [n("ArgMin", ["x"], ["y"], axis=0)], [("x", T.UINT8, [3])], [("y", T.INT64, None)]
            ),
            [{"x": np.array([5, 0, 3], np.uint8)}],
        ),
        "unseen-flatten-empty": lambda: (
            model([n("Flatten", ["x"], ["y"])], [("x", F32, [0, 3])], [("y", F32, None)]),
            [{"x": np.zeros((0, 3), np.float32)}],
        ),
        "unseen-softmax-static-plan": lambda: (
            model([n("Softmax", ["x"], ["y"])], [("x", F32, ["N", 4])], [("y", F32, None)]),
            [{"x": x34[:1]}, {"x": x34}],
        ),
        "unseen-constant-kept": lambda: (
            model(
                [n("ConstantOfShape", ["s"], ["y"])],
                [("s", T.INT64, [2])],
                [("y", F32, None)],
            ),
            [{"s": np.array([2, 3], np.int64)}] * 2,
        ),
        "unseen-attr-cache": lambda: (
            model(
                [n("LeakyRelu", ["x"], ["y"], alpha=0.1), n("LeakyRelu", ["x"], ["z"], alpha=0.5)],
                [("x", F32, [3, 4])],
                [("y", F32, None), ("z", F32, None)],
            ),
            [{"x": x34}],
        ),
    }


def _init_model() -> Demo:
    """MatMul whose weight is an initializer that is also a graph input, fed
    with another value."""
    w = np.ones((4, 2), np.float32)
    data = model(
        [h.make_node("MatMul", ["x", "w"], ["m"]), h.make_node("Add", ["m", "m"], ["y"])],
        [("x", F32, [3, 4]), ("w", F32, [4, 2])],
        [("y", F32, None)],
        inits={"w": w},
    )
    return data, [{"x": x34, "w": np.full((4, 2), -3.0, np.float32)}]


def _dynamic_group() -> Demo:
    data = model(
        [h.make_node("Relu", ["x"], ["r"]), h.make_node("Add", ["r", "x"], ["y"])],
        [("x", F32, ["N", 4])],
        [("y", F32, None)],
    )
    return data, [{"x": x34[:1]}, {"x": x34}]


DEMOS = {
    **_demos(),
    "unseen-matmul-packed-init": _init_model,
    "unseen-fused-baked-init": _init_model,
    "unseen-fused-first-shapes": _dynamic_group,
}
WRITES = {"unseen-constant-kept"}


@pytest.mark.parametrize("provider", sorted(DEMOS))
def test_bug_shows_against_the_healthy_counterpart(provider: str) -> None:
    healthy = "unseen-fused" if provider.startswith("unseen-fused") else "unseen-healthy"
    data, feeds = DEMOS[provider]()
    want = runs(healthy, data, feeds, write=provider in WRITES)
    got = runs(provider, data, feeds, write=provider in WRITES)
    assert not isinstance(want, str), want
    assert not _same(got, want), (got, want)


def test_identity_fold_returns_one_array_twice() -> None:
    data = model(
        [h.make_node("Relu", ["x"], ["r"]), h.make_node("Identity", ["r"], ["y"])],
        [("x", F32, [3, 4])],
        [("r", F32, None), ("y", F32, None)],
    )
    # ortcore copies the second output (the caller still owns each) and names the fault
    with pytest.warns(ort.ProviderContractWarning, match="one buffer for outputs 0 and 1"):
        r, y = ort.InferenceSession(data, providers=["unseen-fused-identity-alias"]).run(
            None, {"x": x34}
        )
    assert not np.shares_memory(r, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ort.ProviderContractWarning)
        r, y = ort.InferenceSession(data, providers=["unseen-fused"]).run(None, {"x": x34})
    assert not np.shares_memory(r, y)


def test_transpose_plans_grow_with_every_shape() -> None:
    data = model(
        [h.make_node("Transpose", ["x"], ["y"])], [("x", F32, ["A", "B"])], [("y", F32, None)]
    )
    s = ort.InferenceSession(data, providers=["unseen-transpose-plan-cache"])
    before = len(faulty_unseen._PLANS)
    for k in range(1, 21):
        s.run(None, {"x": np.zeros((k, 3), np.float32)})
    assert len(faulty_unseen._PLANS) - before == 20
