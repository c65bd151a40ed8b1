"""Type stubs for the Cython data-movement kernels (Transpose, Concat, Gather)."""

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

U8 = npt.NDArray[np.uint8]

def transpose(
    src: U8, dst: U8, shape: Sequence[int], perm: Sequence[int], isz: int, nthreads: int
) -> None: ...
def concat(parts: list[U8], dst: U8, outer: int, nthreads: int) -> None: ...
def gather(
    src: U8,
    indices: npt.NDArray[np.int32] | npt.NDArray[np.int64],
    dst: U8,
    outer: int,
    n: int,
    inner: int,
    nthreads: int,
) -> bool: ...
def parallel_region(nthreads: int) -> None: ...
