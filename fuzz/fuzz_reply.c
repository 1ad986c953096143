/* libFuzzer target: the reply parser (runtime/reply.h) over arbitrary model
 * output. The first byte picks the options (bit 0 think, bit 1
 * start_in_think, bit 2 tool_calls); the rest is the output. Checks:
 * - the parts are the same whole, split in two at every byte (at 64 points
 *   past 512 bytes), in three, and byte by byte (up to 4 KiB);
 * - no byte is invented: the non-whitespace bytes of the text and reasoning
 *   parts, in order, are a subsequence of the output's;
 * - no byte is lost: every non-whitespace byte outside the tags and outside
 *   <tool_call>...</tool_call> spans is in a text or reasoning part, in
 *   order; without tool calls the split is exact (reasoning = what lies
 *   between the opening <think> and the first </think>, text = the rest;
 *   with think off the text is the output byte for byte);
 * - every tool call has a name and arguments that parse as a JSON object. */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/reply.h"

static bool ws(char c) {
    return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

/* Appends the non-whitespace bytes of s[0, n) to b. */
static void nonws(inf_buf *b, const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!ws(s[i])) inf_buf_add(b, s + i, 1);
}

static void parse(const inf_reply_opts *o, const char *s, size_t n, const size_t *cuts, int n_cuts,
                  inf_parts *out) {
    inf_reply r;
    inf_reply_init(&r, o);
    size_t at = 0;
    for (int i = 0; i <= n_cuts; i++) {
        size_t end = i < n_cuts ? cuts[i] : n;
        if (inf_reply_push(&r, out, s + at, end - at)) abort(); /* OOM is not expected here */
        at = end;
    }
    if (inf_reply_flush(&r, out)) abort();
    inf_reply_free(&r);
}

static bool same(const inf_parts *a, const inf_parts *b) {
    if (a->n != b->n) return false;
    for (int i = 0; i < a->n; i++) {
        const inf_part *x = &a->v[i], *y = &b->v[i];
        if (x->kind != y->kind || x->n != y->n || memcmp(x->text, y->text, x->n)) return false;
        if ((x->name == NULL) != (y->name == NULL) || (x->name && strcmp(x->name, y->name)))
            return false;
    }
    return true;
}

/* a[0, na) is a subsequence of b[0, nb). */
static bool subsequence(const char *a, size_t na, const char *b, size_t nb) {
    size_t j = 0;
    for (size_t i = 0; i < na; i++) {
        while (j < nb && b[j] != a[i])
            j++;
        if (j++ >= nb) return false;
    }
    return true;
}

static const char *find(const char *s, size_t n, size_t from, const char *t) {
    return from <= n ? memmem(s + from, n - from, t, strlen(t)) : NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    inf_reply_opts o = {
        .think = data[0] & 1, .start_in_think = data[0] & 2, .tool_calls = data[0] & 4};
    const char *s = (const char *)data + 1;
    size_t n = size - 1;

    inf_parts whole = {0}, other = {0};
    parse(&o, s, n, NULL, 0, &whole);

    /* Splits. */
    size_t step = n <= 512 ? 1 : n / 64;
    for (size_t k = 0; k <= n; k += step) {
        size_t cuts[2] = {k, k + (n - k) / 2};
        for (int nc = 1; nc <= 2; nc++) {
            inf_parts_clear(&other);
            parse(&o, s, n, cuts, nc, &other);
            if (!same(&whole, &other)) abort();
        }
    }
    if (n <= 4096) {
        size_t *cuts = malloc((n + 1) * sizeof *cuts);
        for (size_t i = 0; i < n; i++)
            cuts[i] = i;
        inf_parts_clear(&other);
        parse(&o, s, n, cuts, (int)n, &other);
        free(cuts);
        if (!same(&whole, &other)) abort();
    }

    /* The bytes. */
    inf_buf in = {0}, kept = {0}, reasoning = {0}, text = {0}, outside = {0};
    nonws(&in, s, n);
    for (int i = 0; i < whole.n; i++) {
        const inf_part *p = &whole.v[i];
        if (p->kind == INF_PART_TOOL_CALL) {
            if (!o.tool_calls || !p->name || !p->name[0]) abort();
            json_error_t je;
            json_t *a = json_loadb(p->text, p->n, 0, &je);
            if (!json_is_object(a)) abort();
            json_decref(a);
            continue;
        }
        if (p->name || p->n == 0) abort();
        if (p->kind == INF_PART_REASONING && !o.think) abort();
        nonws(&kept, p->text, p->n);
        nonws(p->kind == INF_PART_REASONING ? &reasoning : &text, p->text, p->n);
    }
    if (!subsequence(kept.data, kept.len, in.data, in.len)) abort();

    /* Outside the tags and the call spans (a superset of what the parser
     * may drop): all kept. */
    for (size_t i = 0; i < n;) {
        const char *call =
            o.tool_calls && !memcmp(s + i, "<tool_call>", n - i < 11 ? n - i : 11) && n - i >= 11
                ? s + i
                : NULL;
        if (call) {
            const char *close = find(s, n, i + 11, "</tool_call>");
            if (close) {
                i = (size_t)(close - s) + 12;
                continue;
            }
        }
        if (o.think && n - i >= 7 && !memcmp(s + i, "<think>", 7)) {
            i += 7;
            continue;
        }
        if (o.think && n - i >= 8 && !memcmp(s + i, "</think>", 8)) {
            i += 8;
            continue;
        }
        nonws(&outside, s + i, 1);
        i++;
    }
    if (!subsequence(outside.data, outside.len, kept.data, kept.len)) abort();

    /* Without tool calls the split is exact. */
    if (!o.tool_calls) {
        if (!o.think) {
            inf_buf all = {0};
            for (int i = 0; i < whole.n; i++)
                inf_buf_add(&all, whole.v[i].text, whole.v[i].n);
            if (all.len != n || memcmp(all.data ? all.data : "", s, n)) abort();
            inf_buf_free(&all);
        } else {
            size_t at = 0;
            bool in_think = o.start_in_think;
            if (!in_think) {
                while (at < n && ws(s[at]))
                    at++;
                in_think = n - at >= 7 && !memcmp(s + at, "<think>", 7);
                at = in_think ? at + 7 : 0;
            }
            inf_buf want_r = {0}, want_t = {0};
            if (in_think) {
                const char *close = find(s, n, at, "</think>");
                size_t end = close ? (size_t)(close - s) : n;
                nonws(&want_r, s + at, end - at);
                if (close) nonws(&want_t, s + end + 8, n - end - 8);
            } else {
                nonws(&want_t, s, n);
            }
            if (want_r.len != reasoning.len ||
                memcmp(want_r.data ? want_r.data : "", reasoning.data ? reasoning.data : "",
                       want_r.len))
                abort();
            if (want_t.len != text.len ||
                memcmp(want_t.data ? want_t.data : "", text.data ? text.data : "", want_t.len))
                abort();
            inf_buf_free(&want_r);
            inf_buf_free(&want_t);
        }
    }
    inf_buf_free(&in);
    inf_buf_free(&kept);
    inf_buf_free(&reasoning);
    inf_buf_free(&text);
    inf_buf_free(&outside);
    inf_parts_free(&whole);
    inf_parts_free(&other);
    return 0;
}
