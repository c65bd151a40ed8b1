"""Type stubs for the Cython Winograd F(2x2, 3x3) transforms."""

import numpy as np
import numpy.typing as npt

F32 = npt.NDArray[np.float32]

def input_transform(
    x: F32,
    v: F32,
    ph: int,
    pw: int,
    ty0: int,
    ty1: int,
    tw: int,
    nthreads: int,
    bias: F32 | None = None,
    lo: float = ...,
    hi: float = ...,
) -> None: ...
def output_transform(
    m: F32,
    y: F32,
    ty0: int,
    ty1: int,
    tw: int,
    nthreads: int,
    bias: F32 | None = None,
    lo: float = ...,
    hi: float = ...,
) -> None: ...
