/* inferno chat: a multi-turn REPL through the model's chat template.
 *
 * Each turn renders the whole conversation, tokenizes it, and hands it to the
 * session, which keeps the KV cache of earlier turns and prefills only the
 * tokens after the common prefix with what it holds. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/gen_common.h"

int cmd_chat(int argc, char **argv) {
    gen_args a;
    int rc = gen_args_parse(&a, argc, argv, "chat", false);
    if (rc) return rc > 0 ? 0 : 1;

    gen_ctx g;
    inf_err err;
    json_t *msgs = json_array();
    char *line = NULL;
    size_t line_cap = 0;
    if (gen_ctx_open(&g, &a, &err)) goto fail;
    if (!g.mf->vocab.chat_template) {
        inf_fail(&err, "%s has no chat template: use `inferno run --raw`", a.model);
        goto fail;
    }
    if (a.system)
        json_array_append_new(msgs, json_pack("{s:s, s:s}", "role", "system", "content", a.system));

    bool tty = isatty(0);
    fprintf(stderr, "inferno chat: %s (%s backend, context %d). Ctrl-D or /exit to quit.\n",
            a.model, g.be.name, g.session->n_ctx);
    for (;;) {
        if (tty) fputs("> ", stdout), fflush(stdout);
        ssize_t n = getline(&line, &line_cap, stdin);
        if (n < 0) break;
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = 0;
        if (!strcmp(line, "/exit") || !strcmp(line, "/quit")) break;
        if (n == 0) continue;
        json_array_append_new(msgs, json_pack("{s:s, s:s}", "role", "user", "content", line));

        int32_t *ids = NULL;
        int n_ids = 0;
        if (gen_render_chat(&g, &a, msgs, &ids, &n_ids, &err)) goto fail;
        char *reply = NULL;
        gen_stream st = {.g = &g, .capture = &reply};
        inf_gen_opts o = gen_stream_opts(&st, &a);
        inf_stop_reason why;
        rc = inf_session_generate(g.session, ids, n_ids, &o, &why, &err);
        free(ids);
        if (rc) {
            /* a turn that no longer fits: say so, drop the turn, keep the REPL */
            fprintf(stderr, "inferno chat: %s\n", err.msg);
            json_array_remove(msgs, json_array_size(msgs) - 1);
            free(reply);
            continue;
        }
        gen_stream_finish(&st);
        printf("\n");
        fflush(stdout);
        json_array_append_new(msgs, json_pack("{s:s, s:s}", "role", "assistant", "content",
                                              reply ? reply : ""));
        free(reply);
        const inf_session *s = g.session;
        fprintf(stderr, "[%d prompt tokens (%d cached), %d generated, %.1f tok/s; %s]\n",
                s->n_prompt_eval, s->n_prompt_reused, s->n_gen,
                s->t_gen_s > 0 ? s->n_gen / s->t_gen_s : 0.0, inf_stop_reason_name(why));
        if (why == INF_STOP_LENGTH && s->kv->n_past >= s->n_ctx) {
            fprintf(stderr, "inferno chat: the context (%d tokens) is full\n", s->n_ctx);
            break;
        }
    }
    if (gen_dump_close(&g, &err)) goto fail;
    free(line);
    json_decref(msgs);
    gen_ctx_close(&g);
    return 0;

fail:
    fprintf(stderr, "inferno chat: %s\n", err.msg);
    free(line);
    json_decref(msgs);
    gen_ctx_close(&g);
    return 1;
}
