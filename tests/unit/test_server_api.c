/* The Responses API and Anthropic Messages (server/api_responses.c,
 * server/api_messages.c): every request field, good and bad (a 400 naming
 * the field); the writers, whole and streamed: hand-built parts streamed in
 * polls split at every character boundary give events that are well formed
 * (sequence numbers, added/done and start/stop pairs, indices) and that
 * assemble, as the SDKs' stream helpers assemble them, into the whole
 * body. */
#include <stdlib.h>

#include "harness.h"
#include "server/api.h"

/* ---- requests ---- */

#include "api_parse.h"

static json_t *msg(const srv_request *r, size_t i) {
    return json_array_get(r->messages, i);
}

static const char *msg_str(const srv_request *r, size_t i, const char *key) {
    return json_string_value(json_object_get(msg(r, i), key));
}

static void test_responses_ok(void) {
    const srv_api *A = &srv_api_responses;
    srv_request r;
    srv_error e;
    const char *body =
        "{\"model\":\"m\",\"instructions\":\"be brief\",\"input\":["
        "{\"role\":\"developer\",\"content\":\"dev\"},"
        "{\"type\":\"message\",\"role\":\"user\",\"content\":[{\"type\":\"input_text\",\"text\":"
        "\"a\"},{\"type\":\"input_text\",\"text\":\"b\"}]},"
        "{\"type\":\"reasoning\",\"id\":\"rs_1\",\"summary\":[],\"content\":[{\"type\":"
        "\"reasoning_text\",\"text\":\"think\"}],\"encrypted_content\":\"x\"},"
        "{\"type\":\"message\",\"role\":\"assistant\",\"content\":[{\"type\":\"output_text\","
        "\"text\":\"calling\",\"annotations\":[]}]},"
        "{\"type\":\"function_call\",\"call_id\":\"c1\",\"name\":\"f\",\"arguments\":"
        "\"{\\\"x\\\":1}\"},"
        "{\"type\":\"function_call\",\"call_id\":\"c2\",\"name\":\"g\",\"arguments\":\"{}\"},"
        "{\"type\":\"function_call_output\",\"call_id\":\"c1\",\"output\":\"one\"},"
        "{\"type\":\"function_call_output\",\"call_id\":\"c2\",\"output\":[{\"type\":"
        "\"input_text\",\"text\":\"two\"}]},"
        "{\"type\":\"reasoning\",\"summary\":[{\"type\":\"summary_text\",\"text\":\"s\"}]},"
        "{\"role\":\"user\",\"content\":\"again\"}],"
        "\"tools\":[{\"type\":\"function\",\"name\":\"f\",\"description\":\"d\",\"parameters\":{"
        "\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"integer\"}}},\"strict\":true},"
        "{\"type\":\"function\",\"name\":\"g\"}],"
        "\"tool_choice\":{\"type\":\"function\",\"name\":\"f\"},\"parallel_tool_calls\":false,"
        "\"max_output_tokens\":9,\"temperature\":1.5,\"top_p\":0.25,\"seed\":7,"
        "\"reasoning\":{\"effort\":\"none\",\"summary\":\"auto\"},\"stream\":true,"
        "\"store\":false,\"metadata\":{\"k\":\"v\"},\"user\":\"u\",\"truncation\":\"disabled\","
        "\"include\":[\"reasoning.encrypted_content\"],\"text\":{\"verbosity\":\"medium\"},"
        "\"unknown\":1}";
    CHECK_INT(parse(A, &r, body, &e), 0);
    if (!r.root) {
        fprintf(stderr, "%s\n", e.msg);
        return;
    }
    CHECK_STR(r.model, "m");
    CHECK(r.kind == SRV_CHAT);
    CHECK_INT(json_array_size(r.messages), 8);
    CHECK_STR(msg_str(&r, 0, "role"), "system");
    CHECK_STR(msg_str(&r, 0, "content"), "be brief");
    CHECK_STR(msg_str(&r, 1, "role"), "system"); /* developer */
    CHECK_STR(msg_str(&r, 1, "content"), "dev");
    CHECK_STR(msg_str(&r, 2, "content"), "ab");
    CHECK_STR(msg_str(&r, 3, "role"), "assistant");
    CHECK_STR(msg_str(&r, 3, "content"), "calling");
    CHECK_STR(msg_str(&r, 3, "reasoning_content"), "think");
    json_t *calls = json_object_get(msg(&r, 3), "tool_calls");
    CHECK_INT(json_array_size(calls), 2);
    json_t *f0 = json_object_get(json_array_get(calls, 0), "function");
    CHECK_STR(json_string_value(json_object_get(f0, "name")), "f");
    CHECK_INT(json_integer_value(json_object_get(json_object_get(f0, "arguments"), "x")), 1);
    CHECK_STR(json_string_value(json_object_get(json_array_get(calls, 1), "id")), "c2");
    CHECK_STR(msg_str(&r, 4, "role"), "tool");
    CHECK_STR(msg_str(&r, 4, "tool_call_id"), "c1");
    CHECK_STR(msg_str(&r, 4, "content"), "one");
    CHECK_STR(msg_str(&r, 5, "content"), "two");
    /* reasoning with no message after it: an assistant turn of its own */
    CHECK_STR(msg_str(&r, 6, "role"), "assistant");
    CHECK_STR(msg_str(&r, 6, "reasoning_content"), "s");
    CHECK_STR(msg_str(&r, 6, "content"), "");
    CHECK_STR(msg_str(&r, 7, "content"), "again");
    CHECK_INT(json_array_size(r.tools), 2);
    json_t *fn = json_object_get(json_array_get(r.tools, 0), "function");
    CHECK_STR(json_string_value(json_object_get(json_array_get(r.tools, 0), "type")), "function");
    CHECK_STR(json_string_value(json_object_get(fn, "name")), "f");
    CHECK_STR(json_string_value(json_object_get(fn, "description")), "d");
    CHECK(json_is_object(json_object_get(fn, "parameters")));
    CHECK(r.tool_choice == SRV_TOOLS_NAMED);
    CHECK_STR(r.tool_name, "f");
    CHECK(!r.parallel_tool_calls);
    CHECK(r.grammar != NULL); /* the forced call */
    CHECK_INT(r.max_tokens, 9);
    CHECK(r.samp.temperature == 1.5f && r.samp.top_p == 0.25f);
    CHECK(r.samp.has_seed && r.samp.seed == 7);
    CHECK(!r.enable_thinking);
    CHECK(r.stream);
    json_t *echo = A->echo(&r);
    CHECK_STR(json_string_value(json_object_get(echo, "instructions")), "be brief");
    CHECK_INT(json_integer_value(json_object_get(echo, "max_output_tokens")), 9);
    CHECK(json_is_false(json_object_get(echo, "parallel_tool_calls")));
    CHECK(json_is_false(json_object_get(echo, "store")));
    CHECK_INT(json_array_size(json_object_get(echo, "tools")), 2);
    CHECK_STR(json_string_value(json_object_get(json_object_get(echo, "tool_choice"), "name")),
              "f");
    json_decref(echo);
    srv_request_free(&r);

    /* a string input; defaults */
    CHECK_INT(parse(A, &r, "{\"input\":\"hello\"}", &e), 0);
    CHECK_INT(json_array_size(r.messages), 1);
    CHECK_STR(msg_str(&r, 0, "role"), "user");
    CHECK_STR(msg_str(&r, 0, "content"), "hello");
    CHECK(r.enable_thinking && r.parallel_tool_calls && !r.stream);
    CHECK_INT(r.max_tokens, -1);
    CHECK(r.tools == NULL && r.grammar == NULL && r.tool_choice == SRV_TOOLS_AUTO);
    echo = A->echo(&r);
    CHECK(json_is_null(json_object_get(echo, "instructions")));
    CHECK_STR(json_string_value(json_object_get(echo, "tool_choice")), "auto");
    CHECK(json_is_false(json_object_get(echo, "store"))); /* nothing is stored */
    CHECK_STR(json_string_value(json_object_get(
                  json_object_get(json_object_get(echo, "text"), "format"), "type")),
              "text");
    json_decref(echo);
    srv_request_free(&r);

    /* tool_choice none: no tools offered; required: forced; formats */
    CHECK_INT(parse(A, &r,
                    "{\"input\":\"x\",\"tools\":[{\"type\":\"function\",\"name\":\"f\"}],"
                    "\"tool_choice\":\"none\"}",
                    &e),
              0);
    CHECK(r.tools == NULL && r.tool_choice == SRV_TOOLS_NONE && !r.grammar);
    srv_request_free(&r);
    CHECK_INT(parse(A, &r,
                    "{\"input\":\"x\",\"tools\":[{\"type\":\"function\",\"name\":\"f\"}],"
                    "\"tool_choice\":\"required\",\"max_tool_calls\":1}",
                    &e),
              0);
    CHECK(r.tools && r.tool_choice == SRV_TOOLS_REQUIRED && r.grammar && !r.parallel_tool_calls);
    srv_request_free(&r);
    CHECK_INT(parse(A, &r,
                    "{\"input\":\"x\",\"text\":{\"format\":{\"type\":\"json_schema\",\"name\":"
                    "\"s\",\"strict\":true,\"schema\":{\"type\":\"object\",\"properties\":{\"a\":"
                    "{\"type\":\"string\"}},\"required\":[\"a\"]}}}}",
                    &e),
              0);
    CHECK(r.grammar != NULL);
    srv_request_free(&r);
    CHECK_INT(
        parse(A, &r, "{\"input\":\"x\",\"text\":{\"format\":{\"type\":\"json_object\"}}}", &e), 0);
    CHECK(r.grammar != NULL);
    srv_request_free(&r);
    CHECK_INT(parse(A, &r, "{\"input\":\"x\",\"text\":{\"format\":{\"type\":\"text\"}}}", &e), 0);
    CHECK(r.grammar == NULL);
    srv_request_free(&r);
    CHECK_INT(parse(A, &r, "{\"input\":\"x\",\"reasoning\":{\"effort\":\"high\"}}", &e), 0);
    CHECK(r.enable_thinking);
    srv_request_free(&r);
}

