#include "runtime/sched.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/constrain.h"
#include "runtime/spec.h"
#include "util/timer.h"
#include "util/utf8.h"

/* ---- tasks ---- */

inf_gen_params inf_gen_defaults(void) {
    return (inf_gen_params){
        .sampling = inf_sampler_defaults(), .max_tokens = -1, .spec = {.n_max = -1}};
}

const char *inf_finish_name(inf_finish f) {
    switch (f) {
    case INF_FINISH_STOP:
        return "stop";
    case INF_FINISH_LENGTH:
        return "length";
    case INF_FINISH_NONE:
        break;
    }
    return "none";
}

inf_task *inf_task_new(int32_t *prompt, int n_prompt, const inf_gen_params *p) {
    /* Callers bound the stop strings (the server's parser refuses more): NULL
     * means out of memory only. */
    INF_ASSERT(p->n_stop >= 0 && p->n_stop <= INF_MAX_STOPS);
    INF_ASSERT(p->n_logit_bias >= 0 && p->n_logit_bias <= INF_MAX_LOGIT_BIAS);
    inf_task *t = calloc(1, sizeof *t);
    bool ok = t && !inf_stop_init(&t->stop, p->stop, p->n_stop);
    if (ok && inf_stop_set_end_after(&t->stop, p->end_after)) ok = false;
    if (ok && p->n_logit_bias > 0) {
        t->bias = malloc((size_t)p->n_logit_bias * sizeof *t->bias);
        if (t->bias)
            memcpy(t->bias, p->logit_bias, (size_t)p->n_logit_bias * sizeof *t->bias);
        else
            ok = false;
    }
    if (!ok) {
        if (t) {
            inf_stop_free(&t->stop);
            free(t->bias);
        }
        free(t);
        free(prompt);
        inf_gram_free(p->grammar);
        return NULL;
    }
    t->prompt = prompt;
    t->n_prompt = n_prompt;
    t->p = *p;
    t->stop_index = -1;
    /* The caller's strings may go away: point at the copies. */
    t->p.n_stop = t->stop.n_stops;
    for (int i = 0; i < INF_MAX_STOPS; i++)
        t->p.stop[i] = i < t->stop.n_stops ? t->stop.stops[i] : NULL;
    t->p.end_after = t->stop.end_after;
    t->p.logit_bias = t->bias;
    if (!t->bias) t->p.n_logit_bias = 0;
    if (t->p.top_logprobs > INF_MAX_TOP_LOGPROBS) t->p.top_logprobs = INF_MAX_TOP_LOGPROBS;
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->cv, NULL);
    atomic_init(&t->cancelled, false);
    atomic_init(&t->refs, 1);
    return t;
}

void inf_task_release(inf_task *t) {
    if (!t || atomic_fetch_sub(&t->refs, 1) != 1) return;
    free(t->prompt);
    inf_gram_free(t->p.grammar);
    inf_stop_free(&t->stop);
    free(t->bias);
    inf_buf_free(&t->text);
    free(t->lp);
    free(t->embd);
    pthread_mutex_destroy(&t->mu);
    pthread_cond_destroy(&t->cv);
    free(t);
}

