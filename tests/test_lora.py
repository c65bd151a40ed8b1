"""LoRA adapter files and adapters: files written by onnxruntime read by
ortcore and the other way round, parameters shared without copies (memory
map to run), hostile files refused with onnxruntime's error, and what the
writer refuses. The run semantics against onnxruntime are in
``tests/compat/test_lora.py``."""

from __future__ import annotations

import struct
from pathlib import Path

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import ortcore
from ortcore.adapter_format import AdapterContents, decode_adapter, encode_adapter
from ortcore.lora import adapter_feeds, with_adapters

PARAMS = {
    "f32": (np.arange(12, dtype=np.float32).reshape(3, 4) - 5.5, 1),
    "f16": (np.array([[1.5, -2.0, 65504.0]], np.float16), 10),
    "f64": (np.linspace(-1, 1, 5).reshape(5, 1), 11),
    "i8": (np.array([[-128, 0, 127]], np.int8), 3),
    "u16": (np.array([[1, 65535]], np.uint16), 4),
    "i64": (np.arange(6, dtype=np.int64).reshape(1, 2, 3) - 3, 7),
    "bf16": (np.array([[1.5, -3.0]], ml_dtypes.bfloat16), 16),
    "empty": (np.zeros((0, 4), np.float32), 1),
}


def _ort() -> object:
    return pytest.importorskip("onnxruntime")


def _assert_same(got: np.ndarray, want: np.ndarray) -> None:
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_array_equal(got.view(np.uint8), np.ascontiguousarray(want).view(np.uint8))


def test_onnxruntime_file_read_by_ortcore(tmp_path: Path) -> None:
    ort = _ort()
    fmt = ort.AdapterFormat()  # type: ignore[attr-defined]
    fmt.set_adapter_version(4)
    fmt.set_model_version(9)
    values = {}
    for name, (arr, num) in PARAMS.items():
        if num == 16:  # onnxruntime takes bfloat16 as its bits
            values[name] = ort.OrtValue.ortvalue_from_numpy_with_onnx_type(arr.view(np.uint16), 16)  # type: ignore[attr-defined]
        else:
            values[name] = ort.OrtValue.ortvalue_from_numpy(arr)  # type: ignore[attr-defined]
    fmt.set_parameters(values)
    path = tmp_path / "ort.onnx_adapter"
    fmt.export_adapter(str(path))

    back = ortcore.AdapterFormat.read_adapter(path)
    assert (back.get_format_version(), back.get_adapter_version(), back.get_model_version()) == (
        1,
        4,
        9,
    )
    got = back.get_parameters()
    assert sorted(got) == sorted(PARAMS)
    for name, (arr, num) in PARAMS.items():
        assert got[name].element_type() == num
        _assert_same(got[name].numpy(), arr)
    adapter = ortcore.LoraAdapter()
    adapter.Load(path)
    for name, (arr, _) in PARAMS.items():
        _assert_same(adapter.parameters()[name], arr)


def test_ortcore_file_read_by_onnxruntime(tmp_path: Path) -> None:
    ort = _ort()
    fmt = ortcore.AdapterFormat()
    fmt.set_adapter_version(2)
    fmt.set_model_version(5)
    fmt.set_parameters({k: ortcore.OrtValue.ortvalue_from_numpy(a) for k, (a, _) in PARAMS.items()})
    path = tmp_path / "ortcore.onnx_adapter"
    fmt.export_adapter(path)

    back = ort.AdapterFormat.read_adapter(str(path))  # type: ignore[attr-defined]
    assert (back.get_adapter_version(), back.get_model_version()) == (2, 5)
    got = back.get_parameters()
    assert sorted(got) == sorted(PARAMS)
    for name, (arr, num) in PARAMS.items():
        assert got[name].element_type() == num
        assert got[name].shape() == list(arr.shape)
        if num != 16:  # onnxruntime's OrtValue.numpy() has no bfloat16
            _assert_same(got[name].numpy(), arr)
    ort.LoraAdapter().Load(str(path))  # type: ignore[attr-defined]


