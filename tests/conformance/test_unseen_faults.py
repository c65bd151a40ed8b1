"""Faulty providers of classes the suite was never told about, each caught.

Every provider of :mod:`tests.conformance.faulty_unseen` carries one realistic
bug (its docstring says which); the suite, at quick depth, run on the cases
of the ops the bug lives in (and the contract checks, where the bug is one of
ownership, memory or initializers), must fail some case. The healthy kernel
and compile-path counterparts, with the same ops, must fail none.

Before the schema-driven exploration (kind ``explore``) and the ownership,
overridable and shape-memory checks, none of these bugs was caught (each
passed every node, generated and contract case); :data:`CAUGHT` names the
case that catches each now.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from ortcore.plugins import default_manager

from . import faulty_unseen
from .unseen_runs import PLUGIN, failures, op_pattern, run

OPERATORS = ("node", "generated", "explore")

CONTRACT_BUGS = {
    "unseen-transpose-plan-cache",
    "unseen-constant-kept",
    "unseen-matmul-packed-init",
    "unseen-fused-baked-init",
    "unseen-fused-identity-alias",
}
"""Providers whose bug a contract check is for (memory over shapes, ownership,
overridable initializers): their runs include the contract checks."""

CHEAP_CONTRACT = r"^contract/(?!threads$|resources$|close$|repeatable$|input_layouts$)"
"""The contract checks these runs take: all but the slow ones no bug here is
about (threads, resources, close, repeatable, input layouts)."""

CAUGHT: dict[str, str] = {
    "unseen-softmax-rank2": "explore/Softmax/axis/r2_axis=-2",
    "unseen-transpose-rank5": "explore/Transpose/rank/r5",
    "unseen-scalar-binary": "explore/Add/rank/r0",
    "unseen-gather-scalar-index": "explore/Gather/control/indices_r0",
    "unseen-argmax-keepdims": "explore/ArgMax/attribute/keepdims=absent",
    "unseen-split-uneven": "explore/Split/size/x0_d1=7,num_outputs=3",
    "unseen-softmax-opset11": "explore/Softmax/opset/v11",
    "unseen-gemm-bias-column": "explore/Gemm/rank/bcast_x2=[3,1]",
    "unseen-layernorm-no-bias": "explore/LayerNormalization/inputs/no_B",
    "unseen-reduce-noop": "explore/ReduceSum/inputs/no_axes,noop_with_empty_axes=1",
    "unseen-matmul-f16-acc": "explore/MatMul/accumulate/16x1024x8_float16",
    "unseen-unsigned-div": "explore/Div/range/T=uint64",
    "unseen-bf16-via-f16": "explore/Add/range/T=bfloat16",
    "unseen-argmin-negate": "explore/ArgMin/range/T=uint64",
    "unseen-flatten-empty": "explore/Flatten/empty/x0_d0=0",
    "unseen-softmax-static-plan": "explore/Softmax/dynamic/softmax_example_batch",
    "unseen-transpose-plan-cache": "contract/shape_memory",
    "unseen-constant-kept": "explore/ConstantOfShape/attribute/value=absent",
    "unseen-matmul-packed-init": "contract/overridable",
    "unseen-attr-cache": "explore/LeakyRelu/pair/alpha=0.2",
    "unseen-fused-baked-init": "contract/overridable",
    "unseen-fused-first-shapes": "explore/MatMul/dynamic/matmul_2d_batch",
    "unseen-fused-identity-alias": "contract/ownership",
}
"""Provider -> a case that catches it at quick depth (each of a class the
suite did not catch before issue 52)."""


@pytest.fixture(scope="module")
def unseen() -> Iterator[str]:
    """Register the providers of :mod:`faulty_unseen` for this module."""
    default_manager().register_plugin(faulty_unseen, name=PLUGIN)
    yield PLUGIN
    default_manager().unregister_plugin(PLUGIN)


def _selection(cls: Any) -> tuple[tuple[str, ...], str | None]:
    """The kinds and the case pattern a provider's bug is looked for in."""
    alias = cls.aliases[0]
    ops = op_pattern(cls.ops, contract=False)
    if alias in CONTRACT_BUGS:
        pattern = CHEAP_CONTRACT if ops is None else f"{CHEAP_CONTRACT}|{ops}"
        return ("contract", *OPERATORS), pattern
    return OPERATORS, ops


BY_ALIAS: dict[str, Any] = {cls.aliases[0]: cls for cls in faulty_unseen.PROVIDERS}
FAULTY: list[Any] = list(faulty_unseen.FAULTY)


@pytest.mark.parametrize("provider", [cls.aliases[0] for cls in FAULTY])
def test_unseen_fault_is_caught(unseen: str, provider: str) -> None:
    cls = BY_ALIAS[provider]
    kinds, pattern = _selection(cls)
    results = run(provider, kinds, pattern)
    failed = failures(results)
    assert failed, f"{provider} ({cls.bug}) passed all {len(results)} cases it was given"
    assert CAUGHT[provider] in failed, sorted(failed)


def test_every_fault_names_its_catching_case() -> None:
    assert set(CAUGHT) == {cls.aliases[0] for cls in FAULTY}


