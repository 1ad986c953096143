#include "runtime/constrain.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "util/timer.h"

void inf_constraint_begin(inf_constraint *c, const inf_gram *g, inf_gram_start start) {
    memset(c, 0, sizeof *c);
    c->state = !g                               ? CONSTRAIN_OFF
               : start == INF_GRAM_AFTER_THINK  ? CONSTRAIN_WAIT_THINK
               : start == INF_GRAM_UNLESS_THINK ? CONSTRAIN_MAY_THINK
                                                : CONSTRAIN_ON;
}

void inf_constraint_end(inf_constraint *c) {
    inf_gram_matcher_free(c->gm);
    memset(c, 0, sizeof *c);
}

static int ex_piece_fn(void *ud, int32_t id, char *buf, int cap) {
    const inf_exec *e = ud;
    return e->piece(e->ctx, id, buf, cap);
}

static inf_gram_tok_kind ex_kind_fn(void *ud, int32_t id) {
    const inf_exec *e = ud;
    if (e->is_eog(e->ctx, id)) return INF_GRAM_TOK_EOG;
    if (e->is_control && e->is_control(e->ctx, id)) return INF_GRAM_TOK_NEVER;
    return INF_GRAM_TOK_TEXT;
}

/* Whether the bytes of token id are exactly s. */
static bool piece_is(const inf_exec *e, int32_t id, const char *s) {
    char buf[64];
    int n = e->piece(e->ctx, id, buf, sizeof buf);
    return n == (int)strlen(s) && !memcmp(buf, s, (size_t)n);
}

/* While waiting for </think>: whether the bytes of id close it. */
static bool closes_think(inf_constraint *c, const inf_exec *e, int32_t id) {
    char piece[256];
    int n = e->piece(e->ctx, id, piece, sizeof piece);
    for (int i = 0; i < n; i++) {
        if (c->n_think_tail == 8) {
            memmove(c->think_tail, c->think_tail + 1, 7);
            c->n_think_tail = 7;
        }
        c->think_tail[c->n_think_tail++] = piece[i];
        if (c->n_think_tail == 8 && !memcmp(c->think_tail, "</think>", 8)) return true;
    }
    return false;
}

/* The sampled token when the grammar allows it (the common case costs a
 * walk over its bytes), else one sampled again from raw with every token
 * the grammar refuses masked out. -1 with *msg when the grammar fails. */
static int32_t check_or_mask(inf_constraint *c, const inf_exec *e, float *raw, int32_t id,
                             inf_sample_fn sample, void *ud, inf_timings *tm, const char **msg) {
    uint64_t t0 = inf_now_ns();
    int ok = inf_gram_matcher_allows(c->gm, id);
    if (ok == 0) {
        long walks0, walks1, cached;
        inf_gram_matcher_counts(c->gm, &walks0, &cached);
        int n_allowed;
        const uint32_t *bits = inf_gram_matcher_mask(c->gm, &n_allowed);
        inf_gram_matcher_counts(c->gm, &walks1, &cached);
        double mask_ms = (double)(inf_now_ns() - t0) * 1e-6;
        tm->grammar_masks++;
        tm->grammar_masks_walk += (int)(walks1 - walks0);
        if (mask_ms > tm->grammar_mask_ms_max) tm->grammar_mask_ms_max = mask_ms;
        if (!bits) {
            *msg = inf_gram_matcher_error(c->gm);
            return -1;
        }
        if (!n_allowed) {
            *msg = "grammar: no token of the vocabulary can continue the output";
            return -1;
        }
        for (int w = 0; w < (e->n_vocab + 31) / 32; w++) {
            uint32_t b = bits[w];
            if (b == 0xFFFFFFFFu) continue;
            int end = w * 32 + 32 < e->n_vocab ? w * 32 + 32 : e->n_vocab;
            for (int i = w * 32; i < end; i++)
                if (!(b >> (i & 31) & 1)) raw[i] = -INFINITY;
        }
        id = sample(ud, raw);
        ok = inf_gram_matcher_allows(c->gm, id);
        if (ok == 0) ok = -2; /* the sampler chose a masked token: it cannot */
    }
    if (ok == 1 && inf_gram_matcher_accept(c->gm, id) == 0) {
        tm->grammar_ms += (double)(inf_now_ns() - t0) * 1e-6;
        return id;
    }
    *msg = ok == -2 ? "grammar: the sampler picked a token outside the mask"
                    : inf_gram_matcher_error(c->gm);
    return -1;
}

int32_t inf_constraint_pick(inf_constraint *c, const inf_gram *g, const inf_exec *e,
                            inf_gram_vocab **vocab, float *logits, float *raw, inf_sample_fn sample,
                            void *ud, inf_timings *tm, inf_task_status *status, const char **msg) {
    static char err_msg[sizeof(((inf_err *)0)->msg)]; /* scheduler thread only */
    if (!c->gm) {
        inf_err err = {{0}};
        if (!*vocab &&
            inf_gram_vocab_create(vocab, e->n_vocab, ex_piece_fn, ex_kind_fn, (void *)e, &err)) {
            *status = INF_TASK_UNAVAILABLE;
            snprintf(err_msg, sizeof err_msg, "%s", err.msg);
            *msg = err_msg;
            return -1;
        }
        if (inf_gram_matcher_create(&c->gm, g, *vocab, &err)) {
            *status = INF_TASK_INTERNAL;
            snprintf(err_msg, sizeof err_msg, "%s", err.msg);
            *msg = err_msg;
            return -1;
        }
    }
    c->applied = c->state == CONSTRAIN_ON || c->state == CONSTRAIN_MAY_THINK;
    if (c->applied) memcpy(raw, logits, (size_t)e->n_vocab * sizeof *logits);
    int32_t id = sample(ud, logits);
    if (c->state == CONSTRAIN_MAY_THINK) {
        c->state = CONSTRAIN_ON;
        if (piece_is(e, id, "<think>")) {
            c->state = CONSTRAIN_WAIT_THINK;
            c->applied = false;
        }
    }
    if (c->applied) {
        id = check_or_mask(c, e, raw, id, sample, ud, tm, msg);
        if (id < 0) *status = INF_TASK_INTERNAL;
        return id;
    }
    if (c->state == CONSTRAIN_WAIT_THINK && closes_think(c, e, id))
        c->state = CONSTRAIN_ON; /* from the next token */
    return id;
}

bool inf_constraint_done(const inf_constraint *c) {
    return c->applied && c->gm && inf_gram_matcher_done(c->gm);
}
