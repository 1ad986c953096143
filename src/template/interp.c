/* The template interpreter: evaluates the tree against a JSON context, with
 * every loop, step, call, byte of output and byte of memory counted against
 * the limits. Also the public entry points of template.h. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "template/tmpl_int.h"
#include "util/utf8.h"

inf_tmpl_limits inf_tmpl_default_limits(void) {
    return (inf_tmpl_limits){.max_iterations = 1000000,
                             .max_steps = 100000000,
                             .max_depth = 64,
                             .max_output = (size_t)16 << 20,
                             .max_memory = (size_t)256 << 20};
}

void tm_charge(tm_rt *R, long pos, size_t bytes) {
    R->steps += 1 + (long)(bytes / 64);
    if (R->steps > R->t->lim.max_steps)
        tm_fail(&R->S, pos, "evaluation step limit of %ld exceeded", R->t->lim.max_steps);
}

/* The steps left before max_steps; the comparisons below spend them as they
   go, so one comparison of two huge (or hugely shared) values stops at the
   limit instead of running for minutes. */
static long steps_left(tm_rt *R) {
    return R->t->lim.max_steps - R->steps;
}
static void spend(tm_rt *R, long pos, long left) {
    R->steps = R->t->lim.max_steps - left;
    tm_charge(R, pos, 0);
}

bool tm_equal(tm_rt *R, tv a, tv b, long pos) {
    long left = steps_left(R);
    bool r = tv_equal_budget(a, b, &left);
    spend(R, pos, left);
    return r;
}

int tm_compare(tm_rt *R, tv a, tv b, bool *ok, long pos) {
    long left = steps_left(R);
    int r = tv_compare_budget(a, b, ok, &left);
    spend(R, pos, left);
    return r;
}

tv *tm_find(tm_rt *R, tm_dict *d, tv key, long pos) {
    long left = steps_left(R);
    tv *r = tm_dict_find_budget(d, key, &left);
    spend(R, pos, left);
    return r;
}

_Noreturn void tm_fail_undef(tm_rt *R, tv v, long pos) {
    tm_fail(&R->S, pos, "%s", v.u.undef ? v.u.undef : "value is undefined");
}

static const char *undef_msg(tm_rt *R, const char *fmt, const char *a, size_t alen, const char *b,
                             size_t blen) {
    size_t n = strlen(fmt) + alen + blen + 1;
    char *m = tm_alloc(&R->S, n);
    snprintf(m, n, fmt, (int)alen, a, (int)blen, b);
    return m;
}

/* ---- variables ------------------------------------------------------------ */
static tv *frame_lookup(tm_rt *R, tm_frame *f, const char *name, size_t len) {
    for (; f; f = f->parent)
        if (f->vars) {
            tv *v = tm_dict_get(f->vars, name, len);
            if (v) return v;
        }
    return tm_dict_get(R->globals, name, len);
}

static void frame_set(tm_rt *R, tm_frame *f, const char *name, size_t len, tv v) {
    if (!f->vars) f->vars = tm_dict_new(&R->S, 4);
    tv *slot = tm_dict_get(f->vars, name, len);
    if (slot)
        *slot = v;
    else
        tm_dict_set(&R->S, f->vars, tv_strn(&R->S, name, len), v);
}

/* ---- attribute and item access -------------------------------------------- */
static tv loop_attr(tm_rt *R, tm_loop *l, const char *name, size_t len, tv self) {
#define IS(s) (len == sizeof(s) - 1 && !memcmp(name, s, len))
    if (IS("index0")) return tv_int(l->index0);
    if (IS("index")) return tv_int(l->index0 + 1);
    if (IS("revindex")) return tv_int(l->length - l->index0);
    if (IS("revindex0")) return tv_int(l->length - l->index0 - 1);
    if (IS("first")) return tv_bool(l->index0 == 0);
    if (IS("last")) return tv_bool(l->index0 == l->length - 1);
    if (IS("length")) return tv_int(l->length);
    if (IS("depth")) return tv_int(1);
    if (IS("depth0")) return tv_int(0);
    if (IS("previtem"))
        return l->index0 > 0 ? l->items[l->index0 - 1] : tv_undef("there is no previous item");
    if (IS("nextitem"))
        return l->index0 + 1 < l->length ? l->items[l->index0 + 1]
                                         : tv_undef("there is no next item");
    if (IS("cycle")) {
        tm_method *m = tm_alloc(&R->S, sizeof *m);
        m->self = self;
        m->id = -1; /* loop.cycle */
        tv r = {.t = TV_METHOD};
        r.u.meth = m;
        return r;
    }
#undef IS
    return tv_undef(undef_msg(R, "'LoopContext' has no attribute '%.*s'%.*s", name, len, "", 0));
}

tv tm_getattr(tm_rt *R, tv v, const char *name, size_t len, long pos) {
    if (v.t == TV_UNDEF) tm_fail_undef(R, v, pos);
    if (v.t == TV_LOOP) return loop_attr(R, v.u.loop, name, len, v);
    int id = tm_method_id(v, name, len);
    if (id >= 0) {
        tm_method *m = tm_alloc(&R->S, sizeof *m);
        m->self = v;
        m->id = id;
        tv r = {.t = TV_METHOD};
        r.u.meth = m;
        return r;
    }
    if (v.t == TV_DICT || v.t == TV_NS) {
        tm_charge(R, pos, (size_t)v.u.d->n * 4); /* lookups are linear */
        tv *x = tm_dict_get(v.u.d, name, len);
        if (x) return *x;
    }
    if (v.t == TV_LIST && v.tuple == 0 &&
        ((len == 6 && !memcmp(name, "append", 6)) || (len == 3 && !memcmp(name, "pop", 3)) ||
         (len == 6 && !memcmp(name, "extend", 6)) || (len == 6 && !memcmp(name, "insert", 6))))
        tm_fail(&R->S, pos, "access to attribute '%.*s' of 'list' object is unsafe", (int)len,
                name);
    const char *tn = v.t == TV_DICT ? "dict object" : v.t == TV_NONE ? "None" : tv_type_name(v);
    if (v.t == TV_STR)
        tn = "str object";
    else if (v.t == TV_LIST)
        tn = v.tuple ? "tuple object" : "list object";
    return tv_undef(undef_msg(R, "'%.*s' has no attribute '%.*s'", tn, strlen(tn), name, len));
}

