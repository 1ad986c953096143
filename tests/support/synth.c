#include "support/synth.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "convert/gguf_writer.h"
#include "convert/qwen3_meta.h"
#include "support/st_writer.h"
#include "quant/mix.h"
#include "quant/quantize.h"
#include "util/half.h"

static const char *const mix_names[SYNTH_N_MIX] = {
    [SYNTH_F32] = "f32",       [SYNTH_F16] = "f16",       [SYNTH_BF16] = "bf16",
    [SYNTH_Q8_0] = "q8_0",     [SYNTH_Q4_0] = "q4_0",     [SYNTH_Q4_K] = "q4_k",
    [SYNTH_Q6_K] = "q6_k",     [SYNTH_Q4_K_M] = "q4_k_m", [SYNTH_Q4_1] = "q4_1",
    [SYNTH_Q5_0] = "q5_0",     [SYNTH_Q5_1] = "q5_1",     [SYNTH_Q2_K] = "q2_k",
    [SYNTH_Q3_K_S] = "q3_k_s", [SYNTH_Q3_K_M] = "q3_k_m", [SYNTH_Q3_K_L] = "q3_k_l",
    [SYNTH_Q4_K_S] = "q4_k_s", [SYNTH_Q5_K_S] = "q5_k_s", [SYNTH_Q5_K_M] = "q5_k_m",
    [SYNTH_IQ4_NL] = "iq4_nl", [SYNTH_IQ4_XS] = "iq4_xs", [SYNTH_MXFP4] = "mxfp4",
};

/* llama-quantize's mix of the same name, or NULL (the pure q4_k, q6_k, mxfp4) */
static const inf_mix *llama_mix(synth_mix m) {
    return (m >= SYNTH_Q4_1 || m == SYNTH_Q4_K_M) && m != SYNTH_MXFP4 ? inf_mix_find(mix_names[m])
                                                                      : NULL;
}

const char *synth_mix_name(synth_mix m) {
    return (unsigned)m < SYNTH_N_MIX ? mix_names[m] : "unknown";
}

int synth_mix_parse(const char *s) {
    for (int m = 0; m < SYNTH_N_MIX; m++)
        if (!strcmp(s, mix_names[m])) return m;
    return -1;
}

int synth_preset(inf_hparams *hp, const char *name) {
    if (!strcmp(name, "tiny")) {
        *hp = (inf_hparams){.n_layer = 4,
                            .n_embd = 256,
                            .n_head = 4,
                            .n_head_kv = 2,
                            .head_dim = 64,
                            .n_ff = 768,
                            .n_vocab = 151936,
                            .n_ctx_train = 4096,
                            .rope_theta = 1e6f,
                            .rms_eps = 1e-6f,
                            .tied_output = true};
        return 0;
    }
    if (!strcmp(name, "qwen3-0.6b")) {
        *hp = (inf_hparams){.n_layer = 28,
                            .n_embd = 1024,
                            .n_head = 16,
                            .n_head_kv = 8,
                            .head_dim = 128,
                            .n_ff = 3072,
                            .n_vocab = 151936,
                            .n_ctx_train = 40960,
                            .rope_theta = 1e6f,
                            .rms_eps = 1e-6f,
                            .tied_output = true};
        return 0;
    }
    if (!strcmp(name, "tiny-moe")) {
        *hp = (inf_hparams){.n_layer = 4,
                            .n_embd = 256,
                            .n_head = 4,
                            .n_head_kv = 2,
                            .head_dim = 64,
                            .n_ff = 768,
                            .n_vocab = 151936,
                            .n_ctx_train = 4096,
                            .rope_theta = 1e6f,
                            .rms_eps = 1e-6f,
                            .tied_output = true,
                            .n_expert = 8,
                            .n_expert_used = 2,
                            .n_ff_exp = 256,
                            .norm_topk_prob = true};
        return 0;
    }
    /* Qwen3-30B-A3B's shapes; "-6l" keeps six of its 48 layers (benchmarks) */
    if (!strcmp(name, "qwen3-30b-a3b-6l") || !strcmp(name, "qwen3-30b-a3b")) {
        *hp = (inf_hparams){.n_layer = strcmp(name, "qwen3-30b-a3b") ? 6 : 48,
                            .n_embd = 2048,
                            .n_head = 32,
                            .n_head_kv = 4,
                            .head_dim = 128,
                            .n_ff = 6144,
                            .n_vocab = 151936,
                            .n_ctx_train = 40960,
                            .rope_theta = 1e6f,
                            .rms_eps = 1e-6f,
                            .tied_output = false,
                            .n_expert = 128,
                            .n_expert_used = 8,
                            .n_ff_exp = 768,
                            .norm_topk_prob = true};
        return 0;
    }
    return -1;
}

