"""Deprecated alias of :mod:`ortcore.cli.logs` (how the ``ortcore`` command shows
log records), where it moved when the command became a package; it goes in 0.3."""

import warnings

from .cli.logs import LOGGERS, command_logging

__all__ = ["LOGGERS", "command_logging"]

warnings.warn(
    "ortcore.cli_logging is deprecated: import ortcore.cli.logs instead; "
    "ortcore.cli_logging goes in ortcore 0.3",
    DeprecationWarning,
    stacklevel=2,
)
