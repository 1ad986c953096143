/* JSON Schema -> GBNF, the subset clients send (OpenAI structured outputs,
 * zod, pydantic, LangChain):
 *   type (object, array, string, number, integer, boolean, null, a list of
 *   them), properties (in the order written), required, additionalProperties,
 *   items, prefixItems, minItems/maxItems, enum, const, anyOf/oneOf,
 *   allOf of objects, $ref into the document ($defs, definitions, any JSON
 *   pointer; recursion becomes rule recursion), minLength/maxLength,
 *   pattern (a regex subset, anchored), format (date, time, date-time, uuid),
 *   minimum/maximum/exclusiveMinimum/exclusiveMaximum on integers.
 * Annotations (title, description, default, examples, $schema, $id,
 * $comment, deprecated, readOnly, writeOnly) are ignored; any other keyword
 * is an error naming it, so a schema is never silently weakened.
 *
 * What is produced is always a subset of what the schema allows: an object
 * with properties gets no extra keys even when additionalProperties allows
 * them; a pattern is matched whole; whitespace between tokens is at most a
 * newline and 20 spaces or tabs (llama.cpp's rule). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar.h"

typedef struct sbuf {
    char *s;
    size_t n, cap;
    int oom;
} sbuf;

static void sb_addn(sbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1)
            cap *= 2;
        char *s2 = realloc(b->s, cap);
        if (!s2) {
            b->oom = 1;
            return;
        }
        b->s = s2;
        b->cap = cap;
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = 0;
}
static void sb_add(sbuf *b, const char *s) {
    sb_addn(b, s, strlen(s));
}
static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *b, const char *fmt, ...) {
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n > 0) sb_addn(b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

/* A GBNF literal of bytes s[0..n). */
static void sb_lit(sbuf *b, const char *s, size_t n) {
    sb_add(b, "\"");
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            char e[3] = {'\\', (char)c, 0};
            sb_add(b, e);
        } else if (c < 0x20 || c == 0x7F) {
            sb_printf(b, "\\x%02X", c);
        } else {
            sb_addn(b, (const char *)&c, 1);
        }
    }
    sb_add(b, "\"");
}

#define MAX_SCHEMA_DEPTH 64

typedef struct ref_rule {
    char *ref;
    char name[24];
} ref_rule;

typedef struct conv {
    const json_t *root;
    sbuf rules; /* finished rules */
    int n_names;
    ref_rule *refs;
    int n_refs, cap_refs;
    int depth;
    int failed;
    inf_err *err;
} conv;

static int cfail(conv *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int cfail(conv *c, const char *fmt, ...) {
    if (c->failed) return -1;
    c->failed = 1;
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return inf_fail(c->err, "json_schema: %s", msg);
}

static void new_name(conv *c, char *name, size_t cap) {
    snprintf(name, cap, "s%d", c->n_names++);
}

static void add_rule(conv *c, const char *name, const sbuf *body) {
    sb_add(&c->rules, name);
    sb_add(&c->rules, " ::= ");
    sb_addn(&c->rules, body->s ? body->s : "", body->n);
    sb_add(&c->rules, "\n");
}

static const char *const PRIMITIVES =
    "ws ::= | \" \" | \"\\n\" [ \\t]{0,20}\n"
    "json-char ::= [^\"\\\\\\x7F\\x00-\\x1F] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4})\n"
    "json-string ::= \"\\\"\" json-char* \"\\\"\" ws\n"
    "json-int ::= \"-\"? ([0-9] | [1-9] [0-9]{1,15})\n"
    "json-number ::= json-int (\".\" [0-9]{1,16})? ([eE] [-+]? [0-9]{1,2})? ws\n"
    "json-integer ::= json-int ws\n"
    "json-boolean ::= (\"true\" | \"false\") ws\n"
    "json-null ::= \"null\" ws\n"
    "json-value ::= json-object | json-array | json-string | json-number | json-boolean | "
    "json-null\n"
    "json-object ::= \"{\" ws (json-string \":\" ws json-value (\",\" ws json-string \":\" ws "
    "json-value)*)? \"}\" ws\n"
    "json-array ::= \"[\" ws (json-value (\",\" ws json-value)*)? \"]\" ws\n"
    "json-date ::= [0-9]{4} \"-\" ((\"0\" [13578] | \"1\" [02]) \"-\" (\"0\" [1-9] | [12] [0-9] | "
    "\"3\" [01]) | (\"0\" [469] | \"11\") \"-\" (\"0\" [1-9] | [12] [0-9] | \"30\") | \"02-\" "
    "(\"0\" "
    "[1-9] | \"1\" [0-9] | \"2\" [0-8]))\n"
    "json-time ::= ([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9] \":\" [0-5] [0-9] (\".\" "
    "[0-9]{1,6})? (\"Z\" | [+-] ([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9])\n"
    "json-uuid ::= [0-9a-f]{8} \"-\" [0-9a-f]{4} \"-\" [0-9a-f]{4} \"-\" [0-9a-f]{4} \"-\" "
    "[0-9a-f]{12}\n";

static int visit(conv *c, const json_t *s, sbuf *out);

/* ---- keywords ---- */

static const char *const KNOWN[] = {
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "prefixItems",
    "minItems",
    "maxItems",
    "enum",
    "const",
    "anyOf",
    "oneOf",
    "allOf",
    "$ref",
    "$defs",
    "definitions",
    "minLength",
    "maxLength",
    "pattern",
    "format",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "title",
    "description",
    "default",
    "examples",
    "$schema",
    "$id",
    "$comment",
    "deprecated",
    "readOnly",
    "writeOnly",
};

static int check_keywords(conv *c, const json_t *s) {
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)s, k, v) {
        int ok = 0;
        for (size_t i = 0; i < sizeof KNOWN / sizeof KNOWN[0] && !ok; i++)
            ok = !strcmp(k, KNOWN[i]);
        if (!ok) return cfail(c, "the keyword '%s' is not supported", k);
    }
    return 0;
}

