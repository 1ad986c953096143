/* GGUF reader: hand-built images (every metadata type, nested arrays, every
 * supported tensor type, alignment) and the tiny Qwen3 model through
 * gguf_model_open and inf_model_open.
 *
 * `test_gguf --write-seeds DIR` writes the images as fuzzing seeds. */
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model_build.h"
#include "harness.h"
#include "modelfile/gguf.h"
#include "modelfile/gguf_model.h"
#include "model/model.h"
#include "modelfile/model.h"

/* the output head as the model binds it: the embedding when tied */
static const inf_tensor *model_output(const inf_model_file *m) {
    return inf_model_find(m, m->hp.tied_output ? "token_embd.weight" : "output.weight");
}

/* Every metadata value type, a nested array, and tensors of every supported
 * type, with alignment 64. */
static void generic_image(bb *b) {
    bb_bytes(b, "GGUF", 4);
    bb_u32(b, 3);
    bb_u64(b, 7);  /* tensors */
    bb_u64(b, 16); /* kv */
    bb_str(b, "u8");
    bb_u32(b, 0);
    bb_u8(b, 200);
    bb_str(b, "i8");
    bb_u32(b, 1);
    bb_u8(b, 0x80);
    bb_str(b, "u16");
    bb_u32(b, 2);
    {
        uint16_t v = 65535;
        bb_bytes(b, &v, 2);
    }
    bb_str(b, "i16");
    bb_u32(b, 3);
    {
        int16_t v = -300;
        bb_bytes(b, &v, 2);
    }
    kv_u32(b, "u32", 4000000000u);
    bb_str(b, "i32");
    bb_u32(b, 5);
    {
        int32_t v = -70000;
        bb_bytes(b, &v, 4);
    }
    kv_f32(b, "f32", 0.1f);
    kv_bool(b, "bool", true);
    kv_str(b, "str", "h\xc3\xa9llo");
    bb_str(b, "u64");
    bb_u32(b, 10);
    bb_u64(b, 0xffffffffffffffffull);
    bb_str(b, "i64");
    bb_u32(b, 11);
    bb_u64(b, (uint64_t)-5);
    bb_str(b, "f64");
    bb_u32(b, 12);
    {
        double v = 2.5e-300;
        bb_bytes(b, &v, 8);
    }
    {
        int32_t v[3] = {7, -8, 9};
        kv_i32s(b, "arr.i32", v, 3);
    }
    /* [[1, 2], []] as arrays of UINT16 */
    bb_str(b, "arr.nested");
    bb_u32(b, 9);
    bb_u32(b, 9);
    bb_u64(b, 2);
    bb_u32(b, 2);
    bb_u64(b, 2);
    {
        uint16_t v[2] = {1, 2};
        bb_bytes(b, v, 4);
    }
    bb_u32(b, 2);
    bb_u64(b, 0);
    {
        const char *s[2] = {"", "two"};
        kv_strs(b, "arr.str", s, 2);
    }
    kv_u32(b, "general.alignment", 64);
    /* tensors: F32 [3], F16 [2,2], BF16 [5], Q8_0 [32,2], Q4_0 [64], Q4_K [256], Q6_K [256,1,1,2]
     */
    struct {
        const char *n;
        int nd;
        uint64_t ne[4];
        uint32_t type;
        size_t bytes;
    } t[7] = {
        {"a.f32", 1, {3}, 0, 12},
        {"b.f16", 2, {2, 2}, 1, 8},
        {"c.bf16", 1, {5}, 30, 10},
        {"d.q8_0", 2, {32, 2}, 8, 68},
        {"e.q4_0", 1, {64}, 2, 36},
        {"f.q4_k", 1, {256}, 12, 144},
        {"g.q6_k", 4, {256, 1, 1, 2}, 14, 420},
    };
    uint64_t off = 0;
    for (int i = 0; i < 7; i++) {
        bb_str(b, t[i].n);
        bb_u32(b, (uint32_t)t[i].nd);
        for (int d = 0; d < t[i].nd; d++)
            bb_u64(b, t[i].ne[d]);
        bb_u32(b, t[i].type);
        bb_u64(b, off);
        off += (t[i].bytes + 63) / 64 * 64;
    }
    bb_pad(b, 64);
    for (int i = 0; i < 7; i++) {
        for (size_t k = 0; k < t[i].bytes; k++)
            bb_u8(b, (uint8_t)(i * 16 + k));
        bb_pad(b, 64);
    }
}

