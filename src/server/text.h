/* Text stages between the detokenizer and the wire: whole-UTF-8 cutting,
 * stop-string matching that never leaks a prefix of a stop string, and the
 * Qwen3 <think>...</think> splitter that routes reasoning to its own field.
 *
 * All three are pure (no I/O, no globals) so the tests drive them byte by
 * byte. Each owns a growing "held" buffer; emitted text is appended to a
 * caller's srv_buf. */
#ifndef INF_SERVER_TEXT_H
#define INF_SERVER_TEXT_H

#include <stdbool.h>
#include <stddef.h>

/* A growing byte string, always NUL-terminated (data may be NULL while empty). */
typedef struct srv_buf {
    char *data;
    size_t len, cap;
} srv_buf;

/* Appends n bytes; returns -1 only when memory runs out. */
int srv_buf_add(srv_buf *b, const char *s, size_t n);
int srv_buf_adds(srv_buf *b, const char *s);
int srv_buf_printf(srv_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Drops the first n bytes. */
void srv_buf_consume(srv_buf *b, size_t n);
void srv_buf_clear(srv_buf *b);
void srv_buf_free(srv_buf *b);

/* Length of the longest prefix of s[0..n) that does not end inside a UTF-8
 * sequence: a trailing lead byte with fewer continuation bytes than it
 * announces is left out. Invalid bytes count as complete (they are passed on
 * and replaced later by the JSON encoder's validation). */
size_t srv_utf8_complete_len(const char *s, size_t n);

/* Replaces every invalid UTF-8 sequence in s[0..n) by U+FFFD; the result
 * (malloc'd, NUL-terminated) is always valid UTF-8. NULL when out of memory. */
char *srv_utf8_sanitize(const char *s, size_t n, size_t *out_len);

/* Stop strings matched on decoded text across token boundaries.
 * Text is pushed as it is decoded; everything that can no longer be the start
 * of a stop string is released, the rest (a suffix that is a proper prefix of
 * some stop string) is held. When a stop string is found, the text before it
 * is released, the stop string and everything after it are dropped, and the
 * matcher reports done. */
typedef struct srv_stop {
    char **stops; /* [n_stops] owned copies, none empty */
    int n_stops;
    srv_buf held;
    bool done;
} srv_stop;

/* Copies the stop strings (empty strings are ignored). -1 when out of memory. */
int srv_stop_init(srv_stop *s, const char *const *stops, int n_stops);
void srv_stop_free(srv_stop *s);
/* Pushes text; appends what is safe to release to out. Returns 1 when a stop
 * string completed (nothing more must be pushed), 0 otherwise, -1 on OOM. */
int srv_stop_push(srv_stop *s, srv_buf *out, const char *text, size_t n);
/* End of generation without a stop: releases the held text. */
int srv_stop_flush(srv_stop *s, srv_buf *out);

/* The reasoning splitter. Text inside <think>...</think> goes to `reasoning`,
 * the rest to `content`. Whitespace right after <think> and right after
 * </think>, and the whitespace right before </think>, are dropped, as the
 * model writes them for layout. A partial tag at the end of the pushed text
 * is held until it is decided. Only a <think> at the very start of the output
 * (after whitespace) opens reasoning; `start_in_think` is for prompts that
 * already end with <think>. */
typedef struct srv_think {
    int state; /* SRV_THINK_* */
    srv_buf held;
} srv_think;

void srv_think_init(srv_think *t, bool start_in_think);
void srv_think_free(srv_think *t);
int srv_think_push(srv_think *t, srv_buf *content, srv_buf *reasoning, const char *text, size_t n);
int srv_think_flush(srv_think *t, srv_buf *content, srv_buf *reasoning);

#endif
