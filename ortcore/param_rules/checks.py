"""Checks of the rule language: what one input (or attribute) of a node must
be, and the sentence that says what is wrong where it is not."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .env import Dims, Env
from .expressions import Const, Dim, Expr, Shape, _axis


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
