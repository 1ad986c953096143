/* inferno-mkmodel: writes random-weight Qwen3 test models (tests/support/synth.h)
 * as GGUF files and Hugging Face folders, with the real Qwen3 tokenizer.
 *
 *   inferno-mkmodel --preset tiny|qwen3-0.6b|tiny-moe|qwen3-30b-a3b[-6l]|tiny-qwen35|qwen35-2b-4l|
 *                            tiny-qwen35-moe|qwen35-35b-a3b-4l
 *                   --tokenizer DIR
 *                   --out DIR --formats gguf:f32,gguf:q4_k_m,hf:bf16,hf-sharded:f32,...
 *                   [--seed N] [--skip-existing]
 *
 * Outputs: OUT/<preset>-<type>.gguf, OUT/<preset>-<type>-hf/,
 * OUT/<preset>-<type>-hf-sharded/, OUT/<preset>-<type>-hf-fused/ (MoE experts
 * in transformers v5's fused layout). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "modelfile/model.h"
#include "support/synth.h"

static void usage(void) {
    fprintf(stderr,
            "usage: inferno-mkmodel --preset tiny|qwen3-0.6b|tiny-moe|qwen3-30b-a3b[-6l]|\n"
            "                                tiny-qwen35|qwen35-2b-4l|tiny-qwen35-moe|\n"
            "                                qwen35-35b-a3b-4l\n"
            "                       --tokenizer DIR --out DIR\n"
            "                       --formats KIND:TYPE[,KIND:TYPE...] [--seed N] "
            "[--skip-existing]\n"
            "  KIND: gguf (TYPE f32 f16 bf16 q8_0 q4_0 q4_k q6_k q4_k_m, llama-quantize's\n"
            "        q4_1 q5_0 q5_1 q2_k q3_k_s q3_k_m q3_k_l q4_k_s q5_k_s q5_k_m\n"
            "        iq4_nl iq4_xs, and mxfp4),\n"
            "        hf, hf-sharded, hf-fused (TYPE f32 f16 bf16; hf-fused: MoE experts\n"
            "        as mlp.experts.gate_up_proj / down_proj)\n"
            "  presets: tiny (qwen3), qwen3-0.6b, tiny-moe (qwen3moe), qwen3-30b-a3b[-6l],\n"
            "        tiny-qwen35 and qwen35-2b-4l (Qwen3.5 hybrids: Gated DeltaNet and\n"
            "        gated attention; GGUF qwen35, HF qwen3_5), tiny-qwen35-moe and\n"
            "        qwen35-35b-a3b-4l (their MoE variant: routed experts and a shared\n"
            "        expert; GGUF qwen35moe, HF qwen3_5_moe, experts always fused)\n");
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The tokenizer as llama.cpp's converter writes it: added tokens that look
 * special (<|...|>, e.g. the non-special <|fim_prefix|>) become CONTROL in the
 * GGUF writer (inf_convert_tokenizer_meta), so with special parsing off a GGUF
 * treats <|fim_prefix|> as text where tokenizer.json still matches it, exactly
 * as real Qwen3 GGUFs do. Qwen3's tokenizer_config.json has no bos_token: like
 * the converter, take config.json's bos_token_id, <|endoftext|>. */
static int find_token(const inf_vocab_desc *v, const char *text) {
    for (int i = v->n_tokens - 1; i >= 0; i--) /* added tokens sit at the end */
        if (v->tokens[i] && !strcmp(v->tokens[i], text)) return i;
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
        fprintf(stderr,
                "inferno-mkmodel: unknown preset %s (tiny, qwen3-0.6b, tiny-moe, qwen3-30b-a3b, "
                "qwen3-30b-a3b-6l, tiny-qwen35, qwen35-2b-4l, tiny-qwen35-moe, "
                "qwen35-35b-a3b-4l)\n",
                preset);
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
                          : !strcmp(f, "hf-fused")   ? SYNTH_HF_FUSED
                                                     : (synth_kind)-1;
        if (mix < 0 || (int)kind < 0 || (kind != SYNTH_GGUF && synth_hf_type(mix) < 0) ||
            n_outs == 64) {
            fprintf(stderr, "inferno-mkmodel: bad format %s%s%s\n", f, colon ? ":" : "",
                    colon ? colon + 1 : "");
            usage();
            free(list);
            return 2;
        }
        static const char *const suffix[] = {[SYNTH_GGUF] = ".gguf",
                                             [SYNTH_HF] = "-hf",
                                             [SYNTH_HF_SHARDED] = "-hf-sharded",
                                             [SYNTH_HF_FUSED] = "-hf-fused"};
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
    inf_err err = {{0}};
    if (inf_vocab_from_hf(&vocab, tok_json, tok_cfg, &err)) {
        fprintf(stderr, "inferno-mkmodel: %s\n", err.msg);
        return 1;
    }
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
