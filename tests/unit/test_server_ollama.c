/* Ollama's /api/chat and /api/generate (server/api_ollama.c): every request
 * field into the internal request, and every refused field a 400 naming it;
 * the writers, whole and as NDJSON streams: hand-built parts streamed in
 * polls cut at every character give lines that are each one JSON object,
 * all "done": false but the last, and whose message/response, thinking and
 * tool calls put together equal the whole body's; the same through the
 * real driver (reply parser) from raw model text. Then the routes of
 * server/ollama.c on a loopback port with the fake engine (which has no
 * model file: the list endpoints must still answer): the model's name,
 * chat = /v1/chat/completions, the stream on the wire, the errors in
 * Ollama's shape. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"
#include "runtime/sched.h"
#include "server/api.h"
#include "server/http.h"
#include "server_fake.h"

static const srv_api *CHAT = &srv_api_ollama_chat, *GEN = &srv_api_ollama_generate;

#include "api_parse.h"

static const char *mstr(const srv_request *r, size_t i, const char *key) {
    return json_string_value(json_object_get(json_array_get(r->messages, i), key));
}

static void test_chat_ok(void) {
    srv_request r;
    srv_error e;
    const char *body =
        "{\"model\":\"tiny:latest\",\"messages\":["
        "{\"role\":\"system\",\"content\":\"be brief\"},"
        "{\"role\":\"user\",\"content\":\"weather?\",\"images\":[]},"
        "{\"role\":\"assistant\",\"content\":\"\",\"thinking\":\"let me see\",\"tool_calls\":["
        "{\"function\":{\"index\":0,\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\"}}},"
        "{\"id\":\"call_7\",\"function\":{\"name\":\"noop\"}}]},"
        "{\"role\":\"tool\",\"content\":\"sunny\",\"tool_name\":\"get_weather\"}],"
        "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":"
        "{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"}}}}},"
        "{\"type\":\"function\",\"function\":{\"name\":\"noop\"}}],"
        "\"think\":false,\"keep_alive\":\"5m\",\"truncate\":true,\"shift\":false,"
        "\"format\":{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}}},"
        "\"options\":{\"temperature\":0.25,\"top_k\":7,\"top_p\":0.5,\"min_p\":0.125,\"seed\":42,"
        "\"num_predict\":33,\"stop\":[\"END\",\"\",\"x\"],\"repeat_penalty\":1.5,"
        "\"repeat_last_n\":16,\"presence_penalty\":0.5,\"frequency_penalty\":-0.5,\"num_ctx\":512,"
        "\"num_thread\":8,\"num_gpu\":1,\"use_mmap\":true,\"num_batch\":2,\"num_keep\":5,"
        "\"main_gpu\":0,\"typical_p\":1,\"mirostat\":0,\"tfs_z\":1.0,\"mirostat_eta\":0.1,"
        "\"penalize_newline\":true,\"numa\":false,\"top_n\":null},"
        "\"logprobs\":true,\"top_logprobs\":3,\"unknown_field\":1}";
    CHECK_INT(parse(CHAT, &r, body, &e), 0);
    if (!r.root) {
        fprintf(stderr, "%s\n", e.msg);
        return;
    }
    CHECK_INT(r.kind, SRV_CHAT);
    CHECK_STR(r.model, "tiny:latest");
    CHECK_INT(json_array_size(r.messages), 4);
    CHECK_STR(mstr(&r, 0, "role"), "system");
    CHECK_STR(mstr(&r, 0, "content"), "be brief");
    CHECK_STR(mstr(&r, 1, "content"), "weather?");
    CHECK(json_object_get(json_array_get(r.messages, 1), "images") == NULL);
    CHECK_STR(mstr(&r, 2, "reasoning_content"), "let me see");
    json_t *calls = json_object_get(json_array_get(r.messages, 2), "tool_calls");
    CHECK_INT(json_array_size(calls), 2);
    json_t *c0 = json_array_get(calls, 0), *c1 = json_array_get(calls, 1);
    CHECK_STR(json_string_value(json_object_get(c0, "type")), "function");
    json_t *f0 = json_object_get(c0, "function");
    CHECK_STR(json_string_value(json_object_get(f0, "name")), "get_weather");
    json_t *want = json_pack("{s:s}", "city", "Paris");
    CHECK(json_equal(json_object_get(f0, "arguments"), want));
    json_decref(want);
    CHECK(json_object_get(f0, "index") == NULL); /* templates read name and arguments */
    CHECK_STR(json_string_value(json_object_get(c1, "id")), "call_7");
    CHECK(json_is_object(json_object_get(json_object_get(c1, "function"), "arguments")));
    CHECK_STR(mstr(&r, 3, "role"), "tool");
    CHECK_STR(mstr(&r, 3, "tool_name"), "get_weather");
    CHECK_INT(json_array_size(r.tools), 2);
    CHECK_INT(r.tool_choice, SRV_TOOLS_AUTO);
    CHECK(!r.enable_thinking);
    CHECK(r.grammar != NULL);
    CHECK(r.stream); /* Ollama's default */
    CHECK(r.samp.temperature == 0.25f);
    CHECK_INT(r.samp.top_k, 7);
    CHECK(r.samp.top_p == 0.5f);
    CHECK(r.samp.min_p == 0.125f);
    CHECK(r.samp.has_seed);
    CHECK_INT(r.samp.seed, 42);
    CHECK_INT(r.max_tokens, 33);
    CHECK_INT(r.n_stop, 2);
    CHECK_STR(r.stop[0], "END");
    CHECK_STR(r.stop[1], "x");
    CHECK(r.samp.repeat_penalty == 1.5f);
    CHECK_INT(r.samp.penalty_last_n, 16);
    CHECK(r.samp.presence_penalty == 0.5f);
    CHECK(r.samp.frequency_penalty == -0.5f);
    CHECK_INT(r.n_ctx_limit, 512);
    CHECK(r.logprobs);
    CHECK_INT(r.top_logprobs, 3);
    /* the model's name goes back as the request gave it */
    json_t *echo = CHAT->echo(&r);
    CHECK_STR(json_string_value(json_object_get(echo, "model")), "tiny:latest");
    json_decref(echo);
    inf_gen_params gp;
    srv_request_gen_params(&r, &gp);
    CHECK_INT(gp.max_tokens, 33);
    CHECK(gp.sampling.temp == 0.25f);
    CHECK_INT(gp.sampling.seed, 42);
    CHECK_INT(gp.n_stop, 2);
    CHECK(gp.grammar != NULL);
    inf_gram_free(gp.grammar);
    srv_request_free(&r);
}

