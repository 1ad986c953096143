#include "server/http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <strings.h>
#include <time.h>

#include "server/http_int.h"
#include "server/embd.h"
#include "server/webui.h"
#include "server/metrics.h"

void srv_deadline_in(struct timespec *ts, int ms) {
    clock_gettime(CLOCK_REALTIME, ts);
    ts->tv_nsec += (long)ms * 1000000L;
    ts->tv_sec += ts->tv_nsec / 1000000000L;
    ts->tv_nsec %= 1000000000L;
}

static double since_s(const struct timespec *t) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - t->tv_sec) + (double)(now.tv_nsec - t->tv_nsec) * 1e-9;
}

static void conn_set_state(srv_http *h, struct MHD_Connection *c, conn_state st) {
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    if (!ci || !ci->socket_context) return;
    pthread_mutex_lock(&h->conn_mu);
    conn *k = ci->socket_context;
    k->state = st;
    clock_gettime(CLOCK_MONOTONIC, &k->since);
    pthread_mutex_unlock(&h->conn_mu);
}

static void notify_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                              enum MHD_ConnectionNotificationCode code) {
    srv_http *h = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        conn *k = calloc(1, sizeof *k);
        if (!k || !ci) {
            free(k);
            return; /* not watched: only the idle timeout applies */
        }
        k->c = c;
        k->fd = ci->connect_fd;
        k->state = CONN_WAIT_HEADERS;
        clock_gettime(CLOCK_MONOTONIC, &k->since);
        pthread_mutex_lock(&h->conn_mu);
        k->next = h->conns;
        if (h->conns) h->conns->prev = k;
        h->conns = k;
        pthread_mutex_unlock(&h->conn_mu);
        *socket_context = k;
        return;
    }
    conn *k = *socket_context;
    if (!k) return;
    /* libmicrohttpd closes the socket after this returns, so the reaper never
       shuts down a descriptor that was reused */
    pthread_mutex_lock(&h->conn_mu);
    if (k->prev)
        k->prev->next = k->next;
    else
        h->conns = k->next;
    if (k->next) k->next->prev = k->prev;
    pthread_mutex_unlock(&h->conn_mu);
    free(k);
    *socket_context = NULL;
}

static void *reaper_main(void *arg) {
    srv_http *h = arg;
    pthread_mutex_lock(&h->conn_mu);
    while (!atomic_load(&h->closing)) {
        struct timespec ts;
        srv_deadline_in(&ts, 250);
        pthread_cond_timedwait(&h->reaper_cv, &h->conn_mu, &ts);
        for (conn *k = h->conns; k; k = k->next) {
            double limit = k->state == CONN_WAIT_HEADERS ? (double)h->cfg.header_timeout_s
                           : k->state == CONN_WAIT_BODY  ? (double)BODY_DEADLINE_S
                                                         : -1;
            if (limit >= 0 && since_s(&k->since) > limit) {
                /* the connection's thread sees EOF and closes it */
                shutdown(k->fd, SHUT_RDWR);
                k->state = CONN_BUSY; /* once */
            }
        }
    }
    pthread_mutex_unlock(&h->conn_mu);
    return NULL;
}

/* ---- CORS ---- */

/* A browser page may read a response only when it carries its origin in
 * Access-Control-Allow-Origin. Allowed: an origin --cors-origins lists (or
 * any, with "*"); without the flag the loopback origins on any port. */
static bool origin_allowed(const srv_http *h, const char *origin) {
    if (!origin || !*origin) return false;
    if (!h->cfg.cors_origins) {
        static const char *const loop[] = {"http://localhost", "http://127.0.0.1", "http://[::1]"};
        for (size_t i = 0; i < sizeof loop / sizeof loop[0]; i++) {
            size_t n = strlen(loop[i]);
            if (strncasecmp(origin, loop[i], n)) continue;
            const char *p = origin + n;
            if (!*p) return true;
            if (*p++ != ':' || !*p) continue;
            while (*p >= '0' && *p <= '9')
                p++;
            if (!*p) return true;
        }
        return false;
    }
    size_t no = strlen(origin);
    for (const char *p = h->cfg.cors_origins; *p;) {
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        while (n && *p == ' ')
            p++, n--;
        while (n && p[n - 1] == ' ')
            n--;
        if ((n == 1 && *p == '*') || (n == no && !strncasecmp(p, origin, n))) return true;
        p += end ? (size_t)(end - p) + 1 : n;
        if (!end) break;
    }
    return false;
}

/* Every response to an allowed origin names it (and varies by it); while
 * draining, every response closes its connection, so that a client or
 * proxy holding it open sends its next request elsewhere. */
void srv_add_headers(const srv_http *h, struct MHD_Connection *c, struct MHD_Response *r) {
    if (atomic_load(&h->draining)) MHD_add_response_header(r, "Connection", "close");
    const char *origin = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin");
    if (!origin_allowed(h, origin)) return;
    MHD_add_response_header(r, "Access-Control-Allow-Origin", origin);
    MHD_add_response_header(r, "Vary", "Origin");
}

/* ---- small helpers ---- */

void srv_parse_enter(srv_http *h) {
    pthread_mutex_lock(&h->parse_mu);
    while (h->parsing >= MAX_PARSING)
        pthread_cond_wait(&h->parse_cv, &h->parse_mu);
    h->parsing++;
    pthread_mutex_unlock(&h->parse_mu);
}

