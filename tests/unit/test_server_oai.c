/* OpenAI request validation (every field: type, range, errors naming the
 * field) and the response shapes, whole and streamed as SSE frames. */
#include <stdlib.h>

#include "harness.h"
#include "server/oai.h"
#include "server/api.h"

static int parse(srv_request *r, srv_kind k, const char *body, srv_error *e) {
    memset(e, 0, sizeof *e);
    return srv_request_parse(r, k, body, strlen(body), e);
}

/* Expects a 400 naming `param` (NULL: no param check). */
static void bad(srv_kind k, const char *body, const char *param) {
    srv_request r;
    srv_error e;
    int rc = parse(&r, k, body, &e);
    CHECK_MSG(rc == -1, "accepted: %s", body);
    if (rc == 0) {
        srv_request_free(&r);
        return;
    }
    CHECK_INT(e.status, 400);
    CHECK_STR(e.type, "invalid_request_error");
    if (param)
        CHECK_MSG(!strcmp(e.param, param), "%s: param '%s', expected '%s' (%s)", body, e.param,
                  param, e.msg);
    CHECK(e.msg[0] != 0);
}

#define MSG "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]"

static void test_chat_ok(void) {
    srv_request r;
    srv_error e;
    const char *body =
        "{\"model\":\"m\"," MSG ",\"max_tokens\":7,\"temperature\":0,\"top_p\":0.5,\"top_k\":3,"
        "\"min_p\":0.1,\"presence_penalty\":1.5,\"frequency_penalty\":-1,\"repeat_penalty\":1.1,"
        "\"seed\":42,\"stop\":[\"a\",\"bc\"],\"stream\":true,\"stream_options\":{\"include_usage\":"
        "true},\"logprobs\":true,\"top_logprobs\":5,\"n\":1,\"chat_template_kwargs\":{"
        "\"enable_thinking\":false},\"response_format\":{\"type\":\"json_object\"},"
        "\"unknown_field\":{\"x\":[1,2]}}";
    CHECK_INT(parse(&r, SRV_CHAT, body, &e), 0);
    CHECK_STR(r.model, "m");
    CHECK_INT(r.max_tokens, 7);
    CHECK(r.samp.temperature == 0);
    CHECK(r.samp.top_p == 0.5f);
    CHECK_INT(r.samp.top_k, 3);
    CHECK(fabsf(r.samp.min_p - 0.1f) < 1e-7f);
    CHECK(r.samp.presence_penalty == 1.5f);
    CHECK(r.samp.frequency_penalty == -1);
    CHECK(fabsf(r.samp.repeat_penalty - 1.1f) < 1e-6f);
    CHECK(r.samp.has_seed && r.samp.seed == 42);
    CHECK_INT(r.n_stop, 2);
    CHECK_STR(r.stop[1], "bc");
    CHECK(r.stream && r.include_usage && r.logprobs);
    CHECK_INT(r.top_logprobs, 5);
    CHECK(!r.enable_thinking);
    CHECK(r.grammar != NULL); /* json_object is enforced */
    CHECK_INT(json_array_size(r.messages), 1);
    srv_request_free(&r);

    /* Defaults: llama.cpp's sampling, no limit, thinking on; nulls mean default. */
    CHECK_INT(parse(&r, SRV_CHAT, "{" MSG ",\"stop\":null,\"max_tokens\":null,\"seed\":null}", &e),
              0);
    CHECK_INT(r.max_tokens, -1);
    CHECK(fabsf(r.samp.temperature - 0.8f) < 1e-7f);
    CHECK_INT(r.samp.top_k, 40);
    CHECK(!r.samp.has_seed && r.enable_thinking && !r.stream && r.n_stop == 0);
    srv_request_free(&r);

    /* max_completion_tokens; stop as one string; content as text parts. */
    CHECK_INT(parse(&r, SRV_CHAT,
                    "{\"messages\":[{\"role\":\"system\",\"content\":[{\"type\":\"text\",\"text\":"
                    "\"a\"},{\"type\":\"text\",\"text\":\"b\"}]},{\"role\":\"assistant\","
                    "\"content\":null,\"tool_calls\":[]}],\"max_completion_tokens\":3,"
                    "\"stop\":\"x\"}",
                    &e),
              0);
    CHECK_INT(r.max_tokens, 3);
    CHECK_INT(r.n_stop, 1);
    CHECK_STR(json_string_value(json_object_get(json_array_get(r.messages, 0), "content")), "ab");
    CHECK(json_is_null(json_object_get(json_array_get(r.messages, 1), "content")));
    srv_request_free(&r);
}

