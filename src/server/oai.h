/* The OpenAI request and response mapping (JSON via jansson).
 *
 * srv_request_parse validates every field the server understands, with the
 * type and range OpenAI documents, and reports the first bad one as a 400 in
 * OpenAI's error shape; unknown fields are ignored. The response builders
 * produce OpenAI's object shapes (plus llama.cpp's `timings`). */
#ifndef INF_SERVER_OAI_H
#define INF_SERVER_OAI_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "runtime/sched.h"
#include "runtime/text.h"

/* An HTTP error in OpenAI's shape:
 * {"error": {"message", "type", "param", "code"}} with `status`. */
typedef struct srv_error {
    int status;       /* 400, 401, 404, 405, 413, 500, 503 */
    const char *type; /* "invalid_request_error", "authentication_error", ... */
    const char *code; /* e.g. "context_length_exceeded"; NULL for none */
    char param[64];   /* the offending field; empty for none */
    char msg[512];
} srv_error;

/* Fills e and returns -1. */
int srv_error_set(srv_error *e, int status, const char *type, const char *code, const char *param,
                  const char *fmt, ...) __attribute__((format(printf, 6, 7)));
/* The error's JSON body (malloc'd). */
char *srv_error_json(const srv_error *e);

/* llama.cpp's sampling parameters with its server defaults. */
typedef struct srv_sampling {
    float temperature;       /* 0.8; 0 = greedy */
    int top_k;               /* 40; 0 = off */
    float top_p;             /* 0.95; 1 = off */
    float min_p;             /* 0.05; 0 = off */
    float repeat_penalty;    /* 1.0 = off */
    int penalty_last_n;      /* 64 */
    float presence_penalty;  /* 0 */
    float frequency_penalty; /* 0 */
    uint64_t seed;
    bool has_seed; /* false: a fresh random seed per request */
} srv_sampling;

void srv_sampling_default(srv_sampling *s);
/* The same from an engine's defaults (repeat_last_n, penalties included). */
void srv_sampling_from(srv_sampling *s, const inf_sampler_params *p);

typedef enum srv_kind { SRV_CHAT, SRV_COMPLETION } srv_kind;

/* tool_choice, as every API names it: auto (the model decides), none (no
 * tools offered), required (at least one call: OpenAI "required", Anthropic
 * "any"), or one named function; required and named are forced through the
 * constrained decoding (inf_gram_tool_calls). */
typedef enum srv_tool_choice {
    SRV_TOOLS_AUTO,
    SRV_TOOLS_NONE,
    SRV_TOOLS_REQUIRED,
    SRV_TOOLS_NAMED
} srv_tool_choice;

typedef struct srv_request {
    srv_kind kind;
    json_t *root; /* the parsed body (owned) */
    /* chat: the conversation as Hugging Face templates read it (owned):
     * roles system/user/assistant/tool (developer becomes system); content
     * a string (text parts joined; an assistant's null content becomes "",
     * which Qwen3's template needs); an assistant's `tool_calls` as [{id,
     * type: "function", function: {name, arguments}}] with arguments an
     * object (parsed from OpenAI's JSON string) and its reasoning as
     * `reasoning_content` (from `reasoning_content` or `reasoning`); a tool
     * message's `tool_call_id` kept. Every API's input becomes this. */
    json_t *messages;
    /* chat: the tools in OpenAI chat's shape ({type: "function", function:
     * {name, description, parameters}}), owned; NULL when none or
     * tool_choice is "none" (then the prompt offers none and no call is
     * parsed). Every API's tools are converted to this shape so that the
     * model sees one format. */
    json_t *tools;
    srv_tool_choice tool_choice;
    char tool_name[128];      /* SRV_TOOLS_NAMED: the function */
    bool parallel_tool_calls; /* false: the reply ends after its first call */
    json_t *template_kwargs;  /* chat_template_kwargs, borrowed, or NULL */
    bool enable_thinking;     /* chat_template_kwargs.enable_thinking, default true;
                                 reasoning_effort "none" sets it false */
    const char *prompt;       /* completion: text prompt (borrowed), or NULL */
    int32_t *prompt_tokens;   /* completion: [n_prompt_tokens] when given as ids (owned) */
    int n_prompt_tokens;
    const char *model; /* as sent, or NULL */
    int max_tokens;    /* -1 = until the context ends */
    /* Ollama's options.num_ctx: the prompt and the reply within this many
     * positions (at most the server's context, checked when the prompt is
     * tokenized); 0: the server's context. */
    int n_ctx_limit;
    srv_sampling samp;
    const char *stop[INF_MAX_STOPS]; /* borrowed from root */
    int n_stop;
    bool stream, include_usage;
    bool logprobs;
    int top_logprobs;           /* 0..INF_MAX_TOP_LOGPROBS */
    bool ignore_eos;            /* llama.cpp's extension: end-of-generation tokens are banned */
    inf_logit_bias *logit_bias; /* [n_logit_bias] owned; ids checked by srv_request_check_vocab */
    int n_logit_bias;
    /* response_format json_object / json_schema, or llama.cpp's `grammar` /
     * `json_schema`: compiled here (owned until srv_request_gen_params). */
    inf_gram *grammar;
    /* llama.cpp's speculative.n_max / n_min / p_min (flat keys), each
     * checked alone when parsed; spec_set says which were given (SRV_SPEC_*),
     * and srv_request_spec fills the rest from the engine's. None given: the
     * engine's (inf_gen_params.spec.n_max -1). */
    inf_spec_params spec;
    unsigned spec_set;
} srv_request;

enum { SRV_SPEC_N_MAX = 1, SRV_SPEC_N_MIN = 2, SRV_SPEC_P_MIN = 4 };

