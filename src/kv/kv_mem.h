/* Zeroed memory for K/V rows, mapped lazily: anonymous pages are zero and
 * only become resident when written, so a cache sized for a long context
 * costs what is used (and opening it touches nothing). kv_mem_map returns
 * MAP_FAILED when the memory cannot be had. Internal to kv/. */
#ifndef INF_KV_KV_MEM_H
#define INF_KV_KV_MEM_H

#include <stddef.h>
#include <stdlib.h>
#include <sys/mman.h>

/* Sanitizer builds take the heap instead, where reads past the rows are caught. */
#if defined(__SANITIZE_ADDRESS__)
#define KV_POOL_HEAP 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KV_POOL_HEAP 1
#endif
#endif

/* Mappings of at least this many bytes ask for 2 MiB huge pages (THP
 * "madvise" mode; a hint, ignored where THP is off). Decode attention reads
 * one head's rows a cache row apart: with 4 KiB pages a 64-key tile of a
 * 1024-wide f16 row spans 64 pages and the walk is bound by TLB misses
 * (measured: PERFORMANCE.md, session 8). Residency then grows in 2 MiB steps
 * per layer's K or V run, which only matters for small caches, left alone. */
#define KV_MEM_HUGE_MIN ((size_t)64 << 20)

static inline void *kv_mem_map(size_t bytes) {
#ifdef KV_POOL_HEAP
    void *p = calloc(1, bytes);
    return p ? p : MAP_FAILED;
#else
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
#ifdef MADV_HUGEPAGE
    if (p != MAP_FAILED && bytes >= KV_MEM_HUGE_MIN) (void)madvise(p, bytes, MADV_HUGEPAGE);
#endif
    return p;
#endif
}

static inline void kv_mem_unmap(void *p, size_t bytes) {
#ifdef KV_POOL_HEAP
    (void)bytes;
    free(p);
#else
    munmap(p, bytes);
#endif
}

#endif
