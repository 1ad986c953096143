/* GBNF -> compiled rules. A recursive-descent parser over the text builds
 * each rule's elements; groups and repetitions become generated rules (named
 * "parent~k", which no written name can be, so they never collide); then the
 * rules are checked (every name defined, no left recursion) and flattened. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/gram_int.h"

typedef struct evec {
    gram_elem *e;
    int n, cap;
} evec;

typedef struct brule {
    char *name;
    evec body;
    int defined; /* line where defined, 0 when only referenced */
    int ref_line, ref_col;
    int star;     /* generated x* rule (body: x, self, | ""): x may need its empty string dropped */
    int nonempty; /* 1 + the rule matching this one's language less "", once made */
} brule;

typedef struct parser {
    const char *s, *p, *end;
    brule *rules;
    int n_rules, cap_rules;
    uint32_t *ranges; /* [n_ranges][2] */
    int n_ranges, cap_ranges;
    long n_elems;
    int n_orig; /* rules before the empty strings were dropped from repeated items */
    int depth;
    int failed;
    inf_err *err;
} parser;

#define MAX_NESTING 200

static void where(const parser *ps, const char *at, int *line, int *col) {
    *line = 1;
    *col = 1;
    for (const char *q = ps->s; q < at && q < ps->end; q++) {
        if (*q == '\n') {
            (*line)++;
            *col = 1;
        } else {
            (*col)++;
        }
    }
}

static int fail_at(parser *ps, const char *at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail_at(parser *ps, const char *at, const char *fmt, ...) {
    if (ps->failed) return -1;
    ps->failed = 1;
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    int line, col;
    where(ps, at, &line, &col);
    return inf_fail(ps->err, "grammar: line %d, column %d: %s", line, col, msg);
}

static int oom(parser *ps) {
    if (ps->failed) return -1;
    ps->failed = 1;
    return inf_fail(ps->err, "grammar: out of memory");
}

static int push(parser *ps, evec *v, gram_elem e) {
    if (++ps->n_elems > INF_GRAM_MAX_ELEMS)
        return fail_at(ps, ps->p, "the grammar expands to more than %d elements",
                       INF_GRAM_MAX_ELEMS);
    if (v->n == v->cap) {
        int cap = v->cap ? 2 * v->cap : 8;
        gram_elem *e2 = realloc(v->e, (size_t)cap * sizeof *e2);
        if (!e2) return oom(ps);
        v->e = e2;
        v->cap = cap;
    }
    v->e[v->n++] = e;
    return 0;
}

static int new_rule(parser *ps, const char *name, size_t len) {
    if (ps->n_rules == ps->cap_rules) {
        int cap = ps->cap_rules ? 2 * ps->cap_rules : 16;
        brule *r = realloc(ps->rules, (size_t)cap * sizeof *r);
        if (!r) return oom(ps);
        ps->rules = r;
        ps->cap_rules = cap;
    }
    brule *r = &ps->rules[ps->n_rules];
    memset(r, 0, sizeof *r);
    r->name = malloc(len + 1);
    if (!r->name) return oom(ps);
    memcpy(r->name, name, len);
    r->name[len] = 0;
    return ps->n_rules++;
}

static int rule_id(parser *ps, const char *name, size_t len) {
    for (int i = 0; i < ps->n_rules; i++)
        if (strlen(ps->rules[i].name) == len && !memcmp(ps->rules[i].name, name, len)) return i;
    return new_rule(ps, name, len);
}

static int gen_rule(parser *ps, int parent) {
    char name[300];
    snprintf(name, sizeof name, "%.200s~%d", ps->rules[parent].name, ps->n_rules);
    int id = new_rule(ps, name, strlen(name));
    if (id >= 0) ps->rules[id].defined = -1;
    return id;
}

static int is_name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-';
}

/* Spaces, newlines and # comments. */
static void skip_space(parser *ps) {
    while (ps->p < ps->end) {
        char c = *ps->p;
        if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
            ps->p++;
        } else if (c == '#') {
            while (ps->p < ps->end && *ps->p != '\n')
                ps->p++;
        } else {
            break;
        }
    }
}

