"""The CPU provider's Conv kernel with its direct path on and off, runs
alternating in one process, as a model alternates convolutions with GEMMs.

For each shape, the Conv kernel (bias included) runs ``--runs`` times with
the direct path (``_direct_conv.h``) allowed and as many with it ruled out
(im2col and BLAS), one after the other, and the medians are printed with
their ratio. Shapes the rule in ``kernels/conv/selection.py`` does not send
to the direct path are forced onto it, to show why: run it once as is and
once with ``OPENBLAS_NUM_THREADS=1`` to see what OpenBLAS's spinning pool
costs an OpenMP kernel that runs right after a GEMM.

    python benchmarks/conv_paths.py [--threads 2] [--runs 100]
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import numpy as np
from ortcore_cpu.kernels import conv
from ortcore_cpu.provider import CPUExecutionProvider

from ep_sdk.testing import KernelKit

SHAPES: list[tuple[str, tuple[int, ...], tuple[int, ...], dict[str, Any]]] = [
    ("7x7/2 3->64 224", (1, 3, 224, 224), (64, 3, 7, 7), {"strides": [2, 2], "pads": [3] * 4}),
    ("5x5 3->32 112", (1, 3, 112, 112), (32, 3, 5, 5), {"pads": [2] * 4}),
    ("3x3/2 3->64 224 (forced)", (1, 3, 224, 224), (64, 3, 3, 3), {"strides": [2, 2]}),
    ("3x3 16->64 55 (forced)", (1, 16, 55, 55), (64, 16, 3, 3), {"pads": [1] * 4}),
]


def main() -> None:
    """Print the medians of both paths, shape by shape."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=100)
    args = ap.parse_args()
    kit = KernelKit(CPUExecutionProvider, opset=17, threads=args.threads)
    rule = conv.selection._use_direct
    rng = np.random.default_rng(0)
    print(f"{'shape':28s} {'direct ms':>10s} {'im2col ms':>10s} {'ratio':>6s}")
    for name, xs, ws, attrs in SHAPES:
        x = rng.standard_normal(xs).astype(np.float32)
        w = rng.standard_normal(ws).astype(np.float32)
        b = rng.standard_normal(ws[0]).astype(np.float32)
        compute = kit.build_node("Conv", [x, w, b], attrs, opset=17)
        times: dict[bool, list[float]] = {True: [], False: []}
        for k in range(2 * args.runs + 4):
            direct = k % 2 == 0
            conv.selection._use_direct = (lambda *a: True) if direct else (lambda *a: False)  # type: ignore[assignment]
            t0 = time.perf_counter()
            compute(x, w, b)
            if k >= 4:
                times[direct].append(time.perf_counter() - t0)
        conv.selection._use_direct = rule  # type: ignore[assignment]
        d, i = (statistics.median(times[v]) * 1e3 for v in (True, False))
        print(f"{name:28s} {d:10.3f} {i:10.3f} {d / i:6.2f}")


if __name__ == "__main__":
    main()
