"""Session creation time: ortcore (CPU provider) next to onnxruntime.

Each model is loaded from bytes (so file reading is not timed) and a session is
created ``--runs`` times per runtime, interleaved (one ortcore session, one
onnxruntime session, ...), with the same number of intra-op threads and the
default optimization level. The table shows the medians and the ratio
ortcore / onnxruntime. onnxruntime's thread spinning is turned off unless
``--ort-spinning``, as in ``light_models.py``.

    python benchmarks/session_creation.py [--models resnet50] [--runs 10] [--threads 2]
"""

from __future__ import annotations

import argparse
import statistics
import time

from light_models import light_models


def main() -> None:
    """Run the benchmark and print the table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--models", default="resnet50", help="comma-separated, or 'all'")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--ort-spinning", action="store_true", help="keep onnxruntime's default thread spinning"
    )
    args = parser.parse_args()

    import onnxruntime

    import ortcore

    wanted = {m.strip() for m in args.models.split(",") if m.strip()}
    for path in light_models():
        short = path.stem.removeprefix("light_")
        if "all" not in wanted and short not in wanted:
            continue
        model = path.read_bytes()
        so = ortcore.SessionOptions()
        so.intra_op_num_threads = args.threads
        rso = onnxruntime.SessionOptions()
        rso.intra_op_num_threads = args.threads
        rso.log_severity_level = 3
        if not args.ort_spinning:
            rso.add_session_config_entry("session.intra_op.allow_spinning", "0")
        t_ours, t_ref = [], []
        for _ in range(args.runs):
            t = time.perf_counter()
            ours = ortcore.InferenceSession(model, so, providers=["CPUExecutionProvider"])
            t_ours.append(time.perf_counter() - t)
            del ours
            t = time.perf_counter()
            ref = onnxruntime.InferenceSession(model, rso, providers=["CPUExecutionProvider"])
            t_ref.append(time.perf_counter() - t)
            del ref
        mo, mr = statistics.median(t_ours), statistics.median(t_ref)
        print(
            f"{short:<14} ortcore {mo * 1e3:8.1f} ms  onnxruntime {mr * 1e3:8.1f} ms  "
            f"ratio {mo / mr:5.2f}  ({args.runs} interleaved creations, {args.threads} threads)",
            flush=True,
        )


if __name__ == "__main__":
    main()
