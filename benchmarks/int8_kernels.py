"""Time the CPU provider's int8 kernels against onnxruntime, op by op.

Each case is a one-node model whose weights (and their scales and zero
points) are initializers, as in a quantized model; ortcore and onnxruntime
sessions (2 intra-op threads by default) run it in rounds that alternate
between the two, so that both see the same machine; the best time of each
round is kept and the median over rounds printed, with ortcore's ratio.
``--numpy`` times the kernels' numpy paths instead of the native GEMM (the
state before it).

    python benchmarks/int8_kernels.py [--threads 2] [--rounds 7] [--numpy]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

RNG = np.random.default_rng(0)


def _u8(*shape: int) -> np.ndarray:
    return RNG.integers(0, 256, shape).astype(np.uint8)


def _s8(*shape: int) -> np.ndarray:
    return RNG.integers(-127, 128, shape).astype(np.int8)


def _model(
    op: str,
    feeds: dict[str, np.ndarray],
    inits: dict[str, np.ndarray],
    order: list[str],
    out_type: int,
    attrs: dict | None = None,
) -> onnx.ModelProto:
    node = helper.make_node(op, order, ["y"], **(attrs or {}))
    graph = helper.make_graph(
        [node], op,
        [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
         for k, v in feeds.items()],
        [helper.make_tensor_value_info("y", out_type, None)],
        [numpy_helper.from_array(v, k) for k, v in inits.items()],
    )  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def _scalar(v: float, dt: type = np.float32) -> np.ndarray:
    return np.array(v, dt)


def cases() -> list[tuple[str, onnx.ModelProto, dict[str, np.ndarray]]]:
    """(name, model, feeds) of every case."""
    out = []
    for m, k, n in ((128, 768, 768), (128, 768, 3072)):
        a = _u8(m, k)
        inits = {"b": _s8(k, n), "az": _scalar(128, np.uint8), "bz": _scalar(0, np.int8)}
        order = ["a", "b", "az", "bz"]
        model = _model("MatMulInteger", {"a": a}, inits, order, TensorProto.INT32)
        out.append((f"MatMulInteger {m}x{k}x{n}", model, {"a": a}))
    a = _u8(128, 768)
    inits = {"as": _scalar(0.02), "az": _scalar(128, np.uint8), "b": _s8(768, 768),
             "bs": _scalar(0.003), "bz": _scalar(0, np.int8), "ys": _scalar(0.5),
             "yz": _scalar(128, np.uint8)}  # fmt: skip
    model = _model("QLinearMatMul", {"a": a}, inits,
                   ["a", "as", "az", "b", "bs", "bz", "ys", "yz"], TensorProto.UINT8)  # fmt: skip
    out.append(("QLinearMatMul 128x768x768", model, {"a": a}))
    for name, c, m, kk, group, pads in (
        ("QLinearConv 3x3 64->64 56x56", 64, 64, 3, 1, [1, 1, 1, 1]),
        ("QLinearConv depthwise 3x3 64 56x56", 64, 64, 3, 64, [1, 1, 1, 1]),
        ("QLinearConv 1x1 64->256 56x56", 64, 256, 1, 1, [0, 0, 0, 0]),
    ):
        x = _u8(1, c, 56, 56)
        inits = {"xs": _scalar(0.02), "xz": _scalar(128, np.uint8),
                 "w": _s8(m, c // group, kk, kk),
                 "ws": (RNG.random(m) * 0.01 + 0.001).astype(np.float32),
                 "wz": np.zeros(m, np.int8), "ys": _scalar(2.0 if group == 1 else 0.2),
                 "yz": _scalar(128, np.uint8),
                 "bias": RNG.integers(-1000, 1000, m).astype(np.int32)}  # fmt: skip
        model = _model("QLinearConv", {"x": x}, inits,
                       ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "bias"], TensorProto.UINT8,
                       {"group": group, "pads": pads})  # fmt: skip
        out.append((name, model, {"x": x}))
    return out


def _best(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times) * 1000


def main() -> None:
    """Parse arguments and print a table of timings."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--numpy", action="store_true", help="the numpy paths, not the native GEMM")
    args = ap.parse_args()

    import onnxruntime

    import ortcore

    if args.numpy:
        from ortcore_cpu.kernels import _qconv, _qgemm_ref, quantization

        _qconv.QConv.run = lambda self, *a, **k: None  # type: ignore[method-assign]
        quantization.int_matmul = lambda a, az, b, bz, **k: _qgemm_ref.int_matmul(a, az, b, bz)
        quantization.EXACT_K = -1  # QLinearMatMul's native test fails: numpy path

    print(f"{'case':38s} {'ortcore ms':>11s} {'onnxruntime ms':>15s} {'ratio':>7s}")
    ratios = []
    for name, model, feeds in cases():
        raw = model.SerializeToString()
        so = onnxruntime.SessionOptions()
        so.intra_op_num_threads = args.threads
        theirs = onnxruntime.InferenceSession(raw, so, providers=["CPUExecutionProvider"])
        oso = ortcore.SessionOptions()
        oso.intra_op_num_threads = args.threads
        ours = ortcore.InferenceSession(raw, oso, providers=["CPUExecutionProvider"])
        np.testing.assert_allclose(
            ours.run(None, feeds)[0].astype(np.float64),
            theirs.run(None, feeds)[0].astype(np.float64),
            atol=1,
        )
        a, b = [], []
        for _ in range(args.rounds):
            a.append(_best(lambda s=ours, f=feeds: s.run(None, f), args.repeat))
            b.append(_best(lambda s=theirs, f=feeds: s.run(None, f), args.repeat))
        ta, tb = statistics.median(a), statistics.median(b)
        ratios.append(ta / tb)
        print(f"{name:38s} {ta:11.3f} {tb:15.3f} {ta / tb:7.2f}")
    print(f"geomean ratio {float(np.exp(np.mean(np.log(ratios)))):.2f}")


if __name__ == "__main__":
    main()
