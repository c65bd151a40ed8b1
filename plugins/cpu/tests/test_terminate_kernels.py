"""``RunOptions.terminate`` stops CPU kernels that run long on their own: a
Loop with a huge trip count, a string kernel over a long tensor (also inside
a Loop body, and on the parallel executor's worker threads)."""

from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np
import ortcore
import pytest
from onnx import TensorProto, helper

N_STRINGS = 4_000_000  # about 5 s of RegexFullMatch: far longer than the test waits
PATTERN = r"[a-z]+@[a-z]+\.com"


def _model(nodes: list[Any], inputs: list[Any], outputs: list[Any]) -> bytes:
    graph = helper.make_graph(nodes, "g", inputs, outputs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)]).SerializeToString()


def _vi(name: str, elem: int, shape: list[Any] | None) -> Any:
    return helper.make_tensor_value_info(name, elem, shape)


def counting_loop_model() -> bytes:
    """Loop(M, cond=True) adding 1 to a carried value: as long as M says."""
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["cond_in"], ["cond_out"]),
            helper.make_node("Add", ["v_in", "one"], ["v_out"]),
        ],
        "body",
        [_vi("i", TensorProto.INT64, []), _vi("cond_in", TensorProto.BOOL, []),
         _vi("v_in", TensorProto.FLOAT, [])],
        [_vi("cond_out", TensorProto.BOOL, []), _vi("v_out", TensorProto.FLOAT, [])],
        [helper.make_tensor("one", TensorProto.FLOAT, [], [1.0])],
    )  # fmt: skip
    loop = helper.make_node("Loop", ["M", "cond", "v0"], ["v"], name="counter", body=body)
    return _model(
        [loop],
        [_vi("M", TensorProto.INT64, []), _vi("cond", TensorProto.BOOL, []),
         _vi("v0", TensorProto.FLOAT, [])],
        [_vi("v", TensorProto.FLOAT, [])],
    )  # fmt: skip


def regex_model() -> bytes:
    node = helper.make_node("RegexFullMatch", ["x"], ["y"], name="rx", pattern=PATTERN)
    return _model(
        [node], [_vi("x", TensorProto.STRING, [None])], [_vi("y", TensorProto.BOOL, [None])]
    )


def regex_in_loop_model() -> bytes:
    """Loop(M) whose body runs RegexFullMatch over the outer-scope ``x``."""
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["cond_in"], ["cond_out"]),
            helper.make_node("RegexFullMatch", ["x"], ["hits"], name="inner_rx", pattern=PATTERN),
        ],
        "body",
        [_vi("i", TensorProto.INT64, []), _vi("cond_in", TensorProto.BOOL, [])],
        [_vi("cond_out", TensorProto.BOOL, []), _vi("hits", TensorProto.BOOL, [None])],
    )  # fmt: skip
    loop = helper.make_node("Loop", ["M", ""], ["all_hits"], name="outer", body=body)
    return _model(
        [loop],
        [_vi("M", TensorProto.INT64, []), _vi("x", TensorProto.STRING, [None])],
        [_vi("all_hits", TensorProto.BOOL, [None, None])],
    )


def _session(model: bytes, parallel: bool = False) -> ortcore.InferenceSession:
    so = ortcore.SessionOptions()
    if parallel:
        so.execution_mode = ortcore.ExecutionMode.ORT_PARALLEL
    return ortcore.InferenceSession(model, so, providers=["cpu"])


def _terminated_after(sess: ortcore.InferenceSession, feeds: dict[str, Any]) -> float:
    """Start a run, set ``terminate`` 0.2 s later from this thread; check the
    run raised RunTerminated and return the seconds it took to stop."""
    ro = ortcore.RunOptions()
    errors: list[BaseException] = []

    def work() -> None:
        try:
            sess.run(None, feeds, ro)
        except BaseException as exc:  # handed to the test thread
            errors.append(exc)

    t = threading.Thread(target=work)
    t.start()
    time.sleep(0.2)
    assert t.is_alive(), "the run finished before terminate was set"
    t0 = time.monotonic()
    ro.terminate = True
    t.join(30)
    took = time.monotonic() - t0
    assert not t.is_alive()
    assert len(errors) == 1 and isinstance(errors[0], ortcore.RunTerminated), errors
    assert "terminate flag" in str(errors[0])
    return took


def _strings(n: int) -> np.ndarray:
    return np.full(n, "someone@example.com", dtype=object)


def test_loop_with_a_huge_trip_count_stops() -> None:
    sess = _session(counting_loop_model())
    feeds = {"M": np.array(2**62, np.int64), "cond": np.array(True),
             "v0": np.array(0, np.float32)}  # fmt: skip
    assert _terminated_after(sess, feeds) < 2.0
    feeds["M"] = np.array(1000, np.int64)
    (v,) = sess.run(None, feeds, ortcore.RunOptions())
    assert v == 1000


@pytest.mark.parametrize("parallel", [False, True], ids=["sequential", "parallel"])
def test_regex_over_a_long_tensor_stops(parallel: bool) -> None:
    sess = _session(regex_model(), parallel)
    assert _terminated_after(sess, {"x": _strings(N_STRINGS)}) < 2.0
    (y,) = sess.run(None, {"x": _strings(3)}, ortcore.RunOptions())
    assert y.tolist() == [True] * 3


def test_a_kernel_in_a_loop_body_sees_the_outer_run() -> None:
    sess = _session(regex_in_loop_model())
    feeds = {"M": np.array(1, np.int64), "x": _strings(N_STRINGS)}
    assert _terminated_after(sess, feeds) < 2.0
    feeds = {"M": np.array(2, np.int64), "x": np.array(["a@b.com", "nope"], dtype=object)}
    (y,) = sess.run(None, feeds, ortcore.RunOptions())
    assert y.tolist() == [[True, False], [True, False]]
