"""What the ``ortcore`` subcommands share: the plugin manager, model and
session arguments, inputs, tables, and help text made plain.

Nothing here imports a session, onnx or a provider at import time: ``ortcore
--help`` and ``ortcore SUBCOMMAND --help`` stay fast (tests/test_cold_import.py).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import InvalidArgument

if TYPE_CHECKING:
    from ..plugins import PluginManager

__all__ = [
    "DEFAULT_MODEL",
    "backend_test_input",
    "default_manager",
    "model_args",
    "plain_text",
    "provider_option",
    "resolve_model",
    "verbose_arg",
]

DEFAULT_MODEL = "light_resnet50"


def default_manager() -> PluginManager:
    """The process's plugin manager (``ortcore.plugins``), imported on first use so
    that ``ortcore --help`` and ``ortcore SUBCOMMAND --help`` load no provider."""
    from ..plugins import default_manager as manager

    return manager()


def provider_option(text: str) -> tuple[str, str]:
    """``KEY=VALUE`` of ``--provider-option``, as ``(KEY, VALUE)`` (an argparse type)."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), value


def _light_dir() -> Path:
    import onnx

    return Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"


def resolve_model(arg: str | None) -> Path:
    """A path as given, or the name of a model in onnx's ``light`` folder."""
    if arg is None:
        arg = DEFAULT_MODEL
    path = Path(arg)
    if path.exists():
        return path
    light = _light_dir()
    for candidate in (light / arg, light / f"{arg}.onnx", light / f"light_{arg}.onnx"):
        if candidate.exists():
            return candidate
    raise SystemExit(f"ortcore: model {arg!r} not found (neither a file nor a model of {light})")


def backend_test_input(arg: Any) -> np.ndarray:
    """The input onnx's backend tests give light models: ``arange(n) / n``.

    ``arg`` is a ``NodeArg``; symbolic dims become 1, the dtype is the declared one.
    """
    from ep_sdk.dtypes import from_type_string, to_numpy

    shape = [d if isinstance(d, int) else 1 for d in arg.shape]
    n = int(np.prod(shape)) if shape else 1
    elem = from_type_string(arg.type)
    dtype = to_numpy(elem) if elem is not None else np.dtype(np.float32)
    return (np.arange(n).reshape(shape) / max(n, 1)).astype(dtype)


def _load_inputs(model: Path, args: Sequence[Any]) -> dict[str, np.ndarray]:
    import onnx
    from onnx import numpy_helper

    files = sorted((model.parent / "test_data_set_0").glob("input_*.pb"))
    if files and len(files) == len(args):
        return {
            a.name: numpy_helper.to_array(onnx.load_tensor(str(f))) for a, f in zip(args, files)
        }
    return {a.name: backend_test_input(a) for a in args}


def _output_width(asked: int | None) -> int | None:
    """The width tables are cut to: ``--width`` (0: none), else the
    terminal's when stdout is one (or ``$COLUMNS`` is set), else none."""
    import shutil

    if asked is not None:
        return asked if asked > 0 else None
    if sys.stdout.isatty() or os.environ.get("COLUMNS"):
        return shutil.get_terminal_size().columns
    return None


def _table(
    rows: Sequence[Sequence[str]], width: int | None = None, shrink: Sequence[int] = ()
) -> bool:
    """Print ``rows`` as columns (the first row a header); with ``width``, no
    line is longer: columns are cut in the order ``shrink`` gives (default:
    the last first; a cut cell ends in ``...``). Returns whether a cell was cut."""
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    cut = False
    if width is not None:
        over = sum(widths) + 2 * (len(widths) - 1) - width
        for i in shrink or reversed(range(len(widths))):
            if over <= 0:
                break
            floor = min(widths[i], max(len(str(rows[0][i])), 8))
            take = min(over, widths[i] - floor)
            widths[i] -= take
            over -= take

    def cell(text: str, w: int) -> str:
        nonlocal cut
        if len(text) <= w:
            return text.ljust(w)
        cut = True
        return text[: max(w - 3, 0)] + "..." if w > 3 else text[:w]

    for j, r in enumerate(rows):
        line = "  ".join(cell(str(c), w) for c, w in zip(r, widths)).rstrip()
        if width is not None and len(line) > width:
            line, cut = line[: width - 3] + "...", True
        print(line)
        if j == 0:
            print("  ".join("-" * w for w in widths)[: width or None])
    return cut


