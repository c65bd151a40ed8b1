"""The ``ortcore`` command: providers (and their kernels), run, inspect, bench,
ep new, cache, and the subcommands other packages add (``conformance``,
``batch``).

A package adds a subcommand with an entry point in group ``ortcore.cli``
(:data:`SUBCOMMAND_GROUP`) whose name is the subcommand's and whose object,
usually a module, has ``add_arguments(parser)`` and ``run(namespace) -> int``
(the exit status), and may have ``HELP``, the one line ``ortcore --help``
shows. The core imports no such package: ``ortcore conformance`` comes from
the ``conformance`` package's entry point, ``ortcore batch`` from ortcore-ray's
(:data:`ELSEWHERE`: without that distribution, ``ortcore batch`` says what to
install). A subcommand that fails to load, or whose name is taken, is left out
with a warning.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import logging
import os
import statistics
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .errors import InvalidArgument, OrtcoreError, ProviderOptionError

if TYPE_CHECKING:
    from .plugins import PluginManager

__all__ = ["SUBCOMMAND_GROUP", "main", "provider_option"]

DEFAULT_MODEL = "light_resnet50"
SUBCOMMAND_GROUP = "ortcore.cli"
"""Entry-point group of the subcommands other packages add to ``ortcore``."""

log = logging.getLogger("ortcore.cli")

ELSEWHERE = {
    "batch": (
        "ortcore-ray",
        "run a model over Parquet/.npy/.npz rows on Ray, resumably (pip install ortcore[ray])",
    ),
}
"""Subcommands other distributions of this project add: name -> (distribution,
help line). One whose distribution is not installed is still listed, and says
what to install."""


def default_manager() -> PluginManager:
    """The process's plugin manager (``ortcore.plugins``), imported on first use so
    that ``ortcore --help`` and ``ortcore SUBCOMMAND --help`` load no provider."""
    from .plugins import default_manager as manager

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


def _reference_outputs(model: Path) -> list[np.ndarray] | None:
    """Stored outputs: ``<model>_output_<i>.pb`` beside it, or ``test_data_set_0``."""
    import onnx
    from onnx import numpy_helper

    stem = model.with_suffix("")
    files = sorted(model.parent.glob(f"{stem.name}_output_*.pb"))
    if not files:
        files = sorted((model.parent / "test_data_set_0").glob("output_*.pb"))
    if not files:
        return None
    return [numpy_helper.to_array(onnx.load_tensor(str(f))) for f in files]


def _load_inputs(model: Path, args: Sequence[Any]) -> dict[str, np.ndarray]:
    import onnx
    from onnx import numpy_helper

    files = sorted((model.parent / "test_data_set_0").glob("input_*.pb"))
    if files and len(files) == len(args):
        return {
            a.name: numpy_helper.to_array(onnx.load_tensor(str(f))) for a, f in zip(args, files)
        }
    return {a.name: backend_test_input(a) for a in args}


def cmd_providers(ns: argparse.Namespace) -> int:
    """List installed providers (with ``--kernels``, their kernels)."""
    entries = default_manager().entries()
    if ns.devices:
        return _print_devices(ns.json)
    if ns.kernels is not None:
        return _print_kernels(entries, ns.kernels, ns.json, ns.markdown, _output_width(ns.width))
    if ns.markdown:
        print("ortcore providers: --markdown goes with --kernels NAME", file=sys.stderr)
        return 2
    if ns.json:
        print(
            json.dumps(
                [
                    {
                        "name": e.name,
                        "aliases": list(e.aliases),
                        "version": e.version,
                        "device": e.device,
                        "available": e.available,
                        "reason": e.reason,
                        "plugin": e.plugin,
                    }
                    for e in entries
                ],
                indent=2,
            )
        )
        return 0
    if not entries:
        print("no providers installed (pip install ./plugins/cpu)")
        return 0
    rows = [("name", "aliases", "version", "device", "status")]
    for e in entries:
        status = "available" if e.available else f"unavailable: {e.reason}"
        rows.append((e.name, ",".join(e.aliases), e.version, e.device, status))
    _table(rows)
    return 0


def _print_devices(as_json: bool) -> int:
    """``ortcore providers --devices``: what ``get_ep_devices()`` lists, and
    the providers whose ``ep_devices()`` failed."""
    from .ep_devices import device_errors, get_ep_devices

    devices = get_ep_devices()
    rows: list[dict[str, Any]] = [
        {
            "provider": d.ep_name,
            "type": d.device.type.name,
            "vendor": d.device.vendor,
            "vendor_id": d.device.vendor_id,
            "device_id": d.device.device_id,
            "description": d.device.metadata.get("Description", ""),
            "ep_options": d.ep_options,
        }
        for d in devices
    ]
    errors = device_errors()
    if as_json:
        print(json.dumps({"devices": rows, "errors": errors}, indent=2))
        return 0
    table = [("provider", "type", "vendor", "ids", "description", "ep_options")]
    for r in rows:
        ids = f"{r['vendor_id']:#06x}:{r['device_id']:#06x}"
        opts = ",".join(f"{k}={v}" for k, v in r["ep_options"].items())
        table.append((r["provider"], r["type"], r["vendor"], ids, r["description"], opts))
    _table(table)
    for name, why in errors.items():
        print(f"{name}: no devices listed: {why}")
    return 0


KERNELS_PAGE_COMMAND = "ortcore providers --kernels cpu --markdown > docs/cpu-kernels.md"
"""The command that writes the docs' CPU kernel index (docs/cpu-kernels.md)."""


