"""Outputs as the user gets them: picked by name, never sharing memory with a
feed or a constant.

:class:`OutputNames` turns the output names a run asks for into the indices
of the plan's outputs, with onnxruntime's message for an unknown name.

Kernels may return views (Reshape, Identity); handing the user a view of
their own input, or of one of the model's initializers, would let a write
into the output corrupt the input or the session. Such an output is copied,
and so is a read-only array (a kernel's kept constant, an image decoder's
buffer: onnxruntime's outputs are writable), also among the elements of a
sequence output; any other is handed back as it is.

Two outputs never share memory either (:class:`OutputOwnership`): a graph
output that is a view of another (``y = Reshape(h)`` with both ``h`` and ``y``
outputs) is copied, as onnxruntime hands back separate arrays. Where both come
from one node or one fused group, the provider returned one buffer for two
outputs, which the contract forbids: the output is copied all the same, and a
:class:`~ortcore.errors.ProviderContractWarning` names the provider and the
node, once per session.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from .errors import InvalidArgument, ProviderContractWarning

__all__ = [
    "OutputNames",
    "OutputOwnership",
    "as_output",
    "host_ortvalue",
    "roots_of",
    "sparse_output",
]


class OutputNames:
    """The model's outputs by name, in the model's order.

    Args:
        names: the model's output names.
    """

    __slots__ = ("_index", "_count")

    def __init__(self, names: Sequence[str]) -> None:
        self._index = {name: i for i, name in enumerate(names)}
        self._count = len(names)

    def check(self, name: str) -> None:
        """Raise unless ``name`` is one of the model's outputs.

        Raises:
            InvalidArgument: onnxruntime's "Invalid output name" message.
        """
        if name not in self._index:
            raise InvalidArgument(f"Invalid output name:{name}")

    def indices(self, wanted: Sequence[str] | None) -> list[int]:
        """The indices of the outputs named in ``wanted`` (``None`` or empty: all).

        Raises:
            InvalidArgument: as :meth:`check`.
        """
        if not wanted:
            return list(range(self._count))
        out = []
        for name in wanted:
            i = self._index.get(name)
            if i is None:
                raise InvalidArgument(f"Invalid output name:{name}")
            out.append(i)
        return out


def roots_of(values: Iterable[Any]) -> set[int]:
    """Ids of the arrays owning the memory of the arrays among ``values``
    (a plan's constants, a run's feeds; a sequence's elements too)."""
    out: set[int] = set()
    for v in values:
        if isinstance(v, np.ndarray):
            out.add(id(_root(v)))
        elif isinstance(v, (list, tuple)):
            out |= roots_of(v)
    return out


def as_output(value: Any, guarded: tuple[set[int], set[int]]) -> Any:
    """``value`` as the user gets it: a copy if it shares memory with what ``guarded``
    holds (the root ids of the constants and of this run's feeds, from
    :func:`roots_of`) or is read-only; numpy scalars become 0-d arrays; a
    sequence's elements likewise."""
    if isinstance(value, np.ndarray):
        root = id(_root(value))
        if root in guarded[0] or root in guarded[1] or not value.flags.writeable:
            return value.copy()
        return value
    if isinstance(value, np.generic):
        return np.asarray(value)
    if isinstance(value, list):
        return [as_output(v, guarded) for v in value]
    return value


class OutputOwnership:
    """Makes the outputs of one run distinct arrays (see the module's docstring).

    Args:
        producers: for each output of the plan, what made it: ``(provider,
            description, identity)`` of its node or fused group, or ``None``
            for a graph input or constant handed straight back.
    """

    __slots__ = ("_producers", "_warned", "_lock")

    def __init__(self, producers: Sequence[tuple[str, str, int] | None]) -> None:
        self._producers = list(producers)
        self._warned: set[tuple[str, str, int]] = set()
        self._lock = threading.Lock()

    def distinct(self, values: list[Any], wanted: Sequence[int]) -> list[Any]:
        """``values`` (the outputs at plan indices ``wanted``) with every one
        sharing memory with an earlier one replaced by a copy (in place)."""
        if len(values) < 2:
            return values
        seen: dict[int, list[tuple[np.ndarray, int]]] = {}
        for j, value in enumerate(values):
            if not isinstance(value, np.ndarray) or value.size == 0:
                continue
            root = id(_root(value))
            for earlier, i in seen.get(root, ()):
                if _overlap(earlier, value):
                    self._report(wanted[i], wanted[j])
                    value = values[j] = value.copy()
                    root = id(value)
                    break
            seen.setdefault(root, []).append((value, j))
        return values

    def _report(self, first: int, second: int) -> None:
        made = self._producers[first]
        if made is None or made != self._producers[second]:
            return  # a view of another output made by another node: a copy, no fault
        with self._lock:
            if made in self._warned:
                return
            self._warned.add(made)
        provider, node, _ = made
        warnings.warn(
            f"{provider} returned one buffer for outputs {first} and {second} of {node} "
            "(copied): a provider must return a distinct array for each output",
            ProviderContractWarning,
            stacklevel=3,
        )


def _overlap(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether ``a`` and ``b`` share memory (exactly, within a bounded effort:
    strided views too tangled to decide count as sharing, and get a copy)."""
    try:
        return bool(np.shares_memory(a, b, max_work=10_000))  # type: ignore[arg-type]  # stubs: -1, 0
    except np.exceptions.TooHardError:
        return True


def _root(array: np.ndarray) -> Any:
    """The array that owns the memory ``array`` views."""
    while isinstance(array.base, np.ndarray):
        array = array.base
    return array


def sparse_output(value: Any, index: int, sparse: frozenset[int]) -> Any:
    """Output ``index`` as ``run`` returns it: a COO :class:`~ortcore.SparseTensor`
    if the model declares it sparse (``sparse``: such outputs' indices; made
    dense at load), else ``value`` as it is."""
    if index in sparse and isinstance(value, np.ndarray):
        from .sparse_tensor import SparseTensor

        return SparseTensor.from_dense(value)
    return value


def host_ortvalue(value: Any, index: int, sparse: frozenset[int]) -> Any:
    """Output ``index`` as ``run_with_ort_values`` returns it: an OrtValue
    holding the array, or the sparse tensor of an output declared sparse."""
    from .ortvalue import OrtValue

    if index in sparse and isinstance(value, np.ndarray):
        return OrtValue.ort_value_from_sparse_tensor(sparse_output(value, index, sparse))
    return OrtValue(value)
