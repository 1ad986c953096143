/* inferno-mkmodel: writes random-weight Qwen3 test models (src/modelfile/synth.h)
 * as GGUF files and Hugging Face folders, with the real Qwen3 tokenizer.
 *
 *   inferno-mkmodel --preset tiny|qwen3-0.6b --tokenizer DIR --out DIR
 *                   --formats gguf:f32,gguf:q4_k_m,hf:bf16,hf-sharded:f32,...
 *                   [--seed N] [--skip-existing]
 *
 * Outputs: OUT/<preset>-<type>.gguf, OUT/<preset>-<type>-hf/,
 * OUT/<preset>-<type>-hf-sharded/. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "modelfile/model.h"
#include "modelfile/synth.h"

static void usage(void) {
    fprintf(stderr, "usage: inferno-mkmodel --preset tiny|qwen3-0.6b --tokenizer DIR --out DIR\n"
                    "                       --formats KIND:TYPE[,KIND:TYPE...] [--seed N] "
                    "[--skip-existing]\n"
                    "  KIND: gguf (TYPE f32 f16 bf16 q8_0 q4_0 q4_k q6_k q4_k_m),\n"
                    "        hf, hf-sharded (TYPE f32 f16 bf16)\n");
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- the tokenizer (until inf_vocab_from_hf lands on main) ----
 * llama.cpp's converter rules: added tokens that are special, or look
 * special (<|...|>), are CONTROL; other added tokens USER_DEFINED. */

static const char *token_text(json_t *v) { /* a string or {"content": ...} */
    if (json_is_string(v)) return json_string_value(v);
    if (json_is_object(v)) return json_string_value(json_object_get(v, "content"));
    return NULL;
}

static int find_token(const inf_vocab_desc *v, const char *text) {
    if (!text) return -1;
    for (int i = v->n_tokens - 1; i >= 0; i--) /* added tokens sit at the end */
        if (v->tokens[i] && !strcmp(v->tokens[i], text)) return i;
    return -1;
}

static int load_vocab(inf_vocab_desc *v, const char *tok_path, const char *cfg_path) {
    *v = (inf_vocab_desc){.bos_id = -1, .eos_id = -1, .pad_id = -1, .eot_id = -1};
    json_error_t je;
    json_t *tok = json_load_file(tok_path, 0, &je);
    if (!tok) {
        fprintf(stderr, "inferno-mkmodel: %s: line %d: %s\n", tok_path, je.line, je.text);
        return -1;
    }
    json_t *cfg = json_load_file(cfg_path, 0, &je);
    if (!cfg) {
        fprintf(stderr, "inferno-mkmodel: %s: line %d: %s\n", cfg_path, je.line, je.text);
        json_decref(tok);
        return -1;
    }
    json_t *model = json_object_get(tok, "model");
    json_t *vocab = json_object_get(model, "vocab"), *merges = json_object_get(model, "merges");
    json_t *added = json_object_get(tok, "added_tokens");
    if (!json_is_object(vocab) || !json_is_array(merges) || !json_is_array(added)) {
        fprintf(stderr, "inferno-mkmodel: %s: expected model.vocab, model.merges, added_tokens\n",
                tok_path);
        goto fail;
    }
    int n = 0;
    const char *key;
    json_t *val;
    size_t i;
    json_object_foreach(vocab, key, val) if (json_integer_value(val) + 1 > n) n =
        (int)json_integer_value(val) + 1;
    json_array_foreach(added, i, val) {
        json_int_t id = json_integer_value(json_object_get(val, "id"));
        if (id + 1 > n) n = (int)id + 1;
    }
    v->n_tokens = n;
    v->tokens = calloc((size_t)n, sizeof *v->tokens);
    v->token_type = calloc((size_t)n, sizeof *v->token_type);
    v->n_merges = (int)json_array_size(merges);
    v->merges = calloc((size_t)v->n_merges + 1, sizeof *v->merges);
    if (!v->tokens || !v->token_type || !v->merges) goto oom;
    json_object_foreach(vocab, key, val) {
        json_int_t id = json_integer_value(val);
        if (id < 0 || id >= n) continue;
        free(v->tokens[id]);
        v->tokens[id] = strdup(key);
        v->token_type[id] = INF_TOKEN_NORMAL;
    }
    json_array_foreach(added, i, val) {
        json_int_t id = json_integer_value(json_object_get(val, "id"));
        const char *text = json_string_value(json_object_get(val, "content"));
        if (id < 0 || id >= n || !text) continue;
        size_t len = strlen(text);
        bool looks_special = len >= 4 && !strncmp(text, "<|", 2) && !strcmp(text + len - 2, "|>");
        free(v->tokens[id]);
        v->tokens[id] = strdup(text);
        v->token_type[id] = json_is_true(json_object_get(val, "special")) || looks_special
                                ? INF_TOKEN_CONTROL
                                : INF_TOKEN_USER_DEFINED;
    }
    json_array_foreach(merges, i, val) {
        if (json_is_string(val))
            v->merges[i] = strdup(json_string_value(val));
        else if (json_is_array(val) && json_array_size(val) == 2) {
            const char *a = json_string_value(json_array_get(val, 0));
            const char *b = json_string_value(json_array_get(val, 1));
            if (a && b && asprintf(&v->merges[i], "%s %s", a, b) < 0) v->merges[i] = NULL;
        }
        if (!v->merges[i]) {
            fprintf(stderr, "inferno-mkmodel: %s: model.merges[%zu] is not a pair\n", tok_path, i);
            goto fail;
        }
    }
    v->model = strdup("gpt2");
    v->pre = strdup("qwen2");
    const char *tmpl = json_string_value(json_object_get(cfg, "chat_template"));
    if (tmpl) v->chat_template = strdup(tmpl);
    v->add_bos = json_is_true(json_object_get(cfg, "add_bos_token"));
    v->eos_id = find_token(v, token_text(json_object_get(cfg, "eos_token")));
    v->pad_id = find_token(v, token_text(json_object_get(cfg, "pad_token")));
    v->bos_id = find_token(v, token_text(json_object_get(cfg, "bos_token")));
    v->eot_id = find_token(v, "<|im_end|>");
    json_decref(tok);
    json_decref(cfg);
    return 0;
oom:
    fprintf(stderr, "inferno-mkmodel: out of memory reading %s\n", tok_path);
fail:
    json_decref(tok);
    json_decref(cfg);
    inf_vocab_desc_free(v);
    return -1;
}

