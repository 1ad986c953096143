/* The server's text stages: whole-UTF-8 cutting, stop strings across token
 * boundaries (no prefix of a stop string ever released). Each input is also fed in every possible
 * split into pieces, and the released text must equal the one-piece result. */
#include <stdlib.h>

#include "harness.h"
#include "runtime/text.h"
#include "util/utf8.h"

/* Runs the stop matcher over text cut at the given byte offsets (cuts[n_cuts]
 * ascending); returns the released text (malloc'd), *stopped = matched.
 * After each push, checks that no released byte sequence ends with a proper
 * prefix of a stop string that the input later completes: the released text
 * must always be a prefix of the final answer. */
static char *run_stop(const char *const *stops, int n_stops, const char *text, const size_t *cuts,
                      int n_cuts, bool *stopped, const char *final_expect) {
    inf_stop s;
    inf_stop_init(&s, stops, n_stops);
    inf_buf out = {0};
    size_t at = 0, len = strlen(text);
    int rc = 0;
    for (int i = 0; i <= n_cuts && rc == 0; i++) {
        size_t end = i < n_cuts ? cuts[i] : len;
        rc = inf_stop_push(&s, &out, text + at, end - at);
        at = end;
        if (final_expect) {
            /* Never more than the final answer, at any moment. */
            CHECK_MSG(out.len <= strlen(final_expect) &&
                          !memcmp(out.data ? out.data : "", final_expect, out.len),
                      "released \"%.*s\" is not a prefix of \"%s\"", (int)out.len,
                      out.data ? out.data : "", final_expect);
        }
    }
    *stopped = rc == 1;
    if (rc == 0) inf_stop_flush(&s, &out);
    inf_stop_free(&s);
    if (!out.data) inf_buf_add(&out, "", 0);
    return out.data;
}

static void test_stop_all_splits(const char *const *stops, int n_stops, const char *text,
                                 const char *expect, bool expect_stop) {
    bool stopped;
    char *one = run_stop(stops, n_stops, text, NULL, 0, &stopped, expect);
    CHECK_STR(one, expect);
    CHECK_INT(stopped, expect_stop);
    free(one);
    size_t len = strlen(text);
    /* Every split into two and three pieces. */
    for (size_t a = 0; a <= len; a++) {
        for (size_t b = a; b <= len; b++) {
            size_t cuts[2] = {a, b};
            char *r = run_stop(stops, n_stops, text, cuts, 2, &stopped, expect);
            if (strcmp(r, expect) || stopped != expect_stop) {
                CHECK_MSG(0, "split %zu,%zu of \"%s\": got \"%s\" (stop %d), expected \"%s\"", a, b,
                          text, r, stopped, expect);
                free(r);
                return;
            }
            free(r);
        }
    }
    /* One byte at a time. */
    size_t *cuts = malloc(len * sizeof *cuts);
    for (size_t i = 0; i < len; i++)
        cuts[i] = i;
    char *r = run_stop(stops, n_stops, text, cuts, (int)len, &stopped, expect);
    CHECK_STR(r, expect);
    free(r);
    free(cuts);
}

static void test_stop(void) {
    const char *s1[] = {"</s>"};
    test_stop_all_splits(s1, 1, "Hello world", "Hello world", false);
    test_stop_all_splits(s1, 1, "Hello</s> world", "Hello", true);
    test_stop_all_splits(s1, 1, "a</b </s>", "a</b ", true);
    test_stop_all_splits(s1, 1, "<<</s", "<<</s", false); /* a prefix at the end is flushed */
    const char *s2[] = {"\n\n", "END", "ENDING"};
    test_stop_all_splits(s2, 3, "one\ntwo\n\nthree", "one\ntwo", true);
    test_stop_all_splits(s2, 3, "xxENxENDyy", "xxENx", true);
    test_stop_all_splits(s2, 3, "the ENDING", "the ", true); /* earliest match wins */
    /* A longer stop string that starts first but completes after a shorter
     * one inside it: the stream meets the shorter one first, whatever the
     * cuts (found by fuzz_server). */
    const char *s7[] = {"a ,t*the", "ere", "th"};
    test_stop_all_splits(s7, 3, "x a ,t*there", "x a ,t*", true);
    const char *s8[] = {"abcdef", "cd"};
    test_stop_all_splits(s8, 2, "xxabcdefyy", "xxab", true);
    const char *s3[] = {"aab"};
    test_stop_all_splits(s3, 1, "aaab", "a", true); /* overlapping self-prefix */
    test_stop_all_splits(s3, 1, "aaaa", "aaaa", false);
    const char *s4[] = {"é!"}; /* multi-byte stop string */
    test_stop_all_splits(s4, 1, "café! ok", "caf", true);
    test_stop_all_splits(s4, 1, "cafés", "cafés", false);
    /* Empty stop strings are ignored. */
    const char *s5[] = {"", "zz"};
    test_stop_all_splits(s5, 2, "abc", "abc", false);

    /* What is held is exactly the longest suffix that could still start a stop. */
    inf_stop s;
    const char *s6[] = {"STOP"};
    inf_stop_init(&s, s6, 1);
    inf_buf out = {0};
    CHECK_INT(inf_stop_push(&s, &out, "abcST", 5), 0);
    CHECK_STR(out.data, "abc");
    CHECK_INT(inf_stop_push(&s, &out, "x", 1), 0);
    CHECK_STR(out.data, "abcSTx");
    CHECK_INT(inf_stop_push(&s, &out, "STO", 3), 0);
    CHECK_STR(out.data, "abcSTx");
    CHECK_INT(inf_stop_push(&s, &out, "Pyz", 3), 1);
    CHECK_STR(out.data, "abcSTx");
    CHECK_INT(inf_stop_push(&s, &out, "more", 4), 1); /* done stays done */
    CHECK_STR(out.data, "abcSTx");
    inf_buf_free(&out);
    inf_stop_free(&s);
}

