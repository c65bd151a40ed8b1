"""onnxruntime's device model: get_ep_devices, selection on the session options
(add_provider, add_provider_for_devices, policies, the delegate), the graph
assignment info, and the default (the CPU provider only).

Fake GPU and NPU providers (host providers that describe themselves as such)
prove what the policies pick; where onnxruntime can answer the same question
(its CPU provider only), the answers are compared.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import helper

import ep_sdk
import ortcore
from ep_sdk.hardware import HardwareDevice, HardwareDeviceType, host_cpu
from ortcore import OrtExecutionProviderDevicePolicy as Policy
from ortcore.ep_devices import assignment_info, get_ep_devices
from ortcore.planner import NodeRecord
from ortcore.plugins import PluginManager, default_manager

from .conftest import chain_model, plugin_module
from .providers import MiniProvider
from .test_hostile_plugins import Site, site  # noqa: F401 -- the fixture

onnxruntime = pytest.importorskip("onnxruntime")

X = np.array([[1.0, -2.0, 3.0], [-4.0, 5.0, -6.0]], np.float32)


def _fake(name: str, kind: HardwareDeviceType, metadata: Mapping[str, str] = {}) -> type:
    """A Mini provider that says it runs on one ``kind`` device, selected by
    option ``flavour`` (so a test sees the device's ``ep_options`` arrive)."""

    class Fake(MiniProvider):
        aliases = ()
        vendor = "FakeVendor"
        priority = 40

        @classmethod
        def ep_devices(cls) -> Sequence[ep_sdk.EpDevice]:
            hw = HardwareDevice(kind, "FakeVendor", 0x1234, 0x42, metadata)
            return [ep_sdk.EpDevice(hw, {"slot": "1"}, {"flavour": kind.name.lower()})]

    Fake.name = name
    Fake.__name__ = name
    return Fake


FakeGpu = _fake("FakeGpuExecutionProvider", HardwareDeviceType.GPU)
FakeNpu = _fake("FakeNpuExecutionProvider", HardwareDeviceType.NPU)


class FailingDevices(MiniProvider):
    name = "FailingDevicesExecutionProvider"
    aliases = ()

    @classmethod
    def ep_devices(cls) -> Sequence[ep_sdk.EpDevice]:
        raise RuntimeError("the device table is unreadable")


def _manager(*classes: type) -> PluginManager:
    import ortcore_cpu.plugin

    pm = PluginManager(autoload=False)
    pm.register_plugin(ortcore_cpu.plugin, name="ortcore_cpu")
    if classes:
        pm.register_plugin(plugin_module("tests.devices", *classes), name="tests.devices")
    return pm


def _policy(policy: Policy, pm: PluginManager, **config: str) -> ortcore.InferenceSession:
    so = ortcore.SessionOptions()
    for k, v in config.items():
        so.add_session_config_entry(k, v)
    so.set_provider_selection_policy(policy)
    return ortcore.InferenceSession(chain_model(["Neg"]), so, plugin_manager=pm)


@pytest.fixture
def fake_gpu_installed() -> Iterator[None]:
    """FakeGpu on the process-wide manager (what add_provider checks names against)."""
    default_manager().register_plugin(plugin_module("tests.fakegpu", FakeGpu), "tests.fakegpu")
    yield
    default_manager().unregister_plugin("tests.fakegpu")


# -- listing ----------------------------------------------------------------------------


def test_cpu_device_listed_as_onnxruntime_lists_its_own(cpu: str) -> None:
    ours = [d for d in ortcore.get_ep_devices() if d.ep_name == cpu]
    theirs = [d for d in onnxruntime.get_ep_devices() if d.ep_name == cpu]
    assert len(ours) == len(theirs) == 1
    d, o = ours[0], theirs[0]
    assert d.device.type == ortcore.OrtHardwareDeviceType.CPU == int(o.device.type)
    assert (d.device.vendor, d.device.vendor_id) == (o.device.vendor, o.device.vendor_id)
    assert d.device.device_id == o.device.device_id
    assert d.ep_metadata["version"] and d.ep_options == o.ep_options == {}
    features = d.device.metadata["Features"].split(",")
    assert features == sorted(host_cpu().metadata["Features"].split(","))
    assert d.memory_info(ortcore.OrtDeviceMemoryType.DEFAULT) is None  # as onnxruntime's CPU
    assert ortcore.get_ep_devices()[-1] is d  # CPU last; the same objects every time


def test_names_and_numbers_are_onnxruntimes() -> None:
    for name in ("OrtHardwareDeviceType", "OrtExecutionProviderDevicePolicy"):
        ours, theirs = getattr(ortcore, name), getattr(onnxruntime, name)
        assert {m.name: int(m) for m in ours} == {k: int(v) for k, v in theirs.__members__.items()}
    from ortcore.capi import onnxruntime_pybind11_state as native

    for name in ("OrtEpDevice", "OrtHardwareDevice", "OrtEpAssignedSubgraph", "OrtEpAssignedNode"):
        assert getattr(native, name) is getattr(ortcore, name)
    with pytest.raises(TypeError, match="No constructor defined"):
        ortcore.OrtEpDevice()


def test_device_hook_that_raises_is_reported_not_fatal(caplog: pytest.LogCaptureFixture) -> None:
    pm = _manager(FailingDevices, FakeGpu)
    with caplog.at_level(logging.WARNING, logger="ortcore.plugins"):
        names = [d.ep_name for d in get_ep_devices(pm)]
    assert names == ["FakeGpuExecutionProvider", "CPUExecutionProvider"]
    assert "the device table is unreadable" in caplog.text
    from ortcore.ep_devices import device_errors

    assert "unreadable" in device_errors()["FailingDevicesExecutionProvider"]


def test_default_hook_follows_unavailable_reason() -> None:
    class Away(MiniProvider):
        @classmethod
        def unavailable_reason(cls) -> str | None:
            return "no such device"

    class Gpu(MiniProvider):
        device = ep_sdk.Device("accel", 1)

    assert Away.ep_devices() == []
    assert MiniProvider.ep_devices() == [ep_sdk.EpDevice(host_cpu())]
    (gpu,) = Gpu.ep_devices()
    assert gpu.device.type == HardwareDeviceType.GPU and gpu.ep_options == {}


# -- policies ---------------------------------------------------------------------------


@pytest.mark.parametrize("policy", list(Policy))
def test_each_policy_on_the_cpu_provider_alone_matches_onnxruntime(
    policy: Policy, cpu: str
) -> None:
    so = onnxruntime.SessionOptions()
    so.set_provider_selection_policy(
        getattr(onnxruntime.OrtExecutionProviderDevicePolicy, policy.name)
    )
    theirs = onnxruntime.InferenceSession(chain_model(["Neg"]), so).get_providers()
    assert _policy(policy, _manager()).get_providers() == theirs == [cpu]


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        (Policy.DEFAULT, ["CPUExecutionProvider"]),
        (Policy.PREFER_CPU, ["CPUExecutionProvider"]),
        (Policy.PREFER_GPU, ["FakeGpuExecutionProvider", "CPUExecutionProvider"]),
        (Policy.MAX_PERFORMANCE, ["FakeGpuExecutionProvider", "CPUExecutionProvider"]),
        (Policy.PREFER_NPU, ["FakeNpuExecutionProvider", "CPUExecutionProvider"]),
        (Policy.MAX_EFFICIENCY, ["FakeNpuExecutionProvider", "CPUExecutionProvider"]),
        (Policy.MIN_OVERALL_POWER, ["FakeNpuExecutionProvider", "CPUExecutionProvider"]),
    ],
)
def test_policies_pick_their_device_then_cpu(policy: Policy, expected: list[str], cpu: str) -> None:
    sess = _policy(policy, _manager(FakeGpu, FakeNpu))
    assert sess.get_providers() == expected
    options = sess.get_provider_options()
    for name in expected[:-1]:  # the device's ep_options reached the provider
        assert options[name]["flavour"] == name[4:7].lower()
    np.testing.assert_array_equal(sess.run(None, {"x": X})[0], -X)


