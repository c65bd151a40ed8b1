"""Type stubs for the Cython float32 activation kernel."""

import enum

import numpy as np
import numpy.typing as npt

F32 = npt.NDArray[np.float32]

class Activation(enum.IntEnum):
    IDENTITY = 0
    RELU = 1
    LEAKY_RELU = 2
    CLIP = 3
    SIGMOID = 4
    HARD_SIGMOID = 5
    TANH = 6
    ELU = 7
    SELU = 8
    CELU = 9
    SOFTPLUS = 10
    SOFTSIGN = 11
    THRESHOLDED_RELU = 12
    HARD_SWISH = 13
    MISH = 14
    SWISH = 15
    GELU = 16
    GELU_TANH = 17
    SHRINK = 18

def cpu_level() -> int: ...
def activation_f32(
    op: int, x: F32, bias: F32, out: F32, alpha: float, beta: float, nthreads: int
) -> None: ...
def attention_softmax(
    s: F32, mask: F32, mask_row: npt.NDArray[np.intp], scale: float, nthreads: int
) -> None: ...
def lrn_f32(
    x: F32, out: F32, size: int, alpha: float, beta: float, bias: float, nthreads: int
) -> None: ...
