/* Static shares of a parallel loop's items, with stealing.
 *
 * A kernel's loop over `items` independent work items is cut into one
 * contiguous share per thread, as OpenMP's static schedule cuts it: each
 * thread walks its own share from the front, so its items stay together
 * (the inputs and weights they share stay in its cache). A thread whose
 * share is done takes the back half of what is left of the largest other
 * share and walks that. So when one core runs slower than the other (a
 * VM's virtual CPUs whose hosts' cores are busy with other work: on a
 * 2-vCPU VM one ran the same kernel 1.5-1.9x slower than the other for
 * tens of seconds at a time), the fast thread finishes the slow one's work
 * instead of waiting for it at the barrier, and a thread the team never
 * started (fewer threads than shares) has its share taken by the others.
 *
 * A share is [lo, hi) packed in one 64-bit word (lo in the low half), on a
 * cache line of its own; the owner claims items from its front and a thief
 * cuts the back half off with a compare-and-swap, so an item is handed out
 * exactly once. Item counts must be below 2^32 (ws_init says whether they
 * are).
 *
 * The owner claims 1 + left / WS_CLAIM_PART items at a time (its batch, on
 * a second cache line that only it writes) rather than one: a locked
 * compare-and-swap costs tens of cycles and drains the store buffer (the
 * item's output stores wait there), and a 1x1 Conv of 16 channels has
 * items of a few hundred cycles. A claimed batch cannot be stolen, so it is
 * a small part of what is left: the last ones are single items.
 */
#ifndef ORTCORE_STEAL_H
#define ORTCORE_STEAL_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint64_t r; /* (hi << 32) | lo */
    int state;  /* the share's preparation: 0 not begun, 1 under way, 2 done */
    char pad[52];
    /* the owner's claimed batch [cur, end), its own line (no other thread
     * reads it) */
    uint32_t cur, end;
    char pad2[56];
} ws_share;

/* Divisor of a share's items left for the owner's next batch (see above). */
#define WS_CLAIM_PART 16

/* The first 64-byte boundary in raw, a block of n + 1 shares' bytes: room
 * for n shares on cache lines of their own. */
static inline ws_share *ws_align(void *raw) {
    return (ws_share *)(((uintptr_t)raw + 63u) & ~(uintptr_t)63u);
}

static inline uint64_t ws_pack(uint64_t lo, uint64_t hi) { return hi << 32 | lo; }

/* Cut items into n shares (n >= 1) as the static schedule does; return 0
 * when items does not fit the packed ranges (then the caller must not use
 * the shares). */
static inline int ws_init(ws_share *s, int n, ptrdiff_t items) {
    if (items < 0 || (uint64_t)items >= ((uint64_t)1 << 32)) return 0;
    for (int t = 0; t < n; t++) {
        __atomic_store_n(&s[t].r,
                         ws_pack((uint64_t)(items * t / n), (uint64_t)(items * (t + 1) / n)),
                         __ATOMIC_RELAXED);
        __atomic_store_n(&s[t].state, 0, __ATOMIC_RELAXED);
        s[t].cur = s[t].end = 0;
    }
    return 1;
}

/* The share item i (< items) was first cut into. */
static inline int ws_owner(ptrdiff_t items, int n, ptrdiff_t i) {
    int v = (int)(i * n / items);
    while (v + 1 < n && items * (v + 1) / n <= i) v++;
    while (v > 0 && items * v / n > i) v--;
    return v;
}

/* Shares whose items need something made first (the channel-vector
 * kernel's copy of the input rows they read): 1 when the caller is to make
 * share v's (then it calls ws_prepared), 0 when that is done (it waits
 * while another thread makes it). Whichever thread first needs it makes
 * it, so no thread waits on one that has not begun. */
static inline int ws_prepare(ws_share *s, int v) {
    int st = __atomic_load_n(&s[v].state, __ATOMIC_ACQUIRE);
    if (st == 2) return 0;
    if (st == 0 && __atomic_compare_exchange_n(&s[v].state, &st, 1, 0, __ATOMIC_ACQ_REL,
                                               __ATOMIC_ACQUIRE))
        return 1;
    while (__atomic_load_n(&s[v].state, __ATOMIC_ACQUIRE) != 2) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
    }
    return 0;
}

/* Share v's preparation is done (see ws_prepare). */
static inline void ws_prepared(ws_share *s, int v) {
    __atomic_store_n(&s[v].state, 2, __ATOMIC_RELEASE);
}

/* The next item for thread t of the n shares, or -1 when every item has
 * been handed out. */
static inline ptrdiff_t ws_next(ws_share *s, int n, int t) {
    if (s[t].cur < s[t].end) return (ptrdiff_t)s[t].cur++; /* the claimed batch */
    uint64_t r = __atomic_load_n(&s[t].r, __ATOMIC_ACQUIRE);
    for (;;) { /* a batch from the front of the own share */
        uint32_t lo = (uint32_t)r, hi = (uint32_t)(r >> 32);
        if (lo >= hi) break;
        const uint32_t end = lo + 1u + (hi - lo) / WS_CLAIM_PART;
        if (__atomic_compare_exchange_n(&s[t].r, &r, ws_pack(end, hi), 0,
                                        __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
            s[t].cur = lo + 1u;
            s[t].end = end;
            return (ptrdiff_t)lo;
        }
    }
    for (;;) { /* the back half of the largest other share */
        int v = -1;
        uint32_t most = 0;
        uint64_t q = 0;
        for (int k = 1; k < n; k++) {
            const int u = (t + k) % n;
            const uint64_t w = __atomic_load_n(&s[u].r, __ATOMIC_ACQUIRE);
            const uint32_t lo = (uint32_t)w, hi = (uint32_t)(w >> 32);
            if (lo < hi && hi - lo > most) {
                most = hi - lo;
                v = u;
                q = w;
            }
        }
        if (v < 0) return -1;
        const uint32_t lo = (uint32_t)q, hi = (uint32_t)(q >> 32);
        const uint32_t mid = lo + (hi - lo) / 2; /* the victim keeps [lo, mid) */
        if (__atomic_compare_exchange_n(&s[v].r, &q, ws_pack(lo, mid), 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE)) {
            /* the own share is empty, so no other thread writes it */
            __atomic_store_n(&s[t].r, ws_pack(mid + 1u, hi), __ATOMIC_RELEASE);
            return (ptrdiff_t)mid;
        }
    }
}

/* Items not handed out (after the loop: those of shares that no thread
 * could walk, such as when every thread lacked a buffer it needed). */
static inline ptrdiff_t ws_left(ws_share *s, int n) {
    ptrdiff_t left = 0;
    for (int t = 0; t < n; t++) {
        const uint64_t r = __atomic_load_n(&s[t].r, __ATOMIC_ACQUIRE);
        const uint32_t lo = (uint32_t)r, hi = (uint32_t)(r >> 32);
        if (lo < hi) left += hi - lo;
    }
    return left;
}

/* Wait for every thread of the enclosing parallel region (an orphaned
 * barrier: Cython's prange inside a parallel block ends without one). */
static inline void ws_barrier(void) {
#ifdef _OPENMP
#pragma omp barrier
#endif
}

#endif
