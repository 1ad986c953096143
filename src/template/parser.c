/* The template parser: tokens to a tree, with Jinja's operator precedence
 * (lowest first): `a if c else b`, or, and, not, comparisons and `in`, + -,
 * ~, * / // %, **, unary - +, then postfix (.attr, [i], [a:b:c], calls),
 * filters (|f) and tests (is t). Nesting is bounded by max_depth. */
#include <stdlib.h>
#include <string.h>

#include "template/tmpl_int.h"

typedef struct parser {
    tm_state *S;
    const tm_token *t; /* [n] */
    long n, i;
    int depth, max_depth;
} parser;

static tm_node *parse_expression(parser *P, bool with_condexpr);
static tm_node *parse_unary(parser *P, bool with_filter);
static tm_node *parse_primary(parser *P);
static tm_node *parse_postfix(parser *P, tm_node *node);
static tm_node *parse_filter_expr(parser *P, tm_node *node);
static tm_nodes parse_body(parser *P, const char *const *ends, long open_pos);

static const tm_token *cur(parser *P) {
    return &P->t[P->i];
}
static const tm_token *next(parser *P) {
    return &P->t[P->i < P->n - 1 ? P->i++ : P->i];
}

static void enter(parser *P) {
    if (++P->depth > P->max_depth)
        P->depth = 0, tm_fail(P->S, cur(P)->pos, "template nested too deeply (more than %d levels)",
                              P->max_depth);
}
static void leave(parser *P) {
    P->depth--;
}

static bool is_op(parser *P, int op) {
    return cur(P)->type == TK_OP && cur(P)->op == op;
}
static bool is_name(parser *P, const char *name) {
    const tm_token *t = cur(P);
    return t->type == TK_NAME && t->n == strlen(name) && !memcmp(t->p, name, t->n);
}

static const char *describe(const tm_token *t) {
    switch (t->type) {
    case TK_EOF:
        return "end of template";
    case TK_DATA:
        return "template data";
    case TK_VAR_BEGIN:
        return "'{{'";
    case TK_VAR_END:
        return "end of print statement '}}'";
    case TK_BLOCK_BEGIN:
        return "'{%'";
    case TK_BLOCK_END:
        return "end of statement block '%}'";
    case TK_NAME:
        return "name";
    case TK_STRING:
        return "string";
    case TK_INT:
        return "integer";
    case TK_FLOAT:
        return "float";
    default:
        return "operator";
    }
}

static void expect_op(parser *P, int op, const char *what) {
    if (!is_op(P, op)) tm_fail(P->S, cur(P)->pos, "expected '%s', got %s", what, describe(cur(P)));
    next(P);
}

static const tm_token *expect_name(parser *P) {
    if (cur(P)->type != TK_NAME)
        tm_fail(P->S, cur(P)->pos, "expected a name, got %s", describe(cur(P)));
    return next(P);
}

static void expect_block_end(parser *P) {
    if (cur(P)->type != TK_BLOCK_END)
        tm_fail(P->S, cur(P)->pos, "expected end of statement block '%%}', got %s",
                describe(cur(P)));
    next(P);
}

static tm_node *node(parser *P, int kind, long pos) {
    tm_node *n = tm_alloc(P->S, sizeof *n);
    n->kind = (uint8_t)kind;
    n->pos = pos;
    return n;
}

static void add(parser *P, tm_nodes *list, tm_node *n) {
    if ((list->n & (list->n - 1)) == 0) { /* grow at powers of two */
        long cap = list->n ? list->n * 2 : 1;
        tm_node **v = tm_alloc(P->S, (size_t)cap * sizeof *v);
        if (list->n) memcpy(v, list->v, (size_t)list->n * sizeof *v);
        list->v = v;
    }
    list->v[list->n++] = n;
}

static tm_node *binop(parser *P, int op, tm_node *a, tm_node *b, long pos) {
    tm_node *n = node(P, N_BINOP, pos);
    n->op = (uint8_t)op;
    n->a = a;
    n->b = b;
    return n;
}

/* ---- expressions ---------------------------------------------------------- */
static tm_node *parse_or(parser *P);

