/* The streaming detokenizer: complete UTF-8 characters only. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"

struct inf_detok {
    const inf_tokenizer *tok;
    unsigned char tail[4]; /* the start of a character still waiting for bytes */
    int n_tail;
    char *out; /* [cap]: the text returned by the last call */
    size_t cap;
};

inf_detok *inf_detok_create(const inf_tokenizer *t) {
    inf_detok *d = calloc(1, sizeof *d);
    if (!d) return NULL;
    d->tok = t;
    /* Worst case per push: the held tail and every byte of the token turn
     * into U+FFFD (3 bytes each). */
    d->cap = (inf_tok_max_token_bytes(t) + 4) * 3 + 1;
    if (!(d->out = malloc(d->cap))) {
        free(d);
        return NULL;
    }
    return d;
}

void inf_detok_free(inf_detok *d) {
    if (!d) return;
    free(d->out);
    free(d);
}

/* How many bytes the character starting at s[0] has, and whether the bytes
 * present (n of them) can still be its start: 0 when s[0..n) can never be
 * the beginning of a valid character. Sets *valid_prefix to how many of the
 * bytes form a valid incomplete start (the maximal subpart). */
static int char_status(const unsigned char *s, size_t n, size_t *valid_prefix) {
    unsigned char c = s[0];
    int need;
    unsigned char lo = 0x80, hi = 0xbf;
    if (c < 0x80)
        need = 1;
    else if (c >= 0xc2 && c <= 0xdf)
        need = 2;
    else if (c >= 0xe0 && c <= 0xef) {
        need = 3;
        if (c == 0xe0) lo = 0xa0;
        if (c == 0xed) hi = 0x9f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        need = 4;
        if (c == 0xf0) lo = 0x90;
        if (c == 0xf4) hi = 0x8f;
    } else {
        *valid_prefix = 0;
        return 0;
    }
    size_t k = 1;
    for (; k < (size_t)need && k < n; k++) {
        unsigned char b = s[k];
        if (k == 1 ? (b < lo || b > hi) : (b & 0xc0) != 0x80) break;
    }
    *valid_prefix = k;
    if (k < (size_t)need && k < n) return 0; /* broken by a bad byte */
    return need;
}

static size_t put_fffd(char *o) {
    memcpy(o, "\xef\xbf\xbd", 3);
    return 3;
}

/* Moves every complete or hopeless character of buf[0..n) to d->out from
 * offset *k; keeps an incomplete but still valid tail in d->tail. */
static void drain(inf_detok *d, const unsigned char *buf, size_t n, size_t *k) {
    size_t i = 0;
    d->n_tail = 0;
    while (i < n) {
        size_t valid;
        int need = char_status(buf + i, n - i, &valid);
        if (need == 0) { /* a maximal invalid subpart (at least one byte) */
            *k += put_fffd(d->out + *k);
            i += valid ? valid : 1;
        } else if ((size_t)need > n - i) { /* valid so far: wait for the rest */
            memcpy(d->tail, buf + i, n - i);
            d->n_tail = (int)(n - i);
            return;
        } else {
            memcpy(d->out + *k, buf + i, (size_t)need);
            *k += (size_t)need;
            i += (size_t)need;
        }
    }
}

const char *inf_detok_push(inf_detok *d, int32_t id, size_t *len) {
    size_t n = 0, k = 0;
    const char *b = inf_tok_token_bytes(d->tok, id, &n);
    if (!b) n = 0;
    if (d->n_tail == 0) {
        drain(d, (const unsigned char *)b, n, &k);
    } else {
        /* Join the held tail with the new bytes; the tail is at most 3 bytes. */
        unsigned char small[64];
        unsigned char *joined = n + 4 <= sizeof small ? small : malloc(n + 4);
        if (!joined) { /* out of memory: give up the tail rather than lose the token */
            k += put_fffd(d->out);
            drain(d, (const unsigned char *)b, n, &k);
        } else {
            memcpy(joined, d->tail, (size_t)d->n_tail);
            if (n) memcpy(joined + d->n_tail, b, n);
            drain(d, joined, n + (size_t)d->n_tail, &k);
            if (joined != small) free(joined);
        }
    }
    d->out[k] = 0;
    *len = k;
    return d->out;
}

const char *inf_detok_flush(inf_detok *d, size_t *len) {
    size_t k = 0;
    if (d->n_tail) k = put_fffd(d->out);
    d->n_tail = 0;
    d->out[k] = 0;
    *len = k;
    return d->out;
}
