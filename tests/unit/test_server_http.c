/* The HTTP layer end to end on a loopback port, with the fake engine: status
 * codes and error shapes, auth, body limit, SSE on the wire, a client that
 * disconnects mid-stream freeing its slot, context_length_exceeded, metrics.
 *
 * `test_server_http --serve PORT` keeps a fake-engine server up until killed
 * (for developing the client suites without a model). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "server/http.h"
#include "server/metrics.h"
#include "runtime/sched.h"
#include "server_fake.h"

static int g_port;

static int connect_port(int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a)) {
        close(fd);
        return -1;
    }
    struct timeval tv = {10, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    return fd;
}

static void send_request(int fd, const char *method, const char *path, const char *headers,
                         const char *body) {
    char head[1024];
    int n = snprintf(head, sizeof head,
                     "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n%s"
                     "Content-Length: %zu\r\nContent-Type: application/json\r\n\r\n",
                     method, path, headers ? headers : "", body ? strlen(body) : 0);
    if (write(fd, head, (size_t)n) < 0) return;
    if (body && write(fd, body, strlen(body)) < 0) return;
}

/* Decodes a chunked body in place. */
static void dechunk(inf_buf *b) {
    inf_buf out = {0};
    const char *p = b->data, *end = b->data + b->len;
    while (p < end) {
        char *eol;
        long n = strtol(p, &eol, 16);
        const char *data = strstr(eol, "\r\n");
        if (!data || n <= 0) break;
        data += 2;
        if (data + n > end) n = end - data;
        inf_buf_add(&out, data, (size_t)n);
        p = data + n + 2;
    }
    inf_buf_free(b);
    *b = out;
    if (!b->data) inf_buf_add(b, "", 0);
}

/* One request; returns the status and the body (decoded). */
static int request(const char *method, const char *path, const char *headers, const char *body,
                   inf_buf *resp) {
    memset(resp, 0, sizeof *resp);
    int fd = connect_port(g_port);
    if (fd < 0) return -1;
    send_request(fd, method, path, headers, body);
    inf_buf raw = {0};
    char buf[4096];
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0)
        inf_buf_add(&raw, buf, (size_t)n);
    close(fd);
    int status = -1;
    if (raw.data) sscanf(raw.data, "HTTP/1.%*d %d", &status);
    const char *sep = raw.data ? strstr(raw.data, "\r\n\r\n") : NULL;
    if (sep) {
        inf_buf_add(resp, sep + 4, raw.len - (size_t)(sep + 4 - raw.data));
        char *h = strndup(raw.data, (size_t)(sep - raw.data));
        for (char *c = h; *c; c++)
            *c = (char)(*c >= 'A' && *c <= 'Z' ? *c + 32 : *c);
        if (strstr(h, "transfer-encoding: chunked")) dechunk(resp);
        free(h);
    }
    if (!resp->data) inf_buf_add(resp, "", 0);
    inf_buf_free(&raw);
    return status;
}

static json_t *request_json(const char *method, const char *path, const char *headers,
                            const char *body, int *status) {
    inf_buf r;
    *status = request(method, path, headers, body, &r);
    json_t *j = json_loads(r.data, 0, NULL);
    inf_buf_free(&r);
    return j;
}

static void check_error(const char *method, const char *path, const char *headers, const char *body,
                        int want_status, const char *want_code) {
    int st;
    json_t *j = request_json(method, path, headers, body, &st);
    CHECK_MSG(st == want_status, "%s %s: status %d, expected %d", method, path, st, want_status);
    json_t *e = json_object_get(j, "error");
    CHECK_MSG(json_is_string(json_object_get(e, "message")) &&
                  json_is_string(json_object_get(e, "type")),
              "%s %s: not OpenAI's error shape", method, path);
    if (want_code) CHECK_STR(json_string_value(json_object_get(e, "code")), want_code);
    json_decref(j);
}

static double metric(const char *name) {
    inf_buf r;
    request("GET", "/metrics", "Authorization: Bearer sk-test\r\n", NULL, &r);
    double v = -1;
    char key[128];
    snprintf(key, sizeof key, "\n%s ", name);
    const char *p = strstr(r.data, key);
    if (p) v = atof(p + strlen(key));
    inf_buf_free(&r);
    return v;
}

#define AUTH "Authorization: Bearer sk-test\r\n"

