"""The building blocks of :mod:`test_fuzz_native`'s case generators: a case
(one-node model as JSON), the :class:`Drawer` that draws its parts, tensors,
shapes, hostile integers.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st

Case = dict[str, Any]

# -- building blocks -------------------------------------------------------------

HOSTILE_INTS = (
    0, -1, -2, -5, -(2**31), -(2**63), 2**31 - 1, 2**31, 2**32 + 1, 2**40, 2**62, 2**63 - 1,
)  # fmt: skip
"""Attribute values no sane model holds: zero, negative, past int32, near int64's limits."""


def chance(percent: int) -> st.SearchStrategy[bool]:
    """True about ``percent`` % of the time."""
    return st.integers(0, 99).map(lambda v: v < percent)


def ints(n: int, lo: int, hi: int) -> st.SearchStrategy[list[int]]:
    return st.lists(st.integers(lo, hi), min_size=n, max_size=n)


class Drawer:
    """The ``draw`` of a composite strategy, and what it made invalid on purpose
    (``hostile``: an ortcore error is then always acceptable)."""

    def __init__(self, draw: Callable[[st.SearchStrategy[Any]], Any]) -> None:
        self.draw = draw
        self.bad: list[str] = []

    def __call__(self, strategy: st.SearchStrategy[Any]) -> Any:
        return self.draw(strategy)

    def chance(self, percent: int) -> bool:
        return bool(self.draw(chance(percent)))

    def pick(self, *options: Any) -> Any:
        return self.draw(st.sampled_from(options))

    def int(self, lo: int, hi: int) -> int:
        return int(self.draw(st.integers(lo, hi)))

    def hostile(self, what: str, percent: int) -> bool:
        """Whether to make ``what`` invalid (about ``percent`` % of the time)."""
        if self.chance(percent):
            self.bad.append(what)
            return True
        return False

    def spoil(self, values: list[int], what: str) -> list[int]:
        """``values`` with one entry made hostile, or its length changed."""
        self.bad.append(what)
        values = list(values)
        if not values or self.chance(20):
            extra = self.int(0, 3)
            return values[:extra] if extra < len(values) else values + [1] * extra
        values[self.int(0, len(values) - 1)] = self.pick(*HOSTILE_INTS)
        return values

    def case(
        self,
        op: str,
        opset: int,
        inputs: list[dict[str, Any] | None],
        outputs: list[str],
        attrs: dict[str, Any] | None = None,
        **extra: Any,
    ) -> Case:
        """A case for the worker: one ``op`` node in a model of ``opset``."""
        while inputs and inputs[-1] is None:
            inputs = inputs[:-1]
        c = {"op": op, "opset": opset, "inputs": inputs, "outputs": outputs,
             "attrs": attrs or {}, **{k: v for k, v in extra.items() if v is not None}}  # fmt: skip
        if self.bad:
            c["hostile"] = sorted(set(self.bad))
        return c


def composite(fn: Callable[..., Case]) -> Callable[..., st.SearchStrategy[Case]]:
    """``st.composite``, handing the function a :class:`Drawer`."""

    @st.composite
    def strategy(draw: Any, *args: Any, **kwargs: Any) -> Case:
        return fn(Drawer(draw), *args, **kwargs)

    return strategy


def tensor(
    dtype: str,
    shape: list[int] | tuple[int, ...],
    *,
    values: list[Any] | None = None,
    const: bool = False,
    special: bool | str = False,
) -> dict[str, Any]:
    """An input spec (see ``fuzz_worker.make_array``); random data unless
    ``values``; ``special`` sprinkles NaN and infinities (``"inf"``: infinities)."""
    spec: dict[str, Any] = {"dtype": dtype, "shape": [int(d) for d in shape]}
    if values is not None:
        spec["values"] = values
    if const:
        spec["const"] = True
    if special:
        spec["special"] = special
    return spec


def float_dtype(d: Drawer, *more: str) -> str:
    return str(d.pick("float32", "float32", "float32", "float16", *more))


def small_shape(d: Drawer, rank: int, hi: int = 4, budget: int = 4096) -> list[int]:
    """A shape of ``rank`` dims up to ``hi`` (zero-size now and then), at most
    ``budget`` elements."""
    lo = 0 if d.chance(15) else 1
    shape: list[int] = d(ints(rank, lo, hi))
    while math.prod(shape) > budget:
        shape[shape.index(max(shape))] //= 2
    return shape


def bad_axis(d: Drawer, rank: int) -> int:
    """An axis out of range for ``rank``."""
    d.bad.append("axis")
    return int(d.pick(rank, -rank - 1, rank + 5, 2**31, -(2**63), 2**63 - 1))