void srv_parse_leave(srv_http *h) {
    pthread_mutex_lock(&h->parse_mu);
    h->parsing--;
    pthread_cond_signal(&h->parse_cv);
    pthread_mutex_unlock(&h->parse_mu);
}

enum MHD_Result srv_send_body(srv_http *h, struct MHD_Connection *c, int status, char *body,
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
    srv_add_headers(h, c, r);
    enum MHD_Result ok = MHD_queue_response(c, (unsigned)status, r);
    MHD_destroy_response(r);
    return ok;
}

enum MHD_Result srv_send_json(srv_http *h, struct MHD_Connection *c, int status, json_t *j) {
    return srv_send_body(h, c, status, srv_json_dump_free(j), "application/json");
}

enum MHD_Result srv_send_error(srv_http *h, struct MHD_Connection *c, const srv_error *e) {
    return srv_send_body(h, c, e->status, srv_error_json(e), "application/json");
}

enum MHD_Result srv_fail(srv_http *h, struct MHD_Connection *c, int status, const char *type,
                         const char *code, const char *fmt, const char *arg) {
    srv_error e;
    srv_error_set(&e, status, type, code, NULL, fmt, arg);
    return srv_send_error(h, c, &e);
}

/* True when the connection is broken (reset) while we work. EOF is not
 * enough: a client may shut down its sending side after a complete request
 * (half-close) and still read the reply. A client that closed entirely is
 * found when the reply is written (a stream ends at its next frame). */
bool srv_client_gone(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci) return false;
    char b;
    ssize_t n = recv(ci->connect_fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    return n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
}

/* The key as OpenAI clients send it (Authorization: Bearer KEY) or as
 * Anthropic's do (x-api-key: KEY). */
static bool authorized(srv_http *h, struct MHD_Connection *c) {
    if (!h->cfg.api_key) return true;
    const char *a = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    const char *x = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "x-api-key");
    const char *k = a && !strncmp(a, "Bearer ", 7) ? a + 7 : x;
    if (!k) return false;
    const char *want = h->cfg.api_key;
    size_t nk = strlen(k), nw = strlen(want);
    unsigned diff = (unsigned)(nk ^ nw);
    for (size_t i = 0; i < nw; i++)
        diff |= (unsigned char)want[i] ^ (unsigned char)k[i < nk ? i : 0];
    return diff == 0;
}

const char *srv_model_id(srv_http *h) {
    if (h->cfg.alias) return h->cfg.alias;
    return h->ex && h->ex->model_name ? h->ex->model_name : "inferno";
}

int srv_piece_cb(void *ctx, int32_t id, char *buf, int cap) {
    const inf_exec *e = ctx;
    return e->piece(e->ctx, id, buf, cap);
}

/* ---- GET endpoints ---- */

static json_t *sampling_json(const inf_sampler_params *p) {
    json_t *j = json_object();
    json_object_set_new(j, "temperature", json_real(p->temp));
    json_object_set_new(j, "top_k", json_integer(p->top_k));
    json_object_set_new(j, "top_p", json_real(p->top_p));
    json_object_set_new(j, "min_p", json_real(p->min_p));
    json_object_set_new(j, "repeat_penalty", json_real(p->repeat_penalty));
    json_object_set_new(j, "repeat_last_n", json_integer(p->repeat_last_n));
    json_object_set_new(j, "presence_penalty", json_real(p->presence_penalty));
    json_object_set_new(j, "frequency_penalty", json_real(p->frequency_penalty));
    json_object_set_new(j, "seed", json_integer((json_int_t)p->seed));
    return j;
}

/* Which of the defaults the model file stated (the rest are llama.cpp's). */
static json_t *sampling_source_json(unsigned set) {
    json_t *j = json_array();
    static const struct {
        unsigned bit;
        const char *name;
    } f[] = {{INF_REC_TEMP, "temperature"},
             {INF_REC_TOP_K, "top_k"},
             {INF_REC_TOP_P, "top_p"},
             {INF_REC_MIN_P, "min_p"},
             {INF_REC_REPEAT_PENALTY, "repeat_penalty"}};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (set & f[i].bit) json_array_append_new(j, json_string(f[i].name));
    return j;
}

/* 200 when requests are served; 503 while the model loads and while the
 * server drains (load balancers take it out of rotation). */
static enum MHD_Result do_health(srv_http *h, struct MHD_Connection *c) {
    if (!atomic_load(&h->ready) || atomic_load(&h->draining)) {
        srv_error e;
        srv_error_set(&e, 503, "unavailable_error", NULL, NULL, "%s",
                      atomic_load(&h->draining) ? "draining: the server is shutting down"
                                                : "Loading model");
        return srv_send_error(h, c, &e);
    }
    json_t *j = json_object();
    json_object_set_new(j, "status", json_string("ok"));
    return srv_send_json(h, c, 200, j);
}