/* Python's index normalization; false when out of range. */
static bool norm_index(int64_t i, long n, long *out) {
    if (i < 0) i += n;
    if (i < 0 || i >= n) return false;
    *out = (long)i;
    return true;
}

/* Byte offset of code point `cp` in s (cp <= count). */
static size_t cp_offset(const tm_str *s, long cp) {
    size_t i = 0;
    for (long k = 0; k < cp && i < s->len; k++) {
        i++;
        while (i < s->len && ((unsigned char)s->p[i] & 0xC0) == 0x80)
            i++;
    }
    return i;
}

tv tm_getitem(tm_rt *R, tv v, tv key, long pos) {
    if (v.t == TV_UNDEF) tm_fail_undef(R, v, pos);
    if (v.t == TV_DICT || v.t == TV_NS) {
        tv *x = tm_find(R, v.u.d, key, pos);
        if (x) return *x;
    } else if ((v.t == TV_LIST || v.t == TV_STR) && (key.t == TV_INT || key.t == TV_BOOL)) {
        int64_t i = key.t == TV_BOOL ? key.u.b : key.u.i;
        long k;
        if (v.t == TV_LIST) {
            if (norm_index(i, v.u.l->n, &k)) return v.u.l->v[k];
        } else {
            tm_charge(R, pos, v.u.s->len);
            long n = (long)tm_utf8_count(v.u.s->p, v.u.s->len);
            if (norm_index(i, n, &k)) {
                size_t a = cp_offset(v.u.s, k), b = cp_offset(v.u.s, k + 1);
                return tv_strn(&R->S, v.u.s->p + a, b - a);
            }
        }
    }
    if (key.t == TV_STR && v.t != TV_DICT) return tm_getattr(R, v, key.u.s->p, key.u.s->len, pos);
    if (key.t == TV_STR) {
        int id = tm_method_id(v, key.u.s->p, key.u.s->len);
        if (id >= 0) return tm_getattr(R, v, key.u.s->p, key.u.s->len, pos);
        return tv_undef(undef_msg(R, "'dict object' has no attribute '%.*s'%.*s", key.u.s->p,
                                  key.u.s->len, "", 0));
    }
    return tv_undef("no such item");
}

static int64_t slice_arg(tm_rt *R, tv v, int64_t dflt, long pos) {
    if (v.t == TV_UNDEF || v.t == TV_NONE) return dflt;
    if (v.t == TV_INT) return v.u.i;
    if (v.t == TV_BOOL) return v.u.b;
    tm_fail(&R->S, pos, "slice indices must be integers or None, not %s", tv_type_name(v));
}

/* Python slice semantics over n elements: fills the chosen indices. */
static long slice_indices(tm_rt *R, long n, tv start, tv stop, tv step, long **out, long pos) {
    int64_t st = slice_arg(R, step, 1, pos);
    if (st == 0) tm_fail(&R->S, pos, "slice step cannot be zero");
    int64_t lo, hi;
    if (st > 0) {
        lo = slice_arg(R, start, 0, pos);
        hi = slice_arg(R, stop, n, pos);
        if (lo < 0) lo += n;
        if (hi < 0) hi += n;
        lo = lo < 0 ? 0 : lo > n ? n : lo;
        hi = hi < 0 ? 0 : hi > n ? n : hi;
    } else {
        lo = slice_arg(R, start, n - 1, pos);
        hi = slice_arg(R, stop, -1 - (int64_t)n, pos);
        if (lo < 0) lo += n;
        if (hi < 0) hi += n;
        lo = lo < -1 ? -1 : lo > n - 1 ? n - 1 : lo;
        hi = hi < -1 ? -1 : hi > n - 1 ? n - 1 : hi;
    }
    long cnt = 0;
    long *idx = tm_alloc(&R->S, (size_t)(n + 1) * sizeof(long));
    if (st > 0)
        for (int64_t i = lo; i < hi; i += st)
            idx[cnt++] = (long)i;
    else
        for (int64_t i = lo; i > hi; i += st)
            idx[cnt++] = (long)i;
    *out = idx;
    return cnt;
}

