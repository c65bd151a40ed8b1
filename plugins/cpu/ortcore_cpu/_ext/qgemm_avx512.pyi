"""Type stubs for the 8-bit integer GEMM (every build: qgemm, qgemm_avx2,
qgemm_avxvnni, qgemm_avx512)."""

from typing import Any

import numpy as np
import numpy.typing as npt

ROWS: int
PANEL: int
ISA: str
MIXED_SIGNS: bool

class Packed:
    data: npt.NDArray[np.uint8]
    size: int
    K: int
    signed: bool
    zero: npt.NDArray[np.int32]
    zero_any: bool
    sums: npt.NDArray[np.int32] | None

def pack_a(
    a: Any, signed: bool, zero: Any, flip: bool, sums: bool, nthreads: int = 1
) -> Packed: ...
def pack_b(
    b: Any, signed: bool, zero: Any, flip: bool, sums: bool, nthreads: int = 1
) -> Packed: ...
def gemm(a: Packed, b: Packed, out: Any, **epilogue: Any) -> None: ...
def conv(
    a: Packed,
    x: Any,
    signed: bool,
    xz: int,
    geometry: tuple[int, ...],
    out: Any,
    **epilogue: Any,
) -> None: ...
def depthwise(
    x: Any, signed: bool, xz: int, w: Any, geometry: tuple[int, ...], out: Any, **epilogue: Any
) -> None: ...
def cpu_features() -> set[str]: ...
def quantize(
    x: Any, scale: Any, zero: Any, out_signed: bool, y: Any, inner: int, nthreads: int = 1
) -> None: ...
def dequantize(
    x: Any, signed: bool, zero: Any, scale: Any, y: Any, inner: int, nthreads: int = 1
) -> None: ...
def minmax(x: Any, nthreads: int = 1) -> tuple[np.float32, np.float32, bool]: ...
