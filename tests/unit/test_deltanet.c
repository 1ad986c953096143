/* The Gated DeltaNet ops of the backend table (ssm_conv, gated_delta)
 * against a float64 evaluation written the way the Hugging Face definition
 * states the recurrence (transformers' torch_recurrent_gated_delta_rule and
 * the causal depthwise conv1d with SiLU): each step decays the state, reads
 * S^T k, writes k (beta (v - S^T k))^T, reads out S^T q. Also: rows run in
 * pieces give the bits of one call, and the two V-head orders (Hugging
 * Face's grouped, llama.cpp's tiled) are the same computation with the
 * heads renumbered. */
#include <stdlib.h>

#include "backend/backend.h"
#include "backend/cpu_features.h"
#include "backend/simd.h"
#include "backend/trace.h"
#include "harness.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static float frand(void) { /* uniform in [-1, 1) */
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)((double)(rng >> 11) / 4503599627370496.0) - 1.0f;
}
static void fill(float *x, size_t n, float scale) {
    for (size_t i = 0; i < n; i++)
        x[i] = frand() * scale;
}

static double max_abs_diff(const float *a, const double *b, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++)
        m = fmax(m, fabs((double)a[i] - b[i]));
    return m;
}

/* T rows of C channels, kernel 4 (many channels and rows: the threaded path
 * of the SIMD backend, in chunks of channels) */
static void test_conv(const inf_backend *be, const int T, const int C) {
    enum { K = 4, H = K - 1 };
    float *x = malloc(sizeof(float) * T * C), *w = malloc(sizeof(float) * C * K),
          *st = malloc(sizeof(float) * H * C), *st0 = malloc(sizeof(float) * H * C),
          *out = malloc(sizeof(float) * T * C), *st2 = malloc(sizeof(float) * H * C),
          *out2 = malloc(sizeof(float) * T * C);
    double *ref = malloc(sizeof(double) * T * C);
    fill(x, T * C, 2.0f);
    fill(w, C * K, 0.7f);
    fill(st0, H * C, 2.0f);
    memcpy(st, st0, sizeof(float) * H * C);
    be->ssm_conv(be, out, x, st, w, T, C, K);
    /* the reference: history then x, one window per output */
    for (int t = 0; t < T; t++)
        for (int c = 0; c < C; c++) {
            double a = 0;
            for (int i = 0; i < K; i++) {
                int j = t + i; /* in the padded sequence [history; x] */
                double xv = j < H ? st0[j * C + c] : x[(j - H) * C + c];
                a += (double)w[c * K + i] * xv;
            }
            ref[t * C + c] = a / (1.0 + exp(-a));
        }
    double d = max_abs_diff(out, ref, (size_t)T * C);
    CHECK_MSG(d < 1e-5, "%s ssm_conv T %d C %d: max diff %g", be->name, T, C, d);
    CHECK(memcmp(st, x + (T - H) * C, sizeof(float) * H * C) == 0); /* the last K-1 rows */

    /* in pieces of 1, 2, 1 and the rest: the same bits, the same state */
    memcpy(st2, st0, sizeof(float) * H * C);
    const int piece[] = {1, 2, 1, T - 4};
    for (int p = 0, t = 0; p < 4; t += piece[p++])
        be->ssm_conv(be, out2 + t * C, x + t * C, st2, w, piece[p], C, K);
    CHECK(memcmp(out, out2, sizeof(float) * T * C) == 0);
    CHECK(memcmp(st, st2, sizeof(float) * H * C) == 0);
    free(x), free(w), free(st), free(st0), free(out), free(st2), free(out2), free(ref);
}

/* float64 delta rule, HF's step order; heads mapped as s says */
static void ref_delta(double *out, double *S, const float *q, const float *k, const float *v,
                      const float *g, const float *beta, int T, const inf_delta_shape *s) {
    const int dk = s->d_k, dv = s->d_v, nk = s->n_k_heads, nv = s->n_v_heads;
    double qn[512], kn[512], mem[512];
    for (int t = 0; t < T; t++)
        for (int h = 0; h < nv; h++) {
            int hk = s->k_tiled ? h % nk : h / (nv / nk);
            const float *qr = q + ((size_t)t * nk + hk) * dk, *kr = k + ((size_t)t * nk + hk) * dk;
            double sq = 0, sk = 0;
            for (int i = 0; i < dk; i++)
                sq += (double)qr[i] * qr[i], sk += (double)kr[i] * kr[i];
            for (int i = 0; i < dk; i++) {
                qn[i] = qr[i] / sqrt(sq + s->eps) / sqrt((double)dk);
                kn[i] = kr[i] / sqrt(sk + s->eps);
            }
            double *Sh = S + (size_t)h * dk * dv, e = exp((double)g[t * nv + h]);
            for (int i = 0; i < dk * dv; i++)
                Sh[i] *= e;
            for (int j = 0; j < dv; j++) {
                mem[j] = 0;
                for (int i = 0; i < dk; i++)
                    mem[j] += Sh[i * dv + j] * kn[i];
            }
            for (int i = 0; i < dk; i++)
                for (int j = 0; j < dv; j++)
                    Sh[i * dv + j] += kn[i] * ((double)v[((size_t)t * nv + h) * dv + j] - mem[j]) *
                                      (double)beta[t * nv + h];
            for (int j = 0; j < dv; j++) {
                double o = 0;
                for (int i = 0; i < dk; i++)
                    o += Sh[i * dv + j] * qn[i];
                out[((size_t)t * nv + h) * dv + j] = o;
            }
        }
}

