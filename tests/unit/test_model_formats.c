/* The two readers build the same neutral description: for the generated tiny
 * models (scripts/make-models.sh), the GGUF file and the HF folder of the
 * same float type give equal hyperparameters, the same weight in every slot
 * (type, shape, bytes), and the same tokenizer (tokens, merges, special ids,
 * chat template). Every GGUF type mix opens with every slot bound. */
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "model/model.h"
#include "modelfile/model.h"
#include "util/half.h"

static inf_model_file *open_or_report(const char *path) {
    inf_model_file *m = NULL;
    inf_err err = {{0}};
    int rc = inf_model_open(&m, path, &err);
    CHECK_MSG(rc == 0, "%s", err.msg);
    return rc ? NULL : m;
}

/* Equal weights. GGUF keeps 1-D norm weights F32 (as llama.cpp does) where
 * an F16/BF16 HF folder stores them converted: then the GGUF value,
 * converted, must give the HF bits. */
static bool same_data(const inf_tensor *a, const inf_tensor *b) {
    if (a->type == b->type) return a->nbytes == b->nbytes && !memcmp(a->data, b->data, a->nbytes);
    if (a->type != INF_F32 || (b->type != INF_F16 && b->type != INF_BF16)) return false;
    int64_t n = (int64_t)(a->nbytes / 4);
    if (b->nbytes != (size_t)n * 2) return false;
    for (int64_t i = 0; i < n; i++) {
        float f;
        uint16_t h;
        memcpy(&f, (const char *)a->data + 4 * i, 4);
        memcpy(&h, (const char *)b->data + 2 * i, 2);
        if ((b->type == INF_F16 ? inf_f32_to_f16(f) : inf_f32_to_bf16(f)) != h) return false;
    }
    return true;
}

static void same_tensor(const inf_tensor *a, const inf_tensor *b, const char *slot, int layer) {
    bool ok =
        a && b && a->n_dims == b->n_dims && !memcmp(a->ne, b->ne, sizeof a->ne) && same_data(a, b);
    CHECK_MSG(ok, "slot %s layer %d: %s vs %s differ", slot, layer, a ? a->name : "(none)",
              b ? b->name : "(none)");
}

/* The folder as GGUF (the architecture's plan: names mapped, experts stacked)
 * equals the GGUF file: the same tensors, shapes and rows. */
static void same_slots(const inf_model_file *g, const inf_model_file *h) {
    inf_gguf_plan plan;
    inf_err err;
    if (inf_model_gguf_plan(h, &plan, &err)) {
        CHECK_MSG(0, "%s", err.msg);
        return;
    }
    CHECK_INT(g->n_tensors, plan.n);
    for (int i = 0; i < plan.n; i++) {
        const inf_gguf_tensor *t = &plan.t[i];
        const inf_tensor *a = inf_model_find(g, t->name);
        if (t->n_runs == 1 && t->runs[0].row0 == 0) {
            same_tensor(a, t->runs[0].src, t->name, t->layer);
            continue;
        }
        /* stacked: row by row, in the GGUF file's type */
        bool ok = a && a->n_dims == t->n_dims && !memcmp(a->ne, t->ne, sizeof a->ne);
        size_t off = 0;
        for (int k = 0; ok && k < t->n_runs; k++) {
            const inf_rows *r = &t->runs[k];
            const size_t rb =
                r->src->nbytes / (size_t)(r->src->ne[1] * r->src->ne[2] * r->src->ne[3]);
            const size_t n = rb * (size_t)r->n_rows;
            ok = r->src->type == a->type && off + n <= a->nbytes &&
                 !memcmp((const char *)a->data + off,
                         (const char *)r->src->data + rb * (size_t)r->row0, n);
            off += n;
        }
        CHECK_MSG(ok && off == a->nbytes, "stacked tensor %s differs from the GGUF file's",
                  t->name);
    }
    inf_gguf_plan_free(&plan);
}