static enum MHD_Result do_models(srv_http *h, struct MHD_Connection *c) {
    json_t *m = json_object();
    json_object_set_new(m, "id", json_string(srv_model_id(h)));
    json_object_set_new(m, "object", json_string("model"));
    json_object_set_new(m, "created", json_integer((json_int_t)time(NULL)));
    json_object_set_new(m, "owned_by", json_string("inferno"));
    json_t *meta = json_object();
    json_object_set_new(meta, "n_ctx", json_integer(h->ex->n_ctx));
    json_object_set_new(meta, "n_vocab", json_integer(h->ex->n_vocab));
    json_object_set_new(meta, "n_slots", json_integer(h->ex->n_seq));
    if (h->ex->backend_name) json_object_set_new(meta, "backend", json_string(h->ex->backend_name));
    json_object_set_new(meta, "n_embd", json_integer(h->ex->n_embd));
    json_object_set_new(m, "meta", meta);
    /* the sampling a request gets when it names none, and which of it the model file stated */
    json_t *ds = sampling_json(&h->ex->sampling);
    json_object_set_new(ds, "from_model", sampling_source_json(h->ex->rec_set));
    json_object_set_new(m, "default_sampling", ds);
    json_t *data = json_array();
    json_array_append_new(data, m);
    json_t *j = json_object();
    json_object_set_new(j, "object", json_string("list"));
    json_object_set_new(j, "data", data);
    return srv_send_json(h, c, 200, j);
}

