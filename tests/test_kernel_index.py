"""The op -> module index: ``ortcore providers --kernels [NAME]`` (ortcore.kernel_index)."""

from __future__ import annotations

import importlib
import importlib.util
import json
from pathlib import Path
from typing import Any, ClassVar

import onnx_ir as ir
import pytest

from ep_sdk import ExecutionProvider, KernelDef, KernelRegistry
from ortcore.cli import main
from ortcore.kernel_index import ProviderKernels, kernel_entries, markdown_page, provider_kernels
from ortcore.plugins import ProviderEntry


def _builder(module: str, function: str) -> Any:
    """The object ``module:function`` names (a ``<locals>`` name is not importable)."""
    obj: Any = importlib.import_module(module)
    for part in function.split("."):
        obj = getattr(obj, part)
    return obj


def test_cpu_kernels_name_their_module(cpu: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["providers", "--kernels", "cpu"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{cpu}: ")
    rows = {line.split()[0]: line.split() for line in out.splitlines()[3:] if line.strip()}
    for op in ("Conv", "MatMul", "Relu"):
        _, domain, opsets, built_by, *_ = rows[op]
        assert domain == "ai.onnx" and opsets.endswith("+"), rows[op]  # the latest range
        assert built_by.startswith("ortcore_cpu.kernels."), built_by


def test_cpu_kernels_json_points_at_the_registered_builders(
    cpu: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["providers", "--kernels", cpu, "--json"]) == 0
    (listing,) = json.loads(capsys.readouterr().out)
    assert listing["provider"] == cpu and listing["note"] == ""
    from ortcore_cpu.provider import CPUExecutionProvider

    registry = CPUExecutionProvider().kernel_registry()
    assert len(listing["kernels"]) == len(registry)
    by_op: dict[str, list[dict[str, Any]]] = {}
    for k in listing["kernels"]:
        by_op.setdefault(k["op_type"], []).append(k)
    for op in ("Conv", "MatMul", "Relu"):
        assert by_op[op], op
        for k in by_op[op]:
            assert k["domain"] == "ai.onnx"
            assert k["module"].startswith("ortcore_cpu.kernels."), k
            assert "float" in k["types"]["T"], k
            registered = registry.lookup(op, "", k["since"])
            assert isinstance(registered, KernelDef), registered
            assert _builder(k["module"], k["function"]) is registered.builder


def test_all_providers_listed_with_lambdas_and_locals(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["providers", "--kernels", "--json"]) == 0
    by_name = {p["provider"]: p for p in json.loads(capsys.readouterr().out)}
    mini = {k["op_type"]: k for k in by_name["MiniExecutionProvider"]["kernels"]}
    assert set(mini) == {"Add", "Mul", "Sub", "Relu", "Neg", "If"}
    assert mini["Add"]["module"] == "tests.providers"
    assert mini["Add"]["function"] == "_binary.<locals>.build"
    assert mini["Add"]["types"] == {"T": ["double", "float"]}
    assert (mini["Add"]["since"], mini["Add"]["until"]) == (7, None)
    assert mini["If"]["function"] == "_if_kernel"
    assert mini["Relu"]["types"] == {}  # any type


def test_unknown_provider_name_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["providers", "--kernels", "nosuch"]) == 2
    err = capsys.readouterr().err
    assert "'nosuch' matched nothing: no provider of that name" in err
    assert "MiniExecutionProvider" in err


class _Compiling(ExecutionProvider):
    name = "CompilingExecutionProvider"


class _Broken(ExecutionProvider):
    name = "BrokenExecutionProvider"
    default_options: ClassVar[dict[str, str]] = {}

    def kernel_registry(self) -> KernelRegistry:
        raise ImportError("no libfoo.so")


def _entry(cls: type[ExecutionProvider] | None, available: bool = True) -> ProviderEntry:
    return ProviderEntry(
        name=cls.name if cls else "GoneExecutionProvider",
        aliases=(),
        plugin="tests",
        version="0",
        device="cpu",
        available=available,
        reason="" if available else "no device",
        cls=cls,
    )


def test_providers_without_kernels_say_why() -> None:
    compiling = provider_kernels(_entry(_Compiling))
    assert compiling.kernels == () and "no kernel registry" in compiling.note
    broken = provider_kernels(_entry(_Broken))
    assert "failed to load" in broken.note and "libfoo" in broken.note
    gone = provider_kernels(_entry(_Compiling, available=False))
    assert gone.note == "unavailable: no device"


ROOT = Path(__file__).resolve().parent.parent


def test_cpu_kernels_page_is_current(cpu: str, capsys: pytest.CaptureFixture[str]) -> None:
    from ortcore.cli import KERNELS_PAGE_COMMAND, main

    assert main(["providers", "--kernels", "cpu", "--markdown"]) == 0
    page = capsys.readouterr().out
    committed = (ROOT / "docs" / "cpu-kernels.md").read_text(encoding="utf-8")
    assert committed == page, (
        f"docs/cpu-kernels.md is stale: run `{KERNELS_PAGE_COMMAND}` and commit the result"
    )


def test_markdown_needs_one_provider(capsys: pytest.CaptureFixture[str]) -> None:
    from ortcore.cli import main

    assert main(["providers", "--kernels", "--markdown"]) == 2
    assert "--markdown needs a provider" in capsys.readouterr().err
    assert main(["providers", "--markdown"]) == 2


def test_markdown_page_has_one_row_per_op_with_collapsed_ranges() -> None:
    reg = KernelRegistry()

    def attr(info: Any) -> Any:
        return None

    def from_input(info: Any) -> Any:
        return None

    reg.kernel("Reduce", since=1, until=10)(attr)
    reg.kernel("Reduce", since=11, until=17)(attr)
    reg.kernel("Reduce", since=18, types={"T": {ir.DataType.FLOAT}})(from_input)
    reg.kernel("Gap", since=1, until=6)(attr)
    reg.kernel("Gap", since=9)(attr)
    page = markdown_page(
        ProviderKernels("TestExecutionProvider", tuple(kernel_entries(reg))), generator="gen"
    )
    rows = [line for line in page.splitlines() if line.startswith("| ") and "---" not in line]
    assert rows[1:] == [
        f"| Gap | 1-6, 9+ | 1, 9 | *any* | `{__name__}:{attr.__qualname__}` |",
        f"| Reduce | 1+ | 1, 11, 18 | T: float | `{__name__}:{attr.__qualname__}` (1-17)"
        f"<br>`{__name__}:{from_input.__qualname__}` (18+) |",
    ]
    assert "Generated by `gen`" in page