static void test_generic(void) {
    bb b = {0};
    generic_image(&b);
    gguf_file *g;
    inf_err err = {{0}};
    int rc = gguf_parse(&g, b.p, b.n, "generic.gguf", &err);
    CHECK_MSG(rc == 0, "%s", err.msg);
    if (rc) return bb_free(&b);
    CHECK_INT(g->version, 3);
    CHECK_INT(g->n_kv, 16);
    CHECK_INT(g->n_tensors, 7);
    CHECK_INT(g->alignment, 64);
    CHECK_INT(g->data_offset % 64, 0);
    const gguf_kv *kv;
    CHECK((kv = gguf_find(g, "u8")) && kv->val.type == GGUF_TYPE_UINT8 && kv->val.u == 200);
    CHECK((kv = gguf_find(g, "i8")) && kv->val.i == -128);
    CHECK((kv = gguf_find(g, "u16")) && kv->val.u == 65535);
    CHECK((kv = gguf_find(g, "i16")) && kv->val.i == -300);
    CHECK((kv = gguf_find(g, "u32")) && kv->val.u == 4000000000u);
    CHECK((kv = gguf_find(g, "i32")) && kv->val.i == -70000);
    CHECK((kv = gguf_find(g, "f32")) && kv->val.f == (double)0.1f);
    CHECK((kv = gguf_find(g, "bool")) && kv->val.b);
    CHECK((kv = gguf_find(g, "u64")) && kv->val.u == 0xffffffffffffffffull);
    CHECK((kv = gguf_find(g, "i64")) && kv->val.i == -5);
    CHECK((kv = gguf_find(g, "f64")) && kv->val.f == 2.5e-300);
    CHECK(gguf_find(g, "nope") == NULL);

    int64_t iv;
    double fv;
    const char *sp;
    size_t sn;
    CHECK(gguf_get_int(g, "u32", &iv, &err) == 0 && iv == 4000000000ll);
    CHECK(gguf_get_int(g, "i16", &iv, &err) == 0 && iv == -300);
    CHECK(gguf_get_int(g, "u64", &iv, &err) == -1 && strstr(err.msg, "u64"));
    CHECK(gguf_get_int(g, "str", &iv, &err) == -1 && strstr(err.msg, "str") &&
          strstr(err.msg, "STRING"));
    CHECK(gguf_get_float(g, "f64", &fv, &err) == 0 && fv == 2.5e-300);
    CHECK(gguf_get_str(g, "str", &sp, &sn, &err) == 0 && sn == 6 && !memcmp(sp, "h\xc3\xa9llo", 6));
    CHECK(gguf_get_str(g, "missing.key", &sp, &sn, &err) == -1 && strstr(err.msg, "missing.key") &&
          strstr(err.msg, "generic.gguf"));

    const gguf_value *a;
    CHECK(gguf_get_arr(g, "arr.i32", GGUF_TYPE_INT32, &a, &err) == 0 && a->arr.n == 3 &&
          gguf_arr_at(a, 1).i == -8 && gguf_arr_at(a, 2).i == 9);
    CHECK(gguf_get_arr(g, "arr.i32", GGUF_TYPE_STRING, &a, &err) == -1 && strstr(err.msg, "INT32"));
    CHECK(gguf_get_arr(g, "arr.nested", GGUF_TYPE_ARRAY, &a, &err) == 0 && a->arr.n == 2);
    if (a && a->type == GGUF_TYPE_ARRAY && a->arr.n == 2) {
        gguf_value e0 = gguf_arr_at(a, 0), e1 = gguf_arr_at(a, 1);
        CHECK(e0.type == GGUF_TYPE_ARRAY && e0.arr.type == GGUF_TYPE_UINT16 && e0.arr.n == 2 &&
              gguf_arr_at(&e0, 1).u == 2);
        CHECK(e1.type == GGUF_TYPE_ARRAY && e1.arr.n == 0);
    }
    CHECK(gguf_get_arr(g, "arr.str", GGUF_TYPE_STRING, &a, &err) == 0 && a->arr.n == 2 &&
          gguf_arr_at(a, 0).str.len == 0 && gguf_arr_at(a, 1).str.len == 3 &&
          !memcmp(gguf_arr_at(a, 1).str.ptr, "two", 3));

    static const uint32_t types[7] = {0, 1, 30, 8, 2, 12, 14};
    static const size_t bytes[7] = {12, 8, 10, 68, 36, 144, 420};
    for (int i = 0; i < 7; i++) {
        const gguf_tensor_info *t = &g->tensors[i];
        CHECK_INT(t->type, types[i]);
        CHECK_INT(t->nbytes, bytes[i]);
        CHECK_INT(t->offset % 64, 0);
        CHECK((const unsigned char *)t->data == b.p + g->data_offset + t->offset);
        CHECK(((const unsigned char *)t->data)[1] == (uint8_t)(i * 16 + 1));
    }
    CHECK_STR(g->tensors[6].name, "g.q6_k");
    CHECK_INT(g->tensors[6].n_dims, 4);
    CHECK_INT(g->tensors[6].ne[3], 2);
    CHECK_INT(g->tensors[1].ne[2], 1);
    gguf_close(g);
    bb_free(&b);
}

