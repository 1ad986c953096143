/* inferno chat: a multi-turn REPL through the model's chat template.
 *
 * Each turn renders the whole conversation, tokenizes it, and submits it to
 * the engine's one slot, whose cache keeps the earlier turns: only the
 * tokens after the common prefix are prefilled. Input is read as Ollama's
 * REPL reads it (chat_input.h); /clear starts over, /bye ends. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/chat_input.h"
#include "cli/cli.h"
#include "cli/gen_common.h"

static json_t *new_conversation(const gen_args *a) {
    json_t *msgs = json_array();
    if (a->system)
        json_array_append_new(msgs,
                              json_pack("{s:s, s:s}", "role", "system", "content", a->system));
    return msgs;
}

static void help(void) {
    fprintf(stderr, "  /clear   start a new conversation (the system prompt stays)\n"
                    "  /bye     quit (also /exit, /quit, Ctrl-D)\n"
                    "  \"\"\"      begin and end a multi-line message; a line ending in \\ "
                    "continues too\n");
}

int cmd_chat(int argc, char **argv) {
    gen_args a;
    int rc = gen_args_parse(&a, argc, argv, "chat", false);
    if (rc) return rc > 0 ? 0 : 1;

    gen_ctx g;
    inf_err err;
    json_t *msgs = new_conversation(&a);
    if (gen_ctx_open(&g, &a, &err)) goto fail;
    if (!g.e->mf->vocab.chat_template) {
        inf_fail(&err, "%s has no chat template: use `inferno run --raw`", a.model);
        goto fail;
    }

    bool tty = isatty(0);
    fprintf(stderr, "inferno chat: %s (%s, context %d). /? for help, /bye or Ctrl-D to quit.\n",
            a.model, g.e->backend_name, g.e->ex.n_ctx);
    for (;;) {
        char *line = NULL;
        chat_input_kind k = chat_input_read(stdin, &line, tty ? ">>> " : NULL, tty ? "... " : NULL);
        if (k == CHAT_INPUT_EOF) break;
        if (k == CHAT_INPUT_COMMAND) {
            bool quit = !strcmp(line, "/bye") || !strcmp(line, "/exit") || !strcmp(line, "/quit");
            if (!strcmp(line, "/clear")) {
                json_decref(msgs);
                msgs = new_conversation(&a);
                fprintf(stderr, "inferno chat: new conversation\n");
            } else if (!strcmp(line, "/?") || !strcmp(line, "/help")) {
                help();
            } else if (!quit) {
                fprintf(stderr, "inferno chat: unknown command %s (/? lists them)\n", line);
            }
            free(line);
            if (quit) break;
            continue;
        }
        json_array_append_new(msgs, json_pack("{s:s, s:s}", "role", "user", "content", line));
        free(line);

        int32_t *ids = NULL;
        int n_ids = 0;
        if (gen_chat_prompt(&g, &a, msgs, &ids, &n_ids, &err)) goto fail;
        char *reply = NULL;
        inf_task *t = gen_generate(&g, &a, ids, n_ids, &reply, &err);
        if (!t) {
            /* a turn that no longer fits: say so, drop the turn, keep the REPL */
            fprintf(stderr, "inferno chat: %s\n", err.msg);
            json_array_remove(msgs, json_array_size(msgs) - 1);
            free(reply);
            continue;
        }
        json_array_append_new(
            msgs, json_pack("{s:s, s:s}", "role", "assistant", "content", reply ? reply : ""));
        free(reply);
        const inf_timings *tm = &t->timings;
        fprintf(stderr, "[%d prompt tokens (%d cached), %d generated, %.1f tok/s; %s]\n",
                tm->prompt_n, tm->cache_n, tm->predicted_n,
                tm->predicted_ms > 0 ? tm->predicted_n / (tm->predicted_ms * 1e-3) : 0.0,
                inf_finish_name(t->finish));
        /* The last sampled token is never fed: the cache holds n_prompt + n_gen - 1. */
        bool full = t->finish == INF_FINISH_LENGTH && t->n_prompt + t->n_gen - 1 >= g.e->ex.n_ctx;
        inf_task_release(t);
        if (full) {
            fprintf(stderr, "inferno chat: the context (%d tokens) is full\n", g.e->ex.n_ctx);
            break;
        }
    }
    if (gen_dump_close(&g, &err)) goto fail;
    json_decref(msgs);
    gen_ctx_close(&g);
    return 0;

fail:
    fprintf(stderr, "inferno chat: %s\n", err.msg);
    json_decref(msgs);
    gen_ctx_close(&g);
    return 1;
}