static void test_basics(void) {
    int st;
    json_t *j = request_json("GET", "/health", NULL, NULL, &st);
    CHECK_INT(st, 200);
    CHECK_STR(json_string_value(json_object_get(j, "status")), "ok");
    json_decref(j);

    check_error("GET", "/nope", AUTH, NULL, 404, NULL);
    check_error("GET", "/v1/chat/completions", AUTH, NULL, 405, NULL);
    check_error("POST", "/health", AUTH, "{}", 405, NULL);
    check_error("GET", "/v1/models", NULL, NULL, 401, "invalid_api_key");
    check_error("GET", "/v1/models", "Authorization: Bearer wrong\r\n", NULL, 401, NULL);
    check_error("GET", "/v1/models", "Authorization: sk-test\r\n", NULL, 401, NULL);
    check_error("POST", "/v1/chat/completions", NULL, "{}", 401, NULL);

    j = request_json("GET", "/v1/models", AUTH, NULL, &st);
    CHECK_INT(st, 200);
    CHECK_STR(json_string_value(json_object_get(j, "object")), "list");
    CHECK_STR(
        json_string_value(json_object_get(json_array_get(json_object_get(j, "data"), 0), "id")),
        "fake-alias");
    json_decref(j);

    check_error("POST", "/v1/chat/completions", AUTH, "{\"messages\": [", 400, NULL);
    check_error("POST", "/v1/chat/completions", AUTH,
                "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":\"5\"}", 400,
                NULL);
    /* 300-token prompt, 256-position context: refused, never truncated. */
    char big[400];
    memset(big, 'a', 300);
    big[300] = 0;
    char body[600];
    snprintf(body, sizeof body, "{\"messages\":[{\"role\":\"user\",\"content\":\"%s\"}]}", big);
    check_error("POST", "/v1/chat/completions", AUTH, body, 400, "context_length_exceeded");
    snprintf(body, sizeof body, "{\"prompt\":\"%s\"}", big);
    check_error("POST", "/v1/completions", AUTH, body, 400, "context_length_exceeded");
    check_error("POST", "/v1/completions", AUTH, "{\"prompt\":[1,2,999]}", 400, NULL);
    check_error("POST", "/v1/completions", AUTH, "{\"prompt\":\"\"}", 400, NULL);

    /* Body over the limit (64 KiB in this test). */
    char *huge = malloc(70000);
    memset(huge, ' ', 69999);
    huge[0] = '{';
    huge[69998] = '}';
    huge[69999] = 0;
    check_error("POST", "/v1/chat/completions", AUTH, huge, 413, NULL);
    free(huge);

    j = request_json("POST", "/tokenize", AUTH, "{\"content\":\"ab c\",\"with_pieces\":true}", &st);
    CHECK_INT(st, 200);
    json_t *toks = json_object_get(j, "tokens");
    CHECK_INT(json_array_size(toks), 4);
    CHECK_INT(json_integer_value(json_object_get(json_array_get(toks, 1), "id")), 1);
    CHECK_STR(json_string_value(json_object_get(json_array_get(toks, 2), "piece")), " ");
    json_decref(j);
    j = request_json("POST", "/detokenize", AUTH, "{\"tokens\":[7,4,11,11,14,42]}", &st);
    CHECK_INT(st, 200);
    CHECK_STR(json_string_value(json_object_get(j, "content")), "hellobc");
    json_decref(j);
    check_error("POST", "/detokenize", AUTH, "{\"tokens\":[70]}", 400, NULL);
    check_error("POST", "/tokenize", AUTH, "{\"content\":5}", 400, NULL);
}

/* Parses an SSE body into its JSON payloads; checks framing and [DONE]. */
static int sse_parse(const char *s, json_t **out, int max, bool *done) {
    int n = 0;
    *done = false;
    while (*s) {
        if (strncmp(s, "data: ", 6)) {
            CHECK_MSG(0, "bad SSE frame: %.60s", s);
            break;
        }
        const char *end = strstr(s, "\n\n");
        if (!end) {
            CHECK_MSG(0, "unterminated SSE frame");
            break;
        }
        if (!strncmp(s + 6, "[DONE]", 6)) {
            *done = true;
            CHECK_MSG(end[2] == 0, "data after [DONE]");
            break;
        }
        char *payload = strndup(s + 6, (size_t)(end - s - 6));
        json_t *j = json_loads(payload, 0, NULL);
        CHECK_MSG(j != NULL, "frame is not JSON: %s", payload);
        free(payload);
        if (j && n < max)
            out[n++] = j;
        else
            json_decref(j);
        s = end + 2;
    }
    return n;
}