static inf_model_file *open_tiny(const tiny_opts *o, bb *b, inf_err *err) {
    tiny_layout lay;
    tiny_gguf(b, o, &lay);
    gguf_file *g;
    inf_model_file *m = NULL;
    if (gguf_parse(&g, b->p, b->n, "tiny.gguf", err) == 0 && gguf_model_open(&m, g, err) == 0 &&
        inf_model_bind_file(m, err) != 0) {
        inf_model_close(m);
        m = NULL;
    }
    return m;
}

static void test_tiny_model(void) {
    bb b = {0};
    inf_err err = {{0}};
    tiny_opts o = {0};
    inf_model_file *m = open_tiny(&o, &b, &err);
    CHECK_MSG(m != NULL, "%s", err.msg);
    if (!m) return bb_free(&b);
    CHECK(m->format == INF_FORMAT_GGUF);
    CHECK_STR(m->arch, "qwen3");
    CHECK_STR(m->name, "tiny test");
    CHECK_INT(m->hp.n_layer, 1);
    CHECK_INT(m->hp.n_embd, TINY_EMBD);
    CHECK_INT(m->hp.n_head, TINY_HEAD);
    CHECK_INT(m->hp.n_head_kv, TINY_KV);
    CHECK_INT(m->hp.head_dim, TINY_HD);
    CHECK_INT(m->hp.n_ff, TINY_FF);
    CHECK_INT(m->hp.n_vocab, TINY_VOCAB);
    CHECK_INT(m->hp.n_ctx_train, 4096);
    CHECK(m->hp.rope_theta == 1e6f);
    CHECK(m->hp.rms_eps == 1e-6f);
    CHECK(m->hp.tied_output);
    CHECK(model_output(m) == inf_model_find(m, "token_embd.weight"));
    CHECK_INT(m->n_tensors, 13);
    CHECK_STR(inf_model_find(m, "token_embd.weight")->name, "token_embd.weight");
    CHECK_STR(inf_model_find(m, "output_norm.weight")->name, "output_norm.weight");
    CHECK_STR(inf_model_find(m, "blk.0.attn_q.weight")->name, "blk.0.attn_q.weight");
    CHECK_STR(inf_model_find(m, "blk.0.attn_k_norm.weight")->name, "blk.0.attn_k_norm.weight");
    CHECK_STR(inf_model_find(m, "blk.0.ffn_down.weight")->name, "blk.0.ffn_down.weight");
    CHECK_INT(inf_model_find(m, "blk.0.attn_output.weight")->ne[0], TINY_HEAD * TINY_HD);
    CHECK_INT(inf_model_find(m, "blk.0.attn_output.weight")->ne[1], TINY_EMBD);
    CHECK(inf_model_find(m, "blk.0.ffn_up.weight") == inf_model_find(m, "blk.0.ffn_up.weight"));
    CHECK(inf_model_find(m, "blk.1.ffn_up.weight") == NULL);
    /* data is in place: tensor index 3 (attn_q) holds 3 + e/1000 */
    const float *q = inf_model_find(m, "blk.0.attn_q.weight")->data;
    CHECK(q[0] == 3.0f && q[5] == 3.0f + 5 / 1000.0f);
    CHECK((const unsigned char *)q >= b.p && (const unsigned char *)q < b.p + b.n);
    CHECK_INT(inf_model_find(m, "blk.0.attn_q.weight")->nbytes,
              TINY_EMBD * TINY_HEAD * TINY_HD * 4);
    CHECK_INT(inf_model_find(m, "blk.0.attn_q.weight")->offset, (const unsigned char *)q - b.p);
    /* tokenizer */
    CHECK_INT(m->vocab.n_tokens, TINY_VOCAB);
    CHECK_STR(m->vocab.tokens[5], "\xc4\xa0the");
    CHECK_INT(m->vocab.token_type[7], INF_TOKEN_CONTROL);
    CHECK_INT(m->vocab.n_merges, 2);
    CHECK_STR(m->vocab.merges[1], "x y");
    CHECK_INT(m->vocab.bos_id, 6);
    CHECK_INT(m->vocab.eos_id, 8);
    CHECK_INT(m->vocab.pad_id, 6);
    CHECK_INT(m->vocab.eot_id, 8);
    CHECK(!m->vocab.add_bos);
    CHECK_STR(m->vocab.model, "gpt2");
    CHECK_STR(m->vocab.pre, "qwen2");
    CHECK(m->vocab.chat_template && strstr(m->vocab.chat_template, "messages"));
    inf_model_close(m);
    bb_free(&b);

    /* untied output, alignment 128, BF16 matrices */
    o = (tiny_opts){.untied = true, .alignment = 128, .mat_type = 30};
    m = open_tiny(&o, &b, &err);
    CHECK_MSG(m != NULL, "%s", err.msg);
    if (m) {
        CHECK(!m->hp.tied_output);
        CHECK(model_output(m) != inf_model_find(m, "token_embd.weight"));
        CHECK_STR(model_output(m)->name, "output.weight");
        CHECK(inf_model_find(m, "blk.0.ffn_gate.weight")->type == INF_BF16);
        CHECK(inf_model_find(m, "output_norm.weight")->type == INF_F32);
        CHECK_INT(inf_model_find(m, "blk.0.ffn_gate.weight")->nbytes, TINY_EMBD * TINY_FF * 2);
        for (int i = 0; i < m->n_tensors; i++)
            CHECK_INT(m->tensors[i].offset % 128, 0);
    }
    inf_model_close(m);
    bb_free(&b);

    /* Q8_0 matrices: 32 weights per 34-byte block, in place */
    o = (tiny_opts){.mat_type = INF_Q8_0};
    m = open_tiny(&o, &b, &err);
    CHECK_MSG(m != NULL, "%s", err.msg);
    if (m) {
        CHECK(inf_model_find(m, "blk.0.ffn_down.weight")->type == INF_Q8_0);
        CHECK(inf_model_find(m, "token_embd.weight")->type == INF_Q8_0);
        CHECK(inf_model_find(m, "blk.0.attn_q_norm.weight")->type == INF_F32);
        CHECK_INT(inf_model_find(m, "blk.0.ffn_down.weight")->nbytes,
                  TINY_FF * TINY_EMBD / 32 * 34);
        CHECK_INT(((const uint8_t *)inf_model_find(m, "blk.0.ffn_down.weight")->data)[1], 12 + 1);
    }
    inf_model_close(m);
    bb_free(&b);
    inf_model_close(NULL);
}

