"""``ortcore cache list`` / ``ortcore cache purge``: the compiled fused groups
and saved sessions of the on-disk cache."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from ._common import _table

__all__ = ["add_parser", "cmd_cache"]


def add_parser(sub: Any) -> None:
    """The ``cache`` subcommand's arguments."""
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


def cmd_cache(ns: argparse.Namespace) -> int:
    """List or purge the on-disk cache of compiled fused groups.

    Only what the cache wrote is listed or removed; everything else in the
    folder (foreign files, symlinks, malformed entries) is left alone and
    reported, one line each. Exit status: 0, 1 when an entry could not be
    removed, 2 when ``--dir`` is missing or not a folder.
    """
    from ..cache import CompiledCache, default_cache_dir

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
    from ..saved_session import SESSION_FOLDER, list_saved

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
