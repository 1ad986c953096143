#include "cli/gen_common.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/select.h"
#include "backend/trace.h"
#include "cli/cli.h"
#include "util/mem.h"

/* ---- flags ---- */

static void usage(FILE *f, const char *cmd, bool want_prompt) {
    fprintf(
        f,
        "usage: inferno %s [-m MODEL]%s [options]\n"
        "\n"
        "  -m, --model PATH          GGUF file or Hugging Face folder (default %s)\n"
        "%s"
        "  -sys, --system-prompt TXT system message for the chat template\n"
        "  -n, --n-predict N         tokens to generate (-1 = until end or full context)\n"
        "  -c, --ctx-size N          context size (default: the model's, or what fits in memory)\n"
        "  -b, --batch-size N        prompt rows per forward pass (default 512)\n"
        "  -t, --threads N           pool threads (default: the physical cores we may use)\n"
        "  --backend NAME            compute backend: pool (default), simd, scalar (the "
        "reference)\n"
        "  --isa LEVEL               force a lower SIMD level: amx, avx512, avx2, neon, scalar\n"
        "  --trace                   print the per-op time histogram after the run\n"
        "  --pack-cache auto|on|off  keep the packed weights in a file, mapped at later loads\n"
        "                            (auto, the default: unless the disk would keep < 5 %% free)\n"
        "  --pack-cache-dir DIR      where (default $INFERNO_CACHE_DIR or ~/.cache/inferno)\n"
        "  --kv basic|paged          KV cache: contiguous, or a pool of blocks (basic)\n"
        "  --kv-block N              paged: tokens per block, a power of two (16)\n"
        "  --cache-mem SIZE          paged: pool size, e.g. 512M or 2G (default: the context)\n"
        "  -ctk, --cache-type-k T    K cache type: f32, f16 (default), bf16, q8_0\n"
        "  -ctv, --cache-type-v T    V cache type: f32, f16 (default), bf16, q8_0\n"
        "  --temp T                  temperature (0.8; <= 0 = greedy)\n"
        "  --top-k N                 top-k (40; 0 = off)\n"
        "  --top-p P                 top-p (0.95; 1 = off)\n"
        "  --min-p P                 min-p (0.05; 0 = off)\n"
        "  --repeat-penalty X        repetition penalty (1.0 = off)\n"
        "  --repeat-last-n N         penalty window (64; 0 = off, -1 = context)\n"
        "  --presence-penalty X      presence penalty (0 = off)\n"
        "  --frequency-penalty X     frequency penalty (0 = off)\n"
        "  -s, --seed N              sampling seed (default random)\n"
        "  --raw                     no chat template: feed the prompt as is\n"
        "  --no-think                chat template with enable_thinking=false\n"
        "  --ignore-eos              never end at an end-of-generation token (they are banned)\n"
        "  --dump-logits FILE.npy    write the logits of each sampled token [steps, vocab]\n"
        "  --token-ids 1,2,3         the prompt as token ids (implies --raw)\n"
        "  --verbose-prompt          print the prompt's token ids to stderr\n"
        "  --grammar FILE            the output follows this GBNF grammar (llama.cpp's syntax)\n"
        "  --json-schema FILE        the output is JSON valid against this JSON Schema\n"
        "%s",
        cmd, want_prompt ? " -p PROMPT" : "", INF_DEFAULT_MODEL,
        want_prompt ? "  -p, --prompt TEXT         the prompt\n" : "", SPEC_FLAGS_USAGE);
}

static int parse_int(const char *s, int *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < INT_MIN || v > INT_MAX) return -1;
    *out = (int)v;
    return 0;
}

static int parse_float(const char *s, float *out) {
    char *end;
    errno = 0;
    float v = strtof(s, &end);
    if (errno || end == s || *end || !isfinite(v)) return -1;
    *out = v;
    return 0;
}

