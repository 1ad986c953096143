/* inferno bench: llama-bench's tests and table, plus time to first token.
 *
 *   inferno bench -m MODEL [-p 512[,..]] [-n 128[,..]] [-d 0[,..]] [-t 2[,..]]
 *                 [-ctk f16[,..]] [-ctv f16[,..]] [--backend pool[,..]]
 *                 [--isa LEVEL] [-r 5] [-b 512] [-o md|json] [--no-ttft] [--trace]
 *                 [--attn flash|materialized] [--membw SIZE]
 *
 * ppN: prefill N random tokens into an empty cache (logits for the last one
 * only). tgN: N decode steps, one token each, from an empty cache. With a
 * depth D (-d, llama-bench's --n-depth) the cache first holds D random
 * tokens (untimed; the same tokens every repetition, so they are prefilled
 * once and reused): "pp512 @ d2048" prefills 512 more, "tg128 @ d2048"
 * decodes 128 steps at depths 2048..2175. Each row states the K/V types and
 * the bytes of K/V the test's cache holds at its end. Each test
 * runs once as warm-up, then -r times; t/s is the mean ± sample standard
 * deviation over the repetitions (llama-bench's avg_ts / stddev_ts). Then, for
 * generated deterministic prompts of 17, 511 and 2044 tokens: time to first
 * token (prefill + picking the first token), decode tok/s at that depth, and
 * the effective bandwidth of decode: bytes of weights and KV cache read per
 * token over the time per token. Peak memory is getrusage's max RSS.
 *
 * --membw SIZE first measures the streaming read bandwidth (backend/membw.h)
 * with each thread count the tests use, and then states for every tgN row
 * the share of the roof its decode reached: the bytes one step reads
 * (inf_model_facts' decode_bytes: every weight a token goes through, the
 * chosen experts only, the head whole, one embedding row; plus the K/V of the
 * step's depth, on average over the test) times tok/s over the bandwidth.
 * Each timed tgN repetition is followed by two more read passes, and its share
 * is taken against the better one: on a shared host whose bandwidth moves
 * between tests, a share against one read made minutes earlier says little.
 * The row gives the mean and standard deviation of those shares. */
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "backend/cpu_features.h"
#include "backend/membw.h"
#include "backend/pool.h"
#include "backend/select.h"
#include "backend/trace.h"
#include "cli/cli.h"
#include "cli/spec_flags.h"
#include "model/model.h"
#include "modelfile/model.h"
#include "runtime/engine.h"
#include "tokenizer/tokenizer.h"
#include "util/mem.h"
#include "util/timer.h"

#define MAX_LIST 16

typedef struct int_list {
    int n;
    int v[MAX_LIST];
} int_list;

typedef struct str_list {
    int n;
    const char *v[MAX_LIST];
} str_list;

typedef struct bench_args {
    str_list models, backends;
    int_list prompts, gens, threads, depths;
    int_list verify; /* --verify LIST: rows of one speculative verification step (n = 0: none) */
    int n_ctk, n_ctv;
    inf_dtype ctk[MAX_LIST], ctv[MAX_LIST]; /* K/V cache types */
    const char *isa;
    inf_pack_mode pack;   /* --pack-cache auto|on|off */
    const char *pack_dir; /* --pack-cache-dir */
    const char *attn;     /* flash | materialized */
    const char *output;   /* md | json */
    int reps, n_batch;
    bool ttft, trace;
    size_t membw_bytes;    /* --membw SIZE; 0 = no measurement */
    spec_flags spec;       /* -md, --spec, --draft-*: tgN decodes speculatively */
    const char *tg_prompt; /* --tg-prompt FILE: tgN continues this text (NULL: one token) */
} bench_args;

static void usage(FILE *f) {
    fprintf(
        f,
        "usage: inferno bench -m MODEL[,MODEL...] [options]\n"
        "\n"
        "  -m, --model LIST        GGUF files or Hugging Face folders (default %s)\n"
        "  -p, --n-prompt LIST     prompt lengths for ppN tests (default 512; 0 = none)\n"
        "  -n, --n-gen LIST        generated tokens for tgN tests (default 128; 0 = none)\n"
        "  -d, --n-depth LIST      tokens already in the cache before each test (default 0)\n"
        "  -ctk, --cache-type-k LIST  K cache types: f32, f16 (default), bf16, q8_0\n"
        "  -ctv, --cache-type-v LIST  V cache types (default f16)\n"
        "  -t, --threads LIST      pool threads (default: the physical cores we may use)\n"
        "  --backend LIST          pool (default), simd, scalar\n"
        "  --isa LEVEL             force a lower SIMD level: amx, avx512, avx2, neon, scalar\n"
        "  --pack-cache auto|on|off  keep the packed weights in a file, mapped at later loads\n"
        "                          (auto, the default: unless the disk would keep < 5 %% free)\n"
        "  --pack-cache-dir DIR    where (default $INFERNO_CACHE_DIR or ~/.cache/inferno)\n"
        "  -r, --repetitions N     timed repetitions per test (default 5)\n"
        "  -b, --batch-size N      rows per forward call in a prefill (default 512)\n"
        "  -o, --output md|json    output format (default md)\n"
        "  --no-ttft               skip the time-to-first-token prompts (17, 511, 2044 tokens)\n"
        "  --trace                 print the per-op histogram of each model/backend on stderr\n"
        "  --attn flash|materialized\n"
        "                          prefill attention (default flash); materialized builds the\n"
        "                          whole score matrix, to measure what flash saves (simd and\n"
        "                          pool backends at avx512 or amx)\n"
        "  --membw SIZE            first measure the streaming read bandwidth with each thread\n"
        "                          count (a buffer of SIZE, at least 1G, e.g. 1G or 1536M; a bare\n"
        "                          number is GiB; best of -r passes), and give each tgN row the\n"
        "                          share of the roof its decode reached: bytes a step reads x\n"
        "                          tok/s / bandwidth, per repetition against the best of two\n"
        "                          passes read right after it; mean ± sd of the repetitions\n"
        "  --verify LIST           the cost of verifying N-1 drafts: N decode rows of one\n"
        "                          sequence in one forward call, against one row (e.g. 1,2,5,9)\n"
        "  --tg-prompt FILE        tgN decodes after this text (tokenized as is; untimed), not\n"
        "                          after one random token: what n-gram drafts copy from\n"
        "%s"
        "                          (tgN rows then give the share of drafts taken)\n",
        INF_DEFAULT_MODEL, SPEC_FLAGS_USAGE);
}

