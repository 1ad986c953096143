/* safetensors reader and Hugging Face folder reader: hand-built images and
 * folders (single file, sharded with an index, tied and untied heads).
 *
 * `test_safetensors --write-seeds DIR` writes safetensors fuzzing seeds. */
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model_build.h"
#include "harness.h"
#include "model/model.h"
#include "modelfile/model.h"
#include "modelfile/safetensors.h"

/* the output head as the model binds it: the embedding when tied */
static const inf_tensor *model_output(const inf_model_file *m) {
    return inf_model_find(m, m->hp.tied_output ? "model.embed_tokens.weight" : "lm_head.weight");
}

static void small_image(bb *b) {
    /* "b" is listed first but stored second: the reader orders by offset */
    const char *h = "{\"__metadata__\":{\"format\":\"pt\"},"
                    "\"b\":{\"dtype\":\"BF16\",\"shape\":[3],\"data_offsets\":[24,30]},"
                    "\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
                    "\"c\":{\"dtype\":\"F16\",\"shape\":[1,1,2,1],\"data_offsets\":[30,34]}}";
    unsigned char data[34];
    for (int i = 0; i < 34; i++)
        data[i] = (unsigned char)i;
    st_image(b, h, data, sizeof data);
}

static void test_parse(void) {
    bb b = {0};
    small_image(&b);
    st_file *f;
    inf_err err = {{0}};
    int rc = st_parse(&f, b.p, b.n, "small.safetensors", &err);
    CHECK_MSG(rc == 0, "%s", err.msg);
    if (rc) return bb_free(&b);
    CHECK_INT(f->n_tensors, 3);
    CHECK_STR(f->tensors[0].name, "a");
    CHECK_STR(f->tensors[1].name, "b");
    CHECK_STR(f->tensors[2].name, "c");
    const st_tensor *a = st_find(f, "a");
    CHECK(a && a->type == INF_F32 && a->n_dims == 2 && a->ne[0] == 3 && a->ne[1] == 2 &&
          a->ne[2] == 1 && a->nbytes == 24);
    CHECK(a && a->offset == 8 + f->header_len && (const unsigned char *)a->data == b.p + a->offset);
    const st_tensor *c = st_find(f, "c");
    CHECK(c && c->type == INF_F16 && c->n_dims == 4 && c->ne[0] == 1 && c->ne[1] == 2 &&
          c->ne[3] == 1 && c->nbytes == 4);
    CHECK(c && ((const unsigned char *)c->data)[0] == 30);
    CHECK(st_find(f, "__metadata__") == NULL);
    CHECK(st_find(f, "b")->type == INF_BF16);
    st_close(f);
    st_close(NULL);
    bb_free(&b);
}

static void put_text(const char *dir, const char *file, const char *text) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    CHECK(write_file(path, text, strlen(text)) == 0);
}

static void put_bb(const char *dir, const char *file, bb *b) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    CHECK(write_file(path, b->p, b->n) == 0);
    bb_free(b);
}

static void rm_dir(const char *dir) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
}

static void check_tiny_hf(const inf_model_file *m, bool tied) {
    CHECK(m->format == INF_FORMAT_HF);
    CHECK_STR(m->arch, "qwen3");
    CHECK_INT(m->hp.n_layer, 1);
    CHECK_INT(m->hp.n_embd, TINY_EMBD);
    CHECK_INT(m->hp.n_head, TINY_HEAD);
    CHECK_INT(m->hp.n_head_kv, TINY_KV);
    CHECK_INT(m->hp.head_dim, TINY_HD);
    CHECK_INT(m->hp.n_ff, TINY_FF);
    CHECK_INT(m->hp.n_vocab, TINY_VOCAB);
    CHECK_INT(m->hp.n_ctx_train, 4096);
    CHECK(m->hp.rope_theta == 1e6f && m->hp.rms_eps == 1e-6f);
    CHECK(m->hp.tied_output == tied);
    CHECK(tied ? model_output(m) == inf_model_find(m, "model.embed_tokens.weight")
               : !strcmp(model_output(m)->name, "lm_head.weight"));
    /* HF [out, in] is ne = {in, out} */
    CHECK_INT(inf_model_find(m, "model.layers.0.self_attn.q_proj.weight")->ne[0], TINY_EMBD);
    CHECK_INT(inf_model_find(m, "model.layers.0.self_attn.q_proj.weight")->ne[1],
              TINY_HEAD * TINY_HD);
    CHECK_INT(inf_model_find(m, "model.layers.0.mlp.down_proj.weight")->ne[0], TINY_FF);
    CHECK_STR(inf_model_find(m, "model.layers.0.self_attn.q_norm.weight")->name,
              "model.layers.0.self_attn.q_norm.weight");
    CHECK_STR(inf_model_find(m, "model.layers.0.post_attention_layernorm.weight")->name,
              "model.layers.0.post_attention_layernorm.weight");
    const float *up = inf_model_find(m, "model.layers.0.mlp.up_proj.weight")->data;
    CHECK(up[0] == 11.0f && up[7] == 11.0f + 7 / 1000.0f);
    CHECK(inf_model_find(m, "model.layers.0.mlp.up_proj.weight")->type == INF_F32);
}

