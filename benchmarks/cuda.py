"""Latency on one GPU: ortcore's CUDA provider (IO binding on the device) next to PyTorch eager.

The models are built here as ONNX graphs with random weights, and PyTorch runs
the very same graph eagerly, node after node with ``torch`` ops on the same
weights (what an eager module does: one kernel launch per op, Python between
them), so both sides compute the same thing:

- ``resnet50``: ResNet-50 (bottleneck blocks 3-4-6-3, BatchNormalization
  folded into the convolutions as exporters do), batch 32, 224x224;
- ``bert``: a BERT-base encoder (``benchmarks/transformers.py``: 12 layers,
  hidden 768, 12 heads), batch 8, sequence 128.

ortcore's inputs and outputs stay on the device through IO binding; the
table shows medians, the ratio ortcore / PyTorch (the target is at most 1.5)
and the copies between host and device a plain ``run`` would make
(``session.get_partition().copies``; ``ortcore bench MODEL --providers cuda``
shows them per run).

    python benchmarks/cuda.py [--models resnet50,bert] [--runs 20] [--device-id 0]
    python benchmarks/cuda.py --emulate     # smoke test without a GPU: tiny shapes,
                                            # the CPU emulation, torch on the CPU

Results are only meaningful on a GPU; ``--emulate`` checks that the script,
the two sides and their agreement work.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, str(Path(__file__).resolve().parent))


def resnet50(batch: int, size: int = 224, width: int = 64, seed: int = 0) -> onnx.ModelProto:
    """ResNet-50 with BatchNormalization folded into the convolutions."""
    rng = np.random.default_rng(seed)
    nodes: list[onnx.NodeProto] = []
    inits: list[onnx.TensorProto] = []
    count = [0]

    def name(stem: str) -> str:
        count[0] += 1
        return f"{stem}_{count[0]}"

    def conv(x: str, c_in: int, c_out: int, k: int, stride: int = 1, relu: bool = True) -> str:
        w, b = name("w"), name("b")
        scale = np.sqrt(2.0 / (c_in * k * k))
        inits.append(
            numpy_helper.from_array(
                (rng.standard_normal((c_out, c_in, k, k)) * scale).astype(np.float32), w
            )
        )
        inits.append(numpy_helper.from_array(np.zeros(c_out, np.float32), b))
        y = name("conv")
        pad = k // 2
        nodes.append(
            helper.make_node(
                "Conv", [x, w, b], [y], strides=[stride, stride], pads=[pad] * 4, name=name("Conv")
            )
        )
        if not relu:
            return y
        r = name("relu")
        nodes.append(helper.make_node("Relu", [y], [r], name=name("Relu")))
        return r

    x = conv("input", 3, width, 7, 2)
    pooled = name("pool")
    nodes.append(
        helper.make_node(
            "MaxPool", [x], [pooled], kernel_shape=[3, 3], strides=[2, 2], pads=[1] * 4
        )
    )
    x, c_in = pooled, width
    for stage, blocks in enumerate((3, 4, 6, 3)):
        mid = width * 2**stage
        out = mid * 4
        for i in range(blocks):
            stride = 2 if i == 0 and stage > 0 else 1
            y = conv(x, c_in, mid, 1)
            y = conv(y, mid, mid, 3, stride)
            y = conv(y, mid, out, 1, relu=False)
            short = conv(x, c_in, out, 1, stride, relu=False) if i == 0 else x
            s, r = name("sum"), name("relu")
            nodes.append(helper.make_node("Add", [y, short], [s]))
            nodes.append(helper.make_node("Relu", [s], [r]))
            x, c_in = r, out
    gap, flat, logits = name("gap"), name("flat"), "output"
    fc_w, fc_b = name("fc_w"), name("fc_b")
    inits.append(
        numpy_helper.from_array(
            (rng.standard_normal((1000, c_in)) / np.sqrt(c_in)).astype(np.float32), fc_w
        )
    )
    inits.append(numpy_helper.from_array(np.zeros(1000, np.float32), fc_b))
    nodes += [
        helper.make_node("GlobalAveragePool", [x], [gap]),
        helper.make_node("Flatten", [gap], [flat]),
        helper.make_node("Gemm", [flat, fc_w, fc_b], [logits], transB=1),
    ]
    graph = helper.make_graph(
        nodes,
        "resnet50",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [batch, 3, size, size])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [batch, 1000])],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def torch_runner(model: onnx.ModelProto, device: str) -> Callable[[Any], Any]:
    """PyTorch eager running ``model``'s graph op by op on ``device``."""
    import torch
    import torch.nn.functional as F

    weights = {
        t.name: torch.from_numpy(numpy_helper.to_array(t).copy()).to(device)
        for t in model.graph.initializer
    }
    nodes = list(model.graph.node)

    def attrs(node: onnx.NodeProto) -> dict[str, Any]:
        return {a.name: helper.get_attribute_value(a) for a in node.attribute}

    def conv(x: Any, w: Any, b: Any, a: dict[str, Any]) -> Any:
        pads = a.get("pads", [0, 0, 0, 0])
        return F.conv2d(x, w, b, a.get("strides", [1, 1]), (pads[0], pads[1]),
                        a.get("dilations", [1, 1]), a.get("group", 1))  # fmt: skip

    def pool(x: Any, a: dict[str, Any]) -> Any:
        pads = a.get("pads", [0, 0, 0, 0])
        return F.max_pool2d(x, a["kernel_shape"], a.get("strides"), (pads[0], pads[1]))

    def gemm(x: Any, w: Any, b: Any, a: dict[str, Any]) -> Any:
        return F.linear(x, w, b) if a.get("transB") else x @ w + b

    def reshape(x: Any, shape: Any, a: dict[str, Any]) -> Any:
        dims = [x.shape[i] if int(d) == 0 else int(d) for i, d in enumerate(shape.tolist())]
        return x.reshape(dims)

    def layer_norm(x: Any, g: Any, b: Any, a: dict[str, Any]) -> Any:
        return F.layer_norm(x, (x.shape[-1],), g, b, a.get("epsilon", 1e-5))

    ops: dict[str, Callable[..., Any]] = {
        "Conv": conv,
        "Relu": lambda x, a: torch.relu(x),
        "MaxPool": pool,
        "Add": lambda x, y, a: x + y,
        "Sub": lambda x, y, a: x - y,
        "Mul": lambda x, y, a: x * y,
        "Div": lambda x, y, a: x / y,
        "Pow": lambda x, y, a: torch.pow(x, y),
        "Tanh": lambda x, a: torch.tanh(x),
        "Erf": lambda x, a: torch.erf(x),
        "GlobalAveragePool": lambda x, a: x.mean(dim=(2, 3), keepdim=True),
        "Flatten": lambda x, a: x.flatten(1),
        "Gemm": gemm,
        "MatMul": lambda x, y, a: x @ y,
        "Reshape": reshape,
        "Transpose": lambda x, a: x.permute(*a["perm"]),
        "Softmax": lambda x, a: torch.softmax(x, dim=a.get("axis", -1)),
        "LayerNormalization": layer_norm,
        "Identity": lambda x, a: x,
    }
    plan = [(ops[n.op_type], list(n.input), n.output[0], attrs(n)) for n in nodes]
    output = model.graph.output[0].name
    feed = model.graph.input[0].name

    @torch.inference_mode()
    def run(x: Any) -> Any:
        values = dict(weights)
        values[feed] = x
        for fn, inputs, out, a in plan:
            values[out] = fn(*(values[i] for i in inputs), a)
        return values[output]

    return run


