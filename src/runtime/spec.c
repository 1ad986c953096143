#include "runtime/spec.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *inf_spec_kind_name(inf_spec_kind k) {
    switch (k) {
    case INF_SPEC_NGRAM:
        return "ngram";
    case INF_SPEC_DRAFT:
        return "draft";
    case INF_SPEC_NONE:
        break;
    }
    return "none";
}

inf_spec_params inf_spec_defaults(void) {
    return (inf_spec_params){.n_max = 16, .n_min = 0, .p_min = 0.75f};
}

int inf_spec_check(const inf_spec_params *p, inf_err *err) {
    if (p->n_max < 0 || p->n_max > INF_SPEC_MAX_DRAFT)
        return inf_fail(err, "--draft-max must be in 0..%d, got %d", INF_SPEC_MAX_DRAFT, p->n_max);
    if (p->n_min < 0 || p->n_min > p->n_max)
        return inf_fail(err, "--draft-min must be in 0..%d (--draft-max), got %d", p->n_max,
                        p->n_min);
    if (!(p->p_min >= 0 && p->p_min <= 1))
        return inf_fail(err, "--draft-p-min must be in [0, 1], got %g", p->p_min);
    return 0;
}

/* One slot's drafting state. */
typedef struct spec_slot {
    int32_t *hist; /* [n_ctx + 1] the sequence: prompt, then every generated token */
    int n_hist;
    int d_cache; /* draft model: positions of hist its cache holds */
    void *dsmpl; /* draft model under sampling: its sampler (no penalties) */
    int32_t draft[INF_SPEC_MAX_DRAFT];
    int n_draft;
    int cap; /* drafts the next step may propose (inf_spec_kept) */
    /* stochastic drafts: draft i was drawn from q_i = (q_ids, q_probs)[q_off[i]..q_off[i+1]) */
    int32_t *q_ids;
    double *q_probs;
    size_t q_cap;
    size_t q_off[INF_SPEC_MAX_DRAFT + 1];
} spec_slot;

struct inf_spec {
    const inf_exec *ex, *draft;
    inf_spec_kind kind;
    int n_slots, n_vocab;
    spec_slot *slots;
    /* the draft model's batch */
    int32_t *tok, *pos, *seq;
    uint8_t *want;
    float *logits; /* [n_vocab] */
    /* the target's distribution and the draft's as a dense vector, for judge */
    int32_t *p_ids;
    double *p_probs;
    double *dense; /* [n_vocab], zero between calls */
};

void inf_spec_free(inf_spec *sp) {
    if (!sp) return;
    for (int i = 0; sp->slots && i < sp->n_slots; i++) {
        spec_slot *ss = &sp->slots[i];
        free(ss->hist);
        free(ss->q_ids);
        free(ss->q_probs);
        if (ss->dsmpl) sp->ex->sampler_free(ss->dsmpl);
    }
    free(sp->slots);
    free(sp->tok);
    free(sp->pos);
    free(sp->seq);
    free(sp->want);
    free(sp->logits);
    free(sp->p_ids);
    free(sp->p_probs);
    free(sp->dense);
    free(sp);
}

int inf_spec_create(inf_spec **out, const inf_exec *target, inf_err *err) {
    *out = NULL;
    inf_spec *sp = calloc(1, sizeof *sp);
    if (!sp) return inf_fail(err, "speculative decoding: out of memory");
    sp->ex = target;
    sp->kind = target->spec_kind;
    sp->draft = sp->kind == INF_SPEC_DRAFT ? target->draft : NULL;
    sp->n_slots = target->n_seq;
    sp->n_vocab = target->n_vocab;
    const size_t V = (size_t)target->n_vocab;
    sp->slots = calloc((size_t)sp->n_slots, sizeof *sp->slots);
    bool ok = sp->slots != NULL;
    for (int i = 0; ok && i < sp->n_slots; i++)
        ok = (sp->slots[i].hist = malloc(((size_t)target->n_ctx + 1) * sizeof(int32_t))) != NULL;
    if (ok && sp->draft) {
        const size_t R = (size_t)sp->draft->max_rows;
        sp->tok = malloc(R * sizeof *sp->tok);
        sp->pos = malloc(R * sizeof *sp->pos);
        sp->seq = malloc(R * sizeof *sp->seq);
        sp->want = malloc(R);
        sp->logits = malloc(V * sizeof *sp->logits);
        sp->p_ids = malloc(V * sizeof *sp->p_ids);
        sp->p_probs = malloc(V * sizeof *sp->p_probs);
        sp->dense = calloc(V, sizeof *sp->dense);
        ok = sp->tok && sp->pos && sp->seq && sp->want && sp->logits && sp->p_ids && sp->p_probs &&
             sp->dense;
    }
    if (!ok) {
        inf_spec_free(sp);
        return inf_fail(err, "speculative decoding: out of memory");
    }
    *out = sp;
    return 0;
}

