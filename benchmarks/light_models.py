"""Latency of onnx's light model zoo: ortcore (CPU provider) next to onnxruntime.

Both runtimes get the same number of intra-op threads; runs are interleaved
(one ortcore run, one onnxruntime run, ...) so machine noise hits both alike.
The table shows medians and the ratio ortcore / onnxruntime, then the geomean.
onnxruntime's thread spinning is turned off (unless ``--ort-spinning``) so
that its idle threads do not steal the cores from the interleaved ortcore run.

    python benchmarks/light_models.py [--threads 2] [--runs 10] [--models resnet50,vgg19]
                                      [--reference]

With ``--reference`` onnx's reference evaluator runs each model too (once: it
is slow) and the table adds the speed-up of ortcore over it.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import time
from pathlib import Path

import numpy as np
import onnx


def light_models() -> list[Path]:
    """Every model of onnx's ``light`` folder."""
    folder = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
    return sorted(folder.glob("light_*.onnx"))


def feeds_for(inputs: list) -> dict[str, np.ndarray]:
    """onnx's backend-test input for light models (the one ``ortcore run`` feeds)."""
    from ortcore.cli import backend_test_input

    return {a.name: backend_test_input(a) for a in inputs}


def main() -> None:
    """Run the benchmark and print the table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--models", default="", help="comma-separated subset, e.g. resnet50")
    parser.add_argument("--reference", action="store_true", help="also time onnx.reference")
    parser.add_argument(
        "--ort-spinning", action="store_true", help="keep onnxruntime's default thread spinning"
    )
    args = parser.parse_args()

    import onnxruntime

    import ortcore

    wanted = {m.strip() for m in args.models.split(",") if m.strip()}
    rows = []
    for path in light_models():
        short = path.stem.removeprefix("light_")
        if wanted and short not in wanted:
            continue
        so = ortcore.SessionOptions()
        so.intra_op_num_threads = args.threads
        t0 = time.perf_counter()
        ours = ortcore.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
        create_ours = time.perf_counter() - t0
        rso = onnxruntime.SessionOptions()
        rso.intra_op_num_threads = args.threads
        rso.log_severity_level = 3
        # Interleaved runs: onnxruntime's pool spins after each run and would
        # steal the cores from the ortcore run that follows; with spinning off
        # each runtime gets the machine to itself during its own run.
        if not args.ort_spinning:
            rso.add_session_config_entry("session.intra_op.allow_spinning", "0")
        t0 = time.perf_counter()
        ref = onnxruntime.InferenceSession(str(path), rso, providers=["CPUExecutionProvider"])
        create_ref = time.perf_counter() - t0
        feeds = feeds_for(ours.get_inputs())
        a = ours.run(None, feeds)[0]
        b = ref.run(None, feeds)[0]
        same = bool(np.allclose(a, b, rtol=1e-3, atol=1e-5))
        t_ours, t_ref = [], []
        for _ in range(args.runs):
            t = time.perf_counter()
            ours.run(None, feeds)
            t_ours.append(time.perf_counter() - t)
            t = time.perf_counter()
            ref.run(None, feeds)
            t_ref.append(time.perf_counter() - t)
        mo, mr = statistics.median(t_ours), statistics.median(t_ref)
        speedup = float("nan")
        if args.reference:
            from onnx.reference import ReferenceEvaluator

            evaluator = ReferenceEvaluator(str(path))
            t = time.perf_counter()
            evaluator.run(None, feeds)
            speedup = (time.perf_counter() - t) / mo
        rows.append((short, mo, mr, mo / mr, create_ours, create_ref, same, speedup))
        versus = f"vs reference x{speedup:6.1f}  " if args.reference else ""
        print(
            f"{short:<14} ortcore {mo * 1e3:8.2f} ms  onnxruntime {mr * 1e3:8.2f} ms  "
            f"ratio {mo / mr:5.2f}  create {create_ours:6.2f}s/{create_ref:6.2f}s  "
            f"{versus}same outputs: {same}",
            flush=True,
        )
    if rows:
        geo = math.exp(sum(math.log(r[3]) for r in rows) / len(rows))
        print(
            f"geomean latency ratio ortcore/onnxruntime: {geo:.2f} "
            f"({len(rows)} models, {args.threads} threads, {args.runs} interleaved runs, "
            f"{os.cpu_count()} cores)"
        )
        if args.reference:
            geo_ref = math.exp(sum(math.log(r[7]) for r in rows) / len(rows))
            print(f"geomean speed-up of ortcore over onnx.reference: {geo_ref:.1f}x")


if __name__ == "__main__":
    main()
