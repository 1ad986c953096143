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
#include "template/template.h"
#include "util/timer.h"

/* ---- flags ---- */

static void usage(FILE *f, const char *cmd, bool want_prompt) {
    fprintf(f,
            "usage: inferno %s [-m MODEL]%s [options]\n"
            "\n"
            "  -m, --model PATH          GGUF file or Hugging Face folder (default %s)\n"
            "%s"
            "  -sys, --system-prompt TXT system message for the chat template\n"
            "  -n, --n-predict N         tokens to generate (-1 = until end or full context)\n"
            "  -c, --ctx-size N          context size (default min(4096, model's))\n"
            "  -b, --batch-size N        prompt rows per forward pass (default 512)\n"
            "  -t, --threads N           pool threads (default: the physical cores we may use)\n"
            "  --backend NAME            compute backend: pool (default), simd, scalar (the reference)\n"
            "  --isa LEVEL               force a lower SIMD level: amx, avx512, avx2, neon, scalar\n"
            "  --trace                   print the per-op time histogram after the run\n"
            "  --kv basic|paged          KV cache: contiguous, or a pool of blocks (basic)\n"
            "  --kv-block N              paged: tokens per block, a power of two (16)\n"
            "  --cache-mem SIZE          paged: pool size, e.g. 512M or 2G (default: the context)\n"
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
            "  --ignore-eos              do not stop at end-of-generation tokens\n"
            "  --dump-logits FILE.npy    write the logits of each sampled token [steps, vocab]\n"
            "  --token-ids 1,2,3         the prompt as token ids (implies --raw)\n"
            "  --verbose-prompt          print the prompt's token ids to stderr\n",
            cmd, want_prompt ? " -p PROMPT" : "", INF_DEFAULT_MODEL,
            want_prompt ? "  -p, --prompt TEXT         the prompt\n" : "");
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
                    .sp = inf_sampler_defaults()};
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i];
#define IS(x) (!strcmp(f, x))
        if (IS("-h") || IS("--help")) {
            usage(stdout, cmd, want_prompt);
            return 1;
        }
        if (IS("--raw")) { a->raw = true; continue; }
        if (IS("--no-think")) { a->no_think = true; continue; }
        if (IS("--ignore-eos")) { a->ignore_eos = true; continue; }
        if (IS("--verbose-prompt")) { a->verbose_prompt = true; continue; }
        if (IS("--trace")) { a->trace = true; continue; }
        static const char *const takes_value[] = {
            "-m", "--model", "-p", "--prompt", "-sys", "--system-prompt", "--dump-logits",
            "--token-ids", "--backend", "-n", "--n-predict", "-c", "--ctx-size", "-b",
            "--batch-size", "-t", "--threads", "--temp", "--top-k", "--top-p", "--min-p",
            "--repeat-penalty", "--repeat-last-n", "--presence-penalty", "--frequency-penalty",
            "-s", "--seed", "--kv", "--kv-block", "--cache-mem", "--isa"};
        bool known = false;
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
        if (IS("-m") || IS("--model")) a->model = v;
        else if (IS("-p") || IS("--prompt")) a->prompt = v;
        else if (IS("-sys") || IS("--system-prompt")) a->system = v;
        else if (IS("--dump-logits")) a->dump_logits = v;
        else if (IS("--token-ids")) a->token_ids = v, a->raw = true;
        else if (IS("--backend")) a->backend = v;
        else if (IS("--kv") || IS("--cache-mem")) {
            inf_err e;
            if (IS("--kv") ? inf_kv_parse_kind(&a->kv.kind, v, &e)
                           : inf_kv_parse_mem(&a->kv.mem_bytes, v, &e)) {
                fprintf(stderr, "inferno %s: %s\n", cmd, e.msg);
                return -1;
            }
        } else if (IS("--kv-block"))
            bad = parse_int(v, &a->kv.block_size) || a->kv.block_size < 1 ||
                  a->kv.block_size > 1024 || (a->kv.block_size & (a->kv.block_size - 1));
        else if (IS("--isa")) a->isa = v;
        else if (IS("-n") || IS("--n-predict")) bad = parse_int(v, &a->n_predict) || a->n_predict < -1;
        else if (IS("-c") || IS("--ctx-size")) bad = parse_int(v, &a->n_ctx) || a->n_ctx < 0;
        else if (IS("-b") || IS("--batch-size")) bad = parse_int(v, &a->n_batch) || a->n_batch < 1;
        else if (IS("-t") || IS("--threads")) bad = parse_int(v, &a->n_threads) || a->n_threads < 0;
        else if (IS("--temp")) bad = parse_float(v, &a->sp.temp);
        else if (IS("--top-k")) bad = parse_int(v, &a->sp.top_k);
        else if (IS("--top-p")) bad = parse_float(v, &a->sp.top_p);
        else if (IS("--min-p")) bad = parse_float(v, &a->sp.min_p);
        else if (IS("--repeat-penalty")) bad = parse_float(v, &a->sp.repeat_penalty);
        else if (IS("--repeat-last-n")) bad = parse_int(v, &a->sp.repeat_last_n);
        else if (IS("--presence-penalty")) bad = parse_float(v, &a->sp.presence_penalty);
        else if (IS("--frequency-penalty")) bad = parse_float(v, &a->sp.frequency_penalty);
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
    if (want_prompt && !a->prompt && !a->token_ids) {
        fprintf(stderr, "inferno %s: no prompt: give one with -p TEXT (see --help)\n", cmd);
        return -1;
    }
    return 0;
}