static int parse_ints(const char *s, int_list *l) {
    l->n = 0;
    const char *p = s;
    while (*p) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (errno || end == p || v < 0 || v > INT_MAX || l->n == MAX_LIST) return -1;
        l->v[l->n++] = (int)v;
        if (*end == ',')
            end++;
        else if (*end)
            return -1;
        p = end;
    }
    return l->n ? 0 : -1;
}

/* --membw SIZE: a number with K, M or G (binary units; "GiB", "MB" read as
 * the same), or a bare number of GiB, into bytes. -1 for anything else. */
static int parse_size(const char *s, size_t *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || !(v > 0) || v > 1e6) return -1;
    double unit = 1024.0 * 1024 * 1024;
    if (*end == 'K' || *end == 'k')
        unit = 1024.0, end++;
    else if (*end == 'M' || *end == 'm')
        unit = 1024.0 * 1024, end++;
    else if (*end == 'G' || *end == 'g')
        end++;
    if (*end == 'i' && end[1] == 'B')
        end += 2;
    else if (*end == 'B')
        end++;
    if (*end) return -1;
    *out = (size_t)(v * unit);
    return 0;
}

static int parse_strs(char *s, str_list *l) {
    l->n = 0;
    for (char *tok = strtok(s, ","); tok; tok = strtok(NULL, ",")) {
        if (l->n == MAX_LIST) return -1;
        l->v[l->n++] = tok;
    }
    return l->n ? 0 : -1;
}

/* a comma list of K/V types into out[MAX_LIST]; prints what is wrong */
static int parse_types(char *s, inf_dtype *out, int *n, const char *flag) {
    *n = 0;
    for (char *tok = strtok(s, ","); tok; tok = strtok(NULL, ",")) {
        inf_err e;
        if (*n == MAX_LIST) return -1;
        if (inf_kv_parse_type(&out[(*n)++], tok, flag, &e)) {
            fprintf(stderr, "inferno bench: %s\n", e.msg);
            return -2;
        }
    }
    return *n ? 0 : -1;
}

static int parse_args(bench_args *a, int argc, char **argv) {
    static char model_default[] = INF_DEFAULT_MODEL, backend_default[] = "pool";
    *a = (bench_args){.output = "md", .reps = 5, .n_batch = 512, .ttft = true};
    parse_strs(model_default, &a->models);
    parse_strs(backend_default, &a->backends);
    a->prompts = (int_list){1, {512}};
    a->gens = (int_list){1, {128}};
    a->depths = (int_list){1, {0}};
    a->n_ctk = a->n_ctv = 1;
    a->ctk[0] = a->ctv[0] = INF_F16;
    a->threads = (int_list){1, {inf_physical_cores()}};
    a->spec = spec_flags_defaults();
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i];
#define IS(x) (!strcmp(f, x))
        if (IS("-h") || IS("--help")) {
            usage(stdout);
            return 1;
        }
        if (IS("--no-ttft")) {
            a->ttft = false;
            continue;
        }
        if (IS("--trace")) {
            a->trace = true;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "inferno bench: %s needs a value (see --help)\n", f);
            return -1;
        }
        char *v = argv[++i];
        int bad = 0;
        if (spec_flag_is(f)) {
            if (spec_flag_set(&a->spec, "bench", f, v)) return -1;
        } else if (IS("--verify"))
            bad = parse_ints(v, &a->verify);
        else if (IS("--tg-prompt"))
            a->tg_prompt = v;
        else if (IS("-m") || IS("--model"))
            bad = parse_strs(v, &a->models);
        else if (IS("-p") || IS("--n-prompt"))
            bad = parse_ints(v, &a->prompts);
        else if (IS("-n") || IS("--n-gen"))
            bad = parse_ints(v, &a->gens);
        else if (IS("-d") || IS("--n-depth"))
            bad = parse_ints(v, &a->depths);
        else if (IS("-ctk") || IS("--cache-type-k") || IS("-ctv") || IS("--cache-type-v")) {
            bool k = IS("-ctk") || IS("--cache-type-k");
            bad = parse_types(v, k ? a->ctk : a->ctv, k ? &a->n_ctk : &a->n_ctv, f);
            if (bad == -2) return -1;
        } else if (IS("-t") || IS("--threads"))
            bad = parse_ints(v, &a->threads);
        else if (IS("--backend"))
            bad = parse_strs(v, &a->backends);
        else if (IS("--isa"))
            a->isa = v;
        else if (IS("--pack-cache")) {
            inf_err e;
            if (inf_pack_mode_parse(&a->pack, v, f, &e)) {
                fprintf(stderr, "inferno bench: %s\n", e.msg);
                return -1;
            }
        } else if (IS("--pack-cache-dir"))
            a->pack_dir = v;
        else if (IS("--attn")) {
            a->attn = v;
            if (strcmp(v, "flash") && strcmp(v, "materialized")) {
                fprintf(stderr,
                        "inferno bench: --attn: unknown attention '%s' (expected flash or "
                        "materialized)\n",
                        v);
                return -1;
            }
        } else if (IS("--membw")) {
            if (parse_size(v, &a->membw_bytes)) {
                fprintf(stderr,
                        "inferno bench: --membw: bad size '%s' (expected e.g. 1G, 1536M, or a "
                        "number of GiB)\n",
                        v);
                return -1;
            }
            if (a->membw_bytes < INF_MEMBW_MIN_BYTES) {
                fprintf(stderr,
                        "inferno bench: --membw: %s is less than 1 GiB; the buffer must be far "
                        "larger than the caches (e.g. --membw 1G)\n",
                        v);
                return -1;
            }
            size_t avail = inf_mem_available();
            if (avail && a->membw_bytes > avail / 10 * 9) {
                fprintf(stderr,
                        "inferno bench: --membw: %s is more than the %.1f GiB of memory "
                        "available (take at most 90%% of it)\n",
                        v, (double)avail / (1024.0 * 1024 * 1024));
                return -1;
            }
        } else if (IS("-r") || IS("--repetitions"))
            bad = (a->reps = atoi(v)) < 1;
        else if (IS("-b") || IS("--batch-size"))
            bad = (a->n_batch = atoi(v)) < 1;
        else if (IS("-o") || IS("--output")) {
            a->output = v;
            bad = strcmp(v, "md") && strcmp(v, "json");
        } else {
            fprintf(stderr, "inferno bench: unknown option '%s' (see --help)\n", f);
            return -1;
        }