/* ---- $ref ---- */

static const json_t *resolve(conv *c, const char *ref) {
    if (ref[0] != '#')
        return cfail(c, "$ref '%s': only references into this schema (#...)", ref), NULL;
    const json_t *cur = c->root;
    const char *p = ref + 1;
    while (*p) {
        if (*p != '/') return cfail(c, "$ref '%s': expected a JSON pointer", ref), NULL;
        p++;
        char tok[256];
        size_t n = 0;
        while (*p && *p != '/') {
            char ch = *p++;
            if (ch == '~' && (*p == '0' || *p == '1')) ch = *p++ == '0' ? '~' : '/';
            if (n + 1 < sizeof tok) tok[n++] = ch;
        }
        tok[n] = 0;
        if (json_is_object(cur)) {
            cur = json_object_get(cur, tok);
        } else if (json_is_array(cur)) {
            char *end;
            long i = strtol(tok, &end, 10);
            cur = *end || i < 0 ? NULL : json_array_get(cur, (size_t)i);
        } else {
            cur = NULL;
        }
        if (!cur) return cfail(c, "$ref '%s' points at nothing", ref), NULL;
    }
    return cur;
}

static int visit_ref(conv *c, const char *ref, sbuf *out) {
    for (int i = 0; i < c->n_refs; i++)
        if (!strcmp(c->refs[i].ref, ref)) {
            sb_add(out, c->refs[i].name);
            return 0;
        }
    const json_t *target = resolve(c, ref);
    if (!target) return -1;
    if (c->n_refs == c->cap_refs) {
        int cap = c->cap_refs ? 2 * c->cap_refs : 8;
        ref_rule *r = realloc(c->refs, (size_t)cap * sizeof *r);
        if (!r) return cfail(c, "out of memory");
        c->refs = r;
        c->cap_refs = cap;
    }
    ref_rule *r = &c->refs[c->n_refs];
    r->ref = strdup(ref);
    if (!r->ref) return cfail(c, "out of memory");
    new_name(c, r->name, sizeof r->name);
    c->n_refs++;
    char name[24];
    memcpy(name, r->name, sizeof name);
    sbuf body = {0};
    int rc = visit(c, target, &body);
    if (!rc) add_rule(c, name, &body);
    free(body.s);
    sb_add(out, name);
    return rc;
}

/* ---- strings ---- */

/* Emits a GBNF class for code point ranges lo[i]..hi[i] minus what a JSON
 * string cannot hold raw ('"', '\\', control characters). */
static void emit_class(sbuf *out, const uint32_t *r, int n, int neg) {
    sb_add(out, neg ? "[^\"\\\\\\x00-\\x1F\\x7F" : "[");
    int any = neg;
    for (int i = 0; i < n; i++) {
        uint32_t lo = r[2 * i], hi = r[2 * i + 1];
        /* split around the forbidden points */
        static const uint32_t bad[][2] = {{0, 0x1F}, {'"', '"'}, {'\\', '\\'}, {0x7F, 0x7F}};
        uint32_t pieces[8][2];
        int np = 0;
        pieces[np][0] = lo;
        pieces[np][1] = hi;
        np = 1;
        if (!neg)
            for (int k = 0; k < 4; k++) {
                int m = np;
                for (int j = 0; j < m; j++) {
                    uint32_t a = pieces[j][0], b = pieces[j][1];
                    if (b < bad[k][0] || a > bad[k][1]) continue;
                    pieces[j][0] = 1;
                    pieces[j][1] = 0; /* emptied */
                    if (a < bad[k][0] && np < 8) {
                        pieces[np][0] = a;
                        pieces[np++][1] = bad[k][0] - 1;
                    }
                    if (b > bad[k][1] && np < 8) {
                        pieces[np][0] = bad[k][1] + 1;
                        pieces[np++][1] = b;
                    }
                }
            }
        for (int j = 0; j < np; j++) {
            if (pieces[j][0] > pieces[j][1]) continue;
            sb_printf(out, "\\U%08X-\\U%08X", pieces[j][0], pieces[j][1]);
            any = 1;
        }
    }
    if (!any) sb_add(out, "\\U0010FFFF"); /* matches nothing useful, keeps it valid */
    sb_add(out, "]");
}

typedef struct rx {
    const char *p, *end, *src;
    conv *c;
    int depth;
} rx;

static int rx_fail(rx *x, const char *what) {
    return cfail(x->c, "pattern '%s': %s is not supported", x->src, what);
}

static int rx_alt(rx *x, sbuf *out);

/* A class escape (\d \w \s and their negations) into ranges; 0 if not one. */
static int rx_class_escape(char e, uint32_t *r, int *n, int *neg) {
    *neg = e == 'D' || e == 'W' || e == 'S';
    switch (e) {
    case 'd':
    case 'D':
        r[0] = '0', r[1] = '9', *n = 1;
        return 1;
    case 'w':
    case 'W':
        r[0] = 'a', r[1] = 'z', r[2] = 'A', r[3] = 'Z', r[4] = '0', r[5] = '9', r[6] = '_',
        r[7] = '_';
        *n = 4;
        return 1;
    case 's':
    case 'S':
        r[0] = ' ', r[1] = ' ', *n = 1;
        return 1;
    }
    return 0;
}

