"""Which nodes gain from more threads: each node's time on one thread and on
``--threads``, ortcore next to onnxruntime, from both runtimes' profilers.

For one light model the script profiles ortcore on one thread and on
``--threads`` threads (a session each, ``--runs`` runs, the first
``--warmup`` left out), then onnxruntime the same way, all in this process
(onnxruntime's spinning off, so that its idle threads leave the cores to
ours). It prints ortcore's nodes that lose the most to imperfect scaling
(the time on N threads less the time on one divided by N), with their op,
input shape and speed-up, then each runtime's time per op type on one and on
N threads. A node that takes as long on two threads as on one (a numpy
kernel, a loop left serial) shows at the top; that is how LRN's numpy kernel
was found. onnxruntime renames nodes (its NCHWc rewrites), so it is compared
per op type.

    python benchmarks/node_scaling.py [--model inception_v1] [--threads 2] [--runs 15] [--top 15]
"""

from __future__ import annotations

import argparse
import collections
import os
import statistics
import sys
from pathlib import Path
from typing import Any

import onnx
from onnx import shape_inference

from ortcore.profiling import load_trace

sys.path.insert(0, str(Path(__file__).parent))
from light_models import feeds_for, light_models


def _events(path: str) -> list[dict[str, Any]]:
    """The kernel events of a profile file, which is then removed."""
    events = load_trace(path)
    os.remove(path)
    return [e for e in events if e.get("cat") == "Node" and e["name"].endswith("_kernel_time")]


def _profile(runtime: str, model: Path, threads: int, runs: int, warmup: int) -> dict[str, Any]:
    """Median microseconds per node name and the op each node ran."""
    if runtime == "ortcore":
        import ortcore as rt
    else:
        import onnxruntime as rt  # type: ignore[no-redef]
    so = rt.SessionOptions()
    so.intra_op_num_threads = threads
    so.enable_profiling = True
    if runtime == "onnxruntime":
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    sess = rt.InferenceSession(str(model), so, providers=["CPUExecutionProvider"])
    feeds = feeds_for(sess.get_inputs())
    for _ in range(warmup + runs):
        sess.run(None, feeds)
    times: dict[str, list[float]] = collections.defaultdict(list)
    ops: dict[str, str] = {}
    for e in _events(sess.end_profiling()):
        name = e["name"].removesuffix("_kernel_time")
        times[name].append(float(e["dur"]))
        ops[name] = str(e.get("args", {}).get("op_name", "?"))
    medians = {k: statistics.median(v[warmup:] or v) for k, v in times.items()}
    return {"us": medians, "ops": ops}


def _shapes(model: Path) -> dict[str, str]:
    """Each node's first input shape, from onnx's shape inference."""
    m = shape_inference.infer_shapes(onnx.load(str(model)))
    dims = {
        v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
        for v in [*m.graph.value_info, *m.graph.input, *m.graph.output]
    }
    return {n.name: str(dims.get(n.input[0], "?")) for n in m.graph.node if n.input}


def _per_op(prof: dict[str, Any]) -> collections.Counter[str]:
    """Microseconds per op type of one :func:`_profile`."""
    total: collections.Counter[str] = collections.Counter()
    for name, us in prof["us"].items():
        total[prof["ops"][name]] += us
    return total


def main() -> None:
    """Profile both runtimes on one and N threads and print the tables."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="inception_v1", help="a light model, e.g. squeezenet")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--top", type=int, default=15)
    args = ap.parse_args()
    found = [p for p in light_models() if p.stem.removeprefix("light_") == args.model]
    if not found:
        names = ", ".join(p.stem.removeprefix("light_") for p in light_models())
        sys.exit(f"no light model {args.model!r}: one of {names}")
    model, n = found[0], args.threads
    shapes = _shapes(model)
    ours = {t: _profile("ortcore", model, t, args.runs, args.warmup) for t in (1, n)}
    ref = {t: _profile("onnxruntime", model, t, args.runs, args.warmup) for t in (1, n)}
    one, many = ours[1]["us"], ours[n]["us"]
    lost = sorted(((many[k] - one.get(k, many[k]) / n, k) for k in many), reverse=True)
    print(f"{args.model}: ortcore's nodes losing most on {n} threads (us)")
    print(f"{'node':24s} {'op':22s} {'1 thread':>9s} {f'{n} threads':>10s} {'speed-up':>8s}  input")
    for _, k in lost[: args.top]:
        a, b = one.get(k, float("nan")), many[k]
        op = ours[n]["ops"].get(k, "?")
        shape = shapes.get(k.removesuffix("_fused"), "")
        print(f"{k:24s} {op:22s} {a:9.0f} {b:10.0f} {a / b:8.2f}  {shape}")
    print(f"\ntime per op type (ms): 1 thread -> {n} threads")
    for label, profs in (("ortcore", ours), ("onnxruntime", ref)):
        a, b = _per_op(profs[1]), _per_op(profs[n])
        print(f"  {label:12s} total {sum(a.values()) / 1e3:.2f} -> {sum(b.values()) / 1e3:.2f}")
        for op, us in b.most_common(8):
            print(f"    {op:24s} {a.get(op, 0) / 1e3:8.2f} -> {us / 1e3:8.2f}")


if __name__ == "__main__":
    main()
