/* inferno-grambench: what a grammar costs, apart from the model.
 *
 *   inferno-grambench [-m MODEL] [--runs 20] [--steps 2000] [--seed 1]
 *                     [--json-object] [--grammar FILE.gbnf]... [SCHEMA.json]...
 *
 * For each grammar (a JSON Schema file, a GBNF file, or --json-object):
 * 1. Compile time: JSON Schema -> GBNF -> rules (what a request pays once),
 *    --runs times; the median and the slowest.
 * 2. Per-step cost as the scheduler pays it, over the vocabulary of MODEL
 *    (only its tokenizer is read): each step draws a token uniformly from
 *    the vocabulary (a random-weight model at temperature 1.0 is close to
 *    that), asks whether the grammar allows it, and only when it does not
 *    builds the mask and draws again among the allowed tokens; then accepts.
 *    A finished output starts a new one until --steps steps are done. Prints
 *    the median, p99 and slowest mask, and the p99 of a whole step.
 * Times are CPU time of the thread (see cpu_ns).
 * The first matcher of every grammar starts cold (no cached masks, no
 * memoized transitions), as a request does. The last column is a digest of
 * the tokens taken: two builds that print the same digest chose the same
 * tokens, so their masks agreed at every step. Prints Markdown. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "grammar/grammar.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"
#include "util/mem.h"

/* Times are this thread's CPU time: on a shared machine the wall clock adds
 * whole time slices of other processes to single masks. */
static uint64_t cpu_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int die(const char *msg) {
    fprintf(stderr, "inferno-grambench: %s\n", msg);
    return 1;
}

static int tok_piece(void *ud, int32_t id, char *buf, int cap) {
    size_t len = 0;
    const char *p = inf_tok_token_bytes(ud, id, &len);
    if (!p) return 0;
    if (len > (size_t)cap) len = (size_t)cap;
    memcpy(buf, p, len);
    return (int)len;
}

/* The same classes the engine gives the scheduler's grammar. */
static inf_gram_tok_kind tok_kind(void *ud, int32_t id) {
    if (inf_tok_is_eog(ud, id)) return INF_GRAM_TOK_EOG;
    int type = inf_tok_token_type(ud, id);
    if (type == INF_TOKEN_CONTROL || type == INF_TOKEN_UNUSED) return INF_GRAM_TOK_NEVER;
    return INF_GRAM_TOK_TEXT;
}

typedef struct source {
    const char *name;
    int kind; /* 0 JSON Schema, 1 GBNF, 2 json_object */
    char *text;
    size_t len;
} source;

