"""What the generated kernels share: the grid-stride loop, the word types of the
data-movement kernels, and the broadcast geometry (the :data:`BCAST` struct of
dims and strides, the unrolled split of a flat index into coordinates)."""

from __future__ import annotations

import numpy as np

from .spec import StructType

__all__ = ["BCAST", "MAX_RANK", "WORDS"]

WORDS = {1: "unsigned char", 2: "unsigned short", 4: "unsigned int", 8: "unsigned long long"}
"""Element sizes the data-movement kernels are generated for, and their C types."""

MAX_RANK = 6

BCAST = StructType(
    "Bcast",
    f"struct Bcast {{ i64 dims[{MAX_RANK}]; i64 sa[{MAX_RANK}]; i64 sb[{MAX_RANK}]; }};",
    np.dtype(
        [("dims", "<i8", (MAX_RANK,)), ("sa", "<i8", (MAX_RANK,)), ("sb", "<i8", (MAX_RANK,))]
    ),
)
"""The output's dims and both inputs' element strides (0 where broadcast)."""


def _coords(rank: int, *offsets: tuple[str, str]) -> str:
    """The unrolled loop that splits the flat index ``r`` into its ``rank``
    coordinates (innermost last, over ``s.dims``) and adds each times the
    stride field to its offset variable: ``("oa", "sa")`` gives ``oa += c * s.sa[k]``."""
    adds = " ".join(f"{var} += c * s.{field}[{{k}}];" for var, field in offsets)
    return "\n".join(
        f"        {{ i64 c = r % s.dims[{k}]; r /= s.dims[{k}]; " + adds.format(k=k) + " }"
        for k in reversed(range(rank))
    )


_LOOP = (
    "for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; "
    "i += (i64)gridDim.x * blockDim.x)"
)
