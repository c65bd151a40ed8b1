"""Timing shared by the benchmark scripts: turns in rounds, with settling runs.

Several sessions timed in one process share the cores, and a runtime's idle
threads may keep them busy after its run: onnxruntime's intra-op pool spins
for as long as the session lives (unless ``session.intra_op.allow_spinning``
is ``"0"``), and OpenBLAS's threads busy-wait for a while after each call.
Timing one session right after another would charge it for the other's
spinning. So the sessions take turns, round after round (machine noise hits
all alike): a turn opens its session's runner, makes ``settle`` untimed runs
that absorb what the previous turn left spinning, times ``block`` runs, and
drops the runner. An opener that creates the session anew each turn (as
``light_models.py --ort-spinning`` does for onnxruntime) lets the session's
threads go away with it before the next turn.
"""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import time
from collections.abc import Callable, Sequence

__all__ = [
    "Runner",
    "blas_kernels",
    "kept",
    "print_child_times",
    "timed_in_processes",
    "timed_turns",
]

Runner = Callable[[], object]
"""One run of a session."""


def blas_kernels() -> str:
    """The BLAS numpy (and so ortcore's CPU provider) calls, and the kernels it
    chose, e.g. ``"OpenBLAS SkylakeX kernels"``. Its GEMMs' speed depends on
    them: ``OPENBLAS_CORETYPE=Haswell`` on an AVX-512 CPU halves it, so the
    figure belongs with the numbers."""
    import numpy  # noqa: F401  (threadpoolctl sees only libraries already loaded)
    from threadpoolctl import threadpool_info

    found = [
        f"{i.get('internal_api', '?')} {i.get('architecture', '?')} kernels"
        for i in threadpool_info()
        if i.get("user_api") == "blas"
    ]
    return ", ".join(found) or "no BLAS found"


def kept(run: Runner) -> Callable[[], Runner]:
    """An opener for :func:`timed_turns` that hands out the same runner each turn."""
    return lambda: run


def timed_turns(
    openers: Sequence[Callable[[], Runner]], rounds: int, settle: int = 0, block: int = 1
) -> list[list[float]]:
    """Time each session ``rounds * block`` times, the sessions taking turns.

    Args:
        openers: per session, a callable returning its runner for one turn
            (the same one each time, or a fresh session's).
        rounds: how many turns each session gets.
        settle: untimed runs at the start of each turn.
        block: timed runs per turn.

    Returns:
        per session, its timed durations in seconds.
    """
    times: list[list[float]] = [[] for _ in openers]
    clock = time.perf_counter
    for _ in range(rounds):
        for k, opener in enumerate(openers):
            run = opener()
            for _ in range(settle):
                run()
            for _ in range(block):
                t = clock()
                run()
                times[k].append(clock() - t)
            del run
            gc.collect()
    return times


def timed_in_processes(
    script: str, children: Sequence[Sequence[str]], rounds: int
) -> list[list[float]]:
    """Time sessions each alone in a fresh process, the processes taking turns.

    ``python script *child_args`` must print, as its last line, the JSON list
    of its timed durations (see :func:`print_child_times`). Nothing of one
    runtime (its threads, its allocator) is in the process that times the
    other.

    Returns:
        per child, the durations of all its rounds.
    """
    times: list[list[float]] = [[] for _ in children]
    for _ in range(rounds):
        for k, child_args in enumerate(children):
            cmd = [sys.executable, script, *child_args]
            out = subprocess.run(cmd, capture_output=True, text=True)
            if out.returncode != 0:
                raise RuntimeError(f"{' '.join(cmd)} failed:\n{out.stderr}")
            times[k] += json.loads(out.stdout.strip().splitlines()[-1])
    return times


def print_child_times(run: Runner, runs: int, settle: int = 2) -> None:
    """In a child process of :func:`timed_in_processes`: ``settle`` warm-up
    runs, then ``runs`` timed ones, printed as a JSON list."""
    (times,) = timed_turns([kept(run)], 1, settle=settle, block=runs)
    print(json.dumps(times))
