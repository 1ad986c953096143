/* UTF-8 encoding and strict validation, shared by the tokenizer, the chat
 * template and the server. */
#ifndef INF_UTIL_UTF8_H
#define INF_UTIL_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* Writes code point cp (at most U+10FFFF) as 1..4 bytes at out; returns the count. */
int inf_utf8_encode(char *out, uint32_t cp);

/* Checks that s[0..len) is UTF-8 (no overlongs, surrogates or code points
 * past U+10FFFF). Returns len when valid, else the offset of the first byte
 * of the first bad sequence. */
size_t inf_utf8_valid_prefix(const char *s, size_t len);

#endif