/* Per-block tensors: role, GGUF suffix, HF suffix. */
static const struct {
    synth_role role;
    const char *gguf, *hf;
} block_tensors[] = {
    {SYNTH_ATTN_NORM, "attn_norm", "input_layernorm"},
    {SYNTH_ATTN_Q, "attn_q", "self_attn.q_proj"},
    {SYNTH_ATTN_K, "attn_k", "self_attn.k_proj"},
    {SYNTH_ATTN_V, "attn_v", "self_attn.v_proj"},
    {SYNTH_ATTN_OUTPUT, "attn_output", "self_attn.o_proj"},
    {SYNTH_ATTN_Q_NORM, "attn_q_norm", "self_attn.q_norm"},
    {SYNTH_ATTN_K_NORM, "attn_k_norm", "self_attn.k_norm"},
    {SYNTH_FFN_NORM, "ffn_norm", "post_attention_layernorm"},
    {SYNTH_FFN_GATE, "ffn_gate", "mlp.gate_proj"},
    {SYNTH_FFN_UP, "ffn_up", "mlp.up_proj"},
    {SYNTH_FFN_DOWN, "ffn_down", "mlp.down_proj"},
};
enum { N_BLOCK_TENSORS = sizeof block_tensors / sizeof block_tensors[0] };
/* A MoE block: the attention and ffn_norm as above, then these. The HF names
 * of the expert tensors are the fused layout's (per-expert names are made
 * when writing). */
static const struct {
    synth_role role;
    const char *gguf, *hf;
} moe_tensors[] = {
    {SYNTH_FFN_GATE_INP, "ffn_gate_inp.weight", "mlp.gate.weight"},
    {SYNTH_FFN_GATE_EXPS, "ffn_gate_exps.weight", "mlp.experts.gate_proj"},
    {SYNTH_FFN_UP_EXPS, "ffn_up_exps.weight", "mlp.experts.up_proj"},
    {SYNTH_FFN_DOWN_EXPS, "ffn_down_exps.weight", "mlp.experts.down_proj"},
};
enum { N_MOE_TENSORS = sizeof moe_tensors / sizeof moe_tensors[0], N_SHARED = 8 };

/* Shape fastest-first {n_in, n_out} of a role; n_out = 0 for 1-D tensors. */
static void role_shape(int64_t ne[3], synth_role r, const inf_hparams *hp) {
    ne[2] = 1;
    const int64_t q = (int64_t)hp->n_head * hp->head_dim,
                  kv = (int64_t)hp->n_head_kv * hp->head_dim;
    switch (r) {
    case SYNTH_TOKEN_EMBD:
        ne[0] = hp->n_embd, ne[1] = hp->n_vocab;
        break;
    case SYNTH_OUTPUT_NORM:
    case SYNTH_ATTN_NORM:
    case SYNTH_FFN_NORM:
        ne[0] = hp->n_embd, ne[1] = 0;
        break;
    case SYNTH_ATTN_Q_NORM:
    case SYNTH_ATTN_K_NORM:
        ne[0] = hp->head_dim, ne[1] = 0;
        break;
    case SYNTH_ATTN_Q:
        ne[0] = hp->n_embd, ne[1] = q;
        break;
    case SYNTH_ATTN_K:
    case SYNTH_ATTN_V:
        ne[0] = hp->n_embd, ne[1] = kv;
        break;
    case SYNTH_ATTN_OUTPUT:
        ne[0] = q, ne[1] = hp->n_embd;
        break;
    case SYNTH_FFN_GATE:
    case SYNTH_FFN_UP:
        ne[0] = hp->n_embd, ne[1] = hp->n_ff;
        break;
    case SYNTH_FFN_DOWN:
        ne[0] = hp->n_ff, ne[1] = hp->n_embd;
        break;
    case SYNTH_FFN_GATE_INP:
        ne[0] = hp->n_embd, ne[1] = hp->n_expert;
        break;
    case SYNTH_FFN_GATE_EXPS:
    case SYNTH_FFN_UP_EXPS:
        ne[0] = hp->n_embd, ne[1] = hp->n_ff_exp, ne[2] = hp->n_expert;
        break;
    case SYNTH_FFN_DOWN_EXPS:
        ne[0] = hp->n_ff_exp, ne[1] = hp->n_embd, ne[2] = hp->n_expert;
        break;
    }
}