static tv do_slice(tm_rt *R, tv v, tv start, tv stop, tv step, long pos) {
    if (v.t == TV_UNDEF) tm_fail_undef(R, v, pos);
    long *idx;
    if (v.t == TV_LIST) {
        long cnt = slice_indices(R, v.u.l->n, start, stop, step, &idx, pos);
        tm_list *l = tm_list_new(&R->S, cnt);
        for (long i = 0; i < cnt; i++)
            l->v[i] = v.u.l->v[idx[i]];
        l->n = cnt;
        tv r = tv_list(l);
        r.tuple = v.tuple;
        return r;
    }
    if (v.t == TV_STR) {
        const tm_str *s = v.u.s;
        tm_charge(R, pos, s->len);
        long n = (long)tm_utf8_count(s->p, s->len);
        size_t *off = tm_alloc(&R->S, (size_t)(n + 1) * sizeof(size_t));
        for (long k = 0, i = 0; k <= n; k++) {
            off[k] = (size_t)i;
            if (k < n) {
                i++;
                while ((size_t)i < s->len && ((unsigned char)s->p[i] & 0xC0) == 0x80)
                    i++;
            }
        }
        long cnt = slice_indices(R, n, start, stop, step, &idx, pos);
        tm_buf b = {.limit = R->t->lim.max_output};
        for (long i = 0; i < cnt; i++)
            tm_buf_put(&R->S, &b, s->p + off[idx[i]], off[idx[i] + 1] - off[idx[i]]);
        return tv_strn(&R->S, b.p ? b.p : "", b.n);
    }
    tm_fail(&R->S, pos, "'%s' object is not subscriptable", tv_type_name(v));
}

const tv *tm_iterate(tm_rt *R, tv v, long *n, long pos) {
    switch (v.t) {
    case TV_UNDEF:
        *n = 0;
        return NULL;
    case TV_LIST:
        *n = v.u.l->n;
        return v.u.l->v;
    case TV_DICT:
        *n = v.u.d->n;
        return v.u.d->k;
    case TV_STR: {
        const tm_str *s = v.u.s;
        tm_charge(R, pos, s->len);
        long cnt = (long)tm_utf8_count(s->p, s->len);
        tv *items = tm_alloc(&R->S, (size_t)(cnt ? cnt : 1) * sizeof(tv));
        size_t i = 0;
        for (long k = 0; k < cnt; k++) {
            size_t st = i++;
            while (i < s->len && ((unsigned char)s->p[i] & 0xC0) == 0x80)
                i++;
            items[k] = tv_strn(&R->S, s->p + st, i - st);
        }
        *n = cnt;
        return items;
    }
    default:
        tm_fail(&R->S, pos, "'%s' object is not iterable", tv_type_name(v));
    }
}

tv tm_to_str(tm_rt *R, tv v) {
    if (v.t == TV_STR) return v;
    tm_buf b = {.limit = R->t->lim.max_output};
    tv_write_str(&R->S, &b, v);
    return tv_strn(&R->S, b.p ? b.p : "", b.n);
}

/* ---- expressions ---------------------------------------------------------- */
static tv eval(tm_rt *R, tm_frame *f, const tm_node *n);
static int exec_body(tm_rt *R, tm_frame *f, const tm_nodes *body);

static void eval_args(tm_rt *R, tm_frame *f, const tm_node *n, tm_args *a) {
    a->n = (int)n->args.n;
    a->n_kw = (int)n->kwargs.n;
    a->v = tm_alloc(&R->S, (size_t)(a->n + 1) * sizeof(tv));
    a->kw = tm_alloc(&R->S, (size_t)(a->n_kw + 1) * sizeof(char *));
    a->kv = tm_alloc(&R->S, (size_t)(a->n_kw + 1) * sizeof(tv));
    for (int i = 0; i < a->n; i++)
        a->v[i] = eval(R, f, n->args.v[i]);
    for (int i = 0; i < a->n_kw; i++) {
        const tm_node *k = n->kwargs.v[i];
        char *name = tm_alloc(&R->S, k->name_len + 1);
        tm_memcpy(name, k->name, k->name_len);
        a->kw[i] = name;
        a->kv[i] = eval(R, f, k->a);
    }
}

static tv call_macro(tm_rt *R, const tm_node *m, tm_args *a, long pos) {
    if (R->depth >= R->t->lim.max_depth)
        tm_fail(&R->S, pos, "macro calls nested deeper than %d", R->t->lim.max_depth);
    if (a->n > m->args.n)
        tm_fail(&R->S, pos, "macro '%.*s' takes not more than %ld argument(s)", (int)m->name_len,
                m->name, m->args.n);
    tm_frame fr = {R->root, NULL};
    for (long i = 0; i < m->args.n; i++) {
        const tm_node *p = m->args.v[i];
        tv v = tv_undef(undef_msg(R, "'%.*s' is undefined%.*s", p->name, p->name_len, "", 0));
        bool set = false;
        if (i < a->n) v = a->v[i], set = true;
        for (int k = 0; k < a->n_kw; k++)
            if (strlen(a->kw[k]) == p->name_len && !memcmp(a->kw[k], p->name, p->name_len)) {
                if (set)
                    tm_fail(&R->S, pos, "macro '%.*s' got multiple values for argument '%s'",
                            (int)m->name_len, m->name, a->kw[k]);
                v = a->kv[k], set = true;
            }
        if (!set && p->a) v = eval(R, &fr, p->a);
        frame_set(R, &fr, p->name, p->name_len, v);
    }
    for (int k = 0; k < a->n_kw; k++) {
        bool known = false;
        for (long i = 0; i < m->args.n; i++)
            if (strlen(a->kw[k]) == m->args.v[i]->name_len &&
                !memcmp(a->kw[k], m->args.v[i]->name, m->args.v[i]->name_len))
                known = true;
        if (!known)
            tm_fail(&R->S, pos, "macro '%.*s' takes no keyword argument '%s'", (int)m->name_len,
                    m->name, a->kw[k]);
    }
    tm_buf buf = {.limit = R->t->lim.max_output};
    tm_buf *saved = R->out;
    R->out = &buf;
    R->depth++;
    exec_body(R, &fr, &m->body);
    R->depth--;
    R->out = saved;
    return tv_strn(&R->S, buf.p ? buf.p : "", buf.n);
}

