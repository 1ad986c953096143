/* A fake engine for the server tests: logits are a hash of the whole token
 * history of a sequence, so any mix-up of positions, sequences or cached
 * prefixes changes the tokens; every forward row is checked against the KV
 * contract (a row at position p needs positions 0..p-1). Tokens: 0..25 are
 * the letters, 26 a space, 40 and 41 the two bytes of "\xC3\xA9", 42 "bc",
 * others "<id>"; 63 ends generation. */
#ifndef TEST_SERVER_FAKE_H
#define TEST_SERVER_FAKE_H

#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <time.h>

#include "runtime/exec.h"
#include "runtime/text.h"

#define V 64 /* vocab */
#define EOG 63
#define MAXSEQ 8
#define MAXCTX 1024
#define FAKE_EMBD 8 /* hidden-state width (make_engine leaves n_embd 0: set it to embed) */

typedef struct fake {
    int n_ctx;
    uint64_t h[MAXSEQ][MAXCTX];  /* rolling hash of tokens 0..p */
    int32_t tok[MAXSEQ][MAXCTX]; /* the tokens held */
    int len[MAXSEQ];             /* positions held */
    /* Statistics, written by the scheduler thread, read after tasks end. */
    int calls, max_decode_rows, mixed_calls, prefill_rows, max_rows_seen;
    int contract_errors;
    int delay_us;     /* per forward call, to let requests overlap */
    int fail_forward; /* the next calls that fail as out of memory */
    int nan_from;     /* > 0: logits at positions >= nan_from are NaN (a broken model) */
    /* The prefix-cache hooks (make_paged): a store of donated sequences and
     * a budget of positions that reserve draws from (-1: unlimited). */
    int n_store;
    int32_t store_tok[4][MAXCTX];
    uint64_t store_h[4][MAXCTX];
    int store_len[4];
    int pool_left, publishes, ends, reserves;
} fake;