static void set_tensor(synth_tensor *t, synth_role r, int layer, const inf_hparams *hp) {
    t->role = r;
    t->layer = layer;
    role_shape(t->ne, r, hp);
    t->n_dims = t->ne[2] > 1 ? 3 : t->ne[1] ? 2 : 1;
    if (!t->ne[1]) t->ne[1] = 1;
}

int synth_tensor_list(synth_tensor **out, const inf_hparams *hp) {
    const bool moe = hp->n_expert > 0;
    const int per_layer = moe ? N_SHARED + N_MOE_TENSORS : N_BLOCK_TENSORS;
    int n = 2 + hp->n_layer * per_layer + !hp->tied_output;
    synth_tensor *t = calloc((size_t)n, sizeof *t);
    *out = t;
    if (!t) return -1;
    int k = 0;
    set_tensor(&t[k], SYNTH_TOKEN_EMBD, -1, hp);
    snprintf(t[k].gguf_name, sizeof t[k].gguf_name, "token_embd.weight");
    snprintf(t[k].hf_name, sizeof t[k].hf_name, "model.embed_tokens.weight");
    k++;
    for (int l = 0; l < hp->n_layer; l++)
        for (int j = 0; j < per_layer; j++, k++) {
            if (moe && j >= N_SHARED) {
                const int m = j - N_SHARED;
                set_tensor(&t[k], moe_tensors[m].role, l, hp);
                snprintf(t[k].gguf_name, sizeof t[k].gguf_name, "blk.%d.%s", l,
                         moe_tensors[m].gguf);
                snprintf(t[k].hf_name, sizeof t[k].hf_name, "model.layers.%d.%s", l,
                         moe_tensors[m].hf);
                continue;
            }
            set_tensor(&t[k], block_tensors[j].role, l, hp);
            snprintf(t[k].gguf_name, sizeof t[k].gguf_name, "blk.%d.%s.weight", l,
                     block_tensors[j].gguf);
            snprintf(t[k].hf_name, sizeof t[k].hf_name, "model.layers.%d.%s.weight", l,
                     block_tensors[j].hf);
        }
    set_tensor(&t[k], SYNTH_OUTPUT_NORM, -1, hp);
    snprintf(t[k].gguf_name, sizeof t[k].gguf_name, "output_norm.weight");
    snprintf(t[k].hf_name, sizeof t[k].hf_name, "model.norm.weight");
    k++;
    if (!hp->tied_output) {
        set_tensor(&t[k], SYNTH_TOKEN_EMBD, -1, hp);
        t[k].role = SYNTH_TOKEN_EMBD; /* same shape and scale as the embedding */
        snprintf(t[k].gguf_name, sizeof t[k].gguf_name, "output.weight");
        snprintf(t[k].hf_name, sizeof t[k].hf_name, "lm_head.weight");
    }
    return n;
}

/* ---- weights ---- */