#undef IS
        if (bad) {
            fprintf(stderr, "inferno bench: bad value '%s' for %s\n", v, f);
            return -1;
        }
    }
    return 0;
}

/* ---- model facts ---- */

typedef struct model_facts {
    char type[64]; /* "qwen3 0.6B BF16" */
    uint64_t size; /* bytes of all tensors */
    uint64_t n_params;
    uint64_t decode_bytes; /* weight bytes one decode step reads */
} model_facts;

static void model_facts_get(const inf_model_file *mf, model_facts *mfx) {
    memset(mfx, 0, sizeof *mfx);
    for (int i = 0; i < mf->n_tensors; i++) {
        const inf_tensor *t = &mf->tensors[i];
        uint64_t ne = 1;
        for (int d = 0; d < t->n_dims; d++)
            ne *= (uint64_t)t->ne[d];
        mfx->n_params += ne;
        mfx->size += t->nbytes;
    }
    inf_model_facts facts;
    inf_model_facts_get(mf, &facts);
    mfx->decode_bytes = facts.decode_bytes;
    const inf_dtype_info *ti = inf_dtype_get(facts.ffn_type);
    double b = (double)mfx->n_params / 1e9;
    char label[16];
    if (b < 1)
        snprintf(label, sizeof label, "%.1fB", b);
    else
        snprintf(label, sizeof label, "%.0fB", b);
    snprintf(mfx->type, sizeof mfx->type, "%s %s %s", mf->arch ? mf->arch : "qwen3",
             b < 0.05 ? "tiny" : label, ti ? ti->name : "?");
}

/* ---- timing ---- */

typedef struct sample_set {
    int n;
    double ns[64];
} sample_set;

static void stats(const sample_set *s, int tokens, double *avg_ts, double *sd_ts, double *avg_ns,
                  double *sd_ns) {
    double m = 0, mn = 0;
    for (int i = 0; i < s->n; i++)
        m += tokens / (s->ns[i] * 1e-9), mn += s->ns[i];
    m /= s->n;
    mn /= s->n;
    double v = 0, vn = 0;
    for (int i = 0; i < s->n; i++) {
        double d = tokens / (s->ns[i] * 1e-9) - m;
        v += d * d;
        vn += (s->ns[i] - mn) * (s->ns[i] - mn);
    }
    *avg_ts = m;
    *sd_ts = s->n > 1 ? sqrt(v / (s->n - 1)) : 0;
    *avg_ns = mn;
    *sd_ns = s->n > 1 ? sqrt(vn / (s->n - 1)) : 0;
}

static uint32_t g_rng = 12345;
static int32_t rand_token(int n_vocab) {
    g_rng = g_rng * 1103515245u + 12345u;
    return (int32_t)((g_rng >> 8) % (uint32_t)(n_vocab < 32000 ? n_vocab : 32000));
}

/* Runs prompt[0..n) (owned) through the engine as one task, greedy, reusing
 * no cached prefix, generating max_tokens; the task's timings out. */
static int run_task_reuse(inf_engine *e, int32_t *prompt, int n, int max_tokens, bool reuse,
                          inf_timings *tm, inf_err *err) {
    inf_gen_params p = inf_gen_defaults();
    p.sampling.temp = 0;
    p.max_tokens = max_tokens;
    p.ignore_eos = true;
    p.no_reuse = !reuse;
    inf_task *t = inf_engine_submit(e, prompt, n, &p, err);
    if (!t) return -1;
    int rc = inf_engine_wait(e, t, NULL, NULL, err);
    *tm = t->timings;
    inf_task_release(t);
    return rc;
}

static int run_task(inf_engine *e, int32_t *prompt, int n, int max_tokens, inf_timings *tm,
                    inf_err *err) {
    return run_task_reuse(e, prompt, n, max_tokens, false, tm, err);
}

static int32_t *rand_tokens(int n, int n_vocab) {
    int32_t *t = malloc((size_t)n * sizeof *t);
    for (int i = 0; t && i < n; i++)
        t[i] = rand_token(n_vocab);
    return t;
}

/* The depth's tokens: the same every repetition, so a repetition finds all
 * but the last of them still in the cache (prefilled once, untimed). */
static void depth_tokens(int32_t *t, int n, int n_vocab) {
    uint32_t r = 99991;
    for (int i = 0; i < n; i++) {
        r = r * 1103515245u + 12345u;
        t[i] = (int32_t)((r >> 8) % (uint32_t)(n_vocab < 32000 ? n_vocab : 32000));
    }
}

/* ppN: prefill N random tokens into an empty cache (the time to the first
 * token: the prefill and one pick from its logits). At depth D: D tokens in
 * the cache first (untimed), then a prompt of those D and N random ones that
 * reuses them, so only the N are prefilled (and timed). */
static int run_pp(inf_engine *e, int n_prompt, int depth, uint64_t *ns, inf_err *err) {
    int32_t *toks = rand_tokens(depth + n_prompt, e->ex.n_vocab);
    if (!toks) return inf_fail(err, "out of memory");
    inf_timings tm;
    if (depth > 0) {
        int32_t *head = malloc((size_t)depth * sizeof *head);
        if (!head) {
            free(toks);
            return inf_fail(err, "out of memory");
        }
        depth_tokens(head, depth, e->ex.n_vocab);
        memcpy(toks, head, (size_t)depth * sizeof *head);
        if (run_task_reuse(e, head, depth, 1, true, &tm, err)) {
            free(toks);
            return -1;
        }
        if (run_task_reuse(e, toks, depth + n_prompt, 1, true, &tm, err)) return -1;
        if (tm.cache_n < depth)
            return inf_fail(err, "pp%d @ d%d: only %d of the %d tokens of depth were reused",
                            n_prompt, depth, tm.cache_n, depth);
    } else if (run_task(e, toks, n_prompt, 1, &tm, err))
        return -1;
    *ns = (uint64_t)(tm.prompt_ms * 1e6);
    return 0;
}

/* tgN: N single-token decode steps after a one-token prompt, the depth's D
 * tokens at depth D, or --tg-prompt's text (the time from the first sampled
 * token to the last: N forward calls and picks; fewer when drafts are taken,
 * and *drafted, *taken count them) */
