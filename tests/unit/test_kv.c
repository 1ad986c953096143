/* The basic KV cache: layout, views, room checks, truncation. */
#include "harness.h"
#include "kv/kv_basic.h"

int main(void) {
    inf_kv_basic *c;
    inf_err err;
    CHECK(inf_kv_basic_create(&c, 3, 0, 8, &err) == -1 && c == NULL);
    CHECK(inf_kv_basic_create(&c, 3, 10, 8, &err) == 0);
    inf_kv_view v[3];
    inf_kv_basic_views(c, v);
    /* layer l, position j lives at k + (l*n_ctx + j)*kv_dim: contiguous per layer */
    CHECK(inf_kv_k_row(&v[0], 0) == c->k);
    CHECK(inf_kv_k_row(&v[1], 3) == (float *)c->k + (1 * 10 + 3) * 8);
    CHECK(inf_kv_v_row(&v[2], 9) == (float *)c->v + (2 * 10 + 9) * 8);
    CHECK(v[1].block_table == NULL && v[1].capacity == 10 && v[1].row_stride == 8);
    CHECK(inf_kv_basic_reserve(c, 10, &err) == 0);
    CHECK(inf_kv_basic_reserve(c, 11, &err) == -1);
    CHECK_MSG(strstr(err.msg, "context size is 10") != NULL, "%s", err.msg);
    c->n_past = 7;
    CHECK(inf_kv_basic_reserve(c, 3, &err) == 0);
    CHECK(inf_kv_basic_reserve(c, 4, &err) == -1);
    inf_kv_basic_truncate(c, 2);
    CHECK_INT(c->n_past, 2);
    /* the views do not move when the cache fills: appending copies nothing else */
    inf_kv_view w[3];
    inf_kv_basic_views(c, w);
    CHECK(w[2].k == v[2].k && w[2].v == v[2].v);
    inf_kv_basic_free(c);
    inf_kv_basic_free(NULL);
    return th_report();
}