static int rx_escape_char(char e, uint32_t *cp) {
    switch (e) {
    case 'n':
        *cp = '\n';
        return 1;
    case 't':
        *cp = '\t';
        return 1;
    case 'r':
        *cp = '\r';
        return 1;
    }
    if (strchr("\\/.^$|?*+()[]{}-\"' ", e)) {
        *cp = (unsigned char)e;
        return 1;
    }
    return 0;
}

/* One UTF-8 character of the pattern. */
static uint32_t rx_utf8(rx *x) {
    unsigned char c = (unsigned char)*x->p++;
    if (c < 0x80) return c;
    int len = (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : 4;
    uint32_t v = c & (len == 2 ? 0x1F : len == 3 ? 0x0F : 0x07);
    for (int i = 1; i < len && x->p < x->end; i++)
        v = v << 6 | ((unsigned char)*x->p++ & 0x3F);
    return v;
}

/* A literal code point inside a JSON string (escaped as JSON needs). */
static void rx_lit(sbuf *out, uint32_t cp) {
    if (cp == '"') return sb_add(out, "\"\\\\\\\"\"");
    if (cp == '\\') return sb_add(out, "\"\\\\\\\\\"");
    if (cp == '\n') return sb_add(out, "\"\\\\n\"");
    if (cp == '\t') return sb_add(out, "\"\\\\t\"");
    if (cp == '\r') return sb_add(out, "\"\\\\r\"");
    if (cp < 0x20 || cp == 0x7F) return sb_printf(out, "\"\\\\u%04x\"", cp);
    sb_printf(out, "[\\U%08X]", cp);
}

static int rx_atom(rx *x, sbuf *out) {
    char ch = *x->p;
    if (ch == '(') {
        x->p++;
        if (x->p < x->end && *x->p == '?') {
            if (x->end - x->p >= 2 && x->p[1] == ':')
                x->p += 2;
            else
                return rx_fail(x, "a lookaround or named group");
        }
        if (++x->depth > 50) return rx_fail(x, "nesting deeper than 50");
        sb_add(out, "(");
        if (rx_alt(x, out)) return -1;
        x->depth--;
        if (x->p >= x->end || *x->p != ')') return rx_fail(x, "an unclosed group");
        x->p++;
        sb_add(out, ")");
        return 0;
    }
    if (ch == '[') {
        x->p++;
        int neg = x->p < x->end && *x->p == '^';
        if (neg) x->p++;
        uint32_t r[2 * 64];
        int n = 0;
        while (x->p < x->end && *x->p != ']') {
            if (n >= 56) return rx_fail(x, "a class with more than 56 ranges");
            uint32_t lo;
            if (*x->p == '\\') {
                if (x->end - x->p < 2) return rx_fail(x, "a trailing '\\'");
                char e = x->p[1];
                int k, cneg;
                if (rx_class_escape(e, r + 2 * n, &k, &cneg)) {
                    if (cneg) return rx_fail(x, "a negated escape inside a class");
                    n += k;
                    x->p += 2;
                    continue;
                }
                if (!rx_escape_char(e, &lo)) return rx_fail(x, "this escape");
                x->p += 2;
            } else {
                lo = rx_utf8(x);
            }
            uint32_t hi = lo;
            if (x->end - x->p >= 2 && x->p[0] == '-' && x->p[1] != ']') {
                x->p++;
                if (*x->p == '\\') {
                    if (x->end - x->p < 2 || !rx_escape_char(x->p[1], &hi))
                        return rx_fail(x, "this escape");
                    x->p += 2;
                } else {
                    hi = rx_utf8(x);
                }
                if (hi < lo) return rx_fail(x, "a backwards range");
            }
            r[2 * n] = lo;
            r[2 * n + 1] = hi;
            n++;
        }
        if (x->p >= x->end) return rx_fail(x, "an unclosed class");
        x->p++;
        emit_class(out, r, n, neg);
        return 0;
    }
    if (ch == '.') {
        x->p++;
        emit_class(out, NULL, 0, 1);
        return 0;
    }
    if (ch == '\\') {
        if (x->end - x->p < 2) return rx_fail(x, "a trailing '\\'");
        char e = x->p[1];
        x->p += 2;
        uint32_t r[8], cp;
        int n, neg;
        if (rx_class_escape(e, r, &n, &neg)) {
            emit_class(out, r, n, neg);
            return 0;
        }
        if (!rx_escape_char(e, &cp)) return rx_fail(x, "this escape (\\b, \\B, back references)");
        rx_lit(out, cp);
        return 0;
    }
    if (strchr("*+?{", ch)) return rx_fail(x, "a quantifier with nothing before it");
    rx_lit(out, rx_utf8(x));
    return 0;
}

static int rx_seq(rx *x, sbuf *out) {
    int any = 0;
    while (x->p < x->end && *x->p != '|' && *x->p != ')') {
        if (*x->p == '^' && x->p == x->src) {
            x->p++;
            continue;
        }
        if (*x->p == '$' && x->p + 1 == x->end) {
            x->p++;
            continue;
        }
        if (*x->p == '^' || *x->p == '$') return rx_fail(x, "an anchor inside the pattern");
        sb_add(out, any ? " (" : "(");
        if (rx_atom(x, out)) return -1;
        sb_add(out, ")");
        any = 1;
        if (x->p < x->end && strchr("*+?{", *x->p)) {
            const char *q = x->p;
            if (*q == '{') {
                const char *close = memchr(q, '}', (size_t)(x->end - q));
                if (!close) return rx_fail(x, "an unclosed '{'");
                sb_addn(out, q, (size_t)(close - q + 1));
                x->p = close + 1;
            } else {
                sb_addn(out, q, 1);
                x->p++;
            }
            if (x->p < x->end && *x->p == '?') x->p++; /* lazy: same language */
        }
    }
    if (!any) sb_add(out, "\"\"");
    return 0;
}

static int rx_alt(rx *x, sbuf *out) {
    if (rx_seq(x, out)) return -1;
    while (x->p < x->end && *x->p == '|') {
        x->p++;
        sb_add(out, " | ");
        if (rx_seq(x, out)) return -1;
    }
    return 0;
}

static int visit_string(conv *c, const json_t *s, sbuf *out) {
    json_t *fmt = json_object_get(s, "format"), *pat = json_object_get(s, "pattern");
    json_t *mn = json_object_get(s, "minLength"), *mx = json_object_get(s, "maxLength");
    if (fmt) {
        const char *f = json_string_value(fmt);
        if (!f) return cfail(c, "'format' must be a string");
        const char *rule = !strcmp(f, "date")        ? "json-date"
                           : !strcmp(f, "time")      ? "json-time"
                           : !strcmp(f, "date-time") ? "json-date \"T\" json-time"
                           : !strcmp(f, "uuid")      ? "json-uuid"
                                                     : NULL;
        if (!rule) return cfail(c, "the keyword 'format' with '%s' is not supported", f);
        if (pat || mn || mx)
            return cfail(
                c,
                "the keyword 'format' together with pattern/minLength/maxLength is not supported");
        sb_printf(out, "\"\\\"\" %s \"\\\"\" ws", rule);
        return 0;
    }
    if (pat) {
        const char *p = json_string_value(pat);
        if (!p) return cfail(c, "'pattern' must be a string");
        if (mn || mx)
            return cfail(
                c, "the keyword 'pattern' together with minLength/maxLength is not supported");
        rx x = {p, p + strlen(p), p, c, 0};
        sb_add(out, "\"\\\"\" (");
        if (rx_alt(&x, out)) return -1;
        if (x.p != x.end) return rx_fail(&x, "an unmatched ')'");
        sb_add(out, ") \"\\\"\" ws");
        return 0;
    }
    if (mn || mx) {
        if ((mn && !json_is_integer(mn)) || (mx && !json_is_integer(mx)))
            return cfail(c, "minLength/maxLength must be integers");
        long long lo = mn ? json_integer_value(mn) : 0, hi = mx ? json_integer_value(mx) : -1;
        if (lo < 0 || lo > INF_GRAM_MAX_REPEAT || hi > INF_GRAM_MAX_REPEAT || (hi >= 0 && hi < lo))
            return cfail(c, "minLength/maxLength must be in 0..%d with min <= max",
                         INF_GRAM_MAX_REPEAT);
        if (hi >= 0)
            sb_printf(out, "\"\\\"\" json-char{%lld,%lld} \"\\\"\" ws", lo, hi);
        else
            sb_printf(out, "\"\\\"\" json-char{%lld,} \"\\\"\" ws", lo);
        return 0;
    }
    sb_add(out, "json-string");
    return 0;
}

/* ---- integers in a range ---- */

static int ndigits(unsigned long long v) {
    int d = 1;
    while (v >= 10) {
        v /= 10;
        d++;
    }
    return d;
}

/* Digit strings lo..hi of the same length n (as text). */
static void same_len(sbuf *out, const char *lo, const char *hi, int n) {
    if (n == 0) {
        sb_add(out, "\"\"");
        return;
    }
    if (lo[0] == hi[0]) {
        sb_printf(out, "\"%c\" (", lo[0]);
        same_len(out, lo + 1, hi + 1, n - 1);
        sb_add(out, ")");
        return;
    }
    char nines[24], zeros[24];
    memset(nines, '9', (size_t)n);
    memset(zeros, '0', (size_t)n);
    sb_printf(out, "(\"%c\" (", lo[0]);
    same_len(out, lo + 1, nines, n - 1);
    sb_add(out, "))");
    if (hi[0] - lo[0] > 1) {
        sb_printf(out, " | [%c-%c]", lo[0] + 1, hi[0] - 1);
        if (n > 1) sb_printf(out, " [0-9]{%d}", n - 1);
    }
    sb_printf(out, " | (\"%c\" (", hi[0]);
    same_len(out, zeros, hi + 1, n - 1);
    sb_add(out, "))");
}

/* Non-negative integers lo..hi (hi < 0: unbounded) without leading zeros. */
static void mag_range(sbuf *out, unsigned long long lo, long long hi) {
    const int MAXD = 17;
    int dlo = ndigits(lo), dhi = hi < 0 ? MAXD : ndigits((unsigned long long)hi);
    int first = 1;
    for (int d = dlo; d <= dhi; d++) {
        unsigned long long pow = 1;
        for (int i = 1; i < d; i++)
            pow *= 10;
        unsigned long long a = d == dlo ? lo : pow, b = pow * 10 - 1;
        if (hi >= 0 && d == dhi) b = (unsigned long long)hi;
        if (d == 1 && a < pow) a = 0;
        sb_add(out, first ? "(" : " | (");
        first = 0;
        if (hi < 0 && d > dlo) { /* every longer number */
            sb_printf(out, "[1-9] [0-9]{%d,%d})", d - 1, MAXD - 1);
            break;
        }
        char sa[24], sb[24];
        snprintf(sa, sizeof sa, "%0*llu", d, a);
        snprintf(sb, sizeof sb, "%0*llu", d, b);
        same_len(out, sa, sb, d);
        sb_add(out, ")");
    }
}

static int get_bound(conv *c, const json_t *s, const char *k, int up, int excl, long long *out,
                     int *have) {
    json_t *v = json_object_get(s, k);
    if (!v) return 0;
    if (excl && json_is_boolean(v))
        return cfail(c, "'%s' as a boolean (draft 4) is not supported", k);
    if (!json_is_number(v)) return cfail(c, "'%s' must be a number", k);
    double d = json_number_value(v);
    if (!(fabs(d) <= 1e16)) return cfail(c, "'%s' beyond 1e16 is not supported", k);
    double r = up ? floor(d) : ceil(d);
    if (excl && r == d) r += up ? -1 : 1;
    long long x = (long long)r;
    if (!*have || (up ? x < *out : x > *out)) *out = x;
    *have = 1;
    return 0;
}

static int visit_integer(conv *c, const json_t *s, sbuf *out) {
    long long lo = 0, hi = 0;
    int has_lo = 0, has_hi = 0;
    if (get_bound(c, s, "minimum", 0, 0, &lo, &has_lo) ||
        get_bound(c, s, "exclusiveMinimum", 0, 1, &lo, &has_lo) ||
        get_bound(c, s, "maximum", 1, 0, &hi, &has_hi) ||
        get_bound(c, s, "exclusiveMaximum", 1, 1, &hi, &has_hi))
        return -1;
    if (!has_lo && !has_hi) {
        sb_add(out, "json-integer");
        return 0;
    }
    if (has_lo && has_hi && lo > hi) return cfail(c, "minimum > maximum: no integer fits");
    sb_add(out, "(");
    int alts = 0;
    if (!has_lo || lo < 0) { /* negatives: "-" magnitude */
        long long mag_lo = has_hi && hi < 0 ? -hi : 1, mag_hi = has_lo ? -lo : -1;
        sb_add(out, "\"-\" (");
        mag_range(out, (unsigned long long)mag_lo, mag_hi);
        sb_add(out, ")");
        alts++;
    }
    if (!has_hi || hi >= 0) {
        if (alts) sb_add(out, " | ");
        mag_range(out, has_lo && lo > 0 ? (unsigned long long)lo : 0, has_hi ? hi : -1);
    }
    sb_add(out, ") ws");
    return 0;
}

/* ---- objects and arrays ---- */

static int is_required(const json_t *req, const char *k) {
    size_t i;
    json_t *v;
    json_array_foreach((json_t *)req, i,
                       v) if (json_is_string(v) && !strcmp(json_string_value(v), k)) return 1;
    return 0;
}

/* props: keys in order, with their schemas; req: required names. */
static int visit_object_props(conv *c, const json_t *props, const json_t *req, sbuf *out) {
    size_t n = json_object_size(props);
    if (req && !json_is_array(req)) return cfail(c, "'required' must be an array");
    char base[24];
    new_name(c, base, sizeof base);
    /* kv_i rules */
    const char **keys = calloc(n + 1, sizeof *keys);
    int *reqd = calloc(n + 1, sizeof *reqd);
    if (!keys || !reqd) {
        free(keys);
        free(reqd);
        return cfail(c, "out of memory");
    }
    size_t i = 0;
    const char *k;
    json_t *v;
    int rc = 0;
    json_object_foreach((json_t *)props, k, v) {
        keys[i] = k;
        reqd[i] = req && is_required(req, k);
        sbuf body = {0};
        json_t *ks = json_string(k);
        char *enc = json_dumps(ks, JSON_ENCODE_ANY);
        json_decref(ks);
        if (!enc) {
            rc = cfail(c, "out of memory");
            free(body.s);
            break;
        }
        sb_lit(&body, enc, strlen(enc));
        free(enc);
        sb_add(&body, " ws \":\" ws ");
        rc = visit(c, v, &body);
        if (!rc) {
            char name[48];
            snprintf(name, sizeof name, "%s-kv%zu", base, i);
            add_rule(c, name, &body);
        }
        free(body.s);
        if (rc) break;
        i++;
    }
    /* S_i: nothing written yet; C_i: something written (a comma first). */
    for (size_t j = n + 1; !rc && j-- > 0;) {
        sbuf sb = {0}, cb = {0};
        if (j == n) {
            sb_add(&sb, "\"\"");
            sb_add(&cb, "\"\"");
        } else if (reqd[j]) {
            sb_printf(&sb, "%s-kv%zu %s-c%zu", base, j, base, j + 1);
            sb_printf(&cb, "\",\" ws %s-kv%zu %s-c%zu", base, j, base, j + 1);
        } else {
            sb_printf(&sb, "%s-kv%zu %s-c%zu | %s-s%zu", base, j, base, j + 1, base, j + 1);
            sb_printf(&cb, "(\",\" ws %s-kv%zu)? %s-c%zu", base, j, base, j + 1);
        }
        char name[48];
        snprintf(name, sizeof name, "%s-s%zu", base, j);
        add_rule(c, name, &sb);
        snprintf(name, sizeof name, "%s-c%zu", base, j);
        add_rule(c, name, &cb);
        free(sb.s);
        free(cb.s);
    }
    free(keys);
    free(reqd);
    if (rc) return -1;
    sb_printf(out, "\"{\" ws %s-s0 \"}\" ws", base);
    return 0;
}

static int visit_object(conv *c, const json_t *s, sbuf *out) {
    json_t *props = json_object_get(s, "properties");
    json_t *addl = json_object_get(s, "additionalProperties");
    if (props && !json_is_object(props)) return cfail(c, "'properties' must be an object");
    if (props && json_object_size(props))
        return visit_object_props(c, props, json_object_get(s, "required"), out);
    json_t *req = json_object_get(s, "required");
    if (req && json_array_size(req))
        return cfail(c, "'required' without 'properties' is not supported");
    if (json_is_false(addl)) {
        sb_add(out, "\"{\" ws \"}\" ws");
        return 0;
    }
    if (!addl || json_is_true(addl)) {
        sb_add(out, "json-object");
        return 0;
    }
    char name[24];
    new_name(c, name, sizeof name);
    sbuf val = {0};
    if (visit(c, addl, &val)) {
        free(val.s);
        return -1;
    }
    sbuf body = {0};
    sb_printf(&body, "json-string \":\" ws (%s)", val.s ? val.s : "");
    add_rule(c, name, &body);
    free(val.s);
    free(body.s);
    sb_printf(out, "\"{\" ws (%s (\",\" ws %s)*)? \"}\" ws", name, name);
    return 0;
}

static int get_count(conv *c, const json_t *s, const char *k, long long *out) {
    json_t *v = json_object_get(s, k);
    if (!v) return 0;
    if (!json_is_integer(v) || json_integer_value(v) < 0 ||
        json_integer_value(v) > INF_GRAM_MAX_REPEAT)
        return cfail(c, "'%s' must be an integer in 0..%d", k, INF_GRAM_MAX_REPEAT);
    *out = json_integer_value(v);
    return 0;
}

static int visit_array(conv *c, const json_t *s, sbuf *out) {
    json_t *items = json_object_get(s, "items"), *prefix = json_object_get(s, "prefixItems");
    long long lo = 0, hi = -1;
    if (get_count(c, s, "minItems", &lo) || get_count(c, s, "maxItems", &hi)) return -1;
    if (hi >= 0 && hi < lo) return cfail(c, "minItems > maxItems");
    if (prefix && !json_is_array(prefix)) return cfail(c, "'prefixItems' must be an array");
    if (items && json_is_array(items))
        return cfail(c, "'items' as an array (draft 4 tuples) is not supported; use prefixItems");
    long long n_fixed = prefix ? (long long)json_array_size(prefix) : 0;
    if (hi >= 0 && n_fixed > hi) n_fixed = hi;
    /* The element after the fixed ones, and how many of it. */
    char item[24] = "json-value";
    int extra_ok = !json_is_false(items);
    if (items && !json_is_false(items)) {
        new_name(c, item, sizeof item);
        sbuf b = {0};
        if (visit(c, items, &b)) {
            free(b.s);
            return -1;
        }
        add_rule(c, item, &b);
        free(b.s);
    }
    long long xlo = lo > n_fixed ? lo - n_fixed : 0, xhi = hi < 0 ? -1 : hi - n_fixed;
    if (!extra_ok) {
        if (xlo > 0) return cfail(c, "minItems is more than prefixItems with items: false");
        xhi = 0;
    }
    if (prefix && !items) xhi = xlo; /* extras are optional: add only the needed ones */
    sb_add(out, "\"[\" ws");
    for (long long i = 0; i < n_fixed; i++) {
        if (i) sb_add(out, " \",\" ws");
        sb_add(out, " (");
        if (visit(c, json_array_get(prefix, (size_t)i), out)) return -1;
        sb_add(out, ")");
    }
    if (xhi != 0) {
        if (n_fixed) {
            if (xhi < 0)
                sb_printf(out, " (\",\" ws %s){%lld,}", item, xlo);
            else
                sb_printf(out, " (\",\" ws %s){%lld,%lld}", item, xlo, xhi);
        } else if (xlo >= 1) {
            if (xhi < 0)
                sb_printf(out, " %s (\",\" ws %s){%lld,}", item, item, xlo - 1);
            else
                sb_printf(out, " %s (\",\" ws %s){%lld,%lld}", item, item, xlo - 1, xhi - 1);
        } else {
            if (xhi < 0)
                sb_printf(out, " (%s (\",\" ws %s)*)?", item, item);
            else
                sb_printf(out, " (%s (\",\" ws %s){0,%lld})?", item, item, xhi - 1);
        }
    }
    sb_add(out, " \"]\" ws");
    return 0;
}

/* allOf of objects: one object with every member's properties and required. */
static int visit_all_of(conv *c, const json_t *all, sbuf *out) {
    if (!json_is_array(all) || !json_array_size(all))
        return cfail(c, "'allOf' must be a non-empty array");
    json_t *props = json_object(), *req = json_array();
    size_t i;
    json_t *m;
    int rc = 0;
    json_array_foreach((json_t *)all, i, m) {
        const json_t *cur = m;
        for (int hops = 0; json_is_object(cur) && json_object_get(cur, "$ref") && hops < 16;
             hops++) {
            const char *ref = json_string_value(json_object_get(cur, "$ref"));
            if (!(cur = resolve(c, ref ? ref : ""))) break;
        }
        if (!cur) {
            rc = -1;
            break;
        }
        json_t *p = json_object_get(cur, "properties");
        if (!json_is_object(cur) || !json_is_object(p)) {
            rc = cfail(c, "the keyword 'allOf' is supported only over objects with properties");
            break;
        }
        json_object_update(props, p);
        json_t *r = json_object_get(cur, "required");
        if (json_is_array(r)) json_array_extend(req, r);
    }
    if (!rc) rc = visit_object_props(c, props, req, out);
    json_decref(props);
    json_decref(req);
    return rc;
}

static int visit_typed(conv *c, const json_t *s, const char *t, sbuf *out) {
    if (!strcmp(t, "object")) return visit_object(c, s, out);
    if (!strcmp(t, "array")) return visit_array(c, s, out);
    if (!strcmp(t, "string")) return visit_string(c, s, out);
    if (!strcmp(t, "integer")) return visit_integer(c, s, out);
    if (!strcmp(t, "number")) {
        static const char *const bounds[] = {"minimum", "maximum", "exclusiveMinimum",
                                             "exclusiveMaximum"};
        for (int i = 0; i < 4; i++)
            if (json_object_get(s, bounds[i]))
                return cfail(c, "the keyword '%s' on a number is not supported (only on integers)",
                             bounds[i]);
        sb_add(out, "json-number");
        return 0;
    }
    if (!strcmp(t, "boolean")) return sb_add(out, "json-boolean"), 0;
    if (!strcmp(t, "null")) return sb_add(out, "json-null"), 0;
    return cfail(c, "unknown type '%s'", t);
}

static int visit_alts(conv *c, const json_t *arr, const char *k, sbuf *out) {
    if (!json_is_array(arr) || !json_array_size(arr))
        return cfail(c, "'%s' must be a non-empty array", k);
    size_t i;
    json_t *v;
    sb_add(out, "(");
    json_array_foreach((json_t *)arr, i, v) {
        if (i) sb_add(out, " | ");
        sb_add(out, "(");
        if (visit(c, v, out)) return -1;
        sb_add(out, ")");
    }
    sb_add(out, ")");
    return 0;
}

static int visit_literal(conv *c, const json_t *v, sbuf *out) {
    char *enc = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
    if (!enc) return cfail(c, "out of memory");
    sb_lit(out, enc, strlen(enc));
    sb_add(out, " ws");
    free(enc);
    return 0;
}

static int visit(conv *c, const json_t *s, sbuf *out) {
    if (c->failed) return -1;
    if (json_is_true(s)) return sb_add(out, "json-value"), 0;
    if (json_is_false(s)) return cfail(c, "the schema false allows nothing");
    if (!json_is_object(s)) return cfail(c, "a schema must be an object or a boolean");
    if (++c->depth > MAX_SCHEMA_DEPTH)
        return cfail(c, "schemas nest deeper than %d", MAX_SCHEMA_DEPTH);
    int rc = check_keywords(c, s);
    json_t *v;
    if (rc) {
    } else if ((v = json_object_get(s, "$ref"))) {
        if (!json_is_string(v))
            rc = cfail(c, "'$ref' must be a string");
        else
            rc = visit_ref(c, json_string_value(v), out);
    } else if ((v = json_object_get(s, "const"))) {
        rc = visit_literal(c, v, out);
    } else if ((v = json_object_get(s, "enum"))) {
        if (!json_is_array(v) || !json_array_size(v)) {
            rc = cfail(c, "'enum' must be a non-empty array");
        } else {
            size_t i;
            json_t *e;
            sb_add(out, "(");
            json_array_foreach(v, i, e) {
                if (i) sb_add(out, " | ");
                if ((rc = visit_literal(c, e, out))) break;
            }
            sb_add(out, ")");
        }
    } else if ((v = json_object_get(s, "anyOf"))) {
        rc = visit_alts(c, v, "anyOf", out);
    } else if ((v = json_object_get(s, "oneOf"))) {
        rc = visit_alts(c, v, "oneOf", out);
    } else if ((v = json_object_get(s, "allOf"))) {
        rc = visit_all_of(c, v, out);
    } else if ((v = json_object_get(s, "type"))) {
        if (json_is_string(v)) {
            rc = visit_typed(c, s, json_string_value(v), out);
        } else if (json_is_array(v) && json_array_size(v)) {
            size_t i;
            json_t *t;
            sb_add(out, "(");
            json_array_foreach(v, i, t) {
                if (!json_is_string(t)) {
                    rc = cfail(c, "'type' must be a string or an array of strings");
                    break;
                }
                if (i) sb_add(out, " | ");
                sb_add(out, "(");
                if ((rc = visit_typed(c, s, json_string_value(t), out))) break;
                sb_add(out, ")");
            }
            sb_add(out, ")");
        } else {
            rc = cfail(c, "'type' must be a string or an array of strings");
        }
    } else if (json_object_get(s, "properties") || json_object_get(s, "additionalProperties")) {
        rc = visit_object(c, s, out);
    } else if (json_object_get(s, "items") || json_object_get(s, "prefixItems")) {
        rc = visit_array(c, s, out);
    } else if (json_object_get(s, "pattern") || json_object_get(s, "format") ||
               json_object_get(s, "minLength") || json_object_get(s, "maxLength")) {
        rc = visit_string(c, s, out);
    } else {
        sb_add(out, "json-value");
    }
    c->depth--;
    return rc;
}

int inf_json_schema_to_gbnf(const json_t *schema, char **gbnf, inf_err *err) {
    *gbnf = NULL;
    conv c = {.root = schema, .err = err};
    sbuf root = {0};
    int rc = visit(&c, schema, &root);
    if (!rc) {
        sb_add(&c.rules, "root ::= ");
        sb_addn(&c.rules, root.s ? root.s : "", root.n);
        sb_add(&c.rules, "\n");
        sb_add(&c.rules, PRIMITIVES);
        if (c.rules.oom || root.oom) rc = cfail(&c, "out of memory");
    }
    free(root.s);
    for (int i = 0; i < c.n_refs; i++)
        free(c.refs[i].ref);
    free(c.refs);
    if (rc) {
        free(c.rules.s);
        return -1;
    }
    *gbnf = c.rules.s;
    return 0;
}

int inf_gram_from_json_schema(inf_gram **out, const json_t *schema, inf_err *err) {
    *out = NULL;
    char *text;
    if (inf_json_schema_to_gbnf(schema, &text, err)) return -1;
    int rc = inf_gram_compile(out, text, strlen(text), "root", err);
    free(text);
    return rc;
}

/* ---- forced tool calls ---- */

/* The function of one element of tools: OpenAI chat's {type, function: {name,
 * parameters}}, the Responses API's {type, name, parameters} or Anthropic's
 * {name, input_schema}. *params is NULL when it has none. */
static int tool_function(const json_t *tool, size_t i, const char **name, const json_t **params,
                         inf_err *err) {
    if (!json_is_object(tool)) return inf_fail(err, "tools[%zu]: expected an object", i);
    const json_t *type = json_object_get(tool, "type");
    if (type && (!json_is_string(type) || strcmp(json_string_value(type), "function")))
        return inf_fail(err, "tools[%zu].type: only \"function\" tools can be called", i);
    const json_t *fn = json_object_get(tool, "function");
    if (!fn) fn = tool;
    if (!json_is_object(fn)) return inf_fail(err, "tools[%zu].function: expected an object", i);
    const json_t *n = json_object_get(fn, "name");
    if (!json_is_string(n) || !json_string_length(n))
        return inf_fail(err, "tools[%zu]: the function has no name (a non-empty string)", i);
    *name = json_string_value(n);
    *params = json_object_get(fn, "parameters");
    if (!*params) *params = json_object_get(fn, "input_schema");
    return 0;
}

int inf_tool_calls_to_gbnf(const json_t *tools, const char *only, bool several, char **gbnf,
                           inf_err *err) {
    *gbnf = NULL;
    if (!json_is_array(tools) || !json_array_size(tools))
        return inf_fail(err, "tools: expected a non-empty array of functions");
    conv c = {.err = err};
    sbuf calls = {0};
    int rc = 0, n_calls = 0;
    size_t i;
    json_t *tool;
    json_array_foreach((json_t *)tools, i, tool) {
        const char *name = NULL;
        const json_t *params = NULL;
        if ((rc = tool_function(tool, i, &name, &params, err))) break;
        if (only && strcmp(only, name)) continue;
        /* Each function's schema is its own document: its $refs point into it. */
        c.root = params;
        for (int k = 0; k < c.n_refs; k++)
            free(c.refs[k].ref);
        c.n_refs = 0;
        sbuf args = {0};
        if (!params) {
            sb_add(&args, "json-object");
        } else if ((rc = visit(&c, params, &args))) {
            free(args.s);
            inf_err inner = *err;
            inf_fail(err, "tools[%zu] '%s' parameters: %s", i, name, inner.msg);
            break;
        }
        json_t *js = json_string(name);
        char *enc = js ? json_dumps(js, JSON_ENCODE_ANY) : NULL;
        json_decref(js);
        if (!enc) {
            free(args.s);
            rc = cfail(&c, "out of memory");
            break;
        }
        if (n_calls++) sb_add(&calls, " | ");
        sb_add(&calls, "(");
        sb_lit(&calls, enc, strlen(enc));
        sb_add(&calls, " ws \",\" ws \"\\\"arguments\\\"\" ws \":\" ws (");
        sb_addn(&calls, args.s ? args.s : "", args.n);
        sb_add(&calls, "))");
        free(enc);
        free(args.s);
    }
    if (!rc && !n_calls)
        rc = inf_fail(err, "tool_choice names the function '%s', which is not in tools", only);
    if (!rc) {
        sb_printf(&c.rules, "root ::= tool-call%s\n", several ? " (\"\\n\" tool-call)*" : "");
        sb_add(&c.rules, "tool-call ::= \"<tool_call>\\n{\" ws \"\\\"name\\\"\" ws \":\" ws (");
        sb_addn(&c.rules, calls.s ? calls.s : "", calls.n);
        sb_add(&c.rules, ") \"}\" \"\\n</tool_call>\"\n");
        sb_add(&c.rules, PRIMITIVES);
        if (c.rules.oom || calls.oom) rc = inf_fail(err, "json_schema: out of memory");
    }
    free(calls.s);
    for (int k = 0; k < c.n_refs; k++)
        free(c.refs[k].ref);
    free(c.refs);
    if (rc) {
        free(c.rules.s);
        return -1;
    }
    *gbnf = c.rules.s;
    return 0;
}

int inf_gram_tool_calls(inf_gram **out, const json_t *tools, const char *only, bool several,
                        inf_err *err) {
    *out = NULL;
    char *text;
    if (inf_tool_calls_to_gbnf(tools, only, several, &text, err)) return -1;
    int rc = inf_gram_compile(out, text, strlen(text), "root", err);
    free(text);
    return rc;
}

int inf_gram_json_object(inf_gram **out, inf_err *err) {
    sbuf b = {0};
    sb_add(&b, "root ::= json-object\n");
    sb_add(&b, PRIMITIVES);
    if (b.oom) return inf_fail(err, "grammar: out of memory");
    int rc = inf_gram_compile(out, b.s, b.n, "root", err);
    free(b.s);
    return rc;
}
