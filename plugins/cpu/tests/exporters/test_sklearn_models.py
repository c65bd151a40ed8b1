"""Small scikit-learn models, converted with skl2onnx, against onnxruntime.

Covers scalers, linear models, random forests and gradient boosting, alone
and in pipelines; classifiers with and without ZipMap, with integer and
string labels; converted at skl2onnx's default opsets and at older ones,
and with float64 inputs where skl2onnx supports them. Skipped where
scikit-learn or skl2onnx is missing.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("sklearn")
skl2onnx = pytest.importorskip("skl2onnx")

from skl2onnx.common.data_types import DoubleTensorType, FloatTensorType  # noqa: E402
from sklearn.ensemble import (  # noqa: E402
    GradientBoostingClassifier,
    GradientBoostingRegressor,
    RandomForestClassifier,
    RandomForestRegressor,
)
from sklearn.linear_model import LinearRegression, LogisticRegression  # noqa: E402
from sklearn.pipeline import Pipeline, make_pipeline  # noqa: E402
from sklearn.preprocessing import MinMaxScaler, StandardScaler  # noqa: E402

N_FEATURES = 6


def _data(task: str, labels: str = "int") -> tuple[np.ndarray, np.ndarray]:
    """A small, seeded data set: 3 classes, 2 classes or a real target."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(120, N_FEATURES)) * [1, 2, 5, 0.5, 10, 1] + [0, 1, -3, 0, 50, 2]
    score = x @ rng.normal(size=N_FEATURES) / 10 + rng.normal(scale=0.5, size=len(x))
    if task == "regression":
        return x, score
    n_classes = 3 if task == "multiclass" else 2
    y = np.digitize(score, np.quantile(score, np.linspace(0, 1, n_classes + 1)[1:-1]))
    if labels == "str":
        return x, np.array(["cat", "dog", "eel"])[y]
    return x, y


# name: (estimator, task, labels, converter options keyed by estimator type)
Case = tuple[Callable[[], Any], str, str, dict[type, dict[str, Any]]]
NO_ZIPMAP: dict[type, dict[str, Any]] = {
    LogisticRegression: {"zipmap": False},
    RandomForestClassifier: {"zipmap": False},
    GradientBoostingClassifier: {"zipmap": False},
}
CASES: dict[str, Case] = {
    "standard-logistic-multiclass": (
        lambda: make_pipeline(StandardScaler(), LogisticRegression(max_iter=500)),
        "multiclass", "int", NO_ZIPMAP,
    ),
    "minmax-logistic-binary-zipmap": (
        lambda: make_pipeline(MinMaxScaler(), LogisticRegression(max_iter=500)),
        "binary", "int", {},
    ),
    "standard-linear-regression": (
        lambda: make_pipeline(StandardScaler(), LinearRegression()), "regression", "int", {},
    ),
    "random-forest-classifier": (
        lambda: RandomForestClassifier(n_estimators=8, max_depth=5, random_state=0),
        "multiclass", "int", NO_ZIPMAP,
    ),
    "random-forest-classifier-str-zipmap": (
        lambda: RandomForestClassifier(n_estimators=5, max_depth=4, random_state=1),
        "multiclass", "str", {},
    ),
    "random-forest-regressor": (
        lambda: RandomForestRegressor(n_estimators=8, max_depth=5, random_state=0),
        "regression", "int", {},
    ),
    "gradient-boosting-classifier-binary": (
        lambda: GradientBoostingClassifier(n_estimators=10, max_depth=3, random_state=0),
        "binary", "int", NO_ZIPMAP,
    ),
    "gradient-boosting-classifier-str-zipmap": (
        lambda: GradientBoostingClassifier(n_estimators=10, max_depth=3, random_state=0),
        "multiclass", "str", {},
    ),
    "gradient-boosting-regressor": (
        lambda: GradientBoostingRegressor(n_estimators=10, max_depth=3, random_state=0),
        "regression", "int", {},
    ),
    "pipeline-scalers-gradient-boosting": (
        lambda: Pipeline([
            ("standard", StandardScaler()),
            ("minmax", MinMaxScaler()),
            ("gb", GradientBoostingRegressor(n_estimators=8, max_depth=2, random_state=0)),
        ]),
        "regression", "int", {},
    ),
}  # fmt: skip

# opsets: skl2onnx's default (the newest onnx knows) and an older one.
OPSETS: dict[str, dict[str, int] | None] = {
    "default-opset": None,
    "opset13": {"": 13, "ai.onnx.ml": 1},
}
# Converters that keep float64 end to end (the others emit float64 tree or
# ZipMap outputs that onnxruntime rejects as invalid).
DOUBLE = ["standard-logistic-multiclass", "standard-linear-regression", "random-forest-classifier"]


def _convert(model: Any, options: dict[type, dict[str, Any]], opsets: Any, x: np.ndarray) -> bytes:
    """Convert a fitted model with skl2onnx (float inputs) and serialize it."""
    dtype = DoubleTensorType if x.dtype == np.float64 else FloatTensorType
    onx = skl2onnx.to_onnx(
        model, initial_types=[("X", dtype([None, N_FEATURES]))], options=options,
        target_opset=opsets,
    )  # fmt: skip
    return onx.SerializeToString()


@pytest.mark.parametrize("opset", list(OPSETS))
@pytest.mark.parametrize("name", list(CASES))
def test_sklearn_model(name: str, opset: str, tmp_path: Path, assert_matches_ort: Any) -> None:
    make, task, labels, options = CASES[name]
    x, y = _data(task, labels)
    model = make().fit(x, y)
    path = tmp_path / "model.onnx"
    path.write_bytes(_convert(model, options, OPSETS[opset], x.astype(np.float32)))
    feeds = {"X": x[:40].astype(np.float32)}
    assert_matches_ort(path.read_bytes(), feeds)


@pytest.mark.parametrize("name", DOUBLE)
def test_sklearn_model_double(name: str, tmp_path: Path, assert_matches_ort: Any) -> None:
    """float64 inputs: linear models become MatMul graphs, trees keep double inputs."""
    make, task, labels, options = CASES[name]
    x, y = _data(task, labels)
    model = make().fit(x, y)
    path = tmp_path / "model.onnx"
    path.write_bytes(_convert(model, options, {"": 17, "ai.onnx.ml": 3}, x))
    assert_matches_ort(path.read_bytes(), {"X": x[:40]})
