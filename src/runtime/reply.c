#include "runtime/reply.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

/* ---- parts ---- */

static int parts_grow(inf_parts *p) {
    if (p->n < p->cap) return 0;
    int cap = p->cap ? 2 * p->cap : 8;
    inf_part *v = realloc(p->v, (size_t)cap * sizeof *v);
    if (!v) return -1;
    p->v = v;
    p->cap = cap;
    return 0;
}

static char *dup_bytes(const char *s, size_t n) {
    char *d = malloc(n + 1);
    if (!d) return NULL;
    if (n) memcpy(d, s, n);
    d[n] = 0;
    return d;
}

int inf_parts_add_text(inf_parts *p, inf_part_kind kind, const char *s, size_t n) {
    if (n == 0) return 0;
    inf_part *last = p->n ? &p->v[p->n - 1] : NULL;
    if (last && last->kind == kind && kind != INF_PART_TOOL_CALL) {
        char *t = realloc(last->text, last->n + n + 1);
        if (!t) return -1;
        memcpy(t + last->n, s, n);
        last->n += n;
        t[last->n] = 0;
        last->text = t;
        return 0;
    }
    if (parts_grow(p)) return -1;
    char *t = dup_bytes(s, n);
    if (!t) return -1;
    p->v[p->n++] = (inf_part){.kind = kind, .text = t, .n = n};
    return 0;
}

int inf_parts_add_call(inf_parts *p, const char *name, const char *args, size_t n_args) {
    if (parts_grow(p)) return -1;
    char *nm = strdup(name), *a = dup_bytes(args, n_args);
    if (!nm || !a) {
        free(nm);
        free(a);
        return -1;
    }
    p->v[p->n++] = (inf_part){.kind = INF_PART_TOOL_CALL, .text = a, .n = n_args, .name = nm};
    return 0;
}

int inf_parts_append(inf_parts *dst, const inf_parts *src) {
    for (int i = 0; i < src->n; i++) {
        const inf_part *s = &src->v[i];
        int rc = s->kind == INF_PART_TOOL_CALL ? inf_parts_add_call(dst, s->name, s->text, s->n)
                                               : inf_parts_add_text(dst, s->kind, s->text, s->n);
        if (rc) return -1;
    }
    return 0;
}

int inf_parts_calls(const inf_parts *p) {
    int k = 0;
    for (int i = 0; i < p->n; i++)
        k += p->v[i].kind == INF_PART_TOOL_CALL;
    return k;
}

void inf_parts_clear(inf_parts *p) {
    for (int i = 0; i < p->n; i++) {
        free(p->v[i].text);
        free(p->v[i].name);
    }
    p->n = 0;
}

void inf_parts_free(inf_parts *p) {
    inf_parts_clear(p);
    free(p->v);
    memset(p, 0, sizeof *p);
}

/* ---- the tool call's JSON ---- */

