"""onnxruntime names ortcore lacked: devices and memory, sparse tensors, module
functions, ``run_async``, memory infos, OrtValue's numpy and DLPack protocols."""

from __future__ import annotations

from .conftest import Results, same

SNIPPETS = {
    "device_memory_arena": """
        import onnxruntime as ort
        d = ort.OrtDevice.make("cpu", 0)
        m = ort.OrtMemoryInfo("Cpu", ort.OrtAllocatorType.ORT_ARENA_ALLOCATOR, 0,
                              ort.OrtMemType.DEFAULT)
        a = ort.OrtArenaCfg(0, -1, -1, -1)
        b = ort.OrtArenaCfg({"max_mem": 1 << 20, "arena_extend_strategy": 1})
        result = {
            "device": (d.device_type(), d.device_id(), d.device_vendor_id(), d.device_mem_type()),
            "memory": (m.name, m.device_id, int(m.mem_type), int(m.allocator_type)),
            "arena": (a.max_mem, a.arena_extend_strategy, a.initial_chunk_size_bytes,
                      a.max_dead_bytes_per_chunk, b.max_mem, b.arena_extend_strategy),
            "enums": (int(ort.OrtMemType.CPU_INPUT), int(ort.OrtMemType.CPU_OUTPUT),
                      int(ort.OrtAllocatorType.ORT_DEVICE_ALLOCATOR)),
        }
    """,
    "sparse_tensor": """
        import onnxruntime as ort
        cpu = ort.OrtDevice.make("cpu", 0)
        values = np.array([1.0, 2.0, 3.0], np.float32)
        coo = ort.SparseTensor.sparse_coo_from_numpy(
            np.array([2, 3], np.int64), values, np.array([0, 4, 5], np.int64), cpu)
        csr = ort.SparseTensor.sparse_csr_from_numpy(
            np.array([2, 3], np.int64), values, np.array([0, 1, 2], np.int64),
            np.array([0, 1, 3], np.int64), cpu)
        value = ort.OrtValue.ort_value_from_sparse_tensor(coo)
        result = {
            "coo": (coo.values(), coo.as_coo_view().indices(), coo.dense_shape(),
                    int(coo.format()), coo.data_type(), coo.device_name()),
            "csr": (csr.as_csrc_view().inner(), csr.as_csrc_view().outer(), int(csr.format())),
            "value": (value.is_sparse_tensor(), value.is_tensor(),
                      value.as_sparse_tensor().values()),
        }
    """,
    "module_functions": """
        import onnxruntime as ort
        result = (
            isinstance(ort.get_build_info(), str),
            ort.set_default_logger_severity(3),
            ort.set_default_logger_verbosity(0),
            ort.disable_telemetry_events(),
            ort.enable_telemetry_events(),
            ort.get_device(),
            isinstance(ort.get_version_string(), str),
        )
        ort.set_default_logger_severity(2)
    """,
    "run_async": """
        import threading
        import onnxruntime as ort
        sess = ort.InferenceSession(save(relu_model()), providers=["CPUExecutionProvider"])
        done = threading.Event()
        got = []
        def callback(outputs, user_data, err):
            got.append((outputs, user_data, err))
            done.set()
        x = np.array([[-1, 2, -3], [4, -5, 6]], np.float32)
        sess.run_async(None, {"X": x}, callback, "first")
        done.wait(60)
        done.clear()
        sess.run_async(None, {"X": np.ones((3, 3), np.float32)}, callback, "second")
        done.wait(60)
        (ok, ud1, err1), (bad, ud2, err2) = got
        result = (ok, ud1, err1, bad, ud2, bool(err2))
    """,
    "memory_infos": """
        import onnxruntime as ort
        sess = ort.InferenceSession(save(relu_model()), providers=["CPUExecutionProvider"])
        def describe(infos):
            return [(m.name, m.device_id, int(m.mem_type), int(m.allocator_type)) for m in infos]
        result = (describe(sess.get_input_memory_infos()), describe(sess.get_output_memory_infos()))
    """,
    "ortvalue_protocols": """
        import onnxruntime as ort
        x = np.arange(6, dtype=np.float32).reshape(2, 3)
        v = ort.OrtValue.ortvalue_from_numpy(x)
        bf16 = ort.OrtValue.ortvalue_from_numpy_with_onnx_type(
            np.array([0x3F80, 0x4000], np.uint16), TensorProto.BFLOAT16)
        result = {
            "size": v.tensor_size_in_bytes(),
            "asarray": np.asarray(v),
            "asarray_dtype": np.asarray(v, dtype=np.float64),
            "array_copy": np.array(v),
            "bf16": (bf16.data_type(), bf16.element_type(), bf16.shape()),
            "from_dlpack_array": ort.OrtValue.from_dlpack(x).numpy(),
            "from_dlpack_capsule": ort.OrtValue.from_dlpack(x.__dlpack__()).numpy(),
            "numpy_from_dlpack": np.from_dlpack(v),
            "dlpack_device": tuple(v.__dlpack_device__()),
        }
    """,
}


def test_device_memory_and_arena_objects(results: Results) -> None:
    assert results.ok("device_memory_arena")["memory"] == ("Cpu", 0, 0, 1)
    same(results.ours["device_memory_arena"], results.theirs("device_memory_arena"))


def test_sparse_tensor(results: Results) -> None:
    assert results.ok("sparse_tensor")["value"][0] is True
    same(results.ours["sparse_tensor"], results.theirs("sparse_tensor"))


def test_module_functions(results: Results) -> None:
    assert results.ok("module_functions")[0] is True
    same(results.ours["module_functions"], results.theirs("module_functions"))


def test_run_async(results: Results) -> None:
    _, user_data, err, bad, _, failed = results.ok("run_async")
    assert user_data == "first" and err == "" and bad == [] and failed
    same(results.ours["run_async"], results.theirs("run_async"))


def test_memory_infos(results: Results) -> None:
    assert results.ok("memory_infos") == ([("Cpu", 0, 0, 1)], [("Cpu", 0, 0, 1)])
    same(results.ours["memory_infos"], results.theirs("memory_infos"))


def test_ortvalue_numpy_and_dlpack(results: Results) -> None:
    got = results.ok("ortvalue_protocols")
    assert got["asarray"].dtype.name == "float32" and got["size"] == 24
    same(results.ours["ortvalue_protocols"], results.theirs("ortvalue_protocols"))