static uint64_t mix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

int inf_spec_begin(inf_spec *sp, int slot, const int32_t *prompt, int n,
                   const inf_sampler_params *sampling, bool stochastic) {
    spec_slot *ss = &sp->slots[slot];
    memcpy(ss->hist, prompt, (size_t)n * sizeof *prompt);
    ss->n_hist = n;
    ss->n_draft = 0;
    ss->cap = INF_SPEC_MAX_DRAFT;
    if (ss->dsmpl) sp->ex->sampler_free(ss->dsmpl);
    ss->dsmpl = NULL;
    if (!sp->draft) return 0;
    const inf_exec *d = sp->draft;
    ss->d_cache = d->seq_begin(d->ctx, slot, prompt, n, inf_exec_max_reuse(n));
    if (stochastic && sp->ex->sampler_dist) {
        /* q needs no penalties to be exact (judge weighs by the q it drew
           from); its own seed, derived from the request's */
        inf_sampler_params q = *sampling;
        q.repeat_penalty = 1.0f;
        q.presence_penalty = q.frequency_penalty = 0;
        q.seed = mix64(sampling->seed ^ 0x5bd1e995u) & 0xFFFFFFFFu;
        if (q.seed == INF_SEED_RANDOM) q.seed ^= 1;
        ss->dsmpl = sp->ex->sampler_new(sp->ex->ctx, &q);
        if (!ss->dsmpl) return -1;
    }
    return 0;
}

void inf_spec_push(inf_spec *sp, int slot, int32_t token) {
    spec_slot *ss = &sp->slots[slot];
    if (ss->n_hist <= sp->ex->n_ctx) ss->hist[ss->n_hist++] = token;
}

/* Prompt lookup: the latest earlier occurrence of the sequence's last g
 * tokens (g from INF_SPEC_NGRAM_MAX down to INF_SPEC_NGRAM_MIN), and the
 * max tokens that followed it. */
static int propose_ngram(spec_slot *ss, int max) {
    const int32_t *h = ss->hist;
    const int n = ss->n_hist;
    for (int g = INF_SPEC_NGRAM_MAX; g >= INF_SPEC_NGRAM_MIN; g--) {
        if (n <= g) continue;
        const int32_t *tail = h + n - g;
        for (int i = n - g - 1; i >= 0; i--) {
            if (h[i] != tail[0] || memcmp(h + i, tail, (size_t)g * sizeof *h)) continue;
            /* what followed it; past the sequence's end the copy goes on
               over the drafts themselves (a loop continues its period) */
            for (int k = 0; k < max; k++) {
                int at = i + g + k;
                ss->draft[k] = at < n ? h[at] : ss->draft[at - n];
            }
            return max;
        }
    }
    return 0;
}

/* The draft model over rows hist[from..to) of slot (to - from <= max_rows),
 * logits of the last row into sp->logits. 0, or -1 (the draft's cache of the
 * slot is then forgotten). */
