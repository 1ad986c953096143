/* Bad model files: each must give one clear error naming the file and the
 * field (checked by substring), never a crash or an out-of-bounds read (run
 * under `make asan` for the latter). */
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "model_build.h"
#include "modelfile/gguf.h"
#include "modelfile/gguf_model.h"
#include "model/model.h"
#include "modelfile/model.h"
#include "modelfile/safetensors.h"

/* Parses and loads an in-memory GGUF; returns the error message ("" when it
 * loaded, which the callers count as a failure). The image is copied into an
 * exact-size heap buffer so ASan sees any read past its end. */
static const char *gguf_error(const unsigned char *p, size_t n) {
    static inf_err err;
    memset(&err, 0, sizeof err);
    unsigned char *copy = malloc(n ? n : 1);
    if (n) memcpy(copy, p, n);
    gguf_file *g;
    inf_model_file *m = NULL;
    if (gguf_parse(&g, copy, n, "bad.gguf", &err) == 0 && gguf_model_open(&m, g, &err) == 0) {
        if (inf_model_bind_file(m, &err) == 0) strcpy(err.msg, "");
        inf_model_close(m);
    }
    free(copy);
    return err.msg;
}

/* The error must mention every one of the given fragments. */
#define CHECK_ERR(msg, ...)                                                                        \
    do {                                                                                           \
        const char *m_ = (msg);                                                                    \
        const char *frags_[] = {__VA_ARGS__};                                                      \
        bool ok_ = m_[0] != 0;                                                                     \
        for (size_t i_ = 0; i_ < sizeof frags_ / sizeof frags_[0]; i_++)                           \
            ok_ = ok_ && strstr(m_, frags_[i_]);                                                   \
        CHECK_MSG(ok_, "error was \"%s\"", m_);                                                    \
    } while (0)

static void put_u32(bb *b, size_t pos, uint32_t v) {
    memcpy(b->p + pos, &v, 4);
}
static void put_u64(bb *b, size_t pos, uint64_t v) {
    memcpy(b->p + pos, &v, 8);
}

/* Position of the n-th occurrence (0-based) of s in the image. */
static size_t find_bytes(const bb *b, const char *s, int nth) {
    size_t n = strlen(s);
    for (size_t i = 0; i + n <= b->n; i++)
        if (!memcmp(b->p + i, s, n) && nth-- == 0) return i;
    return (size_t)-1;
}

static int tensor_index(const tiny_layout *lay, const char *name) {
    for (int i = 0; i < lay->n_tensors; i++)
        if (!strcmp(lay->names[i], name)) return i;
    return -1;
}

static void test_gguf_truncation(void) {
    bb b = {0};
    tiny_layout lay;
    tiny_gguf(&b, &(tiny_opts){0}, &lay);
    CHECK_INT(strlen(gguf_error(b.p, b.n)), 0);
    /* the last tensor's data ends before the final padding */
    int last = lay.n_tensors - 1;
    uint64_t last_off;
    memcpy(&last_off, b.p + lay.offset_pos[last], 8);
    size_t data_end = lay.data_offset + (size_t)last_off + TINY_EMBD * TINY_FF * 4;
    int clean = 0, bad = 0;
    for (size_t n = 0; n < b.n; n++) {
        const char *e = gguf_error(b.p, n);
        if (n < data_end) {
            if (e[0] && strstr(e, "bad.gguf"))
                clean++;
            else {
                bad++;
                if (bad < 4) fprintf(stderr, "truncated at %zu: \"%s\"\n", n, e);
            }
        }
    }
    CHECK_INT(bad, 0);
    CHECK(clean > 1000);
    CHECK_ERR(gguf_error(b.p, 10), "truncated", "tensor count");
    CHECK_ERR(gguf_error(b.p, lay.data_offset + 100), "past the end");
    bb_free(&b);
}

