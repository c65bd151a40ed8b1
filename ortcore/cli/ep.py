"""``ortcore ep new NAME``: write a provider package to start from
(:mod:`ortcore.scaffold`)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

__all__ = ["add_parser", "cmd_ep_new"]


def add_parser(sub: Any) -> None:
    """The ``ep`` subcommand and its ``new``."""
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


def cmd_ep_new(ns: argparse.Namespace) -> int:
    """Write a provider package (``ortcore ep new NAME``)."""
    from ..scaffold import new_provider, provider_names

    try:
        root = new_provider(ns.name, ns.dir, bridge=ns.bridge)
    except (ValueError, FileExistsError) as exc:
        print(f"ortcore ep new: {exc}", file=sys.stderr)
        return 2
    names = provider_names(ns.name)
    print(f"wrote {names['class']} (alias {names['name']}) to {root}")
    print(f"next: pip install -e {root} && ortcore providers && pytest {root / 'tests'}")
    return 0
