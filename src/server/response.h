/* OpenAI response bodies, whole and streamed (server-sent events).
 *
 * A stream is framed as OpenAI frames it: for chat a first chunk with the
 * assistant role, then chunks whose delta holds new content (or
 * reasoning_content), a chunk with an empty delta and the finish_reason,
 * when stream_options.include_usage a chunk with "choices": [] and the
 * usage, then `data: [DONE]`. Every frame is `data: <json>\n\n`. Text is
 * always whole UTF-8 because the JSON encoder only takes valid strings. */
#ifndef INF_SERVER_RESPONSE_H
#define INF_SERVER_RESPONSE_H

#include <stdbool.h>

#include "server/oai.h"
#include "runtime/sched.h"
#include "runtime/text.h"

/* What every chunk or body of one response repeats. */
typedef struct srv_resp_meta {
    srv_kind kind;
    char id[48]; /* "chatcmpl-..." or "cmpl-..." */
    char model[128];
    long created;        /* unix seconds */
    bool split_think;    /* chat: route <think> text to reasoning_content */
    bool start_in_think; /* the prompt ended inside an open <think> */
} srv_resp_meta;

/* Fills meta with a fresh id (from a process-wide counter and the clock). */
void srv_resp_meta_init(srv_resp_meta *m, srv_kind kind, const char *model, bool split_think,
                        bool start_in_think);

const char *srv_finish_name(inf_finish f);

/* The whole (non-streamed) response body, malloc'd. lp may be NULL. */
char *srv_response_body(const srv_resp_meta *m, const char *text, size_t n, inf_finish fin,
                        json_t *logprobs, int prompt_tokens, int completion_tokens,
                        const inf_timings *tm);

typedef struct srv_stream {
    srv_resp_meta meta;
    bool include_usage;
    inf_think think;
    int text_offset; /* completions logprobs: bytes of text sent so far */
} srv_stream;

void srv_stream_init(srv_stream *st, const srv_resp_meta *m, bool include_usage);
void srv_stream_free(srv_stream *st);
/* Chat: the role chunk. Completions: nothing. */
int srv_stream_begin(srv_stream *st, inf_buf *out);
/* New released text (whole UTF-8) and the logprobs of the tokens behind it
 * (consumed; may be NULL). Appends one chunk, or none when nothing is to be
 * shown yet (text held by the reasoning splitter, no logprobs). */
int srv_stream_delta(srv_stream *st, inf_buf *out, const char *text, size_t n, json_t *logprobs);
/* The end: held text, the finish chunk, the usage chunk, [DONE]. */
int srv_stream_end(srv_stream *st, inf_buf *out, inf_finish fin, int prompt_tokens,
                   int completion_tokens, const inf_timings *tm);
/* An error event (OpenAI's error shape in a data frame), then [DONE]. */
int srv_stream_error(inf_buf *out, const srv_error *e);

#endif
