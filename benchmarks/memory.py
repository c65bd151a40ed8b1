"""Peak resident memory while running a light model: ortcore next to onnxruntime.

Each runtime runs in a fresh subprocess (so neither sees the other's memory):
it creates a session, runs the model a few times, and reports the process's
peak resident set size (``ru_maxrss``) and the baseline before the session.

    python benchmarks/memory.py [--model vgg19] [--threads 2] [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

CHILD = r"""
import json, resource, sys
import numpy as np
runtime, path, threads, runs = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
def rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
if runtime == "ortcore":
    import ortcore as rt
else:
    import onnxruntime as rt
so = rt.SessionOptions()
so.intra_op_num_threads = threads
base = rss_mb()
sess = rt.InferenceSession(path, so, providers=["CPUExecutionProvider"])
after_create = rss_mb()
feeds = {}
for a in sess.get_inputs():
    shape = [d if isinstance(d, int) else 1 for d in a.shape]
    n = int(np.prod(shape))
    feeds[a.name] = (np.arange(n).reshape(shape) / n).astype(np.float32)
for _ in range(runs):
    sess.run(None, feeds)
print(json.dumps({"base_mb": base, "after_create_mb": after_create, "peak_mb": rss_mb()}))
"""


def measure(runtime: str, path: str, threads: int, runs: int) -> dict[str, float]:
    """Peak RSS figures of one runtime in a fresh interpreter."""
    out = subprocess.run(
        [sys.executable, "-c", CHILD, runtime, path, str(threads), str(runs)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return dict(json.loads(out.strip().splitlines()[-1]))


def main() -> None:
    """Measure both runtimes and print the ratio of peak memory."""
    from light_models import light_models

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", default="vgg19")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    path = next(str(p) for p in light_models() if p.stem == f"light_{args.model}")
    ours = measure("ortcore", path, args.threads, args.runs)
    ref = measure("onnxruntime", path, args.threads, args.runs)
    for name, m in (("ortcore", ours), ("onnxruntime", ref)):
        print(
            f"{name:<12} peak {m['peak_mb']:8.1f} MB  (interpreter+imports {m['base_mb']:.1f} MB, "
            f"after session creation {m['after_create_mb']:.1f} MB)"
        )
    ratio = ours["peak_mb"] / ref["peak_mb"]
    print(f"peak RSS ratio ortcore/onnxruntime on {args.model}: {ratio:.2f}")


if __name__ == "__main__":
    main()
