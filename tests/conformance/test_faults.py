"""Each deliberately faulty provider is caught, by a contract check and by the cases."""

from __future__ import annotations

import re
from typing import Any

import pytest

from conformance.contract import CHECKS

OPS = ("node", "generated")


def test_healthy_provider_passes_every_contract_check(suite: Any) -> None:
    results = suite("faulty-good", ("contract",))
    assert {r.outcome for r in results.values()} == {"passed"}, results
    assert len(results) == len(CHECKS)


def test_healthy_provider_passes_its_ops_and_declines_the_rest(suite: Any) -> None:
    results = suite("faulty-good", OPS, r"^(node/test_(add|relu|sigmoid)|generated/dtype_Add_.*)$")
    assert results["node/test_add"].outcome == "passed"
    assert results["node/test_relu"].outcome == "passed"
    assert results["generated/dtype_Add_float"].outcome == "passed"
    assert results["generated/dtype_Add_float"].error == {"max_abs": 0, "max_rel": 0, "max_ulp": 0}
    # never a pass on the CPU fallback: the reason the provider gave is kept
    sigmoid = results["node/test_sigmoid"]
    assert sigmoid.outcome == "unsupported"
    assert "Sigmoid" in sigmoid.detail and "FaultyGoodExecutionProvider" in sigmoid.detail
    assert results["generated/dtype_Add_int32"].outcome == "unsupported"


@pytest.mark.parametrize(
    ("provider", "check", "outcome", "case", "case_outcome"),
    [
        ("faulty-wrong", "claimed_runs", "mismatch", "node/test_add", "mismatch"),
        ("faulty-raise", "claimed_runs", "run_error", "node/test_relu", "run_error"),
        ("faulty-inplace", "inputs_untouched", "run_error", "node/test_relu", "run_error"),
        ("faulty-dtype", "output_types", "wrong_type", "node/test_add", "wrong_type"),
        ("faulty-shape", "output_types", "wrong_type", "node/test_add", "wrong_type"),
    ],
)
def test_fault_is_caught(
    suite: Any, provider: str, check: str, outcome: str, case: str, case_outcome: str
) -> None:
    results = suite(provider, ("contract", "node"), rf"^(contract/{check}|{case})$")
    assert results[f"contract/{check}"].outcome == outcome, results[f"contract/{check}"]
    assert results[case].outcome == case_outcome, results[case]


def test_writing_into_inputs_is_named(suite: Any) -> None:
    r = suite("faulty-inplace", ("node",), r"^node/test_relu$")["node/test_relu"]
    assert "wrote into input" in r.detail


def test_wrong_numbers_are_measured(suite: Any) -> None:
    r = suite("faulty-wrong", ("generated",), r"^generated/dtype_Add_float$")
    err = r["generated/dtype_Add_float"].error
    assert err is not None and err["max_abs"] == pytest.approx(0.5, abs=1e-3)
    assert err["max_ulp"] > 1000


def test_race_between_threads_is_caught(suite: Any) -> None:
    results = suite("faulty-race", ("contract",), r"contract/(threads|repeatable)")
    assert results["contract/threads"].outcome == "mismatch"
    assert "Mul" in results["contract/threads"].detail
    assert results["contract/repeatable"].outcome == "passed"  # only concurrency breaks it


def test_memory_growth_is_caught(suite: Any) -> None:
    results = suite("faulty-leak", ("contract",), r"contract/memory")
    assert results["contract/memory"].outcome == "run_error"
    assert "memory grew" in results["contract/memory"].detail


def test_unknown_options_must_be_refused(suite: Any) -> None:
    results = suite("faulty-options", ("contract",), r"contract/unknown_option")
    assert results["contract/unknown_option"].outcome == "load_error"


def test_model_cases_mix_in_cpu_and_count_nodes(suite: Any, cpu: str) -> None:
    results = suite("faulty-good", ("simple", "pytorch-operator"))
    counted = [r for r in results.values() if r.nodes]
    assert counted and all(r.nodes and r.nodes["total"] > 0 for r in counted)
    took = [r for r in counted if r.nodes and 0 < r.nodes["provider"]]
    assert took and any(r.outcome == "passed" for r in took)
    none = [r for r in counted if r.nodes and r.nodes["provider"] == 0]
    assert none and all(r.outcome == "unsupported" for r in none)