static void test_generation(void) {
    const char *req = "{\"messages\":[{\"role\":\"user\",\"content\":\"hello there\"}],"
                      "\"max_tokens\":12,\"temperature\":0%s}";
    char body[512];
    snprintf(body, sizeof body, req, "");
    int st;
    json_t *j = request_json("POST", "/v1/chat/completions", AUTH, body, &st);
    CHECK_INT(st, 200);
    json_t *choice = json_array_get(json_object_get(j, "choices"), 0);
    const char *whole =
        json_string_value(json_object_get(json_object_get(choice, "message"), "content"));
    CHECK(whole != NULL);
    char *whole_copy = strdup(whole ? whole : "");
    json_t *usage = json_object_get(j, "usage");
    CHECK_INT(json_integer_value(json_object_get(usage, "prompt_tokens")), 12);
    CHECK(json_is_object(json_object_get(j, "timings")));
    json_decref(j);

    snprintf(body, sizeof body, req,
             ",\"stream\":true,\"stream_options\":{\"include_usage\":true}");
    inf_buf r;
    st = request("POST", "/v1/chat/completions", AUTH, body, &r);
    CHECK_INT(st, 200);
    json_t *chunks[64];
    bool done;
    int n = sse_parse(r.data, chunks, 64, &done);
    CHECK(done);
    CHECK(n >= 4);
    inf_buf text = {0};
    inf_buf_add(&text, "", 0);
    int finish_at = -1, usage_at = -1;
    for (int i = 0; i < n; i++) {
        json_t *ch = json_object_get(chunks[i], "choices");
        json_t *c = json_array_get(ch, 0);
        if (json_array_size(ch) == 0) {
            usage_at = i;
            CHECK(json_is_object(json_object_get(chunks[i], "usage")));
            continue;
        }
        json_t *delta = json_object_get(c, "delta");
        if (i == 0) CHECK_STR(json_string_value(json_object_get(delta, "role")), "assistant");
        json_t *content = json_object_get(delta, "content");
        if (json_is_string(content)) inf_buf_adds(&text, json_string_value(content));
        if (json_is_string(json_object_get(c, "finish_reason"))) finish_at = i;
    }
    CHECK_MSG(finish_at == n - 2 && usage_at == n - 1, "finish chunk %d, usage chunk %d of %d",
              finish_at, usage_at, n);
    CHECK_MSG(!strcmp(text.data, whole_copy), "streamed \"%s\" != whole \"%s\"", text.data,
              whole_copy);
    for (int i = 0; i < n; i++)
        json_decref(chunks[i]);
    inf_buf_free(&r);
    inf_buf_free(&text);
    free(whole_copy);

    /* Completions, with logprobs and a seed: the same seed gives the same text. */
    const char *creq = "{\"prompt\":\"abc\",\"max_tokens\":8,\"temperature\":1,\"seed\":7,"
                       "\"logprobs\":2}";
    json_t *a = request_json("POST", "/v1/completions", AUTH, creq, &st);
    CHECK_INT(st, 200);
    json_t *b = request_json("POST", "/v1/completions", AUTH, creq, &st);
    json_t *ca = json_array_get(json_object_get(a, "choices"), 0);
    json_t *cb = json_array_get(json_object_get(b, "choices"), 0);
    CHECK_STR(json_string_value(json_object_get(ca, "text")),
              json_string_value(json_object_get(cb, "text")));
    CHECK_STR(json_string_value(json_object_get(a, "object")), "text_completion");
    json_t *lp = json_object_get(ca, "logprobs");
    CHECK(json_array_size(json_object_get(lp, "token_logprobs")) > 0);
    json_decref(a);
    json_decref(b);
}

/* Speculative decoding on the wire, over an engine that does not speculate
 * (the fake): /props' speculative section, the request fields (refused by
 * name when bad, accepted and harmless when good), no draft counts in the
 * timings, and the /metrics series at 0. */
