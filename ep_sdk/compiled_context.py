"""Compiled-context compatibility: may a compiled model's binary run here? (SDK 1.1)

A compiled model (onnxruntime's EPContext form, written by ``ortcore.ModelCompiler``
or the ``ep.context_enable`` session config entry) carries, for each provider
whose groups it holds, a *compatibility string* in its metadata under
``ep_compatibility_info.<provider name>`` (onnxruntime's key). When a session
loads such a model, each of its providers judges the string it stated then:

* :attr:`OrtCompiledModelCompatibility.EP_SUPPORTED_OPTIMAL`: load it;
* :attr:`~OrtCompiledModelCompatibility.EP_SUPPORTED_PREFER_RECOMPILATION`:
  load it, with a warning (an error under the session config entry
  ``session.fail_on_suboptimal_compiled_model`` = ``"1"``);
* :attr:`~OrtCompiledModelCompatibility.EP_UNSUPPORTED`: the session is not
  created; the error names the provider and what differs.

The provider side is two methods of :class:`~ep_sdk.ExecutionProvider`, both
with defaults, so a provider written against SDK 1.0 takes part unchanged:
``compiled_model_compatibility_info(groups)`` states the string (default:
:func:`default_compatibility_info`) and
``validate_compiled_model_compatibility_info(info, groups)`` judges one
(default: :func:`judge_compatibility_info`).
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from .capability import FusedGroup
    from .provider import ExecutionProvider

__all__ = [
    "COMPATIBILITY_INFO_PREFIX",
    "Compatibility",
    "OrtCompiledModelCompatibility",
    "default_compatibility_info",
    "judge_compatibility_info",
    "sdk_version",
]

COMPATIBILITY_INFO_PREFIX = "ep_compatibility_info."
"""A compiled model's metadata key of a provider's string is this prefix and
the provider's name (onnxruntime's ``kOrtModelMetadata_EpCompatibilityInfoPrefix``)."""

_FORMAT = "ortcore.compiled/1"  # what the default string is: other strings are not ours


class OrtCompiledModelCompatibility(enum.IntEnum):
    """How well a compiled model suits a provider (onnxruntime's names and numbers)."""

    EP_NOT_APPLICABLE = 0
    EP_SUPPORTED_OPTIMAL = 1
    EP_SUPPORTED_PREFER_RECOMPILATION = 2
    EP_UNSUPPORTED = 3


class Compatibility(NamedTuple):
    """A provider's verdict on a compiled model's compatibility string.

    Attributes:
        status: the verdict.
        reason: what differs (empty when nothing does), shown in the
            session's error or warning.
    """

    status: OrtCompiledModelCompatibility
    reason: str = ""


def sdk_version() -> str:
    """The installed SDK's version (``ep_sdk.__version__``)."""
    from ._version import __version__

    return __version__


def _engine_parts(provider: ExecutionProvider, groups: Sequence[FusedGroup]) -> dict[str, str]:
    """What the provider's ``compile_cache_key_parts`` says of the groups
    (merged), or of an empty group when there is none.

    Raises:
        Exception: whatever ``compile_cache_key_parts`` raises.
    """
    from .capability import FusedGroup
    from .graph import group_model

    empty = FusedGroup("", [], [], [], export=lambda: group_model("", [], [], [], {}, []))
    parts: dict[str, str] = {}
    for group in groups or [empty]:
        parts.update({str(k): str(v) for k, v in provider.compile_cache_key_parts(group).items()})
    return parts


def _state(provider: ExecutionProvider, groups: Sequence[FusedGroup]) -> dict[str, Any]:
    try:
        engine: dict[str, str] | None = _engine_parts(provider, groups)
    except Exception:
        engine = None  # unknown: not compared
    return {
        "format": _FORMAT,
        "provider": provider.name,
        "version": str(provider.version),
        "options": {str(k): str(v) for k, v in sorted(provider.provider_options.items())},
        "device": str(provider.device),
        "engine": engine,
        "ep_sdk": sdk_version(),
    }


def default_compatibility_info(provider: ExecutionProvider, groups: Sequence[FusedGroup]) -> str:
    """The default compatibility string: JSON of the provider's name, version,
    options and device, what ``compile_cache_key_parts`` says of the compiled
    groups (an engine's version and target), and the SDK's version."""
    return json.dumps(_state(provider, groups), sort_keys=True)


def _diff(what: str, then: Any, now: Any) -> str:
    return f"{what}: compiled with {then!r}, this session has {now!r}"


def judge_compatibility_info(
    provider: ExecutionProvider, info: str, groups: Sequence[FusedGroup]
) -> Compatibility:
    """The default judgement of a string :func:`default_compatibility_info` wrote.

    UNSUPPORTED: not such a string, another provider, another device, or an
    engine part (``compile_cache_key_parts``: the engine's version, its
    target) that differs, or an SDK of another major version. PREFER_RECOMPILATION:
    another provider version or other options. Else OPTIMAL.
    """
    try:
        then = json.loads(info)
    except ValueError:
        then = None
    if not isinstance(then, dict) or then.get("format") != _FORMAT:
        return Compatibility(
            OrtCompiledModelCompatibility.EP_UNSUPPORTED,
            f"{provider.name}: the compatibility string {info[:80]!r} is not one this "
            "provider states",
        )
    now = _state(provider, groups)
    hard, soft = [], []
    for key in ("provider", "device"):
        if then.get(key) != now[key]:
            hard.append(_diff(key, then.get(key), now[key]))
    engine_then, engine_now = then.get("engine"), now["engine"]
    if isinstance(engine_then, Mapping) and engine_now is not None:
        for key in sorted(set(engine_then) | set(engine_now)):
            if engine_then.get(key) != engine_now.get(key):
                hard.append(_diff(key, engine_then.get(key), engine_now.get(key)))
    sdk_then = str(then.get("ep_sdk", ""))
    if sdk_then.split(".")[0] != now["ep_sdk"].split(".")[0]:
        hard.append(_diff("ep_sdk major version", sdk_then, now["ep_sdk"]))
    if then.get("version") != now["version"]:
        soft.append(_diff("provider version", then.get("version"), now["version"]))
    if then.get("options") != now["options"]:
        soft.append(_diff("options", then.get("options"), now["options"]))
    if hard:
        return Compatibility(OrtCompiledModelCompatibility.EP_UNSUPPORTED, "; ".join(hard + soft))
    if soft:
        return Compatibility(
            OrtCompiledModelCompatibility.EP_SUPPORTED_PREFER_RECOMPILATION, "; ".join(soft)
        )
    return Compatibility(OrtCompiledModelCompatibility.EP_SUPPORTED_OPTIMAL)
