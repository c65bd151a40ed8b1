"""The TensorRT execution provider: a bridge on :class:`ep_sdk.BridgeExecutionProvider`.

* Which TensorRT: the module ``tensorrt`` (10.x, 11.x) or ``tensorrt_rtx``,
  whichever imports (option ``trt_module`` picks one).
* What it runs: the ONNX parser's answer. Each candidate group is exported
  with its constants and handed to ``OnnxParser.supports_model_v2``; the
  nodes the parser names in its errors are refused with the parser's own
  text, the base splits them off and asks again, until every group parses
  (what polygraphy's ``inspect capability`` does). Groups smaller than
  ``trt_min_subgraph_size`` go to the next provider.
* Build: the group's network with one optimization profile. A network whose
  inputs are all static is built when the session is made; the ranges of
  dynamic inputs come from ``trt_profile_{min,opt,max}_shapes``, or else
  from the shapes the first run brings (min = opt = max), and an engine is
  built again, over the widened range, when a run brings a shape outside
  it (as onnxruntime's TensorRT EP does).
* Cache: engines (and TensorRT's timing cache, where the module has one)
  are entries of the compiled-artifact store the host lends
  (``ep_sdk.ArtifactStore``): the session's (``SessionConfig.artifact_store``,
  config entry ``ortcore.cache_dir``), or with ``trt_engine_cache_enable=1``
  one in ``trt_engine_cache_path`` or the host's default folder
  (``SessionConfig.host.open_artifact_store``), keyed by the group's content and
  constants, the options, the profile, the module and its version, and the
  device's compute capability: an engine built for one GPU is never loaded
  on another. ``ortcore cache list`` shows them.
* Run: values reach the GPU by host copies on the provider's stream
  (:mod:`ortcore_tensorrt._cuda`), with one execution context per thread
  (:class:`ortcore_tensorrt._engine.Runner`). Where a provider of ``cuda``
  devices (``ortcore-cuda``) is installed and can run (option
  ``trt_cuda_tensors``, ``auto`` by default), the host lends it
  (``SessionConfig.host.device_peer``, an ``ep_sdk.DevicePeer``): the
  provider's device is that provider's (``cuda:<device_id>``) and its values
  are that provider's device tensors (``ep_sdk.ContiguousTensor``): an engine
  reads its inputs where CUDA kernels left them and writes its outputs into
  tensors of the peer's allocator, so nothing crosses the host between the
  two. The plugin imports neither ortcore nor ortcore-cuda.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from functools import cached_property
from typing import Any, ClassVar

import ep_sdk
import numpy as np
import onnx
from ep_sdk.bridge import Answer
from ep_sdk.hardware import cuda_devices

from . import __version__, _module
from ._cuda import CudaDriver, DeviceInfo, Memory, probe
from ._engine import Dims, Profile, Runner, grow, parse_shapes

__all__ = ["TensorrtExecutionProvider"]

log = logging.getLogger("ortcore_tensorrt")

_BOOLS = {"0": False, "1": True, "false": False, "true": True}
_PROFILE_OPTIONS = ("trt_profile_min_shapes", "trt_profile_opt_shapes", "trt_profile_max_shapes")


class TensorrtExecutionProvider(ep_sdk.BridgeExecutionProvider):
    """Runs fused groups as TensorRT engines; declines what TensorRT's ONNX parser refuses."""

    name = "TensorrtExecutionProvider"
    aliases = ("tensorrt", "trt")
    version = __version__
    engine_name = "TensorRT"
    priority = 60  # before OpenVINO (50) and the CPU provider (0)
    vendor = "ortcore"
    default_options: ClassVar[Mapping[str, str]] = {
        **ep_sdk.BridgeExecutionProvider.default_options,
        "device_id": "0",
        "trt_module": "auto",
        "trt_max_workspace_size": "0",
        "trt_fp16_enable": "0",
        "trt_bf16_enable": "0",
        "trt_builder_optimization_level": "",
        "trt_min_subgraph_size": "",
        "trt_engine_cache_enable": "0",
        "trt_engine_cache_path": "",
        "trt_timing_cache_enable": "0",
        "trt_profile_min_shapes": "",
        "trt_profile_opt_shapes": "",
        "trt_profile_max_shapes": "",
        "trt_cuda_tensors": "auto",
    }

    # The core's compiled-artifact cache would store what serialize() returns once
    # per group; engines here depend on a profile known only at run time, so the
    # provider keeps them itself (in the store the host lends, see the module docstring).
    serialize_compiled = ep_sdk.ExecutionProvider.serialize_compiled

    def __init__(
        self, options: Mapping[str, Any] | None = None, config: ep_sdk.SessionConfig | None = None
    ) -> None:
        super().__init__(options, config)
        o = self.options
        self.device_id = _whole(o["device_id"], "device_id", self.name)
        self.workspace = _whole(o["trt_max_workspace_size"], "trt_max_workspace_size", self.name)
        self.fp16 = _flag(o["trt_fp16_enable"], "trt_fp16_enable", self.name)
        self.bf16 = _flag(o["trt_bf16_enable"], "trt_bf16_enable", self.name)
        self.timing_cache = _flag(
            o["trt_timing_cache_enable"], "trt_timing_cache_enable", self.name
        )
        level = o["trt_builder_optimization_level"]
        self.opt_level = (
            _whole(level, "trt_builder_optimization_level", self.name) if level else None
        )
        if self.opt_level is not None and self.opt_level > 5:
            raise ep_sdk.ProviderOptionError(
                f"{self.name}: trt_builder_optimization_level must be 0 to 5, got {level!r}"
            )
        if o["trt_min_subgraph_size"]:
            size = _whole(o["trt_min_subgraph_size"], "trt_min_subgraph_size", self.name)
            if size < 1:
                raise ep_sdk.ProviderOptionError(
                    f"{self.name}: trt_min_subgraph_size must be a whole number >= 1, got {size}"
                )
            self.min_size = size
        if o["trt_module"] not in ("auto", *_module.MODULES):
            raise ep_sdk.ProviderOptionError(
                f"{self.name}: trt_module must be auto, {' or '.join(_module.MODULES)}, "
                f"got {o['trt_module']!r}"
            )
        try:
            shapes = [parse_shapes(o[k], k) for k in _PROFILE_OPTIONS]
        except ValueError as exc:
            raise ep_sdk.ProviderOptionError(f"{self.name}: {exc}") from None
        self.profile_options = _explicit_profile(shapes[0], shapes[1], shapes[2], self.name)
        enabled = _flag(o["trt_engine_cache_enable"], "trt_engine_cache_enable", self.name)
        self.store = self._artifact_store(enabled, o["trt_engine_cache_path"])
        found = _module.find(o["trt_module"])
        self.found = found if isinstance(found, _module.Found) else None
        if self.found is not None:
            for on, flag in ((self.fp16, "FP16"), (self.bf16, "BF16")):
                if on and not hasattr(self.trt.BuilderFlag, flag):
                    raise ep_sdk.ProviderOptionError(
                        f"{self.name}: trt_{flag.lower()}_enable=1, but {self.found} has no "
                        f"{flag} builder flag (its networks are strongly typed: the model's "
                        "own types decide precision; convert the model to float16 instead)"
                    )
        self._builds = 0
        self._engines: list[_Engines] = []
        self._lock = threading.Lock()
        self.cuda = self._cuda_peer(o["trt_cuda_tensors"])
        if self.cuda is not None:
            self.device = self.cuda.device

    def _artifact_store(self, enabled: bool, folder: str) -> ep_sdk.ArtifactStore | None:
        """Where engines are kept: with ``trt_engine_cache_enable=1`` a store
        in ``trt_engine_cache_path`` (or the host's default folder), else the
        session's store; ``None``: nothing is kept."""
        if not enabled:
            return self.config.artifact_store
        host = self.config.host
        if host is None:
            log.warning(
                "%s: trt_engine_cache_enable=1, but no host lends an artifact store "
                "(SessionConfig.host is None): engines are not cached",
                self.name,
            )
            return None
        return host.open_artifact_store(folder)

    @property
    def cache_dir(self) -> str:
        """The folder engines are kept in (``""``: none)."""
        return self.store.location if self.store is not None else ""

    def _cuda_peer(self, choice: str) -> ep_sdk.DevicePeer | None:
        """The provider of ``cuda`` devices whose device tensors this one
        shares, lent by the host (``None``: values go by host copies), per
        option ``trt_cuda_tensors``: ``auto`` (when one is installed and can
        run), ``1`` (or refuse), ``0``."""
        if choice not in ("auto", "0", "1"):
            raise ep_sdk.ProviderOptionError(
                f"{self.name}: trt_cuda_tensors must be auto, 0 or 1, got {choice!r}"
            )
        if choice == "0":
            return None
        host = self.config.host
        if host is None:
            why = "no host lends another provider's device (SessionConfig.host is None)"
        else:
            try:
                return host.device_peer(ep_sdk.Device("cuda", self.device_id))
            except ep_sdk.NoDevicePeer as exc:
                why = exc.reason if exc.installed else "ortcore-cuda is not installed"
        if choice == "1":
            raise ep_sdk.ProviderOptionError(
                f"{self.name}: trt_cuda_tensors=1, but the CUDA provider cannot run: {why}"
            )
        return None

    def to_host(self, value: Any) -> np.ndarray:
        """A device tensor copied to the host (the CUDA provider's, when shared)."""
        if self.cuda is not None:
            return self.cuda.to_host(value)
        return super().to_host(value)

    def from_host(self, array: np.ndarray) -> Any:
        """A numpy array on this provider's device (the CUDA provider's, when shared)."""
        if self.cuda is not None:
            return self.cuda.from_host(array)
        return super().from_host(array)

    def allocator(self) -> ep_sdk.Allocator:
        """The CUDA provider's allocator when tensors are shared, else the host's."""
        if self.cuda is not None:
            return self.cuda.allocator()
        return super().allocator()

    # -- availability ----------------------------------------------------------------

    @classmethod
    def unavailable_reason(cls) -> str | None:
        """Which TensorRT module was found and why it cannot run here: none
        installed, no NVIDIA driver or device, or a compute capability the
        module does not build for."""
        found = _module.find()
        if not isinstance(found, _module.Found):
            return (
                f"no TensorRT module ({found}); pip install tensorrt-rtx, or tensorrt "
                "from NVIDIA's index"
            )
        device = probe(0)
        if isinstance(device, str):
            return (
                f"{found} is installed, but there is {device}. It can still partition "
                "models and build engines: ortcore inspect MODEL --providers tensorrt,cpu"
            )
        return _module.refuses_device(found, _module.load(found.name), device.major, device.minor)

    @classmethod
    def ep_devices(cls) -> Sequence[ep_sdk.EpDevice]:
        """The NVIDIA devices the driver sees (:func:`ep_sdk.hardware.cuda_devices`;
        neither the CUDA provider nor CUDA's toolkit is needed) that the
        TensorRT module builds for, each with ``ep_options``
        ``{"device_id": ordinal}``; nothing when TensorRT cannot run here."""
        if cls.unavailable_reason() is not None:
            return []
        found, devices = _module.find(), cuda_devices()
        if not isinstance(found, _module.Found) or isinstance(devices, str):
            return []
        module = _module.load(found.name)
        out = []
        for hw in devices:
            major, _, minor = hw.metadata.get("ComputeCapability", "0.0").partition(".")
            if _module.refuses_device(found, module, int(major), int(minor or 0)) is None:
                ordinal = hw.metadata.get("CudaOrdinal", "0")
                meta = {"trt_module": found.name}
                out.append(ep_sdk.EpDevice(hw, meta, {"device_id": ordinal}))
        return out

    @cached_property
    def trt(self) -> Any:
        """The TensorRT module this session uses."""
        if self.found is None:
            raise RuntimeError(f"{self.name}: {_module.find(self.options['trt_module'])}")
        return _module.load(self.found.name)

    @cached_property
    def device_info(self) -> DeviceInfo | str:
        """The device ``device_id`` (:func:`~ortcore_tensorrt._cuda.probe`), or why not."""
        return probe(self.device_id)

    @cached_property
    def memory(self) -> Memory:
        """Device memory and copies for the runtime (created on first use)."""
        return CudaDriver(self.device_id)

    # -- what TensorRT runs ------------------------------------------------------------

    def query_model(self, model: onnx.ModelProto) -> Mapping[str, Answer]:
        """The parser's answer for every node of ``model`` (``supports_model_v2``):
        a node the parser names in an error is refused with its text (a
        model-level error refuses every node); the others are accepted."""
        trt = self.trt
        names = [n.name for n in model.graph.node]
        builder = trt.Builder(_module.logger(trt))
        network = builder.create_network(0)
        parser = trt.OnnxParser(network, _module.logger(trt))  # keep network referenced
        ok, subgraphs = _supports(parser, model.SerializeToString())
        if ok:
            return dict.fromkeys(names, True)
        answers: dict[str, Answer] = dict.fromkeys(names, True)
        general: list[str] = []
        for i in range(parser.num_errors):
            error = parser.get_error(i)
            text = _error_text(self.found, error)
            index = int(error.node())
            if 0 <= index < len(names):
                if answers[names[index]] is True:
                    answers[names[index]] = text
            else:
                general.append(text)
        if general:
            return dict.fromkeys(names, "; ".join(general))
        if all(a is True for a in answers.values()):  # refused without naming a node
            for nodes, supported in subgraphs:
                for index in [] if supported else nodes:
                    answers[names[index]] = (
                        f"{self.found}'s ONNX parser refuses the subgraph holding it"
                    )
        if all(a is True for a in answers.values()):
            return dict.fromkeys(
                names, f"{self.found}'s ONNX parser refuses the group without naming a node"
            )
        return answers

    def engine_version(self) -> str:
        """``tensorrt_rtx 1.7.1.116`` (part of every cache key)."""
        return str(self.found) if self.found is not None else ""

    def engine_target(self) -> str:
        """The device's compute capability and name: an engine built for one
        GPU is never loaded on another; ``no CUDA device`` where there is none."""
        info = self.device_info
        if isinstance(info, str):
            return "no CUDA device"
        return f"sm_{info.major}{info.minor} {info.name}"

    # -- build, run ----------------------------------------------------------------------

    def build(self, model: bytes, group: ep_sdk.FusedGroup) -> _Engines:
        """Parse the group; build its engine now when its profile is known
        (static inputs, or every dynamic one in the ``trt_profile_*`` options),
        else at the first run."""
        network_inputs = self._network_inputs(model)
        engines = _Engines(self, model, group, network_inputs)
        with self._lock:
            self._engines.append(engines)
        if engines.profile is not None:
            engines.plan, engines.cached = self.plan(engines, engines.profile)
        return engines

    def run(self, engine: Any, inputs: Sequence[Any]) -> list[Any]:
        """Run the group's engine (built or rebuilt for these shapes if need be):
        numpy values, or the CUDA provider's device tensors when shared."""
        return engine.run(inputs)  # type: ignore[no-any-return]

    def close(self) -> None:
        """Free the engines' device buffers."""
        with self._lock:
            engines, self._engines = self._engines, []
        for e in engines:
            e.close()
        if self.cuda is not None:
            self.cuda.close()

    @property
    def builds(self) -> int:
        """How many engines this provider built (not loaded from the cache)."""
        return self._builds

    def _parse(self, model: bytes) -> tuple[Any, Any, Any]:
        """A builder, the group's parsed network and its parser (keep the
        parser as long as the network is used).

        Raises:
            RuntimeError: the parser refuses the group (its errors in the message).
        """
        trt = self.trt
        builder = trt.Builder(_module.logger(trt))
        network = builder.create_network(0)
        parser = trt.OnnxParser(network, _module.logger(trt))
        if not parser.parse(model):
            errors = [
                _error_text(self.found, parser.get_error(i)) for i in range(parser.num_errors)
            ]
            raise RuntimeError(f"{self.found} cannot parse the group: {'; '.join(errors)}")
        return builder, network, parser

    def _network_inputs(self, model: bytes) -> list[tuple[str, Dims, bool]]:
        """The parsed network's inputs: name, dims (-1: dynamic), whether a shape tensor."""
        _, network, _parser = self._parse(model)
        out = []
        for i in range(network.num_inputs):
            tensor = network.get_input(i)
            dims = tuple(int(d) for d in tensor.shape)
            out.append((str(tensor.name), dims, bool(getattr(tensor, "is_shape_tensor", False))))
        return out

    def plan(
        self, engines: _Engines, profile: Profile, *, fresh: bool = False
    ) -> tuple[bytes, bool]:
        """The serialized engine of ``engines``' group for ``profile``, and
        whether it came from the cache (else it was built, and stored there);
        ``fresh``: build it whatever the cache holds, and replace the entry."""
        store = _Store(self, self.store, engines.group) if self.store is not None else None
        key_extra = {"profile": profile.text()}
        if store is not None and not fresh:
            found = store.load("engine", key_extra)
            if found is not None:
                return found, True
        plan = self._build_plan(engines.model, profile, store)
        with self._lock:
            self._builds += 1
        if store is not None:
            store.save("engine", key_extra, plan)
        return plan, False

    def _build_plan(self, model: bytes, profile: Profile, store: _Store | None) -> bytes:
        trt = self.trt
        builder, network, _parser = self._parse(model)
        config = builder.create_builder_config()
        if self.workspace:
            config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, self.workspace)
        if self.fp16:
            config.set_flag(trt.BuilderFlag.FP16)
        if self.bf16:
            config.set_flag(trt.BuilderFlag.BF16)
        if self.opt_level is not None:
            config.builder_optimization_level = self.opt_level
        if profile.shapes:
            prof = builder.create_optimization_profile()
            for name, lo, opt, hi in profile.shapes:
                if name in profile.values:
                    prof.set_shape_input(name, lo, opt, hi)
                else:
                    prof.set_shape(name, lo, opt, hi)
            config.add_optimization_profile(prof)
        timing = self._timing_cache(config, store)
        plan = builder.build_serialized_network(network, config)
        if plan is None:
            raise RuntimeError(
                f"{self.found} could not build an engine for the group (profile "
                f"{profile.text() or 'static'}); its log above says why"
            )
        if timing is not None and store is not None:
            store.save("timing cache", {}, bytes(timing.serialize()))
        return bytes(plan)

    def _timing_cache(self, config: Any, store: _Store | None) -> Any:
        """The timing cache, from the cache folder when one is there
        (TensorRT only: TensorRT-RTX's timing cache calls are no-ops)."""
        if not self.timing_cache or _module.targets(self.trt) is not None:
            return None
        data = store.load("timing cache", {}) if store is not None else None
        cache = config.create_timing_cache(bytes(data) if data else b"")
        config.set_timing_cache(cache, ignore_mismatch=False)
        return cache