/* Parses and validates a request body. On success r owns its JSON (free with
 * srv_request_free); on failure returns -1 with a 400 in e and r is empty. */
/* What a request may expand into, beyond its byte size: JSON values in the
 * body (arrays, objects and their members) and chat messages. */
#define SRV_MAX_JSON_VALUES 262144
#define SRV_MAX_MESSAGES 16384
/* Fields the request leaves out take `defaults` (the model's recommended
 * sampling over llama.cpp's: inf_exec.sampling; NULL: llama.cpp's). */
/* An empty request of kind with every API's defaults: no limit, thinking on,
 * parallel tool calls allowed, the sampling of defaults (NULL: llama.cpp's).
 * The API parsers start from it. */
void srv_request_init(srv_request *r, srv_kind kind, const inf_sampler_params *defaults);
/* A `stop` value (a string or up to INF_MAX_STOPS strings, "" skipped) into
 * r->stop, borrowed from the JSON; field names it in errors. */
int srv_stop_value(srv_request *r, json_t *v, const char *field, srv_error *e);
/* A conversation's `messages`: present, a non-empty array, within
 * SRV_MAX_MESSAGES. */
int srv_check_messages(const json_t *msgs, srv_error *e);
int srv_request_parse(srv_request *r, srv_kind kind, const char *body, size_t len,
                      const inf_sampler_params *defaults, srv_error *e);

/* An upper bound on the JSON values (arrays, objects, their members) body
 * expands into, counted without parsing it (SRV_MAX_JSON_VALUES bounds it). */
size_t srv_json_values(const char *body, size_t len);

/* The chat template's keywords for a parsed chat request: its
 * chat_template_kwargs with enable_thinking set (new reference; NULL when
 * out of memory). The template renders r->messages and r->tools with them. */
json_t *srv_request_template_kwargs(const srv_request *r);

/* Checks what only the model can: logit_bias token ids below n_vocab. A 400
 * naming the field otherwise. Call after parsing, before submitting. */
int srv_request_check_vocab(const srv_request *r, int n_vocab, srv_error *e);

/* The speculative knobs of a parsed request over the engine's (engine:
 * inf_exec.spec): those the request leaves out take the engine's, except
 * that an engine's n_min above a requested n_max comes down to it (so that
 * n_max 0, plain decoding, is always allowed); a requested n_min above the
 * n_max in force is a 400 naming speculative.n_min. Sets r->spec whole when
 * the request gave any. Call after parsing, before srv_request_gen_params. */
int srv_request_spec(srv_request *r, const inf_spec_params *engine, srv_error *e);

/* Pieces every API's parser shares (param: the field's name in that API,
 * for errors).
 * srv_tools_check: tools in OpenAI chat's shape: an array of {type:
 *   "function", function: {name (a non-empty string, each once), description
 *   (a string), parameters (an object), strict (a bool)}}.
 * srv_request_apply_tools: with r->tools (chat shape, owned, may be NULL),
 *   tool_choice, tool_name and parallel_tool_calls set: "none" drops the
 *   tools; required or named without tools, or naming a function not in
 *   them, is a 400 naming param; required and named compile the forced-call
 *   grammar into r->grammar (a 400 when r already has one: response_format
 *   and a forced tool call cannot both hold).
 * srv_reasoning_effort: "none" turns thinking off (a 400 when the template
 *   kwargs turned it on explicitly); "minimal", "low", "medium", "high" and
 *   "xhigh" keep it on (Qwen3 has no budget to set; a 400 when the kwargs
 *   turned it off explicitly); anything else is a 400. */
/* tool_choice as OpenAI's word (auto, none, required) or as one named
 * function (param names the field in errors); 0, or -1 with a 400. */
int srv_tool_choice_word(srv_request *r, const char *word, srv_error *e);
int srv_tool_choice_named(srv_request *r, const char *name, const char *param, srv_error *e);
int srv_tools_check(const json_t *tools, const char *param, srv_error *e);
int srv_request_apply_tools(srv_request *r, const char *param, srv_error *e);
int srv_reasoning_effort(srv_request *r, const json_t *v, const char *param, srv_error *e);

/* Parses a request body as JSON (jansson), refusing a body with a NUL byte
 * (jansson would read only up to it). NULL with je filled on failure. */
json_t *srv_json_parse_body(const char *body, size_t len, json_error_t *je);
void srv_request_free(srv_request *r);

/* The engine's generation parameters for a parsed request (its strings stay
 * borrowed from r; its grammar moves to p, for the task to own). A chat
 * request with thinking on constrains after a <think> the model opens; the
 * caller sets INF_GRAM_AFTER_THINK when the prompt ends inside one. */
void srv_request_gen_params(srv_request *r, inf_gen_params *p);

/* Token id -> its text bytes (not necessarily whole UTF-8); for logprobs. */
typedef int (*srv_piece_fn)(void *ctx, int32_t id, char *buf, int cap);

/* llama.cpp's `timings` object; draft: with draft_n and draft_n_accepted
 * (the engine speculates). */
json_t *srv_timings_json(const inf_timings *t, bool draft);
json_t *srv_usage_json(int prompt_tokens, int completion_tokens);

/* The logprobs object of a chat choice ({"content": [...]}) or of a completion
 * choice ({"tokens", "token_logprobs", "top_logprobs", "text_offset"}). */
json_t *srv_logprobs_json(srv_kind kind, const inf_logprob *lp, int n, int text_offset,
                          srv_piece_fn piece, void *piece_ctx);

/* Valid-UTF-8 JSON string (invalid bytes become U+FFFD). */
json_t *srv_json_stringn(const char *s, size_t n);

/* Serializes and releases j (compact). */
char *srv_json_dump_free(json_t *j);

#endif
