"""int8 models: ortcore (CPU provider) next to onnxruntime, and the quantization tools' accuracy.

The float models are built here with random weights (``--work`` caches them):

- ``cnn``: a ResNet-18-shaped network on a 224x224 image (7x7 stem, max
  pool, four stages of two basic blocks with residual Adds, global average
  pool, a 100-way Gemm whose classes are prototype images' features, see
  ``_Cnn.model``), He-initialized so that activations keep their scale;
- ``bert``: the BERT-base encoder of ``transformers.py`` (12 layers, hidden
  768, sequence 128).

Each is quantized by onnxruntime's own tool (``onnxruntime.quantization``)
and, when it imports, by ``ortcore.quantization`` with the same arguments:

- ``cnn-qdq``: ``quantize_static`` per channel, QDQ format, int8 weights and
  activations (onnxruntime's defaults), calibrated (MinMax) on ``--calib``
  images;
- ``cnn-qop``: the same in QOperator format (QLinearConv, com.microsoft QLinearAdd...);
- ``bert-dyn``: ``quantize_dynamic``, int8 weights.

Latency: each runtime alone in its own fresh process, the processes taking
turns ``--processes`` times (``timing.timed_in_processes``), ``--threads``
intra-op threads each, onnxruntime's spinning off. The table gives medians
and the ratio ortcore / onnxruntime, and the geometric mean of the ratios.

Accuracy (``--accuracy``): on the same ``--samples`` inputs (other than the
calibration images), each quantized model run in ortcore and in onnxruntime
against the float32 model run in onnxruntime: top-1 agreement for the CNN
(with how many distinct classes the float model predicts, so that agreement
can be told from a constant answer), max abs difference of the outputs for
BERT.

    python benchmarks/int8.py [--models cnn-qdq,cnn-qop,bert-dyn] [--tools onnxruntime,ortcore]
                              [--runs 10] [--processes 3] [--threads 2] [--work DIR]
                              [--accuracy] [--samples 64] [--calib 16] [--bert-layers 12]
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from timing import blas_kernels, print_child_times, timed_in_processes

HERE = Path(__file__).resolve().parent
IMAGE = (1, 3, 224, 224)
CLASSES = 100


# -- float models ------------------------------------------------------------


class _Cnn:
    """Builds the ResNet-18-shaped float model."""

    def __init__(self, seed: int = 0) -> None:
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.count = 0

    def _name(self, stem: str) -> str:
        self.count += 1
        return f"{stem}_{self.count}"

    def _const(self, stem: str, value: np.ndarray) -> str:
        name = self._name(stem)
        self.inits.append(numpy_helper.from_array(value.astype(np.float32), name))
        return name

    def _node(self, op: str, inputs: list[str], **attrs: Any) -> str:
        out = self._name(op.lower())
        self.nodes.append(helper.make_node(op, inputs, [out], name=self._name(op), **attrs))
        return out

    def conv(
        self, x: str, c_in: int, c_out: int, k: int, stride: int = 1, gain: float = 1.0
    ) -> str:
        std = gain * math.sqrt(2.0 / (c_in * k * k))
        w = self._const("w", self.rng.standard_normal((c_out, c_in, k, k)) * std)
        b = self._const("b", self.rng.standard_normal(c_out) * 0.05)
        pad = k // 2
        pads = [pad] * 4
        return self._node("Conv", [x, w, b], kernel_shape=[k, k], strides=[stride] * 2, pads=pads)

    def relu(self, x: str) -> str:
        return self._node("Relu", [x])

    def block(self, x: str, c_in: int, c_out: int, stride: int) -> str:
        y = self.relu(self.conv(x, c_in, c_out, 3, stride))
        y = self.conv(y, c_out, c_out, 3, 1, gain=0.5)
        skip = x if stride == 1 and c_in == c_out else self.conv(x, c_in, c_out, 1, stride)
        return self.relu(self._node("Add", [y, skip]))

    def backbone(self) -> str:
        """The convolutional part; returns the name of the (1, 512) features."""
        x = self.relu(self.conv("image", 3, 64, 7, 2))
        x = self._node("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
        c = 64
        for stage, width in enumerate((64, 128, 256, 512)):
            x = self.block(x, c, width, 1 if stage == 0 else 2)
            x = self.block(x, width, width, 1)
            c = width
        return self._node("Flatten", [self._node("GlobalAveragePool", [x])], axis=1)

    def _graph(self, output: str, width: int) -> onnx.ModelProto:
        graph = helper.make_graph(
            self.nodes,
            "cnn",
            [helper.make_tensor_value_info("image", TensorProto.FLOAT, list(IMAGE))],
            [helper.make_tensor_value_info(output, TensorProto.FLOAT, [1, width])],
            self.inits,
        )
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])

    def model(self) -> onnx.ModelProto:
        """The whole network. Its classifier is made as a trained one behaves:
        class ``k``'s weights are the standardized features of prototype
        image ``k`` (:func:`prototypes`), so that an input drawn near a
        prototype (:func:`images`) wins its class by a margin, as real inputs
        do, and the answer depends on the image. (Random classifier weights
        would give 1000 near-ties that any rounding reorders.)"""
        import onnxruntime

        features = self.backbone()
        probe = onnxruntime.InferenceSession(self._graph(features, 512).SerializeToString())
        feats = np.concatenate([probe.run(None, {"image": x})[0] for x in prototypes()])
        # floored: a nearly constant feature would get a huge weight that int8 cannot hold
        mean, std = feats.mean(axis=0), feats.std(axis=0)
        std = np.maximum(std, np.median(std))
        protos = (feats - mean) / std
        w = protos / np.linalg.norm(protos, axis=1, keepdims=True) / std
        fc_w, fc_b = self._const("fc_w", w), self._const("fc_b", -(w @ mean))
        logits = self._node("Gemm", [features, fc_w, fc_b], transB=1)
        return self._graph(logits, CLASSES)


def _smooth(rng: np.random.Generator) -> np.ndarray:
    """Noise blurred at a few scales (a spectrum falling off like natural images')."""
    img = np.zeros(IMAGE, np.float32)
    for cells in (4, 16, 56):
        coarse = rng.standard_normal((1, 3, cells, cells)).astype(np.float32)
        rep = -(-IMAGE[2] // cells)
        up = coarse.repeat(rep, axis=2).repeat(rep, axis=3)[:, :, : IMAGE[2], : IMAGE[3]]
        img += up * (cells / 56) ** -0.5 / 3
    return img


def prototypes() -> list[np.ndarray]:
    """One image per class, the centre of the class's inputs."""
    rng = np.random.default_rng(50)
    return [_smooth(rng) for _ in range(CLASSES)]


def images(count: int, seed: int) -> Iterator[np.ndarray]:
    """Inputs of the CNN: a random class's prototype plus as much smooth noise
    again, so that each image has a class and the classes are far apart."""
    rng = np.random.default_rng(seed)
    protos = prototypes()
    for _ in range(count):
        yield 0.7 * protos[int(rng.integers(CLASSES))] + 0.7 * _smooth(rng)


def bert_inputs(count: int, seed: int, seq: int) -> Iterator[np.ndarray]:
    """Embedding-like BERT inputs: unit normal, one row per token."""
    rng = np.random.default_rng(seed)
    for _ in range(count):
        yield rng.standard_normal((1, seq, 768)).astype(np.float32)


def float_models(work: Path, args: argparse.Namespace) -> dict[str, Path]:
    """Build (or reuse from ``work``) the float models; return their paths."""
    sys.path.insert(0, str(HERE))
    from transformers import bert

    paths = {"cnn": work / "cnn_fp32.onnx", "bert": work / f"bert{args.bert_layers}_fp32.onnx"}
    if not paths["cnn"].exists():
        onnx.save(_Cnn().model(), paths["cnn"])
    if not paths["bert"].exists():
        onnx.save(bert(seq=args.seq, layers=args.bert_layers), paths["bert"])
    return paths


# -- quantization ------------------------------------------------------------


class _Reader:
    """A ``CalibrationDataReader`` over a list of feeds (duck-typed, so that one
    object serves both tools)."""

    def __init__(self, name: str, arrays: list[np.ndarray]) -> None:
        self.feeds = iter([{name: a} for a in arrays])

    def get_next(self) -> dict[str, np.ndarray] | None:
        return next(self.feeds, None)

    def rewind(self) -> None:  # pragma: no cover - tools that rewind get nothing new
        pass


def _tool(name: str) -> Any:
    if name == "onnxruntime":
        import onnxruntime.quantization as q
    else:
        import ortcore.quantization as q
    return q


def quantize(tool: str, form: str, src: Path, dst: Path, args: argparse.Namespace) -> float:
    """Quantize ``src`` into ``dst`` with ``tool`` in ``form``; return seconds taken."""
    q = _tool(tool)
    start = time.perf_counter()
    if form == "dyn":
        q.quantize_dynamic(str(src), str(dst), weight_type=q.QuantType.QInt8)
    else:
        reader = _Reader("image", list(images(args.calib, seed=1)))
        q.quantize_static(
            str(src),
            str(dst),
            reader,
            quant_format=q.QuantFormat.QDQ if form == "qdq" else q.QuantFormat.QOperator,
            per_channel=True,
            activation_type=q.QuantType.QInt8,
            weight_type=q.QuantType.QInt8,
        )
    return time.perf_counter() - start


def quantized_models(
    floats: dict[str, Path], work: Path, args: argparse.Namespace
) -> dict[tuple[str, str], Path]:
    """(model, tool) -> path of the quantized model, made if missing."""
    out: dict[tuple[str, str], Path] = {}
    for short in args.models.split(","):
        base, form = short.split("-")
        for tool in args.tools.split(","):
            dst = work / f"{short}_{tool}.onnx"
            if not dst.exists():
                try:
                    took = quantize(tool, form, floats[base], dst, args)
                except ImportError as err:
                    print(f"{short}: {tool}'s quantization tool is not available ({err})")
                    continue
                print(f"{short}: quantized by {tool} in {took:.1f} s", flush=True)
            out[(short, tool)] = dst
    return out


# -- timing --------------------------------------------------------------------


def session(runtime: str, path: Path, threads: int) -> Any:
    """A CPU session of ``runtime`` ("ortcore" or "onnxruntime") for ``path``."""
    if runtime == "ortcore":
        import ortcore

        so = ortcore.SessionOptions()
        so.intra_op_num_threads = threads
        return ortcore.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    import onnxruntime

    rso = onnxruntime.SessionOptions()
    rso.intra_op_num_threads = threads
    rso.log_severity_level = 3
    rso.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return onnxruntime.InferenceSession(str(path), rso, providers=["CPUExecutionProvider"])


def sample(path: Path, seed: int, args: argparse.Namespace) -> np.ndarray:
    """One input for the model at ``path`` (a CNN image or BERT embeddings)."""
    if "cnn" in path.name:
        return next(images(1, seed))
    return next(bert_inputs(1, seed, args.seq))


def child(args: argparse.Namespace) -> None:
    """``--child RUNTIME --path P``: time one runtime alone in this process; print JSON."""
    path = Path(args.path)
    sess = session(args.child, path, args.threads)
    feeds = {sess.get_inputs()[0].name: sample(path, 7, args)}
    print_child_times(lambda: sess.run(None, feeds), args.runs, settle=2)


def latency(paths: dict[tuple[str, str], Path], args: argparse.Namespace) -> None:
    """Time each quantized model in both runtimes; print the table."""
    ratios = []
    for (short, tool), path in paths.items():
        common = ["--path", str(path), "--threads", str(args.threads), "--runs", str(args.runs)]
        common += ["--seq", str(args.seq)]
        children = [["--child", runtime, *common] for runtime in ("ortcore", "onnxruntime")]
        try:
            ours, ref = timed_in_processes(__file__, children, args.processes)
        except RuntimeError as err:
            last = str(err).strip().splitlines()[-1]
            print(f"{short:<9} {tool + '-quantized':<22} ortcore failed: {last}", flush=True)
            continue
        mo, mr = statistics.median(ours), statistics.median(ref)
        ratios.append(mo / mr)
        print(
            f"{short:<9} {tool + '-quantized':<22} ortcore {mo * 1e3:8.2f} ms  "
            f"onnxruntime {mr * 1e3:8.2f} ms  ratio {mo / mr:5.2f}",
            flush=True,
        )
    if ratios:
        geo = math.exp(statistics.fmean(math.log(r) for r in ratios))
        print(
            f"geomean ratio {geo:.2f}, worst {max(ratios):.2f} ({len(ratios)} models, "
            f"{args.threads} threads, {args.processes} processes x {args.runs} runs each, "
            f"own processes; {blas_kernels()})",
            flush=True,
        )


# -- accuracy ------------------------------------------------------------------


def accuracy(
    floats: dict[str, Path], paths: dict[tuple[str, str], Path], args: argparse.Namespace
) -> None:
    """Each quantized model against its float model on the same inputs."""
    refs: dict[str, list[np.ndarray]] = {}
    inputs: dict[str, list[np.ndarray]] = {}
    for base, path in floats.items():
        if not any(short.startswith(base) for short, _ in paths):
            continue
        count = args.samples if base == "cnn" else max(1, args.samples // 16)
        gen = images(count, 100) if base == "cnn" else bert_inputs(count, 100, args.seq)
        inputs[base] = list(gen)
        sess = session("onnxruntime", path, args.threads)
        name = sess.get_inputs()[0].name
        refs[base] = [sess.run(None, {name: x})[0] for x in inputs[base]]
    for base, outs in refs.items():
        if base == "cnn":
            classes = len({int(o.argmax()) for o in outs})
            print(f"cnn float32: {classes} distinct top-1 classes over {len(outs)} images")
    for (short, tool), path in paths.items():
        base = short.split("-")[0]
        for runtime in ("ortcore", "onnxruntime"):
            try:
                sess = session(runtime, path, args.threads)
                name = sess.get_inputs()[0].name
                outs = [sess.run(None, {name: x})[0] for x in inputs[base]]
            except Exception as err:  # a model one runtime cannot run is reported
                print(f"{short:<9} {tool + '-quantized':<22} in {runtime:<11} failed: {err}")
                continue
            if base == "cnn":
                agree = np.mean([o.argmax() == r.argmax() for o, r in zip(outs, refs[base])])
                # an 8-bit output has few levels: its top class is often tied, and
                # argmax then takes the first of the tied ones
                tied = sum(int((o == o.max()).sum() > 1) for o in outs)
                what = f"top-1 agreement with float32 {100 * agree:5.1f}% ({tied} tied top-1)"
            else:
                diff = max(float(np.abs(o - r).max()) for o, r in zip(outs, refs[base]))
                scale = max(float(np.abs(r).max()) for r in refs[base])
                what = f"max abs diff from float32 {diff:.4f} (outputs up to {scale:.2f})"
            print(f"{short:<9} {tool + '-quantized':<22} in {runtime:<11} {what}", flush=True)


def main() -> None:
    """Parse arguments, build and quantize the models, print latency and accuracy."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="cnn-qdq,cnn-qop,bert-dyn")
    parser.add_argument("--tools", default="onnxruntime,ortcore")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--processes", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--work", default=str(HERE.parent / "build" / "int8"))
    parser.add_argument("--accuracy", action="store_true")
    parser.add_argument("--no-latency", action="store_true")
    parser.add_argument("--samples", type=int, default=64)
    parser.add_argument("--calib", type=int, default=16)
    parser.add_argument("--bert-layers", type=int, default=12)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--child", choices=("ortcore", "onnxruntime"))
    parser.add_argument("--path")
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    floats = float_models(work, args)
    paths = quantized_models(floats, work, args)
    if not args.no_latency:
        latency(paths, args)
    if args.accuracy:
        accuracy(floats, paths, args)


if __name__ == "__main__":
    main()
