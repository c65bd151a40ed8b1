"""How a session gets its model (ortcore.loading), each step on its own."""

from __future__ import annotations

import json

import numpy as np
import pytest
from onnx import helper, numpy_helper

from ep_sdk.graph import is_constant
from ortcore import InferenceSession, InvalidArgument, SessionOptions
from ortcore.loading import (
    LOAD_CONFIG_ENV,
    LOAD_CONFIG_FROM_MODEL,
    apply_initializers,
    feedable_inputs,
    load_options,
    model_session_options,
    reads_model_config,
    settle_constant_inputs,
    tensor_limit,
)
from ortcore.model import load_model

from .conftest import fvi, make_model

W = np.ones((2, 3), np.float32)


def _model(ir_version: int = 8) -> bytes:
    """y = x + w, with w an initializer also listed as a graph input."""
    return make_model(
        [helper.make_node("Add", ["x", "w"], ["y"])],
        [fvi("x", [2, 3]), fvi("w", [2, 3])],
        [fvi("y", [2, 3])],
        [numpy_helper.from_array(W, "w")],
        ir_version=ir_version,
    )


def test_feedable_inputs_follow_the_ir_version() -> None:
    inputs, overridable = feedable_inputs(load_model(_model(ir_version=8)))
    assert [v.name for v in inputs] == ["x"] and [v.name for v in overridable] == ["w"]
    inputs, overridable = feedable_inputs(load_model(_model(ir_version=3)))
    assert [v.name for v in inputs] == ["x"] and overridable == []


def test_settle_constant_inputs_before_ir_version_4() -> None:
    """IR version 3: the initializer leaves the graph inputs (a constant, as
    every pass and provider sees it); version 8: it stays, overridable."""
    old = load_model(_model(ir_version=3))
    settle_constant_inputs(old)
    w = old.graph.initializers["w"]
    assert [v.name for v in old.graph.inputs] == ["x"] and is_constant(w)
    assert feedable_inputs(old) == ([old.graph.inputs[0]], [])
    new = load_model(_model(ir_version=8))
    settle_constant_inputs(new)
    assert [v.name for v in new.graph.inputs] == ["x", "w"]
    assert not is_constant(new.graph.initializers["w"])


def test_ir3_session_treats_listed_initializers_as_constants() -> None:
    """A session of an IR version 3 model lists and takes only ``x``, and
    still refuses a feed for ``w``; the output is right."""
    sess = InferenceSession(_model(ir_version=3), providers=["cpu"])
    assert [i.name for i in sess.get_inputs()] == ["x"]
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(sess.run(None, {"x": x})[0], x + W)
    with pytest.raises(InvalidArgument, match="w"):
        sess.run(None, {"x": x, "w": W})


def test_apply_initializers_replaces_and_refuses_unknown_names() -> None:
    model = load_model(_model())
    apply_initializers(model, {"w": W * 5})
    const = model.graph.initializers["w"].const_value
    assert const is not None
    np.testing.assert_array_equal(const.numpy(), W * 5)
    with pytest.raises(InvalidArgument, match="no initializer 'nope'"):
        apply_initializers(model, {"nope": W})


def test_reads_model_config_argument_then_entry_then_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    so = SessionOptions()
    monkeypatch.setenv(LOAD_CONFIG_ENV, "1")
    assert reads_model_config(None, so)
    so.add_session_config_entry(LOAD_CONFIG_FROM_MODEL, "0")
    assert not reads_model_config(None, so)
    assert reads_model_config(1, so) and not reads_model_config("0", so)


def test_model_session_options() -> None:
    config = {"session_options": {"intra_op_num_threads": 2}}
    model = load_model(_model())
    assert model_session_options(model) is None
    model.metadata_props["ort_config"] = json.dumps(config)
    assert model_session_options(model) == {"intra_op_num_threads": 2}
    model.metadata_props["ort_config"] = json.dumps({"other": 1})
    assert model_session_options(model) is None
    model.metadata_props["ort_config"] = "{not json"
    with pytest.raises(InvalidArgument, match="cannot be parsed"):
        model_session_options(model)


def test_tensor_limit_and_load_options() -> None:
    so = SessionOptions()
    assert tensor_limit(so) is None
    so.add_session_config_entry("session.max_tensor_bytes", "4096")
    assert tensor_limit(so) == 4096
    so.add_free_dimension_override_by_name("n", 4)
    opts = load_options(so, 4096)
    assert opts.max_tensor_bytes == 4096 and dict(opts.free_dims_by_name) == {"n": 4}
    so.add_session_config_entry("session.max_tensor_bytes", "lots")
    with pytest.raises(InvalidArgument):
        tensor_limit(so)