static uint64_t mix64(uint64_t z) { /* splitmix64's finalizer */
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t name_key(const char *name, uint64_t seed) {
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        h = (h ^ *p) * 0x100000001b3ull;
    return mix64(h ^ mix64(seed + 0x9e3779b97f4a7c15ull));
}

static bool role_is_norm(synth_role r) {
    return r == SYNTH_OUTPUT_NORM || r == SYNTH_ATTN_NORM || r == SYNTH_FFN_NORM ||
           r == SYNTH_ATTN_Q_NORM || r == SYNTH_ATTN_K_NORM;
}

void synth_fill(float *dst, const synth_tensor *t, const inf_hparams *hp, uint64_t seed,
                int64_t start, int64_t n) {
    float mean = 0.0f, std;
    if (role_is_norm(t->role))
        mean = 1.0f, std = 0.05f;
    else if (t->role == SYNTH_TOKEN_EMBD)
        std = 2.0f / sqrtf((float)hp->n_embd);
    else
        std = 1.0f / sqrtf((float)t->ne[0]);
    /* Element i is a function of (key, i) alone (counter-based splitmix64),
     * so any range can be generated on its own. A sum of four 16-bit
     * uniforms (Irwin-Hall, mean 2, variance 1/3) is a cheap, bounded
     * (±3.46σ) approximation of a normal. */
    const uint64_t key = name_key(t->gguf_name, seed);
    const float k = std * sqrtf(3.0f) / 65536.0f;
    for (int64_t i = 0; i < n; i++) {
        uint64_t z = mix64(key + (uint64_t)(start + i + 1) * 0x9e3779b97f4a7c15ull);
        int32_t s = (int32_t)(z & 0xffff) + (int32_t)((z >> 16) & 0xffff) +
                    (int32_t)((z >> 32) & 0xffff) + (int32_t)(z >> 48) - 2 * 65536;
        dst[i] = mean + k * (float)s;
    }
    /* Norm vectors stay F32 in GGUF files but take the file's type in HF
     * folders; values exact in bf16 (hence in f16 near 1) keep both the same. */
    if (role_is_norm(t->role))
        for (int64_t i = 0; i < n; i++)
            dst[i] = inf_bf16_to_f32(inf_f32_to_bf16(dst[i]));
}

/* ---- type mixes ---- */

inf_dtype synth_gguf_type(synth_mix m, const synth_tensor *t, const inf_hparams *hp) {
    /* norms, and the router (llama.cpp keeps ffn_gate_inp F32) */
    if (t->n_dims == 1 || t->role == SYNTH_FFN_GATE_INP) return INF_F32;
    switch (m) {
    case SYNTH_F32:
        return INF_F32;
    case SYNTH_F16:
        return INF_F16;
    case SYNTH_BF16:
        return INF_BF16;
    case SYNTH_Q8_0:
        return INF_Q8_0;
    case SYNTH_Q4_0:
        return t->role == SYNTH_TOKEN_EMBD ? INF_Q6_K : INF_Q4_0;
    case SYNTH_Q4_K:
        return INF_Q4_K;
    case SYNTH_Q6_K:
        return INF_Q6_K;
    case SYNTH_MXFP4:
        return INF_MXFP4;
    default: {
        const inf_mix *mix = llama_mix(m);
        INF_ASSERT(mix && "bad mix");
        const inf_mix_tensor mt = {.name = t->gguf_name,
                                   .n_dims = t->n_dims,
                                   .ne0 = t->ne[0],
                                   .layer = t->layer,
                                   .n_layer = hp->n_layer,
                                   .n_gqa = hp->n_head / hp->n_head_kv,
                                   .n_expert = hp->n_expert,
                                   .tied = hp->tied_output,
                                   .keep = INF_F32};
        return inf_mix_tensor_type(mix, &mt);
    }
    }
}

int synth_hf_type(synth_mix m) {
    switch (m) {
    case SYNTH_F32:
        return INF_F32;
    case SYNTH_F16:
        return INF_F16;
    case SYNTH_BF16:
        return INF_BF16;
    default:
        return -1;
    }
}

uint32_t synth_file_type(synth_mix m) {
    /* llama_ftype: ALL_F32 0, MOSTLY_F16 1, Q4_0 2, Q8_0 7, Q4_K_S 14, Q4_K_M 15, Q6_K 18, BF16 32
     */
    static const uint32_t ft[SYNTH_N_MIX] = {
        [SYNTH_F32] = 0,  [SYNTH_F16] = 1,   [SYNTH_BF16] = 32, [SYNTH_Q8_0] = 7,
        [SYNTH_Q4_0] = 2, [SYNTH_Q4_K] = 14, [SYNTH_Q6_K] = 18, [SYNTH_Q4_K_M] = 15,
    };
    if (m == SYNTH_MXFP4) return 38; /* MOSTLY_MXFP4_MOE */
    if (llama_mix(m)) return llama_mix(m)->ftype;
    return ft[m];
}

/* ---- writing ---- */

/* One output being written: a GGUF writer, or one safetensors writer per shard. */
typedef struct {
    const synth_output *o;
    char tmp[4096];
    gguf_writer *gguf;
    st_writer *st[SYNTH_HF_SHARDS];
    int n_st;
    struct file_tensor *ft; /* [n_ft] the tensors of this output, in file order */
    int n_ft;
    struct piece *pieces; /* [n_pieces] their element ranges of the maker's tensors */
    int n_pieces;
} sink;

/* A range of elements of one of the maker's tensors (whole rows). */
typedef struct piece {
    const synth_tensor *src;
    int64_t start, n;
} piece;

/* One tensor as an output file holds it: a name, a shape, and the pieces
 * whose values it holds one after the other. */
typedef struct file_tensor {
    char name[96];
    int n_dims;
    int64_t ne[3];           /* fastest-first */
    const synth_tensor *src; /* decides the type */
    int first, n_pieces;
} file_tensor;

static int add_piece(sink *s, const synth_tensor *src, int64_t start, int64_t n) {
    piece *g = realloc(s->pieces, (size_t)(s->n_pieces + 1) * sizeof *g);
    if (!g) return -1;
    s->pieces = g;
    g[s->n_pieces++] = (piece){src, start, n};
    s->ft[s->n_ft - 1].n_pieces++;
    return 0;
}

static int add_file_tensor(sink *s, const char *name, const synth_tensor *src, int n_dims,
                           int64_t ne0, int64_t ne1, int64_t ne2) {
    file_tensor *f = realloc(s->ft, (size_t)(s->n_ft + 1) * sizeof *f);
    if (!f) return -1;
    s->ft = f;
    f += s->n_ft++;
    memset(f, 0, sizeof *f);
    snprintf(f->name, sizeof f->name, "%s", name);
    f->n_dims = n_dims;
    f->ne[0] = ne0, f->ne[1] = ne1, f->ne[2] = ne2;
    f->src = src;
    f->first = s->n_pieces;
    return 0;
}

/* The output's tensors: the maker's, under the format's names, with the
 * experts laid out as the format holds them (see synth.h). */
static int plan_tensors(sink *s, const synth_tensor *ts, int n_tensors) {
    const synth_kind kind = s->o->kind;
    for (int i = 0; i < n_tensors; i++) {
        const synth_tensor *t = &ts[i];
        const int64_t total = t->ne[0] * t->ne[1] * t->ne[2];
        const bool expert = t->role == SYNTH_FFN_GATE_EXPS || t->role == SYNTH_FFN_UP_EXPS ||
                            t->role == SYNTH_FFN_DOWN_EXPS;
        if (kind == SYNTH_GGUF || !expert) {
            if (add_file_tensor(s, kind == SYNTH_GGUF ? t->gguf_name : t->hf_name, t, t->n_dims,
                                t->ne[0], t->ne[1], t->ne[2]) ||
                add_piece(s, t, 0, total))
                return -1;
            continue;
        }
        if (t->role == SYNTH_FFN_UP_EXPS) continue; /* written with the gate */
        const int64_t X = t->ne[2], slice = t->ne[0] * t->ne[1];
        char name[96];
        if (kind == SYNTH_HF_FUSED) {
            if (t->role == SYNTH_FFN_DOWN_EXPS) {
                if (add_file_tensor(s, t->hf_name, t, 3, t->ne[0], t->ne[1], X) ||
                    add_piece(s, t, 0, total))
                    return -1;
                continue;
            }
            /* gate_up_proj [E, 2F, H]: each expert's gate rows, then its up rows */
            snprintf(name, sizeof name, "model.layers.%d.mlp.experts.gate_up_proj", t->layer);
            if (add_file_tensor(s, name, t, 3, t->ne[0], 2 * t->ne[1], X)) return -1;
            for (int64_t e = 0; e < X; e++)
                if (add_piece(s, t, e * slice, slice) || add_piece(s, t + 1, e * slice, slice))
                    return -1;
            continue;
        }
        if (t->role == SYNTH_FFN_DOWN_EXPS) continue; /* written with the gate */
        /* one tensor per expert: gate, up, down of expert 0, then expert 1, ... */
        static const char *const proj[3] = {"gate_proj", "up_proj", "down_proj"};
        for (int64_t e = 0; e < X; e++)
            for (int j = 0; j < 3; j++) {
                const synth_tensor *src = t + j;
                snprintf(name, sizeof name, "model.layers.%d.mlp.experts.%lld.%s.weight", t->layer,
                         (long long)e, proj[j]);
                if (add_file_tensor(s, name, src, 2, src->ne[0], src->ne[1], 1) ||
                    add_piece(s, src, e * src->ne[0] * src->ne[1], src->ne[0] * src->ne[1]))
                    return -1;
            }
    }
    return 0;
}

static inf_dtype file_type(const sink *s, const file_tensor *f, const inf_hparams *hp) {
    return s->o->kind == SYNTH_GGUF ? synth_gguf_type(s->o->mix, f->src, hp)
                                    : (inf_dtype)synth_hf_type(s->o->mix);
}

static void gguf_metadata(gguf_writer *w, const synth_model *m, synth_mix mix) {
    inf_convert_qwen3_meta(w, m->hp.n_expert ? "qwen3moe" : "qwen3", m->name, &m->hp,
                           synth_file_type(mix));
}

static int gguf_tokenizer(gguf_writer *w, const inf_vocab_desc *v, int n_vocab, inf_err *err) {
    return inf_convert_tokenizer_meta(w, v, n_vocab, err);
}

static int make_dir(const char *path, inf_err *err) {
    if (mkdir(path, 0755) != 0 && errno != EEXIST)
        return inf_fail(err, "%s: cannot create folder: %s", path, strerror(errno));
    return 0;
}

static void shard_name(char *buf, size_t n, int k) {
    snprintf(buf, n, "model-%05d-of-%05d.safetensors", k + 1, SYNTH_HF_SHARDS);
}

/* Removes an HF folder this module wrote (only the files it writes), so a
 * finished temporary folder can take its name. */
static int remove_hf_dir(const char *dir, inf_err *err) {
    char p[4200], name[64];
    static const char *const files[] = {"config.json", "model.safetensors",
                                        "model.safetensors.index.json", "tokenizer.json",
                                        "tokenizer_config.json"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, files[i]);
        unlink(p);
    }
    for (int k = 0; k < SYNTH_HF_SHARDS; k++) {
        shard_name(name, sizeof name, k);
        snprintf(p, sizeof p, "%s/%s", dir, name);
        unlink(p);
    }
    if (rmdir(dir) != 0 && errno != ENOENT)
        return inf_fail(err, "%s: cannot replace folder: %s", dir, strerror(errno));
    return 0;
}

