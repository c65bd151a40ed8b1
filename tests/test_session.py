"""The session API with onnxruntime's names, and equivalence with onnxruntime."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import ortcore
import ortcore as ort

from .conftest import chain_model, chain_reference, fvi, make_model, no_fallback

X = np.array([[1.0, -2.0, 3.0], [-4.0, 5.0, -6.0]], np.float32)
W = np.array([[0.5, 2.0, -1.0], [3.0, -0.25, 4.0]], np.float32)


def _meta_model() -> bytes:
    nodes = [
        helper.make_node("Add", ["x", "x"], ["s"], name="add"),
        helper.make_node("Neg", ["s"], ["y"], name="neg"),
        helper.make_node("Relu", ["s"], ["z"], name="relu"),
    ]
    graph = helper.make_graph(
        nodes,
        "meta_graph",
        [fvi("x", ["batch", 3])],
        [fvi("y", ["batch", 3]), fvi("z", ["batch", 3])],
        doc_string="graph doc",
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 17)],
        ir_version=8,
        producer_name="ortcore-tests",
        domain="org.test",
        model_version=7,
        doc_string="model doc",
    )
    helper.set_model_props(model, {"author": "tests", "purpose": "meta"})
    return model.SerializeToString()


@pytest.fixture
def sess() -> ortcore.InferenceSession:
    return ortcore.InferenceSession(_meta_model(), no_fallback(), providers=["mini"])


# -- metadata --------------------------------------------------------------------------


def test_inputs_and_outputs(sess: ortcore.InferenceSession) -> None:
    (inp,) = sess.get_inputs()
    assert isinstance(inp, ortcore.NodeArg)
    assert (inp.name, inp.type, inp.shape) == ("x", "tensor(float)", ["batch", 3])
    outs = sess.get_outputs()
    assert [(o.name, o.type, o.shape) for o in outs] == [
        ("y", "tensor(float)", ["batch", 3]),
        ("z", "tensor(float)", ["batch", 3]),
    ]


def test_input_types_and_unknown_dims() -> None:
    nodes = [helper.make_node("Add", ["a", "a"], ["y"], name="add")]
    data = make_model(
        nodes,
        [fvi("a", [None, 4], TensorProto.DOUBLE)],
        [fvi("y", [None, 4], TensorProto.DOUBLE)],
    )
    s = ortcore.InferenceSession(data, no_fallback(), providers=["mini"])
    (a,) = s.get_inputs()
    assert a.type == "tensor(double)"
    assert a.shape[1] == 4
    assert a.shape[0] is None or isinstance(a.shape[0], str)
    a64 = np.ones((5, 4))
    np.testing.assert_array_equal(s.run(None, {"a": a64})[0], a64 * 2)


def test_modelmeta(sess: ortcore.InferenceSession) -> None:
    m = sess.get_modelmeta()
    assert m.producer_name == "ortcore-tests"
    assert m.graph_name == "meta_graph"
    assert m.domain == "org.test"
    assert m.description == "model doc"
    assert m.graph_description == "graph doc"
    assert m.version == 7
    assert m.custom_metadata_map == {"author": "tests", "purpose": "meta"}


def test_providers_and_options() -> None:
    s = ortcore.InferenceSession(chain_model(["Neg"]), no_fallback(), providers=["mini"])
    assert s.get_providers() == ["MiniExecutionProvider"]
    assert s.get_provider_options() == {"MiniExecutionProvider": {"flavour": "plain"}}


def test_provider_options_as_tuple() -> None:
    s = ortcore.InferenceSession(
        chain_model(["Neg"]), no_fallback(), providers=[("mini", {"flavour": "x"})]
    )
    assert s.get_provider_options()["MiniExecutionProvider"] == {"flavour": "x"}


def test_provider_options_argument() -> None:
    s = ortcore.InferenceSession(
        chain_model(["Neg", "Add"]),
        no_fallback(),
        providers=["fake", "mini"],
        provider_options=[{}, {"flavour": 3}],
    )
    opts = s.get_provider_options()
    assert opts["MiniExecutionProvider"] == {"flavour": "3"}  # values become strings
    assert opts["FakeDeviceExecutionProvider"] == {}


def test_unknown_provider_option_refused() -> None:
    with pytest.raises(ortcore.InvalidArgument, match="colour") as info:
        ortcore.InferenceSession(chain_model(["Neg"]), providers=[("mini", {"colour": "red"})])
    assert "flavour" in str(info.value)  # the known options are listed
    with pytest.raises(ortcore.InvalidArgument, match="colour"):
        ortcore.InferenceSession(
            chain_model(["Neg"]), providers=["mini"], provider_options=[{"colour": "red"}]
        )


def test_provider_options_length_mismatch() -> None:
    with pytest.raises(ortcore.InvalidArgument, match="same length"):
        ortcore.InferenceSession(
            chain_model(["Neg"]), providers=["mini"], provider_options=[{}, {}]
        )


def test_provider_options_without_providers() -> None:
    with pytest.raises(ortcore.InvalidArgument):
        ortcore.InferenceSession(chain_model(["Neg"]), provider_options=[{}])


def test_providers_as_string_refused() -> None:
    with pytest.raises(ortcore.InvalidArgument, match="list"):
        ortcore.InferenceSession(chain_model(["Neg"]), providers="mini")  # type: ignore[arg-type]


def test_unexpected_keyword_refused() -> None:
    with pytest.raises(ortcore.InvalidArgument, match="bogus"):
        ortcore.InferenceSession(chain_model(["Neg"]), providers=["mini"], bogus=1)


def test_providers_none_uses_the_cpu_provider_only(cpu: str) -> None:
    """As onnxruntime: the other installed providers are used only when asked for."""
    s = ortcore.InferenceSession(chain_model(["Add", "Neg"]))
    assert s.get_providers() == [cpu]
    assert {r.provider for r in s.get_partition().nodes} == {cpu}
    np.testing.assert_allclose(s.run(None, {"x": X})[0], -(X + X))


def test_available_providers_listed_in_priority_order_cpu_last() -> None:
    available = ortcore.get_available_providers()
    assert available[:3] == [
        "ClaimingExecutionProvider",
        "FakeDeviceExecutionProvider",
        "MiniExecutionProvider",
    ]
    if "CPUExecutionProvider" in available:
        assert available[-1] == "CPUExecutionProvider"
    s = ortcore.InferenceSession(chain_model(["Add", "Neg"]), providers=available)
    assert s.get_providers() == available
    where = {r.node: r.provider for r in s.get_partition().nodes}
    assert where == {
        "n0_Add": "FakeDeviceExecutionProvider",
        "n1_Neg": "MiniExecutionProvider",
    }
    np.testing.assert_allclose(s.run(None, {"x": X})[0], -(X + X))


def test_cpu_appended_as_fallback(cpu: str) -> None:
    s = ortcore.InferenceSession(chain_model(["Neg"]), providers=["fake"])
    assert s.get_providers() == ["FakeDeviceExecutionProvider", cpu]


def test_set_providers_rebuilds_plan() -> None:
    s = ortcore.InferenceSession(chain_model(["Add", "Relu"]), no_fallback(), providers=["mini"])
    s.set_providers(["fake"])
    assert s.get_providers() == ["FakeDeviceExecutionProvider"]
    assert {r.provider for r in s.get_partition().nodes} == {"FakeDeviceExecutionProvider"}
    np.testing.assert_allclose(s.run(None, {"x": X})[0], np.maximum(X + X, 0))


# -- run ------------------------------------------------------------------------------


def test_run_output_names(sess: ortcore.InferenceSession) -> None:
    x = np.arange(12, dtype=np.float32).reshape(4, 3) - 5
    y, z = sess.run(None, {"x": x})
    np.testing.assert_array_equal(y, -(x + x))
    np.testing.assert_array_equal(z, np.maximum(x + x, 0))
    (only_z,) = sess.run(["z"], {"x": x})
    np.testing.assert_array_equal(only_z, z)
    z2, y2 = sess.run(["z", "y"], {"x": x})
    np.testing.assert_array_equal(y2, y)
    np.testing.assert_array_equal(z2, z)
    assert len(sess.run([], {"x": x})) == 2
    assert all(isinstance(o, np.ndarray) for o in sess.run(None, {"x": x}))


def test_symbolic_dim_accepts_any_size(sess: ortcore.InferenceSession) -> None:
    for n in (1, 5):
        x = np.ones((n, 3), np.float32)
        assert sess.run(["y"], {"x": x})[0].shape == (n, 3)


def test_invalid_output_name(sess: ortcore.InferenceSession) -> None:
    with pytest.raises(ortcore.InvalidArgument, match="Invalid output name:nope"):
        sess.run(["nope"], {"x": X})


def test_feed_errors(sess: ortcore.InferenceSession) -> None:
    with pytest.raises(ortcore.InvalidArgument, match="Invalid input name: q"):
        sess.run(None, {"x": X, "q": X})
    with pytest.raises(ortcore.InvalidArgument, match=r"Required inputs \(\['x'\]\) are missing"):
        sess.run(None, {})
    with pytest.raises(ortcore.InvalidArgument, match=r"tensor\(double\).*tensor\(float\)"):
        sess.run(None, {"x": X.astype(np.float64)})
    with pytest.raises(ortcore.InvalidArgument, match="Invalid rank for input: x Got: 1"):
        sess.run(None, {"x": X[0]})
    with pytest.raises(ortcore.InvalidArgument, match="dimensions for input: x"):
        sess.run(None, {"x": np.ones((2, 4), np.float32)})
    with pytest.raises(ortcore.InvalidArgument, match="dict"):
        sess.run(None, [X])  # type: ignore[arg-type]


# -- options --------------------------------------------------------------------------


def test_session_config_entries() -> None:
    so = ortcore.SessionOptions()
    so.add_session_config_entry("session.some_key", "v1")
    assert so.get_session_config_entry("session.some_key") == "v1"
    so.add_session_config_entry("session.some_key", "v2")
    assert so.get_session_config_entry("session.some_key") == "v2"
    with pytest.raises(ortcore.InvalidArgument, match=r"missing.key"):
        so.get_session_config_entry("missing.key")
    with pytest.raises(ortcore.InvalidArgument):
        so.add_session_config_entry("k", 1)  # type: ignore[arg-type]
    assert so.config_entries == {"session.some_key": "v2"}


def test_run_config_entries() -> None:
    ro = ortcore.RunOptions()
    ro.add_run_config_entry("run.k", "1")
    assert ro.get_run_config_entry("run.k") == "1"
    with pytest.raises(ortcore.InvalidArgument):
        ro.get_run_config_entry("run.other")


def test_session_options_defaults() -> None:
    so = ortcore.SessionOptions()
    assert so.graph_optimization_level == ortcore.GraphOptimizationLevel.ORT_ENABLE_ALL
    assert so.execution_mode == ortcore.ExecutionMode.ORT_SEQUENTIAL
    s = ortcore.InferenceSession(chain_model(["Neg"]), so, providers=["mini"])
    assert s.get_session_options() is so


def _init_model(ir_version: int, opset: int = 17) -> bytes:
    nodes = [helper.make_node("Add", ["x", "w"], ["y"], name="add")]
    return make_model(
        nodes,
        [fvi("x", [2, 3]), fvi("w", [2, 3])],
        [fvi("y", [2, 3])],
        [numpy_helper.from_array(W, "w")],
        opset=opset,
        ir_version=ir_version,
    )


def test_initializer_overridable_from_ir_version_4() -> None:
    s = ortcore.InferenceSession(_init_model(8), no_fallback(), providers=["mini"])
    assert [a.name for a in s.get_inputs()] == ["x"]
    assert [a.name for a in s.get_overridable_initializers()] == ["w"]
    np.testing.assert_allclose(s.run(None, {"x": X})[0], X + W)
    np.testing.assert_allclose(s.run(None, {"x": X, "w": X})[0], X + X)
    # the feed did not change the stored initializer
    np.testing.assert_allclose(s.run(None, {"x": X})[0], X + W)
    with pytest.raises(ortcore.InvalidArgument, match="dimensions for input: w"):
        s.run(None, {"x": X, "w": np.ones((3, 3), np.float32)})


def test_initializer_not_overridable_with_ir_version_3() -> None:
    s = ortcore.InferenceSession(_init_model(3, opset=8), no_fallback(), providers=["mini"])
    assert [a.name for a in s.get_inputs()] == ["x"]
    assert s.get_overridable_initializers() == []
    np.testing.assert_allclose(s.run(None, {"x": X})[0], X + W)
    with pytest.raises(ortcore.InvalidArgument, match="Invalid input name: w"):
        s.run(None, {"x": X, "w": X})


def test_add_initializer_replaces_value() -> None:
    so = no_fallback()
    so.add_initializer("w", np.full((2, 3), 10, np.float32))
    s = ortcore.InferenceSession(_init_model(8), so, providers=["mini"])
    np.testing.assert_allclose(s.run(None, {"x": X})[0], X + 10)
    so2 = no_fallback()
    so2.add_initializer("nope", W)
    with pytest.raises(ortcore.InvalidArgument, match="nope"):
        ortcore.InferenceSession(_init_model(8), so2, providers=["mini"])


def test_module_level_api() -> None:
    assert ort.get_device() == "CPU"
    assert ort.get_version_string() == ort.__version__
    assert issubclass(ort.InvalidArgument, ValueError)
    assert issubclass(ort.NoSuchFile, FileNotFoundError)
    assert issubclass(ort.NotImplementedOp, NotImplementedError)
    assert issubclass(ort.AllocationError, MemoryError)
    assert issubclass(ort.RuntimeException, RuntimeError)


# -- equivalence with onnxruntime -----------------------------------------------------


def _ort_style(mod: Any, data: bytes, providers: list[str]) -> Any:
    """Code written for onnxruntime, run with whichever module is passed."""
    so = mod.SessionOptions()
    so.graph_optimization_level = mod.GraphOptimizationLevel.ORT_ENABLE_ALL
    return mod.InferenceSession(data, sess_options=so, providers=providers)


def _small_model() -> bytes:
    nodes = [
        helper.make_node("Add", ["x", "w"], ["s"], name="add"),
        helper.make_node("Relu", ["s"], ["r"], name="relu"),
        helper.make_node("Mul", ["r", "x"], ["y"], name="mul"),
    ]
    return make_model(
        nodes,
        [fvi("x", [2, 3])],
        [fvi("y", [2, 3])],
        [numpy_helper.from_array(W, "w")],
    )


@pytest.fixture
def both() -> tuple[Any, Any]:
    onnxruntime = pytest.importorskip("onnxruntime")
    data = _small_model()
    mine = _ort_style(ortcore, data, ["mini"])
    theirs = _ort_style(onnxruntime, data, ["CPUExecutionProvider"])
    return mine, theirs


def test_same_outputs_and_metadata_as_onnxruntime(both: tuple[Any, Any]) -> None:
    mine, theirs = both
    x = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    np.testing.assert_allclose(mine.run(None, {"x": x})[0], theirs.run(None, {"x": x})[0])
    for a, b in zip(
        mine.get_inputs() + mine.get_outputs(), theirs.get_inputs() + theirs.get_outputs()
    ):
        assert (a.name, a.type, a.shape) == (b.name, b.type, b.shape)


def _error(sess: Any, *args: Any) -> BaseException:
    try:
        sess.run(*args)
    except Exception as exc:
        return exc
    raise AssertionError("no error raised")


@pytest.mark.parametrize(
    ("case", "expect"),
    [
        ("unknown_input", ["invalid"]),
        ("missing", ["required inputs"]),
        ("dtype", ["tensor(double)", "tensor(float)"]),
        ("rank", ["invalid rank for input"]),
        ("dim", ["got invalid dimensions for input"]),
        ("output", ["invalid output name:nope"]),
    ],
)
def test_same_errors_as_onnxruntime(both: tuple[Any, Any], case: str, expect: list[str]) -> None:
    mine, theirs = both
    args = {
        "unknown_input": (None, {"x": X, "q": X}),
        "missing": (None, {}),
        "dtype": (None, {"x": X.astype(np.float64)}),
        "rank": (None, {"x": X[0]}),
        "dim": (None, {"x": np.ones((2, 4), np.float32)}),
        "output": (["nope"], {"x": X}),
    }[case]
    e_mine, e_theirs = _error(mine, *args), _error(theirs, *args)
    # same exception class name (InvalidArgument), or both ValueErrors (missing input)
    if type(e_theirs).__name__ == "InvalidArgument":
        assert type(e_mine).__name__ == "InvalidArgument"
    assert isinstance(e_mine, type(e_theirs)) or type(e_theirs).__name__ == type(e_mine).__name__
    for text in expect:
        assert text in str(e_mine).lower(), (text, str(e_mine))
        assert text in str(e_theirs).lower(), (text, str(e_theirs))
    if case == "unknown_input":
        # onnxruntime < 1.20 says "Invalid Feed Input Name:q", newer "Invalid input name: q"
        assert "q" in str(e_mine) and "q" in str(e_theirs)


def test_chain_equivalent_to_onnxruntime_with_fake_device() -> None:
    onnxruntime = pytest.importorskip("onnxruntime")
    ops = ["Add", "Relu", "Neg", "Mul", "Sub"]
    data = chain_model(ops)
    mine = ort.InferenceSession(data, providers=["fake", "mini"])
    theirs = onnxruntime.InferenceSession(data, providers=["CPUExecutionProvider"])
    x = np.random.default_rng(1).standard_normal((2, 3)).astype(np.float32)
    np.testing.assert_allclose(mine.run(None, {"x": x})[0], theirs.run(None, {"x": x})[0])
    np.testing.assert_allclose(mine.run(None, {"x": x})[0], chain_reference(ops, x))


def test_outputs_never_alias_feeds_or_initializers(cpu: str) -> None:
    """Writing into an output must not change the caller's input or the model."""
    w = np.arange(6, dtype=np.float32).reshape(2, 3)
    nodes = [
        helper.make_node("Reshape", ["x", "shape"], ["y"]),
        helper.make_node("Identity", ["w"], ["w_out"]),
    ]
    model = make_model(
        nodes,
        [fvi("x", [2, 3])],
        [fvi("y", [3, 2]), fvi("w_out", [2, 3])],
        [
            numpy_helper.from_array(np.array([3, 2], dtype=np.int64), "shape"),
            numpy_helper.from_array(w, "w"),
        ],
    )
    so = ortcore.SessionOptions()
    so.graph_optimization_level = ortcore.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ortcore.InferenceSession(model, so, providers=[cpu])
    x = np.ones((2, 3), np.float32)
    y, w_out = sess.run(None, {"x": x})
    y[...] = -1
    w_out[...] = -1
    assert (x == 1).all()
    _, w_again = sess.run(None, {"x": x})
    np.testing.assert_array_equal(w_again, w)


def test_map_typed_outputs_load_and_run(cpu: str) -> None:
    """A ZipMap output (sequence of maps, which onnx-ir cannot type) still works."""
    from onnx import TypeProto

    seq_map = TypeProto()
    seq_map.sequence_type.elem_type.map_type.key_type = TensorProto.INT64
    value = seq_map.sequence_type.elem_type.map_type.value_type
    value.tensor_type.elem_type = TensorProto.FLOAT
    zipmap = helper.make_node(
        "ZipMap", ["p"], ["z"], domain="ai.onnx.ml", classlabels_int64s=[0, 1]
    )
    graph = helper.make_graph(
        [zipmap], "g", [fvi("p", [None, 2])], [helper.make_value_info("z", seq_map)]
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.ml", 3)],
    )
    sess = ortcore.InferenceSession(model.SerializeToString(), providers=[cpu])
    assert sess.get_outputs()[0].type == "seq(map(int64,tensor(float)))"
    (z,) = sess.run(None, {"p": np.array([[0.25, 0.75], [1.0, 0.0]], np.float32)})
    assert z == [{0: 0.25, 1: 0.75}, {0: 1.0, 1: 0.0}]