static void test_speculative(void) {
    int st;
    json_t *j = request_json("GET", "/props", AUTH, NULL, &st);
    CHECK_INT(st, 200);
    json_t *sp = json_object_get(j, "speculative");
    CHECK_STR(json_string_value(json_object_get(sp, "type")), "none");
    CHECK(json_is_null(json_object_get(sp, "draft_model")));
    CHECK_INT(json_integer_value(json_object_get(sp, "n_max")), 16);
    CHECK_INT(json_integer_value(json_object_get(sp, "n_min")), 0);
    CHECK(fabs(json_number_value(json_object_get(sp, "p_min")) - 0.75) < 1e-6);
    json_t *params = json_object_get(json_object_get(j, "default_generation_settings"), "params");
    CHECK_INT(json_integer_value(json_object_get(params, "speculative.n_max")), 16);
    json_decref(j);

    const char *ok = "{\"messages\":[{\"role\":\"user\",\"content\":\"hello\"}],\"max_tokens\":4,"
                     "\"temperature\":0,\"speculative.n_max\":0}";
    j = request_json("POST", "/v1/chat/completions", AUTH, ok, &st);
    CHECK_INT(st, 200);
    json_t *t = json_object_get(j, "timings");
    CHECK(json_is_object(t) && !json_object_get(t, "draft_n"));
    json_decref(j);
    j = request_json("POST", "/v1/completions", AUTH,
                     "{\"prompt\":\"abc\",\"max_tokens\":4,\"speculative.n_min\":4}", &st);
    CHECK_INT(st, 200); /* the fake's n_max is 16 */
    json_decref(j);
    static const struct {
        const char *path, *body, *param;
    } bad[] = {
        {"/v1/chat/completions",
         "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"speculative.n_max\":65}",
         "speculative.n_max"},
        {"/v1/completions", "{\"prompt\":\"x\",\"speculative.n_min\":-1}", "speculative.n_min"},
        {"/v1/completions", "{\"prompt\":\"x\",\"speculative.n_min\":17}", "speculative.n_min"},
        {"/v1/chat/completions",
         "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"speculative.p_min\":2}",
         "speculative.p_min"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        j = request_json("POST", bad[i].path, AUTH, bad[i].body, &st);
        CHECK_MSG(st == 400, "%s: status %d", bad[i].body, st);
        CHECK_STR(json_string_value(json_object_get(json_object_get(j, "error"), "param")),
                  bad[i].param);
        json_decref(j);
    }

    CHECK(metric("inferno:spec_steps_total") == 0);
    CHECK(metric("inferno:spec_draft_tokens_total") == 0);
    CHECK(metric("inferno:spec_accepted_tokens_total") == 0);
    CHECK(metric("inferno:spec_acceptance_rate") == 0);
    inf_buf r;
    request("GET", "/metrics", AUTH, NULL, &r);
    CHECK(strstr(r.data, "# TYPE inferno:spec_draft_tokens_total counter\n") != NULL);
    CHECK(strstr(r.data, "# TYPE inferno:spec_acceptance_rate gauge\n") != NULL);
    CHECK(strstr(r.data, "# HELP inferno:spec_steps_total ") != NULL);
    inf_buf_free(&r);

    /* the exposition over counters that moved */
    inf_sched_metrics m = {
        .spec_steps_total = 3, .spec_drafted_total = 8, .spec_accepted_total = 6};
    srv_http_counts hc = {0};
    char *text = srv_metrics_text(&m, &hc, 1024);
    CHECK(strstr(text, "\ninferno:spec_draft_tokens_total 8\n") != NULL);
    CHECK(strstr(text, "\ninferno:spec_accepted_tokens_total 6\n") != NULL);
    CHECK(strstr(text, "\ninferno:spec_steps_total 3\n") != NULL);
    CHECK(strstr(text, "\ninferno:spec_acceptance_rate 0.75\n") != NULL);
    free(text);
}

/* The Responses and Messages routes: auth by x-api-key, each API's error
 * shape, count_tokens equal to the prompt a generation used. */
static void test_api_routes(void) {
    int st;
    const char *msgs = "{\"messages\":[{\"role\":\"user\",\"content\":\"hello there\"}],"
                       "\"max_tokens\":4,\"temperature\":0}";
    json_t *j = request_json("POST", "/v1/messages", "x-api-key: sk-test\r\n", msgs, &st);
    CHECK_INT(st, 200);
    CHECK_STR(json_string_value(json_object_get(j, "type")), "message");
    json_t *u = json_object_get(j, "usage");
    long long in = json_integer_value(json_object_get(u, "input_tokens")) +
                   json_integer_value(json_object_get(u, "cache_read_input_tokens"));
    json_decref(j);
    j = request_json("POST", "/v1/messages/count_tokens",
                     "x-api-key: sk-test\r\n"
                     "anthropic-version: 2023-06-01\r\n",
                     "{\"messages\":[{\"role\":\"user\",\"content\":\"hello there\"}]}", &st);
    CHECK_INT(st, 200);
    CHECK_INT(json_integer_value(json_object_get(j, "input_tokens")), in);
    json_decref(j);
    /* a wrong key, and a bad field: Anthropic's shape on its routes */
    j = request_json("POST", "/v1/messages", "x-api-key: wrong\r\n", msgs, &st);
    CHECK_INT(st, 401);
    CHECK_STR(json_string_value(json_object_get(j, "type")), "error");
    CHECK_STR(json_string_value(json_object_get(json_object_get(j, "error"), "type")),
              "authentication_error");
    json_decref(j);
    j = request_json("POST", "/v1/messages", AUTH, "{\"messages\":[]}", &st);
    CHECK_INT(st, 400);
    CHECK_STR(json_string_value(json_object_get(json_object_get(j, "error"), "type")),
              "invalid_request_error");
    json_decref(j);
    /* x-api-key opens the OpenAI routes too; Responses errors are OpenAI's */
    j = request_json("POST", "/v1/responses", "x-api-key: sk-test\r\n",
                     "{\"input\":\"hello there\",\"max_output_tokens\":4}", &st);
    CHECK_INT(st, 200);
    CHECK_STR(json_string_value(json_object_get(j, "object")), "response");
    json_decref(j);
    check_error("POST", "/v1/responses", AUTH, "{\"input\":\"x\",\"previous_response_id\":\"r\"}",
                400, NULL);
    check_error("GET", "/v1/responses", AUTH, NULL, 405, NULL);
}

/* A client that goes away mid-stream frees its slot (the only one). */
static void test_disconnect(fake *f) {
    double before = metric("inferno:requests_cancelled_total");
    f->delay_us = 3000;
    int fd = connect_port(g_port);
    send_request(fd, "POST", "/v1/chat/completions", AUTH,
                 "{\"messages\":[{\"role\":\"user\",\"content\":\"go\"}],\"stream\":true,"
                 "\"max_tokens\":100000,\"temperature\":1}");
    char buf[512];
    ssize_t got = read(fd, buf, sizeof buf); /* headers and a first chunk */
    CHECK(got > 0);
    close(fd);
    double after = before;
    for (int i = 0; i < 100 && after == before; i++) {
        usleep(20000);
        after = metric("inferno:requests_cancelled_total");
    }
    CHECK_MSG(after == before + 1, "cancelled %g -> %g", before, after);
    CHECK_INT((int)metric("llamacpp:requests_processing"), 0);
    f->delay_us = 0;
    int st;
    json_t *j = request_json("POST", "/v1/completions", AUTH,
                             "{\"prompt\":\"again\",\"max_tokens\":3}", &st);
    CHECK_INT(st, 200);
    json_decref(j);
    CHECK(metric("llamacpp:tokens_predicted_total") > 0);
    CHECK(metric("llamacpp:prompt_tokens_total") > 0);
}

/* A request whose forward pass runs out of memory gets a 503 naming it; the
 * server keeps serving, and the next request gets its whole answer. */
static void test_out_of_memory(fake *f) {
    const char *body = "{\"messages\":[{\"role\":\"user\",\"content\":\"oom\"}],"
                       "\"max_tokens\":5,\"temperature\":0}";
    int st;
    json_t *want = request_json("POST", "/v1/chat/completions", AUTH, body, &st);
    CHECK_INT(st, 200);
    f->fail_forward = 1;
    json_t *j = request_json("POST", "/v1/chat/completions", AUTH, body, &st);
    CHECK_INT(st, 503);
    const char *msg = json_string_value(json_object_get(json_object_get(j, "error"), "message"));
    CHECK_MSG(msg && strstr(msg, "out of memory"), "%s", msg ? msg : "(none)");
    json_decref(j);
    CHECK_INT(f->fail_forward, 0);
    j = request_json("POST", "/v1/chat/completions", AUTH, body, &st);
    CHECK_INT(st, 200);
    json_t *a = json_object_get(
        json_object_get(json_array_get(json_object_get(j, "choices"), 0), "message"), "content");
    json_t *b = json_object_get(
        json_object_get(json_array_get(json_object_get(want, "choices"), 0), "message"), "content");
    CHECK(json_is_string(a) && json_equal(a, b));
    json_decref(j);
    json_decref(want);
}

/* ---- issue 20: what a hostile client can do ---- */

/* Connects from a chosen loopback source address (127.0.0.x). */
static int connect_from(int port, const char *src) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in b = {.sin_family = AF_INET};
    inet_pton(AF_INET, src, &b.sin_addr);
    if (bind(fd, (struct sockaddr *)&b, sizeof b)) {
        close(fd);
        return -1;
    }
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a)) {
        close(fd);
        return -1;
    }
    struct timeval tv = {10, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    return fd;
}

