"""Package layout: the module paths programs import from onnxruntime exist on ortcore."""

from __future__ import annotations

import subprocess
import sys

from .conftest import Results, same

SNIPPETS = {
    "pybind_state_names": """
        from onnxruntime.capi.onnxruntime_pybind11_state import (
            EPFail, EngineError, Fail, InvalidArgument, InvalidGraph, InvalidProtobuf,
            ModelLoaded, ModelRequiresCompilation, NoModel, NoSuchFile, NotImplemented,
            OrtCompiledModelCompatibility, OrtDevice, OrtValueVector, RunOptions,
            RuntimeException, SessionOptions, get_available_providers, get_device,
        )
        from onnxruntime.capi import _pybind_state as S
        errors = [EPFail, EngineError, Fail, InvalidArgument, InvalidGraph, InvalidProtobuf,
                  ModelLoaded, ModelRequiresCompilation, NoModel, NoSuchFile, NotImplemented,
                  RuntimeException]
        result = {
            "exceptions": all(issubclass(e, Exception) for e in errors),
            "same_objects": all(getattr(S, e.__name__, None) is e for e in [Fail, RunOptions]),
            "compatibility": sorted(OrtCompiledModelCompatibility.__members__),
            "device": get_device(),
            "cpu": "CPUExecutionProvider" in get_available_providers(),
            "options": type(SessionOptions()).__name__,
            "vector": len(OrtValueVector()),
            "cpu_type": OrtDevice.cpu(),
        }
    """,
    "inference_collection": """
        from onnxruntime.capi.onnxruntime_inference_collection import (
            InferenceSession, IOBinding, OrtValue, OrtDevice, SparseTensor,
            check_and_normalize_provider_args,
        )
        import onnxruntime as ort
        sess = InferenceSession(save(relu_model()), providers=["CPUExecutionProvider"])
        x = np.array([[-1, 2, -3], [4, -5, 6]], np.float32)
        result = {
            "same_class": InferenceSession is ort.InferenceSession and OrtValue is ort.OrtValue,
            "run": sess.run(None, {"X": x})[0],
            "normalized": check_and_normalize_provider_args(
                ["CPUExecutionProvider"], [{"a": 1}], ["CPUExecutionProvider"]),
            "device": (OrtDevice.make("cpu", 0).device_type(),
                       OrtDevice.make("cpu", 3).device_id()),
        }
    """,
    "datasets": """
        import onnxruntime as rt
        from onnxruntime.datasets import get_example
        out = {}
        for name, shape in [("sigmoid.onnx", (3, 4, 5)), ("mul_1.onnx", (3, 2))]:
            path = get_example(name)
            sess = rt.InferenceSession(path, providers=rt.get_available_providers())
            x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape) / 7.0
            res = sess.run(None, {sess.get_inputs()[0].name: x})
            out[name] = {
                "abs": os.path.isabs(path),
                "inputs": [(i.name, i.shape, i.type) for i in sess.get_inputs()],
                "outputs": [(o.name, o.type) for o in sess.get_outputs()],
                "results": res,
                "meta": (sess.get_modelmeta().producer_name, sess.get_modelmeta().graph_name),
            }
        iris = rt.InferenceSession(get_example("logreg_iris.onnx"),
                                   providers=["CPUExecutionProvider"])
        out["logreg_iris.onnx"] = {
            "inputs": [(i.name, i.shape, i.type) for i in iris.get_inputs()],
            "outputs": [(o.name, o.type) for o in iris.get_outputs()],
            "meta": (iris.get_modelmeta().producer_name, iris.get_modelmeta().domain),
        }
        try:
            get_example("nope.onnx")
        except FileNotFoundError:
            out["missing"] = "FileNotFoundError"
        result = out
    """,
    "logreg_iris_run": """
        import onnxruntime as rt
        from onnxruntime.datasets import get_example
        sess = rt.InferenceSession(get_example("logreg_iris.onnx"),
                                   providers=["CPUExecutionProvider"])
        x = np.array([[5.8, 2.8], [6.0, 2.2], [5.1, 3.5]], np.float32)
        label, probabilities = sess.run(None, {"float_input": x})
        result = (label, [sorted(p.items()) for p in probabilities])
    """,
    "backend": """
        import onnxruntime.backend as backend
        from onnxruntime.backend.backend import OnnxRuntimeBackend
        from onnxruntime.backend.backend_rep import OnnxRuntimeBackendRep
        from onnxruntime.datasets import get_example
        model = onnx.load(get_example("sigmoid.onnx"))
        x = np.linspace(-3, 3, 60, dtype=np.float32).reshape(3, 4, 5)
        rep = backend.prepare(model, "CPU")
        result = {
            "rep": isinstance(rep, OnnxRuntimeBackendRep),
            "run": rep.run(x)[0],
            "run_model": backend.run(model, [x])[0],
            "path": backend.prepare(get_example("mul_1.onnx")).run(
                np.ones((3, 2), np.float32))[0],
            "supports": (backend.supports_device("CPU"), backend.supports_device("CUDA")),
            "compatible": backend.is_compatible(model),
            "class": OnnxRuntimeBackend.__name__ in ("OnnxRuntimeBackend", "OrtcoreBackend"),
        }
    """,
    "backend_refuses_file_options": """
        import onnxruntime.backend as backend
        from onnxruntime.datasets import get_example
        backend.prepare(get_example("sigmoid.onnx"), optimized_model_filepath="x.onnx")
    """,
}


