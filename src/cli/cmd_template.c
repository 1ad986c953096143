/* inferno template: render a chat template for a messages JSON file and
 * print the prompt exactly (no newline added). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jansson.h>

#include "cli/cli.h"
#include "model/model.h"
#include "modelfile/model.h"
#include "server/oai.h"
#include "template/template.h"
#include "util/mem.h"

static void usage(FILE *f) {
    fprintf(
        f,
        "usage: inferno template [-m MODEL | --template FILE] MESSAGES.json [options]\n"
        "\n"
        "Renders the chat template for the conversation in MESSAGES.json (a JSON array of\n"
        "messages, or an object {\"messages\": [...], \"tools\": [...], other keywords}) and\n"
        "prints the prompt exactly as the model will see it.\n"
        "\n"
        "  -m MODEL              a GGUF file, a Hugging Face folder, or a tokenizer_config.json\n"
        "                        (default " INF_DEFAULT_MODEL ")\n"
        "  --template FILE       render this Jinja file instead of the model's template\n"
        "  --tools FILE          a JSON array of tools\n"
        "  --no-think            enable_thinking=false\n"
        "  --think               enable_thinking=true\n"
        "  --no-generation-prompt  do not open the assistant turn\n"
        "  --set KEY=JSON        any other template keyword (repeatable)\n"
        "  --openai              MESSAGES.json is an OpenAI chat completions request body:\n"
        "                        render it as `serve` does (its messages normalized, its\n"
        "                        tools, tool_choice, chat_template_kwargs, reasoning_effort)\n");
}

/* bos_token / eos_token in tokenizer_config.json: a string or {"content": ...}. */
static const char *token_text(json_t *v) {
    if (json_is_string(v)) return json_string_value(v);
    if (json_is_object(v) && json_is_string(json_object_get(v, "content")))
        return json_string_value(json_object_get(v, "content"));
    return NULL;
}

/* Reads the chat template and special tokens of a Hugging Face model folder
 * (or a tokenizer_config.json path). */
static int load_hf_template(char **tmpl, json_t *kwargs, const char *path) {
    char cfg[4096];
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        snprintf(cfg, sizeof cfg, "%s/tokenizer_config.json", path);
    else
        snprintf(cfg, sizeof cfg, "%s", path);
    json_error_t je;
    json_t *root = json_load_file(cfg, 0, &je);
    if (!root) {
        fprintf(stderr, "inferno template: %s:%d: %s\n", cfg, je.line, je.text);
        return -1;
    }
    json_t *ct = json_object_get(root, "chat_template");
    if (json_is_array(ct)) { /* [{"name": "default", "template": ...}, ...] */
        json_t *first = NULL, *item;
        size_t i;
        json_array_foreach(ct, i, item) {
            if (!first) first = item;
            if (json_is_string(json_object_get(item, "name")) &&
                !strcmp(json_string_value(json_object_get(item, "name")), "default"))
                first = item;
        }
        ct = first ? json_object_get(first, "template") : NULL;
    }
    if (!json_is_string(ct)) {
        fprintf(stderr, "inferno template: %s: no chat_template string\n", cfg);
        json_decref(root);
        return -1;
    }
    *tmpl = strdup(json_string_value(ct));
    const char *bos = token_text(json_object_get(root, "bos_token"));
    const char *eos = token_text(json_object_get(root, "eos_token"));
    if (bos) json_object_set_new(kwargs, "bos_token", json_string(bos));
    if (eos) json_object_set_new(kwargs, "eos_token", json_string(eos));
    json_decref(root);
    return 0;
}

/* A tokenizer_config.json path, or a folder holding one but no config.json
 * (tokenizer files without weights): read directly, no model needed. */
static bool tokenizer_only(const char *path) {
    size_t n = strlen(path);
    if (n >= 5 && !strcmp(path + n - 5, ".json")) return true;
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) return false;
    char p[4096];
    snprintf(p, sizeof p, "%s/config.json", path);
    if (stat(p, &st) == 0) return false;
    snprintf(p, sizeof p, "%s/tokenizer_config.json", path);
    return stat(p, &st) == 0;
}

/* The template and special tokens of a model (GGUF file or HF folder). */
static int load_model_template(char **tmpl, json_t *kwargs, const char *path) {
    inf_model_file *m;
    inf_err err = {{0}};
    if (inf_model_open(&m, path, &err)) {
        fprintf(stderr, "inferno template: %s\n", err.msg);
        return -1;
    }
    const inf_vocab_desc *v = &m->vocab;
    int rc = -1;
    if (!v->chat_template) {
        fprintf(stderr,
                "inferno template: %s: the model has no chat template (use --template FILE)\n",
                path);
        goto out;
    }
    *tmpl = strdup(v->chat_template);
    if (v->bos_id >= 0 && v->bos_id < v->n_tokens)
        json_object_set_new(kwargs, "bos_token", json_string(v->tokens[v->bos_id]));
    if (v->eos_id >= 0 && v->eos_id < v->n_tokens)
        json_object_set_new(kwargs, "eos_token", json_string(v->tokens[v->eos_id]));
    rc = *tmpl ? 0 : -1;
out:
    inf_model_close(m);
    return rc;
}

/* --openai: the request body at path, parsed and normalized by the server's
 * parser, rendered with the keywords the server passes (the model's special
 * tokens from kwargs, then the request's). Prints the prompt; 0 or 1. */
