"""A failing case, reproduced: a one-line description, and the files to rerun it.

:func:`describe` reads the line off the case's model, whatever made it: a
single-node model gives its op, attributes and inputs (dtype and shape of
each, the values of small integer ones and of constants), a larger model its
ops; then the opset, the seed the values were drawn with and the memory
layout they are fed in. ``ortcore conformance --repro DIR`` calls
:func:`write_case` for each failing case: onnx's test data layout
(``model.onnx``, ``test_data_set_N/input_K.pb`` and ``output_K.pb``) plus
``case.json``; :func:`load_data`, :func:`session_options` and :func:`compare`
rerun it (``python -m conformance.repro DIR --provider NAME`` does all three).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from .cases import Case

__all__ = [
    "compare",
    "describe",
    "folder_name",
    "load_data",
    "reproducer",
    "session_options",
    "snippet",
    "write_case",
]

MAX_LINE = 600
SMALL = 8
"""Integer inputs and constants of at most this many elements show their values."""


def _short(seq: Sequence[Any], n: int = SMALL) -> str:
    items = [_scalar(v) for v in seq[:n]]
    return "[" + ",".join(items) + (",…" if len(seq) > n else "") + "]"


def _scalar(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:g}"
    if isinstance(v, bytes):
        return repr(v.decode("utf-8", "replace"))
    return str(v)


def _value(v: Any) -> str:
    """``float32[3,4]``; small integer arrays with their values; sequences, None."""
    if isinstance(v, np.ndarray):
        text = f"{v.dtype.name}[{','.join(map(str, v.shape))}]"
        if (v.dtype.kind in "iub" and v.size <= SMALL) or (v.ndim == 0 and v.dtype.kind in "fc"):
            text += "=" + (_scalar(v.item()) if v.ndim == 0 else _short(v.ravel().tolist()))
        return text
    if isinstance(v, (list, tuple)):
        return f"seq[{len(v)}]" + (f" of {_value(v[0])}" if v else "")
    if v is None:
        return "None"
    return type(v).__name__


def _attribute(a: onnx.AttributeProto) -> str:
    v = helper.get_attribute_value(a)
    if isinstance(v, onnx.TensorProto):
        return f"{a.name}=" + _value(numpy_helper.to_array(v))
    if isinstance(v, onnx.GraphProto):
        return f"{a.name}=graph({len(v.node)} nodes)"
    if isinstance(v, (list, tuple)):
        if v and isinstance(v[0], onnx.GraphProto):
            return f"{a.name}=[{len(v)} graphs]"
        if v and isinstance(v[0], onnx.TensorProto):
            return f"{a.name}=[{len(v)} tensors]"
        return f"{a.name}={_short(list(v))}"
    return f"{a.name}={_scalar(v)}"


def _opset(model: onnx.ModelProto) -> str:
    versions = [
        f"{o.domain}:{o.version}" if o.domain else str(o.version) for o in model.opset_import
    ]
    return "opset " + ",".join(versions)


def describe(
    model: onnx.ModelProto,
    inputs: Sequence[Any] = (),
    seed: int | None = None,
    layout: str = "",
) -> str:
    """One line that says what ``model`` computes on ``inputs`` (the first data set).

    Single node: ``Gemm(alpha=0.5, transA=1) x0=float32[5,5], x1=float32[5,5],
    c0=const int64[1]=[1]; opset 18; seed 7``. More nodes: the ops with their
    counts, then the graph inputs.
    """
    g = model.graph
    consts = {t.name: t for t in g.initializer}
    fed = [i.name for i in g.input if i.name not in consts]
    values = dict(zip(fed, inputs))

    def arg(name: str) -> str:
        if not name:
            return "_"  # an optional input left out
        if name in values:
            return f"{name}={_value(values[name])}"
        if name in consts:
            return f"{name}=const {_value(numpy_helper.to_array(consts[name]))}"
        return name

    if len(g.node) == 1:
        node = g.node[0]
        op = f"{node.domain}.{node.op_type}" if node.domain else node.op_type
        attrs = ", ".join(_attribute(a) for a in node.attribute)
        head = f"{op}({attrs}) " + ", ".join(arg(n) for n in node.input)
    else:
        counts = Counter(n.op_type for n in g.node)
        ops = [f"{op}*{k}" if k > 1 else op for op, k in counts.items()]
        more = f", +{len(ops) - SMALL} more ops" if len(ops) > SMALL else ""
        head = f"graph of {len(g.node)} nodes ({', '.join(ops[:SMALL])}{more}) " + ", ".join(
            arg(n) for n in fed
        )
    parts = [head.rstrip(), _opset(model)]
    if seed is not None:
        parts.append(f"seed {seed}")
    if layout:
        parts.append(f"inputs fed {layout}")
    line = "; ".join(parts)
    return line if len(line) <= MAX_LINE else line[: MAX_LINE - 1] + "…"


def reproducer(case: Case, model: onnx.ModelProto, data_sets: Sequence[Any]) -> str:
    """:func:`describe` of a case, with its seed and layout; never raises."""
    try:
        inputs = data_sets[0][0] if data_sets else []
        return describe(model, inputs, case.seed, case.layout)
    except Exception as exc:  # a reproducer must never turn into the case's failure
        return f"(no reproducer: {type(exc).__name__}: {exc})"


def folder_name(case_id: str) -> str:
    """A file name for a case id: ``/`` as ``__``, other odd characters as ``_``."""
    return re.sub(r"[^A-Za-z0-9_.=,+-]", "_", case_id.replace("/", "__"))


def _proto(value: Any, type_proto: onnx.TypeProto, name: str) -> bytes:
    if type_proto.HasField("sequence_type"):
        return numpy_helper.from_list(list(value), name).SerializeToString()
    if type_proto.HasField("optional_type"):
        return numpy_helper.from_optional(value, name).SerializeToString()
    return numpy_helper.from_array(np.asarray(value), name).SerializeToString()


def write_case(
    case: Case,
    directory: str | Path,
    provider: str = "",
    options: Sequence[tuple[str, str]] = (),
    repro: str = "",
) -> Path:
    """Write ``case`` into ``directory/<folder_name(case.id)>``; return that folder.

    ``model.onnx`` (weights as ``weights.bin`` for a large case), one
    ``test_data_set_N`` per data set (inputs and expected outputs as onnx
    ``TensorProto``, ``SequenceProto`` or ``OptionalProto``), and ``case.json``
    (id, reproducer, layout, tolerance, provider and options).
    """
    model, sets = case.materialize()
    folder = Path(directory) / folder_name(case.id)
    folder.mkdir(parents=True, exist_ok=True)
    if case.large:
        onnx.save_model(
            model,
            str(folder / "model.onnx"),
            save_as_external_data=True,
            location="weights.bin",
            size_threshold=4096,
        )
    else:
        onnx.save_model(model, str(folder / "model.onnx"))
    consts = {t.name for t in model.graph.initializer}
    ins_info = [i for i in model.graph.input if i.name not in consts]
    for k, (ins, outs) in enumerate(sets):
        ds = folder / f"test_data_set_{k}"
        ds.mkdir(exist_ok=True)
        for i, (vi, v) in enumerate(zip(ins_info, ins)):
            (ds / f"input_{i}.pb").write_bytes(_proto(v, vi.type, vi.name))
        for i, (vi, v) in enumerate(zip(model.graph.output, outs)):
            (ds / f"output_{i}.pb").write_bytes(_proto(v, vi.type, vi.name))
    tol = case.tolerance
    meta = {
        "id": case.id,
        "repro": repro or reproducer(case, model, sets),
        "layout": case.layout,
        "seed": case.seed,
        "mixed": case.mixed,
        "tolerance": None if tol is None else {"rtol": tol.rtol, "atol": tol.atol},
        "provider": provider,
        "options": dict(options),
    }
    (folder / "case.json").write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
    return folder


def _meta(folder: str | Path) -> dict[str, Any]:
    file = Path(folder) / "case.json"
    return json.loads(file.read_text(encoding="utf-8")) if file.exists() else {}


def load_data(folder: str | Path, data_set: int = 0) -> tuple[dict[str, Any], list[Any]]:
    """(inputs by name, laid out as the suite feeds them; expected outputs) of one data set."""
    from .cases import _load_stored
    from .layout import relayout

    model, sets = _load_stored(Path(folder))
    consts = {t.name for t in model.graph.initializer}
    names = [i.name for i in model.graph.input if i.name not in consts]
    ins, outs = sets[data_set]
    layout = _meta(folder).get("layout") or ""
    feeds = {n: relayout(v, layout) if layout else v for n, v in zip(names, ins)}
    return feeds, outs


def session_options(folder: str | Path) -> Any:
    """The suite's session options for the case: no CPU fallback; for an operator
    case, graph optimizations off too."""
    from .target import session_options as options

    return options(optimize=bool(_meta(folder).get("mixed")))


def compare(got: Sequence[Any], expected: Sequence[Any], folder: str | Path) -> str:
    """``ok``, or what differs first (with the case's own tolerance)."""
    from .precision import Tolerance, compare_values

    tol = _meta(folder).get("tolerance")
    case_tol = Tolerance(tol["rtol"], tol["atol"]) if tol else None
    if len(got) != len(expected):
        return f"wrong_type: {len(got)} outputs, expected {len(expected)}"
    for i, (g, w) in enumerate(zip(got, expected)):
        verdict, detail, _ = compare_values(g, w, case_tol, None, f"output {i}")
        if verdict != "ok":
            return f"{verdict}: {detail}"
    return "ok"


def _providers(provider: str, options: dict[str, str], mixed: bool) -> str:
    spec = repr((provider, options)) if options else repr(provider)
    return f"[{spec}, 'CPUExecutionProvider']" if mixed else f"[{spec}]"


def snippet(folder: str | Path) -> str:
    """Three lines of Python that rerun the case written in ``folder`` with ortcore."""
    meta = _meta(folder)
    d = str(folder)
    providers = _providers(
        meta.get("provider") or "CPUExecutionProvider",
        meta.get("options") or {},
        bool(meta.get("mixed")),
    )
    return (
        f"import ortcore, conformance.repro as repro; d = {d!r}\n"
        "feeds, expected = repro.load_data(d); so = repro.session_options(d)\n"
        f"got = ortcore.InferenceSession(d + '/model.onnx', so, providers={providers})"
        ".run(None, feeds); print(repro.compare(got, expected, d))"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m conformance.repro DIR [--provider NAME]``: rerun a written case.

    Exit status 0 when every data set matches, 1 otherwise.
    """
    import ortcore

    parser = argparse.ArgumentParser(
        prog="python -m conformance.repro",
        description="Rerun a case written by 'ortcore conformance --repro' and compare "
        "its outputs with the expected ones.",
    )
    parser.add_argument("folder", help="the case's folder (it holds model.onnx and case.json)")
    parser.add_argument("--provider", help="provider to run it on (default: the one in case.json)")
    parser.add_argument(
        "--plugin",
        action="append",
        default=[],
        metavar="MODULE",
        help="import MODULE and register it as a plugin first (a provider not installed)",
    )
    args = parser.parse_args(argv)
    from .target import load_plugins

    load_plugins(args.plugin)
    meta = _meta(args.folder)
    provider = args.provider or meta.get("provider") or "CPUExecutionProvider"
    options = {} if args.provider else (meta.get("options") or {})
    spec: Any = (provider, options) if options else provider
    providers = [spec, "CPUExecutionProvider"] if meta.get("mixed") else [spec]
    if meta.get("repro"):
        print(meta["repro"])
    sess = ortcore.InferenceSession(
        str(Path(args.folder) / "model.onnx"), session_options(args.folder), providers=providers
    )
    sets = sorted(Path(args.folder).glob("test_data_set_*"))
    status = 0
    for k in range(len(sets)):
        feeds, expected = load_data(args.folder, k)
        verdict = compare(sess.run(None, feeds), expected, args.folder)
        print(f"data set {k}: {verdict}")
        status |= verdict != "ok"
    return status


if __name__ == "__main__":
    sys.exit(main())
