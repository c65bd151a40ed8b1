"""Type stubs for the Cython convolution helpers."""

import numpy as np
import numpy.typing as npt

F32 = npt.NDArray[np.float32]

def im2col(
    x: F32,
    col: F32,
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
    od: int,
    oh: int,
    ow: int,
    nthreads: int,
) -> None: ...
def col2im(
    col: F32,
    x: F32,
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
    od: int,
    oh: int,
    ow: int,
    nthreads: int,
) -> None: ...
def depthwise2d(
    x: F32,
    w: F32,
    out: F32,
    sh: int,
    sw: int,
    ph: int,
    pw: int,
    dh: int,
    dw: int,
    nthreads: int,
    b: F32 | None = None,
) -> None: ...
def bias_clamp(y: F32, b: F32, lo: float, hi: float, nthreads: int) -> None: ...
def bias_add_clamp(y: F32, b: F32, z: F32, lo: float, hi: float, nthreads: int) -> None: ...

DIRECT_BLOCK: int
DIRECT_VECTOR: int

def direct_conv2d_scratch(
    C: int,
    OH: int,
    OW: int,
    KH: int,
    KW: int,
    sh: int,
    sw: int,
    dh: int,
    dw: int,
    flat: bool = ...,
) -> int: ...
def direct_conv2d(
    x: F32,
    wp: F32,
    y: F32,
    b: F32,
    z: F32 | None,
    scratch: F32,
    sh: int,
    sw: int,
    ph: int,
    pw: int,
    dh: int,
    dw: int,
    lo: float,
    hi: float,
    nthreads: int,
    flat: bool = ...,
    group: int = ...,
    interleave: bool = ...,
) -> None: ...
def direct_conv2d_maxpool(
    x: F32,
    wp: F32,
    y: F32,
    b: F32,
    scratch: F32,
    OH: int,
    OW: int,
    sh: int,
    sw: int,
    ph: int,
    pw: int,
    dh: int,
    dw: int,
    lo: float,
    hi: float,
    pkh: int,
    pkw: int,
    psh: int,
    psw: int,
    pph: int,
    ppw: int,
    pdh: int,
    pdw: int,
    nthreads: int,
) -> None: ...

CHANNEL_VECTOR_BLOCK: int
CHANNEL_VECTOR_NATIVE: bool

def channel_vector_items(M: int, P: int) -> int: ...
def channel_vector_conv2d_scratch(
    C: int,
    OH: int,
    OW: int,
    M: int,
    KH: int,
    KW: int,
    sh: int,
    sw: int,
    dh: int,
    dw: int,
    nthreads: int,
) -> int: ...
def channel_vector_conv2d(
    x: F32,
    wp: F32,
    y: F32,
    b: F32,
    z: F32 | None,
    scratch: F32,
    KH: int,
    KW: int,
    sh: int,
    sw: int,
    ph: int,
    pw: int,
    dh: int,
    dw: int,
    lo: float,
    hi: float,
    nthreads: int,
) -> None: ...
