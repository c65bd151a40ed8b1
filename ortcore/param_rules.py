"""The little language of :mod:`ortcore.param_table`: how a node's parameter
must fit the dimensions of its other inputs, decided from static shapes at
load or from the arrays themselves at run time.

An :class:`Expr` computes a number (or a shape, or a truth) from an
:class:`Env`, the view of one node: its inputs' shapes, a few values, its
attributes. Where something it needs is not known (a symbolic dim, a
computed input) it answers ``None``, and so does everything built on it. A
:class:`Check` says of one *subject* (an input, or an attribute) what it must
be; its :meth:`~Check.verdict` is ``""`` (it holds), a sentence saying what
is wrong, or ``None`` (not decidable from what the env knows). At run time
every shape is known, so a check decides.

Expressions combine with ``+``, ``-``, ``*`` and ``//``; :func:`ceil_div`,
:func:`select` and :func:`eq` cover the rest.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = [
    "Attr",
    "AttrCount",
    "AttrGiven",
    "AttrStr",
    "AttrIs",
    "AttrLength",
    "Blocked",
    "Broadcast",
    "BroadcastsTo",
    "Check",
    "Const",
    "Dim",
    "Directions",
    "Env",
    "Expr",
    "Holds",
    "Length",
    "Outputs",
    "Len",
    "Present",
    "ProdDims",
    "ProdValues",
    "Rank",
    "SameShape",
    "Scalar",
    "Shape",
    "ShapeIs",
    "Size",
    "Value",
    "ceil_div",
    "eq",
    "le",
    "select",
]

Dims = tuple[int | None, ...]
"""A shape as far as it is known: ``None`` for a dim not known."""


class Env:
    """What one node offers its checks.

    Args:
        names: the op's input names, in order (as its table entry gives them).
        shapes: each input's shape (``None`` for an unknown rank); an input
            the node omits is absent from ``present``.
        present: for each input, whether the node has it.
        attrs: the node's attributes, the schema's defaults applied.
        value: an input's contents as an array where known (a constant, or
            at run time the array itself), else ``None``.
        outputs: how many outputs the node has.
    """

    __slots__ = ("names", "attrs", "outputs", "_shapes", "_value")

    def __init__(
        self,
        names: Sequence[str],
        shapes: Sequence[Dims | None],
        present: Sequence[bool],
        attrs: Mapping[str, Any],
        value: Callable[[int], np.ndarray | None],
        outputs: int = 1,
    ) -> None:
        self.names = tuple(names)
        self.attrs = attrs
        self.outputs = outputs
        # only the inputs the node has (zip stops at the shorter: trailing
        # optional inputs a node leaves out are absent)
        self._shapes = {n: s for n, s, p in zip(self.names, shapes, present) if p}
        self._value = value

    def has(self, name: str) -> bool:
        """Whether the node has input ``name``."""
        return name in self._shapes

    def shape(self, name: str) -> Dims | None:
        """Input ``name``'s shape as far as known (``None``: absent or rank unknown)."""
        return self._shapes.get(name)

    def value(self, name: str) -> np.ndarray | None:
        """Input ``name``'s contents where known."""
        if name not in self._shapes:
            return None
        return self._value(self.names.index(name))


# -- expressions -----------------------------------------------------------


class Expr:
    """Something computed from a node: a number, a shape or a truth."""

    def eval(self, env: Env) -> Any:
        """The value, or ``None`` where it is not known."""
        raise NotImplementedError

    def text(self) -> str:
        """How a message names it."""
        raise NotImplementedError

    def __add__(self, other: Expr | int) -> Expr:
        return _Op("+", self, _expr(other))

    def __radd__(self, other: int) -> Expr:
        return _Op("+", _expr(other), self)

    def __sub__(self, other: Expr | int) -> Expr:
        return _Op("-", self, _expr(other))

    def __mul__(self, other: Expr | int) -> Expr:
        return _Op("*", self, _expr(other))

    def __rmul__(self, other: int) -> Expr:
        return _Op("*", _expr(other), self)

    def __floordiv__(self, other: Expr | int) -> Expr:
        return _Op("//", self, _expr(other))


def _expr(x: Expr | int) -> Expr:
    return x if isinstance(x, Expr) else Const(x)


@dataclass(frozen=True)
class Const(Expr):
    """A number."""

    n: int

    def eval(self, env: Env) -> Any:
        return self.n

    def text(self) -> str:
        return str(self.n)


