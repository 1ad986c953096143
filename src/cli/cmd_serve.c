/* inferno serve: the OpenAI-compatible HTTP server. Parses flags, starts the
 * HTTP side first (so /health answers 503 while the model loads), loads the
 * engine, starts the scheduler, then waits for SIGINT/SIGTERM and drains:
 * no new requests (503, /health 503), the running ones finish, for at most
 * --drain-timeout seconds (a second signal cuts it short), after which those
 * still running end with their API's error frame. Then HTTP stops, then the
 * engine, and the process exits 0. */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "cli/spec_flags.h"
#include "kv/kv_cache.h"
#include "runtime/engine.h"
#include "server/http.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: inferno serve -m MODEL [options]\n\n"
            "  -m, --model PATH        GGUF file or Hugging Face folder (default %s)\n"
            "  --host ADDR             listen address (default 127.0.0.1)\n"
            "  --port N                listen port (default 8080; 0: any free port)\n"
            "  -np, --parallel N       slots: requests generated at once (default 4)\n"
            "  -c, --ctx-size N        context positions per slot (default: the model's training\n"
            "                          context; with --kv paged a request may use the whole pool\n"
            "                          up to it; what fits in memory when that is less)\n"
            "  -t, --threads N         pool threads (default: the physical cores)\n"
            "  -b, --batch-size N      prompt rows per step, between decode steps (default 256)\n"
            "  --backend NAME          compute backend: scalar, simd or pool (default pool)\n"
            "  --pack-cache auto|on|off  keep the packed weights in a file, mapped at later\n"
            "                          loads (auto, the default: unless the disk would keep\n"
            "                          less than 5 %% free)\n"
            "  --pack-cache-dir DIR    where (default $INFERNO_CACHE_DIR or ~/.cache/inferno)\n"
            "  --kv basic|paged        KV cache: one contiguous cache per slot, or one block pool\n"
            "                          with a radix prefix cache shared by all requests (default)\n"
            "  --block-size N          paged: positions per block, a power of two (default 16)\n"
            "  --cache-mem SIZE        paged: pool size, e.g. 512M or 2G; a bare number is MiB\n"
            "                          (default: -np x -c positions)\n"
            "  -ctk, --cache-type-k T  K cache type: f32, f16 (default), bf16, q8_0\n"
            "  -ctv, --cache-type-v T  V cache type: f32, f16 (default), bf16, q8_0\n"
            "  --api-key KEY           require 'Authorization: Bearer KEY' (all but /health)\n"
            "  --alias NAME            the model id shown by /v1/models and in responses\n"
            "  --max-body BYTES        request body limit (default 8388608)\n"
            "  --timeout SECONDS       idle connection timeout (default 600)\n"
            "  --header-timeout SECS   a request's headers must arrive within this (default 10)\n"
            "  --max-conns N           concurrent connections (default 1024)\n"
            "  --max-conns-per-client N  from one address (default: half of --max-conns)\n"
            "  --sse-ping-interval S   a stream with nothing new for S seconds gets a ping, so\n"
            "                          clients do not give up during a long prefill (default 5;\n"
            "                          0: never)\n"
            "  --embeddings            serve /v1/embeddings (last-token pooling, normalized); the\n"
            "                          generation endpoints then answer 501, as llama.cpp's\n"
            "  --cors-origins LIST     origins whose pages may call the server, comma-separated,\n"
            "                          '*' for any (default: http://localhost, http://127.0.0.1,\n"
            "                          http://[::1] on any port)\n"
            "  --no-webui              no chat page at /\n"
            "  --drain-timeout S       on SIGTERM/SIGINT, how long running requests may take to\n"
            "                          finish before they are ended (default 30; 0: at once)\n"
            "\nSpeculative decoding (a request's speculative.n_max, n_min, p_min override the\n"
            "last three; the output is the same, only faster):\n%s",
            INF_DEFAULT_MODEL, SPEC_FLAGS_USAGE);
}