static void test_chat_defaults(void) {
    srv_request r;
    srv_error e;
    const char *body = "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
                       "\"stream\":false,\"format\":\"json\",\"think\":\"high\","
                       "\"options\":{\"num_predict\":-2,\"seed\":-1,\"stop\":\"\\n\"}}";
    CHECK_INT(parse(CHAT, &r, body, &e), 0);
    if (!r.root) return;
    CHECK(!r.stream);
    CHECK(r.grammar != NULL); /* "json": any object */
    CHECK(r.enable_thinking); /* every level is thinking on */
    CHECK_INT(r.max_tokens, -1);
    CHECK(!r.samp.has_seed); /* a negative seed: a fresh one */
    CHECK_INT(r.n_stop, 1);
    CHECK_STR(r.stop[0], "\n");
    CHECK(r.tools == NULL);
    CHECK_INT(r.n_ctx_limit, 0);
    srv_request_free(&r);
    /* absent: thinking on (a thinking model's default), the model's sampling */
    inf_sampler_params d = {.temp = 0.6f,
                            .top_k = 20,
                            .top_p = 0.95f,
                            .min_p = 0,
                            .repeat_penalty = 1,
                            .repeat_last_n = 64};
    body =
        "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"format\":\"\"}";
    CHECK_INT(CHAT->parse(&r, body, strlen(body), &d, &e), 0);
    if (!r.root) return;
    CHECK(r.enable_thinking);
    CHECK(r.samp.temperature == 0.6f);
    CHECK_INT(r.samp.top_k, 20);
    CHECK(r.grammar == NULL);
    CHECK_INT(r.max_tokens, -1);
    srv_request_free(&r);
}

static void test_generate_ok(void) {
    srv_request r;
    srv_error e;
    const char *body = "{\"model\":\"m\",\"prompt\":\"why?\",\"system\":\"sys\",\"suffix\":\"\","
                       "\"template\":\"\",\"context\":[],\"images\":null,\"stream\":false,"
                       "\"options\":{\"num_predict\":4}}";
    CHECK_INT(parse(GEN, &r, body, &e), 0);
    if (!r.root) return;
    CHECK_INT(r.kind, SRV_CHAT); /* a user turn through the template */
    CHECK_INT(json_array_size(r.messages), 2);
    CHECK_STR(mstr(&r, 0, "role"), "system");
    CHECK_STR(mstr(&r, 0, "content"), "sys");
    CHECK_STR(mstr(&r, 1, "role"), "user");
    CHECK_STR(mstr(&r, 1, "content"), "why?");
    CHECK_INT(r.max_tokens, 4);
    CHECK(!r.stream);
    srv_request_free(&r);
    body = "{\"model\":\"m\",\"prompt\":\"<|im_start|>user\\nhi\",\"raw\":true,"
           "\"format\":\"json\"}";
    CHECK_INT(parse(GEN, &r, body, &e), 0);
    if (!r.root) return;
    CHECK_INT(r.kind, SRV_COMPLETION); /* the prompt as is */
    CHECK_STR(r.prompt, "<|im_start|>user\nhi");
    CHECK(r.stream);
    CHECK(r.grammar != NULL);
    inf_gen_params gp;
    srv_request_gen_params(&r, &gp);
    CHECK_INT(gp.grammar_start, INF_GRAM_AT_ONCE);
    inf_gram_free(gp.grammar);
    srv_request_free(&r);
}

