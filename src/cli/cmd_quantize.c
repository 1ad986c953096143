/* inferno quantize: llama-quantize's interface.
 *
 *   inferno quantize [options] IN [OUT] TYPE [NTHREADS]
 *
 * IN is an F32/F16/BF16 GGUF file or a Hugging Face folder, OUT a GGUF file
 * (default: ggml-model-TYPE.gguf beside IN), TYPE a mix name or its number. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "convert/quantize.h"
#include "quant/dtype.h"

static void usage(FILE *f) {
    int n;
    const inf_mix *m = inf_mix_list(&n);
    fprintf(f, "usage: inferno quantize [--help] [--allow-requantize] [--pure]\n"
               "                        [--output-tensor-type TYPE] [--token-embedding-type TYPE]\n"
               "                        [-t N] model-f32.gguf|hf-folder [model-quant.gguf] type "
               "[nthreads]\n\n"
               "  --allow-requantize        accept tensors that are already quantized\n"
               "  --pure                    every matrix the mix's type (no per-tensor rules)\n"
               "  --output-tensor-type T    the output head's type (e.g. q8_0)\n"
               "  --token-embedding-type T  token_embd's type\n"
               "  -t, --threads N           threads (default: all cores)\n\n"
               "Allowed quantization types:\n");
    for (int i = 0; i < n; i++)
        fprintf(f, "  %2u  or  %-7s: %s\n", m[i].ftype, m[i].name, m[i].desc);
}

/* a mix by name or llama_ftype number */
static const inf_mix *find_mix(const char *s) {
    const inf_mix *m = inf_mix_find(s);
    if (m) return m;
    char *end;
    long v = strtol(s, &end, 10);
    if (*s && !*end) {
        int n;
        const inf_mix *all = inf_mix_list(&n);
        for (int i = 0; i < n; i++)
            if ((long)all[i].ftype == v) return &all[i];
    }
    return NULL;
}

/* a tensor type by ggml's name (any case), or -1 */
static int find_type(const char *s) {
    for (uint32_t t = 0; t < INF_DTYPE_COUNT; t++) {
        const inf_dtype_info *ti = inf_dtype_get(t);
        if (ti && !strcasecmp(ti->name, s)) return (int)t;
    }
    return -1;
}

static void lower(char *dst, const char *src, size_t cap) {
    size_t i = 0;
    for (; src[i] && i + 1 < cap; i++)
        dst[i] = (char)(src[i] >= 'A' && src[i] <= 'Z' ? src[i] + 32 : src[i]);
    dst[i] = 0;
}

static void progress(void *ud, const inf_quantize_tensor_info *t) {
    (void)ud;
    char from[16], to[16];
    lower(from, inf_dtype_get(t->from)->name, sizeof from);
    lower(to, inf_dtype_get(t->to)->name, sizeof to);
    fprintf(stderr, "[%4d/%4d] %36s - [%6lld, %6lld], type = %6s, ", t->index + 1, t->count,
            t->name, (long long)t->ne[0], (long long)(t->n_dims > 1 ? t->ne[1] : 1), from);
    if (t->from == t->to)
        fprintf(stderr, "size = %8.3f MiB\n", (double)t->bytes_out / (1 << 20));
    else
        fprintf(stderr, "converting to %6s .. size = %8.2f MiB -> %8.2f MiB\n", to,
                (double)t->bytes_in / (1 << 20), (double)t->bytes_out / (1 << 20));
}

typedef struct totals {
    size_t in, out;
} totals;

static void progress_total(void *ud, const inf_quantize_tensor_info *t) {
    totals *s = ud;
    s->in += t->bytes_in;
    s->out += t->bytes_out;
    progress(NULL, t);
}

int cmd_quantize(int argc, char **argv) {
    inf_quantize_opts o = {.n_threads = 0, .output_type = -1, .token_embd_type = -1};
    const char *pos[4];
    int n_pos = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--allow-requantize")) {
            o.allow_requantize = true;
        } else if (!strcmp(a, "--pure")) {
            o.pure = true;
        } else if ((!strcmp(a, "--output-tensor-type") || !strcmp(a, "--token-embedding-type")) &&
                   v) {
            int t = find_type(v);
            if (t < 0 || !inf_dtype_get((uint32_t)t)->quant) {
                fprintf(stderr, "inferno quantize: %s: unknown or unwritable type '%s'\n", a, v);
                return 2;
            }
            if (a[2] == 'o')
                o.output_type = t;
            else
                o.token_embd_type = t;
            i++;
        } else if ((!strcmp(a, "-t") || !strcmp(a, "--threads")) && v) {
            o.n_threads = atoi(v);
            i++;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "inferno quantize: unknown option '%s'\n", a);
            usage(stderr);
            return 2;
        } else if (n_pos < 4) {
            pos[n_pos++] = a;
        } else {
            usage(stderr);
            return 2;
        }
    }
    /* IN TYPE | IN OUT TYPE | IN OUT TYPE NTHREADS | IN TYPE NTHREADS */
    const char *in = NULL, *out = NULL, *type = NULL;
    if (n_pos >= 2) {
        in = pos[0];
        if (n_pos == 2)
            type = pos[1];
        else if (n_pos == 3 && find_mix(pos[1])) {
            type = pos[1];
            o.n_threads = atoi(pos[2]);
        } else {
            out = pos[1];
            type = pos[2];
            if (n_pos == 4) o.n_threads = atoi(pos[3]);
        }
    }
    if (!in || !type) {
        usage(stderr);
        return 2;
    }
    if (!(o.mix = find_mix(type))) {
        fprintf(stderr, "inferno quantize: unknown or unsupported type '%s' (see --help)\n", type);
        return 2;
    }
    if (o.n_threads <= 0) {
        long c = sysconf(_SC_NPROCESSORS_ONLN);
        o.n_threads = c > 0 ? (int)c : 1;
    }
    char def_out[4096];
    if (!out) { /* llama-quantize's default: ggml-model-TYPE.gguf beside the input */
        char dir[4096];
        snprintf(dir, sizeof dir, "%s", in);
        size_t l = strlen(dir);
        while (l > 1 && dir[l - 1] == '/')
            dir[--l] = 0;
        char *slash = strrchr(dir, '/');
        if (slash)
            *slash = 0;
        else
            snprintf(dir, sizeof dir, ".");
        snprintf(def_out, sizeof def_out, "%s/ggml-model-%s.gguf", dir, o.mix->name);
        out = def_out;
    }
    totals sums = {0, 0};
    o.progress = progress_total;
    o.ud = &sums;
    fprintf(stderr, "inferno quantize: %s -> %s as %s (file type %u), %d threads\n", in, out,
            o.mix->name, o.mix->ftype, o.n_threads);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    inf_err err = {0};
    if (inf_quantize_model(in, out, &o, &err)) {
        fprintf(stderr, "inferno quantize: %s\n", err.msg);
        return 1;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
    fprintf(stderr, "model size  = %8.2f MiB\nquant size  = %8.2f MiB\ntotal time = %.2f ms\n",
            (double)sums.in / (1 << 20), (double)sums.out / (1 << 20), ms);
    return 0;
}
