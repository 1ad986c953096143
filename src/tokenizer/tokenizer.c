/* Tokenizer construction, encoding and decoding. See tokenizer.h. */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>
#include <xxhash.h>

#include "tokenizer/pretok.h"
#include "tokenizer/tok_internal.h"

/* ---- construction ---- */

static uint32_t pow2_at_least(size_t n) {
    uint32_t c = 16;
    while (c < n)
        c <<= 1;
    return c;
}

static uint32_t text_hash(const char *s, size_t n) {
    return (uint32_t)XXH3_64bits(s, n);
}

static int32_t text_find(const inf_tokenizer *t, const char *s, size_t n) {
    for (uint32_t i = text_hash(s, n) & t->text_mask;; i = (i + 1) & t->text_mask) {
        int32_t id = t->text_map[i];
        if (id < 0) return -1;
        if (!strncmp(t->text[id], s, n) && t->text[id][n] == 0) return id;
    }
}

/* Raw bytes of a token: byte-level text is mapped back to bytes; added and
 * unused tokens are their own text. A code point with no byte behind it (not
 * byte-level text; a broken file) is kept as its UTF-8 rather than refused. */
static size_t token_raw(char *out, const char *text, int type) {
    size_t n = strlen(text);
    if (type == INF_TOKEN_CONTROL || type == INF_TOKEN_USER_DEFINED || type == INF_TOKEN_UNUSED) {
        memcpy(out, text, n);
        return n;
    }
    size_t k = 0;
    const unsigned char *s = (const unsigned char *)text;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        int l = tok_utf8_next(s + i, &cp);
        int b = tok_cp_to_byte(cp);
        if (b >= 0)
            out[k++] = (char)b;
        else {
            memcpy(out + k, s + i, (size_t)l);
            k += (size_t)l;
        }
        i += (size_t)l;
    }
    return k;
}

static int cmp_added(const void *pa, const void *pb, void *ctx) {
    const inf_tokenizer *t = ctx;
    int32_t a = *(const int32_t *)pa, b = *(const int32_t *)pb;
    unsigned char fa = (unsigned char)t->bytes_buf[t->bytes_off[a]];
    unsigned char fb = (unsigned char)t->bytes_buf[t->bytes_off[b]];
    if (fa != fb) return fa < fb ? -1 : 1;
    uint32_t la = t->bytes_off[a + 1] - t->bytes_off[a], lb = t->bytes_off[b + 1] - t->bytes_off[b];
    if (la != lb) return la > lb ? -1 : 1; /* longest first */
    return a < b ? -1 : a > b;
}

static int build_tables(inf_tokenizer *t, const inf_vocab_desc *v, inf_err *err) {
    int n = t->n_vocab;
    t->text = calloc((size_t)n, sizeof *t->text);
    t->type = malloc((size_t)n * sizeof *t->type);
    t->bytes_off = malloc(((size_t)n + 1) * sizeof *t->bytes_off);
    if (!t->text || !t->type || !t->bytes_off) return inf_fail(err, "tokenizer: out of memory");
    size_t total = 0;
    for (int i = 0; i < n; i++) {
        if (!v->tokens[i]) return inf_fail(err, "tokenizer: token %d has no text", i);
        size_t l = strlen(v->tokens[i]);
        if (l == 0) return inf_fail(err, "tokenizer: token %d is empty", i);
        if (inf_utf8_valid_prefix(v->tokens[i], l) != l)
            return inf_fail(err, "tokenizer: token %d is not valid UTF-8", i);
        if (!(t->text[i] = malloc(l + 1))) return inf_fail(err, "tokenizer: out of memory");
        memcpy(t->text[i], v->tokens[i], l + 1);
        t->type[i] = v->token_type ? v->token_type[i] : INF_TOKEN_NORMAL;
        total += l + 1;
    }
    if (total > UINT32_MAX) return inf_fail(err, "tokenizer: vocabulary text too large");
    /* Raw bytes are never longer than the text they come from. Each token's
     * bytes are followed by a NUL: the length is bytes_off[i+1]-bytes_off[i]-1. */
    if (!(t->bytes_buf = malloc(total + 1))) return inf_fail(err, "tokenizer: out of memory");
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        t->bytes_off[i] = (uint32_t)off;
        size_t l = token_raw(t->bytes_buf + off, t->text[i], t->type[i]);
        if (l > t->max_bytes) t->max_bytes = l;
        off += l;
        t->bytes_buf[off++] = 0;
    }
    t->bytes_off[n] = (uint32_t)off;

    uint32_t cap = pow2_at_least((size_t)n * 2);
    t->text_mask = cap - 1;
    if (!(t->text_map = malloc(cap * sizeof *t->text_map)))
        return inf_fail(err, "tokenizer: out of memory");
    memset(t->text_map, 0xff, cap * sizeof *t->text_map);
    for (int i = 0; i < n; i++) {
        size_t l = strlen(t->text[i]);
        uint32_t j = text_hash(t->text[i], l) & t->text_mask;
        bool dup = false;
        for (; t->text_map[j] >= 0; j = (j + 1) & t->text_mask)
            if (!strcmp(t->text[t->text_map[j]], t->text[i])) dup = true;
        if (!dup) t->text_map[j] = i; /* the first of duplicate texts wins */
    }
    return 0;
}