static void test_gguf_header(void) {
    bb b = {0};
    tiny_layout lay;
    tiny_gguf(&b, &(tiny_opts){0}, &lay);
    bb c = {0};

#define MUTATE(stmt) (bb_free(&c), bb_bytes(&c, b.p, b.n), (stmt), gguf_error(c.p, c.n))
    CHECK_ERR(MUTATE(c.p[0] = 'X'), "bad.gguf", "not a GGUF file");
    CHECK_ERR(MUTATE(put_u32(&c, 4, 1)), "version 1");
    CHECK_ERR(MUTATE(put_u32(&c, 4, 0x03000000)), "version", "big-endian");
    CHECK_ERR(MUTATE(put_u64(&c, 8, 1ull << 62)), "tensor count");
    CHECK_ERR(MUTATE(put_u64(&c, 16, 1ull << 60)), "metadata count");
    CHECK_ERR(MUTATE(put_u64(&c, lay.first_key_len_pos, 1ull << 40)), "metadata key 0", "length");
    CHECK_ERR(MUTATE(put_u64(&c, lay.first_key_len_pos, 0)), "metadata key 0", "empty");
    /* the first value's type field follows "general.architecture" */
    size_t type0 = lay.first_key_len_pos + 8 + strlen("general.architecture");
    CHECK_ERR(MUTATE(put_u32(&c, type0, 99)), "general.architecture", "value type 99");
    size_t abos = find_bytes(&b, "tokenizer.ggml.add_bos_token", 0) + 28;
    CHECK_ERR(MUTATE(put_u32(&c, abos, GGUF_TYPE_UINT8)), "tokenizer.ggml.add_bos_token", "UINT8",
              "expected BOOL");
    /* a string value of absurd length */
    CHECK_ERR(MUTATE(put_u64(&c, type0 + 4, 1ull << 50)), "general.architecture", "length");
    /* token array count far too large for the file */
    size_t toks = find_bytes(&b, "tokenizer.ggml.tokens", 0);
    CHECK_ERR(MUTATE(put_u64(&c, toks + 21 + 8, 1ull << 58)), "tokenizer.ggml.tokens", "array");
    CHECK_ERR(MUTATE(put_u32(&c, toks + 21 + 4, 77)), "tokenizer.ggml.tokens", "element type");
    /* a key renamed so that a required one is missing */
    size_t bc = find_bytes(&b, "qwen3.block_count", 0);
    CHECK_ERR(MUTATE(c.p[bc + 16] = 'X'), "qwen3.block_count", "missing");
    /* a key renamed into a duplicate */
    size_t eos = find_bytes(&b, "tokenizer.ggml.eos_token_id", 0);
    CHECK_ERR(MUTATE(c.p[eos + 15] = 'b'), "tokenizer.ggml.bos_token_id", "more than once");
    /* issue 20 row 14: token types out of range, denormal rope theta / rms eps */
    size_t tt =
        find_bytes(&b, "tokenizer.ggml.token_type", 0) + strlen("tokenizer.ggml.token_type");
    CHECK_ERR(MUTATE(put_u32(&c, tt + 16 + 4 * 3, 99)), "tokenizer.ggml.token_type[3] is 99",
              "expected 1..6");
    CHECK_ERR(MUTATE(put_u32(&c, tt + 16, 0)), "tokenizer.ggml.token_type[0] is 0");
    CHECK_ERR(MUTATE(put_u32(&c, tt + 16 + 4, (uint32_t)-1)), "tokenizer.ggml.token_type[1] is -1");
    float tiny = 1e-40f;
    uint32_t tiny_bits;
    memcpy(&tiny_bits, &tiny, 4);
    size_t th = find_bytes(&b, "qwen3.rope.freq_base", 0) + strlen("qwen3.rope.freq_base") + 4;
    CHECK_ERR(MUTATE(put_u32(&c, th, tiny_bits)), "bad.gguf", "rope theta", "normal");
    size_t ep = find_bytes(&b, "qwen3.attention.layer_norm_rms_epsilon", 0) +
                strlen("qwen3.attention.layer_norm_rms_epsilon") + 4;
    CHECK_ERR(MUTATE(put_u32(&c, ep, tiny_bits)), "bad.gguf", "rms norm epsilon", "normal");
    /* row 9: a tensor of a layer past block_count (the file holds more layers
       than it says) is refused, not silently left unused */
    size_t l0 = find_bytes(&b, "blk.0.attn_q.weight", 0);
    CHECK_ERR(MUTATE(c.p[l0 + 4] = '1'), "tensor blk.1.attn_q.weight belongs to layer 1",
              "the model has 1 layers");
    bb_free(&c);
    bb_free(&b);
#undef MUTATE
}

