/* Streaming read bandwidth (see membw.h). */
#include "backend/membw.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "backend/kernels.h"
#include "backend/pool.h"
#include "util/timer.h"

#define HUGE_PAGE ((size_t)2 << 20)
#define CHUNK ((size_t)16 << 20)

typedef struct membw_job {
    uint8_t *buf; /* [bytes], HUGE_PAGE aligned */
    size_t bytes;
    const inf_kernels *k;
    uint64_t sink[64]; /* one word per thread id (tids < 64 write; the rest fold into 63) */
} membw_job;

static void chunk_range(const membw_job *j, int c, int n, size_t *lo, size_t *hi) {
    *lo = j->bytes / (size_t)n * (size_t)c;
    *hi = c == n - 1 ? j->bytes : j->bytes / (size_t)n * (size_t)(c + 1);
}

static void fill_chunk(void *arg, int c, int n, int tid) {
    membw_job *j = arg;
    size_t lo, hi;
    chunk_range(j, c, n, &lo, &hi);
    memset(j->buf + lo, 0x5a ^ (c & 0xff), hi - lo); /* not the zero page: real frames */
}

static void read_chunk(void *arg, int c, int n, int tid) {
    membw_job *j = arg;
    size_t lo, hi;
    chunk_range(j, c, n, &lo, &hi);
    j->sink[tid < 64 ? tid : 63] ^= j->k->read_stream(j->buf + lo, hi - lo);
}

/* kB of AnonHugePages in /proc/self/smaps_rollup; -1 where there is none */
static long anon_huge_kb(void) {
    FILE *f = fopen("/proc/self/smaps_rollup", "r");
    if (!f) return -1;
    char line[256];
    long kb = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "AnonHugePages: %ld kB", &kb) == 1) break;
    fclose(f);
    return kb;
}

struct inf_membw_buf {
    uint8_t *map; /* [bytes + HUGE_PAGE], job.buf HUGE_PAGE aligned inside it */
    membw_job job;
    double huge_share;
    inf_pool *pool; /* the last read's, kept for the next at the same thread count */
};

int inf_membw_buf_open(inf_membw_buf **out, size_t bytes, int fill_threads, inf_err *err) {
    *out = NULL;
    if (bytes < INF_MEMBW_MIN_BYTES)
        return inf_fail(err,
                        "--membw: %zu bytes is less than the 1 GiB a read must cover to be "
                        "far larger than the caches",
                        bytes);
    bytes -= bytes % HUGE_PAGE; /* whole chunks of whole huge pages: a multiple of 128 too */
    inf_membw_buf *b = calloc(1, sizeof *b);
    if (!b) return inf_fail(err, "--membw: out of memory");
    b->job.bytes = bytes;
    long huge0 = anon_huge_kb();
    b->map = mmap(NULL, bytes + HUGE_PAGE, PROT_READ | PROT_WRITE,
                  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (b->map == MAP_FAILED) {
        free(b);
        return inf_fail(err, "--membw: cannot map %zu MiB: %s", bytes >> 20, strerror(errno));
    }
    b->job.buf = (uint8_t *)(((uintptr_t)b->map + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1));
#ifdef MADV_HUGEPAGE
    (void)madvise(b->job.buf, bytes, MADV_HUGEPAGE); /* a hint: EINVAL where THP is not built in */
#endif
    inf_pool *pool = inf_pool_create(fill_threads < 1 ? 1 : fill_threads);
    if (!pool) {
        inf_membw_buf_close(b);
        return inf_fail(err, "--membw: cannot start %d threads", fill_threads);
    }
    inf_pool_run(pool, fill_chunk, &b->job, (int)(bytes / CHUNK));
    b->pool = pool;
    long huge1 = anon_huge_kb();
    b->huge_share =
        huge0 >= 0 && huge1 >= 0 ? (double)(huge1 - huge0) * 1024.0 / (double)bytes : -1;
    if (b->huge_share > 1) b->huge_share = 1;
    if (b->huge_share < 0 && huge0 >= 0) b->huge_share = 0;
    *out = b;
    return 0;
}

int inf_membw_buf_read(inf_membw_buf *b, inf_membw *out, int n_threads, int passes, inf_isa isa,
                       inf_err *err) {
    memset(out, 0, sizeof *out);
    if (n_threads < 1 || passes < 1)
        return inf_fail(err, "--membw: threads (%d) and passes (%d) must be at least 1", n_threads,
                        passes);
    if (!b->pool || inf_pool_size(b->pool) != n_threads) {
        inf_pool_free(b->pool);
        b->pool = inf_pool_create(n_threads);
        if (!b->pool || (n_threads > 1 && inf_pool_size(b->pool) != n_threads))
            return inf_fail(err, "--membw: cannot start %d threads", n_threads);
    }
    b->job.k = inf_kernels_get(inf_isa_clamp(isa));
    memset(b->job.sink, 0, sizeof b->job.sink);
    const size_t bytes = b->job.bytes;
    double best = 0;
    for (int p = 0; p < passes; p++) {
        uint64_t t0 = inf_now_ns();
        inf_pool_run(b->pool, read_chunk, &b->job, (int)(bytes / CHUNK));
        double s = (double)(inf_now_ns() - t0) * 1e-9;
        if (s > 0 && (best == 0 || s < best)) best = s;
    }
    uint64_t sink = 0;
    for (int i = 0; i < 64; i++)
        sink ^= b->job.sink[i];
    __asm__ volatile("" : : "r"(sink) : "memory"); /* the reads have a use */
    *out = (inf_membw){.gbs = best > 0 ? (double)bytes / best / 1e9 : 0,
                       .bytes = bytes,
                       .n_threads = n_threads,
                       .passes = passes,
                       .huge_share = b->huge_share,
                       .isa = b->job.k->isa};
    return 0;
}

void inf_membw_buf_close(inf_membw_buf *b) {
    if (!b) return;
    inf_pool_free(b->pool);
    if (b->map && b->map != MAP_FAILED) munmap(b->map, b->job.bytes + HUGE_PAGE);
    free(b);
}
