"""Type stubs for the Cython 2-D resampling kernels."""

import numpy as np
import numpy.typing as npt

F = npt.NDArray[np.floating]
Idx = npt.NDArray[np.intp]

def resize_nearest(x: F, iy: Idx, ix: Idx, out: F, nthreads: int) -> None: ...
def resize_taps(x: F, ty: Idx, wy: F, tx: Idx, wx: F, out: F, nthreads: int) -> None: ...
