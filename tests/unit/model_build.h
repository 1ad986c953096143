/* Test helper: writes small GGUF and safetensors images byte by byte, so the
 * readers are checked against files built here from the format description
 * (not by the project's own writer). Header-only; tests include it. */
#ifndef INF_TEST_MODEL_BUILD_H
#define INF_TEST_MODEL_BUILD_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct bb {
    unsigned char *p;
    size_t n, cap;
} bb;

static inline void bb_bytes(bb *b, const void *src, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
        if (!b->p) abort();
    }
    if (n) memcpy(b->p + b->n, src, n);
    b->n += n;
}
static inline void bb_u8(bb *b, uint8_t v) {
    bb_bytes(b, &v, 1);
}
static inline void bb_u32(bb *b, uint32_t v) {
    bb_bytes(b, &v, 4);
}
static inline void bb_u64(bb *b, uint64_t v) {
    bb_bytes(b, &v, 8);
}
static inline void bb_f32(bb *b, float v) {
    bb_bytes(b, &v, 4);
}
static inline void bb_str(bb *b, const char *s) {
    bb_u64(b, strlen(s));
    bb_bytes(b, s, strlen(s));
}
static inline void bb_pad(bb *b, size_t align) {
    while (b->n % align)
        bb_u8(b, 0);
}
static inline void bb_free(bb *b) {
    free(b->p);
    *b = (bb){0};
}

/* GGUF metadata entries: key, type, value. */
static inline void kv_str(bb *b, const char *k, const char *v) {
    bb_str(b, k);
    bb_u32(b, 8);
    bb_str(b, v);
}
static inline void kv_u32(bb *b, const char *k, uint32_t v) {
    bb_str(b, k);
    bb_u32(b, 4);
    bb_u32(b, v);
}
static inline void kv_f32(bb *b, const char *k, float v) {
    bb_str(b, k);
    bb_u32(b, 6);
    bb_f32(b, v);
}
static inline void kv_bool(bb *b, const char *k, bool v) {
    bb_str(b, k);
    bb_u32(b, 7);
    bb_u8(b, v);
}
static inline void kv_strs(bb *b, const char *k, const char *const *v, int n) {
    bb_str(b, k);
    bb_u32(b, 9);
    bb_u32(b, 8);
    bb_u64(b, (uint64_t)n);
    for (int i = 0; i < n; i++)
        bb_str(b, v[i]);
}
static inline void kv_i32s(bb *b, const char *k, const int32_t *v, int n) {
    bb_str(b, k);
    bb_u32(b, 9);
    bb_u32(b, 5);
    bb_u64(b, (uint64_t)n);
    bb_bytes(b, v, (size_t)n * 4);
}

/* ---- a tiny valid Qwen3 GGUF -------------------------------------------- */

/* Shapes: 1 layer, n_embd 32, 2 heads, 1 kv head, head_dim 16, n_ff 64,
 * 12 tokens = 12 embedding rows. Matrices F32 (or mat_type, a float type
 * of 2 bytes: 1 = F16, 30 = BF16). */
enum { TINY_EMBD = 32, TINY_HEAD = 2, TINY_KV = 1, TINY_HD = 16, TINY_FF = 64, TINY_VOCAB = 12 };

typedef struct tiny_opts {
    const char *arch;      /* default "qwen3" */
    bool untied;           /* write output.weight */
    const char *skip;      /* leave out this tensor */
    const char *bad_shape; /* give this tensor one extra row */
    uint32_t mat_type;     /* 0 = F32, 1 = F16, 30 = BF16, 8 = Q8_0 */
    uint32_t alignment;    /* 0 = no general.alignment key (default 32) */
} tiny_opts;

#define TINY_MAX_T 16
typedef struct tiny_layout {
    int n_tensors;
    const char *names[TINY_MAX_T];
    size_t offset_pos[TINY_MAX_T]; /* where each tensor info's offset field is */
    size_t type_pos[TINY_MAX_T];
    size_t dim0_pos[TINY_MAX_T];
    size_t first_key_len_pos; /* the first metadata key's length field */
    size_t data_offset;
} tiny_layout;