def test_runs_match_onnxruntime_with_a_random_adapter(tmp_path: Path) -> None:
    ort = _ort()
    rng = np.random.default_rng(56)
    d, r = 16, 4
    w = helper.make_tensor("W", TensorProto.FLOAT, [d, d], rng.standard_normal(d * d))
    a0 = helper.make_tensor("A", TensorProto.FLOAT, [d, 0], [])
    b0 = helper.make_tensor("B", TensorProto.FLOAT, [0, d], [])
    nodes = [
        helper.make_node("MatMul", ["x", "W"], ["xw"]),
        helper.make_node("MatMul", ["x", "A"], ["xa"]),
        helper.make_node("MatMul", ["xa", "B"], ["xab"]),
        helper.make_node("Add", ["xw", "xab"], ["y"]),
    ]
    inputs = [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", d]),
        helper.make_tensor_value_info("A", TensorProto.FLOAT, [d, "r"]),
        helper.make_tensor_value_info("B", TensorProto.FLOAT, ["r", d]),
    ]
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", d])
    model = helper.make_model(
        helper.make_graph(nodes, "lora", inputs, [out], [w, a0, b0]),
        opset_imports=[helper.make_opsetid("", 17)],
    )
    model.ir_version = 8
    model_path = tmp_path / "m.onnx"
    onnx.save(model, model_path)
    fmt = ortcore.AdapterFormat()
    fmt.set_parameters(
        {
            "A": rng.standard_normal((d, r)).astype(np.float32),
            "B": rng.standard_normal((r, d)).astype(np.float32),
        }
    )
    adapter_path = tmp_path / "m.onnx_adapter"
    fmt.export_adapter(adapter_path)
    x = rng.standard_normal((3, d)).astype(np.float32)

    ours, theirs = ortcore.LoraAdapter(), ort.LoraAdapter()  # type: ignore[attr-defined]
    ours.Load(adapter_path)
    theirs.Load(str(adapter_path))
    ro1, ro2 = ortcore.RunOptions(), ort.RunOptions()  # type: ignore[attr-defined]
    ro1.add_active_adapter(ours)
    ro2.add_active_adapter(theirs)
    s1 = ortcore.InferenceSession(model_path, providers=["CPUExecutionProvider"])
    s2 = ort.InferenceSession(str(model_path), providers=["CPUExecutionProvider"])  # type: ignore[attr-defined]
    y1 = s1.run(None, {"x": x}, ro1)[0]
    y2 = s2.run(None, {"x": x}, ro2)[0]
    np.testing.assert_allclose(y1, y2, rtol=1e-5, atol=1e-5)
    base = s1.run(None, {"x": x})[0]
    assert not np.allclose(base, y1)  # the adapter changed the result


def test_loaded_parameters_are_views_of_the_mapped_file(tmp_path: Path) -> None:
    fmt = ortcore.AdapterFormat()
    fmt.set_parameters({k: a for k, (a, _) in PARAMS.items()})
    path = tmp_path / "a.onnx_adapter"
    fmt.export_adapter(path)
    adapter = ortcore.LoraAdapter()
    adapter.Load(path)
    params = adapter.parameters()
    for name, arr in params.items():
        assert not arr.flags.writeable, name  # the map is read-only
        assert arr.flags.aligned and arr.flags.c_contiguous, name
        root = arr
        while isinstance(root.base, np.ndarray):
            root = root.base
        owner = root.base.obj if isinstance(root.base, memoryview) else root.base
        assert type(owner).__name__ == "mmap", (name, type(owner))

    ro = ortcore.RunOptions()
    ro.add_active_adapter(adapter)
    feeds = adapter_feeds(ro)
    assert all(feeds[k] is params[k] for k in params)  # fed as they are: no copy


def test_run_feeds_the_mapped_arrays_without_copy(tmp_path: Path) -> None:
    a = helper.make_tensor("A", TensorProto.FLOAT, [2, 2], [0, 0, 0, 0])
    model = helper.make_model(
        helper.make_graph(
            [helper.make_node("Add", ["x", "A"], ["y"])],
            "g",
            [
                helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 2]),
                helper.make_tensor_value_info("A", TensorProto.FLOAT, [2, 2]),
            ],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 2])],
            [a],
        ),
        opset_imports=[helper.make_opsetid("", 17)],
    )
    model.ir_version = 8
    sess = ortcore.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    fmt = ortcore.AdapterFormat()
    fmt.set_parameters({"A": np.full((2, 2), 3, np.float32)})
    path = tmp_path / "a.onnx_adapter"
    fmt.export_adapter(path)
    adapter = ortcore.LoraAdapter()
    adapter.Load(path)
    ro = ortcore.RunOptions()
    ro.add_active_adapter(adapter)
    x = np.ones((2, 2), np.float32)
    prepared = sess._feeds.prepare(with_adapters(sess._feeds, {"x": x}, ro))
    assert any(p is adapter.parameters()["A"] for p in prepared)
    np.testing.assert_array_equal(sess.run(None, {"x": x}, ro)[0], np.full((2, 2), 4))


