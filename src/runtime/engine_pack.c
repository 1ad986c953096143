/* When and where an engine keeps its packed weights in a file (engine_pack.h). */
#include "runtime/engine_pack.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <xxhash.h>

#include "backend/select.h"
#include "util/mem.h"

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
    const size_t total = inf_mem_total();
    if (mode == INF_PACK_AUTO &&
        (len < 0 || !total || 2.0 * (double)bytes <= 0.9 * (double)total)) {
        free(ident);
        return 0; /* the file and its packed copy both fit: the page cache keeps the file */
    }
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
        const char *first = ident, *end = strchr(ident, ' ');
        const char *slash = first;
        for (const char *s = first; s < end; s++)
            if (*s == '/') slash = s + 1;
        XXH64_hash_t h = XXH64(first, (size_t)(end - first), 0) ^ XXH64(layout, strlen(layout), 1);
        const size_t dl = strlen(path);
        snprintf(path + dl, sizeof path - dl, "/%.*s-%016llx.pack",
                 (int)(end - slash < 200 ? end - slash : 200), slash, (unsigned long long)h);
        inf_err e;
        if (inf_pack_cache_open(out, path, ident, bytes, 4 * bytes + (64 << 20), &e))
            snprintf(why, sizeof why, "%s", e.msg);
        else if (inf_pack_cache_writing(*out))
            snprintf(note, cap,
                     "packing the weights once into %s (%.1f GiB%s); later loads map them "
                     "from there (--pack-cache off: pack in memory at every load)",
                     path, GiB(bytes),
                     mode == INF_PACK_AUTO
                         ? ": the file and a packed copy do not both fit in memory"
                         : "");
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

void engine_pack_close(inf_pack_cache *pc, bool ok, char *note, size_t cap) {
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