@dataclass(frozen=True)
class Attr(Expr):
    """An int attribute (its schema default applied); ``default`` where the
    node and the schema give none. One that is not an int is not known."""

    name: str
    default: int | Expr | None = None

    def eval(self, env: Env) -> Any:
        v = env.attrs.get(self.name)
        if v is None:
            return self.default.eval(env) if isinstance(self.default, Expr) else self.default
        return int(v) if isinstance(v, (int, np.integer)) else None

    def text(self) -> str:
        return self.name


@dataclass(frozen=True)
class AttrStr(Expr):
    """A string attribute (its schema default applied; ``""`` where none)."""

    name: str

    def eval(self, env: Env) -> Any:
        v = env.attrs.get(self.name, "")
        return v.decode() if isinstance(v, bytes) else v if isinstance(v, str) else None

    def text(self) -> str:
        return self.name


@dataclass(frozen=True)
class AttrCount(Expr):
    """How many values a list attribute holds; ``default`` where it is absent."""

    name: str
    default: Expr | None = None

    def eval(self, env: Env) -> Any:
        v = env.attrs.get(self.name)
        if v is None:
            return self.default.eval(env) if self.default is not None else None
        return len(v) if isinstance(v, (list, tuple)) else 1

    def text(self) -> str:
        return f"the length of {self.name}"


@dataclass(frozen=True)
class AttrGiven(Expr):
    """Whether the node sets attribute ``name`` (one with no default)."""

    name: str

    def eval(self, env: Env) -> Any:
        return env.attrs.get(self.name) is not None

    def text(self) -> str:
        return f"{self.name} is given"


@dataclass(frozen=True)
class Outputs(Expr):
    """How many outputs the node has."""

    def eval(self, env: Env) -> Any:
        return env.outputs

    def text(self) -> str:
        return "the number of outputs"


@dataclass(frozen=True)
class Directions(Expr):
    """``num_directions`` of a recurrent op: 2 if ``direction`` is bidirectional."""

    def eval(self, env: Env) -> Any:
        return 2 if env.attrs.get("direction", "forward") == "bidirectional" else 1

    def text(self) -> str:
        return "num_directions"


@dataclass(frozen=True)
class Rank(Expr):
    """An input's rank."""

    input: str

    def eval(self, env: Env) -> Any:
        s = env.shape(self.input)
        return None if s is None else len(s)

    def text(self) -> str:
        return f"the rank of {self.input}"


def _axis(axis: int | Expr, rank: int, env: Env) -> int | None:
    a = axis.eval(env) if isinstance(axis, Expr) else axis
    if a is None:
        return None
    a = int(a)
    if a < 0:
        a += rank
    return a if 0 <= a < rank else None


@dataclass(frozen=True)
class Dim(Expr):
    """One dim of an input; ``axis`` may count from the back or come from an
    attribute. ``label`` names what the dim is ("channels"); ``one_d`` is
    its value for a 1-D input (BatchNormalization's single channel)."""

    input: str
    axis: int | Expr
    label: str = ""
    one_d: int | None = None

    def eval(self, env: Env) -> Any:
        s = env.shape(self.input)
        if s is None:
            return None
        if len(s) == 1 and self.one_d is not None:
            return self.one_d
        a = _axis(self.axis, len(s), env)
        return None if a is None else s[a]

    def text(self) -> str:
        where = self.axis.text() if isinstance(self.axis, Expr) else str(self.axis)
        what = f"the {self.label} of {self.input}" if self.label else f"{self.input}'s dim"
        return f"{what} (dim {where})" if self.label else f"{what} {where}"


@dataclass(frozen=True)
class Len(Expr):
    """How many values a 1-D input holds (its dim 0; 1 for a scalar)."""

    input: str

    def eval(self, env: Env) -> Any:
        s = env.shape(self.input)
        if s is None or len(s) > 1:
            return None
        return s[0] if s else 1

    def text(self) -> str:
        return f"the length of {self.input}"


@dataclass(frozen=True)
class Size(Expr):
    """How many elements an input holds."""

    input: str

    def eval(self, env: Env) -> Any:
        s = env.shape(self.input)
        if s is None or any(d is None for d in s):
            return None
        return math.prod(s)  # type: ignore[arg-type]

    def text(self) -> str:
        return f"the size of {self.input}"