def test_written_data_is_aligned_for_views() -> None:
    data = encode_adapter(AdapterContents(1, 0, 0, dict(PARAMS)))
    back = decode_adapter(data)
    base = np.frombuffer(data, np.uint8)
    for name, (arr, num) in back.parameters.items():
        assert num == PARAMS[name][1]
        if arr.size:
            assert np.shares_memory(arr, base), name  # a view, not a copy
            assert arr.__array_interface__["data"][0] % 8 == 0, name


def test_every_truncation_is_refused() -> None:
    data = encode_adapter(AdapterContents(1, 3, 4, {"p": (np.ones((2, 3), np.float32), 1)}))
    for n in range(len(data)):
        with pytest.raises(ortcore.InvalidArgumentRuntimeError):
            decode_adapter(data[:n])


def test_corrupted_bytes_raise_only_the_format_error() -> None:
    data = bytearray(encode_adapter(AdapterContents(1, 3, 4, dict(PARAMS))))
    rng = np.random.default_rng(0)
    refused = 0
    for _ in range(400):
        bad = bytearray(data)
        for at in rng.integers(8, len(bad), size=3):
            bad[at] = int(rng.integers(0, 256))
        try:
            decode_adapter(bytes(bad))
        except ortcore.InvalidArgumentRuntimeError:
            refused += 1
    assert refused > 0  # some of the flips hit offsets and lengths


def test_wrong_identifier_and_bad_sizes() -> None:
    good = encode_adapter(AdapterContents(1, 0, 0, {"p": (np.ones((2, 2), np.float32), 1)}))
    with pytest.raises(ortcore.InvalidArgumentRuntimeError, match="valid lora parameter format"):
        decode_adapter(good[:4] + b"XXXX" + good[8:])
    # the data vector says 16 bytes; claim a [2, 3] tensor instead
    dims_at = good.index(struct.pack("<2q", 2, 2))
    bad = good[:dims_at] + struct.pack("<2q", 2, 3) + good[dims_at + 16 :]
    with pytest.raises(ortcore.InvalidArgumentRuntimeError, match=r"'p'.*16 bytes"):
        decode_adapter(bad)
    negative = good[:dims_at] + struct.pack("<2q", -2, -2) + good[dims_at + 16 :]
    with pytest.raises(ortcore.InvalidArgumentRuntimeError, match="'p'"):
        decode_adapter(negative)


def test_writer_refuses_what_readers_refuse(tmp_path: Path) -> None:
    fmt = ortcore.AdapterFormat()
    with pytest.raises(ortcore.InvalidArgumentRuntimeError, match=r"'s'.*not a supported"):
        fmt.set_parameters({"s": np.array([["a"]])})
    with pytest.raises(ortcore.InvalidArgumentRuntimeError, match=r"'b'.*not a supported"):
        fmt.set_parameters({"b": np.array([[True]])})
    with pytest.raises(ortcore.InvalidArgumentRuntimeError, match=r"'c'.*not a supported"):
        fmt.set_parameters({"c": np.ones((1, 1), np.complex64)})
    with pytest.raises(ortcore.InvalidArgumentRuntimeError, match=r"'x'.*scalar"):
        fmt.set_parameters({"x": np.float32(1.0)})
    with pytest.raises(ortcore.InvalidArgumentTypeError):
        fmt.set_adapter_version("1")  # type: ignore[arg-type]
    with pytest.raises(ortcore.InvalidArgumentTypeError):
        fmt.set_parameters([("p", np.ones(1))])  # type: ignore[arg-type]
    with pytest.raises(ortcore.InvalidArgumentRuntimeError, match="cannot write"):
        ortcore.AdapterFormat().export_adapter(tmp_path / "no_dir" / "a.onnx_adapter")


def test_big_endian_parameters_are_written_little_endian(tmp_path: Path) -> None:
    arr = np.arange(6, dtype=">f4").reshape(2, 3)
    back = decode_adapter(encode_adapter(AdapterContents(1, 0, 0, {"p": (arr, 1)})))
    got, num = back.parameters["p"]
    assert num == 1
    np.testing.assert_array_equal(got, arr)
    assert got.dtype.byteorder in "<="


def test_empty_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "empty.onnx_adapter"
    path.write_bytes(b"")
    with pytest.raises(ortcore.InvalidArgumentRuntimeError, match="valid lora parameter format"):
        ortcore.LoraAdapter().Load(path)
    assert "not loaded" in repr(ortcore.LoraAdapter())