int gen_args_parse(gen_args *a, int argc, char **argv, const char *cmd, bool want_prompt) {
    *a = (gen_args){.model = INF_DEFAULT_MODEL,
                    .n_predict = -1,
                    .n_batch = 512,
                    .backend = "pool",
                    .kv = {.type_k = INF_F16, .type_v = INF_F16},
                    .sp = inf_sampler_defaults(),
                    .spec = spec_flags_defaults()};
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i];
#define IS(x) (!strcmp(f, x))
        if (IS("-h") || IS("--help")) {
            usage(stdout, cmd, want_prompt);
            return 1;
        }
        if (IS("--raw")) {
            a->raw = true;
            continue;
        }
        if (IS("--no-think")) {
            a->no_think = true;
            continue;
        }
        if (IS("--ignore-eos")) {
            a->ignore_eos = true;
            continue;
        }
        if (IS("--verbose-prompt")) {
            a->verbose_prompt = true;
            continue;
        }
        if (IS("--trace")) {
            a->trace = true;
            continue;
        }
        static const char *const takes_value[] = {"-m",
                                                  "--model",
                                                  "-p",
                                                  "--prompt",
                                                  "-sys",
                                                  "--system-prompt",
                                                  "--dump-logits",
                                                  "--token-ids",
                                                  "--backend",
                                                  "-n",
                                                  "--n-predict",
                                                  "-c",
                                                  "--ctx-size",
                                                  "-b",
                                                  "--batch-size",
                                                  "-t",
                                                  "--threads",
                                                  "--temp",
                                                  "--top-k",
                                                  "--top-p",
                                                  "--min-p",
                                                  "--repeat-penalty",
                                                  "--repeat-last-n",
                                                  "--presence-penalty",
                                                  "--frequency-penalty",
                                                  "-s",
                                                  "--seed",
                                                  "--kv",
                                                  "--kv-block",
                                                  "--cache-mem",
                                                  "--isa",
                                                  "--pack-cache",
                                                  "--pack-cache-dir",
                                                  "--grammar",
                                                  "--json-schema",
                                                  "-ctk",
                                                  "--cache-type-k",
                                                  "-ctv",
                                                  "--cache-type-v"};
        bool known = spec_flag_is(f);
        for (size_t k = 0; k < sizeof takes_value / sizeof takes_value[0]; k++)
            known |= !strcmp(f, takes_value[k]);
        if (!known || (!want_prompt && (IS("-p") || IS("--prompt")))) {
            fprintf(stderr, "inferno %s: unknown %s '%s' (see --help)\n", cmd,
                    f[0] == '-' ? "option" : "argument", f);
            return -1;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "inferno %s: %s needs a value (see --help)\n", cmd, f);
            return -1;
        }
        const char *v = argv[++i];
        int bad = 0;
        if (spec_flag_is(f)) {
            if (spec_flag_set(&a->spec, cmd, f, v)) return -1;
        } else if (IS("-m") || IS("--model"))
            a->model = v;
        else if (IS("-p") || IS("--prompt"))
            a->prompt = v;
        else if (IS("-sys") || IS("--system-prompt"))
            a->system = v;
        else if (IS("--dump-logits"))
            a->dump_logits = v;
        else if (IS("--token-ids"))
            a->token_ids = v, a->raw = true;
        else if (IS("--backend"))
            a->backend = v;
        else if (IS("-ctk") || IS("--cache-type-k") || IS("-ctv") || IS("--cache-type-v")) {
            inf_err e;
            bool is_k = IS("-ctk") || IS("--cache-type-k");
            if (inf_kv_parse_type(is_k ? &a->kv.type_k : &a->kv.type_v, v, f, &e)) {
                fprintf(stderr, "inferno %s: %s\n", cmd, e.msg);
                return -1;
            }
        } else if (IS("--kv") || IS("--cache-mem")) {
            inf_err e;
            if (IS("--kv") ? inf_kv_parse_kind(&a->kv.kind, v, &e)
                           : inf_kv_parse_mem(&a->kv.mem_bytes, v, &e)) {
                fprintf(stderr, "inferno %s: %s\n", cmd, e.msg);
                return -1;
            }
        } else if (IS("--kv-block"))
            bad = parse_int(v, &a->kv.block_size) || a->kv.block_size < 1 ||
                  a->kv.block_size > 1024 || (a->kv.block_size & (a->kv.block_size - 1));
        else if (IS("--isa"))
            a->isa = v;
        else if (IS("--pack-cache")) {
            inf_err e;
            if (inf_pack_mode_parse(&a->pack, v, f, &e)) {
                fprintf(stderr, "inferno %s: %s\n", cmd, e.msg);
                return -1;
            }
        } else if (IS("--pack-cache-dir"))
            a->pack_dir = v;
        else if (IS("--grammar"))
            a->grammar = v;
        else if (IS("--json-schema"))
            a->json_schema = v;
        else if (IS("-n") || IS("--n-predict"))
            bad = parse_int(v, &a->n_predict) || a->n_predict < -1;
        else if (IS("-c") || IS("--ctx-size"))
            bad = parse_int(v, &a->n_ctx) || a->n_ctx < 0;
        else if (IS("-b") || IS("--batch-size"))
            bad = parse_int(v, &a->n_batch) || a->n_batch < 1;
        else if (IS("-t") || IS("--threads"))
            bad = parse_int(v, &a->n_threads) || a->n_threads < 0;
        else if (IS("--temp"))
            bad = parse_float(v, &a->sp.temp), a->sp_set |= INF_REC_TEMP;
        else if (IS("--top-k"))
            bad = parse_int(v, &a->sp.top_k), a->sp_set |= INF_REC_TOP_K;
        else if (IS("--top-p"))
            bad = parse_float(v, &a->sp.top_p), a->sp_set |= INF_REC_TOP_P;
        else if (IS("--min-p"))
            bad = parse_float(v, &a->sp.min_p), a->sp_set |= INF_REC_MIN_P;
        else if (IS("--repeat-penalty"))
            bad = parse_float(v, &a->sp.repeat_penalty), a->sp_set |= INF_REC_REPEAT_PENALTY;
        else if (IS("--repeat-last-n"))
            bad = parse_int(v, &a->sp.repeat_last_n);
        else if (IS("--presence-penalty"))
            bad = parse_float(v, &a->sp.presence_penalty);
        else if (IS("--frequency-penalty"))
            bad = parse_float(v, &a->sp.frequency_penalty);
        else if (IS("-s") || IS("--seed")) {
            char *end;
            errno = 0;
            unsigned long long s = strtoull(v, &end, 10);
            bad = errno || end == v || *end || v[0] == '-';
            a->sp.seed = s;
        }
