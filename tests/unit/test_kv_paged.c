/* The paged KV cache: block allocator, block tables, views, copy-on-write,
 * exhaustion. Rows are filled with a pattern that names (sequence, layer,
 * position, K/V, element), so any mix-up of rows shows. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "kv_elem.h"
#include "kv/kv_paged.h"

enum { NL = 3, KVD = 8 };

static float pattern(int tag, int l, int j, int is_v, int d) {
    return (float)(((tag * 7919 + l * 613 + j * 31 + is_v * 5 + d) % 65521));
}

static void write_rows(inf_kv_seq *s, int tag, int from, int to) {
    inf_kv_view v[NL];
    inf_kv_seq_views(s, v);
    for (int l = 0; l < NL; l++)
        for (int j = from; j < to; j++)
            for (int d = 0; d < KVD; d++) {
                *kv_k_elem(&v[l], j, d) = pattern(tag, l, j, 0, d);
                *kv_v_elem(&v[l], j, d) = pattern(tag, l, j, 1, d);
            }
}

/* First position in [from, to) whose rows differ from the pattern, or -1. */
static int first_bad_row(const inf_kv_seq *s, int tag, int from, int to) {
    inf_kv_view v[NL];
    inf_kv_seq_views(s, v);
    for (int j = from; j < to; j++)
        for (int l = 0; l < NL; l++)
            for (int d = 0; d < KVD; d++)
                if (*kv_k_elem(&v[l], j, d) != pattern(tag, l, j, 0, d) ||
                    *kv_v_elem(&v[l], j, d) != pattern(tag, l, j, 1, d))
                    return j;
    return -1;
}

/* Appends n tokens one reservation at a time, as decode does. */
static int append(inf_kv_seq *s, int tag, int n, inf_err *err) {
    for (int i = 0; i < n; i++) {
        if (inf_kv_seq_reserve(s, 1, err)) return -1;
        write_rows(s, tag, s->n_past, s->n_past + 1);
        s->n_past++;
    }
    return 0;
}

static int all_free(const inf_kv_pool *p) {
    for (int b = 0; b < p->n_blocks; b++)
        if (p->refcount[b]) return 0;
    inf_err e;
    return p->n_free == p->n_blocks && inf_kv_pool_audit(p, &e) == 0;
}

static void test_create_errors(void) {
    inf_kv_pool *p;
    inf_err e;
    CHECK(inf_kv_pool_create(&p, NL, KVD, KVD / 2, 0, 4, &e) == -1 &&
          strstr(e.msg, "power of two"));
    CHECK(inf_kv_pool_create(&p, NL, KVD, KVD / 2, 12, 4, &e) == -1 &&
          strstr(e.msg, "power of two"));
    CHECK(inf_kv_pool_create(&p, NL, KVD, KVD / 2, 2048, 4, &e) == -1);
    CHECK(inf_kv_pool_create(&p, NL, KVD, KVD / 2, 16, 0, &e) == -1 && strstr(e.msg, "blocks"));
    CHECK(inf_kv_pool_create(&p, 0, KVD, KVD / 2, 16, 4, &e) == -1);
    CHECK(p == NULL);
    inf_kv_pool_free(NULL);
    inf_kv_seq_free(NULL);
}

static void test_sizes(void) {
    CHECK_INT(inf_kv_block_bytes(28, 1024, 16), 28LL * 2 * 16 * 1024 * 4);
    CHECK_INT(inf_kv_pool_blocks_for_bytes(10 * inf_kv_block_bytes(NL, KVD, 4) + 5, NL, KVD, 4),
              10);
    CHECK_INT(inf_kv_pool_blocks_for_bytes(3, NL, KVD, 4), 0);
    size_t b;
    inf_err e;
    CHECK(inf_kv_parse_mem(&b, "512", &e) == 0 && b == 512u << 20);
    CHECK(inf_kv_parse_mem(&b, "2G", &e) == 0 && b == 2ull << 30);
    CHECK(inf_kv_parse_mem(&b, "1.5GiB", &e) == 0 && b == 3ull << 29);
    CHECK(inf_kv_parse_mem(&b, "64MB", &e) == 0 && b == 64u << 20);
    CHECK(inf_kv_parse_mem(&b, "100K", &e) == 0 && b == 102400);
    CHECK(inf_kv_parse_mem(&b, "x", &e) == -1 && strstr(e.msg, "\"x\""));
    CHECK(inf_kv_parse_mem(&b, "12Q", &e) == -1 && strstr(e.msg, "suffix"));
    CHECK(inf_kv_parse_mem(&b, "-3", &e) == -1);
    CHECK(inf_kv_parse_mem(&b, "0", &e) == -1);
}

