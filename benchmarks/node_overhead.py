"""Framework cost per node: a chain of scalar Adds, ortcore next to onnxruntime.

The model is ``y = x + c + c + ... + c`` (``--nodes`` Add nodes, float32
scalars), run with graph optimizations off (``ORT_DISABLE_ALL`` in both
runtimes) so that every node really runs. With scalar operands the arithmetic
is negligible: the time per node is what the runtime spends around a kernel
call (the run loop, the kernel's dispatch, allocating the result).

Both runtimes get the same number of intra-op threads; runs are interleaved
(one ortcore run, one onnxruntime run, ...) and the table shows the medians in
microseconds per node and the ratio ortcore / onnxruntime. onnxruntime's
thread spinning is turned off unless ``--ort-spinning``. onnx's reference
evaluator is timed too (fewer runs: it is slow) unless ``--no-reference``.

``--op BatchNormalization`` chains BatchNormalizations of a (1, 4) input
instead: their per-channel statistics are checked against the channels at
load (:mod:`ortcore.param_checks`), so a run costs what an Add chain's does;
with ``--symbolic-channels`` the channel dim is a ``dim_param``, and every
node checks its statistics' lengths before its kernel on every run: the
difference is that check's price.

    python benchmarks/node_overhead.py [--nodes 1000] [--runs 50] [--threads 2]
        [--op Add|BatchNormalization] [--symbolic-channels]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import onnx
from onnx import TensorProto, helper


def add_chain(nodes: int) -> onnx.ModelProto:
    """A model of ``nodes`` chained scalar float32 Adds (opset 17)."""
    const = helper.make_tensor("c", TensorProto.FLOAT, [], [1.0])
    graph_nodes = []
    prev = "x"
    for i in range(nodes):
        out = "y" if i == nodes - 1 else f"t{i}"
        graph_nodes.append(helper.make_node("Add", [prev, "c"], [out], name=f"add{i}"))
        prev = out
    graph = helper.make_graph(
        graph_nodes,
        "add_chain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [])],
        [const],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def batchnorm_chain(nodes: int, symbolic: bool) -> onnx.ModelProto:
    """A model of ``nodes`` chained BatchNormalizations of a (1, 4) float32
    input (opset 17); the channel dim is ``"C"`` with ``symbolic``."""
    channels = 4
    stats = [
        helper.make_tensor(n, TensorProto.FLOAT, [channels], [v] * channels)
        for n, v in (("s", 1.0), ("b", 0.0), ("m", 0.0), ("v", 1.0))
    ]
    graph_nodes = []
    prev = "x"
    for i in range(nodes):
        out = "y" if i == nodes - 1 else f"t{i}"
        graph_nodes.append(
            helper.make_node("BatchNormalization", [prev, "s", "b", "m", "v"], [out], name=f"bn{i}")
        )
        prev = out
    shape = [1, "C" if symbolic else channels]
    graph = helper.make_graph(
        graph_nodes,
        "bn_chain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)],
        stats,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _time(fn, feeds: dict) -> float:
    t = time.perf_counter()
    fn(None, feeds)
    return time.perf_counter() - t


def main() -> None:
    """Run the benchmark and print µs per node for each runtime."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--no-reference", action="store_true", help="skip onnx.reference")
    parser.add_argument(
        "--ort-spinning", action="store_true", help="keep onnxruntime's default thread spinning"
    )
    parser.add_argument("--op", choices=["Add", "BatchNormalization"], default="Add")
    parser.add_argument(
        "--symbolic-channels",
        action="store_true",
        help="BatchNormalization: channels as a dim_param (checked at run time)",
    )
    args = parser.parse_args()

    import onnxruntime

    import ortcore

    if args.op == "Add":
        model = add_chain(args.nodes).SerializeToString()
        feeds = {"x": np.array(0.0, np.float32)}
    else:
        model = batchnorm_chain(args.nodes, args.symbolic_channels).SerializeToString()
        feeds = {"x": np.zeros((1, 4), np.float32)}
    so = ortcore.SessionOptions()
    so.intra_op_num_threads = args.threads
    so.graph_optimization_level = ortcore.GraphOptimizationLevel.ORT_DISABLE_ALL
    ours = ortcore.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    rso = onnxruntime.SessionOptions()
    rso.intra_op_num_threads = args.threads
    rso.log_severity_level = 3
    rso.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    if not args.ort_spinning:
        rso.add_session_config_entry("session.intra_op.allow_spinning", "0")
    ref = onnxruntime.InferenceSession(model, rso, providers=["CPUExecutionProvider"])

    a, b = ours.run(None, feeds)[0], ref.run(None, feeds)[0]
    same = bool(np.allclose(a, b, atol=1e-4)) and (
        args.op != "Add" or float(a) == float(args.nodes)
    )
    for _ in range(3):  # warm-up
        ours.run(None, feeds)
        ref.run(None, feeds)
    t_ours, t_ref = [], []
    for _ in range(args.runs):
        t_ours.append(_time(ours.run, feeds))
        t_ref.append(_time(ref.run, feeds))
    per = 1e6 / args.nodes
    mo, mr = statistics.median(t_ours) * per, statistics.median(t_ref) * per
    print(f"ortcore      {mo:8.3f} µs/node")
    print(f"onnxruntime  {mr:8.3f} µs/node   ratio ortcore/onnxruntime {mo / mr:5.2f}")
    if not args.no_reference:
        from onnx.reference import ReferenceEvaluator

        evaluator = ReferenceEvaluator(onnx.load_from_string(model))
        t_eval = [_time(evaluator.run, feeds) for _ in range(max(3, args.runs // 10))]
        me = statistics.median(t_eval) * per
        print(f"onnx.reference {me:6.3f} µs/node   ortcore is {me / mo:5.1f}x faster")
    what = "scalar Adds" if args.op == "Add" else "BatchNormalizations of (1, 4)"
    if args.op != "Add" and args.symbolic_channels:
        what += ", channels symbolic"
    print(
        f"({args.nodes} {what}, optimizations off, {args.threads} threads, "
        f"{args.runs} interleaved runs; same outputs: {same})"
    )


if __name__ == "__main__":
    main()
