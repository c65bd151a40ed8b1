"""Model loading against big and hostile models: external data over 2 GiB,
references past the end of their file, tensor data of the wrong size,
opsets newer than onnx knows."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from onnx import TensorProto, helper, numpy_helper

import ortcore
from ortcore import tensor_data
from ortcore.external_data import PinnedTensor
from ortcore.model import LoadOptions, load_model
from ortcore.optimizer import eliminate_common_subexpressions

from .conftest import fvi, make_model, no_fallback

X = np.array([[1.0, -2.0, 3.0], [-4.0, 5.0, -6.0]], np.float32)
W = np.arange(6, dtype=np.float32).reshape(2, 3)


def _run_mini(model: bytes | str, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    sess = ortcore.InferenceSession(model, no_fallback(), providers=["mini"])
    return sess.run(None, feeds)


def _external(
    t: TensorProto, location: str, offset: int | None = 0, length: int | None = None
) -> TensorProto:
    """Mark ``t`` as stored at ``location`` (dropping its own data)."""
    for field in ("raw_data", "float_data", "int64_data", "int32_data"):
        t.ClearField(field)
    t.data_location = TensorProto.EXTERNAL
    del t.external_data[:]
    entries = [("location", location)]
    if offset is not None:
        entries.append(("offset", str(offset)))
    if length is not None:
        entries.append(("length", str(length)))
    for key, value in entries:
        t.external_data.add(key=key, value=value)
    return t


def _add_w_model(w: TensorProto) -> onnx.ModelProto:
    """y = x + w, x and w of shape (2, 3)."""
    return onnx.load_from_string(
        make_model(
            [helper.make_node("Add", ["x", "w"], ["y"], name="add_w")],
            [fvi("x", [2, 3])],
            [fvi("y", [2, 3])],
            initializers=[w],
        )
    )


def _save_with_external_w(folder: Path, data: bytes, **ref: int | None) -> Path:
    """``m.onnx`` in ``folder`` whose initializer ``w`` (2x3 float) lives in ``w.bin``."""
    (folder / "w.bin").write_bytes(data)
    w = _external(numpy_helper.from_array(W, "w"), "w.bin", **ref)
    path = folder / "m.onnx"
    path.write_bytes(_add_w_model(w).SerializeToString())
    return path


# -- external data over 2 GiB ---------------------------------------------------------

_BIG_SCRIPT = textwrap.dedent(
    """
    import json, os, sys, time
    from pathlib import Path
    import numpy as np
    from onnx import TensorProto, helper

    def peak_kib():
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])

    folder = Path(sys.argv[1])
    rows, cols = 200 * 1024, 1024  # 800 MiB of float32 per initializer
    per = rows * cols * 4
    names = ["w0", "w1", "w2"]
    data = folder / "weights.bin"
    marked = {0: 1.0, 7: 2.0, rows - 1: 3.0}  # rows with data; the rest are holes
    with open(data, "wb") as f:
        f.truncate(per * len(names))
        for k in range(len(names)):
            for r, v in marked.items():
                f.seek(k * per + r * cols * 4)
                f.write(np.full(cols, v * (k + 1), np.float32).tobytes())
    if os.stat(data).st_blocks * 512 > 256 << 20:
        print(json.dumps({"skip": "the file system does not keep files sparse"}))
        sys.exit(0)
    inits = []
    for k, name in enumerate(names):
        t = TensorProto(name=name, data_type=TensorProto.FLOAT, dims=[rows, cols])
        t.data_location = TensorProto.EXTERNAL
        for key, value in (("location", "weights.bin"), ("offset", str(k * per)),
                           ("length", str(per))):
            t.external_data.add(key=key, value=value)
        inits.append(t)
    inits.append(helper.make_tensor("starts", TensorProto.INT64, [2], [rows - 2, 0]))
    inits.append(helper.make_tensor("ends", TensorProto.INT64, [2], [rows, cols]))
    nodes = [
        helper.make_node("Gather", ["w0", "idx"], ["g0"]),
        helper.make_node("Gather", ["w1", "idx"], ["g1"]),
        helper.make_node("Add", ["g0", "g1"], ["y"]),
        helper.make_node("Slice", ["w2", "starts", "ends"], ["s2"]),
        helper.make_node("Add", ["x", "s2"], ["z"]),
    ]
    graph = helper.make_graph(
        nodes, "big",
        [helper.make_tensor_value_info("idx", TensorProto.INT64, [3]),
         helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, cols])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, cols]),
         helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, cols])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = folder / "big.onnx"
    path.write_bytes(model.SerializeToString())

    import ortcore

    before = peak_kib()
    t0 = time.perf_counter()
    sess = ortcore.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    t1 = time.perf_counter()
    idx = np.array([0, 7, rows - 1], np.int64)
    y, z = sess.run(None, {"idx": idx, "x": np.ones((2, cols), np.float32)})
    t2 = time.perf_counter()
    print(json.dumps({
        "external_bytes": per * len(names),
        "disk_bytes": os.stat(data).st_blocks * 512,
        "peak_growth_bytes": (peak_kib() - before) * 1024,
        "load_s": t1 - t0,
        "run_s": t2 - t1,
        "y": y[:, ::100].tolist(),
        "z": z[:, ::100].tolist(),
    }))
    """
)


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs Linux /proc")
def test_external_data_over_2gib_loads_lazily_and_runs(tmp_path: Path, cpu: str) -> None:
    """2.4 GiB of external data (a sparse file): loads in seconds, and only the
    rows the model reads are ever touched (onnxruntime: 0.7 s, 79 MB)."""
    proc = subprocess.run(
        [sys.executable, "-c", _BIG_SCRIPT, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    if "skip" in report:
        pytest.skip(report["skip"])
    assert report["external_bytes"] > 2 << 30
    cols = 1024 // 100 + 1
    # y = w0[idx] + w1[idx]: rows 0, 7, last hold 1, 2, 3 times (k + 1).
    assert report["y"] == [[3.0] * cols, [6.0] * cols, [9.0] * cols]
    # z = 1 + w2[-2:]: the second-to-last row is a hole (zeros), the last holds 9.
    assert report["z"] == [[1.0] * cols, [10.0] * cols]
    assert report["peak_growth_bytes"] < 512 << 20, report
    assert report["load_s"] < 60, report


# -- external references and their files ------------------------------------------------


@pytest.mark.parametrize("limit", [None, 0], ids=["read-in", "mapped"])
def test_external_tensor_stays_an_external_tensor(tmp_path: Path, limit: int | None) -> None:
    """Read in (under the default limit) or mapped, an external tensor keeps
    its reference (saving writes it as external data) and is read-only."""
    big = np.arange(64 * 64, dtype=np.float32).reshape(64, 64)  # 16 KiB: not read into the proto
    (tmp_path / "w.bin").write_bytes(big.tobytes())
    w = _external(numpy_helper.from_array(big, "w"), "w.bin", length=big.nbytes)
    path = tmp_path / "m.onnx"
    path.write_bytes(
        make_model(
            [helper.make_node("Add", ["x", "w"], ["y"])],
            [fvi("x", [64, 64])],
            [fvi("y", [64, 64])],
            initializers=[w],
        )
    )
    model = load_model(path, LoadOptions(external_data_read_in_bytes=limit))
    tensor = model.graph.initializers["w"].const_value
    assert isinstance(tensor, PinnedTensor) and isinstance(tensor, ir.ExternalTensor)
    assert tensor.mapped == (limit == 0)
    assert Path(tensor.base_dir) == tmp_path.resolve()
    array = tensor.numpy()
    assert not array.flags.writeable
    np.testing.assert_array_equal(array, big)
    x = np.ones((64, 64), np.float32)
    (y,) = _run_mini(str(path), {"x": x})
    np.testing.assert_array_equal(y, x + big)


def test_external_data_in_a_subgraph_runs(tmp_path: Path) -> None:
    big = np.full((2, 300), 2.0, np.float32)  # 2.4 KiB, rank 2: stays external
    (tmp_path / "then.bin").write_bytes(big.tobytes())
    then_w = _external(numpy_helper.from_array(big, "then_w"), "then.bin")
    then_g = helper.make_graph(
        [helper.make_node("Add", ["x", "then_w"], ["then_out"])],
        "then_g",
        [],
        [fvi("then_out", [2, 300])],
        [then_w],
    )
    else_g = helper.make_graph(
        [helper.make_node("Neg", ["x"], ["else_out"])], "else_g", [], [fvi("else_out", [2, 300])]
    )
    node = helper.make_node("If", ["cond"], ["y"], then_branch=then_g, else_branch=else_g)
    path = tmp_path / "m.onnx"
    path.write_bytes(
        make_model(
            [node], [fvi("cond", [], TensorProto.BOOL), fvi("x", [2, 300])], [fvi("y", [2, 300])]
        )
    )
    x = np.ones((2, 300), np.float32)
    (y,) = _run_mini(str(path), {"cond": np.array(True), "x": x})
    np.testing.assert_array_equal(y, x + big)


def test_constant_attribute_in_external_data_runs(tmp_path: Path, cpu: str) -> None:
    big = np.arange(2 * 300, dtype=np.float32).reshape(2, 300)
    (tmp_path / "c.bin").write_bytes(big.tobytes())
    value = _external(numpy_helper.from_array(big, "c"), "c.bin", length=big.nbytes)
    nodes = [
        helper.make_node("Constant", [], ["c"], value=value, name="const"),
        helper.make_node("Add", ["x", "c"], ["y"], name="add"),
    ]
    path = tmp_path / "m.onnx"
    path.write_bytes(make_model(nodes, [fvi("x", [2, 300])], [fvi("y", [2, 300])]))
    sess = ortcore.InferenceSession(str(path), providers=[cpu])
    x = np.ones((2, 300), np.float32)
    np.testing.assert_array_equal(sess.run(None, {"x": x})[0], x + big)


def test_cse_merges_external_constants_without_reading_them(tmp_path: Path) -> None:
    big = np.arange(2 * 300, dtype=np.float32).reshape(2, 300)
    (tmp_path / "c.bin").write_bytes(big.tobytes())
    nodes = [
        helper.make_node(
            "Constant", [], [out], value=_external(numpy_helper.from_array(big, "c"), "c.bin")
        )
        for out in ("c1", "c2")
    ]
    nodes.append(helper.make_node("Add", ["c1", "c2"], ["y"]))
    path = tmp_path / "m.onnx"
    path.write_bytes(make_model(nodes, [], [fvi("y", [2, 300])]))
    model = load_model(path)
    assert eliminate_common_subexpressions(model.graph) == 1
    (const, _) = list(model.graph)
    tensor = const.attributes["value"].value
    assert isinstance(tensor, ir.ExternalTensor) and tensor.raw is None  # never mapped


def test_external_shape_tensor_feeds_shape_inference(tmp_path: Path, cpu: str) -> None:
    """Shape inference reads a Reshape's shape; a small external one is read in."""
    shape = np.array([3, 2], np.int64)
    (tmp_path / "s.bin").write_bytes(shape.tobytes())
    s = _external(numpy_helper.from_array(shape, "shape"), "s.bin")
    path = tmp_path / "m.onnx"
    path.write_bytes(
        make_model(
            [helper.make_node("Reshape", ["x", "shape"], ["y"])],
            [fvi("x", [2, 3])],
            [fvi("y", None)],
            initializers=[s],
        )
    )
    model = load_model(path)
    assert model.graph.outputs[0].shape == ir.Shape([3, 2])
    sess = ortcore.InferenceSession(str(path), providers=[cpu])
    np.testing.assert_array_equal(sess.run(None, {"x": X})[0], X.reshape(3, 2))


