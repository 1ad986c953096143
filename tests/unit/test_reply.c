/* The reply parser (runtime/reply.h): reasoning, text and Qwen3 tool calls
 * out of a model's output. Every case is also fed cut at every byte and one
 * byte at a time; the parts must be the same as for the whole text, and no
 * partial tag may leak into a part before it is decided. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "runtime/reply.h"

/* The parts as one string: "R[...]" reasoning, "T[...]" text,
 * "C[name|args]" a call. */
static void describe(const inf_parts *p, inf_buf *d) {
    for (int i = 0; i < p->n; i++) {
        const inf_part *q = &p->v[i];
        if (q->kind == INF_PART_TOOL_CALL)
            inf_buf_printf(d, "C[%s|%s]", q->name, q->text);
        else
            inf_buf_printf(d, "%c[%s]", q->kind == INF_PART_TEXT ? 'T' : 'R', q->text);
    }
}

static void reply_case(inf_reply_opts o, const char *text, const char *expect) {
    size_t len = strlen(text);
    for (size_t cut = 0; cut <= len + 1; cut++) {
        inf_reply r;
        inf_reply_init(&r, &o);
        inf_parts all = {0}, step = {0};
        /* each push's parts are appended to `all` as a streaming writer would */
        if (cut <= len) {
            inf_reply_push(&r, &step, text, cut);
            inf_parts_append(&all, &step);
            inf_parts_clear(&step);
            inf_reply_push(&r, &step, text + cut, len - cut);
        } else {
            for (size_t i = 0; i < len; i++) {
                inf_reply_push(&r, &step, text + i, 1);
                inf_parts_append(&all, &step);
                inf_parts_clear(&step);
            }
        }
        inf_reply_flush(&r, &step);
        inf_parts_append(&all, &step);
        inf_buf d = {0};
        describe(&all, &d);
        bool ok = !strcmp(d.data ? d.data : "", expect);
        CHECK_MSG(ok, "\"%s\" cut at %zu: %s, expected %s", text, cut, d.data ? d.data : "",
                  expect);
        inf_buf_free(&d);
        inf_parts_free(&all);
        inf_parts_free(&step);
        inf_reply_free(&r);
        if (!ok) return;
    }
}

static const inf_reply_opts CHAT = {.think = true};
static const inf_reply_opts IN_THINK = {.think = true, .start_in_think = true};
static const inf_reply_opts TOOLS = {.think = true, .tool_calls = true};
static const inf_reply_opts PLAIN = {.tool_calls = false};

static void test_think(void) {
    reply_case(CHAT, "<think>\nLet me see.\n</think>\n\nThe answer is 4.",
               "R[Let me see.]T[The answer is 4.]");
    reply_case(CHAT, "No thinking here.", "T[No thinking here.]");
    reply_case(CHAT, "<think>\n\n</think>\n\nHi", "T[Hi]");
    reply_case(CHAT, "  <thinking is a word", "T[  <thinking is a word]");
    reply_case(CHAT, "Say <think> later", "T[Say <think> later]");          /* only at the start */
    reply_case(CHAT, "<think>a < b </ c </think", "R[a < b </ c </think]"); /* never closed */
    reply_case(CHAT, "<think>x</think>y</think>z", "R[x]T[y</think>z]");
    reply_case(IN_THINK, "\nreasoning\n</think>\n\nanswer", "R[reasoning]T[answer]");
    reply_case(CHAT, "<thi", "T[<thi]");
    reply_case(CHAT, "<think>one\n\ntwo\n</think>ok", "R[one\n\ntwo]T[ok]");
    /* without tools a call is text */
    reply_case(CHAT, "<tool_call>\n{\"name\": \"f\"}\n</tool_call>",
               "T[<tool_call>\n{\"name\": \"f\"}\n</tool_call>]");
    /* completions: everything is text */
    reply_case(PLAIN, "<think>x</think> <tool_call>", "T[<think>x</think> <tool_call>]");
}

