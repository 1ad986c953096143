/* The pack cache through the engine (runtime/engine_pack.h,
 * backend/pack_cache.h): the first load writes the packed weights into the
 * cache file, the next maps them, and both give the logits of packing in
 * memory bit for bit (a dense model, the MoE model's expert slices, a
 * Hugging Face folder). A cache whose panels were changed on disk is caught
 * by its hashes (the weights are packed again, the same logits), removed and
 * written anew; a truncated one, or one for an older version of the model
 * file (its modification time), is rewritten; `--pack-cache on` where no
 * cache can be made is an error naming the directory, auto mode caches as on
 * does, and the scalar backend packs nothing to cache; a load sweeps the
 * directory of caches no load can use (test_sweep). A tied embedding table's
 * pages are mapped at load whether its head was packed now or mapped from
 * the cache (embed reads the table in place; faulting a row in per token
 * cost decode up to 8 % on a cold page cache).
 * Needs the generated models (scripts/make-models.sh). */
#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/select.h"
#include "harness.h"
#include "runtime/engine.h"

#define STEPS 3

static char tmp[256];

/* The logits of a greedy prompt of 12 tokens and STEPS tokens (malloc'd
 * [STEPS][n_vocab]), and the engine's pack note; NULL when the model does
 * not open (err says why). */
typedef struct run_out {
    float *logits;
    int n;
    char note[1024];
    long file_rss; /* bytes of the model file mapped in this process while the engine is open */
} run_out;

/* Rss of this process's mappings of the file at path (/proc/self/smaps), or -1 */
static long mapped_bytes(const char *path) {
    char *real = realpath(path, NULL);
    FILE *f = fopen("/proc/self/smaps", "r");
    long kb = -1, v;
    bool in = false;
    char line[1200];
    while (real && f && fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2) {
            char *nl = strchr(line, '\n'), *name = strchr(line, '/');
            if (nl) *nl = 0;
            in = name && !strcmp(name, real);
        } else if (in && sscanf(line, "Rss: %ld kB", &v) == 1) {
            kb = (kb < 0 ? 0 : kb) + v;
        }
    }
    if (f) fclose(f);
    free(real);
    return kb < 0 ? -1 : kb * 1024;
}

static void on_logits(void *ud, const float *logits, int n_vocab) {
    run_out *r = ud;
    if (r->n < STEPS) memcpy(r->logits + (size_t)r->n++ * n_vocab, logits, n_vocab * sizeof(float));
}

static int run(run_out *r, const char *model, const char *backend, inf_pack_mode mode,
               const char *dir, inf_err *err) {
    memset(r, 0, sizeof *r);
    inf_engine_opts o = {.model_path = model,
                         .backend = {.name = backend, .n_threads = 2},
                         .n_seq = 1,
                         .n_ctx = 64,
                         .n_batch = 16,
                         .kv = {.type_k = INF_F16, .type_v = INF_F16},
                         .pack = mode,
                         .pack_dir = dir};
    inf_engine *e;
    if (inf_engine_open(&e, &o, err)) return -1;
    snprintf(r->note, sizeof r->note, "%s", e->pack_note);
    r->file_rss = mapped_bytes(model);
    const int V = e->ex.n_vocab;
    r->logits = calloc((size_t)STEPS * V, sizeof(float));
    int32_t *prompt = malloc(12 * sizeof *prompt);
    for (int i = 0; i < 12; i++)
        prompt[i] = (i * 53 + 7) % 900 + 20;
    inf_gen_params p = inf_gen_defaults();
    p.sampling.temp = 0;
    p.max_tokens = STEPS;
    p.ignore_eos = true;
    p.on_logits = on_logits;
    p.ud = r;
    inf_task *t = inf_engine_submit(e, prompt, 12, &p, err);
    int rc = -1;
    if (t) {
        inf_engine_wait(e, t, NULL, NULL, err);
        rc = t->status == INF_TASK_OK && r->n == STEPS ? 0 : -1;
        inf_task_release(t);
    }
    r->n = V;
    inf_engine_close(e);
    return rc;
}

static bool same(const run_out *a, const run_out *b) {
    return a->logits && b->logits && a->n == b->n &&
           !memcmp(a->logits, b->logits, (size_t)STEPS * (size_t)a->n * sizeof(float));
}

/* The one .pack file in dir (path into out), or false when there is not
 * exactly one. */
static bool the_cache(const char *dir, char *out, size_t cap) {
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *de; d && (de = readdir(d));) {
        size_t len = strlen(de->d_name);
        if (len > 5 && !strcmp(de->d_name + len - 5, ".pack")) {
            snprintf(out, cap, "%s/%s", dir, de->d_name);
            n++;
        }
    }
    if (d) closedir(d);
    return n == 1;
}