/* Sends raw bytes (then half-closes when asked) and returns the status of the
 * reply (-1: none); *body gets the reply's body when not NULL. */
static int raw_request(const char *raw, bool half_close, inf_buf *body) {
    int fd = connect_port(g_port);
    if (fd < 0) return -1;
    if (write(fd, raw, strlen(raw)) < 0) {
        close(fd);
        return -1;
    }
    if (half_close) shutdown(fd, SHUT_WR);
    inf_buf r = {0};
    char buf[4096];
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0)
        inf_buf_add(&r, buf, (size_t)n);
    close(fd);
    int status = -1;
    if (r.data) sscanf(r.data, "HTTP/1.%*d %d", &status);
    if (body) {
        memset(body, 0, sizeof *body);
        const char *sep = r.data ? strstr(r.data, "\r\n\r\n") : NULL;
        inf_buf_add(body, sep ? sep + 4 : "", sep ? r.len - (size_t)(sep + 4 - r.data) : 0);
    }
    inf_buf_free(&r);
    return status;
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

#define POST_HEAD(path, extra)                                                                     \
    "POST " path " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n" AUTH extra
#define SMALL "{\"prompt\":\"hi\",\"max_tokens\":2}"

static void test_hostile_requests(void) {
    char req[2048];
    /* row 5: cross-site and DNS rebinding */
    snprintf(req, sizeof req,
             "POST /v1/completions HTTP/1.1\r\nHost: attacker.example\r\nConnection: close\r\n" AUTH
             "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
             strlen(SMALL), SMALL);
    CHECK_INT(raw_request(req, false, NULL), 421);
    snprintf(req, sizeof req,
             "GET /health HTTP/1.1\r\nHost: rebind.attacker.example:8080\r\nConnection: "
             "close\r\n\r\n");
    CHECK_INT(raw_request(req, false, NULL), 421);
    static const char *const good_hosts[] = {"localhost",  "localhost:8080", "127.0.0.1:1",
                                             "[::1]:8080", "LOCALHOST",      "app.localhost"};
    for (size_t i = 0; i < sizeof good_hosts / sizeof *good_hosts; i++) {
        snprintf(req, sizeof req, "GET /health HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n",
                 good_hosts[i]);
        CHECK_MSG(raw_request(req, false, NULL) == 200, "Host: %s", good_hosts[i]);
    }
    snprintf(
        req, sizeof req,
        POST_HEAD("/v1/completions", "Content-Type: text/plain\r\nContent-Length: %zu\r\n\r\n%s"),
        strlen(SMALL), SMALL);
    CHECK_INT(raw_request(req, false, NULL), 415);
    snprintf(req, sizeof req, POST_HEAD("/v1/completions", "Content-Length: %zu\r\n\r\n%s"),
             strlen(SMALL), SMALL);
    CHECK_INT(raw_request(req, false, NULL), 415); /* no content type at all */
    snprintf(req, sizeof req,
             POST_HEAD("/v1/completions",
                       "Content-Type: Application/JSON; charset=utf-8\r\nContent-Length: "
                       "%zu\r\n\r\n%s"),
             strlen(SMALL), SMALL);
    CHECK_INT(raw_request(req, false, NULL), 200);

    /* row 6: a complete POST, then shutdown(SHUT_WR): still answered */
    int answered = 0;
    for (int i = 0; i < 10; i++) {
        snprintf(req, sizeof req,
                 POST_HEAD("/v1/completions",
                           "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s"),
                 strlen(SMALL), SMALL);
        answered += raw_request(req, true, NULL) == 200;
    }
    CHECK_INT(answered, 10);
    snprintf(req, sizeof req,
             POST_HEAD("/v1/chat/completions",
                       "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s"),
             strlen("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stream\":true}"),
             "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stream\":true}");
    inf_buf body;
    CHECK_INT(raw_request(req, true, &body), 200);
    CHECK(strstr(body.data, "[DONE]") != NULL);
    inf_buf_free(&body);

    /* row 7: ambiguous framing is a 400, quickly */
    snprintf(req, sizeof req,
             POST_HEAD("/v1/completions", "Content-Type: application/json\r\nContent-Length: "
                                          "%zu\r\nContent-Length: 5\r\n\r\n%s"),
             strlen(SMALL), SMALL);
    CHECK_INT(raw_request(req, false, NULL), 400);
    snprintf(req, sizeof req,
             POST_HEAD("/v1/completions", "Content-Type: application/json\r\nContent-Length: "
                                          "%zu\r\nContent-Length: %zu\r\n\r\n%s"),
             strlen(SMALL), strlen(SMALL), SMALL);
    CHECK_INT(raw_request(req, false, NULL), 200); /* the same value twice is one length */
    double t0 = now_s();
    snprintf(req, sizeof req,
             POST_HEAD("/v1/completions",
                       "Content-Type: application/json\r\nTransfer-Encoding: gzip\r\n\r\n%s"),
             SMALL);
    CHECK_INT(raw_request(req, false, NULL), 400);
    snprintf(req, sizeof req,
             POST_HEAD("/v1/completions",
                       "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n"
                       "Content-Length: 3\r\n\r\n0\r\n\r\n"));
    CHECK_INT(raw_request(req, false, NULL), 400);
    CHECK_MSG(now_s() - t0 < 2, "framing errors took %.1f s", now_s() - t0);
    snprintf(req, sizeof req,
             POST_HEAD("/v1/completions",
                       "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
                       "%zx\r\n%s\r\n0\r\n\r\n"),
             strlen(SMALL), SMALL);
    CHECK_INT(raw_request(req, false, NULL), 200);

    /* row 8: max_tokens null is the default (16 on /v1/completions) */
    int st;
    json_t *j = request_json("POST", "/v1/completions", AUTH,
                             "{\"prompt\":\"hi\",\"max_tokens\":null,\"ignore_eos\":true}", &st);
    CHECK_INT(st, 200);
    CHECK_INT(json_integer_value(json_object_get(json_object_get(j, "usage"), "completion_tokens")),
              16);
    json_decref(j);

    /* row 4: what a request expands into is limited, not only its bytes */
    {
        size_t n = 20000; /* 20,000 empty messages in 60 KB (the test's body limit is 64 KiB) */
        char *big = malloc(3 * n + 64);
        strcpy(big, "{\"messages\":[");
        char *q = big + strlen(big);
        for (size_t i = 0; i < n; i++, q += 3)
            memcpy(q, "{},", 3);
        strcpy(q - 1, "]}");
        check_error("POST", "/v1/chat/completions", AUTH, big, 400, NULL);
        free(big);
    }

    /* row 16: HEAD /health, HTTP/1.1 without Host, a NUL in the path */
    CHECK_INT(raw_request("HEAD /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
                          false, NULL),
              200);
    CHECK_INT(raw_request("GET /health HTTP/1.1\r\nConnection: close\r\n\r\n", false, NULL), 400);
    CHECK_INT(raw_request("GET /health HTTP/1.0\r\n\r\n", false, NULL), 200);
    CHECK_INT(raw_request("GET /health%00 HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
                          false, NULL),
              404);
    CHECK_INT(
        raw_request("GET /health%00x HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
                    false, NULL),
        404);
    CHECK_INT(raw_request("GET /%68ealth HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
                          false, NULL),
              200);
}

