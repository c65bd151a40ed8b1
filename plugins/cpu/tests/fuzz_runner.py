"""How :mod:`test_fuzz_native` judges its cases: in child processes
(``fuzz_worker.py``), a new one after a crash or hang, with the report of a
failure and the command line that reruns it.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from fuzz_draw import Case

WORKER = Path(__file__).with_name("fuzz_worker.py")
EXAMPLES = int(os.environ.get("ORTCORE_FUZZ_EXAMPLES", "0"))
"""Cases per operator; 0 takes each operator's default (sized for CI)."""
SEED = os.environ.get("ORTCORE_FUZZ_SEED")
"""Unset: derandomized draws (the same cases every run); set: that seed."""
START_TIMEOUT = 120.0
"""Seconds a worker may take to import ortcore and start its first case."""
ORTCORE_TIMEOUT = 60.0
"""Seconds ortcore may take on one case (session creation and run)."""
ORACLE_TIMEOUT = 60.0
"""Seconds the oracles may take on one case."""
FAILURES = frozenset({"raw", "mismatch", "spurious", "crash", "hang", "missing", "harness"})

# -- running cases in child processes ------------------------------------------------


def _reader(stream: Any, out: queue.Queue[str | None]) -> None:
    for line in stream:
        out.put(line)
    out.put(None)


def _run_from(path: str, start: int, results: list[dict[str, Any] | None]) -> int:
    """Run cases ``start``... of ``path`` in one worker until it ends, dies or
    hangs; fill ``results``; return the index to resume from."""
    with tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(
            [sys.executable, str(WORKER), path, str(start)],
            stdout=subprocess.PIPE, stderr=err, text=True,
        )  # fmt: skip
        lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=_reader, args=(proc.stdout, lines), daemon=True).start()
        current, phase, ours = None, None, None
        timeouts = {None: START_TIMEOUT, "done": START_TIMEOUT, "start": ORTCORE_TIMEOUT,
                    "ortcore": ORACLE_TIMEOUT}  # fmt: skip
        try:
            while True:
                try:
                    line = lines.get(timeout=timeouts[phase])
                except queue.Empty:
                    proc.kill()
                    proc.wait()
                    if current is None or phase == "done":
                        raise RuntimeError(
                            f"fuzz worker stalled between cases after {current}"
                        ) from None
                    if phase == "start":
                        results[current] = {
                            "verdict": "hang",
                            "detail": f"no result in {ORTCORE_TIMEOUT:.0f} s",
                        }
                    else:
                        results[current] = {"verdict": "oracle_timeout", "ortcore": ours}
                    return current + 1
                if line is None:
                    break
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue
                current, phase = rec["i"], rec["phase"]
                if phase == "ortcore":
                    ours = rec["outcome"]
                elif phase == "done":
                    results[current] = {k: v for k, v in rec.items() if k not in ("i", "phase")}
            rc = proc.wait()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        err.seek(0)
        tail = err.read()[-3000:]
    if phase in (None, "done"):
        if rc != 0 or (current is None and start < len(results)):
            raise RuntimeError(f"fuzz worker failed (rc {rc}) outside a case:\n{tail}")
        return len(results) if current is None else current + 1
    assert current is not None
    verdict = "crash" if phase == "start" else "oracle_crash"
    results[current] = {"verdict": verdict, "detail": f"exit status {rc}\n{tail}"}
    return current + 1


def run_cases(cases: list[Case]) -> list[dict[str, Any]]:
    """Judge every case in child processes (a new one after a crash or hang)."""
    results: list[dict[str, Any] | None] = [None] * len(cases)
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(cases, f)
    try:
        start = 0
        while start < len(cases):
            start = _run_from(f.name, start, results)
    finally:
        os.unlink(f.name)
    for i, r in enumerate(results):
        if r is not None and r["verdict"] in ("crash", "hang"):
            alone = _run_alone(cases[i])
            r["detail"] += f"\n(run alone in a fresh process: {alone})"
    return [r if r is not None else {"verdict": "missing"} for r in results]


def _run_alone(c: Case) -> str:
    try:
        proc = subprocess.run(
            [sys.executable, str(WORKER), json.dumps(c)], capture_output=True, text=True,
            timeout=ORTCORE_TIMEOUT + ORACLE_TIMEOUT,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return "hangs again"
    if proc.returncode != 0:
        return f"fails again, exit status {proc.returncode}"
    return "passes: an earlier case may have corrupted memory"


def describe(c: Case, r: dict[str, Any]) -> str:
    """A failure report: verdict, the case, and the command that reruns it."""
    ins = ", ".join(
        "None" if s is None else
        f"{s['dtype']}{s['shape']}" + (f"={s['values']}" if "values" in s else "")
        + (" const" if s.get("const") else "") + (" +nan/inf" if s.get("special") else "")
        for s in c["inputs"]
    )  # fmt: skip
    op = f"{c.get('domain') or 'ai.onnx'}:{c['op']}-{c['opset']}"
    hostile = f" hostile={c['hostile']}" if c.get("hostile") else ""
    worker = WORKER.relative_to(Path.cwd()) if WORKER.is_relative_to(Path.cwd()) else WORKER
    return (
        f"[{r['verdict']}] {op} attrs={c['attrs']} inputs=({ins}){hostile}\n"
        f"    {str(r.get('detail', '')).strip()[:1500]}\n"
        f"    rerun: python {worker} '{json.dumps(c)}'"
    )
