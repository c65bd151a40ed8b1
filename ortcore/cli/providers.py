"""``ortcore providers``: the installed providers, their devices (``--devices``),
and their kernels (``--kernels [NAMES]``, ``--markdown`` for the docs' index)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from ._common import _output_width, _table, default_manager, verbose_arg

__all__ = ["KERNELS_PAGE_COMMAND", "add_parser", "cmd_providers"]

KERNELS_PAGE_COMMAND = "ortcore providers --kernels cpu --markdown > docs/cpu-kernels.md"
"""The command that writes the docs' CPU kernel index (docs/cpu-kernels.md)."""


def add_parser(sub: Any) -> None:
    """The ``providers`` subcommand's arguments."""
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
    from ..ep_devices import device_errors, get_ep_devices

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
    from ..kernel_index import markdown_page, only_ops, provider_kernels

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