static tm_node *parse_condexpr(parser *P) {
    enter(P);
    tm_node *e = parse_or(P);
    while (is_name(P, "if")) {
        long pos = next(P)->pos;
        tm_node *n = node(P, N_COND, pos);
        n->a = e;
        n->b = parse_or(P);
        if (is_name(P, "else")) {
            next(P);
            n->c = parse_condexpr(P);
        }
        e = n;
    }
    leave(P);
    return e;
}

static tm_node *parse_and(parser *P);
static tm_node *parse_or(parser *P) {
    tm_node *e = parse_and(P);
    while (is_name(P, "or")) {
        long pos = next(P)->pos;
        e = binop(P, OP_OR, e, parse_and(P), pos);
    }
    return e;
}

static tm_node *parse_not(parser *P);
static tm_node *parse_and(parser *P) {
    tm_node *e = parse_not(P);
    while (is_name(P, "and")) {
        long pos = next(P)->pos;
        e = binop(P, OP_AND, e, parse_not(P), pos);
    }
    return e;
}

static tm_node *parse_compare(parser *P);
static tm_node *parse_not(parser *P) {
    if (is_name(P, "not")) {
        enter(P);
        tm_node *n = node(P, N_NOT, next(P)->pos);
        n->a = parse_not(P);
        leave(P);
        return n;
    }
    return parse_compare(P);
}

static tm_node *parse_math1(parser *P);
static tm_node *parse_compare(parser *P) {
    long pos = cur(P)->pos;
    tm_node *first = parse_math1(P), *cmp = NULL;
    uint8_t ops_buf[64];
    for (;;) {
        int op = 0;
        const tm_token *t = cur(P);
        if (t->type == TK_OP && (t->op == OP_EQ || t->op == OP_NE || t->op == OP_LT ||
                                 t->op == OP_GT || t->op == OP_LE || t->op == OP_GE)) {
            op = t->op;
            next(P);
        } else if (is_name(P, "in")) {
            op = OP_IN;
            next(P);
        } else if (is_name(P, "not") && P->t[P->i + 1].type == TK_NAME && P->t[P->i + 1].n == 2 &&
                   !memcmp(P->t[P->i + 1].p, "in", 2)) {
            op = OP_NOTIN;
            next(P), next(P);
        } else {
            break;
        }
        if (!cmp) {
            cmp = node(P, N_COMPARE, pos);
            cmp->a = first;
        }
        if (cmp->args.n == (long)sizeof ops_buf) tm_fail(P->S, t->pos, "comparison chain too long");
        ops_buf[cmp->args.n] = (uint8_t)op;
        add(P, &cmp->args, parse_math1(P));
    }
    if (!cmp) return first;
    cmp->ops = tm_alloc(P->S, (size_t)cmp->args.n);
    memcpy(cmp->ops, ops_buf, (size_t)cmp->args.n);
    return cmp;
}

static tm_node *parse_concat(parser *P);
static tm_node *parse_math1(parser *P) {
    tm_node *e = parse_concat(P);
    while (is_op(P, OP_ADD) || is_op(P, OP_SUB)) {
        const tm_token *t = next(P);
        e = binop(P, t->op, e, parse_concat(P), t->pos);
    }
    return e;
}

static tm_node *parse_math2(parser *P);
static tm_node *parse_concat(parser *P) {
    tm_node *e = parse_math2(P);
    while (is_op(P, OP_TILDE)) {
        const tm_token *t = next(P);
        e = binop(P, OP_TILDE, e, parse_math2(P), t->pos);
    }
    return e;
}

static tm_node *parse_pow(parser *P);
static tm_node *parse_math2(parser *P) {
    tm_node *e = parse_pow(P);
    while (is_op(P, OP_MUL) || is_op(P, OP_DIV) || is_op(P, OP_FLOORDIV) || is_op(P, OP_MOD)) {
        const tm_token *t = next(P);
        e = binop(P, t->op, e, parse_pow(P), t->pos);
    }
    return e;
}

static tm_node *parse_pow(parser *P) {
    tm_node *e = parse_unary(P, true);
    while (is_op(P, OP_POW)) {
        const tm_token *t = next(P);
        e = binop(P, OP_POW, e, parse_unary(P, true), t->pos);
    }
    return e;
}