#undef IS
        if (bad) {
            fprintf(stderr, "inferno %s: bad value '%s' for %s%s\n", cmd, v, f,
                    !strcmp(f, "-n") || !strcmp(f, "--n-predict") ? " (expected -1 or more)" : "");
            return -1;
        }
    }
    inf_err err;
    if (inf_sampler_check(&a->sp, &err)) {
        fprintf(stderr, "inferno %s: %s\n", cmd, err.msg);
        return -1;
    }
    if (spec_flags_check(&a->spec, cmd)) return -1;
    if (a->grammar && a->json_schema) {
        fprintf(stderr, "inferno %s: give --grammar or --json-schema, not both\n", cmd);
        return -1;
    }
    if (want_prompt && !a->prompt && !a->token_ids) {
        fprintf(stderr, "inferno %s: no prompt: give one with -p TEXT (see --help)\n", cmd);
        return -1;
    }
    return 0;
}

/* ---- loading ---- */

int gen_ctx_open(gen_ctx *g, const gen_args *a, inf_err *err) {
    memset(g, 0, sizeof *g);
    inf_engine_opts o = {.model_path = a->model,
                         .backend = {.name = a->backend,
                                     .n_threads = a->n_threads,
                                     .isa = a->isa,
                                     .trace = a->trace},
                         .n_seq = 1,
                         .n_ctx = a->n_ctx,
                         .n_batch = a->n_batch,
                         .kv = a->kv,
                         .pack = a->pack,
                         .pack_dir = a->pack_dir};
    spec_flags_apply(&a->spec, &o);
    if (inf_engine_open(&g->e, &o, err)) return -1;
    if (g->e->pack_note[0]) fprintf(stderr, "inferno: %s\n", g->e->pack_note);
    if (g->e->note[0]) fprintf(stderr, "inferno: %s\n", g->e->note);
    g->n_vocab = g->e->ex.n_vocab;
    if (a->dump_logits) {
        g->dump = fopen(a->dump_logits, "wb");
        if (!g->dump) return inf_fail(err, "%s: cannot write: %s", a->dump_logits, strerror(errno));
        static const char blank[128];
        fwrite(blank, 1, sizeof blank, g->dump); /* the header, written at the end */
    }
    return 0;
}