static int shard_of(int i, int n_tensors) {
    return (int)((int64_t)i * SYNTH_HF_SHARDS / n_tensors);
}

/* Declares the tensors and opens the output's file(s) under the temporary name. */
static int sink_open(sink *s, const synth_model *m, const synth_tensor *ts, int n_tensors,
                     inf_err *err) {
    const synth_output *o = s->o;
    snprintf(s->tmp, sizeof s->tmp, "%s.tmp", o->path);
    if (plan_tensors(s, ts, n_tensors)) return inf_fail(err, "%s: out of memory", o->path);
    if (o->kind == SYNTH_GGUF) {
        s->gguf = gguf_writer_create();
        if (!s->gguf) return inf_fail(err, "%s: out of memory", o->path);
        gguf_metadata(s->gguf, m, o->mix);
        if (m->vocab && gguf_tokenizer(s->gguf, m->vocab, m->hp.n_vocab, err))
            return inf_fail_ctx(err, "%s", o->path);
        for (int i = 0; i < s->n_ft; i++) {
            const file_tensor *f = &s->ft[i];
            const int64_t ne[4] = {f->ne[0], f->ne[1], f->ne[2], 1};
            gguf_writer_add_tensor(s->gguf, f->name, file_type(s, f, &m->hp), f->n_dims, ne);
        }
        return gguf_writer_open(s->gguf, s->tmp, err);
    }
    int dtype = synth_hf_type(o->mix);
    if (dtype < 0)
        return inf_fail(err, "%s: Hugging Face folders hold f32, f16 or bf16, not %s", o->path,
                        synth_mix_name(o->mix));
    if (remove_hf_dir(s->tmp, err) || make_dir(s->tmp, err)) return -1;
    s->n_st = o->kind == SYNTH_HF_SHARDED ? SYNTH_HF_SHARDS : 1;
    for (int k = 0; k < s->n_st; k++)
        if (!(s->st[k] = st_writer_create())) return inf_fail(err, "%s: out of memory", o->path);
    for (int i = 0; i < s->n_ft; i++) {
        const file_tensor *f = &s->ft[i];
        int64_t shape[3]; /* HF: slowest-first, [experts][out][in] */
        for (int d = 0; d < f->n_dims; d++)
            shape[d] = f->ne[f->n_dims - 1 - d];
        st_writer *w = s->st[s->n_st > 1 ? shard_of(i, s->n_ft) : 0];
        st_writer_add_tensor(w, f->name, (inf_dtype)dtype, f->n_dims, shape);
    }
    char p[4200], name[64];
    for (int k = 0; k < s->n_st; k++) {
        if (s->n_st > 1)
            shard_name(name, sizeof name, k);
        else
            snprintf(name, sizeof name, "model.safetensors");
        snprintf(p, sizeof p, "%s/%s", s->tmp, name);
        if (st_writer_open(s->st[k], p, err)) return -1;
    }
    return 0;
}