static tm_node *parse_unary(parser *P, bool with_filter) {
    enter(P);
    tm_node *n;
    if (is_op(P, OP_SUB) || is_op(P, OP_ADD)) {
        const tm_token *t = next(P);
        n = node(P, t->op == OP_SUB ? N_NEG : N_POS, t->pos);
        n->a = parse_unary(P, false);
    } else {
        n = parse_primary(P);
    }
    n = parse_postfix(P, n);
    if (with_filter) n = parse_filter_expr(P, n);
    leave(P);
    return n;
}

static tm_node *const_node(parser *P, tv v, long pos) {
    tm_node *n = node(P, N_CONST, pos);
    n->value = v;
    return n;
}

/* Parses "(a, b, k=v)" into n->args and n->kwargs; the '(' is current. */
static void parse_call_args(parser *P, tm_node *n) {
    expect_op(P, OP_LPAREN, "(");
    while (!is_op(P, OP_RPAREN)) {
        if (n->args.n || n->kwargs.n) expect_op(P, OP_COMMA, ",");
        if (is_op(P, OP_RPAREN)) break;
        if (cur(P)->type == TK_NAME && P->t[P->i + 1].type == TK_OP &&
            P->t[P->i + 1].op == OP_ASSIGN) {
            const tm_token *name = next(P);
            next(P);
            tm_node *kw = node(P, N_NAME, name->pos);
            kw->name = name->p;
            kw->name_len = name->n;
            kw->a = parse_expression(P, true);
            add(P, &n->kwargs, kw);
        } else {
            if (n->kwargs.n)
                tm_fail(P->S, cur(P)->pos, "positional argument after keyword argument");
            add(P, &n->args, parse_expression(P, true));
        }
    }
    next(P);
}

/* A comma-separated expression list; a tuple when there is a comma. */
static tm_node *parse_tuple(parser *P, bool with_condexpr, bool explicit_parens) {
    long pos = cur(P)->pos;
    tm_node *first = NULL;
    tm_node *tup = NULL;
    for (;;) {
        if (first || tup) {
            if (!is_op(P, OP_COMMA)) break;
            if (!tup) {
                tup = node(P, N_TUPLE, pos);
                add(P, &tup->args, first);
            }
            next(P);
            /* a trailing comma ends the tuple */
            const tm_token *t = cur(P);
            if (t->type == TK_VAR_END || t->type == TK_BLOCK_END ||
                (t->type == TK_OP && t->op == OP_RPAREN) || is_name(P, "in"))
                break;
            add(P, &tup->args, parse_expression(P, with_condexpr));
        } else {
            if (explicit_parens && is_op(P, OP_RPAREN)) return node(P, N_TUPLE, pos); /* () */
            first = parse_expression(P, with_condexpr);
        }
    }
    return tup ? tup : first;
}

static tm_node *parse_primary(parser *P) {
    const tm_token *t = cur(P);
    switch (t->type) {
    case TK_NAME: {
        next(P);
        static const struct {
            const char *s;
            int v;
        } consts[] = {{"true", 1},  {"True", 1}, {"false", 0},
                      {"False", 0}, {"none", 2}, {"None", 2}};
        for (size_t k = 0; k < sizeof consts / sizeof consts[0]; k++)
            if (t->n == strlen(consts[k].s) && !memcmp(t->p, consts[k].s, t->n))
                return const_node(P, consts[k].v == 2 ? tv_none() : tv_bool(consts[k].v), t->pos);
        tm_node *n = node(P, N_NAME, t->pos);
        n->name = t->p;
        n->name_len = t->n;
        return n;
    }
    case TK_STRING: {
        /* adjacent string literals concatenate */
        long pos = t->pos;
        tm_buf b = {.limit = (size_t)1 << 30};
        while (cur(P)->type == TK_STRING) {
            const tm_token *s = next(P);
            tm_buf_put(P->S, &b, s->p, s->n);
        }
        return const_node(P, tv_strn(P->S, b.p ? b.p : "", b.n), pos);
    }
    case TK_INT:
        next(P);
        return const_node(P, tv_int(t->i), t->pos);
    case TK_FLOAT:
        next(P);
        return const_node(P, tv_float(t->f), t->pos);
    case TK_OP:
        if (t->op == OP_LPAREN) {
            next(P);
            enter(P);
            tm_node *n = parse_tuple(P, true, true);
            leave(P);
            expect_op(P, OP_RPAREN, ")");
            return n;
        }
        if (t->op == OP_LBRACKET) {
            next(P);
            enter(P);
            tm_node *n = node(P, N_LIST, t->pos);
            while (!is_op(P, OP_RBRACKET)) {
                if (n->args.n) expect_op(P, OP_COMMA, ",");
                if (is_op(P, OP_RBRACKET)) break;
                add(P, &n->args, parse_expression(P, true));
            }
            next(P);
            leave(P);
            return n;
        }
        if (t->op == OP_LBRACE) {
            next(P);
            enter(P);
            tm_node *n = node(P, N_DICT, t->pos);
            while (!is_op(P, OP_RBRACE)) {
                if (n->args.n) expect_op(P, OP_COMMA, ",");
                if (is_op(P, OP_RBRACE)) break;
                add(P, &n->args, parse_expression(P, true));
                expect_op(P, OP_COLON, ":");
                add(P, &n->kwargs, parse_expression(P, true));
            }
            next(P);
            leave(P);
            return n;
        }
        break;
    default:
        break;
    }
    tm_fail(P->S, t->pos, "unexpected %s", describe(t));
}

