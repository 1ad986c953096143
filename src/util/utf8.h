/* UTF-8: the one validator the tokenizer, the chat template, the streaming
 * detokenizer and the server's JSON output share, with the encoder. */
#ifndef INF_UTIL_UTF8_H
#define INF_UTIL_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* Writes code point cp (at most U+10FFFF) as 1..4 bytes at out; returns the count. */
int inf_utf8_encode(char *out, uint32_t cp);

/* The character at s[0..n) (n >= 1), strictly (no overlongs, surrogates or
 * code points past U+10FFFF):
 *   k > 0   s[0..k) is one whole valid character;
 *   0       s[0..n) is a valid start that more bytes could complete;
 *   -k < 0  s[0..k) is a maximal invalid subpart (Unicode's "best practice":
 *           one U+FFFD replaces it). */
int inf_utf8_scan(const char *s, size_t n);

/* Checks that s[0..len) is UTF-8. Returns len when valid, else the offset
 * of the first byte of the first bad (or unfinished) sequence. */
size_t inf_utf8_valid_prefix(const char *s, size_t len);

/* A byte stream cut into whole valid characters: what is pushed comes out as
 * whole characters, each invalid subpart as U+FFFD, and a valid start still
 * waiting for its last bytes is held (at most 3 bytes). */
typedef struct inf_utf8_stream {
    unsigned char tail[4];
    int n_tail;
} inf_utf8_stream;

/* Bytes that pushing n bytes may write at most. */
#define INF_UTF8_STREAM_OUT(n) (3 * ((size_t)(n) + 4) + 1)

/* Writes the released text of tail + s[0..n) to out (room for
 * INF_UTF8_STREAM_OUT(n) bytes) and returns its length (no NUL written). */
size_t inf_utf8_stream_push(inf_utf8_stream *st, const char *s, size_t n, char *out);
/* End of the stream: a held unfinished character becomes one U+FFFD (out:
 * room for 3 bytes). Returns the length. */
size_t inf_utf8_stream_flush(inf_utf8_stream *st, char *out);

/* s[0..n) with every invalid subpart replaced by U+FFFD: always valid UTF-8,
 * malloc'd and NUL-terminated; NULL when out of memory. */
char *inf_utf8_sanitize(const char *s, size_t n, size_t *out_len);

#endif
