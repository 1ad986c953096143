/* Template values: the arena they live in, Python-like equality, ordering,
 * str()/repr() and json.dumps output. */
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "template/tmpl_int.h"

/* ---- arena ---------------------------------------------------------------- */
struct tm_chunk {
    tm_chunk *next;
    size_t size, used;
    _Alignas(16) unsigned char data[];
};

void tm_state_init(tm_state *S, size_t limit, const char *src, inf_err *err) {
    memset(S, 0, sizeof *S);
    S->limit = limit;
    S->src = src;
    S->err = err;
}

void tm_state_free(tm_state *S) {
    tm_chunk *c = S->chunks;
    while (c) {
        tm_chunk *next = c->next;
        free(c);
        c = next;
    }
    S->chunks = NULL;
    S->used = 0;
}

void *tm_alloc(tm_state *S, size_t n) {
    n = (n + 15) & ~(size_t)15;
    tm_chunk *c = S->chunks;
    if (!c || c->size - c->used < n) {
        size_t size = n > 65536 ? n : 65536;
        if (n > S->limit || S->used > S->limit - size)
            tm_fail(S, -1, "memory limit of %zu bytes exceeded", S->limit);
        c = malloc(sizeof *c + size);
        if (!c) tm_fail(S, -1, "out of memory");
        c->size = size;
        c->used = 0;
        c->next = S->chunks;
        S->chunks = c;
        S->used += size;
    }
    void *p = c->data + c->used;
    c->used += n;
    memset(p, 0, n);
    return p;
}

void tm_fail(tm_state *S, long pos, const char *fmt, ...) {
    char msg[900];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (pos >= 0 && S->src) {
        long line = 1, col = 1;
        for (long i = 0; i < pos && S->src[i]; i++) {
            unsigned char ch = (unsigned char)S->src[i];
            if (ch == '\n')
                line++, col = 1;
            else if ((ch & 0xC0) != 0x80)
                col++;
        }
        inf_fail(S->err, "template:%ld:%ld: %s", line, col, msg);
    } else {
        inf_fail(S->err, "template: %s", msg);
    }
    longjmp(S->jmp, 1);
}

/* ---- constructors --------------------------------------------------------- */
tv tv_strn(tm_state *S, const char *p, size_t n) {
    tm_str *s = tm_alloc(S, sizeof *s + n + 1);
    s->len = n;
    if (n) memmove(s->p, p, n); /* p may lie in arena memory just handed back */
    s->p[n] = 0;
    tv r = {.t = TV_STR};
    r.u.s = s;
    return r;
}

tv tv_cstr(tm_state *S, const char *p) {
    return tv_strn(S, p, strlen(p));
}

tm_list *tm_list_new(tm_state *S, long cap) {
    tm_list *l = tm_alloc(S, sizeof *l);
    if (cap < 4) cap = 4;
    l->cap = cap;
    l->v = tm_alloc(S, (size_t)cap * sizeof(tv));
    return l;
}

void tm_list_push(tm_state *S, tm_list *l, tv v) {
    if (l->n == l->cap) {
        tv *nv = tm_alloc(S, (size_t)l->cap * 2 * sizeof(tv));
        tm_memcpy(nv, l->v, (size_t)l->n * sizeof(tv));
        l->v = nv;
        l->cap *= 2;
    }
    l->v[l->n++] = v;
}

tv tv_list(tm_list *l) {
    tv r = {.t = TV_LIST};
    r.u.l = l;
    return r;
}

tm_dict *tm_dict_new(tm_state *S, long cap) {
    tm_dict *d = tm_alloc(S, sizeof *d);
    if (cap < 4) cap = 4;
    d->cap = cap;
    d->k = tm_alloc(S, (size_t)cap * sizeof(tv));
    d->v = tm_alloc(S, (size_t)cap * sizeof(tv));
    return d;
}

tv *tm_dict_find(tm_dict *d, tv key) {
    long budget = LONG_MAX;
    return tm_dict_find_budget(d, key, &budget);
}

tv *tm_dict_find_budget(tm_dict *d, tv key, long *budget) {
    for (long i = 0; i < d->n && *budget >= 0; i++)
        if (tv_equal_budget(d->k[i], key, budget)) return &d->v[i];
    return NULL;
}

