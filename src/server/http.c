#include "server/http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "server/metrics.h"
#include "server/response.h"

/* How long a waiting connection thread sleeps between checks of its client. */
#define WAIT_TICK_MS 50

struct srv_http {
    srv_config cfg;
    struct MHD_Daemon *d;
    int port;
    const inf_exec *ex;
    inf_sched *sched;
    atomic_bool ready, closing;
    pthread_mutex_t mu; /* counts */
    srv_http_counts counts;
};

/* Per-request state while the body arrives. */
typedef struct req_ctx {
    inf_buf body;
    bool too_big;
} req_ctx;

/* ---- small helpers ---- */

static enum MHD_Result send_body(srv_http *h, struct MHD_Connection *c, int status, char *body,
                                 const char *type) {
    pthread_mutex_lock(&h->mu);
    h->counts.requests_total++;
    if (status >= 400) h->counts.errors_total++;
    pthread_mutex_unlock(&h->mu);
    if (!body) {
        status = 500;
        body = strdup("{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\","
                      "\"param\":null,\"code\":null}}");
        if (!body) return MHD_NO;
    }
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", type);
    enum MHD_Result ok = MHD_queue_response(c, (unsigned)status, r);
    MHD_destroy_response(r);
    return ok;
}

static enum MHD_Result send_json(srv_http *h, struct MHD_Connection *c, int status, json_t *j) {
    return send_body(h, c, status, srv_json_dump_free(j), "application/json");
}

static enum MHD_Result send_error(srv_http *h, struct MHD_Connection *c, const srv_error *e) {
    return send_body(h, c, e->status, srv_error_json(e), "application/json");
}

static enum MHD_Result fail(srv_http *h, struct MHD_Connection *c, int status, const char *type,
                            const char *code, const char *fmt, const char *arg) {
    srv_error e;
    srv_error_set(&e, status, type, code, NULL, fmt, arg);
    return send_error(h, c, &e);
}

/* True when the client has closed its end (EOF or reset) while we work. */
static bool client_gone(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci) return false;
    char b;
    ssize_t n = recv(ci->connect_fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0) return true;
    return n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
}

static void deadline_in(struct timespec *ts, int ms) {
    clock_gettime(CLOCK_REALTIME, ts);
    ts->tv_nsec += (long)ms * 1000000L;
    ts->tv_sec += ts->tv_nsec / 1000000000L;
    ts->tv_nsec %= 1000000000L;
}

static bool authorized(srv_http *h, struct MHD_Connection *c) {
    if (!h->cfg.api_key) return true;
    const char *a = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    if (!a || strncmp(a, "Bearer ", 7)) return false;
    const char *k = a + 7, *want = h->cfg.api_key;
    size_t nk = strlen(k), nw = strlen(want);
    unsigned diff = (unsigned)(nk ^ nw);
    for (size_t i = 0; i < nw; i++)
        diff |= (unsigned char)want[i] ^ (unsigned char)k[i < nk ? i : 0];
    return diff == 0;
}

static const char *model_id(srv_http *h) {
    if (h->cfg.alias) return h->cfg.alias;
    return h->ex && h->ex->model_name ? h->ex->model_name : "inferno";
}

static int piece_cb(void *ctx, int32_t id, char *buf, int cap) {
    const inf_exec *e = ctx;
    return e->piece(e->ctx, id, buf, cap);
}

/* ---- GET endpoints ---- */

static enum MHD_Result do_health(srv_http *h, struct MHD_Connection *c) {
    if (!atomic_load(&h->ready)) {
        srv_error e;
        srv_error_set(&e, 503, "unavailable_error", NULL, NULL, "Loading model");
        return send_error(h, c, &e);
    }
    json_t *j = json_object();
    json_object_set_new(j, "status", json_string("ok"));
    return send_json(h, c, 200, j);
}

