/* The scalar reference backend: every op of backend.h as a plain loop.
 *
 * This is the oracle every faster backend is checked against, so it stays
 * simple: weight rows are dequantized one at a time with the reference
 * inf_dequantize_row into a per-thread scratch row, dot products accumulate
 * in double, and both attention ops share one online-softmax row walk (so a
 * query row gives the same bits whether it came through prefill or decode). */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/delta.h"
#include "quant/quantize.h"
#include "util/err.h"
#include "util/mem.h"

/* Attention tiles: keys are walked 64 at a time (the book's tile). */
#define ATTN_TILE 64
/* The largest head_dim the attention ops accept (Qwen3 uses 128). */
#define ATTN_MAX_HEAD_DIM 512

/* A row of dequantized weights, one per thread, grown to the widest row seen
 * and then reused: the first matmul of a model sizes it, later calls never
 * allocate. A thread's row is freed when the thread ends. When it cannot be
 * had, the op records that in the thread's error (see scalar_take_error) and
 * skips its work. */
typedef struct {
    float *row; /* [n] */
    int64_t n;
} scratch_buf;

static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;
static int scratch_key_ok;
static _Thread_local char scratch_err[160]; /* the first failure since take_error; "" if none */

static void scratch_release(void *p) {
    scratch_buf *b = p;
    inf_free(b->row);
    free(b);
}
static void scratch_init(void) {
    scratch_key_ok = pthread_key_create(&scratch_key, scratch_release) == 0;
}

/* [n] floats of this thread's scratch, or NULL with the failure recorded (and
 * while one is: the call fails anyway, so its later ops skip their work) */
static float *scratch(int64_t n) {
    if (scratch_err[0]) return NULL;
    pthread_once(&scratch_once, scratch_init);
    scratch_buf *b = scratch_key_ok ? pthread_getspecific(scratch_key) : NULL;
    if (!b && scratch_key_ok) {
        b = calloc(1, sizeof *b);
        if (b && pthread_setspecific(scratch_key, b) != 0) {
            free(b);
            b = NULL;
        }
    }
    if (b && n > b->n) {
        inf_free(b->row);
        b->row = inf_alloc((size_t)n * sizeof(float));
        b->n = b->row ? n : 0;
    }
    if (b && b->row) return b->row;
    snprintf(scratch_err, sizeof scratch_err,
             "out of memory: scalar matmul scratch for a row of %lld weights (%zu bytes)",
             (long long)n, (size_t)n * sizeof(float));
    return NULL;
}

static int scalar_take_error(const inf_backend *be, inf_err *err) {
    if (!scratch_err[0]) return 0;
    inf_fail(err, "%s", scratch_err);
    scratch_err[0] = 0;
    return -1;
}

static void scalar_embed(const inf_backend *be, float *out, const inf_tensor *table,
                         const int32_t *ids, int T) {
    int64_t n_embd = table->ne[0];
    size_t row_bytes = inf_dtype_row_bytes(table->type, n_embd);
    for (int t = 0; t < T; t++) {
        INF_ASSERT(ids[t] >= 0 && ids[t] < table->ne[1]);
        const unsigned char *row = (const unsigned char *)table->data + (size_t)ids[t] * row_bytes;
        inf_dequantize_row(table->type, out + (int64_t)t * n_embd, row, n_embd);
    }
}

static void scalar_matmul(const inf_backend *be, float *y, const float *x, const inf_weight *w,
                          int T) {
    int64_t n_in = w->n_in, n_out = w->n_out;
    float *wrow = scratch(n_in); /* [n_in] */
    if (!wrow) return;
    for (int64_t o = 0; o < n_out; o++) {
        const unsigned char *src = (const unsigned char *)w->t->data + (size_t)o * w->row_bytes;
        inf_dequantize_row(w->t->type, wrow, src, n_in);
        for (int t = 0; t < T; t++) {
            const float *xt = x + (int64_t)t * n_in;
            double acc = 0;
            for (int64_t i = 0; i < n_in; i++)
                acc += (double)xt[i] * wrow[i];
            y[(int64_t)t * n_out + o] = (float)acc;
        }
    }
}

static void scalar_rmsnorm(const inf_backend *be, float *out, const float *x, const float *w,
                           int rows, int n, float eps) {
    for (int r = 0; r < rows; r++) {
        const float *xr = x + (int64_t)r * n;
        float *yr = out + (int64_t)r * n;
        double ss = 0;
        for (int i = 0; i < n; i++)
            ss += (double)xr[i] * xr[i];
        float inv = (float)(1.0 / sqrt(ss / n + eps));
        for (int i = 0; i < n; i++)
            yr[i] = (xr[i] * inv) * w[i];
    }
}