static const char *const tiny_tokens[TINY_VOCAB] = {
    "!",          "\"", "a", "b", "ab", "\xc4\xa0the", "<|endoftext|>", "<|im_start|>",
    "<|im_end|>", "x",  "y", "xy"};

static inline void tiny_gguf(bb *b, const tiny_opts *o, tiny_layout *lay) {
    static const int32_t types[TINY_VOCAB] = {1, 1, 1, 1, 1, 1, 3, 3, 3, 1, 1, 1};
    static const char *const merges[] = {"a b", "x y"};
    struct {
        const char *name;
        int n_dims;
        int64_t ne0, ne1;
        bool mat;
    } t[TINY_MAX_T] = {
        {"token_embd.weight", 2, TINY_EMBD, TINY_VOCAB, true},
        {"output_norm.weight", 1, TINY_EMBD, 1, false},
        {"blk.0.attn_norm.weight", 1, TINY_EMBD, 1, false},
        {"blk.0.attn_q.weight", 2, TINY_EMBD, TINY_HEAD * TINY_HD, true},
        {"blk.0.attn_k.weight", 2, TINY_EMBD, TINY_KV * TINY_HD, true},
        {"blk.0.attn_v.weight", 2, TINY_EMBD, TINY_KV * TINY_HD, true},
        {"blk.0.attn_output.weight", 2, TINY_HEAD * TINY_HD, TINY_EMBD, true},
        {"blk.0.attn_q_norm.weight", 1, TINY_HD, 1, false},
        {"blk.0.attn_k_norm.weight", 1, TINY_HD, 1, false},
        {"blk.0.ffn_norm.weight", 1, TINY_EMBD, 1, false},
        {"blk.0.ffn_gate.weight", 2, TINY_EMBD, TINY_FF, true},
        {"blk.0.ffn_up.weight", 2, TINY_EMBD, TINY_FF, true},
        {"blk.0.ffn_down.weight", 2, TINY_FF, TINY_EMBD, true},
        {"output.weight", 2, TINY_EMBD, TINY_VOCAB, true},
    };
    int n = o->untied ? 14 : 13;
    int keep[TINY_MAX_T], nk = 0;
    for (int i = 0; i < n; i++)
        if (!o->skip || strcmp(o->skip, t[i].name)) keep[nk++] = i;
    memset(lay, 0, sizeof *lay);
    lay->n_tensors = nk;
    uint32_t align = o->alignment ? o->alignment : 32;

    bb_bytes(b, "GGUF", 4);
    bb_u32(b, 3);
    bb_u64(b, (uint64_t)nk);
    int n_kv = 22 + (o->alignment ? 1 : 0);
    bb_u64(b, (uint64_t)n_kv);
    lay->first_key_len_pos = b->n;
    const char *arch = o->arch ? o->arch : "qwen3";
    char k[128];
    kv_str(b, "general.architecture", arch);
    kv_str(b, "general.name", "tiny test");
#define AK(s) (snprintf(k, sizeof k, "%s.%s", arch, s), k)
    kv_u32(b, AK("block_count"), 1);
    kv_u32(b, AK("context_length"), 4096);
    kv_u32(b, AK("embedding_length"), TINY_EMBD);
    kv_u32(b, AK("feed_forward_length"), TINY_FF);
    kv_u32(b, AK("attention.head_count"), TINY_HEAD);
    kv_u32(b, AK("attention.head_count_kv"), TINY_KV);
    kv_u32(b, AK("attention.key_length"), TINY_HD);
    kv_u32(b, AK("attention.value_length"), TINY_HD);
    kv_f32(b, AK("rope.freq_base"), 1000000.0f);
    kv_f32(b, AK("attention.layer_norm_rms_epsilon"), 1e-6f);
#undef AK
    kv_str(b, "tokenizer.ggml.model", "gpt2");
    kv_str(b, "tokenizer.ggml.pre", "qwen2");
    kv_strs(b, "tokenizer.ggml.tokens", tiny_tokens, TINY_VOCAB);
    kv_i32s(b, "tokenizer.ggml.token_type", types, TINY_VOCAB);
    kv_strs(b, "tokenizer.ggml.merges", merges, 2);
    kv_u32(b, "tokenizer.ggml.eos_token_id", 8);
    kv_u32(b, "tokenizer.ggml.padding_token_id", 6);
    kv_u32(b, "tokenizer.ggml.bos_token_id", 6);
    kv_bool(b, "tokenizer.ggml.add_bos_token", false);
    kv_str(b, "tokenizer.chat_template", "{% for m in messages %}{{ m.content }}{% endfor %}");
    if (o->alignment) kv_u32(b, "general.alignment", o->alignment);

    uint64_t off = 0;
    size_t sizes[TINY_MAX_T];
    uint32_t tys[TINY_MAX_T];
    for (int j = 0; j < nk; j++) {
        int i = keep[j];
        int64_t ne1 = t[i].ne1 + (o->bad_shape && !strcmp(o->bad_shape, t[i].name));
        int64_t ne0 = t[i].ne0;
        if (t[i].n_dims == 1 && o->bad_shape && !strcmp(o->bad_shape, t[i].name)) ne0++;
        tys[j] = t[i].mat && o->mat_type ? o->mat_type : 0;
        /* F32 4 bytes, F16/BF16 2 bytes, Q8_0 34 bytes per 32 weights */
        sizes[j] =
            tys[j] == 8 ? (size_t)(ne0 * ne1) / 32 * 34 : (size_t)(ne0 * ne1) * (tys[j] ? 2 : 4);
        lay->names[j] = t[i].name;
        bb_str(b, t[i].name);
        bb_u32(b, (uint32_t)t[i].n_dims);
        lay->dim0_pos[j] = b->n;
        bb_u64(b, (uint64_t)ne0);
        if (t[i].n_dims == 2) bb_u64(b, (uint64_t)ne1);
        lay->type_pos[j] = b->n;
        bb_u32(b, tys[j]);
        lay->offset_pos[j] = b->n;
        bb_u64(b, off);
        off += (sizes[j] + align - 1) / align * align;
    }
    bb_pad(b, align);
    lay->data_offset = b->n;
    for (int j = 0; j < nk; j++) {
        if (tys[j] == 8) { /* Q8_0 blocks: byte pattern only */
            for (size_t e = 0; e < sizes[j]; e++)
                bb_u8(b, (uint8_t)(keep[j] + e));
            bb_pad(b, align);
            continue;
        }
        /* deterministic values: element e of tensor j is j + e/1000 */
        size_t es = tys[j] ? 2 : 4;
        for (size_t e = 0; e < sizes[j] / es; e++) {
            float v = (float)keep[j] + (float)e / 1000.0f;
            if (es == 4)
                bb_f32(b, v);
            else {
                uint32_t u;
                memcpy(&u, &v, 4);
                uint16_t h = (uint16_t)(u >> 16); /* BF16 truncation; F16 bits are just data */
                bb_bytes(b, &h, 2);
            }
        }
        bb_pad(b, align);
    }
}

