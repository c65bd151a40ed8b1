"""``ortcore inspect``: which provider would run each node, and why the others
declined it; the model is partitioned, not compiled or run."""

from __future__ import annotations

import argparse
import json
from typing import Any

from ._common import _session_args, _table, model_args, resolve_model

__all__ = ["add_parser", "cmd_inspect"]


def add_parser(sub: Any) -> None:
    """The ``inspect`` subcommand's arguments."""
    p = sub.add_parser("inspect", help="show which provider runs each node, and why")
    model_args(p)
    p.add_argument(
        "--format",
        choices=["table", "json"],
        default="table",
        help="a table per node (default) or the whole report as JSON",
    )
    p.set_defaults(func=cmd_inspect)


def cmd_inspect(ns: argparse.Namespace) -> int:
    """Show where each node would run: the model is partitioned, not
    compiled or run, so providers installed but unable to run here are asked too."""
    from ..inspection import inspect_partition

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
    from ..partition import decline_lines

    lines = decline_lines(r.declined for r in part.nodes)
    if lines:
        print("declined:")
        for line in lines:
            print(f"  {line}")