/* ---- loading ---- */

static int pick_backend(gen_ctx *g, const gen_args *a, inf_err *err) {
    inf_backend_opts o = {.name = a->backend, .n_threads = a->n_threads, .isa = a->isa, .trace = a->trace};
    if (inf_backend_create(&g->be_owned, &o, err)) return -1;
    g->be = *g->be_owned;
    return 0;
}

int gen_ctx_open(gen_ctx *g, const gen_args *a, inf_err *err) {
    memset(g, 0, sizeof *g);
    double t0 = inf_now_s();
    if (pick_backend(g, a, err)) return -1;
    inf_backend_complete(&g->be);
    if (inf_model_open(&g->mf, a->model, err)) return -1;
    if (g->mf->arch && strcmp(g->mf->arch, "qwen3") != 0)
        return inf_fail(err, "%s: architecture '%s': inferno runs qwen3 models", a->model,
                        g->mf->arch);
    if (inf_tok_create(&g->tok, &g->mf->vocab, err)) return inf_fail_ctx(err, "%s", a->model);
    g->n_vocab = g->mf->hp.n_vocab;
    int n_ctx = a->n_ctx;
    if (n_ctx == 0) {
        n_ctx = 4096;
        if (g->mf->hp.n_ctx_train > 0 && g->mf->hp.n_ctx_train < n_ctx) n_ctx = g->mf->hp.n_ctx_train;
    }
    int rows = a->n_batch < n_ctx ? a->n_batch : n_ctx;
    if (inf_qwen3_create(&g->model, g->mf, &g->be, n_ctx, rows, err)) return -1;
    if (inf_session_create_kv(&g->session, g->model, n_ctx, &a->sp, &a->kv, err)) return -1;
    if (!(g->detok = inf_detok_create(g->tok))) return inf_fail(err, "out of memory");
    if (a->dump_logits) {
        g->dump = fopen(a->dump_logits, "wb");
        if (!g->dump)
            return inf_fail(err, "%s: cannot write: %s", a->dump_logits, strerror(errno));
        static const char blank[128];
        fwrite(blank, 1, sizeof blank, g->dump); /* the header, written at the end */
    }
    g->t_load_s = inf_now_s() - t0;
    return 0;
}

void gen_ctx_close(gen_ctx *g) {
    if (g->dump) fclose(g->dump);
    inf_detok_free(g->detok);
    inf_session_free(g->session);
    inf_qwen3_free(g->model);
    inf_tok_free(g->tok);
    inf_model_close(g->mf);
    inf_backend_free(g->be_owned);
    memset(g, 0, sizeof *g);
}

int gen_tokenize_raw(gen_ctx *g, const char *text, int32_t **ids, int *n_ids, inf_err *err) {
    int32_t *t;
    int n;
    if (inf_tok_encode(g->tok, text, strlen(text), true, &t, &n, err)) return -1;
    int32_t bos = inf_tok_bos(g->tok);
    if (inf_tok_add_bos(g->tok) && bos >= 0 && (n == 0 || t[0] != bos)) {
        int32_t *t2 = malloc(sizeof(int32_t) * (size_t)(n + 1));
        if (!t2) {
            free(t);
            return inf_fail(err, "out of memory");
        }
        t2[0] = bos;
        if (n) memcpy(t2 + 1, t, sizeof(int32_t) * (size_t)n);
        free(t);
        t = t2;
        n++;
    }
    *ids = t;
    *n_ids = n;
    return 0;
}

int gen_render_chat(gen_ctx *g, const gen_args *a, const void *messages_json, int32_t **ids,
                    int *n_ids, inf_err *err) {
    const char *source = g->mf->vocab.chat_template;
    if (!source) return inf_fail(err, "%s has no chat template (use --raw)", a->model);
    json_t *extra = json_object();
    if (a->no_think) json_object_set_new(extra, "enable_thinking", json_false());
    const inf_vocab_desc *v = &g->mf->vocab;
    if (v->bos_id >= 0 && v->bos_id < v->n_tokens)
        json_object_set_new(extra, "bos_token", json_string(v->tokens[v->bos_id]));
    if (v->eos_id >= 0 && v->eos_id < v->n_tokens)
        json_object_set_new(extra, "eos_token", json_string(v->tokens[v->eos_id]));
    char *text = NULL;
    int rc = inf_chat_render(&text, source, (const json_t *)messages_json, NULL, true, extra, err);
    json_decref(extra);
    if (rc) return inf_fail_ctx(err, "chat template");
    rc = inf_tok_encode(g->tok, text, strlen(text), true, ids, n_ids, err);
    free(text);
    return rc;
}