static long file_size(const char *path) {
    struct stat st;
    return stat(path, &st) ? -1 : (long)st.st_size;
}

static void copy_file(const char *from, const char *to) {
    FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
    char buf[1 << 16];
    size_t n;
    while (a && b && (n = fread(buf, 1, sizeof buf, a)) > 0)
        fwrite(buf, 1, n, b);
    if (a) fclose(a);
    if (b) fclose(b);
}

/* write, map, damage, truncate, replace: always the in-memory logits */
static void test_cycle(const char *src, const char *name) {
    char model[512], dir[512], cache[700];
    snprintf(model, sizeof model, "%s/%s", tmp, name);
    snprintf(dir, sizeof dir, "%s/cache-%s", tmp, name);
    copy_file(src, model);
    inf_err err;
    run_out ref, a, b, c;
    CHECK_MSG(run(&ref, model, "pool", INF_PACK_OFF, dir, &err) == 0, "%s: %s", name, err.msg);
    CHECK_MSG(ref.note[0] == 0, "off: no note, got '%s'", ref.note);
    CHECK_MSG(!the_cache(dir, cache, sizeof cache), "%s: off wrote a cache", name);

    CHECK_MSG(run(&a, model, "pool", INF_PACK_ON, dir, &err) == 0, "%s: %s", name, err.msg);
    CHECK_MSG(strstr(a.note, "packing the weights once into") && strstr(a.note, "written:"),
              "%s: first load: '%s'", name, a.note);
    CHECK_MSG(same(&ref, &a), "%s: logits packed into the cache differ from packed in memory",
              name);
    CHECK_MSG(the_cache(dir, cache, sizeof cache), "%s: no cache file in %s", name, dir);
    const long size = file_size(cache);

    CHECK_MSG(run(&b, model, "pool", INF_PACK_ON, dir, &err) == 0, "%s: %s", name, err.msg);
    CHECK_MSG(strstr(b.note, "packed weights mapped from") && !strstr(b.note, "packing"),
              "%s: second load: '%s'", name, b.note);
    CHECK_MSG(same(&ref, &b), "%s: logits from the mapped cache differ", name);
    CHECK_INT(file_size(cache), size);
    /* the tied table (most of a tiny model's file) mapped either way */
    CHECK_MSG(a.file_rss > file_size(model) / 2 && b.file_rss * 10 >= a.file_rss * 9,
              "%s: the model file mapped: %ld bytes after packing, %ld from the cache (of %ld)",
              name, a.file_rss, b.file_rss, file_size(model));

    /* a byte of the first panels changed on disk: caught, packed again, removed */
    int fd = open(cache, O_RDWR);
    unsigned char byte = 0;
    CHECK(fd >= 0 && pread(fd, &byte, 1, 4096 + 100) == 1);
    byte ^= 0x40;
    CHECK(fd >= 0 && pwrite(fd, &byte, 1, 4096 + 100) == 1);
    if (fd >= 0) close(fd);
    CHECK_MSG(run(&c, model, "pool", INF_PACK_ON, dir, &err) == 0, "%s: %s", name, err.msg);
    CHECK_MSG(strstr(c.note, "did not match its hashes"), "%s: damaged cache: '%s'", name, c.note);
    CHECK_MSG(same(&ref, &c), "%s: logits after a damaged cache differ", name);
    CHECK_MSG(file_size(cache) < 0, "%s: the damaged cache was not removed", name);
    free(c.logits);
    CHECK_MSG(run(&c, model, "pool", INF_PACK_ON, dir, &err) == 0, "%s: %s", name, err.msg);
    CHECK_MSG(strstr(c.note, "packing the weights once"), "%s: rewrite: '%s'", name, c.note);
    CHECK_INT(file_size(cache), size);

    /* cut short: not a whole cache, written again */
    CHECK(truncate(cache, size / 2) == 0);
    free(c.logits);
    CHECK_MSG(run(&c, model, "pool", INF_PACK_ON, dir, &err) == 0, "%s: %s", name, err.msg);
    CHECK_MSG(strstr(c.note, "packing the weights once"), "%s: truncated: '%s'", name, c.note);
    CHECK_MSG(same(&ref, &c), "%s: logits after a truncated cache differ", name);
    CHECK_INT(file_size(cache), size);

    /* the model file changed (its time): the cache is another version's */
    struct timespec t[2] = {{.tv_sec = 1000000000}, {.tv_sec = 1000000000}};
    CHECK(utimensat(AT_FDCWD, model, t, 0) == 0);
    free(c.logits);
    CHECK_MSG(run(&c, model, "pool", INF_PACK_ON, dir, &err) == 0, "%s: %s", name, err.msg);
    CHECK_MSG(strstr(c.note, "packing the weights once"), "%s: new model time: '%s'", name, c.note);
    CHECK_MSG(the_cache(dir, cache, sizeof cache), "%s: the new cache did not replace the old",
              name);
    free(c.logits);
    CHECK_MSG(run(&c, model, "pool", INF_PACK_ON, dir, &err) == 0, "%s: %s", name, err.msg);
    CHECK_MSG(strstr(c.note, "mapped from"), "%s: after the rewrite: '%s'", name, c.note);
    CHECK_MSG(same(&ref, &c), "%s: logits after the rewrite differ", name);

    free(ref.logits);
    free(a.logits);
    free(b.logits);
    free(c.logits);
}