static void same_hparams(const inf_hparams *a, const inf_hparams *b) {
    CHECK_INT(a->n_layer, b->n_layer);
    CHECK_INT(a->n_embd, b->n_embd);
    CHECK_INT(a->n_head, b->n_head);
    CHECK_INT(a->n_head_kv, b->n_head_kv);
    CHECK_INT(a->head_dim, b->head_dim);
    CHECK_INT(a->n_ff, b->n_ff);
    CHECK_INT(a->n_vocab, b->n_vocab);
    CHECK_INT(a->n_ctx_train, b->n_ctx_train);
    CHECK(a->rope_theta == b->rope_theta);
    CHECK(a->rms_eps == b->rms_eps);
    CHECK(a->tied_output == b->tied_output);
}

/* GGUF pads the vocabulary to n_vocab with [PAD] tokens; HF lists the real
 * ones. Both must agree on every real token and on all merges. */
static void same_vocab(const inf_vocab_desc *g, const inf_vocab_desc *h) {
    CHECK(h->n_tokens > 0 && g->n_tokens >= h->n_tokens);
    int bad = 0;
    for (int i = 0; i < h->n_tokens && i < g->n_tokens; i++)
        if (!h->tokens[i] || strcmp(g->tokens[i], h->tokens[i])) {
            if (bad++ < 3)
                fprintf(stderr, "token %d: \"%s\" vs \"%s\"\n", i, g->tokens[i],
                        h->tokens[i] ? h->tokens[i] : "(null)");
        }
    CHECK_INT(bad, 0);
    CHECK_INT(g->n_merges, h->n_merges);
    bad = 0;
    for (int i = 0; i < g->n_merges && i < h->n_merges; i++)
        bad += strcmp(g->merges[i], h->merges[i]) != 0;
    CHECK_INT(bad, 0);
    CHECK_INT(g->eos_id, h->eos_id);
    CHECK_INT(g->eot_id, h->eot_id);
    CHECK_INT(g->pad_id, h->pad_id);
    CHECK(g->add_bos == h->add_bos);
    CHECK(g->chat_template && h->chat_template && !strcmp(g->chat_template, h->chat_template));
}

/* A copy of the tiny F32 folder (links to its files, its config.json) with
 * one more file written: NAME holding TEXT. */
static void folder_with(const char *dir, const char *name, const char *text) {
    char p[512], cwd[256], src[600];
    if (!getcwd(cwd, sizeof cwd)) return;
    mkdir(dir, 0755);
    static const char *const files[] = {"config.json", "model.safetensors", "tokenizer.json",
                                        "tokenizer_config.json"};
    for (int i = 0; i < 4; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, files[i]);
        snprintf(src, sizeof src, "%s/models/tiny-f32-hf/%s", cwd, files[i]);
        unlink(p);
        CHECK(symlink(src, p) == 0);
    }
    snprintf(p, sizeof p, "%s/1_Pooling", dir);
    mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    CHECK(f != NULL);
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

/* generation_config.json and 1_Pooling/config.json: values read, wrong types
 * refused naming the file and the field. */
