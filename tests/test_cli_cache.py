"""``--cache-dir`` and ``--session-config`` on run/inspect/bench; where each
compiled group came from (partition report, inspect, the ``ortcore.cache`` log);
``ortcore cache list`` shows saved sessions."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

import ortcore
from ortcore import cli, inspection, plugins, session
from ortcore.cache import SOURCES

from .conftest import manager_with
from .providers import MiniProvider
from .test_compile_cache import BakingProvider, affine_model


@pytest.fixture
def model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    manager = manager_with(BakingProvider, MiniProvider)
    # plugins: the CLI asks ortcore.plugins.default_manager at each call
    for module in (plugins, inspection, session):
        monkeypatch.setattr(module, "default_manager", lambda: manager)
    BakingProvider.builds = BakingProvider.loads = 0
    BakingProvider.groups.clear()
    path = tmp_path / "affine.onnx"
    path.write_bytes(affine_model([1.0, 2.0, 3.0], [0.5, 0.5, 0.5]))
    return path


def _run(*args: str) -> int:
    return cli.main(["run", *args, "--providers", "baking,mini", "--repeat", "0"])


def test_run_with_a_cache_says_miss_then_hit(model: Path, tmp_path: Path, capsys: Any) -> None:
    cache = tmp_path / "cache"
    assert _run(str(model), "--cache-dir", str(cache)) == 0
    out = capsys.readouterr().out
    assert f"compiled groups:\n  BakingExecutionProvider_fused_1: {SOURCES['miss']}" in out
    assert _run(str(model), "--cache-dir", str(cache)) == 0
    assert f"BakingExecutionProvider_fused_1: {SOURCES['hit']}" in capsys.readouterr().out
    assert BakingProvider.builds == 1 and BakingProvider.loads == 1
    assert _run(str(model)) == 0  # no cache: compiled, and said so
    assert SOURCES["off"] in capsys.readouterr().out


def test_saved_sessions_are_made_listed_and_reported(
    model: Path, tmp_path: Path, capsys: Any, caplog: Any
) -> None:
    cache = tmp_path / "cache"
    args = (str(model), "--cache-dir", str(cache), "--session-config", "ortcore.save_session=1")
    assert _run(*args) == 0
    capsys.readouterr()
    with caplog.at_level(logging.INFO, logger="ortcore.cache"):
        assert _run(*args) == 0
    assert f"BakingExecutionProvider_fused_1: {SOURCES['saved']}" in capsys.readouterr().out
    assert any(
        r.name == "ortcore.cache" and "compiled group(s) loaded from the cache" in r.getMessage()
        for r in caplog.records
    )
    assert cli.main(["cache", "list", "--dir", str(cache)]) == 0
    out = capsys.readouterr().out
    assert "saved sessions (EPContext models in" in out and "BakingExecutionProvider" in out
    assert cli.main(["cache", "list", "--dir", str(cache), "--json"]) == 0
    entries = json.loads(capsys.readouterr().out)
    assert {e["provider"] for e in entries} == {"BakingExecutionProvider", "ortcore.session"}
    saved = next(e for e in entries if e["provider"] == "ortcore.session")
    assert saved["path"].endswith(".onnx") and Path(saved["path"]).is_file()


def test_an_empty_cache_says_how_to_save_sessions(tmp_path: Path, capsys: Any) -> None:
    assert cli.main(["cache", "list", "--dir", str(tmp_path)]) == 0
    assert "no saved sessions (--session-config ortcore.save_session=1" in capsys.readouterr().out


def test_inspect_tells_whether_each_group_is_in_the_cache(
    model: Path, tmp_path: Path, capsys: Any
) -> None:
    cache = tmp_path / "cache"
    inspect = ["inspect", str(model), "--providers", "baking,mini", "--cache-dir", str(cache)]
    assert cli.main([*inspect, "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["cache"] == {"BakingExecutionProvider_fused_1": inspection.NOT_IN_CACHE}
    assert _run(str(model), "--cache-dir", str(cache)) == 0
    capsys.readouterr()
    assert cli.main(inspect) == 0
    out = capsys.readouterr().out
    assert f"BakingExecutionProvider_fused_1: {inspection.IN_CACHE}" in out
    assert BakingProvider.builds == 1  # inspect compiled nothing


def test_the_log_and_the_report_name_the_source(model: Path, tmp_path: Path, caplog: Any) -> None:
    so = ortcore.SessionOptions()
    so.add_session_config_entry("ortcore.cache_dir", str(tmp_path / "c"))
    with caplog.at_level(logging.INFO, logger="ortcore.cache"):
        sess = ortcore.InferenceSession(str(model), so, providers=["baking", "mini"])
    part = sess.get_partition()
    assert part.compiled == {"BakingExecutionProvider_fused_1": SOURCES["miss"]}
    assert part.to_dict()["compiled"] == dict(part.compiled)
    assert (
        f"group BakingExecutionProvider_fused_1 (BakingExecutionProvider, 2 nodes): "
        f"{SOURCES['miss']}" in str(part)
    )
    assert [r.getMessage().split(" (entry")[0] for r in caplog.records] == [
        f"BakingExecutionProvider: compiled group BakingExecutionProvider_fused_1: "
        f"{SOURCES['miss']}"
    ]


def test_session_config_entries_reach_the_session(model: Path, capsys: Any) -> None:
    args = ["--session-config", "session.disable_cpu_ep_fallback=1"]
    assert cli.main(["bench", str(model), "--providers", "baking,mini", "--runs", "1", *args]) == 0
    assert "compiled group BakingExecutionProvider_fused_1: " in capsys.readouterr().out
    with pytest.raises(SystemExit):
        cli.main(["run", str(model), "--session-config", "novalue"])
    assert "expected KEY=VALUE" in capsys.readouterr().err