static int run_tg(inf_engine *e, int n_gen, int depth, const int32_t *text, int n_text,
                  uint64_t *ns, int *drafted, int *taken, int *steps, inf_err *err) {
    int n = text ? n_text : depth > 0 ? depth : 1;
    int32_t *toks = malloc((size_t)n * sizeof *toks);
    if (!toks) return inf_fail(err, "out of memory");
    if (text)
        memcpy(toks, text, (size_t)n * sizeof *toks);
    else if (depth > 0)
        depth_tokens(toks, n, e->ex.n_vocab);
    else
        toks[0] = rand_token(e->ex.n_vocab);
    inf_timings tm;
    if (run_task_reuse(e, toks, n, n_gen + 1, depth > 0 && !text, &tm, err)) return -1;
    *ns = (uint64_t)(tm.predicted_ms * 1e6);
    *drafted += tm.draft_n;
    *taken += tm.draft_accepted;
    *steps += tm.draft_steps;
    return 0;
}

/* One forward call of n decode rows of slot 0 at positions 0..n-1 (a
 * speculative step's verification: the pending token and n - 1 drafts, each
 * row computed as a decode step), called with the scheduler idle. */
static int run_verify(inf_engine *e, int n, uint64_t *ns, inf_err *err) {
    int32_t tok[INF_SPEC_MAX_DRAFT + 1], pos[INF_SPEC_MAX_DRAFT + 1], seq[INF_SPEC_MAX_DRAFT + 1];
    uint8_t want[INF_SPEC_MAX_DRAFT + 1], dec[INF_SPEC_MAX_DRAFT + 1];
    if (n < 1 || n > INF_SPEC_MAX_DRAFT + 1 || n > e->ex.max_rows)
        return inf_fail(err, "--verify %d: expected 1..%d rows", n,
                        INF_SPEC_MAX_DRAFT + 1 < e->ex.max_rows ? INF_SPEC_MAX_DRAFT + 1
                                                                : e->ex.max_rows);
    inf_kv_cache_reset(e->kv, 0);
    if (inf_kv_cache_reserve(e->kv, 0, n, err)) return -1;
    for (int i = 0; i < n; i++) {
        tok[i] = rand_token(e->ex.n_vocab);
        pos[i] = i, seq[i] = 0, want[i] = INF_OUT_LOGITS, dec[i] = 1;
    }
    float *logits = malloc((size_t)n * (size_t)e->ex.n_vocab * sizeof *logits);
    if (!logits) return inf_fail(err, "out of memory");
    inf_batch b = {
        .n_rows = n, .tokens = tok, .pos = pos, .seq = seq, .logits = want, .decode = dec};
    uint64_t t0 = inf_now_ns();
    int rc = inf_model_forward(e->model, &b, e->kv->views, e->kv->n_seq, logits, err);
    *ns = inf_now_ns() - t0;
    free(logits);
    inf_kv_cache_reset(e->kv, 0);
    return rc;
}

/* deterministic English-like text of about n_tokens tokens, tokenized and cut to n_tokens */
static int make_prompt(const inf_tokenizer *tok, int n_tokens, int32_t **ids, int *n_ids,
                       inf_err *err) {
    static const char *const words[] = {
        "the",       "engine",   "reads",    "every",       "weight",  "once",      "per",
        "step",      "and",      "a",        "cache",       "holds",   "keys",      "values",
        "for",       "each",     "layer",    "while",       "tokens",  "flow",      "through",
        "attention", "which",    "mixes",    "information", "across",  "positions", "in",
        "order",     "to",       "predict",  "next",        "word",    "of",        "story",
        "about",     "river",    "mountain", "small",       "village", "where",     "people",
        "build",     "machines", "that",     "think",       "quietly"};
    size_t nw = sizeof words / sizeof *words, cap = (size_t)n_tokens * 12 + 64, len = 0;
    char *text = malloc(cap);
    if (!text) return inf_fail(err, "out of memory");
    uint32_t r = 7;
    for (int w = 0; len + 16 < cap && w < n_tokens * 2; w++) {
        r = r * 1664525u + 1013904223u;
        const char *word = words[(r >> 10) % nw];
        len += (size_t)snprintf(text + len, cap - len, "%s%s",
                                w ? ((r >> 20) % 9 == 0 ? ". " : " ") : "", word);
    }
    int rc = inf_tok_encode(tok, text, len, false, ids, n_ids, err);
    free(text);
    if (rc) return -1;
    if (*n_ids < n_tokens) return inf_fail(err, "prompt generator made only %d tokens", *n_ids);
    *n_ids = n_tokens;
    return 0;
}

/* ---- output ---- */

typedef struct row {
    const char *model_filename;
    const model_facts *mfx;
    char backend[48];
    int threads, n_prompt, n_gen, n_depth;
    inf_dtype type_k, type_v;
    double kv_bytes; /* K/V the test's cache holds at its end */
    double avg_ts, sd_ts, avg_ns, sd_ns;
    sample_set samples;
    double step_bytes;         /* tgN with --membw: weight + K/V bytes one decode step reads */
    double membw_gbs;          /* tgN with --membw: the mean of bw[] (before any rep: the
                                  bandwidth measured first at the row's thread count) */
    double bw[64];             /* tgN with --membw: the bandwidth read right after each
                                  timed repetition (samples.ns[i] pairs with bw[i]) */
    int drafted, taken, steps; /* tgN speculating, over the timed repetitions: drafts, of those
                                  taken, and the steps that verified them */
} row;

static void print_md_header(bool roof) {
    printf("| %-30s | %10s | %10s | %-16s | %7s | %9s | %10s | %15s | %20s |%s\n", "model", "size",
           "params", "backend", "threads", "K/V", "K/V MiB", "test", "t/s",
           roof ? "           roof |" : "");
    printf(
        "| ------------------------------ | ---------: | ---------: | ---------------- | ------: | "
        "--------: | ---------: | --------------: | -------------------: |%s\n",
        roof ? " -------------: |" : "");
}

/* the share of the read roof repetition i of a tgN row reached */
static double rep_share(const row *r, int i) {
    return r->step_bytes * (r->n_gen / (r->samples.ns[i] * 1e-9)) / (r->bw[i] * 1e9);
}

/* the share of the read roof a tgN row's decode reached, the mean over its
 * repetitions of each one's share of the roof read just after it (so a host
 * whose bandwidth swings between tests still gives a share of the moment);
 * < 0 when it has none */
static double roof_share(const row *r) {
    if (r->n_gen == 0 || !(r->membw_gbs > 0) || r->samples.n == 0) return -1;
    double m = 0;
    for (int i = 0; i < r->samples.n; i++)
        m += rep_share(r, i);
    return m / r->samples.n;
}

/* the standard deviation of the repetitions' shares (0 with one) */
static double roof_share_sd(const row *r) {
    double m = roof_share(r), v = 0;
    for (int i = 0; i < r->samples.n; i++)
        v += (rep_share(r, i) - m) * (rep_share(r, i) - m);
    return r->samples.n > 1 ? sqrt(v / (r->samples.n - 1)) : 0;
}

