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
#include <unistd.h>

#include "harness.h"
#include "server/http.h"
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
    json_t *a = json_object_get(json_object_get(json_array_get(json_object_get(j, "choices"), 0), "message"), "content");
    json_t *b = json_object_get(json_object_get(json_array_get(json_object_get(want, "choices"), 0), "message"), "content");
    CHECK(json_is_string(a) && json_equal(a, b));
    json_decref(j);
    json_decref(want);
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
                      .max_conns = 64};
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
        test_disconnect(&f);
        test_out_of_memory(&f);
    }
    srv_http_stop(h);
    inf_sched_free(s);
    CHECK_INT(f.contract_errors, 0);
    return th_report();
}
