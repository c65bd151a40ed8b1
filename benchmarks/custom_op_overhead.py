"""What checking a custom kernel's outputs costs per node.

The model is ``node_overhead.py``'s chain of Adds (``--nodes`` of them, of
float32 scalars, or of vectors of ``--size`` elements; optimizations off),
run four ways in one process, interleaved:

* ``cpu Add``: the CPU provider's own Add kernel (which is never wrapped);
* ``custom, unchecked``: a custom op ``bench.ops::AddC`` whose kernel is
  ``np.add`` on the CPU provider, its compute function left unwrapped (what
  it cost before its outputs were checked);
* ``custom, outputs checked``: wrapped, checking outputs only (what a
  third-party provider's every kernel would pay if the core wrapped them);
* ``custom, as shipped``: outputs checked and array inputs passed as
  read-only views (what every custom-op kernel pays).

The table shows the median microseconds per node of each and the difference
to the unchecked custom op::

    python benchmarks/custom_op_overhead.py [--nodes 500] [--runs 40] [--size 0]
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import numpy as np
from onnx import TensorProto, helper

import ortcore
from ortcore import custom_ops, kernel_outputs

DOMAIN = "bench.ops"


def chain(nodes: int, size: int, custom: bool) -> bytes:
    """``y = x + c + ... + c`` of float32 tensors of ``size`` elements (``0``:
    scalars, as ``node_overhead.py``'s), each Add a ``bench.ops::AddC`` node
    if ``custom``."""
    shape: list[int] = [size] if size else []
    const = helper.make_tensor("c", TensorProto.FLOAT, shape, [1.0] * max(size, 1))
    graph_nodes, prev = [], "x"
    for i in range(nodes):
        out = "y" if i == nodes - 1 else f"t{i}"
        op, domain = ("AddC", DOMAIN) if custom else ("Add", "")
        graph_nodes.append(helper.make_node(op, [prev, "c"], [out], domain=domain))
        prev = out
    graph = helper.make_graph(
        graph_nodes,
        "chain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)],
        [const],
    )
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid(DOMAIN, 1)]
    return helper.make_model(graph, opset_imports=opsets).SerializeToString()


def add_op() -> ortcore.CustomOp:
    """``C = A + B`` for float tensors, kernel ``np.add`` on the CPU provider."""
    op = ortcore.custom_op(
        domain=DOMAIN,
        name="AddC",
        inputs=["A: T", "B: T"],
        outputs=["C: T"],
        types={"T": ["float"]},
        shape=lambda ins, attrs: [ortcore.TensorType(ins[0].dtype, ins[0].shape)],
    )
    op.kernel("cpu")(lambda info: lambda a, b: (np.add(a, b),))
    return op


def session(model: bytes, op: ortcore.CustomOp | None, wrap: Any) -> ortcore.InferenceSession:
    """A CPU session of ``model`` whose custom kernels are wrapped by ``wrap``
    (``custom_ops.checked_compute`` is swapped while the kernels are built:
    a benchmark's switch, not an API)."""
    so = ortcore.SessionOptions()
    so.graph_optimization_level = ortcore.GraphOptimizationLevel.ORT_DISABLE_ALL
    if op is not None:
        so.register_custom_ops(op)
    shipped = custom_ops.checked_compute
    custom_ops.checked_compute = wrap  # type: ignore[assignment]
    try:
        return ortcore.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    finally:
        custom_ops.checked_compute = shipped  # type: ignore[assignment]


def main() -> None:
    """Run the benchmark and print µs per node for each way."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--size", type=int, default=0, help="elements per tensor (0: scalars)")
    args = parser.parse_args()

    shipped = kernel_outputs.checked_compute
    op = add_op()
    custom = chain(args.nodes, args.size, True)
    ways = {
        "cpu Add": session(chain(args.nodes, args.size, False), None, shipped),
        "custom, unchecked": session(custom, op, lambda fn, *a, **k: fn),
        "custom, outputs checked": session(
            custom,
            op,
            lambda fn, specs, who, **k: shipped(fn, specs, who, **{**k, "host_inputs": False}),
        ),
        "custom, as shipped": session(custom, op, shipped),
    }
    feeds = {"x": np.zeros([args.size] if args.size else [], np.float32)}
    times: dict[str, list[float]] = {name: [] for name in ways}
    for sess in ways.values():  # warm-up, and every way computes the same
        assert (sess.run(None, feeds)[0] == args.nodes).all()
    for _ in range(args.runs):
        for name, sess in ways.items():
            t = time.perf_counter()
            sess.run(None, feeds)
            times[name].append(time.perf_counter() - t)
    per = {name: statistics.median(t) / args.nodes * 1e6 for name, t in times.items()}
    base = per["custom, unchecked"]
    for name, us in per.items():
        extra = f"   {us - base:+.3f} vs unchecked" if name.startswith("custom") else ""
        print(f"{name:24s} {us:7.3f} µs/node{extra}")
    what = f"tensors of {args.size}" if args.size else "scalars"
    print(f"({args.nodes} Adds of float32 {what}, optimizations off, {args.runs} interleaved runs)")


if __name__ == "__main__":
    main()