static uint64_t mix(uint64_t a, uint64_t b) {
    uint64_t x = a * 0x9E3779B97F4A7C15ull + b + 0x632BE59BD9B4E019ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

static void fake_logits(uint64_t h, float *out) {
    for (int v = 0; v < V; v++)
        out[v] = (float)(mix(h, (uint64_t)v) >> 40) / (float)(1 << 24) * 8;
    out[EOG] -= 2.0f; /* rarer end of generation */
}

/* A hidden state: also a hash of the whole history. */
static void fake_hidden(uint64_t h, float *out) {
    for (int i = 0; i < FAKE_EMBD; i++)
        out[i] = (float)(mix(h, 1000u + (uint64_t)i) >> 40) / (float)(1 << 24) - 0.5f;
}

static int fake_forward(void *ctx, const inf_exec_batch *b, float *logits, inf_err *err) {
    fake *f = ctx;
    int decode_rows = 0, pre_rows = 0, sel = 0, hsel = 0;
    if (f->fail_forward > 0) {
        f->fail_forward--;
        return inf_fail(err, "out of memory: fake scratch for %d rows", b->n_rows);
    }
    for (int r = 0; r < b->n_rows; r++) {
        int s = b->seq[r], p = b->pos[r];
        if (s < 0 || s >= MAXSEQ || p != f->len[s] || p >= f->n_ctx) {
            f->contract_errors++;
            return inf_fail(err, "row %d: seq %d pos %d but the sequence holds %d", r, s, p,
                            s >= 0 && s < MAXSEQ ? f->len[s] : -1);
        }
        f->h[s][p] = mix(p ? f->h[s][p - 1] : 12345, (uint64_t)b->tokens[r]);
        f->tok[s][p] = b->tokens[r];
        f->len[s] = p + 1;
        /* A row is a decode row when it is its sequence's only row in the batch. */
        int same = 0;
        for (int q = 0; q < b->n_rows; q++)
            same += b->seq[q] == s;
        if (same == 1 && b->logits[r])
            decode_rows++;
        else
            pre_rows++;
        if (b->logits[r] == INF_OUT_HIDDEN) {
            fake_hidden(f->h[s][p], b->hidden + (size_t)hsel++ * FAKE_EMBD);
        } else if (b->logits[r]) {
            fake_logits(f->h[s][p], logits + (size_t)sel * V);
            if (f->nan_from > 0 && p >= f->nan_from) logits[(size_t)sel * V + V / 2] = NAN;
            sel++;
        }
    }
    if (f->delay_us) {
        struct timespec ts = {0, f->delay_us * 1000L};
        nanosleep(&ts, NULL);
    }
    f->calls++;
    f->prefill_rows += pre_rows;
    if (decode_rows > f->max_decode_rows) f->max_decode_rows = decode_rows;
    if (decode_rows && pre_rows) f->mixed_calls++;
    if (b->n_rows > f->max_rows_seen) f->max_rows_seen = b->n_rows;
    return 0;
}

/* Without the prefix-cache hooks (make_engine) a sequence keeps its own
 * tokens across requests, as the basic cache does. */
static int fake_own_match(fake *f, int seq, const int32_t *prompt, int n) {
    int k = 0;
    while (k < f->len[seq] && k < n && f->tok[seq][k] == prompt[k])
        k++;
    return k;
}
static int fake_match(void *ctx, int seq, const int32_t *prompt, int n) {
    return fake_own_match(ctx, seq, prompt, n);
}
static int fake_begin(void *ctx, int seq, const int32_t *prompt, int n, int max_keep) {
    fake *f = ctx;
    int k = fake_own_match(f, seq, prompt, n);
    if (k > max_keep) k = max_keep;
    f->len[seq] = k;
    return k;
}
static int fake_reserve_any(void *ctx, int seq, int n_new, inf_err *err) {
    return 0;
}
static void fake_nop(void *ctx, int seq) {}
static void fake_reset(void *ctx, int seq) {
    ((fake *)ctx)->len[seq] = 0;
}

/* Pieces: ids 0..25 letters, 26 space, 40 and 41 the two bytes of "é",
 * 42 "bc", others "<id>". */
static int fake_piece(void *ctx, int32_t id, char *buf, int cap) {
    if (id < 26) return snprintf(buf, (size_t)cap, "%c", 'a' + id);
    if (id == 26) return snprintf(buf, (size_t)cap, " ");
    if (id == 40) return snprintf(buf, (size_t)cap, "\xC3");
    if (id == 41) return snprintf(buf, (size_t)cap, "\xA9");
    if (id == 42) return snprintf(buf, (size_t)cap, "bc");
    return snprintf(buf, (size_t)cap, "<%d>", id);
}

static bool fake_is_eog(void *ctx, int32_t id) {
    return id == EOG;
}

/* Greedy at temperature 0, else a seeded draw from softmax(logits / T). */
typedef struct fake_smp {
    float temp;
    uint64_t rng;
} fake_smp;
static void *smp_new(void *ctx, const inf_sampler_params *s) {
    fake_smp *p = calloc(1, sizeof *p);
    p->temp = s->temp;
    p->rng = s->seed;
    return p;
}
static void smp_accept(void *s, int32_t id) {}
static int32_t smp_sample(void *s, float *logits, int n) {
    fake_smp *p = s;
    int best = 0;
    for (int i = 1; i < n; i++)
        if (logits[i] > logits[best]) best = i;
    if (p->temp > 0) {
        double sum = 0, w[V];
        for (int i = 0; i < n; i++)
            sum += w[i] = exp((logits[i] - logits[best]) / p->temp);
        p->rng = mix(p->rng, 1);
        double u = (double)(p->rng >> 11) / 9007199254740992.0 * sum;
        for (best = 0; best < n - 1 && u >= w[best]; best++)
            u -= w[best];
    }
    logits[0] = -1e30f; /* samplers may scribble on the logits */
    return best;
}
static void smp_free(void *s) {
    free(s);
}

/* Text -> ids: letters (either case) and space map to their ids, every other
 * byte to 27 + byte % 10. Always succeeds. */
static int fake_tokenize(void *ctx, const char *text, size_t n, bool special, int32_t **ids,
                         int *n_ids, inf_err *err) {
    *ids = malloc((n ? n : 1) * sizeof **ids);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)text[i];
        (*ids)[i] = c >= 'a' && c <= 'z'   ? c - 'a'
                    : c >= 'A' && c <= 'Z' ? c - 'A'
                    : c == ' '             ? 26
                                           : 27 + c % 10;
    }
    *n_ids = (int)n;
    return 0;
}