typedef struct delta_case {
    int T, nk, nv, dk, dv;
    float *q, *k, *v, *g, *beta, *state0;
} delta_case;

static void delta_case_init(delta_case *c, int T, int nk, int nv, int dk, int dv) {
    *c = (delta_case){.T = T, .nk = nk, .nv = nv, .dk = dk, .dv = dv};
    size_t nq = (size_t)T * nk * dk, nvv = (size_t)T * nv * dv, ns = (size_t)nv * dk * dv;
    c->q = malloc(sizeof(float) * nq), c->k = malloc(sizeof(float) * nq);
    c->v = malloc(sizeof(float) * nvv), c->state0 = malloc(sizeof(float) * ns);
    c->g = malloc(sizeof(float) * T * nv), c->beta = malloc(sizeof(float) * T * nv);
    fill(c->q, nq, 1.0f), fill(c->k, nq, 1.0f), fill(c->v, nvv, 1.0f), fill(c->state0, ns, 0.3f);
    for (int i = 0; i < T * nv; i++) {
        c->g[i] = -0.5f * (frand() + 1.0f);              /* decay in (e^-1, 1] */
        c->beta[i] = 1.0f / (1.0f + expf(-2 * frand())); /* sigmoid */
    }
}
static void delta_case_free(delta_case *c) {
    free(c->q), free(c->k), free(c->v), free(c->g), free(c->beta), free(c->state0);
}

static void test_delta(const inf_backend *be, int T, int nk, int nv, int dk, int dv, int tiled) {
    delta_case c;
    delta_case_init(&c, T, nk, nv, dk, dv);
    inf_delta_shape s = {nk, nv, dk, dv, tiled, 1e-6f};
    size_t no = (size_t)T * nv * dv, ns = (size_t)nv * dk * dv;
    float *out = malloc(sizeof(float) * no), *st = malloc(sizeof(float) * ns);
    double *ref = malloc(sizeof(double) * no), *S = malloc(sizeof(double) * ns);
    memcpy(st, c.state0, sizeof(float) * ns);
    for (size_t i = 0; i < ns; i++)
        S[i] = c.state0[i];
    be->gated_delta(be, out, c.q, c.k, c.v, c.g, c.beta, st, T, &s);
    ref_delta(ref, S, c.q, c.k, c.v, c.g, c.beta, T, &s);
    double d = max_abs_diff(out, ref, no), ds = max_abs_diff(st, S, ns);
    CHECK_MSG(d < 1e-5 && ds < 1e-5,
              "gated_delta T %d heads %d/%d dims %d/%d tiled %d: out %g state %g", T, nk, nv, dk,
              dv, tiled, d, ds);

    /* one row at a time: the same bits */
    float *out2 = malloc(sizeof(float) * no), *st2 = malloc(sizeof(float) * ns);
    memcpy(st2, c.state0, sizeof(float) * ns);
    for (int t = 0; t < T; t++)
        be->gated_delta(be, out2 + (size_t)t * nv * dv, c.q + (size_t)t * nk * dk,
                        c.k + (size_t)t * nk * dk, c.v + (size_t)t * nv * dv, c.g + t * nv,
                        c.beta + t * nv, st2, 1, &s);
    CHECK(memcmp(out, out2, sizeof(float) * no) == 0);
    CHECK(memcmp(st, st2, sizeof(float) * ns) == 0);

    /* the other head order with V heads renumbered: grouped head
       hk * rep + r is tiled head r * nk + hk */
    const int rep = nv / nk;
    float *v3 = malloc(sizeof(float) * no), *g3 = malloc(sizeof(float) * T * nv),
          *b3 = malloc(sizeof(float) * T * nv), *st3 = malloc(sizeof(float) * ns),
          *out3 = malloc(sizeof(float) * no);
    for (int h = 0; h < nv; h++) {
        /* h in this case's order -> its number in the other order */
        int o = tiled ? (h % nk) * rep + h / nk : (h % rep) * nk + h / rep;
        for (int t = 0; t < T; t++) {
            memcpy(v3 + ((size_t)t * nv + o) * dv, c.v + ((size_t)t * nv + h) * dv,
                   sizeof(float) * dv);
            g3[t * nv + o] = c.g[t * nv + h], b3[t * nv + o] = c.beta[t * nv + h];
        }
        memcpy(st3 + (size_t)o * dk * dv, c.state0 + (size_t)h * dk * dv, sizeof(float) * dk * dv);
    }
    inf_delta_shape s3 = s;
    s3.k_tiled = !tiled;
    be->gated_delta(be, out3, c.q, c.k, v3, g3, b3, st3, T, &s3);
    int same = 1;
    for (int h = 0; h < nv; h++) {
        int o = tiled ? (h % nk) * rep + h / nk : (h % rep) * nk + h / rep;
        for (int t = 0; t < T; t++)
            same &= memcmp(out3 + ((size_t)t * nv + o) * dv, out + ((size_t)t * nv + h) * dv,
                           sizeof(float) * dv) == 0;
    }
    CHECK_MSG(same, "grouped and tiled orders differ (T %d heads %d/%d)", T, nk, nv);
    free(v3), free(g3), free(b3), free(st3), free(out3);
    free(out), free(st), free(ref), free(S), free(out2), free(st2);
    delta_case_free(&c);
}