@pytest.mark.parametrize(
    ("ref", "data_len", "needs"),
    [
        ({"offset": 0, "length": 24}, 20, "24 bytes at offset 0"),
        ({"offset": 8, "length": 24}, 24, "24 bytes at offset 8"),
        ({"offset": 16, "length": None}, 24, "24 bytes at offset 16"),
        ({"offset": 100, "length": None}, 24, "offset 100"),
    ],
    ids=["length-past-end", "offset-plus-length-past-end", "implied-length", "offset-past-end"],
)
def test_external_data_past_the_end_of_its_file_is_refused(
    tmp_path: Path, ref: dict[str, int | None], data_len: int, needs: str
) -> None:
    path = _save_with_external_w(tmp_path, W.tobytes()[:data_len].ljust(data_len, b"\0"), **ref)
    with pytest.raises(ortcore.InvalidArgument) as info:
        ortcore.InferenceSession(str(path), providers=["mini"])
    message = str(info.value)
    assert "'w'" in message and "'w.bin'" in message
    assert needs in message and f"holds {data_len} bytes" in message


def test_external_length_other_than_the_tensor_needs_is_invalid_graph(tmp_path: Path) -> None:
    path = _save_with_external_w(tmp_path, W.tobytes() + b"\0" * 8, length=28)
    with pytest.raises(ortcore.InvalidGraph, match=r"'w'.*declares 28 bytes.*need 24 bytes"):
        ortcore.InferenceSession(str(path), providers=["mini"])


