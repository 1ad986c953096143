/* When and where an engine keeps its packed weights in a file (engine_pack.h). */
#include "runtime/engine_pack.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <xxhash.h>

#include "backend/select.h"

#define GiB(x) ((double)(x) / (1 << 30))

int inf_pack_mode_parse(inf_pack_mode *out, const char *v, const char *flag, inf_err *err) {
    static const char *const names[] = {"auto", "on", "off"};
    for (int i = 0; i < 3; i++)
        if (!strcmp(v, names[i])) {
            *out = (inf_pack_mode)i;
            return 0;
        }
    return inf_fail(err, "%s: unknown mode '%s' (expected auto, on or off)", flag, v);
}

/* Creates dir and its parents (mode 0755); -1 with errno set. */
static int mkdir_p(char *dir) {
    for (char *s = dir + 1; *s; s++) {
        if (*s != '/') continue;
        *s = 0;
        int rc = mkdir(dir, 0755);
        *s = '/';
        if (rc && errno != EEXIST) return -1;
    }
    return mkdir(dir, 0755) && errno != EEXIST ? -1 : 0;
}

/* The cache directory: dir, else the environment's (engine_pack.h); -1 when
 * there is none (no HOME). */
static int cache_dir(char *out, size_t cap, const char *dir) {
    const char *env = getenv("INFERNO_CACHE_DIR"), *xdg = getenv("XDG_CACHE_HOME"),
               *home = getenv("HOME");
    int n;
    if (dir && dir[0])
        n = snprintf(out, cap, "%s", dir);
    else if (env && env[0])
        n = snprintf(out, cap, "%s", env);
    else if (xdg && xdg[0] == '/')
        n = snprintf(out, cap, "%s/inferno", xdg);
    else if (home && home[0])
        n = snprintf(out, cap, "%s/.cache/inferno", home);
    else
        return -1;
    return n > 0 && (size_t)n < cap ? 0 : -1;
}

/* One line of an identity, "PATH SIZE DEV INO MTIME" (inf_model_file_ident):
 * the path's end (a path may hold spaces: the four numbers are the last
 * fields), or NULL when the line is not of that form. */
static const char *ident_path_end(const char *line, const char *eol) {
    const char *s = eol;
    for (int k = 0; k < 4; k++) {
        while (s > line && s[-1] != ' ')
            s--;
        if (s == line) return NULL;
        s--;
    }
    return s;
}

typedef struct sweep_arg {
    const char *path; /* this model's first file */
    size_t path_len;
    const char *layout; /* this backend's packing layout */
} sweep_arg;

/* A cache no load can use again: one of its model files is gone or was
 * replaced, or it holds this model file's panels in an older layout of this
 * level (a build whose packers changed). */
static bool cache_stale(const char *ident, void *arg) {
    const sweep_arg *a = arg;
    const char *layout = NULL, *first = NULL;
    size_t first_len = 0;
    for (const char *line = ident; *line;) {
        const char *eol = strchr(line, '\n');
        if (!eol) eol = line + strlen(line);
        if (!strncmp(line, "layout ", 7)) {
            layout = line + 7;
        } else {
            const char *pe = ident_path_end(line, eol);
            char file[4096];
            unsigned long long size, dev, ino;
            long long mtime;
            struct stat st;
            if (!pe || (size_t)(pe - line) >= sizeof file ||
                sscanf(pe, " %llu %llu %llu %lld", &size, &dev, &ino, &mtime) != 4)
                return false; /* not an identity this build writes: leave it */
            memcpy(file, line, (size_t)(pe - line));
            file[pe - line] = 0;
            if (!first) first = line, first_len = (size_t)(pe - line);
            if (stat(file, &st)) return errno == ENOENT || errno == ENOTDIR;
            if ((unsigned long long)st.st_size != size || (unsigned long long)st.st_dev != dev ||
                (unsigned long long)st.st_ino != ino ||
                (long long)st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec != mtime)
                return true;
        }
        line = *eol ? eol + 1 : eol;
    }
    if (!layout || !first || first_len != a->path_len || memcmp(first, a->path, first_len))
        return false;
    const char *level_end = strchr(a->layout, '-');
    const size_t level_len = level_end ? (size_t)(level_end - a->layout) : strlen(a->layout);
    const size_t n = strcspn(layout, "\n");
    return !strncmp(layout, a->layout, level_len) && layout[level_len] == '-' &&
           (n != strlen(a->layout) || strncmp(layout, a->layout, n));
}