@pytest.mark.parametrize("policy", [Policy.PREFER_GPU, Policy.PREFER_NPU, Policy.MAX_PERFORMANCE])
def test_policies_fall_back_to_cpu(policy: Policy, cpu: str) -> None:
    assert _policy(policy, _manager()).get_providers() == [cpu]
    assert _policy(
        policy, _manager(FakeNpu if policy != Policy.PREFER_NPU else FakeGpu)
    ).get_providers() == [cpu]


def test_prefer_cpu_takes_another_providers_cpu_device_first(cpu: str) -> None:
    """onnxruntime's order: its own CPU provider is the last CPU device."""
    sess = _policy(Policy.DEFAULT, _manager(MiniProvider, FakeGpu))
    assert sess.get_providers() == ["MiniExecutionProvider", cpu]


def test_discrete_gpu_preferred_and_fallback_can_be_disabled(cpu: str) -> None:
    integrated = _fake("AIntegratedExecutionProvider", HardwareDeviceType.GPU, {"Discrete": "0"})
    discrete = _fake("ZDiscreteExecutionProvider", HardwareDeviceType.GPU, {"Discrete": "1"})
    pm = _manager(integrated, discrete)
    assert _policy(Policy.PREFER_GPU, pm).get_providers() == ["ZDiscreteExecutionProvider", cpu]
    no_cpu = _policy(Policy.PREFER_GPU, pm, **{"session.disable_cpu_ep_fallback": "1"})
    assert no_cpu.get_providers() == ["ZDiscreteExecutionProvider"]


