/* Tracing wrapper: every op goes through a timed forwarding function. */
#include "backend/trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/timer.h"

enum {
    OP_PREPARE,
    OP_EMBED,
    OP_RMSNORM,
    OP_ROPE,
    OP_ATTN_PREFILL,
    OP_ATTN_DECODE,
    OP_SWIGLU,
    OP_ADD,
    OP_MOE_SUM,
    OP_SSM_CONV,
    OP_GATED_DELTA,
    OP_SOFTMAX,
    OP_MATMUL0, /* + 2 * dtype slot + (T > 1) */
};
#define N_TYPES (INF_DTYPE_COUNT + 1) /* a slot per type id, then "other" */
#define N_OPS (OP_MATMUL0 + 2 * N_TYPES)

static const char *const op_names[OP_MATMUL0] = {
    "prepare_weight", "embed", "rmsnorm", "rope",     "attn_prefill", "attn_decode",
    "swiglu",         "add",   "moe_sum", "ssm_conv", "gated_delta",  "softmax"};

/* a weight type's matmul slot: its id (every type inferno reads has one) */
static int type_slot(inf_dtype t) {
    return (unsigned)t < INF_DTYPE_COUNT ? (int)t : N_TYPES - 1;
}

typedef struct trace_ctx {
    const inf_backend *inner;
    unsigned long long calls[N_OPS];
    unsigned long long ns[N_OPS];
} trace_ctx;

static trace_ctx *tc(const inf_backend *be) {
    return (trace_ctx *)be->ctx;
}

#define TIMED(be, op, call)                                                                        \
    do {                                                                                           \
        trace_ctx *c_ = tc(be);                                                                    \
        uint64_t t0_ = inf_now_ns();                                                               \
        call;                                                                                      \
        c_->ns[op] += inf_now_ns() - t0_;                                                          \
        c_->calls[op]++;                                                                           \
    } while (0)

static int tr_prepare(const inf_backend *be, inf_weight *w) {
    const inf_backend *in = tc(be)->inner;
    int rc = 0;
    if (in->prepare_weight) TIMED(be, OP_PREPARE, rc = in->prepare_weight(in, w));
    return rc;
}
static void tr_release(const inf_backend *be, inf_weight *w) {
    const inf_backend *in = tc(be)->inner;
    if (in->release_weight) in->release_weight(in, w);
}
static void tr_embed(const inf_backend *be, float *out, const inf_tensor *table, const int32_t *ids,
                     int T) {
    const inf_backend *in = tc(be)->inner;
    TIMED(be, OP_EMBED, in->embed(in, out, table, ids, T));
}
static void tr_matmul(const inf_backend *be, float *y, const float *x, const inf_weight *w, int T) {
    const inf_backend *in = tc(be)->inner;
    const int slot = type_slot(w->t->type);
    TIMED(be, OP_MATMUL0 + 2 * slot + (T > 1), in->matmul(in, y, x, w, T));
}
/* counted as one matmul of the first weight's type (the call is one pass) */
static void tr_matmul_n(const inf_backend *be, float *const *ys, const float *x,
                        const inf_weight *const *ws, int n, int T, int prefill) {
    const inf_backend *in = tc(be)->inner;
    const int slot = type_slot(ws[0]->t->type);
    TIMED(be, OP_MATMUL0 + 2 * slot + (T > 1), in->matmul_n(in, ys, x, ws, n, T, prefill));
}
static void tr_rmsnorm(const inf_backend *be, float *out, const float *x, const float *w, int rows,
                       int n, float eps) {
    const inf_backend *in = tc(be)->inner;
    TIMED(be, OP_RMSNORM, in->rmsnorm(in, out, x, w, rows, n, eps));
}
static void tr_rope(const inf_backend *be, float *x, const int32_t *pos, int T, int n_heads,
                    int head_dim, int n_rot, const float *cos_tab, const float *sin_tab) {
    const inf_backend *in = tc(be)->inner;
    TIMED(be, OP_ROPE, in->rope(in, x, pos, T, n_heads, head_dim, n_rot, cos_tab, sin_tab));
}
static void tr_attn_prefill(const inf_backend *be, float *out, const float *q,
                            const inf_kv_view *kv, int pos0, int T, const inf_attn_shape *s) {
    const inf_backend *in = tc(be)->inner;
    TIMED(be, OP_ATTN_PREFILL, in->attn_prefill(in, out, q, kv, pos0, T, s));
}
static void tr_attn_decode(const inf_backend *be, float *out, const float *q, const inf_kv_view *kv,
                           int n_keys, const inf_attn_shape *s) {
    const inf_backend *in = tc(be)->inner;
    TIMED(be, OP_ATTN_DECODE, in->attn_decode(in, out, q, kv, n_keys, s));
}
static void tr_swiglu(const inf_backend *be, float *out, const float *gate, const float *up,
                      int64_t n) {
    const inf_backend *in = tc(be)->inner;
    TIMED(be, OP_SWIGLU, in->swiglu(in, out, gate, up, n));
}
static void tr_add(const inf_backend *be, float *y, const float *x, int64_t n) {
    const inf_backend *in = tc(be)->inner;
    TIMED(be, OP_ADD, in->add(in, y, x, n));
}
static void tr_moe_sum(const inf_backend *be, float *y, const float *x, const float *w, int T,
                       int k, int64_t n) {
    const inf_backend *in = tc(be)->inner;
    TIMED(be, OP_MOE_SUM, in->moe_sum(in, y, x, w, T, k, n));
}
static void tr_ssm_conv(const inf_backend *be, float *out, const float *x, float *state,
                        const float *w, int T, int C, int K) {
    const inf_backend *in = tc(be)->inner;
    TIMED(be, OP_SSM_CONV, in->ssm_conv(in, out, x, state, w, T, C, K));
}
static void tr_gated_delta(const inf_backend *be, float *out, const float *q, const float *k,
                           const float *v, const float *g, const float *beta, float *state, int T,
                           const inf_delta_shape *s) {
    const inf_backend *in = tc(be)->inner;
    TIMED(be, OP_GATED_DELTA, in->gated_delta(in, out, q, k, v, g, beta, state, T, s));
}

