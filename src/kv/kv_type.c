#include "kv/kv_type.h"

#include <string.h>
#include <strings.h>

static const struct {
    const char *name;
    inf_dtype type;
} kv_types[] = {{"f32", INF_F32}, {"f16", INF_F16}, {"bf16", INF_BF16}, {"q8_0", INF_Q8_0}};

int inf_kv_parse_type(inf_dtype *out, const char *text, const char *what, inf_err *err) {
    for (size_t i = 0; text && i < sizeof kv_types / sizeof kv_types[0]; i++)
        if (!strcasecmp(text, kv_types[i].name)) {
            *out = kv_types[i].type;
            return 0;
        }
    return inf_fail(err, "%s \"%s\": unknown K/V cache type (expected one of %s)",
                    what ? what : "cache type", text ? text : "", INF_KV_TYPE_NAMES);
}

const char *inf_kv_type_name(inf_dtype t) {
    for (size_t i = 0; i < sizeof kv_types / sizeof kv_types[0]; i++)
        if (kv_types[i].type == t) return kv_types[i].name;
    return "unknown";
}

int inf_kv_check_type(inf_dtype t, int kv_dim, int head_dim, inf_err *err) {
    if (head_dim <= 0 || kv_dim <= 0 || kv_dim % head_dim)
        return inf_fail(err, "kv cache: rows of %d elements do not split into heads of %d", kv_dim,
                        head_dim);
    if (!strcmp(inf_kv_type_name(t), "unknown"))
        return inf_fail(err, "kv cache: type id %d is not a K/V type (expected one of %s)", (int)t,
                        INF_KV_TYPE_NAMES);
    if (t == INF_Q8_0 && head_dim % INF_QK8_0 != 0)
        return inf_fail(err, "kv cache: q8_0 needs heads of whole 32-element blocks (head is %d)",
                        head_dim);
    return 0;
}

void inf_kv_store_row(const inf_kv_view *kv, int j, const float *k, const float *v) {
    const int hd = kv->head_dim;
    for (int h = 0; h < kv->row_stride / hd; h++) {
        inf_dtype_get(kv->k_type)->quant(inf_kv_k_at(kv, j, h), k + (size_t)h * hd, hd);
        inf_dtype_get(kv->v_type)->quant(inf_kv_v_at(kv, j, h), v + (size_t)h * hd, hd);
    }
}
