/* The hybrid model (tiny-qwen35: DeltaNet layers beside an attention layer)
 * over the KV caches, whose sequences keep each recurrent layer's state
 * beside the attention layers' K/V:
 * - the layout: recurrent layers' views carry a state and no K/V, and the
 *   cache's bytes count K/V for the attention layers only;
 * - a second turn that extends everything the sequence holds resumes from
 *   its states and gives the logits of a cold run of the whole prompt, bit
 *   for bit; a prompt that leaves the cached tokens part way cannot rewind
 *   a state, so it starts over (reuses 0) and still equals a cold run;
 * - two sequences decoded in one forward call equal each run alone;
 * - the paged cache resumes from the state checkpoints its tree keeps where
 *   requests ended (radix.h), with the same results;
 * - a chat's next turn, which leaves the cached tokens just before the
 *   prompt's end, resumes from the checkpoint its prefill paused for
 *   (basic: the slot's snapshot; paged: the tree's) and equals a cold run.
 * - a speculative step cut back (inf_kv_cache_mark, truncate, the model's
 *   replay) leaves the states decoding only the kept rows would have.
 * On the scalar backend and the best SIMD level. Needs the generated models
 * (scripts/make-models.sh). */
#include <stdlib.h>
#include <string.h>

#include "backend/cpu_features.h"
#include "backend/simd.h"
#include "harness.h"
#include "kv_run.h"
#include "model/model.h"
#include "modelfile/model.h"

#define N_CTX 128

static int V;

static void fill(int32_t *t, int n, int salt) {
    for (int i = 0; i < n; i++)
        t[i] = (i * 7919 + salt * 131 + 17) % V;
}

static void test_layout(inf_model *m) {
    const inf_hparams *hp = &m->hp;
    inf_err err;
    kv_run r;
    CHECK_MSG(kv_run_open(&r, m, NULL, N_CTX, &err) == 0, "%s", err.msg);
    int n_rec = 0;
    for (int l = 0; l < hp->n_layer; l++) {
        const inf_kv_view *v = &r.kv->views[l];
        n_rec += hp->recurrent[l];
        if (hp->recurrent[l])
            CHECK(v->state && !v->k && !v->v && v->capacity == N_CTX);
        else
            CHECK(!v->state && v->k && v->v);
    }
    CHECK(n_rec > 0 && n_rec < hp->n_layer);
    CHECK_INT(r.kv->n_kv_layer, hp->n_layer - n_rec);
    const size_t kv_row = 2 * (size_t)(hp->n_layer - n_rec) * (size_t)hp->n_head_kv *
                          (size_t)hp->head_dim * sizeof(float);
    CHECK(inf_kv_cache_token_bytes(r.kv) == kv_row);
    /* the states and (basic) their snapshot */
    CHECK(inf_kv_cache_bytes(r.kv, 0) ==
          (size_t)N_CTX * kv_row + 2 * (size_t)n_rec * inf_model_state_floats(hp) * sizeof(float));
    kv_run_close(&r);
}

/* cold: a fresh cache prefilled with p[0..n) */
static void cold(inf_model *m, const inf_kv_opts *o, const int32_t *p, int n, float *out) {
    inf_err err;
    kv_run r;
    CHECK(kv_run_open(&r, m, o, N_CTX, &err) == 0);
    CHECK_MSG(kv_run_prefill(&r, p, n, &err) == 0, "%s", err.msg);
    memcpy(out, r.logits, (size_t)V * sizeof(float));
    kv_run_close(&r);
}

