/* The HTTP server (libmicrohttpd, one thread per connection): routing, API
 * key check, body size limit, OpenAI error responses, and the endpoints
 *   GET  /health  /v1/models  /metrics  /props  /slots
 *   POST /v1/chat/completions  /v1/completions  /v1/responses  /v1/messages
 *        /v1/messages/count_tokens  /v1/embeddings  /tokenize  /detokenize  /apply-template
 *   Ollama's /api/... (server/ollama.c), the chat page at / (server/webui.h)
 * and OPTIONS (CORS preflight) on each.
 * It starts before the model is loaded (/health answers 503 "loading") and
 * serves once srv_http_ready hands it the engine and the scheduler. */
#ifndef INF_SERVER_HTTP_H
#define INF_SERVER_HTTP_H

#include <stddef.h>

#include "runtime/exec.h"
#include "runtime/sched.h"
#include "util/err.h"

typedef struct srv_config {
    const char *host;              /* listen address: an IPv4 or IPv6 literal, or "localhost" */
    int port;                      /* 0: any free port (see srv_http_port) */
    const char *api_key;           /* NULL: no key needed */
    const char *alias;             /* the model id shown; NULL: the engine's model name */
    size_t max_body;               /* request body limit in bytes (413 above it) */
    unsigned timeout_s;            /* idle connection timeout */
    unsigned max_conns;            /* concurrent connections */
    unsigned max_conns_per_client; /* from one address; 0: max_conns */
    unsigned header_timeout_s;     /* a request's headers must arrive within this (0: 10 s) */
    unsigned sse_ping_s;           /* a stream with nothing new this long gets a ping (0: never) */
    bool embeddings; /* --embeddings: /v1/embeddings on, generation endpoints off (llama.cpp) */
    /* --cors-origins: comma-separated origins ("http://host:port", "*" for
     * any) whose pages may call the server; NULL: the loopback origins
     * http://localhost, http://127.0.0.1, http://[::1] on any port. */
    const char *cors_origins;
    bool no_webui; /* --no-webui: no chat page at / */
} srv_config;

typedef struct srv_http srv_http;

/* Binds and starts serving (health: loading). The config's strings must
 * outlive the server. 0, or -1 with a message (address, port in use). */
int srv_http_start(srv_http **out, const srv_config *cfg, inf_err *err);
/* The port actually bound. */
int srv_http_port(const srv_http *h);
/* From now on requests reach the engine (borrowed; both must outlive the server). */
void srv_http_ready(srv_http *h, const inf_exec *ex, inf_sched *sched);
/* Draining (SIGTERM): new requests get 503, /health 503, each response
 * closes its connection; running requests go on. */
void srv_http_drain(srv_http *h);
/* Requests being answered now (streams included). */
int srv_http_inflight(const srv_http *h);
/* The drain's time is up: every running request ends now with a well-formed
 * end (its API's error frame and end of stream; a 503 when not streaming). */
void srv_http_expire(srv_http *h);
/* Stops accepting, waits for connection threads. NULL is a no-op. Stop the
 * scheduler first so that waiting requests end. */
void srv_http_stop(srv_http *h);

#endif
