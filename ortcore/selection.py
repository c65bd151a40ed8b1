"""Which providers a session uses when ``InferenceSession(providers=...)`` names none.

In this order, as onnxruntime decides:

1. providers added to the :class:`~ortcore.SessionOptions` with
   ``add_provider(name, options)`` or ``add_provider_for_devices(devices,
   options)``, in the order added;
2. else the devices a selection delegate returns
   (``set_provider_selection_policy_delegate``);
3. else the devices a selection policy picks (``set_provider_selection_policy``);
4. else the CPU provider only, with one info line on ``ortcore.providers``
   naming the other installed providers (found without importing them).

``providers=[...]`` given to the session wins over all of these (with
onnxruntime's warning when the options also carry providers).

Options given with a provider (``add_provider``'s, ``add_provider_for_devices``'s)
are kept, as onnxruntime keeps them, as session config entries
``ep.<provider name, lowercase>.<key>``; a provider chosen from the options
gets its device's ``ep_options`` overridden by those entries.
``docs/devices.md`` describes each policy.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import onnx_ir as ir

from .ep_devices import (
    OrtEpDevice,
    OrtExecutionProviderDevicePolicy,
    OrtHardwareDeviceType,
    get_ep_devices,
)
from .errors import Fail, InvalidArgument, InvalidArgumentRuntimeError, InvalidArgumentTypeError
from .plugins import PluginManager, default_manager

__all__ = [
    "MAX_SELECTIONS",
    "ProviderSelectionOptions",
    "order_devices",
    "policy_devices",
    "requested_from_options",
    "select_providers",
    "selection_key",
    "warn_if_options_ignored",
]

log = logging.getLogger("ortcore.providers")

CPU_PROVIDER = "CPUExecutionProvider"
MAX_SELECTIONS = 8
"""The most devices a delegate may select (onnxruntime's limit)."""

_IGNORED = (
    "Specified 'providers'/'provider_options' when creating InferenceSession but "
    "SessionOptions has already been configured with providers. InferenceSession will "
    "only use the providers passed to InferenceSession()."
)

Delegate = Callable[
    [Sequence[OrtEpDevice], Mapping[str, str], Mapping[str, str], int], Sequence[OrtEpDevice]
]


def _prefix(provider: str) -> str:
    return f"ep.{provider.lower()}."


@dataclass(frozen=True)
class _Added:
    """A provider added to the options: its name and the devices it was added for."""

    name: str
    devices: tuple[OrtEpDevice, ...] = ()


class ProviderSelectionOptions:
    """The provider-selection methods of :class:`~ortcore.SessionOptions`.

    State is kept in immutable values, replaced on change, so a shallow copy
    of the options (a model's ``ort_config`` applied) never shares updates.
    """

    _config: dict[str, str]
    _added_providers: tuple[_Added, ...] = ()
    _selection_policy: OrtExecutionProviderDevicePolicy | None = None
    _selection_delegate: Delegate | None = None

    def _set_provider_options(self, provider: str, options: Mapping[str, str] | None) -> None:
        for key, value in (options or {}).items():
            if not isinstance(key, str) or not isinstance(value, str):
                raise InvalidArgumentTypeError(
                    f"provider options take str keys and values, not {key!r}: {value!r}"
                )
            self._config[_prefix(provider) + key] = value

    def add_provider(self, provider_name: str, provider_options: Mapping[str, str]) -> None:
        """Add a provider by name (sessions use the added providers, in the
        order added, when ``providers=`` is not given).

        Raises:
            InvalidArgumentRuntimeError: no installed provider has that name,
                or it cannot run here (a ``RuntimeError`` as onnxruntime's
                "Unknown Provider Type", and an ``InvalidArgument``).
        """
        try:
            entry = default_manager().resolve(str(provider_name))
        except InvalidArgument as exc:
            raise InvalidArgumentRuntimeError(f"add_provider({provider_name!r}): {exc}") from exc
        self._set_provider_options(entry.name, provider_options)
        self._added_providers = (*self._added_providers, _Added(entry.name))

    def add_provider_for_devices(
        self, ep_devices: Sequence[OrtEpDevice], provider_options: Mapping[str, str]
    ) -> None:
        """Add the provider of ``ep_devices`` (from ``get_ep_devices()``), set
        up for them: their ``ep_options``, then ``provider_options`` over them.

        Raises:
            InvalidArgument: no devices, something that is not an
                ``OrtEpDevice``, or devices of several providers.
        """
        devices = tuple(ep_devices)
        if not devices:
            raise InvalidArgument("Must provide one or more OrtEpDevice instances.")
        bad = [d for d in devices if not isinstance(d, OrtEpDevice)]
        if bad:
            raise InvalidArgument(
                f"add_provider_for_devices takes OrtEpDevice instances (from get_ep_devices()), "
                f"not {type(bad[0]).__name__}"
            )
        names = list(dict.fromkeys(d.ep_name for d in devices))
        if len(names) > 1:
            raise InvalidArgument(
                "add_provider_for_devices: all OrtEpDevice instances must refer to the same "
                f"execution provider, got devices of {', '.join(names)}; call it once per provider"
            )
        self._set_provider_options(names[0], provider_options)
        self._added_providers = (*self._added_providers, _Added(names[0], devices))

    def has_providers(self) -> bool:
        """Whether providers, devices, a policy or a delegate were set on the options."""
        return bool(
            self._added_providers
            or self._selection_policy is not None
            or self._selection_delegate is not None
        )

    def set_provider_selection_policy(self, policy: OrtExecutionProviderDevicePolicy) -> None:
        """Pick providers by device with one of onnxruntime's policies
        (used when no providers are added and no delegate is set).

        Raises:
            InvalidArgumentTypeError: ``policy`` is not an
                ``OrtExecutionProviderDevicePolicy``.
        """
        if not isinstance(policy, OrtExecutionProviderDevicePolicy):
            raise InvalidArgumentTypeError(
                "set_provider_selection_policy takes an OrtExecutionProviderDevicePolicy, "
                f"not {policy!r}"
            )
        self._selection_policy = policy

    def set_provider_selection_policy_delegate(self, delegate: Delegate) -> None:
        """Pick providers by device with ``delegate(ep_devices, model_metadata,
        runtime_metadata, max_selections)``, which returns the devices to use,
        in priority order (at most ``max_selections``).

        Raises:
            InvalidArgumentTypeError: ``delegate`` is not callable.
        """
        if not callable(delegate):
            raise InvalidArgumentTypeError(
                f"set_provider_selection_policy_delegate takes a callable, not {delegate!r}"
            )
        self._selection_delegate = delegate


def _state(options: Any) -> tuple[tuple[_Added, ...], Any, Any]:
    return (
        getattr(options, "_added_providers", ()),
        getattr(options, "_selection_delegate", None),
        getattr(options, "_selection_policy", None),
    )


def requested_from_options(options: Any, cpu_fallback: bool) -> list[str] | None:
    """The provider names a session given no ``providers=`` needs (its
    plugins are imported first), or ``None`` for every plugin (a policy or a
    delegate chooses among all devices)."""
    added, delegate, policy = _state(options)
    if added:
        names = [a.name for a in added]
        return [*names, CPU_PROVIDER] if cpu_fallback else names
    if delegate is not None or policy is not None:
        return None
    return [CPU_PROVIDER]


def selection_key(options: Any) -> str:
    """What the options choose, as text for a saved session's key (``""``: nothing)."""
    added, delegate, policy = _state(options)
    if added:
        return "added:" + ";".join(f"{a.name}{[repr(d) for d in a.devices]}" for a in added)
    if delegate is not None:
        return f"delegate:{getattr(delegate, '__module__', '')}.{_name(delegate)}"
    return f"policy:{policy.name}" if policy is not None else ""


def warn_if_options_ignored(options: Any) -> None:
    """onnxruntime's warning when ``providers=`` overrides providers set on the options."""
    if getattr(options, "has_providers", lambda: False)():
        warnings.warn(_IGNORED, UserWarning, stacklevel=5)


def _device_options(devices: Sequence[OrtEpDevice], provider: str, who: str) -> dict[str, str]:
    """The ``ep_options`` that set ``provider`` up for ``devices`` (one device's worth).

    Raises:
        InvalidArgument: the devices ask for different options (an ortcore
            provider instance runs on one device).
    """
    distinct = list(dict.fromkeys(tuple(sorted(d.ep_options.items())) for d in devices))
    if len(distinct) > 1:
        raise InvalidArgument(
            f"{who} selected {len(devices)} devices of {provider} with different options "
            f"({'; '.join(str(dict(o)) for o in distinct)}); an ortcore provider runs on one "
            "device: select one"
        )
    return dict(distinct[0]) if distinct else {}


def _with_config(
    provider: str, base: Mapping[str, str], config: Mapping[str, str]
) -> dict[str, str]:
    prefix = _prefix(provider)
    return {**base, **{k[len(prefix) :]: v for k, v in config.items() if k.startswith(prefix)}}


def select_providers(
    manager: PluginManager,
    options: Any,
    model: ir.Model | None,
    cpu_fallback: bool,
) -> list[tuple[str, dict[str, str]]]:
    """The providers (name, options) of a session given no ``providers=``,
    as the module docs order the choices.

    Raises:
        Fail: a delegate failed, selected nothing or something not offered;
            a policy found no CPU device.
        InvalidArgument: devices of one provider with different options;
            no CPU provider for the default.
    """
    added, delegate, policy = _state(options)
    config: Mapping[str, str] = options.config_entries
    chosen: list[tuple[str, tuple[OrtEpDevice, ...], str]] = []
    if added:
        for a in added:
            chosen.append((a.name, a.devices, "add_provider_for_devices"))
    elif delegate is not None or policy is not None:
        offered = order_devices(get_ep_devices(manager))
        if delegate is not None:
            picked, who = _run_delegate(delegate, offered, model), f"delegate {_name(delegate)}"
        else:
            picked, who = policy_devices(policy, offered), f"policy {policy.name}"
        if not cpu_fallback and picked and _is_default_cpu(picked[-1]) and len(picked) > 1:
            picked = picked[:-1]  # as onnxruntime drops its CPU provider when fallback is off
        for name in dict.fromkeys(d.ep_name for d in picked):
            chosen.append((name, tuple(d for d in picked if d.ep_name == name), who))
    else:
        _check_default(manager)
        _log_default(manager)
        return [(CPU_PROVIDER, _with_config(CPU_PROVIDER, {}, config))]
    return [
        (name, _with_config(name, _device_options(devices, name, who), config))
        for name, devices, who in chosen
    ]


def _check_default(manager: PluginManager) -> None:
    """Refuse the default when there is no CPU provider to run it on.

    Raises:
        InvalidArgument: naming what is installed and how to choose it.
    """
    try:
        manager.resolve(CPU_PROVIDER)
    except InvalidArgument as exc:
        installed = ", ".join(manager.installed_names()) or "none"
        raise InvalidArgument(
            f"No execution provider was named, and the default, {CPU_PROVIDER}, cannot be used: "
            f"{exc} Name the providers: InferenceSession(model, providers=[...]) "
            f"(installed: {installed}), or install ortcore-cpu."
        ) from exc


def _log_default(manager: PluginManager) -> None:
    others = [
        n for n in manager.installed_names() if n.lower() not in ("cpu", CPU_PROVIDER.lower())
    ]
    if others:
        log.info(
            "no providers named: the session uses %s only, as onnxruntime does. Also "
            "installed: %s. Select them with InferenceSession(model, providers=[...]) or "
            "SessionOptions.set_provider_selection_policy(OrtExecutionProviderDevicePolicy"
            ".PREFER_GPU) (docs/devices.md)",
            CPU_PROVIDER,
            ", ".join(others),
        )


# -- policies ---------------------------------------------------------------------------

_TYPE_RANK = {OrtHardwareDeviceType.NPU: 0, OrtHardwareDeviceType.GPU: 1}


def _is_default_cpu(d: OrtEpDevice) -> bool:
    return d.ep_name == CPU_PROVIDER and d.device.type == OrtHardwareDeviceType.CPU


def order_devices(devices: Sequence[OrtEpDevice]) -> list[OrtEpDevice]:
    """Devices in onnxruntime's order of preference: NPUs, then GPUs
    (discrete first), then CPUs; within a kind, devices whose vendor made
    the provider first, the CPU provider's device last, then by provider name
    (a stable sort: ties keep the providers' priority order)."""

    def key(d: OrtEpDevice) -> tuple[int, bool, bool, bool, str]:
        hw = d.device
        discrete = hw.type == OrtHardwareDeviceType.GPU and hw.metadata.get("Discrete") == "1"
        return (
            _TYPE_RANK.get(hw.type, 2),
            hw.type == OrtHardwareDeviceType.GPU and not discrete,
            not (d.ep_vendor and hw.vendor == d.ep_vendor),
            _is_default_cpu(d),
            d.ep_name,
        )

    return sorted(devices, key=key)


def _prefer_cpu(ordered: Sequence[OrtEpDevice], selected: list[OrtEpDevice]) -> None:
    first = next((d for d in ordered if d.device.type == OrtHardwareDeviceType.CPU), None)
    if first is None:
        raise Fail("No CPU based execution providers were found.")
    selected.append(first)
    if not _is_default_cpu(first) and ordered and _is_default_cpu(ordered[-1]):
        selected.append(ordered[-1])  # the CPU provider covers every operator


def policy_devices(
    policy: OrtExecutionProviderDevicePolicy, ordered: Sequence[OrtEpDevice]
) -> list[OrtEpDevice]:
    """The devices ``policy`` picks from ``ordered`` (see :func:`order_devices`),
    in priority order. DEFAULT and PREFER_CPU: the first CPU device, and the
    CPU provider's after it when that was another provider's. PREFER_NPU,
    MAX_EFFICIENCY, MIN_OVERALL_POWER: the first device if it is an NPU, then
    as PREFER_CPU. PREFER_GPU, MAX_PERFORMANCE: the first GPU, then as PREFER_CPU.

    Raises:
        Fail: no device at all, or no CPU device.
    """
    if not ordered:
        raise Fail(
            "No execution providers selected. Please check the device policy and available "
            "devices (ortcore.get_ep_devices() lists none: is a provider installed?)"
        )
    P = OrtExecutionProviderDevicePolicy
    selected: list[OrtEpDevice] = []
    if policy in (P.PREFER_NPU, P.MAX_EFFICIENCY, P.MIN_OVERALL_POWER):
        if ordered[0].device.type == OrtHardwareDeviceType.NPU:
            selected.append(ordered[0])
    elif policy in (P.PREFER_GPU, P.MAX_PERFORMANCE):
        gpu = next((d for d in ordered if d.device.type == OrtHardwareDeviceType.GPU), None)
        if gpu is not None:
            selected.append(gpu)
    _prefer_cpu(ordered, selected)
    return selected


# -- the delegate -------------------------------------------------------------------------


def _name(delegate: Any) -> str:
    return str(getattr(delegate, "__qualname__", None) or type(delegate).__name__)


def model_metadata(model: ir.Model | None) -> dict[str, str]:
    """What a delegate gets as ``model_metadata``: onnxruntime's keys (named
    after onnx.proto's fields), then the model's own metadata entries."""
    if model is None:
        return {}
    out = {
        "producer_name": model.producer_name or "",
        "producer_version": model.producer_version or "",
        "domain": model.domain or "",
        "model_version": str(model.model_version or 0),
        "doc_string": model.doc_string or "",
        "graph_name": model.graph.name or "",
        "graph_description": model.graph.doc_string or "",
    }
    out.update(model.metadata_props)
    return out


def _run_delegate(
    delegate: Delegate, offered: list[OrtEpDevice], model: ir.Model | None
) -> list[OrtEpDevice]:
    who = f"delegate {_name(delegate)}"
    try:
        result = delegate(list(offered), model_metadata(model), {}, MAX_SELECTIONS)
    except Exception as exc:
        raise Fail(f"EP selection delegate failed: {type(exc).__name__}: {exc} (in {who})") from exc
    if isinstance(result, (str, bytes)) or not isinstance(result, Sequence):
        raise Fail(
            f"EP selection delegate failed: {who} returned {type(result).__name__}, "
            "not a list of OrtEpDevice"
        )
    picked = list(result)
    if not picked:
        raise Fail(f"EP selection delegate did not select anything. ({who} returned an empty list)")
    if len(picked) > MAX_SELECTIONS:
        raise Fail(
            f"EP selection delegate selected too many EP devices ({len(picked)}). The limit is "
            f"{MAX_SELECTIONS} EP devices. ({who})"
        )
    ids = {id(d) for d in offered}
    for d in picked:
        if not isinstance(d, OrtEpDevice):
            raise Fail(
                f"EP selection delegate failed: {who} returned a {type(d).__name__} in its "
                "list, not an OrtEpDevice"
            )
        if id(d) not in ids:
            raise Fail(
                f"EP selection delegate failed: {who} returned {d!r}, which is not one of the "
                "devices it was offered"
            )
    return picked
