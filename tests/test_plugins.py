"""Plugin discovery: entry points, broken plugins, the provider table, name resolution."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import ortcore
from ep_sdk import ExecutionProvider
from ortcore.plugins import PluginManager

from .conftest import chain_model, manager_with, no_fallback, plugin_module
from .providers import MiniProvider

PROVIDER_SRC = """
import pathlib
import ep_sdk
from ep_sdk import ExecutionProvider

pathlib.Path({order!r}).open("a").write({tag!r} + "\\n")

class {cls}(ExecutionProvider):
    name = {name!r}
    aliases = ({alias!r},)
    version = "1.0"
    priority = 10

    @classmethod
    def unavailable_reason(cls):
        return {reason!r}

@ep_sdk.hookimpl
def {hook}():
    return [{cls}]
"""


class FakeInstall:
    """Writes fake installed distributions with ``ortcore.providers`` entry points."""

    def __init__(self, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.root = root
        self.order = root / "order.txt"
        self.order.write_text("")
        self.modules: list[str] = []
        self.suffix = uuid.uuid4().hex[:8]
        monkeypatch.syspath_prepend(str(root))

    def add(
        self,
        ep_name: str,
        *,
        provider: str | None = None,
        source: str | None = None,
        reason: str | None = None,
        hook: str = "ortcore_providers",
    ) -> str:
        """Install distribution ``<ep_name>`` whose entry point ``ep_name`` names a new module."""
        mod = f"plug_{ep_name}_{self.suffix}"
        self.modules.append(mod)
        if source is None:
            source = PROVIDER_SRC.format(
                order=str(self.order),
                tag=ep_name,
                cls=f"P_{ep_name}",
                name=provider or f"{ep_name}ExecutionProvider",
                alias=ep_name,
                reason=reason,
                hook=hook,
            )
        (self.root / f"{mod}.py").write_text(textwrap.dedent(source))
        dist = self.root / f"{ep_name}_{self.suffix}-1.0.dist-info"
        dist.mkdir()
        (dist / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: {ep_name}-{self.suffix}\nVersion: 1.0\n"
        )
        (dist / "entry_points.txt").write_text(f"[ortcore.providers]\n{ep_name} = {mod}\n")
        return mod

    def imported(self) -> list[str]:
        return self.order.read_text().split()

    def cleanup(self) -> None:
        for mod in self.modules:
            sys.modules.pop(mod, None)


@pytest.fixture
def install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeInstall]:
    monkeypatch.delenv("ORTCORE_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    fi = FakeInstall(tmp_path, monkeypatch)
    yield fi
    fi.cleanup()


def _by_name(pm: PluginManager) -> dict[str, ortcore.plugins.ProviderEntry]:
    return {e.name: e for e in pm.entries()}


# -- entry points ----------------------------------------------------------------------


def test_entry_point_plugin_is_found(install: FakeInstall) -> None:
    install.add("myplug")
    entries = _by_name(PluginManager())
    e = entries["myplugExecutionProvider"]
    assert e.available and e.reason == ""
    assert e.aliases == ("myplug",)
    assert e.version == "1.0"
    assert e.cls is not None and issubclass(e.cls, ExecutionProvider)
    assert "myplug" in e.plugin


def test_entry_points_load_once_in_sorted_order(install: FakeInstall) -> None:
    install.add("zeta")
    install.add("alpha")
    install.add("mid")
    pm = PluginManager()
    assert install.imported() == []  # nothing loaded before it is needed
    names = {e.name for e in pm.entries()}
    assert {"alphaExecutionProvider", "midExecutionProvider", "zetaExecutionProvider"} <= names
    assert install.imported() == ["alpha", "mid", "zeta"]
    pm.entries()
    pm.available()
    pm.resolve("alpha")
    assert install.imported() == ["alpha", "mid", "zeta"]


def test_plugin_failing_on_import_is_unavailable_others_load(install: FakeInstall) -> None:
    install.add("broken", source="raise ImportError('libfoo.so not found')\n")
    install.add("good")
    pm = PluginManager()
    entries = pm.entries()
    broken = [e for e in entries if "broken" in e.plugin]
    assert len(broken) == 1
    assert not broken[0].available and broken[0].cls is None
    assert "libfoo.so not found" in broken[0].reason
    assert pm.resolve("good").name == "goodExecutionProvider"


def test_provider_with_unavailable_reason(install: FakeInstall) -> None:
    install.add("nodev", reason="no NoDev device found")
    pm = PluginManager()
    e = _by_name(pm)["nodevExecutionProvider"]
    assert not e.available
    assert e.reason == "no NoDev device found"
    assert "nodevExecutionProvider" not in [a.name for a in pm.available()]
    with pytest.raises(ortcore.InvalidArgument, match="no NoDev device found"):
        pm.resolve("nodev")
    with pytest.raises(ortcore.InvalidArgument, match="unavailable"):
        pm.resolve("nodevExecutionProvider")


def test_autoload_disabled_by_environment(
    install: FakeInstall, monkeypatch: pytest.MonkeyPatch
) -> None:
    install.add("myplug")
    monkeypatch.setenv("ORTCORE_DISABLE_PLUGIN_AUTOLOAD", "1")
    pm = PluginManager()
    assert pm.entries() == []
    assert install.imported() == []
    # plugins can still be registered by hand
    pm.register_plugin(plugin_module("handmade", MiniProvider), name="handmade")
    assert [e.name for e in pm.entries()] == ["MiniExecutionProvider"]


def test_autoload_enabled_finds_installed_cpu(install: FakeInstall) -> None:
    pm = PluginManager()
    if "CPUExecutionProvider" not in _by_name(pm):
        pytest.skip("ortcore-cpu is not installed")
    assert _by_name(pm)["CPUExecutionProvider"].aliases == ("cpu",)


def test_misspelled_hook_is_listed_unavailable(install: FakeInstall) -> None:
    install.add("typo", hook="ortcore_provider")
    install.add("fine")
    pm = PluginManager()
    entries = pm.entries()  # must not raise
    typo = [e for e in entries if "typo" in e.plugin]
    assert pm.resolve("fine").name == "fineExecutionProvider"
    assert len(typo) == 1 and not typo[0].available
    assert "ortcore_provider" in typo[0].reason


def test_hook_that_raises_is_unavailable(install: FakeInstall) -> None:
    src = """
    import ep_sdk

    @ep_sdk.hookimpl
    def ortcore_providers():
        raise RuntimeError("cannot list providers")
    """
    install.add("raiser", source=src)
    install.add("fine")
    pm = PluginManager()
    raiser = [e for e in pm.entries() if "raiser" in e.plugin]
    assert len(raiser) == 1 and not raiser[0].available
    assert "cannot list providers" in raiser[0].reason
    assert pm.resolve("fine").available


def test_hook_returning_non_provider_is_unavailable() -> None:
    pm = PluginManager(autoload=False)
    pm.register_plugin(plugin_module("weird", int, MiniProvider), name="weird")
    entries = pm.entries()
    assert [e.name for e in entries if e.available] == ["MiniExecutionProvider"]
    bad = [e for e in entries if not e.available]
    assert len(bad) == 1 and "ExecutionProvider" in bad[0].reason


def test_duplicate_provider_name_is_refused(install: FakeInstall) -> None:
    install.add("aaa", provider="SameExecutionProvider")
    install.add("bbb", provider="SameExecutionProvider")
    pm = PluginManager()
    same = [e for e in pm.entries() if e.name == "SameExecutionProvider"]
    assert len(same) == 2
    first, second = sorted(same, key=lambda e: not e.available)
    assert first.available and "aaa" in first.plugin
    assert not second.available and "already provided" in second.reason
    assert "aaa" in second.reason
    assert pm.resolve("SameExecutionProvider").plugin == first.plugin


def test_register_same_plugin_twice_is_harmless() -> None:
    pm = PluginManager(autoload=False)
    mod = plugin_module("twice", MiniProvider)
    pm.register_plugin(mod, name="twice")
    pm.register_plugin(mod, name="twice")
    assert [e.name for e in pm.entries()] == ["MiniExecutionProvider"]


def test_unregister_plugin_forgets_its_providers() -> None:
    pm = manager_with(MiniProvider)
    assert pm.resolve("mini")
    pm.unregister_plugin("tests.adhoc")
    assert pm.entries() == []
    with pytest.raises(ortcore.InvalidArgument):
        pm.resolve("mini")


# -- resolution ---------------------------------------------------------------------------


def test_unknown_provider_lists_available_ones() -> None:
    # enable_fallback=0: without it, a session retries on the CPU (onnxruntime's rule)
    with pytest.raises(ortcore.InvalidArgument) as info:
        ortcore.InferenceSession(
            chain_model(["Neg"]), providers=["NoSuchExecutionProvider"], enable_fallback=0
        )
    msg = str(info.value)
    assert "NoSuchExecutionProvider" in msg
    assert "MiniExecutionProvider" in msg and "mini" in msg
    assert "FakeDeviceExecutionProvider" in msg


@pytest.mark.parametrize("name", ["mini", "MINI", "MiniExecutionProvider", "miniexecutionprovider"])
def test_alias_and_full_names_resolve(name: str) -> None:
    sess = ortcore.InferenceSession(chain_model(["Neg"]), no_fallback(), providers=[name])
    assert sess.get_providers() == ["MiniExecutionProvider"]
    x = np.ones((2, 3), np.float32)
    np.testing.assert_array_equal(sess.run(None, {"x": x})[0], -x)


def test_cpu_names_resolve(cpu: str) -> None:
    for name in ("cpu", "CPUExecutionProvider"):
        sess = ortcore.InferenceSession(chain_model(["Neg"]), providers=[name])
        assert sess.get_providers() == ["CPUExecutionProvider"]


def test_available_providers_in_priority_order() -> None:
    names = ortcore.get_available_providers()
    test_names = [
        "ClaimingExecutionProvider",
        "FakeDeviceExecutionProvider",
        "MiniExecutionProvider",
    ]
    assert [n for n in names if n in test_names] == test_names  # priority 70, 60, 50
    if "CPUExecutionProvider" in names:
        assert names[-1] == "CPUExecutionProvider"
    assert set(names) <= set(ortcore.get_all_providers())


def test_session_with_own_plugin_manager() -> None:
    pm = manager_with(MiniProvider)
    sess = ortcore.InferenceSession(chain_model(["Neg"]), providers=["mini"], plugin_manager=pm)
    assert sess.get_providers() == ["MiniExecutionProvider"]
    # no CPU provider in this manager: the default cannot run, and says what can
    with pytest.raises(ortcore.InvalidArgument, match=r"CPUExecutionProvider.*MiniExecution"):
        ortcore.InferenceSession(chain_model(["Neg"]), plugin_manager=pm)
    with pytest.raises(ortcore.InvalidArgument, match="fake"):
        ortcore.InferenceSession(chain_model(["Neg"]), providers=["fake"], plugin_manager=pm)


def test_import_and_discovery_stay_light(cpu: str) -> None:
    """Importing ortcore loads no plugin; listing providers loads no kernels or extensions."""
    code = (
        "import sys, ortcore\n"
        "assert not [m for m in sys.modules if m.startswith('ortcore_cpu')], 'plugin at import'\n"
        "ortcore.get_available_providers()\n"
        "heavy = [m for m in sys.modules if m.startswith(('ortcore_cpu.kernels', "
        "'ortcore_cpu._ext'))]\n"
        "assert not heavy, heavy\n"
        "assert 'onnx.reference' not in sys.modules\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_short_names_of_onnxruntimes_providers_are_known_when_not_installed() -> None:
    """``cuda`` (CUDAExecutionProvider's short name) not installed here is a provider
    that cannot run, skipped with onnxruntime's warning, even where an unknown name
    is an error (enable_fallback=0, as the CLI creates its sessions)."""
    pm = manager_with(MiniProvider)
    for name in ("cuda", "TensorRT", "openvino"):
        with pytest.warns(UserWarning, match=f"Specified provider '{name}'"):
            sess = ortcore.InferenceSession(
                chain_model(["Neg"]),
                providers=[name, "mini"],
                plugin_manager=pm,
                enable_fallback=0,
            )
        assert sess.get_providers() == ["MiniExecutionProvider"]
    with pytest.raises(RuntimeError, match="Unknown Provider Type: cudax"):
        ortcore.InferenceSession(
            chain_model(["Neg"]), providers=["cudax", "mini"], plugin_manager=pm, enable_fallback=0
        )