void gen_ctx_close(gen_ctx *g) {
    if (g->dump) fclose(g->dump);
    inf_engine_close(g->e);
    memset(g, 0, sizeof *g);
}

int gen_chat_prompt(gen_ctx *g, const gen_args *a, const json_t *messages, int32_t **ids,
                    int *n_ids, inf_err *err) {
    if (!g->e->mf->vocab.chat_template)
        return inf_fail(err, "%s has no chat template (use --raw)", a->model);
    json_t *kw = json_object();
    if (a->no_think) json_object_set_new(kw, "enable_thinking", json_false());
    inf_chat_input in = {.messages = messages, .kwargs = kw};
    int rc = inf_engine_chat_prompt(g->e, &in, ids, n_ids, &g->in_think, NULL, err);
    json_decref(kw);
    g->chat = rc == 0;
    return rc;
}

/* ---- generating ---- */

static void dump_logits(void *ud, const float *logits, int n_vocab) {
    gen_ctx *g = ud;
    fwrite(logits, sizeof(float), (size_t)n_vocab, g->dump);
    g->dump_rows++;
}

inf_gen_params gen_params(gen_ctx *g, const gen_args *a) {
    inf_gen_params p = inf_gen_defaults();
    p.sampling = a->sp;
    /* A flag the user did not give takes the model file's recommendation
     * (the engine's defaults), as llama.cpp does. */
    const inf_sampler_params *m = &g->e->ex.sampling;
    if (!(a->sp_set & INF_REC_TEMP)) p.sampling.temp = m->temp;
    if (!(a->sp_set & INF_REC_TOP_K)) p.sampling.top_k = m->top_k;
    if (!(a->sp_set & INF_REC_TOP_P)) p.sampling.top_p = m->top_p;
    if (!(a->sp_set & INF_REC_MIN_P)) p.sampling.min_p = m->min_p;
    if (!(a->sp_set & INF_REC_REPEAT_PENALTY)) p.sampling.repeat_penalty = m->repeat_penalty;
    p.max_tokens = a->n_predict;
    p.ignore_eos = a->ignore_eos;
    if (g->dump) p.on_logits = dump_logits, p.ud = g;
    return p;
}

typedef struct stream {
    char **capture;
    size_t len, cap;
} stream;

static void on_text(void *ud, const char *s, size_t n) {
    stream *st = ud;
    fwrite(s, 1, n, stdout);
    fflush(stdout);
    if (!st->capture) return;
    if (st->len + n + 1 > st->cap) {
        size_t cap = (st->len + n + 1) * 2;
        char *p = realloc(*st->capture, cap);
        if (!p) return;
        *st->capture = p;
        st->cap = cap;
    }
    memcpy(*st->capture + st->len, s, n);
    st->len += n;
    (*st->capture)[st->len] = 0;
}

int gen_grammar(const gen_args *a, inf_gram **out, inf_err *err) {
    *out = NULL;
    const char *path = a->grammar ? a->grammar : a->json_schema;
    if (!path) return 0;
    char *text = NULL;
    size_t len = 0;
    if (inf_read_file(&text, &len, path, 16u << 20, err)) return -1;
    int rc;
    inf_err e2 = {{0}};
    if (a->grammar) {
        rc = inf_gram_compile(out, text, len, "root", &e2);
    } else {
        json_error_t je;
        json_t *schema = json_loadb(text, len, 0, &je);
        if (!schema) {
            free(text);
            return inf_fail(err, "%s: not JSON: %s (line %d)", path, je.text, je.line);
        }
        rc = inf_gram_from_json_schema(out, schema, &e2);
        json_decref(schema);
    }
    free(text);
    if (rc) return inf_fail(err, "%s: %s", path, e2.msg);
    return 0;
}

