"""Constant folding's bounds: each folded tensor (``MAX_FOLDED_BYTES`` and the
session's tensor limit) and all of them together (the budget,
``session.max_folded_total_bytes``). A node past either stays in the graph and
runs at run time: the model loads and gives the same numbers, never an error.
Sizes are known before a kernel runs, also where load-time inference could
not tell them (the size comes from a node folded since)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import tracemalloc
from typing import Any

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from onnx import TensorProto, helper, numpy_helper

import ortcore
from ortcore.errors import InvalidArgument
from ortcore.optimizer.constant_folding import (
    DEFAULT_FOLDING_BUDGET,
    FOLDING_BUDGET_CONFIG,
    FOLDING_BUDGET_ENV,
    _inferred_bytes,
)

from .conftest import op_types

MIB = 1 << 20


def _options(**entries: str) -> ortcore.SessionOptions:
    so = ortcore.SessionOptions()
    for key, value in entries.items():
        so.add_session_config_entry(key, value)
    return so


def _constants_model(count: int, elems: int) -> bytes:
    """y = x + c0 + c1 + ...: each c_i a ConstantOfShape of ``elems`` floats
    (rows of 256) of value i + 1. Two-dimensional: onnx's data propagation
    costs about 150 bytes an element of any one-dimensional tensor at load."""
    shape = numpy_helper.from_array(np.array([elems // 256, 256], np.int64), "shape")
    nodes, acc = [], "x"
    for i in range(count):
        value = numpy_helper.from_array(np.array([i + 1], np.float32))
        nodes.append(helper.make_node("ConstantOfShape", ["shape"], [f"c{i}"], value=value))
        out = "y" if i == count - 1 else f"acc{i}"
        nodes.append(helper.make_node("Add", [acc, f"c{i}"], [out]))
        acc = out
    graph = helper.make_graph(
        nodes,
        "constants",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [elems // 256, 256])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [elems // 256, 256])],
        [shape],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return model.SerializeToString()


def _check_constants_model(sess: ortcore.InferenceSession, count: int, elems: int) -> None:
    x = np.linspace(-1, 1, elems, dtype=np.float32).reshape(-1, 256)
    (y,) = sess.run(None, {"x": x})
    np.testing.assert_allclose(y, x + count * (count + 1) / 2, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize(("budget", "folded"), [(2.5 * MIB, 2), (1, 0), (64 * MIB, 8)])
def test_budget_bounds_what_folding_creates(budget: float, folded: int, cpu: str) -> None:
    data = _constants_model(8, MIB // 4)  # eight 1 MiB constants
    sess = ortcore.InferenceSession(
        data, _options(**{FOLDING_BUDGET_CONFIG: str(int(budget))}), providers=[cpu]
    )
    assert op_types(sess).count("ConstantOfShape") == 8 - folded
    _check_constants_model(sess, 8, MIB // 4)


def test_default_budget_folds_an_ordinary_model(cpu: str) -> None:
    sess = ortcore.InferenceSession(_constants_model(8, MIB // 4), providers=[cpu])
    assert "ConstantOfShape" not in op_types(sess)
    assert DEFAULT_FOLDING_BUDGET >= 1 << 30


def test_environment_variable_sets_the_budget(cpu: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(FOLDING_BUDGET_ENV, "3.5e6")  # three 1 MiB constants
    sess = ortcore.InferenceSession(_constants_model(8, MIB // 4), providers=[cpu])
    assert op_types(sess).count("ConstantOfShape") == 5
    _check_constants_model(sess, 8, MIB // 4)


@pytest.mark.parametrize("value", ["much", "0", "-1"])
def test_bad_budget_is_an_invalid_argument(value: str, cpu: str) -> None:
    with pytest.raises(InvalidArgument, match=FOLDING_BUDGET_CONFIG):
        ortcore.InferenceSession(
            _constants_model(1, 256), _options(**{FOLDING_BUDGET_CONFIG: value}), providers=[cpu]
        )


def _doubling_model(steps: int) -> bytes:
    """c0 (4 KiB, one row) doubles by Concat at each step; y = the sum of the last."""
    c0 = numpy_helper.from_array(np.arange(1024, dtype=np.float32).reshape(1, 1024), "c0")
    nodes = [
        helper.make_node("Concat", [f"c{i}", f"c{i}"], [f"c{i + 1}"], axis=0) for i in range(steps)
    ]
    nodes.append(helper.make_node("ReduceSum", [f"c{steps}"], ["s"], keepdims=0))
    nodes.append(helper.make_node("Add", ["x", "s"], ["y"]))
    graph = helper.make_graph(
        nodes,
        "doubling",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [])],
        [c0],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return model.SerializeToString()


def test_a_doubling_chain_stops_folding_within_the_budget(cpu: str, tmp_path: Any) -> None:
    budget = MIB
    path = tmp_path / "optimized.onnx"
    so = _options(**{FOLDING_BUDGET_CONFIG: str(budget)})
    so.optimized_model_filepath = str(path)
    sess = ortcore.InferenceSession(_doubling_model(12), so, providers=[cpu])
    folded = onnx.load(str(path)).graph.initializer
    # 8 KiB + 16 KiB + ... + 512 KiB (seven folds) fit in 1 MiB; 1 MiB more
    # does not. The last of the seven is all that is left in the graph.
    assert sum(4096 << k for k in range(1, 8)) <= budget < sum(4096 << k for k in range(1, 9))
    assert [numpy_helper.to_array(t).nbytes for t in folded if t.name != "c0"] == [4096 << 7]
    assert op_types(sess).count("Concat") == 12 - 7
    (y,) = sess.run(None, {"x": np.array(0.5, np.float32)})
    assert float(y) == pytest.approx(0.5 + 4096 * sum(range(1024)), rel=1e-6)


# -- outputs sized before the kernel runs --------------------------------------------------


def _hidden(name: str, value: np.ndarray) -> tuple[onnx.NodeProto, onnx.TensorProto]:
    """``name`` = Abs(value): load-time inference does not follow Abs's values,
    so the node reading ``name`` has outputs of unknown size until folding."""
    init = numpy_helper.from_array(value, f"{name}_raw")
    return helper.make_node("Abs", [f"{name}_raw"], [name]), init


def _const(name: str, value: Any, dtype: Any = np.float32) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(value, dtype), name)


N = 4096  # sizes of about 64 MiB, far over the 1 MiB tensor limit the tests set
SIZED_BY_VALUES: dict[str, tuple[onnx.NodeProto, np.ndarray, list[onnx.TensorProto], int]] = {
    "ConstantOfShape": (
        helper.make_node("ConstantOfShape", ["s"], ["y"]),
        np.array([N, N], np.int64),
        [],
        17,
    ),
    "Expand": (
        helper.make_node("Expand", ["one", "s"], ["y"]),
        np.array([N, N], np.int64),
        [_const("one", np.ones([1]))],
        17,
    ),
    "Tile": (
        helper.make_node("Tile", ["one", "s"], ["y"]),
        np.array([N, N], np.int64),
        [_const("one", np.ones([1, 1]))],
        17,
    ),
    "Range": (
        helper.make_node("Range", ["zero", "s", "step"], ["y"]),
        np.array(N * N, np.float32),
        [_const("zero", 0), _const("step", 1)],
        17,
    ),
    "Pad": (
        helper.make_node("Pad", ["one", "s"], ["y"]),
        np.array([0, 0, N, N], np.int64),
        [_const("one", np.ones([1, 1]))],
        17,
    ),
    "Resize": (
        helper.make_node("Resize", ["one", "", "s"], ["y"]),
        np.array([1, 1, N, N], np.float32),
        [_const("one", np.ones([1, 1, 1, 1]))],
        17,
    ),
    "HannWindow": (helper.make_node("HannWindow", ["s"], ["y"]), np.array(N * N, np.int64), [], 17),
    "AffineGrid": (
        helper.make_node("AffineGrid", ["theta", "s"], ["y"]),
        np.array([1, 1, N, N], np.int64),
        [_const("theta", [[[1, 0, 0], [0, 1, 0]]])],
        20,
    ),
    "STFT": (
        helper.make_node("STFT", ["signal", "step", "", "s"], ["y"]),
        np.array(N, np.int64),
        [_const("signal", np.ones([1, 2 * N, 1])), _const("step", 1, np.int64)],
        17,
    ),
}


def _sized_by_values_model(op: str) -> bytes:
    node, size, inits, opset = SIZED_BY_VALUES[op]
    hide, raw = _hidden("s", size)
    graph = helper.make_graph(
        [hide, node],
        op,
        [],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [raw, *inits],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    return model.SerializeToString()


@pytest.mark.parametrize("op", sorted(SIZED_BY_VALUES))
def test_folding_sizes_outputs_from_values_before_running(op: str, cpu: str) -> None:
    """The session's 1 MiB tensor limit caps folding: nothing near the 64 MiB
    the node asks for is allocated, and the node stays for run time."""
    so = _options(**{"session.max_tensor_bytes": str(MIB)})
    tracemalloc.start()
    try:
        sess = ortcore.InferenceSession(_sized_by_values_model(op), so, providers=[cpu])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 16 * MIB, peak
    assert op in op_types(sess)
    assert "Abs" not in op_types(sess)  # the small node before it did fold


@pytest.mark.parametrize("op", sorted(SIZED_BY_VALUES))
def test_inference_of_one_node_gives_the_size(op: str) -> None:
    node, size, inits, opset = SIZED_BY_VALUES[op]
    values = {"s": np.abs(size), **{t.name: numpy_helper.to_array(t) for t in inits}}
    found = _inferred_bytes(
        _with_named_inputs(node), [values.get(n) for n in node.input], {"": opset}
    )
    assert found is not None and found > 16 * MIB, found


def _with_named_inputs(node: onnx.NodeProto) -> ir.Node:
    """``node`` as an onnx-ir node whose inputs are values of its input names."""
    inputs = [ir.Value(name=n) if n else None for n in node.input]
    attrs = [ir.from_proto(a) for a in node.attribute]
    out = ir.Node("", node.op_type, inputs, attrs, num_outputs=len(node.output))
    for v, n in zip(out.outputs, node.output):
        v.name = n
    return out


# -- memory: the budget is what session creation costs --------------------------------------

_PEAK = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    import ortcore
    from onnx import TensorProto, helper, numpy_helper

    def peak_bytes():
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024

    def model(count, elems):  # two-dimensional, as _constants_model
        shape = numpy_helper.from_array(np.array([elems // 256, 256], np.int64), "shape")
        nodes, acc = [], "x"
        for i in range(count):
            value = numpy_helper.from_array(np.array([i + 1], np.float32))
            nodes.append(helper.make_node("ConstantOfShape", ["shape"], [f"c{i}"], value=value))
            out = "y" if i == count - 1 else f"acc{i}"
            nodes.append(helper.make_node("Add", [acc, f"c{i}"], [out]))
            acc = out
        vi = lambda n: helper.make_tensor_value_info(n, TensorProto.FLOAT, [elems // 256, 256])
        graph = helper.make_graph(nodes, "g", [vi("x")], [vi("y")], [shape])
        opsets = [helper.make_opsetid("", 17)]
        return helper.make_model(graph, opset_imports=opsets).SerializeToString()

    count, elems, budget = 20, 5 << 20, 48 << 20  # twenty 20 MiB constants
    so = ortcore.SessionOptions()
    so.add_session_config_entry("session.max_folded_total_bytes", str(budget))
    ortcore.InferenceSession(model(2, 256), providers=["CPUExecutionProvider"])  # imports
    data = model(count, elems)
    before = peak_bytes()
    sess = ortcore.InferenceSession(data, so, providers=["CPUExecutionProvider"])
    grew = peak_bytes() - before
    (y,) = sess.run(None, {"x": np.zeros((elems // 256, 256), np.float32)})
    print(json.dumps({"grew": grew, "y0": float(y[0, 0]), "y_last": float(y[-1, -1])}))
    """
)


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc/self/status")
def test_session_creation_memory_stays_within_the_budget(cpu: str) -> None:
    """Twenty 20 MiB constants (400 MiB folded without a budget) under a 48 MiB budget."""
    proc = subprocess.run(
        [sys.executable, "-c", _PEAK], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["y0"] == report["y_last"] == sum(range(1, 21))
    assert report["grew"] < 160 * MIB, report  # 400 MiB and more without the budget
