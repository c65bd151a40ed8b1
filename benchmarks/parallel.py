"""ORT_SEQUENTIAL against ORT_PARALLEL in ortcore, on models with parallel branches.

The light Inception models (onnx's ``light`` folder) and a synthetic model of
two heavy independent MatMul branches. Three sessions per model:

* sequential with ``--intra-op`` threads per node;
* parallel: ``--inter-op`` branches at once, each node with ``--intra-op``
  threads (its BLAS pool included);
* sequential with ``inter-op x intra-op`` threads per node, i.e. the same
  number of cores as the parallel session spent on one node at a time.

The sessions take turns of two untimed and five timed runs (see
``timing.py``), since a session's BLAS threads spin for a while after it.

The table shows medians and the ratios: ``seq/par`` above 1 means the
parallel session is faster than the sequential one with the same threads per
node; ``wide/par`` above 1 means it also beats giving all the threads to each
node.

    python benchmarks/parallel.py [--runs 20] [--inter-op 2] [--intra-op 1]
"""

from __future__ import annotations

import argparse
import statistics
from functools import partial
from pathlib import Path

import numpy as np
import onnx
from light_models import feeds_for
from onnx import TensorProto, helper, numpy_helper
from timing import kept, timed_turns


def two_matmul_branches(n: int = 768, depth: int = 4) -> bytes:
    """x -> (MatMul x depth) -> a ; x -> (MatMul x depth) -> b ; y = a + b."""
    rng = np.random.default_rng(0)
    nodes, inits = [], []
    for br in "ab":
        prev = "x"
        for d in range(depth):
            w = f"w{br}{d}"
            inits.append(numpy_helper.from_array(rng.standard_normal((n, n), np.float32) / n, w))
            out = f"{br}{d}"
            nodes.append(helper.make_node("MatMul", [prev, w], [out], name=f"mm_{br}{d}"))
            prev = out
    nodes.append(helper.make_node("Add", [f"a{depth - 1}", f"b{depth - 1}"], ["y"], name="add"))
    graph = helper.make_graph(
        nodes,
        "two_branches",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n, n])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [n, n])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return model.SerializeToString()


def main() -> None:
    """Run the comparison and print the table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--inter-op", type=int, default=2)
    parser.add_argument("--intra-op", type=int, default=1)
    args = parser.parse_args()

    import ortcore

    light = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
    models: list[tuple[str, bytes | str]] = [
        (p.stem, str(p)) for p in sorted(light.glob("light_inception*.onnx"))
    ]
    models.append(("two_matmul_branches", two_matmul_branches()))
    print(f"inter_op_num_threads={args.inter_op} intra_op_num_threads={args.intra_op}")
    print(
        f"{'model':<24} {'sequential ms':>14} {'parallel ms':>12} {'wide ms':>10}"
        f" {'seq/par':>8} {'wide/par':>9}"
    )
    for name, model in models:
        sessions = []
        seq_mode, par_mode = (
            ortcore.ExecutionMode.ORT_SEQUENTIAL,
            ortcore.ExecutionMode.ORT_PARALLEL,
        )
        for mode, intra in (
            (seq_mode, args.intra_op),
            (par_mode, args.intra_op),
            (seq_mode, args.intra_op * args.inter_op),
        ):
            so = ortcore.SessionOptions()
            so.execution_mode = mode
            so.inter_op_num_threads = args.inter_op
            so.intra_op_num_threads = intra
            sessions.append(ortcore.InferenceSession(model, so, providers=["CPUExecutionProvider"]))
        feeds = feeds_for(sessions[0].get_inputs())
        ref = sessions[0].run(None, feeds)
        got = sessions[1].run(None, feeds)
        assert all(np.array_equal(a, b) for a, b in zip(ref, got)), name
        # turns of 5 timed runs after 2 untimed ones: the wide session's BLAS
        # threads spin after its calls and must not slow the next session down
        times = timed_turns(
            [kept(partial(sess.run, None, feeds)) for sess in sessions],
            rounds=max(1, args.runs // 5),
            settle=2,
            block=5,
        )
        seq, par, wide = (statistics.median(t) * 1000 for t in times)
        ratios = f"{seq / par:>8.2f} {wide / par:>9.2f}"
        print(f"{name:<24} {seq:>14.2f} {par:>12.2f} {wide:>10.2f} {ratios}")


if __name__ == "__main__":
    main()
