/* Round trip: every tensor loaded (inf_model_open) from every format and type
 * the model maker writes equals what the maker computed: the same type and
 * shape, and byte for byte the same data (quantized types block for block).
 *
 * 1. A small model (2 layers, vocab 512, with its own little tokenizer) is
 *    written in every GGUF mix and every HF layout into a temporary folder
 *    and checked completely.
 * 2. The tiny models under models/ (made by scripts/make-models.sh with the
 *    default seed), when present, are checked too: every tensor completely,
 *    except token_embd (39M weights) in sampled row ranges.
 * 3. The GGUF writer on its own: every metadata type and array kind, a
 *    non-default alignment and misuse, read back with the GGUF reader. */
#define _XOPEN_SOURCE 700
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "modelfile/gguf.h"
#include "convert/gguf_writer.h"
#include "model/model.h"
#include "modelfile/model.h"
#include "support/synth.h"
#include "quant/quantize.h"

/* the output head as the model binds it: the embedding when tied */
static const inf_tensor *model_output(const inf_model_file *m) {
    return inf_model_find(m, m->hp.tied_output ? "token_embd.weight" : "output.weight");
}

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
    CHECK(m->hp.tied_output && model_output(m) == inf_model_find(m, "token_embd.weight"));

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

/* ---- the GGUF writer: every metadata type, read back by the GGUF reader ---- */

