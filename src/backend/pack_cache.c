/* The pack cache (pack_cache.h): the file, its mapping, its entries. */
#include "backend/pack_cache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>
/* xxhash's header-only form: XXH3_state_t on the stack, and no library to
   link where the backend is built alone (tests/oracle/check_neon.sh) */
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "backend/arena.h"
#include "util/mem.h"

#define MAGIC "INFPACK1"
#define HEAD_BYTES ((size_t)4096)
#define ALIGN ((size_t)4096)
#define HUGE_PAGE ((size_t)2 << 20)
#define GROW ((size_t)256 << 20) /* the file grows by this much at a time */

typedef struct pc_header {
    char magic[8];
    uint64_t hash;      /* XXH3 of the entries and the identity */
    uint64_t n_entries; /* entries at table_off */
    uint64_t table_off;
    uint64_t ident_off, ident_len;
    uint64_t file_size;
    uint64_t entry_bytes; /* sizeof(pc_entry) when written */
} pc_header;

typedef struct pc_entry {
    uint64_t file, offset; /* the weight's inf_weight.src_file, src_offset */
    uint64_t type, n_in, n_out;
    uint64_t kind, group, n_panels, n_groups, group_bytes;
    uint64_t data_off, bytes; /* its panels, in this file */
    uint64_t hash;            /* inf_pack_cache_hash of them */
} pc_entry;

struct inf_pack_cache {
    char *path, *tmp; /* tmp: the file being written (write mode), NULL once renamed */
    char *ident;
    bool writing, finished, damaged, failed;
    char why[256]; /* write mode: why the file stopped growing */
    int fd;
    uint8_t *base;          /* the mapping: read mode the whole file, write mode a reservation */
    size_t reserved;        /* write mode: bytes of address space at base */
    size_t mapped;          /* bytes of the file mapped at base */
    size_t used;            /* write mode: end of the panels written */
    inf_arena_chunk *chunk; /* the mapping, shared with the weights that point into it */
    pc_entry *entries;      /* read mode: into the mapping; write mode: malloc'd */
    int64_t n_entries, cap;
    bool pending; /* write mode: entries[n_entries] reserved, not yet committed */
    int64_t n_used;
    size_t bytes_used;
};

uint64_t inf_pack_hash_piece(const uint8_t *data, size_t n) {
    return XXH3_64bits(data, n);
}

uint64_t inf_pack_hash_combine(const uint64_t *h, size_t n) {
    return XXH3_64bits(h, n * sizeof *h);
}

uint64_t inf_pack_hash(const uint8_t *data, size_t n) {
    XXH3_state_t s;
    XXH3_INITSTATE(&s);
    XXH3_64bits_reset(&s);
    for (size_t at = 0; at < n; at += INF_PACK_HASH_PIECE) {
        const uint64_t h =
            XXH3_64bits(data + at, n - at < INF_PACK_HASH_PIECE ? n - at : INF_PACK_HASH_PIECE);
        XXH3_64bits_update(&s, &h, sizeof h);
    }
    return XXH3_64bits_digest(&s);
}

static int cmp_entry(const void *a, const void *b) {
    const pc_entry *x = a, *y = b;
    if (x->file != y->file) return x->file < y->file ? -1 : 1;
    if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
    return x->kind < y->kind ? -1 : x->kind > y->kind;
}

static uint64_t table_hash(const pc_entry *e, uint64_t n, const char *ident, size_t len) {
    XXH3_state_t s;
    XXH3_INITSTATE(&s);
    XXH3_64bits_reset(&s);
    XXH3_64bits_update(&s, e, (size_t)n * sizeof *e);
    XXH3_64bits_update(&s, ident, len);
    return XXH3_64bits_digest(&s);
}

