/* What the server's files share inside: the server's state and the small
 * helpers that answer a connection (http.c), for the generation path
 * (generate.c). Not for use outside server/. */
#ifndef INF_SERVER_HTTP_INT_H
#define INF_SERVER_HTTP_INT_H

#include <jansson.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <time.h>

#include "server/api.h"
#include "server/embd.h"
#include "server/http.h"
#include "server/metrics.h"

/* How long a waiting connection thread sleeps between checks of its client. */
#define WAIT_TICK_MS 50
/* A request's body must have arrived this long after its headers. */
#define BODY_DEADLINE_S 60
/* Connection threads render chat templates, whose evaluation may nest 2,048
 * levels (template/tmpl_int.h): not the 2 MiB glibc gives threads when the
 * stack rlimit is unlimited. */
#define CONN_STACK_BYTES ((size_t)8 << 20)
/* Requests parsed and rendered at once: what a request expands into (JSON
 * tree, template values, token ids) is bounded per request by the limits in
 * oai.c, and this bounds how many such expansions are alive together. */
#define MAX_PARSING 4

/* Where a connection is, for the deadlines the reaper enforces. libmicrohttpd
 * only has an idle timeout, which a client sending one byte at a time
 * (slowloris) never trips: the reaper shuts down a connection whose request
 * has not arrived in time, so idle sockets cannot hold connection slots. */
typedef enum { CONN_WAIT_HEADERS, CONN_WAIT_BODY, CONN_BUSY } conn_state;
typedef struct conn {
    struct conn *prev, *next;
    struct MHD_Connection *c;
    int fd;
    conn_state state;
    struct timespec since; /* CLOCK_MONOTONIC, when the state began */
} conn;

struct srv_http {
    srv_config cfg;
    struct MHD_Daemon *d;
    int port;
    const inf_exec *ex;
    inf_sched *sched;
    atomic_bool ready, closing;
    /* draining: no new requests (503), /health 503, connections closed after
     * each response; drain_expired: the requests still running end now,
     * each with its API's error frame (srv_http_expire). */
    atomic_bool draining, drain_expired;
    atomic_int inflight; /* requests between their headers and request_done */
    bool loopback_only;  /* listening on a loopback address: Host must name it */
    pthread_mutex_t mu;  /* counts */
    srv_http_counts counts;
    pthread_mutex_t conn_mu; /* conns; a conn's fd is valid while it is listed */
    conn *conns;
    pthread_t reaper;
    bool reaper_started;
    pthread_cond_t reaper_cv;
    pthread_mutex_t parse_mu;
    pthread_cond_t parse_cv;
    int parsing; /* requests between parse and submit now */
};

/* Per-request state while the body arrives. */
typedef struct req_ctx {
    inf_buf body;
    bool too_big;
    bool counted; /* in h->inflight */
} req_ctx;

/* Around parsing and rendering a request: at most MAX_PARSING requests
 * expand their bodies at once (waits for a turn). */
void srv_parse_enter(srv_http *h);
void srv_parse_leave(srv_http *h);
/* Sends body (taken; NULL: a 500 "out of memory") with status and type. */
enum MHD_Result srv_send_body(srv_http *h, struct MHD_Connection *c, int status, char *body,
                              const char *type);
enum MHD_Result srv_send_json(srv_http *h, struct MHD_Connection *c, int status, json_t *j);
/* An error in OpenAI's shape. */
enum MHD_Result srv_send_error(srv_http *h, struct MHD_Connection *c, const srv_error *e);
enum MHD_Result srv_fail(srv_http *h, struct MHD_Connection *c, int status, const char *type,
                         const char *code, const char *fmt, const char *arg);
/* The headers every response carries: CORS for the request's Origin when
 * it is allowed, Connection: close while draining. */
void srv_add_headers(const srv_http *h, struct MHD_Connection *c, struct MHD_Response *r);
/* True when the connection is broken (reset) while we work. */
bool srv_client_gone(struct MHD_Connection *c);
/* The model id shown to clients: --alias, else the model's name. */
const char *srv_model_id(srv_http *h);
/* srv_piece_fn over an inf_exec. */
int srv_piece_cb(void *ctx, int32_t id, char *buf, int cap);
/* ts = CLOCK_REALTIME now + ms (for pthread_cond_timedwait). */
void srv_deadline_in(struct timespec *ts, int ms);

/* A failed task's error: 503 when it may succeed later, else 500. */
void srv_task_error(const inf_task *t, srv_error *e);

/* POST of a generating endpoint: the body parsed by api, the prompt rendered
 * and submitted, the reply written by api, whole or streamed. */
enum MHD_Result srv_generate(srv_http *h, struct MHD_Connection *c, const srv_api *api,
                             const inf_buf *body);
/* Ollama's API (server/ollama.c): path is one of the /api/ routes of
 * http.c's table; auth, drain and body size are checked before. */
enum MHD_Result srv_ollama(srv_http *h, struct MHD_Connection *c, const char *path,
                           const inf_buf *body);
/* An error in Ollama's shape: {"error": "message"} with e's status. */
enum MHD_Result srv_ollama_error(srv_http *h, struct MHD_Connection *c, const srv_error *e);

/* Runs every input of r as an embedding task (the ids move to the tasks)
 * and waits for all, watching the client. 0: (*tasks)[i]->embd holds input
 * i's hidden state (not normalized). -1: e holds a 503/500, or e->status is
 * 0 when the client went away (send nothing). Either way free the tasks
 * with srv_embd_tasks_free(h, *tasks, r->n_inputs). */
int srv_embd_run(srv_http *h, struct MHD_Connection *c, srv_embd_request *r, inf_task ***tasks,
                 srv_error *e);
void srv_embd_tasks_free(srv_http *h, inf_task **tasks, int n);

/* POST /v1/messages/count_tokens: the prompt a Messages body renders to,
 * counted through the same render and tokenizer ({"input_tokens": N}). */
enum MHD_Result srv_count_tokens(srv_http *h, struct MHD_Connection *c, const inf_buf *body);

#endif
