"""``ortcore bench``: profile a model (or read a trace) and summarise it: time
per op type and provider, device copies, the slowest nodes."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from ..errors import InvalidArgument
from ._common import _load_inputs, _session, _table, model_args, resolve_model

__all__ = ["add_parser", "cmd_bench"]


def add_parser(sub: Any) -> None:
    """The ``bench`` subcommand's arguments."""
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


def cmd_bench(ns: argparse.Namespace) -> int:
    """Run a model with profiling and summarise the trace."""
    import tempfile

    from ..profiling import load_trace, summarize

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
