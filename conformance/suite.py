"""Select the cases, run them (in this process or in workers), build the report."""

from __future__ import annotations

import re
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from .cases import KINDS, MODEL_KINDS, Case, load_kind, set_depth
from .execute import run_case
from .outcomes import CRASH, TIMEOUT, CaseResult
from .progress import Progress
from .target import Target, load_plugins
from .waivers import Config, apply_waivers, load_config

__all__ = [
    "SUITES",
    "Settings",
    "case_of",
    "load_plugins",
    "make_target",
    "run_id",
    "run_suite",
    "select",
]

SUITES: dict[str, tuple[str, ...]] = {
    "contract": ("contract",),
    "operators": ("node", "generated", "explore"),
    "models": MODEL_KINDS,
}
"""Suite name -> case kinds."""


@dataclass
class Settings:
    """What to run, and how (the command line's options).

    Attributes:
        provider: provider name or alias.
        kinds: case kinds (``contract`` and :data:`conformance.cases.KINDS`).
        pattern: regular expression on case ids (``re.search``).
        jobs: worker processes (1: run in this process unless ``isolate``).
        isolate: run every case in a worker subprocess, with ``timeout``.
        timeout: seconds a case may take in a worker.
        config: path of the waivers/tolerances file.
        plugins: modules to register as plugins before resolving the provider.
        progress: ``False``: no progress on stderr; ``True``: the bar; ``None``:
            the bar on a terminal, plain lines elsewhere (:mod:`conformance.progress`).
        options: provider options (``--provider-option KEY=VALUE``).
        depth: how far ``explore`` goes (:data:`conformance.cases.DEPTHS`).
    """

    provider: str
    kinds: tuple[str, ...] = ("contract", *KINDS)
    pattern: str | None = None
    jobs: int = 1
    isolate: bool = False
    timeout: float = 120.0
    config: str | None = None
    plugins: list[str] = field(default_factory=list)
    progress: bool | None = None
    options: dict[str, str] = field(default_factory=dict)
    depth: str = "quick"


@cache
def _config(path: str | None) -> Config:
    return load_config(path)


def make_target(
    provider: str, config: str | None, options: Mapping[str, str] | None = None
) -> Target:
    """Resolve the provider; attach the configuration's tolerances and the options.

    Raises:
        ortcore.InvalidArgument: the provider is not installed or unavailable.
        ortcore.ProviderOptionError: the provider refuses one of ``options``.
    """
    return Target.resolve(provider, _config(config).tolerances, options)


@cache
def _by_id(kind: str) -> dict[str, Case]:
    return {c.id: c for c in load_kind(kind)}


def select(
    kinds: Sequence[str],
    pattern: str | None = None,
    on_kind: Callable[[str], Any] | None = None,
    *,
    cached: bool = False,
) -> list[str]:
    """Ids of the contract checks and cases of ``kinds`` matching ``pattern``.

    Only names are needed: no model is built and no oracle run (onnx's node
    tests come from a cached index, :mod:`conformance.nodeindex`).
    ``on_kind(kind)`` is called before each kind is loaded (progress). With
    ``cached``, the ids of the kinds :mod:`conformance.idcache` keeps come
    from its cache (``--list``; a run needs the cases themselves).
    """
    from .contract import CHECKS
    from .idcache import kind_ids

    rx = re.compile(pattern) if pattern else None
    ids: list[str] = []
    for kind in kinds:
        if on_kind is not None:
            on_kind(kind)
        if kind == "contract":
            names = [f"contract/{n}" for n in CHECKS]
        else:
            names = kind_ids(kind) if cached else list(_by_id(kind))
        ids.extend(i for i in names if rx is None or rx.search(i))
    return ids


def case_of(case_id: str) -> Case | None:
    """The case of an id (``None`` for a contract check or an unknown id)."""
    kind = case_id.partition("/")[0]
    if kind == "contract" or kind not in KINDS:
        return None
    return _by_id(kind).get(case_id)


def run_id(case_id: str, target: Target) -> CaseResult:
    """Run one contract check or case by id.

    A :class:`ortcore.ProviderContractWarning` (a rule of the contract the
    runtime made harmless, e.g. one array for two outputs, which it copied)
    is an error here: the run it interrupts fails, naming the rule.
    """
    from ortcore.errors import ProviderContractWarning

    from .contract import run_check

    kind, _, name = case_id.partition("/")
    with warnings.catch_warnings():
        warnings.simplefilter("error", ProviderContractWarning)
        if kind == "contract":
            return run_check(name, target)
        return run_case(_by_id(kind)[case_id], target)


@dataclass
class RunOutput:
    """Results in selection order, with the run's facts."""

    target: Target
    results: list[CaseResult]
    seconds: float
    settings: Settings
    config: Config


def run_suite(
    settings: Settings,
    on_result: Callable[[CaseResult], Any] | None = None,
    progress: Progress | None = None,
) -> RunOutput:
    """Run the selected cases against ``settings.provider``.

    ``progress`` (default: one made from ``settings.progress``) is told each
    phase and result, and closed at the end.

    Raises:
        ortcore.InvalidArgument: the provider is not installed or unavailable.
        ortcore.ProviderOptionError: the provider refuses one of ``settings.options``.
        conformance.waivers.ConfigError: the configuration file is malformed.
    """
    start = time.perf_counter()
    bar = progress or Progress(enabled=settings.progress)
    try:
        set_depth(settings.depth)
        _by_id.cache_clear()
        bar.status(f"loading provider {settings.provider}...")
        load_plugins(settings.plugins)
        config = _config(settings.config)
        target = make_target(settings.provider, settings.config, settings.options)
        ids = select(
            settings.kinds, settings.pattern, lambda k: bar.status(f"loading cases ({k})...")
        )

        def done(r: CaseResult) -> None:
            if r.outcome in (CRASH, TIMEOUT) and not r.repro:
                _fill_from_case(r)  # the worker died before it could say
            apply_waivers(r, config.waivers)
            bar.update(r.id, r.outcome, r.failed)
            if on_result is not None:
                on_result(r)

        if settings.isolate or settings.jobs > 1:
            from .pool import run_in_workers

            argv = ["--provider", target.provider, "--kinds", ",".join(settings.kinds)]
            argv += ["--depth", settings.depth]
            if settings.config:
                argv += ["--config", settings.config]
            for p in settings.plugins:
                argv += ["--plugin", p]
            for key, value in target.options:
                argv += ["--provider-option", f"{key}={value}"]
            timeout = settings.timeout if settings.isolate else None
            workers = max(1, min(settings.jobs, len(ids)))
            bar.start(len(ids))
            bar.status(f"starting {workers} worker{'s' if workers > 1 else ''}...")
            results = run_in_workers(ids, argv, settings.jobs, timeout, done)
        else:
            bar.start(len(ids))
            results = []
            for case_id in ids:
                r = run_id(case_id, target)
                done(r)
                results.append(r)
    finally:
        bar.close()
    return RunOutput(target, results, time.perf_counter() - start, settings, config)


def _fill_from_case(r: CaseResult) -> None:
    """A case whose worker died said nothing of itself: read its op, dtype, ops
    and reproducer off the case, built here."""
    from .execute import describe_model
    from .repro import reproducer

    try:
        case = case_of(r.id)
        if case is None:
            return
        model, sets = case.materialize()
        r.op, r.dtype, r.ops = describe_model(model)
        r.dimension = r.dimension or case.dimension
        r.repro = reproducer(case, model, sets)
    except Exception as exc:
        r.repro = f"(no reproducer: {type(exc).__name__}: {exc})"
