/* The APIs the server speaks, as one shape.
 *
 * Every generating endpoint (OpenAI chat completions and completions, the
 * Responses API, Anthropic Messages) is one srv_api: a parser from its
 * request body to the one internal request (srv_request: messages in the
 * form Hugging Face templates read, tools in OpenAI chat's shape, sampling,
 * limits, constraint), and writers from the reply's parts (runtime/reply.h:
 * reasoning, text, tool calls, in order) to its response, whole or as
 * server-sent events. Everything between — rendering the prompt through the
 * model's template, the task in the scheduler, the reply parser, waiting,
 * SSE pings, cancelling when the client goes — is the same code for all of
 * them (server/generate.c).
 *
 * A writer never sees raw model text: only parts. Streaming, it gets each
 * poll's new parts (a part's text may continue the previous poll's part of
 * the same kind: writers keep their open block in srv_stream) and finally
 * the outcome; whole, it gets all the parts merged and the outcome. */
#ifndef INF_SERVER_API_H
#define INF_SERVER_API_H

#include <jansson.h>
#include <stdbool.h>

#include "runtime/reply.h"
#include "runtime/sched.h"
#include "runtime/text.h"
#include "server/oai.h"

/* How a generation ended, for the final frame or body. */
typedef struct srv_outcome {
    inf_finish finish;       /* STOP (end of generation or a stop string) or LENGTH */
    const char *stop_string; /* the request's stop string that ended it, or NULL */
    int prompt_tokens, completion_tokens;
    int cached_tokens; /* prompt tokens reused from a cache */
    const inf_timings *timings;
    bool draft;       /* the engine speculates: timings carry the drafted tokens */
    json_t *logprobs; /* whole chat/completion responses: borrowed, may be NULL */
} srv_outcome;

/* What every frame or body of one response repeats. */
typedef struct srv_resp_meta {
    srv_kind kind;
    char id[48]; /* the API's prefix + a fresh suffix: "chatcmpl-…", "resp_…", "msg_…" */
    char model[128];
    long created;       /* unix seconds */
    long long start_ns; /* inf_now_ns() when the request began (Ollama's total_duration) */
    /* Request fields the API echoes back (Responses: instructions, tools,
     * tool_choice, temperature, ...), owned; NULL when none. */
    json_t *echo;
} srv_resp_meta;

typedef struct srv_api srv_api;

/* One response being streamed. api, reply and all are kept by the driver
 * (srv_stream_text, srv_stream_end below); the rest is the writer's. */
typedef struct srv_stream {
    const srv_api *api;
    inf_reply reply;
    srv_resp_meta meta;
    bool include_usage; /* chat: stream_options.include_usage */
    inf_parts all;      /* every part so far, merged (for events that repeat the whole) */
    int seq;            /* Responses: sequence_number of the next event */
    int open;           /* the writer's open block/item index; -1: none */
    inf_part_kind open_kind;
    int n_blocks;      /* blocks/items opened so far */
    int n_calls;       /* tool calls written so far */
    int text_offset;   /* completions logprobs: bytes of text sent so far */
    int prompt_tokens; /* known before the first frame (Messages' message_start) */
} srv_stream;

