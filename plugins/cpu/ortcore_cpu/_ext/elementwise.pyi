"""Type stubs for the Cython float32 elementwise kernels."""

import numpy as np
import numpy.typing as npt

F32 = npt.NDArray[np.float32]

ADD: int
SUB: int
MUL: int
DIV: int

def binary_same(op: int, a: F32, b: F32, out: F32, nthreads: int) -> None: ...
def binary_rows(op: int, full: F32, small: F32, out: F32, swap: bool, nthreads: int) -> None: ...
def relu(x: F32, out: F32, nthreads: int) -> None: ...
def channel_affine(x: F32, scale: F32, shift: F32, out: F32, nthreads: int) -> None: ...
def erf(x: npt.NDArray[np.floating], out: npt.NDArray[np.floating], nthreads: int) -> None: ...