static void test_open_path(void) {
    char dir[] = "/tmp/inferno-test-gguf-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char path[128];
    snprintf(path, sizeof path, "%s/tiny.gguf", dir);
    bb b = {0};
    tiny_layout lay;
    tiny_gguf(&b, &(tiny_opts){0}, &lay);
    CHECK(write_file(path, b.p, b.n) == 0);
    inf_model_file *m;
    inf_err err = {{0}};
    int rc = inf_model_open(&m, path, &err);
    CHECK_MSG(rc == 0, "%s", err.msg);
    if (!rc) {
        CHECK_STR(m->path, path);
        CHECK_INT(m->hp.n_vocab, TINY_VOCAB);
        const float *e = inf_model_find(m, "token_embd.weight")->data;
        CHECK(e[1] == 0.001f);
        inf_model_close(m);
    }
    gguf_file *g;
    CHECK(gguf_open(&g, path, &err) == 0);
    if (g) CHECK_INT(g->n_tensors, 13);
    gguf_close(g);
    unlink(path);
    rmdir(dir);
    bb_free(&b);
}

static void write_seeds(const char *dir) {
    bb b = {0};
    char path[512];
    generic_image(&b);
    snprintf(path, sizeof path, "%s/generic.gguf", dir);
    write_file(path, b.p, b.n);
    bb_free(&b);
    tiny_layout lay;
    tiny_gguf(&b, &(tiny_opts){0}, &lay);
    snprintf(path, sizeof path, "%s/tiny.gguf", dir);
    write_file(path, b.p, b.n);
    bb_free(&b);
    tiny_gguf(&b, &(tiny_opts){.untied = true, .alignment = 64, .mat_type = 1}, &lay);
    snprintf(path, sizeof path, "%s/tiny-untied-f16.gguf", dir);
    write_file(path, b.p, b.n);
    bb_free(&b);
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "--write-seeds")) {
        write_seeds(argv[2]);
        return 0;
    }
    test_generic();
    test_tiny_model();
    test_open_path();
    return th_report();
}