tv *tm_dict_get(tm_dict *d, const char *key, size_t len) {
    for (long i = 0; i < d->n; i++)
        if (d->k[i].t == TV_STR && d->k[i].u.s->len == len && !memcmp(d->k[i].u.s->p, key, len))
            return &d->v[i];
    return NULL;
}

void tm_dict_set(tm_state *S, tm_dict *d, tv key, tv val) {
    tv *slot = tm_dict_find(d, key);
    if (slot) {
        *slot = val;
        return;
    }
    if (d->n == d->cap) {
        tv *nk = tm_alloc(S, (size_t)d->cap * 2 * sizeof(tv));
        tv *nv = tm_alloc(S, (size_t)d->cap * 2 * sizeof(tv));
        tm_memcpy(nk, d->k, (size_t)d->n * sizeof(tv));
        tm_memcpy(nv, d->v, (size_t)d->n * sizeof(tv));
        d->k = nk, d->v = nv, d->cap *= 2;
    }
    d->k[d->n] = key;
    d->v[d->n++] = val;
}

/* ---- Python semantics ----------------------------------------------------- */
bool tv_truthy(tv v) {
    switch (v.t) {
    case TV_UNDEF:
    case TV_NONE:
        return false;
    case TV_BOOL:
        return v.u.b;
    case TV_INT:
        return v.u.i != 0;
    case TV_FLOAT:
        return v.u.f != 0.0;
    case TV_STR:
        return v.u.s->len != 0;
    case TV_LIST:
        return v.u.l->n != 0;
    case TV_DICT:
        return v.u.d->n != 0;
    default:
        return true;
    }
}

bool tv_is_number(tv v) {
    return v.t == TV_BOOL || v.t == TV_INT || v.t == TV_FLOAT;
}

double tv_num(tv v) {
    return v.t == TV_FLOAT ? v.u.f : v.t == TV_INT ? (double)v.u.i : v.t == TV_BOOL ? v.u.b : 0;
}

static int64_t tv_as_i(tv v) {
    return v.t == TV_BOOL ? v.u.b : v.u.i;
}

static bool equal_rec(tv a, tv b, int depth, long *budget);
bool tv_equal(tv a, tv b) {
    long budget = LONG_MAX;
    return equal_rec(a, b, 0, &budget);
}
bool tv_equal_budget(tv a, tv b, long *budget) {
    return equal_rec(a, b, 0, budget);
}

/* Deeper than 500 levels compares unequal rather than overflow the stack. */
static bool equal_rec(tv a, tv b, int depth, long *budget) {
    if (depth > 500 || --*budget < 0) return false;
    if (tv_is_number(a) && tv_is_number(b)) {
        if (a.t == TV_FLOAT || b.t == TV_FLOAT) return tv_num(a) == tv_num(b);
        return tv_as_i(a) == tv_as_i(b);
    }
    if (a.t != b.t) return false;
    switch (a.t) {
    case TV_UNDEF:
    case TV_NONE:
        return true;
    case TV_STR:
        if (a.u.s->len != b.u.s->len) return false;
        *budget -= (long)(a.u.s->len / 64);
        return !memcmp(a.u.s->p, b.u.s->p, a.u.s->len);
    case TV_LIST:
        if (a.tuple != b.tuple || a.u.l->n != b.u.l->n) return false;
        for (long i = 0; i < a.u.l->n; i++)
            if (!equal_rec(a.u.l->v[i], b.u.l->v[i], depth + 1, budget)) return false;
        return true;
    case TV_DICT:
        if (a.u.d->n != b.u.d->n) return false;
        for (long i = 0; i < a.u.d->n; i++) {
            tv *o = tm_dict_find_budget(b.u.d, a.u.d->k[i], budget);
            if (!o || !equal_rec(a.u.d->v[i], *o, depth + 1, budget)) return false;
        }
        return true;
    case TV_NS:
        return a.u.d == b.u.d;
    case TV_FUNC:
        return a.u.i == b.u.i;
    case TV_MACRO:
        return a.u.macro == b.u.macro;
    default:
        return false;
    }
}