static void test_chat_bad(void) {
    { /* a NUL byte: jansson alone would accept the valid JSON before it */
        static const char body[] = "{\"prompt\":\"a\"}\0{\"max_tokens\":\"x\"}";
        srv_request r;
        srv_error e;
        CHECK_INT(srv_request_parse(&r, SRV_COMPLETION, body, sizeof body - 1, &e), -1);
        CHECK_INT(e.status, 400);
        CHECK(strstr(e.msg, "NUL byte") != NULL);
    }
    bad(SRV_CHAT, "{\"messages\": [", NULL); /* malformed JSON */
    bad(SRV_CHAT, "[1,2]", NULL);            /* not an object */
    bad(SRV_CHAT, "", NULL);                 /* empty body */
    bad(SRV_CHAT, "{}", "messages");
    bad(SRV_CHAT, "{\"messages\":\"hi\"}", "messages");
    bad(SRV_CHAT, "{\"messages\":[]}", "messages");
    bad(SRV_CHAT, "{\"messages\":[1]}", "messages[0]");
    bad(SRV_CHAT, "{\"messages\":[{\"content\":\"x\"}]}", "messages[0]");
    bad(SRV_CHAT, "{\"messages\":[{\"role\":\"wizard\",\"content\":\"x\"}]}", "messages[0]");
    bad(SRV_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":5}]}", "messages[0]");
    bad(SRV_CHAT, "{\"messages\":[{\"role\":\"user\"}]}", "messages[0]");
    bad(SRV_CHAT,
        "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\",\"image_url\":{}}]}"
        "]}",
        "messages[0]");
    bad(SRV_CHAT, "{" MSG ",\"model\":3}", "model");
    bad(SRV_CHAT, "{" MSG ",\"max_tokens\":\"10\"}", "max_tokens");
    bad(SRV_CHAT, "{" MSG ",\"max_tokens\":1.5}", "max_tokens");
    bad(SRV_CHAT, "{" MSG ",\"max_tokens\":0}", "max_tokens");
    bad(SRV_CHAT, "{" MSG ",\"max_tokens\":-3}", "max_tokens");
    bad(SRV_CHAT, "{" MSG ",\"max_completion_tokens\":true}", "max_completion_tokens");
    bad(SRV_CHAT, "{" MSG ",\"temperature\":\"hot\"}", "temperature");
    bad(SRV_CHAT, "{" MSG ",\"temperature\":2.5}", "temperature");
    bad(SRV_CHAT, "{" MSG ",\"temperature\":-0.1}", "temperature");
    bad(SRV_CHAT, "{" MSG ",\"top_p\":1.5}", "top_p");
    bad(SRV_CHAT, "{" MSG ",\"top_k\":2.5}", "top_k");
    bad(SRV_CHAT, "{" MSG ",\"top_k\":-1}", "top_k");
    bad(SRV_CHAT, "{" MSG ",\"min_p\":[]}", "min_p");
    bad(SRV_CHAT, "{" MSG ",\"presence_penalty\":3}", "presence_penalty");
    bad(SRV_CHAT, "{" MSG ",\"frequency_penalty\":\"x\"}", "frequency_penalty");
    bad(SRV_CHAT, "{" MSG ",\"repeat_penalty\":0}", "repeat_penalty");
    bad(SRV_CHAT, "{" MSG ",\"seed\":1.5}", "seed");
    bad(SRV_CHAT, "{" MSG ",\"stop\":5}", "stop");
    bad(SRV_CHAT, "{" MSG ",\"stop\":[\"a\",1]}", "stop");
    bad(SRV_CHAT,
        "{" MSG ",\"stop\":[\"1\",\"2\",\"3\",\"4\",\"5\",\"6\",\"7\",\"8\",\"9\",\"10\",\"11\","
        "\"12\",\"13\",\"14\",\"15\",\"16\",\"17\"]}",
        "stop");
    bad(SRV_CHAT, "{" MSG ",\"stream\":\"yes\"}", "stream");
    bad(SRV_CHAT, "{" MSG ",\"stream\":1}", "stream");
    bad(SRV_CHAT, "{" MSG ",\"ignore_eos\":\"x\"}", "ignore_eos");
    bad(SRV_CHAT, "{" MSG ",\"stream_options\":true}", "stream_options");
    bad(SRV_CHAT, "{" MSG ",\"stream_options\":{\"include_usage\":1}}",
        "stream_options.include_usage");
    bad(SRV_CHAT, "{" MSG ",\"logprobs\":2}", "logprobs");
    bad(SRV_CHAT, "{" MSG ",\"logprobs\":true,\"top_logprobs\":21}", "top_logprobs");
    bad(SRV_CHAT, "{" MSG ",\"top_logprobs\":2}", "top_logprobs"); /* needs logprobs */
    bad(SRV_CHAT, "{" MSG ",\"n\":2}", "n");
    bad(SRV_CHAT, "{" MSG ",\"n\":\"1\"}", "n");
    bad(SRV_CHAT, "{" MSG ",\"chat_template_kwargs\":[]}", "chat_template_kwargs");
    bad(SRV_CHAT, "{" MSG ",\"chat_template_kwargs\":{\"enable_thinking\":\"no\"}}",
        "chat_template_kwargs.enable_thinking");
    bad(SRV_CHAT, "{" MSG ",\"response_format\":{\"type\":\"json_schema\"}}",
        "response_format.json_schema");
    bad(SRV_CHAT, "{" MSG ",\"response_format\":{\"type\":\"xml\"}}", "response_format");
    /* a schema keyword the compiler does not know is a 400 naming it */
    bad(SRV_CHAT,
        "{" MSG ",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":"
        "\"x\",\"schema\":{\"type\":\"string\",\"not\":{}}}}}",
        "response_format.json_schema.schema");
    bad(SRV_CHAT, "{" MSG ",\"json_schema\":{\"type\":\"object\",\"if\":{}}}", "json_schema");
    bad(SRV_CHAT, "{" MSG ",\"grammar\":\"root ::= foo\"}", "grammar");
    bad(SRV_CHAT, "{" MSG ",\"grammar\":\"root ::= \\\"a\\\"\",\"json_schema\":{}}",
        "json_schema");
    bad(SRV_CHAT, "{" MSG ",\"response_format\":\"json\"}", "response_format");
    bad(SRV_CHAT, "{" MSG ",\"tools\":{}}", "tools");
}