static int parse_long(const char *s, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Waits until no request runs, for at most drain_s seconds or until a
 * second signal; then ends what still runs and gives it a moment to send
 * its last frames. */
static void drain(srv_http *http, const sigset_t *sigs, int sig, int drain_s) {
    srv_http_drain(http);
    const char *name = sig == SIGINT ? "SIGINT" : "SIGTERM";
    fprintf(stderr,
            "inferno serve: %s, draining: requests running: %d; up to %d s (a second "
            "signal ends them now)\n",
            name, srv_http_inflight(http), drain_s);
    double end = now_s() + drain_s;
    const struct timespec tick = {0, 50 * 1000000L};
    while (srv_http_inflight(http) > 0 && now_s() < end)
        if (sigtimedwait(sigs, NULL, &tick) > 0) break;
    int left = srv_http_inflight(http);
    if (left > 0) {
        fprintf(stderr, "inferno serve: the drain time is up; requests ended: %d\n", left);
        srv_http_expire(http);
        double grace = now_s() + 5;
        while (srv_http_inflight(http) > 0 && now_s() < grace)
            nanosleep(&tick, NULL);
    }
    fprintf(stderr, "inferno serve: drained, shutting down\n");
}

int cmd_serve(int argc, char **argv) {
    const char *model = INF_DEFAULT_MODEL, *backend = NULL, *pack_dir = NULL;
    inf_pack_mode pack = INF_PACK_AUTO;
    srv_config cfg = {.host = "127.0.0.1",
                      .port = 8080,
                      .max_body = 8u << 20,
                      .timeout_s = 600,
                      .max_conns = 1024,
                      .sse_ping_s = 5};
    long drain_s = 30;
    long np = 4, ctx = 0, threads = 0, batch = 256, block = INF_KV_BLOCK_SIZE_DEFAULT;
    size_t cache_bytes = 0;
    inf_kv_kind kind = INF_KV_PAGED;
    inf_dtype type_k = INF_F16, type_v = INF_F16;
    spec_flags spec = spec_flags_defaults();
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(a, "--embeddings")) {
            cfg.embeddings = true;
            continue;
        }
        if (!strcmp(a, "--no-webui")) {
            cfg.no_webui = true;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "inferno serve: unknown flag or missing value: %s\n", a);
            usage(stderr);
            return 2;
        }
        const char *v = argv[++i];
        long x;
        int bad = 0;
#define IS(s) (!strcmp(a, s))
        if (spec_flag_is(a)) {
            if (spec_flag_set(&spec, "serve", a, v)) return 2;
        } else if (IS("-m") || IS("--model"))
            model = v;
        else if (IS("--host"))
            cfg.host = v;
        else if (IS("--port"))
            bad = parse_long(v, 0, 65535, &x), cfg.port = (int)x;
        else if (IS("-np") || IS("--parallel"))
            bad = parse_long(v, 1, 256, &np);
        else if (IS("-c") || IS("--ctx-size"))
            bad = parse_long(v, 0, 1 << 20, &ctx);
        else if (IS("-t") || IS("--threads"))
            bad = parse_long(v, 0, 1024, &threads);
        else if (IS("-b") || IS("--batch-size"))
            bad = parse_long(v, 1, 65536, &batch);
        else if (IS("--backend"))
            backend = v;
        else if (IS("--pack-cache")) {
            inf_err e;
            if (inf_pack_mode_parse(&pack, v, a, &e)) {
                fprintf(stderr, "inferno serve: %s\n", e.msg);
                return 2;
            }
        } else if (IS("--pack-cache-dir"))
            pack_dir = v;
        else if (IS("--kv"))
            bad = inf_kv_parse_kind(&kind, v, NULL);
        else if (IS("--block-size"))
            bad = parse_long(v, 1, 1024, &block) || (block & (block - 1));
        else if (IS("--cache-mem"))
            bad = inf_kv_parse_mem(&cache_bytes, v, NULL) || !cache_bytes;
        else if (IS("-ctk") || IS("--cache-type-k") || IS("-ctv") || IS("--cache-type-v")) {
            inf_err e;
            if (inf_kv_parse_type(IS("-ctk") || IS("--cache-type-k") ? &type_k : &type_v, v, a,
                                  &e)) {
                fprintf(stderr, "inferno serve: %s\n", e.msg);
                return 2;
            }
        } else if (IS("--api-key"))
            cfg.api_key = v;
        else if (IS("--alias"))
            cfg.alias = v;
        else if (IS("--max-body"))
            bad = parse_long(v, 1024, LONG_MAX, &x), cfg.max_body = (size_t)x;
        else if (IS("--timeout"))
            bad = parse_long(v, 1, 86400, &x), cfg.timeout_s = (unsigned)x;
        else if (IS("--max-conns"))
            bad = parse_long(v, 1, 65536, &x), cfg.max_conns = (unsigned)x;
        else if (IS("--max-conns-per-client"))
            bad = parse_long(v, 1, 65536, &x), cfg.max_conns_per_client = (unsigned)x;
        else if (IS("--cors-origins"))
            cfg.cors_origins = v;
        else if (IS("--header-timeout"))
            bad = parse_long(v, 1, 3600, &x), cfg.header_timeout_s = (unsigned)x;
        else if (IS("--drain-timeout"))
            bad = parse_long(v, 0, 86400, &drain_s);
        else if (IS("--sse-ping-interval"))
            bad = parse_long(v, 0, 3600, &x), cfg.sse_ping_s = (unsigned)x;
        else {
            fprintf(stderr, "inferno serve: unknown flag %s\n", a);
            usage(stderr);
            return 2;
        }