# -- the delegate -----------------------------------------------------------------------


def _model() -> bytes:
    m = onnx.load_from_string(chain_model(["Neg"]))
    m.producer_name, m.producer_version, m.domain, m.model_version = "maker", "3", "dom", 7
    m.doc_string, m.graph.doc_string = "a model", "its graph"
    helper.set_model_props(m, {"author": "me"})
    return m.SerializeToString()


def test_delegate_gets_what_onnxruntime_passes_and_its_choice_is_used(cpu: str) -> None:
    theirs: list[Any] = []

    def ort_delegate(devices: Any, model_md: Any, runtime_md: Any, max_sel: int) -> Any:
        theirs.append((dict(model_md), dict(runtime_md), max_sel))
        return devices[:1]

    so = onnxruntime.SessionOptions()
    so.set_provider_selection_policy_delegate(ort_delegate)
    onnxruntime.InferenceSession(_model(), so)
    seen: list[Any] = []

    def delegate(devices: Any, model_md: Any, runtime_md: Any, max_sel: int) -> Any:
        seen.append(([d.ep_name for d in devices], dict(model_md), dict(runtime_md), max_sel))
        return [d for d in devices if d.device.type == ortcore.OrtHardwareDeviceType.GPU]

    so2 = ortcore.SessionOptions()
    so2.set_provider_selection_policy_delegate(delegate)
    assert so2.has_providers() and so.has_providers()
    sess = ortcore.InferenceSession(_model(), so2, plugin_manager=_manager(FakeGpu, FakeNpu))
    names, model_md, runtime_md, max_sel = seen[0]
    assert names == ["FakeNpuExecutionProvider", "FakeGpuExecutionProvider", cpu]  # NPU, GPU, CPU
    assert (model_md, runtime_md, max_sel) == theirs[0]
    assert sess.get_providers() == ["FakeGpuExecutionProvider", cpu]


def _boom(*args: Any) -> Any:
    raise ValueError("boom")


@pytest.mark.parametrize(
    ("delegate", "message"),
    [
        (lambda *a: [], r"^EP selection delegate did not select anything\..*lambda"),
        (_boom, r"^EP selection delegate failed: ValueError: boom.*_boom"),
        (lambda *a: 5, r"^EP selection delegate failed: .*lambda.* returned int"),
        (lambda *a: [5], r"^EP selection delegate failed: .*returned a int"),
        (lambda d, *a: [d[0]] * 9, r"too many EP devices \(9\)\. The limit is 8"),
        (lambda *a: list(get_ep_devices(_manager(FakeNpu))), r"not one of the devices"),
    ],
)
def test_delegate_faults_are_clear_errors(delegate: Any, message: str) -> None:
    so = ortcore.SessionOptions()
    so.set_provider_selection_policy_delegate(delegate)
    with pytest.raises(ortcore.Fail, match=message):
        ortcore.InferenceSession(chain_model(["Neg"]), so, plugin_manager=_manager(FakeGpu))


