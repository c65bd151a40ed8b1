"""The configuration file: waivers and per-test tolerances (TOML).

::

    [[waiver]]
    pattern = "^node/test_resize_.*antialias"   # re.search on the case id
    reason = "antialiasing not implemented yet (tracked in #42)"
    outcomes = ["mismatch"]                      # optional: only these outcomes

    [[tolerance]]
    pattern = "^light/test_densenet121$"
    rtol = 2e-3
    atol = 1e-5
    reason = "deep model, float32 accumulation"  # optional

A waived case that fails is reported ``waived`` (with the reason and its
original outcome); one that passes is an ``unexpected_pass``, so stale
waivers show up. ``unsupported`` cases are never waived.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomllib

from .outcomes import FAILURES, PASSED, UNEXPECTED_PASS, WAIVED, CaseResult
from .precision import ToleranceOverride

__all__ = ["Config", "ConfigError", "Waiver", "apply_waivers", "load_config"]


class ConfigError(ValueError):
    """The configuration file is malformed; the message names the file and entry."""


@dataclass(frozen=True)
class Waiver:
    """Cases whose id matches ``pattern`` are expected to fail, for ``reason``."""

    pattern: str
    reason: str
    outcomes: tuple[str, ...] = ()

    def matches(self, result: CaseResult) -> bool:
        """Whether this waiver covers ``result``."""
        if re.search(self.pattern, result.id) is None:
            return False
        return not self.outcomes or result.outcome in self.outcomes or result.outcome == PASSED


@dataclass(frozen=True)
class Config:
    """Waivers and tolerance overrides read from one file."""

    waivers: tuple[Waiver, ...] = ()
    tolerances: tuple[ToleranceOverride, ...] = ()
    path: str = ""
    warnings: list[str] = field(default_factory=list)


Keys = dict[str, type | tuple[type, ...]]


def _entry(path: Path, table: str, i: int, raw: object, keys: Keys) -> dict[str, Any]:
    where = f"{path}: [[{table}]] entry {i + 1}"
    if not isinstance(raw, dict):
        raise ConfigError(f"{where} is not a table")
    unknown = sorted(set(raw) - set(keys))
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {unknown}; allowed: {sorted(keys)}")
    for key, typ in keys.items():
        if key in raw and not isinstance(raw[key], typ):
            raise ConfigError(f"{where}: {key!r} has the wrong type ({type(raw[key]).__name__})")
    try:
        re.compile(str(raw.get("pattern", "")))
    except re.error as exc:
        raise ConfigError(f"{where}: bad pattern: {exc}") from exc
    if "pattern" not in raw:
        raise ConfigError(f"{where}: 'pattern' is required")
    return raw


def load_config(path: str | Path | None) -> Config:
    """Read the configuration file (``None``: empty configuration).

    Raises:
        ConfigError: unreadable TOML, unknown keys, a waiver without a reason,
            a bad regular expression or an unknown outcome.
    """
    if path is None:
        return Config()
    p = Path(path)
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{p}: cannot read the waivers file: {exc}") from exc
    unknown = sorted(set(data) - {"waiver", "tolerance"})
    if unknown:
        raise ConfigError(f"{p}: unknown table(s) {unknown}; expected [[waiver]], [[tolerance]]")
    waivers = []
    for i, raw in enumerate(data.get("waiver", [])):
        e = _entry(p, "waiver", i, raw, {"pattern": str, "reason": str, "outcomes": list})
        if not e.get("reason", "").strip():
            raise ConfigError(f"{p}: [[waiver]] entry {i + 1}: a waiver needs a 'reason'")
        bad = sorted(set(e.get("outcomes", [])) - FAILURES)
        if bad:
            raise ConfigError(
                f"{p}: [[waiver]] entry {i + 1}: outcomes {bad} cannot be waived; "
                f"choose among {sorted(FAILURES)}"
            )
        waivers.append(Waiver(e["pattern"], e["reason"], tuple(e.get("outcomes", ()))))
    tolerances = []
    for i, raw in enumerate(data.get("tolerance", [])):
        number = (int, float)
        keys: Keys = {"pattern": str, "rtol": number, "atol": number, "reason": str}
        e = _entry(p, "tolerance", i, raw, keys)
        rtol, atol = float(e.get("rtol", 0.0)), float(e.get("atol", 0.0))
        tolerances.append(ToleranceOverride(e["pattern"], rtol, atol, e.get("reason", "")))
    return Config(tuple(waivers), tuple(tolerances), str(p))


def apply_waivers(result: CaseResult, waivers: tuple[Waiver, ...]) -> CaseResult:
    """Turn a waived failure into ``waived`` and a waived pass into ``unexpected_pass``."""
    if result.outcome not in FAILURES and result.outcome != PASSED:
        return result
    for w in waivers:
        if w.matches(result):
            result.original_outcome = result.outcome
            result.waiver = w.reason
            result.outcome = UNEXPECTED_PASS if result.outcome == PASSED else WAIVED
            return result
    return result
