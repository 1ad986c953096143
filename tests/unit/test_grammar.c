/* The grammar engine: GBNF parsing and its errors, the byte matcher (tokens
 * that cross terminals, partial UTF-8, special and end tokens), the trie mask
 * against a token-by-token check, bounds on hostile grammars, and JSON
 * Schema compilation. */
#include <stdlib.h>

#include "grammar/grammar.h"
#include "harness.h"

/* A small vocabulary: single bytes, multi-terminal tokens, the halves of
 * "é" (C3 A9) and "€" (E2 82 AC), and special tokens. */
static const char *const TOKS[] = {
    "a",        "b",    "x",        "y",        "1",    "2",    "+",    "*",     "(",    ")",
    " ",        "1+",   "+2",       "(1",       "2)",   "1*2",  "ab",   "\xC3",  "\xA9", "\xA9x",
    "\xC3\xA9", "\xE2", "\x82\xAC", "\xE2\x82", "\xAC", "{",    "}",    "\"",    ":",    ",",
    "\"a\"",    "\":",  "true",     "null",     "-",    "0",    "9",    "\":\"", "\"}",  "<|ctl|>",
    "<|end|>",  "[",    "]",        "T",        "Z",    "\xFF", "\x80",
};
#define N_TOKS ((int)(sizeof TOKS / sizeof TOKS[0]))
#define TOK_CTL 39
#define TOK_END 40

static int piece(void *ud, int32_t id, char *buf, int cap) {
    int n = (int)strlen(TOKS[id]);
    memcpy(buf, TOKS[id], (size_t)n);
    return n;
}
static inf_gram_tok_kind kind(void *ud, int32_t id) {
    return id == TOK_END   ? INF_GRAM_TOK_EOG
           : id == TOK_CTL ? INF_GRAM_TOK_NEVER
                           : INF_GRAM_TOK_TEXT;
}

static inf_gram_vocab *vocab(void) {
    inf_gram_vocab *v;
    inf_err err;
    if (inf_gram_vocab_create(&v, N_TOKS, piece, kind, NULL, &err)) abort();
    return v;
}

static inf_gram *compile(const char *src) {
    inf_gram *g = NULL;
    inf_err err;
    if (inf_gram_compile(&g, src, strlen(src), NULL, &err)) {
        fprintf(stderr, "compile failed: %s\n", err.msg);
        return NULL;
    }
    return g;
}

/* Whether s is a sentence of g (fed byte by byte in one go). */
static int sentence(const inf_gram *g, const inf_gram_vocab *v, const char *s) {
    inf_gram_matcher *m;
    inf_err err;
    if (inf_gram_matcher_create(&m, g, v, &err)) return -1;
    int ok = !inf_gram_matcher_accept_bytes(m, s, strlen(s)) && inf_gram_matcher_can_end(m);
    inf_gram_matcher_free(m);
    return ok;
}

/* The mask from the trie equals asking about every token one by one. */
static void check_mask(inf_gram_matcher *m, const char *where) {
    int n;
    const uint32_t *bits = inf_gram_matcher_mask(m, &n);
    CHECK(bits != NULL);
    if (!bits) return;
    int count = 0;
    for (int t = 0; t < N_TOKS; t++) {
        int in_mask = (bits[t >> 5] >> (t & 31)) & 1;
        int allowed = inf_gram_matcher_allows(m, t);
        count += in_mask;
        CHECK_MSG(in_mask == allowed, "%s: token %d '%s': mask %d, allows %d", where, t, TOKS[t],
                  in_mask, allowed);
    }
    CHECK_INT(count, n);
}

