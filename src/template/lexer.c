/* The template lexer: text and tags, with Jinja's whitespace control as
 * Hugging Face configures it (trim_blocks: a block or comment tag eats the one
 * newline after it; lstrip_blocks: spaces and tabs before a block or comment
 * tag on its own line are dropped; `-` strips all whitespace on that side,
 * `+` turns lstrip/trim off for that tag). The source arrives with newlines
 * already normalized to "\n". */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "template/tmpl_int.h"
#include "util/utf8.h"

typedef struct lexer {
    tm_state *S;
    const char *src;
    size_t n;
    tm_token *v; /* [cap] */
    long count, cap;
} lexer;

static tm_token *push(lexer *L, int type, long pos) {
    if (L->count == L->cap) {
        long cap = L->cap ? L->cap * 2 : 256;
        tm_token *nv = tm_alloc(L->S, (size_t)cap * sizeof *nv);
        if (L->count) memcpy(nv, L->v, (size_t)L->count * sizeof *nv);
        L->v = nv;
        L->cap = cap;
    }
    tm_token *t = &L->v[L->count++];
    memset(t, 0, sizeof *t);
    t->type = (uint8_t)type;
    t->pos = pos;
    return t;
}

static bool is_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}
static bool is_digit(char c) {
    return c >= '0' && c <= '9';
}
static bool is_alpha(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static void push_data(lexer *L, size_t from, size_t to) {
    if (to <= from) return;
    tm_token *t = push(L, TK_DATA, (long)from);
    t->p = L->src + from;
    t->n = to - from;
}

/* Emits text [from, to) as data, trimmed for the tag that follows it: sign is
 * the tag's '-', '+' or 0; lstrip applies to block and comment tags. */
static void emit_text(lexer *L, size_t from, size_t to, char sign, bool lstrip_kind) {
    const char *s = L->src;
    if (sign == '-') {
        while (to > from && is_space(s[to - 1]))
            to--;
    } else if (sign != '+' && lstrip_kind) {
        size_t l = to;
        while (l > from && s[l - 1] != '\n')
            l--;
        bool line_start = l > from || from == 0 || s[from - 1] == '\n';
        bool all_ws = l < to;
        for (size_t i = l; i < to; i++)
            if (!is_space(s[i])) all_ws = false;
        if (line_start && all_ws) to = l;
    }
    push_data(L, from, to);
}

/* Finds the next "{{", "{%" or "{#" at or after pos; n when none. */
static size_t find_tag(const lexer *L, size_t pos) {
    for (const char *p = L->src + pos; (p = memchr(p, '{', (size_t)(L->src + L->n - p))); p++) {
        if ((size_t)(p - L->src) + 1 >= L->n) break;
        if (p[1] == '{' || p[1] == '%' || p[1] == '#') return (size_t)(p - L->src);
    }
    return L->n;
}

/* Decodes a Python string literal body [from, to) with its escapes. */
static void lex_string(lexer *L, tm_token *t, size_t from, size_t to) {
    const char *s = L->src;
    char *out = tm_alloc(L->S, to - from + 1), *o = out;
    for (size_t i = from; i < to; i++) {
        if (s[i] != '\\' || i + 1 >= to) {
            *o++ = s[i];
            continue;
        }
        char c = s[++i];
        int hex = 0;
        switch (c) {
        case 'n':
            *o++ = '\n';
            continue;
        case 't':
            *o++ = '\t';
            continue;
        case 'r':
            *o++ = '\r';
            continue;
        case '\\':
            *o++ = '\\';
            continue;
        case '\'':
            *o++ = '\'';
            continue;
        case '"':
            *o++ = '"';
            continue;
        case 'a':
            *o++ = '\a';
            continue;
        case 'b':
            *o++ = '\b';
            continue;
        case 'f':
            *o++ = '\f';
            continue;
        case 'v':
            *o++ = '\v';
            continue;
        case '\n':
            continue; /* line continuation */
        case 'x':
            hex = 2;
            break;
        case 'u':
            hex = 4;
            break;
        case 'U':
            hex = 8;
            break;
        default:
            if (c >= '0' && c <= '7') {
                uint32_t cp = 0;
                int k = 0;
                for (; k < 3 && i < to && s[i] >= '0' && s[i] <= '7'; k++, i++)
                    cp = cp * 8 + (uint32_t)(s[i] - '0');
                i--;
                o += inf_utf8_encode(o, cp);
                continue;
            }
            *o++ = '\\'; /* unknown escapes stay as written */
            *o++ = c;
            continue;
        }
        uint32_t cp = 0;
        for (int k = 0; k < hex; k++) {
            char h = i + 1 + (size_t)k < to ? s[i + 1 + (size_t)k] : 0;
            int d = h >= '0' && h <= '9'   ? h - '0'
                    : h >= 'a' && h <= 'f' ? h - 'a' + 10
                    : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                           : -1;
            if (d < 0) tm_fail(L->S, (long)i - 1, "truncated \\%c escape in string", c);
            cp = cp << 4 | (uint32_t)d;
        }
        if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            tm_fail(L->S, (long)i - 1, "escape \\%c names an invalid code point", c);
        i += (size_t)hex;
        o += inf_utf8_encode(o, cp);
    }
    *o = 0;
    t->p = out;
    t->n = (size_t)(o - out);
}

static const struct {
    const char *s;
    uint8_t op;
} ops[] = {
    {"//", OP_FLOORDIV}, {"**", OP_POW},     {"==", OP_EQ},      {"!=", OP_NE},    {"<=", OP_LE},
    {">=", OP_GE},       {"+", OP_ADD},      {"-", OP_SUB},      {"*", OP_MUL},    {"/", OP_DIV},
    {"%", OP_MOD},       {"~", OP_TILDE},    {"<", OP_LT},       {">", OP_GT},     {"=", OP_ASSIGN},
    {".", OP_DOT},       {",", OP_COMMA},    {":", OP_COLON},    {"|", OP_PIPE},   {"(", OP_LPAREN},
    {")", OP_RPAREN},    {"[", OP_LBRACKET}, {"]", OP_RBRACKET}, {"{", OP_LBRACE}, {"}", OP_RBRACE},
    {";", OP_SEMI},
};

/* Lexes the inside of a tag starting at pos until its end ("}}" for
 * variables, "%}" for blocks). Returns the position after the end (and the
 * whitespace control that goes with it). */
static size_t lex_tag(lexer *L, size_t pos, bool block, long tag_pos) {
    const char *s = L->src;
    char close = block ? '%' : '}';
    char stack[64];
    int depth = 0;
    for (;;) {
        while (pos < L->n && is_space(s[pos]))
            pos++;
        if (pos >= L->n)
            tm_fail(L->S, tag_pos, "unexpected end of template: %s tag never closed",
                    block ? "{%" : "{{");
        if (depth == 0) {
            /* the end of the tag, with its whitespace control */
            if ((s[pos] == '-' || s[pos] == '+') && pos + 2 < L->n + 0 && s[pos + 1] == close &&
                s[pos + 2] == '}' && (s[pos] == '-' || block)) {
                push(L, block ? TK_BLOCK_END : TK_VAR_END, (long)pos);
                pos += 3;
                if (s[pos - 3] == '-')
                    while (pos < L->n && is_space(s[pos]))
                        pos++;
                return pos;
            }
            if (s[pos] == close && pos + 1 < L->n && s[pos + 1] == '}') {
                push(L, block ? TK_BLOCK_END : TK_VAR_END, (long)pos);
                pos += 2;
                if (block && pos < L->n && s[pos] == '\n') pos++; /* trim_blocks */
                return pos;
            }
        }
        char c = s[pos];
        if (is_digit(c)) {
            size_t st = pos;
            while (pos < L->n &&
                   (is_digit(s[pos]) || (s[pos] == '_' && pos + 1 < L->n && is_digit(s[pos + 1]))))
                pos++;
            bool is_float = false;
            if (pos + 1 < L->n && s[pos] == '.' && is_digit(s[pos + 1])) {
                is_float = true;
                pos++;
                while (pos < L->n && (is_digit(s[pos]) ||
                                      (s[pos] == '_' && pos + 1 < L->n && is_digit(s[pos + 1]))))
                    pos++;
            }
            if (pos < L->n && (s[pos] == 'e' || s[pos] == 'E')) {
                size_t q = pos + 1;
                if (q < L->n && (s[q] == '+' || s[q] == '-')) q++;
                if (q < L->n && is_digit(s[q])) {
                    is_float = true;
                    pos = q;
                    while (pos < L->n && (is_digit(s[pos]) || s[pos] == '_'))
                        pos++;
                }
            }
            char num[64];
            size_t k = 0;
            for (size_t i = st; i < pos && k < sizeof num - 1; i++)
                if (s[i] != '_') num[k++] = s[i];
            num[k] = 0;
            tm_token *t = push(L, is_float ? TK_FLOAT : TK_INT, (long)st);
            if (is_float)
                t->f = strtod(num, NULL);
            else {
                char *end;
                errno = 0;
                t->i = strtoll(num, &end, 10);
                if (errno == ERANGE || k >= sizeof num - 1)
                    tm_fail(L->S, (long)st, "integer literal too large");
            }
            continue;
        }
        if (is_alpha(c)) {
            size_t st = pos;
            while (pos < L->n && (is_alpha(s[pos]) || is_digit(s[pos])))
                pos++;
            tm_token *t = push(L, TK_NAME, (long)st);
            t->p = s + st;
            t->n = pos - st;
            continue;
        }
        if (c == '\'' || c == '"') {
            size_t st = pos++;
            while (pos < L->n && s[pos] != c)
                pos += s[pos] == '\\' ? 2 : 1;
            if (pos >= L->n) tm_fail(L->S, (long)st, "unterminated string literal");
            tm_token *t = push(L, TK_STRING, (long)st);
            lex_string(L, t, st + 1, pos);
            pos++;
            continue;
        }
        size_t k;
        for (k = 0; k < sizeof ops / sizeof ops[0]; k++) {
            size_t len = strlen(ops[k].s);
            if (pos + len <= L->n && !memcmp(s + pos, ops[k].s, len)) break;
        }
        if (k == sizeof ops / sizeof ops[0])
            tm_fail(L->S, (long)pos, "unexpected character '%c'", c);
        uint8_t op = ops[k].op;
        if (op == OP_LPAREN || op == OP_LBRACKET || op == OP_LBRACE) {
            if (depth == (int)sizeof stack) tm_fail(L->S, (long)pos, "brackets nested too deeply");
            stack[depth++] = op == OP_LPAREN ? ')' : op == OP_LBRACKET ? ']' : '}';
        } else if (op == OP_RPAREN || op == OP_RBRACKET || op == OP_RBRACE) {
            if (depth == 0 || stack[depth - 1] != c) tm_fail(L->S, (long)pos, "unexpected '%c'", c);
            depth--;
        }
        tm_token *t = push(L, TK_OP, (long)pos);
        t->op = op;
        pos += strlen(ops[k].s);
    }
}

/* Is the block tag at pos (just after "{%" and its sign) a `raw` tag? Returns
 * the position after it, or 0. */
static size_t raw_begin(const lexer *L, size_t pos) {
    const char *s = L->src;
    while (pos < L->n && is_space(s[pos]))
        pos++;
    if (pos + 3 > L->n || memcmp(s + pos, "raw", 3)) return 0;
    pos += 3;
    if (pos < L->n && (is_alpha(s[pos]) || is_digit(s[pos]))) return 0;
    while (pos < L->n && is_space(s[pos]))
        pos++;
    if (pos + 3 <= L->n && !memcmp(s + pos, "-%}", 3)) {
        pos += 3;
        while (pos < L->n && is_space(s[pos]))
            pos++;
        return pos;
    }
    if (pos + 2 <= L->n && !memcmp(s + pos, "%}", 2)) return pos + 2;
    return 0;
}

/* From pos inside a raw block, finds "{%[-+] endraw [-+]%}". Emits the text
 * and returns the position after the tag. */
static size_t lex_raw(lexer *L, size_t pos, long tag_pos) {
    const char *s = L->src;
    for (size_t k = pos; (k = find_tag(L, k)) < L->n; k++) {
        if (s[k + 1] != '%') continue;
        size_t q = k + 2;
        char sign = q < L->n && (s[q] == '-' || s[q] == '+') ? s[q++] : 0;
        while (q < L->n && is_space(s[q]))
            q++;
        if (q + 6 > L->n || memcmp(s + q, "endraw", 6)) continue;
        q += 6;
        while (q < L->n && is_space(s[q]))
            q++;
        size_t end;
        if (q + 3 <= L->n && !memcmp(s + q, "-%}", 3)) {
            end = q + 3;
            while (end < L->n && is_space(s[end]))
                end++;
        } else if (q + 3 <= L->n && !memcmp(s + q, "+%}", 3)) {
            end = q + 3;
        } else if (q + 2 <= L->n && !memcmp(s + q, "%}", 2)) {
            end = q + 2;
            if (end < L->n && s[end] == '\n') end++;
        } else {
            continue;
        }
        emit_text(L, pos, k, sign, true);
        return end;
    }
    tm_fail(L->S, tag_pos, "missing {%% endraw %%} for this raw block");
}

tm_token *tm_lex(tm_state *S, const char *src, size_t n, long *n_tokens) {
    lexer L = {S, src, n, NULL, 0, 0};
    size_t pos = 0;
    while (pos < n) {
        size_t k = find_tag(&L, pos);
        if (k >= n) {
            push_data(&L, pos, n);
            break;
        }
        char kind = src[k + 1];
        size_t q = k + 2;
        char sign = q < n && (src[q] == '-' || src[q] == '+') ? src[q++] : 0;
        emit_text(&L, pos, k, sign, kind != '{');
        if (kind == '#') {
            size_t e = q;
            while (e + 1 < n && !(src[e] == '#' && src[e + 1] == '}'))
                e++;
            if (e + 1 >= n) tm_fail(S, (long)k, "unterminated comment: missing '#}'");
            pos = e + 2;
            char esign = e > q && (src[e - 1] == '-' || src[e - 1] == '+') ? src[e - 1] : 0;
            if (esign == '-')
                while (pos < n && is_space(src[pos]))
                    pos++;
            else if (esign != '+' && pos < n && src[pos] == '\n')
                pos++;
            continue;
        }
        if (kind == '%') {
            size_t r = raw_begin(&L, q);
            if (r) {
                pos = lex_raw(&L, r, (long)k);
                continue;
            }
        }
        push(&L, kind == '%' ? TK_BLOCK_BEGIN : TK_VAR_BEGIN, (long)k);
        pos = lex_tag(&L, q, kind == '%', (long)k);
    }
    push(&L, TK_EOF, (long)n);
    *n_tokens = L.count;
    return L.v;
}
