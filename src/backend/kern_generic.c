/* Plain C kernels: every slot of the kernel table, with no ISA assumptions.
 * They are the base every ISA table starts from (and what the SIMD backend
 * runs at --isa scalar). The fast kernels override them. */
#include <math.h>
#include <pthread.h>
#include <string.h>

#include "backend/kernels.h"
#include "backend/delta.h"
#include "quant/quantize.h"

static float g_dot_f32(const float *a, const float *b, int n) {
    float s = 0;
    for (int i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

static void g_rmsnorm_row(float *out, const float *x, const float *w, int n, float eps) {
    float ss = 0;
    for (int i = 0; i < n; i++)
        ss += x[i] * x[i];
    float inv = 1.0f / sqrtf(ss / (float)n + eps);
    for (int i = 0; i < n; i++)
        out[i] = x[i] * inv * w[i];
}

static void g_rope_row(float *x, int n_heads, int head_dim, int n_rot, const float *c,
                       const float *s) {
    int half = n_rot / 2;
    for (int h = 0; h < n_heads; h++) {
        float *v = x + (size_t)h * head_dim;
        for (int i = 0; i < half; i++) {
            float a = v[i], b = v[i + half];
            v[i] = a * c[i] - b * s[i];
            v[i + half] = b * c[i] + a * s[i];
        }
    }
}

static void g_swiglu(float *out, const float *gate, const float *up, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        out[i] = gate[i] / (1.0f + expf(-gate[i])) * up[i];
}

static void g_silu(float *y, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        y[i] = x[i] / (1.0f + expf(-x[i]));
}

static void g_add(float *y, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        y[i] += x[i];
}

static void g_moe_sum(float *y, const float *x, const float *w, int k, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        float acc = 0;
        for (int j = 0; j < k; j++)
            acc += w[j] * x[(int64_t)j * n + i];
        y[i] += acc;
    }
}

static void g_softmax(float *x, int n) {
    float m = -INFINITY;
    for (int i = 0; i < n; i++)
        m = x[i] > m ? x[i] : m;
    float s = 0;
    for (int i = 0; i < n; i++)
        s += x[i] = expf(x[i] - m);
    float inv = 1.0f / s;
    for (int i = 0; i < n; i++)
        x[i] *= inv;
}

/* Online softmax over 64-key tiles, one query row at a time. */
static void g_attn_rows(const inf_attn_rows *it, const inf_kv_view *kv, int hd, float scale,
                        float *scratch) {
    float *s = scratch;           /* [INF_KV_TILE] */
    float *acc = s + INF_KV_TILE; /* [hd] */
    float *buf = acc + hd;        /* [hd] a K or V row as floats */
    for (int r = 0; r < it->R; r++) {
        const float *q = it->q[r];
        float m = -INFINITY, l = 0;
        memset(acc, 0, sizeof(float) * (size_t)hd);
        for (int t0 = it->k0; t0 < it->lim[r]; t0 += INF_KV_TILE) {
            int t1 = t0 + INF_KV_TILE < it->lim[r] ? t0 + INF_KV_TILE : it->lim[r];
            float tmax = -INFINITY;
            for (int j = t0; j < t1; j++) {
                const float *k =
                    inf_kv_row_f32(kv->k_type, inf_kv_k_at(kv, j, it->kv_head), buf, hd);
                float d = 0;
                for (int i = 0; i < hd; i++)
                    d += q[i] * k[i];
                s[j - t0] = d * scale;
                if (s[j - t0] > tmax) tmax = s[j - t0];
            }
            if (tmax > m) {
                float corr = expf(m - tmax);
                for (int i = 0; i < hd; i++)
                    acc[i] *= corr;
                l *= corr;
                m = tmax;
            }
            for (int j = t0; j < t1; j++) {
                float p = expf(s[j - t0] - m);
                l += p;
                const float *v =
                    inf_kv_row_f32(kv->v_type, inf_kv_v_at(kv, j, it->kv_head), buf, hd);
                for (int i = 0; i < hd; i++)
                    acc[i] += p * v[i];
            }
        }
        if (it->part) {
            float *pr = it->part + (size_t)r * (hd + 2);
            memcpy(pr, acc, sizeof(float) * (size_t)hd);
            pr[hd] = m;
            pr[hd + 1] = l;
            continue;
        }
        float inv = 1.0f / l;
        for (int i = 0; i < hd; i++)
            it->out[r][i] = acc[i] * inv;
    }
}

static uint64_t g_read_stream(const void *p, size_t n) {
    const uint64_t *w = p; /* [n/8] */
    uint64_t a = 0, b = 0, c = 0, d = 0;
    for (size_t i = 0; i < n / 8; i += 4) {
        a ^= w[i];
        b ^= w[i + 1];
        c ^= w[i + 2];
        d ^= w[i + 3];
    }
    return a ^ b ^ c ^ d;
}

void inf_kernels_fill_generic(inf_kernels *k) {
    memset(k, 0, sizeof *k);
    k->isa = INF_ISA_SCALAR;
    k->dot_f32 = g_dot_f32;
    for (int t = 0; t < INF_DTYPE_COUNT; t++) {
        const inf_dtype_info *ti = inf_dtype_get((uint32_t)t);
        k->types[t].dequant = ti ? ti->dequant : NULL;
    }
    k->rmsnorm_row = g_rmsnorm_row;
    k->rope_row = g_rope_row;
    k->swiglu = g_swiglu;
    k->silu = g_silu;
    k->add = g_add;
    k->moe_sum = g_moe_sum;
    k->softmax = g_softmax;
    k->delta_step = inf_delta_step_ref;
    k->attn_rows = g_attn_rows;
    k->read_stream = g_read_stream;
    k->pack_panels = inf_pack_panels;
}

#if !defined(__x86_64__)
void inf_kernels_fill_avx2(inf_kernels *k) {
    (void)k;
}
void inf_kernels_fill_avx512(inf_kernels *k) {
    (void)k;
}
void inf_kernels_fill_amx(inf_kernels *k) {
    (void)k;
}
int inf_amx_selftest(void) {
    return -1;
}
bool inf_amx_int8_kind(inf_pack_kind kind) {
    (void)kind;
    return false;
}
#endif
#if !defined(__aarch64__)
void inf_kernels_fill_neon(inf_kernels *k) {
    (void)k;
}
#endif

static inf_kernels g_tables[INF_ISA_AMX + 1];
static int g_ready[INF_ISA_AMX + 1];
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

const inf_kernels *inf_kernels_get(inf_isa isa) {
    isa = inf_isa_clamp(isa);
    pthread_mutex_lock(&g_lock);
    if (!g_ready[isa]) {
        inf_kernels k;
        inf_kernels_fill_generic(&k);
        if (isa == INF_ISA_NEON) inf_kernels_fill_neon(&k);
        if (isa >= INF_ISA_AVX2) inf_kernels_fill_avx2(&k);
        if (isa >= INF_ISA_AVX512) inf_kernels_fill_avx512(&k);
        if (isa >= INF_ISA_AMX) inf_kernels_fill_amx(&k);
        k.isa = isa;
        g_tables[isa] = k;
        g_ready[isa] = 1;
    }
    pthread_mutex_unlock(&g_lock);
    return &g_tables[isa];
}