/* The "template": each message's content followed by a space. */
static int fake_render(void *ctx, const inf_chat_input *in, char **out, inf_err *e) {
    inf_buf b = {0};
    inf_buf_add(&b, "", 0);
    size_t i;
    json_t *m;
    json_array_foreach(in->messages, i, m) {
        json_t *c = json_object_get(m, "content");
        if (json_is_string(c)) inf_buf_add(&b, json_string_value(c), json_string_length(c));
        inf_buf_add(&b, " ", 1);
    }
    *out = b.data;
    return 0;
}

static inf_exec make_engine(fake *f, int n_seq, int n_ctx, int max_rows) {
    memset(f, 0, sizeof *f);
    f->n_ctx = n_ctx;
    return (inf_exec){
        .ctx = f,
        .n_seq = n_seq,
        .n_ctx = n_ctx,
        .n_vocab = V,
        .max_rows = max_rows,
        .model_name = "fake",
        .spec = {.n_max = 16, .n_min = 0, .p_min = 0.75f}, /* llama.cpp's; no drafter */
        .forward = fake_forward,
        .seq_match = fake_match,
        .seq_begin = fake_begin,
        .seq_reserve = fake_reserve_any,
        .seq_publish = fake_nop,
        .seq_end = fake_nop,
        .seq_reset = fake_reset,
        .tokenize = fake_tokenize,
        .piece = fake_piece,
        .is_eog = fake_is_eog,
        .render = fake_render,
        .sampler_new = smp_new,
        .sampler_accept = smp_accept,
        .sampler_sample = smp_sample,
        .sampler_free = smp_free,
    };
}

#endif

/* ---- optional prefix-cache hooks ---- */

static int fake_seq_match(void *ctx, int seq, const int32_t *prompt, int n) {
    return 0; /* one shared store: every slot sees the same */
}

static int fake_seq_begin(void *ctx, int seq, const int32_t *prompt, int n, int max_keep) {
    fake *f = ctx;
    int best = 0, which = -1;
    for (int i = 0; i < f->n_store; i++) {
        int k = 0;
        while (k < f->store_len[i] && k < n && f->store_tok[i][k] == prompt[k])
            k++;
        if (k > best) best = k, which = i;
    }
    if (best > max_keep) best = max_keep;
    if (which >= 0) {
        memcpy(f->h[seq], f->store_h[which], (size_t)best * sizeof(uint64_t));
        memcpy(f->tok[seq], f->store_tok[which], (size_t)best * sizeof(int32_t));
    }
    f->len[seq] = best;
    return best;
}

static int fake_seq_reserve(void *ctx, int seq, int n_new, inf_err *err) {
    fake *f = ctx;
    f->reserves++;
    if (f->pool_left >= 0 && n_new > f->pool_left)
        return inf_fail(err, "fake pool exhausted (%d wanted, %d left)", n_new, f->pool_left);
    if (f->pool_left >= 0) f->pool_left -= n_new;
    return 0;
}

static void fake_store(fake *f, int seq, const int32_t *tokens, int n) {
    int i = f->n_store < 4 ? f->n_store++ : (f->publishes + f->ends) % 4;
    memcpy(f->store_tok[i], tokens, (size_t)n * sizeof *tokens);
    memcpy(f->store_h[i], f->h[seq], (size_t)n * sizeof(uint64_t));
    f->store_len[i] = n;
}

static void fake_seq_publish(void *ctx, int seq) {
    fake *f = ctx;
    fake_store(f, seq, f->tok[seq], f->len[seq]);
    f->publishes++;
}

static void fake_seq_end(void *ctx, int seq) {
    fake *f = ctx;
    if (f->len[seq] > 0) fake_store(f, seq, f->tok[seq], f->len[seq]);
    f->len[seq] = 0;
    f->ends++;
}

static inline inf_exec make_paged(fake *f, int n_seq, int n_ctx, int max_rows) {
    inf_exec e = make_engine(f, n_seq, n_ctx, max_rows);
    f->pool_left = -1;
    e.seq_match = fake_seq_match;
    e.seq_begin = fake_seq_begin;
    e.seq_reserve = fake_seq_reserve;
    e.seq_publish = fake_seq_publish;
    e.seq_end = fake_seq_end;
    return e;
}