static void print_md_row(const row *r) {
    char size[32], params[32], test[32], ts[48];
    snprintf(size, sizeof size, "%.2f GiB", (double)r->mfx->size / (1024.0 * 1024 * 1024));
    if (r->mfx->size < (1ull << 30))
        snprintf(size, sizeof size, "%.2f MiB", (double)r->mfx->size / (1024.0 * 1024));
    snprintf(params, sizeof params, "%.2f M", (double)r->mfx->n_params / 1e6);
    if (r->n_gen == 0)
        snprintf(test, sizeof test, "pp%d", r->n_prompt);
    else
        snprintf(test, sizeof test, "tg%d", r->n_gen);
    if (r->n_depth > 0) {
        size_t l = strlen(test);
        snprintf(test + l, sizeof test - l, " @ d%d", r->n_depth);
    }
    if (r->drafted > 0) {
        size_t l = strlen(test);
        snprintf(test + l, sizeof test - l, " %.0f%% taken", 100.0 * r->taken / r->drafted);
    }
    char types[32];
    snprintf(types, sizeof types, "%s/%s", inf_kv_type_name(r->type_k),
             inf_kv_type_name(r->type_v));
    snprintf(ts, sizeof ts, "%.2f ± %.2f", r->avg_ts, r->sd_ts);
    char roof[40] = "";
    if (roof_share(r) >= 0)
        snprintf(roof, sizeof roof, " %5.1f ± %4.1f %% |", 100 * roof_share(r),
                 100 * roof_share_sd(r));
    else if (r->membw_gbs != 0)
        snprintf(roof, sizeof roof, " %14s |", "");
    printf("| %-30s | %10s | %10s | %-16s | %7d | %9s | %10.1f | %15s | %20s |%s\n", r->mfx->type,
           size, params, r->backend, r->threads, types, r->kv_bytes / (1024.0 * 1024.0), test, ts,
           roof);
    fflush(stdout);
}

static json_t *row_json(const row *r, const bench_args *a) {
    char cpu[64];
    snprintf(cpu, sizeof cpu, "x86-64/aarch64 CPU, isa %s", inf_isa_name(inf_isa_default()));
    time_t now = time(NULL);
    char ts[64];
    strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    json_t *o = json_object();
    json_object_set_new(o, "build_commit", json_string("inferno"));
    json_object_set_new(o, "build_number", json_integer(0));
    json_object_set_new(o, "cpu_info", json_string(cpu));
    json_object_set_new(o, "gpu_info", json_string(""));
    json_object_set_new(o, "backends", json_string(r->backend));
    json_object_set_new(o, "model_filename", json_string(r->model_filename));
    json_object_set_new(o, "model_type", json_string(r->mfx->type));
    json_object_set_new(o, "model_size", json_integer((json_int_t)r->mfx->size));
    json_object_set_new(o, "model_n_params", json_integer((json_int_t)r->mfx->n_params));
    json_object_set_new(o, "n_batch", json_integer(a->n_batch));
    json_object_set_new(o, "n_ubatch", json_integer(a->n_batch));
    json_object_set_new(o, "n_threads", json_integer(r->threads));
    json_object_set_new(o, "type_k", json_string(inf_kv_type_name(r->type_k)));
    json_object_set_new(o, "type_v", json_string(inf_kv_type_name(r->type_v)));
    json_object_set_new(o, "n_depth", json_integer(r->n_depth));
    json_object_set_new(o, "kv_bytes", json_integer((json_int_t)r->kv_bytes));
    json_object_set_new(o, "n_gpu_layers", json_integer(0));
    json_object_set_new(o, "flash_attn", json_true());
    json_object_set_new(o, "use_mmap", json_true());
    json_object_set_new(o, "n_prompt", json_integer(r->n_prompt));
    json_object_set_new(o, "n_gen", json_integer(r->n_gen));
    json_object_set_new(o, "test_time", json_string(ts));
    json_object_set_new(o, "avg_ns", json_integer((json_int_t)r->avg_ns));
    json_object_set_new(o, "stddev_ns", json_integer((json_int_t)r->sd_ns));
    json_object_set_new(o, "avg_ts", json_real(r->avg_ts));
    json_object_set_new(o, "stddev_ts", json_real(r->sd_ts));
    json_t *sn = json_array(), *st = json_array();
    int tokens = r->n_gen ? r->n_gen : r->n_prompt;
    for (int i = 0; i < r->samples.n; i++) {
        json_array_append_new(sn, json_integer((json_int_t)r->samples.ns[i]));
        json_array_append_new(st, json_real(tokens / (r->samples.ns[i] * 1e-9)));
    }
    json_object_set_new(o, "samples_ns", sn);
    json_object_set_new(o, "samples_ts", st);
    if (r->drafted > 0) {
        json_object_set_new(o, "draft_n", json_integer(r->drafted));
        json_object_set_new(o, "draft_n_accepted", json_integer(r->taken));
        json_object_set_new(o, "draft_steps", json_integer(r->steps));
    }
    if (roof_share(r) >= 0) {
        json_object_set_new(o, "step_bytes", json_integer((json_int_t)r->step_bytes));
        json_object_set_new(o, "membw_gbs", json_real(r->membw_gbs));
        json_object_set_new(o, "roof_share", json_real(roof_share(r)));
        json_object_set_new(o, "roof_share_sd", json_real(roof_share_sd(r)));
        json_t *sb = json_array();
        for (int i = 0; i < r->samples.n; i++)
            json_array_append_new(sb, json_real(r->bw[i]));
        json_object_set_new(o, "samples_membw_gbs", sb);
    }
    return o;
}

/* the level whose read kernel --membw uses: --isa's, or the CPU's best */
static inf_isa membw_isa(const bench_args *a) {
    inf_isa isa = inf_isa_default();
    if (a->isa && inf_isa_parse(a->isa, &isa)) isa = inf_isa_default();
    return isa;
}

/* --membw's reads, in a child process started before any model loads, so
 * that its buffer (1 GiB or more) stays out of the peak memory (max RSS) the
 * bench reports. The child maps and fills the buffer once and keeps it for
 * every read: a fork of the loaded engine and a fresh 1 GiB before each
 * repetition made the decode timed next 5-10 % slower on a 2-core VM. The
 * parent asks over one pipe and reads the answer from another; the child
 * ends when the request pipe closes. */