static void test_completion(void) {
    srv_request r;
    srv_error e;
    CHECK_INT(parse(&r, SRV_COMPLETION, "{\"prompt\":\"Once\",\"logprobs\":3}", &e), 0);
    CHECK_STR(r.prompt, "Once");
    CHECK_INT(r.max_tokens, 16); /* OpenAI's default for completions */
    CHECK(r.logprobs);
    CHECK_INT(r.top_logprobs, 3);
    srv_request_free(&r);
    CHECK_INT(parse(&r, SRV_COMPLETION, "{\"prompt\":[\"One\"],\"max_tokens\":4}", &e), 0);
    CHECK_STR(r.prompt, "One");
    CHECK_INT(r.max_tokens, 4);
    srv_request_free(&r);
    CHECK_INT(parse(&r, SRV_COMPLETION, "{\"prompt\":[1,2,3]}", &e), 0);
    CHECK_INT(r.n_prompt_tokens, 3);
    CHECK_INT(r.prompt_tokens[2], 3);
    srv_request_free(&r);
    CHECK_INT(parse(&r, SRV_COMPLETION, "{\"prompt\":[[5,6]]}", &e), 0);
    CHECK_INT(r.n_prompt_tokens, 2);
    srv_request_free(&r);

    bad(SRV_COMPLETION, "{}", "prompt");
    bad(SRV_COMPLETION, "{\"prompt\":null}", "prompt");
    bad(SRV_COMPLETION, "{\"prompt\":5}", "prompt");
    bad(SRV_COMPLETION, "{\"prompt\":[]}", "prompt");
    bad(SRV_COMPLETION, "{\"prompt\":[\"a\",\"b\"]}", "prompt");
    bad(SRV_COMPLETION, "{\"prompt\":[1,-2]}", "prompt");
    bad(SRV_COMPLETION, "{\"prompt\":[1,\"x\"]}", "prompt");
    bad(SRV_COMPLETION, "{\"prompt\":\"x\",\"logprobs\":true}", "logprobs");
    bad(SRV_COMPLETION, "{\"prompt\":\"x\",\"logprobs\":30}", "logprobs");
}

