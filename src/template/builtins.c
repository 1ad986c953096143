/* Builtins of the template language: string and dict methods, filters,
 * tests and the global functions (range, namespace, dict, raise_exception,
 * strftime_now), each following Python / Jinja2 semantics. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <utf8proc.h>

#include "template/tmpl_int.h"
#include "util/utf8.h"

#define S_ (&R->S)

/* ---- arguments ------------------------------------------------------------ */
/* Argument i by position or by keyword name; NULL when absent. */
static tv *arg(tm_args *a, int i, const char *name) {
    if (i >= 0 && i < a->n) return &a->v[i];
    for (int k = 0; k < a->n_kw; k++)
        if (name && !strcmp(a->kw[k], name)) return &a->kv[k];
    return NULL;
}

static tm_str *str_arg(tm_rt *R, tv *v, const char *what, long pos) {
    if (!v || v->t != TV_STR)
        tm_fail(S_, pos, "%s expects a string argument, got %s", what,
                v ? tv_type_name(*v) : "nothing");
    return v->u.s;
}

static int64_t int_arg(tm_rt *R, tv *v, int64_t dflt, const char *what, long pos) {
    if (!v || v->t == TV_NONE) return dflt;
    if (v->t == TV_INT) return v->u.i;
    if (v->t == TV_BOOL) return v->u.b;
    tm_fail(S_, pos, "%s expects an integer argument, got %s", what, tv_type_name(*v));
}

static tv str_val(tm_rt *R, const char *p, size_t n) {
    return tv_strn(S_, p, n);
}

/* ---- whitespace and case -------------------------------------------------- */
static bool is_ws_cp(uint32_t c) {
    return c == ' ' || (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F) || c == 0x85 ||
           c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
           c == 0x202F || c == 0x205F || c == 0x3000;
}

static bool in_chars(uint32_t c, const tm_str *chars) {
    for (size_t i = 0; i < chars->len;) {
        uint32_t d;
        i += (size_t)tm_utf8_decode(chars->p + i, chars->len - i, &d);
        if (c == d) return true;
    }
    return false;
}

/* strip/lstrip/rstrip with Python semantics: chars NULL = whitespace. */
static tv do_strip(tm_rt *R, const tm_str *s, const tm_str *chars, bool left, bool right) {
    size_t a = 0, b = s->len;
    if (left)
        while (a < b) {
            uint32_t c;
            int k = tm_utf8_decode(s->p + a, b - a, &c);
            if (chars ? !in_chars(c, chars) : !is_ws_cp(c)) break;
            a += (size_t)k;
        }
    if (right)
        while (b > a) {
            size_t st = b - 1;
            while (st > a && ((unsigned char)s->p[st] & 0xC0) == 0x80)
                st--;
            uint32_t c;
            tm_utf8_decode(s->p + st, b - st, &c);
            if (chars ? !in_chars(c, chars) : !is_ws_cp(c)) break;
            b = st;
        }
    return str_val(R, s->p + a, b - a);
}

enum { CASE_UPPER, CASE_LOWER, CASE_CAPITALIZE, CASE_TITLE };
static tv do_case(tm_rt *R, const tm_str *s, int mode) {
    tm_buf b = {.limit = R->t->lim.max_output};
    bool prev_cased = false, first = true;
    for (size_t i = 0; i < s->len;) {
        uint32_t c;
        i += (size_t)tm_utf8_decode(s->p + i, s->len - i, &c);
        uint32_t o = c;
        switch (mode) {
        case CASE_UPPER:
            o = (uint32_t)utf8proc_toupper((utf8proc_int32_t)c);
            break;
        case CASE_LOWER:
            o = (uint32_t)utf8proc_tolower((utf8proc_int32_t)c);
            break;
        case CASE_CAPITALIZE:
            o = (uint32_t)(first ? utf8proc_totitle((utf8proc_int32_t)c)
                                 : utf8proc_tolower((utf8proc_int32_t)c));
            break;
        case CASE_TITLE: {
            o = (uint32_t)(prev_cased ? utf8proc_tolower((utf8proc_int32_t)c)
                                      : utf8proc_totitle((utf8proc_int32_t)c));
            utf8proc_category_t cat = utf8proc_category((utf8proc_int32_t)c);
            prev_cased = cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LL ||
                         cat == UTF8PROC_CATEGORY_LT;
            break;
        }
        }
        first = false;
        char enc[4];
        tm_buf_put(S_, &b, enc, (size_t)inf_utf8_encode(enc, o));
    }
    return str_val(R, b.p ? b.p : "", b.n);
}

/* ---- string helpers ------------------------------------------------------- */
static tv do_split(tm_rt *R, const tm_str *s, const tm_str *sep, int64_t maxsplit, long pos) {
    tm_list *l = tm_list_new(S_, 8);
    tm_charge(R, pos, s->len);
    if (sep) {
        if (sep->len == 0) tm_fail(S_, pos, "empty separator");
        size_t i = 0;
        for (;;) {
            const char *hit =
                maxsplit-- != 0 ? memmem(s->p + i, s->len - i, sep->p, sep->len) : NULL;
            if (!hit) {
                tm_list_push(S_, l, str_val(R, s->p + i, s->len - i));
                break;
            }
            tm_list_push(S_, l, str_val(R, s->p + i, (size_t)(hit - (s->p + i))));
            i = (size_t)(hit - s->p) + sep->len;
        }
        return tv_list(l);
    }
    /* runs of whitespace; no empty strings */
    size_t i = 0;
    for (;;) {
        while (i < s->len) {
            uint32_t c;
            int k = tm_utf8_decode(s->p + i, s->len - i, &c);
            if (!is_ws_cp(c)) break;
            i += (size_t)k;
        }
        if (i >= s->len) break;
        if (maxsplit-- == 0) {
            /* the remainder, with trailing whitespace stripped as Python does */
            tv tail = str_val(R, s->p + i, s->len - i);
            tm_list_push(S_, l, do_strip(R, tail.u.s, NULL, false, true));
            break;
        }
        size_t st = i;
        while (i < s->len) {
            uint32_t c;
            int k = tm_utf8_decode(s->p + i, s->len - i, &c);
            if (is_ws_cp(c)) break;
            i += (size_t)k;
        }
        tm_list_push(S_, l, str_val(R, s->p + st, i - st));
    }
    return tv_list(l);
}