static void test_gguf_writer_metadata(void) {
    char path[] = "/tmp/inferno-gguf-writer-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) {
        CHECK_MSG(0, "cannot create a temporary file");
        return;
    }
    close(fd);
    gguf_writer *w = gguf_writer_create();
    gguf_writer_add_u8(w, "u8", 200);
    gguf_writer_add_i8(w, "i8", -100);
    gguf_writer_add_u16(w, "u16", 60000);
    gguf_writer_add_i16(w, "i16", -30000);
    gguf_writer_add_u32(w, "u32", 4000000000u);
    gguf_writer_add_i32(w, "i32", -2000000000);
    gguf_writer_add_u64(w, "u64", 18000000000000000000ull);
    gguf_writer_add_i64(w, "i64", -9000000000000000000ll);
    gguf_writer_add_f32(w, "f32", 0.1f);
    gguf_writer_add_f64(w, "f64", 0.1);
    gguf_writer_add_bool(w, "bool", true);
    gguf_writer_add_str(w, "str", "héllo");
    gguf_writer_add_u32(w, "general.alignment", 64);
    const char *strs[] = {"a b", "", "Ġthe"};
    gguf_writer_add_arr_str(w, "arr.str", strs, 3);
    const int32_t ints[] = {1, -2, 3};
    gguf_writer_add_arr(w, "arr.i32", GGUF_TYPE_INT32, ints, 3);
    const float fl[] = {0.5f, -1.25f};
    gguf_writer_add_arr(w, "arr.f32", GGUF_TYPE_FLOAT32, fl, 2);
    const int64_t ne_a[] = {32, 3}, ne_b[] = {7};
    gguf_writer_add_tensor(w, "a", INF_Q8_0, 2, ne_a);
    gguf_writer_add_tensor(w, "b", INF_F32, 1, ne_b);
    inf_err err = {{0}};
    CHECK_MSG(gguf_writer_open(w, path, &err) == 0, "%s", err.msg);
    unsigned char a[3 * 34], b[7 * 4];
    for (size_t i = 0; i < sizeof a; i++)
        a[i] = (unsigned char)i;
    for (size_t i = 0; i < sizeof b; i++)
        b[i] = (unsigned char)(0xA0 + i);
    CHECK(gguf_writer_write(w, a, 50, &err) == 0);
    CHECK(gguf_writer_write(w, a + 50, 60, &err) != 0); /* would cross into "b" */
    CHECK(gguf_writer_write(w, a + 50, sizeof a - 50, &err) == 0);
    CHECK(gguf_writer_write(w, b, sizeof b, &err) == 0);
    CHECK(gguf_writer_write(w, b, 1, &err) != 0); /* nothing left to fill */
    CHECK_MSG(gguf_writer_close(w, &err) == 0, "%s", err.msg);
    gguf_writer_free(w);

    gguf_file *g = NULL;
    if (gguf_open(&g, path, &err) != 0) {
        CHECK_MSG(0, "%s", err.msg);
        unlink(path);
        return;
    }
    int64_t iv = 0;
    double fv = 0;
    bool bv = false;
    const char *sp = NULL;
    size_t sl = 0;
    CHECK(gguf_get_int(g, "u8", &iv, &err) == 0 && iv == 200);
    CHECK(gguf_get_int(g, "i8", &iv, &err) == 0 && iv == -100);
    CHECK(gguf_get_int(g, "u16", &iv, &err) == 0 && iv == 60000);
    CHECK(gguf_get_int(g, "i16", &iv, &err) == 0 && iv == -30000);
    CHECK(gguf_get_int(g, "u32", &iv, &err) == 0 && iv == 4000000000ll);
    CHECK(gguf_get_int(g, "i32", &iv, &err) == 0 && iv == -2000000000);
    CHECK(gguf_find(g, "u64") && gguf_find(g, "u64")->val.u == 18000000000000000000ull);
    CHECK(gguf_get_int(g, "i64", &iv, &err) == 0 && iv == -9000000000000000000ll);
    CHECK(gguf_get_float(g, "f32", &fv, &err) == 0 && fv == (double)0.1f);
    CHECK(gguf_get_float(g, "f64", &fv, &err) == 0 && fv == 0.1);
    CHECK(gguf_get_bool(g, "bool", &bv, &err) == 0 && bv);
    CHECK(gguf_get_str(g, "str", &sp, &sl, &err) == 0 && sl == 6 && !memcmp(sp, "héllo", 6));
    const gguf_value *arr = NULL;
    CHECK(gguf_get_arr(g, "arr.str", GGUF_TYPE_STRING, &arr, &err) == 0 && arr->arr.n == 3 &&
          arr->arr.items[2].str.len == strlen("Ġthe") && arr->arr.items[1].str.len == 0);
    CHECK(gguf_get_arr(g, "arr.i32", GGUF_TYPE_INT32, &arr, &err) == 0 && arr->arr.n == 3 &&
          !memcmp(arr->arr.raw, ints, sizeof ints));
    CHECK(gguf_get_arr(g, "arr.f32", GGUF_TYPE_FLOAT32, &arr, &err) == 0 && arr->arr.n == 2 &&
          !memcmp(arr->arr.raw, fl, sizeof fl));
    CHECK_INT(g->n_kv, 16);
    CHECK_INT(g->alignment, 64);
    CHECK_INT(g->data_offset % 64, 0);
    CHECK_INT(g->n_tensors, 2);
    if (g->n_tensors == 2) {
        CHECK_INT(g->tensors[1].offset, 128); /* 102 bytes of "a", padded to 64 */
        CHECK(!memcmp(g->map.data + g->data_offset, a, sizeof a));
        CHECK(!memcmp(g->map.data + g->data_offset + 128, b, sizeof b));
    }
    gguf_close(g);

    /* closing with a tensor unfilled fails and leaves no file */
    w = gguf_writer_create();
    gguf_writer_add_tensor(w, "b", INF_F32, 1, ne_b);
    CHECK(gguf_writer_open(w, path, &err) == 0);
    CHECK(gguf_writer_write(w, b, 8, &err) == 0);
    CHECK(gguf_writer_close(w, &err) != 0 && strstr(err.msg, "not written completely"));
    CHECK(access(path, F_OK) != 0);
    gguf_writer_free(w);
    /* a bad tensor shape is reported by open */
    w = gguf_writer_create();
    gguf_writer_add_tensor(w, "odd", INF_Q4_K, 1, ne_b);
    CHECK(gguf_writer_open(w, path, &err) != 0 && strstr(err.msg, "odd"));
    gguf_writer_free(w);
    unlink(path);
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
    test_gguf_writer_metadata();
    test_small_model();
    test_models_dir();
    return th_report();
}
