/* Load-time packing: every level's pack_panels (the vector code, kernels.h)
 * against the scalar reference inf_pack_panels, byte for byte, for every
 * weight type that packs, under both kind masks (all kinds, and the base
 * kinds, where IQ4 falls back to Q8_0), with the panels split among callers
 * in several ways. The weights are random bytes (so scales take every f16
 * value, NaN and infinity included), the type's quantization of random
 * floats, and the llama.cpp-written fixtures (../shared/fixtures/quant) when
 * they are there. Also the packed-weight arena: copies of many weights share
 * chunks, are 4 KiB aligned, and free in any order. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/arena.h"
#include "backend/cpu_features.h"
#include "backend/kernels.h"
#include "harness.h"
#include "modelfile/gguf.h"
#include "quant/dtype.h"

#define FIXTURES "../shared/fixtures/quant"

static const struct {
    inf_dtype type;
    const char *file; /* its fixture: quant-<file>.gguf */
} types[] = {
    {INF_BF16, "bf16"},   {INF_Q8_0, "q8_0"},   {INF_Q4_0, "q4_0"},       {INF_Q4_1, "q4_1"},
    {INF_Q5_0, "q5_0"},   {INF_Q5_1, "q5_1"},   {INF_Q4_K, "q4_K"},       {INF_Q5_K, "q5_K"},
    {INF_Q6_K, "q6_K"},   {INF_Q3_K, "q3_K"},   {INF_IQ4_NL, "iq4_nl"},   {INF_IQ4_XS, "iq4_xs"},
    {INF_Q2_K, "q2_K"},   {INF_F16, "f16"},     {INF_MXFP4, "mxfp4"},     {INF_IQ3_XXS, "iq3_xxs"},
    {INF_IQ3_S, "iq3_s"}, {INF_IQ2_S, "iq2_s"}, {INF_IQ2_XXS, "iq2_xxs"}, {INF_IQ2_XS, "iq2_xs"},
    {INF_IQ1_S, "iq1_s"}, {INF_IQ1_M, "iq1_m"},
};

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t rand32(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 11);
}

/* panel splits: the whole range, one panel then the rest, three uneven parts */
static void pack_split(const inf_kernels *k, inf_packed *p, const inf_weight *w, int how) {
    const int64_t n = p->n_panels;
    if (how == 0 || n < 3) {
        k->pack_panels(p, w, 0, n);
    } else if (how == 1) {
        k->pack_panels(p, w, 1, n); /* out of order: a slice never reads another */
        k->pack_panels(p, w, 0, 1);
    } else {
        k->pack_panels(p, w, 0, n / 3);
        k->pack_panels(p, w, n - 1, n);
        k->pack_panels(p, w, n / 3, n - 1);
    }
}

/* Packs t with the reference and with each level, compares the bytes. */
static void check_weight(const inf_tensor *t, const char *what, const inf_kernels **lv, int nl) {
    const inf_weight w = {.t = t,
                          .n_in = t->ne[0],
                          .n_out = t->ne[1],
                          .row_bytes = inf_dtype_row_bytes(t->type, t->ne[0])};
    const unsigned masks[2] = {INF_PACK_KINDS_ALL, INF_PACK_KINDS_BASE};
    for (int m = 0; m < 2; m++) {
        inf_packed *ref = NULL;
        CHECK(inf_pack_alloc(&ref, &w, masks[m]) == 0);
        if (!ref) continue;
        inf_pack_panels(ref, &w, 0, ref->n_panels);
        const size_t bytes = (size_t)ref->n_panels * (size_t)ref->n_groups * ref->group_bytes;
        for (int l = 0; l < nl; l++)
            for (int how = 0; how < 3; how++) {
                inf_packed *p = NULL;
                CHECK(inf_pack_alloc(&p, &w, masks[m]) == 0);
                if (!p) continue;
                memset(p->data, 0xA5, bytes); /* no byte left unwritten */
                pack_split(lv[l], p, &w, how);
                size_t bad = bytes;
                for (size_t i = 0; i < bytes; i++)
                    if (p->data[i] != ref->data[i]) {
                        bad = i;
                        break;
                    }
                const size_t gb = ref->group_bytes;
                CHECK_MSG(bad == bytes,
                          "%s %s (kind %d, mask %d) at %s, split %d: byte %zu (panel %zu group %zu "
                          "offset %zu) is 0x%02x, the reference's 0x%02x",
                          inf_dtype_get(t->type)->name, what, ref->kind, m,
                          inf_isa_name(lv[l]->isa), how, bad, bad / (gb * (size_t)ref->n_groups),
                          bad / gb % (size_t)ref->n_groups, bad % gb,
                          bad < bytes ? p->data[bad] : 0, bad < bytes ? ref->data[bad] : 0);
                inf_packed_free(p);
            }
        inf_packed_free(ref);
    }
}