static void test_gguf_tensors(void) {
    bb b = {0}, c = {0};
    tiny_layout lay;
    tiny_gguf(&b, &(tiny_opts){0}, &lay);
    int down = tensor_index(&lay, "blk.0.ffn_down.weight");
    int norm = tensor_index(&lay, "blk.0.attn_norm.weight");
    int q = tensor_index(&lay, "blk.0.attn_q.weight");
    INF_ASSERT(down >= 0 && norm >= 0 && q >= 0);
#define MUTATE(stmt) (bb_free(&c), bb_bytes(&c, b.p, b.n), (stmt), gguf_error(c.p, c.n))
    CHECK_ERR(MUTATE(put_u32(&c, lay.type_pos[down], 34)),
              "bad.gguf: tensor blk.0.ffn_down.weight has type TQ1_0, which inferno does not "
              "support yet");
    CHECK_ERR(MUTATE(put_u32(&c, lay.type_pos[down], 1000)), "blk.0.ffn_down.weight", "unknown");
    CHECK_ERR(MUTATE(put_u32(&c, lay.type_pos[norm], INF_Q8_0)), "blk.0.attn_norm.weight",
              "norm weights");
    CHECK_ERR(MUTATE(put_u32(&c, lay.type_pos[q], INF_Q4_K)), "blk.0.attn_q.weight",
              "not a multiple of the Q4_K block size 256");
    CHECK_ERR(MUTATE(put_u64(&c, lay.offset_pos[down], 1ull << 40)), "blk.0.ffn_down.weight",
              "past the end");
    CHECK_ERR(MUTATE(put_u64(&c, lay.offset_pos[down], UINT64_MAX - 31)), "blk.0.ffn_down.weight",
              "past the end");
    CHECK_ERR(MUTATE(put_u64(&c, lay.offset_pos[down], 8)), "blk.0.ffn_down.weight",
              "not a multiple of the alignment 32");
    uint64_t qoff;
    memcpy(&qoff, b.p + lay.offset_pos[q], 8);
    CHECK_ERR(MUTATE(put_u64(&c, lay.offset_pos[down], qoff)), "overlaps", "blk.0.attn_q.weight");
    /* dims: n_dims field sits 4 bytes before dim 0 */
    CHECK_ERR(MUTATE(put_u32(&c, lay.dim0_pos[q] - 4, 0)), "blk.0.attn_q.weight", "0 dimensions");
    CHECK_ERR(MUTATE(put_u32(&c, lay.dim0_pos[q] - 4, 7)), "blk.0.attn_q.weight", "7 dimensions");
    CHECK_ERR(MUTATE(put_u64(&c, lay.dim0_pos[q], 0)), "blk.0.attn_q.weight", "dimension 0 is 0");
    CHECK_ERR(MUTATE((put_u64(&c, lay.dim0_pos[q], 1ull << 40),
                      put_u64(&c, lay.dim0_pos[q] + 8, 1ull << 40))),
              "blk.0.attn_q.weight", "overflows");
    CHECK_ERR(MUTATE(put_u64(&c, lay.dim0_pos[q], 1ull << 60)), "blk.0.attn_q.weight");
    /* a tensor renamed into a duplicate (attn_k -> attn_v, same length) */
    size_t k = find_bytes(&b, "blk.0.attn_k.weight", 0);
    CHECK_ERR(MUTATE(c.p[k + 11] = 'v'), "blk.0.attn_v.weight", "more than once");
    CHECK_ERR(MUTATE(c.p[k + 3] = 0), "tensor info", "NUL");
#undef MUTATE
    bb_free(&c);
    bb_free(&b);

    /* whole-model problems, built that way */
    tiny_gguf(&b, &(tiny_opts){.skip = "blk.0.ffn_down.weight"}, &lay);
    CHECK_ERR(gguf_error(b.p, b.n), "bad.gguf", "tensor blk.0.ffn_down.weight is missing");
    bb_free(&b);
    tiny_gguf(&b, &(tiny_opts){.skip = "token_embd.weight"}, &lay);
    CHECK_ERR(gguf_error(b.p, b.n), "token_embd.weight is missing");
    bb_free(&b);
    tiny_gguf(&b, &(tiny_opts){.bad_shape = "blk.0.attn_k.weight"}, &lay);
    CHECK_ERR(gguf_error(b.p, b.n),
              "tensor blk.0.attn_k.weight has shape [32, 17], expected [32, 16]");
    bb_free(&b);
    tiny_gguf(&b, &(tiny_opts){.bad_shape = "blk.0.attn_q_norm.weight"}, &lay);
    CHECK_ERR(gguf_error(b.p, b.n), "blk.0.attn_q_norm.weight has shape [17], expected [16]");
    bb_free(&b);
    tiny_gguf(&b, &(tiny_opts){.untied = true, .bad_shape = "output.weight"}, &lay);
    CHECK_ERR(gguf_error(b.p, b.n), "output.weight has shape [32, 13], expected [32, 12]");
    bb_free(&b);
    tiny_gguf(&b, &(tiny_opts){.arch = "llama"}, &lay);
    CHECK_ERR(gguf_error(b.p, b.n), "general.architecture", "llama", "qwen3");
    bb_free(&b);
    tiny_gguf(&b, &(tiny_opts){.alignment = 48}, &lay);
    CHECK_ERR(gguf_error(b.p, b.n), "general.alignment", "power of two");
    bb_free(&b);

    /* hyperparameter values out of range */
    tiny_gguf(&b, &(tiny_opts){0}, &lay);
    size_t bc = find_bytes(&b, "qwen3.block_count", 0) + strlen("qwen3.block_count") + 4;
    bb_free(&c);
    bb_bytes(&c, b.p, b.n);
    put_u32(&c, bc, 1000000000);
    CHECK_ERR(gguf_error(c.p, c.n), "1000000000 layers", "only 13 tensors");
    put_u32(&c, bc, 0);
    CHECK_ERR(gguf_error(c.p, c.n), "qwen3.block_count", "is 0");
    size_t hkv = find_bytes(&b, "qwen3.attention.head_count_kv", 0) + 29 + 4;
    bb_free(&c);
    bb_bytes(&c, b.p, b.n);
    put_u32(&c, hkv, 3);
    CHECK_ERR(gguf_error(c.p, c.n), "not a multiple of 3 key/value heads");
    size_t eos = find_bytes(&b, "tokenizer.ggml.eos_token_id", 0) + 27 + 4;
    bb_free(&c);
    bb_bytes(&c, b.p, b.n);
    put_u32(&c, eos, 12);
    CHECK_ERR(gguf_error(c.p, c.n), "tokenizer.ggml.eos_token_id", "12");
    bb_free(&c);
    bb_free(&b);
}

