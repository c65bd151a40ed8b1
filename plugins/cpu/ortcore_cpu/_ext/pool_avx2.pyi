"""Type stubs: the AVX2 and FMA build of :mod:`.pool` (the same functions)."""

from .pool import avg_pool as avg_pool
from .pool import global_pool as global_pool
from .pool import max_pool as max_pool
from .pool import max_pool_indices as max_pool_indices
