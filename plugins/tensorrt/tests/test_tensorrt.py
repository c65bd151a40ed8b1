"""The TensorRT provider: options, availability, the parser's capability and
re-partition, engines built (for real, by TensorRT-RTX or TensorRT) and
cached, and the runtime path against the stand-in runtime of ``fake_trt.py``
(this machine has no GPU: no test here runs an engine on one).

Here: options, availability, and the capability (the parser's answer,
re-partitioned). Engines and the runtime path are in
test_tensorrt_engines.py, the device tensors shared with the CUDA provider
and what the host lends in test_tensorrt_cuda.py; shared models in
trt_models.py.
"""

from __future__ import annotations

from typing import Any

import onnx
import pytest
from trt_models import RESNET50, with_unique

# -- options and availability -------------------------------------------------------


def test_options_are_checked() -> None:
    from ortcore_tensorrt.provider import TensorrtExecutionProvider as P

    bad = {
        "trt_fp16_enable": "maybe",
        "device_id": "-1",
        "trt_max_workspace_size": "1GB",
        "trt_builder_optimization_level": "9",
        "trt_min_subgraph_size": "0",
        "trt_module": "tensorflow",
        "trt_profile_min_shapes": "x:1xN",
        "no_such_option": "1",
    }
    for key, value in bad.items():
        with pytest.raises(ValueError, match=key):
            P({key: value})
    with pytest.raises(ValueError, match="all of trt_profile_min_shapes"):
        P({"trt_profile_min_shapes": "x:1x16", "trt_profile_max_shapes": "x:8x16"})
    with pytest.raises(ValueError, match="min <= opt <= max"):
        P(
            {
                "trt_profile_min_shapes": "x:4x16",
                "trt_profile_opt_shapes": "x:2x16",
                "trt_profile_max_shapes": "x:8x16",
            }
        )
    p = P({"trt_min_subgraph_size": "3", "trt_profile_min_shapes": "", "device_id": "1"})
    assert p.min_size == 3 and p.device_id == 1


def test_fp16_is_refused_where_networks_are_strongly_typed(trt: Any) -> None:
    from ortcore_tensorrt.provider import TensorrtExecutionProvider as P

    if hasattr(trt.BuilderFlag, "FP16"):
        assert P({"trt_fp16_enable": "1"}).fp16
    else:
        with pytest.raises(ValueError, match="strongly typed"):
            P({"trt_fp16_enable": "1"})


def test_unavailable_reason_names_the_module_and_why(monkeypatch: pytest.MonkeyPatch) -> None:
    from ortcore_tensorrt import _module, provider
    from ortcore_tensorrt._cuda import DeviceInfo
    from ortcore_tensorrt.provider import TensorrtExecutionProvider as P

    monkeypatch.setattr(_module, "find", lambda preferred="auto": "tensorrt is not installed")
    assert "no TensorRT module (tensorrt is not installed)" in str(P.unavailable_reason())

    class RTX:
        __name__ = "tensorrt_rtx"

        class ComputeCapability:
            SM80 = SM86 = SM120 = object()

    found = _module.Found("tensorrt_rtx", "1.7")
    monkeypatch.setattr(_module, "find", lambda preferred="auto": found)
    monkeypatch.setattr(_module, "load", lambda name: RTX)
    monkeypatch.setattr(provider, "probe", lambda ordinal=0: "no NVIDIA driver: gone")
    why = str(P.unavailable_reason())
    assert "tensorrt_rtx 1.7 is installed" in why and "no NVIDIA driver" in why
    assert "ortcore inspect" in why
    monkeypatch.setattr(provider, "probe", lambda ordinal=0: DeviceInfo(0, "H200", 9, 0))
    why = str(P.unavailable_reason())
    assert "no target for compute capability 9.0" in why and "8.0, 8.6, 12.0" in why
    monkeypatch.setattr(provider, "probe", lambda ordinal=0: DeviceInfo(0, "A100", 8, 0))
    assert P.unavailable_reason() is None
    del RTX.ComputeCapability  # full TensorRT: any device from 7.5 on
    assert P.unavailable_reason() is None
    monkeypatch.setattr(provider, "probe", lambda ordinal=0: DeviceInfo(0, "V100", 7, 0))
    assert "7.5 or newer" in str(P.unavailable_reason())


def test_the_driver_probe_never_raises() -> None:
    from ortcore_tensorrt._cuda import DeviceInfo, probe

    found = probe(0)
    assert isinstance(found, (str, DeviceInfo))


