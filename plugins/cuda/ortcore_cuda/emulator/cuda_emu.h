// CPU emulation of CUDA's execution model, for running the provider's real
// kernel sources with g++ on a machine without a GPU (see emulate.py).
//
// A launch runs its blocks one after another; within a block every thread is
// an OS thread, so __syncthreads() is a real barrier and __shared__ memory
// (a function-local static) is one copy seen by all the block's threads.
// Warp shuffles exchange through a per-warp buffer between two barriers of
// that warp's threads, so a shuffle in divergent code deadlocks here as it
// is undefined on a GPU. The indices (threadIdx, blockIdx, blockDim,
// gridDim) are thread-local. Nothing here is a re-implementation of a kernel:
// the kernel's own source is compiled against these definitions.
#pragma once
#include <pthread.h>
#include <stdint.h>
#include <math.h>
#include <string.h>
#include <float.h>

struct uint3 { unsigned int x, y, z; };
struct dim3 { unsigned int x, y, z; };

extern thread_local uint3 threadIdx;
extern thread_local uint3 blockIdx;
extern thread_local dim3 blockDim;
extern thread_local dim3 gridDim;
static const int warpSize = 32;

#define __global__
#define __device__ static inline
#define __forceinline__
#define __host__
#define __restrict__ __restrict
#define __shared__ static
#define __launch_bounds__(...)

struct emu_block;
extern thread_local emu_block *emu_current;
extern "C" void emu_syncthreads(void);
extern "C" void emu_warp_sync(void);
extern "C" void *emu_warp_slot(int lane);
extern "C" int emu_lane(void);

static inline void __syncthreads(void) { emu_syncthreads(); }
static inline void __syncwarp(unsigned = 0xffffffffu) { emu_warp_sync(); }

template <typename T>
static inline T emu_shuffle(T v, int src_lane) {
    memcpy(emu_warp_slot(emu_lane()), &v, sizeof(T));
    emu_warp_sync();
    T out;
    memcpy(&out, emu_warp_slot(src_lane), sizeof(T));
    emu_warp_sync();
    return out;
}
template <typename T> static inline T __shfl_sync(unsigned, T v, int lane, int w = 32) {
    return emu_shuffle(v, (emu_lane() / w) * w + lane % w);
}
template <typename T> static inline T __shfl_down_sync(unsigned, T v, unsigned d, int w = 32) {
    int lane = emu_lane(), base = (lane / w) * w;
    int src = lane + (int)d < base + w ? lane + (int)d : lane;
    return emu_shuffle(v, src);
}
template <typename T> static inline T __shfl_xor_sync(unsigned, T v, int m, int w = 32) {
    int lane = emu_lane(), base = (lane / w) * w;
    int src = base + ((lane - base) ^ m);
    return emu_shuffle(v, src < base + w ? src : lane);
}

static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
static inline double rsqrt(double x) { return 1.0 / sqrt(x); }
static inline float __fdividef(float a, float b) { return a / b; }
template <typename T> static inline T __ldg(const T *p) { return *p; }

// half precision: storage type with float conversions (enough for load/compute/store kernels)
struct __half {
    uint16_t bits;
};
static inline float __half2float(__half h) {
    uint32_t s = (h.bits & 0x8000u) << 16, e = (h.bits >> 10) & 0x1f, m = h.bits & 0x3ff, f;
    if (e == 0) {
        if (m == 0) { f = s; }
        else { e = 127 - 15 + 1; while (!(m & 0x400)) { m <<= 1; e--; } m &= 0x3ff; f = s | (e << 23) | (m << 13); }
    } else if (e == 31) { f = s | 0x7f800000u | (m << 13); }
    else { f = s | ((e + 127 - 15) << 23) | (m << 13); }
    float out; memcpy(&out, &f, 4); return out;
}
static inline __half __float2half(float x) {  // round to nearest even, as cvt.rn.f16.f32
    uint32_t f; memcpy(&f, &x, 4);
    uint32_t s = (f >> 16) & 0x8000u, e = (f >> 23) & 0xff, m = f & 0x7fffff;
    __half h;
    if (e == 0xff) { h.bits = (uint16_t)(s | 0x7c00 | (m ? 0x200 : 0)); return h; }
    int ex = (int)e - 127 + 15;
    if (ex >= 31) { h.bits = (uint16_t)(s | 0x7c00); return h; }
    if (ex <= 0) {
        if (ex < -10) { h.bits = (uint16_t)s; return h; }
        m |= 0x800000; int shift = 14 - ex; uint32_t hm = m >> shift, rem = m & ((1u << shift) - 1), half_ = 1u << (shift - 1);
        if (rem > half_ || (rem == half_ && (hm & 1))) hm++;
        h.bits = (uint16_t)(s | hm); return h;
    }
    uint32_t hm = m >> 13, rem = m & 0x1fff;
    uint32_t out = s | ((uint32_t)ex << 10) | hm;
    if (rem > 0x1000 || (rem == 0x1000 && (hm & 1))) out++;
    h.bits = (uint16_t)out; return h;
}