static void test_parse_errors(void) {
    static const struct {
        const char *src, *want;
    } cases[] = {
        {"root ::= foo", "undefined rule 'foo'"},
        {"root ::= \"a", "unterminated literal"},
        {"root ::= [a-", "unterminated character class"},
        {"root ::= \"\\q\"", "unknown escape"},
        {"root ::= a\na ::= a \"x\"", "left-recursive"},
        {"root ::= b \"x\"\nb ::= \"\" | root", "left-recursive"},
        {"root ::= (\"a\"", "'(' without ')'"},
        {"root ::= \"a\"{3,1}", "max < min"},
        {"root ::= \"a\"{99999}", "repetition count"},
        {"foo ::= \"a\"", "no rule named 'root'"},
        {"root ::= \"a\"\nroot ::= \"b\"", "defined twice"},
        {"root ::= [z-a]", "backwards"},
        {"root ::= \"\xC3\"", "invalid UTF-8"},
        {"root ::= ) ", "unexpected ')'"},
        {"root ::= x\nx ::= \"a\" |\n  | @", "line 3, column 5"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        inf_gram *g = NULL;
        inf_err err = {{0}};
        int rc = inf_gram_compile(&g, cases[i].src, strlen(cases[i].src), NULL, &err);
        CHECK_MSG(rc == -1 && g == NULL && strstr(err.msg, cases[i].want), "'%s': got '%s'",
                  cases[i].src, rc ? err.msg : "(compiled)");
        inf_gram_free(g);
    }
}

/* A small arithmetic language. */
static const char *ARITH = "root ::= expr\n"
                           "expr ::= term (\"+\" term)*\n"
                           "term ::= factor (\"*\" factor)*\n"
                           "factor ::= num | \"(\" expr \")\"   # a comment\n"
                           "num ::= [1-9] [0-9]{0,2}\n";

static void test_language(void) {
    inf_gram_vocab *v = vocab();
    inf_gram *g = compile(ARITH);
    CHECK(g != NULL);
    const char *yes[] = {"1", "12+3", "(1+2)*3", "((9))", "1*2*3+4", "999"};
    const char *no[] = {"", "+", "1+", "(1", "1)", "01", "1234", "1**2", "()"};
    for (size_t i = 0; i < sizeof yes / sizeof *yes; i++)
        CHECK_MSG(sentence(g, v, yes[i]) == 1, "'%s' should be a sentence", yes[i]);
    for (size_t i = 0; i < sizeof no / sizeof *no; i++)
        CHECK_MSG(sentence(g, v, no[i]) == 0, "'%s' should not be a sentence", no[i]);
    inf_gram_free(g);

    /* repetition counts, negated classes, any character, alternatives */
    g = compile("root ::= \"a\"{2,3} [^a-c] . (\"x\" | \"yy\")?");
    CHECK(sentence(g, v, "aadé") == 1);
    CHECK(sentence(g, v, "aaad€x") == 1);
    CHECK(sentence(g, v, "aaaab") == 0);
    CHECK(sentence(g, v, "aab.") == 0);
    CHECK(sentence(g, v, "aa..yy") == 1);
    CHECK(sentence(g, v, "aa..y") == 0);
    inf_gram_free(g);

    /* A repeated item that may be empty: the same language as without its
     * empty string (not left recursion), whatever the nesting. */
    static const struct {
        const char *src, *yes[5], *no[4];
    } nullable[] = {
        {"root ::= (\"a\"?)* \"b\"", {"b", "ab", "aaab"}, {"ba", "", "aa"}},
        {"root ::= (\"a\"? \"x\"?)+ \"b\"", {"b", "axb", "xxab", "aab"}, {"xa", "bb"}},
        {"root ::= item* \"b\"\nitem ::= [1-2]* \"x\"?", {"b", "12xb", "xxb", "1x2b"}, {"ab", "1"}},
        {"root ::= ((\"a\"?)*)* \"b\"", {"b", "aab"}, {"ba"}},
        {"root ::= (\"\"?)* \"x\"", {"x"}, {"", "xx"}},
        {"root ::= (e | \"a\")* \"b\"\ne ::= \"\" | \"(\" root \")\"",
         {"b", "(b)b", "a(ab)ab"},
         {"(b"}},
    };
    for (size_t i = 0; i < sizeof nullable / sizeof *nullable; i++) {
        g = compile(nullable[i].src);
        CHECK_MSG(g != NULL, "'%s' should compile", nullable[i].src);
        if (!g) continue;
        for (int k = 0; k < 5 && nullable[i].yes[k]; k++)
            CHECK_MSG(sentence(g, v, nullable[i].yes[k]) == 1, "%s: '%s' should be a sentence",
                      nullable[i].src, nullable[i].yes[k]);
        for (int k = 0; k < 4 && nullable[i].no[k]; k++)
            CHECK_MSG(sentence(g, v, nullable[i].no[k]) == 0, "%s: '%s' should not be a sentence",
                      nullable[i].src, nullable[i].no[k]);
        inf_gram_free(g);
    }
    inf_gram_vocab_free(v);
}

static void test_tokens(void) {
    inf_gram_vocab *v = vocab();
    inf_gram *g = compile(ARITH);
    inf_gram_matcher *m;
    inf_err err;
    CHECK(inf_gram_matcher_create(&m, g, v, &err) == 0);
    check_mask(m, "start");
    CHECK(inf_gram_matcher_allows(m, 13) == 1);      /* "(1" spans two terminals */
    CHECK(inf_gram_matcher_allows(m, 15) == 1);      /* "1*2": three */
    CHECK(inf_gram_matcher_allows(m, 6) == 0);       /* "+" */
    CHECK(inf_gram_matcher_allows(m, TOK_END) == 0); /* nothing written yet */
    CHECK(inf_gram_matcher_allows(m, TOK_CTL) == 0); /* special */
    CHECK(inf_gram_matcher_accept(m, 13) == 0);      /* "(1" */
    check_mask(m, "after (1");
    CHECK(inf_gram_matcher_allows(m, 12) == 1); /* "+2" */
    CHECK(inf_gram_matcher_allows(m, 14) == 1); /* "2)" */
    CHECK(inf_gram_matcher_accept(m, 14) == 0); /* "2)" -> "(12)" */
    CHECK(inf_gram_matcher_can_end(m));
    CHECK(inf_gram_matcher_allows(m, TOK_END) == 1);
    CHECK(!inf_gram_matcher_done(m)); /* "+..." may still follow */
    check_mask(m, "after (12)");
    CHECK(inf_gram_matcher_accept(m, 6) == 0); /* "+" */
    CHECK(!inf_gram_matcher_can_end(m));
    CHECK(inf_gram_matcher_accept(m, TOK_END) == -1);
    inf_gram_matcher_free(m);
    inf_gram_free(g);

    /* Partial UTF-8: a token may end inside a character, the next one ends it. */
    g = compile("root ::= \"é\" \"x\" | \"€\"");
    CHECK(inf_gram_matcher_create(&m, g, v, &err) == 0);
    check_mask(m, "utf8 start");
    CHECK(inf_gram_matcher_allows(m, 17) == 1); /* C3 */
    CHECK(inf_gram_matcher_allows(m, 20) == 1); /* C3 A9 */
    CHECK(inf_gram_matcher_allows(m, 21) == 1); /* E2 */
    CHECK(inf_gram_matcher_allows(m, 23) == 1); /* E2 82 */
    CHECK(inf_gram_matcher_allows(m, 18) == 0); /* A9 alone */
    CHECK(inf_gram_matcher_allows(m, 45) == 0); /* FF */
    CHECK(inf_gram_matcher_allows(m, 46) == 0); /* 80 */
    CHECK(inf_gram_matcher_accept(m, 17) == 0);
    check_mask(m, "after C3");
    CHECK(inf_gram_matcher_allows(m, TOK_END) == 0); /* inside a character */
    CHECK(inf_gram_matcher_allows(m, 19) == 1);      /* A9 'x' finishes it and more */
    CHECK(inf_gram_matcher_allows(m, 22) == 0);      /* 82 AC: wrong character */
    CHECK(inf_gram_matcher_accept(m, 19) == 0);
    CHECK(inf_gram_matcher_done(m));
    inf_gram_matcher_free(m);

    CHECK(inf_gram_matcher_create(&m, g, v, &err) == 0);
    CHECK(inf_gram_matcher_accept(m, 23) == 0); /* E2 82 */
    check_mask(m, "after E2 82");
    CHECK(inf_gram_matcher_allows(m, 24) == 1); /* AC */
    CHECK(inf_gram_matcher_accept(m, 24) == 0);
    CHECK(inf_gram_matcher_done(m));
    int n;
    const uint32_t *bits = inf_gram_matcher_mask(m, &n);
    CHECK(bits && n == 1 && (bits[TOK_END >> 5] >> (TOK_END & 31) & 1)); /* only the end */
    inf_gram_matcher_free(m);
    inf_gram_free(g);
    inf_gram_vocab_free(v);
}

static void test_bounds(void) {
    inf_gram_vocab *v = vocab();
    /* Every 'a' doubles what the parse may still close: the stack bound stops it. */
    inf_gram *g = compile("root ::= s\ns ::= \"a\" s | \"a\" s \"b\" | \"\"");
    CHECK(g != NULL);
    inf_gram_matcher *m;
    inf_err err;
    CHECK(inf_gram_matcher_create(&m, g, v, &err) == 0);
    int rc = 0, i;
    for (i = 0; i < 400 && !rc; i++)
        rc = inf_gram_matcher_accept(m, 0);
    CHECK(rc == -1 && strstr(inf_gram_matcher_error(m), "too ambiguous"));
    int n;
    CHECK(inf_gram_matcher_mask(m, &n) == NULL);
    inf_gram_matcher_free(m);
    inf_gram_free(g);

    /* Deep nesting stops at the depth bound instead of growing without end. */
    g = compile("root ::= \"(\" root \")\" | \"x\"");
    CHECK(inf_gram_matcher_create(&m, g, v, &err) == 0);
    for (i = 0, rc = 0; i < 3000 && !rc; i++)
        rc = inf_gram_matcher_accept(m, 8);
    CHECK(rc == -1 && strstr(inf_gram_matcher_error(m), "deeper"));
    inf_gram_matcher_free(m);
    inf_gram_free(g);

    /* Too many elements is a compile error. */
    inf_err e2 = {{0}};
    char big[2000] = "root ::=";
    for (int k = 0; k < 45; k++)
        strcat(big, " \"a\"{10000}");
    CHECK(inf_gram_compile(&g, big, strlen(big), NULL, &e2) == -1 && strstr(e2.msg, "elements"));
    inf_gram_vocab_free(v);
}

/* A character that every completion of its lead bytes satisfies is one
 * state whatever the bytes were; the bytes that make no valid character
 * (overlong, surrogate, beyond U+10FFFF) still end the parse, and a class
 * that takes part of a lead byte's range still looks at the bytes. */
static void test_utf8_classes(void) {
    inf_gram_vocab *v = vocab();
    inf_gram *g = compile("root ::= [^\"]{0,4} \"!\"");
    CHECK(sentence(g, v, "\xC3\xA9\xE2\x82\xAC!") == 1);
    CHECK(sentence(g, v, "\xF0\x9F\x98\x80!") == 1);
    CHECK(sentence(g, v, "\xED\xA0\x80!") == 0);                             /* a surrogate */
    CHECK(sentence(g, v, "\xE0\x80\x80!") == 0);                             /* overlong */
    CHECK(sentence(g, v, "\xC0\x80!") == 0);                                 /* overlong */
    CHECK(sentence(g, v, "\xF4\x90\x80\x80!") == 0);                         /* beyond U+10FFFF */
    CHECK(sentence(g, v, "\xE4\xB8!") == 0);                                 /* cut short */
    CHECK(sentence(g, v, "\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9!") == 0); /* five */
    inf_gram_free(g);
    g = compile("root ::= [^\\u4E00-\\u9FFF]* \"!\"");
    CHECK(sentence(g, v, "\xE4\xB8\xAD!") == 0); /* U+4E2D */
    CHECK(sentence(g, v, "\xC3\xA9\xE2\x82\xAC!") == 1);
    inf_gram_free(g);
    g = compile("root ::= [\\u4E00-\\u4E0F] \"!\"");
    CHECK(sentence(g, v, "\xE4\xB8\x80!") == 1); /* U+4E00 */
    CHECK(sentence(g, v, "\xE4\xB8\x90!") == 0); /* U+4E10 */
    inf_gram_free(g);
    inf_gram_vocab_free(v);
}

/* The reference for a mask: whether prefix[0..n) followed by token id's
 * bytes keeps the output in the language, from a fresh matcher fed bytes
 * (no memoized transitions, no trie). */
static int ref_allows(const inf_gram *g, const inf_gram_vocab *v, const char *prefix, size_t n,
                      int id) {
    if (id == TOK_CTL) return 0;
    inf_gram_matcher *m;
    inf_err err;
    if (inf_gram_matcher_create(&m, g, v, &err)) return -1;
    int ok = !inf_gram_matcher_accept_bytes(m, prefix, n);
    if (ok && id == TOK_END)
        ok = inf_gram_matcher_can_end(m);
    else if (ok)
        ok = !inf_gram_matcher_accept_bytes(m, TOKS[id], strlen(TOKS[id]));
    inf_gram_matcher_free(m);
    return ok;
}

/* Walks a grammar token by token (a fixed pseudo-random choice among the
 * allowed ones), checking every mask and every check against the reference. */
static void random_walk(const inf_gram *g, const char *name, int steps, uint32_t seed) {
    inf_gram_vocab *v = vocab();
    inf_gram_matcher *m;
    inf_err err;
    CHECK(inf_gram_matcher_create(&m, g, v, &err) == 0);
    char out[4096];
    size_t n = 0;
    for (int s = 0; s < steps; s++) {
        int cnt;
        const uint32_t *bits = inf_gram_matcher_mask(m, &cnt);
        CHECK(bits != NULL);
        if (!bits) break;
        int allowed[N_TOKS], n_allowed = 0, bad = 0;
        for (int t = 0; t < N_TOKS; t++) {
            int in_mask = bits[t >> 5] >> (t & 31) & 1;
            int want = ref_allows(g, v, out, n, t);
            if (in_mask != want && !bad++)
                CHECK_MSG(0, "%s step %d after '%.*s': token %d '%s': mask %d, reference %d", name,
                          s, (int)n, out, t, TOKS[t], in_mask, want);
            if (in_mask && t != TOK_END) allowed[n_allowed++] = t;
        }
        CHECK(!bad);
        if (!n_allowed) break;
        seed = seed * 1664525u + 1013904223u;
        int t = allowed[(seed >> 8) % (uint32_t)n_allowed];
        CHECK_INT(inf_gram_matcher_allows(m, t), 1);
        CHECK_INT(inf_gram_matcher_accept(m, t), 0);
        size_t len = strlen(TOKS[t]);
        if (n + len >= sizeof out) break;
        memcpy(out + n, TOKS[t], len);
        n += len;
    }
    inf_gram_matcher_free(m);
    inf_gram_vocab_free(v);
}

static void test_memo(void) {
    inf_gram *g = compile(ARITH);
    random_walk(g, "arith", 40, 1);
    inf_gram_free(g);
    CHECK(inf_gram_json_object(&g, &(inf_err){{0}}) == 0);
    random_walk(g, "json_object", 60, 2);
    random_walk(g, "json_object", 60, 3);
    inf_gram_free(g);
    g = compile("root ::= (\"a\"? \"b\"?)* \"x\"");
    random_walk(g, "nullable item", 30, 6);
    inf_gram_free(g);
    g = compile("root ::= \"\\\"\" [^\"\\\\]{0,5} \"\\\"\" ([ab] [^ab]{2,3})* \"x\"");
    random_walk(g, "bounded", 40, 4);
    random_walk(g, "bounded", 40, 5);
    inf_gram_free(g);

    /* Thousands of distinct states (a bounded count of 'a'): the table of
     * interned states fills, starts afresh, and the masks stay right. */
    g = compile("root ::= \"a\"{0,9000} \"b\"");
    inf_gram_vocab *v = vocab();
    inf_gram_matcher *m;
    inf_err err;
    CHECK(inf_gram_matcher_create(&m, g, v, &err) == 0);
    int rc = 0, cnt;
    for (int i = 0; i < 8998 && !rc; i++) {
        rc = inf_gram_matcher_accept(m, 0);
        if (i % 1000 == 999) rc |= inf_gram_matcher_mask(m, &cnt) == NULL;
    }
    CHECK_INT(rc, 0);
    const uint32_t *bits = inf_gram_matcher_mask(m, &cnt);
    CHECK(bits != NULL);
    if (bits) {
        CHECK(bits[0] & 1u << 0);        /* 'a': 8999 of 9000 */
        CHECK(bits[16 >> 5] & 1u << 16); /* "ab" */
        CHECK(bits[0] & 1u << 1);        /* 'b' */
    }
    CHECK(inf_gram_matcher_accept(m, 0) == 0);
    CHECK(inf_gram_matcher_accept(m, 0) == 0);
    CHECK_INT(inf_gram_matcher_allows(m, 0), 0); /* the 9001st 'a' */
    CHECK_INT(inf_gram_matcher_allows(m, 16), 0);
    CHECK_INT(inf_gram_matcher_allows(m, 1), 1);
    inf_gram_matcher_free(m);
    inf_gram_vocab_free(v);
    inf_gram_free(g);
}

static int schema_accepts(const char *schema, const char *doc, char *msg, size_t cap) {
    json_error_t je;
    json_t *s = json_loads(schema, 0, &je);
    if (!s) return snprintf(msg, cap, "bad test schema"), -1;
    inf_gram *g;
    inf_err err;
    int rc = inf_gram_from_json_schema(&g, s, &err);
    json_decref(s);
    if (rc) return snprintf(msg, cap, "%s", err.msg), -1;
    inf_gram_vocab *v = vocab();
    int ok = sentence(g, v, doc);
    inf_gram_vocab_free(v);
    inf_gram_free(g);
    return ok;
}

static void test_json_schema(void) {
    static const struct {
        const char *schema, *doc;
        int want;
    } cases[] = {
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":"
         "\"string\"}},\"required\":[\"a\"]}",
         "{\"a\": 12, \"b\": \"hi\"}", 1},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":"
         "\"string\"}},\"required\":[\"a\"]}",
         "{\"a\": 12}", 1},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":"
         "\"string\"}},\"required\":[\"a\"]}",
         "{\"b\": \"x\"}", 0},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":"
         "\"string\"}}}",
         "{\"b\": \"x\"}", 1},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":"
         "\"string\"}}}",
         "{\"b\": \"x\", \"a\": 1}", 0}, /* property order as written */
        {"{\"enum\":[\"red\",\"green\",3]}", "\"green\"", 1},
        {"{\"enum\":[\"red\",\"green\",3]}", "\"blue\"", 0},
        {"{\"type\":\"array\",\"items\":{\"type\":\"boolean\"},\"minItems\":1,\"maxItems\":2}",
         "[true, false]", 1},
        {"{\"type\":\"array\",\"items\":{\"type\":\"boolean\"},\"minItems\":1,\"maxItems\":2}",
         "[]", 0},
        {"{\"type\":\"array\",\"items\":{\"type\":\"boolean\"},\"minItems\":1,\"maxItems\":2}",
         "[true,true,true]", 0},
        {"{\"type\":\"integer\",\"minimum\":-5,\"maximum\":123}", "-5", 1},
        {"{\"type\":\"integer\",\"minimum\":-5,\"maximum\":123}", "123", 1},
        {"{\"type\":\"integer\",\"minimum\":-5,\"maximum\":123}", "124", 0},
        {"{\"type\":\"integer\",\"minimum\":-5,\"maximum\":123}", "-6", 0},
        {"{\"type\":\"integer\",\"exclusiveMinimum\":10}", "11", 1},
        {"{\"type\":\"integer\",\"exclusiveMinimum\":10}", "10", 0},
        {"{\"type\":\"string\",\"pattern\":\"^[A-Z]{2}-\\\\d{3}$\"}", "\"AB-123\"", 1},
        {"{\"type\":\"string\",\"pattern\":\"^[A-Z]{2}-\\\\d{3}$\"}", "\"AB-12\"", 0},
        {"{\"type\":\"string\",\"pattern\":\"^(a?b?)*c$\"}", "\"abbac\"", 1}, /* nullable item */
        {"{\"type\":\"string\",\"pattern\":\"^(a?b?)*c$\"}", "\"ca\"", 0},
        {"{\"type\":\"string\",\"format\":\"date\"}", "\"2024-02-28\"", 1},
        {"{\"type\":\"string\",\"format\":\"date\"}", "\"2024-02-30\"", 0},
        {"{\"type\":\"string\",\"format\":\"date-time\"}", "\"2024-11-30T23:59:01Z\"", 1},
        {"{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}", "\"ab\"", 1},
        {"{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}", "\"abcd\"", 0},
        {"{\"$defs\":{\"node\":{\"type\":\"object\",\"properties\":{\"v\":{\"type\":\"integer\"},"
         "\"kids\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/node\"}}},\"required\":[\"v\","
         "\"kids\"]}},\"$ref\":\"#/$defs/node\"}",
         "{\"v\":1,\"kids\":[{\"v\":2,\"kids\":[]}]}", 1},
        {"{\"anyOf\":[{\"type\":\"null\"},{\"type\":\"string\",\"maxLength\":1}]}", "null", 1},
        {"{\"type\":[\"string\",\"null\"]}", "null", 1},
        {"{\"allOf\":[{\"type\":\"object\",\"properties\":{\"a\":{\"const\":1}},\"required\":["
         "\"a\"]},{\"properties\":{\"b\":{\"const\":2}},\"required\":[\"b\"]}]}",
         "{\"a\":1,\"b\":2}", 1},
        {"{\"type\":\"array\",\"prefixItems\":[{\"type\":\"integer\"},{\"type\":\"string\"}]}",
         "[1, \"x\"]", 1},
        {"{\"type\":\"string\"}", "\"a\\u00e9\\n\"", 1},
        {"{\"type\":\"string\"}", "\"a\nb\"", 0}, /* a raw newline */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char msg[512] = "";
        int got = schema_accepts(cases[i].schema, cases[i].doc, msg, sizeof msg);
        CHECK_MSG(got == cases[i].want, "schema %s, doc %s: got %d (%s), expected %d",
                  cases[i].schema, cases[i].doc, got, msg, cases[i].want);
    }
    static const struct {
        const char *schema, *want;
    } bad[] = {
        {"{\"type\":\"string\",\"not\":{}}", "'not'"},
        {"{\"type\":\"object\",\"patternProperties\":{}}", "'patternProperties'"},
        {"{\"type\":\"string\",\"format\":\"email\"}", "'email'"},
        {"{\"type\":\"number\",\"minimum\":1}", "'minimum'"},
        {"{\"$ref\":\"http://x/y\"}", "$ref"},
        {"{\"$ref\":\"#/$defs/missing\"}", "points at nothing"},
        {"{\"type\":\"string\",\"pattern\":\"(?=a)\"}", "lookaround"},
        {"{\"type\":\"array\",\"uniqueItems\":true}", "'uniqueItems'"},
        {"{\"type\":\"bogus\"}", "unknown type"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char msg[512] = "";
        int got = schema_accepts(bad[i].schema, "1", msg, sizeof msg);
        CHECK_MSG(got == -1 && strstr(msg, bad[i].want), "schema %s: got %d '%s', expected '%s'",
                  bad[i].schema, got, msg, bad[i].want);
    }
    /* json_object: any object, nothing else */
    inf_gram *g;
    inf_err err;
    CHECK(inf_gram_json_object(&g, &err) == 0);
    inf_gram_vocab *v = vocab();
    CHECK(sentence(g, v, "{\"a\": [1, {\"b\": null}], \"c\": -1.5e3}") == 1);
    CHECK(sentence(g, v, "[1]") == 0);
    CHECK(sentence(g, v, "{\"a\" 1}") == 0);
    inf_gram_matcher *m;
    CHECK(inf_gram_matcher_create(&m, g, v, &err) == 0);
    check_mask(m, "json start");
    CHECK(inf_gram_matcher_accept_bytes(m, "{\"a\":", 5) == 0);
    check_mask(m, "json after key");
    CHECK(inf_gram_matcher_accept_bytes(m, " \"x", 3) == 0);
    check_mask(m, "json in string");
    inf_gram_matcher_free(m);
    inf_gram_vocab_free(v);
    inf_gram_free(g);
}

