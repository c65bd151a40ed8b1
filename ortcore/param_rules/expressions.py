"""Expressions of the rule language: a number, a shape or a truth computed from
an :class:`~ortcore.param_rules.env.Env`, ``None`` where what it needs is not
known."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from .env import Env


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
