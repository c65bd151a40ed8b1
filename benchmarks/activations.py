"""Latency of activations and of a GPT-2 MLP block: ortcore (CPU provider)
next to onnxruntime, in one process, runs interleaved (see ``timing.py``).

Cases, float32, on a (128, 3072) tensor (GPT-2's MLP width at 128 tokens):

- ``gelu-tanh``: onnx Gelu-20 with ``approximate="tanh"`` (GPT-2's activation);
- ``gelu-tanh-written``: the same written out as exporters do,
  ``0.5 * x * (1 + Tanh(sqrt(2/pi) * (x + 0.044715 * Pow(x, 3))))`` (opset 17,
  which ortcore's optimizer fuses);
- ``gelu-erf``: Gelu-20, exact form;
- ``mlp``: MatMul 128x768x3072 + bias -> written-out tanh Gelu -> MatMul
  3072x768 + bias;
- one onnx op each: Sigmoid, Tanh, HardSwish, Mish, Softplus, Elu, Selu,
  LeakyRelu, HardSigmoid, Relu; and ``silu`` (``x * Sigmoid(x)``) and
  ``quick-gelu`` (``x * Sigmoid(1.702 * x)``) written out.

    python benchmarks/activations.py [--threads 2] [--runs 50] [--cases mlp,gelu-tanh]

Each line: medians of ortcore and onnxruntime, and their ratio.
"""

from __future__ import annotations

import argparse
import math
import statistics
from collections.abc import Callable
from functools import partial

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from timing import kept, timed_turns

ROWS, HIDDEN, FFN = 128, 768, 3072
RNG = np.random.default_rng(0)


def _model(nodes: list[onnx.NodeProto], inits: dict[str, np.ndarray], width: int,
           out_width: int, opset: int) -> onnx.ModelProto:  # fmt: skip
    graph = helper.make_graph(
        nodes, "bench",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [ROWS, width])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [ROWS, out_width])],
        [numpy_helper.from_array(np.asarray(v, np.float32), k) for k, v in inits.items()],
    )  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _tanh_gelu_nodes(x: str, y: str) -> tuple[list[onnx.NodeProto], dict[str, np.ndarray]]:
    mk = helper.make_node
    nodes = [
        mk("Pow", [x, "three"], ["g_cube"]), mk("Mul", ["g_cube", "k"], ["g_kc"]),
        mk("Add", [x, "g_kc"], ["g_in"]), mk("Mul", ["g_in", "s2pi"], ["g_arg"]),
        mk("Tanh", ["g_arg"], ["g_t"]), mk("Add", ["g_t", "one"], ["g_h"]),
        mk("Mul", [x, "half"], ["g_xh"]), mk("Mul", ["g_xh", "g_h"], [y]),
    ]  # fmt: skip
    inits = {"three": np.array(3.0), "k": np.array(0.044715), "one": np.array(1.0),
             "s2pi": np.array(math.sqrt(2 / math.pi)), "half": np.array(0.5)}  # fmt: skip
    return nodes, inits


def _one_op(op: str, **attrs: object) -> Callable[[], onnx.ModelProto]:
    opset = 20 if op in ("Gelu", "Mish") else 17
    return lambda: _model([helper.make_node(op, ["x"], ["y"], **attrs)], {}, FFN, FFN, opset)


def _written_gelu() -> onnx.ModelProto:
    nodes, inits = _tanh_gelu_nodes("x", "y")
    return _model(nodes, inits, FFN, FFN, 17)


def _swish(alpha: float) -> onnx.ModelProto:
    mk = helper.make_node
    src = "x" if alpha == 1.0 else "ax"
    nodes = [mk("Sigmoid", [src], ["s"]), mk("Mul", ["x", "s"], ["y"])]
    if alpha != 1.0:
        nodes.insert(0, mk("Mul", ["x", "alpha"], ["ax"]))
    inits = {} if alpha == 1.0 else {"alpha": np.array(alpha)}
    return _model(nodes, inits, FFN, FFN, 17)


def _mlp() -> onnx.ModelProto:
    mk = helper.make_node
    gelu, inits = _tanh_gelu_nodes("h", "g")
    nodes = [mk("MatMul", ["x", "w1"], ["m1"]), mk("Add", ["m1", "b1"], ["h"]), *gelu,
             mk("MatMul", ["g", "w2"], ["m2"]), mk("Add", ["m2", "b2"], ["y"])]  # fmt: skip
    inits |= {
        "w1": RNG.standard_normal((HIDDEN, FFN)) / math.sqrt(HIDDEN),
        "b1": RNG.standard_normal(FFN) * 0.1,
        "w2": RNG.standard_normal((FFN, HIDDEN)) / math.sqrt(FFN),
        "b2": RNG.standard_normal(HIDDEN) * 0.1,
    }
    return _model(nodes, inits, HIDDEN, HIDDEN, 17)


CASES: dict[str, Callable[[], onnx.ModelProto]] = {
    "gelu-tanh": _one_op("Gelu", approximate="tanh"),
    "gelu-tanh-written": _written_gelu,
    "gelu-erf": _one_op("Gelu"),
    "mlp": _mlp,
    "silu": partial(_swish, 1.0),
    "quick-gelu": partial(_swish, 1.702),
    **{op.lower(): _one_op(op) for op in ("Sigmoid", "Tanh", "HardSwish", "Mish", "Softplus",
                                          "Elu", "Selu", "LeakyRelu", "HardSigmoid", "Relu")},
}  # fmt: skip


def _sessions(model: onnx.ModelProto, threads: int) -> tuple[object, object]:
    import onnxruntime

    import ortcore

    data = model.SerializeToString()
    so = ortcore.SessionOptions()
    so.intra_op_num_threads = threads
    ours = ortcore.InferenceSession(data, so, providers=["CPUExecutionProvider"])
    rso = onnxruntime.SessionOptions()
    rso.intra_op_num_threads = threads
    rso.add_session_config_entry("session.intra_op.allow_spinning", "0")
    ref = onnxruntime.InferenceSession(data, rso, providers=["CPUExecutionProvider"])
    return ours, ref


def main() -> None:
    """Time each case and print one line per case."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--cases", default=",".join(CASES))
    args = parser.parse_args()
    for name in [c.strip() for c in args.cases.split(",") if c.strip()]:
        model = CASES[name]()
        width = model.graph.input[0].type.tensor_type.shape.dim[1].dim_value
        feeds = {"x": (RNG.standard_normal((ROWS, width)) * 2).astype(np.float32)}
        ours, ref = _sessions(model, args.threads)
        a, r = ours.run(None, feeds)[0], ref.run(None, feeds)[0]  # type: ignore[attr-defined]
        err = float(np.abs(a - r).max())
        t_ours, t_ref = timed_turns(
            [kept(partial(ours.run, None, feeds)), kept(partial(ref.run, None, feeds))],  # type: ignore[attr-defined]
            args.runs,
        )
        mo, mr = statistics.median(t_ours), statistics.median(t_ref)
        print(f"{name:<18} ortcore {mo * 1e3:7.3f} ms  onnxruntime {mr * 1e3:7.3f} ms  "
              f"ratio {mo / mr:5.2f}  (max abs diff {err:.2g})", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
