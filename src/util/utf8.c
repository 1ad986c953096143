#include "util/utf8.h"

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

size_t inf_utf8_valid_prefix(const char *str, size_t len) {
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0;
    while (i < len) {
        unsigned char c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        /* Length, and the allowed range of the second byte, which is what
         * rules out overlongs (C0, C1, E0 80..9F, F0 80..8F), surrogates
         * (ED A0..BF) and code points past U+10FFFF (F4 90.., F5..FF). */
        int n;
        unsigned char lo = 0x80, hi = 0xbf;
        if (c >= 0xc2 && c <= 0xdf)
            n = 2;
        else if (c >= 0xe0 && c <= 0xef) {
            n = 3;
            if (c == 0xe0) lo = 0xa0;
            if (c == 0xed) hi = 0x9f;
        } else if (c >= 0xf0 && c <= 0xf4) {
            n = 4;
            if (c == 0xf0) lo = 0x90;
            if (c == 0xf4) hi = 0x8f;
        } else
            return i;
        if (len - i < (size_t)n || s[i + 1] < lo || s[i + 1] > hi) return i;
        for (int k = 2; k < n; k++)
            if ((s[i + k] & 0xc0) != 0x80) return i;
        i += (size_t)n;
    }
    return len;
}
