"""Session features as onnxruntime users know them: profiling, IO binding,
run options and parallel execution (run by ``tests/test_docs.py``)."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from onnx import TensorProto, helper

import ortcore as ort


def two_branch_model() -> bytes:
    """``y = relu(x @ w1) + tanh(x @ w2)`` and a side output ``z = x * 2``."""
    rng = np.random.default_rng(0)
    inits = [
        helper.make_tensor("w1", TensorProto.FLOAT, [64, 64], rng.standard_normal(4096)),
        helper.make_tensor("w2", TensorProto.FLOAT, [64, 64], rng.standard_normal(4096)),
        helper.make_tensor("two", TensorProto.FLOAT, [], [2.0]),
    ]
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["a"], name="mm1"),
        helper.make_node("Relu", ["a"], ["ra"], name="relu"),
        helper.make_node("MatMul", ["x", "w2"], ["b"], name="mm2"),
        helper.make_node("Tanh", ["b"], ["tb"], name="tanh"),
        helper.make_node("Add", ["ra", "tb"], ["y"], name="add"),
        helper.make_node("Mul", ["x", "two"], ["z"], name="double"),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 64])
    outs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["batch", 64]) for n in "yz"]
    graph = helper.make_graph(nodes, "two_branches", [x], outs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return model.SerializeToString()


def main() -> dict[str, Any]:
    """Run every snippet; return what the test checks."""
    model = two_branch_model()
    x = np.ones((8, 64), np.float32)
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        # --8<-- [start:profiling]
        so = ort.SessionOptions()
        so.enable_profiling = True
        so.profile_file_prefix = str(Path(tmp) / "two_branches")
        sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
        for _ in range(3):
            sess.run(None, {"x": x})
        trace = sess.end_profiling()  # .../two_branches_<date>.json
        # --8<-- [end:profiling]
        from ortcore.profiling import load_trace, summarize

        out["trace_ops"] = {r["name"] for r in summarize(load_trace(trace))["by_op"]}

    # --8<-- [start:iobinding]
    sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    y_buffer = ort.OrtValue.ortvalue_from_shape_and_type([8, 64], np.float32)
    binding = sess.io_binding()
    binding.bind_cpu_input("x", x)
    binding.bind_ortvalue_output("y", y_buffer)  # written in place by each run
    binding.bind_output("z")  # allocated by the session
    sess.run_with_iobinding(binding)
    y, z = binding.copy_outputs_to_cpu()
    # --8<-- [end:iobinding]
    out["iobinding"] = (y, z, y_buffer.numpy())

    # --8<-- [start:run_options]
    ro = ort.RunOptions()
    ro.logid = "request-42"
    ro.only_execute_path_to_fetches = True  # the MatMuls are not run for "z"
    (z_only,) = sess.run(["z"], {"x": x}, ro)
    # --8<-- [end:run_options]
    out["z_only"] = z_only

    # --8<-- [start:parallel]
    so = ort.SessionOptions()
    so.execution_mode = ort.ExecutionMode.ORT_PARALLEL
    so.inter_op_num_threads = 2  # two branches at once...
    so.intra_op_num_threads = 1  # ...each node (and its BLAS calls) on one thread
    parallel = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    y_parallel, _ = parallel.run(None, {"x": x})
    # --8<-- [end:parallel]
    out["parallel"] = y_parallel
    out["sequential"] = sess.run(["y"], {"x": x})[0]
    return out


if __name__ == "__main__":
    print(main()["trace_ops"])
