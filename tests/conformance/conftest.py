"""Fixtures of the suite's own tests: the faulty providers, a small runner."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conformance.outcomes import CaseResult
from conformance.suite import Settings, run_suite
from ortcore.plugins import default_manager

from . import faulty

PLUGIN = "tests.conformance.faulty"


@pytest.fixture(scope="session", autouse=True)
def light_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The random-weight light models' oracle cache, in a temporary folder."""
    from conformance.light import CACHE_ENV

    path = tmp_path_factory.mktemp("conformance-cache")
    before = os.environ.get(CACHE_ENV)
    os.environ[CACHE_ENV] = str(path)  # worker processes inherit it
    yield path
    if before is None:
        os.environ.pop(CACHE_ENV, None)
    else:
        os.environ[CACHE_ENV] = before


@pytest.fixture(scope="module")
def faulty_plugin() -> Iterator[str]:
    """Register the faulty providers for one test module; their module's name."""
    default_manager().register_plugin(faulty, name=PLUGIN)
    yield PLUGIN
    default_manager().unregister_plugin(PLUGIN)


def run(provider: str, kinds: tuple[str, ...], pattern: str | None = None, **kw: Any) -> Any:
    """Run the suite in this process; results by case id."""
    out = run_suite(Settings(provider, kinds, pattern, progress=False, **kw))
    return out


def by_id(out: Any) -> dict[str, CaseResult]:
    """Results of a run, by case id."""
    return {r.id: r for r in out.results}


@pytest.fixture
def suite(faulty_plugin: str) -> Any:
    """``suite(provider, kinds, pattern, **settings)`` -> results by case id."""

    def go(provider: str, kinds: tuple[str, ...], pattern: str | None = None, **kw: Any) -> Any:
        return by_id(run(provider, kinds, pattern, **kw))

    return go
