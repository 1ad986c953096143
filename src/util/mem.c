#include "util/mem.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* armed failures left, and the smallest request they apply to */
static _Atomic int fail_count;
static _Atomic size_t fail_min;

void inf_alloc_fail_next(int count, size_t min_bytes) {
    atomic_store(&fail_count, 0);
    atomic_store(&fail_min, min_bytes);
    atomic_store(&fail_count, count > 0 ? count : 0);
}

int inf_alloc_fail_pending(void) {
    return atomic_load(&fail_count);
}

/* Whether this request of n bytes is one the armed hook fails (and counts it). */
static int injected_failure(size_t n) {
    int left = atomic_load_explicit(&fail_count, memory_order_relaxed);
    if (left <= 0 || n < atomic_load(&fail_min)) return 0;
    while (left > 0)
        if (atomic_compare_exchange_weak(&fail_count, &left, left - 1)) return 1;
    return 0;
}

void *inf_alloc(size_t n) {
    void *p = NULL;
    if (injected_failure(n)) return NULL;
    if (n == 0) n = 1;
    size_t rounded = (n + 63) & ~(size_t)63;
    if (rounded < n || posix_memalign(&p, 64, rounded) != 0) return NULL;
    memset(p, 0, rounded);
    return p;
}

void inf_free(void *p) {
    free(p);
}

int inf_mmap_open(inf_mmap *m, const char *path, inf_err *err) {
    m->data = NULL;
    m->size = 0;
    /* O_NONBLOCK: opening a FIFO in a model's place must not wait for a writer */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return inf_fail(err, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return inf_fail(err, "%s: not a regular file", path);
    }
    if (st.st_size == 0) {
        close(fd);
        return inf_fail(err, "%s: file is empty", path);
    }
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (p == MAP_FAILED) return inf_fail(err, "%s: mmap failed: %s", path, strerror(errno));
    m->data = p;
    m->size = (size_t)st.st_size;
    m->dev = (unsigned long long)st.st_dev;
    m->ino = (unsigned long long)st.st_ino;
    m->mtime_ns = (long long)st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec;
    return 0;
}

void inf_mmap_drop(const inf_mmap *m, const void *p, size_t n) {
    const unsigned char *b = p;
    if (!m || !m->data || b < m->data || n > m->size || (size_t)(b - m->data) > m->size - n) return;
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t lo = ((uintptr_t)b + page - 1) & ~(page - 1), hi = ((uintptr_t)b + n) & ~(page - 1);
    if (hi > lo) madvise((void *)lo, hi - lo, MADV_DONTNEED);
}

void inf_mmap_populate(const inf_mmap *m, const void *p, size_t n) {
    const unsigned char *b = p;
    if (!m || !m->data || b < m->data || n > m->size || (size_t)(b - m->data) > m->size - n) return;
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t lo = (uintptr_t)b & ~(page - 1), hi = (uintptr_t)b + n;
    if (hi <= lo) return;
#ifdef MADV_POPULATE_READ
    if (madvise((void *)lo, hi - lo, MADV_POPULATE_READ) == 0) return;
#endif
    madvise((void *)lo, hi - lo, MADV_WILLNEED);
}

void inf_mmap_close(inf_mmap *m) {
    if (m && m->data) munmap((void *)m->data, m->size);
    if (m) {
        m->data = NULL;
        m->size = 0;
    }
}

int inf_read_file(char **out, size_t *len, const char *path, size_t max_bytes, inf_err *err) {
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* a FIFO must not block */
    if (fd < 0) return inf_fail(err, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return inf_fail(err, "%s: not a regular file", path);
    }
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        close(fd);
        return inf_fail(err, "%s: cannot open: %s", path, strerror(errno));
    }
    if (fseek(f, 0, SEEK_END) != 0) {
        fclose(f);
        return inf_fail(err, "%s: cannot seek", path);
    }
    long n = ftell(f);
    if (n < 0 || (size_t)n > max_bytes) {
        fclose(f);
        return inf_fail(err, "%s: size %ld is over the limit of %zu bytes", path, n, max_bytes);
    }
    rewind(f);
    char *buf = malloc((size_t)n + 1);
    if (!buf) {
        fclose(f);
        return inf_fail(err, "%s: out of memory reading %ld bytes", path, n);
    }
    if (fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        fclose(f);
        return inf_fail(err, "%s: short read", path);
    }
    fclose(f);
    buf[n] = 0;
    *out = buf;
    if (len) *len = (size_t)n;
    return 0;
}

static size_t meminfo(const char *field) {
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return 0;
    char line[256];
    const size_t n = strlen(field);
    unsigned long long kib = 0;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, field, n) && line[n] == ':' &&
            sscanf(line + n + 1, " %llu kB", &kib) == 1)
            break;
    fclose(f);
    return (size_t)kib * 1024;
}

size_t inf_mem_available(void) {
    return meminfo("MemAvailable");
}