static tv do_replace(tm_rt *R, const tm_str *s, const tm_str *old, const tm_str *new_,
                     int64_t count, long pos) {
    tm_buf b = {.limit = R->t->lim.max_output};
    tm_charge(R, pos, s->len);
    size_t i = 0;
    if (old->len == 0) { /* Python inserts `new` between every character */
        size_t cp_i = 0;
        while (count != 0) {
            tm_buf_put(S_, &b, new_->p, new_->len);
            count--;
            if (cp_i >= s->len) break;
            size_t st = cp_i++;
            while (cp_i < s->len && ((unsigned char)s->p[cp_i] & 0xC0) == 0x80)
                cp_i++;
            tm_buf_put(S_, &b, s->p + st, cp_i - st);
        }
        tm_buf_put(S_, &b, s->p + cp_i, s->len - cp_i);
        return str_val(R, b.p ? b.p : "", b.n);
    }
    while (count != 0) {
        const char *hit = memmem(s->p + i, s->len - i, old->p, old->len);
        if (!hit) break;
        tm_buf_put(S_, &b, s->p + i, (size_t)(hit - (s->p + i)));
        tm_buf_put(S_, &b, new_->p, new_->len);
        i = (size_t)(hit - s->p) + old->len;
        count--;
        tm_charge(R, pos, new_->len);
    }
    tm_buf_put(S_, &b, s->p + i, s->len - i);
    return str_val(R, b.p ? b.p : "", b.n);
}

static bool str_starts(const tm_str *s, const tm_str *p) {
    return p->len <= s->len && !memcmp(s->p, p->p, p->len);
}
static bool str_ends(const tm_str *s, const tm_str *p) {
    return p->len <= s->len && !memcmp(s->p + s->len - p->len, p->p, p->len);
}

/* ---- methods -------------------------------------------------------------- */
enum {
    M_STARTSWITH,
    M_ENDSWITH,
    M_SPLIT,
    M_RSPLIT_UNUSED,
    M_STRIP,
    M_LSTRIP,
    M_RSTRIP,
    M_REPLACE,
    M_UPPER,
    M_LOWER,
    M_TITLE,
    M_CAPITALIZE,
    M_FIND,
    M_COUNT,
    M_JOIN,
    M_SPLITLINES,
    M_ISSPACE,
    M_ISDIGIT,
    M_ISALPHA,
    M_ISALNUM,
    M_ISUPPER,
    M_ISLOWER,
    M_STR_END,
    M_ITEMS = 100,
    M_KEYS,
    M_VALUES,
    M_GET,
};
static const char *const str_methods[] = {
    [M_STARTSWITH] = "startswith",
    [M_ENDSWITH] = "endswith",
    [M_SPLIT] = "split",
    [M_RSPLIT_UNUSED] = "",
    [M_STRIP] = "strip",
    [M_LSTRIP] = "lstrip",
    [M_RSTRIP] = "rstrip",
    [M_REPLACE] = "replace",
    [M_UPPER] = "upper",
    [M_LOWER] = "lower",
    [M_TITLE] = "title",
    [M_CAPITALIZE] = "capitalize",
    [M_FIND] = "find",
    [M_COUNT] = "count",
    [M_JOIN] = "join",
    [M_SPLITLINES] = "splitlines",
    [M_ISSPACE] = "isspace",
    [M_ISDIGIT] = "isdigit",
    [M_ISALPHA] = "isalpha",
    [M_ISALNUM] = "isalnum",
    [M_ISUPPER] = "isupper",
    [M_ISLOWER] = "islower",
};
static const char *const dict_methods[] = {"items", "keys", "values", "get"};

int tm_method_id(tv self, const char *name, size_t len) {
    if (self.t == TV_STR) {
        for (int i = 0; i < M_STR_END; i++)
            if (strlen(str_methods[i]) == len && len && !memcmp(str_methods[i], name, len))
                return i;
    } else if (self.t == TV_DICT) {
        for (int i = 0; i < 4; i++)
            if (strlen(dict_methods[i]) == len && !memcmp(dict_methods[i], name, len))
                return M_ITEMS + i;
    }
    return -1;
}

static tv dict_items(tm_rt *R, tm_dict *d) {
    tm_list *l = tm_list_new(S_, d->n);
    for (long i = 0; i < d->n; i++) {
        tm_list *pair = tm_list_new(S_, 2);
        pair->v[0] = d->k[i];
        pair->v[1] = d->v[i];
        pair->n = 2;
        tv p = tv_list(pair);
        p.tuple = 1;
        l->v[i] = p;
    }
    l->n = d->n;
    return tv_list(l);
}

static bool str_all(const tm_str *s, int kind) {
    if (s->len == 0) return false;
    for (size_t i = 0; i < s->len;) {
        uint32_t c;
        i += (size_t)tm_utf8_decode(s->p + i, s->len - i, &c);
        utf8proc_category_t cat = utf8proc_category((utf8proc_int32_t)c);
        bool alpha = cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LL ||
                     cat == UTF8PROC_CATEGORY_LT || cat == UTF8PROC_CATEGORY_LM ||
                     cat == UTF8PROC_CATEGORY_LO;
        bool digit = cat == UTF8PROC_CATEGORY_ND;
        bool ok = kind == M_ISSPACE   ? is_ws_cp(c)
                  : kind == M_ISDIGIT ? digit
                  : kind == M_ISALPHA ? alpha
                                      : alpha || digit;
        if (!ok) return false;
    }
    return true;
}

static bool prefix_match(tm_rt *R, const tm_str *s, tv *p, bool end, long pos) {
    if (p && p->t == TV_LIST && p->tuple) {
        for (long i = 0; i < p->u.l->n; i++) {
            tv *x = &p->u.l->v[i];
            if (end ? str_ends(s, str_arg(R, x, "endswith", pos))
                    : str_starts(s, str_arg(R, x, "startswith", pos)))
                return true;
        }
        return false;
    }
    const tm_str *q = str_arg(R, p, end ? "endswith" : "startswith", pos);
    return end ? str_ends(s, q) : str_starts(s, q);
}