/* Forced tool calls: Qwen3's <tool_call> frame around a function's name and
 * arguments that follow its parameters schema. */
static int tool_sentence(const char *tools_json, const char *only, bool several, const char *doc,
                         char *msg, size_t cap) {
    json_error_t je;
    json_t *tools = json_loads(tools_json, 0, &je);
    if (!tools) return snprintf(msg, cap, "bad test tools: %s", je.text), -1;
    inf_gram *g;
    inf_err err;
    int rc = inf_gram_tool_calls(&g, tools, only, several, &err);
    json_decref(tools);
    if (rc) return snprintf(msg, cap, "%s", err.msg), -1;
    inf_gram_vocab *v = vocab();
    int ok = sentence(g, v, doc);
    inf_gram_vocab_free(v);
    inf_gram_free(g);
    return ok;
}

static void test_tool_calls(void) {
    const char *tools =
        "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":{\"type\":"
        "\"object\",\"properties\":{\"city\":{\"type\":\"string\"},\"unit\":{\"enum\":[\"c\","
        "\"f\"]}},\"required\":[\"city\"]}}},"
        "{\"type\":\"function\",\"function\":{\"name\":\"noop\"}},"
        "{\"type\":\"function\",\"name\":\"flat\",\"parameters\":{\"$defs\":{\"n\":{\"type\":"
        "\"integer\"}},\"type\":\"object\",\"properties\":{\"x\":{\"$ref\":\"#/$defs/n\"}},"
        "\"required\":[\"x\"]}},"
        "{\"name\":\"anthropic\",\"input_schema\":{\"type\":\"object\",\"properties\":{\"b\":{"
        "\"type\":\"boolean\"}},\"required\":[\"b\"]}}]";
#define CALL(name, args)                                                                           \
    "<tool_call>\n{\"name\": \"" name "\", \"arguments\": " args "}\n</tool_call>"
    static const struct {
        const char *only;
        bool several;
        const char *doc;
        int want;
    } cases[] = {
        {NULL, false, CALL("get_weather", "{\"city\": \"Paris\"}"), 1},
        {NULL, false, CALL("get_weather", "{\"city\": \"Paris\", \"unit\": \"f\"}"), 1},
        {NULL, false, CALL("get_weather", "{\"city\": \"Paris\", \"unit\": \"k\"}"), 0},
        {NULL, false, CALL("get_weather", "{\"unit\": \"c\"}"), 0}, /* city is required */
        {NULL, false, CALL("noop", "{}"), 1},
        {NULL, false, CALL("noop", "{\"any\": [1, null]}"), 1},
        {NULL, false, CALL("noop", "[1]"), 0}, /* arguments are an object */
        {NULL, false, CALL("flat", "{\"x\": 3}"), 1},
        {NULL, false, CALL("flat", "{\"x\": \"3\"}"), 0},
        {NULL, false, CALL("anthropic", "{\"b\": true}"), 1},
        {NULL, false, CALL("other", "{}"), 0},
        {NULL, false, "{\"name\": \"noop\", \"arguments\": {}}", 0}, /* the tags */
        {NULL, false, "<tool_call>\n{\"name\":\"noop\",\"arguments\":{}}\n</tool_call>", 1},
        {"noop", false, CALL("noop", "{}"), 1},
        {"noop", false, CALL("get_weather", "{\"city\": \"x\"}"), 0},
        {NULL, false, CALL("noop", "{}") "\n" CALL("flat", "{\"x\": 1}"), 0},
        {NULL, true, CALL("noop", "{}") "\n" CALL("flat", "{\"x\": 1}"), 1},
        {NULL, true, CALL("noop", "{}"), 1},
        {NULL, true, "", 0},
    };
#undef CALL
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char msg[512] = "";
        int got =
            tool_sentence(tools, cases[i].only, cases[i].several, cases[i].doc, msg, sizeof msg);
        CHECK_MSG(got == cases[i].want, "tool call %zu (%s): got %d (%s), expected %d: %s", i,
                  cases[i].only ? cases[i].only : "any", got, msg, cases[i].want, cases[i].doc);
    }
    static const struct {
        const char *tools, *only, *want;
    } bad[] = {
        {"[]", NULL, "non-empty array"},
        {"{}", NULL, "non-empty array"},
        {"[{\"type\":\"function\",\"function\":{\"name\":\"a\"}}]", "b",
         "'b', which is not in tools"},
        {"[{\"type\":\"retrieval\"}]", NULL, "tools[0].type"},
        {"[{\"type\":\"function\",\"function\":{}}]", NULL, "tools[0]: the function has no name"},
        {"[{\"type\":\"function\",\"function\":{\"name\":\"a\"}},{\"type\":\"function\","
         "\"function\":{\"name\":\"bad\",\"parameters\":{\"type\":\"object\",\"not\":{}}}}]",
         NULL, "tools[1] 'bad' parameters: json_schema: the keyword 'not'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char msg[512] = "";
        int got = tool_sentence(bad[i].tools, bad[i].only, false, "x", msg, sizeof msg);
        CHECK_MSG(got == -1 && strstr(msg, bad[i].want), "tools %s: got %d '%s', expected '%s'",
                  bad[i].tools, got, msg, bad[i].want);
    }
}

int main(void) {
    test_parse_errors();
    test_language();
    test_tokens();
    test_bounds();
    test_utf8_classes();
    test_memo();
    test_json_schema();
    test_tool_calls();
    printf("%d passed, %d failed\n", th_passed, th_failed);
    return th_failed != 0;
}
