"""The classes of bugs real provider authors make, each caught by the suite.

Every provider of :mod:`tests.conformance.faulty` named here carries one such
bug; the healthy baselines (``faulty-good``, ``faulty-tidy``, ``faulty-fusing``)
pass the same checks and cases.
"""

from __future__ import annotations

from typing import Any

import pytest

from conformance.contract import CHECKS

# (provider, case that catches it, its outcome, words its detail must hold)
CAUGHT = [
    # state across runs
    ("faulty-reuse", "contract/state", "mismatch", "changed when the session ran again"),
    ("faulty-reuse", "generated/dtype_Relu_float", "mismatch", "changed when the session ran"),
    ("faulty-prepack", "contract/state", "mismatch", "run 2, with other inputs"),
    ("faulty-shared-pack", "contract/constants", "mismatch", "weights differ only in value"),
    # inputs the old generator never made
    ("faulty-bcast", "generated/bcast_Add_5", "wrong_type", "shape"),
    ("faulty-sigmoid-clamp", "generated/wide_Sigmoid_float", "mismatch", "elements differ"),
    ("faulty-relu-nan", "generated/special_Relu_float", "mismatch", "expected np.float32(nan)"),
    ("faulty-div-zero", "generated/special_Div_float", "mismatch", "elements differ"),
    ("faulty-saturate", "generated/limits_Add_int8", "mismatch", "rtol=0, atol=0"),
    ("faulty-int32", "generated/limits_Add_int64", "mismatch", "rtol=0, atol=0"),
    ("faulty-strides", "contract/input_layouts", "mismatch", "fortran views"),
    ("faulty-strides", "generated/layout_Abs_fortran", "mismatch", "elements differ"),
    ("faulty-base", "generated/layout_Neg_offset", "mismatch", "elements differ"),
    ("faulty-gemm-guess", "generated/square_Gemm_tA0_tB1", "mismatch", "elements differ"),
    # precision
    ("faulty-f64", "generated/dtype_Mul_double", "mismatch", "rtol=1e-09"),
    # graph-level faults
    ("faulty-overwrite", "contract/intermediates", "mismatch", "made by another node"),
    ("faulty-fused-by-name", "contract/claimed_runs", "mismatch", "four_outputs: output 0"),
    # a race on one scratch buffer, without any sleep to widen it
    ("faulty-race-scratch", "contract/threads", "mismatch", "oracle's answer"),
    # resources
    ("faulty-threads", "contract/resources", "run_error", "more threads are running"),
    ("faulty-files", "contract/resources", "run_error", "more files are open"),
    # a session that fails to load is a failure, not "not claimed"
    ("faulty-build", "contract/claimed_runs", "load_error", "this build has no kernel"),
]


@pytest.mark.parametrize(("provider", "case", "outcome", "words"), CAUGHT)
def test_fault_class_is_caught(
    suite: Any, cpu: str, provider: str, case: str, outcome: str, words: str
) -> None:
    kind = case.split("/")[0]
    result = suite(provider, (kind,), f"^{case}$")[case]
    assert result.outcome == outcome, result
    assert words in result.detail, result.detail


def test_healthy_baselines_pass_every_new_check(suite: Any, cpu: str) -> None:
    new = r"contract/(state|constants|intermediates|input_layouts|resources|threads|repeatable)$"
    for provider in ("faulty-good", "faulty-tidy"):
        results = suite(provider, ("contract",), new)
        assert {r.outcome for r in results.values()} == {"passed"}, (provider, results)
    fused = suite("faulty-fusing", ("contract",), new)
    assert {r.outcome for r in fused.values()} == {"passed"}, fused
    assert "four_outputs" in fused["contract/state"].detail


def test_healthy_baseline_passes_every_generated_case_it_runs(suite: Any) -> None:
    """No false alarm: every generated family (special values, limits, layouts,
    broadcasts, squares) either passes or is declined on the numpy baseline."""
    results = suite("faulty-good", ("generated",))
    outcomes = {r.outcome for r in results.values()}
    assert outcomes == {"passed", "unsupported"}, [
        (r.id, r.detail) for r in results.values() if r.outcome not in ("passed", "unsupported")
    ]
    ran = {i for i, r in results.items() if r.outcome == "passed"}
    for family in ("special_Add", "wide_Relu", "layout_Abs", "bcast_Add_5", "dtype_Mul_double"):
        assert any(family in i for i in ran), family


def test_the_race_is_caught_against_the_oracle(suite: Any) -> None:
    """The threads check compares with the oracle's values, not the session's own
    earlier outputs, so a buffer shared between runs is never "expected"."""
    r = suite("faulty-reuse", ("contract",), r"contract/threads$")["contract/threads"]
    assert r.outcome == "mismatch", r
    assert "oracle" in r.detail


def test_every_contract_check_is_listed() -> None:
    for name in ("state", "constants", "intermediates", "input_layouts", "resources"):
        assert name in CHECKS
