/* OpenAI request validation (every field: type, range, errors naming the
 * field) and the response shapes, whole and streamed as SSE frames. */
#include <math.h>
#include <stdlib.h>

#include "harness.h"
#include "server/embd.h"
#include "server/oai.h"
#include "server/api.h"

static int parse(srv_request *r, srv_kind k, const char *body, srv_error *e) {
    memset(e, 0, sizeof *e);
    return srv_request_parse(r, k, body, strlen(body), NULL, e);
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
    /* an assistant's null content is "" (Qwen3's template needs a string) */
    CHECK_STR(json_string_value(json_object_get(json_array_get(r.messages, 1), "content")), "");
    CHECK(!json_object_get(json_array_get(r.messages, 1), "tool_calls")); /* [] dropped */
    srv_request_free(&r);
}

static void test_chat_bad(void) {
    { /* a NUL byte: jansson alone would accept the valid JSON before it */
        static const char body[] = "{\"prompt\":\"a\"}\0{\"max_tokens\":\"x\"}";
        srv_request r;
        srv_error e;
        CHECK_INT(srv_request_parse(&r, SRV_COMPLETION, body, sizeof body - 1, NULL, &e), -1);
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
    {
        /* an image: the 400 says why (the text model only), not just "bad part" */
        srv_request r;
        srv_error e;
        const char *img = "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\","
                          "\"text\":\"what is this?\"},{\"type\":\"image_url\",\"image_url\":"
                          "{\"url\":\"data:image/png;base64,AA==\"}}]}]}";
        CHECK(parse(&r, SRV_CHAT, img, &e) == -1);
        CHECK_MSG(strstr(e.msg, "image_url") && strstr(e.msg, "text part only"), "%s", e.msg);
    }
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
    bad(SRV_CHAT, "{" MSG ",\"grammar\":\"root ::= \\\"a\\\"\",\"json_schema\":{}}", "json_schema");
    bad(SRV_CHAT, "{" MSG ",\"response_format\":\"json\"}", "response_format");
    bad(SRV_CHAT, "{" MSG ",\"tools\":{}}", "tools");
}

/* ---- tools, tool_choice, messages as templates read them, reasoning ---- */

/* Whether s is a whole sentence of g (a vocabulary of the 256 bytes). */
static int byte_piece(void *ud, int32_t id, char *buf, int cap) {
    buf[0] = (char)id;
    return 1;
}
static inf_gram_tok_kind byte_kind(void *ud, int32_t id) {
    return INF_GRAM_TOK_TEXT;
}
static bool gram_accepts(const inf_gram *g, const char *s, size_t n) {
    inf_gram_vocab *v;
    inf_gram_matcher *m;
    inf_err err;
    if (inf_gram_vocab_create(&v, 256, byte_piece, byte_kind, NULL, &err)) return false;
    bool ok = false;
    if (!inf_gram_matcher_create(&m, g, v, &err)) {
        ok = !inf_gram_matcher_accept_bytes(m, s, n) && inf_gram_matcher_can_end(m);
        inf_gram_matcher_free(m);
    }
    inf_gram_vocab_free(v);
    return ok;
}

#define TOOL(name, params)                                                                         \
    "{\"type\":\"function\",\"function\":{\"name\":\"" name "\",\"description\":\"d\","            \
    "\"parameters\":" params "}}"
#define WEATHER                                                                                    \
    TOOL("get_weather", "{\"type\":\"object\",\"properties\":{\"city\":{\"type\":"                 \
                        "\"string\"}},\"required\":[\"city\"]}")
#define OAI_TOOLS "\"tools\":[" WEATHER "," TOOL("search", "{\"type\":\"object\"}") "]"

static void test_tools(void) {
    srv_request r;
    srv_error e;
    /* auto (the default): tools offered, no grammar, parallel calls allowed */
    CHECK_INT(parse(&r, SRV_CHAT, "{" MSG "," OAI_TOOLS "}", &e), 0);
    CHECK(r.tools && json_array_size(r.tools) == 2);
    CHECK_INT(r.tool_choice, SRV_TOOLS_AUTO);
    CHECK(r.parallel_tool_calls && !r.grammar);
    inf_gen_params gp;
    srv_request_gen_params(&r, &gp);
    CHECK(gp.end_after == NULL);
    srv_request_free(&r);

    /* none: no tools in the prompt */
    CHECK_INT(parse(&r, SRV_CHAT, "{" MSG "," OAI_TOOLS ",\"tool_choice\":\"none\"}", &e), 0);
    CHECK(r.tools == NULL && r.tool_choice == SRV_TOOLS_NONE && !r.grammar);
    srv_request_free(&r);
    CHECK_INT(parse(&r, SRV_CHAT, "{" MSG ",\"tools\":[]}", &e), 0); /* [] offers none */
    CHECK(r.tools == NULL);
    srv_request_free(&r);

    /* required: a grammar over every tool; parallel_tool_calls false also
     * ends the reply after its first call */
    CHECK_INT(parse(&r, SRV_CHAT,
                    "{" MSG "," OAI_TOOLS
                    ",\"tool_choice\":\"required\",\"parallel_tool_calls\":false}",
                    &e),
              0);
    CHECK_INT(r.tool_choice, SRV_TOOLS_REQUIRED);
    CHECK(r.grammar != NULL && !r.parallel_tool_calls);
    srv_request_gen_params(&r, &gp);
    CHECK_STR(gp.end_after, "</tool_call>");
    CHECK(gp.grammar != NULL && gp.grammar_start == INF_GRAM_UNLESS_THINK);
    inf_gram_free(gp.grammar);
    srv_request_free(&r);
    /* with thinking off the grammar starts at once */
    CHECK_INT(parse(&r, SRV_CHAT,
                    "{" MSG "," OAI_TOOLS
                    ",\"tool_choice\":\"required\",\"reasoning_effort\":\"none\"}",
                    &e),
              0);
    CHECK(!r.enable_thinking);
    srv_request_gen_params(&r, &gp);
    CHECK(gp.grammar_start == INF_GRAM_AT_ONCE && gp.end_after == NULL);
    inf_gram_free(gp.grammar);
    srv_request_free(&r);

    /* named: the grammar allows that function only */
    CHECK_INT(parse(&r, SRV_CHAT,
                    "{" MSG "," OAI_TOOLS ",\"tool_choice\":{\"type\":\"function\",\"function\":{"
                    "\"name\":\"search\"}}}",
                    &e),
              0);
    CHECK_INT(r.tool_choice, SRV_TOOLS_NAMED);
    CHECK_STR(r.tool_name, "search");
    CHECK(r.grammar != NULL);
    if (r.grammar) {
        static const char ok[] =
            "<tool_call>\n{\"name\": \"search\", \"arguments\": {}}\n</tool_call>";
        static const char no[] = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
                                 "{\"city\": \"x\"}}\n</tool_call>";
        CHECK(gram_accepts(r.grammar, ok, sizeof ok - 1));
        CHECK(!gram_accepts(r.grammar, no, sizeof no - 1));
    }
    srv_request_free(&r);

    bad(SRV_CHAT, "{" MSG "," OAI_TOOLS ",\"tool_choice\":\"sometimes\"}", "tool_choice");
    bad(SRV_CHAT, "{" MSG "," OAI_TOOLS ",\"tool_choice\":3}", "tool_choice");
    bad(SRV_CHAT, "{" MSG "," OAI_TOOLS ",\"tool_choice\":{\"type\":\"function\"}}", "tool_choice");
    bad(SRV_CHAT, "{" MSG "," OAI_TOOLS ",\"tool_choice\":{\"type\":\"custom\",\"custom\":{}}}",
        "tool_choice");
    bad(SRV_CHAT, "{" MSG "," OAI_TOOLS ",\"tool_choice\":{\"type\":\"allowed_tools\"}}",
        "tool_choice");
    { /* a named function that is not in tools: a 400 naming it */
        const char *body =
            "{" MSG "," OAI_TOOLS ",\"tool_choice\":{\"type\":\"function\",\"function\":"
            "{\"name\":\"launch\"}}}";
        CHECK_INT(parse(&r, SRV_CHAT, body, &e), -1);
        CHECK_STR(e.param, "tool_choice");
        CHECK(strstr(e.msg, "'launch'") != NULL);
    }
    bad(SRV_CHAT, "{" MSG ",\"tool_choice\":\"required\"}", "tool_choice"); /* no tools */
    bad(SRV_CHAT, "{" MSG ",\"tools\":[],\"tool_choice\":\"required\"}", "tool_choice");
    bad(SRV_CHAT,
        "{" MSG "," OAI_TOOLS ",\"tool_choice\":\"required\",\"response_format\":{\"type\":"
        "\"json_object\"}}",
        "tool_choice");
    bad(SRV_CHAT, "{" MSG "," OAI_TOOLS ",\"parallel_tool_calls\":\"no\"}", "parallel_tool_calls");
    bad(SRV_CHAT, "{" MSG ",\"tools\":[1]}", "tools[0]");
    bad(SRV_CHAT, "{" MSG ",\"tools\":[{\"type\":\"custom\",\"custom\":{\"name\":\"x\"}}]}",
        "tools[0]");
    bad(SRV_CHAT, "{" MSG ",\"tools\":[{\"function\":{\"name\":\"x\"}}]}", "tools[0]");
    bad(SRV_CHAT, "{" MSG ",\"tools\":[{\"type\":\"function\"}]}", "tools[0]");
    bad(SRV_CHAT, "{" MSG ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"\"}}]}",
        "tools[0]");
    bad(SRV_CHAT,
        "{" MSG ",\"tools\":[" WEATHER ",{\"type\":\"function\",\"function\":{\"name\":"
        "7}}]}",
        "tools[1]");
    bad(SRV_CHAT, "{" MSG ",\"tools\":[" TOOL("f", "[]") "]}", "tools[0]");
    bad(SRV_CHAT, "{" MSG ",\"tools\":[" TOOL("f", "{}") "," TOOL("f", "{}") "]}", "tools[1]");
    bad(SRV_CHAT,
        "{" MSG ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"strict\":1}}]}",
        "tools[0]");
    bad(SRV_CHAT,
        "{" MSG ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\","
        "\"description\":[]}}]}",
        "tools[0]");
    /* a schema the grammar cannot hold, when the call is forced */
    bad(SRV_CHAT,
        "{" MSG ",\"tools\":[" TOOL(
            "f", "{\"type\":\"object\",\"not\":{}}") "],"
                                                     "\"tool_choice\":\"required\"}",
        "tools");
    bad(SRV_CHAT, "{" MSG ",\"functions\":[{\"name\":\"f\"}]}", "functions");
    bad(SRV_CHAT, "{" MSG ",\"function_call\":\"auto\"}", "function_call");
}

static json_t *msg_at(srv_request *r, size_t i) {
    return json_array_get(r->messages, i);
}

static void test_messages(void) {
    srv_request r;
    srv_error e;
    /* A two-step tool loop as the openai client sends it back. */
    const char *body =
        "{\"messages\":["
        "{\"role\":\"developer\",\"content\":[{\"type\":\"text\",\"text\":\"Be \"},{\"type\":"
        "\"text\",\"text\":\"brief.\"}]},"
        "{\"role\":\"user\",\"content\":\"Weather in Paris?\"},"
        "{\"role\":\"assistant\",\"content\":null,\"refusal\":null,\"reasoning\":\"need a tool\","
        "\"tool_calls\":[{\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":"
        "\"get_weather\",\"arguments\":\"{\\\"city\\\": \\\"Paris\\\", \\\"days\\\": [1, 2]}\"}},"
        "{\"id\":\"call_2\",\"type\":\"function\",\"function\":{\"name\":\"search\","
        "\"arguments\":\"\"}}]},"
        "{\"role\":\"tool\",\"tool_call_id\":\"call_1\",\"content\":[{\"type\":\"text\","
        "\"text\":\"18 C\"}]},"
        "{\"role\":\"tool\",\"tool_call_id\":\"call_2\",\"content\":\"none\"},"
        "{\"role\":\"assistant\",\"content\":\"It is 18 C.\",\"reasoning_content\":\"r1\","
        "\"reasoning\":\"r2\"}]," OAI_TOOLS "}";
    CHECK_INT(parse(&r, SRV_CHAT, body, &e), 0);
    if (!r.messages) return;
    CHECK_INT(json_array_size(r.messages), 6);
    CHECK_STR(json_string_value(json_object_get(msg_at(&r, 0), "role")), "system");
    CHECK_STR(json_string_value(json_object_get(msg_at(&r, 0), "content")), "Be brief.");
    json_t *a = msg_at(&r, 2);
    CHECK_STR(json_string_value(json_object_get(a, "content")), "");
    CHECK_STR(json_string_value(json_object_get(a, "reasoning_content")), "need a tool");
    CHECK(!json_object_get(a, "reasoning"));
    json_t *calls = json_object_get(a, "tool_calls");
    CHECK_INT(json_array_size(calls), 2);
    json_t *c0 = json_array_get(calls, 0), *f0 = json_object_get(c0, "function");
    CHECK_STR(json_string_value(json_object_get(c0, "id")), "call_1");
    CHECK_STR(json_string_value(json_object_get(c0, "type")), "function");
    CHECK_STR(json_string_value(json_object_get(f0, "name")), "get_weather");
    json_t *args = json_object_get(f0, "arguments");
    CHECK(json_is_object(args));
    CHECK_STR(json_string_value(json_object_get(args, "city")), "Paris");
    CHECK_INT(json_array_size(json_object_get(args, "days")), 2);
    json_t *a1 =
        json_object_get(json_object_get(json_array_get(calls, 1), "function"), "arguments");
    CHECK(json_is_object(a1) && json_object_size(a1) == 0); /* "" is {} */
    CHECK_STR(json_string_value(json_object_get(msg_at(&r, 3), "content")), "18 C");
    CHECK_STR(json_string_value(json_object_get(msg_at(&r, 3), "tool_call_id")), "call_1");
    /* reasoning_content wins over reasoning */
    CHECK_STR(json_string_value(json_object_get(msg_at(&r, 5), "reasoning_content")), "r1");
    srv_request_free(&r);

    /* arguments given as an object are kept */
    CHECK_INT(parse(&r, SRV_CHAT,
                    "{\"messages\":[{\"role\":\"assistant\",\"tool_calls\":[{\"type\":\"function\","
                    "\"function\":{\"name\":\"f\",\"arguments\":{\"k\":1}}}]}]}",
                    &e),
              0);
    json_t *ao = json_object_get(
        json_object_get(json_array_get(json_object_get(msg_at(&r, 0), "tool_calls"), 0),
                        "function"),
        "arguments");
    CHECK_INT(json_integer_value(json_object_get(ao, "k")), 1);
    srv_request_free(&r);

#define CALL(args)                                                                                 \
    "{\"messages\":[{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[" args "]}]}"
    bad(SRV_CHAT,
        CALL("{\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"[1]\"}}"),
        "messages[0].tool_calls[0]");
    bad(SRV_CHAT,
        CALL("{\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}},"
             "{\"type\":\"function\",\"function\":{\"name\":\"g\",\"arguments\":\"{bad\"}}"),
        "messages[0].tool_calls[1]");
    bad(SRV_CHAT, CALL("{\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":5}}"),
        "messages[0].tool_calls[0]");
    bad(SRV_CHAT, CALL("{\"type\":\"function\",\"function\":{\"arguments\":\"{}\"}}"),
        "messages[0].tool_calls[0]");
    bad(SRV_CHAT, CALL("{\"type\":\"custom\",\"custom\":{\"name\":\"f\",\"input\":\"x\"}}"),
        "messages[0].tool_calls[0]");
    bad(SRV_CHAT, CALL("{\"id\":5,\"type\":\"function\",\"function\":{\"name\":\"f\"}}"),
        "messages[0].tool_calls[0]");
    bad(SRV_CHAT, CALL("7"), "messages[0].tool_calls[0]");
    bad(SRV_CHAT, "{\"messages\":[{\"role\":\"assistant\",\"content\":\"x\",\"tool_calls\":{}}]}",
        "messages[0]");
    bad(SRV_CHAT,
        "{\"messages\":[{\"role\":\"user\",\"content\":\"x\",\"tool_calls\":[{\"type\":"
        "\"function\",\"function\":{\"name\":\"f\"}}]}]}",
        "messages[0]");
    bad(SRV_CHAT, "{\"messages\":[{\"role\":\"tool\",\"tool_call_id\":\"c\"}]}", "messages[0]");
    bad(SRV_CHAT, "{\"messages\":[{\"role\":\"tool\",\"tool_call_id\":3,\"content\":\"x\"}]}",
        "messages[0]");
    bad(SRV_CHAT, "{\"messages\":[{\"role\":\"assistant\",\"content\":\"x\",\"reasoning\":1}]}",
        "messages[0]");
    bad(SRV_CHAT,
        "{\"messages\":[{\"role\":\"assistant\",\"content\":\"x\",\"reasoning_content\":[]}]}",
        "messages[0]");
    bad(SRV_CHAT, "{\"messages\":[{\"role\":\"developer\"}]}", "messages[0]");
}

