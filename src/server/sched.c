#include "server/sched.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/timer.h"

/* ---- tasks ---- */

srv_task *srv_task_new(int32_t *prompt, int n_prompt, const srv_request *r) {
    srv_task *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    if (srv_stop_init(&t->stop, r->stop, r->n_stop)) {
        free(t);
        return NULL;
    }
    t->prompt = prompt;
    t->n_prompt = n_prompt;
    t->samp = r->samp;
    t->max_tokens = r->max_tokens;
    t->want_logprobs = r->logprobs;
    t->top_logprobs = r->top_logprobs;
    t->ignore_eos = r->ignore_eos;
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->cv, NULL);
    atomic_init(&t->cancelled, false);
    atomic_init(&t->refs, 1);
    return t;
}

void srv_task_release(srv_task *t) {
    if (!t || atomic_fetch_sub(&t->refs, 1) != 1) return;
    free(t->prompt);
    srv_stop_free(&t->stop);
    srv_buf_free(&t->text);
    free(t->lp);
    pthread_mutex_destroy(&t->mu);
    pthread_cond_destroy(&t->cv);
    free(t);
}

/* ---- helpers ---- */

int srv_common_prefix(const int32_t *a, int na, const int32_t *b, int nb) {
    int n = na < nb ? na : nb, i = 0;
    while (i < n && a[i] == b[i])
        i++;
    return i;
}

void srv_logprobs_from_logits(srv_logprob *out, const float *logits, int n_vocab, int32_t id,
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
    if (k > SRV_MAX_TOP_LOGPROBS) k = SRV_MAX_TOP_LOGPROBS;
    /* Insertion into a sorted list of at most k raw logits: strict > keeps
     * the lower id first on ties. */
    float top[SRV_MAX_TOP_LOGPROBS]; /* [k] raw logits, best first */
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
    srv_task *task; /* NULL when idle */
    int32_t *cache; /* [n_ctx] tokens whose K/V the sequence holds */
    int n_cache;
    int n_prompt_done; /* prompt tokens in the cache */
    int32_t next;      /* DECODE: the sampled token, not yet in the cache */
    void *smpl;
    srv_buf pending; /* bytes of an unfinished UTF-8 character */
    uint64_t t_start, t_first;
    uint64_t start_seq, last_used;
} slot;

struct srv_sched {
    const srv_engine *eng;
    int n_slots, chunk;
    slot *slots; /* [n_slots] */

    pthread_t thread;
    bool thread_started;
    pthread_mutex_t mu; /* queue, quit, metrics */
    pthread_cond_t cv;
    srv_task **queue; /* ring of q_cap */
    int q_head, q_len, q_cap;
    bool quit;
    srv_metrics m;
    uint64_t clock, seed_counter;

    /* One step's batch, sized for eng->max_rows rows. */
    int32_t *tok, *pos, *seq; /* [max_rows] */
    uint8_t *want;            /* [max_rows] */
    int *row_slot;            /* [max_rows] */
    float *logits;            /* [n_slots][n_vocab] */
    float *scratch;           /* [n_vocab] raw logits kept for logprobs */
};

