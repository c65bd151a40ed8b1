"""Type stubs: the AVX-512 build of :mod:`.pool`."""

import numpy as np
import numpy.typing as npt

F32 = npt.NDArray[np.float32]

def max_pool(
    x: F32,
    out: F32,
    kd: int,
    kh: int,
    kw: int,
    sd: int,
    sh: int,
    sw: int,
    pd: int,
    ph: int,
    pw: int,
    dd: int,
    dh: int,
    dw: int,
    nthreads: int,
) -> None: ...
def max_pool_indices(
    x: F32,
    out: F32,
    indices: npt.NDArray[np.int64],
    column_major: bool,
    kd: int,
    kh: int,
    kw: int,
    sd: int,
    sh: int,
    sw: int,
    pd: int,
    ph: int,
    pw: int,
    dd: int,
    dh: int,
    dw: int,
    nthreads: int,
) -> None: ...
def avg_pool(
    x: F32,
    out: F32,
    kd: int,
    kh: int,
    kw: int,
    sd: int,
    sh: int,
    sw: int,
    pd: int,
    ph: int,
    pw: int,
    ed: int,
    eh: int,
    ew: int,
    dd: int,
    dh: int,
    dw: int,
    count_include_pad: bool,
    nthreads: int,
) -> None: ...
def global_pool(x: F32, out: F32, take_max: bool, nthreads: int) -> None: ...