tv tm_call_method(tm_rt *R, tm_method *m, tm_args *a, long pos) {
    tv self = m->self;
    if (m->id == -1) { /* loop.cycle(a, b, ...) */
        if (a->n == 0) tm_fail(S_, pos, "no items for cycling given");
        return a->v[self.u.loop->index0 % a->n];
    }
    if (self.t == TV_DICT) {
        tm_dict *d = self.u.d;
        switch (m->id) {
        case M_ITEMS:
            return dict_items(R, d);
        case M_KEYS:
        case M_VALUES: {
            tm_list *l = tm_list_new(S_, d->n);
            tm_memcpy(l->v, m->id == M_KEYS ? d->k : d->v, (size_t)d->n * sizeof(tv));
            l->n = d->n;
            return tv_list(l);
        }
        case M_GET: {
            tv *k = arg(a, 0, NULL);
            if (!k) tm_fail(S_, pos, "get expected at least 1 argument, got 0");
            tv *v = tm_find(R, d, *k, pos);
            if (v) return *v;
            tv *dflt = arg(a, 1, NULL);
            return dflt ? *dflt : tv_none();
        }
        }
    }
    const tm_str *s = self.u.s;
    tm_charge(R, pos, s->len);
    switch (m->id) {
    case M_STARTSWITH:
        return tv_bool(prefix_match(R, s, arg(a, 0, NULL), false, pos));
    case M_ENDSWITH:
        return tv_bool(prefix_match(R, s, arg(a, 0, NULL), true, pos));
    case M_SPLIT: {
        tv *sep = arg(a, 0, "sep");
        return do_split(R, s, sep && sep->t != TV_NONE ? str_arg(R, sep, "split", pos) : NULL,
                        int_arg(R, arg(a, 1, "maxsplit"), -1, "split", pos), pos);
    }
    case M_STRIP:
    case M_LSTRIP:
    case M_RSTRIP: {
        tv *chars = arg(a, 0, NULL);
        const tm_str *cs = chars && chars->t != TV_NONE ? str_arg(R, chars, "strip", pos) : NULL;
        return do_strip(R, s, cs, m->id != M_RSTRIP, m->id != M_LSTRIP);
    }
    case M_REPLACE:
        return do_replace(R, s, str_arg(R, arg(a, 0, NULL), "replace", pos),
                          str_arg(R, arg(a, 1, NULL), "replace", pos),
                          int_arg(R, arg(a, 2, "count"), -1, "replace", pos), pos);
    case M_UPPER:
        return do_case(R, s, CASE_UPPER);
    case M_LOWER:
        return do_case(R, s, CASE_LOWER);
    case M_TITLE:
        return do_case(R, s, CASE_TITLE);
    case M_CAPITALIZE:
        return do_case(R, s, CASE_CAPITALIZE);
    case M_FIND: {
        const tm_str *q = str_arg(R, arg(a, 0, NULL), "find", pos);
        const char *hit = q->len ? memmem(s->p, s->len, q->p, q->len) : s->p;
        return tv_int(hit ? (int64_t)tm_utf8_count(s->p, (size_t)(hit - s->p)) : -1);
    }
    case M_COUNT: {
        const tm_str *q = str_arg(R, arg(a, 0, NULL), "count", pos);
        if (q->len == 0) return tv_int((int64_t)tm_utf8_count(s->p, s->len) + 1);
        int64_t c = 0;
        for (const char *p = s->p; (p = memmem(p, (size_t)(s->p + s->len - p), q->p, q->len));
             p += q->len)
            c++;
        return tv_int(c);
    }
    case M_JOIN: {
        tv *seq = arg(a, 0, NULL);
        if (!seq) tm_fail(S_, pos, "join takes exactly one argument");
        long n;
        const tv *items = tm_iterate(R, *seq, &n, pos);
        tm_buf b = {.limit = R->t->lim.max_output};
        for (long i = 0; i < n; i++) {
            if (i) tm_buf_put(S_, &b, s->p, s->len);
            if (items[i].t != TV_STR)
                tm_fail(S_, pos, "sequence item %ld: expected str instance, %s found", i,
                        tv_type_name(items[i]));
            tm_buf_put(S_, &b, items[i].u.s->p, items[i].u.s->len);
        }
        return str_val(R, b.p ? b.p : "", b.n);
    }
    case M_SPLITLINES: {
        tm_list *l = tm_list_new(S_, 8);
        size_t st = 0;
        for (size_t i = 0; i < s->len; i++) {
            if (s->p[i] == '\n' || s->p[i] == '\r') {
                tm_list_push(S_, l, str_val(R, s->p + st, i - st));
                if (s->p[i] == '\r' && i + 1 < s->len && s->p[i + 1] == '\n') i++;
                st = i + 1;
            }
        }
        if (st < s->len) tm_list_push(S_, l, str_val(R, s->p + st, s->len - st));
        return tv_list(l);
    }
    case M_ISUPPER:
    case M_ISLOWER: {
        bool cased = false;
        for (size_t i = 0; i < s->len;) {
            uint32_t c;
            i += (size_t)tm_utf8_decode(s->p + i, s->len - i, &c);
            utf8proc_category_t cat = utf8proc_category((utf8proc_int32_t)c);
            if (cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LT) {
                if (m->id == M_ISLOWER) return tv_bool(false);
                cased = true;
            } else if (cat == UTF8PROC_CATEGORY_LL) {
                if (m->id == M_ISUPPER) return tv_bool(false);
                cased = true;
            }
        }
        return tv_bool(cased);
    }
    default:
        return tv_bool(str_all(s, m->id));
    }
}