/* Nested arrays deeper than the reader allows. */
/* row 12: general.alignment must be a power of two and a multiple of 8 */
static void test_gguf_alignment(void) {
    static const uint32_t bad[] = {1, 2, 4, 12};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        bb b = {0};
        tiny_layout lay;
        tiny_gguf(&b, &(tiny_opts){.alignment = bad[i]}, &lay);
        CHECK_ERR(gguf_error(b.p, b.n), "general.alignment", "multiple of 8");
        bb_free(&b);
    }
    bb b = {0};
    tiny_layout lay;
    tiny_gguf(&b, &(tiny_opts){.alignment = 8}, &lay);
    CHECK_INT(strlen(gguf_error(b.p, b.n)), 0);
    bb_free(&b);
}

static void test_gguf_deep(void) {
    bb b = {0};
    bb_bytes(&b, "GGUF", 4);
    bb_u32(&b, 3);
    bb_u64(&b, 0);
    bb_u64(&b, 1);
    bb_str(&b, "deep");
    bb_u32(&b, 9);
    for (int i = 0; i < 100; i++) {
        bb_u32(&b, 9);
        bb_u64(&b, 1);
    }
    bb_u32(&b, 0);
    bb_u64(&b, 0);
    CHECK_ERR(gguf_error(b.p, b.n), "deep", "nested");
    bb_free(&b);
}

