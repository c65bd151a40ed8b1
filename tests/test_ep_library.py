"""register_execution_provider_library: onnxruntime's plugin-EP registration,
given a Python plugin (a .py file, a package folder or a module name) instead
of a native library; its providers then appear in get_ep_devices() and are
selected by device, as an installed plugin's are, until it is unregistered."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import ortcore

from .conftest import chain_model

PLUGIN = textwrap.dedent(
    '''
    import numpy as np
    import ep_sdk

    _reg = ep_sdk.KernelRegistry()
    _reg.kernel("Neg", since=6)(lambda info: lambda x: (np.negative(x) * 1,))

    class LibraryProvider(ep_sdk.ExecutionProvider):
        name = "{name}"
        version = "2.0"
        vendor = "Library Vendor"

        def kernel_registry(self):
            return _reg

    @ep_sdk.hookimpl
    def ortcore_providers():
        return [LibraryProvider]
    '''
)


def _write(folder: Path, name: str) -> Path:
    path = folder / f"{name.lower()}_plugin.py"
    path.write_text(PLUGIN.format(name=name))
    return path


def _ep_names() -> list[str]:
    return [d.ep_name for d in ortcore.get_ep_devices()]


def test_a_python_plugin_file_registers_lists_its_device_and_runs(tmp_path: Path) -> None:
    name = "LibFileExecutionProvider"
    ortcore.register_execution_provider_library("libfile", str(_write(tmp_path, name)))
    try:
        devices = [d for d in ortcore.get_ep_devices() if d.ep_name == name]
        assert len(devices) == 1
        assert devices[0].ep_vendor == "Library Vendor"
        so = ortcore.SessionOptions()
        so.add_provider_for_devices(devices, {})
        sess = ortcore.InferenceSession(chain_model(["Neg"]), so)
        assert sess.get_providers()[0] == name
        x = np.array([[1.0, -2.0, 3.0], [0.5, 0.0, -7.0]], np.float32)
        np.testing.assert_array_equal(sess.run(None, {"x": x})[0], -x)
        assert sess.get_partition().counts().get(name) == 1
    finally:
        ortcore.unregister_execution_provider_library("libfile")
    assert name not in _ep_names()
    with pytest.raises(ortcore.Fail, match="no execution provider library is registered"):
        ortcore.unregister_execution_provider_library("libfile")


def test_a_package_folder_and_a_module_name_register(tmp_path: Path) -> None:
    pkg = tmp_path / "libpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(PLUGIN.format(name="LibPkgExecutionProvider"))
    ortcore.register_execution_provider_library("libpkg", pkg)
    try:
        assert "LibPkgExecutionProvider" in _ep_names()
    finally:
        ortcore.unregister_execution_provider_library("libpkg")

    (tmp_path / "libmod_plugin.py").write_text(PLUGIN.format(name="LibModExecutionProvider"))
    sys.path.insert(0, str(tmp_path))
    try:
        ortcore.register_execution_provider_library("libmod", "libmod_plugin")
        assert "LibModExecutionProvider" in _ep_names()
        ortcore.unregister_execution_provider_library("libmod")
        assert "LibModExecutionProvider" not in _ep_names()
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("libmod_plugin", None)


def test_refusals_name_the_registration_and_the_reason(tmp_path: Path) -> None:
    native = tmp_path / "onnxruntime_providers_openvino.so"
    native.write_bytes(b"\x7fELF")
    with pytest.raises(ortcore.Fail, match="native onnxruntime provider library"):
        ortcore.register_execution_provider_library("native", str(native))
    with pytest.raises(ortcore.Fail, match="no such file"):
        ortcore.register_execution_provider_library("gone", str(tmp_path / "gone.py"))
    broken = tmp_path / "broken_plugin.py"
    broken.write_text("raise RuntimeError('the vendor SDK is missing')\n")
    with pytest.raises(ortcore.Fail, match=r"importing the plugin failed.*vendor SDK is missing"):
        ortcore.register_execution_provider_library("broken", str(broken))
    empty = tmp_path / "empty_plugin.py"
    empty.write_text("X = 1\n")
    with pytest.raises(ortcore.Fail, match="offers no provider"):
        ortcore.register_execution_provider_library("empty", str(empty))
    with pytest.raises(ortcore.InvalidArgument, match="empty"):
        ortcore.register_execution_provider_library(" ", str(empty))
    # none of the refused registrations is left behind
    for name in ("native", "gone", "broken", "empty"):
        with pytest.raises(ortcore.Fail):
            ortcore.unregister_execution_provider_library(name)


def test_a_name_registers_once(tmp_path: Path) -> None:
    path = _write(tmp_path, "LibTwiceExecutionProvider")
    ortcore.register_execution_provider_library("twice", str(path))
    try:
        with pytest.raises(ortcore.InvalidArgument, match="already registered as 'twice'"):
            ortcore.register_execution_provider_library("twice", str(path))
    finally:
        ortcore.unregister_execution_provider_library("twice")
