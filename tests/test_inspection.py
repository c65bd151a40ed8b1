"""``ortcore.inspection``: partitioning without compiling, unavailable providers asked too."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import pytest

import ep_sdk
import ortcore
from ortcore.cli import main
from ortcore.inspection import inspect_partition

from .conftest import chain_model, manager_with
from .providers import MiniProvider


class GroupingBridge(ep_sdk.BridgeExecutionProvider):
    """Claims Relu and Neg nodes as fused groups; cannot run on this machine."""

    name = "GroupingBridgeExecutionProvider"
    aliases = ("grouping",)
    compiled: ClassVar[int] = 0

    @classmethod
    def unavailable_reason(cls) -> str | None:
        return "its accelerator is not in this machine"

    def supports_node(self, node: Any, graph: Any) -> ep_sdk.bridge.Answer:
        return node.op_type in ("Relu", "Neg") or f"no {node.op_type} here"

    def build(self, model: bytes, group: ep_sdk.FusedGroup) -> Any:
        GroupingBridge.compiled += 1
        return None

    def run(self, engine: Any, inputs: Sequence[Any]) -> Sequence[Any]:
        raise AssertionError("inspect runs nothing")


@pytest.fixture
def manager() -> Any:
    GroupingBridge.compiled = 0
    return manager_with(GroupingBridge, MiniProvider)


def test_an_unavailable_provider_is_asked_and_nothing_is_compiled(manager: Any) -> None:
    model = chain_model(["Relu", "Neg", "Add", "Relu"])
    found = inspect_partition(model, providers=["grouping", "mini"], plugin_manager=manager)
    assert found.unavailable == {
        "GroupingBridgeExecutionProvider": "its accelerator is not in this machine"
    }
    where = [(r.op_type, r.provider, r.group) for r in found.partition.nodes]
    assert where == [
        ("Relu", "GroupingBridgeExecutionProvider", "GroupingBridgeExecutionProvider_fused_1"),
        ("Neg", "GroupingBridgeExecutionProvider", "GroupingBridgeExecutionProvider_fused_1"),
        ("Add", "MiniExecutionProvider", ""),
        ("Relu", "GroupingBridgeExecutionProvider", "GroupingBridgeExecutionProvider_fused_2"),
    ]
    add = found.partition.nodes[2]
    assert add.declined == {"GroupingBridgeExecutionProvider": "no Add here"}
    assert GroupingBridge.compiled == 0
    assert [a.name for a in found.inputs] == ["x"] and len(found.outputs) == 1
    # a session skips the provider that cannot run, as onnxruntime does
    with pytest.warns(UserWarning, match="GroupingBridgeExecutionProvider|grouping"):
        sess = ortcore.InferenceSession(
            model, providers=["grouping", "mini"], plugin_manager=manager
        )
    assert sess.get_providers() == ["MiniExecutionProvider"]


def test_without_unavailable_providers_it_partitions_as_a_session_does(manager: Any) -> None:
    model = chain_model(["Relu", "Neg", "Add"])
    with pytest.warns(UserWarning, match="grouping"):
        found = inspect_partition(
            model, providers=["grouping", "mini"], unavailable=False, plugin_manager=manager
        )
    assert found.unavailable == {}
    assert found.partition.providers == ("MiniExecutionProvider",)
    sess = ortcore.InferenceSession(model, providers=["mini"], plugin_manager=manager)
    assert found.partition.nodes == sess.get_partition().nodes


def test_cli_inspect_says_what_it_did(
    manager: Any, tmp_path: Any, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    from ortcore import inspection

    monkeypatch.setattr(inspection, "default_manager", lambda: manager)
    path = tmp_path / "m.onnx"
    path.write_bytes(chain_model(["Relu", "Neg", "Add"]))
    assert main(["inspect", str(path), "--providers", "grouping,mini"]) == 0
    out = capsys.readouterr().out
    assert "(partitioned only: nothing was compiled or run)" in out
    assert "note: GroupingBridgeExecutionProvider cannot run here (its accelerator" in out
    assert "groups: GroupingBridgeExecutionProvider_fused_1 (2 nodes)" in out
    assert GroupingBridge.compiled == 0