static tm_node *parse_subscript(parser *P, tm_node *obj, long pos) {
    /* after '[': index or slice */
    tm_node *parts[3] = {NULL, NULL, NULL};
    int k = 0;
    bool slice = false;
    for (;;) {
        if (!is_op(P, OP_COLON) && !is_op(P, OP_RBRACKET)) parts[k] = parse_expression(P, true);
        if (is_op(P, OP_COLON)) {
            slice = true;
            if (++k > 2) tm_fail(P->S, cur(P)->pos, "too many ':' in slice");
            next(P);
            continue;
        }
        break;
    }
    expect_op(P, OP_RBRACKET, "]");
    if (!slice) {
        if (!parts[0]) tm_fail(P->S, pos, "empty subscript");
        tm_node *n = node(P, N_ITEM, pos);
        n->a = obj;
        n->b = parts[0];
        return n;
    }
    tm_node *n = node(P, N_SLICE, pos);
    n->a = obj;
    n->b = parts[0];
    n->c = parts[1];
    /* the step rides in args */
    add(P, &n->args, parts[2]);
    return n;
}

static tm_node *parse_postfix(parser *P, tm_node *n) {
    for (;;) {
        const tm_token *t = cur(P);
        if (t->type != TK_OP) return n;
        if (t->op == OP_DOT) {
            next(P);
            const tm_token *a = cur(P);
            if (a->type == TK_NAME) {
                next(P);
                tm_node *x = node(P, N_ATTR, t->pos);
                x->a = n;
                x->name = a->p;
                x->name_len = a->n;
                n = x;
            } else if (a->type == TK_INT) {
                next(P);
                tm_node *x = node(P, N_ITEM, t->pos);
                x->a = n;
                x->b = const_node(P, tv_int(a->i), a->pos);
                n = x;
            } else {
                tm_fail(P->S, a->pos, "expected a name after '.', got %s", describe(a));
            }
        } else if (t->op == OP_LBRACKET) {
            next(P);
            enter(P);
            n = parse_subscript(P, n, t->pos);
            leave(P);
        } else if (t->op == OP_LPAREN) {
            tm_node *c = node(P, N_CALL, n->pos); /* errors point at what is called */
            c->a = n;
            enter(P);
            parse_call_args(P, c);
            leave(P);
            n = c;
        } else {
            return n;
        }
    }
}

static void check_known(parser *P, const tm_node *n, const char *const *names, const char *what) {
    for (int k = 0; names[k]; k++)
        if (strlen(names[k]) == n->name_len && !memcmp(names[k], n->name, n->name_len)) return;
    tm_fail(P->S, n->pos, "no %s named '%.*s'", what, (int)n->name_len, n->name);
}

/* name or dotted name of a filter/test */
static void parse_dotted(parser *P, tm_node *n) {
    const tm_token *t = expect_name(P);
    n->name = t->p;
    n->name_len = t->n;
    while (is_op(P, OP_DOT)) { /* a dotted name is kept whole for the error message */
        next(P);
        const tm_token *u = expect_name(P);
        n->name_len = (size_t)(u->p + u->n - n->name);
    }
}