int engine_pack_open(inf_pack_cache **out, const inf_model_file *mf, const inf_backend *be,
                     inf_pack_mode mode, const char *dir, char *note, size_t cap, inf_err *err) {
    *out = NULL;
    note[0] = 0;
    const char *layout = inf_backend_pack_layout(be);
    if (mode == INF_PACK_OFF || !layout) return 0; /* the scalar backend packs nothing */
    char *ident = malloc(1 << 16);
    if (!ident) return inf_fail(err, "out of memory");
    size_t bytes = 0;
    int len = inf_model_file_ident(mf, ident, (1 << 16) - 128, &bytes);
    char path[4096], why[600] = "";
    int rc = 0;
    if (len < 0) {
        snprintf(why, sizeof why, "%s: its files' paths cannot be resolved", mf->path);
    } else if (cache_dir(path, sizeof path - 300, dir)) {
        snprintf(why, sizeof why, "no cache directory (give --pack-cache-dir, or set HOME)");
    } else if (mkdir_p(path)) {
        snprintf(why, sizeof why, "%s: cannot create: %s", path, strerror(errno));
    } else {
        snprintf(ident + len, (1 << 16) - (size_t)len, "layout %s\n", layout);
        /* named by the first file's path and the layout: the identity's other
           parts (size, inode, time) change when the file is replaced, and the
           new cache then takes the old one's place */
        const char *first = ident, *end = ident_path_end(ident, strchr(ident, '\n'));
        if (!end) end = strchr(ident, ' ');
        const char *slash = first;
        for (const char *s = first; s < end; s++)
            if (*s == '/') slash = s + 1;
        XXH64_hash_t h = XXH64(first, (size_t)(end - first), 0) ^ XXH64(layout, strlen(layout), 1);
        const size_t dl = strlen(path);
        const sweep_arg sa = {first, (size_t)(end - first), layout};
        inf_pack_cache_sweep(path, cache_stale, (void *)&sa);
        snprintf(path + dl, sizeof path - dl, "/%.*s-%016llx.pack",
                 (int)(end - slash < 200 ? end - slash : 200), slash, (unsigned long long)h);
        inf_err e;
        if (inf_pack_cache_open(out, path, ident, bytes, mode == INF_PACK_AUTO ? 0.05 : 0,
                                4 * bytes + (64 << 20), &e))
            snprintf(why, sizeof why, "%s", e.msg);
        else if (inf_pack_cache_writing(*out))
            snprintf(note, cap,
                     "packing the weights once into %s (%.1f GiB); later loads map them "
                     "from there (--pack-cache off: pack in memory at every load)",
                     path, GiB(bytes));
    }
    if (why[0]) {
        if (mode == INF_PACK_ON)
            rc = inf_fail(err, "--pack-cache on: %s", why);
        else
            snprintf(note, cap,
                     "the packed weights are kept in memory, not in a pack cache (%s): each "
                     "load packs them again",
                     why);
    }
    free(ident);
    return rc;
}

void engine_pack_close(inf_pack_cache *pc, inf_pack_mode mode, bool ok, char *note, size_t cap) {
    if (!pc) return;
    if (!ok) {
        inf_pack_cache_close(pc);
        return;
    }
    const bool writing = inf_pack_cache_writing(pc);
    inf_err e;
    const int rc = inf_pack_cache_finish(pc, &e);
    int64_t n;
    size_t bytes;
    inf_pack_cache_stats(pc, &n, &bytes);
    if (!rc && !writing && mode == INF_PACK_AUTO) {
        inf_pack_cache_close(pc); /* the default, working: said once, when written */
        return;
    }
    if (!rc && writing && !n) {
        note[0] = 0; /* nothing packed, nothing cached: nothing to say */
        inf_pack_cache_close(pc);
        return;
    }
    const size_t len = strlen(note);
    const char *sep = len ? "; " : "";
    if (rc)
        snprintf(note + len, cap - len, "%s%s", sep, e.msg);
    else if (!writing)
        snprintf(note + len, cap - len, "%spacked weights mapped from %s (%lld weights, %.1f GiB)",
                 sep, inf_pack_cache_path(pc), (long long)n, GiB(bytes));
    else
        snprintf(note + len, cap - len, "%swritten: %lld weights, %.1f GiB", sep, (long long)n,
                 GiB(bytes));
    inf_pack_cache_close(pc);
}
