"""A session's providers: which plugins to import, and the providers created in priority order.

A session given no ``providers=`` takes them from its options, else uses the
CPU provider only (:mod:`ortcore.selection`).

A session that names its providers imports only their plugins (and the CPU
provider's, where it may fall back to it); the others are imported only if
the model uses an op domain one of them may define. A provider the user named
that fails to construct is an error; one the session chose itself is skipped
with a warning.

A listed provider that is not available here is handled as onnxruntime
handles it (each with onnxruntime's ``warnings.warn`` text, also logged on
``ortcore.plugins``):

* a *known* provider (one installed but unavailable, or one of onnxruntime's
  own provider names, :data:`ONNXRUNTIME_PROVIDERS`: ``["CUDAExecutionProvider"]``
  on a machine without CUDA) is skipped; when no listed provider is left, the
  session runs on the CPU provider, unless ``session.disable_cpu_ep_fallback``
  is ``"1"`` (then :class:`~ortcore.errors.Fail`, onnxruntime's words);
* an *unknown* name is onnxruntime's ``RuntimeError`` "Unknown Provider Type":
  a session being created with ``enable_fallback`` (the default) warns and
  falls back to the CPU provider alone, as onnxruntime's retry does;
  ``set_providers`` and a session created with ``enable_fallback=0`` raise it.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import onnx_ir as ir

from ep_sdk import ExecutionProvider

from .cache import cache_dir_from_config
from .custom_ops import ONNX_DOMAINS, CustomOp, attach_kernels, session_ops
from .epcontext import context_domains
from .errors import EPFail, Fail, InvalidArgument, InvalidArgumentRuntimeError, ProviderOptionError
from .host import session_config
from .options import SessionOptions
from .plugins import PluginManager, ProviderEntry, default_manager, describe_error, provider_key
from .selection import requested_from_options, select_providers, warn_if_options_ignored
from .thread_pools import session_intra_threads

__all__ = [
    "CPU_PROVIDER",
    "ONNXRUNTIME_PROVIDERS",
    "DISABLE_CPU_FALLBACK",
    "ProviderSpec",
    "close_all",
    "cpu_fallback",
    "create_providers",
    "get_all_providers",
    "get_available_providers",
    "load_plugin_ops_for",
    "requested_names",
]

_plugin_log = logging.getLogger("ortcore.plugins")

CPU_PROVIDER = "CPUExecutionProvider"
DISABLE_CPU_FALLBACK = "session.disable_cpu_ep_fallback"

ONNXRUNTIME_PROVIDERS = frozenset(
    {
        "TensorrtExecutionProvider",
        "NvTensorRTRTXExecutionProvider",
        "CUDAExecutionProvider",
        "MIGraphXExecutionProvider",
        "ROCMExecutionProvider",
        "OpenVINOExecutionProvider",
        "DnnlExecutionProvider",
        "VitisAIExecutionProvider",
        "QNNExecutionProvider",
        "NnapiExecutionProvider",
        "VSINPUExecutionProvider",
        "JsExecutionProvider",
        "CoreMLExecutionProvider",
        "DmlExecutionProvider",
        "RknpuExecutionProvider",
        "WebNNExecutionProvider",
        "WebGpuExecutionProvider",
        "XnnpackExecutionProvider",
        "CANNExecutionProvider",
        "AzureExecutionProvider",
        "ACLExecutionProvider",
        "ArmNNExecutionProvider",
        "SNPEExecutionProvider",
        "CPUExecutionProvider",
    }
)
"""The provider names onnxruntime knows (its ``get_all_providers()`` and a
few of other builds): listed but not available, such a name is skipped with
a warning, where an unknown name is an "Unknown Provider Type" error. Their
short forms (``cuda``, ``tensorrt``, ``openvino``: the name without the
``ExecutionProvider`` suffix, in any case) count as known too."""

_ONNXRUNTIME_KEYS = frozenset(provider_key(n) for n in ONNXRUNTIME_PROVIDERS)

ProviderSpec = str | tuple[str, Mapping[str, Any]]
"""A provider as ``InferenceSession(providers=[...])`` names it: a name, or ``(name, options)``."""


def get_available_providers() -> list[str]:
    """Names of the providers that can run here, in default priority (CPU last)."""
    return [e.name for e in default_manager().available()]


def get_all_providers() -> list[str]:
    """Names of every provider installed, available or not."""
    return [e.name for e in default_manager().entries() if e.cls is not None]


def cpu_fallback(options: SessionOptions) -> bool:
    """Whether the session may fall back to the CPU provider
    (``session.disable_cpu_ep_fallback`` is not ``"1"``)."""
    return options._config.get(DISABLE_CPU_FALLBACK, "0") != "1"


def requested_names(
    providers: Sequence[ProviderSpec] | None, options: SessionOptions
) -> list[str] | None:
    """The provider names a session asks for (CPU too where it may fall
    back to it), or ``None`` when it needs every plugin (a policy or a
    delegate on the options chooses among every device)."""
    if providers is None:
        return requested_from_options(options, cpu_fallback(options))
    if isinstance(providers, str):
        return None
    names = [spec[0] if isinstance(spec, tuple) and spec else spec for spec in providers]
    out = [n for n in names if isinstance(n, str)]
    return [*out, CPU_PROVIDER] if cpu_fallback(options) else out


def load_plugin_ops_for(
    manager: PluginManager,
    model: ir.Model,
    custom_ops: list[CustomOp],
    options: SessionOptions,
) -> tuple[list[CustomOp], bool]:
    """Import the plugins a session skipped if the model imports an op domain
    none of its custom ops defines (a plugin's ``ortcore_custom_ops`` may).

    Returns:
        the session's custom ops (those of every plugin once all are
        imported), and whether that brought custom ops of such a domain,
        whose schemas the model must be loaded again with.
    """
    if manager.fully_loaded:
        return custom_ops, False
    # A domain onnx does not define may come from a plugin's custom ops.
    # a compiled model's EPContext nodes (com.microsoft) are the core's, no plugin's
    known = ONNX_DOMAINS | context_domains(model) | {op.domain for op in custom_ops}
    unknown = set(model.opset_imports) - known
    if not unknown:
        return custom_ops, False
    manager.load()
    custom_ops = session_ops(manager.custom_ops(), options.custom_ops)
    return custom_ops, any(op.domain in unknown for op in custom_ops)


def create_providers(
    manager: PluginManager,
    providers: Sequence[ProviderSpec] | None,
    provider_options: Sequence[Mapping[str, Any]] | None,
    options: SessionOptions,
    custom_ops: Sequence[CustomOp],
    *,
    unavailable: bool = False,
    model: ir.Model | None = None,
    retry_on_cpu: bool = False,
) -> list[ExecutionProvider]:
    """Resolve and instantiate a session's providers, in priority order.

    With ``unavailable``, a listed provider that is installed but cannot run
    here is created too (:func:`ortcore.inspection.inspect_partition` asks
    it how it would partition a model; nothing is compiled or run).

    With ``providers`` ``None``, the providers come from ``options``
    (:func:`ortcore.selection.select_providers`; ``model`` is what a
    selection delegate is told about), else the CPU provider only.

    A provider the user named (or the options chose) that fails to construct
    is an error; the CPU fallback the session adds itself is skipped with a
    warning on the ``ortcore.plugins`` logger, and the session goes on with
    the others.
    The session's ``custom_ops`` are attached to the providers that run them.

    A listed provider that is not available is skipped with a warning, or
    the session falls back to the CPU provider (see the module docs);
    ``retry_on_cpu`` is onnxruntime's ``enable_fallback`` while a session is
    created (``set_providers`` passes ``False``).

    Raises:
        InvalidArgumentRuntimeError: an unknown provider name without
            ``retry_on_cpu`` ("Unknown Provider Type: NAME", an
            ``InvalidArgument`` and, as onnxruntime raises, a ``RuntimeError``).
        Fail: nothing listed is available and ``session.disable_cpu_ep_fallback``
            is ``"1"``.
        InvalidArgument: bad options, two names for one provider (a name
            listed twice is warned about and its repeats ignored, as
            onnxruntime does).
        EPFail: a named provider failed to construct, or none could be.
    """
    # (entry, options, named by the user)
    specs: list[tuple[ProviderEntry, Mapping[str, Any], bool]] = []
    if providers is None:
        if provider_options is not None:
            raise InvalidArgument("provider_options given without providers")
        providers = select_providers(manager, options, model, cpu_fallback(options))
    else:
        warn_if_options_ignored(options)
    if isinstance(providers, str):
        raise InvalidArgument("providers must be a list of names, not a string")
    if provider_options is not None and len(provider_options) != len(providers):
        raise InvalidArgument(
            f"'providers' has {len(providers)} entries but 'provider_options' has "
            f"{len(provider_options)}; they must have the same length"
        )
    skipped: list[tuple[str, InvalidArgument]] = []
    unknown: list[str] = []
    seen: set[str] = set()
    for i, spec in enumerate(providers):
        if isinstance(spec, tuple):
            name, opts = spec
        else:
            name, opts = spec, {}
        if isinstance(name, str):
            if name in seen:
                # onnxruntime keeps the first mention (with its options) and warns
                warnings.warn(f"Duplicate provider '{name}' encountered, ignoring.", stacklevel=4)
                continue
            seen.add(name)
        if provider_options is not None:
            opts = {**opts, **provider_options[i]}
        try:
            entry = manager.resolve(name, available=not unavailable)
        except InvalidArgument as exc:  # unknown, or installed but unavailable
            skipped.append((str(name), exc))
            if not _known(manager, str(name)):
                unknown.append(str(name))
            continue
        specs.append((entry, opts, True))
    for name, why in skipped:
        _warn_skipped(manager, name, why)
    if unknown:
        error = InvalidArgumentRuntimeError(
            f"Unknown Provider Type: {unknown[0]} ({dict(skipped)[unknown[0]]})"
        )
        if not retry_on_cpu:
            raise error
        # onnxruntime's session retries on the CPU provider alone after this error
        text = f"EP Error {error} when using {list(providers)}. Falling back to ['{CPU_PROVIDER}']"
        _plugin_log.warning("%s", text)
        warnings.warn(text, RuntimeWarning, stacklevel=4)
        specs = []
    elif skipped and not specs and not cpu_fallback(options):
        raise Fail(
            "This session contains graph nodes that are assigned to the default CPU EP, but "
            f"fallback to CPU EP has been explicitly disabled by the user ({DISABLE_CPU_FALLBACK}"
            f' is "1" and no listed provider is available: '
            + "; ".join(f"{n} ({why})" for n, why in skipped)
            + ")"
        )
    if skipped and not specs:
        try:
            specs.append((manager.resolve(CPU_PROVIDER), {}, True))
        except InvalidArgument as exc:
            raise InvalidArgumentRuntimeError(str(skipped[0][1])) from exc
    names = [e.name for e, _, _ in specs]
    if len(set(names)) != len(names):
        raise InvalidArgument(f"a provider is listed twice: {names}")
    if cpu_fallback(options) and CPU_PROVIDER not in names:
        try:
            specs.append((manager.resolve(CPU_PROVIDER), {}, False))
        except InvalidArgument:
            pass  # no CPU provider installed: nodes others decline will fail
    if not specs:
        raise InvalidArgument(
            "No execution provider is available. Install one, e.g. pip install ./plugins/cpu"
        )
    config = session_config(
        manager,
        intra_op_num_threads=session_intra_threads(options),
        config_entries=options.config_entries,
        cache_dir=cache_dir_from_config(options.config_entries),
    )
    out: list[ExecutionProvider] = []
    failures: list[tuple[str, BaseException]] = []
    for entry, opts, named in specs:
        assert entry.cls is not None
        try:
            out.append(entry.cls(opts, config))
        except (KeyboardInterrupt, GeneratorExit):
            raise
        except BaseException as exc:  # SystemExit too: the plugin's fault, not the host's
            what = f"provider {entry.name!r} (plugin {entry.plugin})"
            if named:
                close_all(out)
                if isinstance(exc, ProviderOptionError):
                    raise InvalidArgument(str(exc)) from exc
                raise EPFail(
                    f"{what} failed to initialize: {describe_error(exc)}. Fix or "
                    f"uninstall the plugin, or leave {entry.name} out of providers=[...] "
                    "(`ortcore providers` lists what is installed)"
                ) from exc
            _plugin_log.warning(
                "skipping %s: it failed to initialize: %s", what, describe_error(exc)
            )
            failures.append((what, exc))
    if not out and failures:
        raise EPFail(
            "No execution provider could be created: "
            + "; ".join(f"{w} failed: {describe_error(e)}" for w, e in failures)
        ) from failures[0][1]
    attach_kernels(out, custom_ops)
    return out


def _known(manager: PluginManager, name: str) -> bool:
    """Whether ``name`` is a provider onnxruntime knows or one installed here
    (available or not, or refused for its SDK range), as opposed to a name
    nothing answers to."""
    if provider_key(name) in _ONNXRUNTIME_KEYS or manager.incompatible_reason(name) is not None:
        return True
    try:
        manager.resolve(name, available=False)
    except InvalidArgument:
        return False
    return True


def _warn_skipped(manager: PluginManager, name: str, why: InvalidArgument) -> None:
    """onnxruntime's warning for a listed provider that is not available, then why."""
    text = f"Specified provider '{name}' is not in available provider names."
    if manager.fully_loaded:  # listing them would otherwise import every plugin
        text += f"Available providers: '{', '.join(e.name for e in manager.available())}'"
    _plugin_log.warning("%s Skipping it: %s", text, why)
    warnings.warn(text, stacklevel=5)


def close_all(providers: Sequence[ExecutionProvider]) -> None:
    """Close providers a failed session creation leaves behind, ignoring their errors
    (the error being raised is the one the user needs)."""
    for p in providers:
        try:
            p.close()
        except Exception as exc:
            _plugin_log.warning("closing provider %r failed: %s", p.name, describe_error(exc))