static enum MHD_Result do_models(srv_http *h, struct MHD_Connection *c) {
    json_t *m = json_object();
    json_object_set_new(m, "id", json_string(model_id(h)));
    json_object_set_new(m, "object", json_string("model"));
    json_object_set_new(m, "created", json_integer((json_int_t)time(NULL)));
    json_object_set_new(m, "owned_by", json_string("inferno"));
    json_t *meta = json_object();
    json_object_set_new(meta, "n_ctx", json_integer(h->ex->n_ctx));
    json_object_set_new(meta, "n_vocab", json_integer(h->ex->n_vocab));
    json_object_set_new(meta, "n_slots", json_integer(h->ex->n_seq));
    if (h->ex->backend_name)
        json_object_set_new(meta, "backend", json_string(h->ex->backend_name));
    json_object_set_new(m, "meta", meta);
    json_t *data = json_array();
    json_array_append_new(data, m);
    json_t *j = json_object();
    json_object_set_new(j, "object", json_string("list"));
    json_object_set_new(j, "data", data);
    return send_json(h, c, 200, j);
}

static enum MHD_Result do_metrics(srv_http *h, struct MHD_Connection *c) {
    inf_sched_metrics m;
    srv_http_counts counts;
    inf_sched_metrics_get(h->sched, &m);
    pthread_mutex_lock(&h->mu);
    counts = h->counts;
    pthread_mutex_unlock(&h->mu);
    char *text = srv_metrics_text(&m, &counts, (long)h->ex->n_ctx * h->ex->n_seq);
    return send_body(h, c, 200, text, "text/plain; version=0.0.4");
}

/* ---- /tokenize, /detokenize ---- */

static enum MHD_Result do_tokenize(srv_http *h, struct MHD_Connection *c, const inf_buf *body) {
    json_error_t je;
    json_t *root = srv_json_parse_body(body->data, body->len, &je);
    json_t *content = json_object_get(root, "content");
    json_t *pieces = json_object_get(root, "with_pieces");
    json_t *special = json_object_get(root, "parse_special");
    if (!json_is_object(root) || !json_is_string(content) || (pieces && !json_is_boolean(pieces)) ||
        (special && !json_is_boolean(special))) {
        json_decref(root);
        return fail(h, c, 400, "invalid_request_error", NULL, "%s",
                    "expected {\"content\": string, \"with_pieces\"?: bool, \"parse_special\"?: "
                    "bool}");
    }
    int32_t *ids = NULL;
    int n = 0;
    inf_err err = {{0}};
    const inf_exec *e = h->ex;
    if (e->tokenize(e->ctx, json_string_value(content), json_string_length(content),
                    !special || json_is_true(special), &ids, &n, &err)) {
        json_decref(root);
        return fail(h, c, 400, "invalid_request_error", NULL, "%s", err.msg);
    }
    json_t *toks = json_array();
    for (int i = 0; i < n; i++) {
        if (!json_is_true(pieces)) {
            json_array_append_new(toks, json_integer(ids[i]));
            continue;
        }
        char buf[256];
        int len = e->piece(e->ctx, ids[i], buf, sizeof buf);
        json_t *o = json_object();
        json_object_set_new(o, "id", json_integer(ids[i]));
        json_object_set_new(o, "piece", srv_json_stringn(buf, (size_t)len));
        json_array_append_new(toks, o);
    }
    free(ids);
    json_decref(root);
    json_t *j = json_object();
    json_object_set_new(j, "tokens", toks);
    return send_json(h, c, 200, j);
}

static enum MHD_Result do_detokenize(srv_http *h, struct MHD_Connection *c, const inf_buf *body) {
    json_error_t je;
    json_t *root = srv_json_parse_body(body->data, body->len, &je);
    json_t *toks = json_object_get(root, "tokens");
    if (!json_is_object(root) || !json_is_array(toks)) {
        json_decref(root);
        return fail(h, c, 400, "invalid_request_error", NULL, "%s",
                    "expected {\"tokens\": [token ids]}");
    }
    inf_buf text = {0};
    size_t i;
    json_t *v;
    json_array_foreach(toks, i, v) {
        if (!json_is_integer(v) || json_integer_value(v) < 0 ||
            json_integer_value(v) >= h->ex->n_vocab) {
            inf_buf_free(&text);
            json_decref(root);
            return fail(h, c, 400, "invalid_request_error", NULL, "%s",
                        "'tokens': every element must be a token id in [0, n_vocab)");
        }
        char buf[256];
        int len = h->ex->piece(h->ex->ctx, (int32_t)json_integer_value(v), buf, sizeof buf);
        inf_buf_add(&text, buf, (size_t)len);
    }
    json_decref(root);
    json_t *j = json_object();
    json_object_set_new(j, "content", srv_json_stringn(text.data ? text.data : "", text.len));
    inf_buf_free(&text);
    return send_json(h, c, 200, j);
}

