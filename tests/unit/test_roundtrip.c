/* Round trip: every tensor loaded (inf_model_open) from every format and type
 * the model maker writes equals what the maker computed: the same type and
 * shape, and byte for byte the same data (quantized types block for block).
 *
 * 1. A small model (2 layers, vocab 512, with its own little tokenizer) is
 *    written in every GGUF mix and every HF layout into a temporary folder
 *    and checked completely.
 * 2. The tiny models under models/ (made by scripts/make-models.sh with the
 *    default seed), when present, are checked too: every tensor completely,
 *    except token_embd (39M weights) in sampled row ranges. */
#define _XOPEN_SOURCE 700
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "modelfile/model.h"
#include "modelfile/synth.h"
#include "quant/quantize.h"

static const inf_hparams small_hp = {.n_layer = 2,
                                     .n_embd = 256,
                                     .n_head = 4,
                                     .n_head_kv = 2,
                                     .head_dim = 64,
                                     .n_ff = 512,
                                     .n_vocab = 512,
                                     .n_ctx_train = 1024,
                                     .rope_theta = 1e6f,
                                     .rms_eps = 1e-6f,
                                     .tied_output = true};
enum { SMALL_TOKENS = 502 }; /* 500 normal + 2 added; ids 502..511 are padding */

/* The expected bytes of rows [row0, row0 + n_rows) of tensor t as type `type`. */
static void expected_rows(unsigned char *out, const synth_tensor *t, const inf_hparams *hp,
                          uint64_t seed, inf_dtype type, int64_t row0, int64_t n_rows,
                          float *scratch /* [ne[0]] */) {
    const int64_t n = t->ne[0];
    const size_t rb = inf_dtype_row_bytes(type, n);
    for (int64_t r = 0; r < n_rows; r++) {
        synth_fill(scratch, t, hp, seed, (row0 + r) * n, n);
        inf_quantize_row(type, out + r * rb, scratch, n);
    }
}

/* Compares rows [row0, row0 + n_rows) of a loaded tensor; returns 1 if equal. */
static int rows_equal(const inf_tensor *lt, const synth_tensor *t, const inf_hparams *hp,
                      uint64_t seed, int64_t row0, int64_t n_rows, const char *file) {
    const size_t rb = inf_dtype_row_bytes(lt->type, t->ne[0]);
    unsigned char *want = malloc(rb * (size_t)n_rows);
    float *scratch = malloc((size_t)t->ne[0] * sizeof *scratch);
    expected_rows(want, t, hp, seed, lt->type, row0, n_rows, scratch);
    const unsigned char *got = (const unsigned char *)lt->data + rb * (size_t)row0;
    int ok = memcmp(got, want, rb * (size_t)n_rows) == 0;
    if (!ok) {
        size_t i = 0;
        while (got[i] == want[i])
            i++;
        fprintf(stderr,
                "%s: %s: first difference at byte %zu (row %lld, block %zu): %02x vs %02x\n", file,
                lt->name, rb * (size_t)row0 + i, (long long)(row0 + (int64_t)(i / rb)),
                (i % rb) / inf_dtype_get(lt->type)->block_bytes, got[i], want[i]);
    }
    free(want);
    free(scratch);
    return ok;
}

/* Checks one opened model file against the maker's tensors for `mix`.
 * sample_embd: compare only some row ranges of token_embd. */
