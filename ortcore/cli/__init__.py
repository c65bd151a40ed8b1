"""The ``ortcore`` command: providers (and their kernels), run, inspect, bench,
ep new, cache, and the subcommands other packages add (``conformance``,
``batch``).

One module per subcommand (:mod:`~ortcore.cli.providers`,
:mod:`~ortcore.cli.run`, :mod:`~ortcore.cli.inspect`,
:mod:`~ortcore.cli.bench`, :mod:`~ortcore.cli.cache`, :mod:`~ortcore.cli.ep`),
each with its ``add_parser(sub)`` and its ``cmd_*`` function; what they share
is in :mod:`~ortcore.cli._common`, how the command shows log records in
:mod:`~ortcore.cli.logs`. This module assembles the parser and runs it
(:func:`main`). A subcommand module imports what it runs (sessions, onnx,
providers) inside its functions, so that ``ortcore --help`` loads none of it.

A package adds a subcommand with an entry point in group ``ortcore.cli``
(:data:`SUBCOMMAND_GROUP`) whose name is the subcommand's and whose object,
usually a module, has ``add_arguments(parser)`` and ``run(namespace) -> int``
(the exit status), and may have ``HELP``, the one line ``ortcore --help``
shows (:mod:`~ortcore.cli.external`). The core imports no such package:
``ortcore conformance`` comes from the ``conformance`` package's entry point,
``ortcore batch`` from ortcore-ray's (:data:`ELSEWHERE`: without that
distribution, ``ortcore batch`` says what to install). A subcommand that fails
to load, or whose name is taken, is left out with a warning.
"""

from __future__ import annotations

import argparse
import importlib.metadata  # noqa: F401 - ortcore.cli.importlib.metadata: what tests patch
import os
import sys
from collections.abc import Sequence

from ..errors import OrtcoreError, ProviderOptionError
from . import bench, cache, ep, external, inspect, providers, run

# The names ortcore/cli.py had (one module until 0.2), for the code that
# imports them from here: `as` marks each as re-exported.
from ._common import DEFAULT_MODEL as DEFAULT_MODEL
from ._common import backend_test_input as backend_test_input
from ._common import default_manager as default_manager
from ._common import model_args as model_args
from ._common import plain_text as plain_text
from ._common import provider_option as provider_option
from ._common import resolve_model as resolve_model
from ._common import verbose_arg as verbose_arg
from .bench import cmd_bench as cmd_bench
from .cache import cmd_cache as cmd_cache
from .ep import cmd_ep_new as cmd_ep_new
from .external import ELSEWHERE as ELSEWHERE
from .external import SUBCOMMAND_GROUP as SUBCOMMAND_GROUP
from .inspect import cmd_inspect as cmd_inspect
from .providers import KERNELS_PAGE_COMMAND as KERNELS_PAGE_COMMAND
from .providers import cmd_providers as cmd_providers
from .run import cmd_run as cmd_run

__all__ = ["SUBCOMMAND_GROUP", "main", "provider_option"]

SUBCOMMANDS = (providers, run, inspect, bench, cache, ep)
"""The core's own subcommand modules, in the order ``ortcore --help`` lists them."""


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``ortcore`` command."""
    parser = argparse.ArgumentParser(
        prog="ortcore", description=plain_text(__doc__.split("\n\n")[0])
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for module in SUBCOMMANDS:
        module.add_parser(sub)
    external.add_entry_points(sub)
    external.add_missing(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``ortcore`` console script."""
    from .logs import command_logging

    ns = build_parser().parse_args(argv)
    try:
        with command_logging(bool(getattr(ns, "verbose", False))):
            return int(ns.func(ns))
    except (OrtcoreError, ProviderOptionError) as exc:
        if isinstance(exc, ProviderOptionError) or isinstance(exc.__cause__, ProviderOptionError):
            # a provider refused --provider-option: its message names the option
            print(f"ortcore {ns.command}: {exc}", file=sys.stderr)
        else:
            print(f"ortcore: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # The reader went away (``ortcore ... | head``): stop quietly, as
        # Python's docs advise, without a traceback at interpreter exit.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