/* row 3: idle and slowloris connections cannot hold the server's slots. The
 * test server has 64 connection slots, 48 per client address and a 1 s
 * header deadline. */
static void test_connection_exhaustion(void) {
    int fds[80], nfd = 0;
    /* 48 idle sockets and slowloris from 127.0.0.2: the per-client limit
       refuses more from there, and 127.0.0.1 is still served at once */
    for (int i = 0; i < 48; i++) {
        int fd = connect_from(g_port, "127.0.0.2");
        if (fd >= 0) fds[nfd++] = fd;
        if (fd >= 0 && i % 2) (void)!write(fd, "GET /health HTTP/1.1\r\nHo", 25);
    }
    CHECK_INT(nfd, 48);
    usleep(100000);
    double t0 = now_s();
    int st;
    json_t *j = request_json("GET", "/health", NULL, NULL, &st);
    CHECK_INT(st, 200);
    json_decref(j);
    CHECK_MSG(now_s() - t0 < 2, "a normal request took %.1f s", now_s() - t0);
    /* one more from 127.0.0.2 is over its limit: closed without an answer */
    int extra = connect_from(g_port, "127.0.0.2");
    char b;
    CHECK(extra < 0 || read(extra, &b, 1) <= 0);
    if (extra >= 0) close(extra);
    /* fill every slot from 127.0.0.3 too (16 more): after the header deadline
       they are all closed and the server answers again */
    for (int i = 0; i < 16 && nfd < 80; i++) {
        int fd = connect_from(g_port, "127.0.0.3");
        if (fd >= 0) fds[nfd++] = fd;
    }
    usleep(1600000); /* the 1 s deadline and the reaper's tick */
    int closed = 0;
    for (int i = 0; i < nfd; i++) {
        struct timeval tv = {0, 200000};
        setsockopt(fds[i], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        char buf[64];
        closed += read(fds[i], buf, sizeof buf) == 0;
        close(fds[i]);
    }
    CHECK_MSG(closed == nfd, "%d of %d idle or slow connections were closed by the deadline",
              closed, nfd);
    t0 = now_s();
    j = request_json("GET", "/health", NULL, NULL, &st);
    CHECK_INT(st, 200);
    json_decref(j);
    CHECK_MSG(now_s() - t0 < 2, "a normal request took %.1f s", now_s() - t0);
    /* a slow client that trickles its headers a byte at a time is cut off too */
    int fd = connect_port(g_port);
    const char *slow = "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n";
    bool cut = false;
    t0 = now_s();
    for (size_t i = 0; slow[i] && !cut; i++) {
        if (write(fd, slow + i, 1) != 1) cut = true;
        usleep(100000);
        char c2;
        struct timeval tv = {0, 1000};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        if (read(fd, &c2, 1) == 0) cut = true;
    }
    CHECK_MSG(cut && now_s() - t0 < 3, "slowloris %s after %.1f s", cut ? "cut" : "not cut",
              now_s() - t0);
    close(fd);
}

/* row 11: a model whose logits turn NaN answers 500 with the reason, whole or
 * streamed, and the server goes on serving. */
static void test_nan_logits(fake *f) {
    f->nan_from = 1;
    int st;
    json_t *j =
        request_json("POST", "/v1/completions", AUTH, "{\"prompt\":\"hi\",\"max_tokens\":4}", &st);
    CHECK_INT(st, 500);
    CHECK(strstr(json_string_value(json_object_get(json_object_get(j, "error"), "message")),
                 "non-finite logits") != NULL);
    json_decref(j);
    inf_buf r;
    st = request("POST", "/v1/completions", AUTH,
                 "{\"prompt\":\"hi\",\"max_tokens\":4,\"stream\":true}", &r);
    CHECK_INT(st, 200);
    CHECK(strstr(r.data, "non-finite logits") != NULL);
    inf_buf_free(&r);
    f->nan_from = 0;
    j = request_json("POST", "/v1/completions", AUTH, "{\"prompt\":\"hi\",\"max_tokens\":2}", &st);
    CHECK_INT(st, 200);
    json_decref(j);
}

/* Reads fd to its end (the server closes a stream when it ends). */
static void read_all(int fd, inf_buf *out) {
    char buf[4096];
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0)
        inf_buf_add(out, buf, (size_t)n);
    if (!out->data) inf_buf_add(out, "", 0);
}