static bool exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

int main(int argc, char **argv) {
    const char *preset = NULL, *tok_dir = NULL, *out_dir = NULL, *formats = NULL;
    uint64_t seed = SYNTH_DEFAULT_SEED;
    bool skip_existing = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *next = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--skip-existing"))
            skip_existing = true;
        else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage();
            return 0;
        } else if (next && !strcmp(a, "--preset"))
            preset = argv[++i];
        else if (next && !strcmp(a, "--tokenizer"))
            tok_dir = argv[++i];
        else if (next && !strcmp(a, "--out"))
            out_dir = argv[++i];
        else if (next && !strcmp(a, "--formats"))
            formats = argv[++i];
        else if (next && !strcmp(a, "--seed"))
            seed = strtoull(argv[++i], NULL, 0);
        else {
            fprintf(stderr, "inferno-mkmodel: unknown or incomplete option %s\n", a);
            usage();
            return 2;
        }
    }
    if (!preset || !tok_dir || !out_dir || !formats) {
        usage();
        return 2;
    }
    synth_model m = {.name = preset, .seed = seed};
    if (synth_preset(&m.hp, preset)) {
        fprintf(stderr, "inferno-mkmodel: unknown preset %s (tiny, qwen3-0.6b)\n", preset);
        return 2;
    }

    /* parse the format list into outputs, skipping existing ones if asked */
    synth_output outs[64];
    char paths[64][4096];
    int n_outs = 0;
    char *list = strdup(formats);
    for (char *save = NULL, *f = strtok_r(list, ",", &save); f; f = strtok_r(NULL, ",", &save)) {
        char *colon = strchr(f, ':');
        int mix = colon ? synth_mix_parse(colon + 1) : -1;
        if (colon) *colon = 0;
        synth_kind kind = !strcmp(f, "gguf")         ? SYNTH_GGUF
                          : !strcmp(f, "hf")         ? SYNTH_HF
                          : !strcmp(f, "hf-sharded") ? SYNTH_HF_SHARDED
                                                     : (synth_kind)-1;
        if (mix < 0 || (int)kind < 0 || (kind != SYNTH_GGUF && synth_hf_type(mix) < 0) ||
            n_outs == 64) {
            fprintf(stderr, "inferno-mkmodel: bad format %s%s%s\n", f, colon ? ":" : "",
                    colon ? colon + 1 : "");
            usage();
            free(list);
            return 2;
        }
        static const char *const suffix[] = {
            [SYNTH_GGUF] = ".gguf", [SYNTH_HF] = "-hf", [SYNTH_HF_SHARDED] = "-hf-sharded"};
        snprintf(paths[n_outs], sizeof paths[n_outs], "%s/%s-%s%s", out_dir, preset,
                 synth_mix_name(mix), suffix[kind]);
        if (skip_existing && exists(paths[n_outs])) {
            printf("exists: %s\n", paths[n_outs]);
            continue;
        }
        outs[n_outs] = (synth_output){.kind = kind, .mix = (synth_mix)mix, .path = paths[n_outs]};
        n_outs++;
    }
    free(list);
    if (n_outs == 0) return 0;
    if (mkdir(out_dir, 0755) != 0 && !exists(out_dir)) {
        fprintf(stderr, "inferno-mkmodel: cannot create %s\n", out_dir);
        return 1;
    }

    char tok_json[4096], tok_cfg[4096];
    snprintf(tok_json, sizeof tok_json, "%s/tokenizer.json", tok_dir);
    snprintf(tok_cfg, sizeof tok_cfg, "%s/tokenizer_config.json", tok_dir);
    inf_vocab_desc vocab;
    if (load_vocab(&vocab, tok_json, tok_cfg)) return 1;
    /* Qwen3's tokenizer_config.json has no bos_token; llama.cpp's converter
     * takes bos_token_id from config.json, which is <|endoftext|>. */
    if (vocab.bos_id < 0) vocab.bos_id = find_token(&vocab, "<|endoftext|>");
    if (vocab.n_tokens > m.hp.n_vocab) {
        fprintf(stderr, "inferno-mkmodel: the tokenizer has %d tokens, more than the vocab of %d\n",
                vocab.n_tokens, m.hp.n_vocab);
        inf_vocab_desc_free(&vocab);
        return 1;
    }
    m.vocab = &vocab;
    m.tokenizer_json = tok_json;
    m.tokenizer_config_json = tok_cfg;

    double t0 = now();
    inf_err err = {{0}};
    int rc = synth_write(&m, outs, n_outs, &err);
    inf_vocab_desc_free(&vocab);
    if (rc) {
        fprintf(stderr, "inferno-mkmodel: %s\n", err.msg);
        return 1;
    }
    for (int k = 0; k < n_outs; k++)
        printf("wrote: %s\n", outs[k].path);
    printf("%d output(s) in %.2f s\n", n_outs, now() - t0);
    return 0;
}