class _Engines:
    """A group's engine(s): the compiled function's state (see the module docstring)."""

    def __init__(
        self,
        provider: TensorrtExecutionProvider,
        model: bytes,
        group: ep_sdk.FusedGroup,
        network_inputs: Sequence[tuple[str, Dims, bool]],
    ) -> None:
        self.provider = provider
        self.model = model
        self.group = group
        self.feeds = [v.name or "" for v in group.inputs]
        self.outputs = [
            (v.name or "", np.dtype(v.dtype.numpy()) if v.dtype is not None else np.dtype("f4"))
            for v in group.outputs
        ]
        self.dynamic = {
            name: dims
            for name, dims, shape_tensor in network_inputs
            if not shape_tensor and any(d < 0 for d in dims)
        }
        # shape tensor inputs (fed at run time, e.g. an overridable initializer
        # holding a Reshape's shape): the profile bounds their values
        self.values = frozenset(name for name, _, shape_tensor in network_inputs if shape_tensor)
        defaults = {
            v.name or "": _ints(v.const_value.numpy())
            for v in group.inputs
            if v.name in self.values and v.const_value is not None
        }
        given = provider.profile_options
        self.fixed = [n for n in self.dynamic if n in given]
        self.profile: Profile | None = None
        if all(n in given for n in self.dynamic) and all(n in defaults for n in self.values):
            entries = [(n, *given[n]) for n in self.dynamic]
            entries += [(n, d, d, d) for n, d in defaults.items()]
            self.profile = Profile(tuple(sorted(entries)), self.values)
        self.plan: bytes | None = None
        self.cached = False  # whether plan came from the cache
        self.runner: Runner | None = None
        self._lock = threading.Lock()

    def _runner(self, shapes: Mapping[str, Dims]) -> Runner:
        runner, profile = self.runner, self.profile
        if runner is not None and profile is not None and profile.covers(shapes):
            return runner
        with self._lock:
            if self.profile is not None and self.profile.covers(shapes):
                if self.runner is None:
                    assert self.plan is not None
                    self.runner = self._load(self.profile, self.plan, self.cached)
                return self.runner
            given = self.provider.profile_options
            for name in self.fixed:
                if not Profile(((name, *given[name]),)).covers(shapes):
                    raise ValueError(
                        f"{self.provider.name}: input {name!r} of group {self.group.name} has "
                        f"shape {shapes.get(name)}, outside the trt_profile_*_shapes range "
                        f"{self._range(name)}"
                    )
            profile = self._next_profile(shapes)
            plan, cached = self.provider.plan(self, profile)
            runner = self._load(profile, plan, cached)
            if self.runner is not None:
                self.runner.close()
            self.profile, self.plan, self.runner = profile, plan, runner
            return runner

    def _range(self, name: str) -> str:
        lo, opt, hi = self.provider.profile_options[name]
        return f"min {lo}, opt {opt}, max {hi}"

    def _next_profile(self, shapes: Mapping[str, Dims]) -> Profile:
        """The given ranges, and for the other dynamic inputs the range so far
        widened to hold ``shapes`` (exactly ``shapes`` the first time)."""
        given = self.provider.profile_options
        now = {n: (lo, opt, hi) for n, lo, opt, hi in (self.profile or Profile()).shapes}
        entries = []
        for name in sorted({*self.dynamic, *self.values}):
            if name in given and name in self.dynamic:
                entries.append((name, *given[name]))
                continue
            shape = shapes.get(name)
            if shape is None:
                raise ValueError(f"{self.provider.name}: group {self.group.name} got no {name!r}")
            entries.append((name, *grow(now.get(name), shape)))
        return Profile(tuple(entries), self.values)

    def _load(self, profile: Profile, plan: bytes, cached: bool) -> Runner:
        """The plan, deserialized; a cached plan TensorRT refuses (a corrupt
        entry, another build of TensorRT) is built again and its entry
        replaced: a bad cache entry costs a build, never the session."""
        try:
            return self._new_runner(plan)
        except Exception:
            if not cached:
                raise
            log.warning(
                "%s: the cached engine of %s could not be loaded; building it again",
                self.provider.name,
                self.group.name,
                exc_info=True,
            )
        plan, _ = self.provider.plan(self, profile, fresh=True)
        self.plan = plan
        return self._new_runner(plan)

    def _new_runner(self, plan: bytes) -> Runner:
        p = self.provider
        return Runner(p.trt, plan, p.memory, self.outputs, device=p.cuda)

    def run(self, inputs: Sequence[Any]) -> list[Any]:
        feeds = dict(zip(self.feeds, inputs))
        cuda = self.provider.cuda
        if cuda is not None:  # shape tensors are read on the host
            feeds.update({n: cuda.to_host(feeds[n]) for n in self.values if n in feeds})
        shapes = {n: tuple(np.shape(feeds[n])) for n in self.dynamic if n in feeds}
        shapes.update({n: _ints(feeds[n]) for n in self.values if n in feeds})
        return self._runner(shapes).run(feeds)

    def close(self) -> None:
        if self.runner is not None:
            self.runner.close()