@dataclass(frozen=True)
class ProdDims(Expr):
    """The product of an input's dims from ``start`` on (a kernel's window)."""

    input: str
    start: int

    def eval(self, env: Env) -> Any:
        s = env.shape(self.input)
        if s is None or any(d is None for d in s[self.start :]):
            return None
        return math.prod(s[self.start :])  # type: ignore[arg-type]

    def text(self) -> str:
        return f"the product of {self.input}'s dims from {self.start}"


@dataclass(frozen=True)
class Value(Expr):
    """Element ``index`` of an int input (a constant, or at run time)."""

    input: str
    index: int = 0

    def eval(self, env: Env) -> Any:
        v = env.value(self.input)
        if v is None or v.size <= self.index:
            return None
        return int(v.reshape(-1)[self.index])

    def text(self) -> str:
        return f"{self.input}[{self.index}]"


@dataclass(frozen=True)
class ProdValues(Expr):
    """The product (or with ``total``, the sum) of an int input's values."""

    input: str
    total: bool = False

    def eval(self, env: Env) -> Any:
        v = env.value(self.input)
        if v is None:
            return None
        v = v.astype(np.int64)
        return int(v.sum()) if self.total else int(np.prod(v))

    def text(self) -> str:
        return f"the {'sum' if self.total else 'product'} of {self.input}'s values"


@dataclass(frozen=True)
class Broadcast(Expr):
    """The shape inputs ``a`` and ``b`` broadcast to (numpy's rule), from dim ``start`` on."""

    a: str
    b: str
    start: int | Expr = 0

    def eval(self, env: Env) -> Any:
        x, y = env.shape(self.a), env.shape(self.b)
        if x is None or y is None:
            return None
        n = max(len(x), len(y))
        x, y = (1,) * (n - len(x)) + x, (1,) * (n - len(y)) + y
        out: list[int | None] = []
        for p, q in zip(x, y):
            out.append(q if p == 1 else p if q == 1 else p if p == q else None)
        start = self.start.eval(env) if isinstance(self.start, Expr) else self.start
        if start is None:
            return None
        start = int(start) + (n if int(start) < 0 else 0)
        return tuple(out[start:]) if 0 <= start <= n else None

    def text(self) -> str:
        start = self.start.text() if isinstance(self.start, Expr) else str(self.start)
        tail = "" if start == "0" else f" from dim {start} on"
        return f"the shape {self.a} and {self.b} broadcast to{tail}"


@dataclass(frozen=True)
class Shape(Expr):
    """A shape: ``dims`` (an entry ``None`` matches anything); or the dims
    of ``input`` from ``start`` to ``stop``, then ``tail``."""

    dims: tuple[Expr | int | None, ...] = ()
    input: str = ""
    start: int | Expr = 0
    stop: int | None = None
    tail: tuple[Expr | int, ...] = ()

    def eval(self, env: Env) -> Any:
        if not self.input:
            return tuple(None if d is None else _expr(d).eval(env) for d in self.dims)
        s = env.shape(self.input)
        if s is None:
            return None
        start = self.start.eval(env) if isinstance(self.start, Expr) else self.start
        if start is None:
            return None
        start = int(start) + (len(s) if int(start) < 0 else 0)
        stop = len(s) if self.stop is None else self.stop + (len(s) if self.stop < 0 else 0)
        if not 0 <= start <= stop <= len(s):
            return None
        return tuple(s[start:stop]) + tuple(_expr(d).eval(env) for d in self.tail)

    def text(self) -> str:
        if not self.input:
            return "(" + ", ".join("*" if d is None else _expr(d).text() for d in self.dims) + ")"
        if self.start == 0 and self.stop is None and not self.tail:
            return f"the shape of {self.input}"
        start = self.start.text() if isinstance(self.start, Expr) else str(self.start)
        stop = "" if self.stop is None else str(self.stop)
        tail = "".join(f" + ({_expr(d).text()},)" for d in self.tail) if self.tail else ""
        return f"{self.input}.shape[{start if start != '0' else ''}:{stop}]{tail}"