@pytest.mark.parametrize(
    ("provider", "outcome"), [("faulty-crash", "crash"), ("faulty-hang", "timeout")]
)
def test_isolate_turns_crash_and_hang_into_one_outcome(
    faulty_plugin: str, provider: str, outcome: str
) -> None:
    from .conftest import by_id, run

    out = run(
        provider,
        ("generated",),
        r"dtype_(Relu|Add)_float$",
        isolate=True,
        timeout=4,
        plugins=[faulty_plugin],
        jobs=2,
    )
    results = by_id(out)
    assert results["generated/dtype_Relu_float"].outcome == outcome
    assert results["generated/dtype_Add_float"].outcome == "passed"  # the run went on


# -- the compile path: fusing providers ------------------------------------

FUSED_PROBES = "elementwise_chain, four_outputs, conv_relu_pool, matmul_add_gelu, attention"


def test_healthy_fusing_provider_passes_every_contract_check(suite: Any) -> None:
    """A provider that only claims groups is exercised (not ``unsupported``) and passes."""
    # contract/memory and shape_memory are left out: hundreds of runs of four groups on
    # onnx.reference take long (shape_memory: 35 s),
    # and faulty-good shows the check itself.
    results = suite("faulty-fusing", ("contract",), r"contract/(?!memory|shape_memory)")
    assert {r.outcome for r in results.values()} == {"passed"}, results
    assert results["contract/claimed_runs"].detail == f"checked on {FUSED_PROBES}"
    assert "claims nodes of 5 of the 22 probes" in results["contract/claims"].detail


def test_kernel_provider_is_checked_on_multi_node_probes_too(suite: Any, cpu: str) -> None:
    """A provider that takes part of a multi-node probe runs it with CPU after it."""
    r = suite("faulty-good", ("contract",), r"contract/claimed_runs")["contract/claimed_runs"]
    assert r.outcome == "passed"
    assert "elementwise_chain (5 of 6 nodes)" in r.detail


def test_provider_claiming_nothing_fails_contract_claims(
    suite: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from conformance import contract

    monkeypatch.setattr(contract, "CASE_KINDS", ("simple", "pytorch-operator"))
    results = suite("faulty-fused-nothing", ("contract",))
    claims = results["contract/claims"]
    assert claims.outcome == "load_error"
    assert claims.detail.startswith("the provider claims nothing: get_capability returned no")
    assert "22 probes" in claims.detail
    assert re.search(r"nor of the \d+ operator and model cases \(simple, pyt", claims.detail)
    # the checks that need a probe cannot run: unsupported, and the run fails anyway
    assert results["contract/claimed_runs"].outcome == "unsupported"
    assert results["contract/loads"].outcome == "passed"


def test_provider_claiming_only_cases_passes_contract_claims(suite: Any) -> None:
    """No probe uses Sign, but simple/test_sign_model does: the provider claims something."""
    results = suite("faulty-sign-only", ("contract",), r"contract/(claims|claimed_runs)$")
    assert results["contract/claims"].outcome == "passed"
    assert "simple/test_sign_model" in results["contract/claims"].detail
    assert results["contract/claimed_runs"].outcome == "unsupported"


def test_fused_outputs_in_the_wrong_order_are_caught(suite: Any) -> None:
    results = suite("faulty-fused-order", ("contract",), r"contract/(claimed_runs|output_types)$")
    r = results["contract/claimed_runs"]
    assert r.outcome == "mismatch", r
    assert r.detail.startswith("elementwise_chain: output 0:"), r.detail
    # same dtype and shape: only the numbers tell
    assert results["contract/output_types"].outcome == "passed"


def test_wrong_conv_in_fused_groups_is_caught_by_probe_and_model(suite: Any, cpu: str) -> None:
    """A flipped kernel: the Conv→Relu→MaxPool probe and a random-weight light model
    catch it (with onnx's constant weights a flipped kernel is the same kernel)."""
    pattern = r"^(contract/claimed_runs|light/test_squeezenet)$"
    results = suite("faulty-fused-conv", ("contract", "light"), pattern)
    probe = results["contract/claimed_runs"]
    assert probe.outcome == "mismatch" and probe.detail.startswith("conv_relu_pool:"), probe
    model = results["light/test_squeezenet"]
    assert model.outcome == "mismatch", model
    assert model.nodes and model.nodes["provider"] > 0


def test_healthy_fusing_provider_passes_a_random_weight_model(suite: Any, cpu: str) -> None:
    r = suite("faulty-fusing", ("light",), r"^light/test_squeezenet$")["light/test_squeezenet"]
    assert r.outcome == "passed", r
    assert r.nodes and r.nodes["provider"] > 0
