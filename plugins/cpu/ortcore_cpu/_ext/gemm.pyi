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
def pack_a_batch(a: F32) -> F32: ...
def batched_sgemm_packed_a(ap: F32, M: int, b: F32, out: F32, nthreads: int) -> None: ...
def pointwise(
    ap: F32,
    M: int,
    x: F32,
    y: F32,
    bias: F32,
    z: F32 | None,
    lo: float,
    hi: float,
    nthreads: int,
    group: int = 1,
    interleave: bool = False,
) -> None: ...