/* ---- functions ------------------------------------------------------------ */
tv tm_call_func(tm_rt *R, int id, tm_args *a, long pos) {
    switch (id) {
    case TF_RANGE: {
        if (a->n < 1 || a->n > 3) tm_fail(S_, pos, "range expected 1 to 3 arguments, got %d", a->n);
        int64_t start = 0, stop, step = 1;
        if (a->n == 1)
            stop = int_arg(R, &a->v[0], 0, "range", pos);
        else {
            start = int_arg(R, &a->v[0], 0, "range", pos);
            stop = int_arg(R, &a->v[1], 0, "range", pos);
            if (a->n == 3) step = int_arg(R, &a->v[2], 1, "range", pos);
        }
        if (step == 0) tm_fail(S_, pos, "range() arg 3 must not be zero");
        double cnt_d = ceil(((double)stop - (double)start) / (double)step);
        long cnt = cnt_d > 0 ? (long)fmin(cnt_d, 1e18) : 0;
        if (cnt > R->t->lim.max_iterations)
            tm_fail(S_, pos, "range of %ld items exceeds the iteration limit of %ld", cnt,
                    R->t->lim.max_iterations);
        tm_list *l = tm_list_new(S_, cnt);
        for (long i = 0; i < cnt; i++)
            l->v[i] = tv_int(start + step * i);
        l->n = cnt;
        return tv_list(l);
    }
    case TF_NAMESPACE:
    case TF_DICT: {
        tm_dict *d = tm_dict_new(S_, a->n_kw);
        if (a->n > 1)
            tm_fail(S_, pos, "%s takes at most 1 positional argument",
                    id == TF_DICT ? "dict" : "namespace");
        if (a->n == 1) {
            if (a->v[0].t != TV_DICT && a->v[0].t != TV_NS)
                tm_fail(S_, pos, "expected a mapping argument");
            /* the source's keys are already unique: copy without searching */
            const tm_dict *src = a->v[0].u.d;
            tm_charge(R, pos, (size_t)src->n * 16);
            d = tm_dict_new(S_, src->n + a->n_kw);
            tm_memcpy(d->k, src->k, (size_t)src->n * sizeof(tv));
            tm_memcpy(d->v, src->v, (size_t)src->n * sizeof(tv));
            d->n = src->n;
        }
        for (int i = 0; i < a->n_kw; i++)
            tm_dict_set(S_, d, tv_cstr(S_, a->kw[i]), a->kv[i]);
        tv r = {.t = id == TF_DICT ? TV_DICT : TV_NS};
        r.u.d = d;
        return r;
    }
    case TF_RAISE: {
        tv msg = a->n ? tm_to_str(R, a->v[0]) : tv_cstr(S_, "raise_exception called");
        tm_fail(S_, pos, "%s", msg.u.s->p);
    }
    case TF_STRFTIME: {
        const tm_str *fmt = str_arg(R, arg(a, 0, NULL), "strftime_now", pos);
        time_t now = time(NULL);
        struct tm lt;
        localtime_r(&now, &lt);
        char out[512];
        size_t n = fmt->len < 200 ? strftime(out, sizeof out, fmt->p, &lt) : 0;
        return str_val(R, out, n);
    }
    }
    tm_fail(S_, pos, "internal error: unknown function");
}

const char *const tm_filter_names[] = {
    "default",    "d",     "length",  "count",  "tojson",    "safe",     "string",  "escape",
    "e",          "join",  "first",   "last",   "items",     "list",     "reverse", "sort",
    "min",        "max",   "unique",  "sum",    "map",       "select",   "reject",  "selectattr",
    "rejectattr", "int",   "float",   "abs",    "round",     "trim",     "upper",   "lower",
    "capitalize", "title", "replace", "indent", "wordcount", "dictsort", NULL};
const char *const tm_test_names[] = {
    "defined", "undefined", "none",        "string",      "number",   "integer",  "float",
    "boolean", "true",      "false",       "mapping",     "iterable", "sequence", "callable",
    "odd",     "even",      "divisibleby", "lower",       "upper",    "eq",       "equalto",
    "==",      "sameas",    "ne",          "!=",          "lt",       "lessthan", "<",
    "le",      "<=",        "gt",          "greaterthan", ">",        "ge",       ">=",
    "in",      NULL};

/* ---- tests ---------------------------------------------------------------- */
#define NAME_IS(s) (len == sizeof(s) - 1 && !memcmp(name, s, len))

bool tm_apply_test(tm_rt *R, const char *name, size_t len, tv v, tm_args *a, long pos) {
    if (NAME_IS("defined")) return v.t != TV_UNDEF;
    if (NAME_IS("undefined")) return v.t == TV_UNDEF;
    if (NAME_IS("none")) return v.t == TV_NONE;
    if (NAME_IS("string")) return v.t == TV_STR;
    if (NAME_IS("number")) return tv_is_number(v);
    if (NAME_IS("integer")) return v.t == TV_INT;
    if (NAME_IS("float")) return v.t == TV_FLOAT;
    if (NAME_IS("boolean")) return v.t == TV_BOOL;
    if (NAME_IS("true")) return v.t == TV_BOOL && v.u.b;
    if (NAME_IS("false")) return v.t == TV_BOOL && !v.u.b;
    if (NAME_IS("mapping")) return v.t == TV_DICT;
    if (NAME_IS("iterable"))
        return v.t == TV_STR || v.t == TV_LIST || v.t == TV_DICT || v.t == TV_UNDEF;
    if (NAME_IS("sequence")) return v.t == TV_STR || v.t == TV_LIST || v.t == TV_DICT;
    if (NAME_IS("callable")) return v.t == TV_FUNC || v.t == TV_MACRO || v.t == TV_METHOD;
    if (NAME_IS("odd") || NAME_IS("even") || NAME_IS("divisibleby")) {
        if (v.t != TV_INT && v.t != TV_BOOL)
            tm_fail(S_, pos, "test '%.*s' needs an integer, got %s", (int)len, name,
                    tv_type_name(v));
        int64_t x = v.t == TV_BOOL ? v.u.b : v.u.i;
        if (NAME_IS("odd")) return x % 2 != 0;
        if (NAME_IS("even")) return x % 2 == 0;
        int64_t d = int_arg(R, arg(a, 0, NULL), 0, "divisibleby", pos);
        if (d == 0) tm_fail(S_, pos, "integer division or modulo by zero");
        return x % d == 0;
    }
    if (NAME_IS("lower") || NAME_IS("upper")) {
        if (v.t != TV_STR) return false;
        tv c = do_case(R, v.u.s, NAME_IS("lower") ? CASE_LOWER : CASE_UPPER);
        return tm_equal(R, c, v, pos);
    }
    tv *o = arg(a, 0, NULL);
    if (NAME_IS("eq") || NAME_IS("equalto") || NAME_IS("==") || NAME_IS("sameas") ||
        NAME_IS("ne") || NAME_IS("!=") || NAME_IS("lt") || NAME_IS("lessthan") || NAME_IS("<") ||
        NAME_IS("le") || NAME_IS("<=") || NAME_IS("gt") || NAME_IS("greaterthan") || NAME_IS(">") ||
        NAME_IS("ge") || NAME_IS(">=") || NAME_IS("in")) {
        if (!o) tm_fail(S_, pos, "test '%.*s' needs an argument", (int)len, name);
        if (NAME_IS("eq") || NAME_IS("equalto") || NAME_IS("==")) return tm_equal(R, v, *o, pos);
        if (NAME_IS("sameas")) return tm_equal(R, v, *o, pos) && v.t == o->t;
        if (NAME_IS("ne") || NAME_IS("!=")) return !tm_equal(R, v, *o, pos);
        if (NAME_IS("in")) {
            long n;
            if (o->t == TV_STR) {
                if (v.t != TV_STR)
                    tm_fail(S_, pos, "'in <string>' requires string as left operand");
                tm_charge(R, pos, o->u.s->len);
                return memmem(o->u.s->p, o->u.s->len, v.u.s->p, v.u.s->len) != NULL ||
                       v.u.s->len == 0;
            }
            const tv *items = tm_iterate(R, *o, &n, pos);
            for (long i = 0; i < n; i++)
                if (tm_equal(R, items[i], v, pos)) return true;
            return false;
        }
        bool ok;
        int c = tm_compare(R, v, *o, &ok, pos);
        if (!ok) tm_fail(S_, pos, "cannot compare %s with %s", tv_type_name(v), tv_type_name(*o));
        if (NAME_IS("lt") || NAME_IS("lessthan") || NAME_IS("<")) return c < 0;
        if (NAME_IS("le") || NAME_IS("<=")) return c <= 0;
        if (NAME_IS("gt") || NAME_IS("greaterthan") || NAME_IS(">")) return c > 0;
        return c >= 0;
    }
    tm_fail(S_, pos, "no test named '%.*s'", (int)len, name);
}

