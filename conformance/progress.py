"""What the run is doing, on stderr, from its first second.

On a terminal: one line redrawn in place, first the phase (``loading cases
(node)...``, ``starting 2 workers...``), then a bar. Elsewhere (CI logs,
pipes): a plain line for each phase that lasts, then a progress line every
:data:`EVERY` seconds or every tenth of the cases, whichever comes first, but
never more than one a second (:data:`QUIET`).
This module imports nothing heavy, so the first line shows before the suite
and onnx are imported.
"""

from __future__ import annotations

import shutil
import sys
import time
from typing import TextIO

__all__ = ["EVERY", "MODES", "QUIET", "Progress"]

EVERY = 10.0
"""Seconds between two plain progress lines (at most)."""
QUIET = 1.0
"""Seconds a plain line waits after the previous one: a quick phase or a tenth
of a quick run says nothing."""
MODES = ("bar", "lines", "off")
"""``bar``: a line redrawn in place; ``lines``: plain lines; ``off``: nothing."""
PREFIX = "ortcore conformance: "
_SHOWN = ("passed", "failed", "unsupported", "waived")


def _isatty(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # a closed or odd stream
        return False


class Progress:
    """``[#####.....] 120/2300  passed 100  failed 3  unsupported 17  12s  node/test_abs``.

    Args:
        total: cases to run (0 until :meth:`start` says).
        stream: where to write (default: stderr).
        enabled: ``False``: nothing; ``True``: the bar; ``None``: the bar on a
            terminal, plain lines elsewhere.
        mode: one of :data:`MODES`, instead of ``enabled``.
    """

    def __init__(
        self,
        total: int = 0,
        stream: TextIO | None = None,
        enabled: bool | None = None,
        *,
        mode: str | None = None,
    ) -> None:
        self.stream = stream or sys.stderr
        if mode is None:
            tty = _isatty(self.stream)
            mode = "off" if enabled is False else "bar" if enabled or tty else "lines"
        if mode not in MODES:
            raise ValueError(f"unknown progress mode {mode!r}; known: {', '.join(MODES)}")
        self.mode = mode
        self.enabled = mode != "off"
        self.total = total
        self.done = 0
        self.counts: dict[str, int] = dict.fromkeys(_SHOWN, 0)
        self.start_time = time.monotonic()
        self.note = ""
        self._last = self.start_time
        self._step = 0
        self._width = max(40, shutil.get_terminal_size((120, 24)).columns - 1)
        self._drawn = False
        self._lines = 0
        self._printed = 0

    def _elapsed(self, now: float) -> str:
        return f"{now - self.start_time:.0f}s"

    def status(self, text: str) -> None:
        """Say what the run is doing now (a phase before the cases run)."""
        self.note = text
        if self.mode == "lines" and (not self._lines or self._since_line() >= QUIET):
            self._write_line(f"{PREFIX}{text}")
        elif self.mode == "bar":
            self._draw(time.monotonic())

    def start(self, total: int) -> None:
        """The cases are selected: ``total`` of them are about to run."""
        self.total = total
        self.note = ""
        if self.mode == "lines":
            self._write_line(f"{PREFIX}running {total} cases")
        elif self.mode == "bar":
            self._draw(time.monotonic())

    def update(self, case_id: str, outcome: str, failed: bool) -> None:
        """Count one finished case; redraw at most 20 times a second (a bar) or
        write a line every :data:`EVERY` seconds or tenth of the cases."""
        self.done += 1
        key = "failed" if failed else outcome
        self.counts[key] = self.counts.get(key, 0) + 1
        if self.mode == "off":
            return
        now = time.monotonic()
        if self.mode == "bar":
            if now - self._last >= 0.05 or self.done >= self.total:
                self.note = case_id
                self._draw(now)
            return
        step = 10 * self.done // max(self.total, 1)
        since = now - self._last
        if (step > self._step and since >= QUIET) or since >= EVERY:
            self._step = step
            self._write_line(f"{PREFIX}{self._counts_text()}  {self._elapsed(now)}")

    def _counts_text(self) -> str:
        pct = 100 * self.done // max(self.total, 1)
        counts = "  ".join(f"{k} {self.counts[k]}" for k in _SHOWN if self.counts.get(k))
        return f"{self.done}/{self.total} ({pct}%)  {counts}".rstrip()

    def _since_line(self) -> float:
        return time.monotonic() - self._last

    def _write_line(self, line: str) -> None:
        self.stream.write(line + "\n")
        self.stream.flush()
        self._lines += 1
        self._last = time.monotonic()
        self._printed = self.done

    def _draw(self, now: float) -> None:
        self._last = now
        if self.total:
            width = 30
            filled = width * self.done // self.total
            counts = "  ".join(f"{k} {self.counts[k]}" for k in _SHOWN if self.counts.get(k))
            line = (
                f"[{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total}  {counts}  "
                f"{self._elapsed(now)}  {self.note}"
            )
        else:
            line = f"[{self._elapsed(now):>4}] {self.note}"
        self.stream.write("\r" + line[: self._width].ljust(self._width))
        self.stream.flush()
        self._drawn = True

    def close(self) -> None:
        """Clear the bar; in plain mode, write the last count if it was not."""
        if self.mode == "bar" and self._drawn:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()
        elif self.mode == "lines" and self.done and self._printed != self.done:
            self._write_line(f"{PREFIX}{self._counts_text()}  {self._elapsed(time.monotonic())}")
