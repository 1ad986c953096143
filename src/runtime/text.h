/* The text stages after the streaming detokenizer, shared by every program:
 * a growing buffer, and stop-string matching that never leaks a prefix of a
 * stop string (the reply's reasoning and tool calls: runtime/reply.h).
 *
 * Pure (no I/O, no globals) so the tests drive them byte by
 * byte. Each owns a growing "held" buffer; emitted text is appended to a
 * caller's inf_buf. */
#ifndef INF_RUNTIME_TEXT_H
#define INF_RUNTIME_TEXT_H

#include <stdbool.h>
#include <stddef.h>

/* A growing byte string, always NUL-terminated (data may be NULL while empty). */
typedef struct inf_buf {
    char *data;
    size_t len, cap;
} inf_buf;

/* Appends n bytes; returns -1 only when memory runs out. */
int inf_buf_add(inf_buf *b, const char *s, size_t n);
int inf_buf_adds(inf_buf *b, const char *s);
int inf_buf_printf(inf_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Drops the first n bytes. */
void inf_buf_consume(inf_buf *b, size_t n);
void inf_buf_clear(inf_buf *b);
void inf_buf_free(inf_buf *b);

/* Stop strings matched on decoded text across token boundaries.
 * Text is pushed as it is decoded; everything that can no longer be the start
 * of a stop string is released, the rest (a suffix that is a proper prefix of
 * some stop string) is held. When a stop string is found, the text before it
 * is released, the stop string and everything after it are dropped, and the
 * matcher reports done. */
typedef struct inf_stop {
    char **stops; /* [n_stops] owned copies, none empty */
    int n_stops;
    /* A string that ends the text right after itself and stays in it (a
     * tool call's "</tool_call>" when only one call is allowed); owned,
     * NULL for none. It competes with the stop strings by the same rule:
     * whichever completes first (on a tie, starts first; a stop string
     * before it on a full tie). */
    char *end_after;
    inf_buf held;
    bool done;
    /* What ended the text once done: the index in stops of the stop string
     * (-1 when it was not one), or end_after (after_matched). */
    int stop_index;
    bool after_matched;
} inf_stop;

/* Copies the stop strings (empty strings are ignored; a stop string's index
 * counts only the kept ones). -1 when out of memory. */
int inf_stop_init(inf_stop *s, const char *const *stops, int n_stops);
/* Sets end_after (copied; NULL or "" for none). -1 when out of memory. */
int inf_stop_set_end_after(inf_stop *s, const char *end_after);
void inf_stop_free(inf_stop *s);
/* Pushes text; appends what is safe to release to out. Returns 1 when a stop
 * string completed (nothing more must be pushed), 0 otherwise, -1 on OOM. */
int inf_stop_push(inf_stop *s, inf_buf *out, const char *text, size_t n);
/* End of generation without a stop: releases the held text. */
int inf_stop_flush(inf_stop *s, inf_buf *out);

/* The longest k < pn such that the last k bytes of h are pat's first k: how
 * much of h's end must be held while pat may still complete. */
size_t inf_suffix_prefix(const char *h, size_t hn, const char *pat, size_t pn);

#endif
