/* Aligned allocation and whole-file access. */
#ifndef INF_UTIL_MEM_H
#define INF_UTIL_MEM_H

#include <stddef.h>

#include "util/err.h"

/* 64-byte aligned, zeroed; NULL on failure. Free with inf_free (NULL is a no-op). */
void *inf_alloc(size_t n);
void inf_free(void *p);

/* Fault injection, for tests of the out-of-memory paths: the next `count`
 * calls of inf_alloc that ask for at least `min_bytes` bytes return NULL, as
 * if the memory could not be had; smaller requests succeed and are not
 * counted. count <= 0 disarms. Off until armed; process-wide, and safe to
 * arm while other threads allocate. Only inf_alloc is affected (not malloc,
 * nor the mmap of packed weights). */
void inf_alloc_fail_next(int count, size_t min_bytes);

/* How many of the armed failures have not happened yet (0: all happened, or
 * disarmed). */
int inf_alloc_fail_pending(void);

/* A read-only mapping of a whole file. */
typedef struct inf_mmap {
    const unsigned char *data;
    size_t size;
    /* the file's identity when it was opened (a pack cache is valid for one
       version of a file): device, inode, last modification in ns */
    unsigned long long dev, ino;
    long long mtime_ns;
} inf_mmap;

/* Maps `path` read-only. On failure returns -1 with a message naming the path. */
int inf_mmap_open(inf_mmap *m, const char *path, inf_err *err);

/* Maps the pages of [p, p+n) inside m into the page table now
 * (MADV_POPULATE_READ; reading them from the page cache or the disk), so a
 * weight read in place does not fault page by page while it runs: a MoE
 * model touches a new expert's pages on most tokens. Best effort: on a
 * kernel without it, readahead is only asked for (MADV_WILLNEED). */
void inf_mmap_populate(const inf_mmap *m, const void *p, size_t n);
/* Hands the whole pages of [p, p + n) back to the page cache: they leave the
 * process's resident set and are read back from the file if touched again
 * (the mapping is read-only and private, so nothing is lost). A no-op for a
 * range outside m or for a mapping not made by inf_mmap_open. */
void inf_mmap_drop(const inf_mmap *m, const void *p, size_t n);
void inf_mmap_close(inf_mmap *m);

/* Reads a whole file into a NUL-terminated malloc'd buffer (caller frees).
 * Refuses files larger than `max_bytes`. */
int inf_read_file(char **out, size_t *len, const char *path, size_t max_bytes, inf_err *err);

/* Bytes of memory the system could give without swapping now (Linux's
 * MemAvailable), or 0 when it cannot say. */
size_t inf_mem_available(void);

#endif