static const char *st_error(const unsigned char *p, size_t n) {
    static inf_err err;
    memset(&err, 0, sizeof err);
    unsigned char *copy = malloc(n ? n : 1);
    if (n) memcpy(copy, p, n);
    st_file *f;
    if (st_parse(&f, copy, n, "bad.safetensors", &err) == 0) {
        st_close(f);
        strcpy(err.msg, "");
    }
    free(copy);
    return err.msg;
}

static const char *st_header_error(const char *header, size_t data_len) {
    bb b = {0};
    unsigned char *data = calloc(data_len ? data_len : 1, 1);
    st_image(&b, header, data, data_len);
    free(data);
    const char *e = st_error(b.p, b.n);
    bb_free(&b);
    return e;
}

static void test_safetensors(void) {
    bb b = {0};
    hf_file(&b, 0, 3, NULL, NULL);
    CHECK_INT(strlen(st_error(b.p, b.n)), 0);
    int bad = 0;
    for (size_t n = 0; n < b.n; n++) {
        const char *e = st_error(b.p, n);
        if (!e[0] || !strstr(e, "bad.safetensors")) bad++;
    }
    CHECK_INT(bad, 0);
    bb_free(&b);

#define H(t) "{\"t\":{" t "}}"
    CHECK_INT(
        strlen(st_header_error(H("\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]"), 8)), 0);
    CHECK_ERR(st_header_error("{\"t\":{\"dtype\":\"F32\",", 8), "bad.safetensors",
              "JSON is broken");
    CHECK_ERR(st_header_error("[1,2]", 0), "not start with '{'");
    CHECK_ERR(st_header_error("{\"a\":1}", 0), "tensor a", "not a JSON object");
    CHECK_ERR(st_header_error(H("\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[0,8]"), 8),
              "tensor t has dtype I64");
    CHECK_ERR(st_header_error(H("\"shape\":[1],\"data_offsets\":[0,4]"), 4), "tensor t", "dtype");
    CHECK_ERR(st_header_error(H("\"dtype\":\"F32\",\"data_offsets\":[0,4]"), 4), "tensor t",
              "shape");
    CHECK_ERR(st_header_error(H("\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]"), 4),
              "tensor t has 0 dimensions");
    CHECK_ERR(
        st_header_error(H("\"dtype\":\"F32\",\"shape\":[1,1,1,1,1],\"data_offsets\":[0,4]"), 4),
        "tensor t has 5 dimensions");
    CHECK_ERR(st_header_error(H("\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]"), 4),
              "tensor t", "shape[0]");
    CHECK_ERR(st_header_error(H("\"dtype\":\"F32\",\"shape\":[\"2\"],\"data_offsets\":[0,4]"), 4),
              "tensor t", "shape[0]");
    CHECK_ERR(st_header_error(H("\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],"
                                "\"data_offsets\":[0,4]"),
                              4),
              "tensor t", "overflow");
    CHECK_ERR(st_header_error(H("\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]"), 8),
              "tensor t", "span 4 bytes", "need 8");
    CHECK_ERR(st_header_error(H("\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]"), 4),
              "tensor t", "past the end");
    CHECK_ERR(st_header_error(H("\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]"), 8),
              "tensor t", "not ordered");
    CHECK_ERR(st_header_error(H("\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0]"), 8),
              "tensor t", "data_offsets");
    CHECK_ERR(st_header_error(H("\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":"
                                "[99999999999999999999,0]"),
                              8),
              "JSON is broken");
    CHECK_ERR(st_header_error("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                              "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
                              12),
              "overlaps");
    CHECK_ERR(st_header_error("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                              "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
                              8),
              "duplicate");
    CHECK_ERR(st_header_error("{\"__metadata__\":[1]}", 0), "__metadata__");
    /* row 10: the tensors cover the data region exactly */
    CHECK_ERR(st_header_error(H("\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]"), 12),
              "cover 8 bytes", "is 12 bytes");
    CHECK_ERR(st_header_error(H("\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]"), 12),
              "tensor t starts at data offset 4", "hole");
    CHECK_ERR(st_header_error("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                              "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}",
                              12),
              "tensor b starts at data offset 8", "ends at 4");
    CHECK_INT(strlen(st_header_error("{}", 0)), 0);