static int n_active(const srv_sched *s) {
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

/* The free slot whose cache shares the longest prefix with the prompt; on a
 * tie the least recently used, so fresh conversations keep their caches. */
static slot *pick_slot(srv_sched *s, const srv_task *t) {
    slot *best = NULL;
    int best_lcp = -1;
    for (int i = 0; i < s->n_slots; i++) {
        slot *sl = &s->slots[i];
        if (sl->state != SLOT_IDLE) continue;
        int lcp = srv_common_prefix(sl->cache, sl->n_cache, t->prompt, t->n_prompt);
        if (lcp > best_lcp || (lcp == best_lcp && sl->last_used < best->last_used)) {
            best = sl;
            best_lcp = lcp;
        }
    }
    return best;
}

/* Called with s->mu held. */
static void start_slot(srv_sched *s, slot *sl, srv_task *t) {
    const srv_engine *e = s->eng;
    int lcp;
    if (e->seq_begin) {
        /* The engine's prefix cache decides what is reused. */
        lcp = e->seq_begin(e->ctx, sl->id, t->prompt, t->n_prompt);
        INF_ASSERT(lcp >= 0 && lcp < t->n_prompt);
        memcpy(sl->cache, t->prompt, (size_t)lcp * sizeof *sl->cache);
    } else {
        lcp = srv_common_prefix(sl->cache, sl->n_cache, t->prompt, t->n_prompt);
        if (lcp >= t->n_prompt) lcp = t->n_prompt - 1; /* the last prompt row must run */
        e->truncate(e->ctx, sl->id, lcp);
    }
    sl->n_cache = lcp;
    sl->n_prompt_done = lcp;
    sl->task = t;
    sl->state = SLOT_PREFILL;
    sl->t_start = inf_now_ns();
    sl->t_first = 0;
    sl->start_seq = ++s->clock;
    srv_buf_clear(&sl->pending);
    uint64_t seed =
        t->samp.has_seed ? t->samp.seed : splitmix(inf_now_ns() ^ splitmix(++s->seed_counter));
    sl->smpl = e->sampler_new(e->ctx, &t->samp, seed);
    for (int i = 0; sl->smpl && i < t->n_prompt; i++)
        e->sampler_accept(sl->smpl, t->prompt[i]);
    s->m.cache_tokens_reused += (uint64_t)lcp;
    pthread_mutex_lock(&t->mu);
    t->started = true;
    t->timings.cache_n = lcp;
    pthread_mutex_unlock(&t->mu);
}

/* Ends the slot's task (finish reason or error) and frees the slot; the
 * slot's cache stays for the next request. */
static void update_kv_metrics(srv_sched *s);

static void finish_slot(srv_sched *s, slot *sl, srv_finish fin, const srv_error *err) {
    srv_task *t = sl->task;
    uint64_t now = inf_now_ns();
    uint64_t t_first = sl->t_first ? sl->t_first : now;
    /* Only this thread writes the timings: no lock needed to read them. */
    srv_timings tm = t->timings;
    tm.prompt_n = sl->n_prompt_done - tm.cache_n;
    tm.prompt_ms = (double)(t_first - sl->t_start) * 1e-6;
    tm.predicted_n = t->n_gen;
    tm.predicted_ms = (double)(now - t_first) * 1e-6;

    /* Free the slot and count the request before the client hears that it
     * ended, so that what it reads next (/metrics) already includes it. */
    if (sl->smpl) s->eng->sampler_free(sl->smpl);
    sl->smpl = NULL;
    if (s->eng->seq_end) {
        s->eng->seq_end(s->eng->ctx, sl->id, sl->cache, sl->n_cache);
        sl->n_cache = 0;
    }
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
    if (fin != SRV_FINISH_STOP || !t->stop.done) {
        /* No stop string cut the text: release what was held. */
        srv_stop_push(&t->stop, &t->text, sl->pending.data ? sl->pending.data : "",
                      sl->pending.len);
        srv_stop_flush(&t->stop, &t->text);
    }
    t->done = true;
    t->finish = fin;
    if (err) t->err = *err;
    t->timings = tm;
    pthread_cond_broadcast(&t->cv);
    pthread_mutex_unlock(&t->mu);
    srv_buf_clear(&sl->pending);
    srv_task_release(t);
}

/* Temperature 0 with every penalty off: the sampler would take the highest
 * logit (the first on ties), which is all this does, without copying the
 * vocabulary into its candidate list. */
static bool plain_greedy(const srv_sampling *p) {
    return p->temperature <= 0 && p->repeat_penalty == 1.0f && p->presence_penalty == 0 &&
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

/* Samples the slot's next token from its logits row and passes its text on. */
static void sample_and_emit(srv_sched *s, slot *sl, float *logits) {
    const srv_engine *e = s->eng;
    srv_task *t = sl->task;
    if (t->want_logprobs) memcpy(s->scratch, logits, (size_t)e->n_vocab * sizeof *logits);
    int32_t id = plain_greedy(&t->samp) ? argmax(logits, e->n_vocab)
                                        : e->sampler_sample(sl->smpl, logits, e->n_vocab);
    e->sampler_accept(sl->smpl, id);
    if (!sl->t_first) sl->t_first = inf_now_ns();

    srv_finish fin = SRV_FINISH_NONE;
    pthread_mutex_lock(&t->mu);
    t->n_gen++;
    if (!t->ignore_eos && e->is_eog(e->ctx, id)) {
        fin = SRV_FINISH_STOP;
    } else {
        if (t->want_logprobs && t->n_lp < t->cap_lp) {
            srv_logprobs_from_logits(&t->lp[t->n_lp++], s->scratch, e->n_vocab, id,
                                     t->top_logprobs);
        }
        char piece[256];
        int n = e->piece(e->ctx, id, piece, sizeof piece);
        srv_buf_add(&sl->pending, piece, (size_t)n);
        size_t whole = srv_utf8_complete_len(sl->pending.data, sl->pending.len);
        if (whole) {
            if (srv_stop_push(&t->stop, &t->text, sl->pending.data, whole) == 1)
                fin = SRV_FINISH_STOP;
            srv_buf_consume(&sl->pending, whole);
        }
    }
    if (fin == SRV_FINISH_NONE) {
        if (t->max_tokens >= 0 && t->n_gen >= t->max_tokens)
            fin = SRV_FINISH_LENGTH;
        else if (sl->n_cache >= e->n_ctx)
            fin = SRV_FINISH_LENGTH; /* no room to feed it back */
    }
    pthread_cond_broadcast(&t->cv);
    pthread_mutex_unlock(&t->mu);

    if (fin != SRV_FINISH_NONE)
        finish_slot(s, sl, fin, NULL);
    else {
        sl->next = id;
        sl->state = SLOT_DECODE;
    }
}

/* Builds one step's batch: a decode row per generating slot, then prompt
 * rows of the earliest-started prefilling slots up to the chunk budget. */
static void fail_slot(srv_sched *s, slot *sl, int status, const char *msg);

/* Room for n_new more rows of the slot's sequence (paged engines); a slot
 * that cannot get it fails with a 503 rather than corrupt anything. */
static bool reserve(srv_sched *s, slot *sl, int n_new) {
    const srv_engine *e = s->eng;
    inf_err err = {{0}};
    if (!e->seq_reserve || !e->seq_reserve(e->ctx, sl->id, n_new, &err)) return true;
    fail_slot(s, sl, 503, err.msg);
    return false;
}

static int build_batch(srv_sched *s) {
    const srv_engine *e = s->eng;
    int n = 0;
    for (int i = 0; i < s->n_slots; i++) {
        slot *sl = &s->slots[i];
        if (sl->state != SLOT_DECODE || !reserve(s, sl, 1)) continue;
        s->tok[n] = sl->next;
        s->pos[n] = sl->n_cache;
        s->seq[n] = sl->id;
        s->want[n] = 1;
        s->row_slot[n] = i;
        n++;
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
        int from = next->n_prompt_done + 0, left = next->task->n_prompt - from;
        /* Rows already queued this step for this slot would follow; it has none. */
        int k = left < budget ? left : budget;
        /* No prompt chunk of one row unless the prompt has one (one-row spans
         * take the decode attention: see eng_seq_begin); a slot offered one
         * row waits for a step with room for two, which comes while at most
         * n_slots - 1 others decode (unless the limits leave no such step). */
        if (k < left && left - k == 1) k--;
        if (k == 1 && left > 1 && s->chunk >= 2 && e->max_rows >= s->n_slots + 1) continue;
        if (!reserve(s, next, k)) continue;
        for (int j = 0; j < k; j++) {
            s->tok[n] = next->task->prompt[from + j];
            s->pos[n] = from + j;
            s->seq[n] = next->id;
            s->want[n] = from + j == next->task->n_prompt - 1;
            s->row_slot[n] = (int)(next - s->slots);
            n++;
        }
        budget -= k;
    }
    return n;
}

static void fail_slot(srv_sched *s, slot *sl, int status, const char *msg) {
    srv_error err;
    srv_error_set(&err, status, status == 503 ? "unavailable_error" : "server_error", NULL, NULL,
                  "%s", msg);
    finish_slot(s, sl, SRV_FINISH_NONE, &err);
}

/* Called with s->mu held. */
static void update_kv_metrics(srv_sched *s) {
    const srv_engine *e = s->eng;
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

static void step_rows(srv_sched *s) {
    const srv_engine *e = s->eng;
    for (int i = 0; i < s->n_slots; i++) {
        slot *sl = &s->slots[i];
        if (sl->state == SLOT_IDLE) continue;
        if (atomic_load(&sl->task->cancelled))
            finish_slot(s, sl, SRV_FINISH_NONE, NULL);
        else if (!sl->smpl)
            fail_slot(s, sl, 500, "cannot create the sampler (out of memory?)");
    }
    int n = build_batch(s);
    if (n == 0) return;
    srv_batch b = {.n_rows = n, .tokens = s->tok, .pos = s->pos, .seq = s->seq, .logits = s->want};
    inf_err err = {{0}};
    int busy = 0;
    for (int i = 0; i < s->n_slots; i++)
        busy += s->slots[i].state != SLOT_IDLE;
    if (e->forward(e->ctx, &b, s->logits, &err)) {
        /* The rows of every slot in the batch may be half written: forget
         * those caches and fail their requests. */
        for (int r = 0; r < n; r++) {
            slot *sl = &s->slots[s->row_slot[r]];
            if (sl->state == SLOT_IDLE) continue;
            e->truncate(e->ctx, sl->id, 0);
            sl->n_cache = 0;
            fail_slot(s, sl, 500, err.msg);
        }
        return;
    }
    int sel = 0;
    for (int r = 0; r < n; r++) {
        slot *sl = &s->slots[s->row_slot[r]];
        INF_ASSERT(sl->n_cache == s->pos[r]);
        sl->cache[sl->n_cache++] = s->tok[r];
        if (sl->state == SLOT_PREFILL) sl->n_prompt_done++;
        if (!s->want[r]) continue;
        if (e->seq_publish && sl->state == SLOT_PREFILL)
            e->seq_publish(e->ctx, sl->id, sl->cache, sl->n_cache);
        sample_and_emit(s, sl, s->logits + (size_t)sel * e->n_vocab);
        sel++;
    }
    pthread_mutex_lock(&s->mu);
    s->m.n_decode_total++;
    s->m.n_busy_slots_total += (uint64_t)busy;
    pthread_mutex_unlock(&s->mu);
}

/* One scheduler step, then the cache counters. */
static void step(srv_sched *s) {
    step_rows(s);
    pthread_mutex_lock(&s->mu);
    update_kv_metrics(s);
    pthread_mutex_unlock(&s->mu);
}

static srv_task *queue_pop(srv_sched *s) {
    srv_task *t = s->queue[s->q_head];
    s->q_head = (s->q_head + 1) % s->q_cap;
    s->q_len--;
    return t;
}

static void end_task(srv_task *t, int status, const char *msg) {
    pthread_mutex_lock(&t->mu);
    t->done = true;
    srv_error_set(&t->err, status, status == 503 ? "unavailable_error" : "server_error", NULL, NULL,
                  "%s", msg);
    pthread_cond_broadcast(&t->cv);
    pthread_mutex_unlock(&t->mu);
    srv_task_release(t);
}

static void *sched_main(void *arg) {
    srv_sched *s = arg;
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
            srv_task *t = s->queue[s->q_head];
            if (atomic_load(&t->cancelled)) {
                queue_pop(s);
                s->m.requests_cancelled_total++;
                pthread_mutex_lock(&t->mu);
                t->done = true;
                pthread_cond_broadcast(&t->cv);
                pthread_mutex_unlock(&t->mu);
                srv_task_release(t);
                continue;
            }
            slot *sl = pick_slot(s, t);
            if (!sl) break;
            queue_pop(s);
            start_slot(s, sl, t);
        }
        s->m.requests_deferred = s->q_len;
        s->m.requests_processing = n_active(s);
        pthread_mutex_unlock(&s->mu);
        step(s);
    }
    for (int i = 0; i < s->n_slots; i++)
        if (s->slots[i].state != SLOT_IDLE) fail_slot(s, &s->slots[i], 503, "server shutting down");
    pthread_mutex_lock(&s->mu);
    while (s->q_len > 0)
        end_task(queue_pop(s), 503, "server shutting down");
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

int srv_sched_create(srv_sched **out, const srv_engine *eng, int prefill_chunk, inf_err *err) {
    *out = NULL;
    if (eng->n_seq < 1 || eng->n_ctx < 2 || eng->max_rows < eng->n_seq + 1 || eng->n_vocab < 1)
        return inf_fail(err,
                        "scheduler: engine needs n_seq >= 1, n_ctx >= 2, max_rows > n_seq "
                        "(got n_seq %d, n_ctx %d, max_rows %d)",
                        eng->n_seq, eng->n_ctx, eng->max_rows);
    srv_sched *s = calloc(1, sizeof *s);
    if (!s) return inf_fail(err, "scheduler: out of memory");
    s->eng = eng;
    s->n_slots = eng->n_seq;
    s->chunk = prefill_chunk > 0 ? prefill_chunk : 256;
    s->q_cap = 1024;
    size_t R = (size_t)eng->max_rows;
    s->slots = calloc((size_t)s->n_slots, sizeof *s->slots);
    s->queue = calloc((size_t)s->q_cap, sizeof *s->queue);
    s->tok = malloc(R * sizeof *s->tok);
    s->pos = malloc(R * sizeof *s->pos);
    s->seq = malloc(R * sizeof *s->seq);
    s->want = malloc(R);
    s->row_slot = malloc(R * sizeof *s->row_slot);
    s->logits = malloc((size_t)s->n_slots * (size_t)eng->n_vocab * sizeof *s->logits);
    s->scratch = malloc((size_t)eng->n_vocab * sizeof *s->scratch);
    bool ok = s->slots && s->queue && s->tok && s->pos && s->seq && s->want && s->row_slot &&
              s->logits && s->scratch;
    for (int i = 0; ok && i < s->n_slots; i++) {
        s->slots[i].id = i;
        s->slots[i].cache = malloc((size_t)eng->n_ctx * sizeof(int32_t));
        ok = s->slots[i].cache != NULL;
    }
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    if (!ok) {
        srv_sched_free(s);
        return inf_fail(err, "scheduler: out of memory");
    }
    if (pthread_create(&s->thread, NULL, sched_main, s)) {
        srv_sched_free(s);
        return inf_fail(err, "scheduler: cannot start its thread");
    }
    s->thread_started = true;
    *out = s;
    return 0;
}

void srv_sched_free(srv_sched *s) {
    if (!s) return;
    if (s->thread_started) {
        pthread_mutex_lock(&s->mu);
        s->quit = true;
        pthread_cond_broadcast(&s->cv);
        pthread_mutex_unlock(&s->mu);
        pthread_join(s->thread, NULL);
    }
    for (int i = 0; s->slots && i < s->n_slots; i++) {
        free(s->slots[i].cache);
        srv_buf_free(&s->slots[i].pending);
    }
    free(s->slots);
    free(s->queue);
    free(s->tok);
    free(s->pos);
    free(s->seq);
    free(s->want);
    free(s->row_slot);
    free(s->logits);
    free(s->scratch);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s);
}

int srv_sched_submit(srv_sched *s, srv_task *t) {
    if (t->n_prompt < 1) return -1;
    if (t->want_logprobs && !t->lp) {
        /* One entry per token the request may generate, bounded by the context. */
        int cap = s->eng->n_ctx - t->n_prompt + 1;
        if (t->max_tokens >= 0 && t->max_tokens < cap) cap = t->max_tokens;
        t->lp = calloc((size_t)cap, sizeof *t->lp);
        if (!t->lp) return -1;
        t->cap_lp = cap;
    }
    pthread_mutex_lock(&s->mu);
    if (s->quit || s->q_len == s->q_cap) {
        pthread_mutex_unlock(&s->mu);
        return -1;
    }
    atomic_fetch_add(&t->refs, 1);
    s->queue[(s->q_head + s->q_len) % s->q_cap] = t;
    s->q_len++;
    s->m.requests_deferred = s->q_len;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return 0;
}

void srv_sched_cancel(srv_sched *s, srv_task *t) {
    atomic_store(&t->cancelled, true);
    pthread_mutex_lock(&s->mu);
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

void srv_sched_metrics(srv_sched *s, srv_metrics *m) {
    pthread_mutex_lock(&s->mu);
    *m = s->m;
    pthread_mutex_unlock(&s->mu);
}
