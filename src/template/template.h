/* Chat templates: a Jinja-subset interpreter written for inferno.
 *
 * Renders a model's own chat template (the Jinja source found in GGUF
 * `tokenizer.chat_template` or tokenizer_config.json `chat_template`) the way
 * Hugging Face transformers does: trim_blocks and lstrip_blocks on, one
 * trailing newline of the source dropped, `tojson` as json.dumps with
 * ensure_ascii=False (keys in insertion order, ", " and ": " separators),
 * break/continue, raise_exception(msg) and strftime_now(fmt) as globals.
 * Undefined names behave like Jinja2's default Undefined: they print as "",
 * are false, iterate as empty, and `is defined` is false; taking an attribute
 * of one is an error, as in Jinja2.
 *
 * Supported: if/elif/else, for (loop.*, for-else, `for x in y if c`, tuple
 * targets, break/continue), set (names, `ns.attr`, block set), macro, raw,
 * filter blocks, comments, whitespace control; expressions with Python
 * operators, literals, slices, filters, tests, string/dict methods.
 *
 * A hostile template cannot hang or exhaust memory: loop iterations, total
 * evaluation steps, call and nesting depth, output size and memory are all
 * bounded (inf_tmpl_limits). Errors name the line and column in the source. */
#ifndef INF_TEMPLATE_TEMPLATE_H
#define INF_TEMPLATE_TEMPLATE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "util/err.h"

typedef struct inf_tmpl_limits {
    long max_iterations; /* loop iterations over the whole render (default 1e6) */
    long max_steps;      /* expression evaluations + bytes scanned / 64 (default 1e8) */
    int max_depth;       /* macro call depth and syntax nesting depth (default 64) */
    size_t max_output;   /* bytes of rendered text, also the longest string (default 16 MiB) */
    size_t max_memory;   /* bytes the interpreter may allocate (default 256 MiB) */
} inf_tmpl_limits;

/* The defaults used when a NULL limits pointer is passed. */
inf_tmpl_limits inf_tmpl_default_limits(void);

typedef struct inf_tmpl inf_tmpl; /* a parsed template */

/* Parses `source` (NUL-terminated UTF-8). On success *out owns the parsed
 * template (free with inf_tmpl_free). On a syntax error returns -1 with
 * "template:LINE:COL: message". */
int inf_tmpl_parse(inf_tmpl **out, const char *source, const inf_tmpl_limits *limits, inf_err *err);
void inf_tmpl_free(inf_tmpl *t);

/* Renders a parsed template with the variables of `context` (a JSON object;
 * NULL means no variables). *out receives a malloc'd NUL-terminated string
 * the caller frees, *out_len its length (out_len may be NULL). On a runtime
 * error (raise_exception, type error, a limit) returns -1, *out = NULL, and
 * err holds "template:LINE:COL: message". The template is not modified and
 * may be rendered by several threads at once. */
int inf_tmpl_exec(const inf_tmpl *t, char **out, size_t *out_len, const json_t *context,
                  inf_err *err);

/* Parse + exec + free in one call. */
int inf_tmpl_render(char **out, size_t *out_len, const char *source, const json_t *context,
                    const inf_tmpl_limits *limits, inf_err *err);

/* The common chat case, with the variables transformers' apply_chat_template
 * passes: messages (a JSON array of {role, content, reasoning_content,
 * tool_calls, tool_call_id, ...}), tools (a JSON array; NULL gives None, as
 * in transformers), documents (None), add_generation_prompt, and every key of
 * extra_kwargs (a JSON object or NULL: enable_thinking, bos_token, eos_token,
 * ...), which wins over the others. Leave enable_thinking out of extra_kwargs
 * to leave it undefined. *out is malloc'd, caller frees. Default limits. */
int inf_chat_render(char **out, const char *source, const json_t *messages, const json_t *tools,
                    bool add_generation_prompt, const json_t *extra_kwargs, inf_err *err);

#endif