static int open_stream(int max_tokens) {
    char body[256];
    snprintf(body, sizeof body,
             "{\"messages\":[{\"role\":\"user\",\"content\":\"go\"}],\"stream\":true,"
             "\"max_tokens\":%d,\"temperature\":1,\"ignore_eos\":true}",
             max_tokens);
    int fd = connect_port(g_port);
    send_request(fd, "POST", "/v1/chat/completions", AUTH, body);
    return fd;
}

/* GET /slots shows the running request, then the idle slot. */
static void test_slots(fake *f) {
    f->delay_us = 3000;
    int fd = open_stream(100000);
    char buf[512];
    CHECK(read(fd, buf, sizeof buf) > 0); /* it runs */
    int st;
    json_t *j = NULL;
    json_t *s0 = NULL;
    /* until two tokens were sampled: the first is then in the cache (the first
       alone may not be fed yet); up to 10 s, for a loaded machine or ASan */
    for (int i = 0; i < 1000; i++) {
        json_decref(j);
        j = request_json("GET", "/slots", AUTH, NULL, &st);
        s0 = json_array_get(j, 0);
        json_t *next = json_object_get(s0, "next_token");
        if (json_integer_value(json_object_get(next, "n_decoded")) >= 2) break;
        usleep(10000);
    }
    CHECK_INT(st, 200);
    CHECK_INT(json_array_size(j), 1);
    CHECK(json_is_true(json_object_get(s0, "is_processing")));
    CHECK_STR(json_string_value(json_object_get(s0, "state")), "generating");
    CHECK_INT(json_integer_value(json_object_get(s0, "n_ctx")), 256);
    CHECK(json_integer_value(json_object_get(s0, "n_prompt_tokens")) > 0);
    CHECK(json_integer_value(json_object_get(s0, "n_cache")) >
          json_integer_value(json_object_get(s0, "n_prompt_tokens")));
    json_decref(j);
    close(fd);
    char state[32] = "";
    for (int i = 0; i < 100 && strcmp(state, "idle"); i++) {
        usleep(20000);
        j = request_json("GET", "/slots", AUTH, NULL, &st);
        const char *v = json_string_value(json_object_get(json_array_get(j, 0), "state"));
        snprintf(state, sizeof state, "%s", v ? v : "");
        json_decref(j);
    }
    CHECK_STR(state, "idle");
    check_error("GET", "/slots", NULL, NULL, 401, NULL);
    f->delay_us = 0;
}