/* ---- safetensors -------------------------------------------------------- */

/* Writes a safetensors image from a JSON header (padded to 8 with spaces)
 * and a data blob. */
static inline void st_image(bb *b, const char *header, const void *data, size_t n) {
    size_t hl = strlen(header), padded = (hl + 7) / 8 * 8;
    bb_u64(b, padded);
    bb_bytes(b, header, hl);
    for (size_t i = hl; i < padded; i++)
        bb_u8(b, ' ');
    bb_bytes(b, data, n);
}

static inline int write_file(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t w = fwrite(p, 1, n, f);
    return fclose(f) == 0 && w == n ? 0 : -1;
}

/* ---- a tiny HF folder ---------------------------------------------------- */

typedef struct hf_t {
    const char *name;
    int n_dims;
    int rows, cols; /* shape as HF writes it: [rows, cols] or [cols] */
} hf_t;

static const hf_t hf_tensors[] = {
    {"model.embed_tokens.weight", 2, TINY_VOCAB, TINY_EMBD},
    {"model.norm.weight", 1, 0, TINY_EMBD},
    {"model.layers.0.input_layernorm.weight", 1, 0, TINY_EMBD},
    {"model.layers.0.self_attn.q_proj.weight", 2, TINY_HEAD *TINY_HD, TINY_EMBD},
    {"model.layers.0.self_attn.k_proj.weight", 2, TINY_KV *TINY_HD, TINY_EMBD},
    {"model.layers.0.self_attn.v_proj.weight", 2, TINY_KV *TINY_HD, TINY_EMBD},
    {"model.layers.0.self_attn.o_proj.weight", 2, TINY_EMBD, TINY_HEAD *TINY_HD},
    {"model.layers.0.self_attn.q_norm.weight", 1, 0, TINY_HD},
    {"model.layers.0.self_attn.k_norm.weight", 1, 0, TINY_HD},
    {"model.layers.0.post_attention_layernorm.weight", 1, 0, TINY_EMBD},
    {"model.layers.0.mlp.gate_proj.weight", 2, TINY_FF, TINY_EMBD},
    {"model.layers.0.mlp.up_proj.weight", 2, TINY_FF, TINY_EMBD},
    {"model.layers.0.mlp.down_proj.weight", 2, TINY_EMBD, TINY_FF},
    {"lm_head.weight", 2, TINY_VOCAB, TINY_EMBD},
};
#define N_HF_T 14

