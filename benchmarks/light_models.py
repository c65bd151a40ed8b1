"""Latency of onnx's light model zoo: ortcore (CPU provider) next to onnxruntime.

Both runtimes get the same number of intra-op threads; runs are interleaved
(one ortcore run, one onnxruntime run, ...) so machine noise hits both alike.
The table shows medians and the ratio ortcore / onnxruntime, then the geomean.
onnxruntime's thread spinning is turned off (unless ``--ort-spinning``) so
that its idle threads do not steal the cores from the interleaved ortcore run.
With ``--ort-spinning`` onnxruntime keeps its default, and its session is
created anew for each turn and dropped after it, so that its spinning threads
are gone during ortcore's turn; ``--block 5 --settle 1`` then gives each turn
one untimed and five timed runs (see ``timing.py``). ``--processes 3`` goes
further: each runtime runs alone in a process of its own (``--runs`` timed
runs after warm-up), the processes taking turns three times, so that neither
runtime's threads can touch the other's timings; with ``--ort-spinning`` this
compares the two as a user gets them by default, and each row adds the
range of the turns' own ratios (each ortcore process's median over the
onnxruntime process's after it), which shows how much the machine moved.

    python benchmarks/light_models.py [--threads 2] [--runs 10] [--models resnet50,vgg19]
                                      [--reference] [--ort-spinning] [--settle N] [--block N]
                                      [--processes N]

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
from typing import Any

import numpy as np
import onnx
from timing import (
    Runner,
    blas_kernels,
    kept,
    print_child_times,
    timed_in_processes,
    timed_turns,
)


def light_models() -> list[Path]:
    """Every model of onnx's ``light`` folder."""
    folder = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
    return sorted(folder.glob("light_*.onnx"))


def feeds_for(inputs: list) -> dict[str, np.ndarray]:
    """onnx's backend-test input for light models (the one ``ortcore run`` feeds)."""
    from ortcore.cli import backend_test_input

    return {a.name: backend_test_input(a) for a in inputs}