def _print_kernels(
    entries: Sequence[Any],
    name: str,
    as_json: bool,
    as_markdown: bool = False,
    width: int | None = None,
) -> int:
    """``ortcore providers --kernels [NAMES]``: every kernel of each provider,
    with the function that builds it. NAMES, comma-separated, are provider
    names or aliases (only those providers) and op names (only those ops'
    kernels, in every provider listed), matched without regard to case; with
    ``--markdown``, the named provider's op -> module index as a page. Tables
    are cut to ``width`` columns."""
    from .kernel_index import markdown_page, only_ops, provider_kernels

    names = [n.strip() for n in name.split(",") if n.strip()]
    if as_markdown and len(names) != 1:
        print(
            "ortcore providers: --markdown needs a provider: --kernels NAME (one)", file=sys.stderr
        )
        return 2
    chosen = [
        e
        for e in entries
        if {e.name.lower(), *(a.lower() for a in e.aliases)} & {n.lower() for n in names}
    ]
    known = {n.lower() for e in chosen for n in (e.name, *e.aliases)}
    ops = [n for n in names if n.lower() not in known]
    if as_markdown and ops:
        listed_names = ", ".join(e.name for e in entries) or "none"
        print(
            f"ortcore providers: no provider {name!r}; installed: {listed_names}", file=sys.stderr
        )
        return 2
    listed = [provider_kernels(e) for e in (chosen or entries)]
    if ops:
        listed = [only_ops(p, ops) for p in listed]
        found = {k.op_type.lower() for p in listed for k in p.kernels}
        missing = [op for op in ops if op.lower() not in found]
        if missing:
            providers = ", ".join(p.provider for p in listed) or "none installed"
            unlisted = [p.provider for p in listed if p.note and not p.kernels]
            print(
                f"ortcore providers: {', '.join(map(repr, missing))} matched nothing: no "
                f"provider of that name or alias, and no kernel of that op in {providers}"
                + (f" ({', '.join(unlisted)}: kernels not listed, see below)" if unlisted else ""),
                file=sys.stderr,
            )
            if len(missing) == len(ops):
                return 2
    if as_markdown:
        (page,) = listed[:1]
        if page.note:
            print(f"ortcore providers: {page.provider}: {page.note}", file=sys.stderr)
            return 1
        generator = KERNELS_PAGE_COMMAND.replace(" cpu ", f" {name} ").rsplit(" > ", 1)[0]
        print(markdown_page(page, generator=generator), end="")
        return 0
    if as_json:
        print(json.dumps([p.to_dict() for p in listed], indent=2))
        return 0
    cut = False
    for i, p in enumerate(listed):
        if i:
            print()
        if p.note:
            print(f"{p.provider}: {p.note}")
            continue
        n_ops = len({(k.domain, k.op_type) for k in p.kernels})
        print(f"{p.provider}: {len(p.kernels)} kernels for {n_ops} ops")
        if not p.kernels:
            continue
        rows = [("op", "domain", "opsets", "built by", "types")]
        rows += [(k.op_type, k.domain, k.opsets, k.builder, k.types_text()) for k in p.kernels]
        cut |= _table(rows, width, shrink=(4, 1, 0, 3, 2))  # where the builder is: last
    if cut:
        print(f"(cut to {width} columns: --width 0 or --json shows every type)")
    return 0


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
    from .options import GraphOptimizationLevel, SessionOptions

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
    from .session import InferenceSession

    so, providers = _session_args(ns, profile_prefix)
    # a misspelt --providers name is an error, not onnxruntime's retry on the CPU
    return InferenceSession(str(model), so, providers=providers, enable_fallback=0)