static void test_refused(void) {
    const char *U = "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]";
    char b[1024];
#define CHATB(...) (snprintf(b, sizeof b, "{\"model\":\"m\"," __VA_ARGS__), b)
    bad(CHAT, CHATB("%s,\"images\":[\"aGk=\"]}", U), "images");
    bad(CHAT, CHATB("\"messages\":[{\"role\":\"user\",\"content\":\"hi\",\"images\":[\"aGk=\"]}]}"),
        "messages[0].images");
    bad(CHAT, CHATB("%s,\"options\":{\"mirostat\":2}}", U), "options.mirostat");
    bad(CHAT, CHATB("%s,\"options\":{\"typical_p\":0.7}}", U), "options.typical_p");
    bad(CHAT, CHATB("%s,\"options\":{\"tfs_z\":0.9}}", U), "options.tfs_z");
    bad(CHAT, CHATB("%s,\"options\":{\"temprature\":0.1}}", U), "options.temprature");
    bad(CHAT, CHATB("%s,\"options\":{\"temperature\":\"hot\"}}", U), "options.temperature");
    bad(CHAT, CHATB("%s,\"options\":{\"top_p\":1.5}}", U), "options.top_p");
    bad(CHAT, CHATB("%s,\"options\":{\"top_k\":-1}}", U), "options.top_k");
    bad(CHAT, CHATB("%s,\"options\":{\"num_predict\":0}}", U), "options.num_predict");
    bad(CHAT, CHATB("%s,\"options\":{\"num_predict\":-3}}", U), "options.num_predict");
    bad(CHAT, CHATB("%s,\"options\":{\"num_ctx\":0}}", U), "options.num_ctx");
    bad(CHAT, CHATB("%s,\"options\":{\"seed\":1.5}}", U), "options.seed");
    bad(CHAT, CHATB("%s,\"options\":{\"stop\":[1]}}", U), "options.stop");
    bad(CHAT, CHATB("%s,\"options\":{\"repeat_penalty\":0}}", U), "options.repeat_penalty");
    bad(CHAT, CHATB("%s,\"options\":[]}", U), "options");
    bad(CHAT, CHATB("%s,\"format\":\"xml\"}", U), "format");
    bad(CHAT, CHATB("%s,\"format\":{\"type\":\"nonsense\"}}", U), "format");
    bad(CHAT, CHATB("%s,\"think\":\"extreme\"}", U), "think");
    bad(CHAT, CHATB("%s,\"think\":1}", U), "think");
    bad(CHAT, CHATB("%s,\"stream\":\"yes\"}", U), "stream");
    bad(CHAT, CHATB("%s,\"keep_alive\":{}}", U), "keep_alive");
    bad(CHAT, CHATB("%s,\"_debug_render_only\":true}", U), "_debug_render_only");
    bad(CHAT, CHATB("%s,\"tools\":[{\"type\":\"function\"}]}", U), "tools[0]");
    bad(CHAT, CHATB("%s,\"model\":7}", U), "model");
    bad(CHAT, CHATB("\"x\":1}"), "messages");
    bad(CHAT, CHATB("\"messages\":[]}"), "messages");
    bad(CHAT, CHATB("\"messages\":[{\"role\":\"robot\",\"content\":\"x\"}]}"), "messages[0].role");
    bad(CHAT, CHATB("\"messages\":[{\"role\":\"user\",\"content\":[]}]}"), "messages[0].content");
    bad(CHAT, CHATB("\"messages\":[{\"role\":\"user\",\"content\":\"x\",\"tool_calls\":[]}]}"),
        "messages[0].tool_calls");
    bad(CHAT,
        CHATB(
            "\"messages\":[{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[{\"function\":"
            "{\"name\":\"f\",\"arguments\":\"{}\"}}]}]}"),
        "messages[0].tool_calls[0]");
    bad(CHAT,
        CHATB(
            "\"messages\":[{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[{\"function\":"
            "{\"arguments\":{}}}]}]}"),
        "messages[0].tool_calls[0]");
    bad(CHAT, CHATB("\"messages\":[{\"role\":\"assistant\",\"content\":\"\",\"thinking\":3}]}"),
        "messages[0].thinking");
    bad(GEN, CHATB("\"prompt\":\"hi\",\"suffix\":\"bye\"}"), "suffix");
    bad(GEN, CHATB("\"prompt\":\"hi\",\"template\":\"{{ .Prompt }}\"}"), "template");
    bad(GEN, CHATB("\"prompt\":\"hi\",\"context\":[1,2,3]}"), "context");
    bad(GEN, CHATB("\"prompt\":\"hi\",\"images\":[\"aGk=\"]}"), "images");
    bad(GEN, CHATB("\"prompt\":\"hi\",\"raw\":true,\"system\":\"s\"}"), "system");
    bad(GEN, CHATB("\"prompt\":\"hi\",\"raw\":1}"), "raw");
    bad(GEN, CHATB("\"prompt\":5}"), "prompt");
    bad(GEN, CHATB("\"system\":\"s\"}"), "prompt");
    bad(GEN, CHATB("\"prompt\":\"hi\",\"options\":{\"mirostat\":1}}"), "options.mirostat");
#undef CHATB
    /* not JSON, not an object */
    srv_request r;
    srv_error e;
    CHECK_INT(parse(CHAT, &r, "{\"model\":", &e), -1);
    CHECK_INT(e.status, 400);
    CHECK(strstr(e.msg, "malformed JSON") != NULL);
    CHECK_INT(parse(GEN, &r, "[1]", &e), -1);
    CHECK_INT(e.status, 400);
}

/* ---- writers ---- */

typedef struct part_spec {
    inf_part_kind kind;
    const char *text; /* TOOL_CALL: the arguments */
    const char *name;
} part_spec;

typedef struct reply_case {
    const char *name;
    part_spec p[5];
    int n;
} reply_case;

