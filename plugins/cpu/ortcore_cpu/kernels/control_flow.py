"""Control flow through the core's subgraph API: If, Loop, Scan.

Each kernel is registered with ``context=True``: its compute function gets
the run's context first, then the node's explicit inputs, then the
outer-scope values its subgraphs read (``NodeInfo.implicit_inputs`` order).
Each body asks for its own ``outer_names``, matched by name.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from ep_sdk import Compute, NodeInfo, RunContext, SubgraphRunner, to_numpy

from . import registry
from ._common import normalize_axis
from ._versions import per_schema_version


class _Outer:
    """Splits a control-flow node's arguments into explicit and outer-scope values."""

    def __init__(self, info: NodeInfo) -> None:
        self.names = list(info.implicit_inputs)

    def split(self, args: Sequence[Any]) -> tuple[Sequence[Any], dict[str, Any]]:
        """Return (explicit inputs, outer values by name)."""
        n = len(args) - len(self.names)
        return args[:n], dict(zip(self.names, args[n:], strict=True))


def _outer_for(body: SubgraphRunner, by_name: dict[str, Any]) -> list[Any]:
    return [by_name[n] for n in body.outer_names]


@per_schema_version("If", context=True)
def if_(info: NodeInfo) -> Compute:
    """Run ``then_branch`` or ``else_branch`` on the boolean condition."""
    then_b: SubgraphRunner = info.attrs["then_branch"]
    else_b: SubgraphRunner = info.attrs["else_branch"]
    outer = _Outer(info)

    def compute(ctx: RunContext, *args: Any) -> list[Any]:
        (cond,), by_name = outer.split(args)
        branch = then_b if bool(np.asarray(cond).reshape(-1)[0]) else else_b
        return branch.run(ctx, [], _outer_for(branch, by_name))

    return compute


def _zeros_output(info: NodeInfo, index: int, fixed: dict[int, int]) -> np.ndarray:
    """Zeros of output ``index``'s static type, with the dims in ``fixed``
    set and unknown dims 0 (a scan output of zero iterations)."""
    t = info.output_types[index]
    shape = info.output_shapes[index] or (None,) * (max(fixed) + 1)
    dims = [fixed.get(i, 0 if d is None else d) for i, d in enumerate(shape)]
    return np.zeros(dims, dtype=np.float32 if t is None else to_numpy(t))


@per_schema_version("Loop", context=True)
def loop(info: NodeInfo) -> Compute:
    """Run ``body`` while the iteration count is below ``M`` (if given) and
    the condition holds (if given). Body inputs are (iteration, cond,
    loop-carried values...); outputs are (cond, loop-carried values...,
    per-iteration scan values...). Scan values are stacked on a new axis 0."""
    body: SubgraphRunner = info.attrs["body"]
    outer = _Outer(info)
    n_out = info.num_outputs

    def compute(ctx: RunContext, *args: Any) -> list[Any]:
        explicit, by_name = outer.split(args)
        m, cond, *state = explicit
        outer_values = _outer_for(body, by_name)
        max_trip = None if m is None else int(np.asarray(m).reshape(-1)[0])
        keep_going = True if cond is None else bool(np.asarray(cond).reshape(-1)[0])
        n_state = len(state)
        scans: list[list[Any]] = [[] for _ in range(n_out - n_state)]
        i = 0
        while keep_going and (max_trip is None or i < max_trip):
            ctx.check_terminated()
            feeds = [np.array(i, np.int64), np.array(keep_going), *state]
            res = body.run(ctx, feeds, outer_values)
            keep_going = bool(np.asarray(res[0]).reshape(-1)[0])
            state = res[1 : 1 + n_state]
            for acc, value in zip(scans, res[1 + n_state :], strict=True):
                acc.append(value)
            i += 1
        outs = list(state)
        for k, acc in enumerate(scans):
            outs.append(np.stack(acc) if acc else _zeros_output(info, n_state + k, {0: 0}))
        return outs

    return compute


def _scan_run(
    ctx: RunContext,
    body: SubgraphRunner,
    outer_values: list[Any],
    state: list[Any],
    scan_in: list[np.ndarray],
    length: int,
) -> tuple[list[Any], list[list[np.ndarray]]]:
    """Iterate ``body`` ``length`` times over axis 0 of each (already
    oriented) scan input; return the final states and per-step outputs."""
    steps: list[list[np.ndarray]] = []
    for t in range(length):
        ctx.check_terminated()
        res = body.run(ctx, [*state, *(x[t] for x in scan_in)], outer_values)
        state = res[: len(state)]
        steps.append(res[len(state) :])
    return state, steps