/* n bytes of address space at a huge-page boundary, reserved (PROT_NONE), or NULL */
static uint8_t *reserve_space(size_t n) {
    uint8_t *p =
        mmap(NULL, n + HUGE_PAGE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return NULL;
    const size_t head = (HUGE_PAGE - ((uintptr_t)p & (HUGE_PAGE - 1))) & (HUGE_PAGE - 1);
    if (head) munmap(p, head);
    munmap(p + head + n, HUGE_PAGE - head);
    return p + head;
}

/* Maps file bytes [off, off + n) at base + off (a file offset and its address
 * agree modulo 2 MiB, so the page cache's large folios map as huge pages). */
static int map_at(inf_pack_cache *pc, size_t off, size_t n, int prot) {
    void *p = mmap(pc->base + off, n, prot, MAP_SHARED | MAP_FIXED, pc->fd, (off_t)off);
    if (p == MAP_FAILED) return -1;
#ifdef MADV_HUGEPAGE
    (void)madvise(p, n, MADV_HUGEPAGE); /* a hint: decode streams these pages */
#endif
    return 0;
}

/* Read mode when path holds a whole cache for ident; 0 if it does, -1 if not
 * (nothing kept open). */
static int open_read(inf_pack_cache *pc) {
    int fd = open(pc->path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return -1;
    struct stat st;
    pc_header h;
    const size_t size = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? (size_t)st.st_size : 0;
    if (size < HEAD_BYTES || pread(fd, &h, sizeof h, 0) != (ssize_t)sizeof h ||
        memcmp(h.magic, MAGIC, 8) || h.file_size != size || h.entry_bytes != sizeof(pc_entry) ||
        h.ident_len != strlen(pc->ident) || h.table_off < HEAD_BYTES || h.table_off > size ||
        h.n_entries > (size - h.table_off) / sizeof(pc_entry) || h.ident_off > size ||
        h.ident_len > size - h.ident_off ||
        h.ident_off < h.table_off + h.n_entries * sizeof(pc_entry)) {
        close(fd);
        return -1;
    }
    pc->fd = fd;
    pc->base = reserve_space(size);
    if (!pc->base || map_at(pc, 0, size, PROT_READ)) {
        if (pc->base) munmap(pc->base, size);
        pc->base = NULL;
        close(fd);
        pc->fd = -1;
        return -1;
    }
    pc->mapped = size;
    const pc_entry *e = (const pc_entry *)(pc->base + h.table_off);
    bool ok = !memcmp(pc->base + h.ident_off, pc->ident, h.ident_len) &&
              table_hash(e, h.n_entries, pc->ident, h.ident_len) == h.hash;
    for (uint64_t i = 0; ok && i < h.n_entries; i++)
        ok = e[i].data_off >= HEAD_BYTES && e[i].data_off % ALIGN == 0 &&
             e[i].data_off <= h.table_off && e[i].bytes <= h.table_off - e[i].data_off &&
             (i == 0 || cmp_entry(&e[i - 1], &e[i]) < 0);
    if (!ok) {
        munmap(pc->base, size);
        pc->base = NULL;
        pc->mapped = 0;
        close(fd);
        pc->fd = -1;
        return -1;
    }
    pc->entries = (pc_entry *)e;
    pc->n_entries = (int64_t)h.n_entries;
    return 0;
}

static int open_write(inf_pack_cache *pc, size_t expect, double keep_share, size_t max_bytes,
                      inf_err *err) {
    char *dir_copy = strdup(pc->path);
    if (!dir_copy) return inf_fail(err, "out of memory");
    struct statvfs vfs;
    const int vrc = statvfs(dirname(dir_copy), &vfs);
    free(dir_copy);
    const double free_bytes = (double)vfs.f_bavail * (double)vfs.f_frsize,
                 keep = keep_share * (double)vfs.f_blocks * (double)vfs.f_frsize + (1 << 30);
    if (vrc == 0 && free_bytes < (double)expect + keep)
        return inf_fail(err,
                        "%s: the file system has %.1f GiB free; the packed weights take %.1f GiB, "
                        "and %.1f GiB is to stay free",
                        pc->path, free_bytes / (1 << 30), (double)expect / (1 << 30),
                        keep / (1 << 30));
    size_t n = strlen(pc->path) + 32;
    pc->tmp = malloc(n);
    if (!pc->tmp) return inf_fail(err, "out of memory");
    snprintf(pc->tmp, n, "%s.tmp.%ld", pc->path, (long)getpid());
    pc->fd = open(pc->tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (pc->fd < 0) {
        inf_fail(err, "%s: cannot create: %s", pc->tmp, strerror(errno));
        free(pc->tmp);
        pc->tmp = NULL;
        return -1;
    }
    pc->reserved = (max_bytes + HEAD_BYTES + GROW - 1) / GROW * GROW;
    pc->base = reserve_space(pc->reserved);
    if (!pc->base) return inf_fail(err, "%s: no address space for %zu bytes", pc->tmp, max_bytes);
    pc->used = HEAD_BYTES;
    pc->writing = true;
    return 0;
}

int inf_pack_cache_open(inf_pack_cache **out, const char *path, const char *ident,
                        size_t expect_bytes, double keep_share, size_t max_bytes, inf_err *err) {
    *out = NULL;
    inf_pack_cache *pc = calloc(1, sizeof *pc);
    if (!pc) return inf_fail(err, "out of memory");
    pc->fd = -1;
    pc->path = strdup(path);
    pc->ident = strdup(ident);
    if (!pc->path || !pc->ident) {
        inf_pack_cache_close(pc);
        return inf_fail(err, "out of memory");
    }
    if (open_read(pc) && open_write(pc, expect_bytes, keep_share, max_bytes, err)) {
        inf_pack_cache_close(pc);
        return -1;
    }
    pc->chunk = inf_arena_adopt(pc->base, pc->writing ? pc->reserved : pc->mapped);
    if (!pc->chunk) {
        inf_pack_cache_close(pc);
        return inf_fail(err, "out of memory");
    }
    *out = pc;
    return 0;
}

bool inf_pack_cache_writing(const inf_pack_cache *pc) {
    return pc->writing;
}

const char *inf_pack_cache_path(const inf_pack_cache *pc) {
    return pc->path;
}

bool inf_pack_cache_find(inf_pack_cache *pc, const inf_weight *w, inf_packed *p, uint64_t *hash) {
    if (pc->writing || !w->src_file) return false;
    const pc_entry key = {.file = (uint64_t)w->src_file, .offset = w->src_offset, .kind = p->kind};
    const pc_entry *e = bsearch(&key, pc->entries, (size_t)pc->n_entries, sizeof key, cmp_entry);
    if (!e || e->type != (uint64_t)w->t->type || e->n_in != (uint64_t)w->n_in ||
        e->n_out != (uint64_t)w->n_out || e->group != (uint64_t)p->group ||
        e->n_panels != (uint64_t)p->n_panels || e->n_groups != (uint64_t)p->n_groups ||
        e->group_bytes != p->group_bytes || e->bytes != inf_packed_bytes(p))
        return false;
    p->data = pc->base + e->data_off;
    *hash = e->hash;
    return true;
}

void inf_pack_cache_claim(inf_pack_cache *pc, inf_packed *p) {
    inf_arena_retain(pc->chunk);
    p->chunk = pc->chunk;
    pc->n_used++;
    pc->bytes_used += inf_packed_bytes(p);
}

void inf_pack_cache_damaged(inf_pack_cache *pc) {
    pc->damaged = true;
}

static int stop_growing(inf_pack_cache *pc, const char *fmt, const char *what) {
    pc->failed = true;
    snprintf(pc->why, sizeof pc->why, fmt, what);
    return -1;
}

int inf_pack_cache_reserve(inf_pack_cache *pc, const inf_weight *w, inf_packed *p) {
    if (!pc->writing || pc->failed || pc->finished || !w->src_file) return -1;
    INF_ASSERT(!pc->pending);
    const size_t n = inf_packed_bytes(p);
    const size_t at = (pc->used + ALIGN - 1) & ~(ALIGN - 1);
    if (n > pc->reserved - at) return stop_growing(pc, "%s", "more panels than were expected");
    while (at + n > pc->mapped) {
        /* blocks allocated before a page is written: a full disk is an error
           here, never a SIGBUS when the page is written back */
        const int rc = posix_fallocate(pc->fd, (off_t)pc->mapped, (off_t)GROW);
        if (rc) return stop_growing(pc, "%s", strerror(rc));
        if (map_at(pc, pc->mapped, GROW, PROT_READ | PROT_WRITE))
            return stop_growing(pc, "mmap failed: %s", strerror(errno));
        pc->mapped += GROW;
    }
    if (pc->n_entries == pc->cap) {
        int64_t cap = pc->cap ? 2 * pc->cap : 1024;
        pc_entry *e = realloc(pc->entries, (size_t)cap * sizeof *e);
        if (!e) return stop_growing(pc, "%s", "out of memory for its table");
        pc->entries = e;
        pc->cap = cap;
    }
    pc->entries[pc->n_entries] = (pc_entry){.file = (uint64_t)w->src_file,
                                            .offset = w->src_offset,
                                            .type = (uint64_t)w->t->type,
                                            .n_in = (uint64_t)w->n_in,
                                            .n_out = (uint64_t)w->n_out,
                                            .kind = (uint64_t)p->kind,
                                            .group = (uint64_t)p->group,
                                            .n_panels = (uint64_t)p->n_panels,
                                            .n_groups = (uint64_t)p->n_groups,
                                            .group_bytes = p->group_bytes,
                                            .data_off = at,
                                            .bytes = n};
    pc->pending = true;
    pc->used = at + n;
    p->data = pc->base + at;
    inf_pack_cache_claim(pc, p);
    return 0;
}

void inf_pack_cache_commit(inf_pack_cache *pc, uint64_t hash) {
    INF_ASSERT(pc->pending);
    pc->entries[pc->n_entries++].hash = hash;
    pc->pending = false;
}

static int write_all(int fd, const void *p, size_t n, size_t off) {
    for (const uint8_t *b = p; n;) {
        ssize_t k = pwrite(fd, b, n, (off_t)off);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return -1;
        b += k;
        n -= (size_t)k;
        off += (size_t)k;
    }
    return 0;
}

static int finish_write(inf_pack_cache *pc, inf_err *err) {
    if (pc->failed)
        return inf_fail(err, "%s: the pack cache could not be written (%s)", pc->path, pc->why);
    INF_ASSERT(!pc->pending);
    if (!pc->n_entries) return 0; /* nothing was packed: no cache (the file is removed) */
    qsort(pc->entries, (size_t)pc->n_entries, sizeof *pc->entries, cmp_entry);
    for (int64_t i = 1; i < pc->n_entries; i++)
        if (!cmp_entry(&pc->entries[i - 1], &pc->entries[i]))
            return inf_fail(err, "%s: two weights share bytes of the model file; not cached",
                            pc->path);
    pc_header h = {.n_entries = (uint64_t)pc->n_entries, .entry_bytes = sizeof(pc_entry)};
    memcpy(h.magic, MAGIC, 8);
    h.table_off = (pc->used + ALIGN - 1) & ~(ALIGN - 1);
    h.ident_off = h.table_off + h.n_entries * sizeof(pc_entry);
    h.ident_len = strlen(pc->ident);
    h.file_size = h.ident_off + h.ident_len;
    h.hash = table_hash(pc->entries, h.n_entries, pc->ident, h.ident_len);
    /* the panels read-only from now on; the file shrinks to what it holds */
    if (pc->used > HEAD_BYTES) mprotect(pc->base, pc->mapped, PROT_READ);
    const char *what = NULL;
    if (write_all(pc->fd, pc->entries, (size_t)h.n_entries * sizeof(pc_entry), h.table_off) ||
        write_all(pc->fd, pc->ident, h.ident_len, h.ident_off))
        what = "write";
    else if (ftruncate(pc->fd, (off_t)h.file_size))
        what = "truncate";
    else if (write_all(pc->fd, &h, sizeof h, 0))
        what = "write";
    else if (rename(pc->tmp, pc->path))
        what = "rename";
    if (what)
        return inf_fail(err, "%s: the pack cache could not be written (%s: %s)", pc->path, what,
                        strerror(errno));
    /* Not synced: the kernel writes it back behind the run (a sync here cost
       the first load seconds of disk time). What a crash can leave (blocks
       never written read as zeros) fails the header, the table's hash or an
       entry's hash, and is packed and written again. */
    free(pc->tmp);
    pc->tmp = NULL;
    return 0;
}

int inf_pack_cache_finish(inf_pack_cache *pc, inf_err *err) {
    if (pc->finished) return 0;
    pc->finished = true;
    if (pc->writing) return finish_write(pc, err);
    if (pc->damaged) {
        unlink(pc->path);
        return inf_fail(err,
                        "%s: the pack cache did not match its hashes (those weights were packed "
                        "again); removed, the next load writes it anew",
                        pc->path);
    }
    return 0;
}

/* The identity text of the cache at path (malloc'd), or NULL when path is
 * not a whole cache. */
static char *read_ident(const char *path) {
    /* O_NONBLOCK: a FIFO named *.pack must not hang the load */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return NULL;
    pc_header h;
    struct stat st;
    char *ident = NULL;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
        pread(fd, &h, sizeof h, 0) == (ssize_t)sizeof h && !memcmp(h.magic, MAGIC, 8) &&
        h.file_size == (uint64_t)st.st_size && h.ident_off <= h.file_size &&
        h.ident_len <= h.file_size - h.ident_off && h.ident_len < (1 << 20) &&
        (ident = malloc(h.ident_len + 1)) != NULL) {
        if (pread(fd, ident, h.ident_len, (off_t)h.ident_off) == (ssize_t)h.ident_len) {
            ident[h.ident_len] = 0;
        } else {
            free(ident);
            ident = NULL;
        }
    }
    close(fd);
    return ident;
}

void inf_pack_cache_sweep(const char *dir, bool (*stale)(const char *ident, void *arg), void *arg) {
    DIR *d = opendir(dir);
    if (!d) return;
    char path[4096];
    for (struct dirent *de; (de = readdir(d)) != NULL;) {
        const char *name = de->d_name, *tmp = strstr(name, ".pack.tmp.");
        const size_t len = strlen(name);
        if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path) continue;
        if (tmp) {
            /* a writer's file: gone with its writer (pid reused: kept) */
            char *end;
            const long pid = strtol(tmp + 10, &end, 10);
            if (pid > 0 && pid <= INT_MAX && !*end && kill((pid_t)pid, 0) && errno == ESRCH)
                unlink(path);
        } else if (len > 5 && !strcmp(name + len - 5, ".pack")) {
            char *ident = read_ident(path);
            if (ident && stale(ident, arg)) unlink(path);
            free(ident);
        }
    }
    closedir(d);
}

void inf_pack_cache_stats(const inf_pack_cache *pc, int64_t *n_weights, size_t *bytes) {
    *n_weights = pc->n_used;
    *bytes = pc->bytes_used;
}

void inf_pack_cache_close(inf_pack_cache *pc) {
    if (!pc) return;
    if (pc->tmp) unlink(pc->tmp);
    if (pc->writing) free(pc->entries);
    if (pc->chunk)
        inf_arena_release(pc->chunk); /* unmapped with the last weight that uses it */
    else if (pc->base)
        munmap(pc->base, pc->writing ? pc->reserved : pc->mapped);
    if (pc->fd >= 0) close(pc->fd);
    free(pc->tmp);
    free(pc->path);
    free(pc->ident);
    free(pc);
}