static tv eval_call(tm_rt *R, tm_frame *f, const tm_node *n) {
    tv callee = eval(R, f, n->a);
    tm_args a;
    eval_args(R, f, n, &a);
    switch (callee.t) {
    case TV_UNDEF:
        tm_fail_undef(R, callee, n->pos);
    case TV_FUNC:
        return tm_call_func(R, (int)callee.u.i, &a, n->pos);
    case TV_MACRO:
        return call_macro(R, callee.u.macro, &a, n->pos);
    case TV_METHOD:
        return tm_call_method(R, callee.u.meth, &a, n->pos);
    default:
        tm_fail(&R->S, n->pos, "'%s' object is not callable", tv_type_name(callee));
    }
}

static tv arith(tm_rt *R, int op, tv a, tv b, long pos) {
    if (a.t == TV_UNDEF) tm_fail_undef(R, a, pos);
    if (b.t == TV_UNDEF) tm_fail_undef(R, b, pos);
    if (tv_is_number(a) && tv_is_number(b)) {
        bool fl = a.t == TV_FLOAT || b.t == TV_FLOAT;
        if (!fl) {
            int64_t x = a.t == TV_BOOL ? a.u.b : a.u.i, y = b.t == TV_BOOL ? b.u.b : b.u.i, r;
            switch (op) {
            case OP_ADD:
                if (__builtin_add_overflow(x, y, &r)) goto overflow;
                return tv_int(r);
            case OP_SUB:
                if (__builtin_sub_overflow(x, y, &r)) goto overflow;
                return tv_int(r);
            case OP_MUL:
                if (__builtin_mul_overflow(x, y, &r)) goto overflow;
                return tv_int(r);
            case OP_DIV:
                if (y == 0) tm_fail(&R->S, pos, "division by zero");
                return tv_float((double)x / (double)y);
            case OP_FLOORDIV:
            case OP_MOD: {
                if (y == 0) tm_fail(&R->S, pos, "integer division or modulo by zero");
                if (x == INT64_MIN && y == -1) goto overflow;
                int64_t q = x / y, m = x % y;
                if (m != 0 && ((m < 0) != (y < 0))) q--, m += y;
                return tv_int(op == OP_MOD ? m : q);
            }
            case OP_POW: {
                if (y < 0) return tv_float(pow((double)x, (double)y));
                int64_t acc = 1;
                for (int64_t k = 0; k < y; k++) {
                    if (__builtin_mul_overflow(acc, x, &acc)) goto overflow;
                    if (acc == 0 || acc == 1) break;
                    if (acc == -1) {
                        acc = (y - k - 1) % 2 ? -acc : acc;
                        break;
                    }
                }
                return tv_int(acc);
            }
            }
        }
        double x = tv_num(a), y = tv_num(b);
        switch (op) {
        case OP_ADD:
            return tv_float(x + y);
        case OP_SUB:
            return tv_float(x - y);
        case OP_MUL:
            return tv_float(x * y);
        case OP_DIV:
            if (y == 0) tm_fail(&R->S, pos, "float division by zero");
            return tv_float(x / y);
        case OP_FLOORDIV:
            if (y == 0) tm_fail(&R->S, pos, "float floor division by zero");
            return tv_float(floor(x / y));
        case OP_MOD: {
            if (y == 0) tm_fail(&R->S, pos, "float modulo");
            double m = fmod(x, y);
            if (m != 0 && ((m < 0) != (y < 0))) m += y;
            return tv_float(m);
        }
        case OP_POW:
            return tv_float(pow(x, y));
        }
    }
    if (op == OP_ADD && a.t == TV_STR && b.t == TV_STR) {
        size_t n = a.u.s->len + b.u.s->len;
        if (n > R->t->lim.max_output)
            tm_fail(&R->S, pos, "string longer than the limit of %zu bytes", R->t->lim.max_output);
        tm_charge(R, pos, n);
        tm_str *c = tm_alloc(&R->S, sizeof *c + n + 1);
        tm_memcpy(c->p, a.u.s->p, a.u.s->len);
        tm_memcpy(c->p + a.u.s->len, b.u.s->p, b.u.s->len);
        c->len = n;
        tv r = {.t = TV_STR};
        r.u.s = c;
        return r;
    }
    if (op == OP_ADD && a.t == TV_LIST && b.t == TV_LIST && a.tuple == b.tuple) {
        tm_charge(R, pos, (size_t)(a.u.l->n + b.u.l->n) * 16);
        tm_list *l = tm_list_new(&R->S, a.u.l->n + b.u.l->n);
        tm_memcpy(l->v, a.u.l->v, (size_t)a.u.l->n * sizeof(tv));
        tm_memcpy(l->v + a.u.l->n, b.u.l->v, (size_t)b.u.l->n * sizeof(tv));
        l->n = a.u.l->n + b.u.l->n;
        tv r = tv_list(l);
        r.tuple = a.tuple;
        return r;
    }
    if (op == OP_MUL && ((a.t == TV_STR || a.t == TV_LIST) && (b.t == TV_INT || b.t == TV_BOOL))) {
        int64_t k = b.t == TV_BOOL ? b.u.b : b.u.i;
        if (k < 0) k = 0;
        size_t unit = a.t == TV_STR ? a.u.s->len : (size_t)a.u.l->n * sizeof(tv);
        if (unit && (uint64_t)k > R->t->lim.max_output / unit)
            tm_fail(&R->S, pos, "repetition result longer than the limit of %zu bytes",
                    R->t->lim.max_output);
        tm_charge(R, pos, unit * (size_t)k);
        if (a.t == TV_STR) {
            tv r = tv_strn(&R->S, "", 0);
            r.u.s = tm_alloc(&R->S, sizeof(tm_str) + unit * (size_t)k + 1);
            for (int64_t i = 0; i < k; i++)
                tm_memcpy(r.u.s->p + unit * (size_t)i, a.u.s->p, unit);
            r.u.s->len = unit * (size_t)k;
            return r;
        }
        tm_list *l = tm_list_new(&R->S, a.u.l->n * (long)k);
        for (int64_t i = 0; i < k; i++)
            tm_memcpy(l->v + a.u.l->n * i, a.u.l->v, unit);
        l->n = a.u.l->n * (long)k;
        return tv_list(l);
    }
    if (op == OP_MUL && (b.t == TV_STR || b.t == TV_LIST) && (a.t == TV_INT || a.t == TV_BOOL))
        return arith(R, op, b, a, pos);
    static const char *names[] = {
        [OP_ADD] = "+",       [OP_SUB] = "-", [OP_MUL] = "*", [OP_DIV] = "/",
        [OP_FLOORDIV] = "//", [OP_MOD] = "%", [OP_POW] = "**"};
    tm_fail(&R->S, pos, "unsupported operand type(s) for %s: '%s' and '%s'", names[op],
            tv_type_name(a), tv_type_name(b));
overflow:
    tm_fail(&R->S, pos, "integer overflow");
}