/* At `name ::=`: the start of the next rule. */
static int at_rule_start(parser *ps) {
    const char *q = ps->p;
    while (q < ps->end && is_name_char(*q))
        q++;
    if (q == ps->p) return 0;
    while (q < ps->end && (*q == ' ' || *q == '\t' || *q == '\r' || *q == '\n'))
        q++;
    return ps->end - q >= 3 && !memcmp(q, "::=", 3);
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* One character of a literal or class (an escape or a UTF-8 sequence) ->
 * code point; -1 on error. */
static int64_t parse_char(parser *ps) {
    const char *at = ps->p;
    if (ps->p >= ps->end) return fail_at(ps, at, "unexpected end of the grammar");
    unsigned char c = (unsigned char)*ps->p;
    if (c == '\\') {
        if (++ps->p >= ps->end) return fail_at(ps, at, "unexpected end after '\\'");
        char x = *ps->p++;
        int digits = 0;
        switch (x) {
        case 'n':
            return '\n';
        case 'r':
            return '\r';
        case 't':
            return '\t';
        case '0':
            return 0;
        case '\\':
        case '"':
        case '\'':
        case '[':
        case ']':
        case '-':
        case '^':
        case '/':
        case '.':
        case '(':
        case ')':
        case '|':
            return (unsigned char)x;
        case 'x':
            digits = 2;
            break;
        case 'u':
            digits = 4;
            break;
        case 'U':
            digits = 8;
            break;
        default:
            return fail_at(ps, at, "unknown escape '\\%c'", x);
        }
        uint32_t v = 0;
        for (int i = 0; i < digits; i++) {
            int h = ps->p < ps->end ? hexval(*ps->p) : -1;
            if (h < 0) return fail_at(ps, at, "'\\%c' needs %d hex digits", x, digits);
            v = v << 4 | (uint32_t)h;
            ps->p++;
        }
        if (v > 0x10FFFF) return fail_at(ps, at, "code point U+%X is beyond U+10FFFF", v);
        return v;
    }
    int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (!len || ps->end - ps->p < len) return fail_at(ps, at, "invalid UTF-8 in the grammar");
    uint32_t v = len == 1 ? c : len == 2 ? c & 0x1F : len == 3 ? c & 0x0F : c & 0x07;
    for (int i = 1; i < len; i++) {
        unsigned char d = (unsigned char)ps->p[i];
        if ((d & 0xC0) != 0x80) return fail_at(ps, at, "invalid UTF-8 in the grammar");
        v = v << 6 | (d & 0x3F);
    }
    static const uint32_t min_for[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (v < min_for[len] || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
        return fail_at(ps, at, "invalid UTF-8 in the grammar");
    ps->p += len;
    return v;
}

static int add_range(parser *ps, uint32_t lo, uint32_t hi) {
    if (ps->n_ranges == ps->cap_ranges) {
        int cap = ps->cap_ranges ? 2 * ps->cap_ranges : 64;
        uint32_t *r = realloc(ps->ranges, (size_t)cap * 2 * sizeof *r);
        if (!r) return oom(ps);
        ps->ranges = r;
        ps->cap_ranges = cap;
    }
    ps->ranges[2 * ps->n_ranges] = lo;
    ps->ranges[2 * ps->n_ranges + 1] = hi;
    ps->n_ranges++;
    return 0;
}

static int cmp_range(const void *a, const void *b) {
    const uint32_t *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0];
}

/* Sorts and merges the ranges [first, n_ranges) so matching can stop at the
 * first range above a code point and a negated class can be tested for a
 * whole interval. Returns how many remain. */
static int normalize_ranges(parser *ps, int first) {
    int n = ps->n_ranges - first;
    if (n <= 0) return 0;
    uint32_t *r = ps->ranges + 2 * first;
    qsort(r, (size_t)n, 2 * sizeof *r, cmp_range);
    int k = 0;
    for (int i = 0; i < n; i++) {
        if (k && r[2 * i] <= r[2 * (k - 1) + 1] + 1) {
            if (r[2 * i + 1] > r[2 * (k - 1) + 1]) r[2 * (k - 1) + 1] = r[2 * i + 1];
        } else {
            r[2 * k] = r[2 * i];
            r[2 * k + 1] = r[2 * i + 1];
            k++;
        }
    }
    ps->n_ranges = first + k;
    return k;
}

static int push_char(parser *ps, evec *v, uint32_t c) {
    int first = ps->n_ranges;
    if (add_range(ps, c, c)) return -1;
    return push(ps, v, (gram_elem){G_CHAR, 0, first, 1});
}

static int parse_alternates(parser *ps, int rule, evec *out);

/* The repetition {min,max} (max -1: unbounded) of the single element x. */
static int repeat(parser *ps, int rule, evec *out, gram_elem x, int min, int max) {
    for (int i = 0; i < min; i++)
        if (push(ps, out, x)) return -1;
    if (max < 0) { /* R ::= x R | "" */
        int r = gen_rule(ps, rule);
        if (r < 0) return -1;
        evec *b = &ps->rules[r].body;
        gram_elem self = {G_REF, 0, r, 0};
        if (push(ps, b, x) || push(ps, b, self) || push(ps, b, (gram_elem){G_ALT, 0, 0, 0}))
            return -1;
        ps->rules[r].star = 1;
        return push(ps, out, self);
    }
    /* (x (x (x)?)?)?: nested optionals, so a count is parsed one way only. */
    int inner = -1;
    for (int k = 0; k < max - min; k++) {
        int r = gen_rule(ps, rule);
        if (r < 0) return -1;
        evec *b = &ps->rules[r].body;
        if (push(ps, b, x)) return -1;
        if (inner >= 0 && push(ps, b, (gram_elem){G_REF, 0, inner, 0})) return -1;
        if (push(ps, b, (gram_elem){G_ALT, 0, 0, 0})) return -1;
        inner = r;
    }
    return inner >= 0 ? push(ps, out, (gram_elem){G_REF, 0, inner, 0}) : 0;
}

static int parse_int(parser *ps, int *out) {
    const char *at = ps->p;
    long v = 0;
    int digits = 0;
    while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9') {
        v = v * 10 + (*ps->p++ - '0');
        if (v > INF_GRAM_MAX_REPEAT)
            return fail_at(ps, at, "a repetition count above %d", INF_GRAM_MAX_REPEAT);
        digits++;
    }
    if (!digits) return fail_at(ps, at, "expected a number in {m,n}");
    *out = (int)v;
    return 0;
}

static int parse_sequence(parser *ps, int rule, evec *out) {
    for (;;) {
        skip_space(ps);
        if (ps->p >= ps->end || *ps->p == ')' || *ps->p == '|' || at_rule_start(ps)) return 0;
        const char *at = ps->p;
        int start = out->n;
        char c = *ps->p;
        if (c == '"') {
            ps->p++;
            while (ps->p < ps->end && *ps->p != '"') {
                int64_t cp = parse_char(ps);
                if (cp < 0 || push_char(ps, out, (uint32_t)cp)) return -1;
            }
            if (ps->p >= ps->end) return fail_at(ps, at, "unterminated literal");
            ps->p++;
        } else if (c == '[') {
            ps->p++;
            int neg = ps->p < ps->end && *ps->p == '^';
            if (neg) ps->p++;
            int first = ps->n_ranges;
            while (ps->p < ps->end && *ps->p != ']') {
                int64_t lo = parse_char(ps), hi = lo;
                if (lo < 0) return -1;
                if (ps->end - ps->p >= 2 && ps->p[0] == '-' && ps->p[1] != ']') {
                    ps->p++;
                    hi = parse_char(ps);
                    if (hi < 0) return -1;
                    if (hi < lo) return fail_at(ps, at, "a class range runs backwards");
                }
                if (add_range(ps, (uint32_t)lo, (uint32_t)hi)) return -1;
            }
            if (ps->p >= ps->end) return fail_at(ps, at, "unterminated character class");
            ps->p++;
            int n = normalize_ranges(ps, first);
            if (!n && !neg) return fail_at(ps, at, "an empty character class matches nothing");
            if (push(ps, out, (gram_elem){G_CHAR, (uint8_t)neg, first, n})) return -1;
        } else if (c == '.') {
            ps->p++;
            if (push(ps, out, (gram_elem){G_CHAR, 1, ps->n_ranges, 0})) return -1;
        } else if (c == '(') {
            ps->p++;
            if (++ps->depth > MAX_NESTING)
                return fail_at(ps, at, "groups nest deeper than %d", MAX_NESTING);
            int r = gen_rule(ps, rule);
            if (r < 0) return -1;
            evec body = {0};
            int rc = parse_alternates(ps, r, &body);
            ps->rules[r].body = body;
            if (rc) return -1;
            ps->depth--;
            skip_space(ps);
            if (ps->p >= ps->end || *ps->p != ')') return fail_at(ps, at, "'(' without ')'");
            ps->p++;
            if (push(ps, out, (gram_elem){G_REF, 0, r, 0})) return -1;
        } else if (is_name_char(c)) {
            const char *q = ps->p;
            while (ps->p < ps->end && is_name_char(*ps->p))
                ps->p++;
            int r = rule_id(ps, q, (size_t)(ps->p - q));
            if (r < 0) return -1;
            if (!ps->rules[r].ref_line) where(ps, q, &ps->rules[r].ref_line, &ps->rules[r].ref_col);
            if (push(ps, out, (gram_elem){G_REF, 0, r, 0})) return -1;
        } else {
            return fail_at(ps, at, "unexpected '%c'", c);
        }

        /* Postfix operators, applied to the one element just parsed (a
         * literal of several characters becomes a rule first). */
        while (ps->p < ps->end && strchr("*+?{", *ps->p)) {
            const char *op = ps->p;
            int min = 0, max = -1;
            if (*op == '*') {
                ps->p++;
            } else if (*op == '+') {
                min = 1;
                ps->p++;
            } else if (*op == '?') {
                max = 1;
                ps->p++;
            } else {
                ps->p++;
                skip_space(ps);
                if (parse_int(ps, &min)) return -1;
                skip_space(ps);
                max = min;
                if (ps->p < ps->end && *ps->p == ',') {
                    ps->p++;
                    skip_space(ps);
                    max = -1;
                    if (ps->p < ps->end && *ps->p != '}' && parse_int(ps, &max)) return -1;
                    skip_space(ps);
                }
                if (ps->p >= ps->end || *ps->p != '}') return fail_at(ps, op, "'{' without '}'");
                ps->p++;
                if (max >= 0 && max < min) return fail_at(ps, op, "{%d,%d}: max < min", min, max);
            }
            if (out->n == start) continue; /* "" repeated is still "" */
            if (out->n - start != 1) {
                int r = gen_rule(ps, rule);
                if (r < 0) return -1;
                for (int i = start; i < out->n; i++)
                    if (push(ps, &ps->rules[r].body, out->e[i])) return -1;
                out->n = start;
                if (push(ps, out, (gram_elem){G_REF, 0, r, 0})) return -1;
            }
            gram_elem x = out->e[start];
            out->n = start;
            if (repeat(ps, rule, out, x, min, max)) return -1;
        }
    }
}

static int parse_alternates(parser *ps, int rule, evec *out) {
    if (parse_sequence(ps, rule, out)) return -1;
    while (ps->p < ps->end && *ps->p == '|') {
        ps->p++;
        if (push(ps, out, (gram_elem){G_ALT, 0, 0, 0}) || parse_sequence(ps, rule, out)) return -1;
    }
    return 0;
}

static int parse_rules(parser *ps) {
    for (;;) {
        skip_space(ps);
        if (ps->p >= ps->end) return 0;
        const char *at = ps->p, *q = ps->p;
        while (ps->p < ps->end && is_name_char(*ps->p))
            ps->p++;
        if (ps->p == q) return fail_at(ps, at, "expected a rule name");
        size_t len = (size_t)(ps->p - q);
        skip_space(ps);
        if (ps->end - ps->p < 3 || memcmp(ps->p, "::=", 3))
            return fail_at(ps, ps->p, "expected '::=' after '%.*s'", (int)len, q);
        ps->p += 3;
        int r = rule_id(ps, q, len);
        if (r < 0) return -1;
        if (ps->rules[r].defined)
            return fail_at(ps, at, "rule '%s' is defined twice", ps->rules[r].name);
        int line, col;
        where(ps, at, &line, &col);
        ps->rules[r].defined = line;
        evec body = {0};
        int rc = parse_alternates(ps, r, &body);
        ps->rules[r].body = body;
        if (rc) return -1;
        skip_space(ps);
        if (ps->p < ps->end && !at_rule_start(ps))
            return fail_at(ps, ps->p, "unexpected '%c'", *ps->p);
    }
}

/* ---- checks over the rules ---- */

/* nullable[r]: rule r can match the empty string. */
static void compute_nullable(const parser *ps, uint8_t *nullable) {
    for (int changed = 1; changed;) {
        changed = 0;
        for (int r = 0; r < ps->n_rules; r++) {
            if (nullable[r]) continue;
            const evec *b = &ps->rules[r].body;
            int ok = 1; /* the current alternative is nullable so far */
            for (int i = 0; i <= b->n; i++) {
                if (i == b->n || b->e[i].type == G_ALT) {
                    if (ok) {
                        nullable[r] = 1;
                        changed = 1;
                        break;
                    }
                    ok = 1;
                } else if (b->e[i].type == G_CHAR || !nullable[b->e[i].a]) {
                    ok = 0;
                }
            }
        }
    }
}

/* A rule that reaches itself before consuming input would expand forever:
 * find one by a depth-first walk over "may start with" edges. */
static int find_left_recursion(const parser *ps, const uint8_t *nullable, uint8_t *color, int r) {
    color[r] = 1;
    const evec *b = &ps->rules[r].body;
    int live = 1; /* everything before i in this alternative is nullable */
    for (int i = 0; i < b->n; i++) {
        const gram_elem *e = &b->e[i];
        if (e->type == G_ALT) {
            live = 1;
            continue;
        }
        if (!live) continue;
        if (e->type == G_CHAR) {
            live = 0;
            continue;
        }
        if (color[e->a] == 1) return e->a;
        if (color[e->a] == 0) {
            int f = find_left_recursion(ps, nullable, color, e->a);
            if (f >= 0) return f;
        }
        if (!nullable[e->a]) live = 0;
    }
    color[r] = 2;
    return -1;
}

/* can[r]: rule r can match a non-empty string (whether or not it can also
 * match the empty one). */
static void compute_can_nonempty(const parser *ps, uint8_t *can) {
    for (int changed = 1; changed;) {
        changed = 0;
        for (int r = 0; r < ps->n_rules; r++) {
            if (can[r]) continue;
            const evec *b = &ps->rules[r].body;
            for (int i = 0; i < b->n && !can[r]; i++)
                if (b->e[i].type == G_CHAR || (b->e[i].type == G_REF && can[b->e[i].a]))
                    can[r] = changed = 1;
        }
    }
}

/* The rule matching rule r's language less the empty string (r nullable and
 * able to match something else; made once per rule). An alternative
 * a1 a2 .. an matches a non-empty string when, for the first ai that is not
 * empty, a1 .. a(i-1) are empty: so its non-empty version is the
 * alternatives ai' a(i+1) .. an for every i whose a1 .. a(i-1) are nullable,
 * ai' being ai less the empty string. A repetition R ::= x R | "" is
 * x' R (its first non-empty x, after empty ones). Returns the rule, or -1. */
static int nonempty_rule(parser *ps, const uint8_t *nullable, const uint8_t *can, int r) {
    if (r >= ps->n_orig) return r; /* made here: never nullable */
    if (ps->rules[r].nonempty) return ps->rules[r].nonempty - 1;
    int nr = gen_rule(ps, r);
    if (nr < 0) return -1;
    ps->rules[r].nonempty = nr + 1;
    evec body = {0};
    if (ps->rules[r].star) {
        gram_elem x = ps->rules[r].body.e[0];
        if (x.type == G_REF && x.a < ps->n_orig && nullable[x.a]) {
            int sub = nonempty_rule(ps, nullable, can, x.a);
            if (sub < 0) return -1;
            x.a = sub;
        }
        if (push(ps, &body, x) || push(ps, &body, (gram_elem){G_REF, 0, r, 0})) goto fail;
        ps->rules[nr].body = body;
        return nr;
    }
    int n_alts = 0, start = 0;
    for (int i = 0; i <= ps->rules[r].body.n; i++) {
        const evec *b = &ps->rules[r].body; /* gen_rule may move the rules */
        if (i < b->n && b->e[i].type != G_ALT) continue;
        for (int k = start; k < i; k++) {
            gram_elem e = ps->rules[r].body.e[k];
            if (k > start) {
                gram_elem prev = ps->rules[r].body.e[k - 1];
                if (prev.type == G_CHAR || !nullable[prev.a]) break;
            }
            if (e.type == G_REF && !can[e.a]) continue; /* only "": never the first */
            if (e.type == G_REF && nullable[e.a]) {
                int sub = nonempty_rule(ps, nullable, can, e.a);
                if (sub < 0) goto fail;
                e.a = sub;
            }
            if (n_alts++ && push(ps, &body, (gram_elem){G_ALT, 0, 0, 0})) goto fail;
            if (push(ps, &body, e)) goto fail;
            for (int j = k + 1; j < i; j++)
                if (push(ps, &body, ps->rules[r].body.e[j])) goto fail;
        }
        start = i + 1;
    }
    INF_ASSERT(n_alts > 0); /* can[r] holds */
    ps->rules[nr].body = body;
    return nr;
fail:
    free(body.e);
    return -1;
}

/* x* with x able to match "" would expand x R -> R forever: the same
 * language is (x less "")*, so every such x is replaced by that rule (and a
 * repetition of something that only matches "" by ""). */
static int drop_empty_items(parser *ps, uint8_t **nullable) {
    int n0 = ps->n_orig = ps->n_rules;
    uint8_t *can = calloc((size_t)n0, 1);
    if (!can) return oom(ps);
    compute_can_nonempty(ps, can);
    int rc = 0;
    for (int r = 0; r < n0 && !rc; r++) {
        if (!ps->rules[r].star) continue;
        gram_elem x = ps->rules[r].body.e[0];
        if (x.type != G_REF || !(*nullable)[x.a]) continue;
        if (!can[x.a]) {
            ps->rules[r].body.n = 0; /* R ::= "" */
            continue;
        }
        int ne = nonempty_rule(ps, *nullable, can, x.a);
        if (ne < 0)
            rc = -1;
        else
            ps->rules[r].body.e[0].a = ne;
    }
    free(can);
    if (rc || ps->n_rules == n0) return rc;
    /* the new rules: nullable again for all */
    uint8_t *aux = calloc((size_t)ps->n_rules * 2, 1);
    if (!aux) return oom(ps);
    free(*nullable);
    *nullable = aux;
    compute_nullable(ps, aux);
    return 0;
}

static void free_parser(parser *ps) {
    for (int i = 0; i < ps->n_rules; i++) {
        free(ps->rules[i].name);
        free(ps->rules[i].body.e);
    }
    free(ps->rules);
    free(ps->ranges);
}

void inf_gram_free(inf_gram *g) {
    if (!g) return;
    free(g->el);
    free(g->rule_start);
    free(g->ranges);
    free(g);
}

int inf_gram_compile(inf_gram **out, const char *text, size_t n, const char *root, inf_err *err) {
    *out = NULL;
    parser ps = {.s = text, .p = text, .end = text + n, .err = err};
    inf_gram *g = NULL;
    uint8_t *aux = NULL;
    if (!root) root = "root";
    if (parse_rules(&ps)) goto fail;
    int root_id = -1;
    for (int i = 0; i < ps.n_rules; i++) {
        if (!ps.rules[i].defined) {
            inf_fail(err, "grammar: line %d, column %d: undefined rule '%s'", ps.rules[i].ref_line,
                     ps.rules[i].ref_col, ps.rules[i].name);
            goto fail;
        }
        if (!strcmp(ps.rules[i].name, root)) root_id = i;
    }
    if (root_id < 0) {
        inf_fail(err, "grammar: no rule named '%s' to start from", root);
        goto fail;
    }
    aux = calloc((size_t)ps.n_rules * 2, 1);
    if (!aux) {
        oom(&ps);
        goto fail;
    }
    compute_nullable(&ps, aux);
    if (drop_empty_items(&ps, &aux)) goto fail;
    for (int r = 0; r < ps.n_rules; r++) {
        if (aux[ps.n_rules + r]) continue;
        int f = find_left_recursion(&ps, aux, aux + ps.n_rules, r);
        if (f >= 0) {
            inf_fail(err,
                     "grammar: rule '%s' is left-recursive (it can reach itself without "
                     "consuming input)",
                     ps.rules[f].name);
            goto fail;
        }
    }

    g = calloc(1, sizeof *g);
    if (!g) goto oom;
    g->n_rules = ps.n_rules;
    g->n_el = 0;
    for (int r = 0; r < ps.n_rules; r++)
        g->n_el += ps.rules[r].body.n + 1;
    g->el = malloc((size_t)g->n_el * sizeof *g->el);
    g->rule_start = malloc((size_t)g->n_rules * sizeof *g->rule_start);
    g->ranges = malloc(((size_t)ps.n_ranges + 1) * 2 * sizeof *g->ranges);
    if (!g->el || !g->rule_start || !g->ranges) goto oom;
    int k = 0;
    for (int r = 0; r < ps.n_rules; r++) {
        g->rule_start[r] = k;
        if (ps.rules[r].body.n)
            memcpy(g->el + k, ps.rules[r].body.e, (size_t)ps.rules[r].body.n * sizeof *g->el);
        k += ps.rules[r].body.n;
        g->el[k++] = (gram_elem){G_END, 0, 0, 0};
    }
    if (ps.n_ranges) memcpy(g->ranges, ps.ranges, (size_t)ps.n_ranges * 2 * sizeof *g->ranges);
    g->n_ranges = ps.n_ranges;
    g->root = root_id;
    free(aux);
    free_parser(&ps);
    *out = g;
    return 0;
oom:
    oom(&ps);
fail:
    free(aux);
    inf_gram_free(g);
    free_parser(&ps);
    return -1;
}