static void deadline_in(struct timespec *ts, int ms) {
    clock_gettime(CLOCK_REALTIME, ts);
    ts->tv_sec += ms / 1000;
    ts->tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

void inf_task_wait(inf_task *t, inf_task_cursor *c, int wait_ms, inf_task_update *u) {
    *u = (inf_task_update){0};
    pthread_mutex_lock(&t->mu);
    if (wait_ms < 0) {
        while (!t->done && t->text.len == c->text_pos && t->n_lp == c->lp_pos)
            pthread_cond_wait(&t->cv, &t->mu);
    } else if (!t->done && t->text.len == c->text_pos && t->n_lp == c->lp_pos && wait_ms > 0) {
        struct timespec ts;
        deadline_in(&ts, wait_ms);
        pthread_cond_timedwait(&t->cv, &t->mu, &ts);
    }
    size_t n = t->text.len - c->text_pos;
    if (n && (u->text = malloc(n + 1))) {
        memcpy(u->text, t->text.data + c->text_pos, n);
        u->text[n] = 0;
        u->n_text = n;
        c->text_pos += n;
    }
    u->lp_from = c->lp_pos;
    u->lp_to = c->lp_pos = t->n_lp;
    /* Done only once every byte was handed out (a failed copy is retried). */
    u->done = t->done && c->text_pos == t->text.len;
    pthread_mutex_unlock(&t->mu);
}

/* ---- helpers ---- */

int inf_common_prefix(const int32_t *a, int na, const int32_t *b, int nb) {
    int n = na < nb ? na : nb, i = 0;
    while (i < n && a[i] == b[i])
        i++;
    return i;
}

void inf_logprobs_from_logits(inf_logprob *out, const float *logits, int n_vocab, int32_t id,
                              int k) {
    float mx = -INFINITY;
    for (int i = 0; i < n_vocab; i++)
        if (logits[i] > mx) mx = logits[i];
    double sum = 0;
    for (int i = 0; i < n_vocab; i++)
        sum += exp((double)logits[i] - mx);
    double lse = mx + log(sum);
    out->id = id;
    out->logprob = (float)(logits[id] - lse);
    if (k > INF_MAX_TOP_LOGPROBS) k = INF_MAX_TOP_LOGPROBS;
    /* Insertion into a sorted list of at most k raw logits: strict > keeps
     * the lower id first on ties. */
    float top[INF_MAX_TOP_LOGPROBS]; /* [k] raw logits, best first */
    int n = 0;
    for (int i = 0; i < n_vocab && k > 0; i++) {
        float v = logits[i];
        if (n == k && !(v > top[n - 1])) continue;
        int j = n < k ? n++ : k - 1;
        while (j > 0 && v > top[j - 1]) {
            out->top_id[j] = out->top_id[j - 1];
            top[j] = top[j - 1];
            j--;
        }
        out->top_id[j] = i;
        top[j] = v;
    }
    for (int j = 0; j < n; j++)
        out->top_logprob[j] = (float)(top[j] - lse);
    out->n_top = n;
}

/* ---- the scheduler ---- */

typedef enum { SLOT_IDLE, SLOT_PREFILL, SLOT_DECODE } slot_state;

typedef struct slot {
    int id;
    slot_state state;
    inf_task *task;    /* NULL when idle */
    int n_cache;       /* positions the sequence holds */
    int n_prompt_done; /* prompt tokens in the cache */
    int32_t next;      /* DECODE: the sampled token, not yet in the cache */
    void *smpl;
    inf_utf8_stream utf8; /* the detokenizer's held partial character */
    inf_constraint con;   /* the task's grammar, if any */
    /* speculative decoding: on for this task; drafts drawn from the draft
       model's distribution (judged, not compared); this step's drafts */
    bool spec_on, stochastic;
    int n_spec;
    const int32_t *drafts;
    inf_spec_params spec;
    uint64_t t_start, t_first;
    uint64_t start_seq, last_used;
} slot;

struct inf_sched {
    const inf_exec *ex;
    int n_slots, chunk;
    slot *slots; /* [n_slots] */

    pthread_t thread;
    bool thread_started;
    pthread_mutex_t mu; /* queue, quit, metrics */
    pthread_cond_t cv;
    inf_task **queue; /* ring of q_cap */
    int q_head, q_len, q_cap;
    bool quit;
    inf_sched_metrics m;
    inf_slot_info *info; /* [n_slots] under mu: what the slots did at the last step */
    uint64_t clock, seed_counter;

    /* One step's batch, sized for ex->max_rows rows. */
    int32_t *tok, *pos, *seq; /* [max_rows] */
    uint8_t *want;            /* [max_rows] */
    uint8_t *dec;             /* [max_rows] decode rows */
    int *row_slot;            /* [max_rows] */
    float *logits;            /* [n_slots (+ SPEC_ROWS)][n_vocab] */
    float *scratch;           /* [n_vocab] raw logits kept for logprobs */
    float *gscratch;          /* [n_vocab] raw logits kept to resample under a mask */
    float *hidden;            /* [n_slots][n_embd] embedding rows of a step (n_embd > 0) */
    inf_gram_vocab *gvocab;   /* the vocabulary's byte trie, built at the first grammar */
    inf_spec *spec;           /* speculative decoding's drafting state (NULL: off) */
    int32_t *eog;             /* [n_eog] the vocabulary's end-of-generation ids */
    int n_eog;
};

/* Drafted rows one step may verify, over all slots (the logits buffer holds
 * n_slots + SPEC_ROWS rows). */
#define SPEC_ROWS INF_SPEC_MAX_DRAFT

static int n_active(const inf_sched *s) {
    int n = 0;
    for (int i = 0; i < s->n_slots; i++)
        n += s->slots[i].state != SLOT_IDLE;
    return n;
}

static uint64_t splitmix(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* The free slot that can reuse the most of the prompt; on a tie the least
 * recently used, so fresh conversations keep their caches. */
static slot *pick_slot(inf_sched *s, const inf_task *t) {
    slot *best = NULL;
    int best_lcp = -1;
    for (int i = 0; i < s->n_slots; i++) {
        slot *sl = &s->slots[i];
        if (sl->state != SLOT_IDLE) continue;
        int lcp = t->p.no_reuse ? 0 : s->ex->seq_match(s->ex->ctx, sl->id, t->prompt, t->n_prompt);
        if (lcp > best_lcp || (lcp == best_lcp && sl->last_used < best->last_used)) {
            best = sl;
            best_lcp = lcp;
        }
    }
    return best;
}

/* Called with s->mu held. */
static void start_slot(inf_sched *s, slot *sl, inf_task *t) {
    const inf_exec *e = s->ex;
    int keep = t->p.no_reuse ? 0 : inf_exec_max_reuse(t->n_prompt);
    int lcp = e->seq_begin(e->ctx, sl->id, t->prompt, t->n_prompt, keep);
    INF_ASSERT(lcp >= 0 && lcp <= keep);
    sl->n_cache = lcp;
    sl->n_prompt_done = lcp;
    sl->task = t;
    sl->state = SLOT_PREFILL;
    sl->t_start = inf_now_ns();
    sl->t_first = 0;
    sl->start_seq = ++s->clock;
    sl->utf8 = (inf_utf8_stream){{0}, 0};
    inf_constraint_begin(&sl->con, t->p.grammar, t->p.grammar_start);
    inf_sampler_params sp = t->p.sampling;
    if (sp.seed == INF_SEED_RANDOM) {
        sp.seed = splitmix(inf_now_ns() ^ splitmix(++s->seed_counter));
        if (sp.seed == INF_SEED_RANDOM) sp.seed ^= 1;
    }
    sl->smpl = t->p.embed ? NULL : e->sampler_new(e->ctx, &sp);
    for (int i = 0; sl->smpl && i < t->n_prompt; i++)
        e->sampler_accept(sl->smpl, t->prompt[i]);
    sl->spec = t->p.spec.n_max >= 0 ? t->p.spec : e->spec;
    sl->spec_on = s->spec && !t->p.embed && sl->spec.n_max > 0;
    sl->stochastic = sl->spec_on && e->spec_kind == INF_SPEC_DRAFT && sp.temp > 0 &&
                     !t->p.grammar && e->sampler_dist && e->sampler_uniform;
    sl->n_spec = 0;
    if (sl->spec_on && inf_spec_begin(s->spec, sl->id, t->prompt, t->n_prompt, &sp, sl->stochastic))
        sl->spec_on = sl->stochastic = false; /* out of memory: decode plainly */
    s->m.cache_tokens_reused += (uint64_t)lcp;
    pthread_mutex_lock(&t->mu);
    t->started = true;
    t->seed = sp.seed;
    t->timings.cache_n = lcp;
    pthread_mutex_unlock(&t->mu);
}

static void update_kv_metrics(inf_sched *s);

/* Ends the slot's task (finish reason or error) and frees the slot; the
 * slot's cache stays for the next request. */
static void finish_slot(inf_sched *s, slot *sl, inf_finish fin, inf_task_status status,
                        const char *msg) {
    inf_task *t = sl->task;
    uint64_t now = inf_now_ns();
    uint64_t t_first = sl->t_first ? sl->t_first : now;
    /* Only this thread writes the timings: no lock needed to read them. */
    inf_timings tm = t->timings;
    tm.prompt_n = sl->n_prompt_done - tm.cache_n;
    tm.prompt_ms = (double)(t_first - sl->t_start) * 1e-6;
    tm.predicted_n = t->n_gen;
    tm.predicted_ms = (double)(now - t_first) * 1e-6;

    /* Free the slot and count the request before the client hears that it
     * ended, so that what it reads next (/metrics) already includes it. */
    if (sl->smpl) s->ex->sampler_free(sl->smpl);
    sl->smpl = NULL;
    inf_constraint_end(&sl->con);
    if (sl->spec_on) inf_spec_end(s->spec, sl->id);
    sl->spec_on = false;
    s->ex->seq_end(s->ex->ctx, sl->id);
    sl->last_used = ++s->clock;
    pthread_mutex_lock(&s->mu);
    s->m.prompt_tokens_total += (uint64_t)tm.prompt_n;
    s->m.prompt_seconds_total += tm.prompt_ms * 1e-3;
    s->m.tokens_predicted_total += (uint64_t)tm.predicted_n;
    s->m.tokens_predicted_seconds_total += tm.predicted_ms * 1e-3;
    if (atomic_load(&t->cancelled))
        s->m.requests_cancelled_total++;
    else
        s->m.requests_finished_total++;
    sl->task = NULL;
    sl->state = SLOT_IDLE;
    s->m.requests_processing = n_active(s);
    update_kv_metrics(s);
    pthread_mutex_unlock(&s->mu);

    pthread_mutex_lock(&t->mu);
    if (fin != INF_FINISH_STOP || !t->stop.done) {
        /* No stop string cut the text: release what was held. */
        char tail[4];
        size_t n = inf_utf8_stream_flush(&sl->utf8, tail);
        if (inf_stop_push(&t->stop, &t->text, tail, n) == 1) t->stop_index = t->stop.stop_index;
        inf_stop_flush(&t->stop, &t->text);
    }
    t->done = true;
    t->finish = fin;
    if (status != INF_TASK_OK) {
        t->status = status;
        snprintf(t->err, sizeof t->err, "%s", msg ? msg : "failed");
    }
    t->timings = tm;
    pthread_cond_broadcast(&t->cv);
    pthread_mutex_unlock(&t->mu);
    inf_task_release(t);
}

/* Temperature 0 with every penalty off: the sampler would take the highest
 * logit (the first on ties), which is all this does, without copying the
 * vocabulary into its candidate list. */
static bool plain_greedy(const inf_sampler_params *p) {
    return p->temp <= 0 && p->repeat_penalty == 1.0f && p->presence_penalty == 0 &&
           p->frequency_penalty == 0;
}

static int32_t argmax(const float *x, int n) {
    /* The largest value with eight independent running maxima (no loop-carried
     * index, so the loop vectorizes), then the first index that holds it:
     * the lowest id on ties, as the sampler picks. */
    float m[8];
    for (int k = 0; k < 8; k++)
        m[k] = -INFINITY;
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++)
            m[k] = x[i + k] > m[k] ? x[i + k] : m[k];
    float best = -INFINITY;
    for (int k = 0; k < 8; k++)
        best = m[k] > best ? m[k] : best;
    for (; i < n; i++)
        best = x[i] > best ? x[i] : best;
    for (i = 0; i < n; i++)
        if (x[i] == best) return i;
    return 0;
}

/* Samples the slot's next token from its logits row and passes its text on:
 * token bytes -> whole UTF-8 characters -> the stop-string matcher. */
static int32_t sample(inf_sched *s, slot *sl, float *logits) {
    const inf_exec *e = s->ex;
    return plain_greedy(&sl->task->p.sampling) ? argmax(logits, e->n_vocab)
                                               : e->sampler_sample(sl->smpl, logits, e->n_vocab);
}

/* sample() for the constraint: ud is the slot. */
typedef struct sample_ctx {
    inf_sched *s;
    slot *sl;
} sample_ctx;
static int32_t sample_cb(void *ud, float *logits) {
    sample_ctx *c = ud;
    return sample(c->s, c->sl, logits);
}

/* True when every logit is a finite number. */
static bool all_finite(const float *x, int n) {
    float acc = 0; /* NaN or inf anywhere makes x*0 NaN; one branch at the end */
    for (int i = 0; i < n; i++)
        acc += x[i] * 0.0f;
    return acc == 0.0f;
}

/* How a slot ends after a token (ends false: it goes on). */
typedef struct ending {
    bool ends;
    inf_finish fin;
    inf_task_status status;
    const char *msg;
} ending;

static bool end_with(ending *end, inf_finish fin, inf_task_status status, const char *msg) {
    *end = (ending){true, fin, status, msg};
    return false;
}

/* The slot's next token from its logits row: the request's bias, its
 * observer, the ban of ignore_eos, the copy logprobs read, then its sampler through its grammar;
 * for draft di of a stochastic slot (di >= 0), the speculative verdict.
 * -1 when the slot must end (*end says how). */
static int32_t pick(inf_sched *s, slot *sl, float *logits, int di, ending *end) {
    const inf_exec *e = s->ex;
    inf_task *t = sl->task;
    if (!all_finite(logits, e->n_vocab)) { /* never a stream of token 0 */
        end_with(end, INF_FINISH_NONE, INF_TASK_INTERNAL,
                 "the model produced non-finite logits (NaN or infinity); the model file's "
                 "weights or hyperparameters are broken");
        return -1;
    }
    for (int i = 0; i < t->p.n_logit_bias; i++) /* ids checked at submit */
        logits[t->p.logit_bias[i].id] += t->p.logit_bias[i].bias;
    if (t->p.on_logits) t->p.on_logits(t->p.ud, logits, e->n_vocab);
    if (t->p.ignore_eos) /* as llama.cpp: never picked, rather than emitted as text */
        for (int i = 0; i < s->n_eog; i++)
            logits[s->eog[i]] = -INFINITY;
    if (t->p.logprobs) memcpy(s->scratch, logits, (size_t)e->n_vocab * sizeof *logits);
    if (sl->con.state != CONSTRAIN_OFF) {
        sample_ctx sc = {s, sl};
        inf_task_status st = INF_TASK_OK;
        const char *msg = NULL;
        int32_t id = inf_constraint_pick(&sl->con, t->p.grammar, e, &s->gvocab, logits, s->gscratch,
                                         sample_cb, &sc, &t->timings, &st, &msg);
        if (id < 0) end_with(end, INF_FINISH_NONE, st, msg);
        return id;
    }
    if (di >= 0 && sl->stochastic) return inf_spec_judge(s->spec, sl->id, di, sl->smpl, logits);
    return sample(s, sl, logits);
}

/* The picked token enters the reply: the sampler's window, logprobs, its
 * bytes through the UTF-8 stream and the stop strings. Returns true when the
 * slot goes on (id is its next token), else false with *end (the slot is not
 * finished here: its cache may need cutting back first). */
static bool emit(inf_sched *s, slot *sl, int32_t id, ending *end) {
    const inf_exec *e = s->ex;
    inf_task *t = sl->task;
    e->sampler_accept(sl->smpl, id);
    if (sl->spec_on) inf_spec_push(s->spec, sl->id, id);
    if (!sl->t_first) sl->t_first = inf_now_ns();

    inf_finish fin = INF_FINISH_NONE;
    bool oom = false;
    pthread_mutex_lock(&t->mu);
    t->n_gen++;
    if (e->is_eog(e->ctx, id)) { /* never under ignore_eos: pick bans them */
        fin = INF_FINISH_STOP;
    } else {
        if (t->p.logprobs && t->n_lp < t->cap_lp) {
            inf_logprobs_from_logits(&t->lp[t->n_lp++], s->scratch, e->n_vocab, id,
                                     t->p.top_logprobs);
        }
        char piece[256], text[INF_UTF8_STREAM_OUT(256)];
        int n = e->piece(e->ctx, id, piece, sizeof piece);
        size_t whole = inf_utf8_stream_push(&sl->utf8, piece, (size_t)n, text);
        int rc = whole ? inf_stop_push(&t->stop, &t->text, text, whole) : 0;
        if (rc == 1) {
            fin = INF_FINISH_STOP;
            t->stop_index = t->stop.stop_index;
        }
        oom = rc < 0;
    }
    if (fin == INF_FINISH_NONE && inf_constraint_done(&sl->con))
        fin = INF_FINISH_STOP; /* a whole sentence that nothing may follow */
    if (fin == INF_FINISH_NONE) {
        if (t->p.max_tokens >= 0 && t->n_gen >= t->p.max_tokens)
            fin = INF_FINISH_LENGTH;
        else if (sl->n_cache >= e->n_ctx)
            fin = INF_FINISH_LENGTH; /* no room to feed it back */
    }
    pthread_cond_broadcast(&t->cv);
    pthread_mutex_unlock(&t->mu);

    if (oom) /* the text could not be kept: say so rather than lose it */
        return end_with(end, INF_FINISH_NONE, INF_TASK_UNAVAILABLE,
                        "out of memory: the reply's text");
    if (fin != INF_FINISH_NONE) return end_with(end, fin, INF_TASK_OK, NULL);
    sl->next = id;
    sl->state = SLOT_DECODE;
    return true;
}

static void sample_and_emit(inf_sched *s, slot *sl, float *logits) {
    ending end = {0};
    int32_t id = pick(s, sl, logits, -1, &end);
    if (id < 0 || !emit(s, sl, id, &end)) finish_slot(s, sl, end.fin, end.status, end.msg);
}

/* A speculative step's rows: the slot's pending token, then its k drafts,
 * their logits rows from logits on. Row j's pick is the output, as plain
 * decoding would have made it; the walk goes on while the pick is draft j.
 * The rows after the last one kept leave the caches. */
static void verify(inf_sched *s, slot *sl, int k, const int32_t *drafts, float *logits) {
    const inf_exec *e = s->ex;
    const size_t V = (size_t)e->n_vocab;
    const int base = sl->n_cache; /* the pending token's position */
    ending end = {0};
    int hits = 0;
    for (int j = 0;; j++) {
        sl->n_cache = base + j + 1; /* rows 0..j hold the sequence's tokens */
        int32_t id = pick(s, sl, logits + (size_t)j * V, j < k ? j : -1, &end);
        if (id < 0) break;
        bool hit = j < k && id == drafts[j];
        hits += hit;
        if (!emit(s, sl, id, &end) || !hit) break;
    }
    e->seq_truncate(e->ctx, sl->id, sl->n_cache);
    inf_spec_kept(s->spec, sl->id, sl->n_cache, hits);
    sl->task->timings.draft_n += k;
    sl->task->timings.draft_accepted += hits;
    sl->task->timings.draft_steps++;
    pthread_mutex_lock(&s->mu);
    s->m.spec_steps_total++;
    s->m.spec_drafted_total += (uint64_t)k;
    s->m.spec_accepted_total += (uint64_t)hits;
    pthread_mutex_unlock(&s->mu);
    if (end.ends) finish_slot(s, sl, end.fin, end.status, end.msg);
}

static void fail_slot(inf_sched *s, slot *sl, inf_task_status status, const char *msg) {
    finish_slot(s, sl, INF_FINISH_NONE, status, msg);
}

/* Room for n_new more rows of the slot's sequence; a slot that cannot get it
 * fails as unavailable rather than corrupt anything. */
static bool reserve(inf_sched *s, slot *sl, int n_new) {
    const inf_exec *e = s->ex;
    inf_err err = {{0}};
    if (!e->seq_reserve(e->ctx, sl->id, n_new, &err)) return true;
    fail_slot(s, sl, INF_TASK_UNAVAILABLE, err.msg);
    return false;
}

/* Drafts for a generating slot that has n rows before it in the batch and
 * n_after generating slots after it: as many as the batch's rows, the
 * context, the request's token limit and the step's speculative rows leave. */
static int propose(inf_sched *s, slot *sl, int n, int n_after, int spec_left) {
    const inf_exec *e = s->ex;
    const inf_task *t = sl->task;
    int max = e->max_rows - n - n_after - 1;
    if (e->n_ctx - 1 - sl->n_cache < max) max = e->n_ctx - 1 - sl->n_cache;
    if (t->p.max_tokens >= 0 && t->p.max_tokens - t->n_gen - 1 < max)
        max = t->p.max_tokens - t->n_gen - 1;
    if (spec_left < max) max = spec_left;
    if (max <= 0) return 0;
    return inf_spec_propose(s->spec, sl->id, &sl->spec, max, &sl->drafts);
}

/* Builds one step's batch: a decode row per generating slot (and its drafts),
 * then prompt
 * rows of the earliest-started prefilling slots up to the chunk budget. */
static int build_batch(inf_sched *s) {
    const inf_exec *e = s->ex;
    int n = 0, n_dec = 0, spec_left = s->spec ? SPEC_ROWS : 0;
    for (int i = 0; i < s->n_slots; i++)
        n_dec += s->slots[i].state == SLOT_DECODE;
    for (int i = 0; i < s->n_slots; i++) {
        slot *sl = &s->slots[i];
        if (sl->state != SLOT_DECODE) continue;
        n_dec--;
        int k = sl->spec_on && spec_left > 0 ? propose(s, sl, n, n_dec, spec_left) : 0;
        if (k > 0 && e->seq_reserve(e->ctx, sl->id, 1 + k, &(inf_err){{0}})) {
            k = 0; /* no room for the drafts: decode plainly */
            inf_spec_kept(s->spec, sl->id, sl->n_cache + 1, 0);
        }
        if (k == 0 && !reserve(s, sl, 1)) continue;
        if (k > 0 && e->seq_mark) e->seq_mark(e->ctx, sl->id);
        sl->n_spec = k;
        spec_left -= k;
        for (int j = 0; j <= k; j++) {
            s->tok[n] = j == 0 ? sl->next : sl->drafts[j - 1];
            s->pos[n] = sl->n_cache + j;
            s->seq[n] = sl->id;
            s->want[n] = 1;
            s->dec[n] = 1;
            s->row_slot[n] = i;
            n++;
        }
    }
    int budget = e->max_rows - n;
    if (budget > s->chunk) budget = s->chunk;
    uint64_t after = 0;
    while (budget > 0) {
        slot *next = NULL;
        for (int i = 0; i < s->n_slots; i++) {
            slot *sl = &s->slots[i];
            if (sl->state == SLOT_PREFILL && sl->start_seq > after &&
                (!next || sl->start_seq < next->start_seq))
                next = sl;
        }
        if (!next) break;
        after = next->start_seq;
        int from = next->n_prompt_done, left = next->task->n_prompt - from;
        int k = left < budget ? left : budget;
        /* a chunk ends where the cache keeps a state checkpoint (not in a
           one-row piece: that row would be a decode row) */
        int stop = e->seq_checkpoint_pos ? e->seq_checkpoint_pos(e->ctx, next->task->n_prompt) : -1;
        if (stop - from >= 2 && from + k > stop) k = stop - from;
        /* No prompt chunk of one row unless the prompt has one (one-row spans
         * take the decode attention: see inf_exec_max_reuse); a slot offered
         * one row waits for a step with room for two, which comes while at
         * most n_slots - 1 others decode (unless the limits leave no such
         * step). */
        if (k < left && left - k == 1) k--;
        if (k == 1 && left > 1 && s->chunk >= 2 && e->max_rows >= s->n_slots + 1) continue;
        if (!reserve(s, next, k)) continue;
        for (int j = 0; j < k; j++) {
            s->tok[n] = next->task->prompt[from + j];
            s->pos[n] = from + j;
            s->seq[n] = next->id;
            s->want[n] = from + j < next->task->n_prompt - 1 ? INF_OUT_NONE
                         : next->task->p.embed               ? INF_OUT_HIDDEN
                                                             : INF_OUT_LOGITS;
            s->dec[n] = 0;
            s->row_slot[n] = (int)(next - s->slots);
            n++;
        }
        budget -= k;
    }
    return n;
}

/* Called with s->mu held. */
static void update_kv_metrics(inf_sched *s) {
    const inf_exec *e = s->ex;
    int kv = 0;
    for (int i = 0; i < s->n_slots; i++) {
        kv += s->slots[i].n_cache;
        if ((uint64_t)s->slots[i].n_cache > s->m.n_tokens_max)
            s->m.n_tokens_max = (uint64_t)s->slots[i].n_cache;
    }
    s->m.kv_tokens = kv;
    if (e->kv_stats) {
        e->kv_stats(e->ctx, &s->m.kv);
        s->m.has_kv_stats = true;
    }
}

static void step_rows(inf_sched *s) {
    const inf_exec *e = s->ex;
    for (int i = 0; i < s->n_slots; i++) {
        slot *sl = &s->slots[i];
        if (sl->state == SLOT_IDLE) continue;
        if (atomic_load(&sl->task->cancelled))
            finish_slot(s, sl, INF_FINISH_NONE, INF_TASK_OK, NULL);
        else if (!sl->smpl && !sl->task->p.embed)
            fail_slot(s, sl, INF_TASK_UNAVAILABLE, "out of memory: cannot create the sampler");
    }
    int n = build_batch(s);
    if (n == 0) return;
    inf_exec_batch b = {.n_rows = n,
                        .tokens = s->tok,
                        .pos = s->pos,
                        .seq = s->seq,
                        .logits = s->want,
                        .decode = s->dec,
                        .hidden = s->hidden};
    inf_err err = {{0}};
    int busy = 0;
    for (int i = 0; i < s->n_slots; i++)
        busy += s->slots[i].state != SLOT_IDLE;
    if (e->forward(e->ctx, &b, s->logits, &err)) {
        /* The rows of every slot in the batch may be half written: forget
         * those caches and fail their requests. Running out of memory is
         * worth a retry (unavailable); anything else is an internal error. */
        inf_task_status st =
            strstr(err.msg, "out of memory") ? INF_TASK_UNAVAILABLE : INF_TASK_INTERNAL;
        for (int r = 0; r < n; r++) {
            slot *sl = &s->slots[s->row_slot[r]];
            if (sl->state == SLOT_IDLE) continue;
            e->seq_reset(e->ctx, sl->id);
            sl->n_cache = 0;
            fail_slot(s, sl, st, err.msg);
        }
        return;
    }
    /* Counted before any task of this step can end, so a client that then
     * reads the metrics sees this call. */
    pthread_mutex_lock(&s->mu);
    s->m.n_decode_total++;
    s->m.n_busy_slots_total += (uint64_t)busy;
    pthread_mutex_unlock(&s->mu);
    int sel = 0, hsel = 0;
    for (int r = 0; r < n; r++) {
        slot *sl = &s->slots[s->row_slot[r]];
        INF_ASSERT(sl->n_cache == s->pos[r]);
        if (sl->state == SLOT_DECODE && sl->n_spec > 0) { /* rows r..r+k */
            int k = sl->n_spec;
            sl->n_spec = 0;
            verify(s, sl, k, sl->drafts, s->logits + (size_t)sel * e->n_vocab);
            sel += k + 1;
            r += k;
            continue;
        }
        sl->n_cache++;
        if (sl->state == SLOT_PREFILL) sl->n_prompt_done++;
        if (sl->state == SLOT_PREFILL && e->seq_checkpoint_pos &&
            sl->n_prompt_done == e->seq_checkpoint_pos(e->ctx, sl->task->n_prompt))
            e->seq_checkpoint(e->ctx, sl->id);
        if (s->want[r] == INF_OUT_NONE) continue;
        if (sl->state == SLOT_PREFILL) e->seq_publish(e->ctx, sl->id);
        if (s->want[r] == INF_OUT_HIDDEN) {
            /* an embedding: its prompt's last state is the whole result */
            inf_task *t = sl->task;
            pthread_mutex_lock(&t->mu);
            memcpy(t->embd, s->hidden + (size_t)hsel++ * e->n_embd,
                   (size_t)e->n_embd * sizeof *t->embd);
            pthread_mutex_unlock(&t->mu);
            finish_slot(s, sl, INF_FINISH_STOP, INF_TASK_OK, NULL);
            continue;
        }
        sample_and_emit(s, sl, s->logits + (size_t)sel * e->n_vocab);
        sel++;
    }
}

/* The slots' snapshot for inf_sched_slots_get. Called with s->mu held, on
 * the scheduler thread (the only writer of the slots). */
static void publish_slots(inf_sched *s) {
    uint64_t now = inf_now_ns();
    for (int i = 0; i < s->n_slots; i++) {
        const slot *sl = &s->slots[i];
        inf_slot_info *o = &s->info[i];
        *o = (inf_slot_info){.id = sl->id, .n_cache = sl->n_cache, .max_tokens = -1};
        if (sl->state == SLOT_IDLE || !sl->task) continue;
        const inf_task *t = sl->task;
        o->state = sl->state == SLOT_PREFILL ? INF_SLOT_PREFILL : INF_SLOT_DECODE;
        o->n_prompt = t->n_prompt;
        o->n_prompt_done = sl->n_prompt_done;
        o->n_reused = t->timings.cache_n;
        o->n_gen = t->n_gen;
        o->max_tokens = t->p.max_tokens;
        o->seconds = (double)(now - sl->t_start) * 1e-9;
    }
}

/* One scheduler step, then the cache counters and the slots' snapshot. */
static void step(inf_sched *s) {
    step_rows(s);
    pthread_mutex_lock(&s->mu);
    update_kv_metrics(s);
    publish_slots(s);
    pthread_mutex_unlock(&s->mu);
}

static inf_task *queue_pop(inf_sched *s) {
    inf_task *t = s->queue[s->q_head];
    s->q_head = (s->q_head + 1) % s->q_cap;
    s->q_len--;
    return t;
}

static void end_task(inf_task *t, inf_task_status status, const char *msg) {
    pthread_mutex_lock(&t->mu);
    t->done = true;
    if (status != INF_TASK_OK) {
        t->status = status;
        snprintf(t->err, sizeof t->err, "%s", msg);
    }
    pthread_cond_broadcast(&t->cv);
    pthread_mutex_unlock(&t->mu);
    inf_task_release(t);
}

static void *sched_main(void *arg) {
    inf_sched *s = arg;
    for (;;) {
        pthread_mutex_lock(&s->mu);
        while (!s->quit && s->q_len == 0 && n_active(s) == 0)
            pthread_cond_wait(&s->cv, &s->mu);
        if (s->quit) {
            pthread_mutex_unlock(&s->mu);
            break;
        }
        /* Admit waiting tasks to free slots; drop the ones whose client left. */
        while (s->q_len > 0) {
            inf_task *t = s->queue[s->q_head];
            if (atomic_load(&t->cancelled)) {
                queue_pop(s);
                s->m.requests_cancelled_total++;
                end_task(t, INF_TASK_OK, NULL);
                continue;
            }
            slot *sl = pick_slot(s, t);
            if (!sl) break;
            queue_pop(s);
            start_slot(s, sl, t);
        }
        s->m.requests_deferred = s->q_len;
        s->m.requests_processing = n_active(s);
        publish_slots(s);
        pthread_mutex_unlock(&s->mu);
        step(s);
    }
    for (int i = 0; i < s->n_slots; i++)
        if (s->slots[i].state != SLOT_IDLE)
            fail_slot(s, &s->slots[i], INF_TASK_UNAVAILABLE, "shutting down");
    pthread_mutex_lock(&s->mu);
    while (s->q_len > 0)
        end_task(queue_pop(s), INF_TASK_UNAVAILABLE, "shutting down");
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

int inf_sched_create(inf_sched **out, const inf_exec *ex, int prefill_chunk, inf_err *err) {
    *out = NULL;
    if (ex->n_seq < 1 || ex->n_ctx < 2 || ex->max_rows < ex->n_seq + 1 || ex->n_vocab < 1)
        return inf_fail(err,
                        "scheduler: needs n_seq >= 1, n_ctx >= 2, max_rows > n_seq "
                        "(got n_seq %d, n_ctx %d, max_rows %d)",
                        ex->n_seq, ex->n_ctx, ex->max_rows);
    inf_sched *s = calloc(1, sizeof *s);
    if (!s) return inf_fail(err, "scheduler: out of memory");
    s->ex = ex;
    s->n_slots = ex->n_seq;
    s->chunk = prefill_chunk > 0 ? prefill_chunk : 256;
    s->q_cap = 1024;
    size_t R = (size_t)ex->max_rows;
    s->slots = calloc((size_t)s->n_slots, sizeof *s->slots);
    s->queue = calloc((size_t)s->q_cap, sizeof *s->queue);
    s->tok = malloc(R * sizeof *s->tok);
    s->pos = malloc(R * sizeof *s->pos);
    s->seq = malloc(R * sizeof *s->seq);
    s->want = malloc(R);
    s->dec = malloc(R);
    s->row_slot = malloc(R * sizeof *s->row_slot);
    const bool spec = ex->spec_kind != INF_SPEC_NONE && ex->seq_truncate;
    const size_t logit_rows = (size_t)s->n_slots + (spec ? SPEC_ROWS : 0);
    s->logits = malloc(logit_rows * (size_t)ex->n_vocab * sizeof *s->logits);
    s->scratch = malloc((size_t)ex->n_vocab * sizeof *s->scratch);
    s->gscratch = malloc((size_t)ex->n_vocab * sizeof *s->gscratch);
    if (ex->n_embd > 0)
        s->hidden = malloc((size_t)s->n_slots * (size_t)ex->n_embd * sizeof *s->hidden);
    s->info = calloc((size_t)s->n_slots, sizeof *s->info);
    for (int32_t id = 0; id < ex->n_vocab; id++)
        s->n_eog += ex->is_eog(ex->ctx, id);
    s->eog = malloc((size_t)(s->n_eog > 0 ? s->n_eog : 1) * sizeof *s->eog);
    for (int32_t id = 0, i = 0; s->eog && id < ex->n_vocab; id++)
        if (ex->is_eog(ex->ctx, id)) s->eog[i++] = id;
    bool ok = s->eog && s->slots && s->info && s->queue && s->tok && s->pos && s->seq && s->want &&
              s->dec && s->row_slot && s->logits && s->scratch && s->gscratch &&
              (ex->n_embd <= 0 || s->hidden);
    for (int i = 0; ok && i < s->n_slots; i++)
        s->slots[i].id = s->info[i].id = i;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    if (ok && spec && inf_spec_create(&s->spec, ex, err)) {
        inf_sched_free(s);
        return -1;
    }
    if (!ok) {
        inf_sched_free(s);
        return inf_fail(err, "scheduler: out of memory");
    }
    if (pthread_create(&s->thread, NULL, sched_main, s)) {
        inf_sched_free(s);
        return inf_fail(err, "scheduler: cannot start its thread");
    }
    s->thread_started = true;
    *out = s;
    return 0;
}

void inf_sched_free(inf_sched *s) {
    if (!s) return;
    if (s->thread_started) {
        pthread_mutex_lock(&s->mu);
        s->quit = true;
        pthread_cond_broadcast(&s->cv);
        pthread_mutex_unlock(&s->mu);
        pthread_join(s->thread, NULL);
    }
    free(s->slots);
    free(s->info);
    free(s->queue);
    free(s->tok);
    free(s->pos);
    free(s->seq);
    free(s->want);
    free(s->dec);
    free(s->row_slot);
    free(s->logits);
    free(s->scratch);
    free(s->gscratch);
    free(s->hidden);
    free(s->eog);
    inf_gram_vocab_free(s->gvocab);
    inf_spec_free(s->spec);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s);
}

int inf_sched_submit(inf_sched *s, inf_task *t, inf_err *err) {
    if (t->n_prompt < 1) return inf_fail(err, "the prompt is empty");
    if (t->p.embed && s->ex->n_embd <= 0) return inf_fail(err, "this model cannot embed");
    if (!t->p.embed && s->ex->no_head)
        return inf_fail(err, "this model has no output head (an embedding model): it cannot "
                             "generate text, only embed");
    if (t->p.embed && t->n_prompt > s->ex->n_ctx)
        return inf_fail(err, "the input has %d tokens but the context holds %d", t->n_prompt,
                        s->ex->n_ctx);
    if (t->p.embed && !t->embd) {
        t->embd = calloc((size_t)s->ex->n_embd, sizeof *t->embd);
        if (!t->embd) return inf_fail(err, "out of memory: an embedding");
        t->n_embd = s->ex->n_embd;
    }
    if (!t->p.embed && t->n_prompt >= s->ex->n_ctx)
        return inf_fail(err,
                        "the prompt has %d tokens but the context holds %d (one position must "
                        "remain for the reply)",
                        t->n_prompt, s->ex->n_ctx);
    if (t->p.spec.n_max >= 0 && inf_spec_check(&t->p.spec, err)) return -1;
    for (int i = 0; i < t->p.n_logit_bias; i++) {
        const inf_logit_bias *b = &t->p.logit_bias[i];
        if (b->id < 0 || b->id >= s->ex->n_vocab)
            return inf_fail(err, "logit_bias: token id %d is not below n_vocab %d", (int)b->id,
                            s->ex->n_vocab);
        if (!isfinite(b->bias))
            return inf_fail(err, "logit_bias: the bias of token %d is not finite", (int)b->id);
    }
    if (t->p.logprobs && !t->lp) {
        /* One entry per token the request may generate, bounded by the context. */
        int cap = s->ex->n_ctx - t->n_prompt + 1;
        if (t->p.max_tokens >= 0 && t->p.max_tokens < cap) cap = t->p.max_tokens;
        t->lp = calloc((size_t)(cap > 0 ? cap : 1), sizeof *t->lp);
        if (!t->lp) return inf_fail(err, "out of memory: logprobs of %d tokens", cap);
        t->cap_lp = cap;
    }
    pthread_mutex_lock(&s->mu);
    if (s->quit || s->q_len == s->q_cap) {
        bool quit = s->quit;
        pthread_mutex_unlock(&s->mu);
        return inf_fail(err, quit ? "shutting down" : "the queue is full (%d requests waiting)",
                        s->q_cap);
    }
    atomic_fetch_add(&t->refs, 1);
    s->queue[(s->q_head + s->q_len) % s->q_cap] = t;
    s->q_len++;
    s->m.requests_deferred = s->q_len;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return 0;
}

void inf_sched_cancel(inf_sched *s, inf_task *t) {
    atomic_store(&t->cancelled, true);
    pthread_mutex_lock(&s->mu);
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

void inf_sched_metrics_get(inf_sched *s, inf_sched_metrics *m) {
    pthread_mutex_lock(&s->mu);
    *m = s->m;
    pthread_mutex_unlock(&s->mu);
}

int inf_sched_slots_get(inf_sched *s, inf_slot_info *out, int cap) {
    pthread_mutex_lock(&s->mu);
    for (int i = 0; i < s->n_slots && i < cap; i++)
        out[i] = s->info[i];
    pthread_mutex_unlock(&s->mu);
    return s->n_slots;
}