@pytest.mark.parametrize("offset", ["-4", "abc"])
def test_external_offset_not_a_non_negative_integer_is_invalid_graph(
    tmp_path: Path, offset: str
) -> None:
    path = _save_with_external_w(tmp_path, W.tobytes())
    model = onnx.load(str(path), load_external_data=False)
    entry = next(e for e in model.graph.initializer[0].external_data if e.key == "offset")
    entry.value = offset
    path.write_bytes(model.SerializeToString())
    with pytest.raises(ortcore.InvalidGraph, match=rf"'w'.*offset '{offset}'"):
        ortcore.InferenceSession(str(path), providers=["mini"])


def test_unknown_external_data_keys_are_ignored(tmp_path: Path) -> None:
    path = _save_with_external_w(tmp_path, W.tobytes())
    model = onnx.load(str(path), load_external_data=False)
    model.graph.initializer[0].external_data.add(key="__class__", value="boom")
    path.write_bytes(model.SerializeToString())
    (y,) = _run_mini(str(path), {"x": X})
    np.testing.assert_array_equal(y, X + W)


def test_hard_linked_external_data_file_is_refused(tmp_path: Path) -> None:
    path = _save_with_external_w(tmp_path, W.tobytes())
    try:
        os.link(tmp_path / "w.bin", tmp_path / "other.bin")
    except OSError:
        pytest.skip("hard links not supported")
    with pytest.raises(ortcore.InvalidArgument, match=r"'w.bin'.*hard links"):
        ortcore.InferenceSession(str(path), providers=["mini"])


