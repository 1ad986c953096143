/* The basic KV cache: layout, views, room checks, truncation. */
#include "harness.h"
#include "kv/kv_basic.h"

int main(void) {
    inf_kv_basic *c;
    inf_err err;
    CHECK(inf_kv_basic_create(&c, 3, 0, 8, 4, &err) == -1 && c == NULL);
    CHECK(inf_kv_basic_create(&c, 3, 10, 8, 4, &err) == 0);
    inf_kv_view v[3];
    inf_kv_basic_views(c, v);
    /* contiguous per layer, in whole blocks of INF_KV_BASIC_BLOCK positions
     * (10 -> 256); head h of position j in block 0 at h*256*4 + j*4 */
    CHECK_INT(c->n_alloc, INF_KV_BASIC_BLOCK);
    CHECK(inf_kv_k_at(&v[0], 0, 0) == c->k);
    CHECK(inf_kv_k_at(&v[1], 3, 1) == (float *)c->k + 1 * 256 * 8 + 1 * 256 * 4 + 3 * 4);
    CHECK(inf_kv_v_at(&v[2], 9, 0) == (float *)c->v + 2 * 256 * 8 + 9 * 4);
    CHECK(v[1].block_table == NULL && v[1].capacity == 10 && v[1].row_stride == 8 &&
          v[1].head_dim == 4 && v[1].block_size == INF_KV_BASIC_BLOCK);
    {
        /* past the first block: position 260 is row 4 of block 1 */
        inf_kv_basic *c2;
        inf_kv_view u[2];
        CHECK(inf_kv_basic_create_typed(&c2, 2, 300, 8, 4, INF_F16, INF_Q8_0, &err) == -1);
        CHECK_MSG(strstr(err.msg, "q8_0 needs heads of whole 32-element blocks") != NULL, "%s",
                  err.msg);
        CHECK(inf_kv_basic_create(&c2, 2, 300, 8, 3, &err) == -1); /* 8 is not whole heads of 3 */
        CHECK_MSG(strstr(err.msg, "do not split into heads of 3") != NULL, "%s", err.msg);
        CHECK(inf_kv_basic_create(&c2, 2, 300, 8, 4, &err) == 0);
        CHECK_INT(c2->n_alloc, 512);
        inf_kv_basic_views(c2, u);
        CHECK(inf_kv_k_at(&u[1], 260, 1) ==
              (float *)c2->k + 1 * 512 * 8 + (1 * 8 + 1 * 4) * 256 + 4 * 4);
        inf_kv_basic_free(c2);
    }
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
