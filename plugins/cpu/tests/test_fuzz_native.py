"""Fuzzing of every operator whose CPU kernel reaches a Cython entry point.

Hypothesis draws small one-node models per operator group (shapes with
zero-size dims, 1-3 spatial dims, one element; the dtypes the Cython paths
take) with valid and hostile attributes: negative and huge pads, strides,
dilations and kernel sizes, kernels wider than the input, unknown
``auto_pad`` values, bad axes and permutations, out-of-range indices, group
counts that do not divide the channels, scale and bias of the wrong shape.
Each model runs through ``ortcore.InferenceSession`` in a child process
(``fuzz_worker.py``, which also judges it), so a crash, an abort or a hang
fails the test with the reproducing case instead of killing pytest. A case
passes when ortcore

- gives the outputs (dtype, shape, values within tolerance) of
  ``onnx.reference``; or of onnxruntime, or a brute-force reading of the
  spec (pooling), where the reference is wrong; or
- raises an ``ortcore.errors.OrtcoreError`` where onnx.reference raises too,
  where onnxruntime refuses the model too, or on a model the generator made
  invalid on purpose (``hostile``).

A raw (non-ortcore) exception, a wrong result (outputs of other types than
the model declares included), an ortcore error on a valid model the oracles
run, a crash and a hang are failures. ``fuzz_worker.py`` lists every verdict.

The draws are derandomized, so CI runs the same cases every time. For a
longer hunt: ``ORTCORE_FUZZ_EXAMPLES=2000 ORTCORE_FUZZ_SEED=7 pytest -q
plugins/cpu/tests/test_fuzz_native.py`` (draws per group; a seed draws
another set). A failure prints the command line that reruns its case alone.

The case generators are in ``fuzz_draw.py`` (building blocks),
``fuzz_windows.py`` and ``fuzz_ops.py``; the child-process runner in
``fuzz_runner.py``.
"""

from __future__ import annotations

import collections
import json
import math
import zlib
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

hypothesis = pytest.importorskip("hypothesis")
from fuzz_draw import Case  # noqa: E402
from fuzz_ops import (  # noqa: E402
    batch_norm_cases,
    bias_gelu_cases,
    binary_cases,
    concat_cases,
    gather_cases,
    layer_norm_cases,
    reduce_cases,
    resize_cases,
    softmax_cases,
    transpose_cases,
    unary_cases,
)
from fuzz_runner import EXAMPLES, FAILURES, SEED, describe, run_cases  # noqa: E402
from fuzz_windows import (  # noqa: E402
    average_pool_cases,
    conv_cases,
    conv_transpose_cases,
    global_pool_cases,
    max_pool_cases,
    winograd_cases,
)
from hypothesis import HealthCheck, Phase, given, seed, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

# -- the table -----------------------------------------------------------------------


STRATEGIES: dict[str, tuple[Callable[[], st.SearchStrategy[Case]], int]] = {
    "MaxPool": (max_pool_cases, 600),
    "AveragePool": (average_pool_cases, 440),
    "GlobalPool": (global_pool_cases, 120),
    "Conv": (conv_cases, 500),
    "Conv-Winograd": (winograd_cases, 100),
    "FusedConv": (lambda: conv_cases(fused=True), 120),
    "ConvTranspose": (conv_transpose_cases, 400),
    "Transpose": (transpose_cases, 240),
    "Concat": (concat_cases, 200),
    "Gather": (gather_cases, 240),
    "Resize": (resize_cases, 500),
    "Softmax": (softmax_cases, 200),
    "LayerNormalization": (layer_norm_cases, 240),
    "Reduce": (reduce_cases, 280),
    "Binary": (binary_cases, 240),
    "Unary": (unary_cases, 200),
    "BiasGelu": (bias_gelu_cases, 100),
    "BatchNormalization": (batch_norm_cases, 120),
}
"""Name -> (strategy of cases, default number of cases per CI run)."""


def _pytorch_half_pixel_one(c: Case) -> bool:
    """A cubic or antialiased pytorch_half_pixel Resize with an axis resized to
    one element."""
    a, ins = c["attrs"], c["inputs"]
    if c["op"] != "Resize" or a.get("coordinate_transformation_mode") != "pytorch_half_pixel":
        return False
    if a.get("mode") != "cubic" and not a.get("antialias"):
        return False
    shape = ins[0]["shape"]
    axes = a.get("axes") or list(range(len(shape)))
    if len(ins) > 3 and ins[3] is not None:
        return 1 in ins[3]["values"]
    try:
        return 1 in [
            math.floor(shape[ax] * f) for ax, f in zip(axes, ins[2]["values"], strict=False)
        ]
    except (ValueError, OverflowError, IndexError):  # hostile scales or axes
        return False


