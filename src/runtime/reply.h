/* The reply parser: a chat model's output text, as it is released, split
 * into ordered parts — reasoning (inside <think>...</think>), text, and tool
 * calls in Qwen3's format:
 *
 *     <tool_call>
 *     {"name": "get_weather", "arguments": {"city": "Paris"}}
 *     </tool_call>
 *
 * one or several per turn. Every API's answer (chat completions, Responses,
 * Anthropic Messages) is built from these parts, whole or streamed.
 *
 * Rules (the same whether the text arrives whole or one byte at a time):
 * - Only a <think> at the very start of the output (after whitespace) opens
 *   reasoning; `start_in_think` is for prompts that already end with one.
 *   Whitespace right after <think>, before and after </think> is layout and
 *   dropped.
 * - With tool_calls on, a <tool_call> opens a call anywhere in the text; one
 *   that opens inside <think> ends the reasoning. Whitespace before a call,
 *   between calls and after one is dropped. A call is held until its
 *   </tool_call>, then parsed: an object with a string "name" and an
 *   "arguments" object (or a string holding one) becomes a TOOL_CALL part;
 *   anything else — bad JSON, other fields' types, a call the output cuts
 *   off — comes back as TEXT, byte for byte, tags included. Nothing is
 *   dropped but layout whitespace.
 * - A partial tag at the end of the pushed text is held until it is decided.
 *
 * Pure (no I/O, no globals), so the tests drive it byte by byte. */
#ifndef INF_RUNTIME_REPLY_H
#define INF_RUNTIME_REPLY_H

#include <stdbool.h>
#include <stddef.h>

#include "runtime/text.h"

typedef enum inf_part_kind { INF_PART_TEXT, INF_PART_REASONING, INF_PART_TOOL_CALL } inf_part_kind;

typedef struct inf_part {
    inf_part_kind kind;
    char *text; /* TEXT, REASONING: the bytes (whole UTF-8 when the input was);
                   TOOL_CALL: the arguments as a compact JSON object. Owned, NUL-ended. */
    size_t n;
    char *name; /* TOOL_CALL: the function's name (owned); NULL otherwise */
} inf_part;

/* A growing list of parts; push merges a TEXT or REASONING part into the
 * last one when it is of the same kind. */
typedef struct inf_parts {
    inf_part *v;
    int n, cap;
} inf_parts;

/* Appends text of a kind (merged into the last part when it is the same
 * kind); n == 0 appends nothing. -1 when out of memory. */
int inf_parts_add_text(inf_parts *p, inf_part_kind kind, const char *s, size_t n);
/* Appends a tool call (copies name and arguments). */
int inf_parts_add_call(inf_parts *p, const char *name, const char *args, size_t n_args);
/* Appends copies of every part of src (merging as add_text does). */
int inf_parts_append(inf_parts *dst, const inf_parts *src);
/* How many TOOL_CALL parts. */
int inf_parts_calls(const inf_parts *p);
void inf_parts_clear(inf_parts *p);
void inf_parts_free(inf_parts *p);

typedef struct inf_reply_opts {
    bool think;          /* split <think>...</think> into REASONING (chat); false: all TEXT */
    bool start_in_think; /* the prompt ends inside an open <think> */
    bool tool_calls;     /* parse <tool_call>...</tool_call> (tools were offered) */
} inf_reply_opts;

typedef struct inf_reply {
    inf_reply_opts o;
    int state;
    inf_buf held; /* text not yet decided */
} inf_reply;

void inf_reply_init(inf_reply *r, const inf_reply_opts *o);
void inf_reply_free(inf_reply *r);
/* Pushes released text; appends the parts it decides to out. -1 on OOM. */
int inf_reply_push(inf_reply *r, inf_parts *out, const char *text, size_t n);
/* The output ended: releases what is held (an unclosed call as TEXT). */
int inf_reply_flush(inf_reply *r, inf_parts *out);

#endif
