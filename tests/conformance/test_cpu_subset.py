"""A fast subset of the CPU provider's conformance run (the full one is a tox env)."""

from __future__ import annotations

from conformance.suite import Settings, run_suite
from conformance.summary import build_report

SUBSET = (
    r"^contract/(loads|capability|claims|claimed_runs|unknown_option|output_types"
    r"|state|intermediates|input_layouts|resources)$"
    r"|^node/test_(add|mul|relu|sigmoid|matmul|softmax|conv|gemm|reshape|concat)"
    r"|^generated/(bcast_|negaxis_Reduce(Sum|Max)|empty_|dtype_(Add|Exp)_"
    r"|special_(Add|Relu|Div)_float|wide_(Sigmoid|Exp)_float|limits_Add_int(8|64)"
    r"|layout_(Abs|MatMul)_|square_Gemm)"
    r"|^simple/|^light/test_(squeezenet|shufflenet)$"
)


def test_cpu_subset(cpu: str) -> None:
    out = run_suite(Settings(cpu, pattern=SUBSET, progress=False))
    report = build_report(out)
    failed = {r.id: r.detail for r in out.results if r.failed}
    assert report["summary"]["contract"]["failed"] == []
    light = {r.id: r.outcome for r in out.results if r.id.startswith("light/")}
    assert light == {"light/test_squeezenet": "passed", "light/test_shufflenet": "passed"}
    assert report["summary"]["total"] > 100
    assert len(failed) <= 0.05 * report["summary"]["total"], failed


def test_model_case_the_provider_declines_says_why() -> None:
    """A model case the provider takes nothing of reports its decline reason."""
    from conformance.execute import Target
    from conformance.suite import run_id

    # The Mini test provider's Add starts at opset 7; this model is opset 6.
    result = run_id("pytorch-operator/test_operator_add_broadcast", Target.resolve("mini"))
    assert result.outcome == "unsupported"
    assert "took none of the" in result.detail
    assert "at opset 6" in result.detail, result.detail


def test_cpu_passes_the_quick_exploration(cpu: str) -> None:
    """No false alarm and no CPU bug at quick depth: every explored case the
    CPU provider takes passes (with its ownership and overridable checks)."""
    out = run_suite(Settings(cpu, ("explore",), progress=False, depth="quick"))
    failed = {r.id: (r.outcome, r.detail[:200]) for r in out.results if r.failed}
    assert not failed, failed
    passed = [r for r in out.results if r.outcome == "passed"]
    assert len(passed) > 2000
    assert {r.dimension for r in passed} >= {"attribute", "rank", "dtype", "dynamic", "range"}
