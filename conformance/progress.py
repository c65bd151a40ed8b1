"""A one-line progress bar on stderr, shown only when stderr is a terminal."""

from __future__ import annotations

import sys
import time
from collections import Counter
from typing import TextIO

__all__ = ["Progress"]


class Progress:
    """``[#####.....] 120/2300  passed 100  failed 3  unsupported 17  12s  node/test_abs``."""

    def __init__(self, total: int, stream: TextIO | None = None, enabled: bool | None = None):
        self.total = total
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self.done = 0
        self.counts: Counter[str] = Counter()
        self.start = time.monotonic()
        self._last = 0.0

    def update(self, case_id: str, outcome: str, failed: bool) -> None:
        """Count one finished case and redraw (at most 20 times a second)."""
        self.done += 1
        self.counts["failed" if failed else outcome] += 1
        now = time.monotonic()
        if not self.enabled or (now - self._last < 0.05 and self.done < self.total):
            return
        self._last = now
        width = 30
        filled = width * self.done // max(self.total, 1)
        counts = "  ".join(
            f"{k} {self.counts[k]}"
            for k in ("passed", "failed", "unsupported", "waived")
            if self.counts[k]
        )
        line = (
            f"[{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total}  {counts}  "
            f"{now - self.start:.0f}s  {case_id}"
        )
        self.stream.write("\r" + line[:150].ljust(150))
        self.stream.flush()

    def close(self) -> None:
        """Clear the line."""
        if self.enabled:
            self.stream.write("\r" + " " * 150 + "\r")
            self.stream.flush()
