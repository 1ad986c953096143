/* The packed-weight arena (arena.h): bump allocation in reference-counted,
 * huge-page-aligned chunks. */
#include "backend/arena.h"

#include <pthread.h>
#include <stdint.h>
#include <sys/mman.h>

#include "util/mem.h"

#define HUGE_PAGE ((size_t)2 << 20)
/* Big enough that a chunk's partly used last huge page (at most 2 MiB per
 * chunk) costs little: the 48-layer 30B-A3B's 20 GB of panels take about 80. */
#define CHUNK_BYTES ((size_t)256 << 20)
#define ALIGN 4096

struct inf_arena_chunk {
    uint8_t *base;
    size_t size, used; /* bytes mapped at base; bytes handed out */
    int refs;          /* copies not yet released */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static inf_arena_chunk *current; /* the chunk new copies are cut from; NULL: none */
static int n_chunks;

/* A chunk of at least n bytes at a huge-page boundary (THP maps only whole
 * aligned huge pages), or NULL. */
static inf_arena_chunk *chunk_new(size_t n) {
    const size_t size = (n + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
    if (size < n) return NULL;
    inf_arena_chunk *c = inf_alloc(sizeof *c);
    if (!c) return NULL;
    uint8_t *p =
        mmap(NULL, size + HUGE_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        inf_free(c);
        return NULL;
    }
    const size_t head = (HUGE_PAGE - ((uintptr_t)p & (HUGE_PAGE - 1))) & (HUGE_PAGE - 1);
    if (head) munmap(p, head);
    if (HUGE_PAGE - head) munmap(p + head + size, HUGE_PAGE - head);
    c->base = p + head;
    c->size = size;
#ifdef MADV_HUGEPAGE
    /* a hint: EINVAL where THP is not built in; decode streams these pages, and
       the prefetchers stop at every 4 KiB boundary otherwise (6 -> 10 GB/s) */
    (void)madvise(c->base, size, MADV_HUGEPAGE);
#endif
    n_chunks++;
    return c;
}

static void chunk_free(inf_arena_chunk *c) {
    munmap(c->base, c->size);
    inf_free(c);
    n_chunks--;
}

void *inf_arena_alloc(size_t n, inf_arena_chunk **chunk) {
    *chunk = NULL;
    const size_t need = (n + ALIGN - 1) & ~(size_t)(ALIGN - 1);
    if (n == 0 || need < n) return NULL;
    pthread_mutex_lock(&lock);
    inf_arena_chunk *c = current;
    if (!c || c->size - c->used < need) {
        if (need > CHUNK_BYTES / 4) {
            c = chunk_new(need); /* a large copy: a chunk of its own, the current one kept */
        } else {
            c = chunk_new(CHUNK_BYTES);
            /* the old chunk's tail is left unused (never touched, so never
               resident); the chunk goes with its last copy */
            if (c) current = c;
        }
    }
    void *p = NULL;
    if (c) {
        p = c->base + c->used;
        c->used += need;
        c->refs++;
        *chunk = c;
    }
    pthread_mutex_unlock(&lock);
    return p;
}

void inf_arena_release(inf_arena_chunk *c) {
    if (!c) return;
    pthread_mutex_lock(&lock);
    if (--c->refs == 0) {
        if (c == current) current = NULL;
        chunk_free(c);
    }
    pthread_mutex_unlock(&lock);
}

inf_arena_chunk *inf_arena_adopt(void *base, size_t size) {
    inf_arena_chunk *c = inf_alloc(sizeof *c);
    if (!c) return NULL;
    *c = (inf_arena_chunk){.base = base, .size = size, .used = size, .refs = 1};
    pthread_mutex_lock(&lock);
    n_chunks++;
    pthread_mutex_unlock(&lock);
    return c;
}

void inf_arena_retain(inf_arena_chunk *c) {
    if (!c) return;
    pthread_mutex_lock(&lock);
    c->refs++;
    pthread_mutex_unlock(&lock);
}

int inf_arena_chunks(void) {
    pthread_mutex_lock(&lock);
    const int n = n_chunks;
    pthread_mutex_unlock(&lock);
    return n;
}
