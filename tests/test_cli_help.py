"""Every option of every ``ortcore`` subcommand says what it does, in plain text."""

from __future__ import annotations

import argparse
from typing import Any

import pytest

from ortcore.cli import build_parser, main, plain_text


def _parsers() -> dict[str, argparse.ArgumentParser]:
    found: dict[str, argparse.ArgumentParser] = {}

    def walk(parser: argparse.ArgumentParser, path: str) -> None:
        found[path] = parser
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, child in action.choices.items():
                    walk(child, f"{path} {name}".strip())

    walk(build_parser(), "")
    return found


def test_every_option_has_help() -> None:
    parsers = _parsers()
    assert {"run", "inspect", "bench", "providers", "cache", "ep new"} <= set(parsers)
    missing = [
        f"ortcore {path}: {action.dest}"
        for path, parser in parsers.items()
        for action in parser._actions
        if not isinstance(action, argparse._SubParsersAction) and not action.help
    ]
    assert missing == []


@pytest.mark.parametrize("command", [["--help"], ["conformance", "--help"], ["run", "--help"]])
def test_help_has_no_markup(command: list[str], capsys: Any) -> None:
    with pytest.raises(SystemExit):
        main(command)
    text = capsys.readouterr().out
    for markup in ("``", ":func:", ":class:", ":mod:", "::\n"):
        assert markup not in text


def test_plain_text_strips_rest() -> None:
    doc = (
        "Calls :func:`ortcore.cli.main` and :class:`~ep_sdk.FusedGroup` with ``x=1``;\n"
        "see :ref:`the page <page>`.\n\nExample::\n\n    ortcore run\n"
    )
    assert plain_text(doc) == (
        "Calls ortcore.cli.main and FusedGroup with x=1;\nsee the page.\n\nExample:\n\n"
        "    ortcore run\n"
    )