static void check_random(inf_dtype type, const inf_kernels **lv, int nl) {
    const inf_dtype_info *ti = inf_dtype_get(type);
    /* 5 panels and a tail of 3 rows; rows of 2 super-blocks, or 7 blocks of 32 */
    const int64_t n_out = 16 * 5 + 3, n_in = ti->block == 256 ? 512 : 7 * 32;
    const size_t rb = inf_dtype_row_bytes(type, n_in), nbytes = rb * (size_t)n_out;
    uint8_t *data = malloc(nbytes);
    float *x = malloc(sizeof(float) * (size_t)n_in);
    inf_tensor t = {.name = "w",
                    .type = type,
                    .n_dims = 2,
                    .ne = {n_in, n_out, 1, 1},
                    .data = data,
                    .nbytes = nbytes};
    for (size_t i = 0; i < nbytes; i++)
        data[i] = (uint8_t)rand32();
    check_weight(&t, "random bytes", lv, nl);
    if (ti->quant) {
        for (int64_t r = 0; r < n_out; r++) {
            for (int64_t i = 0; i < n_in; i++)
                x[i] = ((float)(rand32() % 20001) - 10000.0f) / 10000.0f * (float)(1 + r % 5);
            ti->quant(data + (size_t)r * rb, x, n_in);
        }
        check_weight(&t, "quantized", lv, nl);
    }
    free(x);
    free(data);
}

static void check_fixture(const char *dir, inf_dtype type, const char *file, const inf_kernels **lv,
                          int nl) {
    char path[512];
    snprintf(path, sizeof path, "%s/quant-%s.gguf", dir, file);
    gguf_file *g = NULL;
    inf_err err = {0};
    if (gguf_open(&g, path, &err)) {
        CHECK_MSG(0, "%s: %s", path, err.msg);
        return;
    }
    for (int64_t i = 0; i < g->n_tensors; i++) {
        const gguf_tensor_info *q = &g->tensors[i];
        if (strcmp(q->name, "q")) continue;
        inf_tensor t = {.name = "q",
                        .type = type,
                        .n_dims = 2,
                        .ne = {q->ne[0], q->ne[1], 1, 1},
                        .data = q->data,
                        .nbytes = inf_dtype_row_bytes(type, q->ne[0]) * (size_t)q->ne[1]};
        check_weight(&t, "fixture", lv, nl);
    }
    gguf_close(g);
}

/* Many small copies (MoE experts) share arena chunks; freeing them in any
 * order, and a second set after the first is gone, works. */
