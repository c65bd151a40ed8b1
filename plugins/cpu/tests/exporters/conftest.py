"""Shared oracle check for models made by real exporters.

``assert_matches_ort(model_bytes, feeds)`` runs a serialized model with
``ortcore`` (CPU provider only) at the default optimization level and with
every optimization disabled, runs it with onnxruntime, and compares every
output: float tensors within rtol 1e-3 / atol 1e-4, other tensors exactly,
ZipMap outputs (lists of dicts) by their keys and values.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pytest

RTOL = 1e-3
ATOL = 1e-4

Check = Callable[[bytes, Mapping[str, np.ndarray]], None]


def _assert_same(got: Any, want: Any, where: str) -> None:
    """Compare one output of ortcore with the same output of onnxruntime."""
    if isinstance(want, list):  # ZipMap: a list of {label: probability}
        assert isinstance(got, list) and len(got) == len(want), where
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            assert sorted(g) == sorted(w), f"{where}[{i}]: keys {sorted(g)} != {sorted(w)}"
            keys = sorted(w)
            np.testing.assert_allclose(
                [g[k] for k in keys], [w[k] for k in keys], rtol=RTOL, atol=ATOL,
                err_msg=f"{where}[{i}]",
            )  # fmt: skip
        return
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, f"{where}: dtype {got.dtype} != {want.dtype}"
    assert got.shape == want.shape, f"{where}: shape {got.shape} != {want.shape}"
    if np.issubdtype(want.dtype, np.floating):
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL, err_msg=where)
    else:
        np.testing.assert_array_equal(got, want, err_msg=where)


def _check(model: bytes, feeds: Mapping[str, np.ndarray]) -> None:
    ort = pytest.importorskip("onnxruntime")
    import ortcore

    ref = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    names = [o.name for o in ref.get_outputs()]
    want = ref.run(None, dict(feeds))
    levels = {
        "default": None,
        "disable_all": ortcore.GraphOptimizationLevel.ORT_DISABLE_ALL,
    }
    for label, level in levels.items():
        options = ortcore.SessionOptions()
        if level is not None:
            options.graph_optimization_level = level
        sess = ortcore.InferenceSession(
            model, sess_options=options, providers=["CPUExecutionProvider"]
        )
        assert [o.name for o in sess.get_outputs()] == names
        got = sess.run(None, dict(feeds))
        for name, g, w in zip(names, got, want, strict=True):
            _assert_same(g, w, f"{label}: output {name!r}")


@pytest.fixture
def assert_matches_ort() -> Check:
    """The check described in the module docstring."""
    return _check
