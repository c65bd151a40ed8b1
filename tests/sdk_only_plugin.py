"""A plugin written against ``ep_sdk`` alone (no import of ortcore, checked by
``test_sdk_services.py``): a provider that keeps artifacts in the store the
host lends, a provider of a device of its own, one that borrows that device,
and custom operators offered by the ``ortcore_custom_ops`` hook."""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

import ep_sdk


class KeepingProvider(ep_sdk.ExecutionProvider):
    """Takes the whole graph as one group and "builds" a program baking its
    constants (counted), kept as an artifact of its own: in the session's
    store, or with option ``store_path`` in a store the host opens there
    (``default``: the host's default folder)."""

    name = "KeepingExecutionProvider"
    aliases = ("keeping",)
    version = "1.0"
    default_options: ClassVar[Mapping[str, str]] = {"store_path": "", "flavour": "plain"}
    builds = 0
    loads = 0

    def __init__(
        self, options: Mapping[str, Any] | None = None, config: ep_sdk.SessionConfig | None = None
    ) -> None:
        super().__init__(options, config)
        path = self.options["store_path"]
        host = self.config.host
        if path and host is not None:
            self.store = host.open_artifact_store("" if path == "default" else path)
        else:
            self.store = self.config.artifact_store

    def get_capability(self, graph: ep_sdk.GraphContext) -> ep_sdk.Capability:
        return ep_sdk.Capability(claims=[ep_sdk.Claim.group(list(graph.nodes))])

    def compile(self, group: ep_sdk.FusedGroup) -> Any:
        parts: dict[str, Any] = {}
        content = ""
        data = None
        if self.store is not None:
            content = self.store.content_digest(group)
            parts = {**self.store.key_parts(self, group), "kind": "program"}
            data = self.store.load(self, group, parts, content=content)
        if data is not None:
            type(self).loads += 1
            with np.load(io.BytesIO(bytes(data))) as z:
                baked = {k: z[k] for k in z.files}
        else:
            type(self).builds += 1
            baked = {v.name or "": v.const_value.numpy() for v in group.constants if v.const_value}
            if self.store is not None:
                buf = io.BytesIO()
                np.savez(buf, **baked)
                self.store.save(self, group, parts, buf.getvalue(), content=content)

        def run(x: np.ndarray) -> list[np.ndarray]:
            return [x * baked["w"]]

        return run


class FakeDeviceTensor:
    """A tensor of the fake device (host memory, as an ``ep_sdk.ContiguousTensor``)."""

    def __init__(self, array: np.ndarray) -> None:
        self.array = np.ascontiguousarray(array)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.array.shape)

    @property
    def dtype(self) -> Any:
        return self.array.dtype

    @property
    def ptr(self) -> int:
        return int(self.array.ctypes.data)

    @property
    def nbytes(self) -> int:
        return int(self.array.nbytes)

    def wait(self) -> None:
        pass


class _FakeAllocator:
    def allocate(self, shape: Sequence[int], dtype: Any) -> FakeDeviceTensor:
        return FakeDeviceTensor(np.empty(tuple(shape), dtype))


class FakeDeviceProvider(ep_sdk.ExecutionProvider):
    """Keeps its tensors on ``fakedev`` devices (option ``device_id``); runs nothing."""

    name = "FakeDeviceExecutionProvider"
    aliases = ("fakedev",)
    device = ep_sdk.Device("fakedev", 0)
    default_options: ClassVar[Mapping[str, str]] = {"device_id": "0"}
    priority = 40
    reason: ClassVar[str | None] = None
    made: ClassVar[list[FakeDeviceProvider]] = []

    def __init__(
        self, options: Mapping[str, Any] | None = None, config: ep_sdk.SessionConfig | None = None
    ) -> None:
        super().__init__(options, config)
        self.device = ep_sdk.Device("fakedev", int(self.options["device_id"]))
        self.closed = False
        type(self).made.append(self)

    @classmethod
    def unavailable_reason(cls) -> str | None:
        return cls.reason

    def get_capability(self, graph: ep_sdk.GraphContext) -> ep_sdk.Capability:
        return ep_sdk.Capability(declined={n: "runs nothing" for n in graph.nodes})

    def to_host(self, value: Any) -> np.ndarray:
        return np.array(value.array)

    def from_host(self, array: np.ndarray) -> FakeDeviceTensor:
        return FakeDeviceTensor(np.array(array))

    def allocator(self) -> ep_sdk.Allocator:
        return _FakeAllocator()

    def close(self) -> None:
        self.closed = True