static int compare_rec(tv a, tv b, bool *ok, int depth, long *budget);
int tv_compare(tv a, tv b, bool *ok) {
    long budget = LONG_MAX;
    return compare_rec(a, b, ok, 0, &budget);
}
int tv_compare_budget(tv a, tv b, bool *ok, long *budget) {
    return compare_rec(a, b, ok, 0, budget);
}

static int compare_rec(tv a, tv b, bool *ok, int depth, long *budget) {
    *ok = depth <= 500 && --*budget >= 0;
    if (!*ok) return 0;
    if (tv_is_number(a) && tv_is_number(b)) {
        if (a.t != TV_FLOAT && b.t != TV_FLOAT) {
            int64_t x = tv_as_i(a), y = tv_as_i(b);
            return x < y ? -1 : x > y;
        }
        double x = tv_num(a), y = tv_num(b);
        return x < y ? -1 : x > y;
    }
    if (a.t == TV_STR && b.t == TV_STR) {
        size_t n = a.u.s->len < b.u.s->len ? a.u.s->len : b.u.s->len;
        *budget -= (long)(n / 64);
        int c = memcmp(a.u.s->p, b.u.s->p, n);
        if (c) return c < 0 ? -1 : 1;
        return a.u.s->len < b.u.s->len ? -1 : a.u.s->len > b.u.s->len;
    }
    if (a.t == TV_LIST && b.t == TV_LIST && a.tuple == b.tuple) {
        long n = a.u.l->n < b.u.l->n ? a.u.l->n : b.u.l->n;
        for (long i = 0; i < n; i++) {
            if (equal_rec(a.u.l->v[i], b.u.l->v[i], depth + 1, budget)) continue;
            if (*budget < 0) break;
            return compare_rec(a.u.l->v[i], b.u.l->v[i], ok, depth + 1, budget);
        }
        *ok = *budget >= 0;
        return a.u.l->n < b.u.l->n ? -1 : a.u.l->n > b.u.l->n;
    }
    *ok = false;
    return 0;
}

const char *tv_type_name(tv v) {
    switch (v.t) {
    case TV_UNDEF:
        return "Undefined";
    case TV_NONE:
        return "NoneType";
    case TV_BOOL:
        return "bool";
    case TV_INT:
        return "int";
    case TV_FLOAT:
        return "float";
    case TV_STR:
        return "str";
    case TV_LIST:
        return v.tuple ? "tuple" : "list";
    case TV_DICT:
        return "dict";
    case TV_NS:
        return "Namespace";
    case TV_LOOP:
        return "LoopContext";
    case TV_METHOD:
        return "builtin_function_or_method";
    default:
        return "function";
    }
}

/* ---- buffers and printing ------------------------------------------------- */
void tm_buf_put(tm_state *S, tm_buf *b, const char *p, size_t n) {
    if (n > b->limit || b->n > b->limit - n)
        tm_fail(S, -1, "output or string longer than the limit of %zu bytes", b->limit);
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 256;
        while (cap < b->n + n + 1)
            cap *= 2;
        char *np = tm_alloc(S, cap);
        tm_memcpy(np, b->p, b->n);
        b->p = np;
        b->cap = cap;
    }
    tm_memcpy(b->p + b->n, p, n);
    b->n += n;
    b->p[b->n] = 0;
}