def time_pair(
    ours: object, path: str, rso: object, feeds: dict[str, np.ndarray], args: argparse.Namespace
) -> list[list[float]]:
    """Timed runs of ortcore's session and of onnxruntime's, taking turns."""
    import onnxruntime

    cpu = ["CPUExecutionProvider"]
    ref = None if args.ort_spinning else onnxruntime.InferenceSession(path, rso, providers=cpu)

    def open_ref() -> Runner:
        sess = ref if ref is not None else onnxruntime.InferenceSession(path, rso, providers=cpu)
        return lambda: sess.run(None, feeds)

    def run_ours() -> object:
        return ours.run(None, feeds)  # type: ignore[attr-defined]

    block = max(args.block, 1)
    return timed_turns(
        [kept(run_ours), open_ref],
        rounds=max(1, -(-args.runs // block)),
        settle=args.settle,
        block=block,
    )


def child(args: argparse.Namespace) -> None:
    """``--child RUNTIME``: time one runtime alone in this process; print JSON."""
    (path,) = [p for p in light_models() if p.stem.removeprefix("light_") == args.models]
    if args.child == "ortcore":
        import ortcore

        so = ortcore.SessionOptions()
        so.intra_op_num_threads = args.threads
        sess = ortcore.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    else:
        import onnxruntime

        rso = onnxruntime.SessionOptions()
        rso.intra_op_num_threads = args.threads
        if not args.ort_spinning:
            rso.add_session_config_entry("session.intra_op.allow_spinning", "0")
        sess = onnxruntime.InferenceSession(str(path), rso, providers=["CPUExecutionProvider"])
    feeds = feeds_for(sess.get_inputs())
    print_child_times(lambda: sess.run(None, feeds), args.runs, settle=max(args.settle, 2))


def time_in_processes(short: str, args: argparse.Namespace) -> list[list[float]]:
    """Timed runs of each runtime alone in its own process, the processes
    taking turns ``--processes`` times (ortcore first, then onnxruntime)."""
    common = ["--models", short, "--threads", str(args.threads), "--runs", str(args.runs)]
    common += ["--settle", str(args.settle)] + (["--ort-spinning"] * args.ort_spinning)
    children = [["--child", runtime, *common] for runtime in ("ortcore", "onnxruntime")]
    return timed_in_processes(__file__, children, args.processes)


def softmax_inputs_agree(
    path: Path, feeds: dict[str, np.ndarray], so: Any, rso: Any
) -> bool | None:
    """For a model whose output is its last node's Softmax: whether both
    runtimes (sessions made with ortcore's options ``so`` and onnxruntime's
    ``rso``) give the same Softmax input (the logits), ``None`` for other
    models. A Softmax of logits a few ulps apart but huge (light_squeezenet's
    are all about 9.5e9, one ulp 1024) puts all its weight on whichever are
    largest after rounding, so its output can differ where the logits agree
    to 1e-7."""
    import onnxruntime

    import ortcore

    model = onnx.load(str(path))
    last = model.graph.node[-1]
    if last.op_type != "Softmax" or [o.name for o in model.graph.output] != list(last.output):
        return None
    del model.graph.node[-1]
    del model.graph.output[:]
    model.graph.output.append(onnx.helper.make_tensor_value_info(last.input[0], 1, None))
    blob = model.SerializeToString()
    ours = ortcore.InferenceSession(blob, so, providers=["CPUExecutionProvider"])
    ref = onnxruntime.InferenceSession(blob, rso, providers=["CPUExecutionProvider"])
    a, b = ours.run(None, feeds)[0], ref.run(None, feeds)[0]
    return bool(np.allclose(a, b, rtol=1e-5, atol=1e-5))


def turn_ratios(ours: list[float], ref: list[float], runs: int) -> list[float]:
    """Per turn of ``--processes``, the median of ortcore's ``runs`` timed
    runs over onnxruntime's in the turn that followed it: how far the
    machine moved the ratio from one pair of processes to the next."""
    turns = min(len(ours), len(ref)) // runs
    return [
        statistics.median(ours[k * runs : (k + 1) * runs])
        / statistics.median(ref[k * runs : (k + 1) * runs])
        for k in range(turns)
    ]


def method(args: argparse.Namespace) -> str:
    """How the runs were timed, for the summary line."""
    spin = "onnxruntime spinning" if args.ort_spinning else "onnxruntime not spinning"
    if args.processes:
        return f"{args.runs} runs in each of {args.processes} processes per runtime, {spin}"
    return f"{args.runs} interleaved runs in one process, {spin}"


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
    parser.add_argument(
        "--settle",
        type=int,
        default=0,
        help="untimed runs at the start of each turn (absorbing what the other runtime left)",
    )
    parser.add_argument("--block", type=int, default=1, help="timed runs per turn")
    parser.add_argument(
        "--processes",
        type=int,
        default=0,
        help="time each runtime alone in its own process, this many turns each "
        "(--runs timed runs per process)",
    )
    parser.add_argument("--child", choices=["ortcore", "onnxruntime"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return

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
        # Interleaved runs: onnxruntime's pool spins as long as its session
        # lives and would steal the cores from the ortcore run that follows;
        # with spinning off each runtime gets the machine to itself during its
        # own run. With --ort-spinning the session keeps onnxruntime's default
        # and is created anew for each turn and dropped after it.
        if not args.ort_spinning:
            rso.add_session_config_entry("session.intra_op.allow_spinning", "0")
        t0 = time.perf_counter()
        ref = onnxruntime.InferenceSession(str(path), rso, providers=["CPUExecutionProvider"])
        create_ref = time.perf_counter() - t0
        feeds = feeds_for(ours.get_inputs())
        a = ours.run(None, feeds)[0]
        b = ref.run(None, feeds)[0]
        same: bool | str = bool(np.allclose(a, b, rtol=1e-3, atol=1e-5))
        if not same:
            logits = softmax_inputs_agree(path, feeds, so, rso)
            if logits is not None:
                same = f"False (the last Softmax's inputs: {logits})"
        del ref  # time_pair makes its own (one per turn when it spins)
        if args.processes:
            t_ours, t_ref = time_in_processes(short, args)
        else:
            t_ours, t_ref = time_pair(ours, str(path), rso, feeds, args)
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
        spread = ""
        if args.processes:
            turns = turn_ratios(t_ours, t_ref, args.runs)
            spread = f"turns {min(turns):4.2f}-{max(turns):4.2f}  " if turns else ""
        print(
            f"{short:<14} ortcore {mo * 1e3:8.2f} ms  onnxruntime {mr * 1e3:8.2f} ms  "
            f"ratio {mo / mr:5.2f}  {spread}create {create_ours:6.2f}s/{create_ref:6.2f}s  "
            f"{versus}same outputs: {same}",
            flush=True,
        )
    if rows:
        geo = math.exp(sum(math.log(r[3]) for r in rows) / len(rows))
        print(
            f"geomean latency ratio ortcore/onnxruntime: {geo:.2f} "
            f"({len(rows)} models, {args.threads} threads, {method(args)}, "
            f"{os.cpu_count()} cores, {blas_kernels()})"
        )
        if args.reference:
            geo_ref = math.exp(sum(math.log(r[7]) for r in rows) / len(rows))
            print(f"geomean speed-up of ortcore over onnx.reference: {geo_ref:.1f}x")


if __name__ == "__main__":
    main()