static const reply_case CASES[] = {
    {"text", {{INF_PART_TEXT, "Hello, w\xc3\xb6rld!", NULL}}, 1},
    {"empty", {{0}}, 0},
    {"think+text",
     {{INF_PART_REASONING, "hmm \xe2\x82\xac", NULL}, {INF_PART_TEXT, "Sure \"x\"\n", NULL}},
     2},
    {"think+calls",
     {{INF_PART_REASONING, "need weather", NULL},
      {INF_PART_TEXT, "Let me look.", NULL},
      {INF_PART_TOOL_CALL, "{\"city\":\"Paris\"}", "get_weather"},
      {INF_PART_TOOL_CALL, "{}", "noop"}},
     4},
};

static void build(const reply_case *c, inf_parts *out) {
    for (int i = 0; i < c->n; i++) {
        const part_spec *s = &c->p[i];
        if (s->kind == INF_PART_TOOL_CALL)
            inf_parts_add_call(out, s->name, s->text, strlen(s->text));
        else
            inf_parts_add_text(out, s->kind, s->text, strlen(s->text));
    }
}

/* The parts cut into polls at byte `cut` of each text part (not inside a
 * UTF-8 character); cut 0: one poll. */
static int polls(const inf_parts *whole, size_t cut, inf_parts *out, int cap) {
    int np = 0;
    memset(out, 0, sizeof *out * (size_t)cap);
    for (int i = 0; i < whole->n && np < cap - 2; i++) {
        const inf_part *p = &whole->v[i];
        if (p->kind == INF_PART_TOOL_CALL) {
            inf_parts_add_call(&out[np], p->name, p->text, p->n);
            continue;
        }
        size_t at = 0;
        while (at < p->n) {
            size_t end = cut ? at + cut : p->n;
            if (end > p->n) end = p->n;
            while (end < p->n && ((unsigned char)p->text[end] & 0xC0) == 0x80)
                end++;
            inf_parts_add_text(&out[np], p->kind, p->text + at, end - at);
            at = end;
            if (cut && np < cap - 2) np++;
        }
    }
    return np + 1;
}

static char *stream(const srv_api *api, const srv_resp_meta *m, inf_parts *ps, int np,
                    const srv_outcome *o) {
    srv_stream st;
    memset(&st, 0, sizeof st);
    st.api = api;
    st.meta = *m;
    st.open = -1;
    inf_buf out = {0};
    CHECK_INT(api->stream_begin(&st, &out), 0);
    for (int i = 0; i < np; i++) {
        if (!ps[i].n) continue; /* the driver hands over no empty poll */
        inf_parts_append(&st.all, &ps[i]);
        CHECK_INT(api->stream_parts(&st, &out, &ps[i], NULL), 0);
    }
    CHECK_INT(api->stream_end(&st, &out, o), 0);
    inf_parts_free(&st.all);
    return out.data ? out.data : strdup("");
}