static void test_folder(void) {
    char dir[] = "/tmp/inferno-test-hf-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char cfg[1024];
    bb b = {0};
    inf_err err = {{0}};
    inf_model_file *m;

    /* single file, tied (lm_head left out as transformers saves it) */
    snprintf(cfg, sizeof cfg, tiny_config, "true");
    put_text(dir, "config.json", cfg);
    put_text(dir, "tokenizer.json", tiny_tokenizer);
    put_text(dir, "tokenizer_config.json", "{\"eos_token\":\"<|im_end|>\"}");
    hf_file(&b, 0, N_HF_T - 1, NULL, NULL);
    put_bb(dir, "model.safetensors", &b);
    int rc = inf_model_open(&m, dir, &err);
    CHECK_MSG(rc == 0, "%s", err.msg);
    if (!rc) {
        check_tiny_hf(m, true);
        CHECK_INT(m->n_tensors, 13);
        if (m->vocab.n_tokens) CHECK_INT(m->vocab.eot_id, 11); /* once the HF vocab loader exists */
        inf_model_close(m);
    }

    /* sharded, untied: two files and an index */
    snprintf(cfg, sizeof cfg, tiny_config, "false");
    put_text(dir, "config.json", cfg);
    char path[600];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    unlink(path);
    hf_file(&b, 0, 6, NULL, NULL);
    put_bb(dir, "model-00001-of-00002.safetensors", &b);
    hf_file(&b, 6, N_HF_T, NULL, NULL);
    put_bb(dir, "model-00002-of-00002.safetensors", &b);
    char idx[4096];
    size_t k = (size_t)snprintf(idx, sizeof idx, "{\"metadata\":{},\"weight_map\":{");
    for (int i = 0; i < N_HF_T; i++)
        k += (size_t)snprintf(idx + k, sizeof idx - k,
                              "%s\"%s\":\"model-0000%d-of-00002.safetensors\"", i ? "," : "",
                              hf_tensors[i].name, i < 6 ? 1 : 2);
    snprintf(idx + k, sizeof idx - k, "}}");
    put_text(dir, "model.safetensors.index.json", idx);
    rc = inf_model_open(&m, dir, &err);
    CHECK_MSG(rc == 0, "%s", err.msg);
    if (!rc) {
        check_tiny_hf(m, false);
        CHECK_INT(m->n_tensors, 14);
        CHECK_INT(inf_model_find(m, "model.layers.0.mlp.down_proj.weight")->file_index, 1);
        CHECK_INT(inf_model_find(m, "model.embed_tokens.weight")->file_index, 0);
        inf_model_close(m);
    }
    /* a trailing slash on the folder name is fine */
    snprintf(path, sizeof path, "%s/", dir);
    rc = inf_model_open(&m, path, &err);
    CHECK_MSG(rc == 0, "%s", err.msg);
    if (!rc) CHECK_STR(m->name, strrchr(dir, '/') + 1);
    inf_model_close(rc ? NULL : m);
    rm_dir(dir);
}

static void write_seeds(const char *dir) {
    bb b = {0};
    char path[512];
    small_image(&b);
    snprintf(path, sizeof path, "%s/small.safetensors", dir);
    write_file(path, b.p, b.n);
    bb_free(&b);
    hf_file(&b, 0, N_HF_T, NULL, NULL);
    snprintf(path, sizeof path, "%s/tiny.safetensors", dir);
    write_file(path, b.p, b.n);
    bb_free(&b);
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "--write-seeds")) {
        write_seeds(argv[2]);
        return 0;
    }
    test_parse();
    test_folder();
    return th_report();
}