/* A Hugging Face folder (BF16 weights, packed as BF16 panels), in place. */
static void test_folder(const char *model) {
    char dir[512], cache[700];
    snprintf(dir, sizeof dir, "%s/cache-hf", tmp);
    inf_err err;
    run_out ref, a, b;
    CHECK_MSG(run(&ref, model, "pool", INF_PACK_OFF, dir, &err) == 0, "%s", err.msg);
    CHECK_MSG(run(&a, model, "pool", INF_PACK_ON, dir, &err) == 0, "%s", err.msg);
    CHECK_MSG(run(&b, model, "pool", INF_PACK_ON, dir, &err) == 0, "%s", err.msg);
    CHECK_MSG(the_cache(dir, cache, sizeof cache), "hf: no cache file");
    CHECK_MSG(strstr(b.note, "mapped from"), "hf: second load: '%s'", b.note);
    CHECK_MSG(same(&ref, &a) && same(&ref, &b), "hf: logits with the cache differ");
    free(ref.logits);
    free(a.logits);
    free(b.logits);
}

static void test_refusals(void) {
    char bad[512], dir[512], cache[700];
    snprintf(bad, sizeof bad, "%s/a-file", tmp);
    FILE *f = fopen(bad, "w");
    if (f) fclose(f);
    snprintf(bad, sizeof bad, "%s/a-file/sub", tmp);
    inf_err err;
    run_out r;
    CHECK(run(&r, "models/tiny-q8_0.gguf", "pool", INF_PACK_ON, bad, &err) == -1);
    CHECK_MSG(strstr(err.msg, "--pack-cache on") && strstr(err.msg, "a-file"),
              "on, no directory: '%s'", err.msg);
    free(r.logits);
    /* auto, the default: cached like on (this file system has room) */
    snprintf(dir, sizeof dir, "%s/cache-auto", tmp);
    CHECK_MSG(run(&r, "models/tiny-q8_0.gguf", "pool", INF_PACK_AUTO, dir, &err) == 0, "%s",
              err.msg);
    CHECK_MSG((strstr(r.note, "packing the weights once") && the_cache(dir, cache, sizeof cache)) ||
                  strstr(r.note, "is to stay free"),
              "auto: '%s'", r.note);
    free(r.logits);
    if (the_cache(dir, cache, sizeof cache)) { /* mapped again: the usual case, said nothing */
        CHECK_MSG(run(&r, "models/tiny-q8_0.gguf", "pool", INF_PACK_AUTO, dir, &err) == 0, "%s",
                  err.msg);
        CHECK_MSG(r.note[0] == 0, "auto, mapped: '%s'", r.note);
        free(r.logits);
    }
    char clean[700];
    snprintf(clean, sizeof clean, "rm -f '%s'/*", dir);
    CHECK(system(clean) == 0);
    /* the scalar backend packs nothing */
    CHECK_MSG(run(&r, "models/tiny-q8_0.gguf", "scalar", INF_PACK_ON, dir, &err) == 0, "%s",
              err.msg);
    CHECK_MSG(r.note[0] == 0 && !the_cache(dir, cache, sizeof cache), "scalar: '%s'", r.note);
    free(r.logits);
    /* a bad mode names the flag */
    inf_pack_mode m;
    CHECK(inf_pack_mode_parse(&m, "sometimes", "--pack-cache", &err) == -1 &&
          strstr(err.msg, "--pack-cache") && strstr(err.msg, "sometimes"));
}

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

/* What a load sweeps from the cache directory: a cache whose model file is
 * gone, one in another layout of this level for the same file, a dead
 * writer's temporary file; not other files, not a live cache. */
