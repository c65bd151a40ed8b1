"""Whether a plugin is written for the installed SDK, judged before it is imported.

A provider distribution declares the provider-SDK releases it is written for
as a requirement on ``ortcore-ep-sdk`` (``ortcore-ep-sdk>=1.1,<2``). The host
reads that requirement from the distribution's metadata (``Requires-Dist``)
before it imports the plugin's entry point, and refuses a plugin whose range
excludes the installed SDK (``ep_sdk.__version__``): never imported, listed as
incompatible with the range, the installed version and the pip command that
fixes it (docs/provider-contract.md).

Cheap by design: the metadata is read once per distribution and process (the
plugin manager keeps the answer), and ``packaging`` is imported only for a
distribution that names the SDK.
"""

from __future__ import annotations

import importlib.metadata
import logging
import re
from collections.abc import Iterable, MutableMapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from packaging.specifiers import SpecifierSet

__all__ = [
    "SDK_DISTRIBUTION",
    "SdkVerdict",
    "judge_entry_point",
    "judge_requirements",
    "sdk_requirement",
]

SDK_DISTRIBUTION = "ortcore-ep-sdk"
"""The distribution of the provider SDK (import name ``ep_sdk``)."""

log = logging.getLogger("ortcore.plugins")

# The name at the start of a requirement line (PEP 508), to skip the lines that
# do not name the SDK without parsing them.
_NAME = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
# A requirement with neither marker nor URL: name, extras, versions (bare or in
# the parentheses of older metadata).
_PLAIN = re.compile(
    r"\s*[A-Za-z0-9][A-Za-z0-9._-]*\s*(?:\[[^\]]*\])?\s*\(?(?P<spec>[^;@()]*)\)?\s*"
)


def sdk_requirement(version: str | None = None) -> str:
    """The requirement a provider written against SDK ``version`` (default: the
    installed one, ``ep_sdk.__version__``) declares: from that minor release
    up to the next major, e.g. ``ortcore-ep-sdk>=1.1,<2`` for 1.1.0."""
    if version is None:
        import ep_sdk

        version = ep_sdk.__version__
    major, minor = (int(p) for p in re.findall(r"\d+", version)[:2])
    return f"{SDK_DISTRIBUTION}>={major}.{minor},<{major + 1}"


@dataclass(frozen=True)
class SdkVerdict:
    """What a distribution's metadata says about the installed SDK.

    Attributes:
        declared: the range(s) it requires of ``ortcore-ep-sdk`` (``""`` when
            it names none: a plugin from before the SDK had a distribution).
        reason: why it cannot be used with the installed SDK, with the pip
            command that fixes it; ``""`` when it can.
    """

    declared: str
    reason: str = ""

    @property
    def compatible(self) -> bool:
        """Whether the plugin may be imported."""
        return not self.reason


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _names_sdk(line: str) -> bool:
    match = _NAME.match(line)
    return match is not None and _normalize(match[1]) == SDK_DISTRIBUTION


def _sdk_ranges(lines: Iterable[str]) -> list[SpecifierSet]:
    """The version ranges of these requirements on the SDK that apply
    unconditionally (a requirement under an extra does not bind the plugin).

    A plain line (name, extras, versions) is read with ``packaging.specifiers``
    alone; one with a marker or a URL with the whole requirement grammar of
    ``packaging.requirements``, which costs a few milliseconds more to import.
    """
    from packaging.specifiers import SpecifierSet

    ranges = []
    for line in lines:
        plain = _PLAIN.fullmatch(line)
        if plain is not None:
            spec = SpecifierSet(plain["spec"])
        else:
            from packaging.requirements import Requirement

            req = Requirement(line)
            if req.marker is not None and not req.marker.evaluate({"extra": ""}):
                continue
            spec = req.specifier
        if spec:  # a bare name or a URL says nothing about versions
            ranges.append(spec)
    return ranges


