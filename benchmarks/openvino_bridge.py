"""ortcore with the OpenVINO provider, next to OpenVINO called directly and onnxruntime.

Three runtimes, each alone in its own process (``timing.timed_in_processes``),
the processes taking turns:

- ``ortcore-ov``: ``ortcore.InferenceSession(model, providers=[("openvino",
  {"precision": P}), "cpu"])``: the bridge, whatever OpenVINO declines on the
  CPU provider;
- ``openvino``: ``Core.compile_model`` on the same ONNX file, with the same
  precision hint, threads and latency hint, called through an infer request;
- ``onnxruntime``: its default CPU provider (float32).

Precisions: ``f32`` (results match the CPU provider's) and ``bf16`` (what
OpenVINO's CPU plugin picks by default on a CPU with AVX512-BF16). For each,
the table shows median latencies, ortcore-ov / openvino (the bridge's cost:
target at most 1.1x) and ortcore-ov / onnxruntime, and the largest
difference of each runtime's first output from onnxruntime's float32 output,
relative to that output's largest magnitude.

``--creation`` also times session creation with a warm compiled-artifact
cache (``ortcore.cache_dir``) and a saved session (``ortcore.save_session``;
``--cache-only`` leaves it off), against ``Core.import_model`` of OpenVINO's
own exported blob, each in a fresh process after one untimed creation
(target: at most 1.2x).

Models: onnx's light zoo (with the conformance suite's seeded random weights)
and the
BERT-base / GPT-2-base shapes of ``transformers.py`` (12 layers, sequence
128, random weights).

    python benchmarks/openvino_bridge.py [--models resnet50,bert,...] [--runs 10]
        [--processes 2] [--threads 2] [--precisions f32,bf16] [--creation] [--cache-only]
        [--creation-only]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

from light_models import feeds_for, light_models
from timing import print_child_times, timed_in_processes

TRANSFORMERS = ("bert", "gpt2")


def model_path(short: str, folder: Path) -> Path:
    """The model saved once in ``folder``: a light model with the conformance
    suite's seeded random weights (onnx stores them with every weight 0.02,
    whose logits are so ill-conditioned that correct runtimes disagree), or a
    transformer shape."""
    import onnx

    path = folder / f"{short}.onnx"
    if path.exists():
        return path
    light = [p for p in light_models() if p.stem.removeprefix("light_") == short]
    if light:
        from conformance.light import load_light

        model, _ = load_light(light[0])
    elif short in TRANSFORMERS:
        from transformers import bert, gpt2

        model = (bert if short == "bert" else gpt2)()
    else:
        raise SystemExit(f"unknown model {short!r}")
    onnx.save_model(model, str(path), save_as_external_data=True, location=f"{short}.bin")
    return path


def _feeds(inputs: list[Any]) -> dict[str, np.ndarray]:
    return feeds_for(inputs)


class _OvInput:
    """An OpenVINO input port, shaped like an onnxruntime NodeArg for ``feeds_for``."""

    def __init__(self, port: Any) -> None:
        self.name = port.get_any_name()
        self.shape = [d.get_length() if d.is_static else 1 for d in port.get_partial_shape()]
        self.type = "tensor(float)"


def open_runtime(runtime: str, path: Path, precision: str, threads: int) -> tuple[Any, Any]:
    """``(run, feeds)`` for one runtime: ``run()`` computes the first output."""
    if runtime == "onnxruntime":
        import onnxruntime

        so = onnxruntime.SessionOptions()
        so.intra_op_num_threads = threads
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")
        sess = onnxruntime.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
        feeds = _feeds(sess.get_inputs())
        return (lambda: sess.run(None, feeds)[0]), feeds
    if runtime == "ortcore-ov":
        import ortcore

        so = ortcore.SessionOptions()
        so.intra_op_num_threads = threads
        cache = os.environ.get("OV_BENCH_CACHE")
        if cache:
            so.add_session_config_entry("ortcore.cache_dir", cache)
            so.add_session_config_entry(
                "ortcore.save_session", os.environ.get("OV_BENCH_SAVE_SESSION", "1")
            )
        providers: list[Any] = [("openvino", {"precision": precision}), "CPUExecutionProvider"]
        osess = ortcore.InferenceSession(str(path), so, providers=providers)
        feeds = _feeds(osess.get_inputs())
        return (lambda: osess.run(None, feeds)[0]), feeds
    import openvino

    core = openvino.Core()
    config = {
        "INFERENCE_PRECISION_HINT": precision,
        "INFERENCE_NUM_THREADS": str(threads),
        "PERFORMANCE_HINT": "LATENCY",
    }
    compiled = core.compile_model(core.read_model(str(path)), "CPU", config)
    request = compiled.create_infer_request()
    feeds = _feeds([_OvInput(p) for p in compiled.inputs])
    out = compiled.outputs[0]
    return (lambda: request.infer(feeds)[out]), feeds


def child(args: argparse.Namespace) -> None:
    """``--child RUNTIME``: time one runtime alone in this process; print JSON."""
    path = Path(args.path)
    if args.child_creation:
        print(json.dumps(creation_times(args.child, path, args.precision, args.threads, args.runs)))
        return
    run, _ = open_runtime(args.child, path, args.precision, args.threads)
    if args.save_output:
        np.save(args.save_output, np.asarray(run(), dtype=np.float32))
    print_child_times(run, args.runs, settle=2)


def creation_times(runtime: str, path: Path, precision: str, threads: int, n: int) -> list[float]:
    """Session creations with a warm cache (one untimed creation first)."""
    times = []
    if runtime == "ortcore-ov":
        for i in range(n + 1):
            t = time.perf_counter()
            open_runtime(runtime, path, precision, threads)
            if i:
                times.append(time.perf_counter() - t)
        return times
    import openvino

    core = openvino.Core()
    config = {"INFERENCE_PRECISION_HINT": precision, "INFERENCE_NUM_THREADS": str(threads)}
    blob = Path(os.environ["OV_BENCH_CACHE"]) / f"{path.stem}-{precision}.blob"
    if not blob.exists():
        blob.write_bytes(_export(core, path, config))
    data = blob.read_bytes()
    for i in range(n + 1):
        t = time.perf_counter()
        compiled = core.import_model(data, "CPU", config)
        compiled.create_infer_request()
        if i:
            times.append(time.perf_counter() - t)
    return times


def _export(core: Any, path: Path, config: dict[str, str]) -> bytes:
    import io

    compiled = core.compile_model(core.read_model(str(path)), "CPU", config)
    buf = io.BytesIO()
    compiled.export_model(buf)
    return buf.getvalue()


def _median_ms(times: list[float]) -> float:
    return statistics.median(times) * 1e3


def _difference(out: Path, ref: Path) -> float:
    got, want = np.load(out), np.load(ref)
    scale = float(np.max(np.abs(want))) or 1.0
    return float(np.max(np.abs(got.astype(np.float64) - want))) / scale


def main() -> None:
    """Time every model in every runtime and precision; print the table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--models", default="", help="comma-separated; default: all")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--precisions", default="f32,bf16")
    parser.add_argument("--creation", action="store_true", help="also time session creation")
    parser.add_argument(
        "--cache-only", action="store_true", help="warm creation without saved sessions"
    )
    parser.add_argument(
        "--creation-only", action="store_true", help="time session creation only (no latency)"
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--child-creation", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--path", help=argparse.SUPPRESS)
    parser.add_argument("--precision", default="f32", help=argparse.SUPPRESS)
    parser.add_argument("--save-output", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    shorts = (
        args.models.split(",")
        if args.models
        else [
            *(p.stem.removeprefix("light_") for p in light_models()),
            *TRANSFORMERS,
        ]
    )
    precisions = args.precisions.split(",")
    work = Path(tempfile.mkdtemp(prefix="ortcore-ov-bench-"))
    os.environ["OV_BENCH_CACHE"] = str(work / "cache")
    os.environ["OV_BENCH_SAVE_SESSION"] = "0" if args.cache_only else "1"
    (work / "cache").mkdir()
    print(
        f"{args.runs} runs x {args.processes} processes per runtime, {args.threads} threads; "
        "difference: max |out - onnxruntime f32| / max |onnxruntime f32|"
    )
    head = f"{'model':<14} {'prec':<5} {'ortcore-ov':>11} {'openvino':>9} {'ort f32':>8} "
    print(head + f"{'/ov':>6} {'/ort':>6} {'diff ortcore-ov':>16} {'diff openvino':>14}")
    ratios: dict[str, list[float]] = {p: [] for p in precisions}
    for short in shorts:
        path = model_path(short, work)
        ref_out = work / f"{short}-ort.npy"
        base = ["--path", str(path), "--threads", str(args.threads), "--runs", str(args.runs)]
        if args.creation_only:
            args.creation = True
            precisions_timed: list[str] = []
        else:
            precisions_timed = precisions
        (ort_times,) = [[]] if args.creation_only else timed_in_processes(
            __file__,
            [["--child", "onnxruntime", *base, "--save-output", str(ref_out)]],
            args.processes,
        )
        for prec in precisions_timed:
            outs = {r: work / f"{short}-{r}-{prec}.npy" for r in ("ortcore-ov", "openvino")}
            children = [
                ["--child", r, *base, "--precision", prec, "--save-output", str(outs[r])]
                for r in ("ortcore-ov", "openvino")
            ]
            ours, ov = timed_in_processes(__file__, children, args.processes)
            m_ours, m_ov, m_ort = _median_ms(ours), _median_ms(ov), _median_ms(ort_times)
            ratios[prec].append(m_ours / m_ov)
            print(
                f"{short:<14} {prec:<5} {m_ours:>9.2f}ms {m_ov:>7.2f}ms {m_ort:>6.2f}ms "
                f"{m_ours / m_ov:>6.2f} {m_ours / m_ort:>6.2f} "
                f"{_difference(outs['ortcore-ov'], ref_out):>16.2e} "
                f"{_difference(outs['openvino'], ref_out):>14.2e}",
                flush=True,
            )
        if args.creation:
            for prec in precisions[:1]:
                kids = [
                    ["--child", r, "--child-creation", *base, "--precision", prec]
                    for r in ("ortcore-ov", "openvino")
                ]
                made = timed_in_processes(__file__, kids, 1)
                c_ours, c_ov = _median_ms(made[0]), _median_ms(made[1])
                print(
                    f"{short:<14} {prec:<5} session creation, warm cache: ortcore-ov "
                    f"{c_ours:.1f} ms, openvino import_model {c_ov:.1f} ms, "
                    f"ratio {c_ours / c_ov:.2f}",
                    flush=True,
                )
    for prec, rs in ratios.items():
        if rs:
            geo = math.exp(sum(math.log(r) for r in rs) / len(rs))
            print(f"{prec}: ortcore-ov / openvino geomean {geo:.3f}, worst {max(rs):.3f}")


if __name__ == "__main__":
    main()