static bool is_ws(char c) {
    return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

/* The end of the JSON value starting at s[i] (already validated by jansson,
 * so only strings and nesting need tracking). */
static size_t skip_value(const char *s, size_t n, size_t i) {
    int depth = 0;
    bool in_str = false;
    for (; i < n; i++) {
        char c = s[i];
        if (in_str) {
            if (c == '\\')
                i++;
            else if (c == '"') {
                in_str = false;
                if (depth == 0) return i + 1;
            }
        } else if (c == '"') {
            in_str = true;
        } else if (c == '{' || c == '[') {
            depth++;
        } else if (c == '}' || c == ']') {
            if (--depth == 0) return i + 1;
            if (depth < 0) return i; /* the end of the enclosing object */
        } else if (depth == 0 && (c == ',' || is_ws(c))) {
            return i; /* a number, true, false or null ends here */
        }
    }
    return n;
}

/* The bytes of the top-level member "arguments" of the object in s, exactly
 * as the model wrote them; false when no member is spelled so (an escaped
 * key: the caller re-serializes). */
static bool raw_arguments(const char *s, size_t n, size_t *from, size_t *to) {
    size_t i = 0;
    while (i < n && s[i] != '{')
        i++;
    for (i++; i < n;) {
        while (i < n && (is_ws(s[i]) || s[i] == ','))
            i++;
        if (i >= n || s[i] != '"') return false;
        size_t k0 = i + 1, k1 = skip_value(s, n, i) - 1;
        i = k1 + 1;
        while (i < n && (is_ws(s[i]) || s[i] == ':'))
            i++;
        size_t v1 = skip_value(s, n, i);
        if (k1 - k0 == 9 && !memcmp(s + k0, "arguments", 9)) {
            *from = i;
            *to = v1;
            return true;
        }
        i = v1;
    }
    return false;
}

/* A call's body → a TOOL_CALL part; 0 when it is not a valid call (the
 * caller keeps it as text), 1 when added, -1 on OOM. */
static int parse_call(inf_parts *out, const char *body, size_t n) {
    while (n && is_ws(body[n - 1]))
        n--;
    while (n && is_ws(*body))
        body++, n--;
    json_error_t je;
    json_t *j = json_loadb(body, n, 0, &je);
    if (!json_is_object(j) || json_object_size(j) > 2) goto invalid;
    json_t *name = json_object_get(j, "name"), *args = json_object_get(j, "arguments");
    if (!json_is_string(name) || json_string_length(name) == 0 ||
        strlen(json_string_value(name)) != json_string_length(name))
        goto invalid;
    if (json_object_size(j) == 2 && !args) goto invalid;
    int rc;
    if (!args) {
        rc = inf_parts_add_call(out, json_string_value(name), "{}", 2);
    } else if (json_is_string(args)) {
        /* the arguments as a string holding a JSON object */
        json_t *inner = json_loadb(json_string_value(args), json_string_length(args), 0, &je);
        bool ok = json_is_object(inner);
        json_decref(inner);
        if (!ok) goto invalid;
        rc = inf_parts_add_call(out, json_string_value(name), json_string_value(args),
                                json_string_length(args));
    } else if (json_is_object(args)) {
        size_t a, b;
        if (raw_arguments(body, n, &a, &b)) {
            rc = inf_parts_add_call(out, json_string_value(name), body + a, b - a);
        } else {
            char *s = json_dumps(args, JSON_COMPACT);
            rc = s ? inf_parts_add_call(out, json_string_value(name), s, strlen(s)) : -1;
            free(s);
        }
    } else {
        goto invalid;
    }
    json_decref(j);
    return rc ? -1 : 1;
invalid:
    json_decref(j);
    return 0;
}

/* ---- the state machine ---- */

enum { R_START, R_THINK_LEAD, R_THINK, R_TEXT_LEAD, R_TEXT, R_CALL };

static const char THINK_OPEN[] = "<think>";
static const char THINK_CLOSE[] = "</think>";
static const char CALL_OPEN[] = "<tool_call>";
static const char CALL_CLOSE[] = "</tool_call>";
#define TAG_LEN(t) (sizeof(t) - 1)

void inf_reply_init(inf_reply *r, const inf_reply_opts *o) {
    memset(r, 0, sizeof *r);
    r->o = *o;
    r->state = !o->think ? R_TEXT : o->start_in_think ? R_THINK_LEAD : R_START;
}

void inf_reply_free(inf_reply *r) {
    inf_buf_free(&r->held);
}

/* The first of two tags in h (b may be NULL); *which = 0 or 1. */
static const char *find_tag(const inf_buf *h, const char *a, size_t al, const char *b, size_t bl,
                            int *which) {
    const char *pa = memmem(h->data, h->len, a, al);
    const char *pb = b ? memmem(h->data, h->len, b, bl) : NULL;
    if (pb && (!pa || pb < pa)) {
        *which = 1;
        return pb;
    }
    *which = 0;
    return pa;
}

/* How much of the end of h to hold: a partial tag, and the whitespace
 * before it when that whitespace would be dropped should the tag complete. */
static size_t keep_tail(const inf_buf *h, const char *a, size_t al, const char *b, size_t bl) {
    size_t k = inf_suffix_prefix(h->data, h->len, a, al);
    if (b) {
        size_t kb = inf_suffix_prefix(h->data, h->len, b, bl);
        if (kb > k) k = kb;
    }
    size_t j = h->len - k;
    while (j > 0 && is_ws(h->data[j - 1]))
        j--;
    return h->len - j;
}

/* Emits h[0, end) minus its trailing whitespace as kind. */
static int emit_trimmed(inf_parts *out, inf_part_kind kind, const inf_buf *h, size_t end) {
    while (end > 0 && is_ws(h->data[end - 1]))
        end--;
    return inf_parts_add_text(out, kind, h->data, end);
}

/* Runs the state machine over the held text as far as it can be decided. */
static int reply_run(inf_reply *r, inf_parts *out) {
    const char *call_tag = r->o.tool_calls ? CALL_OPEN : NULL;
    size_t call_len = TAG_LEN(CALL_OPEN);
    for (;;) {
        inf_buf *h = &r->held;
        if (h->len == 0) return 0;
        switch (r->state) {
        case R_START: {
            size_t ws = 0;
            while (ws < h->len && is_ws(h->data[ws]))
                ws++;
            size_t rest = h->len - ws, tl = TAG_LEN(THINK_OPEN);
            if (memcmp(h->data + ws, THINK_OPEN, rest < tl ? rest : tl)) {
                r->state = R_TEXT; /* no reasoning block */
                continue;
            }
            if (rest < tl) return 0; /* still a possible tag */
            inf_buf_consume(h, ws + tl);
            r->state = R_THINK_LEAD;
            continue;
        }
        case R_THINK_LEAD:
        case R_TEXT_LEAD: {
            size_t ws = 0;
            while (ws < h->len && is_ws(h->data[ws]))
                ws++;
            inf_buf_consume(h, ws);
            if (h->len == 0) return 0;
            r->state = r->state == R_THINK_LEAD ? R_THINK : R_TEXT;
            continue;
        }
        case R_THINK: {
            int which;
            const char *p =
                find_tag(h, THINK_CLOSE, TAG_LEN(THINK_CLOSE), call_tag, call_len, &which);
            if (p) {
                size_t at = (size_t)(p - h->data);
                if (emit_trimmed(out, INF_PART_REASONING, h, at)) return -1;
                inf_buf_consume(h, at + (which ? call_len : TAG_LEN(THINK_CLOSE)));
                r->state = which ? R_CALL : R_TEXT_LEAD;
                continue;
            }
            size_t keep = keep_tail(h, THINK_CLOSE, TAG_LEN(THINK_CLOSE), call_tag, call_len);
            if (inf_parts_add_text(out, INF_PART_REASONING, h->data, h->len - keep)) return -1;
            inf_buf_consume(h, h->len - keep);
            return 0;
        }
        case R_TEXT: {
            if (!call_tag) {
                if (inf_parts_add_text(out, INF_PART_TEXT, h->data, h->len)) return -1;
                inf_buf_clear(h);
                return 0;
            }
            const char *p = memmem(h->data, h->len, CALL_OPEN, call_len);
            if (p) {
                size_t at = (size_t)(p - h->data);
                if (emit_trimmed(out, INF_PART_TEXT, h, at)) return -1;
                inf_buf_consume(h, at + call_len);
                r->state = R_CALL;
                continue;
            }
            size_t keep = keep_tail(h, CALL_OPEN, call_len, NULL, 0);
            if (inf_parts_add_text(out, INF_PART_TEXT, h->data, h->len - keep)) return -1;
            inf_buf_consume(h, h->len - keep);
            return 0;
        }
        default: { /* R_CALL: held until its close tag */
            const char *p = memmem(h->data, h->len, CALL_CLOSE, TAG_LEN(CALL_CLOSE));
            if (!p) return 0;
            size_t at = (size_t)(p - h->data);
            int rc = parse_call(out, h->data, at);
            if (rc < 0) return -1;
            if (rc == 0 &&
                (inf_parts_add_text(out, INF_PART_TEXT, CALL_OPEN, call_len) ||
                 inf_parts_add_text(out, INF_PART_TEXT, h->data, at + TAG_LEN(CALL_CLOSE))))
                return -1;
            inf_buf_consume(h, at + TAG_LEN(CALL_CLOSE));
            r->state = R_TEXT_LEAD;
            continue;
        }
        }
    }
}

int inf_reply_push(inf_reply *r, inf_parts *out, const char *text, size_t n) {
    if (inf_buf_add(&r->held, text, n)) return -1;
    return reply_run(r, out);
}

int inf_reply_flush(inf_reply *r, inf_parts *out) {
    inf_buf *h = &r->held;
    int rc = 0;
    switch (r->state) {
    case R_THINK:
        rc = inf_parts_add_text(out, INF_PART_REASONING, h->data, h->len);
        break;
    case R_START:
    case R_TEXT:
        rc = inf_parts_add_text(out, INF_PART_TEXT, h->data, h->len);
        break;
    case R_CALL: /* cut off before its close tag: text, never dropped */
        rc = inf_parts_add_text(out, INF_PART_TEXT, CALL_OPEN, TAG_LEN(CALL_OPEN)) ||
             inf_parts_add_text(out, INF_PART_TEXT, h->data, h->len);
        break;
    default: /* the LEAD states hold only layout whitespace: dropped */
        break;
    }
    inf_buf_clear(h);
    r->state = R_TEXT_LEAD;
    return rc ? -1 : 0;
}