KNOWN_DIVERGENCES: list[tuple[str, Callable[[Case], bool]]] = [
    (
        "Resize pytorch_half_pixel to one element: ortcore (as onnx.reference) samples "
        "at -0.5, the spec text and onnxruntime at 0; only cubic and antialias differ",
        _pytorch_half_pixel_one,
    ),
    (
        "Resize nearest tf_crop_and_resize: ortcore computes coordinates in float64, "
        "onnxruntime in float32, so a coordinate on a .5 tie (roi 0.1 * 5) may round "
        "the other way",
        lambda c: (
            c["op"] == "Resize"
            and c["attrs"].get("coordinate_transformation_mode") == "tf_crop_and_resize"
            and c["attrs"].get("mode") == "nearest"
        ),
    ),
]
"""Wrong-looking results (``mismatch``, ``spurious``) of cases that match a
known, deliberate or reported divergence: counted as ``known`` instead of
failing. Crashes, hangs and raw exceptions are never excused."""


KNOWN_CRASHES: list[tuple[str, Callable[[Case], bool]]] = []
"""Crashes outside the CPU provider that are reported and not fixed yet: a
group whose only failures are these is an expected failure (xfail), never a
pass. Remove an entry once its crash is fixed."""


def known_crash(c: Case, r: dict[str, Any]) -> str | None:
    """The known crash a ``crash`` verdict is, or None."""
    if r["verdict"] != "crash":
        return None
    return next((why for why, applies in KNOWN_CRASHES if applies(c)), None)


def known_divergence(c: Case, r: dict[str, Any]) -> str | None:
    """The known divergence that explains a mismatch or spurious error, or None."""
    if r["verdict"] not in ("mismatch", "spurious"):
        return None
    return next((why for why, applies in KNOWN_DIVERGENCES if applies(c)), None)


def draw_cases(name: str) -> list[Case]:
    """The cases of ``STRATEGIES[name]``, drawn by hypothesis (generation
    only: cases are judged in a child process, so there is nothing to shrink)."""
    make, default = STRATEGIES[name]
    n = EXAMPLES or default
    cases: list[Case] = []

    @settings(
        max_examples=n,
        derandomize=SEED is None,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(make())
    def collect(c: Case) -> None:
        cases.append(c)

    if SEED is not None:
        collect = seed(int(SEED) ^ zlib.crc32(name.encode()))(collect)
    collect()
    unique = list({json.dumps(c, sort_keys=True): c for c in cases}.values())
    for i, c in enumerate(unique):
        c["seed"] = i
    return unique


# -- the tests ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def outcomes(request: pytest.FixtureRequest) -> Iterator[dict[str, tuple[list[Case], list[Any]]]]:
    """Cases and verdicts of every operator group selected in this session:
    drawn here (hypothesis in one thread), judged two groups at a time (one
    child process each)."""
    here = Path(__file__)
    wanted = [
        item.callspec.params["group"]
        for item in request.session.items
        if Path(str(item.fspath)) == here and hasattr(item, "callspec")
    ]
    drawn = {name: draw_cases(name) for name in STRATEGIES if name in wanted}
    with ThreadPoolExecutor(max_workers=2) as pool:
        judged = dict(zip(drawn, pool.map(run_cases, drawn.values()), strict=True))
    yield {name: (cases, judged[name]) for name, cases in drawn.items()}


@pytest.mark.parametrize("group", list(STRATEGIES))
def test_fuzz_native(group: str, outcomes: dict[str, tuple[list[Case], list[Any]]]) -> None:
    """Every generated case of ``group`` ends in a clean ortcore error or in
    the oracles' outputs; never in a crash, a hang or a raw exception."""
    cases, results = outcomes[group]
    for c, r in zip(cases, results, strict=True):
        why = known_divergence(c, r)
        if why is not None:
            r["verdict"], r["detail"] = "known", f"{why}; {r.get('detail', '')}"
    counts = collections.Counter(r["verdict"] for r in results)
    print(f"{group}: {len(cases)} cases, {dict(sorted(counts.items()))}")
    failed = [(c, r) for c, r in zip(cases, results, strict=True) if r["verdict"] in FAILURES]
    bad = [describe(c, r) for c, r in failed if known_crash(c, r) is None]
    assert not bad, f"{group}: {len(bad)} of {len(cases)} cases failed\n" + "\n".join(bad[:15])
    known = sorted({str(known_crash(c, r)) for c, r in failed})
    if known:
        pytest.xfail(f"{len(failed)} case(s) hit known crashes: " + "; ".join(known))