static bool contains(tm_rt *R, tv hay, tv needle, long pos) {
    switch (hay.t) {
    case TV_UNDEF:
        return false;
    case TV_STR:
        if (needle.t != TV_STR)
            tm_fail(&R->S, pos, "'in <string>' requires string as left operand, not %s",
                    tv_type_name(needle));
        tm_charge(R, pos, hay.u.s->len);
        return needle.u.s->len == 0 ||
               memmem(hay.u.s->p, hay.u.s->len, needle.u.s->p, needle.u.s->len);
    case TV_LIST:
        for (long i = 0; i < hay.u.l->n; i++)
            if (tm_equal(R, hay.u.l->v[i], needle, pos)) return true;
        return false;
    case TV_DICT:
        return tm_find(R, hay.u.d, needle, pos) != NULL;
    default:
        tm_fail(&R->S, pos, "argument of type '%s' is not iterable", tv_type_name(hay));
    }
}

static bool compare(tm_rt *R, int op, tv a, tv b, long pos) {
    switch (op) {
    case OP_EQ:
        return tm_equal(R, a, b, pos);
    case OP_NE:
        return !tm_equal(R, a, b, pos);
    case OP_IN:
        return contains(R, b, a, pos);
    case OP_NOTIN:
        return !contains(R, b, a, pos);
    default:
        break;
    }
    if (a.t == TV_UNDEF) tm_fail_undef(R, a, pos);
    if (b.t == TV_UNDEF) tm_fail_undef(R, b, pos);
    bool ok;
    int c = tm_compare(R, a, b, &ok, pos);
    if (!ok) {
        static const char *names[] = {[OP_LT] = "<", [OP_GT] = ">", [OP_LE] = "<=", [OP_GE] = ">="};
        tm_fail(&R->S, pos, "'%s' not supported between instances of '%s' and '%s'", names[op],
                tv_type_name(a), tv_type_name(b));
    }
    switch (op) {
    case OP_LT:
        return c < 0;
    case OP_GT:
        return c > 0;
    case OP_LE:
        return c <= 0;
    default:
        return c >= 0;
    }
}

/* Every recursive path of a render (expressions, statements, macro calls)
   passes through eval or exec_stmt, so this one count bounds the C stack. */
static void enter(tm_rt *R, long pos) {
    if (++R->eval_depth > R->max_eval_depth)
        tm_fail(&R->S, pos, "template evaluation nested deeper than %d levels", R->max_eval_depth);
}

static tv eval_node(tm_rt *R, tm_frame *f, const tm_node *n);
static tv eval(tm_rt *R, tm_frame *f, const tm_node *n) {
    enter(R, n->pos);
    tv r = eval_node(R, f, n);
    R->eval_depth--;
    return r;
}

