"""Hostile and broken plugins: SystemExit at import or in hooks, providers that fail
to construct, slow plugins a session does not need, provider-name hijacking, and
what the "Unknown provider" error says about plugins that failed to load."""

from __future__ import annotations

import importlib
import json
import logging
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import ortcore
from ep_sdk import SessionConfig
from ortcore.plugins import PluginManager, ProviderEntry

from . import providers as test_providers
from .conftest import chain_model, manager_with, plugin_module
from .providers import MiniProvider
from .test_custom_ops import scale_model

PROVIDER = """
import pathlib
import ep_sdk
from ep_sdk import ExecutionProvider

pathlib.Path({marker!r}).open("a").write({tag!r} + "\\n")
{extra}

class Offered(ExecutionProvider):
    name = {name!r}
    aliases = ({alias!r},)
    version = "1.0"
    priority = 10

@ep_sdk.hookimpl
def ortcore_providers():
    return [Offered]
"""


class Site:
    """A folder on ``sys.path`` holding fake installed distributions, each with one
    ``ortcore.providers`` entry point; every plugin module records its import in
    ``imported()``."""

    def __init__(self, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.root = root
        self.marker = root / "imported.txt"
        self.marker.write_text("")
        self.suffix = uuid.uuid4().hex[:8]
        self.modules: list[str] = []
        monkeypatch.syspath_prepend(str(root))

    def add(
        self,
        ep_name: str,
        source: str | None = None,
        *,
        provider: str | None = None,
        module: str | None = None,
        dist: str | None = None,
        extra: str = "",
        write_module: bool = True,
    ) -> str:
        """Install distribution ``dist`` whose entry point ``ep_name`` names ``module``.

        Without ``source`` the module offers one provider, ``provider``
        (default ``<ep_name>ExecutionProvider``, alias ``ep_name``), after
        running ``extra`` at import. Returns the module name.
        """
        mod = module or f"hp_{ep_name}_{self.suffix}"
        self.modules.append(mod)
        if source is None:
            source = PROVIDER.format(
                marker=str(self.marker),
                tag=ep_name,
                name=provider or f"{ep_name}ExecutionProvider",
                alias=ep_name,
                extra=textwrap.dedent(extra),
            )
        if write_module:
            (self.root / f"{mod}.py").write_text(textwrap.dedent(source))
        dist_name = dist or f"hp-{ep_name}-{self.suffix}"
        info = self.root / f"{dist_name.replace('-', '_')}-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist_name}\nVersion: 1.0\n")
        (info / "entry_points.txt").write_text(f"[ortcore.providers]\n{ep_name} = {mod}\n")
        importlib.invalidate_caches()
        return mod

    def imported(self) -> list[str]:
        return self.marker.read_text().split()

    def subprocess_env(self) -> dict[str, str]:
        import os

        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(self.root), env.get("PYTHONPATH", "")])
        env.pop("ORTCORE_DISABLE_PLUGIN_AUTOLOAD", None)
        return env

    def cleanup(self) -> None:
        for mod in self.modules:
            sys.modules.pop(mod, None)


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Site]:
    monkeypatch.delenv("ORTCORE_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    s = Site(tmp_path, monkeypatch)
    yield s
    s.cleanup()


def _of(pm: PluginManager, ep_name: str) -> list[ProviderEntry]:
    """Entries (providers and broken ones) offered by entry point ``ep_name``."""
    return [e for e in pm.entries() if e.plugin.startswith(f"{ep_name} (")]


def _warnings(caplog: pytest.LogCaptureFixture) -> str:
    return "\n".join(
        r.getMessage()
        for r in caplog.records
        if r.name == "ortcore.plugins" and r.levelno == logging.WARNING
    )


EXITS_IN_HOOK = """
import sys
import ep_sdk

@ep_sdk.hookimpl
def ortcore_providers():
    sys.exit("hook says goodbye")
"""

EXITS_IN_UNAVAILABLE_REASON = """
import sys
import ep_sdk
from ep_sdk import ExecutionProvider

class Quitter(ExecutionProvider):
    name = "QuitterExecutionProvider"
    aliases = ("quitter",)

    @classmethod
    def unavailable_reason(cls):
        raise SystemExit(7)

@ep_sdk.hookimpl
def ortcore_providers():
    return [Quitter]
"""


# -- 1. SystemExit and friends --------------------------------------------------------


def test_sys_exit_at_import_is_listed_broken_and_logged(
    site: Site, caplog: pytest.LogCaptureFixture
) -> None:
    site.add("quits", "import sys\nsys.exit(3)\n")
    site.add("good")
    pm = PluginManager()
    with caplog.at_level(logging.WARNING, logger="ortcore.plugins"):
        (quits,) = _of(pm, "quits")  # must not raise SystemExit
    assert not quits.available and quits.cls is None
    assert "failed to import" in quits.reason and "SystemExit(3)" in quits.reason
    assert pm.resolve("good").available
    assert "quits (" in _warnings(caplog) and "SystemExit(3)" in _warnings(caplog)


def test_sys_exit_in_hook_and_unavailable_reason_is_contained(
    site: Site, caplog: pytest.LogCaptureFixture
) -> None:
    site.add("hookexit", EXITS_IN_HOOK)
    site.add("quitter", EXITS_IN_UNAVAILABLE_REASON)
    site.add("good")
    pm = PluginManager()
    with caplog.at_level(logging.WARNING, logger="ortcore.plugins"):
        entries = pm.entries()
    (hook,) = _of(pm, "hookexit")
    assert not hook.available and "ortcore_providers() raised SystemExit" in hook.reason
    quitter = next(e for e in entries if e.name == "QuitterExecutionProvider")
    assert not quitter.available and "unavailable_reason() raised SystemExit(7)" in quitter.reason
    with pytest.raises(ortcore.InvalidArgument, match="SystemExit"):
        pm.resolve("quitter")
    assert pm.resolve("good").available
    logged = _warnings(caplog)
    assert "hook says goodbye" in logged and "QuitterExecutionProvider" in logged


def test_keyboard_interrupt_in_a_plugin_is_not_swallowed(site: Site) -> None:
    site.add("ctrlc", "raise KeyboardInterrupt\n")
    with pytest.raises(KeyboardInterrupt):
        PluginManager().entries()


def test_every_broken_plugin_is_logged(site: Site, caplog: pytest.LogCaptureFixture) -> None:
    site.add("noimport", "raise ImportError('libfoo.so not found')\n")
    site.add("hookfails", "import ep_sdk\n@ep_sdk.hookimpl\ndef ortcore_providers():\n    1 / 0\n")
    site.add("typo", "import ep_sdk\n@ep_sdk.hookimpl\ndef ortcore_provider():\n    return []\n")
    site.add(
        "notaclass", "import ep_sdk\n@ep_sdk.hookimpl\ndef ortcore_providers():\n    return [4]\n"
    )
    site.add("aaa", provider="SameExecutionProvider")
    site.add("bbb", provider="SameExecutionProvider")
    with caplog.at_level(logging.WARNING, logger="ortcore.plugins"):
        PluginManager().entries()
    logged = _warnings(caplog)
    for text in (
        "libfoo.so not found",
        "ZeroDivisionError",
        "ortcore_provider",
        "not an ep_sdk.ExecutionProvider subclass",
        "SameExecutionProvider is already provided by plugin aaa",
    ):
        assert text in logged, text


def test_provider_class_with_unreadable_attributes_is_listed_broken(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Weird(MiniProvider):
        name = "WeirdExecutionProvider"
        aliases = 5  # type: ignore[assignment]

    pm = PluginManager(autoload=False)
    with caplog.at_level(logging.WARNING, logger="ortcore.plugins"):
        pm.register_plugin(plugin_module("tests.weird", Weird, MiniProvider), name="tests.weird")
    (weird,) = [e for e in pm.entries() if e.cls is None]
    assert "Weird" in weird.name and "reading its attributes raised TypeError" in weird.reason
    assert pm.resolve("mini").available
    assert "tests.weird" in _warnings(caplog)


def test_providers_command_survives_sys_exit_plugins(site: Site) -> None:
    """End to end, in a child process: ``ortcore providers`` lists the plugins that
    call ``sys.exit`` (at import, in a hook) as unavailable and exits 0."""
    site.add("quits", "import sys\nsys.exit('bye from import')\n")
    site.add("hookexit", EXITS_IN_HOOK)
    site.add("good")
    proc = subprocess.run(
        [sys.executable, "-m", "ortcore", "providers", "--json"],
        capture_output=True,
        text=True,
        env=site.subprocess_env(),
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    by_plugin = {r["plugin"].split(" ")[0]: r for r in rows}
    assert "bye from import" in by_plugin["quits"]["reason"]
    assert not by_plugin["quits"]["available"]
    assert "hook says goodbye" in by_plugin["hookexit"]["reason"]
    assert by_plugin["good"]["available"]
    assert "bye from import" in proc.stderr  # the warning reached the log


# -- 2. providers that fail to construct ----------------------------------------------


class ExplodingProvider(MiniProvider):
    """Listed as available, but its constructor raises."""

    name = "ExplodingExecutionProvider"
    aliases = ("exploding",)
    priority = 90
    error: BaseException = RuntimeError("no licence for the exploding device")

    def __init__(self, options: Mapping[str, Any], config: SessionConfig) -> None:
        raise type(self).error


class ExplodingCPUProvider(ExplodingProvider):
    """A CPU provider whose constructor raises."""

    name = "CPUExecutionProvider"
    aliases = ("cpu",)


def test_cpu_fallback_failing_to_construct_is_skipped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The CPU fallback is the one provider a session adds itself: when it
    fails, the session goes on without it, with a warning."""
    pm = manager_with(ExplodingCPUProvider, MiniProvider)
    with caplog.at_level(logging.WARNING, logger="ortcore.plugins"):
        sess = ortcore.InferenceSession(chain_model(["Neg"]), providers=["mini"], plugin_manager=pm)
    assert sess.get_providers() == ["MiniExecutionProvider"]
    x = np.ones((2, 3), np.float32)
    np.testing.assert_array_equal(sess.run(None, {"x": x})[0], -x)
    logged = _warnings(caplog)
    assert "CPUExecutionProvider" in logged and "tests.adhoc" in logged
    assert "no licence for the exploding device" in logged


@pytest.mark.parametrize("error", [RuntimeError("no licence"), SystemExit(4)])
def test_named_provider_failing_to_construct_is_a_clear_error(
    error: BaseException, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ExplodingProvider, "error", error)
    pm = manager_with(ExplodingProvider, MiniProvider)
    with pytest.raises(ortcore.EPFail) as info:
        ortcore.InferenceSession(
            chain_model(["Neg"]), providers=["mini", "exploding"], plugin_manager=pm
        )
    msg = str(info.value)
    assert "ExplodingExecutionProvider" in msg and "tests.adhoc" in msg
    assert repr(error) in msg
    assert info.value.__cause__ is error


def test_default_session_whose_cpu_provider_fails_names_it() -> None:
    pm = manager_with(ExplodingCPUProvider, MiniProvider)
    with pytest.raises(ortcore.EPFail, match=r"CPUExecutionProvider.*no licence"):
        ortcore.InferenceSession(chain_model(["Neg"]), plugin_manager=pm)


# -- 3. a session loads only the plugins it names ---------------------------------------


def test_resolving_a_name_imports_only_its_entry_point(site: Site) -> None:
    site.add("fast")
    site.add("slow", extra="import time\ntime.sleep(0.2)")
    pm = PluginManager()
    for name in ("fast", "FAST", "fastExecutionProvider"):
        assert pm.resolve(name).name == "fastExecutionProvider"
    assert site.imported() == ["fast"]
    pm.entries()  # listing loads everything, each entry point once
    assert site.imported() == ["fast", "slow"]


def test_name_without_its_entry_point_loads_the_rest(site: Site) -> None:
    site.add("vendor", provider="HiddenExecutionProvider")  # alias "vendor"
    site.add("other")
    pm = PluginManager()
    assert pm.resolve("HiddenExecutionProvider").plugin.startswith("vendor (")
    assert site.imported() == ["other", "vendor"]  # sorted order, each once


def test_cpu_session_never_imports_a_slow_plugin(site: Site, cpu: str) -> None:
    site.add("aaslow", extra="import time\ntime.sleep(0.2)")
    pm = PluginManager()
    requests: list[list[Any]] = [["cpu"], ["CPUExecutionProvider"], [("cpu", {})]]
    for providers in requests:
        sess = ortcore.InferenceSession(
            chain_model(["Neg"]), providers=providers, plugin_manager=pm
        )
        assert sess.get_providers() == ["CPUExecutionProvider"]
    assert site.imported() == []
    ortcore.InferenceSession(chain_model(["Neg"]), plugin_manager=pm)  # default: CPU only
    assert site.imported() == []
    so = ortcore.SessionOptions()  # a policy chooses among every device: imports all
    so.set_provider_selection_policy(ortcore.OrtExecutionProviderDevicePolicy.PREFER_GPU)
    ortcore.InferenceSession(chain_model(["Neg"]), so, plugin_manager=pm)
    assert site.imported() == ["aaslow"]


def test_cpu_session_never_imports_a_slow_plugin_in_a_fresh_process(
    site: Site, cpu: str, tmp_path: Path
) -> None:
    """The user's path: the process-wide manager, nothing imported before."""
    site.add("aaslow", extra="import time\ntime.sleep(30)")
    model = tmp_path / "neg.onnx"
    model.write_bytes(chain_model(["Neg"]))
    code = (
        "import sys, ortcore\n"
        f"s = ortcore.InferenceSession({str(model)!r}, providers=['cpu'])\n"
        "assert s.get_providers() == ['CPUExecutionProvider'], s.get_providers()\n"
        "assert not [m for m in sys.modules if m.startswith('hp_aaslow')]\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=site.subprocess_env(),
        timeout=25,
    )
    assert proc.returncode == 0, proc.stderr
    assert site.imported() == []


CUSTOM_OPS_PLUGIN = """
import pathlib
import numpy as np
import ep_sdk
import ortcore

pathlib.Path({marker!r}).open("a").write("ops\\n")

op = ortcore.custom_op(
    domain="test.custom",
    name="ScaleFromEntryPoint",
    inputs=["X: T"],
    outputs=["Y: T"],
    attributes={{"alpha": 2.0}},
    types={{"T": ["float"]}},
)

@op.kernel("mini")
def build(info):
    return lambda x: (x * np.float32(info.attrs["alpha"]),)

@ep_sdk.hookimpl
def ortcore_custom_ops():
    return [op]
"""


def test_named_session_still_gets_a_plugins_custom_ops(site: Site) -> None:
    """A custom-op library plugin is imported when the model uses an op domain
    nothing imported so far defines, and only then."""
    site.add("ops", CUSTOM_OPS_PLUGIN.format(marker=str(site.marker)))
    pm = PluginManager()
    pm.register_plugin(test_providers, name="tests.providers")
    ortcore.InferenceSession(chain_model(["Neg"]), providers=["mini"], plugin_manager=pm)
    assert site.imported() == []
    sess = ortcore.InferenceSession(
        scale_model("ScaleFromEntryPoint"), providers=["mini"], plugin_manager=pm
    )
    assert site.imported() == ["ops"]
    (y,) = sess.run(None, {"x": np.ones((2, 3), np.float32)})
    np.testing.assert_allclose(y, 2.0)


# -- 4. a provider name has one owner ---------------------------------------------------


def test_impostor_sorting_first_does_not_replace_cpu(
    site: Site, cpu: str, caplog: pytest.LogCaptureFixture
) -> None:
    # "aaa" sorts before "cpu"; the second impostor's entry point is even named "cpu",
    # with a module that sorts before ortcore_cpu.plugin, from another distribution.
    site.add("aaa", provider="CPUExecutionProvider")
    site.add(
        "cpu", provider="CPUExecutionProvider", module=f"aa_cpu_{site.suffix}", dist="evil-cpu"
    )
    for first_call in ("resolve", "entries"):
        pm = PluginManager()
        with caplog.at_level(logging.WARNING, logger="ortcore.plugins"):
            if first_call == "resolve":
                assert pm.resolve("cpu").plugin == "cpu (ortcore_cpu.plugin)"
            pm.entries()
            real = pm.resolve("CPUExecutionProvider")
        assert real.plugin == "cpu (ortcore_cpu.plugin)", first_call
        assert real.cls is not None and real.cls.__module__.startswith("ortcore_cpu")
        refused = [e for e in pm.entries() if e.name == "CPUExecutionProvider" and e.cls is None]
        assert sorted(e.plugin for e in refused) == [
            f"aaa (hp_aaa_{site.suffix})",
            f"cpu (aa_cpu_{site.suffix})",
        ]
        for e in refused:
            assert "cpu (ortcore_cpu.plugin)" in e.reason and e.plugin in e.reason
            assert "ortcore-cpu" in e.reason
        assert "already provided by plugin cpu (ortcore_cpu.plugin)" in _warnings(caplog)
        caplog.clear()


def test_entry_point_named_after_a_provider_owns_it_in_any_load_order(site: Site) -> None:
    site.add("aaa", provider="ZedExecutionProvider")
    site.add("zed", provider="ZedExecutionProvider")
    lazy = PluginManager()
    assert lazy.resolve("zed").plugin.startswith("zed (")
    eager = PluginManager()
    eager.entries()
    assert eager.resolve("zed").plugin.startswith("zed (")
    for pm in (lazy, eager):
        (loser,) = [e for e in pm.entries() if e.name == "ZedExecutionProvider" and e.cls is None]
        assert loser.plugin.startswith("aaa (")
        assert "named 'zed'" in loser.reason


def test_hand_registered_plugin_vs_entry_points(site: Site) -> None:
    class Zed(MiniProvider):
        name = "ZedExecutionProvider"
        aliases = ("zed",)

    class Other(MiniProvider):
        name = "otherExecutionProvider"
        aliases = ("other",)

    site.add("zed", provider="ZedExecutionProvider")
    site.add("aaa", provider="otherExecutionProvider")
    pm = PluginManager()
    pm.register_plugin(plugin_module("tests.byhand", Zed, Other), name="tests.byhand")
    # the entry point named after the provider beats a plugin registered by hand ...
    assert pm.resolve("zed").plugin.startswith("zed (")
    # ... which beats an entry point offering a name it is not named after, so
    # resolving it needs no other entry point
    assert pm.resolve("other").plugin == "tests.byhand"
    assert site.imported() == ["zed"]
    refused = {e.plugin.split(" ")[0]: e for e in pm.entries() if e.cls is None}
    assert set(refused) == {"tests.byhand", "aaa"}
    assert "zed (" in refused["tests.byhand"].reason
    assert "tests.byhand" in refused["aaa"].reason
    assert pm.resolve("other").plugin == "tests.byhand"


# -- 5. "Unknown provider" names the plugins that failed to load -----------------------


def test_unknown_provider_error_names_import_failure(site: Site) -> None:
    site.add("foo", module=f"missing_pkg_{site.suffix}.mod", write_module=False)
    site.add("good")
    pm = PluginManager()
    with pytest.raises(ortcore.InvalidArgument) as info:
        pm.resolve("foo")
    msg = str(info.value)
    assert "Unknown provider 'foo'" in msg
    assert f"plugin foo (missing_pkg_{site.suffix}.mod): failed to import: " in msg
    assert "ModuleNotFoundError" in msg
    assert "goodExecutionProvider" in msg