#undef H
    /* row 10: a header length a few bytes short still parses as JSON (the
       padding is cut) but shifts every tensor: refused */
    {
        bb_free(&b);
        static const float data[2] = {1, 2};
        st_image(&b, "{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", data, 8);
        CHECK_INT(strlen(st_error(b.p, b.n)), 0);
        uint64_t hl;
        memcpy(&hl, b.p, 8);
        for (uint64_t cut = 1; cut <= 2; cut++) {
            put_u64(&b, 0, hl - cut);
            CHECK_ERR(st_error(b.p, b.n), "bad.safetensors", "the tensors cover 8 bytes");
        }
        bb_free(&b);
    }
    /* header length fields */
    bb_u64(&b, 1ull << 62);
    bb_bytes(&b, "{}", 2);
    CHECK_ERR(st_error(b.p, b.n), "bad.safetensors", "header length");
    bb_free(&b);
    bb_u64(&b, 200u << 20);
    for (int i = 0; i < 2; i++)
        bb_bytes(&b, "{}", 2);
    CHECK_ERR(st_error(b.p, b.n), "header length");
    bb_free(&b);
}

/* ---- HF folders ---------------------------------------------------------- */

static char dir[] = "/tmp/inferno-test-malformed-XXXXXX";

static void put(const char *file, const void *p, size_t n) {
    char path[600];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    CHECK(write_file(path, p, n) == 0);
}
static void put_text(const char *file, const char *s) {
    put(file, s, strlen(s));
}
static void del(const char *file) {
    char path[600];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    unlink(path);
}

static const char *hf_error(void) {
    static inf_err err;
    memset(&err, 0, sizeof err);
    inf_model_file *m;
    if (inf_model_open(&m, dir, &err) == 0) {
        inf_model_close(m);
        strcpy(err.msg, "");
    }
    return err.msg;
}

/* The tiny folder: config (tied unless said), tokenizer, one safetensors file. */
static void good_folder(const char *tie) {
    char cfg[1024];
    snprintf(cfg, sizeof cfg, tiny_config, tie);
    put_text("config.json", cfg);
    put_text("tokenizer.json", tiny_tokenizer);
    bb b = {0};
    hf_file(&b, 0, N_HF_T - 1, NULL, NULL);
    put("model.safetensors", b.p, b.n);
    bb_free(&b);
}

/* config.json with one field replaced (or removed when value is NULL). */
static void config_with(const char *field, const char *value) {
    char cfg[1024], out[1200];
    snprintf(cfg, sizeof cfg, tiny_config, "true");
    char key[64];
    snprintf(key, sizeof key, "\"%s\":", field);
    char *at = strstr(cfg, key);
    INF_ASSERT(at);
    char *end = at + strlen(key);
    while (*end != ',' && *end != '}')
        end++;
    if (*end == ',' && !value) end++;
    if (value)
        snprintf(out, sizeof out, "%.*s%s%s%s", (int)(at - cfg), cfg, key, value, end);
    else
        snprintf(out, sizeof out, "%.*s%s", (int)(at - cfg), cfg, end);
    put_text("config.json", out);
}