/* be gives the scalar reference's bits for one case */
static void test_same_as_scalar(const inf_backend *be, const char *label, int T, int nk, int nv,
                                int dk, int dv, int tiled) {
    const inf_backend *ref = inf_backend_scalar();
    delta_case c;
    delta_case_init(&c, T, nk, nv, dk, dv);
    inf_delta_shape s = {nk, nv, dk, dv, tiled, 1e-6f};
    size_t no = (size_t)T * nv * dv, ns = (size_t)nv * dk * dv;
    float *o1 = malloc(sizeof(float) * no), *o2 = malloc(sizeof(float) * no);
    float *s1 = malloc(sizeof(float) * ns), *s2 = malloc(sizeof(float) * ns);
    memcpy(s1, c.state0, sizeof(float) * ns);
    memcpy(s2, c.state0, sizeof(float) * ns);
    ref->gated_delta(ref, o1, c.q, c.k, c.v, c.g, c.beta, s1, T, &s);
    be->gated_delta(be, o2, c.q, c.k, c.v, c.g, c.beta, s2, T, &s);
    CHECK_MSG(memcmp(o1, o2, sizeof(float) * no) == 0 && memcmp(s1, s2, sizeof(float) * ns) == 0,
              "%s: gated_delta T %d heads %d/%d dims %d/%d differs from the scalar reference",
              label, T, nk, nv, dk, dv);
    free(o1), free(o2), free(s1), free(s2);
    delta_case_free(&c);
}

int main(void) {
    const inf_backend *be = inf_backend_scalar();
    test_conv(be, 9, 37);
    test_conv(be, 40, 300);
    test_delta(be, 6, 2, 4, 16, 8, 0);
    test_delta(be, 6, 2, 4, 16, 8, 1);
    test_delta(be, 3, 2, 6, 128, 128, 1); /* Qwen3.5's head sizes */
    test_delta(be, 5, 3, 3, 32, 64, 0);   /* as many V heads as K heads */

    /* every kernel level, one thread and a pool, and traced: the reference's bits */
    const inf_isa levels[] = {INF_ISA_SCALAR, INF_ISA_NEON, INF_ISA_AVX2, INF_ISA_AVX512,
                              INF_ISA_AMX};
    for (unsigned l = 0; l < sizeof levels / sizeof *levels; l++) {
        if (inf_isa_clamp(levels[l]) != levels[l]) continue;
        for (int pool = 0; pool < 2; pool++) {
            inf_backend *sb =
                inf_backend_simd_create(levels[l], pool ? 3 : 1, pool, INF_ATTN_FLASH);
            CHECK(sb != NULL);
            if (!sb) continue;
            char label[64];
            snprintf(label, sizeof label, "%s x%d", inf_isa_name(levels[l]), pool ? 3 : 1);
            test_conv(sb, 9, 37);
            test_conv(sb, 40, 300);
            test_same_as_scalar(sb, label, 4, 2, 6, 128, 128, 1);
            test_same_as_scalar(sb, label, 3, 2, 4, 16, 8, 0); /* d_v not a multiple of 16 */
            test_same_as_scalar(sb, label, 2, 1, 1, 64, 32, 0);
            inf_backend *tb = inf_trace_wrap(sb);
            if (tb) {
                test_same_as_scalar(tb, "traced", 2, 2, 4, 32, 32, 1);
                inf_trace_free(tb);
            }
            inf_backend_simd_free(sb);
        }
    }
    return th_report();
}