/* ---- generation ---- */

/* The prompt's token ids for a parsed request; on failure e holds the 4xx. */
static int prompt_tokens(srv_http *h, const srv_request *r, int32_t **ids, int *n, bool *in_think,
                         srv_error *e) {
    const inf_exec *eng = h->ex;
    inf_err err = {{0}};
    *in_think = false;
    if (r->kind == SRV_CHAT) {
        char *text = NULL;
        json_t *kw = r->template_kwargs ? json_deep_copy(r->template_kwargs) : json_object();
        if (!kw) return srv_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
        json_object_set_new(kw, "enable_thinking", json_boolean(r->enable_thinking));
        inf_chat_input in = {.messages = r->messages, .tools = r->tools, .kwargs = kw};
        int rr = eng->render(eng->ctx, &in, &text, &err);
        json_decref(kw);
        if (rr)
            return srv_error_set(e, 400, "invalid_request_error", NULL, "messages", "%s", err.msg);
        size_t len = strlen(text);
        while (len > 0 && (text[len - 1] == '\n' || text[len - 1] == ' '))
            len--;
        *in_think = len >= 7 && !memcmp(text + len - 7, "<think>", 7);
        int rc = eng->tokenize(eng->ctx, text, strlen(text), true, ids, n, &err);
        free(text);
        if (rc)
            return srv_error_set(e, 400, "invalid_request_error", NULL, "messages", "%s", err.msg);
    } else if (r->prompt) {
        if (eng->tokenize(eng->ctx, r->prompt, strlen(r->prompt), true, ids, n, &err))
            return srv_error_set(e, 400, "invalid_request_error", NULL, "prompt", "%s", err.msg);
    } else {
        for (int i = 0; i < r->n_prompt_tokens; i++)
            if (r->prompt_tokens[i] >= eng->n_vocab)
                return srv_error_set(e, 400, "invalid_request_error", NULL, "prompt",
                                     "'prompt': token id %d is not below n_vocab %d",
                                     r->prompt_tokens[i], eng->n_vocab);
        *ids = malloc((size_t)r->n_prompt_tokens * sizeof **ids);
        if (!*ids) return srv_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
        memcpy(*ids, r->prompt_tokens, (size_t)r->n_prompt_tokens * sizeof **ids);
        *n = r->n_prompt_tokens;
    }
    if (*n == 0) {
        free(*ids);
        *ids = NULL;
        return srv_error_set(e, 400, "invalid_request_error", NULL,
                             r->kind == SRV_CHAT ? "messages" : "prompt", "the prompt is empty");
    }
    if (*n >= eng->n_ctx) {
        free(*ids);
        *ids = NULL;
        return srv_error_set(e, 400, "invalid_request_error", "context_length_exceeded",
                             r->kind == SRV_CHAT ? "messages" : "prompt",
                             "the prompt has %d tokens but the context holds %d (one position "
                             "must remain for the reply); shorten the prompt",
                             *n, eng->n_ctx);
    }
    return 0;
}

/* A failed task's error in OpenAI's shape. */
static void task_error(const inf_task *t, srv_error *e) {
    if (t->status == INF_TASK_UNAVAILABLE)
        srv_error_set(e, 503, "unavailable_error", NULL, NULL, "%s", t->err);
    else
        srv_error_set(e, 500, "server_error", NULL, NULL, "%s", t->err);
}

/* Takes the logprobs entries [from, n) of a task as JSON (NULL when none). */
static json_t *take_logprobs(srv_http *h, srv_kind kind, const inf_logprob *lp, int from, int n,
                             int text_offset) {
    if (n <= from) return NULL;
    return srv_logprobs_json(kind, lp + from, n - from, text_offset, piece_cb, (void *)h->ex);
}

