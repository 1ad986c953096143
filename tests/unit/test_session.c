/* The session: prefix reuse gives the logits of a fresh run, the context
 * limits (a prompt over it is refused, generation stops with "length"), the
 * stop reasons, and seeded sampling repeating itself. */
#include <stdlib.h>

#include "harness.h"
#include "runtime/session.h"
#include "synth_model.h"

typedef struct collect {
    int32_t toks[512];
    int n, eog_token;
} collect;
static int on_token(void *ud, int32_t t) {
    collect *c = ud;
    c->toks[c->n++] = t;
    return 0;
}
static bool is_eog(void *ud, int32_t t) { return t == ((collect *)ud)->eog_token; }

int main(void) {
    inf_hparams hp = synth_tiny_hparams();
    inf_dtype types[3] = {INF_F32, INF_F32, INF_F32};
    inf_model_file *mf = synth_model(hp, types, 1234);
    inf_qwen3 *m;
    inf_err err;
    CHECK(inf_qwen3_create(&m, mf, inf_backend_scalar(), 64, 16, &err) == 0);
    inf_sampler_params sp = inf_sampler_defaults();
    sp.temp = 0;
    inf_session *a, *b;
    CHECK(inf_session_create(&a, m, 64, &sp, &err) == 0);
    CHECK(inf_session_create(&b, m, 65, &sp, &err) == -1); /* beyond the model's tables */
    CHECK(inf_session_create(&b, m, 40, &sp, &err) == 0);

    int32_t prompt[50];
    for (int i = 0; i < 50; i++) prompt[i] = (i * 17 + 3) % hp.n_vocab;
    /* 30 tokens (two chunks of max_rows 16), then 45 starting with the same 30 */
    CHECK(inf_session_prefill(a, prompt, 30, &err) == 0);
    CHECK_INT(a->n_prompt_eval, 30);
    CHECK(inf_session_prefill(a, prompt, 45, &err) == 0);
    CHECK_INT(a->n_prompt_reused, 30);
    CHECK_INT(a->n_prompt_eval, 15);
    CHECK(inf_session_prefill(b, prompt, 45, &err) == -1); /* over b's context of 40 */
    CHECK_MSG(strstr(err.msg, "45") && strstr(err.msg, "40"), "%s", err.msg);
    CHECK(inf_session_prefill(b, prompt, 40, &err) == 0);
    inf_session_free(b);
    CHECK(inf_session_create(&b, m, 64, &sp, &err) == 0);
    CHECK(inf_session_prefill(b, prompt, 45, &err) == 0);
    CHECK_CLOSE(a->logits, b->logits, hp.n_vocab, 1e-6);
    /* the same prompt again: only the last token is recomputed */
    CHECK(inf_session_prefill(a, prompt, 45, &err) == 0);
    CHECK_INT(a->n_prompt_eval, 1);
    CHECK_CLOSE(a->logits, b->logits, hp.n_vocab, 1e-6);
    /* a prompt that diverges at 10 keeps 10 */
    int32_t other[20];
    memcpy(other, prompt, sizeof other);
    other[10] = (other[10] + 1) % hp.n_vocab;
    CHECK(inf_session_prefill(a, other, 20, &err) == 0);
    CHECK_INT(a->n_prompt_reused, 10);
    CHECK(inf_session_prefill(a, other, 0, &err) == -1);

    /* generation: n_predict, then the context end ("length"), then an eog token */
    collect c = {.eog_token = -1};
    inf_gen_opts o = {.n_predict = 5, .is_eog = is_eog, .on_token = on_token, .ud = &c};
    inf_stop_reason why;
    CHECK(inf_session_generate(a, prompt, 20, &o, &why, &err) == 0);
    CHECK_INT(c.n, 5);
    CHECK_INT(why, INF_STOP_LENGTH);
    CHECK_INT(a->kv->n_past, 24); /* the last sampled token is not fed */
    c.n = 0;
    o.n_predict = -1;
    CHECK(inf_session_generate(a, prompt, 50, &o, &why, &err) == 0);
    CHECK_INT(why, INF_STOP_LENGTH);
    CHECK_INT(c.n, 15); /* 50 + 14 fed = 64 positions, the 15th sampled has no room */
    CHECK_INT(a->kv->n_past, 64);
    CHECK_STR(inf_stop_reason_name(why), "length");
    /* the same run with token c.toks[3] as end of generation stops there */
    int32_t want_stop = c.toks[3];
    int first = 0;
    while (c.toks[first] != want_stop) first++;
    c.n = 0;
    c.eog_token = want_stop;
    CHECK(inf_session_generate(a, prompt, 50, &o, &why, &err) == 0);
    CHECK_INT(why, INF_STOP_EOG);
    CHECK_INT(c.n, first);
    CHECK_INT(a->n_prompt_eval, 1); /* the 50-token prompt was all cached but its last token */
    /* ignore_eos goes on to the length limit */
    c.n = 0;
    o.ignore_eos = true;
    CHECK(inf_session_generate(a, prompt, 50, &o, &why, &err) == 0);
    CHECK_INT(why, INF_STOP_LENGTH);
    CHECK_INT(c.n, 15);

    /* seeded sampling: the same seed twice gives the same tokens */
    inf_session_free(b);
    sp = inf_sampler_defaults();
    sp.seed = 99, sp.top_k = 0, sp.temp = 1.5f;
    collect r1 = {.eog_token = -1}, r2 = {.eog_token = -1};
    for (int k = 0; k < 2; k++) {
        CHECK(inf_session_create(&b, m, 64, &sp, &err) == 0);
        inf_gen_opts g = {.n_predict = 30, .on_token = on_token, .ud = k ? &r2 : &r1};
        CHECK(inf_session_generate(b, prompt, 8, &g, &why, &err) == 0);
        inf_session_free(b);
    }
    CHECK_INT(r1.n, 30);
    CHECK(r1.n == r2.n && !memcmp(r1.toks, r2.toks, sizeof(int32_t) * r1.n));

    inf_session_free(a);
    inf_session_free(NULL);
    inf_qwen3_free(m);
    synth_model_free(mf);
    return th_report();
}