/* SIGTERM's drain: health and new requests 503 (with Connection: close),
 * the running stream finishes normally, the queued one (accepted before)
 * runs, and when the drain's time is up it ends with an error frame and
 * [DONE]. Last: the server takes nothing new afterwards. */
static void test_drain(fake *f, srv_http *h) {
    f->delay_us = 5000; /* b needs over a second to fill its context */
    /* a is submitted (its first frame is back) before b is sent: a holds the
       only slot and b waits */
    int a = open_stream(40);
    char buf[256];
    CHECK(read(a, buf, sizeof buf) > 0);
    int b = open_stream(100000);
    for (int i = 0; i < 100 && srv_http_inflight(h) < 2; i++)
        usleep(10000);
    CHECK_INT(srv_http_inflight(h), 2);
    srv_http_drain(h);
    int st;
    json_t *j = request_json("GET", "/health", NULL, NULL, &st);
    CHECK_INT(st, 503);
    const char *msg = json_string_value(json_object_get(json_object_get(j, "error"), "message"));
    CHECK(msg && strstr(msg, "draining"));
    json_decref(j);
    inf_buf r;
    int fd = connect_port(g_port);
    send_request(fd, "POST", "/v1/chat/completions", AUTH,
                 "{\"messages\":[{\"role\":\"user\",\"content\":\"late\"}],\"max_tokens\":2}");
    inf_buf raw = {0};
    read_all(fd, &raw);
    close(fd);
    CHECK_MSG(!strncmp(raw.data, "HTTP/1.1 503", 12), "late request: %.40s", raw.data);
    for (char *c = raw.data; *c; c++)
        *c = (char)(*c >= 'A' && *c <= 'Z' ? *c + 32 : *c);
    CHECK(strstr(raw.data, "connection: close") != NULL);
    inf_buf_free(&raw);
    check_error("GET", "/v1/models", AUTH, NULL, 503, NULL);

    /* a ends as it would have: its last chunk and [DONE] */
    memset(&r, 0, sizeof r);
    read_all(a, &r);
    close(a);
    CHECK_MSG(strstr(r.data, "\"finish_reason\":\"length\"") != NULL, "a: %.300s",
              r.data + (r.len > 300 ? r.len - 300 : 0));
    CHECK(strstr(r.data, "data: [DONE]") != NULL);
    CHECK(strstr(r.data, "drain") == NULL);
    inf_buf_free(&r);
    /* b got the slot and runs until the drain's time is up */
    check_error("GET", "/slots", AUTH, NULL, 503, NULL);
    usleep(50000);
    CHECK_INT(srv_http_inflight(h), 1);
    srv_http_expire(h);
    memset(&r, 0, sizeof r);
    read_all(b, &r);
    close(b);
    CHECK(strstr(r.data, "drain time") != NULL);
    const char *done = strstr(r.data, "data: [DONE]");
    CHECK(done != NULL);
    for (int i = 0; i < 100 && srv_http_inflight(h) > 0; i++)
        usleep(10000);
    CHECK_INT(srv_http_inflight(h), 0);
    inf_buf_free(&r);
    f->delay_us = 0;
}

static volatile sig_atomic_t g_stop;
static void on_signal(int sig) {
    g_stop = 1;
}

int main(int argc, char **argv) {
    bool serve = argc == 3 && !strcmp(argv[1], "--serve");
    fake f;
    inf_exec e = make_engine(&f, serve ? 4 : 1, 256, 64);
    srv_config cfg = {.host = "127.0.0.1",
                      .port = serve ? atoi(argv[2]) : 0,
                      .api_key = serve ? "sk-inferno-test" : "sk-test",
                      .alias = "fake-alias",
                      .max_body = 65536,
                      .timeout_s = 30,
                      .max_conns = 64,
                      .max_conns_per_client = serve ? 0 : 48,
                      .header_timeout_s = serve ? 0 : 1};
    srv_http *h;
    inf_err err;
    if (srv_http_start(&h, &cfg, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    g_port = srv_http_port(h);
    if (!serve) {
        int st;
        json_t *j = request_json("GET", "/health", NULL, NULL, &st);
        CHECK_INT(st, 503); /* loading */
        json_decref(j);
        check_error("GET", "/v1/models", AUTH, NULL, 503, NULL);
    }
    inf_sched *s;
    if (inf_sched_create(&s, &e, 32, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    srv_http_ready(h, &e, s);
    if (serve) {
        f.delay_us = 2000; /* about a small model's step */
        signal(SIGINT, on_signal);
        signal(SIGTERM, on_signal);
        fprintf(stderr, "fake server on port %d\n", g_port);
        while (!g_stop)
            pause();
    } else {
        test_basics();
        test_generation();
        test_api_routes();
        test_speculative();
        test_disconnect(&f);
        test_out_of_memory(&f);
        test_hostile_requests();
        test_nan_logits(&f);
        test_connection_exhaustion();
        test_slots(&f);
        test_drain(&f, h); /* last: the server takes nothing new after it */
    }
    srv_http_stop(h);
    inf_sched_free(s);
    CHECK_INT(f.contract_errors, 0);
    return th_report();
}
