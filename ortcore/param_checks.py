"""Apply the parameter table (:mod:`ortcore.param_table`) to a model.

Two moments, so that no node runs with a parameter that does not fit, on
any provider, and a node whose fit is known at load pays nothing per run:

- :func:`check_model`, when a session is created, after shape inference and
  before the optimizer (which folds a BatchNormalization into its Conv and
  would hide it): every check decidable from static shapes and constants is
  decided, and a violation is an :class:`~ortcore.errors.InvalidGraph`
  naming the node, the op, the input and the dimension it must match.
- :func:`pending_checks` and :func:`checked`, when the planner builds a
  node's kernel (any provider's) from the optimized graph: the checks still
  undecided there (a symbolic dim) wrap that one kernel, and run before it on
  every run; a violation is a :class:`~ortcore.errors.RunInvalidArgument`
  (onnxruntime's ``InvalidArgument``, worded as its run-time errors).
  :func:`checked_group` does the same for a fused group a provider compiles,
  for the checks whose inputs are the group's inputs or constants.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import fields, is_dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import onnx_ir as ir

from ep_sdk.registry import attribute_defaults

from .errors import InvalidGraph, RunInvalidArgument
from .nodeinfo import static_shape
from .optimizer._pass import graphs_of
from .param_table import RULED_OPS

if TYPE_CHECKING:
    from .param_rules import Check, Dims, Env
    from .param_table import OpRules

# The rule language and the table itself (``param_rules``, the table's
# families) load the first time a node of a ruled op is met: a model without
# one (most small models) never pays their import.

__all__ = ["check_model", "checked", "checked_group", "node_rules", "pending_checks"]

Pending = tuple["OpRules", tuple["Check", ...]]
"""A node's table entry and its checks still undecided."""


def node_rules(node: ir.Node, opsets: Mapping[str, int]) -> OpRules | None:
    """The table entry that covers ``node`` at the model's opset, if any."""
    if node.op_type not in RULED_OPS:
        return None
    from .param_table import rules_for

    domain = "" if node.domain == "ai.onnx" else node.domain
    return rules_for(domain, node.op_type, int(opsets.get(domain, 1)))


def _shape(value: ir.Value | None) -> Dims | None:
    """What load knows of a value's shape: its inferred (or, for a graph
    input, declared) shape, else a constant's own."""
    shape = static_shape(value)
    if shape is None and value is not None and not value.is_graph_input():
        const = value.const_value
        if const is not None:
            return tuple(int(d) for d in const.shape.numpy())
    return shape


def _constant(value: ir.Value | None) -> np.ndarray | None:
    """The contents of ``value`` if fixed at load: an initializer no feed
    replaces, or a Constant node's ``value``."""
    if value is None:
        return None
    if value.const_value is not None and not value.is_graph_input():
        return np.asarray(value.const_value.numpy())
    producer = value.producer()
    if (
        producer is not None
        and producer.op_type == "Constant"
        and producer.domain in ("", "ai.onnx")
    ):
        attr = producer.attributes.get("value")
        if attr is not None and attr.type == ir.AttributeType.TENSOR:
            return np.asarray(attr.value.numpy())
    return None


def _attrs(node: ir.Node, opset: int) -> dict[str, Any]:
    attrs = attribute_defaults(node.op_type, node.domain, opset)
    for name, attr in node.attributes.items():
        if attr.type in (ir.AttributeType.GRAPH, ir.AttributeType.GRAPHS):
            continue
        v = attr.value
        attrs[name] = list(v) if isinstance(v, Sequence) and not isinstance(v, str) else v
    return attrs


def static_env(entry: OpRules, node: ir.Node, attrs: Mapping[str, Any]) -> Env:
    """The env of ``node`` from what load knows: static shapes, constants."""
    from .param_rules import Env

    inputs = list(node.inputs)[: len(entry.inputs)]
    present = [v is not None for v in inputs]
    return Env(
        entry.inputs,
        [_shape(v) for v in inputs],
        present,
        attrs,
        lambda i: _constant(inputs[i]),
        outputs=len(node.outputs),
    )


