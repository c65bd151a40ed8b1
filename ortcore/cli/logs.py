"""How the ``ortcore`` command shows log records: one line each on stderr.

Without ``--verbose``, warnings and errors of ortcore, the SDK and the
providers are shown as their message alone, without a traceback (a provider
that logs an engine's exception per candidate would fill the terminal);
with it, every record from debug level up is shown with its logger, level
and traceback. The handler sits on the project's own loggers, not on the
root logger, and is removed when the command ends, so a program that calls
:func:`ortcore.cli.main` keeps its own logging.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["LOGGERS", "command_logging"]

LOGGERS = (
    "ortcore",
    "ep_sdk",
    "conformance",
    "ortcore_cpu",
    "ortcore_cuda",
    "ortcore_openvino",
    "ortcore_tensorrt",
)
"""The loggers the command shows: the core, the SDK, the suite and this repository's providers."""


class _Brief(logging.Formatter):
    """A record's message, without the traceback it carries."""

    def format(self, record: logging.LogRecord) -> str:
        text = record.getMessage()
        if record.exc_info or record.exc_text:
            text += " (--verbose shows the traceback)"
        return text


@contextmanager
def command_logging(verbose: bool) -> Iterator[None]:
    """Show the project's log records on stderr while the command runs (see
    the module docstring)."""
    handler = logging.StreamHandler(sys.stderr)
    if verbose:
        handler.setLevel(logging.DEBUG)
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    else:
        handler.setLevel(logging.WARNING)
        handler.setFormatter(_Brief())
    loggers = [logging.getLogger(name) for name in LOGGERS]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.addHandler(handler)
        if verbose:
            lg.setLevel(logging.DEBUG)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels):
            lg.removeHandler(handler)
            lg.setLevel(level)