class _Store:
    """Engines and timing caches of one group in the artifact store the host lends.

    Keys are those of the entries made before SDK 1.1 (through ortcore's
    cache directly): an engine's parts are the store's
    :meth:`~ep_sdk.ArtifactStore.key_parts` plus ``kind`` and the profile,
    with the group's content digest; a timing cache's only the provider, its
    version, its ``provider_parts`` and ``kind``, without the content (one
    per module and device, whatever the group).
    """

    def __init__(
        self,
        provider: TensorrtExecutionProvider,
        store: ep_sdk.ArtifactStore,
        group: ep_sdk.FusedGroup,
    ) -> None:
        self.provider = provider
        self.store = store
        self.group = group
        self.base = store.key_parts(provider, group)
        self._content: str | None = None

    def _parts(self, kind: str, extra: Mapping[str, str]) -> dict[str, Any]:
        parts = {**self.base, "kind": kind, **extra}
        if kind == "timing cache":  # one per module and device, for every group
            parts = {k: parts[k] for k in ("provider", "version", "provider_parts", "kind")}
        return parts

    def _digest(self, kind: str) -> str:
        if kind == "timing cache":
            return ""
        if self._content is None:  # once per group: it hashes every weight
            self._content = self.store.content_digest(self.group)
        return self._content

    def load(self, kind: str, extra: Mapping[str, str]) -> bytes | None:
        parts = self._parts(kind, extra)
        data = self.store.load(self.provider, self.group, parts, content=self._digest(kind))
        return bytes(data) if data is not None else None

    def save(self, kind: str, extra: Mapping[str, str], data: bytes) -> None:
        parts = self._parts(kind, extra)
        try:
            self.store.save(self.provider, self.group, parts, data, content=self._digest(kind))
        except OSError:
            log.warning(
                "could not keep the %s of %s in %s", kind, self.group.name, self.store.location
            )