static void check_arena(void) {
    enum { N = 40 };
    const int64_t n_in = 1024, n_out = 64;
    const size_t rb = inf_dtype_row_bytes(INF_Q8_0, n_in);
    uint8_t *data = calloc(rb * (size_t)n_out, 1);
    inf_tensor t = {.name = "w",
                    .type = INF_Q8_0,
                    .n_dims = 2,
                    .ne = {n_in, n_out, 1, 1},
                    .data = data,
                    .nbytes = rb * (size_t)n_out};
    const inf_weight w = {.t = &t, .n_in = n_in, .n_out = n_out, .row_bytes = rb};
    const int before = inf_arena_chunks();
    for (int round = 0; round < 2; round++) {
        inf_packed *p[N];
        for (int i = 0; i < N; i++) {
            CHECK(inf_pack_weight(&p[i], &w) == 0 && p[i]);
            if (!p[i]) return;
            CHECK(((uintptr_t)p[i]->data & 4095) == 0);
            if (i) CHECK(p[i]->data != p[i - 1]->data);
            if (i) CHECK(p[i]->chunk == p[i - 1]->chunk); /* 68 KiB each: one chunk holds them */
        }
        const size_t bytes = (size_t)p[0]->n_panels * (size_t)p[0]->n_groups * p[0]->group_bytes;
        for (int i = 0; i < N; i++) /* no two copies overlap: each keeps its own bytes */
            memset(p[i]->data, i, bytes);
        int ok = 1;
        for (int i = 0; i < N; i++)
            for (size_t b = 0; b < bytes; b += 511)
                ok &= p[i]->data[b] == (uint8_t)i;
        CHECK(ok);
        for (int i = 0; i < N; i += 2)
            inf_packed_free(p[i]);
        for (int i = N - 1; i > 0; i -= 2)
            inf_packed_free(p[i]);
        CHECK_INT(inf_arena_chunks(), before); /* the last copy took its chunk with it */
    }
    /* a large copy (71 MB) after a small one; both released, nothing stays mapped */
    inf_tensor big = t;
    big.ne[1] = 16 * 4096;
    big.nbytes = rb * 16 * 4096;
    uint8_t *bigdata = calloc(big.nbytes, 1);
    big.data = bigdata;
    const inf_weight wb = {.t = &big, .n_in = n_in, .n_out = big.ne[1], .row_bytes = rb};
    inf_packed *small = NULL, *large = NULL;
    CHECK(inf_pack_weight(&small, &w) == 0 && small);
    CHECK(inf_pack_weight(&large, &wb) == 0 && large);
    if (small && large) CHECK(large->data >= small->data + 65536 || large->chunk != small->chunk);
    inf_packed_free(small);
    inf_packed_free(large);
    CHECK_INT(inf_arena_chunks(), before);
    free(bigdata);
    free(data);
}

/* MXFP4 packs as the IQ4 kind (indices into its own values), or the Q8_0 kind
 * where a level lacks IQ4, only where every block's scale 2^(e - 128) is an f16
 * (or the block is zeros, 0 at any scale): one block outside, with a nonzero
 * value, leaves the weight to the generic path */
static void check_mxfp4_fits(void) {
    enum { N_IN = 64, N_OUT = 16 };
    inf_block_mxfp4 b[N_OUT][N_IN / 32];
    for (int r = 0; r < N_OUT; r++)
        for (int i = 0; i < N_IN / 32; i++) {
            b[r][i].e = (uint8_t)(104 + (r + i) % 40); /* 2^-24 .. 2^15 */
            for (int j = 0; j < 16; j++)
                b[r][i].qs[j] = (uint8_t)rand32();
        }
    const inf_tensor t = {.name = "w",
                          .type = INF_MXFP4,
                          .n_dims = 2,
                          .ne = {N_IN, N_OUT, 1, 1},
                          .data = b,
                          .nbytes = sizeof b};
    const inf_weight w = {.t = &t, .n_in = N_IN, .n_out = N_OUT, .row_bytes = sizeof b[0]};
    inf_packed p;
    CHECK(inf_pack_plan(&p, &w, INF_PACK_KINDS_ALL) && p.kind == INF_PACK_IQ4 &&
          memcmp(p.values, inf_fp4_values, sizeof p.values) == 0);
    CHECK(inf_pack_plan(&p, &w, INF_PACK_KINDS_BASE) && p.kind == INF_PACK_Q8_0);
    b[5][1].e = 103;
    CHECK_MSG(!inf_pack_plan(&p, &w, INF_PACK_KINDS_ALL), "MXFP4 with a scale of 2^-25 packed");
    memset(b[5][1].qs, 0x88, 16); /* -0 everywhere: zeros */
    CHECK(inf_pack_plan(&p, &w, INF_PACK_KINDS_ALL));
    b[9][0].e = 144;
    CHECK_MSG(!inf_pack_plan(&p, &w, INF_PACK_KINDS_ALL), "MXFP4 with a scale of 2^16 packed");
}

