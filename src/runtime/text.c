#include "runtime/text.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- inf_buf ---- */

static int buf_reserve(inf_buf *b, size_t need) {
    if (need + 1 <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need + 1)
        cap *= 2;
    char *p = realloc(b->data, cap);
    if (!p) return -1;
    b->data = p;
    b->cap = cap;
    return 0;
}

int inf_buf_add(inf_buf *b, const char *s, size_t n) {
    if (buf_reserve(b, b->len + n)) return -1;
    if (n) memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = 0;
    return 0;
}

int inf_buf_adds(inf_buf *b, const char *s) {
    return inf_buf_add(b, s, strlen(s));
}

int inf_buf_printf(inf_buf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || buf_reserve(b, b->len + (size_t)n)) return -1;
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
    return 0;
}

void inf_buf_consume(inf_buf *b, size_t n) {
    if (n >= b->len) {
        inf_buf_clear(b);
        return;
    }
    memmove(b->data, b->data + n, b->len - n);
    b->len -= n;
    b->data[b->len] = 0;
}

void inf_buf_clear(inf_buf *b) {
    b->len = 0;
    if (b->data) b->data[0] = 0;
}

void inf_buf_free(inf_buf *b) {
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

/* ---- UTF-8 ---- */

/* Sequence length announced by a lead byte; 0 for a continuation or invalid byte. */
/* ---- stop strings ---- */

/* Longest k < len(pat) such that the last k bytes of h equal pat's first k. */
static size_t suffix_prefix(const char *h, size_t hn, const char *pat, size_t pn) {
    size_t k = hn < pn - 1 ? hn : pn - 1;
    for (; k > 0; k--)
        if (!memcmp(h + hn - k, pat, k)) return k;
    return 0;
}

int inf_stop_init(inf_stop *s, const char *const *stops, int n_stops) {
    memset(s, 0, sizeof *s);
    s->stop_index = -1;
    if (n_stops <= 0) return 0;
    s->stops = calloc((size_t)n_stops, sizeof *s->stops);
    if (!s->stops) return -1;
    for (int i = 0; i < n_stops; i++) {
        if (!stops[i] || !stops[i][0]) continue;
        s->stops[s->n_stops] = strdup(stops[i]);
        if (!s->stops[s->n_stops]) {
            inf_stop_free(s);
            return -1;
        }
        s->n_stops++;
    }
    return 0;
}

int inf_stop_set_end_after(inf_stop *s, const char *end_after) {
    free(s->end_after);
    s->end_after = NULL;
    if (!end_after || !end_after[0]) return 0;
    s->end_after = strdup(end_after);
    return s->end_after ? 0 : -1;
}

void inf_stop_free(inf_stop *s) {
    for (int i = 0; i < s->n_stops; i++)
        free(s->stops[i]);
    free(s->stops);
    free(s->end_after);
    inf_buf_free(&s->held);
    memset(s, 0, sizeof *s);
}

int inf_stop_push(inf_stop *s, inf_buf *out, const char *text, size_t n) {
    if (s->done) return 1;
    if (inf_buf_add(&s->held, text, n)) return -1;
    const char *h = s->held.data;
    size_t hn = s->held.len;
    /* Everything released earlier could not start a stop string, so a
     * match, if any, lies wholly inside the held text. The stop is the match
     * that completes first, as a stream meets it byte by byte (a longer stop
     * string that starts earlier but is not complete yet loses), so the
     * answer does not depend on how the text was cut into pieces. */
    size_t best = hn, best_end = SIZE_MAX;
    int best_i = -1;
    for (int i = 0; i < s->n_stops; i++) {
        size_t len = strlen(s->stops[i]);
        const char *p = memmem(h, hn, s->stops[i], len);
        if (!p) continue;
        size_t at = (size_t)(p - h);
        if (at + len < best_end || (at + len == best_end && at < best))
            best = at, best_end = at + len, best_i = i;
    }
    bool after = false;
    if (s->end_after) { /* competes by the same rule; loses a full tie */
        size_t len = strlen(s->end_after);
        const char *p = memmem(h, hn, s->end_after, len);
        size_t at = p ? (size_t)(p - h) : 0;
        if (p && (at + len < best_end || (at + len == best_end && at < best)))
            best = at, best_end = at + len, after = true;
    }
    if (best < hn) {
        /* a stop string is dropped; end_after stays in the text */
        if (inf_buf_add(out, h, after ? best_end : best)) return -1;
        inf_buf_clear(&s->held);
        s->done = true;
        s->stop_index = after ? -1 : best_i;
        s->after_matched = after;
        return 1;
    }
    size_t keep = 0;
    for (int i = 0; i < s->n_stops; i++) {
        size_t k = suffix_prefix(h, hn, s->stops[i], strlen(s->stops[i]));
        if (k > keep) keep = k;
    }
    /* A released prefix of end_after could not be found again: hold it too. */
    size_t ka = s->end_after ? suffix_prefix(h, hn, s->end_after, strlen(s->end_after)) : 0;
    if (ka > keep) keep = ka;
    if (inf_buf_add(out, h, hn - keep)) return -1;
    inf_buf_consume(&s->held, hn - keep);
    return 0;
}

int inf_stop_flush(inf_stop *s, inf_buf *out) {
    if (s->done) return 0;
    if (inf_buf_add(out, s->held.data ? s->held.data : "", s->held.len)) return -1;
    inf_buf_clear(&s->held);
    return 0;
}

/* ---- reasoning splitter ---- */

enum { THINK_START, THINK_LEAD, THINK_IN, CONTENT_LEAD, CONTENT_IN };

static const char OPEN_TAG[] = "<think>";
static const char CLOSE_TAG[] = "</think>";

static bool is_ws(char c) {
    return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

void inf_think_init(inf_think *t, bool start_in_think) {
    memset(t, 0, sizeof *t);
    t->state = start_in_think ? THINK_LEAD : THINK_START;
}

void inf_think_free(inf_think *t) {
    inf_buf_free(&t->held);
}

/* Runs the state machine over the held text as far as it can be decided. */
static int think_run(inf_think *t, inf_buf *content, inf_buf *reasoning) {
    for (;;) {
        inf_buf *h = &t->held;
        if (h->len == 0) return 0;
        switch (t->state) {
        case THINK_START: {
            size_t ws = 0;
            while (ws < h->len && is_ws(h->data[ws]))
                ws++;
            size_t rest = h->len - ws, tl = sizeof OPEN_TAG - 1;
            size_t cmp = rest < tl ? rest : tl;
            if (memcmp(h->data + ws, OPEN_TAG, cmp)) {
                t->state = CONTENT_IN; /* no reasoning block: everything is content */
                continue;
            }
            if (rest < tl) return 0; /* still a possible tag */
            inf_buf_consume(h, ws + tl);
            t->state = THINK_LEAD;
            continue;
        }
        case THINK_LEAD:
        case CONTENT_LEAD: {
            size_t ws = 0;
            while (ws < h->len && is_ws(h->data[ws]))
                ws++;
            inf_buf_consume(h, ws);
            if (h->len == 0) return 0;
            t->state = t->state == THINK_LEAD ? THINK_IN : CONTENT_IN;
            continue;
        }
        case THINK_IN: {
            size_t tl = sizeof CLOSE_TAG - 1;
            const char *p = memmem(h->data, h->len, CLOSE_TAG, tl);
            if (p) {
                size_t end = (size_t)(p - h->data);
                while (end > 0 && is_ws(h->data[end - 1]))
                    end--;
                if (inf_buf_add(reasoning, h->data, end)) return -1;
                inf_buf_consume(h, (size_t)(p - h->data) + tl);
                t->state = CONTENT_LEAD;
                continue;
            }
            size_t j = h->len - suffix_prefix(h->data, h->len, CLOSE_TAG, tl);
            while (j > 0 && is_ws(h->data[j - 1]))
                j--;
            if (inf_buf_add(reasoning, h->data, j)) return -1;
            inf_buf_consume(h, j);
            return 0;
        }
        default: /* CONTENT_IN */
            if (inf_buf_add(content, h->data, h->len)) return -1;
            inf_buf_clear(h);
            return 0;
        }
    }
}

int inf_think_push(inf_think *t, inf_buf *content, inf_buf *reasoning, const char *text, size_t n) {
    if (inf_buf_add(&t->held, text, n)) return -1;
    return think_run(t, content, reasoning);
}

int inf_think_flush(inf_think *t, inf_buf *content, inf_buf *reasoning) {
    inf_buf *h = &t->held;
    int rc = 0;
    if (h->len) {
        if (t->state == THINK_IN)
            rc = inf_buf_add(reasoning, h->data, h->len);
        else if (t->state == THINK_START)
            rc = inf_buf_add(content, h->data, h->len);
        /* LEAD states hold only layout whitespace: dropped. */
    }
    inf_buf_clear(h);
    return rc;
}
