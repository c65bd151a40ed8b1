"""What onnxruntime's own Python tests use beyond the session API: the native
layer (``sess._sess``, ``OrtValue._get_c_value()``, ``SessionIOBinding``),
hardware devices and their incompatibility details, the compatibility-info
functions' errors, read-only sparse tensor buffers, the logger callback's
severity, ``ModelCompiler``'s stream errors and initializer location function,
and the words of a refused external data path."""

from __future__ import annotations

from .conftest import Results, same

_MUL = """
        import onnxruntime as ort
        w = numpy_helper.from_array(np.array([[1, 2], [3, 4], [5, 6]], np.float32), "W")
        mul = graph_model([helper.make_node("Mul", ["X", "W"], ["Y"])], [fvi("X", [3, 2])],
                          [fvi("Y", [3, 2])], [w])
        sess = ort.InferenceSession(save(mul), providers=["CPUExecutionProvider"])
        x = np.array([[1, 2], [3, 4], [5, 6]], np.float32)
"""

_CONV_EXTERNAL = """
        import onnxruntime as ort
        rng = np.random.default_rng(0)
        big = numpy_helper.from_array(rng.standard_normal((4, 2, 3, 3)).astype(np.float32), "w_big")
        small = numpy_helper.from_array(np.array([0.5, -1, 2, 0], np.float32), "b_small")
        node = helper.make_node("Conv", ["X", "w_big", "b_small"], ["Y"], pads=[1, 1, 1, 1])
        conv = graph_model([node], [fvi("X", [1, 2, 5, 5])], [fvi("Y", [1, 4, 5, 5])], [big, small])
        path = save(conv, "conv.onnx", save_as_external_data=True, all_tensors_to_one_file=True,
                    location="conv.bin", size_threshold=64)
"""