#undef IS
        if (bad) {
            fprintf(stderr, "inferno serve: %s: bad value '%s'\n", a, v);
            return 2;
        }
    }
    if (cfg.api_key && !cfg.api_key[0]) {
        fprintf(stderr, "inferno serve: --api-key: an empty key would turn authentication off; "
                        "leave the flag out to serve without a key\n");
        return 2;
    }
    if (spec_flags_check(&spec, "serve")) return 2;
    if (!cfg.max_conns_per_client) cfg.max_conns_per_client = (cfg.max_conns + 1) / 2;
    bool loopback =
        !strcmp(cfg.host, "localhost") || !strncmp(cfg.host, "127.", 4) || !strcmp(cfg.host, "::1");
    if (!loopback && !cfg.api_key)
        fprintf(stderr,
                "inferno serve: warning: listening on %s without --api-key: anyone who can reach "
                "this address can use the server\n",
                cfg.host);

    /* Signals go to this thread only (sigwait below); every thread started
     * from here on inherits the mask. */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);

    inf_err err = {{0}};
    srv_http *http = NULL;
    if (srv_http_start(&http, &cfg, &err)) {
        fprintf(stderr, "inferno serve: %s\n", err.msg);
        return 1;
    }
    fprintf(stderr, "inferno serve: listening on http://%s:%d (loading %s)\n", cfg.host,
            srv_http_port(http), model);

    inf_engine *eng = NULL;
    inf_engine_opts eo = {.model_path = model,
                          .backend = {.name = backend, .n_threads = (int)threads},
                          .n_seq = (int)np,
                          .n_ctx = (int)ctx,
                          .n_batch = (int)batch,
                          .kv = {.kind = kind,
                                 .block_size = (int)block,
                                 .mem_bytes = cache_bytes,
                                 .type_k = type_k,
                                 .type_v = type_v},
                          .pack = pack,
                          .pack_dir = pack_dir};
    spec_flags_apply(&spec, &eo);
    if (inf_engine_open(&eng, &eo, &err)) {
        fprintf(stderr, "inferno serve: %s\n", err.msg);
        srv_http_stop(http);
        return 1;
    }
    if (eng->pack_note[0]) fprintf(stderr, "inferno serve: %s\n", eng->pack_note);
    if (eng->note[0]) fprintf(stderr, "inferno serve: %s\n", eng->note);
    const char *why = NULL;
    if (eng->ex.no_head && !cfg.embeddings)
        why = "the model has no output head (an embedding model): start it with --embeddings";
    else if (cfg.embeddings && eng->ex.pooling != INF_POOL_UNSPECIFIED &&
             eng->ex.pooling != INF_POOL_LAST)
        why = "--embeddings: the model file asks for a pooling other than the last token's "
              "(pooling_type / 1_Pooling), which inferno does not compute";
    if (why) {
        fprintf(stderr, "inferno serve: %s: %s\n", model, why);
        inf_engine_close(eng);
        srv_http_stop(http);
        return 1;
    }
    srv_http_ready(http, &eng->ex, eng->sched);
    fprintf(stderr,
            "inferno serve: ready: model %s, %d slots x %d positions, %s KV cache (K %s, V %s, "
            "%.1f MiB), %s\n",
            cfg.alias ? cfg.alias : eng->name, eng->ex.n_seq, eng->ex.n_ctx, inf_kv_kind_name(kind),
            inf_kv_type_name(type_k), inf_kv_type_name(type_v),
            (double)inf_kv_cache_total_bytes(eng->kv) / (1024.0 * 1024.0), eng->backend_name);
    if (eng->ex.spec_kind != INF_SPEC_NONE)
        fprintf(stderr,
                "inferno serve: speculative decoding: %s%s%s, up to %d drafts per step (min %d, "
                "p-min %.2f)\n",
                inf_spec_kind_name(eng->ex.spec_kind), eng->ex.draft_name ? " with " : "",
                eng->ex.draft_name ? eng->ex.draft_name : "", eng->ex.spec.n_max,
                eng->ex.spec.n_min, (double)eng->ex.spec.p_min);

    int sig = 0;
    sigwait(&sigs, &sig);
    drain(http, &sigs, sig, (int)drain_s);
    srv_http_stop(http);
    inf_engine_close(eng);
    return 0;
}