/* ---- filters -------------------------------------------------------------- */
/* Jinja's attribute path "a.b.0" looked up item-first, as its filters do. */
static tv attr_path(tm_rt *R, tv v, const tm_str *path, long pos) {
    size_t i = 0;
    while (i <= path->len) {
        const char *dot = memchr(path->p + i, '.', path->len - i);
        size_t e = dot ? (size_t)(dot - path->p) : path->len;
        tv key = str_val(R, path->p + i, e - i);
        bool digits = e > i;
        for (size_t k = i; k < e; k++)
            digits = digits && path->p[k] >= '0' && path->p[k] <= '9';
        if (digits) key = tv_int(strtoll(key.u.s->p, NULL, 10));
        if (v.t == TV_UNDEF) return v;
        v = tm_getitem(R, v, key, pos);
        if (!dot) break;
        i = e + 1;
    }
    return v;
}

static tv make_list(tm_rt *R, const tv *items, long n) {
    tm_list *l = tm_list_new(S_, n);
    tm_memcpy(l->v, items, (size_t)n * sizeof(tv));
    l->n = n;
    return tv_list(l);
}

/* For sort/min/max/unique: the keys are case-folded once beforehand. */
typedef struct sort_ctx {
    tm_rt *R;
    bool fold;
    long pos;
} sort_ctx;

static int sort_cmp(sort_ctx *c, tv a, tv b) {
    bool ok;
    int r = tm_compare(c->R, a, b, &ok, c->pos);
    if (!ok)
        tm_fail(&c->R->S, c->pos, "'<' not supported between instances of '%s' and '%s'",
                tv_type_name(a), tv_type_name(b));
    return r;
}

/* Stable merge sort of items by keys. */
static void merge_sort(sort_ctx *c, tv *items, tv *keys, tv *tmp_i, tv *tmp_k, long n) {
    if (n < 2) return;
    long h = n / 2;
    merge_sort(c, items, keys, tmp_i, tmp_k, h);
    merge_sort(c, items + h, keys + h, tmp_i, tmp_k, n - h);
    long i = 0, j = h, k = 0;
    while (i < h || j < n) {
        if (j >= n || (i < h && sort_cmp(c, keys[i], keys[j]) <= 0))
            tmp_i[k] = items[i], tmp_k[k++] = keys[i++];
        else
            tmp_i[k] = items[j], tmp_k[k++] = keys[j++];
    }
    tm_memcpy(items, tmp_i, (size_t)n * sizeof(tv));
    tm_memcpy(keys, tmp_k, (size_t)n * sizeof(tv));
}

static tv html_escape(tm_rt *R, tv v) {
    tv s = tm_to_str(R, v);
    tm_buf b = {.limit = R->t->lim.max_output};
    for (size_t i = 0; i < s.u.s->len; i++) {
        char c = s.u.s->p[i];
        switch (c) {
        case '&':
            tm_buf_puts(S_, &b, "&amp;");
            break;
        case '<':
            tm_buf_puts(S_, &b, "&lt;");
            break;
        case '>':
            tm_buf_puts(S_, &b, "&gt;");
            break;
        case '"':
            tm_buf_puts(S_, &b, "&#34;");
            break;
        case '\'':
            tm_buf_puts(S_, &b, "&#39;");
            break;
        default:
            tm_buf_putc(S_, &b, c);
        }
    }
    return str_val(R, b.p ? b.p : "", b.n);
}

