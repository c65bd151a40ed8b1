"""Profiling: onnxruntime-style Chrome traces, and their summary.

With ``SessionOptions.enable_profiling`` the session records one event per
executed step (``"cat": "Node"``) and a few session events (model loading,
session initialization, each run); ``InferenceSession.end_profiling()`` writes
them as a JSON list in the Chrome trace-event format that onnxruntime uses,
which Perfetto and ``chrome://tracing`` open. :func:`summarize` turns such a
trace (ortcore's or onnxruntime's) into time per op type, per provider,
device copies and the slowest nodes; ``ortcore bench`` prints it.

As in onnxruntime's trace, an event is named after the model's node
(``conv0_kernel_time``) and ``args.op_name`` is the kernel that ran: a Conv
the core fused with its activation reads ``op_name: FusedConv``, under the
Conv's own name, with the model's op type in ``args.model_op_type``.
"""

from __future__ import annotations

import datetime
import json
import os
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ep_sdk.fused_ops import fused_from

if TYPE_CHECKING:
    from .executor import StepInfo

__all__ = ["Profiler", "load_trace", "model_node", "summarize"]

COPY_OPS = frozenset({"MemcpyToHost", "MemcpyFromHost"})

# The core's fusion passes name a fused node after the node it replaces plus a
# suffix (ortcore.optimizer.conv_activation, gemm_activation, matmul_add).
_FUSION_SUFFIXES = ("_fused", "_act")


def model_node(kind: str, op_type: str, name: str) -> tuple[str, str | None]:
    """The model's node name behind a step, and its op type when the step runs
    a node the core fused (``("conv0", "Conv")`` for ``FusedConv conv0_fused``;
    ``(name, None)`` for any other step)."""
    model_op = fused_from().get(op_type) if kind == "node" else None
    if model_op is None:
        return name, None
    for suffix in _FUSION_SUFFIXES:
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)], model_op
    return name, model_op


_TYPE_NAMES: dict[np.dtype, str] = {}


def _type_name(dtype: np.dtype) -> str:
    """onnxruntime's element name for a numpy dtype: ``float``, ``int64``, ..."""
    name = _TYPE_NAMES.get(dtype)
    if name is None:
        from ep_sdk.dtypes import from_numpy, type_string

        try:
            name = type_string(from_numpy(dtype))[len("tensor(") : -1]
        except (TypeError, ValueError, KeyError):
            name = str(dtype)
        _TYPE_NAMES[dtype] = name
    return name


def _type_shapes(values: Iterable[Any]) -> list[dict[str, list[int]]]:
    """``[{"float": [1, 3, 224, 224]}, ...]`` for values that expose shape and dtype."""
    out = []
    for v in values:
        shape = getattr(v, "shape", None)
        dtype = getattr(v, "dtype", None)
        if shape is None or dtype is None:
            continue  # omitted input, sequence, or a device tensor that hides its shape
        try:
            out.append({_type_name(np.dtype(dtype)): [int(d) for d in shape]})
        except TypeError:
            continue
    return out


def _nbytes(values: Iterable[Any]) -> int:
    return sum(int(getattr(v, "nbytes", 0) or 0) for v in values)