static void scalar_rope(const inf_backend *be, float *x, const int32_t *pos, int T, int n_heads,
                        int head_dim, int n_rot, const float *cos_tab, const float *sin_tab) {
    int half = n_rot / 2;
    for (int t = 0; t < T; t++) {
        const float *c = cos_tab + (int64_t)pos[t] * half;
        const float *s = sin_tab + (int64_t)pos[t] * half;
        for (int h = 0; h < n_heads; h++) {
            /* NeoX (Qwen3, HF rotate_half): element i pairs with i + n_rot/2,
             * not with its neighbour i+1 as in the original GPT-J layout. */
            float *v = x + ((int64_t)t * n_heads + h) * head_dim;
            for (int i = 0; i < half; i++) {
                float a = v[i], b = v[i + half];
                v[i] = a * c[i] - b * s[i];
                v[i + half] = b * c[i] + a * s[i];
            }
        }
    }
}

/* head_dim elements of a K or V row in the cache's type as floats: the row
 * itself for f32, else its exact values (the type's reference dequant) in buf. */
static const float *kv_row_f32(inf_dtype t, const void *row, float *buf, int head_dim) {
    if (t == INF_F32) return row;
    inf_dtype_get(t)->dequant(buf, row, head_dim);
    return buf;
}

/* One query row of one head against keys 0..n_keys-1 of KV head kv_head:
 * online softmax over tiles of 64 keys. Writes head_dim floats. */
static void attn_row(float *out, const float *q, const inf_kv_view *kv, int kv_head, int n_keys,
                     int head_dim, float scale) {
    float s[ATTN_TILE];           /* one tile of scores */
    float acc[ATTN_MAX_HEAD_DIM]; /* [head_dim] running numerator */
    float buf[ATTN_MAX_HEAD_DIM]; /* [head_dim] one K or V row as floats */
    float m = -INFINITY, l = 0;   /* running max and denominator */
    for (int d = 0; d < head_dim; d++)
        acc[d] = 0;

    for (int t0 = 0; t0 < n_keys; t0 += ATTN_TILE) {
        int t1 = t0 + ATTN_TILE < n_keys ? t0 + ATTN_TILE : n_keys;
        float tile_max = -INFINITY;
        for (int t = t0; t < t1; t++) {
            const float *k = kv_row_f32(kv->k_type, inf_kv_k_at(kv, t, kv_head), buf, head_dim);
            float dot = 0;
            for (int d = 0; d < head_dim; d++)
                dot += q[d] * k[d];
            s[t - t0] = dot * scale;
            if (s[t - t0] > tile_max) tile_max = s[t - t0];
        }
        /* The tile raised the max: every accumulated term was exp(s - m_old)
         * and must be exp(s - m_new); one factor repairs them all. */
        if (tile_max > m) {
            float corr = expf(m - tile_max);
            for (int d = 0; d < head_dim; d++)
                acc[d] *= corr;
            l *= corr;
            m = tile_max;
        }
        for (int t = t0; t < t1; t++) {
            float p = expf(s[t - t0] - m);
            const float *v = kv_row_f32(kv->v_type, inf_kv_v_at(kv, t, kv_head), buf, head_dim);
            l += p;
            for (int d = 0; d < head_dim; d++)
                acc[d] += p * v[d];
        }
    }
    float inv = 1.0f / l;
    for (int d = 0; d < head_dim; d++)
        out[d] = acc[d] * inv;
}

static void scalar_attn_prefill(const inf_backend *be, float *out, const float *q,
                                const inf_kv_view *kv, int pos0, int T, const inf_attn_shape *s) {
    INF_ASSERT(s->head_dim <= ATTN_MAX_HEAD_DIM && s->n_head % s->n_head_kv == 0);
    int qw = s->n_head * s->head_dim;
    int group = s->n_head / s->n_head_kv; /* GQA: query heads per KV head */
    for (int h = 0; h < s->n_head; h++) {
        int kv_head = h / group;
        for (int i = 0; i < T; i++) {
            /* causal: row i sits at position pos0+i and stops at its own key */
            attn_row(out + (int64_t)i * qw + h * s->head_dim, q + (int64_t)i * qw + h * s->head_dim,
                     kv, kv_head, pos0 + i + 1, s->head_dim, s->scale);
        }
    }
}

static void scalar_attn_decode(const inf_backend *be, float *out, const float *q,
                               const inf_kv_view *kv, int n_keys, const inf_attn_shape *s) {
    INF_ASSERT(s->head_dim <= ATTN_MAX_HEAD_DIM && s->n_head % s->n_head_kv == 0);
    int group = s->n_head / s->n_head_kv;
    for (int h = 0; h < s->n_head; h++)
        attn_row(out + h * s->head_dim, q + h * s->head_dim, kv, h / group, n_keys, s->head_dim,
                 s->scale);
}

static void scalar_swiglu(const inf_backend *be, float *out, const float *gate, const float *up,
                          int64_t n) {
    for (int64_t i = 0; i < n; i++)
        out[i] = gate[i] / (1.0f + expf(-gate[i])) * up[i];
}