static void test_turns(inf_model *m, const inf_kv_opts *o) {
    inf_err err;
    int32_t p1[40], p2[90], p3[50];
    float *ref = malloc((size_t)V * sizeof(float));
    fill(p1, 40, 1);
    memcpy(p2, p1, sizeof p1);
    fill(p2 + 40, 50, 2);
    memcpy(p3, p1, 25 * sizeof(int32_t)); /* leaves p1 at 25 */
    fill(p3 + 25, 25, 3);
    kv_run r;
    CHECK(kv_run_open(&r, m, o, N_CTX, &err) == 0);
    CHECK(kv_run_prefill(&r, p1, 40, &err) == 0);
    inf_kv_cache_end(r.kv, 0);
    /* a second turn over all the sequence holds */
    CHECK(kv_run_prefill(&r, p2, 90, &err) == 0);
    CHECK_INT(r.reused, 40); /* paged: from the checkpoint at p1's end */
    cold(m, o, p2, 90, ref);
    CHECK_CLOSE(r.logits, ref, V, 0);
    /* decode on from the resumed states: the same as from a cold prefill */
    kv_run c;
    CHECK(kv_run_open(&c, m, o, N_CTX, &err) == 0);
    CHECK(kv_run_prefill(&c, p2, 90, &err) == 0);
    for (int i = 0; i < 4; i++) {
        int32_t t = (int32_t)((i * 53 + 5) % V);
        CHECK(kv_run_feed(&r, &t, 1, &err) == 0 && kv_run_feed(&c, &t, 1, &err) == 0);
        CHECK_CLOSE(r.logits, c.logits, V, 0);
    }
    kv_run_close(&c);
    inf_kv_cache_end(r.kv, 0);
    /* a prompt that leaves the cache at 25 of 94: no state for position 25 */
    CHECK_INT(inf_kv_cache_match(r.kv, 0, p3, 50), 0);
    CHECK(kv_run_prefill(&r, p3, 50, &err) == 0);
    CHECK_INT(r.reused, 0);
    cold(m, o, p3, 50, ref);
    CHECK_CLOSE(r.logits, ref, V, 0);
    kv_run_close(&r);
    free(ref);
}

/* A prefill as the scheduler runs it: paused at the cache's checkpoint
 * position for a state checkpoint. */
static int prefill_ckpt(kv_run *r, const int32_t *p, int n, inf_err *err) {
    r->reused = inf_kv_cache_begin(r->kv, 0, p, n, inf_exec_max_reuse(n));
    const int at = inf_kv_cache_checkpoint_pos(r->kv, n);
    if (at - r->reused >= 2) {
        if (kv_run_feed(r, p + r->reused, at - r->reused, err)) return -1;
        inf_kv_cache_checkpoint(r->kv, 0);
        return kv_run_feed(r, p + at, n - at, err);
    }
    return kv_run_feed(r, p + r->reused, n - r->reused, err);
}

/* A chat's next turn leaves the cached tokens a few before the prompt's end
 * (the generation prompt): it resumes from the checkpoint the prefill left
 * (basic: the slot's snapshot; paged: the tree's) and gives the cold run's
 * logits; a third prompt that leaves the cache before the checkpoint starts
 * over. */
static void test_next_turn(inf_model *m, const inf_kv_opts *o) {
    inf_err err;
    int32_t p1[70], p2[100], p3[60];
    float *ref = malloc((size_t)V * sizeof(float));
    fill(p1, 70, 4);
    memcpy(p2, p1, 66 * sizeof(int32_t)); /* leaves p1 at 66 */
    fill(p2 + 66, 34, 5);
    memcpy(p3, p1, 40 * sizeof(int32_t)); /* leaves p1 at 40, before its checkpoint */
    fill(p3 + 40, 20, 6);
    const int at = (70 - INF_KV_CHECKPOINT_TAIL) / INF_KV_CHECKPOINT_STEP * INF_KV_CHECKPOINT_STEP;
    kv_run r;
    CHECK(kv_run_open(&r, m, o, N_CTX, &err) == 0);
    CHECK_INT(inf_kv_cache_checkpoint_pos(r.kv, 70), at);
    CHECK(prefill_ckpt(&r, p1, 70, &err) == 0);
    for (int i = 0; i < 3; i++) { /* a reply */
        int32_t t = (int32_t)((i * 17 + 2) % V);
        CHECK(kv_run_feed(&r, &t, 1, &err) == 0);
    }
    inf_kv_cache_end(r.kv, 0);
    CHECK(prefill_ckpt(&r, p2, 100, &err) == 0);
    CHECK_INT(r.reused, at);
    cold(m, o, p2, 100, ref);
    CHECK_CLOSE(r.logits, ref, V, 0);
    inf_kv_cache_end(r.kv, 0);
    CHECK(prefill_ckpt(&r, p3, 60, &err) == 0);
    CHECK_INT(r.reused, 0);
    cold(m, o, p3, 60, ref);
    CHECK_CLOSE(r.logits, ref, V, 0);
    kv_run_close(&r);
    free(ref);
}