static void tr_softmax(const inf_backend *be, float *x, int n) {
    const inf_backend *in = tc(be)->inner;
    TIMED(be, OP_SOFTMAX, in->softmax(in, x, n));
}

/* not an op: not counted */
static int tr_take_error(const inf_backend *be, inf_err *err) {
    const inf_backend *in = tc(be)->inner;
    return in->take_error ? in->take_error(in, err) : 0;
}

inf_backend *inf_trace_wrap(const inf_backend *inner) {
    inf_backend *be = calloc(1, sizeof *be);
    trace_ctx *c = calloc(1, sizeof *c);
    if (!be || !c) {
        free(be);
        free(c);
        return NULL;
    }
    c->inner = inner;
    be->name = inner->name;
    be->ctx = c;
    be->prepare_weight = tr_prepare;
    be->release_weight = tr_release;
    be->embed = tr_embed;
    be->matmul = tr_matmul;
    if (inner->matmul_n) be->matmul_n = tr_matmul_n;
    be->rmsnorm = tr_rmsnorm;
    be->rope = tr_rope;
    be->attn_prefill = tr_attn_prefill;
    be->attn_decode = tr_attn_decode;
    be->swiglu = tr_swiglu;
    be->add = tr_add;
    be->moe_sum = tr_moe_sum;
    be->ssm_conv = tr_ssm_conv;
    be->gated_delta = tr_gated_delta;
    be->softmax = tr_softmax;
    be->take_error = tr_take_error;
    return be;
}

void inf_trace_free(inf_backend *tr) {
    if (!tr) return;
    free(tr->ctx);
    free(tr);
}

void inf_trace_reset(inf_backend *tr) {
    trace_ctx *c = tc(tr);
    memset(c->calls, 0, sizeof c->calls);
    memset(c->ns, 0, sizeof c->ns);
}

const inf_backend *inf_trace_inner(const inf_backend *tr) {
    return tc(tr)->inner;
}

static void op_name(int op, char *buf, size_t cap) {
    if (op < OP_MATMUL0) {
        snprintf(buf, cap, "%s", op_names[op]);
        return;
    }
    int slot = (op - OP_MATMUL0) / 2, batched = (op - OP_MATMUL0) % 2;
    const inf_dtype_info *ti = slot < N_TYPES - 1 ? inf_dtype_get((uint32_t)slot) : NULL;
    snprintf(buf, cap, "matmul %s %s", ti ? ti->name : "other", batched ? "T>1" : "T=1");
}

size_t inf_trace_format(const inf_backend *tr, char *buf, size_t cap) {
    const trace_ctx *c = tc(tr);
    unsigned long long total = 0;
    int order[N_OPS], n = 0;
    for (int i = 0; i < N_OPS; i++) {
        if (i == OP_PREPARE) continue; /* load time, not run time */
        total += c->ns[i];
        if (c->calls[i]) order[n++] = i;
    }
    for (int i = 1; i < n; i++) /* largest first */
        for (int k = i; k > 0 && c->ns[order[k]] > c->ns[order[k - 1]]; k--) {
            int t = order[k];
            order[k] = order[k - 1];
            order[k - 1] = t;
        }
    size_t len = 0;
    if (cap == 0) return 0;
    buf[0] = 0;
#define APPEND(...)                                                                                \
    do {                                                                                           \
        if (len < cap) {                                                                           \
            int w_ = snprintf(buf + len, cap - len, __VA_ARGS__);                                  \
            if (w_ > 0) len += (size_t)w_ < cap - len ? (size_t)w_ : cap - len - 1;                \
        }                                                                                          \
    } while (0)
    APPEND("%-22s %10s %12s %7s\n", "op", "calls", "total ms", "share");
    for (int i = 0; i < n; i++) {
        char name[40];
        op_name(order[i], name, sizeof name);
        APPEND("%-22s %10llu %12.2f %6.1f%%\n", name, c->calls[order[i]],
               (double)c->ns[order[i]] * 1e-6,
               total ? 100.0 * (double)c->ns[order[i]] / (double)total : 0.0);
    }
    APPEND("%-22s %10s %12.2f %6.1f%%\n", "total", "", (double)total * 1e-6, 100.0);
    if (c->calls[OP_PREPARE])
        APPEND("(prepare_weight at load: %llu calls, %.1f ms)\n", c->calls[OP_PREPARE],
               (double)c->ns[OP_PREPARE] * 1e-6);
#undef APPEND
    return len;
}

bool inf_trace_is(const inf_backend *be) {
    return be && be->matmul == tr_matmul;
}