static int render_request(const char *source, const char *path, json_t *kwargs) {
    char *body = NULL, *out = NULL;
    size_t len;
    inf_err err = {{0}};
    if (inf_read_file(&body, &len, path, (size_t)64 << 20, &err)) {
        fprintf(stderr, "inferno template: %s\n", err.msg);
        return 1;
    }
    srv_request r;
    srv_error e;
    int rc = 1;
    if (srv_request_parse(&r, SRV_CHAT, body, len, NULL, &e)) {
        fprintf(stderr, "inferno template: %s: %d %s\n", path, e.status, e.msg);
        free(body);
        return 1;
    }
    json_t *kw = srv_request_template_kwargs(&r);
    json_object_update_missing(kw, kwargs);
    if (inf_chat_render(&out, source, r.messages, r.tools, true, kw, &err))
        fprintf(stderr, "inferno template: %s\n", err.msg);
    else
        fputs(out, stdout), rc = 0;
    free(out);
    json_decref(kw);
    srv_request_free(&r);
    free(body);
    return rc;
}

int cmd_template(int argc, char **argv) {
    const char *model = NULL, *tmpl_path = NULL, *tools_path = NULL, *msgs_path = NULL;
    bool gen_prompt = true, openai = false;
    json_t *kwargs = json_object();
    int rc = 1;
    char *source = NULL, *out = NULL;
    json_t *msgs_root = NULL, *tools = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            json_decref(kwargs);
            return 0;
        } else if ((!strcmp(a, "-m") || !strcmp(a, "--model")) && i + 1 < argc) {
            model = argv[++i];
        } else if (!strcmp(a, "--template") && i + 1 < argc) {
            tmpl_path = argv[++i];
        } else if (!strcmp(a, "--tools") && i + 1 < argc) {
            tools_path = argv[++i];
        } else if (!strcmp(a, "--no-think")) {
            json_object_set_new(kwargs, "enable_thinking", json_false());
        } else if (!strcmp(a, "--think")) {
            json_object_set_new(kwargs, "enable_thinking", json_true());
        } else if (!strcmp(a, "--openai")) {
            openai = true;
        } else if (!strcmp(a, "--no-generation-prompt")) {
            gen_prompt = false;
        } else if (!strcmp(a, "--set") && i + 1 < argc) {
            const char *kv = argv[++i], *eq = strchr(kv, '=');
            json_error_t je;
            json_t *v = eq ? json_loads(eq + 1, JSON_DECODE_ANY, &je) : NULL;
            if (!v) {
                fprintf(stderr, "inferno template: --set %s: expected KEY=JSON\n", kv);
                goto done;
            }
            char key[256];
            snprintf(key, sizeof key, "%.*s", (int)(eq - kv), kv);
            json_object_set_new(kwargs, key, v);
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "inferno template: unknown option '%s'\n", a);
            usage(stderr);
            goto done;
        } else if (!msgs_path) {
            msgs_path = a;
        } else {
            fprintf(stderr, "inferno template: unexpected argument '%s'\n", a);
            goto done;
        }
    }
    if (!msgs_path) {
        usage(stderr);
        goto done;
    }
    inf_err err = {{0}};
    if (tmpl_path) {
        size_t len;
        if (inf_read_file(&source, &len, tmpl_path, (size_t)16 << 20, &err)) {
            fprintf(stderr, "inferno template: %s\n", err.msg);
            goto done;
        }
        if (strlen(source) != len) {
            fprintf(stderr, "inferno template: %s: contains a NUL byte\n", tmpl_path);
            goto done;
        }
    } else {
        if (!model) model = INF_DEFAULT_MODEL;
        if (tokenizer_only(model)) {
            if (load_hf_template(&source, kwargs, model)) goto done;
        } else if (load_model_template(&source, kwargs, model)) {
            goto done;
        }
    }
    json_error_t je;
    if (openai) {
        rc = render_request(source, msgs_path, kwargs);
        goto done;
    }
    msgs_root = json_load_file(msgs_path, 0, &je);
    if (!msgs_root) {
        fprintf(stderr, "inferno template: %s:%d: %s\n", msgs_path, je.line, je.text);
        goto done;
    }
    json_t *messages = msgs_root;
    if (json_is_object(msgs_root)) {
        messages = json_object_get(msgs_root, "messages");
        const char *k;
        json_t *v;
        json_object_foreach(msgs_root, k, v) {
            if (!strcmp(k, "messages")) continue;
            if (!strcmp(k, "tools"))
                tools = json_incref(v);
            else if (!strcmp(k, "add_generation_prompt"))
                gen_prompt = json_is_true(v);
            else if (!json_object_get(kwargs, k))
                json_object_set(kwargs, k, v);
        }
    }
    if (!json_is_array(messages)) {
        fprintf(stderr,
                "inferno template: %s: expected a JSON array of messages or an object with "
                "\"messages\"\n",
                msgs_path);
        goto done;
    }
    if (tools_path) {
        json_decref(tools);
        tools = json_load_file(tools_path, 0, &je);
        if (!json_is_array(tools)) {
            fprintf(stderr, "inferno template: %s: expected a JSON array of tools (%s)\n",
                    tools_path, je.text);
            goto done;
        }
    }
    if (inf_chat_render(&out, source, messages, tools, gen_prompt, kwargs, &err)) {
        fprintf(stderr, "inferno template: %s\n", err.msg);
        goto done;
    }
    fputs(out, stdout);
    rc = 0;
done:
    free(out);
    free(source);
    json_decref(tools);
    json_decref(msgs_root);
    json_decref(kwargs);
    return rc;
}