static tm_node *parse_filter_expr(parser *P, tm_node *n) {
    for (;;) {
        if (is_op(P, OP_PIPE)) {
            long pos = next(P)->pos;
            tm_node *f = node(P, N_FILTER, pos);
            f->a = n;
            parse_dotted(P, f);
            check_known(P, f, tm_filter_names, "filter");
            if (is_op(P, OP_LPAREN)) {
                enter(P);
                parse_call_args(P, f);
                leave(P);
            }
            n = f;
        } else if (is_name(P, "is")) {
            long pos = next(P)->pos;
            bool negated = false;
            if (is_name(P, "not")) {
                next(P);
                negated = true;
            }
            tm_node *f = node(P, N_TEST, pos);
            f->a = n;
            parse_dotted(P, f);
            check_known(P, f, tm_test_names, "test");
            const tm_token *t = cur(P);
            if (is_op(P, OP_LPAREN)) {
                enter(P);
                parse_call_args(P, f);
                leave(P);
            } else if ((t->type == TK_NAME || t->type == TK_STRING || t->type == TK_INT ||
                        t->type == TK_FLOAT ||
                        (t->type == TK_OP &&
                         (t->op == OP_LPAREN || t->op == OP_LBRACKET || t->op == OP_LBRACE))) &&
                       !is_name(P, "else") && !is_name(P, "or") && !is_name(P, "and")) {
                if (is_name(P, "is"))
                    tm_fail(P->S, t->pos, "you cannot chain multiple tests with is");
                enter(P);
                add(P, &f->args, parse_postfix(P, parse_primary(P)));
                leave(P);
            }
            if (negated) {
                tm_node *x = node(P, N_NOT, pos);
                x->a = f;
                f = x;
            }
            n = f;
        } else if (is_op(P, OP_LPAREN)) {
            tm_node *c = node(P, N_CALL, cur(P)->pos);
            c->a = n;
            enter(P);
            parse_call_args(P, c);
            leave(P);
            n = c;
        } else {
            return n;
        }
    }
}

static tm_node *parse_expression(parser *P, bool with_condexpr) {
    enter(P);
    tm_node *n = with_condexpr ? parse_condexpr(P) : parse_or(P);
    leave(P);
    return n;
}

/* ---- statements ----------------------------------------------------------- */
/* Assignment targets: name, (name, name), or with allow_attr ns.attr. */
static void parse_targets(parser *P, tm_nodes *out, bool allow_attr) {
    bool paren = is_op(P, OP_LPAREN);
    if (paren) next(P);
    for (;;) {
        const tm_token *t = expect_name(P);
        tm_node *n = node(P, N_NAME, t->pos);
        n->name = t->p;
        n->name_len = t->n;
        if (allow_attr && is_op(P, OP_DOT)) {
            next(P);
            const tm_token *a = expect_name(P);
            tm_node *x = node(P, N_ATTR, a->pos);
            x->a = n;
            x->name = a->p;
            x->name_len = a->n;
            n = x;
        }
        add(P, out, n);
        if (!is_op(P, OP_COMMA)) break;
        next(P);
        if (paren && is_op(P, OP_RPAREN)) break;
    }
    if (paren) expect_op(P, OP_RPAREN, ")");
}

static const char *const END_IF[] = {"elif", "else", "endif", NULL};
static const char *const END_FOR[] = {"else", "endfor", NULL};
static const char *const END_ENDFOR[] = {"endfor", NULL};
static const char *const END_SET[] = {"endset", NULL};
static const char *const END_MACRO[] = {"endmacro", NULL};
static const char *const END_FILTER[] = {"endfilter", NULL};
static const char *const END_GENERATION[] = {"endgeneration", NULL};

static tm_node *parse_if(parser *P, long pos) {
    tm_node *n = node(P, N_IF, pos);
    n->a = parse_tuple(P, true, false);
    expect_block_end(P);
    n->body = parse_body(P, END_IF, pos);
    const tm_token *t = next(P);
    if (t->n == 4 && !memcmp(t->p, "elif", 4)) {
        add(P, &n->orelse, parse_if(P, t->pos));
        return n;
    }
    if (t->n == 4 && !memcmp(t->p, "else", 4)) {
        expect_block_end(P);
        n->orelse = parse_body(P, (const char *const[]){"endif", NULL}, pos);
        next(P);
    }
    expect_block_end(P);
    return n;
}