typedef struct membw_helper {
    pid_t pid;
    int req, resp; /* the parent's ends; -1 when closed */
} membw_helper;

typedef struct membw_ask {
    int threads, passes;
    inf_isa isa;
} membw_ask;

typedef struct membw_answer {
    int rc;
    inf_membw m;
    inf_err e;
} membw_answer;

static bool read_full(int fd, void *p, size_t n) {
    size_t got = 0;
    ssize_t r;
    while (got < n && ((r = read(fd, (char *)p + got, n - got)) > 0 || (r < 0 && errno == EINTR)))
        got += r > 0 ? (size_t)r : 0;
    return got == n;
}

static void membw_child(int req, int resp, size_t bytes, int fill_threads) {
    membw_answer ans;
    memset(&ans, 0, sizeof ans);
    inf_membw_buf *buf = NULL;
    ans.rc = inf_membw_buf_open(&buf, bytes, fill_threads, &ans.e);
    membw_ask ask;
    while (read_full(req, &ask, sizeof ask)) {
        if (buf) ans.rc = inf_membw_buf_read(buf, &ans.m, ask.threads, ask.passes, ask.isa, &ans.e);
        if (write(resp, &ans, sizeof ans) != (ssize_t)sizeof ans) break;
    }
    inf_membw_buf_close(buf);
    _exit(0);
}

static void membw_helper_stop(membw_helper *h) {
    if (h->req >= 0) close(h->req);
    if (h->resp >= 0) close(h->resp);
    h->req = h->resp = -1;
    int status;
    if (h->pid > 0)
        while (waitpid(h->pid, &status, 0) < 0 && errno == EINTR) {
        }
    h->pid = 0;
}

static int membw_helper_start(membw_helper *h, size_t bytes, int fill_threads, inf_err *err) {
    *h = (membw_helper){.pid = 0, .req = -1, .resp = -1};
    int rq[2], rs[2];
    if (pipe(rq)) return inf_fail(err, "--membw: pipe: %s", strerror(errno));
    if (pipe(rs)) {
        close(rq[0]);
        close(rq[1]);
        return inf_fail(err, "--membw: pipe: %s", strerror(errno));
    }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        close(rq[0]), close(rq[1]), close(rs[0]), close(rs[1]);
        return inf_fail(err, "--membw: fork: %s", strerror(errno));
    }
    if (pid == 0) {
        close(rq[1]);
        close(rs[0]);
        membw_child(rq[0], rs[1], bytes, fill_threads);
    }
    close(rq[0]);
    close(rs[1]);
    *h = (membw_helper){.pid = pid, .req = rq[1], .resp = rs[0]};
    return 0;
}

static int membw_helper_read(membw_helper *h, inf_membw *m, int threads, int passes, inf_isa isa,
                             inf_err *err) {
    membw_ask ask = {.threads = threads, .passes = passes, .isa = isa};
    membw_answer ans;
    /* a child that died must give this error, not kill the bench by SIGPIPE */
    struct sigaction ign = {.sa_handler = SIG_IGN}, old;
    sigaction(SIGPIPE, &ign, &old);
    bool sent = h->req >= 0 && write(h->req, &ask, sizeof ask) == (ssize_t)sizeof ask;
    sigaction(SIGPIPE, &old, NULL);
    if (!sent || !read_full(h->resp, &ans, sizeof ans))
        return inf_fail(err, "--membw: the measuring process ended without a result");
    if (ans.rc) {
        *err = ans.e;
        return -1;
    }
    *m = ans.m;
    return 0;
}

/* ---- one model x backend x threads ---- */