def _verdict(check: Check, env: Env) -> str | None:
    """``check.verdict(env)``, undecided where the node's attributes are not
    what the rule computes with (a hostile model's, of a domain whose
    schemas onnx's checker does not know): the kernel then says what is wrong."""
    try:
        return check.verdict(env)
    except (TypeError, ValueError, ArithmeticError, IndexError, KeyError):
        return None


def _where(node: ir.Node) -> str:
    op = node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}.{node.op_type}"
    return f"{op} node {node.name or '(unnamed)'!r}"


def _sentence(entry: OpRules, node: ir.Node, check: Check, verdict: str) -> str:
    """The verdict, its subject named with the value it is: "input scale ('s') has ..."."""
    if check.attribute:
        return verdict
    i = entry.inputs.index(check.subject)
    value = node.inputs[i] if i < len(node.inputs) else None
    said = [repr(value.name)] if value is not None and value.name else []
    if check.noun:
        said.append(f"the {check.noun}")
    name = f" ({', '.join(said)})" if said else ""
    if verdict.startswith(check.subject + " "):
        return f"input {check.subject}{name}{verdict[len(check.subject) :]}"
    return verdict


def check_model(model: ir.Model) -> None:
    """Decide every check the static shapes allow, in the main graph and
    every subgraph; leave the rest to run time (:func:`pending_checks`).

    Raises:
        InvalidGraph: a parameter does not fit; the message names the node,
            the op, the input, its length or shape and what it must match.
    """
    opsets = model.opset_imports
    for graph in graphs_of(model.graph):
        for node in graph:
            entry = node_rules(node, opsets)
            if entry is None:
                continue
            domain = "" if node.domain == "ai.onnx" else node.domain
            env = static_env(entry, node, _attrs(node, int(opsets.get(domain, 1))))
            for check in entry.checks:
                verdict = _verdict(check, env)
                if verdict:
                    raise InvalidGraph(
                        f"This is an invalid model. {_where(node)}: "
                        f"{_sentence(entry, node, check, verdict)}"
                    )


def pending_checks(
    node: ir.Node, opsets: Mapping[str, int], attrs: Mapping[str, Any]
) -> Pending | None:
    """The checks of ``node`` its static shapes leave undecided (``None``: none).

    Args:
        attrs: the node's attributes with the schema's defaults (a NodeInfo's).

    Raises:
        InvalidGraph: a check fails already (a node an optimizer pass made).
    """
    entry = node_rules(node, opsets)
    if entry is None:
        return None
    env = static_env(entry, node, attrs)
    left: list[Check] = []
    for check in entry.checks:
        verdict = _verdict(check, env)
        if verdict is None:
            left.append(check)
        elif verdict:
            sentence = _sentence(entry, node, check, verdict)
            raise InvalidGraph(f"This is an invalid model. {_where(node)}: {sentence}")
    return (entry, tuple(left)) if left else None


def _run_shape(v: Any) -> Dims | None:
    shape = getattr(v, "shape", None)
    return None if shape is None else tuple(int(d) for d in shape)


def _run_value(v: Any) -> np.ndarray | None:
    return v if isinstance(v, np.ndarray) else None


_SHAPES_KEPT = 64
"""Input shapes a checked kernel remembers as passing (then it forgets them all)."""


def _reads_values(obj: Any) -> bool:
    """Whether a check (or expression) reads an input's values, not only shapes."""
    from .param_rules import ProdValues, Value

    if isinstance(obj, (Value, ProdValues)):
        return True
    if is_dataclass(obj):  # every Check and Expr
        return any(_reads_values(getattr(obj, f.name)) for f in fields(obj))
    if isinstance(obj, tuple):
        return any(_reads_values(x) for x in obj)
    return False


def _violation(
    pending: Pending, node: ir.Node, env: Env, where: Callable[[], str]
) -> RunInvalidArgument | None:
    entry, checks = pending
    for check in checks:
        verdict = _verdict(check, env)
        if verdict:
            sentence = _sentence(entry, node, check, verdict)
            return RunInvalidArgument(f"{where()}. Status Message: {_where(node)}: {sentence}")
    return None