struct srv_api {
    const char *name;      /* for logs: "chat.completions", "responses", "messages" */
    srv_kind kind;         /* SRV_CHAT: a conversation rendered through the template */
    const char *id_prefix; /* "chatcmpl-", "cmpl-", "resp_", "msg_" */
    /* The body → r (see srv_request), its sampling defaulting to the
     * model's (defaults); on failure -1 with a 4xx in e and r empty. */
    int (*parse)(srv_request *r, const char *body, size_t len, const inf_sampler_params *defaults,
                 srv_error *e);
    /* Fields to echo back in meta->echo (NULL: none). Called before r is freed. */
    json_t *(*echo)(const srv_request *r);
    /* The whole response body (malloc'd). */
    char *(*body)(const srv_resp_meta *m, const inf_parts *parts, const srv_outcome *o);
    /* Streaming: the opening frames; each poll's new parts (and the logprobs
     * of the tokens behind them, consumed, may be NULL); the closing frames. */
    int (*stream_begin)(srv_stream *st, inf_buf *out);
    int (*stream_parts)(srv_stream *st, inf_buf *out, const inf_parts *p, json_t *logprobs);
    int (*stream_end)(srv_stream *st, inf_buf *out, const srv_outcome *o);
    /* An error in this API's shape: the body of an HTTP error, and the frames
     * that end a stream with it. */
    char *(*error_body)(const srv_error *e);
    int (*stream_error)(inf_buf *out, const srv_error *e);
    /* Sent while a stream has nothing new for a while (keeps clients from
     * timing out during a long prefill); NULL: the SSE comment ": ping";
     * "": never (a format with no comment line, such as NDJSON). */
    const char *ping;
    /* The Content-Type of a stream; NULL: "text/event-stream". */
    const char *stream_type;
};

extern const srv_api srv_api_chat;            /* POST /v1/chat/completions */
extern const srv_api srv_api_completions;     /* POST /v1/completions */
extern const srv_api srv_api_responses;       /* POST /v1/responses */
extern const srv_api srv_api_messages;        /* POST /v1/messages */
extern const srv_api srv_api_ollama_chat;     /* POST /api/chat (NDJSON streams) */
extern const srv_api srv_api_ollama_generate; /* POST /api/generate */

/* Ollama's shapes, for api_ollama.c and ollama.c: an error's body
 * {"error": "message"} (malloc'd), and a time as Ollama writes it (RFC 3339
 * in UTC with nanoseconds: "2026-01-02T03:04:05.123456789Z"). */
char *srv_ollama_error_body(const srv_error *e);
void srv_ollama_time(char *out, size_t cap, long long unix_ns);

/* The driver every endpoint's generation goes through (and the tests):
 * the task's released text → the reply parser → the API's writer. */
/* Takes m (its echo). include_usage: chat's stream_options. */
void srv_stream_init(srv_stream *st, const srv_api *api, srv_resp_meta *m, const inf_reply_opts *ro,
                     bool include_usage);
void srv_stream_free(srv_stream *st);
int srv_stream_begin(srv_stream *st, inf_buf *out);
/* New released text and the logprobs of the tokens behind it (consumed;
 * may be NULL): the parts it decides go to the writer. */
int srv_stream_text(srv_stream *st, inf_buf *out, const char *text, size_t n, json_t *logprobs);
/* The end: what the parser held, then the closing frames. */
int srv_stream_end(srv_stream *st, inf_buf *out, const srv_outcome *o);
/* The whole response for the whole text (malloc'd; NULL when out of memory). */
char *srv_whole_body(const srv_api *api, const srv_resp_meta *m, const inf_reply_opts *ro,
                     const char *text, size_t n, const srv_outcome *o);

/* POST /v1/messages/count_tokens: the body of a Messages request without
 * max_tokens, parsed as srv_api_messages.parse does (the prompt is rendered
 * and tokenized as for /v1/messages). */
int srv_messages_count_parse(srv_request *r, const char *body, size_t len, srv_error *e);

/* A fresh id with the API's prefix, the model name and the clock; echo is
 * taken (owned by m). */
void srv_resp_meta_init(srv_resp_meta *m, const srv_api *api, const char *model, json_t *echo);
void srv_resp_meta_free(srv_resp_meta *m);

/* A tool call's id, unique within the response: the API's prefix ("call_",
 * "toolu_", "fc_"), the response id's suffix and the call's index. */
void srv_tool_call_id(const srv_resp_meta *m, const char *prefix, int index, char *out, size_t cap);

/* One SSE frame: "event: NAME\n" (when name is not NULL) + "data: JSON\n\n";
 * j is released. */
int srv_sse_frame(inf_buf *out, const char *event, json_t *j);

#endif