def test_checker_still_runs_on_a_model_with_external_data(tmp_path: Path) -> None:
    path = _save_with_external_w(tmp_path, W.tobytes())
    model = onnx.load(str(path), load_external_data=False)
    model.graph.node[0].input[0] = "ghost"
    path.write_bytes(model.SerializeToString())
    with pytest.raises(ortcore.InvalidGraph, match="ghost"):
        ortcore.InferenceSession(str(path), providers=["mini"])


# -- saving an optimized model with external data ----------------------------------------


def _big_w_model(folder: Path) -> tuple[Path, np.ndarray]:
    big = np.arange(64 * 64, dtype=np.float32).reshape(64, 64)
    (folder / "w.bin").write_bytes(big.tobytes())
    w = _external(numpy_helper.from_array(big, "w"), "w.bin")
    path = folder / "m.onnx"
    path.write_bytes(
        make_model(
            [helper.make_node("Add", ["x", "w"], ["y"])],
            [fvi("x", [64, 64])],
            [fvi("y", [64, 64])],
            initializers=[w],
        )
    )
    return path, big


def test_optimized_model_with_external_data_writes_its_own_data_file(tmp_path: Path) -> None:
    path, big = _big_w_model(tmp_path)
    out_dir = tmp_path / "elsewhere"
    out_dir.mkdir()
    so = no_fallback()
    so.optimized_model_filepath = str(out_dir / "opt.onnx")
    ortcore.InferenceSession(str(path), so, providers=["mini"])
    assert (out_dir / "opt.onnx.data").stat().st_size == big.nbytes
    saved = onnx.load(str(out_dir / "opt.onnx"), load_external_data=False)
    assert saved.graph.initializer[0].data_location == TensorProto.EXTERNAL
    x = np.ones((64, 64), np.float32)
    (y,) = _run_mini(str(out_dir / "opt.onnx"), {"x": x})
    np.testing.assert_array_equal(y, x + big)