/* ---- streaming ---- */

static void capture(gen_stream *st, const char *s, size_t n) {
    if (!st->capture || !n) return;
    if (st->capture_len + n + 1 > st->capture_cap) {
        size_t cap = (st->capture_len + n + 1) * 2;
        char *p = realloc(*st->capture, cap);
        if (!p) return;
        *st->capture = p;
        st->capture_cap = cap;
    }
    memcpy(*st->capture + st->capture_len, s, n);
    st->capture_len += n;
    (*st->capture)[st->capture_len] = 0;
}

static int stream_token(void *ud, int32_t token) {
    gen_stream *st = ud;
    size_t n;
    const char *s = inf_detok_push(st->g->detok, token, &n);
    if (n) {
        fwrite(s, 1, n, stdout);
        fflush(stdout);
        capture(st, s, n);
    }
    return 0;
}

static bool stream_is_eog(void *ud, int32_t token) {
    return inf_tok_is_eog(((gen_stream *)ud)->g->tok, token);
}

static void stream_logits(void *ud, const float *logits, int n_vocab) {
    gen_ctx *g = ((gen_stream *)ud)->g;
    if (!g->dump) return;
    fwrite(logits, sizeof(float), (size_t)n_vocab, g->dump);
    g->dump_rows++;
}

inf_gen_opts gen_stream_opts(gen_stream *st, const gen_args *a) {
    return (inf_gen_opts){.n_predict = a->n_predict,
                          .ignore_eos = a->ignore_eos,
                          .is_eog = stream_is_eog,
                          .on_token = stream_token,
                          .on_logits = stream_logits,
                          .ud = st};
}

void gen_stream_finish(gen_stream *st) {
    size_t n;
    const char *s = inf_detok_flush(st->g->detok, &n);
    if (n) {
        fwrite(s, 1, n, stdout);
        capture(st, s, n);
    }
    fflush(stdout);
}

void gen_print_timings(const gen_ctx *g, inf_stop_reason why) {
    const inf_session *s = g->session;
    double pms = s->t_prompt_s * 1e3, gms = s->t_gen_s * 1e3;
    fprintf(stderr, "\n");
    fprintf(stderr, "load time        = %10.2f ms\n", g->t_load_s * 1e3);
    fprintf(stderr,
            "prompt eval time = %10.2f ms / %5d tokens (%8.2f ms per token, %8.2f tokens per "
            "second)\n",
            pms, s->n_prompt_eval, s->n_prompt_eval ? pms / s->n_prompt_eval : 0.0,
            pms > 0 ? s->n_prompt_eval / s->t_prompt_s : 0.0);
    if (s->n_prompt_reused) fprintf(stderr, "prompt cached    = %13d tokens\n", s->n_prompt_reused);
    fprintf(stderr,
            "eval time        = %10.2f ms / %5d tokens (%8.2f ms per token, %8.2f tokens per "
            "second)\n",
            gms, s->n_gen, s->n_gen ? gms / s->n_gen : 0.0,
            gms > 0 ? s->n_gen / s->t_gen_s : 0.0);
    fprintf(stderr, "total time       = %10.2f ms / %5d tokens\n", g->t_load_s * 1e3 + pms + gms,
            s->n_prompt_eval + s->n_gen);
    char desc[96];
    fprintf(stderr, "stop reason      = %s, backend %s, seed %llu\n", inf_stop_reason_name(why),
            inf_backend_describe(&g->be, desc, sizeof desc), (unsigned long long)inf_sampler_seed(s->sampler));
    if (inf_trace_is(&g->be)) {
        static char hist[8192];
        inf_trace_format(&g->be, hist, sizeof hist);
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
    int n = snprintf(dict, sizeof dict, "{'descr': '<f4', 'fortran_order': False, 'shape': (%d, %d), }",
                     g->dump_rows, g->n_vocab);
    memcpy(hdr + 10, dict, (size_t)n);
    hdr[127] = '\n';
    int bad = fseek(g->dump, 0, SEEK_SET) != 0 || fwrite(hdr, 1, 128, g->dump) != 128;
    bad |= fclose(g->dump) != 0;
    g->dump = NULL;
    if (bad) return inf_fail(err, "cannot write the logits file");
    return 0;
}