@registry.kernel("Scan", since=8, until=8, context=True)
def scan8(info: NodeInfo) -> Compute:
    """Scan (opset 8): inputs are (sequence_lens, states..., scan inputs...),
    all with a leading batch axis; scan inputs iterate over axis 1 in
    ``directions``. Steps past a batch entry's length give zeros."""
    body: SubgraphRunner = info.attrs["body"]
    outer = _Outer(info)
    n_scan = int(info.attrs["num_scan_inputs"])
    directions = list(info.attrs.get("directions") or [0] * n_scan)

    def compute(ctx: RunContext, *args: Any) -> list[Any]:
        explicit, by_name = outer.split(args)
        lens, *rest = explicit
        n_state = len(rest) - n_scan
        states, scans = rest[:n_state], rest[n_state:]
        batch, max_len = scans[0].shape[0], scans[0].shape[1]
        lengths = [max_len] * batch if lens is None else [int(v) for v in np.ravel(lens)]
        outer_values = _outer_for(body, by_name)
        final: list[list[Any]] = []
        stacked: list[list[np.ndarray]] = []
        for b in range(batch):
            n = lengths[b]
            seqs = [
                s[b, :n][::-1] if d else s[b, :n] for s, d in zip(scans, directions, strict=True)
            ]
            st, steps = _scan_run(ctx, body, outer_values, [s[b] for s in states], seqs, n)
            final.append(st)
            per_out = [np.stack(col) for col in zip(*steps, strict=True)] if steps else []
            stacked.append(per_out)
        outs: list[Any] = [np.stack([f[k] for f in final]) for k in range(n_state)]
        n_scan_out = info.num_outputs - n_state
        for k in range(n_scan_out):
            ref = next((s[k] for s in stacked if s), None)
            if ref is None:
                out = _zeros_output(info, n_state + k, {0: batch, 1: max_len})
            else:
                out = np.zeros((batch, max_len, *ref.shape[1:]), ref.dtype)
            for b, s in enumerate(stacked):
                if s:
                    out[b, : lengths[b]] = s[k]
            outs.append(out)
        return outs

    return compute


@per_schema_version("Scan", since=9, context=True)
def scan(info: NodeInfo) -> Compute:
    """Scan (opset 9+): inputs are (states..., scan inputs...); each scan
    input iterates over its ``scan_input_axes`` entry in its direction, each
    scan output is stacked on its ``scan_output_axes`` entry (reversed for
    direction 1)."""
    body: SubgraphRunner = info.attrs["body"]
    outer = _Outer(info)
    n_scan = int(info.attrs["num_scan_inputs"])
    in_axes = list(info.attrs.get("scan_input_axes") or [0] * n_scan)
    in_dirs = list(info.attrs.get("scan_input_directions") or [0] * n_scan)
    out_axes_attr = info.attrs.get("scan_output_axes")
    out_dirs_attr = info.attrs.get("scan_output_directions")

    def compute(ctx: RunContext, *args: Any) -> list[Any]:
        explicit, by_name = outer.split(args)
        n_state = len(explicit) - n_scan
        states, scans = list(explicit[:n_state]), explicit[n_state:]
        seqs = []
        for x, axis, d in zip(scans, in_axes, in_dirs, strict=True):
            s = np.moveaxis(x, normalize_axis(axis, x.ndim), 0)
            seqs.append(s[::-1] if d else s)
        length = seqs[0].shape[0] if seqs else 0
        final, steps = _scan_run(ctx, body, _outer_for(body, by_name), states, seqs, length)
        n_scan_out = info.num_outputs - n_state
        out_axes = list(out_axes_attr or [0] * n_scan_out)
        out_dirs = list(out_dirs_attr or [0] * n_scan_out)
        outs = list(final)
        for k in range(n_scan_out):
            vals = [s[k] for s in steps]
            if out_dirs[k]:
                vals = vals[::-1]
            if not vals:
                rank = len(info.output_shapes[n_state + k] or (None,))
                outs.append(
                    _zeros_output(info, n_state + k, {normalize_axis(out_axes[k], rank): 0})
                )
                continue
            y = np.stack(vals)
            outs.append(np.moveaxis(y, 0, normalize_axis(out_axes[k], y.ndim)))
        return outs

    return compute
