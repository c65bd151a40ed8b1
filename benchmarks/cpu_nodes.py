"""Time the CPU provider's kernels against onnxruntime, node by node.

For every distinct (op, input shapes, attributes) of the chosen ops in a model,
build a one-node model, run it with onnxruntime (2 threads by default) and
with our kernel, and print the best-of-N times.

    python benchmarks/bench_nodes.py MODEL.onnx [--ops Conv,MaxPool] [--threads 2]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper, shape_inference
from ortcore_cpu.provider import CPUExecutionProvider

from ep_sdk.testing import KernelKit


def _best(fn: Callable[[], object], repeat: int) -> float:
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times) * 1000


def _time_onnxruntime(
    model: onnx.ModelProto, inputs: list[np.ndarray], threads: int, repeat: int
) -> float:
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    feeds = {f"x{i}": x for i, x in enumerate(inputs)}
    return _best(lambda: sess.run(None, feeds), repeat)


def main() -> None:
    """Parse arguments and print a table of timings."""
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--ops", default="Conv,MaxPool,AveragePool")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=10)
    args = ap.parse_args()
    model = shape_inference.infer_shapes(onnx.load(args.model))
    opset = model.opset_import[0].version
    shapes = {
        vi.name: [d.dim_value for d in vi.type.tensor_type.shape.dim]
        for vi in [*model.graph.input, *model.graph.value_info]
    }
    shapes.update({t.name: list(t.dims) for t in model.graph.initializer})
    seen: dict[str, int] = {}
    rng = np.random.default_rng(0)
    total_ours = total_ort = 0.0
    kit = KernelKit(CPUExecutionProvider, threads=args.threads)
    for node in model.graph.node:
        if node.op_type not in args.ops.split(","):
            continue
        in_shapes = [shapes[i] for i in node.input if i]
        key = f"{node.op_type} {in_shapes} {[str(a).replace(chr(10), ' ') for a in node.attribute]}"
        if key in seen:
            seen[key] += 1
            continue
        seen[key] = 1
        inputs = [rng.random(s, dtype=np.float32) for s in in_shapes]
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        one = helper.make_node(node.op_type, [f"x{i}" for i in range(len(inputs))], ["y"], **attrs)
        g = helper.make_graph(
            [one], "g",
            [helper.make_tensor_value_info(f"x{i}", 1, s) for i, s in enumerate(in_shapes)],
            [helper.make_tensor_value_info("y", 1, None)],
        )  # fmt: skip
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
        m.ir_version = 8
        compute = kit.build_node(node.op_type, inputs, attrs, opset=opset)
        t_us = _best(lambda: compute(*inputs), args.repeat)  # noqa: B023
        # onnxruntime's pool threads spin after a run: time ours first.
        t_ort = _time_onnxruntime(m, inputs, args.threads, args.repeat)
        seen[key] = 1
        total_ours += t_us
        total_ort += t_ort
        short = {k: v for k, v in attrs.items() if k in ("kernel_shape", "strides", "group")}
        print(
            f"{node.op_type:12s} {in_shapes!s:48s} {short!s:52s} "
            f"ours {t_us:7.3f} ort {t_ort:7.3f} x{t_us / t_ort:5.2f}"
        )
    print(f"distinct nodes: ours {total_ours:.1f} ms, onnxruntime {total_ort:.1f} ms")


if __name__ == "__main__":
    main()
