"""Worker processes: run cases in subprocesses, so a crash or a hang is one outcome.

Each job owns one :class:`Worker`. A case that does not answer within the
timeout is ``timeout`` and its worker is killed; a worker that dies is a
``crash`` (with its exit signal and the end of its stderr). Either way a fresh
worker takes the next case.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Sequence
from typing import IO, Any

from .outcomes import CRASH, TIMEOUT, CaseResult

__all__ = ["Worker", "run_in_workers"]

STARTUP_TIMEOUT = 600.0


def _env() -> dict[str, str]:
    env = dict(os.environ)
    paths = [p for p in sys.path if p and os.path.isdir(p)]
    env["PYTHONPATH"] = os.pathsep.join([os.getcwd(), *paths])
    return env


class Worker:
    """One worker subprocess and the thread that reads its answers."""

    def __init__(self, argv: Sequence[str]) -> None:
        self.argv = [sys.executable, "-m", "conformance.worker", *argv]
        self.proc: subprocess.Popen[str] | None = None
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.stderr: IO[str] | None = None
        self._mark = 0  # where the current case's stderr starts

    def _start(self) -> None:
        self.stderr = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")
        self._mark = 0
        self.lines = queue.Queue()
        self.proc = subprocess.Popen(
            self.argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            text=True,
            bufsize=1,
            env=_env(),
        )
        out, lines = self.proc.stdout, self.lines

        def read() -> None:
            assert out is not None
            for line in out:
                lines.put(line)
            lines.put(None)

        threading.Thread(target=read, daemon=True).start()
        first = self._next(STARTUP_TIMEOUT)
        if first is None or first.strip() != "ready":
            raise RuntimeError(f"conformance worker failed to start: {self._tail()}")

    def _next(self, timeout: float | None) -> str | None:
        return self.lines.get(timeout=timeout)

    def _tail(self) -> str:
        """The end of what the worker wrote to stderr since the current case began
        (not an earlier case's warnings)."""
        if self.stderr is None:
            return ""
        self.stderr.flush()
        self.stderr.seek(self._mark)
        return self.stderr.read()[-1500:].strip()

    def stop(self) -> None:
        """Kill the worker (if running)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def run(self, case_id: str, timeout: float | None) -> CaseResult:
        """Run one case; a hang or a death is turned into its outcome."""
        if self.proc is None or self.proc.poll() is not None:
            self._start()
        assert self.proc is not None and self.proc.stdin is not None
        if self.stderr is not None:
            self._mark = self.stderr.seek(0, os.SEEK_END)
        try:
            self.proc.stdin.write(case_id + "\n")
            self.proc.stdin.flush()
            line = self._next(timeout)
        except queue.Empty:
            self.stop()
            return _broken(case_id, TIMEOUT, f"no answer within {timeout:g} s; worker killed")
        except BrokenPipeError:
            line = None
        if line is None:
            code = self.proc.wait()
            how = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit status {code}"
            detail = f"worker died ({how}); stderr: {self._tail()}"
            self.proc = None
            return _broken(case_id, CRASH, detail)
        return CaseResult.from_dict(json.loads(line))


def _broken(case_id: str, outcome: str, detail: str) -> CaseResult:
    from .cases import MODEL_KINDS

    kind = case_id.split("/", 1)[0]
    suite = "contract" if kind == "contract" else "models" if kind in MODEL_KINDS else "operators"
    return CaseResult(case_id, suite, outcome, detail[-2000:], seconds=0.0)


def run_in_workers(
    ids: Sequence[str],
    argv: Sequence[str],
    jobs: int,
    timeout: float | None,
    done: Callable[[CaseResult], Any],
) -> list[CaseResult]:
    """Run ``ids`` on ``jobs`` workers; ``done`` is called as each case finishes."""
    todo: queue.Queue[tuple[int, str]] = queue.Queue()
    for item in enumerate(ids):
        todo.put(item)
    results: list[CaseResult | None] = [None] * len(ids)
    lock = threading.Lock()
    errors: list[BaseException] = []

    def job() -> None:
        worker = Worker(argv)
        try:
            while True:
                try:
                    i, case_id = todo.get_nowait()
                except queue.Empty:
                    return
                r = worker.run(case_id, timeout)
                with lock:
                    results[i] = r
                    done(r)
        except BaseException as exc:  # reported after the other jobs finish
            errors.append(exc)
        finally:
            worker.stop()

    threads = [threading.Thread(target=job) for _ in range(max(1, min(jobs, len(ids))))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return [r for r in results if r is not None]