static uint32_t token_len(const inf_tokenizer *t, int32_t id) {
    return t->bytes_off[id + 1] - t->bytes_off[id] - 1;
}

static int build_bpe(inf_tokenizer *t, const inf_vocab_desc *v, inf_err *err) {
    for (int b = 0; b < 256; b++) {
        char s[4];
        int l = inf_utf8_encode(s, tok_byte_to_cp((unsigned char)b));
        if ((t->byte_id[b] = text_find(t, s, (size_t)l)) < 0)
            return inf_fail(err,
                            "tokenizer: no token for byte 0x%02x (\"%.*s\"); not a byte-level "
                            "BPE vocabulary",
                            b, l, s);
    }
    uint32_t cap = pow2_at_least((size_t)v->n_merges * 2);
    t->pair_mask = cap - 1;
    if (!(t->pairs = malloc(cap * sizeof *t->pairs)))
        return inf_fail(err, "tokenizer: out of memory");
    for (uint32_t i = 0; i < cap; i++)
        t->pairs[i].key = TOK_PAIR_EMPTY;
    char joined[1024];
    for (int r = 0; r < v->n_merges; r++) {
        const char *m = v->merges[r], *sp = m ? strchr(m, ' ') : NULL;
        if (!sp || sp == m || !sp[1] || strchr(sp + 1, ' '))
            return inf_fail(err, "tokenizer: merge %d \"%s\": expected \"left right\"", r,
                            m ? m : "(null)");
        size_t la = (size_t)(sp - m), lb = strlen(sp + 1);
        if (la + lb >= sizeof joined) return inf_fail(err, "tokenizer: merge %d is too long", r);
        int32_t left = text_find(t, m, la), right = text_find(t, sp + 1, lb);
        memcpy(joined, m, la);
        memcpy(joined + la, sp + 1, lb);
        int32_t merged = text_find(t, joined, la + lb);
        if (left < 0 || right < 0 || merged < 0)
            return inf_fail(err, "tokenizer: merge %d \"%s\" names a token not in the vocabulary",
                            r, m);
        uint64_t key = (uint64_t)(uint32_t)left << 32 | (uint32_t)right;
        uint32_t j = tok_pair_hash(key) & t->pair_mask;
        while (t->pairs[j].key != TOK_PAIR_EMPTY && t->pairs[j].key != key)
            j = (j + 1) & t->pair_mask;
        if (t->pairs[j].key == key) continue; /* a repeated merge keeps its first rank */
        t->pairs[j] = (tok_pair){key, r, merged};
    }
    return 0;
}

static int build_added(inf_tokenizer *t, inf_err *err) {
    t->added = malloc((size_t)t->n_vocab * sizeof *t->added);
    if (!t->added) return inf_fail(err, "tokenizer: out of memory");
    for (int i = 0; i < t->n_vocab; i++)
        if (t->type[i] == INF_TOKEN_CONTROL || t->type[i] == INF_TOKEN_USER_DEFINED)
            t->added[t->n_added++] = i;
    qsort_r(t->added, (size_t)t->n_added, sizeof *t->added, cmp_added, t);
    int k = 0;
    for (int b = 0; b <= 256; b++) {
        while (k < t->n_added && (unsigned char)t->bytes_buf[t->bytes_off[t->added[k]]] < b)
            k++;
        t->by_byte[b] = (uint32_t)(b == 256 ? t->n_added : k);
    }
    return 0;
}