static int compile(const source *s, inf_gram **g, inf_err *err) {
    if (s->kind == 2) return inf_gram_json_object(g, err);
    if (s->kind == 1) return inf_gram_compile(g, s->text, s->len, "root", err);
    json_error_t je;
    json_t *schema = json_loadb(s->text, s->len, 0, &je);
    if (!schema) return inf_fail(err, "%s: not JSON: %s (line %d)", s->name, je.text, je.line);
    int rc = inf_gram_from_json_schema(g, schema, err);
    json_decref(schema);
    return rc;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The q-quantile of v[0..n) (sorted in place); 0 when n is 0. */
static double quantile(double *v, int n, double q) {
    if (!n) return 0;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    int i = (int)(q * (n - 1) + 0.5);
    return v[i];
}

static uint64_t rng_next(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* The k-th set bit of bits[0..words). */
static int32_t nth_bit(const uint32_t *bits, int words, int k) {
    for (int w = 0; w < words; w++) {
        int c = __builtin_popcount(bits[w]);
        if (k >= c) {
            k -= c;
            continue;
        }
        uint32_t b = bits[w];
        while (k--)
            b &= b - 1;
        return w * 32 + __builtin_ctz(b);
    }
    return -1;
}

int main(int argc, char **argv) {
    const char *path = "models/tiny-q8_0.gguf";
    int runs = 20, steps = 2000, max_out = 1500;
    uint64_t seed = 1;
    source *src = calloc((size_t)argc, sizeof *src);
    int n_src = 0;
    if (!src) return die("out of memory");
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(f, "--json-object")) {
            src[n_src++] = (source){.name = "json_object", .kind = 2};
            continue;
        }
        if (f[0] != '-') {
            src[n_src++] = (source){.name = f, .kind = 0};
            continue;
        }
        if (!v)
            return die("an option without its value (see the header of tools/inferno-grambench.c)");
        i++;
        if (!strcmp(f, "-m"))
            path = v;
        else if (!strcmp(f, "--grammar"))
            src[n_src++] = (source){.name = v, .kind = 1};
        else if (!strcmp(f, "--runs"))
            runs = atoi(v);
        else if (!strcmp(f, "--steps"))
            steps = atoi(v);
        else if (!strcmp(f, "--seed"))
            seed = (uint64_t)strtoull(v, NULL, 10) * 2654435761u + 1;
        else
            return die("unknown option (see the header of tools/inferno-grambench.c)");
    }
    if (!n_src) return die("no grammar given: SCHEMA.json, --grammar FILE or --json-object");
    if (runs < 1 || steps < 1) return die("--runs and --steps must be at least 1");

    inf_err err;
    for (int i = 0; i < n_src; i++)
        if (src[i].kind != 2 &&
            inf_read_file(&src[i].text, &src[i].len, src[i].name, 16u << 20, &err))
            return die(err.msg);
    inf_model_file *mf;
    inf_tokenizer *tok;
    if (inf_model_open(&mf, path, &err)) return die(err.msg);
    if (inf_tok_create(&tok, &mf->vocab, &err)) return die(err.msg);
    int n_vocab = inf_tok_n_vocab(tok), words = (n_vocab + 31) / 32;
    inf_gram_vocab *gv;
    uint64_t t0 = cpu_ns();
    if (inf_gram_vocab_create(&gv, n_vocab, tok_piece, tok_kind, tok, &err)) return die(err.msg);
    printf("vocabulary of %s: %d tokens, trie built in %.1f ms\n\n", path, n_vocab,
           (double)(cpu_ns() - t0) * 1e-6);

    double *comp = malloc((size_t)runs * sizeof *comp);
    double *mask_ms = malloc((size_t)steps * sizeof *mask_ms);
    double *step_ms = malloc((size_t)steps * sizeof *step_ms);
    double *walk_ms = malloc((size_t)steps * sizeof *walk_ms);
    double *all_masks = malloc((size_t)steps * n_src * sizeof *all_masks);
    int n_all = 0;
    if (!comp || !mask_ms || !step_ms || !walk_ms || !all_masks) return die("out of memory");
    printf("| grammar | compile median | compile max | steps | outputs ended | masks (walked) | "
           "mask p50 | mask p99 | mask max | walked mask p50 | step p99 | tokens |\n");
    printf("|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < n_src; i++) {
        inf_gram *g = NULL;
        for (int r = 0; r < runs; r++) {
            inf_gram_free(g);
            g = NULL;
            uint64_t c0 = cpu_ns();
            if (compile(&src[i], &g, &err)) {
                fprintf(stderr, "inferno-grambench: %s: %s\n", src[i].name, err.msg);
                return 1;
            }
            comp[r] = (double)(cpu_ns() - c0) * 1e-6;
        }
        double c_med = quantile(comp, runs, 0.5), c_max = comp[runs - 1];
        int n_masks = 0, n_walked = 0, ended = 0, out_len = 0;
        long walks_total = 0;
        uint32_t digest = 2166136261u; /* FNV-1a of the tokens taken: equal runs, equal masks */
        inf_gram_matcher *m = NULL;
        for (int s = 0; s < steps; s++) {
            if (!m) {
                if (inf_gram_matcher_create(&m, g, gv, &err)) return die(err.msg);
                out_len = 0;
            }
            uint64_t s0 = cpu_ns();
            int32_t id = (int32_t)(rng_next(&seed) % (uint64_t)n_vocab);
            int ok = inf_gram_matcher_allows(m, id);
            if (ok < 0) return die(inf_gram_matcher_error(m));
            if (!ok) {
                long w0, w1, c;
                inf_gram_matcher_counts(m, &w0, &c);
                uint64_t m0 = cpu_ns();
                int n_allowed;
                const uint32_t *bits = inf_gram_matcher_mask(m, &n_allowed);
                mask_ms[n_masks] = (double)(cpu_ns() - m0) * 1e-6;
                inf_gram_matcher_counts(m, &w1, &c);
                if (w1 > w0) walk_ms[n_walked++] = mask_ms[n_masks];
                n_masks++;
                if (!bits) return die(inf_gram_matcher_error(m));
                if (!n_allowed) return die("no token can continue the output");
                id = nth_bit(bits, words, (int)(rng_next(&seed) % (uint64_t)n_allowed));
            }
            if (inf_gram_matcher_accept(m, id)) return die(inf_gram_matcher_error(m));
            digest = (digest ^ (uint32_t)id) * 16777619u;
            step_ms[s] = (double)(cpu_ns() - s0) * 1e-6;
            if (inf_gram_matcher_done(m) || ++out_len == max_out) {
                ended += inf_gram_matcher_done(m);
                long w, c;
                inf_gram_matcher_counts(m, &w, &c);
                walks_total += w;
                inf_gram_matcher_free(m);
                m = NULL;
            }
        }
        if (m) {
            long w, c;
            inf_gram_matcher_counts(m, &w, &c);
            walks_total += w;
            inf_gram_matcher_free(m);
        }
        memcpy(all_masks + n_all, mask_ms, (size_t)n_masks * sizeof *mask_ms);
        n_all += n_masks;
        double p50 = quantile(mask_ms, n_masks, 0.5), p99 = quantile(mask_ms, n_masks, 0.99);
        double mx = n_masks ? mask_ms[n_masks - 1] : 0, sp99 = quantile(step_ms, steps, 0.99);
        double wp50 = quantile(walk_ms, n_walked, 0.5);
        printf("| %s | %.2f ms | %.2f ms | %d | %d | %d (%ld) | %.3f ms | %.3f ms | %.3f ms | "
               "%.3f ms | %.3f ms | %08x |\n",
               src[i].name, c_med, c_max, steps, ended, n_masks, walks_total, p50, p99, mx, wp50,
               sp99, digest);
        inf_gram_free(g);
    }
    if (n_src > 1) {
        double p99 = quantile(all_masks, n_all, 0.99);
        printf("\nall %d masks: p50 %.3f ms, p99 %.3f ms, max %.3f ms\n", n_all,
               quantile(all_masks, n_all, 0.5), p99, n_all ? all_masks[n_all - 1] : 0);
    }
    for (int i = 0; i < n_src; i++)
        free(src[i].text);
    free(src);
    free(comp);
    free(mask_ms);
    free(step_ms);
    free(walk_ms);
    free(all_masks);
    inf_gram_vocab_free(gv);
    inf_tok_free(tok);
    inf_model_close(mf);
    return 0;
}