static void test_error_json(void) {
    srv_error e;
    srv_error_set(&e, 400, "invalid_request_error", "context_length_exceeded", "messages",
                  "too long: %d", 5000);
    char *s = srv_error_json(&e);
    json_t *j = json_loads(s, 0, NULL);
    json_t *err = json_object_get(j, "error");
    CHECK_STR(json_string_value(json_object_get(err, "message")), "too long: 5000");
    CHECK_STR(json_string_value(json_object_get(err, "type")), "invalid_request_error");
    CHECK_STR(json_string_value(json_object_get(err, "code")), "context_length_exceeded");
    CHECK_STR(json_string_value(json_object_get(err, "param")), "messages");
    json_decref(j);
    free(s);
}

/* Splits an SSE byte stream into its data payloads; checks the framing. */
static int sse_payloads(const char *s, char **out, int max) {
    int n = 0;
    while (*s && n < max) {
        CHECK_MSG(!strncmp(s, "data: ", 6), "frame does not start with 'data: ': %.40s", s);
        const char *end = strstr(s, "\n\n");
        CHECK(end != NULL);
        if (!end) break;
        out[n++] = strndup(s + 6, (size_t)(end - s - 6));
        s = end + 2;
    }
    return n;
}

static const char *delta_field(json_t *chunk, const char *name) {
    json_t *c = json_array_get(json_object_get(chunk, "choices"), 0);
    return json_string_value(json_object_get(json_object_get(c, "delta"), name));
}

static const inf_reply_opts CHAT_OPTS = {.think = true};