static void test_sweep(void) {
    char dir[512], gone[512], kept[512], path[800], cache[700];
    snprintf(dir, sizeof dir, "%s/cache-sweep", tmp);
    snprintf(gone, sizeof gone, "%s/gone.gguf", tmp);
    snprintf(kept, sizeof kept, "%s/kept.gguf", tmp);
    copy_file("models/tiny-q8_0.gguf", gone);
    copy_file("models/tiny-q8_0.gguf", kept);
    inf_err err;
    run_out r;
    CHECK_MSG(run(&r, gone, "pool", INF_PACK_ON, dir, &err) == 0, "%s", err.msg);
    free(r.logits);
    CHECK_MSG(the_cache(dir, cache, sizeof cache), "sweep: no cache for gone.gguf");
    char gone_cache[700];
    snprintf(gone_cache, sizeof gone_cache, "%s", cache);
    CHECK(unlink(gone) == 0);
    CHECK_MSG(run(&r, kept, "pool", INF_PACK_ON, dir, &err) == 0, "%s", err.msg);
    free(r.logits);
    CHECK_MSG(file_size(gone_cache) < 0, "sweep: the cache of a removed model file stays");
    CHECK_MSG(the_cache(dir, cache, sizeof cache), "sweep: kept.gguf's cache is not alone");

    /* the same cache with another layout hash (its identity's last digit) */
    snprintf(path, sizeof path, "%s/kept-old-layout.pack", dir);
    copy_file(cache, path);
    const long n = file_size(path);
    int fd = open(path, O_RDWR);
    char c = 0;
    CHECK(fd >= 0 && pread(fd, &c, 1, n - 2) == 1);
    c = c == '0' ? '1' : '0';
    CHECK(fd >= 0 && pwrite(fd, &c, 1, n - 2) == 1);
    if (fd >= 0) close(fd);
    char dead[800], other[800], junk[800];
    snprintf(dead, sizeof dead, "%s/x.pack.tmp.2147483646", dir); /* past any pid_max */
    snprintf(other, sizeof other, "%s/notes.txt", dir);
    snprintf(junk, sizeof junk, "%s/junk.pack", dir);
    write_text(dead, "partial");
    write_text(other, "mine");
    write_text(junk, "not a cache");
    char fifo[800], huge_pid[800];
    snprintf(fifo, sizeof fifo, "%s/fifo.pack", dir); /* must not hang the sweep */
    CHECK(mkfifo(fifo, 0600) == 0);
    snprintf(huge_pid, sizeof huge_pid, "%s/y.pack.tmp.99999999999999999999", dir);
    write_text(huge_pid, "partial");
    CHECK_MSG(run(&r, kept, "pool", INF_PACK_ON, dir, &err) == 0, "%s", err.msg);
    CHECK_MSG(strstr(r.note, "mapped from"), "sweep: kept.gguf not mapped: '%s'", r.note);
    free(r.logits);
    CHECK_MSG(file_size(path) < 0, "sweep: an older layout's cache stays");
    CHECK_MSG(file_size(dead) < 0, "sweep: a dead writer's file stays");
    CHECK_MSG(file_size(other) > 0 && file_size(junk) > 0 && file_size(huge_pid) > 0,
              "sweep: removed a file not its own");
    CHECK_MSG(file_size(fifo) == 0, "sweep: removed a FIFO");
    CHECK_MSG(file_size(cache) > 0, "sweep: removed the live cache");
}

/* A level that packs nothing (scalar, NEON) has nothing to cache: on makes
 * no file and no note. */
static void test_nothing_packed(void) {
    char dir[512], cache[700];
    snprintf(dir, sizeof dir, "%s/cache-none", tmp);
    inf_err err;
    run_out r;
    CHECK_MSG(run(&r, "models/tiny-q8_0.gguf", "pool", INF_PACK_ON, dir, &err) == 0, "%s", err.msg);
    CHECK_MSG(r.note[0] == 0 && !the_cache(dir, cache, sizeof cache), "'%s'", r.note);
    free(r.logits);
}

int main(void) {
    snprintf(tmp, sizeof tmp, "/tmp/inferno-pack-XXXXXX");
    if (!mkdtemp(tmp)) return 1;
    inf_backend *be;
    inf_err err;
    const inf_backend_opts bo = {.name = "pool", .n_threads = 1};
    CHECK_MSG(inf_backend_create(&be, &bo, &err) == 0, "%s", err.msg);
    const bool packs = inf_backend_pack_layout(be) != NULL;
    inf_backend_free(be);
    if (!packs) {
        fprintf(stderr, "this level packs no weights: only that nothing is cached is tested\n");
        test_nothing_packed();
    } else {
        test_cycle("models/tiny-q4_k_m.gguf", "tiny-q4_k_m.gguf");
        test_cycle("models/tiny-moe-q4_k_m.gguf", "tiny-moe-q4_k_m.gguf");
        test_cycle("models/tiny-q8_0.gguf", "tiny-q8_0.gguf");
        test_folder("models/tiny-bf16-hf");
        test_refusals();
        test_sweep();
    }
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd)) fprintf(stderr, "could not remove %s\n", tmp);
    return th_report();
}
