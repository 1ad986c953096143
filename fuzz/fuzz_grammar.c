/* libFuzzer target for the grammar compilers and the matcher: the first byte
 * chooses GBNF ('g' or anything else), JSON Schema ('j') or tools for a
 * forced tool call ('t', a JSON array); the rest is the source. A grammar
 * that compiles is then driven over a small vocabulary: masks and accepted
 * tokens for a few steps, each mask checked against the per-token check and
 * each token against a second matcher fed the same bytes one by one (no
 * memoized transitions). Any crash, hang or leak is a bug; errors are
 * expected.
 *
 *   make fuzz && build-fuzz/fuzz/fuzz_grammar -max_len=4096 -timeout=5 \
 *       fuzz/corpus-grammar fuzz/corpus/grammar */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar.h"

static const char *const TOKS[] = {"a", "b", "{",      "}",    "\"",   ":",        ",",
                                   "1", "0", "-",      " ",    "\n",   "true",     "null",
                                   "[", "]", "\"a\":", "\xC3", "\xA9", "\xE2\x82", "\xAC",
                                   ".", "e", "x",      "(",    ")",    "<end>"};
#define N_TOKS ((int)(sizeof TOKS / sizeof TOKS[0]))

static int piece(void *ud, int32_t id, char *buf, int cap) {
    int n = (int)strlen(TOKS[id]);
    memcpy(buf, TOKS[id], (size_t)n);
    return n;
}
static inf_gram_tok_kind kind(void *ud, int32_t id) {
    return id == N_TOKS - 1 ? INF_GRAM_TOK_EOG : INF_GRAM_TOK_TEXT;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static inf_gram_vocab *v;
    inf_err err;
    if (!v && inf_gram_vocab_create(&v, N_TOKS, piece, kind, NULL, &err)) abort();
    if (size < 1) return 0;
    inf_gram *g = NULL;
    const char *src = (const char *)data + 1;
    if (data[0] == 'j' || data[0] == 't') {
        json_t *schema = json_loadb(src, size - 1, JSON_DECODE_ANY, NULL);
        if (!schema) return 0;
        if (data[0] == 'j')
            inf_gram_from_json_schema(&g, schema, &err);
        else
            inf_gram_tool_calls(&g, schema, NULL, size & 1, &err);
        json_decref(schema);
    } else {
        inf_gram_compile(&g, src, size - 1, NULL, &err);
    }
    if (!g) return 0;
    inf_gram_matcher *m, *ref;
    if (!inf_gram_matcher_create(&m, g, v, &err)) {
        if (inf_gram_matcher_create(&ref, g, v, &err)) abort(); /* m was made: ref can be */
        /* Take the first allowed token, then the next, for a few steps. */
        for (int step = 0; step < 16; step++) {
            int n;
            const uint32_t *bits = inf_gram_matcher_mask(m, &n);
            if (!bits || !n) break;
            int pick = -1;
            for (int t = (step * 7) % N_TOKS, k = 0; k < N_TOKS; k++, t = (t + 1) % N_TOKS)
                if (bits[t >> 5] >> (t & 31) & 1) {
                    pick = t;
                    break;
                }
            if (pick < 0 || inf_gram_matcher_allows(m, pick) != 1) abort(); /* mask != check */
            if (inf_gram_matcher_accept(m, pick)) break;
            if (pick == N_TOKS - 1) break;
            /* the same bytes, one by one, must be taken and end the same */
            if (inf_gram_matcher_accept_bytes(ref, TOKS[pick], strlen(TOKS[pick]))) abort();
            if (inf_gram_matcher_can_end(ref) != inf_gram_matcher_can_end(m)) abort();
        }
        inf_gram_matcher_free(m);
        inf_gram_matcher_free(ref);
    }
    inf_gram_free(g);
    return 0;
}