static const char *jstr(json_t *o, const char *k) {
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

/* The NDJSON stream: one object per line, done false but on the last,
 * which ends the stream; its text, thinking and calls put together equal
 * the whole body's; the last line carries what the body carries but the
 * reply. */
static void check_stream(const srv_api *api, const char *nd, json_t *body, const char *what) {
    bool chat = api == CHAT;
    inf_buf text = {0}, think = {0};
    json_t *calls = json_array(), *last = NULL;
    int lines = 0;
    const char *s = nd;
    bool ok = true;
    while (*s && ok) {
        const char *nl = strchr(s, '\n');
        if (!nl) {
            CHECK_MSG(0, "%s: a line without its newline: %s", what, s);
            break;
        }
        json_t *j = json_loadb(s, (size_t)(nl - s), 0, NULL);
        CHECK_MSG(json_is_object(j), "%s: line %d is not a JSON object: %.*s", what, lines,
                  (int)(nl - s), s);
        if (!j) break;
        if (last) {
            ok = json_is_false(json_object_get(last, "done"));
            CHECK_MSG(ok, "%s: line %d before the last has done != false", what, lines - 1);
        }
        json_decref(last);
        last = j;
        CHECK_STR(jstr(j, "model"), "tiny:latest");
        CHECK_MSG(strlen(jstr(j, "created_at")) == 30, "%s: created_at '%s'", what,
                  jstr(j, "created_at"));
        json_t *src = chat ? json_object_get(j, "message") : j;
        if (chat) CHECK_STR(jstr(src, "role"), "assistant");
        const char *t = jstr(src, chat ? "content" : "response");
        inf_buf_add(&text, t, strlen(t));
        t = jstr(src, "thinking");
        inf_buf_add(&think, t, strlen(t));
        json_array_extend(calls, json_object_get(src, "tool_calls"));
        lines++;
        s = nl + 1;
    }
    CHECK_MSG(last && json_is_true(json_object_get(last, "done")), "%s: the last line is not done",
              what);
    json_t *wsrc = chat ? json_object_get(body, "message") : body;
    inf_buf_add(&text, "", 1);
    inf_buf_add(&think, "", 1);
    CHECK_MSG(!strcmp(text.data, jstr(wsrc, chat ? "content" : "response")),
              "%s: streamed text '%s' != whole '%s'", what, text.data,
              jstr(wsrc, chat ? "content" : "response"));
    CHECK_MSG(!strcmp(think.data, jstr(wsrc, "thinking")), "%s: streamed thinking '%s' != '%s'",
              what, think.data, jstr(wsrc, "thinking"));
    json_t *wcalls = json_object_get(wsrc, "tool_calls");
    CHECK_MSG(wcalls ? json_equal(calls, wcalls) : json_array_size(calls) == 0,
              "%s: streamed tool calls differ", what);
    if (last) {
        static const char *const SAME[] = {"done_reason",   "prompt_eval_count",
                                           "eval_count",    "prompt_eval_duration",
                                           "eval_duration", "load_duration"};
        for (size_t i = 0; i < sizeof SAME / sizeof SAME[0]; i++)
            CHECK_MSG(json_equal(json_object_get(last, SAME[i]), json_object_get(body, SAME[i])),
                      "%s: the last line's %s differs from the body's", what, SAME[i]);
        CHECK(json_is_integer(json_object_get(last, "total_duration")));
    }
    json_decref(last);
    json_decref(calls);
    inf_buf_free(&text);
    inf_buf_free(&think);
}

static void test_writers(const srv_api *api) {
    bool chat = api == CHAT;
    inf_timings tm = {.prompt_n = 12, .prompt_ms = 1.5, .predicted_n = 34, .predicted_ms = 250};
    int streams = 0;
    for (size_t c = 0; c < sizeof CASES / sizeof CASES[0]; c++) {
        if (!chat && c == 3) continue; /* generate offers no tools */
        for (int fin = 0; fin < 2; fin++) {
            inf_parts whole = {0};
            build(&CASES[c], &whole);
            srv_resp_meta m;
            srv_resp_meta_init(&m, api, "tiny", json_pack("{s:s}", "model", "tiny:latest"));
            srv_outcome o = {.finish = fin ? INF_FINISH_LENGTH : INF_FINISH_STOP,
                             .prompt_tokens = 12,
                             .completion_tokens = 34,
                             .timings = &tm};
            char *b = api->body(&m, &whole, &o);
            json_t *body = b ? json_loads(b, 0, NULL) : NULL;
            CHECK_MSG(body != NULL, "%s: the body is not JSON: %s", CASES[c].name, b);
            free(b);
            if (!body) continue;
            CHECK(json_is_true(json_object_get(body, "done")));
            CHECK_STR(jstr(body, "done_reason"), fin ? "length" : "stop");
            CHECK_STR(jstr(body, "model"), "tiny:latest");
            CHECK_INT(json_integer_value(json_object_get(body, "prompt_eval_count")), 12);
            CHECK_INT(json_integer_value(json_object_get(body, "eval_count")), 34);
            CHECK_INT(json_integer_value(json_object_get(body, "prompt_eval_duration")), 1500000);
            CHECK_INT(json_integer_value(json_object_get(body, "eval_duration")), 250000000);
            CHECK(json_integer_value(json_object_get(body, "total_duration")) >= 0);
            json_t *src = chat ? json_object_get(body, "message") : body;
            CHECK_MSG(json_is_string(json_object_get(src, chat ? "content" : "response")),
                      "%s: content/response is a string", CASES[c].name);
            /* the parts, in the body */
            for (int i = 0, k = 0; i < whole.n; i++) {
                const inf_part *p = &whole.v[i];
                if (p->kind == INF_PART_TEXT)
                    CHECK_STR(jstr(src, chat ? "content" : "response"), p->text);
                else if (p->kind == INF_PART_REASONING)
                    CHECK_STR(jstr(src, "thinking"), p->text);
                else {
                    json_t *call = json_array_get(json_object_get(src, "tool_calls"), (size_t)k);
                    json_t *fn = json_object_get(call, "function");
                    CHECK_STR(jstr(fn, "name"), p->name);
                    CHECK_INT(json_integer_value(json_object_get(fn, "index")), k);
                    json_t *args = json_loads(p->text, 0, NULL);
                    CHECK_MSG(json_equal(args, json_object_get(fn, "arguments")),
                              "arguments are an object equal to the call's");
                    json_decref(args);
                    CHECK(!strncmp(jstr(call, "id"), "call_", 5));
                    k++;
                }
            }
            if (!CASES[c].n || c == 0) CHECK(json_object_get(src, "thinking") == NULL);
            for (size_t cut = 0; cut <= 24; cut++) {
                static inf_parts ps[200];
                int np = polls(&whole, cut, ps, 200);
                char *nd = stream(api, &m, ps, np, &o);
                char what[128];
                snprintf(what, sizeof what, "%s %s/%d cut %zu", api->name, CASES[c].name, fin, cut);
                check_stream(api, nd, body, what);
                free(nd);
                for (int i = 0; i < np; i++)
                    inf_parts_free(&ps[i]);
                streams++;
            }
            json_decref(body);
            srv_resp_meta_free(&m);
            inf_parts_free(&whole);
        }
    }
    CHECK_MSG(streams > 100, "%d streams", streams);
}

/* Through the driver (api.c + reply.c): raw model text pushed in two pieces
 * cut at every character boundary streams what the whole body holds. */
static void test_driver(void) {
    static const char text[] = "<think>\nhmm \xc3\xa9\n</think>\n\nSure.<tool_call>\n{\"name\": "
                               "\"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n"
                               "</tool_call>\n<tool_call>\n{\"name\": \"noop\", \"arguments\": "
                               "{}}\n</tool_call>";
    size_t n = sizeof text - 1;
    inf_reply_opts ro = {.think = true, .tool_calls = true};
    inf_timings tm = {0};
    srv_outcome o = {
        .finish = INF_FINISH_STOP, .prompt_tokens = 4, .completion_tokens = 20, .timings = &tm};
    srv_resp_meta m;
    srv_resp_meta_init(&m, CHAT, "tiny", json_pack("{s:s}", "model", "tiny:latest"));
    char *b = srv_whole_body(CHAT, &m, &ro, text, n, &o);
    json_t *body = b ? json_loads(b, 0, NULL) : NULL;
    free(b);
    CHECK(body != NULL);
    json_t *msg = json_object_get(body, "message");
    CHECK_STR(jstr(msg, "thinking"), "hmm \xc3\xa9");
    CHECK_STR(jstr(msg, "content"), "Sure.");
    CHECK_INT(json_array_size(json_object_get(msg, "tool_calls")), 2);
    for (size_t cut = 0; body && cut <= n; cut++) {
        if (cut < n && ((unsigned char)text[cut] & 0xC0) == 0x80) continue;
        srv_resp_meta mc = m;
        mc.echo = json_incref(m.echo);
        srv_stream st;
        srv_stream_init(&st, CHAT, &mc, &ro, false);
        inf_buf out = {0};
        CHECK_INT(srv_stream_begin(&st, &out), 0);
        CHECK_INT(srv_stream_text(&st, &out, text, cut, NULL), 0);
        CHECK_INT(srv_stream_text(&st, &out, text + cut, n - cut, NULL), 0);
        CHECK_INT(srv_stream_end(&st, &out, &o), 0);
        char what[64];
        snprintf(what, sizeof what, "driver cut %zu", cut);
        check_stream(CHAT, out.data, body, what);
        inf_buf_free(&out);
        srv_stream_free(&st);
    }
    json_decref(body);
    srv_resp_meta_free(&m);
}

/* logprobs: OpenAI chat's content entries, on the line of the first part,
 * and on a line of their own while the text is held. */
static void test_logprobs(void) {
    srv_resp_meta m;
    srv_resp_meta_init(&m, GEN, "tiny", NULL);
    srv_stream st;
    memset(&st, 0, sizeof st);
    st.api = GEN;
    st.meta = m;
    inf_buf out = {0};
    inf_parts p = {0};
    inf_parts_add_text(&p, INF_PART_TEXT, "Hi", 2);
    json_t *lp = json_pack("{s:[{s:s,s:f,s:[]}]}", "content", "token", "Hi", "logprob", -0.5,
                           "top_logprobs");
    json_t *want = json_incref(json_object_get(lp, "content"));
    CHECK_INT(GEN->stream_parts(&st, &out, &p, lp), 0);
    inf_parts none = {0};
    json_t *lp2 =
        json_pack("{s:[{s:s,s:f,s:[]}]}", "content", "token", "<", "logprob", -1.0, "top_logprobs");
    CHECK_INT(GEN->stream_parts(&st, &out, &none, lp2), 0);
    char *nl = out.data ? strchr(out.data, '\n') : NULL;
    json_t *l1 = nl ? json_loadb(out.data, (size_t)(nl - out.data), 0, NULL) : NULL;
    json_t *l2 = nl ? json_loads(nl + 1, JSON_DISABLE_EOF_CHECK, NULL) : NULL;
    CHECK(json_equal(json_object_get(l1, "logprobs"), want));
    CHECK_STR(jstr(l1, "model"), "tiny"); /* no echo: the server's name */
    CHECK_STR(jstr(l1, "response"), "Hi");
    CHECK_STR(jstr(l2, "response"), "");
    CHECK_INT(json_array_size(json_object_get(l2, "logprobs")), 1);
    json_decref(l1);
    json_decref(l2);
    json_decref(want);
    inf_parts_free(&p);
    inf_buf_free(&out);
    srv_resp_meta_free(&m);
}

static void test_errors_and_time(void) {
    srv_error e;
    srv_error_set(&e, 404, "not_found_error", NULL, "model", "model '%s' not found", "x\"y");
    char *b = CHAT->error_body(&e);
    json_t *j = b ? json_loads(b, 0, NULL) : NULL;
    CHECK_STR(jstr(j, "error"), "model 'x\"y' not found");
    CHECK_INT(json_object_size(j), 1);
    json_decref(j);
    free(b);
    inf_buf out = {0};
    CHECK_INT(GEN->stream_error(&out, &e), 0);
    CHECK_MSG(out.len && out.data[out.len - 1] == '\n' && !memchr(out.data, '\n', out.len - 1),
              "one line");
    j = json_loadb(out.data, out.len, 0, NULL);
    CHECK_STR(jstr(j, "error"), "model 'x\"y' not found");
    json_decref(j);
    inf_buf_free(&out);
    char t[64];
    srv_ollama_time(t, sizeof t, 1234567890123456789LL);
    CHECK_STR(t, "2009-02-13T23:31:30.123456789Z");
    srv_ollama_time(t, sizeof t, 5);
    CHECK_STR(t, "1970-01-01T00:00:00.000000005Z");
    CHECK_STR(CHAT->stream_type, "application/x-ndjson");
    CHECK_STR(GEN->ping, ""); /* never: the client would warn on every ping line */
}

/* ---- the routes, over HTTP ---- */

static int g_port;

/* One request on a fresh connection (Connection: close); the status, and
 * the body (chunked decoded) and Content-Type in out/type. */
static int http(const char *method, const char *path, const char *headers, const char *body,
                inf_buf *out, char *type, size_t type_cap) {
    memset(out, 0, sizeof *out);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)g_port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct timeval tv = {10, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (connect(fd, (struct sockaddr *)&a, sizeof a)) {
        close(fd);
        return -1;
    }
    char head[1024];
    int n = snprintf(head, sizeof head,
                     "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n%s"
                     "Content-Length: %zu\r\n\r\n",
                     method, path, headers ? headers : "", body ? strlen(body) : 0);
    if (write(fd, head, (size_t)n) < 0 || (body && write(fd, body, strlen(body)) < 0)) {
        close(fd);
        return -1;
    }
    inf_buf raw = {0};
    char buf[4096];
    ssize_t k;
    while ((k = read(fd, buf, sizeof buf)) > 0)
        inf_buf_add(&raw, buf, (size_t)k);
    close(fd);
    inf_buf_add(&raw, "", 1);
    int status = -1;
    sscanf(raw.data, "HTTP/1.%*d %d", &status);
    char *sep = strstr(raw.data, "\r\n\r\n");
    const char *ct = strcasestr(raw.data, "\r\nContent-Type: ");
    if (type)
        snprintf(type, type_cap, "%.*s", ct ? (int)strcspn(ct + 16, "\r") : 0, ct ? ct + 16 : "");
    bool chunked = strcasestr(raw.data, "\r\nTransfer-Encoding: chunked") != NULL;
    for (const char *p = sep ? sep + 4 : ""; *p;) {
        if (!chunked) {
            inf_buf_add(out, p, strlen(p));
            break;
        }
        char *eol;
        long len = strtol(p, &eol, 16);
        if (len <= 0 || strncmp(eol, "\r\n", 2)) break;
        inf_buf_add(out, eol + 2, (size_t)len);
        p = eol + 2 + len + 2;
    }
    inf_buf_add(out, "", 1);
    out->len--;
    inf_buf_free(&raw);
    return status;
}

static json_t *http_json(const char *method, const char *path, const char *headers,
                         const char *body, int *status) {
    inf_buf r;
    *status = http(method, path, headers, body, &r, NULL, 0);
    json_t *j = json_loads(r.data, 0, NULL);
    inf_buf_free(&r);
    return j;
}

#define KEYH "Authorization: Bearer sk-test\r\n"

/* An error in Ollama's shape: {"error": "..."} holding `needle`. */
static void http_error(const char *method, const char *path, const char *headers, const char *body,
                       int want, const char *needle) {
    int st;
    json_t *j = http_json(method, path, headers, body, &st);
    CHECK_MSG(st == want, "%s %s: status %d, expected %d", method, path, st, want);
    const char *msg = json_string_value(json_object_get(j, "error"));
    CHECK_MSG(msg && json_object_size(j) == 1 && strstr(msg, needle),
              "%s %s: error '%s' is not Ollama's {\"error\"} with '%s'", method, path,
              msg ? msg : "(none)", needle);
    json_decref(j);
}

static void test_routes(void) {
    fake f;
    inf_exec ex = make_engine(&f, 2, 256, 64);
    srv_config cfg = {.host = "127.0.0.1",
                      .api_key = "sk-test",
                      .alias = "fake-alias",
                      .max_body = 65536,
                      .timeout_s = 30,
                      .max_conns = 16};
    srv_http *h;
    inf_sched *s;
    inf_err err;
    if (srv_http_start(&h, &cfg, &err) || inf_sched_create(&s, &ex, 32, &err)) {
        CHECK_MSG(0, "server: %s", err.msg);
        return;
    }
    g_port = srv_http_port(h);
    srv_http_ready(h, &ex, s);
    int st;
    const char *conv = "\"messages\":[{\"role\":\"user\",\"content\":\"hello there\"}]";
    char body[512];

    /* chat, whole: the text /v1/chat/completions gives for the same request */
    snprintf(body, sizeof body,
             "{\"model\":\"Fake-Alias:latest\",%s,\"stream\":false,\"think\":false,"
             "\"options\":{\"temperature\":0,\"num_predict\":12}}",
             conv);
    json_t *o = http_json("POST", "/api/chat", KEYH, body, &st);
    CHECK_INT(st, 200);
    snprintf(body, sizeof body, "{%s,\"temperature\":0,\"max_tokens\":12}", conv);
    json_t *oa = http_json("POST", "/v1/chat/completions",
                           KEYH "Content-Type: application/json\r\n", body, &st);
    CHECK_INT(st, 200);
    json_t *omsg = json_object_get(o, "message");
    json_t *choice = json_array_get(json_object_get(oa, "choices"), 0);
    const char *want = jstr(json_object_get(choice, "message"), "content");
    CHECK_MSG(*want && !strcmp(jstr(omsg, "content"), want), "/api/chat '%s' != /v1 '%s'",
              jstr(omsg, "content"), want);
    CHECK_STR(jstr(o, "model"), "Fake-Alias:latest"); /* as sent */
    CHECK_INT(
        json_integer_value(json_object_get(o, "eval_count")),
        json_integer_value(json_object_get(json_object_get(oa, "usage"), "completion_tokens")));
    CHECK_INT(json_integer_value(json_object_get(o, "prompt_eval_count")), 12);
    char *whole = strdup(jstr(omsg, "content"));
    json_decref(o);
    json_decref(oa);

    /* streamed by default, NDJSON on the wire */
    snprintf(body, sizeof body,
             "{\"model\":\"fake-alias\",%s,\"think\":false,\"options\":{\"temperature\":0,"
             "\"num_predict\":12}}",
             conv);
    inf_buf r;
    char type[64];
    st = http("POST", "/api/chat", KEYH, body, &r, type, sizeof type);
    CHECK_INT(st, 200);
    CHECK_STR(type, "application/x-ndjson");
    inf_buf text = {0};
    int lines = 0;
    bool done = false;
    for (char *p = r.data, *nl; (nl = strchr(p, '\n')); p = nl + 1, lines++) {
        json_t *j = json_loadb(p, (size_t)(nl - p), 0, NULL);
        CHECK_MSG(json_is_object(j), "line %d: %.*s", lines, (int)(nl - p), p);
        const char *c = jstr(json_object_get(j, "message"), "content");
        inf_buf_add(&text, c, strlen(c));
        done = json_is_true(json_object_get(j, "done"));
        json_decref(j);
    }
    inf_buf_add(&text, "", 1);
    CHECK_MSG(done && lines >= 2, "%d lines, done %d: %s", lines, done, r.data);
    CHECK_MSG(!strcmp(text.data, whole), "streamed '%s' != whole '%s'", text.data, whole);
    inf_buf_free(&text);
    inf_buf_free(&r);
    free(whole);

    /* generate: the prompt as a user turn, raw as a completion */
    json_t *g = http_json("POST", "/api/generate", KEYH,
                          "{\"model\":\"fake-alias\",\"prompt\":\"hello there\",\"raw\":true,"
                          "\"stream\":false,\"options\":{\"num_predict\":3}}",
                          &st);
    CHECK_INT(st, 200);
    CHECK_INT(json_integer_value(json_object_get(g, "prompt_eval_count")), 11);
    CHECK(json_is_string(json_object_get(g, "response")));
    json_decref(g);
    g = http_json("POST", "/api/generate", KEYH, "{\"model\":\"fake-alias\"}", &st);
    CHECK_INT(st, 200);
    CHECK_STR(jstr(g, "done_reason"), "load");
    json_decref(g);

    /* the list endpoints, with no model file behind the engine */
    json_t *t = http_json("GET", "/api/tags", KEYH, NULL, &st);
    CHECK_INT(st, 200);
    json_t *m0 = json_array_get(json_object_get(t, "models"), 0);
    CHECK_STR(jstr(m0, "name"), "fake-alias:latest");
    CHECK_INT(strlen(jstr(m0, "digest")), 64);
    CHECK(json_is_object(json_object_get(m0, "details")));
    json_decref(t);
    t = http_json("GET", "/api/ps", KEYH, NULL, &st);
    CHECK_INT(st, 200);
    CHECK_INT(json_integer_value(json_object_get(json_array_get(json_object_get(t, "models"), 0),
                                                 "context_length")),
              256);
    json_decref(t);
    t = http_json("POST", "/api/show", KEYH, "{\"model\":\"fake-alias\"}", &st);
    CHECK_INT(st, 200);
    CHECK(json_is_object(json_object_get(t, "model_info")));
    json_decref(t);
    t = http_json("GET", "/api/version", KEYH, NULL, &st);
    CHECK_INT(st, 200);
    CHECK(*jstr(t, "version"));
    json_decref(t);

    /* errors, in Ollama's shape */
    http_error("POST", "/api/chat", KEYH, "{\"model\":\"llama3\",\"messages\":[]}", 404,
               "model 'llama3' not found");
    http_error("POST", "/api/chat", KEYH, "{\"messages\":[]}", 400, "model is required");
    http_error("POST", "/api/show", KEYH, "{\"model\":\"x\"}", 404, "not found");
    http_error("POST", "/api/chat", "Authorization: Bearer wrong\r\n", "{}", 401, "API key");
    http_error("GET", "/api/tags", NULL, NULL, 401, "API key");
    http_error("POST", "/api/pull", KEYH, "{\"model\":\"x\"}", 404, "not served");
    http_error("POST", "/api/embed", KEYH, "{\"model\":\"fake-alias\",\"input\":\"x\"}", 501,
               "--embeddings");
    http_error("POST", "/api/generate", KEYH,
               "{\"model\":\"fake-alias\",\"prompt\":\"hi\",\"options\":{\"num_ctx\":9999}}", 400,
               "options.num_ctx");
    http_error("POST", "/api/generate", KEYH,
               "{\"model\":\"fake-alias\",\"prompt\":\"hello there\",\"options\":{\"num_ctx\":4}}",
               400, "num_ctx");
    http_error("POST", "/api/generate", KEYH, "{\"model\":", 400, "malformed JSON");
    srv_http_stop(h);
    inf_sched_free(s);
}

int main(void) {
    test_chat_ok();
    test_chat_defaults();
    test_generate_ok();
    test_refused();
    test_writers(CHAT);
    test_writers(GEN);
    test_driver();
    test_logprobs();
    test_errors_and_time();
    test_routes();
    return th_report();
}