/* Writes tensors [from, to) of hf_tensors as one safetensors file (F32,
 * element e of tensor i = i + e/1000); `skip`/`bad` as in tiny_opts. */
static inline void hf_file(bb *b, int from, int to, const char *skip, const char *bad) {
    char h[8192];
    size_t k = 0;
    bb data = {0};
    k += (size_t)snprintf(h + k, sizeof h - k, "{");
    for (int i = from; i < to; i++) {
        const hf_t *t = &hf_tensors[i];
        if (skip && !strcmp(skip, t->name)) continue;
        int rows = t->rows + (bad && !strcmp(bad, t->name) && t->n_dims == 2);
        int cols = t->cols + (bad && !strcmp(bad, t->name) && t->n_dims == 1);
        size_t n = (size_t)(t->n_dims == 2 ? rows : 1) * (size_t)cols;
        size_t begin = data.n;
        for (size_t e = 0; e < n; e++)
            bb_f32(&data, (float)i + (float)e / 1000.0f);
        if (t->n_dims == 2)
            k += (size_t)snprintf(h + k, sizeof h - k,
                                  "%s\"%s\":{\"dtype\":\"F32\",\"shape\":[%d,%d],"
                                  "\"data_offsets\":[%zu,%zu]}",
                                  k > 1 ? "," : "", t->name, rows, cols, begin, data.n);
        else
            k += (size_t)snprintf(h + k, sizeof h - k,
                                  "%s\"%s\":{\"dtype\":\"F32\",\"shape\":[%d],"
                                  "\"data_offsets\":[%zu,%zu]}",
                                  k > 1 ? "," : "", t->name, cols, begin, data.n);
    }
    snprintf(h + k, sizeof h - k, "}");
    st_image(b, h, data.p, data.n);
    bb_free(&data);
}

static const char *const tiny_config =
    "{\"architectures\":[\"Qwen3ForCausalLM\"],\"model_type\":\"qwen3\",\"hidden_size\":32,"
    "\"num_hidden_layers\":1,\"num_attention_heads\":2,\"num_key_value_heads\":1,"
    "\"head_dim\":16,\"intermediate_size\":64,\"vocab_size\":12,"
    "\"max_position_embeddings\":4096,\"rope_theta\":1000000,\"rms_norm_eps\":1e-06,"
    "\"tie_word_embeddings\":%s,\"torch_dtype\":\"float32\"}";

static const char *const tiny_tokenizer =
    "{\"version\":\"1.0\",\"added_tokens\":[{\"id\":10,\"content\":\"<|im_start|>\","
    "\"special\":true},{\"id\":11,\"content\":\"<|im_end|>\",\"special\":true}],"
    "\"normalizer\":null,\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":false,"
    "\"trim_offsets\":false,\"use_regex\":true},"
    "\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1,\"c\":2,\"d\":3,\"e\":4,\"f\":5,"
    "\"g\":6,\"h\":7,\"ab\":8,\"cd\":9},\"merges\":[\"a b\",\"c d\"]}}";

#endif