static tv eval_node(tm_rt *R, tm_frame *f, const tm_node *n) {
    tm_charge(R, n->pos, 0);
    switch (n->kind) {
    case N_CONST:
        return n->value;
    case N_NAME: {
        tv *v = frame_lookup(R, f, n->name, n->name_len);
        if (v) return *v;
        return tv_undef(undef_msg(R, "'%.*s' is undefined%.*s", n->name, n->name_len, "", 0));
    }
    case N_ATTR:
        return tm_getattr(R, eval(R, f, n->a), n->name, n->name_len, n->pos);
    case N_ITEM: {
        tv obj = eval(R, f, n->a);
        return tm_getitem(R, obj, eval(R, f, n->b), n->pos);
    }
    case N_SLICE: {
        tv obj = eval(R, f, n->a);
        tv st = n->b ? eval(R, f, n->b) : tv_none();
        tv sp = n->c ? eval(R, f, n->c) : tv_none();
        tv step = n->args.v[0] ? eval(R, f, n->args.v[0]) : tv_none();
        return do_slice(R, obj, st, sp, step, n->pos);
    }
    case N_CALL:
        return eval_call(R, f, n);
    case N_FILTER: {
        tv v = eval(R, f, n->a);
        tm_args a;
        eval_args(R, f, n, &a);
        return tm_apply_filter(R, n->name, n->name_len, v, &a, n->pos);
    }
    case N_TEST: {
        tv v = eval(R, f, n->a);
        tm_args a;
        eval_args(R, f, n, &a);
        return tv_bool(tm_apply_test(R, n->name, n->name_len, v, &a, n->pos));
    }
    case N_NOT:
        return tv_bool(!tv_truthy(eval(R, f, n->a)));
    case N_NEG:
    case N_POS: {
        tv v = eval(R, f, n->a);
        if (v.t == TV_UNDEF) tm_fail_undef(R, v, n->pos);
        if (!tv_is_number(v))
            tm_fail(&R->S, n->pos, "bad operand type for unary %c: '%s'",
                    n->kind == N_NEG ? '-' : '+', tv_type_name(v));
        if (n->kind == N_POS) return v.t == TV_BOOL ? tv_int(v.u.b) : v;
        if (v.t == TV_FLOAT) return tv_float(-v.u.f);
        int64_t i = v.t == TV_BOOL ? v.u.b : v.u.i;
        if (i == INT64_MIN) tm_fail(&R->S, n->pos, "integer overflow");
        return tv_int(-i);
    }
    case N_BINOP: {
        tv a = eval(R, f, n->a);
        if (n->op == OP_AND) return tv_truthy(a) ? eval(R, f, n->b) : a;
        if (n->op == OP_OR) return tv_truthy(a) ? a : eval(R, f, n->b);
        tv b = eval(R, f, n->b);
        if (n->op == OP_TILDE) {
            tv x = tm_to_str(R, a), y = tm_to_str(R, b);
            return arith(R, OP_ADD, x, y, n->pos);
        }
        return arith(R, n->op, a, b, n->pos);
    }
    case N_COMPARE: {
        tv a = eval(R, f, n->a);
        for (long i = 0; i < n->args.n; i++) {
            tv b = eval(R, f, n->args.v[i]);
            if (!compare(R, n->ops[i], a, b, n->pos)) return tv_bool(false);
            a = b;
        }
        return tv_bool(true);
    }
    case N_COND:
        if (tv_truthy(eval(R, f, n->b))) return eval(R, f, n->a);
        return n->c ? eval(R, f, n->c)
                    : tv_undef("the condition of an inline if was false and it has no else");
    case N_LIST:
    case N_TUPLE: {
        tm_list *l = tm_list_new(&R->S, n->args.n);
        for (long i = 0; i < n->args.n; i++)
            l->v[i] = eval(R, f, n->args.v[i]);
        l->n = n->args.n;
        tv r = tv_list(l);
        r.tuple = n->kind == N_TUPLE;
        return r;
    }
    case N_DICT: {
        tm_dict *d = tm_dict_new(&R->S, n->args.n);
        for (long i = 0; i < n->args.n; i++) {
            tv k = eval(R, f, n->args.v[i]);
            if (k.t == TV_LIST && !k.tuple)
                tm_fail(&R->S, n->args.v[i]->pos, "unhashable type: 'list'");
            if (k.t == TV_DICT || k.t == TV_NS)
                tm_fail(&R->S, n->args.v[i]->pos, "unhashable type: 'dict'");
            tm_dict_set(&R->S, d, k, eval(R, f, n->kwargs.v[i]));
        }
        tv r = {.t = TV_DICT};
        r.u.d = d;
        return r;
    }
    default:
        tm_fail(&R->S, n->pos, "internal error: not an expression");
    }
}

/* ---- statements ----------------------------------------------------------- */
enum { FLOW_NORMAL, FLOW_BREAK, FLOW_CONTINUE };

static void assign_targets(tm_rt *R, tm_frame *f, const tm_nodes *targets, tv v, long pos) {
    if (targets->n == 1) {
        frame_set(R, f, targets->v[0]->name, targets->v[0]->name_len, v);
        return;
    }
    long n;
    const tv *items = tm_iterate(R, v, &n, pos);
    if (n != targets->n)
        tm_fail(&R->S, pos,
                n > targets->n ? "too many values to unpack (expected %ld)"
                               : "not enough values to unpack (expected %ld)",
                targets->n);
    for (long i = 0; i < n; i++)
        frame_set(R, f, targets->v[i]->name, targets->v[i]->name_len, items[i]);
}

static int exec_for(tm_rt *R, tm_frame *f, const tm_node *n) {
    tv seq = eval(R, f, n->a);
    long count;
    const tv *items = tm_iterate(R, seq, &count, n->a->pos);
    if (n->b) { /* `for x in y if cond`: filter first, so loop.length counts what is kept */
        tv *kept = tm_alloc(&R->S, (size_t)(count ? count : 1) * sizeof(tv));
        long k = 0;
        tm_frame tmp = {f, NULL};
        for (long i = 0; i < count; i++) {
            if (++R->iters > R->t->lim.max_iterations)
                tm_fail(&R->S, n->pos, "loop iteration limit of %ld exceeded",
                        R->t->lim.max_iterations);
            assign_targets(R, &tmp, &n->targets, items[i], n->pos);
            if (tv_truthy(eval(R, &tmp, n->b))) kept[k++] = items[i];
        }
        items = kept;
        count = k;
    }
    tm_loop *loop = tm_alloc(&R->S, sizeof *loop);
    loop->length = count;
    loop->items = items;
    tv loopv = {.t = TV_LOOP};
    loopv.u.loop = loop;
    /* Each iteration starts from a fresh scope; the frame's table is reused,
       cut back to the loop's own variables, so long loops do not allocate. */
    tm_frame it = {f, NULL};
    long base = -1;
    for (long i = 0; i < count; i++) {
        if (++R->iters > R->t->lim.max_iterations)
            tm_fail(&R->S, n->pos, "loop iteration limit of %ld exceeded",
                    R->t->lim.max_iterations);
        loop->index0 = i;
        if (it.vars && base >= 0) it.vars->n = base;
        assign_targets(R, &it, &n->targets, items[i], n->pos);
        frame_set(R, &it, "loop", 4, loopv);
        if (base < 0) base = it.vars->n;
        int flow = exec_body(R, &it, &n->body);
        if (flow == FLOW_BREAK) break;
    }
    if (count == 0) return exec_body(R, f, &n->orelse);
    return FLOW_NORMAL;
}