def cmd_run(ns: argparse.Namespace) -> int:
    """Run a model, time it and check it against its stored outputs."""
    model = resolve_model(ns.model)
    print("providers found:")
    for e in default_manager().entries():
        state = "available" if e.available else f"unavailable ({e.reason})"
        print(f"  {e.name:<28} {e.version:<8} {e.device:<6} {state}")
    print(f"model: {model}")
    t0 = time.perf_counter()
    sess = _session(ns, model)
    created = time.perf_counter() - t0
    print(f"session: providers {sess.get_providers()}, created in {created * 1000:.1f} ms")
    if not ns.providers:
        print("  (no --providers: the CPU provider only, as InferenceSession(model) does)")
    part = sess.get_partition()
    print("where nodes ran:")
    per = Counter((r.provider, r.op_type) for r in part.nodes)
    for provider, count in part.counts().items():
        ops = ", ".join(f"{op} x{n}" for (p, op), n in sorted(per.items()) if p == provider)
        print(f"  {provider}: {count} nodes ({ops})")
    if part.copies:
        print(f"  device copies inserted: {len(part.copies)}")
    _print_compiled(part.compiled)
    feeds = _load_inputs(model, sess.get_inputs())
    outputs = sess.run(None, feeds)
    times = []
    for _ in range(ns.repeat):
        t = time.perf_counter()
        sess.run(None, feeds)
        times.append(time.perf_counter() - t)
    if times:
        print(
            f"latency: median {statistics.median(times) * 1000:.2f} ms, "
            f"min {min(times) * 1000:.2f} ms over {len(times)} runs"
        )
    return 0 if _check(ns, model, sess, feeds, outputs) else 1


def _check(ns: argparse.Namespace, model: Path, sess: Any, feeds: Any, outputs: Any) -> bool:
    """``run``'s check: the stored outputs, and where they cannot discriminate
    (uniform) or are missing, the evidence :mod:`ortcore.run_check` finds."""
    from .run_check import compare, is_uniform, oracle_checks

    expected = _reference_outputs(model)
    ok, weak = True, expected is None
    if expected is None:
        print("check: no stored reference outputs beside the model")
    for i, (got, want) in enumerate(zip(outputs, expected or ())):
        verdict = compare(got, want, ns.rtol, ns.atol)
        ok &= verdict.ok
        note = f", {verdict.note}" if verdict.note else ""
        print(
            f"check: output {i} {'OK' if verdict.ok else 'MISMATCH'} against the stored output "
            f"(max abs error {verdict.max_abs:.3g}, rtol {ns.rtol}, atol {ns.atol}{note})"
        )
        if is_uniform(want):
            weak = True
            value = np.asarray(want).reshape(-1)[0]
            print(
                f"check: the stored output {i} is uniform (all {value:.6g}): this check cannot "
                "tell a right answer from many wrong ones"
            )
    if not weak:
        return ok

    def make_session(data: bytes, reference: bool) -> Any:
        from .options import GraphOptimizationLevel
        from .session import InferenceSession

        so, providers = _session_args(ns)
        if reference:
            so.graph_optimization_level = GraphOptimizationLevel.ORT_DISABLE_ALL
            return InferenceSession(data, so, providers=["CPUExecutionProvider"])
        return InferenceSession(data, so, providers=providers)

    same = sess.get_providers() == ["CPUExecutionProvider"] and ns.no_optimize
    good, lines = oracle_checks(model, feeds, outputs, make_session, same, ns.rtol, ns.atol)
    for line in lines:
        print(line)
    return ok and good