void tm_format_float(char out[32], double f) {
    if (isnan(f)) {
        strcpy(out, "nan");
        return;
    }
    if (isinf(f)) {
        strcpy(out, f < 0 ? "-inf" : "inf");
        return;
    }
    /* The shortest digits that read back as f, as Python's repr finds them. */
    char buf[40];
    int prec;
    for (prec = 1; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*e", prec - 1, f);
        if (strtod(buf, NULL) == f) break;
    }
    /* buf = [-]d[.ddd]e[+-]XX */
    char digits[24];
    int nd = 0, neg = buf[0] == '-';
    const char *p = buf + neg;
    for (; *p && *p != 'e'; p++)
        if (*p >= '0' && *p <= '9') digits[nd++] = *p;
    int exp = atoi(p + 1);
    while (nd > 1 && digits[nd - 1] == '0')
        nd--;
    char *o = out;
    if (neg) *o++ = '-';
    if (exp >= -4 && exp < 16) { /* Python repr: fixed notation in this range */
        if (exp < 0) {
            *o++ = '0', *o++ = '.';
            for (int i = 0; i < -exp - 1; i++)
                *o++ = '0';
            for (int i = 0; i < nd; i++)
                *o++ = digits[i];
        } else {
            for (int i = 0; i <= exp; i++)
                *o++ = i < nd ? digits[i] : '0';
            *o++ = '.';
            if (nd > exp + 1)
                for (int i = exp + 1; i < nd; i++)
                    *o++ = digits[i];
            else
                *o++ = '0';
        }
        *o = 0;
    } else {
        *o++ = digits[0];
        if (nd > 1) {
            *o++ = '.';
            for (int i = 1; i < nd; i++)
                *o++ = digits[i];
        }
        sprintf(o, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    }
}

static void write_repr_str(tm_state *S, tm_buf *b, const tm_str *s) {
    char q = memchr(s->p, '\'', s->len) && !memchr(s->p, '"', s->len) ? '"' : '\'';
    tm_buf_putc(S, b, q);
    size_t run = 0;
    for (size_t i = 0; i < s->len; i++) {
        unsigned char c = (unsigned char)s->p[i];
        const char *esc = NULL;
        char tmp[8];
        if (c == '\\')
            esc = "\\\\";
        else if (c == (unsigned char)q)
            esc = q == '\'' ? "\\'" : "\\\"";
        else if (c == '\n')
            esc = "\\n";
        else if (c == '\r')
            esc = "\\r";
        else if (c == '\t')
            esc = "\\t";
        else if (c < 0x20 || c == 0x7f)
            snprintf(tmp, sizeof tmp, "\\x%02x", c), esc = tmp;
        if (esc) {
            tm_buf_put(S, b, s->p + run, i - run);
            tm_buf_puts(S, b, esc);
            run = i + 1;
        }
    }
    tm_buf_put(S, b, s->p + run, s->len - run);
    tm_buf_putc(S, b, q);
}

static void write_value(tm_state *S, tm_buf *b, tv v, bool repr, int depth) {
    char num[40];
    if (depth > 500) tm_fail(S, -1, "value nested too deeply (or containing itself) to print");
    switch (v.t) {
    case TV_UNDEF:
        if (repr) tm_buf_puts(S, b, "Undefined");
        return;
    case TV_NONE:
        tm_buf_puts(S, b, "None");
        return;
    case TV_BOOL:
        tm_buf_puts(S, b, v.u.b ? "True" : "False");
        return;
    case TV_INT:
        snprintf(num, sizeof num, "%lld", (long long)v.u.i);
        tm_buf_puts(S, b, num);
        return;
    case TV_FLOAT:
        tm_format_float(num, v.u.f);
        tm_buf_puts(S, b, num);
        return;
    case TV_STR:
        if (repr)
            write_repr_str(S, b, v.u.s);
        else
            tm_buf_put(S, b, v.u.s->p, v.u.s->len);
        return;
    case TV_LIST:
        tm_buf_putc(S, b, v.tuple ? '(' : '[');
        for (long i = 0; i < v.u.l->n; i++) {
            if (i) tm_buf_puts(S, b, ", ");
            write_value(S, b, v.u.l->v[i], true, depth + 1);
        }
        if (v.tuple && v.u.l->n == 1) tm_buf_putc(S, b, ',');
        tm_buf_putc(S, b, v.tuple ? ')' : ']');
        return;
    case TV_NS:
    case TV_DICT:
        if (v.t == TV_NS) tm_buf_puts(S, b, "<Namespace ");
        tm_buf_putc(S, b, '{');
        for (long i = 0; i < v.u.d->n; i++) {
            if (i) tm_buf_puts(S, b, ", ");
            write_value(S, b, v.u.d->k[i], true, depth + 1);
            tm_buf_puts(S, b, ": ");
            write_value(S, b, v.u.d->v[i], true, depth + 1);
        }
        tm_buf_putc(S, b, '}');
        if (v.t == TV_NS) tm_buf_putc(S, b, '>');
        return;
    case TV_LOOP:
        tm_buf_puts(S, b, "<LoopContext>");
        return;
    case TV_MACRO:
        tm_buf_puts(S, b, "<Macro>");
        return;
    default:
        tm_buf_puts(S, b, "<built-in function>");
        return;
    }
}

void tv_write_str(tm_state *S, tm_buf *b, tv v) {
    write_value(S, b, v, false, 0);
}
void tv_write_repr(tm_state *S, tm_buf *b, tv v) {
    write_value(S, b, v, true, 0);
}

/* ---- json.dumps ----------------------------------------------------------- */
static void write_json_str(tm_state *S, tm_buf *b, const char *p, size_t n) {
    tm_buf_putc(S, b, '"');
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        if (c >= 0x20 && c != '"' && c != '\\') continue;
        tm_buf_put(S, b, p + run, i - run);
        char tmp[8];
        switch (c) {
        case '"':
            tm_buf_puts(S, b, "\\\"");
            break;
        case '\\':
            tm_buf_puts(S, b, "\\\\");
            break;
        case '\n':
            tm_buf_puts(S, b, "\\n");
            break;
        case '\r':
            tm_buf_puts(S, b, "\\r");
            break;
        case '\t':
            tm_buf_puts(S, b, "\\t");
            break;
        case '\b':
            tm_buf_puts(S, b, "\\b");
            break;
        case '\f':
            tm_buf_puts(S, b, "\\f");
            break;
        default:
            snprintf(tmp, sizeof tmp, "\\u%04x", c);
            tm_buf_puts(S, b, tmp);
        }
        run = i + 1;
    }
    tm_buf_put(S, b, p + run, n - run);
    tm_buf_putc(S, b, '"');
}

