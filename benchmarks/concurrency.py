"""Throughput under concurrency and latency on a busy machine: ortcore next to onnxruntime.

Two measurements, each runtime alone in a process of its own (the processes
take turns ``--rounds`` times), both with each runtime's default session
settings unless ``--threads`` is given:

* ``threads``: ``--callers`` Python threads share one session and each makes
  ``--runs`` runs; the figure is runs per second over the whole burst.
* ``busy``: a CPU-bound process (one busy loop per ``--busy`` core) runs
  beside the session; the figure is the median single-run latency.

    python benchmarks/concurrency.py [--models resnet50,bert] [--callers 8] [--runs 200]
                                     [--busy 1] [--latency-runs 20] [--rounds 1]

``resnet50`` is onnx's light ResNet-50; ``bert`` is one BERT-base encoder
layer (hidden 768, 12 heads, seq 128) from ``transformers.py``.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).parent


def _model(name: str) -> bytes:
    """The model's bytes."""
    if name == "resnet50":
        from light_models import light_models

        return next(p for p in light_models() if p.stem == "light_resnet50").read_bytes()
    if name == "bert":
        from transformers import bert

        return bert(seq=128, layers=1).SerializeToString()
    raise SystemExit(f"unknown model {name!r}: resnet50 or bert")


def _feeds(name: str, sess: object) -> dict[str, np.ndarray]:
    """The model's feeds (the same for both runtimes)."""
    if name == "resnet50":
        from light_models import feeds_for

        return feeds_for(sess.get_inputs())  # type: ignore[attr-defined]
    from transformers import HIDDEN

    rng = np.random.default_rng(2)
    return {"input": rng.standard_normal((1, 128, HIDDEN)).astype(np.float32)}


def _session(runtime: str, data: bytes, threads: int) -> object:
    if runtime == "ortcore":
        import ortcore

        so = ortcore.SessionOptions()
        so.intra_op_num_threads = threads
        return ortcore.InferenceSession(data, so, providers=["CPUExecutionProvider"])
    import onnxruntime

    rso = onnxruntime.SessionOptions()
    rso.intra_op_num_threads = threads
    rso.log_severity_level = 3
    return onnxruntime.InferenceSession(data, rso, providers=["CPUExecutionProvider"])


def _burn() -> None:
    while True:
        pass


def child(args: argparse.Namespace) -> None:
    """One runtime, one model, one measurement; prints a JSON figure."""
    sess = _session(args.runtime, _model(args.model), args.threads)
    feeds = _feeds(args.model, sess)
    for _ in range(3):
        sess.run(None, feeds)  # type: ignore[attr-defined]
    if args.mode == "threads":
        barrier = threading.Barrier(args.callers + 1)

        def caller() -> None:
            barrier.wait()
            for _ in range(args.runs):
                sess.run(None, feeds)  # type: ignore[attr-defined]

        workers = [threading.Thread(target=caller) for _ in range(args.callers)]
        for w in workers:
            w.start()
        barrier.wait()
        t = time.perf_counter()
        for w in workers:
            w.join()
        took = time.perf_counter() - t
        print(json.dumps({"runs_per_s": args.callers * args.runs / took}))
        return
    burners = [multiprocessing.Process(target=_burn, daemon=True) for _ in range(args.busy)]
    for b in burners:
        b.start()
    try:
        time.sleep(0.5)
        times = []
        for _ in range(args.latency_runs):
            t = time.perf_counter()
            sess.run(None, feeds)  # type: ignore[attr-defined]
            times.append(time.perf_counter() - t)
    finally:
        for b in burners:
            b.terminate()
    print(json.dumps({"median_ms": statistics.median(times) * 1e3}))


def _measure(args: argparse.Namespace, runtime: str, model: str, mode: str) -> dict[str, float]:
    cmd = [
        sys.executable,
        __file__,
        "--child",
        runtime,
        "--model",
        model,
        "--mode",
        mode,
        "--callers",
        str(args.callers),
        "--runs",
        str(args.runs),
        "--busy",
        str(args.busy),
        "--latency-runs",
        str(args.latency_runs),
        "--threads",
        str(args.threads),
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=HERE)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    """Parse the command line; run the children and print the table."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default="resnet50,bert")
    p.add_argument("--callers", type=int, default=8)
    p.add_argument("--runs", type=int, default=200, help="runs per caller thread")
    p.add_argument("--busy", type=int, default=1, help="busy-loop processes beside the session")
    p.add_argument("--latency-runs", type=int, default=20)
    p.add_argument("--threads", type=int, default=0, help="intra_op_num_threads (0: default)")
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--modes", default="threads,busy")
    p.add_argument("--child", choices=["ortcore", "onnxruntime"], help=argparse.SUPPRESS)
    p.add_argument("--model", help=argparse.SUPPRESS)
    p.add_argument("--mode", help=argparse.SUPPRESS)
    p.add_argument("--runtime", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        args.runtime = args.child
        child(args)
        return
    print(f"{os.cpu_count()} cores; each runtime alone in its own process, {args.rounds} round(s)")
    for model in args.models.split(","):
        for mode in args.modes.split(","):
            figures: dict[str, list[float]] = {"ortcore": [], "onnxruntime": []}
            for _ in range(args.rounds):
                for runtime in figures:
                    figures[runtime].append(
                        next(iter(_measure(args, runtime, model, mode).values()))
                    )
            ours, ref = (statistics.median(figures[r]) for r in ("ortcore", "onnxruntime"))
            if mode == "threads":
                print(
                    f"{model:<9} {args.callers} threads x {args.runs} runs: ortcore "
                    f"{ours:8.1f} runs/s  onnxruntime {ref:8.1f} runs/s  "
                    f"onnxruntime/ortcore {ref / ours:5.2f}",
                    flush=True,
                )
            else:
                print(
                    f"{model:<9} latency beside {args.busy} busy process(es): ortcore "
                    f"{ours:8.2f} ms  onnxruntime {ref:8.2f} ms  ratio {ours / ref:5.2f}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
