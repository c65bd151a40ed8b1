"""onnxruntime's ``capi`` package path, for code that imports from it:
``onnxruntime_pybind11_state`` / ``_pybind_state`` (exceptions, options,
devices) and ``onnxruntime_inference_collection`` (sessions, values)."""