typedef struct stream_ctx {
    srv_http *h;
    struct MHD_Connection *c;
    inf_task *t;
    srv_stream st;
    int n_prompt;
    inf_buf out; /* frames not yet handed to MHD */
    size_t out_pos;
    size_t text_pos; /* task text already framed */
    int lp_pos;      /* task logprobs already framed */
    bool ended;      /* the last frame is in out */
} stream_ctx;

/* Frames whatever the task has produced since the last call. Returns true
 * when something was framed or the stream ended. */
static bool stream_poll(stream_ctx *s, int wait_ms) {
    inf_task *t = s->t;
    pthread_mutex_lock(&t->mu);
    if (!t->done && t->text.len == s->text_pos && t->n_lp == s->lp_pos) {
        struct timespec ts;
        deadline_in(&ts, wait_ms);
        pthread_cond_timedwait(&t->cv, &t->mu, &ts);
    }
    size_t n = t->text.len - s->text_pos;
    char *text = n ? malloc(n) : NULL;
    if (text)
        memcpy(text, t->text.data + s->text_pos, n);
    else
        n = 0;
    s->text_pos += n;
    int lp_end = t->n_lp;
    bool done = t->done;
    inf_finish fin = t->finish;
    srv_error err = {0};
    bool failed = t->status != INF_TASK_OK;
    if (failed) task_error(t, &err);
    inf_timings tm = t->timings;
    int n_gen = t->n_gen;
    pthread_mutex_unlock(&t->mu);

    /* t->lp entries below n_lp are written once and never move. */
    json_t *lp = take_logprobs(s->h, s->st.meta.kind, t->lp, s->lp_pos, lp_end, s->st.text_offset);
    s->lp_pos = lp_end;
    size_t before = s->out.len;
    if (n || lp) srv_stream_delta(&s->st, &s->out, text, n, lp);
    s->st.text_offset += (int)n;
    free(text);
    if (done) {
        if (failed)
            srv_stream_error(&s->out, &err);
        else
            srv_stream_end(&s->st, &s->out, fin, s->n_prompt, n_gen, &tm);
        s->ended = true;
    }
    return s->out.len > before || done;
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
    stream_ctx *s = cls;
    for (;;) {
        if (s->out_pos < s->out.len) {
            size_t n = s->out.len - s->out_pos;
            if (n > max) n = max;
            memcpy(buf, s->out.data + s->out_pos, n);
            s->out_pos += n;
            if (s->out_pos == s->out.len) {
                inf_buf_clear(&s->out);
                s->out_pos = 0;
            }
            return (ssize_t)n;
        }
        if (s->ended) return MHD_CONTENT_READER_END_OF_STREAM;
        if (stream_poll(s, WAIT_TICK_MS)) continue;
        if (atomic_load(&s->h->closing) || client_gone(s->c)) {
            inf_sched_cancel(s->h->sched, s->t);
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
    }
}

static void stream_free(void *cls) {
    stream_ctx *s = cls;
    /* Also reached when the write failed: the client is gone. */
    inf_sched_cancel(s->h->sched, s->t);
    inf_task_release(s->t);
    srv_stream_free(&s->st);
    inf_buf_free(&s->out);
    free(s);
}

static enum MHD_Result do_generate(srv_http *h, struct MHD_Connection *c, srv_kind kind,
                                   const inf_buf *body) {
    srv_request r;
    srv_error e;
    if (srv_request_parse(&r, kind, body->data ? body->data : "", body->len, &e))
        return send_error(h, c, &e);
    int32_t *ids = NULL;
    int n = 0;
    bool in_think = false;
    if (prompt_tokens(h, &r, &ids, &n, &in_think, &e)) {
        srv_request_free(&r);
        return send_error(h, c, &e);
    }
    inf_gen_params gp;
    srv_request_gen_params(&r, &gp);
    if (in_think) gp.grammar_start = INF_GRAM_AFTER_THINK;
    inf_task *t = inf_task_new(ids, n, &gp); /* copies the stop strings */
    if (!t) {
        srv_request_free(&r);
        return fail(h, c, 503, "unavailable_error", NULL, "%s", "out of memory");
    }
    srv_resp_meta meta;
    srv_resp_meta_init(&meta, kind, model_id(h), true, in_think);
    bool stream = r.stream, usage = r.include_usage;
    srv_request_free(&r);
    inf_err serr = {{0}};
    if (inf_sched_submit(h->sched, t, &serr)) {
        inf_task_release(t);
        return fail(h, c, 503, "unavailable_error", NULL, "%s", serr.msg);
    }

    if (stream) {
        stream_ctx *s = calloc(1, sizeof *s);
        if (!s) {
            inf_sched_cancel(h->sched, t);
            inf_task_release(t);
            return MHD_NO;
        }
        s->h = h;
        s->c = c;
        s->t = t;
        s->n_prompt = n;
        srv_stream_init(&s->st, &meta, usage);
        srv_stream_begin(&s->st, &s->out);
        struct MHD_Response *resp =
            MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, stream_read, s, stream_free);
        if (!resp) {
            stream_free(s);
            return MHD_NO;
        }
        MHD_add_response_header(resp, "Content-Type", "text/event-stream");
        MHD_add_response_header(resp, "Cache-Control", "no-cache");
        pthread_mutex_lock(&h->mu);
        h->counts.requests_total++;
        pthread_mutex_unlock(&h->mu);
        enum MHD_Result ok = MHD_queue_response(c, 200, resp);
        MHD_destroy_response(resp);
        return ok;
    }

    /* Whole response: wait here, watching the client. */
    pthread_mutex_lock(&t->mu);
    while (!t->done) {
        struct timespec ts;
        deadline_in(&ts, WAIT_TICK_MS);
        pthread_cond_timedwait(&t->cv, &t->mu, &ts);
        if (t->done) break;
        pthread_mutex_unlock(&t->mu);
        if (atomic_load(&h->closing) || client_gone(c)) {
            inf_sched_cancel(h->sched, t);
            inf_task_release(t);
            return MHD_NO;
        }
        pthread_mutex_lock(&t->mu);
    }
    pthread_mutex_unlock(&t->mu);
    /* The generation may have outlasted the idle timeout: restart its clock. */
    MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT, h->cfg.timeout_s);
    enum MHD_Result ok;
    if (t->status != INF_TASK_OK) {
        srv_error err;
        task_error(t, &err);
        ok = send_error(h, c, &err);
    } else {
        json_t *lp = take_logprobs(h, kind, t->lp, 0, t->n_lp, 0);
        if (!lp && t->p.logprobs)
            lp = kind == SRV_CHAT ? json_pack("{s:[]}", "content")
                                  : srv_logprobs_json(kind, NULL, 0, 0, piece_cb, (void *)h->ex);
        char *resp = srv_response_body(&meta, t->text.data, t->text.len, t->finish, lp, n, t->n_gen,
                                       &t->timings);
        ok = send_body(h, c, 200, resp, "application/json");
    }
    inf_task_release(t);
    return ok;
}

