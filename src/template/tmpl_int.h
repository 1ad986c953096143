/* Internals of the template interpreter: arena, values, tokens, syntax tree.
 * Not part of the public API (see template.h). */
#ifndef INF_TEMPLATE_TMPL_INT_H
#define INF_TEMPLATE_TMPL_INT_H

#include <setjmp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "template/template.h"

/* ---- arena and error state ------------------------------------------------
 * Everything made while parsing or rendering lives in one arena that is freed
 * at the end; errors longjmp back to the entry point, so no code below has to
 * unwind by hand. */
typedef struct tm_chunk tm_chunk;
typedef struct tm_state {
    tm_chunk *chunks;
    size_t used, limit; /* bytes allocated so far, max_memory */
    jmp_buf jmp;
    inf_err *err;
    const char *src; /* the template source, for line:column */
} tm_state;

void tm_state_init(tm_state *S, size_t limit, const char *src, inf_err *err);
void tm_state_free(tm_state *S);
void *tm_alloc(tm_state *S, size_t n); /* zeroed; longjmps when over the limit */
/* Fails with "template:LINE:COL: message" for byte offset pos (-1: no position). */
_Noreturn void tm_fail(tm_state *S, long pos, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- values --------------------------------------------------------------- */
typedef enum {
    TV_UNDEF,
    TV_NONE,
    TV_BOOL,
    TV_INT,
    TV_FLOAT,
    TV_STR,
    TV_LIST,
    TV_DICT,
    TV_NS,     /* namespace(): a mutable dict with attribute access */
    TV_FUNC,   /* a builtin global function, u.i = TF_* */
    TV_MACRO,  /* u.macro */
    TV_METHOD, /* a bound method, u.meth */
    TV_LOOP,   /* the `loop` variable of a for, u.loop */
} tv_type;

typedef struct tm_str {
    size_t len;
    char p[]; /* len bytes + NUL, valid UTF-8 */
} tm_str;

struct tm_list;
struct tm_dict;
struct tm_node;
struct tm_method;
struct tm_loop;

typedef struct tv {
    uint8_t t;     /* tv_type */
    uint8_t tuple; /* TV_LIST: made as a tuple (prints with parentheses) */
    union {
        bool b;
        int64_t i;
        double f;
        tm_str *s;
        struct tm_list *l;
        struct tm_dict *d; /* TV_DICT and TV_NS */
        const struct tm_node *macro;
        struct tm_method *meth;
        struct tm_loop *loop;
        const char *undef; /* TV_UNDEF: what was missing, for error messages */
    } u;
} tv;

typedef struct tm_list {
    long n, cap;
    tv *v; /* [cap] */
} tm_list;

typedef struct tm_dict {
    long n, cap;
    tv *k, *v; /* [cap] keys and values, in insertion order */
} tm_dict;

typedef struct tm_method {
    tv self;
    int id; /* TM_* method id */
} tm_method;

typedef struct tm_loop {
    long index0, length;
    const tv *items; /* [length] */
} tm_loop;

/* builtin functions */
enum { TF_RANGE, TF_NAMESPACE, TF_DICT, TF_RAISE, TF_STRFTIME, TF_COUNT };

static inline tv tv_undef(const char *what) {
    tv r = {.t = TV_UNDEF};
    r.u.undef = what;
    return r;
}
static inline tv tv_none(void) {
    tv r = {.t = TV_NONE};
    return r;
}
static inline tv tv_bool(bool b) {
    tv r = {.t = TV_BOOL};
    r.u.b = b;
    return r;
}
static inline tv tv_int(int64_t i) {
    tv r = {.t = TV_INT};
    r.u.i = i;
    return r;
}
static inline tv tv_float(double f) {
    tv r = {.t = TV_FLOAT};
    r.u.f = f;
    return r;
}

tv tv_strn(tm_state *S, const char *p, size_t n);
tv tv_cstr(tm_state *S, const char *p);
tm_list *tm_list_new(tm_state *S, long cap);
void tm_list_push(tm_state *S, tm_list *l, tv v);
tv tv_list(tm_list *l);
tm_dict *tm_dict_new(tm_state *S, long cap);
/* Sets key to val (replacing an equal key in place). */
void tm_dict_set(tm_state *S, tm_dict *d, tv key, tv val);
/* Looks up a string key; NULL when absent. */
tv *tm_dict_get(tm_dict *d, const char *key, size_t len);
tv *tm_dict_find(tm_dict *d, tv key);

bool tv_truthy(tv v);
bool tv_equal(tv a, tv b);
/* -1, 0, 1; *ok = false when the two cannot be ordered. */
int tv_compare(tv a, tv b, bool *ok);
/* The same, spending *budget: one per value visited and per 64 bytes
   compared. They stop early once *budget is negative (the caller fails). */
bool tv_equal_budget(tv a, tv b, long *budget);
int tv_compare_budget(tv a, tv b, bool *ok, long *budget);
tv *tm_dict_find_budget(tm_dict *d, tv key, long *budget);
const char *tv_type_name(tv v); /* Python's name: 'str', 'int', 'dict', ... */
bool tv_is_number(tv v);        /* bool, int, float */
double tv_num(tv v);

/* A growable byte buffer in the arena, capped at `cap_limit` bytes. */
typedef struct tm_buf {
    char *p;
    size_t n, cap, limit;
} tm_buf;
void tm_buf_put(tm_state *S, tm_buf *b, const char *p, size_t n);
static inline void tm_buf_puts(tm_state *S, tm_buf *b, const char *p);
static inline void tm_buf_putc(tm_state *S, tm_buf *b, char c) {
    tm_buf_put(S, b, &c, 1);
}
#include <string.h>
static inline void tm_buf_puts(tm_state *S, tm_buf *b, const char *p) {
    tm_buf_put(S, b, p, strlen(p));
}

/* Python str(v) (undefined → "") and repr(v), appended to b. */
void tv_write_str(tm_state *S, tm_buf *b, tv v);
void tv_write_repr(tm_state *S, tm_buf *b, tv v);
/* json.dumps(v, ensure_ascii=False, indent, separators, sort_keys) as
 * transformers' tojson does. indent < 0: no indent; indent_str used when not
 * NULL. item_sep/key_sep NULL: the json.dumps defaults. Returns false with
 * *bad set to the first value that is not serializable. */
bool tv_write_json(tm_state *S, tm_buf *b, tv v, int indent, const char *indent_str,
                   const char *item_sep, const char *key_sep, bool sort_keys, tv *bad);
/* Python repr of a float ("1.0", "1e-05", "0.30000000000000004", "inf"). */
void tm_format_float(char out[32], double f);

/* UTF-8 helpers: number of code points; byte offset of code point i. */
size_t tm_utf8_count(const char *p, size_t n);
/* Decodes one code point at p (valid UTF-8 assumed); returns its byte length. */
int tm_utf8_decode(const char *p, size_t n, uint32_t *cp);

/* memcpy that accepts an empty copy from NULL (an empty list or dict has no
 * storage; memcpy itself requires valid pointers even for 0 bytes). */
static inline void tm_memcpy(void *dst, const void *src, size_t n) {
    if (n) memcpy(dst, src, n);
}

/* ---- tokens --------------------------------------------------------------- */
typedef enum {
    TK_EOF,
    TK_DATA,
    TK_VAR_BEGIN,
    TK_VAR_END,
    TK_BLOCK_BEGIN,
    TK_BLOCK_END,
    TK_NAME,
    TK_STRING,
    TK_INT,
    TK_FLOAT,
    TK_OP,
} tk_type;

/* operators (also the binary operator codes of the tree) */
enum {
    OP_ADD = 1,
    OP_SUB,
    OP_MUL,
    OP_DIV,
    OP_FLOORDIV,
    OP_MOD,
    OP_POW,
    OP_TILDE,
    OP_EQ,
    OP_NE,
    OP_LT,
    OP_GT,
    OP_LE,
    OP_GE,
    OP_ASSIGN,
    OP_DOT,
    OP_COMMA,
    OP_COLON,
    OP_PIPE,
    OP_LPAREN,
    OP_RPAREN,
    OP_LBRACKET,
    OP_RBRACKET,
    OP_LBRACE,
    OP_RBRACE,
    OP_SEMI,
    /* tree-only codes */
    OP_AND,
    OP_OR,
    OP_IN,
    OP_NOTIN,
};

typedef struct tm_token {
    uint8_t type;  /* tk_type */
    uint8_t op;    /* TK_OP */
    long pos;      /* byte offset in the source */
    const char *p; /* TK_NAME: the name; TK_STRING/TK_DATA: decoded text */
    size_t n;
    int64_t i;
    double f;
} tm_token;

/* Splits the (newline-normalized) source into tokens, applying whitespace
 * control, trim_blocks and lstrip_blocks. Ends with TK_EOF. */
tm_token *tm_lex(tm_state *S, const char *src, size_t n, long *n_tokens);

/* ---- syntax tree ---------------------------------------------------------- */
typedef enum {
    /* statements */
    N_TEXT,
    N_OUTPUT,
    N_IF,
    N_FOR,
    N_SET,
    N_SET_BLOCK,
    N_MACRO,
    N_BREAK,
    N_CONTINUE,
    N_FILTER_BLOCK,
    N_BODY,
    /* expressions */
    N_CONST,
    N_NAME,
    N_ATTR,
    N_ITEM,
    N_SLICE,
    N_CALL,
    N_FILTER,
    N_TEST,
    N_NOT,
    N_NEG,
    N_POS,
    N_BINOP,
    N_COMPARE,
    N_COND,
    N_LIST,
    N_TUPLE,
    N_DICT,
} tm_kind;

typedef struct tm_node tm_node;
typedef struct tm_nodes {
    long n;
    tm_node **v;
} tm_nodes;

struct tm_node {
    uint8_t kind;     /* tm_kind */
    uint8_t op;       /* N_BINOP: OP_*; N_TEST: negated */
    long pos;         /* byte offset, for errors */
    tv value;         /* N_CONST; N_TEXT (string) */
    const char *name; /* N_NAME, N_ATTR, N_FILTER, N_TEST, N_MACRO, N_SET target name */
    size_t name_len;
    tm_node *a, *b, *c; /* operands: object / index / ..., see the parser */
    tm_nodes args;      /* call/filter/test positional args; list/tuple items; dict keys */
    tm_nodes kwargs;    /* keyword args (N_CONST name in node->name, value in ->a); dict values */
    tm_nodes body, orelse; /* statement bodies; N_IF: elif chain lives in orelse */
    tm_nodes targets;      /* N_FOR / N_SET: N_NAME targets */
    uint8_t *ops;          /* N_COMPARE: [args.n] operators between a and args */
};

struct inf_tmpl {
    tm_state S;    /* owns the tree */
    tm_node *root; /* N_BODY */
    inf_tmpl_limits lim;
    char *src; /* normalized source */
};

/* NULL-terminated names of the filters and tests builtins.c knows. */
extern const char *const tm_filter_names[];
extern const char *const tm_test_names[];

/* Parses the tokens into a tree (N_BODY). */
/* max_depth bounds the parser's recursion, max_tree the height of the tree it
   builds: a chain like a|e|e|e… or a~b~c… is parsed by a loop but evaluated
   by recursion, so its length is refused here, at parse time. */
tm_node *tm_parse(tm_state *S, const tm_token *toks, long n_tokens, int max_depth, int max_tree);
/* The tree height allowed for a template of the given max_depth; a render
   may nest twice that (macro calls on top of the tree). */
static inline int tm_tree_depth_limit(int max_depth) {
    return max_depth * 16;
}

/* ---- render state --------------------------------------------------------- */
typedef struct tm_frame tm_frame;
struct tm_frame {
    tm_frame *parent;
    tm_dict *vars; /* NULL until something is set */
};

typedef struct tm_rt {
    tm_state S;
    const inf_tmpl *t;
    tm_buf *out;      /* where text goes now (set blocks and macros redirect it) */
    tm_dict *globals; /* the context and the builtin functions */
    tm_frame *root;
    long iters, steps;
    int depth;                      /* macro call depth */
    int eval_depth, max_eval_depth; /* C recursion of eval and exec_stmt */
} tm_rt;

/* Counts evaluation work (bytes scanned / 64 + 1) against max_steps. */
void tm_charge(tm_rt *R, long pos, size_t bytes);
/* tv_equal, tv_compare and tm_dict_find charged by the work they do. */
bool tm_equal(tm_rt *R, tv a, tv b, long pos);
int tm_compare(tm_rt *R, tv a, tv b, bool *ok, long pos);
tv *tm_find(tm_rt *R, tm_dict *d, tv key, long pos);
/* Looks up attribute `name` of v as Jinja does (methods first, then items). */
tv tm_getattr(tm_rt *R, tv v, const char *name, size_t len, long pos);
/* v[key] as Jinja does (items first, then attributes). */
tv tm_getitem(tm_rt *R, tv v, tv key, long pos);
/* Materializes an iterable: list items, dict keys, string characters. */
const tv *tm_iterate(tm_rt *R, tv v, long *n, long pos);
/* Builtins (builtins.c): methods, filters, tests and global functions. A call
 * gets its positional arguments and keyword arguments (names in kw_names). */
typedef struct tm_args {
    int n, n_kw;
    tv *v;           /* [n] */
    const char **kw; /* [n_kw] names, NUL-terminated */
    tv *kv;          /* [n_kw] values */
} tm_args;
int tm_method_id(tv self, const char *name, size_t len); /* -1 when none */
tv tm_call_method(tm_rt *R, tm_method *m, tm_args *a, long pos);
tv tm_call_func(tm_rt *R, int id, tm_args *a, long pos);
tv tm_apply_filter(tm_rt *R, const char *name, size_t len, tv v, tm_args *a, long pos);
bool tm_apply_test(tm_rt *R, const char *name, size_t len, tv v, tm_args *a, long pos);
/* The string form of v (str()), as a new string value. */
tv tm_to_str(tm_rt *R, tv v);
/* Fails with the undefined value's message ("'x' is undefined"). */
_Noreturn void tm_fail_undef(tm_rt *R, tv v, long pos);

#endif