static void test_allocator(void) {
    inf_kv_pool *p;
    inf_err e;
    CHECK(inf_kv_pool_create(&p, NL, KVD, KVD / 2, 4, 5, &e) == 0);
    int32_t got[5];
    for (int i = 0; i < 5; i++)
        got[i] = kv_block_alloc(p);
    CHECK_INT(got[0], 0); /* low ids first */
    CHECK_INT(kv_block_alloc(p), -1);
    CHECK_INT(inf_kv_pool_used(p), 5);
    int distinct = 1;
    for (int i = 0; i < 5; i++)
        for (int j = 0; j < i; j++)
            distinct &= got[i] != got[j];
    CHECK(distinct);
    kv_block_ref(p, got[2]);
    kv_block_unref(p, got[2]);
    CHECK_INT(p->refcount[got[2]], 1);
    CHECK(inf_kv_pool_audit(p, &e) == 0);
    CHECK(inf_kv_pool_ensure_free(p, 1, &e) == -1 && strstr(e.msg, "exhausted"));
    for (int i = 0; i < 5; i++)
        kv_block_unref(p, got[i]);
    CHECK(all_free(p));
    CHECK_INT(p->n_used_peak, 5);
    inf_kv_pool_free(p);
}

/* Appending across block boundaries, two sequences interleaved in one pool;
 * the views address exactly the documented rows. */
static void test_append_and_views(void) {
    inf_kv_pool *p;
    inf_kv_seq *a, *b;
    inf_err e;
    CHECK(inf_kv_pool_create(&p, NL, KVD, KVD / 2, 4, 16, &e) == 0);
    CHECK(inf_kv_seq_create(&a, p, 30, &e) == 0);
    CHECK(inf_kv_seq_create(&b, p, 30, &e) == 0);
    CHECK_INT(a->max_blocks, 8);
    for (int step = 0; step < 13; step++) {
        CHECK(append(a, 1, 1, &e) == 0);
        CHECK(append(b, 2, 1, &e) == 0);
    }
    CHECK_INT(a->n_past, 13);
    CHECK_INT(a->n_blocks, 4);
    CHECK_INT(inf_kv_pool_used(p), 8);
    CHECK_INT(first_bad_row(a, 1, 0, 13), -1);
    CHECK_INT(first_bad_row(b, 2, 0, 13), -1);
    /* Interleaved appends alternate blocks between a and b. */
    CHECK(a->blocks[0] != b->blocks[0] && a->blocks[1] != b->blocks[1]);

    inf_kv_view v[NL];
    inf_kv_seq_views(a, v);
    for (int l = 0; l < NL; l++) {
        CHECK(v[l].block_table == a->blocks && v[l].block_size == 4 && v[l].row_stride == KVD &&
              v[l].head_dim == KVD / 2);
        /* block b of layer l at b*4*KVD; in it head h's 4 rows at h*4*(KVD/2) */
        for (int j = 0; j < 13; j++)
            for (int h = 0; h < 2; h++) {
                float *want = (float *)p->k + (size_t)l * p->layer_floats +
                              (size_t)a->blocks[j / 4] * 4 * KVD + (size_t)h * 4 * (KVD / 2) +
                              (size_t)(j % 4) * (KVD / 2);
                CHECK(inf_kv_k_at(&v[l], j, h) == want);
                CHECK(inf_kv_v_at(&v[l], j, h) == want + ((float *)p->v - (float *)p->k));
            }
    }

    /* A multi-block reservation (a prefill chunk) from the middle of a block. */
    CHECK(inf_kv_seq_reserve(a, 15, &e) == 0);
    CHECK_INT(a->n_blocks, 7);
    write_rows(a, 1, 13, 28);
    a->n_past = 28;
    CHECK_INT(first_bad_row(a, 1, 0, 28), -1);
    CHECK_INT(first_bad_row(b, 2, 0, 13), -1);

    /* Past the sequence's context: refused, nothing taken. */
    int used = inf_kv_pool_used(p);
    CHECK(inf_kv_seq_reserve(a, 3, &e) == -1 && strstr(e.msg, "context size 30"));
    CHECK_INT(inf_kv_pool_used(p), used);
    CHECK(inf_kv_seq_reserve(a, 2, &e) == 0);

    /* Truncate lets go of whole blocks past the kept positions. */
    inf_kv_seq_truncate(a, 9);
    CHECK_INT(a->n_blocks, 3);
    CHECK_INT(first_bad_row(a, 1, 0, 9), -1);
    CHECK(append(a, 3, 6, &e) == 0);
    CHECK_INT(first_bad_row(a, 1, 0, 9), -1);
    CHECK_INT(first_bad_row(a, 3, 9, 15), -1);
    CHECK_INT(first_bad_row(b, 2, 0, 13), -1);

    inf_kv_seq_free(a);
    inf_kv_seq_free(b);
    CHECK(all_free(p));
    inf_kv_pool_free(p);
}

