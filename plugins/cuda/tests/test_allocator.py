"""The caching allocator's bookkeeping: size classes, reuse, stream order, the arena limit."""

from __future__ import annotations

import pytest

from ortcore_cuda.allocator import CachingAllocator, DeviceOutOfMemory


class Device:
    """Raw allocations and stream synchronizations, recorded."""

    def __init__(self, capacity: int = 1 << 30) -> None:
        self.next = 0x1000
        self.live: dict[int, int] = {}
        self.synced: list[int] = []
        self.capacity = capacity

    def alloc(self, n: int) -> int:
        if sum(self.live.values()) + n > self.capacity:
            raise RuntimeError("cuMemAlloc: out of memory")
        ptr, self.next = self.next, self.next + n
        self.live[ptr] = n
        return ptr

    def free(self, ptr: int) -> None:
        del self.live[ptr]

    def sync(self, stream: int) -> None:
        self.synced.append(stream)


def make(device: Device, **kw: object) -> CachingAllocator:
    return CachingAllocator(device.alloc, device.free, device.sync, **kw)  # type: ignore[arg-type]


def test_size_classes_by_strategy() -> None:
    d = Device()
    pow2 = make(d)
    assert [pow2.size_class(n) for n in (0, 1, 512, 513, 3000)] == [512, 512, 512, 1024, 4096]
    same = make(d, strategy="kSameAsRequested")
    assert [same.size_class(n) for n in (1, 512, 513, 3000)] == [512, 512, 1024, 3072]
    with pytest.raises(ValueError, match="arena_extend_strategy"):
        make(d, strategy="kDouble")


def test_a_freed_block_is_reused_on_its_stream_without_a_wait() -> None:
    d = Device()
    a = make(d)
    b1 = a.allocate(1000, stream=1)
    a.release(b1, stream=1)
    b2 = a.allocate(900, stream=1)  # same size class
    assert b2 is b1 and d.synced == [] and a.raw_allocs == 1
    assert a.in_use == 1024 and a.cached == 0


def test_a_block_freed_on_another_stream_waits_for_that_stream() -> None:
    d = Device()
    a = make(d)
    b1 = a.allocate(1000, stream=1)
    a.release(b1, stream=1)
    b2 = a.allocate(1000, stream=2)
    assert b2 is b1 and d.synced == [1] and b2.stream == 2


def test_the_limit_releases_the_cache_first_then_refuses() -> None:
    d = Device()
    a = make(d, limit=4096)
    x = a.allocate(2048, 1)
    y = a.allocate(1024, 1)
    a.release(y, 1)  # cached: 1024
    z = a.allocate(2048, 1)  # 2048 + 1024 cached + 2048 > 4096: the cache goes first
    assert a.cached == 0 and a.held == 4096 and len(d.live) == 2
    with pytest.raises(DeviceOutOfMemory, match="gpu_mem_limit=4096 \\(4096 bytes in use\\)"):
        a.allocate(1, 1)
    a.release(x, 1)
    a.release(z, 1)
    assert a.allocate(2048, 1) in (x, z)  # after the refusal, the arena goes on


def test_a_full_device_drops_the_cache_and_retries_then_says_so() -> None:
    d = Device(capacity=4096)
    a = make(d)
    b = a.allocate(4096, 1)
    a.release(b, 1)
    c = a.allocate(2048, 1)  # the device is full of the cached 4096: dropped, then allocated
    assert c is not b and a.cached == 0
    with pytest.raises(DeviceOutOfMemory, match="could not allocate 4096 bytes"):
        a.allocate(4096, 1)


def test_empty_cache_frees_only_what_is_not_in_use() -> None:
    d = Device()
    a = make(d)
    keep = a.allocate(512, 1)
    drop = a.allocate(512, 1)
    a.release(drop, 1)
    a.empty_cache()
    assert list(d.live) == [keep.ptr] and a.held == a.in_use == 512
    assert a.peak == 1024