/* Two sequences' decode rows in one call, each against its own run alone. */
static void test_batched(inf_model *m) {
    const inf_hparams *hp = &m->hp;
    inf_err err;
    inf_kv_cache *kv;
    const inf_kv_layout lay = {.n_layer = hp->n_layer,
                               .kv_dim = hp->n_head_kv * hp->head_dim,
                               .head_dim = hp->head_dim,
                               .recurrent = hp->recurrent,
                               .state_floats = inf_model_state_floats(hp)};
    CHECK(inf_kv_cache_create(&kv, NULL, &lay, 2, N_CTX, &err) == 0);
    int32_t p[2][20];
    kv_run alone[2];
    float *lg = malloc(2 * (size_t)V * sizeof(float));
    for (int s = 0; s < 2; s++) {
        fill(p[s], 16 - 7 * s, 10 + s);
        const int n = 16 - 7 * s;
        CHECK(inf_kv_cache_begin(kv, s, p[s], n, 0) == 0);
        CHECK(inf_kv_cache_reserve(kv, s, n, &err) == 0);
        int32_t pos[20], seq[20];
        for (int i = 0; i < n; i++)
            pos[i] = i, seq[i] = s;
        inf_batch b = {.n_rows = n, .tokens = p[s], .pos = pos, .seq = seq};
        CHECK(inf_model_forward(m, &b, kv->views, 2, lg, &err) == 0);
        for (int i = 0; i < n; i++)
            inf_kv_cache_commit(kv, s, i, p[s][i]);
        CHECK(kv_run_open(&alone[s], m, NULL, N_CTX, &err) == 0);
        CHECK(kv_run_prefill(&alone[s], p[s], n, &err) == 0);
    }
    for (int step = 0; step < 5; step++) {
        int32_t tok[2], pos[2], seq[2] = {0, 1};
        uint8_t want[2] = {INF_OUT_LOGITS, INF_OUT_LOGITS};
        for (int s = 0; s < 2; s++) {
            tok[s] = (int32_t)((step * 37 + s * 5 + 3) % V);
            pos[s] = kv->n_past[s];
            CHECK(inf_kv_cache_reserve(kv, s, 1, &err) == 0);
        }
        inf_batch b = {.n_rows = 2, .tokens = tok, .pos = pos, .seq = seq, .logits = want};
        CHECK(inf_model_forward(m, &b, kv->views, 2, lg, &err) == 0);
        for (int s = 0; s < 2; s++) {
            inf_kv_cache_commit(kv, s, pos[s], tok[s]);
            CHECK(kv_run_feed(&alone[s], &tok[s], 1, &err) == 0);
            CHECK_CLOSE(lg + (size_t)s * V, alone[s].logits, V, 0);
        }
    }
    for (int s = 0; s < 2; s++)
        kv_run_close(&alone[s]);
    inf_kv_cache_free(kv);
    free(lg);
}

/* Rows tokens[0..n) after what sequence 0 of kv holds, in one call: decode
 * rows (a speculative step's verification) or a prompt span; the last row's
 * logits into lg. */
static int feed_rows(inf_model *m, inf_kv_cache *kv, const int32_t *tokens, int n, bool decode,
                     float *lg) {
    int32_t pos[64], seq[64] = {0};
    uint8_t dec[64];
    inf_err err;
    INF_ASSERT(n <= 64);
    if (inf_kv_cache_reserve(kv, 0, n, &err)) return -1;
    for (int j = 0; j < n; j++)
        pos[j] = kv->n_past[0] + j, dec[j] = decode;
    inf_batch b = {.n_rows = n, .tokens = tokens, .pos = pos, .seq = seq, .decode = dec};
    if (inf_model_forward(m, &b, kv->views, 1, lg, &err)) return -1;
    for (int j = 0; j < n; j++)
        inf_kv_cache_commit(kv, 0, pos[j], tokens[j]);
    return 0;
}

/* Speculative steps cut back: after a mark, rows fed (as one verification
 * call of decode rows, or one row a call as a draft model feeds its drafts)
 * then cut back to the mark or past it, the model redoing the logged rows
 * (more than one call's rows: in pieces). Every later logit equals decoding
 * only the kept rows, bit for bit. Without the replay (states left at the
 * mark, or at the rows fed) the logits differ. */