typedef struct json_opts {
    int indent;
    const char *indent_str, *item_sep, *key_sep;
    bool sort_keys;
} json_opts;

static void json_newline(tm_state *S, tm_buf *b, const json_opts *o, int level) {
    tm_buf_putc(S, b, '\n');
    for (int i = 0; i < level; i++) {
        if (o->indent_str)
            tm_buf_puts(S, b, o->indent_str);
        else
            for (int k = 0; k < o->indent; k++)
                tm_buf_putc(S, b, ' ');
    }
}

static bool json_key(tm_state *S, tm_buf *b, tv k) {
    char num[40];
    switch (k.t) {
    case TV_STR:
        write_json_str(S, b, k.u.s->p, k.u.s->len);
        return true;
    case TV_INT:
        snprintf(num, sizeof num, "\"%lld\"", (long long)k.u.i);
        break;
    case TV_FLOAT:
        num[0] = '"';
        tm_format_float(num + 1, k.u.f);
        strcat(num, "\"");
        break;
    case TV_BOOL:
        strcpy(num, k.u.b ? "\"true\"" : "\"false\"");
        break;
    case TV_NONE:
        strcpy(num, "\"null\"");
        break;
    default:
        return false;
    }
    tm_buf_puts(S, b, num);
    return true;
}

/* Sorts order[n] (indices into keys) by key, stably: a bottom-up merge sort,
   n log n comparisons however large a dict the client sends. Keys that cannot
   be ordered keep their relative order. */
static void sort_order(tm_state *S, const tv *keys, long *order, long n) {
    long *tmp = tm_alloc(S, (size_t)(n + 1) * sizeof(long));
    for (long w = 1; w < n; w *= 2) {
        for (long lo = 0; lo < n; lo += 2 * w) {
            long mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            long i = lo, j = mid, k = lo;
            while (i < mid || j < hi) {
                bool ok = false;
                bool take_j =
                    j < hi &&
                    (i >= mid || (tv_compare(keys[order[j]], keys[order[i]], &ok) < 0 && ok));
                tmp[k++] = take_j ? order[j++] : order[i++];
            }
        }
        tm_memcpy(order, tmp, (size_t)n * sizeof(long));
    }
}

