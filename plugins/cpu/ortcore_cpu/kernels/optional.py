"""Optional ops: Optional, OptionalHasElement, OptionalGetElement.

An optional value is ``None`` (empty) or the tensor or sequence it holds.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from ep_sdk import Compute, NodeInfo

from ._versions import per_schema_version


@per_schema_version("Optional")
def optional(info: NodeInfo) -> Compute:
    """An optional holding the input, or an empty one (of attribute ``type``)."""
    return lambda x=None: (x,)


@per_schema_version("OptionalHasElement")
def optional_has_element(info: NodeInfo) -> Compute:
    """Whether the optional input holds a value (from opset 18 the input may
    be a plain tensor or sequence, or omitted), as a bool scalar."""
    return lambda x=None: (np.array(x is not None),)


@per_schema_version("OptionalGetElement")
def optional_get_element(info: NodeInfo) -> Compute:
    """The value an optional holds (from opset 18 a plain tensor or sequence
    passes through); an empty optional is an error."""

    def compute(x: Any) -> tuple[Any]:
        if x is None:
            raise ValueError(f"{info.describe()}: the optional input is empty")
        return (x,)

    return compute