def main() -> None:
    """Build the models, time both sides and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="resnet50,bert")
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--device-id", type=int, default=0)
    parser.add_argument("--emulate", action="store_true", help="smoke test without a GPU")
    args = parser.parse_args()
    if args.emulate:
        os.environ["ORTCORE_CUDA_EMULATE"] = "1"
    import torch
    from transformers import bert

    import ortcore

    device = "cpu" if args.emulate else f"cuda:{args.device_id}"
    shapes = {
        "resnet50": (lambda: resnet50(1, 64, 8)) if args.emulate else (lambda: resnet50(32)),
        "bert": (lambda: bert(16, 2, batch=2))
        if args.emulate
        else (lambda: bert(128, 12, batch=8)),
    }
    rows = [("model", "torch eager ms", "ortcore ms", "ratio", "copies (plain run)", "max diff")]
    for name in args.models.split(","):
        model = shapes[name]()
        shape = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
        x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
        eager = torch_runner(model, device)
        tx = torch.from_numpy(x).to(device)
        sess = ortcore.InferenceSession(
            model.SerializeToString(),
            providers=[("cuda", {"device_id": str(args.device_id)})],
        )
        binding = sess.io_binding()
        binding.bind_ortvalue_input(
            "input", ortcore.OrtValue.ortvalue_from_numpy(x, "cuda", args.device_id)
        )
        binding.bind_output(sess.get_outputs()[0].name, "cuda", args.device_id)

        def sync() -> None:
            if device != "cpu":
                torch.cuda.synchronize(device)

        def timed(fn: Callable[[], Any], runs: int) -> list[float]:
            fn()  # warm: compiles, plans, allocates
            sync()
            out = []
            for _ in range(runs):
                t = time.perf_counter()
                fn()
                sync()
                out.append(time.perf_counter() - t)
            return out

        def ours(s: Any = sess, b: Any = binding) -> None:
            s.run_with_iobinding(b)
            b.synchronize_outputs()

        t_torch = timed(lambda e=eager, t=tx: e(t), args.runs)
        t_ours = timed(ours, args.runs)
        got = binding.get_outputs()[0].numpy()
        want = eager(tx).cpu().numpy()
        a, b = statistics.median(t_torch) * 1e3, statistics.median(t_ours) * 1e3
        rows.append((name, f"{a:.2f}", f"{b:.2f}", f"{b / a:.2f}",
                     str(len(sess.get_partition().copies)),
                     f"{float(np.max(np.abs(got - want))):.2e}"))  # fmt: skip
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)))
    if args.emulate:
        print("(--emulate: the CPU emulation and torch on the CPU; these times mean nothing)")


if __name__ == "__main__":
    main()