static void test_stream_chat(void) {
    srv_resp_meta m;
    srv_resp_meta_init(&m, &srv_api_chat, "tiny", NULL);
    CHECK(!strncmp(m.id, "chatcmpl-", 9));
    char id[48];
    snprintf(id, sizeof id, "%s", m.id);
    srv_stream st;
    srv_stream_init(&st, &srv_api_chat, &m, &CHAT_OPTS, true);
    inf_buf out = {0};
    srv_stream_begin(&st, &out);
    srv_stream_text(&st, &out, "<th", 3, NULL); /* held: no frame */
    srv_stream_text(&st, &out, "ink>plan</think>\n\nHel", 21, NULL);
    srv_stream_text(&st, &out, "lo \xC3\xA9", 5, NULL);
    inf_timings tm = {.prompt_n = 5, .predicted_n = 3, .cache_n = 2};
    srv_outcome o = {.finish = INF_FINISH_LENGTH, .prompt_tokens = 5, .completion_tokens = 3,
                     .cached_tokens = 2, .timings = &tm};
    srv_stream_end(&st, &out, &o);
    srv_stream_free(&st);

    char *p[16];
    int n = sse_payloads(out.data, p, 16);
    CHECK_INT(n, 7); /* role, reasoning, content, content, finish, usage, [DONE] */
    json_t *j[16] = {0};
    for (int i = 0; i < n - 1; i++) {
        j[i] = json_loads(p[i], 0, NULL);
        CHECK_MSG(j[i] != NULL, "frame %d is not JSON: %s", i, p[i]);
        CHECK_STR(json_string_value(json_object_get(j[i], "object")), "chat.completion.chunk");
        CHECK_STR(json_string_value(json_object_get(j[i], "id")), id);
        CHECK_STR(json_string_value(json_object_get(j[i], "model")), "tiny");
    }
    if (n == 7) {
        CHECK_STR(delta_field(j[0], "role"), "assistant");
        CHECK_STR(delta_field(j[1], "reasoning_content"), "plan");
        CHECK_STR(delta_field(j[2], "content"), "Hel");
        CHECK_STR(delta_field(j[3], "content"), "lo \xC3\xA9");
        json_t *c4 = json_array_get(json_object_get(j[4], "choices"), 0);
        CHECK_STR(json_string_value(json_object_get(c4, "finish_reason")), "length");
        CHECK_INT(json_object_size(json_object_get(c4, "delta")), 0);
        CHECK(json_is_array(json_object_get(j[5], "choices")));
        CHECK_INT(json_array_size(json_object_get(j[5], "choices")), 0);
        json_t *u = json_object_get(j[5], "usage");
        CHECK_INT(json_integer_value(json_object_get(u, "prompt_tokens")), 5);
        CHECK_INT(json_integer_value(json_object_get(u, "completion_tokens")), 3);
        CHECK_INT(json_integer_value(json_object_get(u, "total_tokens")), 8);
        CHECK_INT(json_integer_value(
                      json_object_get(json_object_get(u, "prompt_tokens_details"), "cached_tokens")),
                  2);
        CHECK_STR(p[6], "[DONE]");
    }
    for (int i = 0; i < n; i++) {
        json_decref(j[i]);
        free(p[i]);
    }
    inf_buf_free(&out);
}

static void test_stream_completion(void) {
    srv_resp_meta m;
    srv_resp_meta_init(&m, &srv_api_completions, "tiny", NULL);
    CHECK(!strncmp(m.id, "cmpl-", 5));
    srv_stream st;
    inf_reply_opts plain = {0}; /* completions never split */
    srv_stream_init(&st, &srv_api_completions, &m, &plain, false);
    inf_buf out = {0};
    srv_stream_begin(&st, &out);
    CHECK_INT(out.len, 0);
    srv_stream_text(&st, &out, "<think>x", 8, NULL);
    srv_outcome o = {.finish = INF_FINISH_STOP, .prompt_tokens = 1, .completion_tokens = 2};
    srv_stream_end(&st, &out, &o);
    srv_stream_free(&st);
    char *p[8];
    int n = sse_payloads(out.data, p, 8);
    CHECK_INT(n, 3); /* text, finish, [DONE]: no usage chunk without include_usage */
    if (n == 3) {
        json_t *a = json_loads(p[0], 0, NULL), *b = json_loads(p[1], 0, NULL);
        json_t *ca = json_array_get(json_object_get(a, "choices"), 0);
        CHECK_STR(json_string_value(json_object_get(ca, "text")), "<think>x");
        CHECK_STR(json_string_value(json_object_get(a, "object")), "text_completion");
        json_t *cb = json_array_get(json_object_get(b, "choices"), 0);
        CHECK_STR(json_string_value(json_object_get(cb, "finish_reason")), "stop");
        CHECK_STR(p[2], "[DONE]");
        json_decref(a);
        json_decref(b);
    }
    for (int i = 0; i < n; i++)
        free(p[i]);
    inf_buf_free(&out);

    srv_error e;
    srv_error_set(&e, 500, "server_error", NULL, NULL, "boom");
    inf_buf_clear(&out);
    srv_api_completions.stream_error(&out, &e);
    n = sse_payloads(out.data, p, 8);
    CHECK_INT(n, 2);
    if (n == 2) {
        CHECK(strstr(p[0], "\"error\"") != NULL);
        CHECK_STR(p[1], "[DONE]");
    }
    for (int i = 0; i < n; i++)
        free(p[i]);
    inf_buf_free(&out);
}

static int fake_piece(void *ctx, int32_t id, char *buf, int cap) {
    return snprintf(buf, (size_t)cap, "t%d", id);
}