/* The grid types pack as IQ4S (their panels hold the weights over post), the
 * IQ3 types as the Q6_K kind where a level lacks IQ4S, IQ2_S as nothing else */
static void check_grid_kinds(void) {
    static uint8_t data[16 * 110]; /* 16 rows of one super-block: any bytes are valid */
    const struct {
        inf_dtype type;
        float post;
        inf_pack_kind base; /* under INF_PACK_KINDS_BASE; 0: unpacked */
        int8_t value7;      /* values[7] */
    } want[] = {{INF_IQ3_XXS, 0.5f, INF_PACK_Q6_K, 31},
                {INF_IQ3_S, 1.0f, INF_PACK_Q6_K, 15},
                {INF_IQ2_S, 0.125f, 0, 0}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const inf_tensor t = {
            .name = "w", .type = want[i].type, .n_dims = 2, .ne = {256, 16, 1, 1}, .data = data};
        const inf_weight w = {
            .t = &t, .n_in = 256, .n_out = 16, .row_bytes = inf_dtype_row_bytes(want[i].type, 256)};
        inf_packed p;
        CHECK_MSG(inf_pack_plan(&p, &w, INF_PACK_KINDS_ALL) && p.kind == INF_PACK_IQ4S &&
                      p.post == want[i].post && p.values[7] == want[i].value7 &&
                      p.values[8 + 2] == -p.values[2],
                  "%s: its IQ4S plan", inf_dtype_get(want[i].type)->name);
        const bool packed = inf_pack_plan(&p, &w, INF_PACK_KINDS_BASE);
        CHECK_MSG(packed == (want[i].base != 0) &&
                      (!packed || (p.kind == want[i].base && p.post == want[i].post)),
                  "%s: its plan without IQ4S", inf_dtype_get(want[i].type)->name);
    }
}

int main(void) {
    const inf_kernels *lv[INF_ISA_AMX + 1];
    int nl = 0;
    for (int isa = INF_ISA_NEON; isa <= INF_ISA_AMX; isa++)
        if (inf_isa_clamp((inf_isa)isa) == (inf_isa)isa) lv[nl++] = inf_kernels_get((inf_isa)isa);
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        check_random(types[i].type, lv, nl);
    const char *dir = getenv("INFERNO_QUANT_FIXTURES");
    if (!dir) dir = FIXTURES;
    char probe[512];
    snprintf(probe, sizeof probe, "%s/README.md", dir);
    FILE *f = fopen(probe, "r");
    if (f)
        fclose(f);
    else
        printf("no weight-type fixtures at %s: random weights and the repository's own\n", dir);
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        /* the types the shared folder lacks: tests/fixtures/quant (test_quant_fixtures.c) */
        const bool own = types[i].type == INF_IQ2_XXS || types[i].type == INF_IQ2_XS ||
                         types[i].type == INF_IQ1_S || types[i].type == INF_IQ1_M;
        if (own || f)
            check_fixture(own ? "tests/fixtures/quant" : dir, types[i].type, types[i].file, lv, nl);
    }
    check_arena();
    check_mxfp4_fits();
    check_grid_kinds();
    return th_report();
}
