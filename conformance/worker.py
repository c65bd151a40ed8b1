"""A worker process: runs the cases its parent names, one at a time.

Started by :mod:`conformance.pool` as ``python -m conformance.worker``. It
reads case ids on stdin and answers one JSON line per case on the stdout it
was started with; anything the code under test prints goes to stderr. It
writes ``ready`` once its providers and cases are loaded.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence

from ortcore.cli import provider_option

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Serve case ids from stdin until it closes."""
    parser = argparse.ArgumentParser(prog="python -m conformance.worker")
    parser.add_argument("--provider", required=True)
    parser.add_argument("--config")
    parser.add_argument("--plugin", action="append", default=[])
    parser.add_argument("--kinds", default="")
    parser.add_argument("--depth", default="quick")
    parser.add_argument("--provider-option", action="append", default=[], type=provider_option)
    args = parser.parse_args(argv)
    protocol = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    from .cases import load_kind, set_depth
    from .suite import load_plugins, make_target, run_id

    set_depth(args.depth)
    load_plugins(args.plugin)
    target = make_target(args.provider, args.config, dict(args.provider_option))
    for kind in filter(None, args.kinds.split(",")):
        if kind != "contract":
            load_kind(kind)
    protocol.write("ready\n")
    for line in sys.stdin:
        case_id = line.strip()
        if not case_id:
            continue
        result = run_id(case_id, target)
        protocol.write(json.dumps(result.to_dict()) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
