"""The versioned provider contract: the SDK's version, plugins judged by their
declared SDK range before they are imported, and deprecated SDK names.

Plugins here are fake installed distributions on a temporary ``sys.path``
entry: a ``<name>-<version>.dist-info`` folder whose ``METADATA`` carries
``Requires-Dist`` lines and whose ``entry_points.txt`` names a module beside it.
"""

from __future__ import annotations

import importlib.metadata
import logging
import sys
import textwrap
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest

import ep_sdk
import ortcore
import ortcore.cli
import ortcore.plugins
from ortcore.errors import InvalidArgument
from ortcore.plugins import PluginManager
from ortcore.sdk_compat import judge_requirements

from .conftest import chain_model, no_fallback

# A provider written against SDK 1.0: only 1.0 names, and one import from the
# 1.0 layout that SDK 1.1 deprecates (ep_sdk.provider.SessionConfig).
PROVIDER_1_0 = """
import numpy as np

import ep_sdk
from ep_sdk import ExecutionProvider, KernelRegistry
from ep_sdk.provider import SessionConfig

_REGISTRY = KernelRegistry()
_REGISTRY.kernel("Relu", since=6)(lambda info: lambda x: (np.maximum(x, 0).astype(x.dtype),))


class {cls}(ExecutionProvider):
    name = "{cls}"
    aliases = ({alias!r},)
    version = "1.0"

    def kernel_registry(self):
        assert isinstance(self.config, SessionConfig)
        return _REGISTRY


@ep_sdk.hookimpl
def ortcore_providers():
    return [{cls}]
"""

# A plugin that must never be imported: importing it leaves a mark, then fails.
TRIPWIRE = """
import pathlib
pathlib.Path({mark!r}).write_text("imported")
raise RuntimeError("this plugin must not be imported")
"""