#define TOOLF "\"tools\":[{\"type\":\"function\",\"name\":\"f\"}]"

static void test_responses_bad(void) {
    const srv_api *A = &srv_api_responses;
    static const struct {
        const char *body, *param;
    } cases[] = {
        {"{}", "input"},
        {"{\"input\":5}", "input"},
        {"{\"input\":[]}", "input"},
        {"{\"input\":[7]}", "input[0]"},
        {"{\"input\":[{\"type\":7}]}", "input[0]"},
        {"{\"input\":[{\"role\":\"robot\",\"content\":\"x\"}]}", "input[0].role"},
        {"{\"input\":[{\"role\":\"user\"}]}", "input[0].content"},
        {"{\"input\":[{\"role\":\"user\",\"content\":3}]}", "input[0].content"},
        {"{\"input\":[{\"role\":\"user\",\"content\":[{\"type\":\"input_image\",\"image_url\":"
         "\"x\"}]}]}",
         "input[0].content[0]"},
        {"{\"input\":[{\"role\":\"user\",\"content\":[{\"type\":\"input_text\"}]}]}",
         "input[0].content[0]"},
        {"{\"input\":[{\"role\":\"user\",\"content\":[{\"type\":\"bogus\",\"text\":\"x\"}]}]}",
         "input[0].content[0]"},
        {"{\"input\":[{\"type\":\"function_call\",\"name\":\"f\",\"arguments\":\"{}\"}]}",
         "input[0].call_id"},
        {"{\"input\":[{\"type\":\"function_call\",\"call_id\":\"c\",\"arguments\":\"{}\"}]}",
         "input[0].name"},
        {"{\"input\":[{\"type\":\"function_call\",\"call_id\":\"c\",\"name\":\"f\"}]}",
         "input[0].arguments"},
        {"{\"input\":[{\"type\":\"function_call\",\"call_id\":\"c\",\"name\":\"f\","
         "\"arguments\":\"[1\"}]}",
         "input[0].arguments"},
        {"{\"input\":[{\"type\":\"function_call\",\"call_id\":\"c\",\"name\":\"f\","
         "\"arguments\":{}}]}",
         "input[0].arguments"},
        {"{\"input\":[{\"type\":\"function_call_output\",\"output\":\"x\"}]}", "input[0].call_id"},
        {"{\"input\":[{\"type\":\"function_call_output\",\"call_id\":\"c\"}]}", "input[0].output"},
        {"{\"input\":[{\"type\":\"function_call_output\",\"call_id\":\"c\",\"output\":1}]}",
         "input[0].output"},
        {"{\"input\":[{\"type\":\"reasoning\",\"content\":{}}]}", "input[0].content"},
        {"{\"input\":[{\"type\":\"reasoning\",\"summary\":[{\"type\":\"x\",\"text\":\"t\"}]}]}",
         "input[0].summary[0]"},
        {"{\"input\":[{\"type\":\"item_reference\",\"id\":\"x\"}]}", "input[0]"},
        {"{\"input\":[{\"type\":\"web_search_call\"}]}", "input[0]"},
        {"{\"input\":\"x\",\"instructions\":1}", "instructions"},
        {"{\"input\":\"x\",\"previous_response_id\":\"resp_1\"}", "previous_response_id"},
        {"{\"input\":\"x\",\"conversation\":\"c\"}", "conversation"},
        {"{\"input\":\"x\",\"prompt\":{\"id\":\"p\"}}", "prompt"},
        {"{\"input\":\"x\",\"background\":true}", "background"},
        {"{\"input\":\"x\",\"background\":1}", "background"},
        {"{\"input\":\"x\",\"store\":\"yes\"}", "store"},
        {"{\"input\":\"x\",\"model\":1}", "model"},
        {"{\"input\":\"x\",\"user\":1}", "user"},
        {"{\"input\":\"x\",\"metadata\":[]}", "metadata"},
        {"{\"input\":\"x\",\"truncation\":\"auto\"}", "truncation"},
        {"{\"input\":\"x\",\"include\":[\"message.output_text.logprobs\"]}", "include"},
        {"{\"input\":\"x\",\"include\":\"x\"}", "include"},
        {"{\"input\":\"x\",\"top_logprobs\":2}", "top_logprobs"},
        {"{\"input\":\"x\",\"tools\":{}}", "tools"},
        {"{\"input\":\"x\",\"tools\":[1]}", "tools[0]"},
        {"{\"input\":\"x\",\"tools\":[{\"type\":\"web_search\"}]}", "tools[0].type"},
        {"{\"input\":\"x\",\"tools\":[{\"type\":\"function\"}]}", "tools[0].name"},
        {"{\"input\":\"x\",\"tools\":[{\"type\":\"function\",\"name\":\"\"}]}", "tools[0].name"},
        {"{\"input\":\"x\",\"tools\":[{\"type\":\"function\",\"name\":\"f\",\"description\":1}]}",
         "tools[0].description"},
        {"{\"input\":\"x\",\"tools\":[{\"type\":\"function\",\"name\":\"f\",\"strict\":1}]}",
         "tools[0].strict"},
        {"{\"input\":\"x\",\"tools\":[{\"type\":\"function\",\"name\":\"f\",\"parameters\":1}]}",
         "tools[0].parameters"},
        {"{\"input\":\"x\",\"tools\":[{\"type\":\"function\",\"name\":\"f\",\"parameters\":{"
         "\"type\":\"object\",\"patternProperties\":{}}}],\"tool_choice\":\"required\"}",
         "tools"},
        {"{\"input\":\"x\"," TOOLF ",\"tool_choice\":\"sometimes\"}", "tool_choice"},
        {"{\"input\":\"x\"," TOOLF ",\"tool_choice\":3}", "tool_choice"},
        {"{\"input\":\"x\"," TOOLF ",\"tool_choice\":{\"type\":\"allowed_tools\"}}",
         "tool_choice.type"},
        {"{\"input\":\"x\"," TOOLF ",\"tool_choice\":{\"type\":\"function\"}}", "tool_choice.name"},
        {"{\"input\":\"x\"," TOOLF ",\"tool_choice\":{\"type\":\"function\",\"name\":\"g\"}}",
         "tool_choice"},
        {"{\"input\":\"x\",\"tools\":[{\"type\":\"function\",\"name\":\"f\"},{\"type\":"
         "\"function\",\"name\":\"f\"}]}",
         "tools[1]"},
        {"{\"input\":\"x\",\"tool_choice\":\"required\"}", "tool_choice"},
        {"{\"input\":\"x\",\"parallel_tool_calls\":\"no\"}", "parallel_tool_calls"},
        {"{\"input\":\"x\",\"max_tool_calls\":3}", "max_tool_calls"},
        {"{\"input\":\"x\",\"max_output_tokens\":0}", "max_output_tokens"},
        {"{\"input\":\"x\",\"max_output_tokens\":1.5}", "max_output_tokens"},
        {"{\"input\":\"x\",\"temperature\":3}", "temperature"},
        {"{\"input\":\"x\",\"temperature\":\"hot\"}", "temperature"},
        {"{\"input\":\"x\",\"top_p\":1.5}", "top_p"},
        {"{\"input\":\"x\",\"seed\":\"s\"}", "seed"},
        {"{\"input\":\"x\",\"reasoning\":1}", "reasoning"},
        {"{\"input\":\"x\",\"reasoning\":{\"effort\":\"huge\"}}", "reasoning.effort"},
        {"{\"input\":\"x\",\"reasoning\":{\"summary\":\"long\"}}", "reasoning.summary"},
        {"{\"input\":\"x\",\"stream\":1}", "stream"},
        {"{\"input\":\"x\",\"stream_options\":1}", "stream_options"},
        {"{\"input\":\"x\",\"stream_options\":{\"include_obfuscation\":1}}",
         "stream_options.include_obfuscation"},
        {"{\"input\":\"x\",\"text\":1}", "text"},
        {"{\"input\":\"x\",\"text\":{\"verbosity\":\"loud\"}}", "text.verbosity"},
        {"{\"input\":\"x\",\"text\":{\"verbosity\":\"low\"}}", "text.verbosity"},
        {"{\"input\":\"x\",\"text\":{\"format\":1}}", "text.format"},
        {"{\"input\":\"x\",\"text\":{\"format\":{\"type\":\"yaml\"}}}", "text.format.type"},
        {"{\"input\":\"x\",\"text\":{\"format\":{\"type\":\"json_schema\",\"name\":\"n\"}}}",
         "text.format.schema"},
        {"{\"input\":\"x\",\"text\":{\"format\":{\"type\":\"json_schema\",\"name\":3,\"schema\":"
         "{}}}}",
         "text.format.name"},
        {"{\"input\":\"x\",\"text\":{\"format\":{\"type\":\"json_schema\",\"strict\":3,"
         "\"schema\":{}}}}",
         "text.format.strict"},
        {"{\"input\":\"x\",\"text\":{\"format\":{\"type\":\"json_schema\",\"schema\":{\"type\":"
         "\"object\",\"patternProperties\":{}}}}}",
         "text.format.schema"},
        {"{\"input\":\"x\"," TOOLF ",\"tool_choice\":\"required\",\"text\":{\"format\":{"
         "\"type\":\"json_object\"}}}",
         "tool_choice"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        bad(A, cases[i].body, cases[i].param);
    /* not JSON, not an object, a NUL */
    srv_request r;
    srv_error e;
    CHECK_INT(parse(A, &r, "{\"input\":", &e), -1);
    CHECK_INT(e.status, 400);
    CHECK_INT(parse(A, &r, "[1]", &e), -1);
    CHECK_INT(e.status, 400);
    CHECK_INT(A->parse(&r, "{\"input\":\"x\"}\0", 15, NULL, &e), -1);
    CHECK_INT(e.status, 400);
}

#define UMSG "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]"
#define MT "\"max_tokens\":5"
#define TOOLA "\"tools\":[{\"name\":\"f\",\"input_schema\":{\"type\":\"object\"}}]"

static void test_messages_ok(void) {
    const srv_api *M = &srv_api_messages;
    srv_request r;
    srv_error e;
    const char *body =
        "{\"model\":\"claude\",\"max_tokens\":3000,\"system\":[{\"type\":\"text\",\"text\":\"s1\"},"
        "{\"type\":\"text\",\"text\":\"s2\",\"cache_control\":{\"type\":\"ephemeral\"}}],"
        "\"messages\":["
        "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},{\"type\":\"text\","
        "\"text\":\"b\"}]},"
        "{\"role\":\"assistant\",\"content\":[{\"type\":\"thinking\",\"thinking\":\"hmm\","
        "\"signature\":\"sig\"},{\"type\":\"redacted_thinking\",\"data\":\"zz\"},{\"type\":"
        "\"text\",\"text\":\"calling\"},{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"f\","
        "\"input\":{\"x\":1}}]},"
        "{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"toolu_1\","
        "\"content\":\"42\"},{\"type\":\"tool_result\",\"tool_use_id\":\"toolu_2\",\"is_error\":"
        "true,\"content\":[{\"type\":\"text\",\"text\":\"bad\"}]},{\"type\":\"text\",\"text\":"
        "\"go on\"}]},"
        "{\"role\":\"assistant\",\"content\":\"ok\"}],"
        "\"tools\":[{\"name\":\"f\",\"description\":\"d\",\"input_schema\":{\"type\":\"object\","
        "\"properties\":{\"x\":{\"type\":\"integer\"}}}},{\"type\":\"custom\",\"name\":\"g\","
        "\"input_schema\":{\"type\":\"object\"}}],"
        "\"tool_choice\":{\"type\":\"tool\",\"name\":\"g\",\"disable_parallel_tool_use\":true},"
        "\"stop_sequences\":[\"END\",\"\",\"STOP\"],\"temperature\":0.5,\"top_p\":0.9,\"top_k\":7,"
        "\"seed\":11,\"thinking\":{\"type\":\"enabled\",\"budget_tokens\":1024},\"stream\":true,"
        "\"metadata\":{\"user_id\":\"u\"},\"service_tier\":\"auto\"}";
    CHECK_INT(parse(M, &r, body, &e), 0);
    if (!r.root) {
        fprintf(stderr, "%s\n", e.msg);
        return;
    }
    CHECK_STR(r.model, "claude");
    CHECK_INT(r.max_tokens, 3000);
    CHECK_INT(json_array_size(r.messages), 7);
    CHECK_STR(msg_str(&r, 0, "role"), "system");
    CHECK_STR(msg_str(&r, 0, "content"), "s1\ns2");
    CHECK_STR(msg_str(&r, 1, "content"), "a\nb");
    CHECK_STR(msg_str(&r, 2, "role"), "assistant");
    CHECK_STR(msg_str(&r, 2, "content"), "calling");
    CHECK_STR(msg_str(&r, 2, "reasoning_content"), "hmm");
    json_t *call = json_array_get(json_object_get(msg(&r, 2), "tool_calls"), 0);
    CHECK_STR(json_string_value(json_object_get(call, "id")), "toolu_1");
    CHECK_STR(json_string_value(json_object_get(json_object_get(call, "function"), "name")), "f");
    CHECK_INT(json_integer_value(json_object_get(
                  json_object_get(json_object_get(call, "function"), "arguments"), "x")),
              1);
    CHECK_STR(msg_str(&r, 3, "role"), "tool");
    CHECK_STR(msg_str(&r, 3, "tool_call_id"), "toolu_1");
    CHECK_STR(msg_str(&r, 3, "content"), "42");
    CHECK_STR(msg_str(&r, 4, "content"), "Error: bad");
    CHECK_STR(msg_str(&r, 5, "role"), "user");
    CHECK_STR(msg_str(&r, 5, "content"), "go on");
    CHECK_STR(msg_str(&r, 6, "content"), "ok");
    CHECK_INT(json_array_size(r.tools), 2);
    json_t *fn = json_object_get(json_array_get(r.tools, 0), "function");
    CHECK_STR(json_string_value(json_object_get(fn, "description")), "d");
    CHECK(json_is_object(json_object_get(fn, "parameters")));
    CHECK(r.tool_choice == SRV_TOOLS_NAMED);
    CHECK_STR(r.tool_name, "g");
    CHECK(!r.parallel_tool_calls);
    CHECK(r.grammar != NULL);
    CHECK_INT(r.n_stop, 2);
    CHECK_STR(r.stop[1], "STOP");
    CHECK(r.samp.temperature == 0.5f && fabsf(r.samp.top_p - 0.9f) < 1e-7f && r.samp.top_k == 7);
    CHECK(r.samp.has_seed && r.samp.seed == 11);
    CHECK(r.enable_thinking && r.stream);
    srv_request_free(&r);

    CHECK_INT(parse(M, &r, "{" MT "," UMSG "}", &e), 0);
    CHECK(!r.enable_thinking); /* Anthropic: off unless enabled */
    CHECK(!r.stream && r.tools == NULL && r.grammar == NULL && r.parallel_tool_calls);
    CHECK_INT(json_array_size(r.messages), 1);
    srv_request_free(&r);
    CHECK_INT(parse(M, &r, "{" MT "," UMSG "," TOOLA ",\"tool_choice\":{\"type\":\"any\"}}", &e),
              0);
    CHECK(r.tool_choice == SRV_TOOLS_REQUIRED && r.grammar && r.parallel_tool_calls);
    srv_request_free(&r);
    CHECK_INT(parse(M, &r, "{" MT "," UMSG "," TOOLA ",\"tool_choice\":{\"type\":\"none\"}}", &e),
              0);
    CHECK(r.tool_choice == SRV_TOOLS_NONE && !r.tools && !r.grammar);
    srv_request_free(&r);
    CHECK_INT(parse(M, &r,
                    "{" MT "," UMSG ",\"output_config\":{\"effort\":\"low\",\"format\":{\"type\":"
                    "\"json_schema\",\"schema\":{\"type\":\"object\"}}},\"thinking\":{\"type\":"
                    "\"disabled\"}}",
                    &e),
              0);
    CHECK(r.grammar != NULL && !r.enable_thinking);
    srv_request_free(&r);
    /* only tool results: tool messages and no empty user message */
    CHECK_INT(parse(M, &r,
                    "{" MT ",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":"
                    "\"tool_result\",\"tool_use_id\":\"t\"}]}]}",
                    &e),
              0);
    CHECK_INT(json_array_size(r.messages), 1);
    CHECK_STR(msg_str(&r, 0, "role"), "tool");
    CHECK_STR(msg_str(&r, 0, "content"), "");
    srv_request_free(&r);
    /* count_tokens: max_tokens is not needed */
    const char *cbody = "{" UMSG "}";
    CHECK_INT(srv_messages_count_parse(&r, cbody, strlen(cbody), &e), 0);
    CHECK_INT(json_array_size(r.messages), 1);
    srv_request_free(&r);
    const char *cbad = "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image\"}]}]}";
    CHECK_INT(srv_messages_count_parse(&r, cbad, strlen(cbad), &e), -1);
    CHECK_STR(e.param, "messages[0].content[0]");
}

static void test_messages_bad(void) {
    const srv_api *M = &srv_api_messages;
    static const struct {
        const char *body, *param;
    } cases[] = {
        {"{" UMSG "}", "max_tokens"},
        {"{" UMSG ",\"max_tokens\":0}", "max_tokens"},
        {"{" UMSG ",\"max_tokens\":\"5\"}", "max_tokens"},
        {"{" MT "}", "messages"},
        {"{" MT ",\"messages\":{}}", "messages"},
        {"{" MT ",\"messages\":[]}", "messages"},
        {"{" MT ",\"messages\":[1]}", "messages[0]"},
        {"{" MT ",\"messages\":[{\"role\":\"system\",\"content\":\"x\"}]}", "messages[0].role"},
        {"{" MT ",\"messages\":[{\"role\":\"user\"}]}", "messages[0].content"},
        {"{" MT ",\"messages\":[{\"role\":\"user\",\"content\":5}]}", "messages[0].content"},
        {"{" MT ",\"messages\":[{\"role\":\"user\",\"content\":[1]}]}", "messages[0].content[0]"},
        {"{" MT ",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image\",\"source\":"
         "{}}]}]}",
         "messages[0].content[0]"},
        {"{" MT ",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"document\"}]}]}",
         "messages[0].content[0]"},
        {"{" MT ",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\"}]}]}",
         "messages[0].content[0]"},
        {"{" MT ",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"tool_use\",\"id\":"
         "\"t\",\"name\":\"f\",\"input\":{}}]}]}",
         "messages[0].content[0]"},
        {"{" MT ",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\"}]}]}",
         "messages[0].content[0].tool_use_id"},
        {"{" MT ",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\","
         "\"tool_use_id\":\"t\",\"is_error\":\"y\"}]}]}",
         "messages[0].content[0].is_error"},
        {"{" MT ",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\","
         "\"tool_use_id\":\"t\",\"content\":7}]}]}",
         "messages[0].content[0].content"},
        {"{" MT ",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\","
         "\"tool_use_id\":\"t\",\"content\":[{\"type\":\"image\"}]}]}]}",
         "messages[0].content[0].content[0]"},
        {"{" MT ",\"messages\":[{\"role\":\"assistant\",\"content\":[{\"type\":\"tool_use\","
         "\"name\":\"f\",\"input\":{}}]}]}",
         "messages[0].content[0].id"},
        {"{" MT ",\"messages\":[{\"role\":\"assistant\",\"content\":[{\"type\":\"tool_use\","
         "\"id\":\"t\",\"input\":{}}]}]}",
         "messages[0].content[0].name"},
        {"{" MT ",\"messages\":[{\"role\":\"assistant\",\"content\":[{\"type\":\"tool_use\","
         "\"id\":\"t\",\"name\":\"f\",\"input\":\"{}\"}]}]}",
         "messages[0].content[0].input"},
        {"{" MT ",\"messages\":[{\"role\":\"assistant\",\"content\":[{\"type\":\"thinking\"}]}]}",
         "messages[0].content[0].thinking"},
        {"{" MT ",\"messages\":[{\"role\":\"assistant\",\"content\":[{\"type\":\"tool_result\","
         "\"tool_use_id\":\"t\"}]}]}",
         "messages[0].content[0]"},
        {"{" MT "," UMSG ",\"system\":5}", "system"},
        {"{" MT "," UMSG ",\"system\":[{\"type\":\"image\"}]}", "system[0]"},
        {"{" MT "," UMSG ",\"model\":5}", "model"},
        {"{" MT "," UMSG ",\"tools\":{}}", "tools"},
        {"{" MT "," UMSG ",\"tools\":[5]}", "tools[0]"},
        {"{" MT "," UMSG ",\"tools\":[{\"type\":\"bash_20250124\",\"name\":\"bash\"}]}",
         "tools[0].type"},
        {"{" MT "," UMSG ",\"tools\":[{\"type\":5,\"name\":\"bash\"}]}", "tools[0].type"},
        {"{" MT "," UMSG ",\"tools\":[{\"input_schema\":{}}]}", "tools[0].name"},
        {"{" MT "," UMSG ",\"tools\":[{\"name\":\"f\"}]}", "tools[0].input_schema"},
        {"{" MT "," UMSG ",\"tools\":[{\"name\":\"f\",\"description\":2,\"input_schema\":{}}]}",
         "tools[0].description"},
        {"{" MT "," UMSG ",\"tool_choice\":\"auto\"}", "tool_choice"},
        {"{" MT "," UMSG "," TOOLA ",\"tool_choice\":{\"type\":\"some\"}}", "tool_choice.type"},
        {"{" MT "," UMSG "," TOOLA ",\"tool_choice\":{\"type\":\"tool\"}}", "tool_choice.name"},
        {"{" MT "," UMSG "," TOOLA ",\"tool_choice\":{\"type\":\"tool\",\"name\":\"g\"}}",
         "tool_choice"},
        {"{" MT "," UMSG ",\"tools\":[{\"name\":\"f\",\"input_schema\":{}},{\"name\":\"f\","
         "\"input_schema\":{}}]}",
         "tools[1]"},
        {"{" MT "," UMSG "," TOOLA ",\"tool_choice\":{\"type\":\"auto\","
         "\"disable_parallel_tool_use\":1}}",
         "tool_choice.disable_parallel_tool_use"},
        {"{" MT "," UMSG ",\"tool_choice\":{\"type\":\"any\"}}", "tool_choice"},
        {"{" MT "," UMSG ",\"tools\":[{\"name\":\"f\",\"input_schema\":{\"type\":\"object\","
         "\"patternProperties\":{}}}],\"tool_choice\":{\"type\":\"any\"}}",
         "tools"},
        {"{" MT "," UMSG ",\"stop_sequences\":\"x\"}", "stop_sequences"},
        {"{" MT "," UMSG ",\"stop_sequences\":[1]}", "stop_sequences"},
        {"{" MT "," UMSG ",\"stop_sequences\":[\"1\",\"2\",\"3\",\"4\",\"5\",\"6\",\"7\",\"8\","
         "\"9\",\"10\",\"11\",\"12\",\"13\",\"14\",\"15\",\"16\",\"17\"]}",
         "stop_sequences"},
        {"{" MT "," UMSG ",\"temperature\":1.5}", "temperature"},
        {"{" MT "," UMSG ",\"top_p\":-1}", "top_p"},
        {"{" MT "," UMSG ",\"top_k\":-1}", "top_k"},
        {"{" MT "," UMSG ",\"top_k\":1.5}", "top_k"},
        {"{" MT "," UMSG ",\"seed\":[]}", "seed"},
        {"{" MT "," UMSG ",\"thinking\":true}", "thinking"},
        {"{" MT "," UMSG ",\"thinking\":{\"type\":\"maybe\"}}", "thinking.type"},
        {"{\"max_tokens\":5000," UMSG ",\"thinking\":{\"type\":\"enabled\"}}",
         "thinking.budget_tokens"},
        {"{\"max_tokens\":5000," UMSG ",\"thinking\":{\"type\":\"enabled\",\"budget_tokens\":"
         "100}}",
         "thinking.budget_tokens"},
        {"{\"max_tokens\":2000," UMSG ",\"thinking\":{\"type\":\"enabled\",\"budget_tokens\":"
         "2000}}",
         "thinking.budget_tokens"},
        {"{" MT "," UMSG ",\"stream\":\"yes\"}", "stream"},
        {"{" MT "," UMSG ",\"metadata\":1}", "metadata"},
        {"{" MT "," UMSG ",\"service_tier\":1}", "service_tier"},
        {"{" MT "," UMSG ",\"container\":\"c\"}", "container"},
        {"{" MT "," UMSG ",\"mcp_servers\":[]}", "mcp_servers"},
        {"{" MT "," UMSG ",\"output_config\":1}", "output_config"},
        {"{" MT "," UMSG ",\"output_config\":{\"effort\":\"huge\"}}", "output_config.effort"},
        {"{" MT "," UMSG ",\"output_config\":{\"format\":{\"type\":\"xml\"}}}",
         "output_config.format"},
        {"{" MT "," UMSG ",\"output_config\":{\"format\":{\"type\":\"json_schema\"}}}",
         "output_config.format.schema"},
        {"{" MT "," UMSG ",\"output_config\":{\"format\":{\"type\":\"json_schema\",\"schema\":{"
         "\"patternProperties\":{}}}}}",
         "output_config.format.schema"},
        {"{" MT "," UMSG "," TOOLA ",\"tool_choice\":{\"type\":\"any\"},\"output_config\":{"
         "\"format\":{\"type\":\"json_schema\",\"schema\":{}}}}",
         "tool_choice"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        bad(M, cases[i].body, cases[i].param);
}

/* Fields a request leaves out take the model's recommended sampling; those
 * it sends win. */
static void test_defaults(void) {
    inf_sampler_params d = inf_sampler_defaults();
    d.temp = 0.6f;
    d.top_k = 20;
    d.top_p = 0.5f;
    static const struct {
        const srv_api *api;
        const char *plain, *set;
    } cases[] = {
        {&srv_api_responses, "{\"input\":\"x\"}",
         "{\"input\":\"x\",\"temperature\":0.25,\"top_p\":1}"},
        {&srv_api_messages, "{" MT "," UMSG "}",
         "{" MT "," UMSG ",\"temperature\":0.25,\"top_p\":1}"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        srv_request r;
        srv_error e;
        const srv_api *api = cases[i].api;
        CHECK_INT(api->parse(&r, cases[i].plain, strlen(cases[i].plain), &d, &e), 0);
        CHECK(r.samp.temperature == 0.6f && r.samp.top_k == 20 && r.samp.top_p == 0.5f);
        srv_request_free(&r);
        CHECK_INT(api->parse(&r, cases[i].set, strlen(cases[i].set), &d, &e), 0);
        CHECK(r.samp.temperature == 0.25f && r.samp.top_k == 20 && r.samp.top_p == 1.0f);
        srv_request_free(&r);
    }
}

/* ---- writers ---- */

/* One SSE event: its name and its data. */
typedef struct sse_event {
    char name[64];
    json_t *data;
} sse_event;

/* Splits frames "event: NAME\ndata: JSON\n\n" (the ping frame included);
 * returns the count, -1 when a frame is malformed. */
static int sse_parse(const char *s, sse_event *ev, int cap) {
    int n = 0;
    while (s && *s) {
        if (strncmp(s, "event: ", 7)) return -1;
        const char *nl = strchr(s, '\n');
        if (!nl || nl - s - 7 >= 63 || strncmp(nl + 1, "data: ", 6)) return -1;
        const char *end = strstr(nl + 1, "\n\n");
        if (!end || n == cap) return -1;
        memcpy(ev[n].name, s + 7, (size_t)(nl - s - 7));
        ev[n].name[nl - s - 7] = 0;
        ev[n].data = json_loadb(nl + 7, (size_t)(end - nl - 7), 0, NULL);
        if (!ev[n].data) return -1;
        n++;
        s = end + 2;
    }
    return n;
}

static void sse_free(sse_event *ev, int n) {
    for (int i = 0; i < n; i++)
        json_decref(ev[i].data);
}

static const char *jstr(json_t *o, const char *k) {
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

static long long jint(json_t *o, const char *k) {
    return json_integer_value(json_object_get(o, k));
}

/* A reply of `n` parts for the writers: reasoning, text with multibyte
 * characters, calls, text again. */
typedef struct reply_case {
    const char *name;
    inf_part_kind kind[6];
    const char *text[6];
    const char *fn[6];
    int n;
} reply_case;

static const reply_case CASES[] = {
    {"text", {INF_PART_TEXT}, {"Hello, w\xc3\xb6rld \xe2\x82\xac!"}, {0}, 1},
    {"think+text",
     {INF_PART_REASONING, INF_PART_TEXT},
     {"let me \xf0\x9f\xa4\x94 think", "The answer\nis 42."},
     {0},
     2},
    {"calls",
     {INF_PART_REASONING, INF_PART_TEXT, INF_PART_TOOL_CALL, INF_PART_TOOL_CALL},
     {"r", "calling", "{\"city\":\"Paris\"}", "{}"},
     {NULL, NULL, "get_weather", "noop"},
     4},
    {"call only", {INF_PART_TOOL_CALL}, {"{\"a\":[1,\"x\\\"y\"]}"}, {"f"}, 1},
    {"text call text",
     {INF_PART_TEXT, INF_PART_TOOL_CALL, INF_PART_TEXT},
     {"before", "{\"q\":1}", "after \xc3\xa9"},
     {NULL, "f", NULL},
     3},
    {"empty", {0}, {0}, {0}, 0},
};

static void build(const reply_case *c, inf_parts *out) {
    for (int i = 0; i < c->n; i++) {
        if (c->kind[i] == INF_PART_TOOL_CALL)
            inf_parts_add_call(out, c->fn[i], c->text[i], strlen(c->text[i]));
        else
            inf_parts_add_text(out, c->kind[i], c->text[i], strlen(c->text[i]));
    }
}

/* The reply's polls: the parts cut at byte offsets cuts[0..n_cuts) of their
 * concatenated text (a call is never cut; a cut inside a character moves to
 * its end). Each poll holds the parts between two cuts. */
static int polls(const inf_parts *whole, const size_t *cuts, int n_cuts, inf_parts *out, int cap) {
    int np = 0;
    size_t pos = 0;
    int ci = 0;
    inf_parts cur = {0};
    for (int i = 0; i < whole->n; i++) {
        const inf_part *p = &whole->v[i];
        if (p->kind == INF_PART_TOOL_CALL) {
            inf_parts_add_call(&cur, p->name, p->text, p->n);
            pos += p->n;
            while (ci < n_cuts && cuts[ci] <= pos)
                ci++;
            continue;
        }
        size_t at = 0;
        while (at < p->n) {
            size_t end = p->n;
            if (ci < n_cuts && cuts[ci] < pos + p->n && cuts[ci] >= pos + at) {
                end = cuts[ci] - pos;
                while (end < p->n && ((unsigned char)p->text[end] & 0xC0) == 0x80)
                    end++;
                ci++;
            }
            inf_parts_add_text(&cur, p->kind, p->text + at, end - at);
            at = end;
            if (at < p->n && np < cap - 1) {
                out[np++] = cur;
                memset(&cur, 0, sizeof cur);
            }
        }
        pos += p->n;
    }
    out[np++] = cur;
    return np;
}

typedef struct outcome_case {
    inf_finish finish;
    const char *stop;
} outcome_case;

/* Streams the polls through api (appending each to st.all first, as
 * generate.c does) and returns the SSE text. */
static char *stream(const srv_api *api, const srv_resp_meta *m, inf_parts *ps, int np,
                    const srv_outcome *o) {
    srv_stream st;
    memset(&st, 0, sizeof st);
    st.meta = *m;
    st.open = -1;
    st.prompt_tokens = o->prompt_tokens;
    inf_buf out = {0};
    CHECK_INT(api->stream_begin(&st, &out), 0);
    for (int i = 0; i < np; i++) {
        inf_parts_append(&st.all, &ps[i]);
        CHECK_INT(api->stream_parts(&st, &out, &ps[i], NULL), 0);
    }
    CHECK_INT(api->stream_end(&st, &out, o), 0);
    inf_parts_free(&st.all);
    return out.data ? out.data : strdup("");
}

/* Responses: the events are well formed and assemble into the body. */
static void check_responses_stream(const char *sse, json_t *body, const char *what) {
    static sse_event ev[512];
    int n = sse_parse(sse, ev, 512);
    CHECK_MSG(n >= 3, "%s: %d events", what, n);
    if (n < 3) return;
    bool ok = true;
    for (int i = 0; i < n; i++) {
        ok &= !strcmp(ev[i].name, jstr(ev[i].data, "type"));
        ok &= jint(ev[i].data, "sequence_number") == i;
    }
    CHECK_MSG(ok, "%s: event names or sequence numbers", what);
    CHECK_STR(ev[0].name, "response.created");
    CHECK_STR(ev[1].name, "response.in_progress");
    CHECK_STR(jstr(json_object_get(ev[0].data, "response"), "status"), "in_progress");
    /* the SDK's accumulation (openai/lib/responses/ResponseStream) */
    json_t *snap = json_deep_copy(json_object_get(ev[0].data, "response"));
    json_t *out = json_object_get(snap, "output");
    int open_item = -1;
    bool seq_ok = true;
    for (int i = 2; i < n - 1; i++) {
        json_t *d = ev[i].data;
        const char *t = ev[i].name;
        int oi = (int)jint(d, "output_index");
        json_t *item = json_array_get(out, (size_t)oi);
        if (!strcmp(t, "response.output_item.added")) {
            seq_ok &= open_item < 0 && oi == (int)json_array_size(out);
            json_array_append(out, json_object_get(d, "item"));
            open_item = oi;
        } else if (!strcmp(t, "response.content_part.added")) {
            seq_ok &= oi == open_item && jint(d, "content_index") == 0;
            json_t *c = json_object_get(item, "content");
            if (!c) json_object_set_new(item, "content", c = json_array());
            json_array_append(c, json_object_get(d, "part"));
        } else if (!strcmp(t, "response.output_text.delta") ||
                   !strcmp(t, "response.reasoning_text.delta")) {
            seq_ok &= oi == open_item && !strcmp(jstr(d, "item_id"), jstr(item, "id"));
            json_t *c = json_array_get(json_object_get(item, "content"), 0);
            char *s = NULL;
            if (asprintf(&s, "%s%s", jstr(c, "text"), jstr(d, "delta")) > 0)
                json_object_set_new(c, "text", json_string(s));
            free(s);
        } else if (!strcmp(t, "response.function_call_arguments.delta")) {
            seq_ok &= oi == open_item;
            char *s = NULL;
            if (asprintf(&s, "%s%s", jstr(item, "arguments"), jstr(d, "delta")) > 0)
                json_object_set_new(item, "arguments", json_string(s));
            free(s);
        } else if (!strcmp(t, "response.output_text.done") ||
                   !strcmp(t, "response.reasoning_text.done")) {
            json_t *c = json_array_get(json_object_get(item, "content"), 0);
            seq_ok &= oi == open_item && !strcmp(jstr(c, "text"), jstr(d, "text"));
        } else if (!strcmp(t, "response.function_call_arguments.done")) {
            seq_ok &= oi == open_item && !strcmp(jstr(item, "arguments"), jstr(d, "arguments"));
        } else if (!strcmp(t, "response.content_part.done")) {
            seq_ok &=
                oi == open_item && json_equal(json_object_get(d, "part"),
                                              json_array_get(json_object_get(item, "content"), 0));
        } else if (!strcmp(t, "response.output_item.done")) {
            seq_ok &= oi == open_item;
            /* the done item is the assembled one, completed */
            json_object_set(item, "status", json_object_get(json_object_get(d, "item"), "status"));
            seq_ok &= json_equal(item, json_object_get(d, "item"));
            open_item = -1;
        } else {
            seq_ok = false;
            fprintf(stderr, "%s: unexpected event %s\n", what, t);
        }
    }
    CHECK_MSG(seq_ok && open_item < 0, "%s: event sequence", what);
    const char *last = ev[n - 1].name;
    json_t *fin = json_object_get(ev[n - 1].data, "response");
    CHECK_MSG(!strcmp(last, !strcmp(jstr(body, "status"), "incomplete") ? "response.incomplete"
                                                                        : "response.completed"),
              "%s: last event %s", what, last);
    CHECK_MSG(json_equal(fin, body), "%s: the final response differs from the body", what);
    CHECK_MSG(json_equal(out, json_object_get(body, "output")),
              "%s: the assembled output differs from the body's", what);
    json_decref(snap);
    sse_free(ev, n);
}

/* Messages: the events are well formed and assemble into the body. */
static void check_messages_stream(const char *sse, json_t *body, const char *what) {
    static sse_event ev[512];
    int n = sse_parse(sse, ev, 512);
    CHECK_MSG(n >= 4, "%s: %d events", what, n);
    if (n < 4) return;
    bool ok = true;
    for (int i = 0; i < n; i++)
        ok &= !strcmp(ev[i].name, jstr(ev[i].data, "type"));
    CHECK_MSG(ok, "%s: event names", what);
    CHECK_STR(ev[0].name, "message_start");
    CHECK_STR(ev[1].name, "ping");
    CHECK_STR(ev[n - 2].name, "message_delta");
    CHECK_STR(ev[n - 1].name, "message_stop");
    /* message_start: the whole prompt (the cache's share comes at the end) */
    json_t *u0 = json_object_get(json_object_get(ev[0].data, "message"), "usage"),
           *ub = json_object_get(body, "usage");
    CHECK_MSG(jint(u0, "input_tokens") ==
                  jint(ub, "input_tokens") + jint(ub, "cache_read_input_tokens"),
              "%s: message_start's input_tokens", what);
    /* the SDK's accumulation (@anthropic-ai/sdk/lib/MessageStream) */
    json_t *snap = json_deep_copy(json_object_get(ev[0].data, "message"));
    json_t *content = json_object_get(snap, "content");
    json_t *partial = json_array(); /* input_json_delta text per block */
    int open = -1;
    bool seq_ok = true;
    for (int i = 2; i < n - 2; i++) {
        json_t *d = ev[i].data;
        int idx = (int)jint(d, "index");
        json_t *b = json_array_get(content, (size_t)idx);
        if (!strcmp(ev[i].name, "content_block_start")) {
            seq_ok &= open < 0 && idx == (int)json_array_size(content);
            json_array_append_new(content, json_deep_copy(json_object_get(d, "content_block")));
            json_array_append_new(partial, json_string(""));
            open = idx;
        } else if (!strcmp(ev[i].name, "content_block_delta")) {
            seq_ok &= idx == open;
            json_t *dl = json_object_get(d, "delta");
            const char *dt = jstr(dl, "type");
            const char *key = !strcmp(dt, "text_delta")       ? "text"
                              : !strcmp(dt, "thinking_delta") ? "thinking"
                                                              : NULL;
            char *s = NULL;
            if (key) {
                seq_ok &= !strcmp(jstr(b, "type"), !strcmp(key, "text") ? "text" : "thinking");
                if (asprintf(&s, "%s%s", jstr(b, key), jstr(dl, key)) > 0)
                    json_object_set_new(b, key, json_string(s));
            } else {
                seq_ok &= !strcmp(dt, "input_json_delta") && !strcmp(jstr(b, "type"), "tool_use");
                if (asprintf(&s, "%s%s", json_string_value(json_array_get(partial, (size_t)idx)),
                             jstr(dl, "partial_json")) > 0)
                    json_array_set_new(partial, (size_t)idx, json_string(s));
            }
            free(s);
        } else if (!strcmp(ev[i].name, "content_block_stop")) {
            seq_ok &= idx == open;
            if (!strcmp(jstr(b, "type"), "tool_use")) {
                json_t *in =
                    json_loads(json_string_value(json_array_get(partial, (size_t)idx)), 0, NULL);
                seq_ok &= json_is_object(in);
                json_object_set_new(b, "input", in ? in : json_null());
            }
            open = -1;
        } else {
            seq_ok = false;
            fprintf(stderr, "%s: unexpected event %s\n", what, ev[i].name);
        }
    }
    CHECK_MSG(seq_ok && open < 0, "%s: event sequence", what);
    json_t *md = ev[n - 2].data, *delta = json_object_get(md, "delta");
    json_object_set(snap, "stop_reason", json_object_get(delta, "stop_reason"));
    json_object_set(snap, "stop_sequence", json_object_get(delta, "stop_sequence"));
    json_object_set(snap, "usage", json_object_get(md, "usage"));
    CHECK_MSG(json_equal(snap, body), "%s: the assembled message differs from the body", what);
    if (!json_equal(snap, body)) {
        char *a = json_dumps(snap, JSON_COMPACT), *b2 = json_dumps(body, JSON_COMPACT);
        fprintf(stderr, "  stream: %s\n  body:   %s\n", a, b2);
        free(a);
        free(b2);
    }
    json_decref(partial);
    json_decref(snap);
    sse_free(ev, n);
}

static void test_writers(const srv_api *api) {
    static const outcome_case outs[] = {
        {INF_FINISH_STOP, NULL}, {INF_FINISH_LENGTH, NULL}, {INF_FINISH_STOP, "END"}};
    int streams = 0;
    for (size_t c = 0; c < sizeof CASES / sizeof CASES[0]; c++) {
        for (size_t oc = 0; oc < sizeof outs / sizeof outs[0]; oc++) {
            inf_parts whole = {0};
            build(&CASES[c], &whole);
            json_t *echo = NULL;
            if (api == &srv_api_responses) {
                srv_request r;
                srv_error e;
                const char *b = "{\"input\":\"x\",\"instructions\":\"i\",\"max_output_tokens\":9}";
                CHECK_INT(api->parse(&r, b, strlen(b), NULL, &e), 0);
                echo = api->echo(&r);
                srv_request_free(&r);
            }
            srv_resp_meta m;
            srv_resp_meta_init(&m, api, "test-model", echo);
            srv_outcome o = {.finish = outs[oc].finish,
                             .stop_string = outs[oc].stop,
                             .prompt_tokens = 12,
                             .completion_tokens = 34,
                             .cached_tokens = 5};
            char *b = api->body(&m, &whole, &o);
            json_t *body = json_loads(b, 0, NULL);
            CHECK_MSG(body != NULL, "%s: body is not JSON: %s", CASES[c].name, b);
            free(b);
            if (!body) continue;
            size_t total = 0;
            for (int i = 0; i < whole.n; i++)
                total += whole.v[i].n;
            char what[128];
            /* one poll; a cut at every byte; and every byte its own poll */
            for (size_t cut = 0; cut <= total + 1; cut++) {
                static size_t cuts[1024];
                int n_cuts = 0;
                if (cut <= total)
                    cuts[n_cuts++] = cut;
                else
                    for (size_t k = 1; k < total && k < 1024; k++)
                        cuts[n_cuts++] = k;
                static inf_parts ps[1100];
                int np = polls(&whole, cuts, n_cuts, ps, 1100);
                char *sse = stream(api, &m, ps, np, &o);
                snprintf(what, sizeof what, "%s %s/%zu cut %zu", api->name, CASES[c].name, oc, cut);
                if (api == &srv_api_responses)
                    check_responses_stream(sse, body, what);
                else
                    check_messages_stream(sse, body, what);
                free(sse);
                for (int i = 0; i < np; i++)
                    inf_parts_free(&ps[i]);
                streams++;
            }
            /* the body itself: blocks/items in the parts' order */
            if (api == &srv_api_messages) {
                json_t *content = json_object_get(body, "content");
                CHECK_INT(json_array_size(content), whole.n);
                const char *sr = jstr(body, "stop_reason");
                const char *want = outs[oc].finish == INF_FINISH_LENGTH ? "max_tokens"
                                   : outs[oc].stop                      ? "stop_sequence"
                                   : inf_parts_calls(&whole)            ? "tool_use"
                                                                        : "end_turn";
                CHECK_STR(sr, want);
                CHECK_MSG(outs[oc].stop ? !strcmp(jstr(body, "stop_sequence"), outs[oc].stop)
                                        : json_is_null(json_object_get(body, "stop_sequence")),
                          "stop_sequence");
                json_t *u = json_object_get(body, "usage");
                CHECK_INT(jint(u, "input_tokens"), 7);
                CHECK_INT(jint(u, "cache_read_input_tokens"), 5);
                CHECK_INT(jint(u, "output_tokens"), 34);
                CHECK(!strncmp(jstr(body, "id"), "msg_", 4));
                for (int i = 0; i < whole.n; i++) {
                    json_t *bl = json_array_get(content, (size_t)i);
                    const inf_part *p = &whole.v[i];
                    if (p->kind == INF_PART_TOOL_CALL) {
                        CHECK_STR(jstr(bl, "type"), "tool_use");
                        CHECK_STR(jstr(bl, "name"), p->name);
                        CHECK(!strncmp(jstr(bl, "id"), "toolu_", 6));
                        json_t *in = json_loads(p->text, 0, NULL);
                        CHECK(json_equal(in, json_object_get(bl, "input")));
                        json_decref(in);
                    } else {
                        bool t = p->kind == INF_PART_TEXT;
                        CHECK_STR(jstr(bl, "type"), t ? "text" : "thinking");
                        CHECK_STR(jstr(bl, t ? "text" : "thinking"), p->text);
                    }
                }
            } else {
                json_t *output = json_object_get(body, "output");
                CHECK_INT(json_array_size(output), whole.n);
                CHECK_STR(jstr(body, "status"),
                          outs[oc].finish == INF_FINISH_LENGTH ? "incomplete" : "completed");
                CHECK_STR(jstr(body, "object"), "response");
                CHECK(!strncmp(jstr(body, "id"), "resp_", 5));
                CHECK_STR(jstr(body, "instructions"), "i");
                CHECK_INT(jint(body, "max_output_tokens"), 9);
                json_t *u = json_object_get(body, "usage");
                CHECK_INT(jint(u, "input_tokens"), 12);
                CHECK_INT(jint(json_object_get(u, "input_tokens_details"), "cached_tokens"), 5);
                CHECK_INT(jint(u, "output_tokens"), 34);
                CHECK_INT(jint(u, "total_tokens"), 46);
                if (outs[oc].finish == INF_FINISH_LENGTH)
                    CHECK_STR(jstr(json_object_get(body, "incomplete_details"), "reason"),
                              "max_output_tokens");
                else
                    CHECK(json_is_null(json_object_get(body, "incomplete_details")));
                for (int i = 0; i < whole.n; i++) {
                    json_t *it = json_array_get(output, (size_t)i);
                    const inf_part *p = &whole.v[i];
                    if (p->kind == INF_PART_TOOL_CALL) {
                        CHECK_STR(jstr(it, "type"), "function_call");
                        CHECK_STR(jstr(it, "name"), p->name);
                        CHECK_STR(jstr(it, "arguments"), p->text);
                        CHECK(!strncmp(jstr(it, "call_id"), "call_", 5));
                        CHECK(!strncmp(jstr(it, "id"), "fc_", 3));
                    } else {
                        bool t = p->kind == INF_PART_TEXT;
                        CHECK_STR(jstr(it, "type"), t ? "message" : "reasoning");
                        json_t *c0 = json_array_get(json_object_get(it, "content"), 0);
                        CHECK_STR(jstr(c0, "type"), t ? "output_text" : "reasoning_text");
                        CHECK_STR(jstr(c0, "text"), p->text);
                    }
                }
                /* ids unique */
                for (int i = 0; i < whole.n; i++)
                    for (int k = i + 1; k < whole.n; k++)
                        CHECK(strcmp(jstr(json_array_get(output, (size_t)i), "id"),
                                     jstr(json_array_get(output, (size_t)k), "id")));
            }
            json_decref(body);
            srv_resp_meta_free(&m);
            inf_parts_free(&whole);
        }
    }
    CHECK_MSG(streams > 100, "%d streams", streams);
}

/* Through the real driver (api.c, reply.c): the model's raw output, pushed
 * in two pieces cut at every character boundary, gives events that assemble into the
 * whole body srv_whole_body builds from the same text. */
static void test_driver(const srv_api *api) {
    static const char text[] = "<think>\nhmm \xc3\xa9\n</think>\n\nSure.<tool_call>\n{\"name\": "
                               "\"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n"
                               "</tool_call>\n<tool_call>\n{\"name\": \"noop\", \"arguments\": "
                               "{}}\n</tool_call>";
    size_t n = sizeof text - 1;
    inf_reply_opts ro = {.think = true, .tool_calls = true};
    srv_outcome o = {.finish = INF_FINISH_STOP, .prompt_tokens = 4, .completion_tokens = 20};
    json_t *echo = NULL;
    if (api->echo) {
        srv_request r;
        srv_error e;
        const char *b = "{\"input\":\"x\"}";
        CHECK_INT(api->parse(&r, b, strlen(b), NULL, &e), 0);
        echo = api->echo(&r);
        srv_request_free(&r);
    }
    srv_resp_meta m;
    srv_resp_meta_init(&m, api, "test-model", echo);
    char *b = srv_whole_body(api, &m, &ro, text, n, &o);
    json_t *body = b ? json_loads(b, 0, NULL) : NULL;
    free(b);
    CHECK(body != NULL);
    /* the parts the parser found: reasoning, text, two calls */
    json_t *items = json_object_get(body, api == &srv_api_responses ? "output" : "content");
    CHECK_INT(json_array_size(items), 4);
    for (size_t cut = 0; body && cut <= n; cut++) {
        /* the scheduler releases whole UTF-8: no cut inside a character */
        if (cut < n && ((unsigned char)text[cut] & 0xC0) == 0x80) continue;
        srv_resp_meta mc = m;
        mc.echo = json_incref(m.echo);
        srv_stream st;
        srv_stream_init(&st, api, &mc, &ro, false);
        st.prompt_tokens = o.prompt_tokens;
        inf_buf out = {0};
        CHECK_INT(srv_stream_begin(&st, &out), 0);
        CHECK_INT(srv_stream_text(&st, &out, text, cut, NULL), 0);
        CHECK_INT(srv_stream_text(&st, &out, text + cut, n - cut, NULL), 0);
        CHECK_INT(srv_stream_end(&st, &out, &o), 0);
        char what[64];
        snprintf(what, sizeof what, "%s driver cut %zu", api->name, cut);
        if (api == &srv_api_responses)
            check_responses_stream(out.data, body, what);
        else
            check_messages_stream(out.data, body, what);
        inf_buf_free(&out);
        srv_stream_free(&st);
    }
    json_decref(body);
    srv_resp_meta_free(&m);
}

static void test_errors(void) {
    srv_error e;
    srv_error_set(&e, 400, "invalid_request_error", NULL, "max_tokens", "'max_tokens': bad");
    char *s = srv_api_messages.error_body(&e);
    json_t *j = json_loads(s, 0, NULL);
    CHECK_STR(jstr(j, "type"), "error");
    CHECK_STR(jstr(json_object_get(j, "error"), "type"), "invalid_request_error");
    CHECK_STR(jstr(json_object_get(j, "error"), "message"), "'max_tokens': bad");
    json_decref(j);
    free(s);
    static const struct {
        int status;
        const char *type;
    } map[] = {{401, "authentication_error"}, {404, "not_found_error"}, {413, "request_too_large"},
               {503, "overloaded_error"},     {500, "api_error"},       {429, "rate_limit_error"}};
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++) {
        srv_error_set(&e, map[i].status, "x", NULL, NULL, "m");
        s = srv_api_messages.error_body(&e);
        j = json_loads(s, 0, NULL);
        CHECK_STR(jstr(json_object_get(j, "error"), "type"), map[i].type);
        json_decref(j);
        free(s);
    }
    inf_buf out = {0};
    srv_error_set(&e, 503, "unavailable_error", NULL, NULL, "busy");
    CHECK_INT(srv_api_messages.stream_error(&out, &e), 0);
    static sse_event ev[4];
    CHECK_INT(sse_parse(out.data, ev, 4), 1);
    CHECK_STR(ev[0].name, "error");
    CHECK_STR(jstr(json_object_get(ev[0].data, "error"), "type"), "overloaded_error");
    sse_free(ev, 1);
    inf_buf_clear(&out);
    CHECK_INT(srv_api_responses.stream_error(&out, &e), 0);
    CHECK_INT(sse_parse(out.data, ev, 4), 1);
    CHECK_STR(ev[0].name, "error");
    CHECK_STR(jstr(ev[0].data, "message"), "busy");
    sse_free(ev, 1);
    inf_buf_free(&out);
    s = srv_api_responses.error_body(&e);
    j = json_loads(s, 0, NULL);
    CHECK_STR(jstr(json_object_get(j, "error"), "message"), "busy");
    json_decref(j);
    free(s);
    /* Messages' ping is an Anthropic event; Responses uses the comment */
    CHECK(srv_api_messages.ping && strstr(srv_api_messages.ping, "event: ping\n"));
    CHECK(srv_api_responses.ping == NULL);
}

int main(void) {
    test_responses_ok();
    test_responses_bad();
    test_messages_ok();
    test_messages_bad();
    test_defaults();
    test_writers(&srv_api_responses);
    test_writers(&srv_api_messages);
    test_driver(&srv_api_responses);
    test_driver(&srv_api_messages);
    test_errors();
    return th_report();
}