def _ints(value: Any) -> Dims:
    """A shape tensor's values."""
    return tuple(int(x) for x in np.asarray(value).ravel())


def _supports(parser: Any, data: bytes) -> tuple[bool, list[tuple[list[int], bool]]]:
    """The parser's answer on a whole model: whether it parses, and its
    subgraphs (node indices, supported). ``supports_model_v2`` where the
    module has it (TensorRT 10.x from 10.8, 11.x, TensorRT-RTX), else the
    older ``supports_model``, which returns the subgraphs."""
    if hasattr(parser, "supports_model_v2"):
        ok = bool(parser.supports_model_v2(data, ""))
        subgraphs = [
            ([int(i) for i in parser.get_subgraph_nodes(k)], bool(parser.is_subgraph_supported(k)))
            for k in range(parser.num_subgraphs)
        ]
        return ok, subgraphs
    ok, found = parser.supports_model(data)
    return bool(ok), [([int(i) for i in nodes], bool(good)) for nodes, good in found]


def _error_text(found: Any, error: Any) -> str:
    """A parser error as a decline reason: the module, the node's op, the code
    and the parser's own text."""
    code = str(error.code()).rsplit(".", 1)[-1]
    named = getattr(error, "node_operator", None)  # TensorRT 10.x from 10.4
    op = named() if named is not None and int(error.node()) >= 0 else ""
    where = f" {op}" if op else ""
    return f"{found}'s ONNX parser refuses{where}: {code}: {error.desc()}"