def _session_args(ns: argparse.Namespace, profile_prefix: str = "") -> tuple[Any, Any]:
    """The session options and providers the model arguments ask for."""
    from ..options import GraphOptimizationLevel, SessionOptions

    so = SessionOptions()
    if profile_prefix:
        so.enable_profiling = True
        so.profile_file_prefix = profile_prefix
    so.intra_op_num_threads = ns.threads
    if ns.no_optimize:
        so.graph_optimization_level = GraphOptimizationLevel.ORT_DISABLE_ALL
    if getattr(ns, "cache_dir", None):
        so.add_session_config_entry("ortcore.cache_dir", str(Path(ns.cache_dir).resolve()))
    for key, value in getattr(ns, "session_config", None) or ():
        so.add_session_config_entry(key, value)
    providers: list[Any] | None = ns.providers.split(",") if ns.providers else None
    if ns.provider_options:
        if not providers:
            raise InvalidArgument(
                "--provider-option needs --providers: the options go to the first provider listed"
            )
        providers[0] = (providers[0], dict(ns.provider_options))
    return so, providers


def _session(ns: argparse.Namespace, model: Path, profile_prefix: str = "") -> Any:
    from ..session import InferenceSession

    so, providers = _session_args(ns, profile_prefix)
    # a misspelt --providers name is an error, not onnxruntime's retry on the CPU
    return InferenceSession(str(model), so, providers=providers, enable_fallback=0)


def verbose_arg(p: argparse.ArgumentParser) -> None:
    """``-v``/``--verbose``: debug logging of ortcore, the SDK and the providers,
    with tracebacks (:mod:`ortcore.cli.logs`)."""
    p.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="show ortcore's, the SDK's and the providers' log from debug level up, "
        "with full tracebacks (without it: warnings only, one line each)",
    )


def model_args(p: argparse.ArgumentParser) -> None:
    """The arguments of the subcommands that take a model: ``run``, ``inspect``, ``bench``."""
    p.add_argument(
        "model",
        nargs="?",
        help=f"model path, or a model of onnx's light folder (default {DEFAULT_MODEL})",
    )
    p.add_argument("--providers", help="comma-separated provider names, in priority order")
    p.add_argument(
        "--provider-option",
        dest="provider_options",
        action="append",
        default=[],
        type=provider_option,
        metavar="KEY=VALUE",
        help="an option of the first provider of --providers (repeatable)",
    )
    p.add_argument("--threads", type=int, default=0, help="intra-op threads (0: all)")
    p.add_argument("--no-optimize", action="store_true", help="disable graph optimizations")
    p.add_argument(
        "--cache-dir",
        metavar="DIR",
        help="keep compiled fused groups in DIR and reuse them (session config "
        "ortcore.cache_dir; with --session-config ortcore.save_session=1, whole "
        "sessions too); 'ortcore cache list --dir DIR' shows them",
    )
    p.add_argument(
        "--session-config",
        action="append",
        default=[],
        type=provider_option,
        metavar="KEY=VALUE",
        help="a session config entry, as SessionOptions.add_session_config_entry "
        "(repeatable), e.g. ortcore.save_session=1 or session.disable_cpu_ep_fallback=1",
    )
    verbose_arg(p)


def plain_text(doc: str) -> str:
    """``doc`` with reST markup a terminal would show raw made plain: roles
    (``:func:`x``` -> ``x``, ``:class:`~a.B``` -> ``B``), double backquotes,
    and a ``::`` that opens a literal block (``Example::`` -> ``Example:``)."""
    import re

    def role(m: re.Match[str]) -> str:
        target = m.group(1)
        if "<" in target and target.endswith(">"):  # :ref:`text <target>`
            return target.split("<", 1)[0].strip()
        return target.rsplit(".", 1)[-1] if target.startswith("~") else target

    text = re.sub(r":[a-z]+(?::[a-z]+)?:`([^`]+)`", role, doc)
    text = re.sub(r"``([^`]+)``", r"\1", text)
    text = re.sub(r"(\S)::$", r"\1:", text, flags=re.MULTILINE)
    return re.sub(r"^::$\n?", "", text, flags=re.MULTILINE)