static void test_hf(void) {
    CHECK(mkdtemp(dir) != NULL);
    CHECK_ERR(hf_error(), dir, "no config.json");
    good_folder("true");
    CHECK_INT(strlen(hf_error()), 0);
    if (hf_error()[0]) fprintf(stderr, "good folder: %s\n", hf_error());

    put_text("config.json", "{\"model_type\": \"qwen3\", ");
    CHECK_ERR(hf_error(), "config.json", "broken JSON");
    put_text("config.json", "[]");
    CHECK_ERR(hf_error(), "config.json", "not a JSON object");
    config_with("intermediate_size", NULL);
    CHECK_ERR(hf_error(), "config.json", "field intermediate_size is missing");
    config_with("model_type", NULL);
    CHECK_ERR(hf_error(), "config.json", "model_type");
    config_with("model_type", "\"llama\"");
    CHECK_ERR(hf_error(), "config.json", "llama", "qwen3");
    config_with("hidden_size", "-5");
    CHECK_ERR(hf_error(), "config.json", "hidden_size", "positive integer");
    config_with("rope_theta", "\"big\"");
    CHECK_ERR(hf_error(), "config.json", "rope_theta", "not a number");
    /* rope_scaling, added after rope_theta */
    config_with("rope_theta",
                "1e6, \"rope_scaling\": {\"rope_type\": \"longrope\", \"factor\": 4}");
    CHECK_ERR(hf_error(), "config.json", "longrope", "yarn");
    config_with("rope_theta", "1e6, \"rope_scaling\": {\"type\": \"yarn\", \"factor\": 0.5}");
    CHECK_ERR(hf_error(), "config.json", "yarn factor 0.5");
    config_with("rope_theta", "1e6, \"rope_scaling\": [4]");
    CHECK_ERR(hf_error(), "config.json", "rope_scaling is not an object");
    config_with("vocab_size", "13");
    CHECK_ERR(hf_error(), "vocab_size is 13", "12 rows");
    config_with("tie_word_embeddings", "\"yes\"");
    CHECK_ERR(hf_error(), "tie_word_embeddings");
    config_with("num_hidden_layers", "2");
    CHECK_ERR(hf_error(), "model.layers.1.", "is missing");
    config_with("num_key_value_heads", "2");
    CHECK_ERR(hf_error(), "model.layers.0.self_attn.k_proj.weight has shape [16, 32], "
                          "expected [32, 32]");

    /* untied but lm_head missing: an embedding model saved without its head
     * (Qwen3-Embedding-8B ships so); it opens, headless, and cannot generate */
    good_folder("false");
    {
        inf_model_file *m = NULL;
        inf_err err = {{0}};
        CHECK_MSG(inf_model_open(&m, dir, &err) == 0, "%s", err.msg);
        CHECK(m && m->hp.no_head && !m->hp.tied_output);
        inf_model_close(m);
    }
    good_folder("true");

    bb b = {0};
    hf_file(&b, 0, N_HF_T - 1, "model.layers.0.mlp.down_proj.weight", NULL);
    put("model.safetensors", b.p, b.n);
    bb_free(&b);
    CHECK_ERR(hf_error(), "tensor model.layers.0.mlp.down_proj.weight is missing");
    hf_file(&b, 0, N_HF_T - 1, NULL, "model.layers.0.self_attn.k_proj.weight");
    put("model.safetensors", b.p, b.n);
    bb_free(&b);
    CHECK_ERR(hf_error(), "model.layers.0.self_attn.k_proj.weight has shape [17, 32], "
                          "expected [16, 32]");
    put("model.safetensors", "\x10\0\0\0\0\0\0\0{", 9);
    CHECK_ERR(hf_error(), "model.safetensors", "header length");

    del("model.safetensors");
    CHECK_ERR(hf_error(), dir, "folder has no model");

    /* sharded: broken index, a missing shard, a tensor not where the index says,
     * the same tensor in two shards */
    put_text("model.safetensors.index.json", "{\"weight_map\": 5}");
    CHECK_ERR(hf_error(), "model.safetensors.index.json", "weight_map");
    put_text("model.safetensors.index.json", "{\"weight_map\": {\"x\": \"../etc/passwd\"}}");
    CHECK_ERR(hf_error(), "model.safetensors.index.json", "weight_map[\"x\"]");
    put_text("model.safetensors.index.json", "{\"weight_map\": {\"x\": \"nope.safetensors\"}}");
    CHECK_ERR(hf_error(), "nope.safetensors", "cannot open");
    hf_file(&b, 0, N_HF_T - 1, NULL, NULL);
    put("a.safetensors", b.p, b.n);
    put("b.safetensors", b.p, b.n);
    bb_free(&b);
    put_text(
        "model.safetensors.index.json",
        "{\"weight_map\": {\"model.norm.weight\": \"a.safetensors\", \"x\": \"a.safetensors\"}}");
    CHECK_ERR(hf_error(), "tensor x is in a.safetensors", "no such tensor");
    put_text("model.safetensors.index.json",
             "{\"weight_map\": {\"model.norm.weight\": \"a.safetensors\", "
             "\"model.embed_tokens.weight\": \"b.safetensors\"}}");
    CHECK_ERR(hf_error(), "appears more than once");
    del("model.safetensors.index.json");
    del("a.safetensors");
    del("b.safetensors");

    /* row 13: a shard that is a FIFO is refused without blocking on open (the
       alarm turns a hang into a failing test) */
    good_folder("true");
    del("model.safetensors");
    {
        char path[600];
        snprintf(path, sizeof path, "%s/model.safetensors", dir);
        CHECK(mkfifo(path, 0600) == 0);
        alarm(30);
        CHECK_ERR(hf_error(), "model.safetensors", "not a regular file");
        del("model.safetensors");
        CHECK(mkfifo(path, 0600) == 0);
        put_text("model.safetensors.index.json",
                 "{\"weight_map\": {\"model.norm.weight\": \"model.safetensors\"}}");
        CHECK_ERR(hf_error(), "model.safetensors", "not a regular file");
        del("model.safetensors.index.json");
        del("config.json");
        snprintf(path, sizeof path, "%s/config.json", dir);
        CHECK(mkfifo(path, 0600) == 0);
        CHECK_ERR(hf_error(), "config.json", "not a regular file");
        alarm(0);
        del("config.json");
        del("model.safetensors");
    }
    /* row 14 for HF: denormal rope theta / rms eps */
    good_folder("true");
    config_with("rope_theta", "1e-40");
    CHECK_ERR(hf_error(), "rope theta", "normal");
    config_with("rms_norm_eps", "1e-42");
    CHECK_ERR(hf_error(), "rms norm epsilon", "normal");
    config_with("rms_norm_eps", "-1e-6");
    CHECK_ERR(hf_error(), "rms norm epsilon");

    good_folder("true");
    del("tokenizer.json");
    CHECK_ERR(hf_error(), "no tokenizer.json");

    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
}

static void test_paths(void) {
    inf_model_file *m;
    inf_err err = {{0}};
    CHECK(inf_model_open(&m, "/nonexistent/model.gguf", &err) == -1 &&
          strstr(err.msg, "/nonexistent/model.gguf") && strstr(err.msg, "cannot open"));
    CHECK(inf_model_open(&m, "/dev/null", &err) == -1 && strstr(err.msg, "/dev/null") &&
          strstr(err.msg, "not a model"));
    char path[] = "/tmp/inferno-test-empty-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd >= 0) close(fd);
    CHECK(inf_model_open(&m, path, &err) == -1 && strstr(err.msg, path) &&
          strstr(err.msg, "empty"));
    unlink(path);
}

int main(void) {
    test_gguf_truncation();
    test_gguf_header();
    test_gguf_tensors();
    test_gguf_alignment();
    test_gguf_deep();
    test_safetensors();
    test_hf();
    test_paths();
    return th_report();
}
