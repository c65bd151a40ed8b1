"""Type stubs for the Cython row-wise kernels (Softmax, LayerNormalization, reductions)."""

import numpy as np
import numpy.typing as npt

F = npt.NDArray[np.floating]

SUM: int
MEAN: int
MAX: int
MIN: int

def softmax(x: F, out: F, take_log: bool, nthreads: int) -> None: ...
def layer_norm(
    x: F, scale: F, bias: F | None, out: F, mean: F, inv_std: F, eps: float, nthreads: int
) -> None: ...
def reduce_rows(x: F, out: F, op: int, nthreads: int) -> None: ...
def reduce_all(x: F, op: int, nthreads: int) -> float: ...