def _print_compiled(compiled: Any) -> None:
    """Each compiled group and where it came from (cache hit, miss, saved session)."""
    if compiled:
        print("compiled groups:")
        for name, source in compiled.items():
            print(f"  {name}: {source}")


def cmd_inspect(ns: argparse.Namespace) -> int:
    """Show where each node would run: the model is partitioned, not
    compiled or run, so providers installed but unable to run here are asked too."""
    from .inspection import inspect_partition

    model = resolve_model(ns.model)
    so, providers = _session_args(ns)
    found = inspect_partition(str(model), so, providers)
    part = found.partition
    if ns.format == "json":
        data = part.to_dict()
        data["inputs"] = [vars(a) for a in found.inputs]
        data["outputs"] = [vars(a) for a in found.outputs]
        data["unavailable"] = dict(found.unavailable)
        data["cache"] = dict(found.cache)
        print(json.dumps(data, indent=2))
        return 0
    print(f"model: {model}")
    print(f"providers: {', '.join(part.providers)}")
    print("(partitioned only: nothing was compiled or run)")
    for name, why in found.unavailable.items():
        print(f"note: {name} cannot run here ({why}); asked what it would take all the same")
    rows = [("node", "op", "provider", "declined by")]
    for r in part.nodes:
        declined = "; ".join(f"{p}: {why}" for p, why in r.declined.items())
        name = f"{r.graph}/{r.node}" if r.graph else r.node
        rows.append((name, r.op_type, r.provider + (f" [{r.group}]" if r.group else ""), declined))
    _table(rows)
    groups: dict[str, int] = {}
    for r in part.nodes:
        if r.group:
            groups[r.group] = groups.get(r.group, 0) + 1
    if groups:
        print("groups: " + ", ".join(f"{g} ({n} nodes)" for g, n in groups.items()))
    for g, where in found.cache.items():
        print(f"  {g}: {where}")
    print("counts: " + ", ".join(f"{p}={n}" for p, n in part.counts().items()))
    _print_declines(part)
    return 0


def _print_declines(part: Any) -> None:
    """One line per provider that declined nodes, with its reasons and their counts."""
    from .partition import decline_lines

    lines = decline_lines(r.declined for r in part.nodes)
    if lines:
        print("declined:")
        for line in lines:
            print(f"  {line}")


def cmd_bench(ns: argparse.Namespace) -> int:
    """Run a model with profiling and summarise the trace."""
    import tempfile

    from .profiling import load_trace, summarize

    if ns.trace:
        if ns.model:
            raise InvalidArgument("bench: give a model or --trace, not both")
        try:
            events = load_trace(ns.trace)
        except (OSError, ValueError) as exc:
            raise InvalidArgument(f"bench --trace {ns.trace}: {exc}") from exc
        summary = summarize(events, top=ns.top)
        header = [f"trace: {ns.trace}"]
    else:
        model = resolve_model(ns.model)
        so_args = argparse.Namespace(**vars(ns))
        with tempfile.TemporaryDirectory() as tmp:
            sess = _session(so_args, model, profile_prefix=str(Path(tmp) / "bench"))
            feeds = _load_inputs(model, sess.get_inputs())
            for _ in range(max(ns.runs, 1)):
                sess.run(None, feeds)
            summary = summarize(load_trace(sess.end_profiling()), top=ns.top)
        header = [f"model: {model}", f"providers: {', '.join(sess.get_providers())}"]
        header += [f"compiled group {g}: {src}" for g, src in sess.get_partition().compiled.items()]
    if ns.json:
        print(json.dumps(summary, indent=2))
        return 0
    total_ms = summary["total_us"] / 1000
    runs = max(summary["runs"], 1)
    for line in header:
        print(line)
    print(
        f"{summary['runs']} profiled runs, {summary['node_events']} node events, "
        f"{total_ms:.1f} ms in nodes ({total_ms / runs:.2f} ms per run)"
    )

    def rows(key: str, title: str) -> None:
        table = [(title, "calls", "total ms", "ms/run", "%")]
        for r in summary[key]:
            table.append(
                (
                    r["name"],
                    str(r["count"]),
                    f"{r['total_us'] / 1000:.2f}",
                    f"{r['total_us'] / 1000 / runs:.3f}",
                    f"{r['percent']:.1f}",
                )
            )
        print()
        _table(table)

    rows("by_op", "op type")
    rows("by_provider", "provider")
    c = summary["copies"]
    print()
    by_op = ", ".join(f"{k} x{v}" for k, v in sorted(c["by_op"].items())) or "none"
    print(
        f"device copies: {c['count']} ({by_op}), {c['total_us'] / 1000:.2f} ms, {c['bytes']} bytes"
    )
    print()
    slow = [("slowest nodes", "op", "provider", "mean ms", "calls")]
    for r in summary["slowest"]:
        slow.append(
            (r["node"], r["op"], r["provider"], f"{r['mean_us'] / 1000:.3f}", str(r["calls"]))
        )
    _table(slow)
    return 0