static int build_regex(inf_tokenizer *t, const inf_vocab_desc *v, inf_err *err) {
    const char *pattern = v->pretok_regex;
    t->nfc = v->nfc;
    if (!pattern) {
        const tok_pre_info *pre = tok_pre_by_name(v->pre);
        if (!pre)
            return inf_fail(
                err, "tokenizer: pre-tokenizer \"%s\" is unknown (known: qwen2, qwen35, gpt2)",
                v->pre ? v->pre : "(none)");
        pattern = pre->regex;
        t->nfc = t->nfc || pre->nfc;
    }
    int code;
    PCRE2_SIZE at;
    t->re = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &code,
                          &at, NULL);
    if (!t->re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(code, msg, sizeof msg);
        return inf_fail(err, "tokenizer: pre-tokenizer regex at offset %zu: %s", (size_t)at,
                        (char *)msg);
    }
    /* Without JIT (an unsupported CPU) the interpreter gives the same matches. */
    (void)pcre2_jit_compile(t->re, PCRE2_JIT_COMPLETE);
    return 0;
}

static int check_id(const inf_tokenizer *t, int id, const char *what, inf_err *err) {
    if (id < -1 || id >= t->n_vocab)
        return inf_fail(err, "tokenizer: %s %d is outside the vocabulary (%d tokens)", what, id,
                        t->n_vocab);
    return 0;
}

int inf_tok_create(inf_tokenizer **out, const inf_vocab_desc *v, inf_err *err) {
    *out = NULL;
    if (!v->model || strcmp(v->model, "gpt2"))
        return inf_fail(err, "tokenizer: model \"%s\" is not supported (only gpt2 byte-level BPE)",
                        v->model ? v->model : "(none)");
    if (v->n_tokens < 256 || !v->tokens)
        return inf_fail(err, "tokenizer: %d tokens; a byte-level vocabulary has at least 256",
                        v->n_tokens);
    if (v->n_merges < 0 || (v->n_merges > 0 && !v->merges))
        return inf_fail(err, "tokenizer: merges missing");
    inf_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return inf_fail(err, "tokenizer: out of memory");
    t->n_vocab = v->n_tokens;
    if (build_tables(t, v, err) || build_bpe(t, v, err) || build_added(t, err) ||
        build_regex(t, v, err) || check_id(t, v->bos_id, "bos_id", err) ||
        check_id(t, v->eos_id, "eos_id", err) || check_id(t, v->eot_id, "eot_id", err)) {
        inf_tok_free(t);
        return -1;
    }
    t->bos = v->bos_id;
    t->eos = v->eos_id;
    t->eot = v->eot_id;
    t->add_bos = v->add_bos && v->bos_id >= 0;
    t->add_eos = v->add_eos ? v->add_eos_id : -1;
    int32_t eog[4] = {t->eos, t->eot, inf_tok_find(t, "<|endoftext|>"),
                      inf_tok_find(t, "<|im_end|>")};
    memcpy(t->eog, eog, sizeof eog);

    tok_cache *c = &t->cache;
    c->slots = calloc(TOK_CACHE_SLOTS, sizeof *c->slots);
    c->words = malloc(TOK_CACHE_WORD_BYTES);
    c->id_pool = malloc(TOK_CACHE_IDS * sizeof *c->id_pool);
    if (!c->slots || !c->words || !c->id_pool || pthread_mutex_init(&c->mu, NULL)) {
        free(c->slots);
        c->slots = NULL; /* marks the mutex as not initialized */
        inf_tok_free(t);
        return inf_fail(err, "tokenizer: out of memory");
    }
    *out = t;
    return 0;
}

void inf_tok_free(inf_tokenizer *t) {
    if (!t) return;
    for (int i = 0; t->text && i < t->n_vocab; i++)
        free(t->text[i]);
    free(t->text);
    free(t->type);
    free(t->bytes_off);
    free(t->bytes_buf);
    free(t->text_map);
    free(t->pairs);
    free(t->added);
    pcre2_code_free(t->re);
    if (t->cache.slots) pthread_mutex_destroy(&t->cache.mu);
    free(t->cache.slots);
    free(t->cache.words);
    free(t->cache.id_pool);
    free(t);
}

/* ---- encoding ---- */

