/* On the generated tiny model (models/tiny-q8_0.gguf, the default): 64 greedy
 * tokens from prefill + cached decode equal those from recomputing the whole
 * sequence with an empty cache at every step. */
#include <stdlib.h>

#include "harness.h"
#include "kv/kv_basic.h"
#include "model/model.h"
#include "modelfile/model.h"

static int argmax(const float *x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

/* Feeds tokens[0..n) after the cache's n_past; logits of the last row. */
static int feed(inf_model *m, inf_kv_basic *c, const int32_t *tokens, int n, float *logits) {
    int32_t pos[128], seq[128] = {0};
    for (int i = 0; i < n; i++)
        pos[i] = c->n_past + i;
    inf_kv_view views[64];
    inf_kv_basic_views(c, views);
    inf_batch b = {.n_rows = n, .tokens = tokens, .pos = pos, .seq = seq};
    inf_err err;
    if (inf_model_forward(m, &b, views, 1, logits, &err)) {
        fprintf(stderr, "forward: %s\n", err.msg);
        return -1;
    }
    c->n_past += n;
    return 0;
}

int main(void) {
    const char *path = "models/tiny-q8_0.gguf";
    inf_model_file *mf;
    inf_err err;
    if (inf_model_open(&mf, path, &err)) {
        fprintf(stderr, "%s (run scripts/make-models.sh)\n", err.msg);
        CHECK(0);
        return th_report();
    }
    inf_model *m;
    inf_kv_basic *c;
    CHECK(inf_model_create(&m, mf, inf_backend_scalar(), 128, 128, &err) == 0);
    CHECK(inf_kv_basic_create(&c, mf->hp.n_layer, 128, mf->hp.n_head_kv * mf->hp.head_dim,
                              mf->hp.head_dim, &err) == 0);
    const int V = mf->hp.n_vocab, n_prompt = 5, n_gen = 64;
    float *logits = malloc(sizeof(float) * (size_t)V);
    int32_t a[128] = {9707, 11, 1879, 0, 3555}, b[128];
    memcpy(b, a, sizeof a);

    CHECK(feed(m, c, a, n_prompt, logits) == 0);
    for (int i = 0; i < n_gen; i++) {
        a[n_prompt + i] = argmax(logits, V);
        if (i + 1 < n_gen) CHECK(feed(m, c, &a[n_prompt + i], 1, logits) == 0);
    }
    for (int i = 0; i < n_gen; i++) {
        inf_kv_basic_truncate(c, 0);
        CHECK(feed(m, c, b, n_prompt + i, logits) == 0);
        b[n_prompt + i] = argmax(logits, V);
    }
    int first = -1;
    for (int i = 0; i < n_gen && first < 0; i++)
        if (a[n_prompt + i] != b[n_prompt + i]) first = i;
    CHECK_MSG(first < 0, "step %d: cached decode gives %d, recomputing gives %d", first,
              a[n_prompt + first], b[n_prompt + first]);
    printf("%d greedy tokens, cached vs recomputed: %s\n", n_gen,
           first < 0 ? "identical" : "differ");
    free(logits);
    inf_kv_basic_free(c);
    inf_model_free(m);
    inf_model_close(mf);
    return th_report();
}