/* The stop matcher with end_after, over text cut at the given offsets:
 * the released text (malloc'd); *how = -2 none, -1 end_after, else the
 * index of the stop string that ended it. Checks at every push that what
 * was released is a prefix of the final answer. */
static char *run_after(const char *const *stops, int n_stops, const char *after, const char *text,
                       const size_t *cuts, int n_cuts, int *how, const char *expect) {
    inf_stop s;
    inf_stop_init(&s, stops, n_stops);
    inf_stop_set_end_after(&s, after);
    inf_buf out = {0};
    size_t at = 0, len = strlen(text);
    int rc = 0;
    for (int i = 0; i <= n_cuts && rc == 0; i++) {
        size_t end = i < n_cuts ? cuts[i] : len;
        rc = inf_stop_push(&s, &out, text + at, end - at);
        at = end;
        CHECK_MSG(out.len <= strlen(expect) && !memcmp(out.data ? out.data : "", expect, out.len),
                  "released \"%.*s\" is not a prefix of \"%s\"", (int)out.len,
                  out.data ? out.data : "", expect);
    }
    *how = rc != 1 ? -2 : s.after_matched ? -1 : s.stop_index;
    if (rc == 1) CHECK(s.done && (s.after_matched != (s.stop_index >= 0)));
    if (rc == 0) inf_stop_flush(&s, &out);
    inf_stop_free(&s);
    if (!out.data) inf_buf_add(&out, "", 0);
    return out.data;
}

/* Whole, every split into two and three pieces, and byte by byte: the same. */
static void after_all_splits(const char *const *stops, int n_stops, const char *after,
                             const char *text, const char *expect, int expect_how) {
    int how;
    size_t len = strlen(text);
    char *r = run_after(stops, n_stops, after, text, NULL, 0, &how, expect);
    CHECK_MSG(!strcmp(r, expect) && how == expect_how,
              "\"%s\": got \"%s\" (%d), expected \"%s\" (%d)", text, r, how, expect, expect_how);
    free(r);
    for (size_t a = 0; a <= len; a++) {
        for (size_t b = a; b <= len; b++) {
            size_t cuts[2] = {a, b};
            r = run_after(stops, n_stops, after, text, cuts, 2, &how, expect);
            bool ok = !strcmp(r, expect) && how == expect_how;
            if (!ok)
                CHECK_MSG(0, "split %zu,%zu of \"%s\": got \"%s\" (%d), expected \"%s\" (%d)", a, b,
                          text, r, how, expect, expect_how);
            free(r);
            if (!ok) return;
        }
    }
    size_t *cuts = malloc((len + 1) * sizeof *cuts);
    for (size_t i = 0; i < len; i++)
        cuts[i] = i;
    r = run_after(stops, n_stops, after, text, cuts, (int)len, &how, expect);
    CHECK_STR(r, expect);
    CHECK_INT(how, expect_how);
    free(r);
    free(cuts);
}

static void test_end_after(void) {
    const char *T = "</tool_call>";
    /* The reply ends right after the first call; the tag stays. */
    after_all_splits(
        NULL, 0, T,
        "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{}",
        "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>", -1);
    after_all_splits(NULL, 0, T, "no call </tool_cal> here </", "no call </tool_cal> here </", -2);
    after_all_splits(NULL, 0, T, "<</</tool_call>x", "<</</tool_call>", -1);
    after_all_splits(NULL, 0, "", "text", "text", -2); /* "" is none */
    /* Against stop strings: whichever completes first. */
    const char *s1[] = {"STOP"};
    after_all_splits(s1, 1, T, "a STOP b </tool_call>", "a ", 0);
    after_all_splits(s1, 1, T, "a </tool_call> STOP", "a </tool_call>", -1);
    /* A stop string inside end_after completes first: it wins. */
    const char *s2[] = {"tool"};
    after_all_splits(s2, 1, T, "x </tool_call>", "x </", 0);
    /* end_after inside a longer stop string that is not complete yet. */
    const char *s3[] = {"</tool_call> and more"};
    after_all_splits(s3, 1, T, "y </tool_call> and", "y </tool_call>", -1);
    /* The same string as stop and as end_after: the stop string wins. */
    const char *s4[] = {"zz", T};
    after_all_splits(s4, 2, T, "q</tool_call>r", "q", 1);
    /* Multi-byte, split inside characters. */
    after_all_splits(NULL, 0, "é!", "café! ok", "café!", -1);
    /* Which stop string: the index among the non-empty ones. */
    const char *s5[] = {"", "aa", "bb"};
    after_all_splits(s5, 3, NULL, "xbbyaa", "x", 1);
}

