"""Run MODEL over every row of INPUT into OUTPUT on a Ray cluster: one session
per actor, actors x threads = cores. Rerun the same command after a failure:
rows already in OUTPUT are skipped (docs/scale-out.md).

The job is checked against the model before Ray starts; an error, there or in
an actor, is one line (the traceback with ``--verbose``).

Exit status: 0 done; 2 the input, model or options are at fault (a column the
model input does not take, a row of another shape, a model or provider error),
nothing run or the rows written so far kept: fix it and rerun; 3 Ray failed (an
actor or node died for good, the cluster went away): rerun to resume; 130
interrupted.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from typing import Any

from ortcore.errors import InvalidArgument, OrtcoreError, ProviderOptionError

__all__ = ["EXIT_BAD_INPUT", "EXIT_CLUSTER", "EXIT_INTERRUPTED", "HELP", "add_arguments", "run"]

HELP = "run a model over Parquet/.npy/.npz rows on Ray, resumably (pip install ortcore[ray])"
"""The line ``ortcore --help`` shows for this subcommand."""

EXIT_BAD_INPUT = 2
"""``ortcore batch``'s status when the input, the model or the options are at fault."""
EXIT_CLUSTER = 3
"""``ortcore batch``'s status when Ray itself failed (rerun to resume)."""
EXIT_INTERRUPTED = 130


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add ``ortcore batch``'s arguments to ``p`` (the ``ortcore.cli`` entry point)."""
    p.add_argument("model", help="model path, or a model of onnx's light folder")
    p.add_argument("input", help="a Parquet file or folder of them, an .npy or an .npz file")
    p.add_argument("output", help="a folder of Parquet part files, or an .npz/.npy file")
    p.add_argument(
        "--address", help="Ray cluster to join ('auto': this node's); default: start one"
    )
    p.add_argument("--actors", type=int, help="actors (default: CPUs // threads)")
    p.add_argument("--threads", type=int, default=1, help="intra-op threads = CPUs per actor")
    p.add_argument("--gpus-per-actor", type=float, default=0, help="GPUs per actor (cuda: 1)")
    p.add_argument("--batch-size", type=int, default=32, help="rows per model call (default 32)")
    p.add_argument("--rows-per-file", type=int, default=1024, help="rows per output part file")
    p.add_argument("--providers", help="comma-separated provider names, in priority order")
    p.add_argument(
        "--provider-option",
        dest="batch_provider_options",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an option of the first provider of --providers (repeatable)",
    )
    p.add_argument(
        "--session-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a SessionOptions attribute, or a session config key (with a dot) (repeatable)",
    )
    p.add_argument(
        "--input-map",
        action="append",
        default=[],
        metavar="INPUT=COLUMN",
        help="feed model input INPUT from column COLUMN (repeatable)",
    )
    p.add_argument("--outputs", help="comma-separated outputs to write (default: all)")
    p.add_argument(
        "--keep", action="append", default=[], metavar="COLUMN", help="input column to copy"
    )
    p.add_argument("--max-restarts", type=int, default=3, help="restarts of a dead actor")
    p.add_argument("--max-task-retries", type=int, default=3, help="retries of its batches")
    p.add_argument("--no-progress", action="store_true", help="no progress on stderr")
    p.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="Ray's own log lines, and the full traceback of an error",
    )


def _pairs(items: Sequence[str], flag: str) -> dict[str, str]:
    """``KEY=VALUE`` arguments as a dict."""
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise InvalidArgument(f"{flag} expects KEY=VALUE, got {item!r}")
        out[key.strip()] = value
    return out


def run(ns: argparse.Namespace) -> int:
    """Run a model over a file on Ray (``ortcore batch``); rerun to resume.

    The job is checked against the model before Ray starts; an error, there
    or in an actor, is one line (the traceback with ``--verbose``).
    """
    try:
        import ray

        from .errors import ClusterError
        from .run import prepare_batch
    except ImportError as exc:
        print(f"ortcore batch needs Ray: pip install 'ortcore[ray]' ({exc})", file=sys.stderr)
        return EXIT_BAD_INPUT
    verbose = ns.verbose or logging.getLogger("ortcore").isEnabledFor(logging.DEBUG)
    ran = started = False
    try:
        job = prepare_batch(**_batch_arguments(ns))
        if not ray.is_initialized():
            _start_ray(ns.address, verbose)
            started = True
        ran = True
        report = _quietly(job.run, verbose)
    except KeyboardInterrupt:
        print("ortcore batch: interrupted; rerun the same command to resume", file=sys.stderr)
        return EXIT_INTERRUPTED
    except (OrtcoreError, ProviderOptionError) as exc:
        if verbose:
            import traceback

            traceback.print_exc()
        status = EXIT_CLUSTER if isinstance(exc, ClusterError) else EXIT_BAD_INPUT
        print(f"ortcore batch: {type(exc).__name__}: {exc}", file=sys.stderr)
        if ran and status == EXIT_BAD_INPUT:
            print(
                f"ortcore batch: rows written before the error are kept in {ns.output}: fix "
                "the cause and rerun the same command to resume"
                + ("" if verbose else " (--verbose shows the traceback)"),
                file=sys.stderr,
            )
        return status
    finally:
        if started and ray.is_initialized():
            # Before the interpreter exits: actors stopped mid-job otherwise
            # leave Ray's own errors about killing them on the terminal.
            ray.shutdown()
    print(
        f"{report.inferred_rows} rows inferred in {report.seconds:.1f} s "
        f"({report.rows_per_second:.1f} rows/s, {report.actors} actors x {report.threads} "
        f"threads), {report.skipped_rows} already done, {report.total_rows} in all: "
        f"{report.output}"
    )
    return 0


