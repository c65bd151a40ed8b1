"""onnxruntime's ``capi`` package path, for code that imports exceptions from it."""