def cmd_cache(ns: argparse.Namespace) -> int:
    """List or purge the on-disk cache of compiled fused groups.

    Only what the cache wrote is listed or removed; everything else in the
    folder (foreign files, symlinks, malformed entries) is left alone and
    reported, one line each. Exit status: 0, 1 when an entry could not be
    removed, 2 when ``--dir`` is missing or not a folder.
    """
    from .cache import CompiledCache, default_cache_dir

    def shown(path: str) -> str:
        # a file name with a newline must not forge a line of the report
        return path if path.isprintable() else ascii(path)

    if ns.dir is not None and not (ns.dir and Path(ns.dir).is_dir()):
        what = "is not a folder" if ns.dir and os.path.lexists(ns.dir) else "does not exist"
        print(f"ortcore cache: --dir {shown(ns.dir)} {what}", file=sys.stderr)
        return 2
    cache = CompiledCache(ns.dir if ns.dir is not None else default_cache_dir())
    if ns.action == "purge":
        report = cache.purge(ns.provider)
        if ns.json:
            print(json.dumps(report.to_dict(), indent=2))
            return 1 if report.errors else 0
        which = f" of {ns.provider}" if ns.provider else ""
        print(f"removed {report.entries} cached compiled group(s){which} from {cache.directory}")
        if report.temp_files or report.folders:
            print(
                f"also removed {report.temp_files} leftover temp file(s) "
                f"and {report.folders} emptied provider folder(s)"
            )
        if report.sessions:
            print(f"also removed {report.sessions} saved session(s) (ortcore.saved_session)")
        for note in report.skipped:
            print(
                f"{'error' if note.error else 'skipped'} {shown(note.path)}: {note.reason}",
                file=sys.stderr if note.error else sys.stdout,
            )
        return 1 if report.errors else 0
    from .saved_session import SESSION_FOLDER, list_saved

    listing = cache.scan(ns.provider)
    sessions, odd = (
        ([], []) if ns.provider not in (None, SESSION_FOLDER) else (list_saved(cache.directory))
    )
    if ns.json:
        print(json.dumps(listing.entries + sessions, indent=2))
        for note in listing.skipped:
            print(f"skipped {shown(note.path)}: {note.reason}", file=sys.stderr)
        for line in odd:
            print(f"skipped {shown(line)}", file=sys.stderr)
        return 0
    print(f"cache: {cache.directory}")
    if not listing.entries:
        print("no cached compiled groups")
    else:
        fields = ("provider", "version", "device", "group", "nodes", "size", "created")
        rows: list[tuple[str, ...]] = [(*fields[:5], "bytes", "created", "key")]
        for e in listing.entries:
            rows.append((*(str(e.get(k, "")) for k in fields), str(e.get("key", ""))[:12]))
        _table(rows)
    if sessions:
        print(f"saved sessions (EPContext models in {cache.directory / SESSION_FOLDER}):")
        srows: list[tuple[str, ...]] = [("graph", "groups", "providers", "bytes", "created", "key")]
        for m in sessions:
            names = ",".join(str(p.get("name", "")) for p in m.get("providers") or ())
            srows.append(
                (
                    str(m.get("group", "")),
                    str(m.get("nodes", "")),
                    names,
                    str(m.get("size", "")),
                    str(m.get("created", "")),
                    str(m.get("key", ""))[:12],
                )
            )
        _table(srows)
    elif ns.provider is None:
        print("no saved sessions (--session-config ortcore.save_session=1 saves them)")
    for note in listing.skipped:
        print(f"skipped {shown(note.path)}: {note.reason}")
    for line in odd:
        print(f"skipped {shown(line)}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``ortcore`` command."""
    parser = argparse.ArgumentParser(
        prog="ortcore", description=plain_text(__doc__.split("\n\n")[0])
    )
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("providers", help="list installed execution providers")
    p.add_argument("--json", action="store_true", help="print the listing as JSON")
    p.add_argument(
        "--kernels",
        nargs="?",
        const="",
        metavar="NAME",
        help="list every kernel of each provider: op, domain, opsets, types and the Python "
        "function that builds it; NAME (comma-separated names) keeps only these providers "
        "(name or alias) and these ops (e.g. --kernels Conv, --kernels cpu,Conv)",
    )
    p.add_argument(
        "--width",
        type=int,
        metavar="N",
        help="cut table rows to N columns (default: the terminal's width when printing to "
        "one; 0: never cut)",
    )
    p.add_argument(
        "--markdown",
        action="store_true",
        help="with --kernels NAME: the provider's op -> module index as a Markdown page "
        "(how docs/cpu-kernels.md is made)",
    )
    p.add_argument(
        "--devices",
        action="store_true",
        help="list the devices each provider can run on (ortcore.get_ep_devices())",
    )
    verbose_arg(p)
    p.set_defaults(func=cmd_providers)

    def model_args(p: argparse.ArgumentParser) -> None:
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

    p = sub.add_parser("run", help="run a model, time it, check its stored outputs")
    model_args(p)
    p.add_argument("--repeat", type=int, default=10, help="timed runs after the first (default 10)")
    p.add_argument(
        "--rtol", type=float, default=1e-3, help="relative tolerance of the check (default 1e-3)"
    )
    p.add_argument(
        "--atol", type=float, default=1e-5, help="absolute tolerance of the check (default 1e-5)"
    )
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("inspect", help="show which provider runs each node, and why")
    model_args(p)
    p.add_argument(
        "--format",
        choices=["table", "json"],
        default="table",
        help="a table per node (default) or the whole report as JSON",
    )
    p.set_defaults(func=cmd_inspect)

    p = sub.add_parser(
        "bench", help="profile a model: time per op type and provider, copies, slowest nodes"
    )
    model_args(p)
    p.add_argument("--runs", type=int, default=5, help="profiled runs (default 5)")
    p.add_argument("--top", type=int, default=10, help="how many slowest nodes to list")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument(
        "--trace",
        metavar="FILE",
        help="summarise this trace (from end_profiling(), ortcore's or onnxruntime's) "
        "instead of running a model",
    )
    p.set_defaults(func=cmd_bench)

    p = sub.add_parser(
        "cache", help="list or purge the cache of compiled fused groups and saved sessions"
    )
    p.add_argument(
        "action",
        choices=["list", "purge"],
        help="list: the compiled groups and saved sessions; purge: remove them",
    )
    p.add_argument("--provider", help="only this provider's entries (its folder name)")
    p.add_argument(
        "--dir", help="cache folder (default $ORTCORE_CACHE_DIR or ~/.cache/ortcore/compiled)"
    )
    p.add_argument("--json", action="store_true", help="print the entries or the purge as JSON")
    p.set_defaults(func=cmd_cache)

    p = sub.add_parser("ep", help="execution-provider authoring tools")
    ep_sub = p.add_subparsers(dest="ep_command", required=True)
    p = ep_sub.add_parser("new", help="write a provider package to start from")
    p.add_argument("name", help="the provider's short name, e.g. myep")
    p.add_argument("--dir", help="where to write it (default ./ortcore-NAME)")
    p.add_argument(
        "--bridge",
        action="store_true",
        help="a compile-path provider on ep_sdk.BridgeExecutionProvider (an engine builds and "
        "runs fused groups) instead of a kernel-path one",
    )
    p.set_defaults(func=cmd_ep_new)

    _add_plugin_subcommands(sub)
    _add_missing_subcommands(sub)
    return parser


def verbose_arg(p: argparse.ArgumentParser) -> None:
    """``-v``/``--verbose``: debug logging of ortcore, the SDK and the providers,
    with tracebacks (:mod:`ortcore.cli_logging`)."""
    p.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="show ortcore's, the SDK's and the providers' log from debug level up, "
        "with full tracebacks (without it: warnings only, one line each)",
    )