def _batch_arguments(ns: argparse.Namespace) -> dict[str, Any]:
    """``prepare_batch``'s arguments from ``ortcore batch``'s command line."""
    from ortcore.cli import resolve_model
    from ortcore.errors import NoSuchFile

    try:
        model = resolve_model(ns.model)
    except SystemExit as exc:  # the other subcommands' way; a missing file is bad input here
        raise NoSuchFile(str(exc).removeprefix("ortcore: ")) from None
    providers: list[Any] | None = ns.providers.split(",") if ns.providers else None
    provider_options = None
    if ns.batch_provider_options:
        if not providers:
            raise InvalidArgument("--provider-option needs --providers: they go to the first one")
        provider_options = [_pairs(ns.batch_provider_options, "--provider-option")]
        provider_options += [{} for _ in providers[1:]]
    return {
        "model": model,
        "input": ns.input,
        "output": ns.output,
        "providers": providers,
        "provider_options": provider_options,
        "session_options": _pairs(ns.session_option, "--session-option"),
        "inputs": _pairs(ns.input_map, "--input-map"),
        "outputs": ns.outputs.split(",") if ns.outputs else None,
        "keep": ns.keep,
        "actors": ns.actors,
        "threads": ns.threads,
        "gpus_per_actor": ns.gpus_per_actor,
        "batch_size": ns.batch_size,
        "rows_per_file": ns.rows_per_file,
        "max_restarts": ns.max_restarts,
        "max_task_retries": ns.max_task_retries,
        "progress": not ns.no_progress,
    }


def _start_ray(address: str | None, verbose: bool) -> None:
    """``ray.init``: this node's new instance, or the cluster at ``address``.

    Raises:
        ClusterError: Ray did not start, or the cluster cannot be reached.
    """
    import ray

    from .errors import ClusterError

    quiet: dict[str, Any] = {} if verbose else {"logging_level": logging.WARNING}
    _reachable(address)
    try:
        if address:
            ray.init(address=address, **quiet)
        else:
            ray.init(include_dashboard=False, **quiet)
    except Exception as exc:
        where = f"the cluster at {address}" if address else "a local Ray instance"
        first = (str(exc).strip().splitlines() or [""])[0]
        raise ClusterError(
            f"could not start or join {where}: {type(exc).__name__}: {first}"
        ) from exc


def _reachable(address: str | None, timeout: float = 10.0) -> None:
    """Refuse a ``HOST:PORT`` nothing answers on: ``ray.init`` would retry it for minutes.

    Raises:
        ClusterError: the connection was refused or timed out.
    """
    import socket

    from .errors import ClusterError

    if not address or "://" in address or address == "auto":
        return
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise InvalidArgument(f"--address {address!r}: expected HOST:PORT, 'auto' or ray://...")
    try:
        socket.create_connection((host or "127.0.0.1", int(port)), timeout=timeout).close()
    except OSError as exc:
        raise ClusterError(f"no Ray cluster answers at {address} ({exc})") from exc


def _quietly(run: Any, verbose: bool) -> Any:
    """``run()`` with Ray Data's reports of a failed task held back from the terminal.

    The failure is reported once, as its own error, by :func:`run`; Ray
    Data logs it first as errors with tracebacks. Its warnings and its log
    file are left alone.
    """
    if verbose:
        return run()
    import ray.data  # noqa: F401 - configures the "ray.data" logger's handlers

    def keep(record: logging.LogRecord) -> bool:
        if record.levelno >= logging.ERROR:
            return False
        # our progress line replaces the bars the job turns off
        message = record.getMessage()
        return "execution failed" not in message and "Progress bars disabled" not in message

    console = [
        h
        for h in logging.getLogger("ray.data").handlers
        if isinstance(h, logging.StreamHandler) and not isinstance(h, logging.FileHandler)
    ]
    for handler in console:
        handler.addFilter(keep)
    try:
        return run()
    finally:
        for handler in console:
            handler.removeFilter(keep)