def test_optimized_model_may_not_overwrite_the_data_it_reads(tmp_path: Path) -> None:
    path, _ = _big_w_model(tmp_path)
    (tmp_path / "w.bin").rename(tmp_path / "opt.onnx.data")
    model = onnx.load(str(path), load_external_data=False)
    model.graph.initializer[0].external_data[0].value = "opt.onnx.data"
    path.write_bytes(model.SerializeToString())
    so = no_fallback()
    so.optimized_model_filepath = str(tmp_path / "opt.onnx")
    with pytest.raises(ortcore.InvalidArgument, match=r"opt.onnx.data.*'w'"):
        ortcore.InferenceSession(str(path), so, providers=["mini"])


def test_optimized_model_reads_in_small_and_attribute_external_tensors(
    tmp_path: Path, cpu: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A small external initializer (kept external here) and an external
    Constant value are written inline; the saved model needs no other file."""
    monkeypatch.setattr(tensor_data, "SMALL_EXTERNAL_BUDGET", 0)
    big = np.arange(2 * 200, dtype=np.float32).reshape(2, 200)
    small = np.arange(200, dtype=np.float32)  # 800 bytes
    (tmp_path / "c.bin").write_bytes(big.tobytes())
    (tmp_path / "s.bin").write_bytes(small.tobytes())
    value = _external(numpy_helper.from_array(big, "c"), "c.bin")
    s = _external(numpy_helper.from_array(small, "s"), "s.bin")
    nodes = [
        helper.make_node("Constant", [], ["c"], value=value, name="const"),
        helper.make_node("Add", ["x", "c"], ["t"], name="add_c"),
        helper.make_node("Add", ["t", "s"], ["y"], name="add_s"),
    ]
    path = tmp_path / "m.onnx"
    path.write_bytes(
        make_model(nodes, [fvi("x", [2, 200])], [fvi("y", [2, 200])], initializers=[s])
    )
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    so = ortcore.SessionOptions()
    so.graph_optimization_level = ortcore.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.optimized_model_filepath = str(out_dir / "opt.onnx")
    sess = ortcore.InferenceSession(str(path), so, providers=[cpu])
    model = load_model(path)
    assert isinstance(model.graph.initializers["s"].const_value, ir.ExternalTensor)
    saved = onnx.load(str(out_dir / "opt.onnx"), load_external_data=False)
    assert not any(t.data_location == TensorProto.EXTERNAL for t in saved.graph.initializer)
    x = np.ones((2, 200), np.float32)
    (want,) = sess.run(None, {"x": x})
    np.testing.assert_array_equal(want, x + big + small)
    for f in (tmp_path / "c.bin", tmp_path / "s.bin"):
        f.unlink()
    again = ortcore.InferenceSession(str(out_dir / "opt.onnx"), providers=[cpu])
    np.testing.assert_array_equal(again.run(None, {"x": x})[0], want)


# -- tensor data of the wrong size -------------------------------------------------------


@pytest.mark.parametrize(
    ("extra", "have", "word"), [(4, 28, "too many"), (-4, 20, "too few"), (3, 27, "too many")]
)
def test_raw_data_of_the_wrong_size_is_invalid_graph(extra: int, have: int, word: str) -> None:
    w = numpy_helper.from_array(W, "w")
    w.raw_data = w.raw_data + b"\0" * extra if extra > 0 else w.raw_data[:extra]
    data = _add_w_model(w).SerializeToString()
    with pytest.raises(ortcore.InvalidGraph) as info:
        ortcore.InferenceSession(data, providers=["mini"])
    message = str(info.value)
    assert message.startswith("This is an invalid model.")
    assert "'w'" in message and f"{have} bytes of raw_data" in message
    assert "need 24 bytes" in message and word in message


def test_typed_data_of_the_wrong_count_is_invalid_graph() -> None:
    w = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[2, 3])
    w.float_data.extend([1.0] * 7)
    with pytest.raises(ortcore.InvalidGraph, match=r"'w'.*7 values in float_data.*need 6"):
        ortcore.InferenceSession(_add_w_model(w).SerializeToString(), providers=["mini"])


def test_raw_data_of_packed_int4_counts_bytes() -> None:
    """Five int4 values take three bytes; four bytes are one too many."""
    t = TensorProto(name="q", data_type=TensorProto.INT4, dims=[5], raw_data=b"\x21\x43\x05\x00")
    node = helper.make_node("Constant", [], ["q"], value=t, name="make_q")
    data = make_model(
        [node, helper.make_node("Neg", ["x"], ["y"])], [fvi("x", [2, 3])], [fvi("y", [2, 3])]
    )
    with pytest.raises(ortcore.InvalidGraph, match=r"'make_q'.*4 bytes of raw_data.*need 3"):
        ortcore.InferenceSession(data, providers=["mini"])


def test_raw_data_too_long_in_a_subgraph_initializer_is_invalid_graph() -> None:
    w = numpy_helper.from_array(W, "then_w")
    w.raw_data += b"\0" * 8
    then_g = helper.make_graph(
        [helper.make_node("Add", ["x", "then_w"], ["then_out"])],
        "then_g",
        [],
        [fvi("then_out", [2, 3])],
        [w],
    )
    else_g = helper.make_graph(
        [helper.make_node("Neg", ["x"], ["else_out"])], "else_g", [], [fvi("else_out", [2, 3])]
    )
    node = helper.make_node("If", ["cond"], ["y"], then_branch=then_g, else_branch=else_g)
    data = make_model(
        [node], [fvi("cond", [], TensorProto.BOOL), fvi("x", [2, 3])], [fvi("y", [2, 3])]
    )
    with pytest.raises(ortcore.InvalidGraph, match=r"'then_w'.*'then_g'.*32 bytes.*need 24"):
        ortcore.InferenceSession(data, providers=["mini"])


def test_raw_data_too_long_in_a_constant_attribute_is_invalid_graph() -> None:
    value = numpy_helper.from_array(W, "cw")
    value.raw_data += b"\0" * 4
    nodes = [
        helper.make_node("Constant", [], ["c"], value=value, name="const"),
        helper.make_node("Add", ["x", "c"], ["y"], name="add"),
    ]
    data = make_model(nodes, [fvi("x", [2, 3])], [fvi("y", [2, 3])])
    with pytest.raises(ortcore.InvalidGraph, match=r"'value' of node 'const'.*28 bytes.*need 24"):
        ortcore.InferenceSession(data, providers=["mini"])


# -- opsets --------------------------------------------------------------------------------


def _relu_model(opsets: list[onnx.OperatorSetIdProto]) -> bytes:
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])], "g", [fvi("x", [2, 3])], [fvi("y", [2, 3])]
    )
    return helper.make_model(graph, opset_imports=opsets, ir_version=8).SerializeToString()


@pytest.mark.parametrize(
    ("domain", "shown", "newest"),
    [
        ("", "ai.onnx", onnx.defs.onnx_opset_version()),
        ("ai.onnx", "ai.onnx", onnx.defs.onnx_opset_version()),
        ("ai.onnx.ml", "ai.onnx.ml", onnx.defs.onnx_ml_opset_version()),
    ],
)
def test_opset_newer_than_onnx_knows_is_invalid_graph(domain: str, shown: str, newest: int) -> None:
    opsets = [helper.make_opsetid(domain, 999)]
    if domain == "ai.onnx.ml":
        opsets.append(helper.make_opsetid("", 17))
    with pytest.raises(ortcore.InvalidGraph) as info:
        ortcore.InferenceSession(_relu_model(opsets), providers=["mini"])
    message = str(info.value)
    assert message.startswith("This is an invalid model.")
    assert f"opset 999 of domain {shown!r}" in message
    assert f"newest this installation supports is {newest}" in message


def test_newest_known_opset_and_custom_domains_load() -> None:
    opsets = [
        helper.make_opsetid("", onnx.defs.onnx_opset_version()),
        helper.make_opsetid("com.example", 999),
    ]
    model = load_model(_relu_model(opsets))
    assert model.opset_imports["com.example"] == 999


# -- shape inference: strict for attributes and shapes, tolerant of type gaps ------------


def test_type_gap_from_an_ml_op_is_tolerated_like_onnxruntime() -> None:
    """ai.onnx.ml opset 1's TreeEnsembleClassifier infers no type for its
    probabilities (skl2onnx's gradient boosting emits this): strict inference
    fails on the Identity that reads them, onnxruntime loads the model."""
    tree = helper.make_node(
        "TreeEnsembleClassifier", ["X"], ["label", "proba"], domain="ai.onnx.ml",
        classlabels_int64s=[0, 1], nodes_treeids=[0], nodes_nodeids=[0],
        nodes_featureids=[0], nodes_values=[0.0], nodes_modes=["LEAF"],
        nodes_truenodeids=[0], nodes_falsenodeids=[0], class_treeids=[0, 0],
        class_nodeids=[0, 0], class_ids=[0, 1], class_weights=[0.25, 0.75],
    )  # fmt: skip
    ident = helper.make_node("Identity", ["proba"], ["probabilities"], name="N1")
    graph = helper.make_graph(
        [tree, ident],
        "g",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [None, 3])],
        [
            helper.make_tensor_value_info("label", TensorProto.INT64, [None]),
            helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, None),
        ],
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.ml", 1)],
    )
    with pytest.raises(onnx.shape_inference.InferenceError, match="TypeInferenceError"):
        onnx.shape_inference.infer_shapes(model, strict_mode=True)
    sess = ortcore.InferenceSession(model.SerializeToString(), providers=["cpu"])
    _, proba = sess.run(None, {"X": np.ones((2, 3), np.float32)})
    np.testing.assert_allclose(proba, [[0.25, 0.75], [0.25, 0.75]])


def test_attribute_errors_of_strict_inference_still_fail_at_load() -> None:
    node = helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], pads=[-1, 0, 0, 0])
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    data = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(ortcore.InvalidGraph, match="pads"):
        ortcore.InferenceSession(data.SerializeToString(), providers=["cpu"])


def test_errors_inside_a_function_ops_body_are_tolerated() -> None:
    """onnx's strict inference fails on MeanVarianceNormalization's generic body
    (a Constant whose value is an attribute reference); onnxruntime runs it."""
    node = helper.make_node("MeanVarianceNormalization", ["x"], ["y"])
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 2, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    with pytest.raises(onnx.shape_inference.InferenceError, match="op_type:Constant"):
        onnx.shape_inference.infer_shapes(model, strict_mode=True)
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 2, 2)
    (y,) = ortcore.InferenceSession(model.SerializeToString(), providers=["cpu"]).run(
        None, {"x": x}
    )
    mean = x.mean(axis=(0, 2, 3), keepdims=True)
    np.testing.assert_allclose(y, (x - mean) / x.std(axis=(0, 2, 3), keepdims=True), rtol=1e-4)