static bool cache_get(const inf_tokenizer *t, uint64_t h, const unsigned char *w, size_t n,
                      tok_ids *out, int *rc) {
    tok_cache *c = (tok_cache *)&t->cache; /* the cache is the one mutable part */
    bool hit = false;
    pthread_mutex_lock(&c->mu);
    for (uint32_t i = (uint32_t)h & (TOK_CACHE_SLOTS - 1);; i = (i + 1) & (TOK_CACHE_SLOTS - 1)) {
        struct tok_cache_slot *s = &c->slots[i];
        if (!s->hash) break;
        if (s->hash == h && s->n_word == n && !memcmp(c->words + s->word, w, n)) {
            *rc = tok_ids_push(out, c->id_pool + s->ids, s->n_ids);
            hit = true;
            break;
        }
    }
    pthread_mutex_unlock(&c->mu);
    return hit;
}

static void cache_put(const inf_tokenizer *t, uint64_t h, const unsigned char *w, size_t n,
                      const int32_t *ids, size_t n_ids) {
    tok_cache *c = (tok_cache *)&t->cache;
    if (n_ids > UINT16_MAX) return;
    pthread_mutex_lock(&c->mu);
    if (c->n_used >= TOK_CACHE_SLOTS / 2 || c->words_used + n > TOK_CACHE_WORD_BYTES ||
        c->ids_used + n_ids > TOK_CACHE_IDS) {
        /* Full: start over. Simple, and a steady text refills it quickly. */
        memset(c->slots, 0, TOK_CACHE_SLOTS * sizeof *c->slots);
        c->n_used = c->words_used = c->ids_used = 0;
    }
    uint32_t i = (uint32_t)h & (TOK_CACHE_SLOTS - 1);
    while (c->slots[i].hash) {
        if (c->slots[i].hash == h && c->slots[i].n_word == n &&
            !memcmp(c->words + c->slots[i].word, w, n))
            goto done; /* another thread got here first */
        i = (i + 1) & (TOK_CACHE_SLOTS - 1);
    }
    c->slots[i] =
        (struct tok_cache_slot){h, c->words_used, c->ids_used, (uint16_t)n, (uint16_t)n_ids};
    memcpy(c->words + c->words_used, w, n);
    memcpy(c->id_pool + c->ids_used, ids, n_ids * sizeof *ids);
    c->words_used += (uint32_t)n;
    c->ids_used += (uint32_t)n_ids;
    c->n_used++;
done:
    pthread_mutex_unlock(&c->mu);
}

static int encode_word(const inf_tokenizer *t, const unsigned char *w, size_t n, tok_ids *out) {
    if (n > TOK_CACHE_MAX_WORD || n == 1) return tok_bpe_word(t, w, n, out);
    uint64_t h = XXH3_64bits(w, n) | 1;
    int rc = 0;
    if (cache_get(t, h, w, n, out, &rc)) return rc;
    size_t before = out->n;
    if (tok_bpe_word(t, w, n, out)) return -1;
    cache_put(t, h, w, n, out->v + before, out->n - before);
    return 0;
}

/* One walk over a text: its pieces in order go to fn (see inf_tok_pretokenize).
 * The match data and the JIT stack are made once per walk. */
typedef struct tok_walk {
    const inf_tokenizer *t;
    pcre2_match_data *md;
    pcre2_match_context *mctx;
    pcre2_jit_stack *jstack;
    inf_tok_piece_fn fn;
    void *ctx;
} tok_walk;

