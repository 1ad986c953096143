/* The one generation path of every API (server/api.h): parse the body with
 * the API's parser, render the conversation through the model's template
 * (or take the completion prompt), submit a task, and write its reply with
 * the API's writers — whole, waiting while watching the client, or streamed
 * through libmicrohttpd's content reader, framing each poll's new text and
 * sending the API's ping while nothing new comes (a long prefill or a full
 * queue). A client that goes away cancels its task. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "server/http_int.h"

/* What a request still running when the drain's time is up gets. */
#define DRAIN_EXPIRED                                                                              \
    "the server is shutting down and its drain time (--drain-timeout) ran out before this "        \
    "reply was complete"

/* The prompt's token ids for a parsed request; on failure e holds the 4xx. */
static int prompt_tokens(srv_http *h, const srv_request *r, int32_t **ids, int *n, bool *in_think,
                         srv_error *e) {
    const inf_exec *eng = h->ex;
    inf_err err = {{0}};
    *in_think = false;
    if (r->kind == SRV_CHAT) {
        char *text = NULL;
        json_t *kw = srv_request_template_kwargs(r);
        if (!kw) return srv_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
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
    if (r->n_ctx_limit > eng->n_ctx) {
        free(*ids);
        *ids = NULL;
        return srv_error_set(e, 400, "invalid_request_error", NULL, "options.num_ctx",
                             "'options.num_ctx': %d is more than this server's context of %d "
                             "positions per request (start it with -c %d or more)",
                             r->n_ctx_limit, eng->n_ctx, r->n_ctx_limit);
    }
    if (r->n_ctx_limit && *n >= r->n_ctx_limit) {
        free(*ids);
        *ids = NULL;
        return srv_error_set(e, 400, "invalid_request_error", "context_length_exceeded",
                             "options.num_ctx",
                             "the prompt has %d tokens but 'options.num_ctx' is %d (one position "
                             "must remain for the reply); shorten the prompt or raise num_ctx",
                             *n, r->n_ctx_limit);
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
void srv_task_error(const inf_task *t, srv_error *e) {
    if (t->status == INF_TASK_UNAVAILABLE)
        srv_error_set(e, 503, "unavailable_error", NULL, NULL, "%s", t->err);
    else
        srv_error_set(e, 500, "server_error", NULL, NULL, "%s", t->err);
}

/* How a task ended, for the API's last frame or body (read under t->mu or
 * after the task is done). */
static srv_outcome outcome(const srv_http *h, const inf_task *t, inf_finish fin, int n_prompt,
                           int n_gen, const inf_timings *tm, json_t *logprobs) {
    return (srv_outcome){.finish = fin,
                         .stop_string = t->stop_index >= 0 ? t->p.stop[t->stop_index] : NULL,
                         .prompt_tokens = n_prompt,
                         .completion_tokens = n_gen,
                         .cached_tokens = tm->cache_n,
                         .timings = tm,
                         .draft = h->ex->spec_kind != INF_SPEC_NONE,
                         .logprobs = logprobs};
}

/* Takes the logprobs entries [from, n) of a task as JSON (NULL when none). */
static json_t *take_logprobs(srv_http *h, srv_kind kind, const inf_logprob *lp, int from, int n,
                             int text_offset) {
    if (n <= from) return NULL;
    return srv_logprobs_json(kind, lp + from, n - from, text_offset, srv_piece_cb, (void *)h->ex);
}

typedef struct stream_ctx {
    srv_http *h;
    struct MHD_Connection *c;
    inf_task *t;
    srv_stream st; /* the reply parser and the API's writer */
    int n_prompt;
    inf_buf out; /* frames not yet handed to MHD */
    size_t out_pos;
    size_t text_pos;            /* task text already framed */
    int lp_pos;                 /* task logprobs already framed */
    bool ended;                 /* the last frame is in out */
    struct timespec last_frame; /* CLOCK_MONOTONIC: when bytes last went out (pings) */
} stream_ctx;

/* Frames whatever the task has produced since the last call. Returns true
 * when something was framed or the stream ended. */
static bool stream_poll(stream_ctx *s, int wait_ms) {
    inf_task *t = s->t;
    pthread_mutex_lock(&t->mu);
    if (!t->done && t->text.len == s->text_pos && t->n_lp == s->lp_pos) {
        struct timespec ts;
        srv_deadline_in(&ts, wait_ms);
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
    if (failed) srv_task_error(t, &err);
    inf_timings tm = t->timings;
    int n_gen = t->n_gen;
    pthread_mutex_unlock(&t->mu);

    /* t->lp entries below n_lp are written once and never move. */
    json_t *lp = take_logprobs(s->h, s->st.meta.kind, t->lp, s->lp_pos, lp_end, s->st.text_offset);
    s->lp_pos = lp_end;
    size_t before = s->out.len;
    if (n || lp) srv_stream_text(&s->st, &s->out, text, n, lp);
    s->st.text_offset += (int)n;
    free(text);
    if (done) {
        if (failed) {
            s->st.api->stream_error(&s->out, &err);
        } else {
            srv_outcome o = outcome(s->h, t, fin, s->n_prompt, n_gen, &tm, NULL);
            srv_stream_end(&s->st, &s->out, &o);
        }
        s->ended = true;
    }
    return s->out.len > before || done;
}

/* Nothing went out for the ping interval (a long prefill, a queue). */
static bool ping_due(const stream_ctx *s) {
    unsigned every = s->h->cfg.sse_ping_s;
    if (!every || (s->st.api->ping && !*s->st.api->ping)) return false;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - s->last_frame.tv_sec) +
               (double)(now.tv_nsec - s->last_frame.tv_nsec) * 1e-9 >=
           (double)every;
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
        if (atomic_load(&s->h->drain_expired)) { /* a well-formed end, then close */
            inf_sched_cancel(s->h->sched, s->t);
            srv_error e;
            srv_error_set(&e, 503, "unavailable_error", NULL, NULL, "%s", DRAIN_EXPIRED);
            s->st.api->stream_error(&s->out, &e);
            s->ended = true;
            continue;
        }
        if (stream_poll(s, WAIT_TICK_MS)) {
            clock_gettime(CLOCK_MONOTONIC, &s->last_frame);
            continue;
        }
        if (ping_due(s)) {
            const char *ping = s->st.api->ping ? s->st.api->ping : ": ping\n\n";
            inf_buf_adds(&s->out, ping);
            clock_gettime(CLOCK_MONOTONIC, &s->last_frame);
            continue;
        }
        if (atomic_load(&s->h->closing) || srv_client_gone(s->c)) {
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

/* The API's error shape. */
static enum MHD_Result send_api_error(srv_http *h, struct MHD_Connection *c, const srv_api *api,
                                      const srv_error *e) {
    return srv_send_body(h, c, e->status, api->error_body(e), "application/json");
}

/* Parses a body with parse and renders and tokenizes its prompt, within a
 * parsing turn (srv_parse_enter). 0 with r, ids and n set, or -1 with the
 * 4xx in e (r then empty). */
static int parse_prompt(srv_http *h, const inf_buf *body,
                        int (*parse)(srv_request *, const char *, size_t,
                                     const inf_sampler_params *, srv_error *),
                        srv_request *r, int32_t **ids, int *n, bool *in_think, srv_error *e) {
    *ids = NULL;
    *n = 0;
    *in_think = false;
    srv_parse_enter(h);
    int bad = parse(r, body->data ? body->data : "", body->len, &h->ex->sampling, e);
    if (!bad &&
        (srv_request_check_vocab(r, h->ex->n_vocab, e) || srv_request_spec(r, &h->ex->spec, e) ||
         prompt_tokens(h, r, ids, n, in_think, e))) {
        srv_request_free(r);
        bad = 1;
    }
    srv_parse_leave(h);
    return bad ? -1 : 0;
}

enum MHD_Result srv_generate(srv_http *h, struct MHD_Connection *c, const srv_api *api,
                             const inf_buf *body) {
    srv_kind kind = api->kind;
    srv_request r;
    srv_error e;
    int32_t *ids;
    int n;
    bool in_think;
    if (parse_prompt(h, body, api->parse, &r, &ids, &n, &in_think, &e))
        return send_api_error(h, c, api, &e);
    inf_gen_params gp;
    srv_request_gen_params(&r, &gp);
    if (in_think) gp.grammar_start = INF_GRAM_AFTER_THINK;
    if (r.n_ctx_limit && (gp.max_tokens < 0 || gp.max_tokens > r.n_ctx_limit - n))
        gp.max_tokens = r.n_ctx_limit - n;   /* the reply ends where num_ctx does */
    inf_task *t = inf_task_new(ids, n, &gp); /* copies the stop strings */
    if (!t) {
        srv_request_free(&r);
        srv_error_set(&e, 503, "unavailable_error", NULL, NULL, "out of memory");
        return send_api_error(h, c, api, &e);
    }
    srv_resp_meta meta;
    srv_resp_meta_init(&meta, api, srv_model_id(h), api->echo ? api->echo(&r) : NULL);
    /* chat: <think> splits into reasoning; tool calls are parsed when tools were offered */
    /* (the request's kind: Ollama's raw /api/generate is a completion
       behind a chat-shaped API) */
    inf_reply_opts ro = {.think = r.kind == SRV_CHAT,
                         .start_in_think = in_think,
                         .tool_calls = r.kind == SRV_CHAT && r.tools};
    bool stream = r.stream, usage = r.include_usage;
    srv_request_free(&r);
    inf_err serr = {{0}};
    if (inf_sched_submit(h->sched, t, &serr)) {
        inf_task_release(t);
        srv_resp_meta_free(&meta);
        srv_error_set(&e, 503, "unavailable_error", NULL, NULL, "%s", serr.msg);
        return send_api_error(h, c, api, &e);
    }

    if (stream) {
        stream_ctx *s = calloc(1, sizeof *s);
        if (!s) {
            inf_sched_cancel(h->sched, t);
            inf_task_release(t);
            srv_resp_meta_free(&meta);
            return MHD_NO;
        }
        s->h = h;
        s->c = c;
        s->t = t;
        s->n_prompt = n;
        srv_stream_init(&s->st, api, &meta, &ro, usage);
        s->st.prompt_tokens = n;
        srv_stream_begin(&s->st, &s->out);
        clock_gettime(CLOCK_MONOTONIC, &s->last_frame);
        struct MHD_Response *resp =
            MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, stream_read, s, stream_free);
        if (!resp) {
            stream_free(s);
            return MHD_NO;
        }
        MHD_add_response_header(resp, "Content-Type",
                                api->stream_type ? api->stream_type : "text/event-stream");
        MHD_add_response_header(resp, "Cache-Control", "no-cache");
        srv_add_headers(h, c, resp);
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
        srv_deadline_in(&ts, WAIT_TICK_MS);
        pthread_cond_timedwait(&t->cv, &t->mu, &ts);
        if (t->done) break;
        pthread_mutex_unlock(&t->mu);
        if (atomic_load(&h->drain_expired)) {
            inf_sched_cancel(h->sched, t);
            inf_task_release(t);
            srv_resp_meta_free(&meta);
            srv_error_set(&e, 503, "unavailable_error", NULL, NULL, "%s", DRAIN_EXPIRED);
            return send_api_error(h, c, api, &e);
        }
        if (atomic_load(&h->closing) || srv_client_gone(c)) {
            inf_sched_cancel(h->sched, t);
            inf_task_release(t);
            srv_resp_meta_free(&meta);
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
        srv_task_error(t, &err);
        ok = send_api_error(h, c, api, &err);
    } else {
        json_t *lp = take_logprobs(h, kind, t->lp, 0, t->n_lp, 0);
        if (!lp && t->p.logprobs)
            lp = kind == SRV_CHAT
                     ? json_pack("{s:[]}", "content")
                     : srv_logprobs_json(kind, NULL, 0, 0, srv_piece_cb, (void *)h->ex);
        srv_outcome o = outcome(h, t, t->finish, n, t->n_gen, &t->timings, lp);
        char *resp = srv_whole_body(api, &meta, &ro, t->text.data, t->text.len, &o);
        json_decref(lp);
        ok = srv_send_body(h, c, 200, resp, "application/json");
    }
    srv_resp_meta_free(&meta);
    inf_task_release(t);
    return ok;
}

/* srv_messages_count_parse in parse_prompt's shape (no sampling defaults). */
static int count_parse(srv_request *r, const char *body, size_t len,
                       const inf_sampler_params *defaults, srv_error *e) {
    (void)defaults;
    return srv_messages_count_parse(r, body, len, e);
}

enum MHD_Result srv_count_tokens(srv_http *h, struct MHD_Connection *c, const inf_buf *body) {
    srv_request r;
    srv_error e;
    int32_t *ids;
    int n;
    bool in_think;
    if (parse_prompt(h, body, count_parse, &r, &ids, &n, &in_think, &e))
        return send_api_error(h, c, &srv_api_messages, &e);
    srv_request_free(&r);
    free(ids);
    return srv_send_json(h, c, 200, json_pack("{s:i}", "input_tokens", n));
}