static int bench_one(const bench_args *a, const char *path, const char *backend, int threads,
                     inf_dtype type_k, inf_dtype type_v, membw_helper *mh, double membw_gbs,
                     json_t *jrows, json_t *jttft, inf_err *err) {
    int max_p = 0, max_n = 0, max_d = 0;
    for (int i = 0; i < a->depths.n; i++)
        max_d = a->depths.v[i] > max_d ? a->depths.v[i] : max_d;
    for (int i = 0; i < a->prompts.n; i++)
        max_p = a->prompts.v[i] > max_p ? a->prompts.v[i] : max_p;
    for (int i = 0; i < a->gens.n; i++)
        max_n = a->gens.v[i] > max_n ? a->gens.v[i] : max_n;
    /* ppN is a prompt of N with one sampled token; tgN a one-token prompt and N more. */
    int n_ctx = max_d + (max_p + 1 > max_n + 2 ? max_p + 1 : max_n + 2);
    if (a->ttft && n_ctx < 2044 + 40) n_ctx = 2044 + 40;
    /* --tg-prompt: a token is at least a byte, and the BOS one more */
    char *raw = NULL;
    size_t raw_len = 0;
    if (a->tg_prompt && inf_read_file(&raw, &raw_len, a->tg_prompt, 1u << 20, err))
        return inf_fail_ctx(err, "--tg-prompt");
    if (raw && n_ctx < (int)raw_len + max_n + 3) n_ctx = (int)raw_len + max_n + 3;
    n_ctx = (n_ctx + 255) & ~255;
    int rc = -1;
    inf_engine_opts eo = {.model_path = path,
                          .backend = {.name = backend,
                                      .n_threads = threads,
                                      .isa = a->isa,
                                      .trace = a->trace,
                                      .attn = a->attn},
                          .n_seq = 1,
                          .n_ctx = n_ctx,
                          .n_batch = a->n_batch,
                          .kv = {.type_k = type_k, .type_v = type_v},
                          .pack = a->pack,
                          .pack_dir = a->pack_dir};
    spec_flags_apply(&a->spec, &eo);
    inf_engine *e = NULL;
    int32_t *text = NULL;
    int n_text = 0;
    if (inf_engine_open(&e, &eo, err)) {
        free(raw);
        return -1;
    }
    if (raw && inf_engine_tokenize(e, raw, raw_len, false, &text, &n_text, err)) {
        inf_fail_ctx(err, "--tg-prompt %s", a->tg_prompt);
        goto done;
    }
    if (raw && n_text < 1) {
        inf_fail(err, "--tg-prompt %s: the text makes no tokens (an empty file?)", a->tg_prompt);
        goto done;
    }
    if (e->pack_note[0]) fprintf(stderr, "bench: %s\n", e->pack_note);
    const inf_model_file *mf = e->mf;
    model_facts facts, *mfx = &facts;
    model_facts_get(mf, mfx);
    const char *desc = e->backend_name;
    fprintf(stderr, "bench: %s on %s, opened and weights prepared in %.2f s\n", path, desc,
            e->t_load_s);
    const double tok_bytes = (double)inf_kv_cache_token_bytes(e->kv);
    for (int pass = 0; pass < 2; pass++) {
        const int_list *l = pass == 0 ? &a->prompts : &a->gens;
        for (int i = 0; i < l->n * a->depths.n; i++) {
            int n = l->v[i / a->depths.n], depth = a->depths.v[i % a->depths.n];
            if (n == 0) continue;
            row r = {.model_filename = path,
                     .mfx = mfx,
                     .threads = threads,
                     .n_prompt = pass == 0 ? n : 0,
                     .n_gen = pass == 1 ? n : 0,
                     .n_depth = depth,
                     .type_k = type_k,
                     .type_v = type_v,
                     .kv_bytes = tok_bytes * (depth + (pass == 0 ? n : n + 1))};
            if (a->membw_bytes) {
                /* decode step i of n reads the weights and the K/V of the prompt
                 * (depth, or one token) and i tokens: on average (n + 1) / 2 */
                double held = (depth > 0 ? depth : 1) + (n + 1) / 2.0;
                r.step_bytes = (double)mfx->decode_bytes + tok_bytes * held;
                r.membw_gbs = membw_gbs > 0 ? membw_gbs : -1;
            }
            snprintf(r.backend, sizeof r.backend, "%s", desc);
            char *sp_ = strstr(r.backend, " (traced)");
            if (sp_) *sp_ = 0;
            for (int rep = -1; rep < a->reps && rep < 63; rep++) {
                uint64_t ns = 0;
                int drafted = 0, taken = 0, steps = 0;
                if ((pass == 0
                         ? run_pp(e, n, depth, &ns, err)
                         : run_tg(e, n, depth, text, n_text, &ns, &drafted, &taken, &steps, err)))
                    goto done;
                if (rep >= 0 && pass == 1 && r.membw_gbs > 0) { /* the roof of this moment */
                    inf_membw m = {0};
                    if (membw_helper_read(mh, &m, threads, 2, membw_isa(a), err)) goto done;
                    r.bw[r.samples.n] = m.gbs;
                }
                if (rep >= 0) r.samples.ns[r.samples.n++] = (double)ns;
                if (rep >= 0) r.drafted += drafted, r.taken += taken, r.steps += steps;
            }
            if (pass == 1 && r.membw_gbs > 0 && r.samples.n > 0) {
                r.membw_gbs = 0;
                for (int k = 0; k < r.samples.n; k++)
                    r.membw_gbs += r.bw[k] / r.samples.n;
            }
            stats(&r.samples, n, &r.avg_ts, &r.sd_ts, &r.avg_ns, &r.sd_ns);
            if (!strcmp(a->output, "md"))
                print_md_row(&r);
            else
                json_array_append_new(jrows, row_json(&r, a));
        }
    }
    double one_row = 0;
    for (int i = 0; i < a->verify.n; i++) {
        int n = a->verify.v[i];
        if (n == 0) continue;
        sample_set ss = {0};
        for (int rep = -1; rep < a->reps && rep < 63; rep++) {
            uint64_t ns = 0;
            if (run_verify(e, n, &ns, err)) goto done;
            if (rep >= 0) ss.ns[ss.n++] = (double)ns;
        }
        double ts, sd_ts, avg_ns, sd_ns;
        stats(&ss, n, &ts, &sd_ts, &avg_ns, &sd_ns);
        if (n == 1) one_row = avg_ns;
        if (!strcmp(a->output, "md")) {
            if (i == 0)
                printf("\n| %-30s | %-16s | %7s | %13s | %16s | %13s |\n"
                       "| ------------------------------ | ---------------- | ------: | "
                       "------------: | ---------------: | ------------: |\n",
                       "model", "backend", "threads", "verify rows", "ms per call", "x one row");
            char rel[24] = "";
            if (one_row > 0) snprintf(rel, sizeof rel, "%.3f", avg_ns / one_row);
            printf("| %-30s | %-16s | %7d | %13d | %9.2f ± %4.2f | %13s |\n", mfx->type, desc,
                   threads, n, avg_ns * 1e-6, sd_ns * 1e-6, rel);
            fflush(stdout);
        } else {
            json_t *jo = json_object();
            json_object_set_new(jo, "model_filename", json_string(path));
            json_object_set_new(jo, "n_threads", json_integer(threads));
            json_object_set_new(jo, "verify_rows", json_integer(n));
            json_object_set_new(jo, "avg_ns", json_integer((json_int_t)avg_ns));
            json_object_set_new(jo, "stddev_ns", json_integer((json_int_t)sd_ns));
            json_array_append_new(jrows, jo);
        }
    }
    if (a->ttft) {
        static const int lens[] = {17, 511, 2044};
        const int n_dec = 32;
        for (int i = 0; i < 3; i++) {
            int32_t *ids;
            int n_ids;
            if (make_prompt(e->tok, lens[i], &ids, &n_ids, err)) goto done;
            double ttft = 0, dec_s = 0;
            int reps = a->reps < 3 ? a->reps : 3;
            for (int rep = -1; rep < reps; rep++) {
                int32_t *copy = malloc((size_t)n_ids * sizeof *copy);
                if (!copy) {
                    free(ids);
                    inf_fail(err, "out of memory");
                    goto done;
                }
                memcpy(copy, ids, (size_t)n_ids * sizeof *copy);
                inf_timings tm;
                if (run_task(e, copy, n_ids, n_dec + 1, &tm, err)) {
                    free(ids);
                    goto done;
                }
                if (rep >= 0) {
                    ttft += tm.prompt_ms * 1e-3 / reps;
                    dec_s += tm.predicted_ms * 1e-3 / reps;
                }
            }
            free(ids);
            double depth = n_ids + n_dec / 2.0;
            double kv_bytes = tok_bytes * depth;
            double per_tok = dec_s / n_dec;
            double gbs = ((double)mfx->decode_bytes + kv_bytes) / per_tok / 1e9;
            if (!strcmp(a->output, "md")) {
                if (i == 0)
                    printf(
                        "\n| %-30s | %-16s | %7s | %13s | %12s | %15s | %19s | %12s |\n"
                        "| ------------------------------ | ---------------- | ------: | "
                        "------------: | "
                        "-----------: | --------------: | ------------------: | -----------: |\n",
                        "model", "backend", "threads", "prompt tokens", "TTFT ms", "prefill tok/s",
                        "decode tok/s @depth", "decode GB/s");
                printf("| %-30s | %-16s | %7d | %13d | %12.1f | %15.1f | %19.2f | %12.1f |\n",
                       mfx->type, desc, threads, n_ids, ttft * 1e3, n_ids / ttft, 1.0 / per_tok,
                       gbs);
                fflush(stdout);
            } else {
                json_t *jo = json_object();
                json_object_set_new(jo, "model_filename", json_string(path));
                json_object_set_new(jo, "model_type", json_string(mfx->type));
                json_object_set_new(jo, "backends", json_string(desc));
                json_object_set_new(jo, "n_threads", json_integer(threads));
                json_object_set_new(jo, "n_prompt", json_integer(n_ids));
                json_object_set_new(jo, "ttft_ms", json_real(ttft * 1e3));
                json_object_set_new(jo, "decode_ts_at_depth", json_real(1.0 / per_tok));
                json_object_set_new(jo, "decode_gbs", json_real(gbs));
                json_array_append_new(jttft, jo);
            }
        }
    }
    if (a->trace && inf_trace_is(e->be)) {
        static char hist[8192];
        inf_trace_format(e->be, hist, sizeof hist);
        fprintf(stderr, "\n%s: %s\n%s\n", path, desc, hist);
    }
    rc = 0;
done:
    free(raw);
    free(text);
    inf_engine_close(e);
    return rc;
}