static void test_hf_extras(void) {
    char dir[] = "/tmp/inferno-extras-XXXXXX";
    if (!mkdtemp(dir)) return;
    char d[64];
    snprintf(d, sizeof d, "%s/m", dir);
    folder_with(d, "generation_config.json",
                "{\"do_sample\": true, \"temperature\": 0.6, \"top_k\": 20, \"top_p\": 0.95, "
                "\"repetition_penalty\": 1.1, \"eos_token_id\": [1, 2]}");
    inf_model_file *m = open_or_report(d);
    if (m) {
        const inf_sampling_rec *r = &m->sampling;
        CHECK_INT(r->set, INF_REC_TEMP | INF_REC_TOP_K | INF_REC_TOP_P | INF_REC_REPEAT_PENALTY);
        CHECK(r->temp == 0.6f && r->top_k == 20 && r->top_p == 0.95f && r->repeat_penalty == 1.1f);
        CHECK_INT(m->pooling, INF_POOL_UNSPECIFIED);
        CHECK(!m->vocab.add_eos);
    }
    inf_model_close(m);
    folder_with(d, "generation_config.json", "{\"do_sample\": false, \"temperature\": 0.7}");
    m = open_or_report(d);
    if (m) CHECK(m->sampling.set == INF_REC_TEMP && m->sampling.temp == 0); /* greedy */
    inf_model_close(m);
    static const char *const bad[][2] = {
        {"{\"temperature\": \"hot\"}", "temperature"},
        {"{\"top_k\": 2.5}", "top_k"},
        {"{\"top_p\": true}", "top_p"},
        {"{\"do_sample\": 1}", "do_sample"},
    };
    for (int i = 0; i < 4; i++) {
        folder_with(d, "generation_config.json", bad[i][0]);
        inf_err err = {{0}};
        m = NULL;
        CHECK_INT(inf_model_open(&m, d, &err), -1);
        CHECK_MSG(strstr(err.msg, "generation_config.json") && strstr(err.msg, bad[i][1]), "%s: %s",
                  bad[i][0], err.msg);
        inf_model_close(m);
    }
    folder_with(d, "generation_config.json", "{}");
    folder_with(d, "1_Pooling/config.json",
                "{\"pooling_mode_lasttoken\": true, \"pooling_mode_mean_tokens\": false}");
    m = open_or_report(d);
    if (m) CHECK_INT(m->pooling, INF_POOL_LAST);
    inf_model_close(m);
    folder_with(d, "1_Pooling/config.json", "{\"pooling_mode_mean_tokens\": true}");
    m = open_or_report(d);
    if (m) CHECK_INT(m->pooling, INF_POOL_MEAN);
    inf_model_close(m);
    folder_with(d, "1_Pooling/config.json", "{\"pooling_mode_lasttoken\": \"yes\"}");
    inf_err err = {{0}};
    m = NULL;
    CHECK_INT(inf_model_open(&m, d, &err), -1);
    CHECK_MSG(strstr(err.msg, "pooling_mode_lasttoken"), "%s", err.msg);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
}

int main(void) {
    struct stat st;
    if (stat("models/tiny-f32.gguf", &st) != 0) {
        fprintf(stderr, "models/ has no generated models: run scripts/make-models.sh\n");
        CHECK(0);
        return th_report();
    }
    test_hf_extras();
    static const char *const floats[] = {"f32", "f16", "bf16"};
    inf_hparams ref = {0};
    for (int i = 0; i < 3; i++) {
        char gp[64], hp[64];
        snprintf(gp, sizeof gp, "models/tiny-%s.gguf", floats[i]);
        snprintf(hp, sizeof hp, "models/tiny-%s-hf", floats[i]);
        inf_model_file *g = open_or_report(gp), *h = open_or_report(hp);
        if (g && h) {
            CHECK(g->format == INF_FORMAT_GGUF && h->format == INF_FORMAT_HF);
            same_hparams(&g->hp, &h->hp);
            same_slots(g, h);
            same_vocab(&g->vocab, &h->vocab);
            CHECK_INT(g->vocab.n_tokens, g->hp.n_vocab);
            if (i == 0) ref = g->hp;
        }
        inf_model_close(g);
        inf_model_close(h);
    }
    /* qwen3moe: both expert layouts stack into the GGUF file's 3-D tensors */
    static const char *const moe_folders[] = {"models/tiny-moe-f32-hf",
                                              "models/tiny-moe-f32-hf-fused"};
    for (int i = 0; i < 2; i++) {
        inf_model_file *g = open_or_report("models/tiny-moe-f32.gguf"),
                       *h = open_or_report(moe_folders[i]);
        if (g && h) same_slots(g, h);
        inf_model_close(g);
        inf_model_close(h);
    }
    static const char *const mixes[] = {"q8_0", "q4_0", "q4_k", "q6_k", "q4_k_m"};
    for (int i = 0; i < 5; i++) {
        char gp[64];
        snprintf(gp, sizeof gp, "models/tiny-%s.gguf", mixes[i]);
        inf_model_file *g = open_or_report(gp);
        if (g) {
            same_hparams(&g->hp, &ref);
            char last[64];
            snprintf(last, sizeof last, "blk.%d.ffn_down.weight", g->hp.n_layer - 1);
            CHECK(inf_model_find(g, last) != NULL);
            CHECK(inf_model_find(g, "token_embd.weight")->type != INF_F32);
        }
        inf_model_close(g);
    }
    return th_report();
}