static int sink_write(sink *s, int tensor, int n_tensors, const void *data, size_t n,
                      inf_err *err) {
    if (s->gguf) return gguf_writer_write(s->gguf, data, n, err);
    return st_writer_write(s->st[s->n_st > 1 ? shard_of(tensor, n_tensors) : 0], data, n, err);
}

/* Closes the files, writes the folder's JSON files, renames into place. */
static int sink_finish(sink *s, const synth_model *m, const synth_tensor *ts, int n_tensors,
                       inf_err *err) {
    const synth_output *o = s->o;
    if (s->gguf) {
        if (gguf_writer_close(s->gguf, err)) return -1;
        if (rename(s->tmp, o->path) != 0)
            return inf_fail(err, "%s: cannot rename from %s: %s", o->path, s->tmp, strerror(errno));
        return 0;
    }
    uint64_t total = 0;
    for (int k = 0; k < s->n_st; k++) {
        total += st_writer_data_bytes(s->st[k]);
        if (st_writer_close(s->st[k], err)) return -1;
    }
    char p[4200];
    if (s->n_st > 1) {
        const char **names = malloc((size_t)s->n_ft * sizeof *names);
        const char **files = malloc((size_t)s->n_ft * sizeof *files);
        char shard_files[SYNTH_HF_SHARDS][64];
        for (int k = 0; k < SYNTH_HF_SHARDS; k++)
            shard_name(shard_files[k], 64, k);
        if (!names || !files) {
            free(names);
            free(files);
            return inf_fail(err, "%s: out of memory", o->path);
        }
        for (int i = 0; i < s->n_ft; i++) {
            names[i] = s->ft[i].name;
            files[i] = shard_files[shard_of(i, s->n_ft)];
        }
        snprintf(p, sizeof p, "%s/model.safetensors.index.json", s->tmp);
        int rc = st_write_index(p, s->n_ft, names, files, total, err);
        free(names);
        free(files);
        if (rc) return -1;
    }
    static const char *const torch_dtype[] = {
        [INF_F32] = "float32", [INF_F16] = "float16", [INF_BF16] = "bfloat16"};
    int bos = m->vocab && m->vocab->bos_id >= 0 ? m->vocab->bos_id : 151643;
    int eos = m->vocab && m->vocab->eos_id >= 0 ? m->vocab->eos_id : 151645;
    snprintf(p, sizeof p, "%s/config.json", s->tmp);
    if (st_write_config(p, &m->hp, torch_dtype[synth_hf_type(o->mix)], bos, eos, err)) return -1;
    const char *tok[2][2] = {{m->tokenizer_json, "tokenizer.json"},
                             {m->tokenizer_config_json, "tokenizer_config.json"}};
    for (int k = 0; k < 2; k++) {
        if (!tok[k][0]) continue;
        snprintf(p, sizeof p, "%s/%s", s->tmp, tok[k][1]);
        if (st_copy_file(p, tok[k][0], err)) return -1;
    }
    if (remove_hf_dir(o->path, err)) return -1;
    if (rename(s->tmp, o->path) != 0)
        return inf_fail(err, "%s: cannot rename from %s: %s", o->path, s->tmp, strerror(errno));
    return 0;
}