/* Pushes s[0..n) into a fresh stream in pieces of `step` bytes; the released text. */
static char *stream_all(const char *s, size_t n, size_t step, size_t *held_after_last) {
    inf_utf8_stream st = {{0}, 0};
    char *out = malloc(INF_UTF8_STREAM_OUT(n) + 8);
    size_t k = 0;
    for (size_t i = 0; i < n; i += step)
        k += inf_utf8_stream_push(&st, s + i, i + step <= n ? step : n - i, out + k);
    if (held_after_last) *held_after_last = (size_t)st.n_tail;
    k += inf_utf8_stream_flush(&st, out + k);
    out[k] = 0;
    return out;
}

static void test_utf8(void) {
    /* A character cut across pushes is held, then released whole. */
    inf_utf8_stream st = {{0}, 0};
    char o[64];
    CHECK_INT(inf_utf8_stream_push(&st, "a\xC3", 2, o), 1); /* é cut after its lead */
    CHECK_INT(st.n_tail, 1);
    CHECK_INT(inf_utf8_stream_push(&st, "\xA9", 1, o), 2);
    CHECK(!memcmp(o, "\xC3\xA9", 2));
    CHECK_INT(inf_utf8_stream_push(&st, "\xF0\x9F", 2, o), 0); /* emoji in three pushes */
    CHECK_INT(inf_utf8_stream_push(&st, "\x98", 1, o), 0);
    CHECK_INT(inf_utf8_stream_push(&st, "\x80x", 2, o), 5);
    CHECK(!memcmp(o, "\xF0\x9F\x98\x80x", 5));
    /* A held start broken by the next byte: one U+FFFD, then that byte. */
    CHECK_INT(inf_utf8_stream_push(&st, "\xE2\x82", 2, o), 0);
    CHECK_INT(inf_utf8_stream_push(&st, "z", 1, o), 4);
    CHECK(!memcmp(o, "\xEF\xBF\xBDz", 4));
    CHECK_INT(inf_utf8_stream_push(&st, "\xC3", 1, o), 0); /* unfinished at the end */
    CHECK_INT(inf_utf8_stream_flush(&st, o), 3);
    CHECK_INT(st.n_tail, 0);
    /* Whatever the cut, the stream gives what sanitize gives. */
    static const char *const cases[] = {"ok\xFF\xC3\xA9\xC3",
                                        "\xED\xA0\x80",
                                        "\xF0\x9F\x98\x80",
                                        "\x80\x80"
                                        "a",
                                        "\xE0\x80\xAF",
                                        "\xF4\x90\x80\x80",
                                        "a\xE2\x82\xAC"
                                        "b\xF0\x9F",
                                        "\xC2"};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        size_t n = strlen(cases[c]), m;
        char *want = inf_utf8_sanitize(cases[c], n, &m);
        CHECK(inf_utf8_valid_prefix(want, m) == m);
        for (size_t step = 1; step <= n; step++) {
            char *got = stream_all(cases[c], n, step, NULL);
            CHECK_MSG(!strcmp(got, want), "case %zu step %zu", c, step);
            free(got);
        }
        free(want);
    }

    size_t n;
    char *s = inf_utf8_sanitize("ok\xFFé\xC3", 6, &n);
    CHECK_STR(s, "ok\xEF\xBF\xBD\xC3\xA9\xEF\xBF\xBD"); /* a cut-off end is U+FFFD too */
    CHECK_INT(n, 10);
    free(s);
    s = inf_utf8_sanitize("\xED\xA0\x80", 3, &n); /* a surrogate is invalid */
    CHECK_STR(s, "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
    free(s);
    s = inf_utf8_sanitize("\xF0\x9F\x98\x80", 4, &n);
    CHECK_STR(s, "\xF0\x9F\x98\x80");
    free(s);
}

static void test_buf(void) {
    inf_buf b = {0};
    for (int i = 0; i < 1000; i++)
        inf_buf_printf(&b, "%d,", i);
    CHECK(b.len > 3000);
    CHECK(!strncmp(b.data, "0,1,2,", 6));
    inf_buf_consume(&b, 2);
    CHECK(!strncmp(b.data, "1,2,", 4));
    inf_buf_consume(&b, b.len + 5);
    CHECK_INT(b.len, 0);
    CHECK_STR(b.data, "");
    inf_buf_free(&b);
}

int main(void) {
    test_buf();
    test_utf8();
    test_stop();
    test_end_after();
    return th_report();
}