int cmd_bench(int argc, char **argv) {
    bench_args a;
    int pr = parse_args(&a, argc, argv);
    if (pr) return pr > 0 ? 0 : 2;
    if (spec_flags_check(&a.spec, "bench")) return 2;
    inf_err err;
    json_t *jrows = json_array(), *jttft = json_array(), *jmembw = json_array();
    bool md = !strcmp(a.output, "md");
    /* --membw: the read roof at each thread count the tests use (the pool's -t
     * list; 1 for the simd and scalar backends) */
    int_list bw_threads = {0};
    double bw_gbs[MAX_LIST + 1];
    membw_helper mh = {.pid = 0, .req = -1, .resp = -1};
    int fill_threads = 1;
    for (int ti = 0; ti < a.threads.n; ti++)
        fill_threads = a.threads.v[ti] > fill_threads ? a.threads.v[ti] : fill_threads;
    if (a.membw_bytes && membw_helper_start(&mh, a.membw_bytes, fill_threads, &err)) {
        fprintf(stderr, "inferno bench: %s\n", err.msg);
        json_decref(jrows);
        json_decref(jttft);
        json_decref(jmembw);
        return 1;
    }
    for (int bi = 0; a.membw_bytes && bi < a.backends.n; bi++) {
        bool pool = !strcmp(a.backends.v[bi], "pool");
        for (int ti = 0; ti < (pool ? a.threads.n : 1); ti++) {
            int t = pool ? a.threads.v[ti] : 1, seen = 0;
            for (int k = 0; k < bw_threads.n; k++)
                seen |= bw_threads.v[k] == t;
            if (seen || bw_threads.n == MAX_LIST) continue;
            inf_membw m = {0};
            if (membw_helper_read(&mh, &m, t, a.reps, membw_isa(&a), &err)) {
                fprintf(stderr, "inferno bench: %s\n", err.msg);
                membw_helper_stop(&mh);
                json_decref(jrows);
                json_decref(jttft);
                json_decref(jmembw);
                return 1;
            }
            bw_gbs[bw_threads.n] = m.gbs;
            bw_threads.v[bw_threads.n++] = t;
            char huge[48] = "";
            if (m.huge_share >= 0)
                snprintf(huge, sizeof huge, ", %.0f %% in 2 MiB pages", 100 * m.huge_share);
            if (md) {
                printf("memory read: %.1f GB/s (%d thread%s, %.3g GiB, best of %d, %s%s)\n", m.gbs,
                       t, t == 1 ? "" : "s", (double)m.bytes / (1024.0 * 1024 * 1024), m.passes,
                       inf_isa_name(m.isa), huge);
            } else {
                json_t *jo = json_object();
                json_object_set_new(jo, "n_threads", json_integer(t));
                json_object_set_new(jo, "bytes", json_integer((json_int_t)m.bytes));
                json_object_set_new(jo, "passes", json_integer(m.passes));
                json_object_set_new(jo, "isa", json_string(inf_isa_name(m.isa)));
                json_object_set_new(jo, "huge_page_share", json_real(m.huge_share));
                json_object_set_new(jo, "gbs", json_real(m.gbs));
                json_array_append_new(jmembw, jo);
            }
        }
    }
    if (md && bw_threads.n) printf("\n");
    if (md) print_md_header(a.membw_bytes != 0);
    int status = 0;
    for (int mi = 0; mi < a.models.n && !status; mi++)
        for (int bi = 0; bi < a.backends.n && !status; bi++)
            for (int ti = 0; ti < a.threads.n && !status; ti++)
                for (int ki = 0; ki < a.n_ctk * a.n_ctv && !status; ki++) {
                    bool pool = !strcmp(a.backends.v[bi], "pool");
                    if (!pool && ti > 0) continue; /* -t only matters to the pool */
                    int t = pool ? a.threads.v[ti] : 1;
                    double gbs = 0;
                    for (int k = 0; k < bw_threads.n; k++)
                        if (bw_threads.v[k] == t) gbs = bw_gbs[k];
                    if (bench_one(&a, a.models.v[mi], a.backends.v[bi], t, a.ctk[ki / a.n_ctv],
                                  a.ctv[ki % a.n_ctv], &mh, gbs, jrows, jttft, &err)) {
                        fprintf(stderr, "inferno bench: %s\n", err.msg);
                        status = 1;
                    }
                }
    membw_helper_stop(&mh);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    if (md) {
        printf("\npeak memory (max RSS): %.1f MiB\n", (double)ru.ru_maxrss / 1024.0);
    } else {
        json_t *o = json_object();
        if (a.membw_bytes)
            json_object_set_new(o, "membw", jmembw);
        else
            json_decref(jmembw);
        json_object_set_new(o, "tests", jrows);
        json_object_set_new(o, "ttft", jttft);
        json_object_set_new(o, "peak_rss_bytes", json_integer((json_int_t)ru.ru_maxrss * 1024));
        char *s = json_dumps(o, JSON_INDENT(2));
        if (s) printf("%s\n", s);
        free(s);
        json_decref(o);
        jrows = jttft = NULL;
    }
    if (md) json_decref(jmembw);
    json_decref(jrows);
    json_decref(jttft);
    return status;
}