static void scalar_add(const inf_backend *be, float *y, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        y[i] += x[i];
}

static void scalar_moe_sum(const inf_backend *be, float *y, const float *x, const float *w, int T,
                           int k, int64_t n) {
    for (int r = 0; r < T; r++)
        for (int64_t i = 0; i < n; i++) {
            float acc = 0;
            for (int j = 0; j < k; j++)
                acc += w[(int64_t)r * k + j] * x[((int64_t)r * k + j) * n + i];
            y[(int64_t)r * n + i] += acc;
        }
}

static void scalar_ssm_conv(const inf_backend *be, float *out, const float *x, float *state,
                            const float *w, int T, int C, int K) {
    const int H = K - 1; /* rows of history */
    for (int t = 0; t < T; t++)
        for (int c = 0; c < C; c++) {
            float acc = 0;
            for (int i = 0; i < K; i++) {
                const int j = t - H + i; /* the row tap i reads: < 0 is history */
                const float xv = j < 0 ? state[(size_t)(H + j) * C + c] : x[(size_t)j * C + c];
                acc += w[(size_t)c * K + i] * xv;
            }
            out[(size_t)t * C + c] = acc / (1.0f + expf(-acc));
        }
    /* the last H rows of history followed by x */
    for (int r = 0; r < H; r++) {
        const int j = T - H + r;
        float *dst = state + (size_t)r * C;
        if (j >= 0)
            memcpy(dst, x + (size_t)j * C, sizeof(float) * (size_t)C);
        else
            memmove(dst, state + (size_t)(r + T) * C, sizeof(float) * (size_t)C);
    }
}

static void scalar_gated_delta(const inf_backend *be, float *out, const float *q, const float *k,
                               const float *v, const float *g, const float *beta, float *state,
                               int T, const inf_delta_shape *s) {
    INF_ASSERT(s->d_k <= INF_DELTA_MAX_DK && s->d_v <= INF_DELTA_MAX_DK &&
               s->n_v_heads % s->n_k_heads == 0);
    for (int t = 0; t < T; t++)
        for (int h = 0; h < s->n_v_heads; h++)
            inf_delta_row_head(inf_delta_step_ref, out, q, k, v, g, beta, state, t, h, s);
}

static void scalar_softmax(const inf_backend *be, float *x, int n) {
    float mx = -INFINITY;
    for (int i = 0; i < n; i++)
        if (x[i] > mx) mx = x[i];
    double sum = 0;
    for (int i = 0; i < n; i++) {
        x[i] = expf(x[i] - mx);
        sum += x[i];
    }
    float inv = (float)(1.0 / sum);
    for (int i = 0; i < n; i++)
        x[i] *= inv;
}

static int scalar_prepare_weight(const inf_backend *be, inf_weight *w) {
    w->packed = NULL; /* the reference reads weights as they are in the file */
    return 0;
}

/* Nothing to free: a backend that packs weights brings its own release. */
static void scalar_release_weight(const inf_backend *be, inf_weight *w) {}

static const inf_backend scalar_backend = {
    .name = "scalar",
    .ctx = NULL,
    .prepare_weight = scalar_prepare_weight,
    .release_weight = scalar_release_weight,
    .embed = scalar_embed,
    .matmul = scalar_matmul,
    .rmsnorm = scalar_rmsnorm,
    .rope = scalar_rope,
    .attn_prefill = scalar_attn_prefill,
    .attn_decode = scalar_attn_decode,
    .swiglu = scalar_swiglu,
    .add = scalar_add,
    .moe_sum = scalar_moe_sum,
    .ssm_conv = scalar_ssm_conv,
    .gated_delta = scalar_gated_delta,
    .softmax = scalar_softmax,
    .take_error = scalar_take_error,
};

const inf_backend *inf_backend_scalar(void) {
    return &scalar_backend;
}

void inf_backend_complete(inf_backend *be) {
    const inf_backend *r = &scalar_backend;
    if (!be->prepare_weight) be->prepare_weight = r->prepare_weight;
    if (!be->release_weight) be->release_weight = r->release_weight;
    if (!be->embed) be->embed = r->embed;
    if (!be->matmul) be->matmul = r->matmul;
    if (!be->rmsnorm) be->rmsnorm = r->rmsnorm;
    if (!be->rope) be->rope = r->rope;
    if (!be->attn_prefill) be->attn_prefill = r->attn_prefill;
    if (!be->attn_decode) be->attn_decode = r->attn_decode;
    if (!be->swiglu) be->swiglu = r->swiglu;
    if (!be->add) be->add = r->add;
    if (!be->moe_sum) be->moe_sum = r->moe_sum;
    if (!be->ssm_conv) be->ssm_conv = r->ssm_conv;
    if (!be->gated_delta) be->gated_delta = r->gated_delta;
    if (!be->softmax) be->softmax = r->softmax;
    if (!be->take_error) be->take_error = r->take_error;
    if (!be->name) be->name = r->name;
}