class Profiler:
    """Collects trace events of one session; thread-safe.

    Args:
        prefix: file name prefix of the trace (``SessionOptions.profile_file_prefix``).
    """

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.enabled = True
        self.start_ns = time.perf_counter_ns()
        self.start_time_ns = time.time_ns()
        self.pid = os.getpid()
        self._events: list[dict[str, Any]] = []
        self._steps: list[tuple[Any, ...]] = []
        self._lock = threading.Lock()

    def _us(self, t_ns: int) -> int:
        return (t_ns - self.start_ns) // 1000

    def session_event(
        self, name: str, t0_ns: int, t1_ns: int, args: Mapping[str, Any] | None = None
    ) -> None:
        """Record a ``"cat": "Session"`` event (``perf_counter_ns`` times)."""
        if not self.enabled:
            return
        event = {
            "cat": "Session",
            "pid": self.pid,
            "tid": threading.get_native_id(),
            "dur": max((t1_ns - t0_ns) // 1000, 0),
            "ts": self._us(t0_ns),
            "ph": "X",
            "name": name,
            "args": dict(args or {}),
        }
        with self._lock:
            self._events.append(event)

    def record_step(
        self,
        info: StepInfo,
        index: int,
        t0_ns: int,
        t1_ns: int,
        inputs: Sequence[Any],
        outputs: Sequence[Any],
    ) -> None:
        """Record one executed step; shapes are read now, the event is built later."""
        item = (
            info,
            index,
            t0_ns,
            t1_ns,
            threading.get_native_id(),
            _type_shapes(inputs),
            _type_shapes(outputs),
            _nbytes(inputs),
            _nbytes(outputs),
        )
        self._steps.append(item)  # list.append is atomic

    def events(self) -> list[dict[str, Any]]:
        """Every event so far, ordered by start time."""
        with self._lock:
            events = list(self._events)
            steps = list(self._steps)
        for info, index, t0, t1, tid, ins, outs, in_bytes, out_bytes in steps:
            name, model_op = model_node(info.kind, info.op_type, info.name)
            args = {
                "op_name": info.op_type,
                "provider": info.provider,
                "node_name": name,
                "node_index": str(index),
                "kind": info.kind,
                "input_type_shape": ins,
                "output_type_shape": outs,
                "activation_size": str(in_bytes),
                "output_size": str(out_bytes),
            }
            if model_op is not None:
                args["model_op_type"] = model_op
            events.append(
                {
                    "cat": "Node",
                    "pid": self.pid,
                    "tid": tid,
                    "dur": max((t1 - t0) // 1000, 0),
                    "ts": self._us(t0),
                    "ph": "X",
                    "name": f"{name}_kernel_time",
                    "args": args,
                }
            )
        events.sort(key=lambda e: e["ts"])
        return events

    def end(self, directory: str | os.PathLike[str] = ".") -> str:
        """Stop recording, write the trace and return its path."""
        if not self.enabled:
            return ""
        self.enabled = False
        stamp = datetime.datetime.now().strftime("%Y-%m-%d_%H-%M-%S_%f")[:-3]
        path = os.path.join(os.fspath(directory), f"{self.prefix}_{stamp}.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(self.events(), f, separators=(",", ":"))
        return path


def load_trace(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Read a trace file (a JSON list, or an object with ``traceEvents``).

    Raises:
        OSError: the file cannot be read.
        ValueError: it is not JSON, or not a list of trace events.
    """
    with open(path, encoding="utf-8") as f:
        data = json.load(f)  # json.JSONDecodeError is a ValueError
    if isinstance(data, dict):
        data = data.get("traceEvents", [])
    if not isinstance(data, list) or not all(isinstance(e, dict) for e in data):
        raise ValueError("not a Chrome trace: expected a list of event objects")
    return data


def _copy_bytes(args: Mapping[str, Any]) -> int:
    """Bytes a copy moved: the host side's size (a device tensor may not report one)."""
    return max(int(args.get("activation_size", 0) or 0), int(args.get("output_size", 0) or 0))


def summarize(events: Sequence[Mapping[str, Any]], top: int = 10) -> dict[str, Any]:
    """Aggregate a trace's node events.

    Returns:
        a dict with ``runs`` (number of ``model_run`` events), ``total_us``
        (time in nodes), ``by_op`` and ``by_provider`` (lists of
        ``{name, count, total_us, percent}``, largest first), ``copies``
        (``{count, total_us, bytes, by_op}``) and ``slowest`` (the ``top``
        nodes by mean time: ``{node, op, provider, calls, mean_us, total_us}``).
    """
    nodes = [e for e in events if e.get("cat") == "Node"]
    runs = sum(1 for e in events if e.get("cat") == "Session" and e.get("name") == "model_run")
    total = sum(int(e.get("dur", 0)) for e in nodes)

    def table(key: str) -> list[dict[str, Any]]:
        acc: dict[str, list[int]] = {}
        for e in nodes:
            k = str(e.get("args", {}).get(key, "?"))
            a = acc.setdefault(k, [0, 0])
            a[0] += 1
            a[1] += int(e.get("dur", 0))
        rows = [
            {
                "name": k,
                "count": c,
                "total_us": t,
                "percent": round(100.0 * t / total, 2) if total else 0.0,
            }
            for k, (c, t) in acc.items()
        ]
        return sorted(rows, key=lambda r: -r["total_us"])

    copies = [e for e in nodes if e.get("args", {}).get("op_name") in COPY_OPS]
    copy_by_op: dict[str, int] = {}
    for e in copies:
        op = e["args"]["op_name"]
        copy_by_op[op] = copy_by_op.get(op, 0) + 1
    per_node: dict[tuple[str, str, str], list[int]] = {}
    for e in nodes:
        args = e.get("args", {})
        name = str(args.get("node_name") or str(e.get("name", "")).removesuffix("_kernel_time"))
        k = (name, str(args.get("op_name", "?")), str(args.get("provider", "?")))
        a = per_node.setdefault(k, [0, 0])
        a[0] += 1
        a[1] += int(e.get("dur", 0))
    rows: list[dict[str, Any]] = [
        {
            "node": n,
            "op": op,
            "provider": p,
            "calls": c,
            "mean_us": round(t / c, 1),
            "total_us": t,
        }
        for (n, op, p), (c, t) in per_node.items()
    ]
    slowest = sorted(rows, key=lambda r: -r["mean_us"])[:top]
    return {
        "runs": runs,
        "node_events": len(nodes),
        "total_us": total,
        "by_op": table("op_name"),
        "by_provider": table("provider"),
        "copies": {
            "count": len(copies),
            "total_us": sum(int(e.get("dur", 0)) for e in copies),
            "bytes": sum(_copy_bytes(e.get("args", {})) for e in copies),
            "by_op": copy_by_op,
        },
        "slowest": slowest,
    }
