"""Test helpers for provider authors: run nodes and models through a provider,
or a provider's kernels on their own, and compare the results with onnx's
reference evaluator.

``onnx.reference`` is a test oracle only: it is used here, never in kernels.

Through a session (:func:`check_node`, :func:`check_model`, :func:`session`):
every helper takes the provider as a name or alias of an installed provider
(``"cpu"``) or as an :class:`~ep_sdk.ExecutionProvider` subclass that is not
installed yet (it is offered to a private plugin manager, next to the
installed providers, so the CPU fallback is still there)::

    from ep_sdk.testing import check_node

    def test_relu():
        x = np.array([[-1.0, 2.0]], dtype=np.float32)
        check_node(MyProvider, "Relu", [x], opset=14)

Kernels on their own (:class:`KernelKit`): no session, no optimizer, no
partitioning; a kernel is looked up in the provider's registry and built from
the :class:`~ep_sdk.NodeInfo` the core would build (:func:`ep_sdk.make_node_info`),
then called as the executor calls it. Use it to test a kernel with inputs a
session would refuse, several thread counts, or a kernel's build-time checks::

    from ep_sdk.testing import KernelKit

    kit = KernelKit(MyProvider, opset=17)

    def test_relu_kernel():
        kit.check_node("Relu", [np.array([-1.0, 2.0], np.float32)])

Each check returns the provider's outputs; it fails (``AssertionError``) when
the node did not run on the provider, or an output differs from the oracle
by more than ``atol + rtol * |expected|``.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import onnx
import onnx_ir as ir
from onnx import helper

from .dtypes import constant_array, from_numpy
from .graph import outer_values
from .kernel import RunContext, SessionConfig
from .nodeinfo import implicit_inputs, make_node_info
from .provider import ExecutionProvider
from .registry import KernelDef, KernelMiss
from .terminate import bind_run, unbind_run

if TYPE_CHECKING:
    from ortcore import InferenceSession

__all__ = [
    "KernelKit",
    "Oracle",
    "assert_close",
    "check_model",
    "check_node",
    "infer_shapes",
    "make_node_model",
    "onnxruntime_outputs",
    "reference_outputs",
    "session",
]

ProviderLike = str | type[ExecutionProvider]

Oracle = Callable[[onnx.ModelProto, Mapping[str, Any]], Sequence[Any]]
"""Computes a model's expected outputs from its feeds (``KernelKit.check_node``'s
``oracle=``, next to the names ``"reference"`` and ``"onnxruntime"``)."""


def infer_shapes(model: onnx.ModelProto) -> onnx.ModelProto:
    """Return ``model`` with onnx's inferred types and shapes.

    Lenient, unlike the core's check at load: what onnx cannot infer (or
    finds wrong) stays unknown, so that a kernel's own checks can be tested
    with inputs a session would refuse.
    """
    return onnx.shape_inference.infer_shapes(
        model, check_type=False, strict_mode=False, data_prop=True
    )


def make_node_model(
    op_type: str,
    inputs: Sequence[np.ndarray | None],
    *,
    attributes: Mapping[str, Any] | None = None,
    num_outputs: int = 1,
    opset: int = 21,
    domain: str = "",
    domain_version: int = 1,
) -> onnx.ModelProto:
    """A model of one node whose inputs are graph inputs ``x0, x1, ...``.

    ``None`` in ``inputs`` leaves that optional input out. Outputs are
    ``y0, y1, ...``; their types are left to shape inference
    (:func:`infer_shapes`). The IR version is the lowest that the opsets
    allow, so that older runtimes used as oracles load the model.
    """
    names = [f"x{i}" if x is not None else "" for i, x in enumerate(inputs)]
    outputs = [f"y{i}" for i in range(num_outputs)]
    node = helper.make_node(
        op_type, names, outputs, name=f"{op_type}_0", domain=domain, **dict(attributes or {})
    )
    graph_inputs = [
        helper.make_tensor_value_info(n, int(from_numpy(x.dtype)), list(x.shape))
        for n, x in zip(names, inputs)
        if x is not None
    ]
    graph_outputs = [helper.make_value_info(o, onnx.TypeProto()) for o in outputs]
    graph = helper.make_graph([node], f"{op_type}_test", graph_inputs, graph_outputs)
    opsets = [helper.make_opsetid("", opset)]
    if domain:
        opsets.append(helper.make_opsetid(domain, domain_version))
    ir_version = helper.find_min_ir_version_for(opsets, ignore_unknown=True)
    model = helper.make_model(graph, opset_imports=opsets, ir_version=ir_version)
    return infer_shapes(model)


def session(
    provider: ProviderLike,
    model: onnx.ModelProto | bytes | str,
    *,
    fallback: bool = True,
    optimize: bool = True,
    sess_options: Any = None,
) -> InferenceSession:
    """An ``InferenceSession`` of ``model`` with ``provider`` first.

    Args:
        provider: installed provider name or alias, or a provider class.
        model: the model (proto, serialized bytes or path).
        fallback: keep the CPU provider as fallback; ``False`` makes a node
            the provider declines an error.
        optimize: ``False`` turns graph optimizations off, so that the
            provider's own kernels run every node.
        sess_options: ``SessionOptions`` to start from (e.g. with custom ops).
    """
    import ortcore

    so = sess_options if sess_options is not None else ortcore.SessionOptions()
    if not fallback:
        so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
    if not optimize:
        so.graph_optimization_level = ortcore.GraphOptimizationLevel.ORT_DISABLE_ALL
    data = model.SerializeToString() if isinstance(model, onnx.ModelProto) else model
    if isinstance(provider, str):
        return ortcore.InferenceSession(data, so, providers=[provider])
    return ortcore.InferenceSession(
        data, so, providers=[provider.name], plugin_manager=_manager_with(provider)
    )


def _manager_with(cls: type[ExecutionProvider]) -> Any:
    """A plugin manager with the installed providers plus ``cls``."""
    from ortcore.plugins import PluginManager

    from . import hookimpl

    manager = PluginManager()
    installed = {e.name: e for e in manager.entries()}
    if cls.name in installed and installed[cls.name].cls is cls:
        return manager
    if cls.name in installed:
        # An installed copy of the provider under test: test the given class.
        manager.unregister_plugin(installed[cls.name].plugin)
    plugin = types.ModuleType(f"ep_sdk.testing.{cls.__name__}")

    @hookimpl
    def ortcore_providers() -> list[type[ExecutionProvider]]:
        return [cls]

    plugin.ortcore_providers = ortcore_providers  # type: ignore[attr-defined]
    manager.register_plugin(plugin, name=plugin.__name__)
    return manager


def reference_outputs(model: onnx.ModelProto, feeds: Mapping[str, Any]) -> list[Any]:
    """The outputs of ``model`` according to ``onnx.reference``."""
    import onnx.reference

    return list(onnx.reference.ReferenceEvaluator(model).run(None, dict(feeds)))


def assert_close(
    got: Sequence[Any], want: Sequence[Any], *, rtol: float = 1e-4, atol: float = 1e-6
) -> None:
    """Assert each output has the expected dtype, shape and values."""
    assert len(got) == len(want), f"{len(got)} outputs, expected {len(want)}"
    for i, (g, w) in enumerate(zip(got, want)):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype, f"output {i}: dtype {g.dtype}, expected {w.dtype}"
        assert g.shape == w.shape, f"output {i}: shape {g.shape}, expected {w.shape}"
        if g.dtype.kind in "fc":
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=f"output {i}")
        else:
            np.testing.assert_array_equal(g, w, err_msg=f"output {i}")


def check_model(
    provider: ProviderLike,
    model: onnx.ModelProto,
    feeds: Mapping[str, Any],
    *,
    rtol: float = 1e-4,
    atol: float = 1e-6,
    fallback: bool = True,
    min_nodes: int = 1,
    sess_options: Any = None,
) -> list[Any]:
    """Run ``model`` with ``provider`` (CPU as fallback) and compare with the oracle.

    Args:
        min_nodes: how many nodes the provider must have taken at least.
        sess_options: ``SessionOptions`` to start from.

    Returns:
        the provider's outputs.
    """
    sess = session(provider, model, fallback=fallback, sess_options=sess_options)
    name = sess.get_providers()[0]
    taken = sess.get_partition().counts().get(name, 0)
    assert taken >= min_nodes, (
        f"{name} ran {taken} node(s), expected at least {min_nodes}: "
        f"{sess.get_partition().to_dict()['nodes']}"
    )
    got = sess.run(None, dict(feeds))
    assert_close(got, reference_outputs(model, feeds), rtol=rtol, atol=atol)
    return got


def check_node(
    provider: ProviderLike,
    op_type: str,
    inputs: Sequence[np.ndarray | None],
    *,
    attributes: Mapping[str, Any] | None = None,
    num_outputs: int = 1,
    opset: int = 21,
    rtol: float = 1e-4,
    atol: float = 1e-6,
) -> list[Any]:
    """Run one node on ``provider`` alone (no fallback, no optimizations)
    and compare its outputs with the oracle.

    Returns:
        the provider's outputs.
    """
    model = make_node_model(
        op_type, inputs, attributes=attributes, num_outputs=num_outputs, opset=opset
    )
    feeds = {f"x{i}": x for i, x in enumerate(inputs) if x is not None}
    sess = session(provider, model, fallback=False, optimize=False)
    got = sess.run(None, feeds)
    assert_close(got, reference_outputs(model, feeds), rtol=rtol, atol=atol)
    return got


def onnxruntime_outputs(model: onnx.ModelProto, feeds: Mapping[str, Any]) -> list[Any]:
    """The outputs of ``model`` according to onnxruntime's CPU provider: the
    oracle for the few ops where ``onnx.reference`` is known to be wrong.

    Raises:
        ImportError: onnxruntime is not installed.
    """
    import onnxruntime

    sess = onnxruntime.InferenceSession(
        model.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    return list(sess.run(None, dict(feeds)))


_ORACLES: dict[str, Oracle] = {
    "reference": reference_outputs,
    "onnxruntime": onnxruntime_outputs,
}


# A value as the kit holds it: the value, and whether it is on the provider's
# device (False: in host memory).
_Placed = tuple[Any, bool]


def _place(provider: ExecutionProvider, placed: _Placed, on_device: bool) -> Any:
    """The value of ``placed`` on the device (``on_device``) or in host memory."""
    value, where = placed
    if value is None or where == on_device:
        return value
    return provider.from_host(value) if on_device else provider.to_host(value)


class _Step:
    """One built kernel, called the way the executor calls it: the node's
    inputs (``None`` for an omitted one) then its implicit inputs, with a
    :class:`~ep_sdk.RunContext` first for a ``context=True`` kernel, each
    input where the kernel wants it (the device, or host memory where its
    ``input_memory`` says so)."""

    __slots__ = ("compute", "found", "provider", "info", "inputs", "outputs")

    def __init__(
        self, node: ir.Node, opsets: Mapping[str, int], provider: ExecutionProvider
    ) -> None:
        registry = provider.registry()
        opset = opsets.get(node.domain, 1)
        found: KernelDef | KernelMiss = (
            registry.lookup_node(node, opsets)
            if registry is not None
            else KernelMiss("the provider has no kernel registry")
        )
        if isinstance(found, KernelMiss):
            raise LookupError(
                f"{provider.name} has no kernel for {node.op_type}"
                f"({node.domain or 'ai.onnx'}, opset {opset}) node {node.name!r}: {found}"
            )
        implicit = implicit_inputs(node)
        self.info = make_node_info(
            node,
            opsets,
            provider,
            subgraph=lambda g: _KitGraph(g, opsets, provider),
            implicit=implicit,
        )
        self.compute = found.builder(self.info)
        self.found = found
        self.provider = provider
        self.inputs: list[ir.Value | None] = [*node.inputs, *implicit]
        self.outputs = list(node.outputs)

    def __call__(self, ctx: RunContext, args: Sequence[_Placed]) -> list[_Placed]:
        device = not self.provider.device.is_host
        memory_in, memory_out = self.found.input_memory, self.found.output_memory
        values = [
            _place(self.provider, a, device and memory_in.get(i) != "host")
            for i, a in enumerate(args)
        ]
        res = self.compute(ctx, *values) if self.found.context else self.compute(*values)
        if not isinstance(res, (tuple, list)) or len(res) != len(self.outputs):
            raise AssertionError(
                f"the kernel of {self.info.describe()} returned {res!r}: expected a tuple "
                f"or list of {len(self.outputs)} value(s), one per node output"
            )
        return [(r, device and memory_out.get(i) != "host") for i, r in enumerate(res)]


class _KitGraph:
    """A graph run node by node with one provider's kernels, in graph order.

    It is the kit's :class:`~ep_sdk.SubgraphRunner` for graph attributes
    (``If`` branches, ``Loop`` and ``Scan`` bodies): :meth:`run` takes and
    returns values on the provider's device, as a control-flow kernel has
    them. :meth:`run_host` runs a whole model on host values.
    """

    __slots__ = (
        "input_names",
        "output_names",
        "outer_names",
        "provider",
        "_fed",
        "_outputs",
        "_constants",
        "_steps",
    )

    def __init__(
        self, graph: ir.Graph, opsets: Mapping[str, int], provider: ExecutionProvider
    ) -> None:
        outer = outer_values(graph)
        self.input_names = [v.name or "" for v in graph.inputs]
        self.output_names = [v.name or "" for v in graph.outputs]
        self.outer_names = [v.name or "" for v in outer]
        self.provider = provider
        self._fed = [*graph.inputs, *outer]
        self._outputs = list(graph.outputs)
        self._constants: dict[ir.Value | None, _Placed] = {
            v: (constant_array(v.const_value), False)
            for v in graph.initializers.values()
            if v.const_value is not None
        }
        self._steps = [_Step(node, opsets, provider) for node in graph]

    def run(self, ctx: RunContext, inputs: Sequence[Any], outer: Sequence[Any]) -> list[Any]:
        """Run the graph on ``inputs``, then ``outer`` (the outer-scope values)."""
        device = not self.provider.device.is_host
        results = self._execute(ctx, [(a, device) for a in [*inputs, *outer]])
        return [_place(self.provider, r, device) for r in results]

    def run_host(self, ctx: RunContext, args: Sequence[Any]) -> list[Any]:
        """Run the graph on host values (inputs, then outer values); return host values."""
        results = self._execute(ctx, [(a, False) for a in args])
        return [_place(self.provider, r, False) for r in results]

    def _execute(self, ctx: RunContext, args: Sequence[_Placed]) -> list[_Placed]:
        if len(args) != len(self._fed):
            raise ValueError(
                f"graph takes {len(self.input_names)} input(s) {self.input_names} and "
                f"{len(self.outer_names)} outer value(s) {self.outer_names}, "
                f"got {len(args)} value(s)"
            )
        values: dict[ir.Value | None, _Placed] = {None: (None, False), **self._constants}
        values.update(zip(self._fed, args))
        for step in self._steps:
            values.update(zip(step.outputs, step(ctx, [values[v] for v in step.inputs])))
        return [values[v] for v in self._outputs]


class KernelKit:
    """Builds one provider's kernels as the core does and runs them on numpy
    inputs, without a session.

    A kernel is looked up in the provider's registry with the node's static
    types, built from the :class:`~ep_sdk.NodeInfo` that
    :func:`ep_sdk.make_node_info` makes (schema defaults applied, attributes
    converted, input and output types and shapes from onnx's shape
    inference), and called as the executor calls it: one argument per node
    input (``None`` for an omitted one), a :class:`~ep_sdk.RunContext` first
    for a ``context=True`` kernel. Graph attributes become
    :class:`~ep_sdk.SubgraphRunner` objects that run the body with the same
    provider's kernels, node by node, so control flow works too.

    For a provider whose device is not the host, inputs go to the device
    with ``from_host`` (host memory where the kernel's ``input_memory`` asks)
    and outputs come back with ``to_host``.

    Node methods (:meth:`build_node`, :meth:`run_node`, :meth:`check_node`,
    :meth:`reference_node`) take a node as :func:`make_node_model` does: op
    type, inputs (``None`` for an omitted optional input), attributes, and
    ``opset`` (default: the kit's), ``num_outputs``, ``domain`` and
    ``domain_version``.

    Args:
        provider: the provider class; the kit makes one instance per thread
            count, with ``options``.
        options: provider options of those instances.
        threads: ``SessionConfig.intra_op_num_threads`` of the instances
            (``0``: the provider chooses); each call may give another.
        opset: the ai.onnx opset of node models whose call gives none.
    """

    def __init__(
        self,
        provider: type[ExecutionProvider],
        *,
        options: Mapping[str, Any] | None = None,
        threads: int = 0,
        opset: int = 21,
    ) -> None:
        self.provider_class = provider
        self.options = dict(options or {})
        self.threads = threads
        self.opset = opset
        self._instances: dict[int, ExecutionProvider] = {}

    def provider(self, threads: int | None = None) -> ExecutionProvider:
        """Return the kit's provider instance for ``threads`` (default: the kit's)."""
        n = self.threads if threads is None else threads
        instance = self._instances.get(n)
        if instance is None:
            config = SessionConfig(intra_op_num_threads=n)
            instance = self._instances[n] = self.provider_class(self.options, config)
        return instance

    def build_kernel(
        self, node: ir.Node, opsets: Mapping[str, int], *, threads: int | None = None
    ) -> Callable[..., list[Any]]:
        """Build the kernel of ``node`` (an onnx-ir node, typed and shaped as
        far as known) for a model with ``opsets`` (version per domain).

        Returns:
            a function that takes the node's inputs (then its implicit
            inputs) as numpy arrays and returns its outputs as a list.

        Raises:
            LookupError: the provider has no kernel for the node.
            Exception: whatever the kernel's builder raises for the node.
        """
        step = _Step(node, opsets, self.provider(threads))
        return lambda *args: _run_step(step, args)

    def build_node(
        self,
        op_type: str,
        inputs: Sequence[np.ndarray | None],
        attributes: Mapping[str, Any] | None = None,
        *,
        opset: int | None = None,
        num_outputs: int = 1,
        domain: str = "",
        domain_version: int = 1,
        threads: int | None = None,
    ) -> Callable[..., list[Any]]:
        """Build the kernel of one node whose inputs have the types and shapes
        of ``inputs`` (see :meth:`build_kernel` for what comes back)."""
        model = self._model(op_type, inputs, attributes, opset, num_outputs, domain, domain_version)
        graph = ir.from_proto(model).graph
        return self.build_kernel(graph[0], dict(graph.opset_imports), threads=threads)

    def run_node(
        self,
        op_type: str,
        inputs: Sequence[np.ndarray | None],
        attributes: Mapping[str, Any] | None = None,
        *,
        opset: int | None = None,
        num_outputs: int = 1,
        domain: str = "",
        domain_version: int = 1,
        threads: int | None = None,
    ) -> list[Any]:
        """Build one node's kernel and run it on ``inputs``; return its outputs."""
        compute = self.build_node(
            op_type, inputs, attributes, opset=opset, num_outputs=num_outputs,
            domain=domain, domain_version=domain_version, threads=threads,
        )  # fmt: skip
        return compute(*inputs)

    def reference_node(
        self,
        op_type: str,
        inputs: Sequence[np.ndarray | None],
        attributes: Mapping[str, Any] | None = None,
        *,
        opset: int | None = None,
        num_outputs: int = 1,
        domain: str = "",
        domain_version: int = 1,
        oracle: str | Oracle = "reference",
    ) -> list[Any]:
        """Return one node's outputs according to ``oracle`` (``onnx.reference``
        by default; ``"onnxruntime"``, or an :data:`Oracle` function)."""
        model = self._model(op_type, inputs, attributes, opset, num_outputs, domain, domain_version)
        return list(_oracle(oracle)(model, _feeds(inputs)))

    def check_node(
        self,
        op_type: str,
        inputs: Sequence[np.ndarray | None],
        attributes: Mapping[str, Any] | None = None,
        *,
        opset: int | None = None,
        num_outputs: int = 1,
        domain: str = "",
        domain_version: int = 1,
        threads: int | None = None,
        rtol: float = 1e-5,
        atol: float = 1e-6,
        expected: Sequence[Any] | None = None,
        oracle: str | Oracle = "reference",
    ) -> list[Any]:
        """Run one node's kernel and compare its outputs (dtype, shape,
        values: :func:`assert_close`) with ``expected``, or else with the
        oracle's (see :meth:`reference_node`).

        Returns:
            the kernel's outputs.
        """
        model = self._model(op_type, inputs, attributes, opset, num_outputs, domain, domain_version)
        graph = ir.from_proto(model).graph
        compute = self.build_kernel(graph[0], dict(graph.opset_imports), threads=threads)
        got = compute(*inputs)
        if expected is not None:
            want = list(expected)
        else:
            want = list(_oracle(oracle)(model, _feeds(inputs)))
        assert_close(got, want, rtol=rtol, atol=atol)
        return got

    def run_model(
        self, model: onnx.ModelProto, feeds: Mapping[str, Any], *, threads: int | None = None
    ) -> list[Any]:
        """Run every node of ``model`` with the provider's kernels, in graph
        order, after shape inference (:func:`infer_shapes`); return the graph
        outputs. Every node must have a kernel: there is no fallback.

        Raises:
            KeyError: a graph input without a feed or initializer, or a feed
                that is no graph input.
            LookupError: a node the provider has no kernel for.
        """
        parsed = ir.from_proto(infer_shapes(model))
        graph = parsed.graph
        runner = _KitGraph(graph, dict(parsed.opset_imports), self.provider(threads))
        unknown = sorted(set(feeds) - set(runner.input_names))
        if unknown:
            raise KeyError(f"feeds {unknown} are no inputs of the graph: {runner.input_names}")
        args = []
        for v, name in zip(graph.inputs, runner.input_names):
            if name in feeds:
                args.append(feeds[name])
            elif v.const_value is not None:
                args.append(constant_array(v.const_value))
            else:
                raise KeyError(f"no feed for graph input {name!r}")
        ctx = RunContext()
        token = bind_run(ctx)
        try:
            return runner.run_host(ctx, args)
        finally:
            unbind_run(token)

    def _model(
        self,
        op_type: str,
        inputs: Sequence[np.ndarray | None],
        attributes: Mapping[str, Any] | None,
        opset: int | None,
        num_outputs: int,
        domain: str,
        domain_version: int,
    ) -> onnx.ModelProto:
        return make_node_model(
            op_type, inputs, attributes=attributes, num_outputs=num_outputs,
            opset=self.opset if opset is None else opset, domain=domain,
            domain_version=domain_version,
        )  # fmt: skip


def _run_step(step: _Step, args: Sequence[Any]) -> list[Any]:
    """Run one built kernel on host values in a fresh run (bound to the
    thread, so that ``check_terminate`` works); return host values."""
    ctx = RunContext()
    token = bind_run(ctx)
    try:
        outputs = step(ctx, [(a, False) for a in args])
    finally:
        unbind_run(token)
    return [_place(step.provider, r, False) for r in outputs]


def _feeds(inputs: Sequence[np.ndarray | None]) -> dict[str, Any]:
    return {f"x{i}": x for i, x in enumerate(inputs) if x is not None}


def _oracle(oracle: str | Oracle) -> Oracle:
    if callable(oracle):
        return oracle
    try:
        return _ORACLES[oracle]
    except KeyError:
        raise ValueError(
            f"unknown oracle {oracle!r}: use one of {sorted(_ORACLES)} or a function"
        ) from None