static void test_rewind(inf_model *m, const inf_kv_opts *o) {
    const inf_hparams *hp = &m->hp;
    inf_err err;
    inf_kv_cache *kv;
    inf_kv_layout lay = {.n_layer = hp->n_layer,
                         .kv_dim = hp->n_head_kv * hp->head_dim,
                         .head_dim = hp->head_dim,
                         .recurrent = hp->recurrent,
                         .state_floats = inf_model_state_floats(hp),
                         .log_rows = 40,
                         .log_floats = inf_model_log_floats(hp)};
    CHECK(lay.log_floats > 0);
    CHECK(inf_kv_cache_create(&kv, o, &lay, 1, N_CTX, &err) == 0);
    kv_run ref;
    CHECK(kv_run_open(&ref, m, o, N_CTX, &err) == 0);
    float *lg = malloc((size_t)V * sizeof(float));
    int32_t p[14], rows[40];
    fill(p, 14, 21);
    CHECK(inf_kv_cache_begin(kv, 0, p, 14, 0) == 0 && feed_rows(m, kv, p, 14, false, lg) == 0);
    CHECK(kv_run_prefill(&ref, p, 14, &err) == 0);
    /* (rows fed, rows kept, one call) per step; the model takes 16 rows a
       call, so 30 rows replay in two pieces */
    const int steps[][3] = {{5, 2, 1}, {9, 0, 1},   {1, 1, 1},   {4, 1, 0},
                            {3, 3, 1}, {16, 15, 1}, {33, 30, 0}, {6, 2, 0}};
    int salt = 30, same_all = 1;
    for (size_t st = 0; st < sizeof steps / sizeof steps[0]; st++) {
        const int fed = steps[st][0], kept = steps[st][1];
        const bool one_call = steps[st][2];
        fill(rows, fed, salt++);
        const int at = kv->n_past[0];
        inf_kv_cache_mark(kv, 0);
        bool ok = true;
        if (one_call) {
            ok = feed_rows(m, kv, rows, fed, true, lg) == 0;
        } else {
            for (int j = 0; j < fed && ok; j++)
                ok = feed_rows(m, kv, rows + j, 1, false, lg) == 0;
        }
        CHECK(ok);
        const int from = inf_kv_cache_truncate(kv, 0, at + kept);
        CHECK_INT(from, kept == fed ? -1 : at);
        if (from >= 0) inf_model_replay(m, inf_kv_cache_views(kv, 0), from, at + kept);
        CHECK_INT(kv->n_past[0], at + kept);
        /* the plain run decodes the kept rows one by one */
        for (int j = 0; j < kept; j++)
            CHECK(kv_run_feed(&ref, rows + j, 1, &err) == 0);
        /* the next token, on both */
        int32_t next = (int32_t)((st * 53 + 11) % (size_t)V);
        CHECK(feed_rows(m, kv, &next, 1, true, lg) == 0);
        CHECK(kv_run_feed(&ref, &next, 1, &err) == 0);
        same_all &= !memcmp(lg, ref.logits, (size_t)V * sizeof(float));
        CHECK_MSG(!memcmp(lg, ref.logits, (size_t)V * sizeof(float)),
                  "%s step %zu (%d fed, %d kept): logits differ from decoding the kept rows",
                  o ? "paged" : "basic", st, fed, kept);
    }
    CHECK(same_all);
    kv_run_close(&ref);
    inf_kv_cache_free(kv);
    free(lg);
}

static void run_model(const char *path) {
    inf_model_file *mf;
    inf_err err;
    if (inf_model_open(&mf, path, &err)) {
        CHECK_MSG(0, "%s (run scripts/make-models.sh)", err.msg);
        return;
    }
    V = mf->hp.n_vocab;
    inf_backend *simd = inf_backend_simd_create(inf_isa_best(), 1, false, INF_ATTN_FLASH);
    const inf_backend *bes[2] = {inf_backend_scalar(), simd};
    for (int i = 0; i < 2; i++) {
        inf_model *m;
        /* 16 rows a call: the 90-token prompt runs in chunks */
        CHECK_MSG(inf_model_create(&m, mf, bes[i], N_CTX, 16, &err) == 0, "%s", err.msg);
        if (i == 0) test_layout(m);
        test_turns(m, NULL);
        test_turns(m, &(inf_kv_opts){.kind = INF_KV_PAGED, .block_size = 16});
        test_next_turn(m, NULL);
        test_next_turn(m, &(inf_kv_opts){.kind = INF_KV_PAGED, .block_size = 16});
        test_batched(m);
        test_rewind(m, NULL);
        test_rewind(m, &(inf_kv_opts){.kind = INF_KV_PAGED, .block_size = 16});
        inf_model_free(m);
    }
    inf_backend_simd_free(simd);
    inf_model_close(mf);
}

int main(void) {
    run_model("models/tiny-qwen35-f32.gguf");
    run_model("models/tiny-qwen35-moe-f32.gguf"); /* its MoE variant */
    return th_report();
}
