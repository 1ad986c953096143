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

/* The 68 others: 0x00..0x20 (33), 0x7f..0xa0 (34) and 0xad, in that order
 * (a closed form: the tokenizer maps every character of ~150k token texts at
 * load, and a count over the bytes per character was a visible share of it). */
uint32_t tok_byte_to_cp(unsigned char b) {
    if (byte_is_printable(b)) return b;
    if (b <= 0x20) return 0x100 + (uint32_t)b;
    if (b <= 0xa0) return 0x100 + 33 + (uint32_t)(b - 0x7f);
    return 0x100 + 67; /* 0xad */
}

int tok_cp_to_byte(uint32_t cp) {
    if (cp < 0x100) return byte_is_printable(cp) ? (int)cp : -1;
    const uint32_t k = cp - 0x100;
    if (k < 33) return (int)k;
    if (k < 67) return (int)(0x7f + k - 33);
    return k == 67 ? 0xad : -1;
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