static void test_whole_response(void) {
    srv_resp_meta m;
    srv_resp_meta_init(&m, &srv_api_chat, "tiny", NULL);
    inf_logprob lp = {
        .id = 7, .logprob = -0.5f, .n_top = 2, .top_id = {7, 3}, .top_logprob = {-0.5f, -1.5f}};
    json_t *lpj = srv_logprobs_json(SRV_CHAT, &lp, 1, 0, fake_piece, NULL);
    inf_timings tm = {
        .cache_n = 2, .prompt_n = 4, .prompt_ms = 10, .predicted_n = 1, .predicted_ms = 5};
    const char *text = "<think>r</think>\n\nbad \xFF byte";
    srv_outcome o = {.finish = INF_FINISH_STOP, .prompt_tokens = 6, .completion_tokens = 1,
                     .cached_tokens = 2, .timings = &tm, .logprobs = lpj};
    char *s = srv_whole_body(&srv_api_chat, &m, &CHAT_OPTS, text, strlen(text), &o);
    json_decref(lpj);
    json_t *j = json_loads(s, 0, NULL);
    CHECK(j != NULL);
    CHECK_STR(json_string_value(json_object_get(j, "object")), "chat.completion");
    json_t *c = json_array_get(json_object_get(j, "choices"), 0);
    json_t *msg = json_object_get(c, "message");
    CHECK_STR(json_string_value(json_object_get(msg, "role")), "assistant");
    CHECK_STR(json_string_value(json_object_get(msg, "content")), "bad \xEF\xBF\xBD byte");
    CHECK_STR(json_string_value(json_object_get(msg, "reasoning_content")), "r");
    CHECK_STR(json_string_value(json_object_get(c, "finish_reason")), "stop");
    json_t *lc = json_array_get(json_object_get(json_object_get(c, "logprobs"), "content"), 0);
    CHECK_STR(json_string_value(json_object_get(lc, "token")), "t7");
    CHECK_INT(json_array_size(json_object_get(lc, "top_logprobs")), 2);
    CHECK_INT(json_array_size(json_object_get(lc, "bytes")), 2);
    json_t *t = json_object_get(j, "timings");
    CHECK_INT(json_integer_value(json_object_get(t, "cache_n")), 2);
    CHECK(fabs(json_real_value(json_object_get(t, "prompt_per_second")) - 400) < 1e-9);
    CHECK_INT(json_integer_value(json_object_get(json_object_get(j, "usage"), "total_tokens")), 7);
    json_decref(j);
    free(s);

    /* Completion logprobs: tokens, token_logprobs, top_logprobs, text_offset. */
    inf_logprob two[2] = {lp, lp};
    two[1].id = 12;
    json_t *cl = srv_logprobs_json(SRV_COMPLETION, two, 2, 10, fake_piece, NULL);
    CHECK_STR(json_string_value(json_array_get(json_object_get(cl, "tokens"), 1)), "t12");
    CHECK_INT(json_integer_value(json_array_get(json_object_get(cl, "text_offset"), 1)), 12);
    CHECK(json_is_object(json_array_get(json_object_get(cl, "top_logprobs"), 0)));
    json_decref(cl);
}

/* Tool calls: the whole body's message, and the same message assembled from
 * the chunks of the text streamed one byte at a time (as OpenAI's clients
 * assemble tool_calls: by index, id and name first, arguments appended). */