/* Normalizes and splits one stretch of text between added tokens. */
static int split_plain(tok_walk *w, const char *text, size_t len, inf_err *err) {
    const inf_tokenizer *t = w->t;
    utf8proc_uint8_t *norm = NULL;
    if (t->nfc) {
        /* Code points below U+0300 are NFC already and compose with nothing
         * before them; their lead bytes are all below 0xCC. */
        bool plain = true;
        for (size_t i = 0; i < len && plain; i++)
            plain = (unsigned char)text[i] < 0xcc;
        if (!plain) {
            utf8proc_ssize_t n = utf8proc_map((const utf8proc_uint8_t *)text, (utf8proc_ssize_t)len,
                                              &norm, UTF8PROC_STABLE | UTF8PROC_COMPOSE);
            if (n < 0) return inf_fail(err, "tokenize: NFC: %s", utf8proc_errmsg(n));
            text = (const char *)norm;
            len = (size_t)n;
        }
    }
    int rc = 0;
    const unsigned char *s = (const unsigned char *)text;
    size_t pos = 0, emitted = 0;
    while (pos < len) {
        int m = pcre2_match(t->re, s, len, pos, PCRE2_NO_UTF_CHECK, w->md, w->mctx);
        if (m == PCRE2_ERROR_JIT_STACKLIMIT && !w->jstack) {
            /* A long run (e.g. of spaces before a lookahead) outgrew the
             * default 32 KiB JIT stack: retry with a large one. */
            w->jstack = pcre2_jit_stack_create(64 * 1024, 64 * 1024 * 1024, NULL);
            w->mctx = pcre2_match_context_create(NULL);
            if (!w->jstack || !w->mctx) {
                rc = inf_fail(err, "tokenize: out of memory");
                break;
            }
            pcre2_jit_stack_assign(w->mctx, NULL, w->jstack);
            continue;
        }
        if (m == PCRE2_ERROR_NOMATCH) break;
        if (m < 0) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(m, msg, sizeof msg);
            rc = inf_fail(err, "tokenize: pre-tokenizer regex failed at byte %zu: %s", pos,
                          (char *)msg);
            break;
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(w->md);
        size_t ms = ov[0], me = ov[1];
        if (me == ms) { /* empty match: step one character, it joins the gap */
            pos = ms + 1;
            while (pos < len && (s[pos] & 0xc0) == 0x80)
                pos++;
            continue;
        }
        /* Text the regex skipped is a piece of its own (HF "Isolated"). */
        if (ms > emitted && (rc = w->fn(w->ctx, text + emitted, ms - emitted, -1))) break;
        if ((rc = w->fn(w->ctx, text + ms, me - ms, -1))) break;
        emitted = pos = me;
    }
    if (!rc && emitted < len) rc = w->fn(w->ctx, text + emitted, len - emitted, -1);
    free(norm);
    return rc;
}

/* The longest added token that starts at s[0], or -1. */
static int32_t match_added(const inf_tokenizer *t, const char *s, size_t left, bool parse_special) {
    unsigned char b = (unsigned char)s[0];
    for (uint32_t k = t->by_byte[b]; k < t->by_byte[b + 1]; k++) {
        int32_t id = t->added[k];
        if (!parse_special && t->type[id] == INF_TOKEN_CONTROL) continue;
        uint32_t l = token_len(t, id);
        if (l <= left && !memcmp(s, t->bytes_buf + t->bytes_off[id], l)) return id;
    }
    return -1;
}

/* Cuts the added tokens out of text and splits the stretches between them;
 * every piece goes to fn. -1 with err set, or fn's nonzero status with err
 * left as fn's failure left it (possibly empty). */
static int walk_text(const inf_tokenizer *t, const char *text, size_t len, bool parse_special,
                     inf_tok_piece_fn fn, void *ctx, inf_err *err) {
    size_t bad = inf_utf8_valid_prefix(text, len);
    if (bad != len)
        return inf_fail(err, "tokenize: invalid UTF-8 at byte offset %zu (byte 0x%02x)", bad,
                        (unsigned char)text[bad]);
    if (len > (size_t)INT32_MAX)
        return inf_fail(err, "tokenize: text of %zu bytes is too long", len);
    tok_walk w = {t, pcre2_match_data_create_from_pattern(t->re, NULL), NULL, NULL, fn, ctx};
    if (!w.md) return inf_fail(err, "tokenize: out of memory");
    int rc = 0;
    size_t start = 0;
    for (size_t i = 0; i < len && !rc; i++) {
        if (t->by_byte[(unsigned char)text[i]] == t->by_byte[(unsigned char)text[i] + 1]) continue;
        int32_t id = match_added(t, text + i, len - i, parse_special);
        if (id < 0) continue;
        if (i > start) rc = split_plain(&w, text + start, i - start, err);
        if (!rc) rc = fn(ctx, t->bytes_buf + t->bytes_off[id], token_len(t, id), id);
        start = i + token_len(t, id);
        i = start - 1;
    }
    if (!rc && start < len) rc = split_plain(&w, text + start, len - start, err);
    pcre2_match_data_free(w.md);
    pcre2_match_context_free(w.mctx);
    pcre2_jit_stack_free(w.jstack);
    return rc;
}