def test_onnxruntime_fails_the_same_way_on_an_empty_selection() -> None:
    so = onnxruntime.SessionOptions()
    so.set_provider_selection_policy_delegate(lambda *a: [])
    with pytest.raises(onnxruntime.capi.onnxruntime_pybind11_state.Fail, match="did not select"):
        onnxruntime.InferenceSession(chain_model(["Neg"]), so)


# -- providers added to the options -----------------------------------------------------


@pytest.mark.usefixtures("fake_gpu_installed")
def test_add_provider_options_reach_it_and_are_config_entries(cpu: str) -> None:
    so = ortcore.SessionOptions()
    assert not so.has_providers()
    so.add_provider("FakeGpuExecutionProvider", {"flavour": "spicy"})
    assert so.has_providers()
    assert so.get_session_config_entry("ep.fakegpuexecutionprovider.flavour") == "spicy"
    sess = ortcore.InferenceSession(chain_model(["Neg"]), so)
    assert sess.get_providers() == ["FakeGpuExecutionProvider", cpu]
    assert sess.get_provider_options()["FakeGpuExecutionProvider"]["flavour"] == "spicy"


def test_add_provider_unknown_is_a_runtime_error_as_in_onnxruntime() -> None:
    with pytest.raises(RuntimeError, match="Unknown Provider Type"):
        onnxruntime.SessionOptions().add_provider("NopeExecutionProvider", {})
    with pytest.raises(RuntimeError, match="NopeExecutionProvider") as info:
        ortcore.SessionOptions().add_provider("NopeExecutionProvider", {})
    assert isinstance(info.value, ortcore.InvalidArgument)


def test_add_provider_for_devices_uses_device_options_under_the_users(cpu: str) -> None:
    pm = _manager(FakeGpu, FakeNpu)
    gpu = next(d for d in get_ep_devices(pm) if d.ep_name == "FakeGpuExecutionProvider")
    so = ortcore.SessionOptions()
    so.add_provider_for_devices([gpu], {})
    sess = ortcore.InferenceSession(chain_model(["Neg"]), so, plugin_manager=pm)
    assert sess.get_providers() == ["FakeGpuExecutionProvider", cpu]
    assert sess.get_provider_options()["FakeGpuExecutionProvider"]["flavour"] == "gpu"
    so = ortcore.SessionOptions()
    so.add_provider_for_devices([gpu], {"flavour": "mine"})
    sess = ortcore.InferenceSession(chain_model(["Neg"]), so, plugin_manager=pm)
    assert sess.get_provider_options()["FakeGpuExecutionProvider"]["flavour"] == "mine"


def test_add_provider_for_devices_refuses_mixed_empty_and_foreign() -> None:
    devices = get_ep_devices(_manager(FakeGpu, FakeNpu))
    so = ortcore.SessionOptions()
    with pytest.raises(ortcore.InvalidArgument, match=r"same execution provider.*FakeNpu"):
        so.add_provider_for_devices(devices[:2], {})
    with pytest.raises(ortcore.InvalidArgument, match="Must provide one or more OrtEpDevice"):
        so.add_provider_for_devices([], {})
    with pytest.raises(ortcore.InvalidArgument, match="not str"):
        so.add_provider_for_devices(["CPUExecutionProvider"], {})  # type: ignore[list-item]
    assert not so.has_providers()