def checked(
    fn: Callable[..., Any],
    pending: Pending,
    node: ir.Node,
    attrs: Mapping[str, Any],
    wants_context: bool,
    where: Callable[[], str],
) -> Callable[..., Any]:
    """``fn`` (a node's kernel) checking ``pending`` on its inputs before each call.

    Args:
        where: onnxruntime's opening of a run-time error for the step
            ("Non-zero status code returned while running ...").
    """
    from .param_rules import Env

    entry, checks = pending
    n = len(entry.inputs)
    outputs = len(node.outputs)
    # The verdicts depend on the inputs' shapes alone (unless a check reads
    # values): shapes that passed once pass again, and a run whose shapes
    # repeat (the usual case) costs a tuple and a set lookup.
    passed: set[tuple[Any, ...]] | None = None if _reads_values(checks) else set()

    def check(args: tuple[Any, ...]) -> None:
        ins = args[:n]
        key = tuple([getattr(a, "shape", None) for a in ins]) if passed is not None else None
        if key is not None and key in passed:  # type: ignore[operator]
            return
        env = Env(
            entry.inputs,
            [_run_shape(a) for a in ins],
            [a is not None for a in ins],
            attrs,
            lambda i: _run_value(ins[i]),
            outputs=outputs,
        )
        error = _violation(pending, node, env, where)
        if error is not None:
            raise error
        if key is not None and passed is not None:
            if len(passed) >= _SHAPES_KEPT:
                passed.clear()
            passed.add(key)

    if wants_context:

        def run_with_context(ctx: Any, *args: Any) -> Any:
            check(args)
            return fn(ctx, *args)

        run_with_context.pending_checks = pending  # type: ignore[attr-defined]
        return run_with_context

    def run(*args: Any) -> Any:
        check(args)
        return fn(*args)

    run.pending_checks = pending  # type: ignore[attr-defined]
    return run


_Member = tuple[ir.Node, Pending, dict[str, Any], list[int | None]]
"""A group member with undecided checks: its attributes, and for each of its
inputs the position among the group's inputs (``None``: made inside, or a constant)."""


def checked_group(
    fn: Callable[..., Any],
    nodes: Sequence[ir.Node],
    inputs: Sequence[ir.Value],
    opsets: Mapping[str, int],
    where: Callable[[], str],
) -> Callable[..., Any]:
    """A compiled group's function checking its members' undecided checks on
    the group's inputs before each call (``fn`` itself where none is left).

    An input of a member that the group computes inside is seen only through
    its static shape: a check that needs more is left to the engine.
    """
    position = {v: i for i, v in enumerate(inputs)}
    members: list[_Member] = []
    for node in nodes:
        domain = "" if node.domain == "ai.onnx" else node.domain
        attrs = _attrs(node, int(opsets.get(domain, 1)))
        pending = pending_checks(node, opsets, attrs)
        if pending is None:
            continue
        ins = list(node.inputs)[: len(pending[0].inputs)]
        members.append(
            (node, pending, attrs, [position.get(v) if v is not None else None for v in ins])
        )
    if not members:
        return fn
    values_read = any(_reads_values(pending[1]) for _, pending, _, _ in members)
    passed: set[tuple[Any, ...]] | None = None if values_read else set()

    def run(*args: Any) -> Any:
        key = tuple([getattr(a, "shape", None) for a in args]) if passed is not None else None
        if key is None or key not in passed:  # type: ignore[operator]
            for member in members:
                _check_member(member, args, where)
            if key is not None and passed is not None:
                if len(passed) >= _SHAPES_KEPT:
                    passed.clear()
                passed.add(key)
        return fn(*args)

    return run


def _check_member(member: _Member, args: tuple[Any, ...], where: Callable[[], str]) -> None:
    from .param_rules import Env

    node, pending, attrs, where_from = member
    ins = list(node.inputs)[: len(where_from)]
    shapes = [_run_shape(args[k]) if k is not None else _shape(v) for k, v in zip(where_from, ins)]
    values = [_run_value(args[k]) if k is not None else None for k in where_from]
    env = Env(
        pending[0].inputs,
        shapes,
        [v is not None for v in ins],
        attrs,
        lambda i: values[i] if values[i] is not None else _constant(ins[i]),
        outputs=len(node.outputs),
    )
    error = _violation(pending, node, env, where)
    if error is not None:
        raise error