static tm_node *parse_for(parser *P, long pos) {
    tm_node *n = node(P, N_FOR, pos);
    parse_targets(P, &n->targets, false);
    if (!is_name(P, "in"))
        tm_fail(P->S, cur(P)->pos, "expected 'in' in for loop, got %s", describe(cur(P)));
    next(P);
    n->a = parse_tuple(P, false, false);
    if (is_name(P, "if")) {
        next(P);
        n->b = parse_expression(P, true);
    }
    if (is_name(P, "recursive"))
        tm_fail(P->S, cur(P)->pos, "recursive for loops are not supported");
    expect_block_end(P);
    n->body = parse_body(P, END_FOR, pos);
    const tm_token *t = next(P);
    if (t->n == 4 && !memcmp(t->p, "else", 4)) {
        expect_block_end(P);
        n->orelse = parse_body(P, END_ENDFOR, pos);
        next(P);
    }
    expect_block_end(P);
    return n;
}

static tm_node *parse_set(parser *P, long pos) {
    tm_node *n = node(P, N_SET, pos);
    parse_targets(P, &n->targets, true);
    if (is_op(P, OP_ASSIGN)) {
        next(P);
        n->a = parse_tuple(P, true, false);
        expect_block_end(P);
        return n;
    }
    if (n->targets.n != 1 || n->targets.v[0]->kind != N_NAME)
        tm_fail(P->S, cur(P)->pos, "expected '=' in set");
    n->kind = N_SET_BLOCK;
    if (is_op(P, OP_PIPE)) { /* {% set x | filter %} */
        tm_node *f = parse_filter_expr(P, NULL);
        n->a = f;
    }
    expect_block_end(P);
    n->body = parse_body(P, END_SET, pos);
    next(P);
    expect_block_end(P);
    return n;
}

static tm_node *parse_macro(parser *P, long pos) {
    tm_node *n = node(P, N_MACRO, pos);
    const tm_token *t = expect_name(P);
    n->name = t->p;
    n->name_len = t->n;
    expect_op(P, OP_LPAREN, "(");
    while (!is_op(P, OP_RPAREN)) {
        if (n->args.n) expect_op(P, OP_COMMA, ",");
        if (is_op(P, OP_RPAREN)) break;
        const tm_token *a = expect_name(P);
        tm_node *p = node(P, N_NAME, a->pos);
        p->name = a->p;
        p->name_len = a->n;
        if (is_op(P, OP_ASSIGN)) {
            next(P);
            p->a = parse_expression(P, true);
        } else if (n->args.n && n->args.v[n->args.n - 1]->a) {
            tm_fail(P->S, a->pos, "non-default argument follows default argument");
        }
        add(P, &n->args, p);
    }
    next(P);
    expect_block_end(P);
    n->body = parse_body(P, END_MACRO, pos);
    next(P);
    if (cur(P)->type == TK_NAME) next(P); /* {% endmacro name %} */
    expect_block_end(P);
    return n;
}

static tm_node *parse_statement(parser *P) {
    const tm_token *t = cur(P);
    if (t->type != TK_NAME) tm_fail(P->S, t->pos, "expected a tag name, got %s", describe(t));
    next(P);
#define IS(s) (t->n == sizeof(s) - 1 && !memcmp(t->p, s, sizeof(s) - 1))
    if (IS("if")) return parse_if(P, t->pos);
    if (IS("for")) return parse_for(P, t->pos);
    if (IS("set")) return parse_set(P, t->pos);
    if (IS("macro")) return parse_macro(P, t->pos);
    if (IS("break") || IS("continue")) {
        tm_node *n = node(P, IS("break") ? N_BREAK : N_CONTINUE, t->pos);
        expect_block_end(P);
        return n;
    }
    if (IS("filter")) {
        tm_node *n = node(P, N_FILTER_BLOCK, t->pos);
        P->i--; /* reuse the filter-chain parser: pretend the tag name was a '|' */
        tm_node *f = NULL;
        do {
            next(P);
            tm_node *x = node(P, N_FILTER, cur(P)->pos);
            x->a = f;
            parse_dotted(P, x);
            check_known(P, x, tm_filter_names, "filter");
            if (is_op(P, OP_LPAREN)) parse_call_args(P, x);
            f = x;
        } while (is_op(P, OP_PIPE));
        n->a = f;
        expect_block_end(P);
        n->body = parse_body(P, END_FILTER, t->pos);
        next(P);
        expect_block_end(P);
        return n;
    }
    if (IS("generation")) { /* transformers' assistant-mask marker: renders its body */
        tm_node *n = node(P, N_BODY, t->pos);
        expect_block_end(P);
        n->body = parse_body(P, END_GENERATION, t->pos);
        next(P);
        expect_block_end(P);
        return n;
    }
#undef IS
    tm_fail(P->S, t->pos, "unknown or unsupported tag '%.*s'", (int)t->n, t->p);
}