class Site:
    """Fake installed distributions with ``ortcore.providers`` entry points."""

    def __init__(self, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.root = root
        self.suffix = uuid.uuid4().hex[:8]
        self.modules: list[str] = []
        monkeypatch.syspath_prepend(str(root))

    def add(self, ep_name: str, source: str, requires: Sequence[str] = ()) -> tuple[str, str]:
        """Install distribution ``ortcore-<ep_name>-<suffix>`` 1.0; returns its
        name and its module's name."""
        mod = f"sdkv_{ep_name}_{self.suffix}"
        dist = f"ortcore-{ep_name}-{self.suffix}"
        self.modules.append(mod)
        (self.root / f"{mod}.py").write_text(textwrap.dedent(source))
        info = self.root / f"{dist.replace('-', '_')}-1.0.dist-info"
        info.mkdir()
        meta = ["Metadata-Version: 2.1", f"Name: {dist}", "Version: 1.0"]
        meta += [f"Requires-Dist: {r}" for r in requires]
        (info / "METADATA").write_text("\n".join(meta) + "\n")
        (info / "entry_points.txt").write_text(f"[ortcore.providers]\n{ep_name} = {mod}\n")
        return dist, mod

    def tripwire(self, ep_name: str, requires: Sequence[str]) -> tuple[str, str, Path]:
        mark = self.root / f"{ep_name}.imported"
        dist, mod = self.add(ep_name, TRIPWIRE.format(mark=str(mark)), requires)
        return dist, mod, mark

    def provider(self, ep_name: str, requires: Sequence[str]) -> tuple[str, str]:
        cls = f"{ep_name.capitalize()}ExecutionProvider"
        return self.add(ep_name, PROVIDER_1_0.format(cls=cls, alias=ep_name), requires)


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Site]:
    monkeypatch.delenv("ORTCORE_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    s = Site(tmp_path, monkeypatch)
    yield s
    for mod in s.modules:
        sys.modules.pop(mod, None)


def _entry(pm: PluginManager, label_start: str) -> ortcore.plugins.ProviderEntry:
    (entry,) = [e for e in pm.entries() if e.plugin.startswith(label_start + " (")]
    return entry


def _relu_runs(pm: PluginManager, provider: str) -> None:
    sess = ortcore.InferenceSession(
        chain_model(["Relu"]), no_fallback(), providers=[provider], plugin_manager=pm
    )
    x = np.array([[-1.0, 2.0, -3.0], [4.0, -5.0, 6.0]], dtype=np.float32)
    (y,) = sess.run(None, {"x": x})
    np.testing.assert_array_equal(y, np.maximum(x, 0))
    assert {r.provider for r in sess.get_partition().nodes} == {sess.get_providers()[0]}


def test_sdk_version_is_the_distributions() -> None:
    """``ep_sdk.__version__`` is the one place the version is written."""
    try:
        installed = importlib.metadata.version("ortcore-ep-sdk")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("ortcore-ep-sdk is not installed (ep_sdk runs from the source tree)")
    assert installed == ep_sdk.__version__


def test_plugin_for_a_future_sdk_is_refused_before_import(
    site: Site,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    dist, mod, mark = site.tripwire("futureep", ["ortcore-ep-sdk>=2.0", "numpy"])
    site.provider("goodep", ["ortcore-ep-sdk>=1.1,<2"])
    pm = PluginManager()

    # Another provider's session is unaffected, and the refused plugin stays unimported.
    with pytest.warns(DeprecationWarning):  # goodep's 1.0-layout import
        _relu_runs(pm, "goodep")
    assert not mark.exists() and mod not in sys.modules

    entry = _entry(pm, "futureep")
    assert not entry.available and entry.cls is None and entry.version == "1.0"
    assert f"{dist} 1.0 requires ortcore-ep-sdk>=2.0" in entry.reason
    assert f"ortcore-ep-sdk {ep_sdk.__version__} is installed" in entry.reason
    assert "pip install -U ortcore ortcore-ep-sdk" in entry.reason
    assert _by_plugin(pm)["goodep"].available

    # A session naming it is told why, by entry-point name or provider-style name: as
    # onnxruntime does for a provider that is installed but cannot run, it is skipped
    # with a warning (the session runs on the CPU provider), or refused when the CPU
    # fallback is off.
    for name in ("futureep", "FutureepExecutionProvider"):
        with caplog.at_level(logging.WARNING, logger="ortcore.plugins"):
            caplog.clear()
            with pytest.warns(UserWarning, match=f"Specified provider '{name}'"):
                sess = ortcore.InferenceSession(
                    chain_model(["Relu"]), providers=[name], plugin_manager=pm
                )
        assert sess.get_providers() == ["CPUExecutionProvider"]
        assert "requires ortcore-ep-sdk>=2.0" in caplog.text
        so = ortcore.SessionOptions()
        so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
        with pytest.raises(ortcore.Fail, match=r"futureep.*requires ortcore-ep-sdk>=2\.0"):
            ortcore.InferenceSession(chain_model(["Relu"]), so, providers=[name], plugin_manager=pm)
        assert not mark.exists() and mod not in sys.modules

    # `ortcore providers` lists it with the reason.
    monkeypatch.setattr(ortcore.plugins, "_default", pm)
    assert ortcore.cli.main(["providers"]) == 0
    (line,) = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("futureep")]
    assert "unavailable: incompatible with the installed provider SDK" in line
    assert "pip install -U ortcore ortcore-ep-sdk" in line
    assert not mark.exists() and mod not in sys.modules


def _by_plugin(pm: PluginManager) -> dict[str, ortcore.plugins.ProviderEntry]:
    return {e.plugin.split(" ")[0]: e for e in pm.entries()}


def test_plugin_for_an_old_sdk_only_is_told_to_upgrade(site: Site) -> None:
    dist, mod, mark = site.tripwire("oldep", ["ortcore-ep-sdk<1.0"])
    pm = PluginManager()
    with pytest.raises(InvalidArgument) as err:
        pm.resolve("oldep")
    assert f"{dist} 1.0 requires ortcore-ep-sdk<1.0" in str(err.value)
    assert f"pip install -U {dist}" in str(err.value)
    assert "older SDK" in str(err.value)
    assert not _entry(pm, "oldep").available
    assert not mark.exists() and mod not in sys.modules


def test_provider_written_against_the_previous_minor_runs_and_warns(site: Site) -> None:
    site.provider("prevminor", ["ortcore-ep-sdk>=1.0,<2", "numpy>=1.26"])
    pm = PluginManager()
    with pytest.warns(DeprecationWarning, match=r"ep_sdk\.provider\.SessionConfig .*ep_sdk 2\.0"):
        _relu_runs(pm, "prevminor")
    entry = pm.resolve("PrevminorExecutionProvider")
    assert entry.available and entry.plugin.startswith("prevminor (")


def test_plugin_without_an_sdk_range_loads_with_one_log_line(
    site: Site, caplog: pytest.LogCaptureFixture
) -> None:
    dist, _ = site.provider("legacyep", ["ortcore>=0.1,<0.2", "numpy"])
    pm = PluginManager()
    with caplog.at_level(logging.INFO, logger="ortcore.plugins"), pytest.warns(DeprecationWarning):
        _relu_runs(pm, "legacyep")
        pm.entries()
    records = [r for r in caplog.records if dist in r.getMessage()]
    assert len(records) == 1, [r.getMessage() for r in records]
    assert "declares no range of ortcore-ep-sdk" in records[0].getMessage()
    assert records[0].levelno == logging.INFO


def test_hand_registered_plugins_are_not_checked() -> None:
    """No distribution, no metadata: a plugin registered by hand is taken as it is."""
    from .conftest import manager_with
    from .providers import MiniProvider

    pm = manager_with(MiniProvider)
    assert pm.resolve("mini").available


@pytest.mark.parametrize(
    ("requires", "verdict"),
    [
        (["ortcore-ep-sdk>=1.1,<2"], "ok"),
        (["Ortcore_EP.SDK (>=1.0,<2)"], "ok"),  # old-style parentheses, unnormalized name
        (["ortcore-ep-sdk[testing]~=1.0"], "ok"),
        (["ortcore-ep-sdk>=3; extra == 'dev'", "ortcore-ep-sdk>=1.0"], "ok"),  # extras bind nothing
        (["ortcore-ep-sdk>=1.0; python_version < '3'"], "none"),  # marker false here
        (["ortcore-ep-sdk"], "none"),
        (["ortcore-ep-sdk @ file:///src/ep_sdk"], "none"),  # a URL names no versions
        (["ortcore>=0.1,<0.2"], "none"),
        (None, "none"),
        (["ortcore-ep-sdk>=1.2,<2"], "newer"),
        (["ortcore-ep-sdk==2.*"], "newer"),
        (["ortcore-ep-sdk==1.0.*"], "older"),
        (["ortcore-ep-sdk~=0.9"], "older"),
        (["ortcore-ep-sdk>=1.0", "ortcore-ep-sdk<1.1"], "older"),  # every line binds
    ],
)
def test_requirement_verdicts(requires: list[str] | None, verdict: str) -> None:
    got = judge_requirements(requires, dist="ortcore-x", dist_version="3.0", sdk_version="1.1.0")
    if verdict in ("ok", "none"):
        assert got.compatible, got.reason
        assert bool(got.declared) == (verdict == "ok")
    else:
        want = (
            "pip install -U ortcore ortcore-ep-sdk"
            if verdict == "newer"
            else "pip install -U ortcore-x"
        )
        assert not got.compatible and want in got.reason, got.reason
        assert "ortcore-x 3.0 requires ortcore-ep-sdk" in got.reason


def test_unreadable_sdk_requirement_refuses_the_plugin(site: Site) -> None:
    _, mod, mark = site.tripwire("badreq", ["ortcore-ep-sdk>=>1"])
    pm = PluginManager()
    assert "could not be read" in _entry(pm, "badreq").reason
    assert not mark.exists() and mod not in sys.modules