def _why_excluded(spec: SpecifierSet, installed: str) -> str:
    """Why ``spec`` excludes ``installed``: ``"newer"`` (the plugin needs a newer
    SDK), ``"older"`` (it is written for an older one) or ``"excluded"`` (it
    names this release with ``!=``)."""
    from packaging.version import Version

    have, why = Version(installed), "older"
    for clause in spec:
        if clause.contains(have, prereleases=True) or clause.operator in ("<", "<="):
            continue
        if clause.operator == "!=":
            why = "excluded"
        elif Version(clause.version.removesuffix(".*")) > have:
            return "newer"
    return why


def judge_requirements(
    requires: Iterable[str] | None, *, dist: str, dist_version: str, sdk_version: str
) -> SdkVerdict:
    """Judge a distribution's requirements against the installed SDK.

    Args:
        requires: its ``Requires-Dist`` lines (``Distribution.requires``).
        dist: its name, for the message and the pip command.
        dist_version: its version, for the message.
        sdk_version: the installed SDK's version (``ep_sdk.__version__``).

    Raises:
        ValueError: a requirement on the SDK that cannot be parsed (the
            caller refuses the plugin with it).
    """
    lines = [r for r in requires or () if _names_sdk(r)]
    if not lines:  # nothing to parse: packaging is not even imported
        return SdkVerdict("")
    try:
        ranges = _sdk_ranges(lines)
    except ValueError as exc:  # packaging's InvalidRequirement and InvalidSpecifier
        raise ValueError(f"{dist} {dist_version}: unreadable requirement: {exc}") from None
    declared = ",".join(str(r) for r in ranges)
    for spec in ranges:
        if spec.contains(sdk_version, prereleases=True):
            continue
        why = _why_excluded(spec, sdk_version)
        if why == "newer":
            fix = (
                f"pip install -U ortcore {SDK_DISTRIBUTION} (the plugin needs a newer SDK, "
                f"{SDK_DISTRIBUTION}{spec}: upgrade the host and its SDK)"
            )
        else:
            fix = (
                f"pip install -U {dist} ("
                + (
                    "the plugin is written for an older SDK"
                    if why == "older"
                    else f"the plugin excludes {SDK_DISTRIBUTION} {sdk_version}"
                )
                + f": upgrade it to a release written for {SDK_DISTRIBUTION} {sdk_version})"
            )
        reason = (
            f"incompatible with the installed provider SDK: {dist} {dist_version} requires "
            f"{SDK_DISTRIBUTION}{spec}, and {SDK_DISTRIBUTION} {sdk_version} is installed; "
            f"the plugin was not imported. Fix: {fix}"
        )
        return SdkVerdict(declared, reason)
    return SdkVerdict(declared)


def judge_entry_point(
    ep: importlib.metadata.EntryPoint,
    label: str,
    verdicts: MutableMapping[str, SdkVerdict],
    sdk_version: str,
) -> tuple[str, str]:
    """Judge the distribution of ``ep`` against the installed SDK, once.

    ``verdicts`` keeps the answer per distribution (the plugin manager's, read
    and written under its lock). A distribution that declares no range is
    logged once, at info level. Never raises for the plugin's sake: metadata
    that cannot be read makes the plugin incompatible, with the error.

    Returns:
        the distribution's version (``"?"`` when unknown) and why the plugin
        must not be imported (``""``: it may be).
    """
    version = "?"
    try:
        dist = ep.dist
        if dist is None:  # no metadata to read: nothing to check
            return version, ""
        name, version = dist.name, dist.version
        key = _normalize(name)
        verdict = verdicts.get(key)
        if verdict is None:
            verdict = judge_requirements(
                dist.requires, dist=name, dist_version=version, sdk_version=sdk_version
            )
            verdicts[key] = verdict
            if not verdict.declared:
                log.info(
                    "ortcore plugin %s: distribution %s %s declares no range of %s versions "
                    "(written before SDK 1.1?); loaded without a compatibility check",
                    label,
                    name,
                    version,
                    SDK_DISTRIBUTION,
                )
        return version, verdict.reason
    except (KeyboardInterrupt, GeneratorExit):
        raise
    except BaseException as exc:  # unreadable metadata: not known to be compatible
        return version, (
            f"its requirement on {SDK_DISTRIBUTION} could not be read ({exc!r}); "
            "the plugin was not imported"
        )