static tv filter_tojson(tm_rt *R, tv v, tm_args *a, long pos) {
    tv *ind = arg(a, 1, "indent");
    tv *seps = arg(a, 2, "separators");
    tv *sk = arg(a, 3, "sort_keys");
    tv *ea = arg(a, 0, "ensure_ascii");
    int indent = -1;
    const char *indent_str = NULL;
    if (ind && ind->t == TV_STR)
        indent_str = ind->u.s->p;
    else if (ind && ind->t != TV_NONE) {
        int64_t k = int_arg(R, ind, -1, "tojson indent", pos);
        indent = k < 0 ? 0 : k > 64 ? 64 : (int)k;
    }
    const char *item_sep = NULL, *key_sep = NULL;
    if (seps && seps->t != TV_NONE) {
        if (seps->t != TV_LIST || seps->u.l->n != 2)
            tm_fail(S_, pos, "tojson: separators must be a pair of strings");
        item_sep = str_arg(R, &seps->u.l->v[0], "tojson separators", pos)->p;
        key_sep = str_arg(R, &seps->u.l->v[1], "tojson separators", pos)->p;
    }
    tm_buf b = {.limit = R->t->lim.max_output};
    tv bad;
    if (!tv_write_json(S_, &b, v, indent, indent_str, item_sep, key_sep, sk && tv_truthy(*sk),
                       &bad))
        tm_fail(S_, pos, "Object of type %s is not JSON serializable", tv_type_name(bad));
    if (ea && tv_truthy(*ea)) { /* json.dumps(ensure_ascii=True): \uXXXX, surrogate pairs */
        tm_buf e = {.limit = R->t->lim.max_output};
        for (size_t i = 0; i < b.n;) {
            if ((unsigned char)b.p[i] < 0x80) {
                tm_buf_putc(S_, &e, b.p[i++]);
                continue;
            }
            uint32_t c;
            i += (size_t)tm_utf8_decode(b.p + i, b.n - i, &c);
            char tmp[16];
            if (c >= 0x10000)
                snprintf(tmp, sizeof tmp, "\\u%04x\\u%04x",
                         (unsigned)(0xD800 + ((c - 0x10000) >> 10)),
                         (unsigned)(0xDC00 + ((c - 0x10000) & 0x3FF)));
            else
                snprintf(tmp, sizeof tmp, "\\u%04x", (unsigned)c);
            tm_buf_puts(S_, &e, tmp);
        }
        b = e;
    }
    tm_charge(R, pos, b.n);
    return str_val(R, b.p ? b.p : "", b.n);
}

static tv filter_select(tm_rt *R, tv v, tm_args *a, long pos, bool attr, bool reject) {
    long n;
    const tv *items = tm_iterate(R, v, &n, pos);
    tm_list *l = tm_list_new(S_, n);
    int first_test_arg = attr ? 1 : 0;
    const tm_str *path = attr ? str_arg(R, arg(a, 0, NULL), "selectattr", pos) : NULL;
    tv *test = arg(a, first_test_arg, NULL);
    tm_args rest = {a->n > first_test_arg + 1 ? a->n - first_test_arg - 1 : 0, 0,
                    a->v + first_test_arg + 1, NULL, NULL};
    for (long i = 0; i < n; i++) {
        tm_charge(R, pos, 0);
        tv x = attr ? attr_path(R, items[i], path, pos) : items[i];
        bool ok;
        if (test) {
            const tm_str *tn = str_arg(R, test, "select", pos);
            ok = tm_apply_test(R, tn->p, tn->len, x, &rest, pos);
        } else {
            ok = tv_truthy(x);
        }
        if (ok != reject) l->v[l->n++] = items[i];
    }
    return tv_list(l);
}