static void test_calls(void) {
    /* one call, arguments as the model wrote them */
    reply_case(TOOLS,
               "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", "
               "\"n\": 0.1}}\n</tool_call>",
               "C[get_weather|{\"city\": \"Paris\", \"n\": 0.1}]");
    /* text before, two calls, whitespace between and after dropped */
    reply_case(TOOLS,
               "<think>\nplan\n</think>\n\nLet me check.\n<tool_call>\n{\"name\": \"a\", "
               "\"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"arguments\": {\"x\": [1, "
               "{\"y\": \"}\"}]}, \"name\": \"b\"}\n</tool_call>\n",
               "R[plan]T[Let me check.]C[a|{}]C[b|{\"x\": [1, {\"y\": \"}\"}]}]");
    /* a call opened inside <think> ends the reasoning */
    reply_case(TOOLS,
               "<think>\nhmm\n<tool_call>{\"name\": \"f\", \"arguments\": {\"k\": 1}}</tool_call>",
               "R[hmm]C[f|{\"k\": 1}]");
    /* arguments as a string holding an object; no arguments */
    reply_case(TOOLS, "<tool_call>{\"name\": \"f\", \"arguments\": \"{\\\"a\\\": 2}\"}</tool_call>",
               "C[f|{\"a\": 2}]");
    reply_case(TOOLS, "<tool_call>{\"name\": \"f\"}</tool_call>", "C[f|{}]");
    /* an escaped key: re-serialized */
    reply_case(TOOLS,
               "<tool_call>{\"name\": \"f\", \"\\u0061rguments\": {\"a\": true}}</tool_call>",
               "C[f|{\"a\":true}]");
    /* invalid calls come back as text, byte for byte */
    reply_case(TOOLS, "Hi <tool_call>{\"name\": \"f\", \"arguments\": {oops}}</tool_call> there",
               "T[Hi<tool_call>{\"name\": \"f\", \"arguments\": {oops}}</tool_call>there]");
    reply_case(TOOLS, "<tool_call>{\"name\": 3}</tool_call>",
               "T[<tool_call>{\"name\": 3}</tool_call>]");
    reply_case(TOOLS, "<tool_call>{\"name\": \"f\", \"arguments\": [1]}</tool_call>",
               "T[<tool_call>{\"name\": \"f\", \"arguments\": [1]}</tool_call>]");
    reply_case(TOOLS, "<tool_call>{\"name\": \"f\", \"arguments\": {}, \"x\": 1}</tool_call>",
               "T[<tool_call>{\"name\": \"f\", \"arguments\": {}, \"x\": 1}</tool_call>]");
    /* cut off inside a call */
    reply_case(TOOLS, "ok <tool_call>{\"name\": \"f\", \"argu",
               "T[ok<tool_call>{\"name\": \"f\", \"argu]");
    /* a partial open tag at the end is text */
    reply_case(TOOLS, "a <tool_c", "T[a <tool_c]");
    reply_case(TOOLS, "a < b", "T[a < b]");
    /* text after a call */
    reply_case(TOOLS, "<tool_call>{\"name\": \"f\"}</tool_call>\n\nDone.", "C[f|{}]T[Done.]");
}

/* Streaming: nothing of a partial tag, nor the whitespace before one, leaks. */
static void test_stream(void) {
    inf_reply r;
    inf_reply_init(&r, &TOOLS);
    inf_parts p = {0};
    inf_reply_push(&r, &p, "Sure. <tool", 11);
    CHECK_INT(p.n, 1);
    CHECK_STR(p.v[0].text, "Sure.");
    inf_parts_clear(&p);
    inf_reply_push(&r, &p, "_call>{\"name\": \"f\"", 18);
    CHECK_INT(p.n, 0);
    inf_reply_push(&r, &p, "}</tool_call>", 13);
    CHECK_INT(p.n, 1);
    CHECK(p.v[0].kind == INF_PART_TOOL_CALL);
    CHECK_STR(p.v[0].name, "f");
    CHECK_INT(inf_parts_calls(&p), 1);
    inf_parts_free(&p);
    inf_reply_free(&r);
}

int main(void) {
    test_think();
    test_calls();
    test_stream();
    return th_report();
}
