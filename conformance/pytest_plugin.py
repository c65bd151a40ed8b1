"""The suite as a pytest plugin: ``pytest --pyargs conformance --ortcore-provider NAME``.

Registered through the ``pytest11`` entry point (or ``-p conformance.pytest_plugin``).
Every contract check and case becomes one test of ``conformance/test_conformance.py``:
unsupported cases are skipped with the provider's reason, waived ones are
xfailed with the waiver's reason, and ``--ortcore-report DIR`` writes the same
reports as ``ortcore conformance``. Importing this module is cheap: nothing
happens unless ``--ortcore-provider`` is given.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

__all__ = ["ConformanceSession"]


def pytest_addoption(parser: pytest.Parser) -> None:
    """The ``--ortcore-*`` options."""
    group = parser.getgroup("ortcore-conformance", "ortcore conformance suite")
    group.addoption("--ortcore-provider", help="provider under test (name or alias)")
    group.addoption(
        "--ortcore-provider-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an option of the provider under test (repeatable)",
    )
    group.addoption("--ortcore-waivers", metavar="FILE", help="TOML waivers and tolerances")
    group.addoption("--ortcore-report", metavar="DIR", help="write the reports into DIR")
    group.addoption(
        "--ortcore-suites",
        default="contract,operators,models",
        help="comma-separated: contract, operators, models",
    )
    group.addoption(
        "--ortcore-depth",
        default="quick",
        choices=("quick", "full"),
        help="how far the schema-driven exploration goes (default quick)",
    )
    group.addoption(
        "--ortcore-plugin",
        action="append",
        default=[],
        metavar="MODULE",
        help="register MODULE as an ortcore plugin first",
    )


class ConformanceSession:
    """The provider under test, its settings, and the results so far."""

    def __init__(self, config: pytest.Config) -> None:
        from ortcore.cli import provider_option

        from .cases import set_depth
        from .suite import SUITES, Settings, load_plugins, make_target

        suites = [s.strip() for s in config.getoption("ortcore_suites").split(",") if s.strip()]
        self.settings = Settings(
            provider=config.getoption("ortcore_provider"),
            kinds=tuple(k for s in suites for k in SUITES[s]),
            config=config.getoption("ortcore_waivers"),
            plugins=list(config.getoption("ortcore_plugin")),
            progress=False,
            options=dict(provider_option(o) for o in config.getoption("ortcore_provider_option")),
            depth=config.getoption("ortcore_depth"),
        )
        set_depth(self.settings.depth)
        load_plugins(self.settings.plugins)
        self.target = make_target(
            self.settings.provider, self.settings.config, self.settings.options
        )
        self.results: list[Any] = []
        self.start = time.perf_counter()

    def ids(self) -> list[str]:
        """Every case id selected."""
        from .suite import select

        return select(self.settings.kinds)

    def check(self, case_id: str) -> None:
        """Run one case and turn its outcome into pytest's."""
        from .outcomes import PASSED, SKIPPED, UNSUPPORTED, WAIVED
        from .suite import _config, run_id
        from .waivers import apply_waivers

        r = apply_waivers(run_id(case_id, self.target), _config(self.settings.config).waivers)
        self.results.append(r)
        if r.outcome in (UNSUPPORTED, SKIPPED):
            pytest.skip(f"{r.outcome}: {r.detail}")
        if r.outcome == WAIVED:
            pytest.xfail(f"waived ({r.original_outcome}): {r.waiver}")
        if r.outcome != PASSED:
            pytest.fail(f"{r.outcome}: {r.detail}", pytrace=False)


_KEY = pytest.StashKey[ConformanceSession]()


def _session(config: pytest.Config) -> ConformanceSession | None:
    if not config.getoption("ortcore_provider", default=None):
        return None
    if _KEY not in config.stash:
        config.stash[_KEY] = ConformanceSession(config)
    return config.stash[_KEY]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """One test per case id for tests asking for ``ortcore_case``."""
    if "ortcore_case" in metafunc.fixturenames:
        s = _session(metafunc.config)
        ids = s.ids() if s else []
        metafunc.parametrize("ortcore_case", ids, ids=ids)


@pytest.fixture(scope="session")
def ortcore_conformance(request: pytest.FixtureRequest) -> ConformanceSession:
    """The conformance session (skips without ``--ortcore-provider``)."""
    s = _session(request.config)
    if s is None:
        pytest.skip("give --ortcore-provider NAME to run the conformance suite")
    return s


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Write the reports when ``--ortcore-report`` was given."""
    directory = session.config.getoption("ortcore_report", default=None)
    s = session.config.stash.get(_KEY, None)
    if not directory or s is None or not s.results:
        return
    from .report import write_reports
    from .suite import RunOutput, _config
    from .summary import build_report

    out = RunOutput(
        s.target, s.results, time.perf_counter() - s.start, s.settings, _config(s.settings.config)
    )
    write_reports(build_report(out), directory)
