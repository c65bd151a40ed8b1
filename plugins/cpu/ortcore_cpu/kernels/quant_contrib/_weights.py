"""A node's constant B, packed once for the native int8 GEMM, and the threads
a product is worth.

onnxruntime's quantization tool writes weights as initializers: the same
array at every run (:func:`.._common.constant_input`), so the kernels pack
them when the node first runs and hand the packed form to every product
(``packed=`` of :mod:`.._qgemm`) instead of packing B again per run.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from ep_sdk import NodeInfo

from .._common import constant_input, thread_count, threads_for
from .._qgemm import PackedWeight, pack_b


def _constant_or_absent(info: NodeInfo, index: int | None) -> bool:
    if index is None:
        return True
    inputs = info.node.inputs
    return index >= len(inputs) or inputs[index] is None or constant_input(info, index)


class ConstantB:
    """B of a node's product (input ``b_index``, its zero point input
    ``zero_index``), packed at the first run when both are constant
    initializers; ``transpose`` takes B's transpose as the product's B
    (QGemm's ``transB``)."""

    __slots__ = ("constant", "threads", "transpose", "_key", "_value")

    def __init__(
        self, info: NodeInfo, b_index: int, zero_index: int | None, transpose: bool = False
    ) -> None:
        self.constant = constant_input(info, b_index) and _constant_or_absent(info, zero_index)
        self.threads = thread_count(info)
        self.transpose = transpose
        self._key: tuple[Any, Any] | None = None
        self._value: tuple[np.ndarray, PackedWeight | None] = (np.empty(0, np.uint8), None)

    def get(self, b: np.ndarray, b_zero: Any) -> tuple[np.ndarray, PackedWeight | None]:
        """The product's B (``b``, or its transpose) and, for a constant one,
        its packed form (None where it is not constant or the native GEMM
        does not take it). Pass that B and ``b_zero`` itself (the very
        objects) to the product with ``packed=``."""
        bm = b.T if self.transpose and b.ndim == 2 else b
        if not self.constant:
            return bm, None
        key = self._key
        if key is None or key[0] is not b or key[1] is not b_zero:
            bm = np.ascontiguousarray(bm)
            packed = pack_b(bm, b_zero, self.threads) if bm.ndim == 2 else None
            self._key = (b, b_zero)
            self._value = (bm, packed)
        return self._value

    def product_threads(self, a: np.ndarray, b: np.ndarray) -> int:
        """Threads worth using for ``a @ b`` (M * K * N multiply-adds)."""
        m = a.size // max(1, a.shape[-1]) if a.ndim else 1
        return threads_for(m * b.size, self.threads)


__all__ = ["ConstantB"]
