"""Type stubs: the AVX-512 build of :mod:`.gemm` (the same functions)."""

from .gemm import PANEL as PANEL
from .gemm import ROWS as ROWS
from .gemm import VECTOR as VECTOR
from .gemm import batched_sgemm as batched_sgemm
from .gemm import batched_sgemm_packed_a as batched_sgemm_packed_a
from .gemm import pack_a_batch as pack_a_batch
from .gemm import pack_b as pack_b
from .gemm import pointwise as pointwise
from .gemm import sgemm as sgemm