static void test_tool_calls(void) {
    static const inf_reply_opts TOOLS = {.think = true, .tool_calls = true};
    const char *text = "<think>\nplan\n</think>\n\nChecking.\n<tool_call>\n{\"name\": \"get_weather\", "
                       "\"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n<tool_call>\n{\"name\": "
                       "\"now\", \"arguments\": {}}\n</tool_call>";
    srv_outcome o = {.finish = INF_FINISH_STOP, .prompt_tokens = 3, .completion_tokens = 9};
    srv_resp_meta m;
    srv_resp_meta_init(&m, &srv_api_chat, "tiny", NULL);
    char *s = srv_whole_body(&srv_api_chat, &m, &TOOLS, text, strlen(text), &o);
    json_t *j = json_loads(s, 0, NULL);
    free(s);
    json_t *c = json_array_get(json_object_get(j, "choices"), 0);
    json_t *msg = json_object_get(c, "message");
    CHECK_STR(json_string_value(json_object_get(c, "finish_reason")), "tool_calls");
    CHECK_STR(json_string_value(json_object_get(msg, "content")), "Checking.");
    CHECK_STR(json_string_value(json_object_get(msg, "reasoning_content")), "plan");
    json_t *calls = json_object_get(msg, "tool_calls");
    CHECK_INT(json_array_size(calls), 2);
    json_t *f0 = json_object_get(json_array_get(calls, 0), "function");
    CHECK_STR(json_string_value(json_object_get(f0, "name")), "get_weather");
    CHECK_STR(json_string_value(json_object_get(f0, "arguments")), "{\"city\": \"Paris\"}");
    const char *id0 = json_string_value(json_object_get(json_array_get(calls, 0), "id"));
    const char *id1 = json_string_value(json_object_get(json_array_get(calls, 1), "id"));
    CHECK(id0 && id1 && !strncmp(id0, "call_", 5) && strcmp(id0, id1));

    srv_stream st;
    srv_stream_init(&st, &srv_api_chat, &m, &TOOLS, false);
    inf_buf out = {0};
    srv_stream_begin(&st, &out);
    for (size_t i = 0; text[i]; i++)
        srv_stream_text(&st, &out, text + i, 1, NULL);
    srv_stream_end(&st, &out, &o);
    srv_stream_free(&st);
    char *p[64];
    int n = sse_payloads(out.data, p, 64);
    inf_buf content = {0}, args[2] = {{0}};
    const char *names[2] = {0}, *ids[2] = {0}, *finish = NULL;
    json_t *keep = json_array();
    for (int i = 0; i < n - 1; i++) {
        json_t *ch = json_loads(p[i], 0, NULL);
        json_array_append_new(keep, ch);
        json_t *c0 = json_array_get(json_object_get(ch, "choices"), 0);
        json_t *d = json_object_get(c0, "delta");
        const char *t = json_string_value(json_object_get(d, "content"));
        if (t) inf_buf_adds(&content, t);
        if (json_is_string(json_object_get(c0, "finish_reason")))
            finish = json_string_value(json_object_get(c0, "finish_reason"));
        size_t k;
        json_t *tc;
        json_array_foreach(json_object_get(d, "tool_calls"), k, tc) {
            int idx = (int)json_integer_value(json_object_get(tc, "index"));
            CHECK(idx == 0 || idx == 1);
            if (idx != 0 && idx != 1) continue;
            json_t *fn = json_object_get(tc, "function");
            if (json_object_get(tc, "id")) ids[idx] = json_string_value(json_object_get(tc, "id"));
            if (json_object_get(fn, "name")) names[idx] = json_string_value(json_object_get(fn, "name"));
            const char *a = json_string_value(json_object_get(fn, "arguments"));
            if (a) inf_buf_adds(&args[idx], a);
        }
    }
    CHECK_STR(content.data, "Checking.");
    CHECK_STR(finish, "tool_calls");
    CHECK_STR(names[0], "get_weather");
    CHECK_STR(names[1], "now");
    CHECK_STR(args[0].data, "{\"city\": \"Paris\"}");
    CHECK_STR(args[1].data, "{}");
    CHECK_STR(ids[0], id0);
    CHECK_STR(ids[1], id1);
    for (int i = 0; i < n; i++)
        free(p[i]);
    json_decref(keep);
    json_decref(j);
    inf_buf_free(&content);
    inf_buf_free(&args[0]);
    inf_buf_free(&args[1]);
    inf_buf_free(&out);
}

int main(void) {
    test_chat_ok();
    test_chat_bad();
    test_completion();
    test_error_json();
    test_stream_chat();
    test_stream_completion();
    test_whole_response();
    test_tool_calls();
    return th_report();
}