@pytest.mark.parametrize("provider", ["unseen-healthy", "unseen-fused"])
def test_healthy_counterpart_fails_nothing(unseen: str, provider: str) -> None:
    """No false alarm: the same ops without a bug pass every case of every
    op a faulty provider is tested on, and the contract checks."""
    ops = sorted({op for cls in FAULTY for op in cls.ops})
    pattern = f"{CHEAP_CONTRACT}|{op_pattern(ops, contract=False)}"
    results = run(provider, ("contract", *OPERATORS), pattern)
    failed = failures(results)
    assert not failed, {i: (r.outcome, r.detail) for i, r in failed.items()}
    ran = {i for i, r in results.items() if r.outcome == "passed"}
    for op in ops:  # each op of the bugs is exercised, not declined
        assert any(re.search(op_pattern([op], contract=False) or "", i) for i in ran), op


def test_every_fault_is_documented_and_distinct() -> None:
    """Each faulty provider says its bug, names the ops it lives in (or runs
    every op), and is a different class from the others."""
    faulty = FAULTY
    assert len(faulty) >= 18
    for cls in faulty:
        doc = cls.__doc__ or ""
        assert doc.startswith("Bug"), cls
        assert cls.bug, cls
    assert len({cls.bug for cls in faulty}) == len(faulty)
    kernel_ops = set(faulty_unseen.KERNELS)
    for cls in faulty:
        assert set(cls.ops) <= kernel_ops, cls


# -- onnxruntime as a provider: the oracle's sanity check ------------------------------

ORT_DIFFERS = {
    r"^node/test_(dft|stft)": "float32 FFT: |error| ~1e-4 where onnx stored 0.0 (atol 1e-6 is "
    "absolute; relative to the output's magnitude it is float32 rounding)",
    r"^node/test_training_dropout": "random masks: onnx's outputs come from numpy's generator",
    r"^node/test_maxunpool_export_with_output_shape$": "onnxruntime places the values elsewhere",
    r"^node/test_resize_downsample_scales_(linear|cubic)_align_corners$": "onnxruntime's "
    "align_corners downsampling differs from the standard's formula",
    r"^node/test_attention_4d_(diff_heads_mask4d_padded_kv|with_past_and_present_qk_matmul_bias_"
    r"[34]d_mask_causal)$": "onnxruntime's Attention-23 with these masks",
    r"^node/test_convinteger_with_padding$": "onnxruntime fails ConvInteger with padding",
    r"^node/test_reduce_max_empty_set_bool$": "onnxruntime fails ReduceMax of an empty bool set",
    r"^explore/MeanVarianceNormalization/axis/": "over a size-1 axis the variance is 0 and "
    "the function body divides 0 by sqrt(0) + epsilon: 0; onnxruntime's kernel gives NaN",
    r"^explore/QLinearMatMul/": "onnxruntime rounds the requantized product in float32 "
    "(one off where the exact value is within float32 error of a half)",
    r"^explore/TfIdfVectorizer/dtype/T=string": "onnxruntime misses one string n-gram count",
    r"^explore/LRN/rank/r[35]": "onnxruntime's LRN runs only 4-D inputs (the standard allows "
    "any rank from 3)",
    r"^explore/(LinearAttention/empty|STFT/inputs/no_frame_length)": "onnxruntime fails at run",
    r"^explore/(GRU|LSTM)/dtype/T=double|^explore/ScatterND/dtype/T=float16": "onnxruntime "
    "has no kernel for the type (it claims it at load and fails at run)",
    r"^explore/ConvInteger/": "onnxruntime's ConvInteger takes per-tensor zero points only "
    "(the seed's w_zero_point is per output channel)",
    r"^explore/DFT/dtype/T1=double": "onnxruntime's float64 DFT is float32-accurate",
    r"^explore/MaxUnpool/": "onnxruntime places the values elsewhere (as in "
    "test_maxunpool_export_with_output_shape)",
}
"""Cases onnxruntime itself fails, with why (onnxruntime 1.32, onnx 1.23)."""


@pytest.fixture(scope="module")
def ort_oracle() -> Iterator[str]:
    """Register :mod:`tests.conformance.ort_provider`."""
    pytest.importorskip("onnxruntime")
    from . import ort_provider

    name = "tests.conformance.ort_provider"
    default_manager().register_plugin(ort_provider, name=name)
    yield name
    default_manager().unregister_plugin(name)


def test_onnxruntime_agrees_with_the_oracle(ort_oracle: str) -> None:
    """onnxruntime fails only the documented cases: where it is itself wrong or
    lacks a kernel, or where onnx stored an imprecise expected output."""
    from conformance.suite import Settings, run_suite

    out = run_suite(Settings("ort-oracle", ("node", "generated", "explore"), progress=False))
    results = {r.id: r for r in out.results}
    failed = failures(results)
    unexplained = [i for i in failed if not any(re.search(p, i) for p in ORT_DIFFERS)]
    assert not unexplained, {i: failed[i].detail[:200] for i in unexplained}
    computed = [i for i in results if not i.startswith("node/")]
    ran = [i for i in computed if results[i].outcome == "passed"]
    assert len(ran) > 100, len(ran)
