"""Declines and engine errors, summarized: one line per provider and reason;
tracebacks only with ``--verbose`` (or debug logging)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, ClassVar

import onnx
import pytest

import ep_sdk
from ortcore import inspection
from ortcore.cli import main
from ortcore.inspection import inspect_partition
from ortcore.partition import decline_lines

from .conftest import chain_model, manager_with
from .providers import MiniProvider

OPS = ["Relu", "Neg"] * 15  # one candidate group of 30 nodes


class Crashing(ep_sdk.BridgeExecutionProvider):
    """An engine that cannot even read a model, as TensorRT without its GPU."""

    name = "CrashingExecutionProvider"
    aliases = ("crashing",)
    queries: ClassVar[int] = 0

    @classmethod
    def unavailable_reason(cls) -> str | None:
        return "no device"

    def query_model(self, model: onnx.ModelProto) -> dict[str, bool]:
        Crashing.queries += 1
        raise RuntimeError(f"engine runtime missing (asked about {len(model.graph.node)} nodes)")

    def build(self, model: bytes, group: ep_sdk.FusedGroup) -> Any:
        raise AssertionError("inspect builds nothing")

    def run(self, engine: Any, inputs: Sequence[Any]) -> Sequence[Any]:
        raise AssertionError("inspect runs nothing")


class Picky(Crashing):
    """Refuses Neg by answer, and crashes on Relu node by node."""

    name = "PickyExecutionProvider"
    aliases = ("picky",)

    def supports_node(self, node: Any, graph: Any) -> ep_sdk.bridge.Answer:
        if node.op_type == "Relu":
            raise ValueError("engine crashed on Relu")
        return "Picky has no Neg"

    query_model = ep_sdk.BridgeExecutionProvider.query_model  # type: ignore[assignment]


@pytest.fixture(autouse=True)
def _fresh() -> None:
    ep_sdk.bridge.forget_answers()
    Crashing.queries = 0


def _cli(monkeypatch: pytest.MonkeyPatch, tmp_path: Any, *cls: type) -> str:
    manager = manager_with(*cls, MiniProvider)
    monkeypatch.setattr(inspection, "default_manager", lambda: manager)
    path = tmp_path / "chain.onnx"
    path.write_bytes(chain_model(OPS))
    return str(path)


def test_an_engine_that_raises_is_one_warning_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any, capsys: Any
) -> None:
    path = _cli(monkeypatch, tmp_path, Crashing)
    assert main(["inspect", path, "--providers", "crashing,mini"]) == 0
    out, err = capsys.readouterr()
    warnings = [line for line in err.splitlines() if line.strip()]
    assert warnings == [
        "CrashingExecutionProvider: query_model raised RuntimeError: engine runtime missing "
        "(asked about 30 nodes) for 30 node(s) in 1 candidate group(s), which it declines; "
        "debug logging (ortcore --verbose) shows each traceback"
    ]
    # the engine raised about the whole group: not asked again about each smaller one
    assert Crashing.queries == 1
    assert (
        "declined:\n  CrashingExecutionProvider declined 30 nodes: CrashingExecutionProvider "
        in out
    )
    assert "(30)" in out


def test_verbose_shows_the_tracebacks(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any, capsys: Any
) -> None:
    path = _cli(monkeypatch, tmp_path, Crashing)
    assert main(["inspect", path, "--providers", "crashing,mini", "--verbose"]) == 0
    err = capsys.readouterr().err
    assert err.count("Traceback (most recent call last)") == 1
    assert "DEBUG ep_sdk.bridge: CrashingExecutionProvider: query_model raised on 30 nodes" in err
    assert "INFO ortcore.partition: CrashingExecutionProvider declined 30 nodes" in err
    # the command's logging is undone when it returns
    assert not logging.getLogger("ep_sdk").isEnabledFor(logging.DEBUG)


def test_library_users_get_no_traceback_at_warning_level(caplog: Any) -> None:
    manager = manager_with(Picky, MiniProvider)
    with caplog.at_level(logging.WARNING):
        found = inspect_partition(
            chain_model(OPS), providers=["picky", "mini"], plugin_manager=manager
        )
    assert [r.exc_info for r in caplog.records] == [None]
    assert (
        caplog.records[0]
        .getMessage()
        .startswith(
            "PickyExecutionProvider: supports_node raised ValueError: engine crashed on Relu "
            "for 15 node(s), which it declines"
        )
    )
    lines = decline_lines(r.declined for r in found.partition.nodes)
    assert lines == [
        "PickyExecutionProvider declined 30 nodes: "
        "PickyExecutionProvider: supports_node raised ValueError('engine crashed on Relu') (15), "
        "Picky has no Neg (15)"
    ]


def test_decline_lines_keep_the_most_frequent_reasons() -> None:
    declined = [{"A": "r1"}] * 5 + [{"A": "r2"}] * 3 + [{"A": f"x{i}"} for i in range(4)]
    declined += [{"B": "only"}]
    assert decline_lines(declined, most=2) == [
        "A declined 12 nodes: r1 (5), r2 (3), and 4 other reason(s)",
        "B declined 1 node: only (1)",
    ]
    assert decline_lines([]) == []