@pytest.mark.usefixtures("fake_gpu_installed")
def test_providers_argument_wins_with_onnxruntimes_warning(cpu: str) -> None:
    ort_so = onnxruntime.SessionOptions()
    ort_so.add_provider(cpu, {})
    so = ortcore.SessionOptions()
    so.add_provider("FakeGpuExecutionProvider", {})
    caught = []
    for rt, options in ((onnxruntime, ort_so), (ortcore, so)):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            sess = rt.InferenceSession(chain_model(["Neg"]), options, providers=[cpu])
        assert sess.get_providers() == [cpu]
        caught.append([str(x.message) for x in w if x.category is UserWarning])
    assert caught[0] == caught[1] and len(caught[1]) == 1


# -- assignment info --------------------------------------------------------------------


def _assigned(rt: Any, record: bool) -> list[tuple[str, list[tuple[str, str, str]]]]:
    so = rt.SessionOptions()
    so.graph_optimization_level = rt.GraphOptimizationLevel.ORT_DISABLE_ALL
    if record:
        so.add_session_config_entry("session.record_ep_graph_assignment_info", "1")
    sess = rt.InferenceSession(
        chain_model(["Relu", "Neg", "Abs"]), so, providers=["CPUExecutionProvider"]
    )
    return [
        (s.ep_name, [(n.name, n.domain, n.op_type) for n in s.get_nodes()])
        for s in sess.get_provider_graph_assignment_info()
    ]


def test_assignment_info_matches_onnxruntime(cpu: str) -> None:
    assert _assigned(ortcore, True) == _assigned(onnxruntime, True)
    assert len(_assigned(ortcore, True)) == 3  # one subgraph per kernel-run node


def test_assignment_info_needs_the_config_entry(cpu: str) -> None:
    with pytest.raises(onnxruntime.capi.onnxruntime_pybind11_state.Fail) as theirs:
        _assigned(onnxruntime, False)
    with pytest.raises(ortcore.Fail) as ours:
        _assigned(ortcore, False)
    assert str(ours.value) in str(theirs.value)


def test_a_fused_group_is_one_subgraph() -> None:
    records = [
        NodeRecord("a", "Relu", "", "Bridge", group="g0"),
        NodeRecord("b", "Neg", "", "CPUExecutionProvider"),
        NodeRecord("c", "Abs", "", "Bridge", group="g0"),
        NodeRecord("d", "Abs", "", "Bridge", group="g1"),
    ]
    got = assignment_info(records, {"session.record_ep_graph_assignment_info": "1"})
    assert [(s.ep_name, [n.name for n in s.get_nodes()]) for s in got] == [
        ("Bridge", ["a", "c"]),
        ("CPUExecutionProvider", ["b"]),
        ("Bridge", ["d"]),
    ]


# -- the default ------------------------------------------------------------------------


def test_default_is_the_cpu_provider_and_says_what_else_is_installed(
    site: Site,  # noqa: F811
    cpu: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    site.add("aaslow", extra="import time\ntime.sleep(0.2)")
    pm = PluginManager()
    with caplog.at_level(logging.INFO, logger="ortcore.providers"):
        sess = ortcore.InferenceSession(chain_model(["Neg"]), plugin_manager=pm)
    assert sess.get_providers() == [cpu]
    assert site.imported() == []  # named in the log line, never imported for it
    lines = [r for r in caplog.records if r.name == "ortcore.providers"]
    assert len(lines) == 1 and lines[0].levelno == logging.INFO
    text = lines[0].getMessage()
    assert (
        "aaslow" in text and "providers=[...]" in text and "set_provider_selection_policy" in text
    )
    assert cpu in pm.installed_names() and "aaslow" in pm.installed_names()
    assert "aaslow" in [e.plugin.split(" ")[0] for e in pm.entries()]  # listing: every one


def test_input_devices_are_the_cpu_providers_as_in_onnxruntime(cpu: str) -> None:
    ours = ortcore.InferenceSession(chain_model(["Neg"])).get_input_epdevices()
    theirs = onnxruntime.InferenceSession(chain_model(["Neg"])).get_input_epdevices()
    assert [d.ep_name for d in ours] == [d.ep_name for d in theirs] == [cpu]
    assert ours[0] is next(d for d in ortcore.get_ep_devices() if d.ep_name == cpu)