def _add_plugin_subcommands(sub: Any) -> None:
    """Add the subcommands of the :data:`SUBCOMMAND_GROUP` entry points, by name."""
    try:
        found = importlib.metadata.entry_points(group=SUBCOMMAND_GROUP)
    except Exception as exc:  # unreadable metadata: the built-in subcommands still work
        log.warning("ortcore: listing %s entry points failed: %s", SUBCOMMAND_GROUP, exc)
        return
    taken = set(sub.choices)
    for ep in sorted(found, key=lambda e: (e.name, e.value)):
        where = f"{ep.name} = {ep.value}"
        if ep.name in taken:
            log.warning("ortcore: subcommand %r (%s) left out: the name is taken", ep.name, where)
            continue
        taken.add(ep.name)
        try:
            command = ep.load()
            add_arguments, run = command.add_arguments, command.run
        except Exception as exc:
            log.warning("ortcore: subcommand %r (%s) failed to load: %r", ep.name, where, exc)
            continue
        doc = plain_text((getattr(command, "__doc__", None) or "").strip())
        help_line = getattr(command, "HELP", None) or (doc.splitlines()[0] if doc else None)
        p = sub.add_parser(
            ep.name,
            help=help_line,
            description=doc or None,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        try:
            add_arguments(p)
        except Exception as exc:
            log.warning("ortcore: subcommand %r (%s) failed to load: %r", ep.name, where, exc)
            run = _unusable(ep.name, where, exc)
        p.set_defaults(func=run)


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


def _add_missing_subcommands(sub: Any) -> None:
    """The :data:`ELSEWHERE` subcommands no entry point added: each says what to install."""
    for name, (dist, help_line) in ELSEWHERE.items():
        if name in sub.choices:
            continue
        p = sub.add_parser(
            name,
            help=help_line,
            description=f"ortcore {name} comes with {dist}, which is not installed: "
            f"pip install {dist} (from a clone of ortcore: pip install "
            f"./plugins/{dist.removeprefix('ortcore-')})",
        )
        p.add_argument("args", nargs=argparse.REMAINDER, help=f"the arguments {dist} takes")
        p.set_defaults(func=_not_installed(name, dist))


def _not_installed(name: str, dist: str) -> Any:
    """The ``func`` of a subcommand whose distribution is not installed."""

    def run(ns: argparse.Namespace) -> int:
        extra = dist.removeprefix("ortcore-")
        print(
            f"ortcore {name} needs {dist}, which is not installed: pip install {dist} (from a "
            f"clone of ortcore: pip install ./plugins/{extra}), or pip install 'ortcore[{extra}]'",
            file=sys.stderr,
        )
        return 2

    return run


def _unusable(name: str, where: str, exc: BaseException) -> Any:
    """The ``func`` of a subcommand whose arguments could not be added."""

    def run(ns: argparse.Namespace) -> int:
        print(f"ortcore {name}: the subcommand ({where}) failed to load: {exc!r}", file=sys.stderr)
        return 2

    return run


def cmd_ep_new(ns: argparse.Namespace) -> int:
    """Write a provider package (``ortcore ep new NAME``)."""
    from .scaffold import new_provider, provider_names

    try:
        root = new_provider(ns.name, ns.dir, bridge=ns.bridge)
    except (ValueError, FileExistsError) as exc:
        print(f"ortcore ep new: {exc}", file=sys.stderr)
        return 2
    names = provider_names(ns.name)
    print(f"wrote {names['class']} (alias {names['name']}) to {root}")
    print(f"next: pip install -e {root} && ortcore providers && pytest {root / 'tests'}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``ortcore`` console script."""
    from .cli_logging import command_logging

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


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