int inf_tok_pretokenize(const inf_tokenizer *t, const char *text, size_t len, bool parse_special,
                        inf_tok_piece_fn fn, void *ctx, inf_err *err) {
    err->msg[0] = 0;
    int rc = walk_text(t, text, len, parse_special, fn, ctx, err);
    if (rc && !err->msg[0]) inf_fail(err, "tokenize: the caller's piece function failed (%d)", rc);
    return rc ? -1 : 0;
}

typedef struct tok_encoding {
    const inf_tokenizer *t;
    tok_ids out;
} tok_encoding;

/* A piece of the walk -> its ids: an added token is its own id, a pre-token
 * is merged (-1 only when out of memory). */
static int encode_piece(void *ctx, const char *piece, size_t len, int32_t added) {
    tok_encoding *e = ctx;
    if (added >= 0) return tok_ids_push(&e->out, &added, 1);
    return encode_word(e->t, (const unsigned char *)piece, len, &e->out);
}

int inf_tok_encode(const inf_tokenizer *t, const char *text, size_t len, bool parse_special,
                   int32_t **ids, int *n_ids, inf_err *err) {
    *ids = NULL;
    *n_ids = 0;
    inf_err local;
    if (!err) err = &local;
    err->msg[0] = 0;
    tok_encoding e = {t, {0}};
    int rc = walk_text(t, text, len, parse_special, encode_piece, &e, err);
    if (rc && !err->msg[0]) inf_fail(err, "tokenize: out of memory");
    if (!rc && e.out.n > (size_t)INT32_MAX) rc = inf_fail(err, "tokenize: too many tokens");
    if (rc) {
        free(e.out.v);
        return -1;
    }
    *ids = e.out.v;
    *n_ids = (int)e.out.n;
    return 0;
}

/* ---- decoding and lookups ---- */

int inf_tok_decode(const inf_tokenizer *t, const int32_t *ids, int n_ids, char **out, size_t *len,
                   inf_err *err) {
    *out = NULL;
    if (len) *len = 0;
    size_t total = 0;
    for (int i = 0; i < n_ids; i++) {
        if (ids[i] < 0 || ids[i] >= t->n_vocab)
            return inf_fail(err,
                            "detokenize: id %d at position %d is outside the vocabulary "
                            "(%d tokens)",
                            ids[i], i, t->n_vocab);
        total += token_len(t, ids[i]);
    }
    char *buf = malloc(total + 1);
    if (!buf) return inf_fail(err, "detokenize: out of memory");
    size_t k = 0;
    for (int i = 0; i < n_ids; i++) {
        uint32_t l = token_len(t, ids[i]);
        memcpy(buf + k, t->bytes_buf + t->bytes_off[ids[i]], l);
        k += l;
    }
    buf[k] = 0;
    *out = buf;
    if (len) *len = k;
    return 0;
}

const char *inf_tok_token_bytes(const inf_tokenizer *t, int32_t id, size_t *len) {
    if (id < 0 || id >= t->n_vocab) return NULL;
    if (len) *len = token_len(t, id);
    return t->bytes_buf + t->bytes_off[id];
}

const char *inf_tok_token_text(const inf_tokenizer *t, int32_t id) {
    return id < 0 || id >= t->n_vocab ? NULL : t->text[id];
}

int inf_tok_token_type(const inf_tokenizer *t, int32_t id) {
    return id < 0 || id >= t->n_vocab ? 0 : t->type[id];
}

int32_t inf_tok_find(const inf_tokenizer *t, const char *text) {
    return text_find(t, text, strlen(text));
}

bool inf_tok_is_eog(const inf_tokenizer *t, int32_t id) {
    if (id < 0) return false;
    for (int i = 0; i < 4; i++)
        if (t->eog[i] == id) return true;
    return false;
}

int inf_tok_n_vocab(const inf_tokenizer *t) {
    return t->n_vocab;
}
int32_t inf_tok_bos(const inf_tokenizer *t) {
    return t->bos;
}
int32_t inf_tok_eos(const inf_tokenizer *t) {
    return t->eos;
}
int32_t inf_tok_eot(const inf_tokenizer *t) {
    return t->eot;
}
bool inf_tok_add_bos(const inf_tokenizer *t) {
    return t->add_bos;
}

int32_t inf_tok_add_eos(const inf_tokenizer *t) {
    return t->add_eos;
}
size_t inf_tok_max_token_bytes(const inf_tokenizer *t) {
    return t->max_bytes;
}