/* ---- routing ---- */

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url,
                              const char *method, const char *version, const char *upload,
                              size_t *upload_size, void **con_cls) {
    srv_http *h = cls;
    req_ctx *rc = *con_cls;
    if (!rc) {
        rc = calloc(1, sizeof *rc);
        if (!rc) return MHD_NO;
        *con_cls = rc;
        return MHD_YES;
    }
    if (*upload_size) {
        if (!rc->too_big && rc->body.len + *upload_size > h->cfg.max_body) rc->too_big = true;
        if (!rc->too_big && inf_buf_add(&rc->body, upload, *upload_size)) rc->too_big = true;
        *upload_size = 0;
        return MHD_YES;
    }

    bool get = !strcmp(method, "GET"), post = !strcmp(method, "POST");
    if (!strncmp(url, "/v1/", 4)) url += 3; /* /v1/x and /x are the same endpoint */
    static const struct {
        const char *path;
        bool post;
    } routes[] = {{"/health", false},         {"/models", false},    {"/metrics", false},
                  {"/tokenize", true},        {"/detokenize", true}, {"/completions", true},
                  {"/chat/completions", true}};
    int route = -1;
    for (int i = 0; i < (int)(sizeof routes / sizeof routes[0]); i++)
        if (!strcmp(url, routes[i].path)) route = i;
    if (route < 0) return fail(h, c, 404, "not_found_error", NULL, "no endpoint %s", url);
    if (routes[route].post ? !post : !get)
        return fail(h, c, 405, "invalid_request_error", NULL, "%s is not allowed here", method);
    if (route == 0) return do_health(h, c);
    if (!authorized(h, c))
        return fail(h, c, 401, "authentication_error", "invalid_api_key", "%s",
                    "invalid or missing API key (send 'Authorization: Bearer KEY')");
    if (!atomic_load(&h->ready) || atomic_load(&h->closing))
        return fail(h, c, 503, "unavailable_error", NULL, "%s",
                    atomic_load(&h->closing) ? "server shutting down" : "Loading model");
    if (rc->too_big) {
        srv_error e;
        srv_error_set(&e, 413, "invalid_request_error", "request_too_large", NULL,
                      "the request body is larger than %zu bytes", h->cfg.max_body);
        return send_error(h, c, &e);
    }
    switch (route) {
    case 1:
        return do_models(h, c);
    case 2:
        return do_metrics(h, c);
    case 3:
        return do_tokenize(h, c, &rc->body);
    case 4:
        return do_detokenize(h, c, &rc->body);
    case 5:
        return do_generate(h, c, SRV_COMPLETION, &rc->body);
    default:
        return do_generate(h, c, SRV_CHAT, &rc->body);
    }
}