static bool write_json(tm_state *S, tm_buf *b, tv v, const json_opts *o, int level, tv *bad,
                       int depth) {
    char num[40];
    if (depth > 512) /* as deep as a JSON context may be (interp.c's from_json) */
        tm_fail(S, -1, "tojson: value nested deeper than 512 levels");
    bool pretty = o->indent >= 0 || o->indent_str;
    switch (v.t) {
    case TV_NONE:
        tm_buf_puts(S, b, "null");
        return true;
    case TV_BOOL:
        tm_buf_puts(S, b, v.u.b ? "true" : "false");
        return true;
    case TV_INT:
        snprintf(num, sizeof num, "%lld", (long long)v.u.i);
        tm_buf_puts(S, b, num);
        return true;
    case TV_FLOAT:
        if (isnan(v.u.f))
            tm_buf_puts(S, b, "NaN");
        else if (isinf(v.u.f))
            tm_buf_puts(S, b, v.u.f < 0 ? "-Infinity" : "Infinity");
        else
            tm_format_float(num, v.u.f), tm_buf_puts(S, b, num);
        return true;
    case TV_STR:
        write_json_str(S, b, v.u.s->p, v.u.s->len);
        return true;
    case TV_LIST:
        if (v.u.l->n == 0) {
            tm_buf_puts(S, b, "[]");
            return true;
        }
        tm_buf_putc(S, b, '[');
        for (long i = 0; i < v.u.l->n; i++) {
            if (i) tm_buf_puts(S, b, o->item_sep);
            if (pretty) json_newline(S, b, o, level + 1);
            if (!write_json(S, b, v.u.l->v[i], o, level + 1, bad, depth + 1)) return false;
        }
        if (pretty) json_newline(S, b, o, level);
        tm_buf_putc(S, b, ']');
        return true;
    case TV_DICT: {
        tm_dict *d = v.u.d;
        if (d->n == 0) {
            tm_buf_puts(S, b, "{}");
            return true;
        }
        long *order = tm_alloc(S, (size_t)d->n * sizeof(long));
        for (long i = 0; i < d->n; i++)
            order[i] = i;
        if (o->sort_keys) sort_order(S, d->k, order, d->n);
        tm_buf_putc(S, b, '{');
        for (long i = 0; i < d->n; i++) {
            if (i) tm_buf_puts(S, b, o->item_sep);
            if (pretty) json_newline(S, b, o, level + 1);
            if (!json_key(S, b, d->k[order[i]])) {
                *bad = d->k[order[i]];
                return false;
            }
            tm_buf_puts(S, b, o->key_sep);
            if (!write_json(S, b, d->v[order[i]], o, level + 1, bad, depth + 1)) return false;
        }
        if (pretty) json_newline(S, b, o, level);
        tm_buf_putc(S, b, '}');
        return true;
    }
    default:
        *bad = v;
        return false;
    }
}

bool tv_write_json(tm_state *S, tm_buf *b, tv v, int indent, const char *indent_str,
                   const char *item_sep, const char *key_sep, bool sort_keys, tv *bad) {
    bool pretty = indent >= 0 || indent_str;
    json_opts o = {indent, indent_str,
                   item_sep ? item_sep
                   : pretty ? ","
                            : ", ",
                   key_sep ? key_sep : ": ", sort_keys};
    return write_json(S, b, v, &o, 0, bad, 0);
}

/* ---- UTF-8 ---------------------------------------------------------------- */
size_t tm_utf8_count(const char *p, size_t n) {
    size_t c = 0;
    for (size_t i = 0; i < n; i++)
        c += ((unsigned char)p[i] & 0xC0) != 0x80;
    return c;
}

int tm_utf8_decode(const char *s, size_t n, uint32_t *cp) {
    const unsigned char *p = (const unsigned char *)s;
    if (p[0] < 0x80 || n < 2) {
        *cp = p[0];
        return 1;
    }
    if (p[0] < 0xE0) {
        *cp = (uint32_t)(p[0] & 0x1F) << 6 | (p[1] & 0x3F);
        return 2;
    }
    if (p[0] < 0xF0 || n < 4) {
        if (n < 3) {
            *cp = p[0];
            return 1;
        }
        *cp = (uint32_t)(p[0] & 0x0F) << 12 | (uint32_t)(p[1] & 0x3F) << 6 | (p[2] & 0x3F);
        return 3;
    }
    *cp = (uint32_t)(p[0] & 0x07) << 18 | (uint32_t)(p[1] & 0x3F) << 12 |
          (uint32_t)(p[2] & 0x3F) << 6 | (p[3] & 0x3F);
    return 4;
}
