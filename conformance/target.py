"""The provider under test, as every part of the suite sees it: the
:class:`Target`, the session options the suite runs it with, a fresh
instance of it, and the plugins a run registers first.

A leaf of the suite's runner: cases (:mod:`conformance.execute`), contract
checks (:mod:`conformance.contract`), their variants and reproducers all
build on it.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .precision import ToleranceOverride

__all__ = ["CPU", "Target", "load_plugins", "provider_instance", "session_options"]

CPU = "CPUExecutionProvider"


@dataclass(frozen=True)
class Target:
    """The provider under test and the suite's settings.

    Attributes:
        provider: the provider's canonical name.
        cpu: name of the CPU provider when installed and not under test.
        overrides: per-test tolerances from the configuration file.
        options: provider options (``--provider-option KEY=VALUE``), sorted by key.
    """

    provider: str
    cpu: str | None = None
    overrides: tuple[ToleranceOverride, ...] = ()
    options: tuple[tuple[str, str], ...] = ()

    @property
    def spec(self) -> str | tuple[str, dict[str, str]]:
        """The provider as an entry of ``InferenceSession(providers=[...])``."""
        return (self.provider, dict(self.options)) if self.options else self.provider

    @classmethod
    def resolve(
        cls,
        name: str,
        overrides: tuple[ToleranceOverride, ...] = (),
        options: Mapping[str, str] | None = None,
    ) -> Target:
        """Find ``name`` (name or alias) among the installed providers.

        Raises:
            ortcore.InvalidArgument: no such provider, or it is unavailable.
            ortcore.ProviderOptionError: the provider refuses one of ``options``.
        """
        from ep_sdk import ProviderOptionError, SessionConfig
        from ortcore.plugins import default_manager

        manager = default_manager()
        entry = manager.resolve(name)
        cpu = None
        if entry.name != CPU:
            try:
                cpu = manager.resolve(CPU).name
            except Exception:
                cpu = None
        opts = tuple(sorted((str(k), str(v)) for k, v in (options or {}).items()))
        if opts and entry.cls is not None:
            try:  # refuse unknown options once, here, rather than in every case
                entry.cls(dict(opts), SessionConfig()).close()
            except ProviderOptionError:
                raise
            except Exception:
                pass  # any other failure is contract/loads' to report
        return cls(entry.name, cpu, overrides, opts)


def session_options(*, optimize: bool = False) -> Any:
    """Session options with the CPU fallback off (and optimizations off by default)."""
    import ortcore

    so = ortcore.SessionOptions()
    so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
    if not optimize:
        so.graph_optimization_level = ortcore.GraphOptimizationLevel.ORT_DISABLE_ALL
    return so


def provider_instance(target: Target) -> Any:
    """A new instance of the provider under test, with the run's options."""
    from ep_sdk import SessionConfig
    from ortcore.plugins import default_manager

    cls = default_manager().resolve(target.provider).cls
    assert cls is not None
    return cls(dict(target.options), SessionConfig())


def load_plugins(modules: Sequence[str]) -> None:
    """Import each module and register it as an ortcore plugin."""
    from ortcore.plugins import default_manager

    for name in modules:
        if os.getcwd() not in sys.path:
            sys.path.append(os.getcwd())  # like ``python -m``: modules of the current folder
        default_manager().register_plugin(importlib.import_module(name), name=name)