static int exec_stmt(tm_rt *R, tm_frame *f, const tm_node *n) {
    switch (n->kind) {
    case N_TEXT:
        tm_buf_put(&R->S, R->out, n->value.u.s->p, n->value.u.s->len);
        return FLOW_NORMAL;
    case N_OUTPUT:
        tv_write_str(&R->S, R->out, eval(R, f, n->a));
        return FLOW_NORMAL;
    case N_IF:
        if (tv_truthy(eval(R, f, n->a))) return exec_body(R, f, &n->body);
        return exec_body(R, f, &n->orelse);
    case N_FOR:
        return exec_for(R, f, n);
    case N_SET: {
        tv v = eval(R, f, n->a);
        if (n->targets.n == 1 && n->targets.v[0]->kind == N_ATTR) {
            const tm_node *t = n->targets.v[0];
            tv ns = eval(R, f, t->a);
            if (ns.t != TV_NS)
                tm_fail(&R->S, t->pos, "cannot assign attribute on non-namespace object");
            tv *slot = tm_dict_get(ns.u.d, t->name, t->name_len);
            if (slot)
                *slot = v;
            else
                tm_dict_set(&R->S, ns.u.d, tv_strn(&R->S, t->name, t->name_len), v);
            return FLOW_NORMAL;
        }
        for (long i = 0; i < n->targets.n; i++)
            if (n->targets.v[i]->kind != N_NAME)
                tm_fail(&R->S, n->targets.v[i]->pos, "cannot assign to an attribute in a tuple");
        assign_targets(R, f, &n->targets, v, n->pos);
        return FLOW_NORMAL;
    }
    case N_SET_BLOCK:
    case N_FILTER_BLOCK: {
        tm_buf buf = {.limit = R->t->lim.max_output};
        tm_buf *saved = R->out;
        R->out = &buf;
        exec_body(R, f, &n->body);
        R->out = saved;
        tv v = tv_strn(&R->S, buf.p ? buf.p : "", buf.n);
        /* apply the filter chain, innermost first */
        const tm_node *chain[64];
        int k = 0;
        for (const tm_node *x = n->a; x && k < 64; x = x->a)
            chain[k++] = x;
        while (k > 0) {
            const tm_node *x = chain[--k];
            tm_args a;
            eval_args(R, f, x, &a);
            v = tm_apply_filter(R, x->name, x->name_len, v, &a, x->pos);
        }
        if (n->kind == N_SET_BLOCK)
            frame_set(R, f, n->targets.v[0]->name, n->targets.v[0]->name_len, v);
        else
            tv_write_str(&R->S, R->out, v);
        return FLOW_NORMAL;
    }
    case N_MACRO: {
        tv m = {.t = TV_MACRO};
        m.u.macro = n;
        frame_set(R, f, n->name, n->name_len, m);
        return FLOW_NORMAL;
    }
    case N_BREAK:
        return FLOW_BREAK;
    case N_CONTINUE:
        return FLOW_CONTINUE;
    case N_BODY:
        return exec_body(R, f, &n->body);
    default:
        tm_fail(&R->S, n->pos, "internal error: not a statement");
    }
}

static int exec_body(tm_rt *R, tm_frame *f, const tm_nodes *body) {
    for (long i = 0; i < body->n; i++) {
        enter(R, body->v[i]->pos);
        int flow = exec_stmt(R, f, body->v[i]);
        R->eval_depth--;
        if (flow != FLOW_NORMAL) return flow;
    }
    return FLOW_NORMAL;
}

/* ---- JSON in -------------------------------------------------------------- */
static tv from_json(tm_rt *R, const json_t *j, int depth) {
    if (depth > 512) tm_fail(&R->S, -1, "context JSON nested deeper than 512 levels");
    switch (json_typeof(j)) {
    case JSON_OBJECT: {
        tm_dict *d = tm_dict_new(&R->S, (long)json_object_size(j));
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)j, k, v) {
            /* keys are unique in jansson objects: append without searching */
            if (d->n == d->cap)
                tm_dict_set(&R->S, d, tv_cstr(&R->S, k), from_json(R, v, depth + 1));
            else
                d->k[d->n] = tv_cstr(&R->S, k), d->v[d->n] = from_json(R, v, depth + 1), d->n++;
        }
        tv r = {.t = TV_DICT};
        r.u.d = d;
        return r;
    }
    case JSON_ARRAY: {
        size_t n = json_array_size(j);
        tm_list *l = tm_list_new(&R->S, (long)n);
        for (size_t i = 0; i < n; i++)
            l->v[i] = from_json(R, json_array_get(j, i), depth + 1);
        l->n = (long)n;
        return tv_list(l);
    }
    case JSON_STRING:
        return tv_strn(&R->S, json_string_value(j), json_string_length(j));
    case JSON_INTEGER:
        return tv_int(json_integer_value(j));
    case JSON_REAL:
        return tv_float(json_real_value(j));
    case JSON_TRUE:
        return tv_bool(true);
    case JSON_FALSE:
        return tv_bool(false);
    default:
        return tv_none();
    }
}