static void sink_free(sink *s) {
    free(s->ft);
    free(s->pieces);
    gguf_writer_free(s->gguf);
    for (int k = 0; k < s->n_st; k++)
        st_writer_free(s->st[k]);
}

int synth_write(const synth_model *m, const synth_output *outs, int n_outs, inf_err *err) {
    synth_tensor *ts = NULL;
    int n_tensors = synth_tensor_list(&ts, &m->hp);
    sink *sinks = calloc((size_t)n_outs, sizeof *sinks);
    int64_t max_row = 0;
    for (int i = 0; i < n_tensors; i++)
        max_row = ts[i].ne[0] > max_row ? ts[i].ne[0] : max_row;
    /* about 1 MiB of f32 source per chunk: a whole number of rows */
    const int64_t chunk = max_row > 262144 ? max_row : 262144 / max_row * max_row;
    float *src = malloc((size_t)chunk * sizeof *src);            /* [chunk] */
    unsigned char *conv = malloc((size_t)chunk * sizeof(float)); /* the chunk, converted */
    int rc = 0;
    if (n_tensors < 0 || !sinks || !src || !conv) {
        rc = inf_fail(err, "out of memory");
        goto done;
    }
    for (int k = 0; k < n_outs && !rc; k++) {
        sinks[k].o = &outs[k];
        rc = sink_open(&sinks[k], m, ts, n_tensors, err);
    }
    /* each output's tensors in its own order, each piece a chunk of rows at a time */
    for (int k = 0; k < n_outs && !rc; k++) {
        sink *s = &sinks[k];
        for (int i = 0; i < s->n_ft && !rc; i++) {
            const file_tensor *f = &s->ft[i];
            const inf_dtype type = file_type(s, f, &m->hp);
            for (int p = f->first; p < f->first + f->n_pieces && !rc; p++) {
                const piece *pc = &s->pieces[p];
                const int64_t row = pc->src->ne[0], per = chunk / row * row;
                const size_t rb = inf_dtype_row_bytes(type, row);
                for (int64_t at = 0; at < pc->n && !rc; at += per) {
                    const int64_t n = pc->n - at < per ? pc->n - at : per;
                    synth_fill(src, pc->src, &m->hp, m->seed, pc->start + at, n);
                    for (int64_t r = 0; r < n / row; r++)
                        INF_ASSERT(inf_quantize_row(type, conv + r * rb, src + r * row, row) == 0);
                    rc = sink_write(s, i, s->n_ft, conv, rb * (size_t)(n / row), err);
                }
            }
        }
    }
    for (int k = 0; k < n_outs && !rc; k++)
        rc = sink_finish(&sinks[k], m, ts, n_tensors, err);
done:
    for (int k = 0; sinks && k < n_outs; k++) {
        sink_free(&sinks[k]);
        if (rc && sinks[k].o) { /* leave no half-written temporary behind */
            if (sinks[k].o->kind == SYNTH_GGUF)
                unlink(sinks[k].tmp);
            else
                remove_hf_dir(sinks[k].tmp, NULL);
        }
    }
    free(sinks);
    free(src);
    free(conv);
    free(ts);
    return rc;
}