/* Two sequences share a prefix ending inside a block: the one that writes
 * first gets a private copy; the other's rows never change. */
static void test_copy_on_write(void) {
    inf_kv_pool *p;
    inf_kv_seq *a, *b, *c;
    inf_err e;
    CHECK(inf_kv_pool_create(&p, NL, KVD, KVD / 2, 4, 8, &e) == 0);
    CHECK(inf_kv_seq_create(&a, p, 32, &e) == 0);
    CHECK(inf_kv_seq_create(&b, p, 32, &e) == 0);
    CHECK(inf_kv_seq_create(&c, p, 32, &e) == 0);
    CHECK(append(a, 1, 6, &e) == 0); /* blocks: full, half */

    for (int i = 0; i < a->n_blocks; i++)
        kv_block_ref(p, a->blocks[i]);
    CHECK(inf_kv_seq_attach(b, a->blocks, 6, &e) == 0);
    CHECK_INT(p->refcount[a->blocks[1]], 2);
    CHECK(inf_kv_seq_attach(b, a->blocks, 6, &e) == -1); /* not empty */
    CHECK_INT(first_bad_row(b, 1, 0, 6), -1);

    CHECK(append(b, 2, 3, &e) == 0); /* writes rows 6..8: copies block 1 */
    CHECK_INT(p->n_cow, 1);
    CHECK(b->blocks[0] == a->blocks[0]);
    CHECK(b->blocks[1] != a->blocks[1]);
    CHECK_INT(p->refcount[a->blocks[1]], 1);
    CHECK_INT(p->refcount[a->blocks[0]], 2);
    CHECK_INT(first_bad_row(b, 1, 0, 6), -1); /* the copied rows */
    CHECK_INT(first_bad_row(b, 2, 6, 9), -1);
    CHECK(append(a, 4, 2, &e) == 0); /* a owns its block alone again: no copy */
    CHECK_INT(p->n_cow, 1);
    CHECK_INT(first_bad_row(a, 1, 0, 6), -1);
    CHECK_INT(first_bad_row(a, 4, 6, 8), -1);
    CHECK_INT(first_bad_row(b, 2, 6, 9), -1);

    /* Sharing at a block boundary needs no copy. */
    for (int i = 0; i < 2; i++)
        kv_block_ref(p, a->blocks[i]);
    CHECK(inf_kv_seq_attach(c, a->blocks, 8, &e) == 0);
    CHECK(append(c, 5, 1, &e) == 0);
    CHECK_INT(p->n_cow, 1);
    CHECK(c->blocks[1] == a->blocks[1]);
    CHECK_INT(first_bad_row(c, 4, 6, 8), -1);

    inf_kv_seq_free(a);
    CHECK_INT(first_bad_row(b, 1, 0, 6), -1);
    CHECK_INT(first_bad_row(c, 1, 0, 6), -1);
    inf_kv_seq_free(b);
    inf_kv_seq_free(c);
    CHECK(all_free(p));
    inf_kv_pool_free(p);
}