/* Parses until a block whose name is one of `ends` (left current, after its
 * '{%'); at the end of the template when ends is NULL. */
static tm_nodes parse_body(parser *P, const char *const *ends, long open_pos) {
    tm_nodes body = {0};
    long start = open_pos;
    enter(P);
    for (;;) {
        const tm_token *t = cur(P);
        if (t->type == TK_EOF) {
            if (ends) {
                char want[128] = "";
                for (int k = 0; ends[k]; k++)
                    snprintf(want + strlen(want), sizeof want - strlen(want), "%s'%s'",
                             k ? " or " : "", ends[k]);
                tm_fail(P->S, start, "unexpected end of template: this block needs %s", want);
            }
            break;
        }
        if (t->type == TK_DATA) {
            next(P);
            tm_node *n = node(P, N_TEXT, t->pos);
            n->value = tv_strn(P->S, t->p, t->n);
            add(P, &body, n);
        } else if (t->type == TK_VAR_BEGIN) {
            next(P);
            tm_node *n = node(P, N_OUTPUT, t->pos);
            n->a = parse_tuple(P, true, false);
            if (cur(P)->type != TK_VAR_END)
                tm_fail(P->S, cur(P)->pos, "expected end of print statement '}}', got %s",
                        describe(cur(P)));
            next(P);
            add(P, &body, n);
        } else if (t->type == TK_BLOCK_BEGIN) {
            next(P);
            const tm_token *name = cur(P);
            if (name->type == TK_NAME) {
                if (ends)
                    for (int k = 0; ends[k]; k++)
                        if (name->n == strlen(ends[k]) && !memcmp(name->p, ends[k], name->n)) {
                            leave(P);
                            return body;
                        }
                static const char *const stray[] = {"endif",     "endfor",        "elif",
                                                    "else",      "endset",        "endmacro",
                                                    "endfilter", "endgeneration", "endraw"};
                for (size_t k = 0; k < sizeof stray / sizeof stray[0]; k++)
                    if (name->n == strlen(stray[k]) && !memcmp(name->p, stray[k], name->n))
                        tm_fail(P->S, name->pos, "unexpected '%s' tag", stray[k]);
            }
            add(P, &body, parse_statement(P));
        } else {
            tm_fail(P->S, t->pos, "unexpected %s", describe(t));
        }
    }
    leave(P);
    return body;
}

/* Fails when the tree under n is higher than max; the walk itself recurses at
   most max levels. */
static void check_height(tm_state *S, const tm_node *n, int depth, int max);
static void check_list(tm_state *S, const tm_nodes *l, int depth, int max) {
    for (long i = 0; i < l->n; i++)
        check_height(S, l->v[i], depth, max);
}
static void check_height(tm_state *S, const tm_node *n, int depth, int max) {
    if (!n) return;
    if (depth > max)
        tm_fail(S, n->pos, "expression or statement nested more than %d levels deep", max);
    check_height(S, n->a, depth + 1, max);
    check_height(S, n->b, depth + 1, max);
    check_height(S, n->c, depth + 1, max);
    check_list(S, &n->args, depth + 1, max);
    check_list(S, &n->kwargs, depth + 1, max);
    check_list(S, &n->body, depth + 1, max);
    check_list(S, &n->orelse, depth + 1, max);
    check_list(S, &n->targets, depth + 1, max);
}

tm_node *tm_parse(tm_state *S, const tm_token *toks, long n_tokens, int max_depth, int max_tree) {
    parser P = {S, toks, n_tokens, 0, 0, max_depth};
    tm_node *root = node(&P, N_BODY, 0);
    root->body = parse_body(&P, NULL, 0);
    check_height(S, root, 0, max_tree);
    return root;
}
