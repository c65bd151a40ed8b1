"""Latency of transformer-shaped models: ortcore (CPU provider) next to onnxruntime.

The models are built here with ``onnx.helper`` and random weights, from the
ops that torch's exporter emits (no fused contrib ops):

- ``bert``: a BERT-base encoder (12 layers, hidden 768, 12 heads, FFN 3072);
  each layer is MatMul + Add projections, Reshape/Transpose into heads,
  MatMul, Div by sqrt(head size), Add of the attention mask, Softmax,
  MatMul, Transpose/Reshape back, residual Add, LayerNormalization, and a
  feed-forward block with Gelu written as ``0.5 * x * (1 + Erf(x / sqrt 2))``.
- ``gpt2``: a GPT-2-sized decoder of the same dimensions: pre-LayerNorm
  blocks, one fused QKV MatMul + Add split into three, a causal mask added
  to the scores, the same Erf Gelu; with ``--gelu tanh`` (both models) the
  Gelu is GPT-2's own tanh form, written out as transformers' exporters do:
  ``0.5 * x * (1 + Tanh(sqrt(2/pi) * (x + 0.044715 * Pow(x, 3))))``.

Both take ``input`` (batch, sequence, 768) float32 (embeddings already
looked up). Both runtimes get the same number of intra-op threads; the
table shows medians and the ratio ortcore / onnxruntime, as
``light_models.py`` does: runs interleaved in one process (onnxruntime's
spinning off unless ``--ort-spinning``), or with ``--processes N`` each
runtime alone in its own process, N turns each (see ``timing.py``).

    python benchmarks/transformers.py [--models bert,gpt2] [--runs 10] [--threads 2]
                                      [--seq 128] [--layers 12] [--save DIR]
                                      [--ortcore-level basic|extended|all]
                                      [--processes N] [--ort-spinning] [--gelu erf|tanh]

``--ortcore-level`` sets ortcore's graph optimization level (default: all,
as onnxruntime's); ``basic`` leaves out the fusions, to tell kernel time from
what the fused kernels change.
"""

from __future__ import annotations

import argparse
import math
import statistics
from functools import partial
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from timing import blas_kernels, kept, print_child_times, timed_in_processes, timed_turns

HIDDEN, HEADS, FFN = 768, 12, 3072


