"""Exception types: in each situation, every ``except`` clause that catches
onnxruntime's exception (a built-in, or a class of
``onnxruntime.capi.onnxruntime_pybind11_state``) catches ortcore's too."""

from __future__ import annotations

import pytest

from .conftest import Results, same

_SESSION = """
        import onnxruntime as ort
        sess = ort.InferenceSession(save(relu_model()), providers=["CPUExecutionProvider"])
        x = np.ones((2, 3), np.float32)
"""


def _in_session(line: str) -> str:
    return _SESSION + "        " + line + "\n"


SNIPPETS = {
    "unknown_session_config_key": """
        import onnxruntime as ort
        ort.SessionOptions().get_session_config_entry("no.such.key")
    """,
    "unknown_run_config_key": """
        import onnxruntime as ort
        ort.RunOptions().get_run_config_entry("no.such.key")
    """,
    "config_value_not_a_string": """
        import onnxruntime as ort
        ort.SessionOptions().add_session_config_entry("session.x", 1)
    """,
    "model_of_wrong_type": """
        import onnxruntime as ort
        ort.InferenceSession(12345)
    """,
    "missing_model_file": """
        import onnxruntime as ort
        ort.InferenceSession("does_not_exist.onnx", providers=["CPUExecutionProvider"])
    """,
    "garbage_model": """
        import onnxruntime as ort
        ort.InferenceSession(b"not a model at all", providers=["CPUExecutionProvider"])
    """,
    "input_of_wrong_type": _in_session('sess.run(None, {"X": x.astype(np.float64)})'),
    "input_of_wrong_rank": _in_session('sess.run(None, {"X": x[0]})'),
    "input_of_wrong_dims": _in_session('sess.run(None, {"X": np.ones((3, 3), np.float32)})'),
    "missing_input": _in_session("sess.run(None, {})"),
    "unknown_output": _in_session('sess.run(["nope"], {"X": x})'),
    "set_providers_unknown": _in_session('sess.set_providers(["NoSuchExecutionProvider"])'),
    "terminated_run": _SESSION
    + """
        ro = ort.RunOptions()
        ro.terminate = True
        sess.run(None, {"X": x}, ro)
    """,
    "update_inplace_wrong_size": """
        import onnxruntime as ort
        v = ort.OrtValue.ortvalue_from_numpy(np.ones((2, 3), np.float32))
        v.update_inplace(np.ones((3, 3), np.float32))
    """,
    "onnx_type_of_other_size": """
        import onnxruntime as ort
        ort.OrtValue.ortvalue_from_numpy_with_onnx_type(np.ones(3, np.float32),
                                                        TensorProto.BFLOAT16)
    """,
    "ortvalue_on_missing_cuda": """
        import onnxruntime as ort
        ort.OrtValue.ortvalue_from_numpy(np.ones(3, np.float32), "cuda", 0)
    """,
    "binding_unknown_input": _in_session('sess.io_binding().bind_cpu_input("nope", x)'),
    "binding_without_outputs": _SESSION
    + """
        b = sess.io_binding()
        b.bind_cpu_input("X", x)
        sess.run_with_iobinding(b)
    """,
    "binding_bad_input_dims": _SESSION
    + """
        b = sess.io_binding()
        b.bind_cpu_input("X", np.ones((3, 3), np.float32))
        b.bind_output("Y")
        sess.run_with_iobinding(b)
    """,
    "binding_string_by_pointer": """
        import onnxruntime as ort
        text = TensorProto.STRING
        model = graph_model([helper.make_node("Identity", ["X"], ["Y"])],
                            [fvi("X", [2], text)], [fvi("Y", [2], text)])
        sess = ort.InferenceSession(save(model), providers=["CPUExecutionProvider"])
        x = np.array(["a", "bc"], dtype=object)
        b = sess.io_binding()
        b.bind_input("X", "cpu", 0, np.object_, [2], x.ctypes.data)
    """,
    "kernel_failure": """
        import onnxruntime as ort
        shape = numpy_helper.from_array(np.array([4, 4], np.int64), "S")
        model = graph_model([helper.make_node("Reshape", ["X", "S"], ["Y"])],
                            [fvi("X", None)], [fvi("Y", None)], [shape])
        sess = ort.InferenceSession(save(model), providers=["CPUExecutionProvider"])
        sess.run(None, {"X": np.ones(6, np.float32)})
    """,
    "invalid_graph": """
        import onnxruntime as ort
        model = graph_model([helper.make_node("Add", ["X", "missing"], ["Y"])],
                            [fvi("X", [2])], [fvi("Y", [2])])
        ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    """,
}

# (snippet, an except clause that must catch ortcore's exception there)
CASES = [
    ("unknown_session_config_key", "RuntimeError"),
    ("unknown_run_config_key", "RuntimeError"),
    ("config_value_not_a_string", "TypeError"),
    ("model_of_wrong_type", "TypeError"),
    ("missing_model_file", "capi.NoSuchFile"),
    ("garbage_model", "capi.InvalidProtobuf"),
    ("input_of_wrong_type", "capi.InvalidArgument"),
    ("input_of_wrong_rank", "capi.InvalidArgument"),
    ("input_of_wrong_dims", "capi.InvalidArgument"),
    ("missing_input", "ValueError"),
    ("unknown_output", "capi.InvalidArgument"),
    ("set_providers_unknown", "RuntimeError"),
    ("terminated_run", "capi.Fail"),
    ("update_inplace_wrong_size", "RuntimeError"),
    ("onnx_type_of_other_size", "RuntimeError"),
    ("ortvalue_on_missing_cuda", "RuntimeError"),
    ("binding_unknown_input", "RuntimeError"),
    ("binding_without_outputs", "RuntimeError"),
    ("binding_bad_input_dims", "RuntimeError"),
    ("binding_string_by_pointer", "RuntimeError"),
    ("kernel_failure", "capi.RuntimeException"),
    ("invalid_graph", "Exception"),
]


@pytest.mark.parametrize(("name", "clause"), CASES, ids=[c[0] for c in CASES])
def test_same_exception_types_as_onnxruntime(results: Results, name: str, clause: str) -> None:
    kind, message, caught = results.raised(name)
    assert clause == "Exception" or clause in caught, f"{kind}: {message} caught by {caught}"
    same(results.ours[name], results.theirs(name))


def test_every_situation_is_checked() -> None:
    assert {c[0] for c in CASES} == set(SNIPPETS)
