#include "server/api.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/timer.h"

void srv_resp_meta_init(srv_resp_meta *m, const srv_api *api, const char *model, json_t *echo) {
    static atomic_ulong counter;
    memset(m, 0, sizeof *m);
    m->kind = api->kind;
    m->created = (long)time(NULL);
    m->start_ns = (long long)inf_now_ns();
    unsigned long n = atomic_fetch_add(&counter, 1) + 1;
    snprintf(m->id, sizeof m->id, "%s%lx%04lx", api->id_prefix,
             (unsigned long)(inf_now_ns() & 0xffffffffffull), n & 0xffff);
    snprintf(m->model, sizeof m->model, "%s", model ? model : "");
    m->echo = echo;
}

void srv_resp_meta_free(srv_resp_meta *m) {
    json_decref(m->echo);
    m->echo = NULL;
}

void srv_tool_call_id(const srv_resp_meta *m, const char *prefix, int index, char *out,
                      size_t cap) {
    const char *suffix = strchr(m->id, '-');
    if (!suffix) suffix = strchr(m->id, '_');
    snprintf(out, cap, "%s%s_%d", prefix, suffix ? suffix + 1 : m->id, index);
}

int srv_sse_frame(inf_buf *out, const char *event, json_t *j) {
    char *s = srv_json_dump_free(j);
    if (!s) return -1;
    int rc = event ? inf_buf_printf(out, "event: %s\ndata: %s\n\n", event, s)
                   : inf_buf_printf(out, "data: %s\n\n", s);
    free(s);
    return rc;
}

/* ---- the driver ---- */

void srv_stream_init(srv_stream *st, const srv_api *api, srv_resp_meta *m, const inf_reply_opts *ro,
                     bool include_usage) {
    memset(st, 0, sizeof *st);
    st->api = api;
    st->meta = *m;
    m->echo = NULL;
    st->include_usage = include_usage;
    st->open = -1;
    inf_reply_init(&st->reply, ro);
}

void srv_stream_free(srv_stream *st) {
    inf_reply_free(&st->reply);
    inf_parts_free(&st->all);
    srv_resp_meta_free(&st->meta);
}

int srv_stream_begin(srv_stream *st, inf_buf *out) {
    return st->api->stream_begin(st, out);
}

/* Hands new parts to the writer and keeps them in st->all. */
static int write_parts(srv_stream *st, inf_buf *out, inf_parts *p, json_t *logprobs) {
    int rc = 0;
    if (p->n || logprobs) {
        rc = inf_parts_append(&st->all, p);
        if (!rc)
            rc = st->api->stream_parts(st, out, p, logprobs);
        else
            json_decref(logprobs);
    }
    inf_parts_free(p);
    return rc;
}

int srv_stream_text(srv_stream *st, inf_buf *out, const char *text, size_t n, json_t *logprobs) {
    inf_parts p = {0};
    if (inf_reply_push(&st->reply, &p, text, n)) {
        inf_parts_free(&p);
        json_decref(logprobs);
        return -1;
    }
    return write_parts(st, out, &p, logprobs);
}

int srv_stream_end(srv_stream *st, inf_buf *out, const srv_outcome *o) {
    inf_parts p = {0};
    if (inf_reply_flush(&st->reply, &p)) {
        inf_parts_free(&p);
        return -1;
    }
    if (write_parts(st, out, &p, NULL)) return -1;
    return st->api->stream_end(st, out, o);
}

char *srv_whole_body(const srv_api *api, const srv_resp_meta *m, const inf_reply_opts *ro,
                     const char *text, size_t n, const srv_outcome *o) {
    inf_reply r;
    inf_reply_init(&r, ro);
    inf_parts p = {0};
    char *body = NULL;
    if (!inf_reply_push(&r, &p, text ? text : "", n) && !inf_reply_flush(&r, &p))
        body = api->body(m, &p, o);
    inf_parts_free(&p);
    inf_reply_free(&r);
    return body;
}
