/* UTF-8 and the byte-level map. */
#include "tokenizer/tok_internal.h"

/* GPT-2's byte-level BPE writes every byte as a printable code point so that
 * token texts never hold spaces or control characters: the printable Latin-1
 * bytes ('!'..'~', '¡'..'¬', '®'..'ÿ') stand for themselves, and the other 68
 * bytes, in increasing order, take U+0100, U+0101, ... (space -> U+0120 'Ġ',
 * newline -> U+010A 'Ċ'). */
static bool byte_is_printable(unsigned b) {
    return (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae);
}

uint32_t tok_byte_to_cp(unsigned char b) {
    if (byte_is_printable(b)) return b;
    uint32_t k = 0; /* how many non-printable bytes precede b */
    for (unsigned i = 0; i < b; i++)
        k += !byte_is_printable(i);
    return 0x100 + k;
}

int tok_cp_to_byte(uint32_t cp) {
    if (cp < 0x100) return byte_is_printable(cp) ? (int)cp : -1;
    uint32_t k = cp - 0x100;
    for (unsigned b = 0; b < 256; b++)
        if (!byte_is_printable(b) && k-- == 0) return (int)b;
    return -1;
}

int tok_utf8_next(const unsigned char *s, uint32_t *cp) {
    if (s[0] < 0x80) {
        *cp = s[0];
        return 1;
    }
    if (s[0] < 0xe0) {
        *cp = (uint32_t)(s[0] & 0x1f) << 6 | (s[1] & 0x3f);
        return 2;
    }
    if (s[0] < 0xf0) {
        *cp = (uint32_t)(s[0] & 0x0f) << 12 | (uint32_t)(s[1] & 0x3f) << 6 | (s[2] & 0x3f);
        return 3;
    }
    *cp = (uint32_t)(s[0] & 0x07) << 18 | (uint32_t)(s[1] & 0x3f) << 12 |
          (uint32_t)(s[2] & 0x3f) << 6 | (s[3] & 0x3f);
    return 4;
}

int tok_utf8_put(char *out, uint32_t cp) {
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
