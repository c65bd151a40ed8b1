"""Run onnx's backend test cases through ``ortcore.InferenceSession``.

Cases come from the installed onnx package: the node tests (generated in
memory by ``onnx.backend.test.case.node``), and the stored ``simple``,
``pytorch-converted``, ``pytorch-operator`` and ``light`` models. Each case is
run with one provider list and compared with the stored expected outputs the
way onnx's own backend runner compares them (shape, dtype, then values within
the case's tolerances).

Command line::

    python -m conformance.backend --provider cpu [-k REGEX] [--kinds node,simple] [--failures]
"""

from __future__ import annotations

import argparse
import re
import sys
import time
import warnings
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

__all__ = ["Case", "Outcome", "compare", "iter_cases", "run_case"]

KINDS = ("node", "simple", "pytorch-converted", "pytorch-operator", "light")
EXCLUDED = re.compile(r"bernoulli")  # random outputs: nothing to compare


@dataclass
class Case:
    """One backend test case: a model and (inputs, expected outputs) pairs."""

    name: str
    kind: str
    model: onnx.ModelProto
    data_sets: list[tuple[list[Any], list[Any]]]
    rtol: float = 1e-3
    atol: float = 1e-7


@dataclass
class Outcome:
    """What happened to one case.

    ``status`` is one of ``passed``, ``mismatch``, ``load_error``,
    ``run_error``, ``unsupported``.
    """

    name: str
    kind: str
    status: str
    detail: str = ""
    seconds: float = 0.0
    ops: list[str] = field(default_factory=list)


def _tensor(x: Any) -> Any:
    return numpy_helper.to_array(x) if isinstance(x, onnx.TensorProto) else x


def _node_cases() -> Iterator[Case]:
    import onnx.backend.test.case.node as node_cases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        collected = node_cases.collect_testcases(None)
    for c in collected:
        if c.model is None or c.data_sets is None:
            continue
        sets = [
            ([_tensor(i) for i in ins], [_tensor(o) for o in outs]) for ins, outs in c.data_sets
        ]
        yield Case(c.name, "node", c.model, sets, c.rtol, c.atol)


def _load_value(path: Path, type_proto: onnx.TypeProto) -> Any:
    data = path.read_bytes()
    if type_proto.HasField("sequence_type"):
        seq = onnx.SequenceProto()
        seq.ParseFromString(data)
        return numpy_helper.to_list(seq)
    if type_proto.HasField("optional_type"):
        opt = onnx.OptionalProto()
        opt.ParseFromString(data)
        return numpy_helper.to_optional(opt)
    t = onnx.TensorProto()
    t.ParseFromString(data)
    return numpy_helper.to_array(t)


def _data_root() -> Path:
    return Path(onnx.__file__).parent / "backend" / "test" / "data"


def _stored_cases(kind: str) -> Iterator[Case]:
    for model_dir in sorted((_data_root() / kind).iterdir()):
        model_path = model_dir / "model.onnx"
        if not model_path.exists():
            continue
        model = onnx.load(str(model_path))
        inputs_info = [i for i in model.graph.input]
        inits = {i.name for i in model.graph.initializer}
        inputs_info = [i for i in inputs_info if i.name not in inits]
        sets = []
        for ds in sorted(model_dir.glob("test_data_set_*")):
            ins = [
                _load_value(ds / f"input_{k}.pb", inputs_info[k].type)
                for k in range(len(list(ds.glob("input_*.pb"))))
            ]
            outs = [
                _load_value(ds / f"output_{k}.pb", model.graph.output[k].type)
                for k in range(len(list(ds.glob("output_*.pb"))))
            ]
            sets.append((ins, outs))
        yield Case(model_dir.name, kind, model, sets)


def _light_cases() -> Iterator[Case]:
    tolerances = {"densenet121": 2e-3}
    for path in sorted((_data_root() / "light").glob("light_*.onnx")):
        model = onnx.load(str(path))
        inits = {i.name for i in model.graph.initializer}
        ins = []
        for vi in model.graph.input:
            if vi.name in inits:
                continue
            shape = [
                d.dim_value if d.HasField("dim_value") else 1 for d in vi.type.tensor_type.shape.dim
            ]
            n = int(np.prod(shape))
            ins.append((np.arange(n).reshape(shape) / n).astype(np.float32))
        outs = [
            numpy_helper.to_array(onnx.load_tensor(str(p)))
            for p in sorted(path.parent.glob(f"{path.stem}_output_*.pb"))
        ]
        short = path.stem.removeprefix("light_")
        yield Case(
            f"test_{short}", "light", model, [(ins, outs)], tolerances.get(short, 1e-3), 1e-7
        )