def test_listed_with_its_reason_by_ortcore_providers(manager: Any) -> None:
    entry = next(e for e in manager.entries() if e.name == "TensorrtExecutionProvider")
    assert entry.aliases == ("tensorrt", "trt")
    if not entry.available:
        assert str(entry.reason).startswith(("tensorrt", "no TensorRT"))


# -- capability: the parser's answer, re-partitioned ------------------------------------


def test_refused_node_is_split_off_with_the_parsers_reason(manager: Any) -> None:
    from ortcore.inspection import inspect_partition

    found = inspect_partition(with_unique(), providers=["tensorrt", "cpu"], plugin_manager=manager)
    where = {r.node: r for r in found.partition.nodes}
    assert where["unique"].provider == "CPUExecutionProvider"
    why = where["unique"].declined["TensorrtExecutionProvider"]
    assert "ONNX parser refuses Unique" in why and "UNSUPPORTED_NODE" in why
    # the nodes after it were asked again in their own group, and parse there
    assert where["second"].provider == where["third"].provider == "TensorrtExecutionProvider"
    assert where["second"].group == where["third"].group
    assert where["first"].group and where["first"].group != where["second"].group
    assert "TensorrtExecutionProvider" in found.unavailable or not found.unavailable


class _OldParser:
    """TensorRT 10 before 10.8: ``supports_model`` returns the subgraphs; an
    error has no ``node_operator``."""

    def __init__(self, network: Any, logger: Any) -> None:
        self.num_errors = 1 if network.refuse is not None else 0

    def supports_model(self, data: bytes) -> tuple[bool, list[tuple[list[int], bool]]]:
        return self.num_errors == 0, [([0, 1, 2, 3], self.num_errors == 0)]

    def get_error(self, i: int) -> Any:
        class Error:
            def node(self) -> int:
                return _OldModule.refuse  # type: ignore[return-value]

            def code(self) -> str:
                return "ErrorCode.UNSUPPORTED_NODE"

            def desc(self) -> str:
                return "no importer"

        return Error()


class _OldModule:
    __name__ = "tensorrt"
    __version__ = "10.3.0"
    refuse: int | None = None

    class Logger:
        ERROR = 0

        def __init__(self, level: int) -> None:
            pass

    class Builder:
        def __init__(self, logger: Any) -> None:
            pass

        def create_network(self, flags: int) -> Any:
            class Network:
                refuse = _OldModule.refuse

            return Network()

    OnnxParser = _OldParser


@pytest.mark.parametrize("refuse", [None, 1, -1])
def test_the_older_supports_model_api_is_understood(
    refuse: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ortcore_tensorrt import _module
    from ortcore_tensorrt.provider import TensorrtExecutionProvider as P

    monkeypatch.setattr(_OldModule, "refuse", refuse)
    monkeypatch.setattr(P, "trt", property(lambda self: _OldModule))
    p = P()
    p.found = _module.Found("tensorrt", "10.3.0")
    answers = p.query_model(onnx.load_from_string(with_unique()))
    if refuse is None:
        assert set(answers.values()) == {True}
    elif refuse == 1:  # the error names node 1 (Unique)
        assert answers["unique"] == (
            "tensorrt 10.3.0's ONNX parser refuses: UNSUPPORTED_NODE: no importer"
        )
        assert answers["first"] is answers["second"] is True
    else:  # an error that names no node refuses every node
        assert len(set(answers.values())) == 1 and "no importer" in str(answers["first"])


def test_min_subgraph_size_declines_small_groups(manager: Any) -> None:
    from ortcore.inspection import inspect_partition

    found = inspect_partition(
        with_unique(),
        providers=[("tensorrt", {"trt_min_subgraph_size": "2"}), "cpu"],
        plugin_manager=manager,
    )
    where = {r.node: r for r in found.partition.nodes}
    assert where["first"].provider == "CPUExecutionProvider"
    assert "min_group_size=2" in where["first"].declined["TensorrtExecutionProvider"]
    assert where["third"].provider == "TensorrtExecutionProvider"


def test_light_resnet50_is_one_group_in_ortcore_inspect(
    manager: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from ortcore import cli, plugins

    monkeypatch.setattr(plugins, "default_manager", lambda: manager)
    monkeypatch.setattr(cli, "default_manager", lambda: manager, raising=False)
    from ortcore import inspection

    monkeypatch.setattr(inspection, "default_manager", lambda: manager)
    assert cli.main(["inspect", str(RESNET50), "--providers", "tensorrt,cuda,cpu"]) == 0
    out = capsys.readouterr().out
    assert "nothing was compiled or run" in out
    assert "groups: TensorrtExecutionProvider_fused_1 (" in out
    assert (
        "counts: TensorrtExecutionProvider=" in out
        and "CPUExecutionProvider" not in out.split("counts:")[1]
    )