inf_task *gen_generate(gen_ctx *g, const gen_args *a, int32_t *prompt, int n, char **capture,
                       inf_err *err) {
    inf_gen_params p = gen_params(g, a);
    if (gen_grammar(a, &p.grammar, err)) {
        free(prompt);
        return NULL;
    }
    if (p.grammar)
        p.grammar_start = !g->chat || a->no_think ? INF_GRAM_AT_ONCE
                          : g->in_think           ? INF_GRAM_AFTER_THINK
                                                  : INF_GRAM_UNLESS_THINK;
    inf_task *t = inf_engine_submit(g->e, prompt, n, &p, err);
    if (!t) return NULL;
    stream st = {.capture = capture};
    int rc = inf_engine_wait(g->e, t, on_text, &st, err);
    printf("\n");
    fflush(stdout);
    if (rc) {
        inf_task_release(t);
        return NULL;
    }
    return t;
}

void gen_print_timings(const gen_ctx *g, const inf_task *t) {
    const inf_timings *tm = &t->timings;
    double pms = tm->prompt_ms, gms = tm->predicted_ms;
    fprintf(stderr, "\n");
    fprintf(stderr, "load time        = %10.2f ms\n", g->e->t_load_s * 1e3);
    fprintf(stderr,
            "prompt eval time = %10.2f ms / %5d tokens (%8.2f ms per token, %8.2f tokens per "
            "second)\n",
            pms, tm->prompt_n, tm->prompt_n ? pms / tm->prompt_n : 0.0,
            pms > 0 ? tm->prompt_n / (pms * 1e-3) : 0.0);
    if (tm->cache_n) fprintf(stderr, "prompt cached    = %13d tokens\n", tm->cache_n);
    fprintf(stderr,
            "eval time        = %10.2f ms / %5d tokens (%8.2f ms per token, %8.2f tokens per "
            "second)\n",
            gms, tm->predicted_n, tm->predicted_n ? gms / tm->predicted_n : 0.0,
            gms > 0 ? tm->predicted_n / (gms * 1e-3) : 0.0);
    fprintf(stderr, "total time       = %10.2f ms / %5d tokens\n", g->e->t_load_s * 1e3 + pms + gms,
            tm->prompt_n + tm->predicted_n);
    fprintf(stderr, "stop reason      = %s, backend %s, seed %llu\n", inf_finish_name(t->finish),
            g->e->backend_name, (unsigned long long)t->seed);
    if (g->e->ex.spec_kind != INF_SPEC_NONE)
        fprintf(stderr,
                "speculative      = %s%s%s, %d drafted, %d accepted (%.1f %%) in %d steps\n",
                inf_spec_kind_name(g->e->ex.spec_kind), g->e->ex.draft_name ? " " : "",
                g->e->ex.draft_name ? g->e->ex.draft_name : "", tm->draft_n, tm->draft_accepted,
                tm->draft_n ? 100.0 * tm->draft_accepted / tm->draft_n : 0.0, tm->draft_steps);
    if (t->p.grammar)
        fprintf(stderr,
                "grammar          = %10.2f ms in all, %d masks (%d walked), slowest mask %.3f ms\n",
                tm->grammar_ms, tm->grammar_masks, tm->grammar_masks_walk, tm->grammar_mask_ms_max);
    if (inf_trace_is(g->e->be)) {
        static char hist[8192];
        inf_trace_format(g->e->be, hist, sizeof hist);
        fprintf(stderr, "\n%s", hist);
    }
}

int gen_dump_close(gen_ctx *g, inf_err *err) {
    if (!g->dump) return 0;
    /* .npy v1.0: magic, u16 header length, a Python dict literal padded with
     * spaces to a 128-byte header ending in '\n'. */
    char hdr[128];
    memset(hdr, ' ', sizeof hdr);
    memcpy(hdr, "\x93NUMPY\x01\x00", 8);
    hdr[8] = (char)(128 - 10), hdr[9] = 0;
    char dict[118];
    int n =
        snprintf(dict, sizeof dict, "{'descr': '<f4', 'fortran_order': False, 'shape': (%d, %d), }",
                 g->dump_rows, g->n_vocab);
    memcpy(hdr + 10, dict, (size_t)n);
    hdr[127] = '\n';
    int bad = fseek(g->dump, 0, SEEK_SET) != 0 || fwrite(hdr, 1, 128, g->dump) != 128;
    bad |= fclose(g->dump) != 0;
    g->dump = NULL;
    if (bad) return inf_fail(err, "cannot write the logits file");
    return 0;
}