tv tm_apply_filter(tm_rt *R, const char *name, size_t len, tv v, tm_args *a, long pos) {
    if (NAME_IS("default") || NAME_IS("d")) {
        tv *dflt = arg(a, 0, "default_value");
        tv *boolean = arg(a, 1, "boolean");
        bool use = v.t == TV_UNDEF || (boolean && tv_truthy(*boolean) && !tv_truthy(v));
        return use ? (dflt ? *dflt : str_val(R, "", 0)) : v;
    }
    if (NAME_IS("length") || NAME_IS("count")) {
        switch (v.t) {
        case TV_UNDEF:
            return tv_int(0);
        case TV_STR:
            tm_charge(R, pos, v.u.s->len);
            return tv_int((int64_t)tm_utf8_count(v.u.s->p, v.u.s->len));
        case TV_LIST:
            return tv_int(v.u.l->n);
        case TV_DICT:
            return tv_int(v.u.d->n);
        default:
            tm_fail(S_, pos, "object of type '%s' has no len()", tv_type_name(v));
        }
    }
    if (NAME_IS("tojson")) return filter_tojson(R, v, a, pos);
    if (NAME_IS("safe")) return v;
    if (NAME_IS("string")) return tm_to_str(R, v);
    if (NAME_IS("escape") || NAME_IS("e")) return html_escape(R, v);
    if (NAME_IS("join")) {
        long n;
        const tv *items = tm_iterate(R, v, &n, pos);
        tv *sep = arg(a, 0, "d");
        tv *attr = arg(a, 1, "attribute");
        tv seps = sep ? tm_to_str(R, *sep) : str_val(R, "", 0);
        tm_buf b = {.limit = R->t->lim.max_output};
        for (long i = 0; i < n; i++) {
            if (i) tm_buf_put(S_, &b, seps.u.s->p, seps.u.s->len);
            tv x = attr ? attr_path(R, items[i], str_arg(R, attr, "join attribute", pos), pos)
                        : items[i];
            tv_write_str(S_, &b, x);
        }
        return str_val(R, b.p ? b.p : "", b.n);
    }
    if (NAME_IS("first") || NAME_IS("last")) {
        long n;
        const tv *items = tm_iterate(R, v, &n, pos);
        if (n == 0)
            return tv_undef(NAME_IS("first") ? "No first item, sequence was empty."
                                             : "No last item, sequence was empty.");
        return NAME_IS("first") ? items[0] : items[n - 1];
    }
    if (NAME_IS("items")) {
        if (v.t == TV_UNDEF) return make_list(R, NULL, 0);
        if (v.t != TV_DICT) tm_fail(S_, pos, "can only get item pairs from a mapping");
        return dict_items(R, v.u.d);
    }
    if (NAME_IS("list")) {
        long n;
        const tv *items = tm_iterate(R, v, &n, pos);
        return make_list(R, items, n);
    }
    if (NAME_IS("reverse")) {
        if (v.t == TV_STR) {
            long n;
            const tv *chars = tm_iterate(R, v, &n, pos);
            tm_buf b = {.limit = R->t->lim.max_output};
            for (long i = n - 1; i >= 0; i--)
                tm_buf_put(S_, &b, chars[i].u.s->p, chars[i].u.s->len);
            return str_val(R, b.p ? b.p : "", b.n);
        }
        long n;
        const tv *items = tm_iterate(R, v, &n, pos);
        tm_list *l = tm_list_new(S_, n);
        for (long i = 0; i < n; i++)
            l->v[i] = items[n - 1 - i];
        l->n = n;
        return tv_list(l);
    }
    if (NAME_IS("sort") || NAME_IS("min") || NAME_IS("max") || NAME_IS("unique")) {
        long n;
        const tv *items = tm_iterate(R, v, &n, pos);
        bool is_sort = NAME_IS("sort");
        tv *rev = is_sort ? arg(a, 0, "reverse") : NULL;
        tv *cs = arg(a, is_sort ? 1 : 0, "case_sensitive");
        tv *attr = arg(a, is_sort ? 2 : 1, "attribute");
        sort_ctx c = {R, !(cs && tv_truthy(*cs)), pos};
        tv *keys = tm_alloc(S_, (size_t)(n + 1) * sizeof(tv));
        for (long i = 0; i < n; i++)
            keys[i] =
                attr ? attr_path(R, items[i], str_arg(R, attr, "attribute", pos), pos) : items[i];
        tm_charge(R, pos, (size_t)n * 16);
        if (c.fold)
            for (long i = 0; i < n; i++)
                if (keys[i].t == TV_STR) keys[i] = do_case(R, keys[i].u.s, CASE_LOWER);
        if (NAME_IS("unique")) { /* quadratic, as Jinja's without hashing: each
                                    comparison is charged */
            tm_list *l = tm_list_new(S_, n);
            tv *kept = tm_alloc(S_, (size_t)(n + 1) * sizeof(tv)); /* keys of l */
            for (long i = 0; i < n; i++) {
                bool seen = false;
                for (long k = 0; k < l->n && !seen; k++)
                    seen = tm_equal(R, keys[i], kept[k], pos);
                if (!seen) kept[l->n] = keys[i], l->v[l->n++] = items[i];
            }
            return tv_list(l);
        }
        if (!is_sort) {
            if (n == 0)
                return tv_undef(NAME_IS("min") ? "No aggregated item, sequence was empty."
                                               : "No aggregated item, sequence was empty.");
            long best = 0;
            for (long i = 1; i < n; i++) {
                int r = sort_cmp(&c, keys[i], keys[best]);
                if (NAME_IS("min") ? r < 0 : r > 0) best = i;
            }
            return items[best];
        }
        tv *out = tm_alloc(S_, (size_t)(n + 1) * sizeof(tv));
        tm_memcpy(out, items, (size_t)n * sizeof(tv));
        tv *ti = tm_alloc(S_, (size_t)(n + 1) * sizeof(tv)),
           *tk = tm_alloc(S_, (size_t)(n + 1) * sizeof(tv));
        merge_sort(&c, out, keys, ti, tk, n);
        if (rev &&
            tv_truthy(*rev)) /* Python sorts with reverse=True stably: equal keys keep order */
            for (long i = 0, j = n - 1; i < j; i++, j--) {
                tv t = out[i];
                out[i] = out[j];
                out[j] = t;
            }
        return make_list(R, out, n);
    }
    if (NAME_IS("sum")) {
        long n;
        const tv *items = tm_iterate(R, v, &n, pos);
        tv *attr = arg(a, 0, "attribute");
        tv *start = arg(a, 1, "start");
        tv acc = start ? *start : tv_int(0);
        for (long i = 0; i < n; i++) {
            tv x =
                attr ? attr_path(R, items[i], str_arg(R, attr, "attribute", pos), pos) : items[i];
            if (!tv_is_number(acc) || !tv_is_number(x))
                tm_fail(S_, pos, "sum: items must be numbers");
            acc = acc.t == TV_FLOAT || x.t == TV_FLOAT
                      ? tv_float(tv_num(acc) + tv_num(x))
                      : tv_int((acc.t == TV_BOOL ? acc.u.b : acc.u.i) +
                               (x.t == TV_BOOL ? x.u.b : x.u.i));
        }
        return acc;
    }
    if (NAME_IS("map")) {
        long n;
        const tv *items = tm_iterate(R, v, &n, pos);
        tm_list *l = tm_list_new(S_, n);
        tv *attr = arg(a, -1, "attribute");
        for (long i = 0; i < n; i++) {
            tm_charge(R, pos, 0);
            if (attr) {
                tv x = attr_path(R, items[i], str_arg(R, attr, "map attribute", pos), pos);
                tv *dflt = arg(a, -1, "default");
                l->v[i] = x.t == TV_UNDEF && dflt ? *dflt : x;
            } else {
                const tm_str *fname = str_arg(R, arg(a, 0, NULL), "map", pos);
                tm_args rest = {a->n - 1, a->n_kw, a->v + 1, a->kw, a->kv};
                l->v[i] = tm_apply_filter(R, fname->p, fname->len, items[i], &rest, pos);
            }
        }
        l->n = n;
        return tv_list(l);
    }
    if (NAME_IS("select")) return filter_select(R, v, a, pos, false, false);
    if (NAME_IS("reject")) return filter_select(R, v, a, pos, false, true);
    if (NAME_IS("selectattr")) return filter_select(R, v, a, pos, true, false);
    if (NAME_IS("rejectattr")) return filter_select(R, v, a, pos, true, true);
    if (NAME_IS("int") || NAME_IS("float")) {
        bool is_int = NAME_IS("int");
        tv *dflt = arg(a, 0, "default");
        tv d = dflt ? *dflt : is_int ? tv_int(0) : tv_float(0.0);
        double f;
        switch (v.t) {
        case TV_INT:
            return is_int ? v : tv_float((double)v.u.i);
        case TV_BOOL:
            return is_int ? tv_int(v.u.b) : tv_float(v.u.b);
        case TV_FLOAT:
            if (!is_int) return v;
            if (!isfinite(v.u.f) || fabs(v.u.f) >= 9.2e18) return d;
            return tv_int((int64_t)v.u.f);
        case TV_STR: {
            char *end;
            const char *p = v.u.s->p;
            while (*p == ' ' || *p == '\t' || *p == '\n')
                p++;
            if (is_int) {
                long long x = strtoll(p, &end, 10);
                if (end != p) {
                    while (*end == ' ' || *end == '\t' || *end == '\n')
                        end++;
                    if (!*end) return tv_int(x);
                }
            }
            f = strtod(p, &end);
            if (end == p) return d;
            while (*end == ' ' || *end == '\t' || *end == '\n')
                end++;
            if (*end) return d;
            if (!is_int) return tv_float(f);
            if (!isfinite(f) || fabs(f) >= 9.2e18) return d;
            return tv_int((int64_t)f);
        }
        default:
            return d;
        }
    }
    if (NAME_IS("abs")) {
        if (v.t == TV_FLOAT) return tv_float(fabs(v.u.f));
        if (v.t == TV_INT)
            return v.u.i == INT64_MIN ? tv_float(9.2233720368547758e18)
                                      : tv_int(v.u.i < 0 ? -v.u.i : v.u.i);
        if (v.t == TV_BOOL) return tv_int(v.u.b);
        tm_fail(S_, pos, "bad operand type for abs(): '%s'", tv_type_name(v));
    }
    if (NAME_IS("round")) {
        if (!tv_is_number(v)) tm_fail(S_, pos, "round needs a number, got %s", tv_type_name(v));
        int64_t prec = int_arg(R, arg(a, 0, "precision"), 0, "round", pos);
        tv *method = arg(a, 1, "method");
        const char *m = method ? str_arg(R, method, "round", pos)->p : "common";
        double x = tv_num(v), scale = pow(10.0, (double)prec), r;
        if (!strcmp(m, "common") && prec >= 0 && prec <= 30 && isfinite(x)) {
            /* Python's round: correctly rounded from the exact binary value, ties to even,
               which is what printf does too */
            char buf[400];
            snprintf(buf, sizeof buf, "%.*f", (int)prec, x);
            r = strtod(buf, NULL);
        } else if (!strcmp(m, "common"))
            r = nearbyint(x * scale) / scale;
        else if (!strcmp(m, "floor"))
            r = floor(x * scale) / scale;
        else if (!strcmp(m, "ceil"))
            r = ceil(x * scale) / scale;
        else
            tm_fail(S_, pos, "method must be common, ceil or floor");
        return tv_float(r);
    }
    /* string filters */
    if (NAME_IS("trim") || NAME_IS("upper") || NAME_IS("lower") || NAME_IS("capitalize") ||
        NAME_IS("title") || NAME_IS("replace") || NAME_IS("indent") || NAME_IS("wordcount")) {
        tv s = tm_to_str(R, v);
        tm_charge(R, pos, s.u.s->len);
        if (NAME_IS("trim")) {
            tv *chars = arg(a, 0, "chars");
            return do_strip(R, s.u.s,
                            chars && chars->t != TV_NONE ? str_arg(R, chars, "trim", pos) : NULL,
                            true, true);
        }
        if (NAME_IS("upper")) return do_case(R, s.u.s, CASE_UPPER);
        if (NAME_IS("lower")) return do_case(R, s.u.s, CASE_LOWER);
        if (NAME_IS("capitalize")) return do_case(R, s.u.s, CASE_CAPITALIZE);
        if (NAME_IS("title")) return do_case(R, s.u.s, CASE_TITLE);
        if (NAME_IS("replace"))
            return do_replace(R, s.u.s, str_arg(R, arg(a, 0, "old"), "replace", pos),
                              str_arg(R, arg(a, 1, "new"), "replace", pos),
                              int_arg(R, arg(a, 2, "count"), -1, "replace", pos), pos);
        if (NAME_IS("wordcount")) {
            tv words = do_split(R, s.u.s, NULL, -1, pos);
            return tv_int(words.u.l->n);
        }
        /* indent(width=4, first=False, blank=False) */
        tv *w = arg(a, 0, "width");
        tv *first = arg(a, 1, "first");
        tv *blank = arg(a, 2, "blank");
        tv pad = w && w->t == TV_STR ? *w : str_val(R, "", 0);
        if (!(w && w->t == TV_STR)) {
            int64_t k = int_arg(R, w, 4, "indent", pos);
            if (k < 0) k = 0;
            if (k > 256) k = 256;
            char sp[257];
            memset(sp, ' ', (size_t)k);
            pad = str_val(R, sp, (size_t)k);
        }
        tm_buf b = {.limit = R->t->lim.max_output};
        const tm_str *t = s.u.s;
        size_t st = 0;
        bool first_line = true;
        for (;;) {
            const char *nl = memchr(t->p + st, '\n', t->len - st);
            size_t e = nl ? (size_t)(nl - t->p) : t->len;
            bool is_blank = true;
            for (size_t i = st; i < e; i++)
                is_blank = is_blank && is_ws_cp((unsigned char)t->p[i]);
            bool do_pad = first_line ? (first && tv_truthy(*first))
                                     : (!is_blank || (blank && tv_truthy(*blank)));
            if (do_pad) tm_buf_put(S_, &b, pad.u.s->p, pad.u.s->len);
            tm_buf_put(S_, &b, t->p + st, e - st);
            if (!nl) break;
            tm_buf_putc(S_, &b, '\n');
            st = e + 1;
            first_line = false;
        }
        return str_val(R, b.p ? b.p : "", b.n);
    }
    if (NAME_IS("dictsort")) {
        if (v.t != TV_DICT) tm_fail(S_, pos, "dictsort needs a mapping");
        tv items = dict_items(R, v.u.d);
        long n = items.u.l->n;
        tv *keys = tm_alloc(S_, (size_t)(n + 1) * sizeof(tv));
        tv *cs = arg(a, 0, "case_sensitive");
        tv *by = arg(a, 1, "by");
        tv *rev = arg(a, 2, "reverse");
        bool by_value = by && by->t == TV_STR && !strcmp(by->u.s->p, "value");
        for (long i = 0; i < n; i++)
            keys[i] = items.u.l->v[i].u.l->v[by_value ? 1 : 0];
        sort_ctx c = {R, !(cs && tv_truthy(*cs)), pos};
        if (c.fold)
            for (long i = 0; i < n; i++)
                if (keys[i].t == TV_STR) keys[i] = do_case(R, keys[i].u.s, CASE_LOWER);
        tv *ti = tm_alloc(S_, (size_t)(n + 1) * sizeof(tv)),
           *tk = tm_alloc(S_, (size_t)(n + 1) * sizeof(tv));
        merge_sort(&c, items.u.l->v, keys, ti, tk, n);
        if (rev && tv_truthy(*rev))
            for (long i = 0, j = n - 1; i < j; i++, j--) {
                tv t = items.u.l->v[i];
                items.u.l->v[i] = items.u.l->v[j];
                items.u.l->v[j] = t;
            }
        return items;
    }
    tm_fail(S_, pos, "no filter named '%.*s'", (int)len, name);
}
