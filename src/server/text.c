#include "server/text.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- srv_buf ---- */

static int buf_reserve(srv_buf *b, size_t need) {
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

int srv_buf_add(srv_buf *b, const char *s, size_t n) {
    if (buf_reserve(b, b->len + n)) return -1;
    if (n) memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = 0;
    return 0;
}

int srv_buf_adds(srv_buf *b, const char *s) {
    return srv_buf_add(b, s, strlen(s));
}

int srv_buf_printf(srv_buf *b, const char *fmt, ...) {
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

void srv_buf_consume(srv_buf *b, size_t n) {
    if (n >= b->len) {
        srv_buf_clear(b);
        return;
    }
    memmove(b->data, b->data + n, b->len - n);
    b->len -= n;
    b->data[b->len] = 0;
}

void srv_buf_clear(srv_buf *b) {
    b->len = 0;
    if (b->data) b->data[0] = 0;
}

void srv_buf_free(srv_buf *b) {
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

/* ---- UTF-8 ---- */

/* Sequence length announced by a lead byte; 0 for a continuation or invalid byte. */
static int utf8_seq_len(unsigned char c) {
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) return 2;
    if (c >= 0xE0 && c <= 0xEF) return 3;
    if (c >= 0xF0 && c <= 0xF4) return 4;
    return 0;
}

size_t srv_utf8_complete_len(const char *s, size_t n) {
    const unsigned char *u = (const unsigned char *)s;
    /* Walk back over at most 3 continuation bytes to the last lead byte. */
    size_t i = n, cont = 0;
    while (i > 0 && cont < 3 && (u[i - 1] & 0xC0) == 0x80) {
        i--;
        cont++;
    }
    if (i == 0) return n; /* only continuation bytes: invalid, pass on */
    int want = utf8_seq_len(u[i - 1]);
    if (want > 1 && (size_t)want > cont + 1) return i - 1; /* incomplete: hold the lead */
    return n;
}

/* Length of the valid UTF-8 sequence at u[0..n), or 0 when it is invalid. */
static size_t utf8_valid_at(const unsigned char *u, size_t n) {
    int len = utf8_seq_len(u[0]);
    if (len == 0 || (size_t)len > n) return 0;
    for (int k = 1; k < len; k++)
        if ((u[k] & 0xC0) != 0x80) return 0;
    if (len == 3) {
        if (u[0] == 0xE0 && u[1] < 0xA0) return 0;  /* overlong */
        if (u[0] == 0xED && u[1] >= 0xA0) return 0; /* surrogate */
    }
    if (len == 4) {
        if (u[0] == 0xF0 && u[1] < 0x90) return 0;  /* overlong */
        if (u[0] == 0xF4 && u[1] >= 0x90) return 0; /* > U+10FFFF */
    }
    return (size_t)len;
}

char *srv_utf8_sanitize(const char *s, size_t n, size_t *out_len) {
    srv_buf b = {0};
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    if (srv_buf_add(&b, "", 0)) return NULL;
    while (i < n) {
        size_t len = utf8_valid_at(u + i, n - i);
        if (len) {
            if (srv_buf_add(&b, s + i, len)) goto oom;
            i += len;
        } else {
            if (srv_buf_add(&b, "\xEF\xBF\xBD", 3)) goto oom;
            i++;
        }
    }
    if (out_len) *out_len = b.len;
    return b.data;
oom:
    srv_buf_free(&b);
    return NULL;
}

/* ---- stop strings ---- */

/* Longest k < len(pat) such that the last k bytes of h equal pat's first k. */
static size_t suffix_prefix(const char *h, size_t hn, const char *pat, size_t pn) {
    size_t k = hn < pn - 1 ? hn : pn - 1;
    for (; k > 0; k--)
        if (!memcmp(h + hn - k, pat, k)) return k;
    return 0;
}

int srv_stop_init(srv_stop *s, const char *const *stops, int n_stops) {
    memset(s, 0, sizeof *s);
    if (n_stops <= 0) return 0;
    s->stops = calloc((size_t)n_stops, sizeof *s->stops);
    if (!s->stops) return -1;
    for (int i = 0; i < n_stops; i++) {
        if (!stops[i] || !stops[i][0]) continue;
        s->stops[s->n_stops] = strdup(stops[i]);
        if (!s->stops[s->n_stops]) {
            srv_stop_free(s);
            return -1;
        }
        s->n_stops++;
    }
    return 0;
}

void srv_stop_free(srv_stop *s) {
    for (int i = 0; i < s->n_stops; i++)
        free(s->stops[i]);
    free(s->stops);
    srv_buf_free(&s->held);
    memset(s, 0, sizeof *s);
}

int srv_stop_push(srv_stop *s, srv_buf *out, const char *text, size_t n) {
    if (s->done) return 1;
    if (srv_buf_add(&s->held, text, n)) return -1;
    const char *h = s->held.data;
    size_t hn = s->held.len;
    /* Everything released earlier could not start a stop string, so the
     * earliest match, if any, lies wholly inside the held text. */
    size_t best = hn;
    for (int i = 0; i < s->n_stops; i++) {
        const char *p = memmem(h, hn, s->stops[i], strlen(s->stops[i]));
        if (p && (size_t)(p - h) < best) best = (size_t)(p - h);
    }
    if (best < hn) {
        if (srv_buf_add(out, h, best)) return -1;
        srv_buf_clear(&s->held);
        s->done = true;
        return 1;
    }
    size_t keep = 0;
    for (int i = 0; i < s->n_stops; i++) {
        size_t k = suffix_prefix(h, hn, s->stops[i], strlen(s->stops[i]));
        if (k > keep) keep = k;
    }
    if (srv_buf_add(out, h, hn - keep)) return -1;
    srv_buf_consume(&s->held, hn - keep);
    return 0;
}

int srv_stop_flush(srv_stop *s, srv_buf *out) {
    if (s->done) return 0;
    if (srv_buf_add(out, s->held.data ? s->held.data : "", s->held.len)) return -1;
    srv_buf_clear(&s->held);
    return 0;
}

/* ---- reasoning splitter ---- */

enum { THINK_START, THINK_LEAD, THINK_IN, CONTENT_LEAD, CONTENT_IN };

static const char OPEN_TAG[] = "<think>";
static const char CLOSE_TAG[] = "</think>";

static bool is_ws(char c) {
    return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

void srv_think_init(srv_think *t, bool start_in_think) {
    memset(t, 0, sizeof *t);
    t->state = start_in_think ? THINK_LEAD : THINK_START;
}

void srv_think_free(srv_think *t) {
    srv_buf_free(&t->held);
}

/* Runs the state machine over the held text as far as it can be decided. */
static int think_run(srv_think *t, srv_buf *content, srv_buf *reasoning) {
    for (;;) {
        srv_buf *h = &t->held;
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
            srv_buf_consume(h, ws + tl);
            t->state = THINK_LEAD;
            continue;
        }
        case THINK_LEAD:
        case CONTENT_LEAD: {
            size_t ws = 0;
            while (ws < h->len && is_ws(h->data[ws]))
                ws++;
            srv_buf_consume(h, ws);
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
                if (srv_buf_add(reasoning, h->data, end)) return -1;
                srv_buf_consume(h, (size_t)(p - h->data) + tl);
                t->state = CONTENT_LEAD;
                continue;
            }
            size_t j = h->len - suffix_prefix(h->data, h->len, CLOSE_TAG, tl);
            while (j > 0 && is_ws(h->data[j - 1]))
                j--;
            if (srv_buf_add(reasoning, h->data, j)) return -1;
            srv_buf_consume(h, j);
            return 0;
        }
        default: /* CONTENT_IN */
            if (srv_buf_add(content, h->data, h->len)) return -1;
            srv_buf_clear(h);
            return 0;
        }
    }
}

int srv_think_push(srv_think *t, srv_buf *content, srv_buf *reasoning, const char *text, size_t n) {
    if (srv_buf_add(&t->held, text, n)) return -1;
    return think_run(t, content, reasoning);
}

int srv_think_flush(srv_think *t, srv_buf *content, srv_buf *reasoning) {
    srv_buf *h = &t->held;
    int rc = 0;
    if (h->len) {
        if (t->state == THINK_IN)
            rc = srv_buf_add(reasoning, h->data, h->len);
        else if (t->state == THINK_START)
            rc = srv_buf_add(content, h->data, h->len);
        /* LEAD states hold only layout whitespace: dropped. */
    }
    srv_buf_clear(h);
    return rc;
}
