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

The language is a package: :mod:`~ortcore.param_rules.env` (the node's view),
:mod:`~ortcore.param_rules.expressions` and :mod:`~ortcore.param_rules.checks`;
every name is importable from here.
"""

from __future__ import annotations

from .checks import (
    AttrIs,
    AttrLength,
    BroadcastsTo,
    Check,
    Holds,
    Length,
    SameShape,
    Scalar,
    ShapeIs,
)
from .env import Dims as Dims
from .env import Env
from .expressions import (
    Attr,
    AttrCount,
    AttrGiven,
    AttrStr,
    Blocked,
    Broadcast,
    Const,
    Dim,
    Directions,
    Expr,
    Len,
    Outputs,
    Present,
    ProdDims,
    ProdValues,
    Rank,
    Shape,
    Size,
    Value,
    ceil_div,
    eq,
    le,
    select,
)

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