static void request_done(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
    req_ctx *rc = *con_cls;
    if (!rc) return;
    inf_buf_free(&rc->body);
    free(rc);
    *con_cls = NULL;
}

int srv_http_start(srv_http **out, const srv_config *cfg, inf_err *err) {
    *out = NULL;
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD;
    const char *host = cfg->host && strcmp(cfg->host, "localhost") ? cfg->host : "127.0.0.1";
    if (cfg->port < 0 || cfg->port > 65535)
        return inf_fail(err, "--port: %d is not a port number (0..65535)", cfg->port);
    struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
    if (inet_pton(AF_INET, host, &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET;
        a4->sin_port = htons((uint16_t)cfg->port);
    } else if (inet_pton(AF_INET6, host, &a6->sin6_addr) == 1) {
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons((uint16_t)cfg->port);
        flags |= MHD_USE_IPv6;
    } else {
        return inf_fail(err, "--host: '%s' is not an IPv4 or IPv6 address", host);
    }
    srv_http *h = calloc(1, sizeof *h);
    if (!h) return inf_fail(err, "out of memory");
    h->cfg = *cfg;
    pthread_mutex_init(&h->mu, NULL);
    atomic_init(&h->ready, false);
    atomic_init(&h->closing, false);
    h->d = MHD_start_daemon(flags, (uint16_t)cfg->port, NULL, NULL, handle, h, MHD_OPTION_SOCK_ADDR,
                            (struct sockaddr *)&ss, MHD_OPTION_CONNECTION_LIMIT,
                            (unsigned)cfg->max_conns, MHD_OPTION_CONNECTION_TIMEOUT,
                            (unsigned)cfg->timeout_s, MHD_OPTION_NOTIFY_COMPLETED, request_done, h,
                            MHD_OPTION_END);
    if (!h->d) {
        pthread_mutex_destroy(&h->mu);
        free(h);
        return inf_fail(err,
                        "cannot listen on %s port %d (in use, or not an address of this "
                        "machine)",
                        host, cfg->port);
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT);
    h->port = di ? di->port : cfg->port;
    *out = h;
    return 0;
}

int srv_http_port(const srv_http *h) {
    return h->port;
}

void srv_http_ready(srv_http *h, const inf_exec *ex, inf_sched *sched) {
    h->ex = ex;
    h->sched = sched;
    atomic_store(&h->ready, true);
}

void srv_http_stop(srv_http *h) {
    if (!h) return;
    atomic_store(&h->closing, true);
    MHD_stop_daemon(h->d);
    pthread_mutex_destroy(&h->mu);
    free(h);
}