static void test_reasoning_and_bias(void) {
    srv_request r;
    srv_error e;
    static const char *const keep[] = {"minimal", "low", "medium", "high", "xhigh"};
    for (int i = 0; i < 5; i++) {
        char body[256];
        snprintf(body, sizeof body, "{" MSG ",\"reasoning_effort\":\"%s\"}", keep[i]);
        CHECK_INT(parse(&r, SRV_CHAT, body, &e), 0);
        CHECK_MSG(r.enable_thinking, "reasoning_effort %s turned thinking off", keep[i]);
        srv_request_free(&r);
    }
    CHECK_INT(parse(&r, SRV_CHAT, "{" MSG ",\"reasoning_effort\":\"none\"}", &e), 0);
    CHECK(!r.enable_thinking);
    srv_request_free(&r);
    CHECK_INT(parse(&r, SRV_CHAT,
                    "{" MSG ",\"reasoning_effort\":\"none\",\"chat_template_kwargs\":{"
                    "\"enable_thinking\":false}}",
                    &e),
              0);
    CHECK(!r.enable_thinking);
    srv_request_free(&r);
    /* the template's keywords: the request's, with enable_thinking set */
    CHECK_INT(parse(&r, SRV_CHAT,
                    "{" MSG ",\"reasoning_effort\":\"none\",\"chat_template_kwargs\":{\"x\":1}}",
                    &e),
              0);
    json_t *kw = srv_request_template_kwargs(&r);
    CHECK(json_is_false(json_object_get(kw, "enable_thinking")));
    CHECK_INT(json_integer_value(json_object_get(kw, "x")), 1);
    CHECK(!json_object_get(r.template_kwargs, "enable_thinking")); /* the request is untouched */
    json_decref(kw);
    srv_request_free(&r);
    bad(SRV_CHAT, "{" MSG ",\"reasoning_effort\":\"max\"}", "reasoning_effort");
    bad(SRV_CHAT,
        "{" MSG ",\"reasoning_effort\":\"high\",\"chat_template_kwargs\":{\"enable_thinking\":"
        "false}}",
        "reasoning_effort");
    bad(SRV_CHAT, "{" MSG ",\"reasoning_effort\":1}", "reasoning_effort");
    bad(SRV_CHAT,
        "{" MSG ",\"reasoning_effort\":\"none\",\"chat_template_kwargs\":{\"enable_thinking\":"
        "true}}",
        "reasoning_effort");

    /* logit_bias: token id strings -> [-100, 100]; ids checked against the vocabulary */
    CHECK_INT(parse(&r, SRV_CHAT, "{" MSG ",\"logit_bias\":{\"5\":-100,\"70\":2.5}}", &e), 0);
    CHECK_INT(r.n_logit_bias, 2);
    if (r.n_logit_bias == 2) {
        CHECK(r.logit_bias[0].id == 5 && r.logit_bias[0].bias == -100);
        CHECK(r.logit_bias[1].id == 70 && r.logit_bias[1].bias == 2.5f);
    }
    CHECK_INT(srv_request_check_vocab(&r, 71, &e), 0);
    CHECK_INT(srv_request_check_vocab(&r, 70, &e), -1);
    CHECK_STR(e.param, "logit_bias");
    CHECK_INT(e.status, 400);
    inf_gen_params gp;
    srv_request_gen_params(&r, &gp);
    CHECK(gp.n_logit_bias == 2 && gp.logit_bias == r.logit_bias);
    srv_request_free(&r);
    CHECK_INT(parse(&r, SRV_COMPLETION, "{\"prompt\":\"x\",\"logit_bias\":{}}", &e), 0);
    CHECK_INT(r.n_logit_bias, 0);
    srv_request_free(&r);
    bad(SRV_CHAT, "{" MSG ",\"logit_bias\":[1]}", "logit_bias");
    bad(SRV_CHAT, "{" MSG ",\"logit_bias\":{\"x\":1}}", "logit_bias");
    bad(SRV_CHAT, "{" MSG ",\"logit_bias\":{\"-1\":1}}", "logit_bias");
    bad(SRV_CHAT, "{" MSG ",\"logit_bias\":{\"1a\":1}}", "logit_bias");
    bad(SRV_CHAT, "{" MSG ",\"logit_bias\":{\"\":1}}", "logit_bias");
    bad(SRV_CHAT, "{" MSG ",\"logit_bias\":{\"99999999999\":1}}", "logit_bias");
    bad(SRV_CHAT, "{" MSG ",\"logit_bias\":{\"1\":101}}", "logit_bias");
    bad(SRV_CHAT, "{" MSG ",\"logit_bias\":{\"1\":\"2\"}}", "logit_bias");
    bad(SRV_COMPLETION, "{\"prompt\":\"x\",\"logit_bias\":{\"1\":-100.5}}", "logit_bias");

    /* fields that would change the result and are not done: refused */
    bad(SRV_CHAT, "{" MSG ",\"modalities\":[\"text\",\"audio\"]}", "modalities");
    bad(SRV_CHAT, "{" MSG ",\"audio\":{\"voice\":\"alloy\",\"format\":\"wav\"}}", "audio");
    bad(SRV_CHAT, "{" MSG ",\"web_search_options\":{}}", "web_search_options");
    bad(SRV_CHAT, "{" MSG ",\"verbosity\":\"low\"}", "verbosity");
    bad(SRV_COMPLETION, "{\"prompt\":\"x\",\"echo\":true}", "echo");
    bad(SRV_COMPLETION, "{\"prompt\":\"x\",\"best_of\":3}", "best_of");
    bad(SRV_COMPLETION, "{\"prompt\":\"x\",\"suffix\":\"end\"}", "suffix");
    /* ... and accepted at their neutral values, with fields that change nothing */
    CHECK_INT(parse(&r, SRV_CHAT,
                    "{" MSG ",\"modalities\":[\"text\"],\"verbosity\":\"medium\",\"user\":\"u\","
                    "\"store\":false,\"metadata\":{\"a\":\"b\"},\"service_tier\":\"auto\"}",
                    &e),
              0);
    srv_request_free(&r);
    CHECK_INT(parse(&r, SRV_COMPLETION,
                    "{\"prompt\":\"x\",\"echo\":false,\"best_of\":1,\"suffix\":\"\"}", &e),
              0);
    srv_request_free(&r);

    /* llama.cpp's fields: n_predict and repeat_last_n are done, its other
     * samplers accepted only when off */
    CHECK_INT(
        parse(&r, SRV_COMPLETION, "{\"prompt\":\"x\",\"n_predict\":7,\"repeat_last_n\":-1}", &e),
        0);
    CHECK_INT(r.max_tokens, 7);
    CHECK_INT(r.samp.penalty_last_n, -1);
    inf_gen_params g2;
    srv_request_gen_params(&r, &g2);
    CHECK_INT(g2.sampling.repeat_last_n, -1);
    srv_request_free(&r);
    CHECK_INT(parse(&r, SRV_COMPLETION, "{\"prompt\":\"x\",\"n_predict\":-1}", &e), 0);
    CHECK_INT(r.max_tokens, -1); /* no limit, not completions' 16 */
    srv_request_free(&r);
    CHECK_INT(parse(&r, SRV_CHAT, "{" MSG ",\"n_predict\":9,\"max_tokens\":3}", &e), 0);
    CHECK_INT(r.max_tokens, 3); /* OpenAI's field wins */
    srv_request_free(&r);
    CHECK_INT(parse(&r, SRV_CHAT,
                    "{" MSG ",\"typical_p\":1,\"tfs_z\":1.0,\"mirostat\":0,\"dynatemp_range\":0,"
                    "\"xtc_probability\":0,\"dry_multiplier\":0,\"top_n_sigma\":-1,\"n_probs\":0}",
                    &e),
              0);
    srv_request_free(&r);
    bad(SRV_CHAT, "{" MSG ",\"n_predict\":0}", "n_predict");
    bad(SRV_CHAT, "{" MSG ",\"n_predict\":\"5\"}", "n_predict");
    bad(SRV_CHAT, "{" MSG ",\"repeat_last_n\":-2}", "repeat_last_n");
    bad(SRV_CHAT, "{" MSG ",\"typical_p\":0.9}", "typical_p");
    bad(SRV_CHAT, "{" MSG ",\"mirostat\":2}", "mirostat");
    bad(SRV_CHAT, "{" MSG ",\"dry_multiplier\":0.8}", "dry_multiplier");
    bad(SRV_CHAT, "{" MSG ",\"xtc_probability\":\"0\"}", "xtc_probability");
    bad(SRV_CHAT, "{" MSG ",\"top_n_sigma\":1.5}", "top_n_sigma");
    bad(SRV_COMPLETION, "{\"prompt\":\"x\",\"n_probs\":3}", "n_probs");
    bad(SRV_COMPLETION, "{\"prompt\":\"x\",\"tfs_z\":0.5}", "tfs_z");
    bad(SRV_COMPLETION, "{\"prompt\":\"x\",\"dynatemp_range\":0.5}", "dynatemp_range");
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
    srv_outcome o = {.finish = INF_FINISH_LENGTH,
                     .prompt_tokens = 5,
                     .completion_tokens = 3,
                     .cached_tokens = 2,
                     .timings = &tm};
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
        CHECK_INT(json_integer_value(json_object_get(json_object_get(u, "prompt_tokens_details"),
                                                     "cached_tokens")),
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
    inf_timings tm = {.cache_n = 2,
                      .prompt_n = 4,
                      .prompt_ms = 10,
                      .predicted_n = 1,
                      .predicted_ms = 5,
                      .draft_n = 3,
                      .draft_accepted = 1};
    const char *text = "<think>r</think>\n\nbad \xFF byte";
    srv_outcome o = {.finish = INF_FINISH_STOP,
                     .prompt_tokens = 6,
                     .completion_tokens = 1,
                     .cached_tokens = 2,
                     .timings = &tm,
                     .draft = true,
                     .logprobs = lpj};
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
    CHECK_INT(json_integer_value(json_object_get(t, "draft_n")), 3); /* the engine speculates */
    CHECK_INT(json_integer_value(json_object_get(t, "draft_n_accepted")), 1);
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
    const char *text =
        "<think>\nplan\n</think>\n\nChecking.\n<tool_call>\n{\"name\": \"get_weather\", "
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
            if (json_object_get(fn, "name"))
                names[idx] = json_string_value(json_object_get(fn, "name"));
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

/* Fields a request leaves out take the engine's defaults (the model's
 * recommended sampling); the request's own win. */
static void test_sampling_defaults(void) {
    inf_sampler_params d = inf_sampler_defaults();
    d.temp = 0.6f, d.top_k = 20, d.top_p = 0.5f, d.min_p = 0.25f, d.repeat_penalty = 1.5f;
    srv_request r;
    srv_error e;
    const char *body = "{" MSG ",\"top_k\":3}";
    CHECK_INT(srv_request_parse(&r, SRV_CHAT, body, strlen(body), &d, &e), 0);
    inf_gen_params p;
    srv_request_gen_params(&r, &p);
    CHECK(p.sampling.temp == 0.6f && p.sampling.top_p == 0.5f && p.sampling.min_p == 0.25f &&
          p.sampling.repeat_penalty == 1.5f);
    CHECK_INT(p.sampling.top_k, 3);
    srv_request_free(&r);
    CHECK_INT(srv_request_parse(&r, SRV_CHAT, body, strlen(body), NULL, &e), 0);
    srv_request_gen_params(&r, &p);
    CHECK(p.sampling.temp == 0.8f && p.sampling.top_p == 0.95f); /* llama.cpp's */
    srv_request_free(&r);
}

/* llama.cpp's speculative.n_max / n_min / p_min (flat keys) on chat and
 * completions: each in its range, a 400 naming it otherwise; the knobs a
 * request leaves out are the engine's, none given leaves the engine's whole
 * (n_max -1). */
static void spec_ok(srv_kind k, const char *body, const inf_spec_params *engine, int n_max,
                    int n_min, float p_min) {
    srv_request r;
    srv_error e;
    CHECK_MSG(parse(&r, k, body, &e) == 0, "refused: %s (%s)", body, e.msg);
    CHECK_MSG(srv_request_spec(&r, engine, &e) == 0, "refused over the engine's: %s (%s)", body,
              e.msg);
    inf_gen_params g;
    srv_request_gen_params(&r, &g);
    CHECK_MSG(g.spec.n_max == n_max && g.spec.n_min == n_min && g.spec.p_min == p_min,
              "%s: n_max %d n_min %d p_min %g, expected %d %d %g", body, g.spec.n_max, g.spec.n_min,
              (double)g.spec.p_min, n_max, n_min, (double)p_min);
    inf_err err;
    CHECK_MSG(g.spec.n_max < 0 || inf_spec_check(&g.spec, &err) == 0,
              "%s: the scheduler would refuse it: %s", body, err.msg);
    srv_request_free(&r);
}

/* Parses, then expects srv_request_spec over engine to refuse it naming param. */
static void spec_bad_over(const char *body, const inf_spec_params *engine, const char *param) {
    srv_request r;
    srv_error e;
    CHECK_MSG(parse(&r, SRV_CHAT, body, &e) == 0, "refused: %s (%s)", body, e.msg);
    memset(&e, 0, sizeof e);
    CHECK_MSG(srv_request_spec(&r, engine, &e) == -1, "accepted over the engine's: %s", body);
    CHECK_INT(e.status, 400);
    CHECK_MSG(!strcmp(e.param, param), "%s: param '%s', expected '%s'", body, e.param, param);
    CHECK_MSG(strstr(e.msg, param) != NULL, "the message names %s: %s", param, e.msg);
    srv_request_free(&r);
}

static void test_speculative(void) {
    const inf_spec_params eng = {.n_max = 8, .n_min = 2, .p_min = 0.5f};
    spec_ok(SRV_CHAT, "{" MSG "}", &eng, -1, 0, 0); /* the engine's, as inf_gen_defaults */
    spec_ok(SRV_CHAT,
            "{" MSG ",\"speculative.n_max\":12,\"speculative.n_min\":3,\"speculative.p_min\":0.25}",
            &eng, 12, 3, 0.25f);
    spec_ok(SRV_COMPLETION,
            "{\"prompt\":\"x\",\"speculative.n_max\":64,\"speculative.n_min\":64,"
            "\"speculative.p_min\":1}",
            &eng, 64, 64, 1.0f);
    spec_ok(SRV_COMPLETION, "{\"prompt\":\"x\",\"speculative.n_max\":null}", &eng, -1, 0, 0);
    spec_ok(SRV_CHAT, "{" MSG ",\"speculative.n_max\":5}", &eng, 5, 2, 0.5f);
    spec_ok(SRV_CHAT, "{" MSG ",\"speculative.n_min\":8}", &eng, 8, 8, 0.5f);
    spec_ok(SRV_CHAT, "{" MSG ",\"speculative.p_min\":0}", &eng, 8, 2, 0.0f);
    /* n_max 0 turns speculation off whatever the server's n_min: the
     * engine's n_min comes down to a requested n_max */
    spec_ok(SRV_CHAT, "{" MSG ",\"speculative.n_max\":0}", &eng, 0, 0, 0.5f);
    spec_ok(SRV_CHAT, "{" MSG ",\"speculative.n_max\":1}", &eng, 1, 1, 0.5f);
    spec_ok(SRV_CHAT, "{" MSG ",\"speculative.n_max\":0,\"speculative.n_min\":0}", &eng, 0, 0,
            0.5f);

    const char *const field[] = {"speculative.n_max", "speculative.n_min"};
    for (int i = 0; i < 2; i++) {
        static const char *const vals[] = {"-1", "65", "2.5", "\"4\"", "true", "[]", "1e3"};
        for (size_t v = 0; v < sizeof vals / sizeof vals[0]; v++) {
            char body[160];
            snprintf(body, sizeof body, "{" MSG ",\"%s\":%s}", field[i], vals[v]);
            bad(SRV_CHAT, body, field[i]);
            snprintf(body, sizeof body, "{\"prompt\":\"x\",\"%s\":%s}", field[i], vals[v]);
            bad(SRV_COMPLETION, body, field[i]);
        }
    }
    static const char *const pvals[] = {"-0.1", "1.01", "\"0.5\"", "false", "{}"};
    for (size_t v = 0; v < sizeof pvals / sizeof pvals[0]; v++) {
        char body[160];
        snprintf(body, sizeof body, "{" MSG ",\"speculative.p_min\":%s}", pvals[v]);
        bad(SRV_CHAT, body, "speculative.p_min");
        snprintf(body, sizeof body, "{\"prompt\":\"x\",\"speculative.p_min\":%s}", pvals[v]);
        bad(SRV_COMPLETION, body, "speculative.p_min");
    }
    bad(SRV_CHAT, "{" MSG ",\"speculative.n_max\":4,\"speculative.n_min\":5}", "speculative.n_min");
    bad(SRV_COMPLETION, "{\"prompt\":\"x\",\"speculative.n_max\":0,\"speculative.n_min\":1}",
        "speculative.n_min");
    /* a requested n_min above the server's n_max */
    spec_bad_over("{" MSG ",\"speculative.n_min\":9}", &eng, "speculative.n_min");

    /* timings: draft_n and draft_n_accepted when the engine speculates */
    inf_timings tm = {.predicted_n = 9, .draft_n = 12, .draft_accepted = 7};
    json_t *t = srv_timings_json(&tm, true);
    CHECK_INT(json_integer_value(json_object_get(t, "draft_n")), 12);
    CHECK_INT(json_integer_value(json_object_get(t, "draft_n_accepted")), 7);
    json_decref(t);
    t = srv_timings_json(&tm, false);
    CHECK(!json_object_get(t, "draft_n") && !json_object_get(t, "draft_n_accepted"));
    CHECK_INT(json_integer_value(json_object_get(t, "predicted_n")), 9);
    json_decref(t);
}

/* ---- /v1/embeddings ---- */

/* A tokenizer of one id per byte (byte % 60); 63 is the appended token. */
static int embd_tokenize(void *ctx, const char *text, size_t n, bool special, int32_t **ids,
                         int *n_ids, inf_err *err) {
    *ids = malloc((n ? n : 1) * sizeof **ids);
    for (size_t i = 0; i < n; i++)
        (*ids)[i] = (unsigned char)text[i] % 60;
    *n_ids = (int)n;
    return 0;
}
static const inf_exec embd_ex = {
    .n_vocab = 64, .n_ctx = 16, .n_embd = 8, .embd_eos = 63, .tokenize = embd_tokenize};

static int embd_parse(srv_embd_request *r, const char *body, srv_error *e) {
    memset(e, 0, sizeof *e);
    return srv_embd_parse(r, &embd_ex, body, strlen(body), e);
}

static void embd_bad(const char *body, const char *param) {
    srv_embd_request r;
    srv_error e;
    int rc = embd_parse(&r, body, &e);
    CHECK_MSG(rc == -1, "accepted: %s", body);
    if (rc) {
        CHECK_MSG(e.status == 400 && !strcmp(e.param, param),
                  "%s: status %d param '%s', expected "
                  "'%s' (%s)",
                  body, e.status, e.param, param, e.msg);
        CHECK_MSG(strstr(e.msg, param) != NULL, "%s: the message names %s: %s", body, param, e.msg);
    } else {
        srv_embd_request_free(&r);
    }
}

static void test_embd(void) {
    srv_embd_request r;
    srv_error e;
    CHECK_INT(embd_parse(&r, "{\"input\":\"ab\",\"model\":\"m\"}", &e), 0);
    CHECK_INT(r.n_inputs, 1);
    CHECK_INT(r.n_ids[0], 3);
    CHECK(r.ids[0][0] == 'a' % 60 && r.ids[0][1] == 'b' % 60 && r.ids[0][2] == 63);
    CHECK_INT(r.dimensions, 8);
    CHECK(!r.base64);
    CHECK_STR(r.model, "m");
    srv_embd_request_free(&r);
    CHECK_INT(embd_parse(&r,
                         "{\"input\":[\"a\",\"bc\"],\"dimensions\":2,"
                         "\"encoding_format\":\"base64\"}",
                         &e),
              0);
    CHECK(r.n_inputs == 2 && r.n_ids[0] == 2 && r.n_ids[1] == 3 && r.dimensions == 2 && r.base64);
    srv_embd_request_free(&r);
    CHECK_INT(embd_parse(&r, "{\"input\":[5,6,7]}", &e), 0); /* ids: as given */
    CHECK(r.n_inputs == 1 && r.n_ids[0] == 3 && r.ids[0][2] == 7);
    srv_embd_request_free(&r);
    CHECK_INT(embd_parse(&r, "{\"input\":[[5],[6,63]]}", &e), 0);
    CHECK(r.n_inputs == 2 && r.n_ids[0] == 1 && r.n_ids[1] == 2);
    srv_embd_request_free(&r);
    CHECK_INT(embd_parse(&r, "{\"input\":\"a\",\"dimensions\":null,\"encoding_format\":null}", &e),
              0);
    srv_embd_request_free(&r);

    embd_bad("{}", "input");
    embd_bad("{\"input\":null}", "input");
    embd_bad("{\"input\":[]}", "input");
    embd_bad("{\"input\":\"\"}", "input");
    embd_bad("{\"input\":7}", "input");
    embd_bad("{\"input\":[1,\"a\"]}", "input");
    embd_bad("{\"input\":[\"a\",1]}", "input[1]");
    embd_bad("{\"input\":[\"a\",\"\"]}", "input[1]");
    embd_bad("{\"input\":[[1],[]]}", "input[1]");
    embd_bad("{\"input\":[[1],[64]]}", "input[1]");
    embd_bad("{\"input\":[-1]}", "input");
    embd_bad("{\"input\":[1.5]}", "input");
    embd_bad("{\"input\":\"0123456789abcdef\"}", "input"); /* 16 + 1 tokens, context 16 */
    embd_bad("{\"input\":\"a\",\"dimensions\":0}", "dimensions");
    embd_bad("{\"input\":\"a\",\"dimensions\":9}", "dimensions");
    embd_bad("{\"input\":\"a\",\"dimensions\":2.0}", "dimensions");
    embd_bad("{\"input\":\"a\",\"dimensions\":\"2\"}", "dimensions");
    embd_bad("{\"input\":\"a\",\"encoding_format\":\"int8\"}", "encoding_format");
    embd_bad("{\"input\":\"a\",\"encoding_format\":1}", "encoding_format");
    embd_bad("{\"input\":\"a\",\"model\":1}", "model");
    embd_bad("{\"input\":\"a\",\"user\":1}", "user");
    CHECK_INT(embd_parse(&r, "[1]", &e), -1);
    CHECK_INT(e.status, 400);
    CHECK_INT(embd_parse(&r, "{\"input\":", &e), -1);
    CHECK_INT(e.status, 400);

    /* normalization, truncation, both encodings */
    float v[4] = {3, 4, 0, 0}, z[2] = {0, 0};
    srv_embd_normalize(v, 2);
    CHECK(fabsf(v[0] - 0.6f) < 1e-7f && fabsf(v[1] - 0.8f) < 1e-7f);
    srv_embd_normalize(z, 2);
    CHECK(z[0] == 0 && z[1] == 0);
    float a[2] = {1.0f, -2.0f}, b[2] = {0.5f, 0.25f};
    float *embs[2] = {a, b};
    CHECK_INT(embd_parse(&r,
                         "{\"input\":[\"ab\",\"c\"],\"dimensions\":2,"
                         "\"encoding_format\":\"base64\"}",
                         &e),
              0);
    char *body = srv_embd_response(&r, embs, "m");
    json_t *j = json_loads(body, 0, NULL);
    CHECK_STR(json_string_value(json_object_get(j, "object")), "list");
    CHECK_STR(json_string_value(json_object_get(j, "model")), "m");
    json_t *d = json_object_get(j, "data");
    CHECK_INT((int)json_array_size(d), 2);
    /* little-endian f32: 1.0 = 00 00 80 3f, -2.0 = 00 00 00 c0 */
    CHECK_STR(json_string_value(json_object_get(json_array_get(d, 0), "embedding")),
              "AACAPwAAAMA=");
    CHECK_INT((int)json_integer_value(json_object_get(json_array_get(d, 1), "index")), 1);
    CHECK_STR(json_string_value(json_object_get(json_array_get(d, 1), "object")), "embedding");
    CHECK_INT(
        (int)json_integer_value(json_object_get(json_object_get(j, "usage"), "prompt_tokens")), 5);
    CHECK_INT((int)json_integer_value(json_object_get(json_object_get(j, "usage"), "total_tokens")),
              5);
    json_decref(j);
    free(body);
    r.base64 = false;
    body = srv_embd_response(&r, embs, "m");
    j = json_loads(body, 0, NULL);
    json_t *f = json_object_get(json_array_get(json_object_get(j, "data"), 1), "embedding");
    CHECK(json_array_size(f) == 2 && json_real_value(json_array_get(f, 0)) == 0.5 &&
          json_real_value(json_array_get(f, 1)) == 0.25);
    json_decref(j);
    free(body);
    srv_embd_request_free(&r);
}

int main(void) {
    test_sampling_defaults();
    test_embd();
    test_chat_ok();
    test_chat_bad();
    test_tools();
    test_messages();
    test_reasoning_and_bias();
    test_completion();
    test_error_json();
    test_stream_chat();
    test_stream_completion();
    test_whole_response();
    test_tool_calls();
    test_speculative();
    return th_report();
}
