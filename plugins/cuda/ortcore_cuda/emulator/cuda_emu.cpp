// The launcher of the CPU emulation (see cuda_emu.h).
#include "cuda_emu.h"
#include <stdlib.h>
#include <vector>

thread_local uint3 threadIdx;
thread_local uint3 blockIdx;
thread_local dim3 blockDim;
thread_local dim3 gridDim;

struct emu_warp {
    pthread_barrier_t barrier;
    unsigned char slots[32][16];
};

struct emu_block {
    pthread_barrier_t barrier;
    std::vector<emu_warp *> warps;
    int threads;
};

thread_local emu_block *emu_current;
static thread_local int emu_linear;

extern "C" void emu_syncthreads(void) { pthread_barrier_wait(&emu_current->barrier); }
extern "C" int emu_lane(void) { return emu_linear % 32; }
extern "C" void emu_warp_sync(void) { pthread_barrier_wait(&emu_current->warps[emu_linear / 32]->barrier); }
extern "C" void *emu_warp_slot(int lane) { return emu_current->warps[emu_linear / 32]->slots[lane % 32]; }

typedef void (*emu_trampoline)(void **args);

struct emu_thread_args {
    emu_trampoline fn;
    void **args;
    emu_block *block;
    uint3 tid, bid;
    dim3 bdim, gdim;
    int linear;
};

static void *emu_thread_main(void *p) {
    emu_thread_args *a = (emu_thread_args *)p;
    threadIdx = a->tid; blockIdx = a->bid; blockDim = a->bdim; gridDim = a->gdim;
    emu_current = a->block; emu_linear = a->linear;
    a->fn(a->args);
    return 0;
}

// Run fn(args) as a launch of grid x block threads; 0 on success.
extern "C" int emu_launch(emu_trampoline fn, void **args, unsigned gx, unsigned gy, unsigned gz,
                          unsigned bx, unsigned by, unsigned bz) {
    int n = (int)(bx * by * bz);
    if (n <= 0 || n > 1024) return 1;
    dim3 g = {gx, gy, gz}, b = {bx, by, bz};
    std::vector<pthread_t> threads(n);
    std::vector<emu_thread_args> targs(n);
    for (unsigned z = 0; z < gz; z++)
    for (unsigned y = 0; y < gy; y++)
    for (unsigned x = 0; x < gx; x++) {
        emu_block block;
        block.threads = n;
        pthread_barrier_init(&block.barrier, 0, n);
        int nwarps = (n + 31) / 32;
        for (int w = 0; w < nwarps; w++) {
            emu_warp *warp = new emu_warp;
            int size = (w == nwarps - 1 && n % 32) ? n % 32 : 32;
            pthread_barrier_init(&warp->barrier, 0, size);
            block.warps.push_back(warp);
        }
        int i = 0;
        for (unsigned tz = 0; tz < bz; tz++)
        for (unsigned ty = 0; ty < by; ty++)
        for (unsigned tx = 0; tx < bx; tx++, i++) {
            targs[i] = emu_thread_args{fn, args, &block, {tx, ty, tz}, {x, y, z}, b, g, i};
            if (pthread_create(&threads[i], 0, emu_thread_main, &targs[i])) return 2;
        }
        for (int t = 0; t < n; t++) pthread_join(threads[t], 0);
        pthread_barrier_destroy(&block.barrier);
        for (emu_warp *w : block.warps) { pthread_barrier_destroy(&w->barrier); delete w; }
    }
    return 0;
}
