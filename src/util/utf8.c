#include "util/utf8.h"

#include <stdlib.h>
#include <string.h>

int inf_utf8_encode(char *out, uint32_t cp) {
    unsigned char *o = (unsigned char *)out;
    if (cp < 0x80) {
        o[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (unsigned char)(0xc0 | cp >> 6);
        o[1] = (unsigned char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xe0 | cp >> 12);
        o[1] = (unsigned char)(0x80 | (cp >> 6 & 0x3f));
        o[2] = (unsigned char)(0x80 | (cp & 0x3f));
        return 3;
    }
    o[0] = (unsigned char)(0xf0 | cp >> 18);
    o[1] = (unsigned char)(0x80 | (cp >> 12 & 0x3f));
    o[2] = (unsigned char)(0x80 | (cp >> 6 & 0x3f));
    o[3] = (unsigned char)(0x80 | (cp & 0x3f));
    return 4;
}

int inf_utf8_scan(const char *str, size_t n) {
    const unsigned char *s = (const unsigned char *)str;
    unsigned char c = s[0];
    if (c < 0x80) return 1;
    /* Length, and the allowed range of the second byte, which is what rules
     * out overlongs (C0, C1, E0 80..9F, F0 80..8F), surrogates (ED A0..BF)
     * and code points past U+10FFFF (F4 90.., F5..FF). */
    int need;
    unsigned char lo = 0x80, hi = 0xbf;
    if (c >= 0xc2 && c <= 0xdf)
        need = 2;
    else if (c >= 0xe0 && c <= 0xef) {
        need = 3;
        if (c == 0xe0) lo = 0xa0;
        if (c == 0xed) hi = 0x9f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        need = 4;
        if (c == 0xf0) lo = 0x90;
        if (c == 0xf4) hi = 0x8f;
    } else
        return -1;
    size_t k = 1;
    for (; k < (size_t)need && k < n; k++) {
        unsigned char b = s[k];
        if (k == 1 ? (b < lo || b > hi) : (b & 0xc0) != 0x80) return -(int)k;
    }
    return k == (size_t)need ? need : 0;
}

size_t inf_utf8_valid_prefix(const char *s, size_t len) {
    size_t i = 0;
    while (i < len) {
        int k = inf_utf8_scan(s + i, len - i);
        if (k <= 0) return i;
        i += (size_t)k;
    }
    return len;
}

static size_t put_fffd(char *o) {
    memcpy(o, "\xef\xbf\xbd", 3);
    return 3;
}

/* Moves every whole or invalid character of buf[0..n) to out; keeps a valid
 * unfinished tail in st. */
static size_t drain(inf_utf8_stream *st, const char *buf, size_t n, char *out) {
    size_t i = 0, k = 0;
    st->n_tail = 0;
    while (i < n) {
        int c = inf_utf8_scan(buf + i, n - i);
        if (c < 0) {
            k += put_fffd(out + k);
            i += (size_t)-c;
        } else if (c == 0) {
            memcpy(st->tail, buf + i, n - i);
            st->n_tail = (int)(n - i);
            break;
        } else {
            memcpy(out + k, buf + i, (size_t)c);
            k += (size_t)c;
            i += (size_t)c;
        }
    }
    return k;
}

size_t inf_utf8_stream_push(inf_utf8_stream *st, const char *s, size_t n, char *out) {
    if (st->n_tail == 0) return drain(st, s, n, out);
    /* The held tail (at most 3 bytes) joined with the first new bytes decides
     * the first character; the rest drains from s itself. */
    char head[8];
    size_t t = (size_t)st->n_tail, take = n < 4 ? n : 4;
    memcpy(head, st->tail, t);
    if (take) memcpy(head + t, s, take);
    int c = inf_utf8_scan(head, t + take);
    size_t k, used; /* bytes of s consumed by the first character */
    if (c == 0) {   /* still unfinished: all of s joins the tail */
        memcpy(st->tail + t, s, n);
        st->n_tail = (int)(t + n);
        return 0;
    }
    /* The tail is a valid start, so an invalid part ends at or after it. */
    if (c < 0) {
        k = put_fffd(out);
        used = (size_t)-c - t;
    } else {
        memcpy(out, head, (size_t)c);
        k = (size_t)c;
        used = (size_t)c - t;
    }
    st->n_tail = 0;
    return k + drain(st, s + used, n - used, out + k);
}

size_t inf_utf8_stream_flush(inf_utf8_stream *st, char *out) {
    size_t k = st->n_tail ? put_fffd(out) : 0;
    st->n_tail = 0;
    return k;
}

char *inf_utf8_sanitize(const char *s, size_t n, size_t *out_len) {
    char *out = malloc(INF_UTF8_STREAM_OUT(n));
    if (!out) return NULL;
    inf_utf8_stream st = {{0}, 0};
    size_t k = inf_utf8_stream_push(&st, s, n, out);
    k += inf_utf8_stream_flush(&st, out + k);
    out[k] = 0;
    if (out_len) *out_len = k;
    return out;
}
