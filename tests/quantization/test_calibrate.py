"""Calibrators on ortcore sessions give onnxruntime's calibrators' ranges on the same data."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest

import ortcore.quantization as cq

from . import models as M

METHODS = [
    ("MinMax", {}),
    ("MinMax", {"symmetric": True}),
    ("MinMax", {"moving_average": True, "averaging_constant": 0.1}),
    ("Entropy", {}),
    ("Percentile", {}),
    ("Percentile", {"symmetric": False, "percentile": 99.0}),
    ("Distribution", {}),
]


def _ranges(lib, model_path: Path, tmp: Path, method: str, options: dict, feeds: list) -> dict:
    cal = lib.create_calibrator(
        model_path,
        [],
        augmented_model_path=str(tmp / f"aug_{lib.__name__.split('.')[0]}.onnx"),
        calibrate_method=getattr(lib.CalibrationMethod, method),
        extra_options=dict(options),
    )
    cal.collect_data(M.ListReader(feeds))
    data = cal.compute_data()
    return {k: data[k] for k in data}


@pytest.mark.parametrize("method,options", METHODS)
@pytest.mark.parametrize("name", ["cnn", "transformer"])
def test_ranges_match_onnxruntime(
    name: str, method: str, options: dict, tmp_path: Path, cpu: str
) -> None:
    model = M.cnn() if name == "cnn" else M.transformer()
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    feeds = M.feeds(model, 5)
    ours = _ranges(cq, path, tmp_path, method, options, feeds)
    assert ours and all(
        np.all(np.asarray(t.range_value[0]) <= np.asarray(t.range_value[1])) for t in ours.values()
    )
    pytest.importorskip("onnxruntime")
    import onnxruntime.quantization as oq

    theirs = _ranges(oq, path, tmp_path, method, options, feeds)
    assert set(ours) == set(theirs)
    for k, t in theirs.items():
        for a, b in zip(ours[k].range_value, t.range_value, strict=True):
            np.testing.assert_allclose(
                np.asarray(a, np.float64).ravel(),
                np.asarray(b, np.float64).ravel(),
                rtol=1e-5,
                atol=1e-6,
                err_msg=k,
            )
        if method == "Distribution":
            np.testing.assert_allclose(ours[k].avg_std, t.avg_std, rtol=1e-4, atol=1e-6, err_msg=k)


def test_reader_protocol_and_errors(tmp_path: Path, cpu: str) -> None:
    assert issubclass(M.ListReader, cq.CalibrationDataReader)  # duck-typed get_next()
    path = tmp_path / "m.onnx"
    onnx.save(M.cnn(), path)
    cal = cq.create_calibrator(path, augmented_model_path=str(tmp_path / "aug.onnx"))
    with pytest.raises(ValueError, match=r"feed 1 .*missing \['x'\]"):
        good = M.feeds(M.cnn(), 1)[0]
        cal.collect_data(M.ListReader([good, {"y": good["x"]}]))
    with pytest.raises(ValueError, match="CalibrationMethod 'Median'"):
        cq.create_calibrator(path, calibrate_method="Median")  # type: ignore[arg-type]


def test_max_intermediate_outputs_folds_every_batch(tmp_path: Path, cpu: str) -> None:
    # onnxruntime 1.32 drops the batches held when the limit is reached (its docstring says they are
    # merged); ortcore merges them, so the ranges equal those of an unlimited run.
    model = M.cnn()
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    feeds = M.feeds(model, 5)
    limited = _ranges(cq, path, tmp_path, "MinMax", {"max_intermediate_outputs": 2}, feeds)
    whole = _ranges(cq, path, tmp_path, "MinMax", {}, feeds)
    for k, t in whole.items():
        np.testing.assert_array_equal(limited[k].range_value, t.range_value)