SNIPPETS = {
    "native_run_with_ort_values": _MUL
    + """
        from onnxruntime.capi.onnxruntime_pybind11_state import OrtValueVector, RunOptions
        ov = ort.OrtValue.ortvalue_from_numpy(x)
        vect = sess._sess.run_with_ort_values({"X": ov._get_c_value()}, ["Y"], RunOptions())
        native = sess._sess
        result = [isinstance(vect, OrtValueVector), len(vect), vect[0].numpy(),
                  [a.name for a in native.inputs_meta], [a.name for a in native.outputs_meta],
                  native.get_providers()]
    """,
    "native_iobinding": _MUL
    + """
        from onnxruntime.capi._pybind_state import OrtDevice as C_OrtDevice, SessionIOBinding
        bind = SessionIOBinding(sess._sess)
        bind.bind_ortvalue_input("X", ort.OrtValue.ortvalue_from_numpy(x)._ortvalue)
        bind.bind_output("Y", C_OrtDevice(C_OrtDevice.cpu(), C_OrtDevice.default_memory(), 0))
        sess._sess.run_with_iobinding(bind, None)
        result = bind.get_outputs()[0].numpy()
    """,
    "hardware_devices": """
        from onnxruntime.capi.onnxruntime_pybind11_state import (
            OrtDeviceEpIncompatibilityReason as R, get_hardware_devices,
            get_hardware_device_ep_incompatibility_details)
        devices = get_hardware_devices()
        cpu = [d for d in devices if d.type.value == 0][0]
        details = get_hardware_device_ep_incompatibility_details("CPUExecutionProvider", cpu)
        result = [len(devices) > 0, sorted(details), details["reasons_bitmask"],
                  details["error_code"], [(k, m.value) for k, m in R.__members__.items()]]
    """,
    "hardware_details_unknown_provider": """
        from onnxruntime.capi.onnxruntime_pybind11_state import (
            get_hardware_devices, get_hardware_device_ep_incompatibility_details)
        get_hardware_device_ep_incompatibility_details("NoSuchExecutionProvider",
                                                       get_hardware_devices()[0])
    """,
    "compat_info_empty_bytes": """
        from onnxruntime.capi import onnxruntime_pybind11_state as C
        C.get_compatibility_info_from_model_bytes(b"", "TestEP")
    """,
    "compat_info_empty_ep": """
        from onnxruntime.capi import onnxruntime_pybind11_state as C
        C.get_compatibility_info_from_model_bytes(relu_model().SerializeToString(), "")
    """,
    "compat_info_bad_bytes": """
        from onnxruntime.capi import onnxruntime_pybind11_state as C
        C.get_compatibility_info_from_model_bytes(b"this is not a valid ONNX model", "TestEP")
    """,
    "compat_info_missing_file": """
        from onnxruntime.capi.onnxruntime_pybind11_state import get_compatibility_info_from_model
        get_compatibility_info_from_model(os.path.join(WORK, "nonexistent.onnx"), "TestEP")
    """,
    "compat_info_empty_path": """
        from onnxruntime.capi.onnxruntime_pybind11_state import get_compatibility_info_from_model
        get_compatibility_info_from_model("", "TestEP")
    """,
    "compat_info_file_empty_ep": """
        from onnxruntime.capi.onnxruntime_pybind11_state import get_compatibility_info_from_model
        get_compatibility_info_from_model(os.path.join(WORK, "nonexistent.onnx"), "")
    """,
    "compat_info_found": """
        from onnxruntime.capi.onnxruntime_pybind11_state import (
            get_compatibility_info_from_model_bytes)
        m = relu_model()
        helper.set_model_props(m, {"ep_compatibility_info.TestEP": "v1"})
        data = m.SerializeToString()
        result = [get_compatibility_info_from_model_bytes(data, "TestEP"),
                  get_compatibility_info_from_model_bytes(data, "OtherEP")]
    """,
    "model_compatibility_none_info": """
        from onnxruntime.capi.onnxruntime_pybind11_state import (
            get_ep_devices, get_model_compatibility_for_ep_devices)
        get_model_compatibility_for_ep_devices(get_ep_devices(), None)
    """,
    "sparse_buffers_read_only": """
        import onnxruntime as ort
        cpu = ort.OrtDevice.make("cpu", 0)
        values = np.array([1.0, 2.0, 3.0], np.float32)
        indices = np.array([3, 5, 15], np.int64)
        coo = ort.SparseTensor.sparse_coo_from_numpy([9, 9], values, indices, cpu)
        csr = ort.SparseTensor.sparse_csr_from_numpy(
            [9, 9], values, np.array([1, 1, 1], np.int64),
            np.array([0, 1, 2, 3, 3, 3, 3, 3, 3, 3], np.int64), cpu)
        strings = ort.SparseTensor.sparse_coo_from_numpy(
            [9, 9], np.array(["xyz", "yxz", "zyx"]), np.array([3, 5, 15], np.int64), cpu)
        view = csr.as_csrc_view()
        flags = [coo.values().flags.writeable, coo.as_coo_view().indices().flags.writeable,
                 view.inner().flags.writeable, view.outer().flags.writeable,
                 np.shares_memory(coo.values(), values)]
        via_value = ort.OrtValue.ort_value_from_sparse_tensor(coo).as_sparse_tensor()
        result = [flags, via_value.values().flags.writeable, coo.values(),
                  [str(s) for s in strings.values()]]
    """,
    "logger_callback_severity": _MUL
    + """
        messages = []
        ort.set_default_logger_callback(lambda *record: messages.append(record), severity=0)
        ort.InferenceSession(save(mul), providers=["CPUExecutionProvider"])
        kinds = sorted({tuple(type(f).__name__ for f in m) for m in messages})
        ort.set_default_logger_callback(None)
        ort.set_default_logger_severity(2)
        errors = []
        for args, kw in (((print,), {"severity": 5}), ((print,), {"severity": -1}),
                         (("not a callable",), {})):
            try:
                ort.set_default_logger_callback(*args, **kw)
                errors.append(None)
            except RuntimeError:
                errors.append("RuntimeError")
        ort.set_default_logger_callback(None)
        result = [len(messages) > 0, kinds, errors]
    """,
    "compile_to_stream_error": """
        import onnxruntime as ort
        from onnxruntime.capi.onnxruntime_pybind11_state import Fail
        compiler = ort.ModelCompiler(ort.SessionOptions(), save(relu_model()),
                                     embed_compiled_data_into_model=True)
        def write(data):
            raise ValueError("My Python Error")
        try:
            compiler.compile_to_stream(write)
            result = None
        except Fail as exc:
            result = ["My Python Error" in str(exc), "ValueError" in str(exc)]
    """,
    "initializer_location_func": _CONV_EXTERNAL
    + """
        seen = []
        store = os.path.join(WORK, "moved.bin")
        with open(store, "wb") as f:
            def place(name, value, info):
                where = None if info is None else (info.filepath, info.file_offset, info.byte_size)
                seen.append((name, value.tensor_size_in_bytes(), where))
                if name == "w_big":
                    offset = f.tell()
                    f.write(value.numpy().tobytes())
                    # relative to the compiled model: ortcore loads no absolute location
                    return ort.OrtExternalInitializerInfo("moved.bin", offset,
                                                          value.tensor_size_in_bytes())
                return None
            out = os.path.join(WORK, "conv_ctx.onnx")
            ort.ModelCompiler(ort.SessionOptions(), path, embed_compiled_data_into_model=True,
                              get_initializer_location_func=place).compile_to_file(out)
        compiled = onnx.load(out, load_external_data=False)
        where = {t.name: (t.data_location, {e.key: e.value for e in t.external_data})
                 for t in compiled.graph.initializer}
        x = np.random.default_rng(1).standard_normal((1, 2, 5, 5)).astype(np.float32)
        ran = ort.InferenceSession(out, providers=["CPUExecutionProvider"]).run(None, {"X": x})[0]
        ref = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"X": x})[0]
        result = [sorted(seen), where["w_big"][0], where["w_big"][1]["location"],
                  where["b_small"][0], np.array_equal(ran, ref)]
    """,
    "initializer_location_reuse": _CONV_EXTERNAL
    + """
        out = os.path.join(WORK, "conv_reuse.onnx")
        ort.ModelCompiler(ort.SessionOptions(), path, embed_compiled_data_into_model=True,
                          get_initializer_location_func=lambda n, v, i: i).compile_to_file(out)
        compiled = onnx.load(out, load_external_data=False)
        result = sorted((t.name, t.data_location, [(e.key, e.value) for e in t.external_data])
                        for t in compiled.graph.initializer)
    """,
    "external_data_outside_model_folder": """
        import onnxruntime as ort
        import struct
        os.makedirs(os.path.join(WORK, "model"))
        os.makedirs(os.path.join(WORK, "data"))
        os.makedirs(os.path.join(WORK, "snap"))
        with open(os.path.join(WORK, "data", "blob"), "wb") as f:
            f.write(struct.pack("10f", *range(10)))
        t = helper.make_tensor("c", TensorProto.FLOAT, [10], [0.0] * 10)
        t.ClearField("float_data")
        t.data_location = TensorProto.EXTERNAL
        for k, v in (("location", "data.bin"), ("offset", "0"), ("length", "40")):
            e = t.external_data.add()
            e.key, e.value = k, v
        add = helper.make_node("Add", ["X", "c"], ["Y"])
        m = graph_model([add], [fvi("X", [10])], [fvi("Y", [10])], [t])
        onnx.save(m, os.path.join(WORK, "model", "blob"))
        os.symlink(os.path.join(WORK, "model", "blob"), os.path.join(WORK, "snap", "model.onnx"))
        os.symlink(os.path.join(WORK, "data", "blob"), os.path.join(WORK, "snap", "data.bin"))
        try:
            ort.InferenceSession(os.path.join(WORK, "snap", "model.onnx"),
                                 providers=["CPUExecutionProvider"])
            result = None
        except Exception as exc:
            result = "External data path validation failed" in str(exc)
    """,
}