class FasterFakeDevice(FakeDeviceProvider):
    """Another provider of ``fakedev`` devices, of a higher priority."""

    name = "FasterFakeDeviceExecutionProvider"
    aliases = ("fasterfake",)
    priority = 45


class BorrowingProvider(ep_sdk.ExecutionProvider):
    """Runs ``Neg`` on the ``fakedev`` device of whichever provider the host
    lends (option ``share``: ``auto``, ``1`` or ``0``), on its tensors."""

    name = "BorrowingExecutionProvider"
    aliases = ("borrowing",)
    default_options: ClassVar[Mapping[str, str]] = {"share": "auto"}
    priority = 50

    def __init__(
        self, options: Mapping[str, Any] | None = None, config: ep_sdk.SessionConfig | None = None
    ) -> None:
        super().__init__(options, config)
        self.peer: ep_sdk.DevicePeer | None = None
        self.why = ""
        share = self.options["share"]
        host = self.config.host
        if share != "0" and host is not None:
            try:
                self.peer = host.device_peer(ep_sdk.Device("fakedev", 0))
            except ep_sdk.NoDevicePeer as exc:
                self.why = f"{exc.reason} (installed: {exc.installed})"
        if share == "1" and self.peer is None:
            raise ep_sdk.ProviderOptionError(f"{self.name}: share=1, but {self.why}")
        if self.peer is not None:
            self.device = self.peer.device

    def get_capability(self, graph: ep_sdk.GraphContext) -> ep_sdk.Capability:
        nodes = [n for n in graph.nodes if n.op_type == "Neg"]
        return ep_sdk.Capability(claims=[ep_sdk.Claim.group([n]) for n in nodes])

    def compile(self, group: ep_sdk.FusedGroup) -> Any:
        peer = self.peer

        def run(x: Any) -> list[Any]:
            if peer is None:
                return [np.negative(x)]
            assert isinstance(x, ep_sdk.ContiguousTensor), x
            out = peer.allocator().allocate(x.shape, x.dtype)
            np.negative(x.array, out=out.array)  # in place, on the device
            return [out]

        return run

    def to_host(self, value: Any) -> np.ndarray:
        return self.peer.to_host(value) if self.peer is not None else super().to_host(value)

    def from_host(self, array: np.ndarray) -> Any:
        return self.peer.from_host(array) if self.peer is not None else array

    def close(self) -> None:
        if self.peer is not None:
            self.peer.close()


halve = ep_sdk.custom_op(
    domain="sdk.only",
    name="Halve",
    inputs=["X: T"],
    outputs=["Y: T"],
    types={"T": ["float"]},
    shape=lambda ins, attrs: [ep_sdk.TensorType(ins[0].dtype, ins[0].shape)],
)


@halve.kernel("CPUExecutionProvider")
def _halve_cpu(info: ep_sdk.NodeInfo) -> ep_sdk.Compute:
    return lambda x: (x * np.float32(0.5),)


wrong = ep_sdk.custom_op(
    domain="sdk.only", name="Wrong", inputs=["X: T"], outputs=["Y: T"], types={"T": ["float"]}
)


@wrong.kernel("cpu")
def _wrong_cpu(info: ep_sdk.NodeInfo) -> ep_sdk.Compute:
    return lambda x: (x.astype(np.float64),)  # not the declared float


@ep_sdk.hookimpl
def ortcore_custom_ops() -> list[ep_sdk.CustomOp]:
    """The operators this plugin offers every session."""
    return [halve, wrong]
