/* Streaming read bandwidth: what "the DRAM roof" of a decode step means.
 *
 * inf_membw_buf_read reads a buffer far larger than the caches (at least
 * 1 GiB) with n_threads threads of one pool (the engine's inf_pool), each
 * chunk of 16 MiB front to back with the ISA level's read kernel
 * (inf_kernels.read_stream: AVX2 loads where the CPU has them, plain C
 * elsewhere, chosen at run time), and keeps the best of `passes` passes.
 * The buffer is anonymous memory asked for in 2 MiB pages (madvise
 * MADV_HUGEPAGE, where the OS allows it), written once by the pool before
 * the timed passes so every page is faulted in. GB/s are 1e9 bytes/s.
 *
 * The buffer is kept for every later read: bench reads the roof between
 * repetitions, and mapping, filling and freeing 1 GiB each time disturbed the
 * decode timed next (tg128 5-10 % slower on a 2-core VM). */
#ifndef INF_BACKEND_MEMBW_H
#define INF_BACKEND_MEMBW_H

#include <stddef.h>

#include "backend/cpu_features.h"
#include "util/err.h"

#define INF_MEMBW_MIN_BYTES ((size_t)1 << 30)

typedef struct inf_membw {
    double gbs;        /* best pass: bytes / seconds / 1e9 */
    size_t bytes;      /* buffer size */
    int n_threads;     /* threads that read */
    int passes;        /* timed passes the best was taken from */
    double huge_share; /* share of the buffer the OS gave in huge pages (0..1; -1 unknown) */
    inf_isa isa;       /* the level whose read kernel ran */
} inf_membw;

/* Maps and fills the buffer: bytes >= INF_MEMBW_MIN_BYTES (rounded down to a
 * multiple of 2 MiB), filled by fill_threads threads. Returns 0, or -1 with a
 * message (memory or threads the OS would not give). */
typedef struct inf_membw_buf inf_membw_buf;
int inf_membw_buf_open(inf_membw_buf **out, size_t bytes, int fill_threads, inf_err *err);
/* Measures into *out: n_threads >= 1, passes >= 1; isa is clamped to what the
 * CPU runs. A pool is kept for the next read at the same thread count.
 * Returns 0, or -1 with a message. */
int inf_membw_buf_read(inf_membw_buf *b, inf_membw *out, int n_threads, int passes, inf_isa isa,
                       inf_err *err);
void inf_membw_buf_close(inf_membw_buf *b); /* NULL is a no-op */

#endif