/* Running out of blocks is an error that changes nothing. */
static void test_exhaustion(void) {
    inf_kv_pool *p;
    inf_kv_seq *a, *b;
    inf_err e;
    CHECK(inf_kv_pool_create(&p, NL, KVD, KVD / 2, 4, 4, &e) == 0);
    CHECK(inf_kv_seq_create(&a, p, 64, &e) == 0);
    CHECK(inf_kv_seq_create(&b, p, 64, &e) == 0);
    CHECK(append(a, 1, 10, &e) == 0); /* 3 blocks */
    CHECK(inf_kv_seq_reserve(b, 5, &e) == -1 && strstr(e.msg, "exhausted"));
    CHECK_INT(b->n_blocks, 0);
    CHECK_INT(p->n_free, 1);
    CHECK_INT(p->n_exhausted, 1);
    CHECK(append(b, 2, 4, &e) == 0);
    CHECK(append(a, 1, 2, &e) == 0); /* fits in a's last block */
    e.msg[0] = 0;
    CHECK(append(a, 1, 1, &e) == -1 && strstr(e.msg, "exhausted"));
    CHECK_INT(a->n_past, 12);
    /* A shared last block cannot be copied when the pool is full either. */
    for (int i = 0; i < b->n_blocks; i++)
        kv_block_ref(p, b->blocks[i]);
    inf_kv_seq *c;
    CHECK(inf_kv_seq_create(&c, p, 64, &e) == 0);
    CHECK(inf_kv_seq_attach(c, b->blocks, 3, &e) == 0);
    CHECK(inf_kv_seq_reserve(c, 1, &e) == -1);
    CHECK(c->blocks[0] == b->blocks[0]);
    CHECK_INT(first_bad_row(a, 1, 0, 12), -1);
    CHECK_INT(first_bad_row(b, 2, 0, 4), -1);
    inf_kv_seq_free(b); /* c still holds the block */
    CHECK_INT(p->n_free, 0);
    CHECK(inf_kv_seq_reserve(c, 1, &e) == 0); /* now c is its only holder */
    CHECK_INT(first_bad_row(c, 2, 0, 3), -1);
    inf_kv_seq_free(c);
    inf_kv_seq_free(a);
    CHECK(all_free(p));
    inf_kv_pool_free(p);
}

/* The reclaim hook runs when the pool is short. */
static int reclaim_calls;
static inf_kv_seq *victim;
static int reclaim(void *ud, inf_kv_pool *p, int n_want) {
    (void)ud;
    reclaim_calls++;
    int before = p->n_free;
    inf_kv_seq_truncate(victim, 0);
    return p->n_free - before;
}

static void test_reclaim_hook(void) {
    inf_kv_pool *p;
    inf_kv_seq *a;
    inf_err e;
    CHECK(inf_kv_pool_create(&p, NL, KVD, KVD / 2, 4, 3, &e) == 0);
    CHECK(inf_kv_seq_create(&victim, p, 64, &e) == 0);
    CHECK(inf_kv_seq_create(&a, p, 64, &e) == 0);
    CHECK(append(victim, 1, 9, &e) == 0);
    inf_kv_pool_set_reclaim(p, reclaim, NULL);
    CHECK(append(a, 2, 4, &e) == 0);
    CHECK_INT(reclaim_calls, 1);
    CHECK_INT(victim->n_blocks, 0);
    CHECK_INT(first_bad_row(a, 2, 0, 4), -1);
    inf_kv_seq_free(victim);
    inf_kv_seq_free(a);
    CHECK(all_free(p));
    inf_kv_pool_free(p);
}

int main(void) {
    test_create_errors();
    test_sizes();
    test_allocator();
    test_append_and_views();
    test_copy_on_write();
    test_exhaustion();
    test_reclaim_hook();
    return th_report();
}