static void check_model(const inf_model_file *m, const char *file, const inf_hparams *hp,
                        uint64_t seed, synth_mix mix, bool gguf, bool sample_embd) {
    CHECK_INT(m->hp.n_layer, hp->n_layer);
    CHECK_INT(m->hp.n_embd, hp->n_embd);
    CHECK_INT(m->hp.n_head, hp->n_head);
    CHECK_INT(m->hp.n_head_kv, hp->n_head_kv);
    CHECK_INT(m->hp.head_dim, hp->head_dim);
    CHECK_INT(m->hp.n_ff, hp->n_ff);
    CHECK_INT(m->hp.n_vocab, hp->n_vocab);
    CHECK_INT(m->hp.n_ctx_train, hp->n_ctx_train);
    CHECK(m->hp.rope_theta == hp->rope_theta && m->hp.rms_eps == hp->rms_eps);
    CHECK(m->hp.tied_output && m->output == m->token_embd);

    synth_tensor *ts = NULL;
    int n = synth_tensor_list(&ts, hp);
    CHECK_INT(m->n_tensors, n);
    int bad = 0;
    for (int i = 0; i < n; i++) {
        const synth_tensor *t = &ts[i];
        const char *name = gguf ? t->gguf_name : t->hf_name;
        const inf_tensor *lt = inf_model_find(m, name);
        if (!lt) {
            fprintf(stderr, "%s: tensor %s is missing\n", file, name);
            bad++;
            continue;
        }
        inf_dtype want_type = gguf ? synth_gguf_type(mix, t, hp) : (inf_dtype)synth_hf_type(mix);
        if (lt->type != want_type || lt->n_dims != t->n_dims || lt->ne[0] != t->ne[0] ||
            lt->ne[1] != t->ne[1] ||
            lt->nbytes != inf_dtype_row_bytes(want_type, t->ne[0]) * (size_t)t->ne[1]) {
            fprintf(stderr,
                    "%s: %s: type %d dims %d [%lld, %lld], expected type %d dims %d [%lld, %lld]\n",
                    file, name, lt->type, lt->n_dims, (long long)lt->ne[0], (long long)lt->ne[1],
                    want_type, t->n_dims, (long long)t->ne[0], (long long)t->ne[1]);
            bad++;
            continue;
        }
        if (sample_embd && t->role == SYNTH_TOKEN_EMBD) {
            const int64_t rows = t->ne[1];
            const int64_t starts[] = {0, rows / 3, rows / 2 + 7, rows - 64};
            for (int s = 0; s < 4; s++)
                bad += !rows_equal(lt, t, hp, seed, starts[s], 64, file);
        } else {
            bad += !rows_equal(lt, t, hp, seed, 0, t->ne[1], file);
        }
    }
    CHECK_MSG(bad == 0, "%s: %d tensors differ from what the maker computed", file, bad);
    free(ts);
}

/* ---- the small model ---- */

static char tmpdir[] = "/tmp/inferno-roundtrip-XXXXXX";

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    return remove(path);
}

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

/* A tokenizer.json with tokens "t0".."t499", two added tokens and no merges. */
static void write_small_tokenizer(const char *tok_path, const char *cfg_path) {
    FILE *f = fopen(tok_path, "w");
    if (!f) return;
    fputs("{\"version\":\"1.0\",\"added_tokens\":[", f);
    fputs("{\"id\":500,\"content\":\"<|endoftext|>\",\"special\":true},", f);
    fputs("{\"id\":501,\"content\":\"<|im_end|>\",\"special\":true}],", f);
    fputs(
        "\"normalizer\":null,\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":false,"
        "\"trim_offsets\":false,\"use_regex\":true},",
        f);
    fputs("\"model\":{\"type\":\"BPE\",\"vocab\":{", f);
    for (int i = 0; i < 500; i++)
        fprintf(f, "%s\"t%d\":%d", i ? "," : "", i, i);
    fputs("},\"merges\":[]}}\n", f);
    fclose(f);
    write_text(cfg_path, "{\"add_bos_token\":false,\"bos_token\":null,\"eos_token\":\"<|im_end|>\","
                         "\"pad_token\":\"<|endoftext|>\",\"chat_template\":\"{{ messages }}\"}\n");
}

static void build_small_vocab(inf_vocab_desc *v) {
    *v = (inf_vocab_desc){.bos_id = 500, .eos_id = 501, .pad_id = 500, .eot_id = 501};
    v->n_tokens = SMALL_TOKENS;
    v->tokens = calloc(SMALL_TOKENS, sizeof *v->tokens);
    v->token_type = calloc(SMALL_TOKENS, sizeof *v->token_type);
    for (int i = 0; i < 500; i++) {
        v->tokens[i] = malloc(8);
        snprintf(v->tokens[i], 8, "t%d", i);
        v->token_type[i] = INF_TOKEN_NORMAL;
    }
    v->tokens[500] = strdup("<|endoftext|>");
    v->tokens[501] = strdup("<|im_end|>");
    v->token_type[500] = v->token_type[501] = INF_TOKEN_CONTROL;
    v->n_merges = 1;
    v->merges = calloc(1, sizeof *v->merges);
    v->merges[0] = strdup("t1 t2");
    v->model = strdup("gpt2");
    v->pre = strdup("qwen2");
    v->chat_template = strdup("{{ messages }}");
}