static int draft_run(inf_spec *sp, int slot, const int32_t *toks, int from, int n) {
    const inf_exec *d = sp->draft;
    spec_slot *ss = &sp->slots[slot];
    inf_err err = {{0}};
    if (d->seq_reserve(d->ctx, slot, n, &err)) goto fail;
    for (int j = 0; j < n; j++) {
        sp->tok[j] = toks[j];
        sp->pos[j] = from + j;
        sp->seq[j] = slot;
        sp->want[j] = j == n - 1 ? INF_OUT_LOGITS : INF_OUT_NONE;
    }
    inf_exec_batch b = {
        .n_rows = n, .tokens = sp->tok, .pos = sp->pos, .seq = sp->seq, .logits = sp->want};
    if (d->forward(d->ctx, &b, sp->logits, &err)) goto fail;
    ss->d_cache = from + n;
    return 0;
fail:
    d->seq_reset(d->ctx, slot);
    ss->d_cache = 0;
    return -1;
}

/* The draft's next token from sp->logits, or -1 where it is less sure than
 * p_min. Greedy: the highest logit, its softmax probability the measure;
 * stochastic: a draw from q (kept for judge), q's top the measure. */
static int32_t draft_next(inf_spec *sp, spec_slot *ss, float p_min) {
    const int V = sp->n_vocab;
    const float *l = sp->logits;
    if (!ss->dsmpl) {
        int best = 0;
        for (int i = 1; i < V; i++)
            if (l[i] > l[best]) best = i;
        if (p_min > 0) {
            double sum = 0;
            for (int i = 0; i < V; i++)
                sum += exp((double)l[i] - l[best]);
            if (1.0 / sum < p_min) return -1;
        }
        return best;
    }
    const int i = ss->n_draft;
    size_t off = ss->q_off[i];
    if (off + (size_t)V > ss->q_cap) {
        size_t cap = off + (size_t)V;
        int32_t *ids = realloc(ss->q_ids, cap * sizeof *ids);
        if (ids) ss->q_ids = ids;
        double *pr = ids ? realloc(ss->q_probs, cap * sizeof *pr) : NULL;
        if (pr) ss->q_probs = pr;
        if (!ids || !pr) return -1; /* out of memory: no more drafts this step */
        ss->q_cap = cap;
    }
    const inf_exec *e = sp->ex;
    int n = e->sampler_dist(ss->dsmpl, l, V, ss->q_ids + off, ss->q_probs + off);
    if (n < 1 || ss->q_probs[off] < p_min) return -1;
    double u = e->sampler_uniform(ss->dsmpl), cum = 0;
    int pick = n - 1;
    for (int j = 0; j < n; j++) {
        cum += ss->q_probs[off + j];
        if (u < cum) {
            pick = j;
            break;
        }
    }
    ss->q_off[i + 1] = off + (size_t)n;
    return ss->q_ids[off + pick];
}

static int propose_draft(inf_spec *sp, int slot, float p_min, int max) {
    const inf_exec *d = sp->draft;
    spec_slot *ss = &sp->slots[slot];
    ss->q_off[0] = 0;
    /* catch up: what of the sequence the draft's cache lacks, ending with
       the pending token, whose logits give the first draft */
    if (ss->d_cache >= ss->n_hist) { /* it holds the pending token: recompute its row */
        d->seq_truncate(d->ctx, slot, ss->n_hist - 1);
        ss->d_cache = ss->n_hist - 1;
    }
    while (ss->d_cache < ss->n_hist) {
        int n = ss->n_hist - ss->d_cache;
        if (n > d->max_rows) n = d->max_rows;
        if (draft_run(sp, slot, ss->hist + ss->d_cache, ss->d_cache, n)) return 0;
    }
    int k = 0;
    while (k < max) {
        ss->n_draft = k;
        int32_t t = draft_next(sp, ss, p_min);
        if (t < 0) break;
        ss->draft[k++] = t;
        if (k == max) break;
        /* the draft's cache takes the drafted token, for the next one (and
           gives it back if refused) */
        if (k == 1 && d->seq_mark) d->seq_mark(d->ctx, slot);
        if (draft_run(sp, slot, &ss->draft[k - 1], ss->n_hist + k - 1, 1)) break;
    }
    return k;
}