def test_native_session_runs(results: Results) -> None:
    ok, count, y, inputs, outputs, providers = results.ok("native_run_with_ort_values")
    assert ok and count == 1 and inputs == ["X"] and outputs == ["Y"]
    assert y.tolist() == [[1, 4], [9, 16], [25, 36]]
    assert providers == ["CPUExecutionProvider"]
    same(results.ours["native_run_with_ort_values"], results.theirs("native_run_with_ort_values"))


def test_native_iobinding(results: Results) -> None:
    assert results.ok("native_iobinding").tolist() == [[1, 4], [9, 16], [25, 36]]
    same(results.ours["native_iobinding"], results.theirs("native_iobinding"))


def test_hardware_devices(results: Results) -> None:
    found, keys, reasons, code, members = results.ok("hardware_devices")
    assert found and keys == ["error_code", "notes", "reasons_bitmask"] and reasons == code == 0
    assert ("UNKNOWN", -2147483648) in members
    same(results.ours["hardware_devices"], results.theirs("hardware_devices"))
    name = "hardware_details_unknown_provider"
    assert "No valid factory found" in results.raised(name)[1]
    same(results.ours[name], results.theirs(name))


def test_compatibility_info_errors(results: Results) -> None:
    for name in (
        "compat_info_empty_bytes",
        "compat_info_empty_ep",
        "compat_info_bad_bytes",
        "compat_info_missing_file",
        "compat_info_empty_path",
        "compat_info_file_empty_ep",
        "model_compatibility_none_info",
    ):
        assert results.raised(name)[0], name
        same(results.ours[name], results.theirs(name))
    assert "RuntimeError" in results.raised("compat_info_missing_file")[2]
    assert results.ok("compat_info_found") == ["v1", None]
    same(results.ours["compat_info_found"], results.theirs("compat_info_found"))


