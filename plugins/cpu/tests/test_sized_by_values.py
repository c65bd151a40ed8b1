"""Kernels whose output size comes from input values check it before allocating:
AffineGrid (its ``size`` input), STFT (frames times frame length: a short
signal asks for a square), ImageDecoder (the size a file's header declares).
A fed value past the session's tensor limit is an ortcore error naming the
limit, not an allocation of gigabytes."""

from __future__ import annotations

import io
import struct
import zlib

import numpy as np
import onnx
import ortcore
import pytest
from onnx import TensorProto, helper
from ortcore.errors import OrtcoreError


def _session(
    node: onnx.NodeProto, inputs: list[onnx.ValueInfoProto], opset: int
) -> ortcore.InferenceSession:
    graph = helper.make_graph(
        [node], "g", inputs, [helper.make_tensor_value_info("y", node_output_type(node), None)]
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    so = ortcore.SessionOptions()
    so.add_session_config_entry("session.max_tensor_bytes", str(1 << 20))
    return ortcore.InferenceSession(model.SerializeToString(), so, providers=["cpu"])


def node_output_type(node: onnx.NodeProto) -> int:
    return TensorProto.UINT8 if node.op_type == "ImageDecoder" else TensorProto.FLOAT


def test_affine_grid_size_is_checked() -> None:
    sess = _session(
        helper.make_node("AffineGrid", ["theta", "size"], ["y"]),
        [
            helper.make_tensor_value_info("theta", TensorProto.FLOAT, [1, 2, 3]),
            helper.make_tensor_value_info("size", TensorProto.INT64, [4]),
        ],
        20,
    )
    theta = np.array([[[1, 0, 0], [0, 1, 0]]], np.float32)
    (y,) = sess.run(None, {"theta": theta, "size": np.array([1, 1, 4, 5], np.int64)})
    assert y.shape == (1, 4, 5, 2)
    with pytest.raises(OrtcoreError, match=r"session\.max_tensor_bytes"):
        sess.run(None, {"theta": theta, "size": np.array([1, 1, 100_000, 100_000], np.int64)})


def test_stft_frames_are_checked() -> None:
    sess = _session(
        helper.make_node("STFT", ["signal", "step", "", "length"], ["y"]),
        [
            helper.make_tensor_value_info("signal", TensorProto.FLOAT, [1, None, 1]),
            helper.make_tensor_value_info("step", TensorProto.INT64, []),
            helper.make_tensor_value_info("length", TensorProto.INT64, []),
        ],
        17,
    )
    signal = np.ones([1, 64, 1], np.float32)
    feeds = {"signal": signal, "step": np.array(8, np.int64), "length": np.array(16, np.int64)}
    assert sess.run(None, feeds)[0].shape == (1, 7, 9, 2)
    long = {"signal": np.ones([1, 8192, 1], np.float32), "step": np.array(1, np.int64)}
    with pytest.raises(OrtcoreError, match=r"session\.max_tensor_bytes"):
        sess.run(None, {**long, "length": np.array(4096, np.int64)})


def _png(width: int, height: int) -> bytes:
    """A grayscale PNG whose header says ``width`` x ``height`` (its data is one row)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    pixels = zlib.compress(b"\x00" + b"\x07" * width)
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")
    )


def test_image_decoder_checks_the_declared_size() -> None:
    pytest.importorskip("PIL")
    from PIL import Image

    sess = _session(
        helper.make_node("ImageDecoder", ["data"], ["y"], pixel_format="Grayscale"),
        [helper.make_tensor_value_info("data", TensorProto.UINT8, [None])],
        20,
    )
    small = io.BytesIO()
    Image.new("L", (3, 2), 7).save(small, format="PNG")
    (y,) = sess.run(None, {"data": np.frombuffer(small.getvalue(), np.uint8)})
    assert y.shape == (2, 3, 1) and int(y.max()) == 7
    with pytest.raises(OrtcoreError, match=r"session\.max_tensor_bytes"):
        sess.run(None, {"data": np.frombuffer(_png(8000, 8000), np.uint8)})