@dataclass(frozen=True)
class Blocked(Expr):
    """``x``'s shape with ``ceil(D / block)`` along ``axis`` (a blocked
    quantization's scale)."""

    x: str
    axis: Expr
    block: Expr

    def eval(self, env: Env) -> Any:
        s = env.shape(self.x)
        b = self.block.eval(env)
        if s is None or not b:
            return None
        a = _axis(self.axis, len(s), env)
        if a is None:
            return None
        d = s[a]
        return (*tuple(s[:a]), None if d is None else -(-d // b), *tuple(s[a + 1 :]))

    def text(self) -> str:
        return f"{self.x}'s shape with ceil(dim / {self.block.text()}) along {self.axis.text()}"


@dataclass(frozen=True)
class _Op(Expr):
    op: str
    a: Expr
    b: Expr

    def eval(self, env: Env) -> Any:
        x, y = self.a.eval(env), self.b.eval(env)
        if x is None or y is None:
            return None
        if self.op == "==":
            return x == y
        if not isinstance(x, int) or not isinstance(y, int):
            return None  # arithmetic on ints only: never "two" * 2
        if self.op == "+":
            return x + y
        if self.op == "-":
            return x - y
        if self.op == "*":
            return x * y
        if self.op == "//":
            return None if y == 0 else x // y
        if self.op == "ceil":
            return None if y == 0 else -(-x // y)
        if self.op == "<=":
            return x <= y
        return None

    def text(self) -> str:
        if self.op == "ceil":
            return f"ceil({self.a.text()} / {self.b.text()})"
        return f"{_paren(self.a)} {self.op} {_paren(self.b)}"


def _paren(e: Expr) -> str:
    return f"({e.text()})" if isinstance(e, _Op) and e.op in "+-" else e.text()


def ceil_div(a: Expr | int, b: Expr | int) -> Expr:
    """``ceil(a / b)``."""
    return _Op("ceil", _expr(a), _expr(b))


def eq(a: Expr | int | str, b: Expr | int | str) -> Expr:
    """Whether ``a`` equals ``b`` (an attribute compared with a string or number)."""
    return _Op("==", a if isinstance(a, Expr) else _Lit(a), b if isinstance(b, Expr) else _Lit(b))


def le(a: Expr | int, b: Expr | int) -> Expr:
    """Whether ``a <= b``."""
    return _Op("<=", _expr(a), _expr(b))


@dataclass(frozen=True)
class _Lit(Expr):
    v: Any

    def eval(self, env: Env) -> Any:
        return self.v

    def text(self) -> str:
        return repr(self.v)


@dataclass(frozen=True)
class _Select(Expr):
    cond: Expr
    a: Expr
    b: Expr

    def eval(self, env: Env) -> Any:
        c = self.cond.eval(env)
        if c is None:
            return None
        return (self.a if c else self.b).eval(env)

    def text(self) -> str:
        return f"{self.a.text()} if {self.cond.text()} else {self.b.text()}"


def select(cond: Expr, a: Expr | int, b: Expr | int) -> Expr:
    """``a`` where ``cond`` holds, else ``b``."""
    return _Select(cond, _expr(a), _expr(b))


@dataclass(frozen=True)
class Present(Expr):
    """Whether the node has input ``input`` (and, with ``nonempty``, it is
    not an empty tensor, the "not given" of Resize's scales)."""

    input: str
    nonempty: bool = False

    def eval(self, env: Env) -> Any:
        if not env.has(self.input):
            return False
        if not self.nonempty:
            return True
        s = env.shape(self.input)
        if s is None:
            return None
        if 0 in s:
            return False
        return None if any(d is None for d in s) else True

    def text(self) -> str:
        return f"{self.input} is given"


# -- checks ------------------------------------------------------------------


def _shape_text(s: Dims) -> str:
    return (
        "("
        + ", ".join("?" if d is None else str(d) for d in s)
        + ("," if len(s) == 1 else "")
        + ")"
    )


def _elements(n: int) -> str:
    return f"{n} element" + ("" if n == 1 else "s")


@dataclass(frozen=True)
class Check:
    """What one input (or attribute) of a node must be.

    Attributes:
        subject: the input it constrains, or ``"attr:NAME"`` for an attribute.
        when: the check applies only where this holds (``None``: always).
        noun: what the subject is, where its name does not say ("bias").
    """

    subject: str
    when: Expr | None = field(default=None, kw_only=True)
    noun: str = field(default="", kw_only=True)

    @property
    def attribute(self) -> str:
        """The attribute's name for an ``"attr:NAME"`` subject, else ``""``."""
        return self.subject[5:] if self.subject.startswith("attr:") else ""

    def verdict(self, env: Env) -> str | None:
        """``""`` where the check holds or does not apply, a sentence saying
        what is wrong, or ``None`` where it cannot be decided yet."""
        if self.when is not None:
            applies = self.when.eval(env)
            if applies is None:
                return None
            if not applies:
                return ""
        if not self.attribute and not env.has(self.subject):
            return ""  # an optional input the node omits
        return self.test(env)

    def test(self, env: Env) -> str | None:
        """The verdict where the check applies (see :meth:`verdict`)."""
        raise NotImplementedError


@dataclass(frozen=True)
class Length(Check):
    """A 1-D input with ``n`` values; a single value too with ``one``, a
    scalar too with ``scalar``."""

    n: Expr = field(default_factory=lambda: Const(0))
    one: bool = False
    scalar: bool = False

    def test(self, env: Env) -> str | None:
        s = env.shape(self.subject)
        if s is None:
            return None
        if len(s) == 0 and self.scalar:
            return ""
        want = self.n.eval(env)
        if len(s) != 1:
            forms = " or a scalar" if self.scalar else ""
            need = f"1-D with {self.n.text()} = {want} values" if want is not None else "1-D"
            return f"{self.subject} has shape {_shape_text(s)}; it must be {need}{forms}"
        got = s[0]
        if got is None or want is None:
            return None
        if got == want or (self.one and got == 1):
            return ""
        alt = " (or 1)" if self.one else ""
        has = "" if isinstance(self.n, Const) else f", {_has(self.n, want, env)}"
        return f"{self.subject} has {_elements(got)}{has}; it must have {want}{alt}"


def _has(e: Expr, v: Any, env: Env) -> str:
    """``e`` and its value for a message: "X has 4 channels (dim 1)"."""
    if isinstance(e, Dim):
        s = env.shape(e.input)
        axis = _axis(e.axis, len(s), env) if s is not None else None
        where = f"dim {axis}" if axis is not None else f"dim {e.axis}"
        if isinstance(e.axis, Expr):
            where += f", its {e.axis.text()}"
        if e.label:
            return f"{e.input} has {v} {e.label} ({where})"
        return f"{e.input} has {v} at {where}"
    return f"{e.text()} is {v}"


@dataclass(frozen=True)
class ShapeIs(Check):
    """An input of exactly ``shape`` (entries ``None`` match any dim)."""

    shape: Expr = field(default_factory=Shape)

    def test(self, env: Env) -> str | None:
        s = env.shape(self.subject)
        want = self.shape.eval(env)
        if s is None or want is None:
            return None
        if len(s) != len(want):
            return (
                f"{self.subject} has shape {_shape_text(s)}; it must have rank {len(want)}: "
                f"{self.shape.text()} = {_shape_text(want)}"
            )
        listed = isinstance(self.shape, Shape) and not self.shape.input
        anything = [d is None for d in self.shape.dims] if listed else [False] * len(s)  # type: ignore[attr-defined]
        unknown = False
        for i, (d, w) in enumerate(zip(s, want)):
            if anything[i]:
                continue
            if d is None or w is None:
                unknown = True
            elif d != w:
                return (
                    f"{self.subject} has shape {_shape_text(s)}; it must be "
                    f"{self.shape.text()} = {_shape_text(want)} (dim {i} differs)"
                )
        return None if unknown else ""


@dataclass(frozen=True)
class BroadcastsTo(Check):
    """An input unidirectionally broadcastable to ``shape``: no more dims,
    and each of its dims (aligned at the right) 1 or the target's; with
    ``leading_ones``, extra leading dims of 1 too (PRelu's, as onnxruntime)."""

    shape: Expr = field(default_factory=Shape)
    leading_ones: bool = False

    def test(self, env: Env) -> str | None:
        s = env.shape(self.subject)
        want = self.shape.eval(env)
        if s is None or want is None:
            return None
        bad = f"{self.subject} has shape {_shape_text(s)}, which does not broadcast to "
        target = f"{self.shape.text()} {_shape_text(want)}"
        if len(s) > len(want):
            extra = s[: len(s) - len(want)]
            if not self.leading_ones or any(d is not None and d != 1 for d in extra):
                return bad + target
            if any(d is None for d in extra):
                return None
            s = s[len(s) - len(want) :]
        unknown = False
        for d, w in zip(reversed(s), reversed(want)):
            if d == 1 or (d is not None and d == w):
                continue
            if d is None or w is None:
                unknown = True
                continue
            return bad + target
        return None if unknown else ""


@dataclass(frozen=True)
class Holds(Check):
    """``a`` ``relation`` ``b``: ``"=="``, ``"<="`` or ``"divides"`` (b divides a)."""

    a: Expr = field(default_factory=lambda: Const(0))
    relation: str = "=="
    b: Expr = field(default_factory=lambda: Const(0))

    def test(self, env: Env) -> str | None:
        x, y = self.a.eval(env), self.b.eval(env)
        if x is None or y is None:
            return None
        if self.relation == "==":
            ok, need = x == y, "they must be equal"
        elif self.relation == "<=":
            ok, need = x <= y, f"it must be at most {y}"
        else:
            ok, need = y != 0 and x % y == 0, f"it must be a multiple of {self.b.text()}"
        if ok:
            return ""
        if isinstance(self.b, Const):
            bound = "at most " if self.relation == "<=" else ""
            return f"{_has(self.a, x, env)}; it must be {bound}{y}"
        return f"{_has(self.a, x, env)}, {_has(self.b, y, env)}; {need}"


@dataclass(frozen=True)
class AttrLength(Check):
    """A list attribute (subject ``"attr:NAME"``) with ``n`` values where
    given (or one value, with ``one``)."""

    n: Expr = field(default_factory=lambda: Const(0))
    one: bool = False

    def test(self, env: Env) -> str | None:
        v = env.attrs.get(self.attribute)
        if v is None:
            return ""
        got = len(v) if isinstance(v, (list, tuple)) else 1
        want = self.n.eval(env)
        if want is None:
            return None
        if got == want or (self.one and got == 1):
            return ""
        alt = " (or 1)" if self.one else ""
        return (
            f"attribute {self.attribute} has {_elements(got)}, {_has(self.n, want, env)}; "
            f"it must have {want}{alt}"
        )


@dataclass(frozen=True)
class AttrIs(Check):
    """A list attribute (subject ``"attr:NAME"``) equal to ``shape`` where
    given (Conv's ``kernel_shape`` and W's window dims)."""

    shape: Expr = field(default_factory=Shape)

    def test(self, env: Env) -> str | None:
        v = env.attrs.get(self.attribute)
        want = self.shape.eval(env)
        if v is None:
            return ""
        if want is None:
            return None
        got = tuple(int(x) for x in v) if isinstance(v, (list, tuple)) else (int(v),)
        if len(got) != len(want):
            return None  # an AttrLength check says what is wrong
        if all(w is None or g == w for g, w in zip(got, want)):
            return None if any(w is None for w in want) else ""
        return (
            f"attribute {self.attribute} is {list(got)}, {self.shape.text()} is "
            f"{_shape_text(want)}; they must be equal"
        )


@dataclass(frozen=True)
class Scalar(Check):
    """An input of one element: a scalar, or a 1-D tensor of one value."""

    def test(self, env: Env) -> str | None:
        s = env.shape(self.subject)
        if s is None:
            return None
        if any(d is not None and d != 1 for d in s):
            return f"{self.subject} has shape {_shape_text(s)}; it must be a scalar"
        return None if any(d is None for d in s) else ""


@dataclass(frozen=True)
class SameShape(Check):
    """An input of the same shape as input ``other`` (where both are given);
    a scalar and a one-value 1-D tensor count as the same (a per-tensor zero
    point of shape (1,) beside a scalar scale: onnx's own tests have it)."""

    other: str = ""

    def test(self, env: Env) -> str | None:
        if not env.has(self.other):
            return ""
        s, o = env.shape(self.subject), env.shape(self.other)
        if s is None or o is None:
            return None
        if _one_value(s) and _one_value(o):
            return ""
        decided = len(s) != len(o) or any(
            a is not None and b is not None and a != b for a, b in zip(s, o)
        )
        if not decided:
            return None if any(d is None for d in (*s, *o)) else ""
        return (
            f"{self.subject} has shape {_shape_text(s)}, {self.other} has shape "
            f"{_shape_text(o)}; they must be the same"
        )


def _one_value(s: Dims) -> bool:
    """Whether a shape holds exactly one value: ``()`` or ``(1,)``."""
    return len(s) <= 1 and all(d == 1 for d in s)