def test_sparse_buffers_are_read_only(results: Results) -> None:
    flags, via_value, values, strings = results.ok("sparse_buffers_read_only")
    assert flags == [False, False, False, False, True] and via_value is False
    assert values.tolist() == [1, 2, 3] and strings == ["xyz", "yxz", "zyx"]
    same(results.ours["sparse_buffers_read_only"], results.theirs("sparse_buffers_read_only"))


def test_logger_callback_severity(results: Results) -> None:
    got, kinds, errors = results.ok("logger_callback_severity")
    assert got and kinds == [("int", "str", "str", "str", "str")]
    assert errors == ["RuntimeError"] * 3
    same(results.ours["logger_callback_severity"], results.theirs("logger_callback_severity"))


def test_compile_to_stream_error(results: Results) -> None:
    assert results.ok("compile_to_stream_error") == [True, True]
    same(results.ours["compile_to_stream_error"], results.theirs("compile_to_stream_error"))


def test_initializer_location_func(results: Results) -> None:
    seen, big_where, moved, small_where, ran = results.ok("initializer_location_func")
    assert ("w_big", 288, ("conv.bin", 0, 288)) in seen and ("b_small", 16, None) in seen
    assert (big_where, moved, small_where, ran) == (1, "moved.bin", 0, True)
    same(results.ours["initializer_location_func"], results.theirs("initializer_location_func"))
    reused = dict((n, (loc, ext)) for n, loc, ext in results.ok("initializer_location_reuse"))
    assert reused["w_big"] == (1, [("location", "conv.bin"), ("offset", "0"), ("length", "288")])
    same(results.ours["initializer_location_reuse"], results.theirs("initializer_location_reuse"))


def test_refused_external_data_words(results: Results) -> None:
    assert results.ok("external_data_outside_model_folder") is True
    same(
        results.ours["external_data_outside_model_folder"],
        results.theirs("external_data_outside_model_folder"),
    )
