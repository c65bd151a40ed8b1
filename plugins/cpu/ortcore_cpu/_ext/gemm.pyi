"""Type stubs for the packed single-precision GEMM."""

import numpy as np
import numpy.typing as npt

F32 = npt.NDArray[np.float32]

VECTOR: int
ROWS: int
PANEL: int

def pack_b(b: F32, nthreads: int = 1) -> F32: ...
def sgemm(a: F32, bp: F32, n: int, bias: F32 | None, out: F32, nthreads: int) -> None: ...
def batched_sgemm(a: F32, b: F32, out: F32, nthreads: int) -> None: ...
