"""The CPU execution provider class.

This module stays light: the kernel modules (and the Cython extensions they
load) are imported on the first call of :meth:`CPUExecutionProvider.kernel_registry`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import ep_sdk
from ep_sdk.hardware import host_cpu

from . import __version__
from .memory import keep_freed_memory
from .threads import run_ended, run_started, share_blas_pool

_registry: ep_sdk.KernelRegistry | None = None


def _load_registry() -> ep_sdk.KernelRegistry:
    """Import the kernel modules once and return their registry."""
    global _registry
    if _registry is None:
        from .kernels import registry

        _registry = registry
    return _registry


class CPUExecutionProvider(ep_sdk.ExecutionProvider):
    """Runs ONNX nodes on the host with numpy and Cython kernels.

    It is the fallback provider: its priority is the lowest, and the core tries
    it after every other provider the session lists. Parallel kernels use
    ``SessionOptions.intra_op_num_threads`` threads (0: every core); a
    session that sets it also sizes numpy's BLAS pool for its runs, which is
    process-wide (see :mod:`ortcore_cpu.threads`). The first one created
    tells glibc's malloc to keep freed memory (see :mod:`ortcore_cpu.memory`).
    """

    name: ClassVar[str] = "CPUExecutionProvider"
    aliases: ClassVar[tuple[str, ...]] = ("cpu",)
    version: ClassVar[str] = __version__
    priority: ClassVar[int] = 0
    vendor: ClassVar[str] = "ortcore"
    ignored_options: ClassVar[Mapping[str, str]] = {
        # onnxruntime's CPU provider takes these (its arena and OrtArenaCfg
        # settings); numpy and glibc's malloc own this provider's memory.
        **dict.fromkeys(
            (
                "use_arena",
                "enable_cpu_mem_arena",
                "arena_extend_strategy",
                "max_mem",
                "initial_chunk_size_bytes",
                "max_dead_bytes_per_chunk",
                "initial_growth_chunk_size_bytes",
                "max_power_of_two_extend_bytes",
            ),
            "ortcore's CPU provider has no memory arena (numpy allocates its arrays)",
        ),
        "device_id": "there is one host CPU",
    }

    def __init__(
        self,
        options: Mapping[str, Any] | None = None,
        config: ep_sdk.SessionConfig | None = None,
    ) -> None:
        super().__init__(options, config)
        self._blas_threads = max(int(self.config.intra_op_num_threads), 0)
        share_blas_pool()
        keep_freed_memory()

    @classmethod
    def ep_devices(cls) -> Sequence[ep_sdk.EpDevice]:
        """The host CPU (vendor, ISA features in its metadata), with the
        kernel builds this CPU runs in ``ep_metadata["kernel_isa"]``
        (``baseline``, ``avx2`` or ``avx512``)."""
        metadata: dict[str, str] = {}
        try:
            from ._ext.activation import cpu_level

            metadata["kernel_isa"] = ("baseline", "avx2", "avx512")[int(cpu_level())]
        except (ImportError, IndexError, ValueError):  # a partial build: the ISA stays unsaid
            pass
        return [ep_sdk.EpDevice(host_cpu(), ep_metadata=metadata)]

    def on_run_start(self, run_options: Any) -> None:
        """Count the run against the process's thread budget and size numpy's
        BLAS pool to the run's share (see :mod:`ortcore_cpu.threads`)."""
        run_started(self._blas_threads)

    def on_run_end(self, run_options: Any) -> None:
        """The run no longer counts against the thread budget."""
        run_ended()

    def kernel_registry(self) -> ep_sdk.KernelRegistry:
        """Return the provider's kernels (imported on first use)."""
        return _load_registry()