static enum MHD_Result do_metrics(srv_http *h, struct MHD_Connection *c) {
    inf_sched_metrics m;
    srv_http_counts counts;
    inf_sched_metrics_get(h->sched, &m);
    pthread_mutex_lock(&h->mu);
    counts = h->counts;
    pthread_mutex_unlock(&h->mu);
    char *text = srv_metrics_text(&m, &counts, (long)h->ex->n_ctx * h->ex->n_seq);
    return srv_send_body(h, c, 200, text, "text/plain; version=0.0.4");
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
        return srv_fail(
            h, c, 400, "invalid_request_error", NULL, "%s",
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
        return srv_fail(h, c, 400, "invalid_request_error", NULL, "%s", err.msg);
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
    return srv_send_json(h, c, 200, j);
}

static enum MHD_Result do_detokenize(srv_http *h, struct MHD_Connection *c, const inf_buf *body) {
    json_error_t je;
    json_t *root = srv_json_parse_body(body->data, body->len, &je);
    json_t *toks = json_object_get(root, "tokens");
    if (!json_is_object(root) || !json_is_array(toks)) {
        json_decref(root);
        return srv_fail(h, c, 400, "invalid_request_error", NULL, "%s",
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
            return srv_fail(h, c, 400, "invalid_request_error", NULL, "%s",
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
    return srv_send_json(h, c, 200, j);
}

/* ---- /v1/embeddings ---- */

int srv_embd_run(srv_http *h, struct MHD_Connection *c, srv_embd_request *r, inf_task ***out,
                 srv_error *err) {
    /* every input is a task: the scheduler runs them across its slots */
    inf_task **tasks = calloc((size_t)r->n_inputs, sizeof *tasks);
    *out = tasks;
    err->status = 0;
    if (!tasks) return srv_error_set(err, 503, "unavailable_error", NULL, NULL, "out of memory");
    inf_gen_params gp = inf_gen_defaults();
    gp.embed = true;
    for (int i = 0; i < r->n_inputs; i++) {
        inf_err serr = {{0}};
        inf_task *t = inf_task_new(r->ids[i], r->n_ids[i], &gp);
        r->ids[i] = NULL; /* the task owns it, even on failure */
        if (!t || inf_sched_submit(h->sched, t, &serr)) {
            inf_task_release(t);
            return srv_error_set(err, 503, "unavailable_error", NULL, NULL, "%s",
                                 t ? serr.msg : "out of memory");
        }
        tasks[i] = t;
    }
    for (int i = 0; i < r->n_inputs; i++) {
        inf_task *t = tasks[i];
        pthread_mutex_lock(&t->mu);
        while (!t->done) {
            struct timespec ts;
            srv_deadline_in(&ts, WAIT_TICK_MS);
            pthread_cond_timedwait(&t->cv, &t->mu, &ts);
            if (t->done) break;
            pthread_mutex_unlock(&t->mu);
            if (atomic_load(&h->closing) || srv_client_gone(c)) return -1; /* status 0 */
            pthread_mutex_lock(&t->mu);
        }
        pthread_mutex_unlock(&t->mu);
        if (t->status != INF_TASK_OK) {
            srv_task_error(t, err);
            return -1;
        }
    }
    MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT, h->cfg.timeout_s);
    return 0;
}

void srv_embd_tasks_free(srv_http *h, inf_task **tasks, int n) {
    for (int i = 0; tasks && i < n; i++) {
        if (!tasks[i]) continue;
        inf_sched_cancel(h->sched, tasks[i]);
        inf_task_release(tasks[i]);
    }
    free(tasks);
}

static enum MHD_Result do_embeddings(srv_http *h, struct MHD_Connection *c, const inf_buf *body) {
    if (!h->cfg.embeddings)
        return srv_fail(h, c, 501, "not_supported_error", NULL, "%s",
                        "This server does not support embeddings. Start it with `--embeddings`");
    srv_embd_request r;
    srv_error e;
    /* parsed and tokenized within the same bound on concurrent parses as
     * the generation requests (MAX_PARSING) */
    srv_parse_enter(h);
    int bad = srv_embd_parse(&r, h->ex, body->data ? body->data : "", body->len, &e);
    srv_parse_leave(h);
    if (bad) return srv_send_error(h, c, &e);
    inf_task **tasks = NULL;
    enum MHD_Result ok = MHD_NO;
    float **embs = NULL;
    if (srv_embd_run(h, c, &r, &tasks, &e)) {
        if (e.status) ok = srv_send_error(h, c, &e); /* else the client is gone */
    } else if (!(embs = malloc((size_t)r.n_inputs * sizeof *embs))) {
        srv_error_set(&e, 503, "unavailable_error", NULL, NULL, "out of memory");
        ok = srv_send_error(h, c, &e);
    } else {
        for (int i = 0; i < r.n_inputs; i++) {
            embs[i] = tasks[i]->embd;
            srv_embd_normalize(embs[i], r.dimensions);
        }
        ok = srv_send_body(h, c, 200, srv_embd_response(&r, embs, srv_model_id(h)),
                           "application/json");
    }
    free(embs);
    srv_embd_tasks_free(h, tasks, r.n_inputs);
    srv_embd_request_free(&r);
    return ok;
}

/* ---- /props, /apply-template (llama.cpp's) ---- */

/* GET /slots: what each slot is doing, as llama.cpp's /slots shows it. */
static enum MHD_Result do_slots(srv_http *h, struct MHD_Connection *c) {
    int n = h->ex->n_seq;
    inf_slot_info *info = calloc((size_t)(n > 0 ? n : 1), sizeof *info);
    if (!info) return srv_fail(h, c, 500, "server_error", NULL, "%s", "out of memory");
    n = inf_sched_slots_get(h->sched, info, n);
    json_t *a = json_array();
    static const char *const state[] = {"idle", "prefill", "generating"};
    for (int i = 0; i < n; i++) {
        const inf_slot_info *o = &info[i];
        bool busy = o->state != INF_SLOT_IDLE;
        json_t *next =
            json_pack("{s:b,s:i,s:i}", "has_next_token", busy, "n_decoded", o->n_gen, "n_remain",
                      busy && o->max_tokens >= 0 ? o->max_tokens - o->n_gen : -1);
        json_array_append_new(
            a, json_pack("{s:i,s:i,s:b,s:s,s:i,s:i,s:i,s:i,s:f,s:o}", "id", o->id, "n_ctx",
                         h->ex->n_ctx, "is_processing", busy, "state", state[o->state], "n_cache",
                         o->n_cache, "n_prompt_tokens", o->n_prompt, "n_prompt_tokens_processed",
                         o->n_prompt_done, "n_prompt_tokens_cache", o->n_reused, "t_seconds",
                         o->seconds, "next_token", next));
    }
    free(info);
    return srv_send_json(h, c, 200, a);
}

/* Speculative decoding as the engine was started: the drafter, the draft
 * model's name, and the knobs a request gets when it sets none. */
static json_t *speculative_json(const inf_exec *ex) {
    json_t *j = json_object();
    json_object_set_new(j, "type", json_string(inf_spec_kind_name(ex->spec_kind)));
    json_object_set_new(j, "draft_model",
                        ex->draft_name ? json_string(ex->draft_name) : json_null());
    json_object_set_new(j, "n_max", json_integer(ex->spec.n_max));
    json_object_set_new(j, "n_min", json_integer(ex->spec.n_min));
    json_object_set_new(j, "p_min", json_real(ex->spec.p_min));
    return j;
}

static enum MHD_Result do_props(srv_http *h, struct MHD_Connection *c) {
    const inf_exec *ex = h->ex;
    json_t *params = sampling_json(&ex->sampling);
    json_object_set_new(params, "n_predict", json_integer(-1));
    /* llama.cpp's flat keys, as a request sets them */
    json_object_set_new(params, "speculative.n_max", json_integer(ex->spec.n_max));
    json_object_set_new(params, "speculative.n_min", json_integer(ex->spec.n_min));
    json_object_set_new(params, "speculative.p_min", json_real(ex->spec.p_min));
    json_t *dgs = json_object();
    json_object_set_new(dgs, "n_ctx", json_integer(ex->n_ctx));
    json_object_set_new(dgs, "params", params);
    json_object_set_new(dgs, "sampling_from_model", sampling_source_json(ex->rec_set));
    json_t *j = json_object();
    json_object_set_new(j, "default_generation_settings", dgs);
    json_object_set_new(j, "total_slots", json_integer(ex->n_seq));
    json_object_set_new(j, "model_alias", json_string(srv_model_id(h)));
    json_object_set_new(j, "model_path", json_string(ex->model_path ? ex->model_path : ""));
    json_object_set_new(j, "chat_template",
                        srv_json_stringn(ex->chat_template ? ex->chat_template : "",
                                         ex->chat_template ? strlen(ex->chat_template) : 0));
    json_object_set_new(j, "modalities", json_pack("{s:b,s:b}", "vision", 0, "audio", 0));
    json_object_set_new(j, "embedding", json_boolean(h->cfg.embeddings));
    json_object_set_new(j, "speculative", speculative_json(ex));
    json_object_set_new(j, "build_info", json_string("inferno"));
    return srv_send_json(h, c, 200, j);
}

static enum MHD_Result do_apply_template(srv_http *h, struct MHD_Connection *c,
                                         const inf_buf *body) {
    srv_request r;
    srv_error e;
    if (srv_request_parse(&r, SRV_CHAT, body->data ? body->data : "", body->len, &h->ex->sampling,
                          &e))
        return srv_send_error(h, c, &e);
    json_t *kw = r.template_kwargs ? json_deep_copy(r.template_kwargs) : json_object();
    if (!kw) {
        srv_request_free(&r);
        return srv_fail(h, c, 503, "unavailable_error", NULL, "%s", "out of memory");
    }
    json_object_set_new(kw, "enable_thinking", json_boolean(r.enable_thinking));
    inf_chat_input in = {.messages = r.messages, .tools = r.tools, .kwargs = kw};
    char *text = NULL;
    inf_err err = {{0}};
    int rc = h->ex->render(h->ex->ctx, &in, &text, &err);
    json_decref(kw);
    srv_request_free(&r);
    if (rc) return srv_fail(h, c, 400, "invalid_request_error", NULL, "%s", err.msg);
    json_t *j = json_object();
    json_object_set_new(j, "prompt", srv_json_stringn(text, strlen(text)));
    free(text);
    return srv_send_json(h, c, 200, j);
}

/* An OPTIONS request: a CORS preflight from an allowed origin gets what it
 * may send; from another origin a 403 (and no CORS headers). */
static enum MHD_Result do_preflight(srv_http *h, struct MHD_Connection *c) {
    const char *origin = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin");
    if (origin && !origin_allowed(h, origin))
        return srv_fail(
            h, c, 403, "permission_error", NULL,
            "CORS: the origin %s may not call this server (allow it with --cors-origins)", origin);
    struct MHD_Response *r = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, "Allow", "GET, HEAD, POST, OPTIONS");
    if (origin) {
        char allow[512] = "Authorization, Content-Type, x-api-key, anthropic-version";
        const char *want =
            MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Access-Control-Request-Headers");
        /* echo the header names asked for: tokens, commas and spaces only */
        size_t n = strlen(allow);
        if (want && *want && n + 2 + strlen(want) < sizeof allow) {
            bool clean = true;
            for (const char *q = want; *q; q++)
                clean &= (*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') ||
                         (*q >= '0' && *q <= '9') || *q == '-' || *q == '_' || *q == ',' ||
                         *q == ' ';
            if (clean) snprintf(allow + n, sizeof allow - n, ", %s", want);
        }
        MHD_add_response_header(r, "Access-Control-Allow-Origin", origin);
        MHD_add_response_header(r, "Vary", "Origin");
        MHD_add_response_header(r, "Access-Control-Allow-Methods", "GET, HEAD, POST, OPTIONS");
        MHD_add_response_header(r, "Access-Control-Allow-Headers", allow);
        MHD_add_response_header(r, "Access-Control-Max-Age", "86400");
    }
    pthread_mutex_lock(&h->mu);
    h->counts.requests_total++;
    pthread_mutex_unlock(&h->mu);
    enum MHD_Result ok = MHD_queue_response(c, 204, r);
    MHD_destroy_response(r);
    return ok;
}

/* ---- request checks before the body ---- */

/* A Host header's name without the port: "localhost:8080" → "localhost",
 * "[::1]:80" → "::1". Writes at most cap bytes; false when it does not fit. */
static bool host_name(const char *host, char *out, size_t cap) {
    const char *p = host, *end;
    if (*p == '[') {
        end = strchr(++p, ']');
        if (!end) return false;
    } else {
        end = strchr(p, ':');
        if (!end) end = p + strlen(p);
    }
    if ((size_t)(end - p) >= cap) return false;
    memcpy(out, p, (size_t)(end - p));
    out[end - p] = 0;
    return true;
}

/* DNS rebinding: a page the user visits can point its own name at 127.0.0.1
 * and then talk to this server as a same-origin site. A server on a loopback
 * address answers only requests whose Host names loopback; `--host` with
 * another address opens it to every name. */
static bool host_allowed(srv_http *h, const char *host) {
    if (!h->loopback_only) return true;
    char name[64];
    if (!host_name(host, name, sizeof name)) return false;
    for (char *q = name; *q; q++)
        *q = (char)(*q >= 'A' && *q <= 'Z' ? *q + 32 : *q);
    size_t n = strlen(name);
    if (n && name[n - 1] == '.') name[--n] = 0; /* "localhost." */
    if (!strcmp(name, "localhost") || !strcmp(name, "::1")) return true;
    if (n > 10 && !strcmp(name + n - 10, ".localhost")) return true;
    struct in_addr a;
    return inet_pton(AF_INET, name, &a) == 1 && (ntohl(a.s_addr) >> 24) == 127;
}

typedef struct header_count {
    int content_length, transfer_encoding;
    const char *cl_first;
    bool cl_differ;
} header_count;

static enum MHD_Result count_header(void *cls, enum MHD_ValueKind kind, const char *key,
                                    const char *value) {
    header_count *hc = cls;
    if (!strcasecmp(key, "Content-Length")) {
        if (hc->content_length++ && strcmp(hc->cl_first, value ? value : "")) hc->cl_differ = true;
        if (hc->content_length == 1) hc->cl_first = value ? value : "";
    } else if (!strcasecmp(key, "Transfer-Encoding")) {
        hc->transfer_encoding++;
    }
    return MHD_YES;
}

/* Media type "application/json" (any case), parameters allowed. */
static bool is_json_type(const char *ct) {
    if (!ct) return false;
    while (*ct == ' ' || *ct == '\t')
        ct++;
    if (strncasecmp(ct, "application/json", 16)) return false;
    ct += 16;
    while (*ct == ' ' || *ct == '\t')
        ct++;
    return *ct == 0 || *ct == ';';
}

/* The checks that need only the request line and headers: framing a proxy
 * could read differently (two Content-Lengths, an unsupported or doubled
 * Transfer-Encoding), Host, and a JSON content type on the JSON endpoints
 * (a browser sends text/plain cross-site without asking). 0: fine; else the
 * status, with *msg set. */
static int check_head(srv_http *h, struct MHD_Connection *c, const char *version, bool json_body,
                      const char **msg) {
    header_count hc = {0};
    MHD_get_connection_values(c, MHD_HEADER_KIND, count_header, &hc);
    const char *te = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Transfer-Encoding");
    const char *host = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Host");
    if (hc.cl_differ) return *msg = "the request has Content-Length headers that disagree", 400;
    if (hc.transfer_encoding > 1 || (te && strcasecmp(te, "chunked")))
        return *msg = "Transfer-Encoding other than a single 'chunked' is not supported", 400;
    if (te && hc.content_length)
        return *msg = "a request must not have both Transfer-Encoding and Content-Length", 400;
    if (!host && !strcmp(version, MHD_HTTP_VERSION_1_1))
        return *msg = "an HTTP/1.1 request must have a Host header", 400;
    if (host && !host_allowed(h, host))
        return *msg = "the Host header does not name this server's address (a server on a "
                      "loopback address answers only loopback names; see --host)",
               421;
    if (json_body && !is_json_type(MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Type")))
        return *msg = "the request body must be sent as Content-Type: application/json", 415;
    return 0;
}

/* An error sent before the body was read: the connection cannot be reused. */
static enum MHD_Result fail_head(srv_http *h, struct MHD_Connection *c, int status,
                                 const char *msg) {
    srv_error e;
    srv_error_set(&e, status, "invalid_request_error", NULL, NULL, "%s", msg);
    pthread_mutex_lock(&h->mu);
    h->counts.requests_total++;
    h->counts.errors_total++;
    pthread_mutex_unlock(&h->mu);
    char *body = srv_error_json(&e);
    if (!body) return MHD_NO;
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", "application/json");
    MHD_add_response_header(r, "Connection", "close");
    srv_add_headers(h, c, r);
    enum MHD_Result ok = MHD_queue_response(c, (unsigned)status, r);
    MHD_destroy_response(r);
    return ok;
}

static int hexval(char ch) {
    return ch >= '0' && ch <= '9'   ? ch - '0'
           : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
           : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10
                                    : -1;
}

/* URL decoding as libmicrohttpd's, except that %00 stays as it is: a NUL
 * would end the path early, so that "/health%00x" routed to /health. */
static size_t unescape(void *cls, struct MHD_Connection *c, char *val) {
    char *w = val;
    for (const char *r = val; *r;) {
        int hi, lo;
        if (r[0] == '%' && r[1] && r[2] && (hi = hexval(r[1])) >= 0 && (lo = hexval(r[2])) >= 0 &&
            (hi || lo)) {
            *w++ = (char)(hi * 16 + lo);
            r += 3;
        } else {
            *w++ = *r++;
        }
    }
    *w = 0;
    return (size_t)(w - val);
}

/* ---- routing ---- */

/* Where a path goes (/health, the page and its files need no API key).
 * POST: the route's method (else GET or HEAD). LOOSE: a POST body of any Content-Type (Ollama's
 * clients and `curl -d` send none or a form type) — then a browser's cross-site request is held off
 * by its Origin instead (see check_origin). */
typedef enum {
    R_HEALTH,
    R_MODELS,
    R_METRICS,
    R_TOKENIZE,
    R_DETOKENIZE,
    R_COMPLETIONS,
    R_CHAT,
    R_EMBEDDINGS,
    R_PROPS,
    R_APPLY_TEMPLATE,
    R_RESPONSES,
    R_MESSAGES,
    R_COUNT_TOKENS,
    R_SLOTS,
    R_OLLAMA, /* /api/...: server/ollama.c routes within */
} route_id;
enum { ROUTE_POST = 1, ROUTE_LOOSE = 2 };
static const struct route {
    const char *path;
    route_id id;
    unsigned flags;
} routes[] = {
    {"/health", R_HEALTH, 0},
    {"/models", R_MODELS, 0},
    {"/metrics", R_METRICS, 0},
    {"/slots", R_SLOTS, 0},
    {"/props", R_PROPS, 0},
    {"/tokenize", R_TOKENIZE, ROUTE_POST},
    {"/detokenize", R_DETOKENIZE, ROUTE_POST},
    {"/completions", R_COMPLETIONS, ROUTE_POST},
    {"/chat/completions", R_CHAT, ROUTE_POST},
    {"/embeddings", R_EMBEDDINGS, ROUTE_POST},
    {"/apply-template", R_APPLY_TEMPLATE, ROUTE_POST},
    {"/responses", R_RESPONSES, ROUTE_POST},
    {"/messages", R_MESSAGES, ROUTE_POST},
    {"/messages/count_tokens", R_COUNT_TOKENS, ROUTE_POST},
    {"/api/chat", R_OLLAMA, ROUTE_POST | ROUTE_LOOSE},
    {"/api/generate", R_OLLAMA, ROUTE_POST | ROUTE_LOOSE},
    {"/api/embed", R_OLLAMA, ROUTE_POST | ROUTE_LOOSE},
    {"/api/embeddings", R_OLLAMA, ROUTE_POST | ROUTE_LOOSE},
    {"/api/show", R_OLLAMA, ROUTE_POST | ROUTE_LOOSE},
    {"/api/tags", R_OLLAMA, 0},
    {"/api/ps", R_OLLAMA, 0},
    {"/api/version", R_OLLAMA, 0},
};

static const struct route *find_route(const char *path) {
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++)
        if (!strcmp(path, routes[i].path)) return &routes[i];
    return NULL;
}

/* A browser's cross-site POST with a simple Content-Type needs no preflight;
 * on a LOOSE route such a request is refused unless its Origin is allowed
 * (requests without an Origin come from programs, not pages). */
static bool check_origin(const srv_http *h, struct MHD_Connection *c) {
    const char *origin = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin");
    return !origin || origin_allowed(h, origin);
}

/* The page and its files (server/webui.h), unless --no-webui. */
static enum MHD_Result do_asset(srv_http *h, struct MHD_Connection *c, const srv_asset *a) {
    struct MHD_Response *r =
        MHD_create_response_from_buffer(a->len, (void *)a->data, MHD_RESPMEM_PERSISTENT);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, "Content-Type", a->type);
    MHD_add_response_header(r, "Cache-Control", "no-cache");
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    pthread_mutex_lock(&h->mu);
    h->counts.requests_total++;
    pthread_mutex_unlock(&h->mu);
    enum MHD_Result ok = MHD_queue_response(c, 200, r);
    MHD_destroy_response(r);
    return ok;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url,
                              const char *method, const char *version, const char *upload,
                              size_t *upload_size, void **con_cls) {
    srv_http *h = cls;
    req_ctx *rc = *con_cls;
    bool get = !strcmp(method, "GET") || !strcmp(method, "HEAD"), post = !strcmp(method, "POST");
    const char *path = !strncmp(url, "/v1/", 4) ? url + 3 : url; /* /v1/x is /x */
    bool options = !strcmp(method, "OPTIONS");
    const struct route *route = find_route(path);
    const srv_asset *asset = !route && get && !h->cfg.no_webui ? srv_webui_asset(url) : NULL;
    if (!rc) { /* the headers are in, the body (if any) is not */
        const char *msg = NULL;
        bool json_body =
            route && (route->flags & ROUTE_POST) && !(route->flags & ROUTE_LOOSE) && post;
        int st = check_head(h, c, version, json_body, &msg);
        if (st) return fail_head(h, c, st, msg);
        rc = calloc(1, sizeof *rc);
        if (!rc) return MHD_NO;
        *con_cls = rc;
        conn_set_state(h, c, CONN_WAIT_BODY);
        return MHD_YES;
    }
    if (*upload_size) {
        if (!rc->too_big && rc->body.len + *upload_size > h->cfg.max_body) rc->too_big = true;
        if (!rc->too_big && inf_buf_add(&rc->body, upload, *upload_size)) rc->too_big = true;
        *upload_size = 0;
        return MHD_YES;
    }
    conn_set_state(h, c, CONN_BUSY);
    if (!rc->counted) { /* until request_done, also for a stream */
        rc->counted = true;
        atomic_fetch_add(&h->inflight, 1);
    }

    if (asset && !atomic_load(&h->draining)) return do_asset(h, c, asset);
    if (!route && !strncmp(path, "/api/", 5))
        return srv_ollama(h, c, path, &rc->body); /* its 404 */
    if (!route) return srv_fail(h, c, 404, "not_found_error", NULL, "no endpoint %s", path);
    if (options) return do_preflight(h, c); /* a browser sends no key with it */
    if ((route->flags & ROUTE_POST) ? !post : !get)
        return srv_fail(h, c, 405, "invalid_request_error", NULL, "%s is not allowed here", method);
    if (route->id == R_HEALTH) return do_health(h, c);
    srv_error e;
    bool ollama = route->id == R_OLLAMA;
    if ((route->flags & ROUTE_LOOSE) && !check_origin(h, c)) {
        srv_error_set(&e, 403, "permission_error", NULL, NULL,
                      "CORS: the origin %s may not call this server (allow it with "
                      "--cors-origins)",
                      MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin"));
        return ollama ? srv_ollama_error(h, c, &e) : srv_send_error(h, c, &e);
    }
    /* Anthropic's and Ollama's clients read errors in their own shape */
    const srv_api *shape =
        route->id == R_MESSAGES || route->id == R_COUNT_TOKENS ? &srv_api_messages : &srv_api_chat;
#define SEND_ERROR(e)                                                                              \
    (ollama ? srv_ollama_error(h, c, &(e))                                                         \
            : srv_send_body(h, c, (e).status, shape->error_body(&(e)), "application/json"))
    if (!authorized(h, c)) {
        srv_error_set(&e, 401, "authentication_error", "invalid_api_key", NULL, "%s",
                      "invalid or missing API key (send 'Authorization: Bearer KEY' or "
                      "'x-api-key: KEY')");
        return SEND_ERROR(e);
    }
    if (!atomic_load(&h->ready) || atomic_load(&h->draining)) {
        srv_error_set(&e, 503, "unavailable_error", NULL, NULL, "%s",
                      atomic_load(&h->draining)
                          ? "draining: the server is shutting down and takes no new requests"
                          : "Loading model");
        return SEND_ERROR(e);
    }
    if (rc->too_big) {
        srv_error_set(&e, 413, "invalid_request_error", "request_too_large", NULL,
                      "the request body is larger than %zu bytes", h->cfg.max_body);
        return SEND_ERROR(e);
    }
    switch (route->id) {
    case R_MODELS:
        return do_models(h, c);
    case R_METRICS:
        return do_metrics(h, c);
    case R_SLOTS:
        return do_slots(h, c);
    case R_TOKENIZE:
        return do_tokenize(h, c, &rc->body);
    case R_DETOKENIZE:
        return do_detokenize(h, c, &rc->body);
    case R_EMBEDDINGS:
        return do_embeddings(h, c, &rc->body);
    case R_PROPS:
        return do_props(h, c);
    case R_APPLY_TEMPLATE:
        return do_apply_template(h, c, &rc->body);
    case R_OLLAMA:
        return srv_ollama(h, c, path, &rc->body);
    default:
        break;
    }
    if (h->cfg.embeddings) { /* llama.cpp: an embeddings server does not generate */
        srv_error_set(&e, 501, "not_supported_error", NULL, NULL, "%s",
                      "This server does not support completions. Start it without `--embeddings`");
        return SEND_ERROR(e);
    }
#undef SEND_ERROR
    switch (route->id) {
    case R_RESPONSES:
        return srv_generate(h, c, &srv_api_responses, &rc->body);
    case R_MESSAGES:
        return srv_generate(h, c, &srv_api_messages, &rc->body);
    case R_COUNT_TOKENS:
        return srv_count_tokens(h, c, &rc->body);
    case R_COMPLETIONS:
        return srv_generate(h, c, &srv_api_completions, &rc->body);
    default:
        return srv_generate(h, c, &srv_api_chat, &rc->body);
    }
}

static void request_done(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
    srv_http *h = cls;
    conn_set_state(h, c, CONN_WAIT_HEADERS); /* keep-alive: the next request's clock */
    req_ctx *rc = *con_cls;
    if (!rc) return;
    if (rc->counted) atomic_fetch_sub(&h->inflight, 1);
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
    if (!h->cfg.header_timeout_s) h->cfg.header_timeout_s = 10;
    h->loopback_only = ss.ss_family == AF_INET ? (ntohl(a4->sin_addr.s_addr) >> 24) == 127
                                               : IN6_IS_ADDR_LOOPBACK(&a6->sin6_addr);
    pthread_mutex_init(&h->mu, NULL);
    pthread_mutex_init(&h->conn_mu, NULL);
    pthread_cond_init(&h->reaper_cv, NULL);
    pthread_mutex_init(&h->parse_mu, NULL);
    pthread_cond_init(&h->parse_cv, NULL);
    atomic_init(&h->ready, false);
    atomic_init(&h->closing, false);
    atomic_init(&h->draining, false);
    atomic_init(&h->drain_expired, false);
    atomic_init(&h->inflight, 0);
    /* MHD_USE_POLL: descriptors above FD_SETSIZE (many connections) work.
       The per-client limit keeps one address from taking every slot. */
    unsigned per_ip = cfg->max_conns_per_client ? cfg->max_conns_per_client : cfg->max_conns;
    h->d = MHD_start_daemon(
        flags | MHD_USE_POLL, (uint16_t)cfg->port, NULL, NULL, handle, h, MHD_OPTION_SOCK_ADDR,
        (struct sockaddr *)&ss, MHD_OPTION_CONNECTION_LIMIT, (unsigned)cfg->max_conns,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, per_ip, MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned)cfg->timeout_s, MHD_OPTION_LISTEN_BACKLOG_SIZE, 1024u,
        MHD_OPTION_NOTIFY_COMPLETED, request_done, h, MHD_OPTION_NOTIFY_CONNECTION,
        notify_connection, h, MHD_OPTION_UNESCAPE_CALLBACK, unescape, h,
        MHD_OPTION_THREAD_STACK_SIZE, CONN_STACK_BYTES, MHD_OPTION_END);
    if (!h->d || pthread_create(&h->reaper, NULL, reaper_main, h)) {
        if (h->d) MHD_stop_daemon(h->d);
        pthread_mutex_destroy(&h->mu);
        pthread_mutex_destroy(&h->conn_mu);
        pthread_cond_destroy(&h->reaper_cv);
        pthread_mutex_destroy(&h->parse_mu);
        pthread_cond_destroy(&h->parse_cv);
        free(h);
        return inf_fail(err,
                        "cannot listen on %s port %d (in use, or not an address of this "
                        "machine)",
                        host, cfg->port);
    }
    h->reaper_started = true;
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

void srv_http_drain(srv_http *h) {
    atomic_store(&h->draining, true);
}

int srv_http_inflight(const srv_http *h) {
    return atomic_load(&h->inflight);
}

void srv_http_expire(srv_http *h) {
    atomic_store(&h->draining, true);
    atomic_store(&h->drain_expired, true);
}

void srv_http_stop(srv_http *h) {
    if (!h) return;
    atomic_store(&h->closing, true);
    pthread_mutex_lock(&h->conn_mu);
    pthread_cond_signal(&h->reaper_cv);
    pthread_mutex_unlock(&h->conn_mu);
    if (h->reaper_started) pthread_join(h->reaper, NULL);
    MHD_stop_daemon(h->d);
    pthread_mutex_destroy(&h->mu);
    pthread_mutex_destroy(&h->conn_mu);
    pthread_cond_destroy(&h->reaper_cv);
    pthread_mutex_destroy(&h->parse_mu);
    pthread_cond_destroy(&h->parse_cv);
    free(h);
}
