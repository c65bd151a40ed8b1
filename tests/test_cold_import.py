"""What ``import ortcore``, ``import ep_sdk`` and ``ortcore --help`` load.

A fresh process imports them and lists ``sys.modules``: the session machinery,
onnx and onnx-ir, the providers and their kernels, the optimizer passes,
onnx's reference evaluator, Ray and the CLI's subcommands load when first
used, not at import. The public names still resolve, lazily (PEP 562).
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys

import pytest

import ep_sdk
import ortcore

# Top-level packages (or packages and their submodules) none of these imports may load.
HEAVY = (
    "onnx",
    "onnx_ir",
    "ml_dtypes",
    "sympy",
    "numpy",
    "ray",
    "ortcore_cpu",
    "ortcore.session",
    "ortcore.optimizer",
    "ortcore.plugins",
    "ortcore.capi",
    "ortcore.backend",
    "ortcore.cli",
    "ep_sdk.registry",
    "ep_sdk.provider",
    "conformance",
)


CLI_MODULES = ("_common", "bench", "cache", "ep", "external", "inspect", "logs", "providers", "run")
"""ortcore/cli's modules: the parser of each subcommand, none of what it runs."""


def _loaded(code: str) -> list[str]:
    """The modules of ``HEAVY`` a fresh interpreter has loaded after ``code``."""
    probe = (
        f"{code}\nimport json, sys\n"
        f"heavy = {HEAVY!r}\n"
        # A stand-in of a deferred module (ortcore/_deferred.py) is not loaded.
        "d = sys.modules.get('ortcore._deferred')\n"
        "print(json.dumps(sorted(m for m, mod in list(sys.modules.items()) "
        "if any(m == h or m.startswith(h + '.') for h in heavy) "
        "and not (d and d.is_deferred(mod)))))"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout.splitlines()[-1])


def test_import_ortcore_loads_nothing_heavy() -> None:
    assert _loaded("import ortcore") == []


def test_import_ep_sdk_loads_nothing_heavy() -> None:
    assert _loaded("import ep_sdk") == []


def test_probe_sees_what_a_session_loads() -> None:
    # The check above can fail: touching InferenceSession loads the session machinery.
    loaded = _loaded("import ortcore\nortcore.InferenceSession")
    assert "ortcore.session" in loaded and "onnx_ir" in loaded


def test_help_loads_no_provider_nor_onnx() -> None:
    code = (
        "import sys\nfrom ortcore.cli import main\n"
        "for argv in (['--help'], ['run', '--help'], ['providers', '--help']):\n"
        "    try:\n        main(argv)\n    except SystemExit:\n        pass\n"
        "sys.stdout = sys.__stdout__"
    )
    loaded = [m for m in _loaded(code) if m != "numpy" and not m.startswith("numpy.")]
    # ortcore.cli and its subcommand modules define the arguments, and
    # conformance.cli the `conformance` subcommand's (its entry point): light,
    # and what `ortcore --help` lists.
    cli = {"ortcore.cli", *(f"ortcore.cli.{m}" for m in CLI_MODULES)}
    assert set(loaded) <= {*cli, "conformance", "conformance.cli"}
    assert {"ortcore.cli", "ortcore.cli.run", "ortcore.cli.providers"} <= set(loaded)


@pytest.mark.parametrize("module", [ortcore, ep_sdk], ids=lambda m: m.__name__)
def test_every_public_name_resolves(module: object) -> None:
    names = module.__all__  # type: ignore[attr-defined]
    assert set(names) <= set(dir(module))
    for name in names:
        assert getattr(module, name) is not None, name


def test_lazy_names_are_the_defining_modules_objects() -> None:
    from ortcore import InferenceSession, SessionIOBinding, SessionOptions

    assert InferenceSession is importlib.import_module("ortcore.session").InferenceSession
    assert SessionOptions is importlib.import_module("ortcore.options").SessionOptions
    assert SessionIOBinding is ortcore.IOBinding
    assert ortcore._native is importlib.import_module("ortcore.capi.onnxruntime_pybind11_state")
    assert ortcore.capi is importlib.import_module("ortcore.capi")
    assert ep_sdk.KernelRegistry is importlib.import_module("ep_sdk.registry").KernelRegistry
    assert ep_sdk.fused_ops is importlib.import_module("ep_sdk.fused_ops")


def test_moved_exceptions_keep_their_identity_and_module() -> None:
    from ep_sdk.kernel import RunTerminated
    from ep_sdk.provider import ProviderOptionError

    assert ep_sdk.RunTerminated is RunTerminated is ortcore.RunTerminated
    assert ep_sdk.ProviderOptionError is ProviderOptionError is ortcore.ProviderOptionError
    assert (RunTerminated.__module__, ProviderOptionError.__module__) == (
        "ep_sdk.kernel",
        "ep_sdk.provider",
    )


@pytest.mark.parametrize("module", [ortcore, ep_sdk], ids=lambda m: m.__name__)
def test_unknown_name_is_an_attribute_error(module: object) -> None:
    with pytest.raises(AttributeError, match="has no attribute 'no_such_name'"):
        module.no_such_name  # type: ignore[attr-defined]  # noqa: B018