/* ---- public API ----------------------------------------------------------- */
int inf_tmpl_parse(inf_tmpl **out, const char *source, const inf_tmpl_limits *limits,
                   inf_err *err) {
    *out = NULL;
    size_t n = strlen(source);
    inf_tmpl *t = calloc(1, sizeof *t);
    if (!t) return inf_fail(err, "template: out of memory");
    t->lim = limits ? *limits : inf_tmpl_default_limits();
    /* newlines normalized to "\n" and one trailing newline dropped, as Jinja's lexer does */
    t->src = malloc(n + 1);
    if (!t->src) {
        free(t);
        return inf_fail(err, "template: out of memory");
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (source[i] == '\r') {
            t->src[k++] = '\n';
            if (i + 1 < n && source[i + 1] == '\n') i++;
        } else {
            t->src[k++] = source[i];
        }
    }
    if (k > 0 && t->src[k - 1] == '\n') k--;
    t->src[k] = 0;
    tm_state_init(&t->S, t->lim.max_memory, t->src, err);
    if (setjmp(t->S.jmp)) {
        inf_tmpl_free(t);
        return -1;
    }
    size_t bad = inf_utf8_valid_prefix(t->src, k);
    if (bad < k) {
        tm_fail(&t->S, (long)bad, "invalid UTF-8 in template source");
    }
    long n_tok;
    tm_token *toks = tm_lex(&t->S, t->src, k, &n_tok);
    int depth = t->lim.max_depth > 0 ? t->lim.max_depth : 1;
    t->root = tm_parse(&t->S, toks, n_tok, depth * 4, tm_tree_depth_limit(depth));
    *out = t;
    return 0;
}

void inf_tmpl_free(inf_tmpl *t) {
    if (!t) return;
    tm_state_free(&t->S);
    free(t->src);
    free(t);
}

int inf_tmpl_exec(const inf_tmpl *t, char **out, size_t *out_len, const json_t *context,
                  inf_err *err) {
    *out = NULL;
    if (out_len) *out_len = 0;
    if (context && !json_is_object(context))
        return inf_fail(err, "template: the context must be a JSON object");
    tm_rt *R = calloc(1, sizeof *R);
    if (!R) return inf_fail(err, "template: out of memory");
    tm_state_init(&R->S, t->lim.max_memory, t->src, err);
    R->t = t;
    R->max_eval_depth = tm_tree_depth_limit(t->lim.max_depth) * 2;
    if (setjmp(R->S.jmp)) {
        tm_state_free(&R->S);
        free(R);
        return -1;
    }
    tm_buf buf = {.limit = t->lim.max_output};
    R->out = &buf;
    R->globals = tm_dict_new(&R->S, 16);
    static const char *funcs[TF_COUNT] = {[TF_RANGE] = "range",
                                          [TF_NAMESPACE] = "namespace",
                                          [TF_DICT] = "dict",
                                          [TF_RAISE] = "raise_exception",
                                          [TF_STRFTIME] = "strftime_now"};
    for (int i = 0; i < TF_COUNT; i++) {
        tv fn = {.t = TV_FUNC};
        fn.u.i = i;
        tm_dict_set(&R->S, R->globals, tv_cstr(&R->S, funcs[i]), fn);
    }
    if (context) {
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)context, k, v)
            tm_dict_set(&R->S, R->globals, tv_cstr(&R->S, k), from_json(R, v, 0));
    }
    tm_frame root = {NULL, NULL};
    R->root = &root;
    exec_body(R, &root, &t->root->body);
    char *s = malloc(buf.n + 1);
    if (!s) {
        tm_state_free(&R->S);
        free(R);
        return inf_fail(err, "template: out of memory");
    }
    tm_memcpy(s, buf.p, buf.n);
    s[buf.n] = 0;
    *out = s;
    if (out_len) *out_len = buf.n;
    tm_state_free(&R->S);
    free(R);
    return 0;
}

int inf_tmpl_render(char **out, size_t *out_len, const char *source, const json_t *context,
                    const inf_tmpl_limits *limits, inf_err *err) {
    *out = NULL;
    inf_tmpl *t;
    if (inf_tmpl_parse(&t, source, limits, err)) return -1;
    int rc = inf_tmpl_exec(t, out, out_len, context, err);
    inf_tmpl_free(t);
    return rc;
}

int inf_chat_render(char **out, const char *source, const json_t *messages, const json_t *tools,
                    bool add_generation_prompt, const json_t *extra_kwargs, inf_err *err) {
    *out = NULL;
    if (!json_is_array(messages))
        return inf_fail(err, "chat template: messages must be a JSON array");
    if (extra_kwargs && !json_is_object(extra_kwargs))
        return inf_fail(err, "chat template: extra arguments must be a JSON object");
    json_t *ctx = json_object();
    if (!ctx) return inf_fail(err, "chat template: out of memory");
    json_object_set(ctx, "messages", (json_t *)messages);
    /* as transformers' apply_chat_template: tools and documents are always
       passed, None when absent */
    json_object_set_new(ctx, "tools", tools ? json_incref((json_t *)tools) : json_null());
    json_object_set_new(ctx, "documents", json_null());
    json_object_set_new(ctx, "add_generation_prompt", json_boolean(add_generation_prompt));
    if (extra_kwargs) json_object_update(ctx, (json_t *)extra_kwargs);
    int rc = inf_tmpl_render(out, NULL, source, ctx, NULL, err);
    json_decref(ctx);
    return rc;
}