class _Builder:
    """Collects nodes and random initializers for one graph."""

    def __init__(self, seed: int, gelu: str = "erf") -> None:
        self.rng = np.random.default_rng(seed)
        self.gelu_form = gelu
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.count = 0

    def name(self, stem: str) -> str:
        self.count += 1
        return f"{stem}_{self.count}"

    def const(self, stem: str, value: np.ndarray) -> str:
        name = self.name(stem)
        self.inits.append(numpy_helper.from_array(value, name))
        return name

    def weight(self, stem: str, *shape: int) -> str:
        scale = 1 / math.sqrt(shape[0])
        return self.const(stem, (self.rng.standard_normal(shape) * scale).astype(np.float32))

    def op(self, op_type: str, inputs: list[str], n_out: int = 1, **attrs: object) -> list[str]:
        outs = [self.name(op_type.lower()) for _ in range(n_out)]
        self.nodes.append(helper.make_node(op_type, inputs, outs, name=self.name(op_type), **attrs))
        return outs

    def one(self, op_type: str, inputs: list[str], **attrs: object) -> str:
        return self.op(op_type, inputs, **attrs)[0]

    def linear(self, x: str, n_in: int, n_out: int) -> str:
        y = self.one("MatMul", [x, self.weight("w", n_in, n_out)])
        return self.one("Add", [y, self.const("b", np.zeros(n_out, np.float32))])

    def layer_norm(self, x: str) -> str:
        scale = self.const("ln_g", np.ones(HIDDEN, np.float32))
        bias = self.const("ln_b", np.zeros(HIDDEN, np.float32))
        return self.one("LayerNormalization", [x, scale, bias], axis=-1, epsilon=1e-5)

    def gelu(self, x: str) -> str:
        if self.gelu_form == "tanh":
            return self.tanh_gelu(x)
        t = self.one("Div", [x, self.const("sqrt2", np.array(math.sqrt(2), np.float32))])
        t = self.one("Erf", [t])
        t = self.one("Add", [t, self.const("one", np.array(1, np.float32))])
        t = self.one("Mul", [x, t])
        return self.one("Mul", [t, self.const("half", np.array(0.5, np.float32))])

    def tanh_gelu(self, x: str) -> str:
        cube = self.one("Pow", [x, self.const("three", np.array(3, np.float32))])
        t = self.one("Mul", [cube, self.const("k", np.array(0.044715, np.float32))])
        t = self.one("Add", [x, t])
        t = self.one("Mul", [t, self.const("s2pi", np.array(math.sqrt(2 / math.pi), np.float32))])
        t = self.one("Add", [self.one("Tanh", [t]), self.const("one", np.array(1, np.float32))])
        half = self.one("Mul", [x, self.const("half", np.array(0.5, np.float32))])
        return self.one("Mul", [half, t])

    def heads(self, x: str, seq: int) -> str:
        shape = self.const("shape", np.array([0, seq, HEADS, HIDDEN // HEADS], np.int64))
        return self.one("Transpose", [self.one("Reshape", [x, shape])], perm=[0, 2, 1, 3])

    def attention(self, q: str, k: str, v: str, mask: str, seq: int) -> str:
        q, v = self.heads(q, seq), self.heads(v, seq)
        shape = self.const("shape", np.array([0, seq, HEADS, HIDDEN // HEADS], np.int64))
        kt = self.one("Transpose", [self.one("Reshape", [k, shape])], perm=[0, 2, 3, 1])
        scores = self.one("MatMul", [q, kt])
        scale = self.const("scale", np.array(math.sqrt(HIDDEN // HEADS), np.float32))
        scores = self.one("Add", [self.one("Div", [scores, scale]), mask])
        ctx = self.one("MatMul", [self.one("Softmax", [scores], axis=-1), v])
        ctx = self.one("Transpose", [ctx], perm=[0, 2, 1, 3])
        back = self.const("shape", np.array([0, seq, HIDDEN], np.int64))
        return self.one("Reshape", [ctx, back])


def _model(b: _Builder, output: str, seq: int, name: str, batch: int = 1) -> onnx.ModelProto:
    graph = helper.make_graph(
        b.nodes,
        name,
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [batch, seq, HIDDEN])],
        [helper.make_tensor_value_info(output, TensorProto.FLOAT, [batch, seq, HIDDEN])],
        b.inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def bert(seq: int = 128, layers: int = 12, gelu: str = "erf", batch: int = 1) -> onnx.ModelProto:
    """A BERT-base-shaped encoder (post-LayerNorm, padding mask of zeros)."""
    b = _Builder(0, gelu)
    mask = b.const("mask", np.zeros((1, 1, 1, seq), np.float32))
    x = "input"
    for _ in range(layers):
        q, k, v = (b.linear(x, HIDDEN, HIDDEN) for _ in range(3))
        attn = b.linear(b.attention(q, k, v, mask, seq), HIDDEN, HIDDEN)
        x = b.layer_norm(b.one("Add", [x, attn]))
        ffn = b.linear(b.gelu(b.linear(x, HIDDEN, FFN)), FFN, HIDDEN)
        x = b.layer_norm(b.one("Add", [x, ffn]))
    return _model(b, b.one("Identity", [x]), seq, "bert", batch)


def gpt2(seq: int = 128, layers: int = 12, gelu: str = "erf") -> onnx.ModelProto:
    """A GPT-2-shaped decoder (pre-LayerNorm, causal mask, fused QKV projection)."""
    b = _Builder(1, gelu)
    causal = np.triu(np.full((seq, seq), -1e4, np.float32), 1).reshape(1, 1, seq, seq)
    mask = b.const("causal", causal)
    split = b.const("split", np.array([HIDDEN] * 3, np.int64))
    x = "input"
    for _ in range(layers):
        qkv = b.linear(b.layer_norm(x), HIDDEN, 3 * HIDDEN)
        q, k, v = b.op("Split", [qkv, split], n_out=3, axis=-1)
        x = b.one("Add", [x, b.linear(b.attention(q, k, v, mask, seq), HIDDEN, HIDDEN)])
        ffn = b.linear(b.gelu(b.linear(b.layer_norm(x), HIDDEN, FFN)), FFN, HIDDEN)
        x = b.one("Add", [x, ffn])
    return _model(b, b.layer_norm(x), seq, "gpt2")


BUILDERS = {"bert": bert, "gpt2": gpt2}


def main() -> None:
    """Build the models, run the benchmark and print the table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--models", default="bert,gpt2")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--ortcore-level", choices=["basic", "extended", "all"], default="all")
    parser.add_argument("--save", default="", help="also write the models into this folder")
    parser.add_argument(
        "--ort-spinning", action="store_true", help="keep onnxruntime's default thread spinning"
    )
    parser.add_argument(
        "--processes",
        type=int,
        default=0,
        help="time each runtime alone in its own process, this many turns each",
    )
    parser.add_argument("--gelu", choices=["erf", "tanh"], default="erf")
    parser.add_argument("--child", choices=["ortcore", "onnxruntime"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        (short,) = [m.strip() for m in args.models.split(",") if m.strip()]
        model = BUILDERS[short](args.seq, args.layers, args.gelu)
        sess, feeds = make_session(args.child, model, args)
        print_child_times(lambda: sess.run(None, feeds), args.runs)
        return

    for short in [m.strip() for m in args.models.split(",") if m.strip()]:
        model = BUILDERS[short](args.seq, args.layers, args.gelu)
        if args.save:
            Path(args.save).mkdir(parents=True, exist_ok=True)
            (Path(args.save) / f"{short}.onnx").write_bytes(model.SerializeToString())
        ours, feeds = make_session("ortcore", model, args)
        ref, _ = make_session("onnxruntime", model, args)
        a, r = ours.run(None, feeds)[0], ref.run(None, feeds)[0]
        same = bool(np.allclose(a, r, rtol=1e-3, atol=1e-3))
        if args.processes:
            del ours, ref
            common = ["--models", short, "--runs", str(args.runs), "--threads", str(args.threads)]
            common += ["--seq", str(args.seq), "--layers", str(args.layers)]
            common += ["--ortcore-level", args.ortcore_level, "--gelu", args.gelu]
            common += ["--ort-spinning"] * args.ort_spinning
            children = [["--child", rt, *common] for rt in ("ortcore", "onnxruntime")]
            t_ours, t_ref = timed_in_processes(__file__, children, args.processes)
            how = f"{args.runs} runs in each of {args.processes} processes per runtime"
        else:
            t_ours, t_ref = timed_turns(
                [kept(partial(ours.run, None, feeds)), kept(partial(ref.run, None, feeds))],
                args.runs,
            )
            how = f"{args.runs} interleaved runs"
        mo, mr = statistics.median(t_ours), statistics.median(t_ref)
        spin = "spinning" if args.ort_spinning else "not spinning"
        print(
            f"{short:<6} ortcore {mo * 1e3:8.2f} ms  onnxruntime {mr * 1e3:8.2f} ms  "
            f"ratio {mo / mr:5.2f}  ({args.layers} layers, seq {args.seq}, {args.threads} "
            f"threads, {args.gelu} Gelu, {how}, onnxruntime {spin}; same outputs: {same}, "
            f"max abs diff {float(np.abs(a - r).max()):.2g}; {blas_kernels()})",
            flush=True,
        )


def make_session(runtime: str, model: onnx.ModelProto, args: argparse.Namespace) -> tuple:
    """A session of ``runtime`` ("ortcore" or "onnxruntime") for ``model``, and its feeds."""
    data = model.SerializeToString()
    if runtime == "ortcore":
        import ortcore

        so = ortcore.SessionOptions()
        so.intra_op_num_threads = args.threads
        so.graph_optimization_level = getattr(
            ortcore.GraphOptimizationLevel, f"ORT_ENABLE_{args.ortcore_level.upper()}"
        )
        sess = ortcore.InferenceSession(data, so, providers=["CPUExecutionProvider"])
    else:
        import onnxruntime

        rso = onnxruntime.SessionOptions()
        rso.intra_op_num_threads = args.threads
        rso.log_severity_level = 3
        if not args.ort_spinning:
            rso.add_session_config_entry("session.intra_op.allow_spinning", "0")
        sess = onnxruntime.InferenceSession(data, rso, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(2)
    feeds = {"input": rng.standard_normal((1, args.seq, HIDDEN)).astype(np.float32)}
    return sess, feeds


if __name__ == "__main__":
    main()