def iter_cases(kinds: Sequence[str] = KINDS, pattern: str | None = None) -> Iterator[Case]:
    """Every backend case of the given kinds whose name matches ``pattern``."""
    rx = re.compile(pattern) if pattern else None
    for kind in kinds:
        if kind == "node":
            source: Iterator[Case] = _node_cases()
        elif kind == "light":
            source = _light_cases()
        else:
            source = _stored_cases(kind)
        for case in source:
            if EXCLUDED.search(case.name):
                continue
            if rx is None or rx.search(case.name):
                yield case


def compare(got: Any, want: Any, rtol: float, atol: float, where: str = "output") -> None:
    """Raise ``AssertionError`` unless ``got`` matches ``want`` (onnx runner's rules)."""
    if isinstance(want, (list, tuple)):
        if not isinstance(got, (list, tuple)):
            raise AssertionError(f"{where}: expected a sequence, got {type(got).__name__}")
        if len(got) != len(want):
            raise AssertionError(f"{where}: sequence length {len(got)} != {len(want)}")
        for i, (g, w) in enumerate(zip(got, want)):
            compare(g, w, rtol, atol, f"{where}[{i}]")
        return
    if want is None:
        if got is not None:
            raise AssertionError(f"{where}: expected an empty optional, got {type(got).__name__}")
        return
    if not isinstance(got, np.ndarray):
        got = np.asarray(got)
    if got.shape != want.shape:
        raise AssertionError(f"{where}: shape {got.shape} != expected {want.shape}")
    if want.dtype == object:
        np.testing.assert_array_equal(got, want, err_msg=where)
        return
    if got.dtype != want.dtype:
        raise AssertionError(f"{where}: dtype {got.dtype} != expected {want.dtype}")
    g, w, r = got, want, rtol
    if got.dtype.name == "bfloat16":
        r = max(rtol, 2**-6)
    if got.dtype.kind not in "biufc" or got.dtype.name == "bfloat16":
        g, w = got.astype(np.float32), want.astype(np.float32)
    np.testing.assert_allclose(g, w, rtol=r, atol=atol, err_msg=where)


def run_case(case: Case, providers: Sequence[str]) -> Outcome:
    """Run one case with ``providers`` (no CPU fallback unless listed)."""
    import ortcore

    ops = sorted({n.op_type for n in case.model.graph.node})
    start = time.perf_counter()
    so = ortcore.SessionOptions()
    so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
    try:
        sess = ortcore.InferenceSession(case.model.SerializeToString(), so, providers=providers)
    except ortcore.NotImplementedOp as exc:
        return Outcome(
            case.name, case.kind, "unsupported", str(exc), time.perf_counter() - start, ops
        )
    except Exception as exc:
        return Outcome(case.name, case.kind, "load_error", f"{type(exc).__name__}: {exc}",
                       time.perf_counter() - start, ops)  # fmt: skip
    names = [i.name for i in sess.get_inputs()]
    for ins, outs in case.data_sets:
        try:
            got = sess.run(None, dict(zip(names, ins)))
        except Exception as exc:
            return Outcome(case.name, case.kind, "run_error", f"{type(exc).__name__}: {exc}",
                           time.perf_counter() - start, ops)  # fmt: skip
        try:
            if len(got) != len(outs):
                raise AssertionError(f"{len(got)} outputs, expected {len(outs)}")
            for i, (g, w) in enumerate(zip(got, outs)):
                compare(g, w, case.rtol, case.atol, f"output {i}")
        except AssertionError as exc:
            return Outcome(case.name, case.kind, "mismatch", str(exc).strip()[:2000],
                           time.perf_counter() - start, ops)  # fmt: skip
    return Outcome(case.name, case.kind, "passed", "", time.perf_counter() - start, ops)


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: run cases, print a summary and, optionally, failures."""
    parser = argparse.ArgumentParser(prog="python -m conformance.backend", description=__doc__)
    parser.add_argument("--provider", default="CPUExecutionProvider")
    parser.add_argument("-k", dest="pattern", help="regex on case names")
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--failures", action="store_true", help="print each failure")
    args = parser.parse_args(argv)
    outcomes = []
    for case in iter_cases(args.kinds.split(","), args.pattern):
        outcomes.append(run_case(case, [args.provider]))
    counts = Counter(o.status for o in outcomes)
    if args.failures:
        for o in outcomes:
            if o.status != "passed":
                print(f"{o.status:<12} {o.kind:<18} {o.name}: {o.detail[:300]}")
    total = len(outcomes)
    passed = counts.get("passed", 0)
    print(", ".join(f"{k} {v}" for k, v in counts.most_common()))
    print(f"{passed}/{total} passed ({100 * passed / max(total, 1):.2f}%)")
    return 0 if passed == total else 1


if __name__ == "__main__":
    sys.exit(main())
