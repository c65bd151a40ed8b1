"""The documentation's code runs: tutorial, custom operator, fusing provider, the build."""

from __future__ import annotations

import importlib
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
EXAMPLES = DOCS / "examples"


@pytest.fixture
def examples() -> Iterator[None]:
    """docs/examples on sys.path, as when running the scripts from that folder.

    The examples register their providers with the process-wide plugin
    manager; they are unregistered afterwards so that other tests see the
    default provider list.
    """
    from ortcore.plugins import default_manager

    sys.path.insert(0, str(EXAMPLES))
    yield
    sys.path.remove(str(EXAMPLES))
    for name in ("tutorial_provider", "fused_provider_example"):
        default_manager().unregister_plugin(name)
    for module in (
        "tutorial_provider",
        "tutorial_run",
        "custom_op",
        "fused_provider",
        "session_features",
    ):
        sys.modules.pop(module, None)


def example(name: str) -> ModuleType:
    return importlib.import_module(name)


def test_tutorial_runs_with_cpu_fallback(cpu: str, examples: None) -> None:
    counts = example("tutorial_run").main()
    assert counts == {"TutorialExecutionProvider": 3, cpu: 2}


def test_custom_op_guide_runs(cpu: str, examples: None) -> None:
    y = example("custom_op").main()
    assert y.tolist() == [[3.0, 6.0], [-3.0, 6.0]]


def test_fusing_provider_compiles_groups(cpu: str, examples: None) -> None:
    counts = example("fused_provider").main()
    assert counts == {"FusingExecutionProvider": 5, cpu: 1}


def test_session_features_guide_runs(cpu: str, examples: None) -> None:
    out = example("session_features").main()
    assert "Mul" in out["trace_ops"] and out["trace_ops"] & {"MatMul", "FusedMatMul"}
    x = np.ones((8, 64), np.float32)
    y, z, y_buffer = out["iobinding"]
    np.testing.assert_array_equal(z, x * 2)
    np.testing.assert_array_equal(y, y_buffer)  # the bound OrtValue holds the result
    np.testing.assert_array_equal(out["z_only"], x * 2)
    np.testing.assert_array_equal(out["parallel"], out["sequential"])
    np.testing.assert_array_equal(out["sequential"], y)


def test_tutorial_provider_passes_a_conformance_subset(cpu: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(EXAMPLES)}  # ortcore itself: the installed one
    args = ["conformance", "--plugin", "tutorial_provider", "--provider", "tutorial"]
    args += ["--no-progress", "--suites", "contract,operators"]
    args += ["-k", r"^contract/|^node/test_(relu|add|mul)$"]
    result = subprocess.run(
        [sys.executable, "-m", "ortcore", *args],
        cwd=EXAMPLES,
        env=env,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    # every contract check passes, however many the suite has
    assert re.search(r"contract checks (\d+)/\1 passed", result.stdout), result.stdout


def test_every_snippet_exists_and_every_example_is_shown() -> None:
    included: set[str] = set()
    for page in DOCS.rglob("*.md"):
        for ref in re.findall(r'--8<-- "([^"]+)"', page.read_text()):
            path, _, section = ref.partition(":")
            text = (ROOT / path).read_text()
            if section:
                assert f"[start:{section}]" in text, f"{page.name}: {ref}"
            included.add(Path(path).name)
    shown = {p.name for p in EXAMPLES.glob("*.py")}
    assert shown <= included, f"examples not in any page: {shown - included}"


def test_smallest_provider_on_tutorial_page_works(cpu: str) -> None:
    """The 15-line provider at the end of the tutorial runs a node and passes ``contract/loads``."""
    import types

    import numpy as np

    from conformance.contract import run_check
    from conformance.execute import Target
    from ep_sdk.testing import check_node
    from ortcore.plugins import default_manager

    page = (DOCS / "tutorial.md").read_text()
    code = page.split("## The smallest working provider")[1].split("```python")[1].split("```")[0]
    assert len(code.strip().splitlines()) == 20  # 15 lines of code and 5 blank lines
    module = types.ModuleType("tiny_provider_from_tutorial")
    exec(compile(code, "tutorial.md", "exec"), module.__dict__)
    x = np.array([-1.0, 3.0], np.float32)
    (y,) = check_node(module.TinyExecutionProvider, "Relu", [x], opset=14)
    assert y.tolist() == [0.0, 3.0]
    manager = default_manager()
    manager.register_plugin(module, name=module.__name__)
    try:
        result = run_check("loads", Target.resolve("tiny"))
        assert result.outcome == "passed", result.detail
    finally:
        manager.unregister_plugin(module.__name__)


@pytest.mark.skipif(
    shutil.which("mkdocs") is None and not (Path(sys.prefix) / "bin" / "mkdocs").exists(),
    reason="mkdocs not installed (tox -e docs)",
)
def test_docs_build_strict(tmp_path: Path) -> None:
    mkdocs = shutil.which("mkdocs") or str(Path(sys.prefix) / "bin" / "mkdocs")
    result = subprocess.run(
        [mkdocs, "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert result.returncode == 0, result.stderr[-3000:]