def test_pybind_state_names(results: Results) -> None:
    got = results.ok("pybind_state_names")
    assert got["exceptions"] and got["same_objects"] and got["cpu"]
    same(results.ours["pybind_state_names"], results.theirs("pybind_state_names"))


def test_inference_collection(results: Results) -> None:
    got = results.ok("inference_collection")
    assert got["same_class"]
    same(results.ours["inference_collection"], results.theirs("inference_collection"))


def test_datasets_examples_run_as_onnxruntime_s(results: Results) -> None:
    got = results.ok("datasets")
    assert got["missing"] == "FileNotFoundError"
    assert got["mul_1.onnx"]["inputs"] == [("X", [3, 2], "tensor(float)")]
    same(results.ours["datasets"], results.theirs("datasets"))


def test_logreg_iris_runs_as_in_onnxruntime(results: Results) -> None:
    same(results.ours["logreg_iris_run"], results.theirs("logreg_iris_run"))


def test_backend_api(results: Results) -> None:
    got = results.ok("backend")
    assert got["rep"] and got["supports"] == (True, False)
    same(results.ours["backend"], results.theirs("backend"))


def test_backend_refuses_options_that_write_files(results: Results) -> None:
    assert "RuntimeError" in results.raised("backend_refuses_file_options")[2]
    same(
        results.ours["backend_refuses_file_options"],
        results.theirs("backend_refuses_file_options"),
    )


def _python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False
    )


def test_hook_is_off_until_called_and_refuses_after_real_import() -> None:
    code = (
        "import importlib.util, sys, ortcore\n"
        "assert 'onnxruntime' not in sys.modules\n"
        "spec = importlib.util.find_spec('onnxruntime')\n"
        "if spec is not None:\n"
        "    import onnxruntime\n"
        "    assert onnxruntime is not ortcore\n"
        "    try:\n"
        "        ortcore.install_as_onnxruntime()\n"
        "    except ortcore.Fail as exc:\n"
        "        assert 'already imported' in str(exc), exc\n"
        "    else:\n"
        "        raise AssertionError('install after the real import must be refused')\n"
        "print('ok')\n"
    )
    proc = _python(code)
    assert proc.returncode == 0 and "ok" in proc.stdout, proc.stderr


def test_hook_aliases_modules_and_names_missing_ones() -> None:
    code = (
        "import sys, ortcore\n"
        "ortcore.install_as_onnxruntime(); ortcore.install_as_onnxruntime()\n"
        "import onnxruntime, onnxruntime.capi.onnxruntime_pybind11_state as C\n"
        "assert onnxruntime is ortcore and C is ortcore.capi.onnxruntime_pybind11_state\n"
        "assert ortcore.__spec__.name == 'ortcore'\n"
        "try:\n"
        "    import onnxruntime.quantization\n"
        "except ModuleNotFoundError as exc:\n"
        "    assert 'onnxruntime.quantization' in str(exc) and 'ortcore' in str(exc)\n"
        "from ortcore.compat import uninstall_onnxruntime_alias\n"
        "uninstall_onnxruntime_alias()\n"
        "assert 'onnxruntime' not in sys.modules\n"
        "print('ok')\n"
    )
    proc = _python(code)
    assert proc.returncode == 0 and "ok" in proc.stdout, proc.stderr


def test_as_onnxruntime_runs_a_program_unchanged(tmp_path) -> None:  # type: ignore[no-untyped-def]
    program = tmp_path / "prog.py"
    program.write_text(
        "import sys\nimport onnxruntime as ort\nprint(ort.__name__, sys.argv[1:], __name__)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-m", "ortcore.as_onnxruntime", str(program), "a", "b"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ortcore ['a', 'b'] __main__"