static void test_small_model(void) {
    if (!mkdtemp(tmpdir)) {
        CHECK_MSG(0, "cannot create a temporary folder");
        return;
    }
    char tok_json[256], tok_cfg[256];
    snprintf(tok_json, sizeof tok_json, "%s/tokenizer.json", tmpdir);
    snprintf(tok_cfg, sizeof tok_cfg, "%s/tokenizer_config.json", tmpdir);
    write_small_tokenizer(tok_json, tok_cfg);
    inf_vocab_desc vocab;
    build_small_vocab(&vocab);
    const uint64_t seed = 7;
    synth_model sm = {.name = "small",
                      .hp = small_hp,
                      .seed = seed,
                      .vocab = &vocab,
                      .tokenizer_json = tok_json,
                      .tokenizer_config_json = tok_cfg};

    synth_output outs[SYNTH_N_MIX + 4];
    char paths[SYNTH_N_MIX + 4][320];
    int n = 0;
    for (int mix = 0; mix < SYNTH_N_MIX; mix++, n++) {
        snprintf(paths[n], sizeof paths[n], "%s/small-%s.gguf", tmpdir, synth_mix_name(mix));
        outs[n] = (synth_output){SYNTH_GGUF, (synth_mix)mix, paths[n]};
    }
    const synth_mix hf_mixes[] = {SYNTH_F32, SYNTH_F16, SYNTH_BF16};
    for (int k = 0; k < 3; k++, n++) {
        snprintf(paths[n], sizeof paths[n], "%s/small-%s-hf", tmpdir, synth_mix_name(hf_mixes[k]));
        outs[n] = (synth_output){SYNTH_HF, hf_mixes[k], paths[n]};
    }
    snprintf(paths[n], sizeof paths[n], "%s/small-bf16-hf-sharded", tmpdir);
    outs[n] = (synth_output){SYNTH_HF_SHARDED, SYNTH_BF16, paths[n]};
    n++;

    inf_err err = {{0}};
    int rc = synth_write(&sm, outs, n, &err);
    CHECK_MSG(rc == 0, "synth_write: %s", err.msg);
    for (int k = 0; rc == 0 && k < n; k++) {
        inf_model_file *m = NULL;
        if (inf_model_open(&m, outs[k].path, &err) != 0) {
            CHECK_MSG(0, "%s: %s", outs[k].path, err.msg);
            continue;
        }
        check_model(m, outs[k].path, &small_hp, seed, outs[k].mix, outs[k].kind == SYNTH_GGUF,
                    false);
        /* the tokenizer made it through */
        CHECK_INT(m->vocab.eos_id, 501);
        CHECK_STR(m->vocab.tokens[7], "t7");
        CHECK_STR(m->vocab.chat_template, "{{ messages }}");
        if (outs[k].kind == SYNTH_GGUF) {
            CHECK_INT(m->vocab.n_tokens, small_hp.n_vocab);
            CHECK_STR(m->vocab.tokens[511], "[PAD511]");
            CHECK_INT(m->vocab.token_type[511], INF_TOKEN_UNUSED);
            CHECK_INT(m->vocab.bos_id, 500);
            CHECK_INT(m->vocab.pad_id, 500);
        }
        inf_model_close(m);
    }
    /* the sharded folder really has its shards and index */
    char p[400];
    snprintf(p, sizeof p, "%s/model.safetensors.index.json", paths[n - 1]);
    CHECK(access(p, F_OK) == 0);
    snprintf(p, sizeof p, "%s/model-%05d-of-%05d.safetensors", paths[n - 1], SYNTH_HF_SHARDS,
             SYNTH_HF_SHARDS);
    CHECK(access(p, F_OK) == 0);

    inf_vocab_desc_free(&vocab);
    nftw(tmpdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* ---- models/ ---- */

static void test_models_dir(void) {
    inf_hparams hp;
    synth_preset(&hp, "tiny");
    int checked = 0;
    for (int mix = 0; mix < SYNTH_N_MIX; mix++)
        for (int kind = 0; kind < 3; kind++) {
            if (kind != SYNTH_GGUF && synth_hf_type(mix) < 0) continue;
            static const char *const suffix[] = {".gguf", "-hf", "-hf-sharded"};
            char path[256];
            snprintf(path, sizeof path, "models/tiny-%s%s", synth_mix_name(mix), suffix[kind]);
            if (access(path, F_OK) != 0) continue;
            inf_model_file *m = NULL;
            inf_err err = {{0}};
            if (inf_model_open(&m, path, &err) != 0) {
                CHECK_MSG(0, "%s: %s", path, err.msg);
                continue;
            }
            check_model(m, path, &hp, SYNTH_DEFAULT_SEED, (synth_mix)mix, kind == SYNTH_GGUF, true);
            /* the real Qwen3 tokenizer */
            CHECK_INT(m->vocab.eos_id, 151645);
            CHECK_STR(m->vocab.tokens[151645], "<|im_end|>");
            inf_model_close(m);
            checked++;
        }
    if (!checked)
        fprintf(stderr,
                "test_roundtrip: no models/tiny-* files; only the small model was checked\n");
}

int main(void) {
    test_small_model();
    test_models_dir();
    return th_report();
}
