"""Session creation on a very large graph: ortcore (CPU provider) next to onnxruntime.

A chain of ``--nodes`` nodes is written to a model file; each runtime then
loads it from that path in a fresh process of its own (so neither sees the
other's memory or caches), creates a CPU session with the default
optimization level, runs it once, and reports:

- the session creation time (``InferenceSession(path)``, the file read
  included), wall and CPU (the process's, all threads: on a busy machine
  the CPU time moves less than the wall time),
- the first run's time,
- the process's peak resident memory (``VmHWM``) and its baseline after
  the runtime's import, so the growth due to the session is shown apart.

Chains (``--chain``):

- ``unary``: Relu, Neg, Abs, Sigmoid, ... in turn (one input, one output each);
- ``add``: ``y = x + c_i``, each node with an initializer of its own
  (200,000 initializers, as an unrolled model has);
- ``mixed``: unary nodes and Adds of small initializers in turn.

    python benchmarks/large_graph.py [--nodes 200000] [--chain unary] [--runs 1]

The table gives the medians over ``--runs`` process pairs and the ratios
ortcore / onnxruntime.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

UNARY = ["Neg", "Neg", "Sigmoid", "Relu", "Tanh", "Abs", "Softsign", "Sin"]

CHILD = r"""
import json, resource, sys, time
import numpy as np
runtime, path, threads = sys.argv[1], sys.argv[2], int(sys.argv[3])
def rss_mb():
    # VmHWM, not ru_maxrss: Linux keeps ru_maxrss across exec, so a child
    # would report its parent's peak (the parent built the model)
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
if runtime == "ortcore":
    import ortcore as rt
else:
    import onnxruntime as rt
so = rt.SessionOptions()
so.intra_op_num_threads = threads
if runtime == "onnxruntime":
    so.log_severity_level = 3
base = rss_mb()
t, c = time.perf_counter(), time.process_time()
sess = rt.InferenceSession(path, so, providers=["CPUExecutionProvider"])
create, create_cpu = time.perf_counter() - t, time.process_time() - c
after = rss_mb()
x = np.linspace(-1, 1, 16, dtype=np.float32).reshape(1, 16)
t = time.perf_counter()
(y,) = sess.run(None, {sess.get_inputs()[0].name: x})
first_run = time.perf_counter() - t
print(json.dumps({"create_s": create, "create_cpu_s": create_cpu, "run_s": first_run,
                  "base_mb": base, "after_create_mb": after, "peak_mb": rss_mb(),
                  "checksum": float(np.asarray(y, dtype=np.float64).sum())}))
"""


def build_chain(nodes: int, chain: str) -> onnx.ModelProto:
    """A chain of ``nodes`` nodes on a (1, 16) float tensor; see the module docstring."""
    graph_nodes = []
    inits = []
    prev = "x"
    for i in range(nodes):
        out = "y" if i == nodes - 1 else f"t{i}"
        if chain == "add" or (chain == "mixed" and i % 2):
            c = f"c{i}"
            inits.append(numpy_helper.from_array(np.full((16,), 1e-6 * (i % 7), np.float32), c))
            graph_nodes.append(helper.make_node("Add", [prev, c], [out], name=f"n{i}"))
        else:
            graph_nodes.append(helper.make_node(UNARY[i % len(UNARY)], [prev], [out], name=f"n{i}"))
        prev = out
    graph = helper.make_graph(
        graph_nodes,
        f"chain_{chain}_{nodes}",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16])],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def run_child(runtime: str, path: Path, threads: int) -> dict[str, float]:
    """Create a session for ``path`` in a fresh process; return its measurements."""
    out = subprocess.run(
        [sys.executable, "-c", CHILD, runtime, str(path), str(threads)],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    """Run the benchmark and print the table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, default=200_000)
    parser.add_argument("--chain", choices=["unary", "add", "mixed"], default="unary")
    parser.add_argument("--runs", type=int, default=1, help="process pairs (medians shown)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--runtimes", default="ortcore,onnxruntime", help="comma-separated subset to run"
    )
    args = parser.parse_args()
    runtimes = [r.strip() for r in args.runtimes.split(",") if r.strip()]

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "chain.onnx"
        onnx.save(build_chain(args.nodes, args.chain), path)
        size_mb = path.stat().st_size / 2**20
        print(f"{args.chain} chain of {args.nodes} nodes, {size_mb:.1f} MB file", flush=True)
        results: dict[str, list[dict[str, float]]] = {r: [] for r in runtimes}
        for turn in range(args.runs):
            for r in runtimes:
                m = run_child(r, path, args.threads)
                results[r].append(m)
                print(
                    f"  turn {turn}: {r:<12} create {m['create_s']:7.2f} s "
                    f"(CPU {m['create_cpu_s']:6.2f} s)  "
                    f"run {m['run_s'] * 1e3:8.1f} ms  peak {m['peak_mb']:7.0f} MB "
                    f"(base {m['base_mb']:.0f} MB)  checksum {m['checksum']:.6f}",
                    flush=True,
                )

    def med(r: str, key: str) -> float:
        return statistics.median(m[key] for m in results[r])

    def growth(r: str) -> float:
        return med(r, "peak_mb") - med(r, "base_mb")

    for r in runtimes:
        print(
            f"{r:<12} create {med(r, 'create_s'):7.2f} s (CPU {med(r, 'create_cpu_s'):6.2f} s)"
            f"  first run {med(r, 'run_s') * 1e3:8.1f} ms"
            f"  peak {med(r, 'peak_mb'):7.0f} MB  growth {growth(r):7.0f} MB"
        )
    if {"ortcore", "onnxruntime"} <= set(runtimes):
        ours, theirs = "ortcore", "onnxruntime"
        print(
            "ratio ortcore/onnxruntime: create "
            f"{med(ours, 'create_s') / med(theirs, 'create_s'):.2f}"
            f" (CPU {med(ours, 'create_cpu_s') / med(theirs, 'create_cpu_s'):.2f}), "
            f"peak memory {med(ours, 'peak_mb') / med(theirs, 'peak_mb'):.2f}, "
            f"memory growth {growth(ours) / max(1.0, growth(theirs)):.2f}"
        )


if __name__ == "__main__":
    main()
