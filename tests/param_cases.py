"""Models generated from :data:`ortcore.param_table.RULES`, for
tests/test_param_checks.py: for every entry, its valid examples (static
shapes, and every input's shape unknown), and for every check, models whose
subject breaks it (too short, too long, wrong rank, ...; an attribute one
off), once with static shapes (refused at load) and once with every other
input's shape unknown (refused at run time, or at load where the subject
alone decides).

It imports nothing from the tests package: the test runs it in a child
process (``python -c`` loading this file by path) so that a regression that
crashes a kernel fails the test instead of killing pytest. The child prints
one JSON line per case as it finishes it.

``ORTCORE_PARAM_CASES``: how many breaking shapes per check and example
(default 2; ``all`` for every one the generator finds).
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ep_sdk.fused_ops import DOMAIN as FUSED_DOMAIN
from ep_sdk.fused_ops import register_fused_schemas
from ep_sdk.registry import attribute_defaults
from ortcore.param_rules import BroadcastsTo, Check, Env, Length
from ortcore.param_table import RULES, Example, OpRules

NODE = "node_under_test"
"""The name of the node every generated model holds."""


def depth() -> int:
    """Breaking shapes per check and example (0: all)."""
    text = os.environ.get("ORTCORE_PARAM_CASES", "2").strip().lower()
    return 0 if text == "all" else max(int(text), 1)


@dataclass
class Case:
    """One generated model and what ortcore must do with it.

    Attributes:
        kind: ``valid`` (runs, static shapes), ``valid-dynamic`` (runs, no
            input shape known), ``static`` (refused at load), ``runtime``
            (every input but the subject of symbolic dims, ranks known) or
            ``unranked`` (every input but the subject of unknown shape):
            refused at run time, or at load where ``expect`` says so.
        expect: ``run`` (it runs), ``load`` or ``runtime`` (where it is refused).
        unknown: inputs declared without a shape.
        symbolic: inputs declared with a ``dim_param`` for every dim.
    """

    id: str
    entry: OpRules
    example: Example
    kind: str
    expect: str
    inputs: dict[str, Any]
    attrs: dict[str, Any]
    subject: str = ""
    check: Check | None = None
    initializers: set[str] = field(default_factory=set)
    unknown: set[str] = field(default_factory=set)
    symbolic: set[str] = field(default_factory=set)


def opset_of(entry: OpRules, example: Example) -> int:
    """The opset a case is built at: the example's, else within the entry's range."""
    if example.opset is not None:
        return example.opset
    if entry.domain == "":
        return max(entry.since, min(17, entry.until or 17))
    return entry.since


def _data(spec: Any, rng: np.random.Generator) -> np.ndarray | None:
    if spec is None or isinstance(spec, np.ndarray):
        return spec
    return rng.uniform(0.5, 1.5, size=spec).astype(np.float32)


def example_arrays(example: Example) -> dict[str, np.ndarray | None]:
    """Every input of the example as an array (shapes get data in [0.5, 1.5))."""
    rng = np.random.default_rng(0)
    return {name: _data(spec, rng) for name, spec in example.inputs.items() if spec is not None}


def _attrs(entry: OpRules, example: Example) -> dict[str, Any]:
    """The example's attributes over the schema's defaults."""
    if entry.domain == FUSED_DOMAIN:
        register_fused_schemas()
    out = attribute_defaults(
        entry.op, entry.domain, opset_of(entry, example) if not entry.domain else _ml(entry)
    )
    out.update(example.attrs)
    return out


def _ml(entry: OpRules) -> int:
    return 3 if entry.domain == "ai.onnx.ml" else 1


def env_of(
    entry: OpRules,
    example: Example,
    inputs: Mapping[str, Any],
    attrs: Mapping[str, Any],
    known: set[str] | None = None,
    ranked: bool = False,
) -> Env:
    """The env a check sees for these inputs (``known``: only those inputs'
    shapes; with ``ranked``, the others' ranks too)."""
    arrays = [inputs.get(n) for n in entry.inputs]
    shapes = [
        tuple(a.shape)
        if a is not None and (known is None or n in known)
        else ((None,) * a.ndim if a is not None and ranked else None)
        for n, a in zip(entry.inputs, arrays)
    ]
    return Env(
        entry.inputs,
        shapes,
        [a is not None for a in arrays],
        attrs,
        lambda i: arrays[i] if known is None or entry.inputs[i] in known else None,
        outputs=example.outputs,
    )


def _shapes(shape: tuple[int, ...]) -> list[tuple[int, ...]]:
    """Shapes near ``shape``: one dim halved (a length that numpy's tiling or a
    kernel reading modulo its length turns into a silent wrong answer: 2
    statistics for 4 channels), one shorter, one longer; a dim more; the last
    dim gone; a scalar; one value; twice the values (the likeliest first)."""
    out: list[tuple[int, ...]] = []
    for i, d in enumerate(shape):
        if d >= 4:
            out.append((*shape[:i], d // 2, *shape[i + 1 :]))
        if d >= 2:
            out.append((*shape[:i], d - 1, *shape[i + 1 :]))
        out.append((*shape[:i], d + 1, *shape[i + 1 :]))
    out += [
        (*shape, 2),
        (1, *shape),
        shape[:-1] if shape else (2,),
        (),
        (1,),
        (2 * max(shape or (1,)),),
    ]
    seen, unique = {shape}, []
    for s in out:
        if s not in seen:
            seen.add(s)
            unique.append(s)
    return unique


def _resized(a: np.ndarray | None, shape: tuple[int, ...]) -> np.ndarray:
    if a is None:
        return np.full(shape, 0.75, np.float32)
    return np.resize(a, shape) if a.size else np.zeros(shape, a.dtype)


def _attr_values(v: Any) -> list[Any]:
    if isinstance(v, (list, tuple)):
        v = list(v)
        changed = [v[0] + 1, *v[1:]] if v and isinstance(v[0], int) else []
        return [x for x in (v[:-1], v + v[-1:], changed) if x]
    if isinstance(v, int) and not isinstance(v, bool):
        return [x for x in (v + 1, v - 1, 2 * v + 1) if x >= 1 and x != v]
    return []


def cases() -> Iterator[Case]:
    """Every case of every entry (see :class:`Case`)."""
    n = depth()
    for entry in RULES:
        for k, example in enumerate(entry.examples):
            base = f"{entry.domain or 'ai.onnx'}.{entry.op}-{entry.since}#{k}"
            inputs = example_arrays(example)
            attrs = _attrs(entry, example)
            arrays = {name for name, spec in example.inputs.items() if isinstance(spec, np.ndarray)}
            present = {name for name, a in inputs.items() if a is not None}
            yield Case(
                f"{base} valid",
                entry,
                example,
                "valid",
                "run",
                inputs,
                dict(example.attrs),
                initializers=arrays,
            )
            yield Case(
                f"{base} valid-dynamic",
                entry,
                example,
                "valid-dynamic",
                "run",
                inputs,
                dict(example.attrs),
                unknown=present,
            )
            legal: set[str] = set()
            for check in entry.checks:
                for what, ins, _ in _legal(entry, example, check, inputs, attrs):
                    label = f"{check.subject} {what}"
                    if label not in legal and (not n or len(legal) < 2 * n):
                        legal.add(label)
                        yield Case(
                            f"{base} legal {label}",
                            entry,
                            example,
                            "valid",
                            "run",
                            ins,
                            dict(example.attrs),
                            initializers=arrays | {check.subject},
                        )
            for ci, check in enumerate(entry.checks):
                for j, (what, ins, at) in enumerate(
                    _breaking(entry, example, check, inputs, attrs)
                ):
                    if n and j >= n:
                        break
                    cid = f"{base} check{ci} {check.subject} {what}"
                    shown_attrs = {
                        a: v for a, v in at.items() if a in example.attrs or a == check.attribute
                    }
                    yield Case(
                        f"{cid} static",
                        entry,
                        example,
                        "static",
                        "load",
                        ins,
                        shown_attrs,
                        check.subject,
                        check,
                        initializers=arrays | {check.subject},
                    )
                    alone = {check.subject} if not check.attribute else set()
                    others = set(entry.inputs) - alone
                    for kind, ranked in (("runtime", True), ("unranked", False)):
                        decided = first_decided(entry, example, ins, at, alone, ranked)
                        yield Case(
                            f"{cid} {kind}",
                            entry,
                            example,
                            kind,
                            "load" if decided else "runtime",
                            ins,
                            shown_attrs,
                            check.subject,
                            check,
                            initializers=alone,
                            unknown=set() if ranked else others,
                            symbolic=others if ranked else set(),
                        )


def _options(
    entry: OpRules, check: Check, inputs: dict[str, Any], attrs: dict[str, Any]
) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """``(label, inputs, attrs)`` with the check's subject changed a little;
    first, where other inputs obey the same rule (BatchNormalization's four
    statistics), all of them alike: the mismatch no kernel notices by itself."""
    if check.attribute:
        if check.attribute not in attrs or attrs[check.attribute] is None:
            return []
        return [
            (f"{check.attribute}={v}", inputs, {**attrs, check.attribute: v})
            for v in _attr_values(attrs[check.attribute])
        ]
    current = inputs.get(check.subject)
    if current is None:
        return []  # the example omits it: another example must give it
    shapes = _shapes(tuple(current.shape))
    alike = [
        c.subject
        for c in entry.checks
        if type(c) is type(check)
        and not c.attribute
        and replace(c, subject=check.subject, noun=check.noun) == check
        and inputs.get(c.subject) is not None
        and inputs[c.subject].shape == current.shape
    ]
    options = []
    if len(alike) > 1:
        options += [
            (
                f"all{list(s)}",
                {**inputs, **{a: _resized(inputs[a], s) for a in alike}},
                attrs,
            )
            for s in shapes
        ]
    options += [
        (f"shape{list(s)}", {**inputs, check.subject: _resized(current, s)}, attrs) for s in shapes
    ]
    if current.dtype.kind in "iu" and current.size:
        changed = current.copy()
        changed.flat[0] += 1
        options.append(("values+1", {**inputs, check.subject: changed}, attrs))
    return options


def _breaking(
    entry: OpRules, example: Example, check: Check, inputs: dict[str, Any], attrs: dict[str, Any]
) -> Iterator[tuple[str, dict[str, Any], dict[str, Any]]]:
    """Changes that break ``check``, and no check before it in the entry (so
    the refusal that names a subject names this one)."""
    position = entry.checks.index(check)
    for label, ins, at in _options(entry, check, inputs, attrs):
        env = env_of(entry, example, ins, at)
        if check.verdict(env) and not any(c.verdict(env) for c in entry.checks[:position]):
            yield label, ins, at


def _broadcast_forms(shape: tuple[int, ...]) -> list[tuple[int, ...]]:
    """The smaller shapes a value of ``shape`` may broadcast from: a scalar,
    one value, a leading dim of 1 more or fewer, any dim 1."""
    forms = [(), (1,), (1, *shape), shape[1:]]
    forms += [(*shape[:i], 1, *shape[i + 1 :]) for i in range(len(shape))]
    return [f for f in dict.fromkeys(forms) if f != shape]


def _legal(
    entry: OpRules, example: Example, check: Check, inputs: dict[str, Any], attrs: dict[str, Any]
) -> Iterator[tuple[str, dict[str, Any], dict[str, Any]]]:
    """The broadcast and scalar forms of a parameter that every check allows
    (a Scale of one value, a scalar zero point, a Gemm C of (M, 1))."""
    if not isinstance(check, (BroadcastsTo, Length)) or check.attribute:
        return
    if isinstance(check, Length) and not (check.one or check.scalar):
        return
    current = inputs.get(check.subject)
    if current is None:
        return
    for shape in _broadcast_forms(tuple(current.shape)):
        ins = {**inputs, check.subject: _resized(current, shape)}
        env = env_of(entry, example, ins, attrs)
        if all(c.verdict(env) == "" for c in entry.checks):
            yield f"shape{list(shape)}", ins, attrs


def first_decided(
    entry: OpRules,
    example: Example,
    inputs: Mapping[str, Any],
    attrs: Mapping[str, Any],
    known: set[str],
    ranked: bool = False,
) -> bool:
    """Whether some check already fails with only ``known`` inputs' shapes
    known (and with ``ranked``, every input's rank)."""
    env = env_of(entry, example, inputs, attrs, known, ranked)
    return any(c.verdict(env) for c in entry.checks)


# -- building and running --------------------------------------------------


def build(case: Case) -> tuple[bytes, dict[str, np.ndarray]]:
    """The case's model (one node named :data:`NODE`) and its feeds."""
    entry, example = case.entry, case.example
    if entry.domain == FUSED_DOMAIN:
        register_fused_schemas()
    names, graph_inputs, inits, feeds = [], [], [], {}
    for name in entry.inputs:
        a = case.inputs.get(name)
        if a is None:
            names.append("")
            continue
        names.append(name)
        if name in case.initializers:
            inits.append(numpy_helper.from_array(a, name))
            continue
        elem = helper.np_dtype_to_tensor_dtype(a.dtype)
        shape: list[Any] | None = list(a.shape)
        if name in case.unknown:
            shape = None
        elif name in case.symbolic:
            shape = [f"{name}_{i}" for i in range(a.ndim)]
        graph_inputs.append(helper.make_tensor_value_info(name, elem, shape))
        feeds[name] = a
    while names and names[-1] == "":
        names.pop()
    outs = [f"out{i}" for i in range(example.outputs)]
    node = helper.make_node(entry.op, names, outs, name=NODE, domain=entry.domain, **case.attrs)
    opset = opset_of(entry, example)
    imports = [helper.make_opsetid("", opset if entry.domain == "" else 17)]
    if entry.domain:
        imports.append(helper.make_opsetid(entry.domain, _ml(entry)))
    elems = _output_types(case, node, imports)
    graph = helper.make_graph(
        [node],
        "g",
        graph_inputs,
        [helper.make_tensor_value_info(o, t, None) for o, t in zip(outs, elems)],
        inits,
    )
    model = helper.make_model(graph, opset_imports=imports)
    model.ir_version = 9
    return model.SerializeToString(), feeds


def _output_types(case: Case, node: onnx.NodeProto, imports: list[Any]) -> list[int]:
    """The outputs' element types, from the valid example's inference."""
    entry, example = case.entry, case.example
    valid = Case("", entry, example, "valid", "run", example_arrays(example), dict(example.attrs))
    names = [n for n in node.input]
    names = [n if n in valid.inputs else "" for n in entry.inputs]
    while names and not names[-1]:
        names.pop()
    vis = [
        helper.make_tensor_value_info(
            n, helper.np_dtype_to_tensor_dtype(valid.inputs[n].dtype), list(valid.inputs[n].shape)
        )
        for n in names
        if n
    ]
    g = helper.make_graph(
        [
            helper.make_node(
                entry.op, names, list(node.output), domain=entry.domain, **example.attrs
            )
        ],
        "g",
        vis,
        [],
    )
    inferred = onnx.shape_inference.infer_shapes(helper.make_model(g, opset_imports=imports))
    types = {v.name: v.type.tensor_type.elem_type for v in inferred.graph.value_info}
    first = valid.inputs[entry.inputs[0]]
    fallback = (
        helper.np_dtype_to_tensor_dtype(first.dtype)
        if first is not None
        else onnx.TensorProto.FLOAT
    )
    return [types.get(o) or fallback for o in node.output]


def outcome(case: Case, with_reference: bool = True) -> dict[str, Any]:
    """What ortcore does with the case: ``stage`` (``load``, ``run`` or
    ``ok``), the error's class names and message; for a valid case whether
    its outputs match onnx.reference's (``matches``)."""
    import ortcore

    model, feeds = build(case)
    out: dict[str, Any] = {"id": case.id}
    try:
        sess = ortcore.InferenceSession(model, providers=["CPUExecutionProvider"])
    except Exception as exc:
        return {
            **out,
            "stage": "load",
            "classes": [c.__name__ for c in type(exc).__mro__],
            "msg": str(exc),
        }
    try:
        got = sess.run(None, feeds)
    except Exception as exc:
        return {
            **out,
            "stage": "run",
            "classes": [c.__name__ for c in type(exc).__mro__],
            "msg": str(exc),
        }
    out["stage"] = "ok"
    if with_reference and case.kind.startswith("valid"):
        out["matches"] = _matches_reference(case, model, feeds, got)
    return out


REFERENCE_DIFFERS = {
    ("", "BatchNormalization", 9): "onnx.reference's BatchNormalization-9 applies the momentum "
    "default to batch statistics even in inference (ortcore and onnxruntime do not)",
}
"""Entries whose onnx.reference results are not the op's (never compared)."""


def _matches_reference(
    case: Case, model: bytes, feeds: dict[str, np.ndarray], got: list[Any]
) -> Any:
    """True/False against onnx.reference, or a string saying why not compared."""
    if case.entry.domain in ("com.microsoft", FUSED_DOMAIN):
        return "no reference for this domain"
    differs = REFERENCE_DIFFERS.get((case.entry.domain, case.entry.op, case.entry.since))
    if differs is not None:
        return differs
    from onnx.reference import ReferenceEvaluator

    try:
        want = ReferenceEvaluator(onnx.load_from_string(model)).run(None, feeds)
    except Exception as exc:
        return f"reference failed: {type(exc).__name__}: {exc}"
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        if g.shape != w.shape:
            return False
        if g.dtype.kind in "iub" and w.dtype.kind in "iub":
            if np.abs(g.astype(np.int64) - w.astype(np.int64)).max(initial=0) > 1:
                return False
        elif not np.allclose(
            g.astype(np.float64), w.astype(np.float64), rtol=1e-3, atol=1e-4, equal_nan=True
        ):
            return False
    return True


def ort_outcome(case: Case) -> str:
    """What onnxruntime does with the case: ``load``, ``run`` or ``ok``."""
    import onnxruntime

    model, feeds = build(case)
    try:
        sess = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"])
    except Exception:
        return "load"
    try:
        sess.run(None, feeds)
    except Exception:
        return "run"
    return "ok"


def main() -> None:
    """The child: run every case (``--ort``: onnxruntime's outcome too), one JSON line each."""
    with_ort = "--ort" in sys.argv
    for case in cases():
        print(json.dumps({"id": case.id, "start": True}), flush=True)
        try:
            result = outcome(case)
        except Exception:
            result = {"id": case.id, "stage": "error", "msg": traceback.format_exc()}
        if with_ort:
            try:
                result["ort"] = ort_outcome(case)
            except Exception as exc:
                result["ort"] = f"error: {exc}"
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