def _whole(text: str, option: str, who: str) -> int:
    if not text.strip().isdigit():
        raise ep_sdk.ProviderOptionError(
            f"{who}: {option} must be a whole number >= 0, got {text!r}"
        )
    return int(text)


def _flag(text: str, option: str, who: str) -> bool:
    value = _BOOLS.get(text.strip().lower())
    if value is None:
        raise ep_sdk.ProviderOptionError(f"{who}: {option} must be 0 or 1, got {text!r}")
    return value


def _explicit_profile(
    lo: Mapping[str, Dims], opt: Mapping[str, Dims], hi: Mapping[str, Dims], who: str
) -> dict[str, tuple[Dims, Dims, Dims]]:
    """The ``trt_profile_*`` options as ``name -> (min, opt, max)``.

    Raises:
        ProviderOptionError: an input named in some but not all three, ranks
            that differ, or min <= opt <= max broken.
    """
    out: dict[str, tuple[Dims, Dims, Dims]] = {}
    for name in sorted({*lo, *opt, *hi}):
        if not (name in lo and name in opt and name in hi):
            raise ep_sdk.ProviderOptionError(
                f"{who}: input {name!r} must be in all of trt_profile_min_shapes, "
                "trt_profile_opt_shapes and trt_profile_max_shapes"
            )
        a, o, b = lo[name], opt[name], hi[name]
        if not (len(a) == len(o) == len(b)) or any(not x <= y <= z for x, y, z in zip(a, o, b)):
            raise ep_sdk.ProviderOptionError(
                f"{who}: input {name!r}: the profile needs min <= opt <= max in every "
                f"dimension, got min {a}, opt {o}, max {b}"
            )
        out[name] = (a, o, b)
    return out
