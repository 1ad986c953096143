/* inferno run: one prompt, streamed answer, timing summary. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/gen_common.h"

/* "1,2,3" -> ids; -1 on anything else. */
static int parse_ids(const char *s, int32_t **ids, int *n) {
    int cap = 16, k = 0;
    int32_t *v = malloc(sizeof(int32_t) * (size_t)cap);
    while (v && *s) {
        char *end;
        long x = strtol(s, &end, 10);
        if (end == s || x < 0 || x > INT32_MAX || (*end && *end != ',')) break;
        if (k == cap && !(v = realloc(v, sizeof(int32_t) * (size_t)(cap *= 2)))) break;
        v[k++] = (int32_t)x;
        s = *end ? end + 1 : end;
    }
    if (!v || *s || k == 0) {
        free(v);
        return -1;
    }
    *ids = v;
    *n = k;
    return 0;
}

int cmd_run(int argc, char **argv) {
    gen_args a;
    int rc = gen_args_parse(&a, argc, argv, "run", true);
    if (rc) return rc > 0 ? 0 : 1;

    gen_ctx g;
    inf_err err;
    int32_t *ids = NULL;
    int n_ids = 0;
    if (gen_ctx_open(&g, &a, &err)) goto fail;

    if (a.token_ids) {
        if (parse_ids(a.token_ids, &ids, &n_ids)) {
            inf_fail(&err, "--token-ids: expected comma-separated token ids, got '%s'",
                     a.token_ids);
            goto fail;
        }
        for (int i = 0; i < n_ids; i++)
            if (ids[i] >= g.n_vocab) {
                inf_fail(&err, "--token-ids: %d is outside the vocabulary (0..%d)", ids[i],
                         g.n_vocab - 1);
                goto fail;
            }
    } else if (a.raw || !g.e->mf->vocab.chat_template) {
        if (inf_engine_tokenize(g.e, a.prompt, strlen(a.prompt), true, &ids, &n_ids, &err))
            goto fail;
    } else {
        json_t *msgs = json_array();
        if (a.system)
            json_array_append_new(msgs,
                                  json_pack("{s:s, s:s}", "role", "system", "content", a.system));
        json_array_append_new(msgs, json_pack("{s:s, s:s}", "role", "user", "content", a.prompt));
        rc = gen_chat_prompt(&g, &a, msgs, &ids, &n_ids, &err);
        json_decref(msgs);
        if (rc) goto fail;
    }
    if (n_ids == 0) {
        inf_fail(&err, "the prompt is empty after tokenization");
        goto fail;
    }
    if (a.verbose_prompt) {
        fprintf(stderr, "prompt: %d tokens:", n_ids);
        for (int i = 0; i < n_ids; i++)
            fprintf(stderr, " %d", ids[i]);
        fprintf(stderr, "\n");
    }

    inf_task *t = gen_generate(&g, &a, ids, n_ids, NULL, &err);
    ids = NULL; /* the task owns it */
    if (!t) goto fail;
    if (gen_dump_close(&g, &err)) {
        inf_task_release(t);
        goto fail;
    }
    gen_print_timings(&g, t);
    inf_task_release(t);
    gen_ctx_close(&g);
    return 0;

fail:
    fprintf(stderr, "inferno run: %s\n", err.msg);
    free(ids);
    gen_ctx_close(&g);
    return 1;
}
