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
import time
from collections.abc import Callable, Sequence

__all__ = ["Runner", "timed_turns"]

Runner = Callable[[], object]
"""One run of a session."""


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