int inf_spec_propose(inf_spec *sp, int slot, const inf_spec_params *p, int max,
                     const int32_t **drafts) {
    spec_slot *ss = &sp->slots[slot];
    if (max > p->n_max) max = p->n_max;
    const int cap = ss->cap > p->n_min ? ss->cap : p->n_min;
    if (max > cap) max = cap;
    if (max > INF_SPEC_MAX_DRAFT) max = INF_SPEC_MAX_DRAFT;
    int k = 0;
    if (max > 0 && sp->kind == INF_SPEC_NGRAM) k = propose_ngram(ss, max);
    if (max > 0 && sp->kind == INF_SPEC_DRAFT) k = propose_draft(sp, slot, p->p_min, max);
    if (k < p->n_min || k < 1) k = 0;
    if (k == 0 && sp->draft && ss->d_cache > ss->n_hist) {
        /* drafts it fed that will not be verified: keep the sequence only */
        sp->draft->seq_truncate(sp->draft->ctx, slot, ss->n_hist);
        ss->d_cache = ss->n_hist;
    }
    ss->n_draft = k;
    *drafts = ss->draft;
    return k;
}

int32_t inf_spec_judge(inf_spec *sp, int slot, int i, void *smpl, const float *logits) {
    const inf_exec *e = sp->ex;
    spec_slot *ss = &sp->slots[slot];
    const int np = e->sampler_dist(smpl, logits, sp->n_vocab, sp->p_ids, sp->p_probs);
    const int32_t x = ss->draft[i];
    const size_t q0 = ss->q_off[i], q1 = ss->q_off[i + 1];
    for (size_t j = q0; j < q1; j++)
        sp->dense[ss->q_ids[j]] = ss->q_probs[j];
    double px = 0, qx = sp->dense[x];
    for (int j = 0; j < np; j++)
        if (sp->p_ids[j] == x) px = sp->p_probs[j];
    int32_t out = -1;
    if (qx > 0 && e->sampler_uniform(smpl) * qx < px) {
        out = x; /* taken with probability min(1, p(x)/q(x)) */
    } else {
        /* refused: a draw from the residual max(0, p - q), renormalized */
        double sum = 0;
        for (int j = 0; j < np; j++) {
            double r = sp->p_probs[j] - sp->dense[sp->p_ids[j]];
            sum += r > 0 ? r : 0;
        }
        double v = e->sampler_uniform(smpl) * sum, cum = 0;
        for (int j = 0; j < np && out < 0; j++) {
            double r = sp->p_probs[j] - sp->dense[sp->p_ids[j]];
            if (r <= 0) continue;
            cum += r;
            if (v < cum) out = sp->p_ids[j];
        }
        for (int j = np - 1; j >= 0 && out < 0; j--) /* rounding at the top end */
            if (sum <= 0 || sp->p_probs[j] > sp->dense[sp->p_ids[j]]) out = sp->p_ids[j];
    }
    for (size_t j = q0; j < q1; j++)
        sp->dense[ss->q_ids[j]] = 0;
    return out;
}

void inf_spec_kept(inf_spec *sp, int slot, int n, int taken) {
    spec_slot *ss = &sp->slots[slot];
    if (ss->n_draft > 0) ss->cap = taken < ss->n_draft ? taken + 1 : 2 * ss->n_draft;
    ss->n_draft = 0;
    if (!sp->draft || ss->d_cache <= n) return;
    /* the draft's rows hold the sequence's tokens up to where a draft was
       first refused; n counts the target's, which stop at the same place */
    sp->draft->seq_truncate(sp->draft->ctx, slot, n);
    ss->d_cache = n;
}

void inf_spec_end(inf_spec *sp, int slot) {
    spec_slot *ss = &sp->slots[slot];
    ss->n_draft = 0;
    if (ss->dsmpl) sp->ex->sampler_free(ss->dsmpl);
    ss->dsmpl = NULL;
    if (sp->draft) sp->draft->seq_end(sp->draft->ctx, slot);
}
