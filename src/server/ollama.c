/* Ollama's API (http.c routes /api/... here after the API key, drain and
 * body size checks):
 *   POST /api/chat, /api/generate   the srv_apis of api_ollama.c through
 *                                   srv_generate; an empty conversation or
 *                                   prompt "loads the model" (done_reason
 *                                   "load") as Ollama answers it
 *   POST /api/embed, /api/embeddings  what /v1/embeddings computes
 *   POST /api/show, GET /api/tags, /api/ps, /api/version
 *
 * The one model is named as Ollama names models, "<id>:latest" (id: --alias
 * or the model's name; an id with a tag of its own is kept as is). A request
 * must name it, with or without ":latest" (case does not matter); any other
 * name is Ollama's 404 "model 'x' not found", so a client that picks a model
 * by name never silently gets another. (The OpenAI endpoints accept any
 * model name, as llama.cpp's server does: their clients send whatever they
 * were configured with and list nothing first.) */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <xxhash.h>

#include "modelfile/model.h"
#include "quant/dtype.h"
#include "server/fields.h"
#include "server/http_int.h"
#include "util/timer.h"

/* The Ollama API version whose fields these endpoints follow (think levels,
 * tool call ids and indices, logprobs): what /api/version reports, since
 * clients compare it to enable features. Not inferno's own version. */
#define OLLAMA_API_VERSION "0.12.0"

enum MHD_Result srv_ollama_error(srv_http *h, struct MHD_Connection *c, const srv_error *e) {
    return srv_send_body(h, c, e->status, srv_ollama_error_body(e), "application/json");
}

static enum MHD_Result fail(srv_http *h, struct MHD_Connection *c, int status, const char *fmt,
                            const char *arg) {
    srv_error e;
    srv_error_set(&e, status, status == 404 ? "not_found_error" : "invalid_request_error", NULL,
                  NULL, fmt, arg);
    return srv_ollama_error(h, c, &e);
}

/* ---- the model's name ---- */

static void served_name(srv_http *h, char *out, size_t cap) {
    const char *id = srv_model_id(h);
    snprintf(out, cap, "%s%s", id, strchr(id, ':') ? "" : ":latest");
}

static bool name_matches(srv_http *h, const char *name) {
    char full[300];
    served_name(h, full, sizeof full);
    return !strcasecmp(name, srv_model_id(h)) || !strcasecmp(name, full);
}

/* The body as an object whose "model" (or the legacy "name") names the
 * served model; NULL with the error sent. */
static json_t *named_body(srv_http *h, struct MHD_Connection *c, const inf_buf *body,
                          enum MHD_Result *sent) {
    srv_error e;
    json_t *root = srv_parse_object(body->data ? body->data : "", body->len, &e);
    if (!root) {
        *sent = srv_ollama_error(h, c, &e);
        return NULL;
    }
    json_t *model = srv_field(root, "model");
    if (!model) model = srv_field(root, "name");
    const char *why = !model                   ? "model is required"
                      : !json_is_string(model) ? "'model': expected a string"
                                               : NULL;
    if (why) {
        json_decref(root);
        *sent = fail(h, c, 400, "%s", why);
        return NULL;
    }
    if (!name_matches(h, json_string_value(model))) {
        char full[300];
        served_name(h, full, sizeof full);
        srv_error_set(&e, 404, "not_found_error", NULL, "model",
                      "model '%.200s' not found (this server runs '%.200s')",
                      json_string_value(model), full);
        json_decref(root);
        *sent = srv_ollama_error(h, c, &e);
        return NULL;
    }
    return root;
}

/* ---- what the model is ---- */

typedef struct model_facts {
    long long size;     /* bytes of the file (a folder's files) */
    long long mtime_ns; /* its modification time */
    char digest[65];    /* an id of path, size and time (not a sha256 of the bytes) */
    long long n_params;
    char quant[32]; /* "Q8_0", "Q4_K_M", "BF16" ... */
} model_facts;

/* llama.cpp's general.file_type names (the quantization Ollama shows). */
static const char *file_type_name(int64_t t) {
    static const char *const NAMES[] = {
        [0] = "F32",      [1] = "F16",      [2] = "Q4_0",       [3] = "Q4_1",    [7] = "Q8_0",
        [8] = "Q5_0",     [9] = "Q5_1",     [10] = "Q2_K",      [11] = "Q3_K_S", [12] = "Q3_K_M",
        [13] = "Q3_K_L",  [14] = "Q4_K_S",  [15] = "Q4_K_M",    [16] = "Q5_K_S", [17] = "Q5_K_M",
        [18] = "Q6_K",    [19] = "IQ2_XXS", [20] = "IQ2_XS",    [21] = "Q2_K_S", [22] = "IQ3_XS",
        [23] = "IQ3_XXS", [24] = "IQ1_S",   [25] = "IQ4_NL",    [26] = "IQ3_S",  [27] = "IQ3_M",
        [28] = "IQ2_S",   [29] = "IQ2_M",   [30] = "IQ4_XS",    [31] = "IQ1_M",  [32] = "BF16",
        [36] = "TQ1_0",   [37] = "TQ2_0",   [38] = "MXFP4_MOE",
    };
    return t >= 0 && t < (int64_t)(sizeof NAMES / sizeof NAMES[0]) ? NAMES[t] : NULL;
}

/* The file's size and time; a folder (Hugging Face) sums its files. */
static void file_stat(const char *path, model_facts *f) {
    struct stat st;
    if (!path || stat(path, &st)) return;
    f->mtime_ns = (long long)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
    if (!S_ISDIR(st.st_mode)) {
        f->size = (long long)st.st_size;
        return;
    }
    DIR *d = opendir(path);
    struct dirent *de;
    while (d && (de = readdir(d))) {
        char p[4096];
        struct stat fs;
        snprintf(p, sizeof p, "%s/%s", path, de->d_name);
        if (!stat(p, &fs) && S_ISREG(fs.st_mode)) f->size += (long long)fs.st_size;
    }
    if (d) closedir(d);
}

static void facts(const srv_http *h, model_facts *f) {
    memset(f, 0, sizeof *f);
    const inf_exec *ex = h->ex;
    file_stat(ex->model_path, f);
    char key[4200];
    int n = snprintf(key, sizeof key, "%s|%lld|%lld", ex->model_path ? ex->model_path : "", f->size,
                     f->mtime_ns);
    XXH128_hash_t a = XXH3_128bits_withSeed(key, (size_t)n, 0);
    XXH128_hash_t b = XXH3_128bits_withSeed(key, (size_t)n, 1);
    snprintf(f->digest, sizeof f->digest, "%016llx%016llx%016llx%016llx",
             (unsigned long long)a.high64, (unsigned long long)a.low64,
             (unsigned long long)b.high64, (unsigned long long)b.low64);
    const inf_model_file *mf = ex->model_file;
    if (!mf) return;
    /* the type most of the weights' bytes have, when the file names none */
    size_t bytes[64] = {0};
    for (int i = 0; i < mf->n_tensors; i++) {
        const inf_tensor *t = &mf->tensors[i];
        long long ne = 1;
        for (int d = 0; d < t->n_dims; d++)
            ne *= t->ne[d];
        f->n_params += ne;
        if ((unsigned)t->type < 64) bytes[t->type] += t->nbytes;
    }
    int64_t ft = -1;
    inf_err err = {{0}};
    const char *name =
        inf_model_meta_int(mf, "general.file_type", &ft, &err) == 1 ? file_type_name(ft) : NULL;
    if (!name) {
        unsigned best = 0;
        for (unsigned t = 1; t < 64; t++)
            if (bytes[t] > bytes[best]) best = t;
        name = inf_ggml_type_name(best);
    }
    snprintf(f->quant, sizeof f->quant, "%s", name);
}

/* Ollama's format.HumanNumber: "596.05M", "8B", "7.6B". */
static void human_number(char *out, size_t cap, long long n) {
    double b = (double)n;
    if (n >= 1000000000LL)
        snprintf(out, cap, b / 1e9 == (double)(n / 1000000000LL) ? "%.0fB" : "%.1fB", b / 1e9);
    else if (n >= 1000000LL)
        snprintf(out, cap, b / 1e6 == (double)(n / 1000000LL) ? "%.0fM" : "%.2fM", b / 1e6);
    else if (n >= 1000)
        snprintf(out, cap, "%.0fK", b / 1e3);
    else
        snprintf(out, cap, "%lld", n);
}

static json_t *details_json(const srv_http *h, const model_facts *f) {
    const inf_model_file *mf = h->ex->model_file;
    const char *arch = mf && mf->arch ? mf->arch : "";
    char params[32];
    human_number(params, sizeof params, f->n_params);
    return json_pack("{s:s,s:s,s:s,s:[s],s:s,s:s}", "parent_model", "", "format",
                     mf && mf->format == INF_FORMAT_HF ? "safetensors" : "gguf", "family", arch,
                     "families", arch, "parameter_size", params, "quantization_level", f->quant);
}

/* One entry of /api/tags and /api/ps. */
static json_t *model_entry(srv_http *h, const model_facts *f) {
    char name[300], at[64];
    served_name(h, name, sizeof name);
    srv_ollama_time(at, sizeof at, f->mtime_ns);
    return json_pack("{s:s,s:s,s:s,s:I,s:s,s:o}", "name", name, "model", name, "modified_at", at,
                     "size", (json_int_t)f->size, "digest", f->digest, "details",
                     details_json(h, f));
}

static enum MHD_Result do_tags(srv_http *h, struct MHD_Connection *c) {
    model_facts f;
    facts(h, &f);
    return srv_send_json(h, c, 200, json_pack("{s:[o]}", "models", model_entry(h, &f)));
}

/* The model stays loaded for the server's life: it never expires. The
 * weights are mapped from the file and no GPU holds them (size_vram 0). */
static enum MHD_Result do_ps(srv_http *h, struct MHD_Connection *c) {
    model_facts f;
    facts(h, &f);
    json_t *m = model_entry(h, &f);
    json_object_del(m, "modified_at");
    json_object_set_new(m, "expires_at", json_string("9999-12-31T23:59:59Z"));
    json_object_set_new(m, "size_vram", json_integer(0));
    json_object_set_new(m, "context_length", json_integer(h->ex->n_ctx));
    return srv_send_json(h, c, 200, json_pack("{s:[o]}", "models", m));
}

/* model_info: the file's hyperparameters under the GGUF keys Ollama shows. */
static json_t *model_info(const srv_http *h, const model_facts *f) {
    const inf_model_file *mf = h->ex->model_file;
    json_t *j = json_object();
    if (!mf) return j;
    const char *a = mf->arch ? mf->arch : "unknown";
    const inf_hparams *hp = &mf->hp;
    json_object_set_new(j, "general.architecture", json_string(a));
    if (mf->name)
        json_object_set_new(j, "general.name", srv_json_stringn(mf->name, strlen(mf->name)));
    json_object_set_new(j, "general.parameter_count", json_integer(f->n_params));
    const struct {
        const char *key;
        long long v;
    } ints[] = {
        {"context_length", hp->n_ctx_train},
        {"embedding_length", hp->n_embd},
        {"block_count", hp->n_layer},
        {"feed_forward_length", hp->n_ff},
        {"attention.head_count", hp->n_head},
        {"attention.head_count_kv", hp->n_head_kv},
        {"attention.key_length", hp->head_dim},
        {"attention.value_length", hp->head_dim},
        {"vocab_size", hp->n_vocab},
        {"expert_count", hp->n_expert},
        {"expert_used_count", hp->n_expert_used},
        {"expert_feed_forward_length", hp->n_ff_exp},
    };
    char key[160];
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        if (!ints[i].v) continue; /* a dense model has no expert keys */
        snprintf(key, sizeof key, "%s.%s", a, ints[i].key);
        json_object_set_new(j, key, json_integer(ints[i].v));
    }
    snprintf(key, sizeof key, "%s.rope.freq_base", a);
    json_object_set_new(j, key, json_real(hp->rope_theta));
    snprintf(key, sizeof key, "%s.attention.layer_norm_rms_epsilon", a);
    json_object_set_new(j, key, json_real(hp->rms_eps));
    return j;
}

/* "temperature 0.6\ntop_k 20\n...": the defaults a request gets, as
 * Ollama lists a model's parameters. */
static void parameters_text(const srv_http *h, inf_buf *out) {
    const inf_sampler_params *s = &h->ex->sampling;
    inf_buf_printf(out, "%-30s %g\n%-30s %d\n%-30s %g\n%-30s %g\n%-30s %g\n%-30s %d\n%-30s %d",
                   "temperature", s->temp, "top_k", s->top_k, "top_p", s->top_p, "min_p", s->min_p,
                   "repeat_penalty", s->repeat_penalty, "repeat_last_n", s->repeat_last_n,
                   "num_ctx", h->ex->n_ctx);
}

static json_t *capabilities(const srv_http *h) {
    if (h->cfg.embeddings) return json_pack("[s]", "embedding");
    const char *tmpl = h->ex->chat_template ? h->ex->chat_template : "";
    json_t *a = json_pack("[s]", "completion");
    if (strstr(tmpl, "tools")) json_array_append_new(a, json_string("tools"));
    if (strstr(tmpl, "<think>")) json_array_append_new(a, json_string("thinking"));
    return a;
}

static enum MHD_Result do_show(srv_http *h, struct MHD_Connection *c, const inf_buf *body) {
    enum MHD_Result sent;
    json_t *root = named_body(h, c, body, &sent);
    if (!root) return sent;
    json_decref(root);
    model_facts f;
    facts(h, &f);
    const char *tmpl = h->ex->chat_template ? h->ex->chat_template : "";
    char name[300], at[64];
    served_name(h, name, sizeof name);
    srv_ollama_time(at, sizeof at, f.mtime_ns);
    inf_buf params = {0}, mfile = {0};
    parameters_text(h, &params);
    /* a Modelfile that says what this server runs; its TEMPLATE is the
       model's Jinja chat template, not a Go template */
    inf_buf_printf(&mfile, "# Modelfile generated by inferno for %s\nFROM %s\n", name,
                   h->ex->model_path ? h->ex->model_path : "");
    for (const char *p = params.data ? params.data : ""; *p;) {
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        inf_buf_printf(&mfile, "PARAMETER %.*s\n", (int)n, p);
        p += n + (nl != NULL);
    }
    json_t *j = json_object();
    json_object_set_new(j, "modelfile", srv_json_stringn(mfile.data ? mfile.data : "", mfile.len));
    json_object_set_new(j, "parameters",
                        srv_json_stringn(params.data ? params.data : "", params.len));
    json_object_set_new(j, "template", srv_json_stringn(tmpl, strlen(tmpl)));
    json_object_set_new(j, "details", details_json(h, &f));
    json_object_set_new(j, "model_info", model_info(h, &f));
    json_object_set_new(j, "capabilities", capabilities(h));
    json_object_set_new(j, "modified_at", json_string(at));
    inf_buf_free(&params);
    inf_buf_free(&mfile);
    return srv_send_json(h, c, 200, j);
}

/* ---- embeddings ---- */

/* The inputs of /api/embed ("input": a string or an array of strings) or
 * /api/embeddings ("prompt": a string) as a /v1/embeddings body, for the
 * one parser and tokenizer of server/embd.c. NULL with e set. */
static char *openai_embd_body(json_t *root, bool legacy, srv_error *e) {
    json_t *in = srv_field(root, legacy ? "prompt" : "input");
    const char *param = legacy ? "prompt" : "input";
    bool ok = json_is_string(in) || json_is_array(in);
    size_t i;
    json_t *v;
    if (json_is_array(in) && !legacy)
        json_array_foreach(in, i, v) ok &= json_is_string(v);
    else if (legacy)
        ok = json_is_string(in);
    if (!ok)
        return srv_bad(e, param,
                       legacy ? "expected a string" : "expected a string or an array of strings"),
               NULL;
    json_t *o = json_pack("{s:O}", "input", in);
    json_t *dims = srv_field(root, "dimensions");
    if (dims && !legacy) json_object_set(o, "dimensions", dims);
    bool b = false;
    if (srv_get_bool(root, "truncate", NULL, &b, e)) {
        json_decref(o);
        return NULL;
    }
    json_t *ka = srv_field(root, "keep_alive"), *opts = srv_field(root, "options");
    if ((ka && !json_is_string(ka) && !json_is_number(ka)) || (opts && !json_is_object(opts))) {
        json_decref(o);
        return srv_bad(e,
                       ka && !json_is_string(ka) && !json_is_number(ka) ? "keep_alive" : "options",
                       "has the wrong type"),
               NULL;
    }
    char *s = srv_json_dump_free(o);
    if (!s) srv_oom(e);
    return s;
}

/* Nothing to embed ("" or []): Ollama answers with no vectors. */
static bool empty_input(json_t *root, bool legacy) {
    json_t *in = srv_field(root, legacy ? "prompt" : "input");
    return !in || (json_is_string(in) && !json_string_length(in)) ||
           (json_is_array(in) && !json_array_size(in));
}

static json_t *vector(const float *v, int n) {
    json_t *a = json_array();
    for (int i = 0; i < n; i++)
        json_array_append_new(a, json_real(v[i]));
    return a;
}

/* /api/embed: L2-normalized vectors (as /v1/embeddings has them);
 * /api/embeddings, the legacy one: the raw vector, as Ollama's is. */
static enum MHD_Result do_embed(srv_http *h, struct MHD_Connection *c, const inf_buf *body,
                                bool legacy) {
    if (!h->cfg.embeddings)
        return fail(h, c, 501, "%s",
                    "This server does not support embeddings. Start it with `--embeddings`");
    long long t0 = (long long)inf_now_ns();
    enum MHD_Result sent;
    srv_parse_enter(h);
    json_t *root = named_body(h, c, body, &sent);
    if (!root) {
        srv_parse_leave(h);
        return sent;
    }
    const char *model = json_string_value(srv_field(root, "model") ? srv_field(root, "model")
                                                                   : srv_field(root, "name"));
    char name[300];
    snprintf(name, sizeof name, "%s", model);
    srv_error e;
    srv_embd_request r = {0};
    char *ob = NULL;
    int bad = 0;
    bool empty = empty_input(root, legacy);
    if (!empty) {
        ob = openai_embd_body(root, legacy, &e);
        bad = !ob || srv_embd_parse(&r, h->ex, ob, strlen(ob), &e);
    }
    free(ob);
    json_decref(root);
    srv_parse_leave(h);
    if (bad) return srv_ollama_error(h, c, &e);
    if (empty) {
        json_t *j = legacy ? json_pack("{s:[]}", "embedding")
                           : json_pack("{s:s,s:[]}", "model", name, "embeddings");
        return srv_send_json(h, c, 200, j);
    }
    inf_task **tasks = NULL;
    enum MHD_Result ok = MHD_NO;
    if (srv_embd_run(h, c, &r, &tasks, &e)) {
        if (e.status) ok = srv_ollama_error(h, c, &e); /* else the client is gone */
    } else if (legacy) {
        ok = srv_send_json(h, c, 200,
                           json_pack("{s:o}", "embedding", vector(tasks[0]->embd, r.dimensions)));
    } else {
        json_t *embs = json_array();
        long long n_tokens = 0;
        for (int i = 0; i < r.n_inputs; i++) {
            srv_embd_normalize(tasks[i]->embd, r.dimensions);
            json_array_append_new(embs, vector(tasks[i]->embd, r.dimensions));
            n_tokens += r.n_ids[i];
        }
        ok =
            srv_send_json(h, c, 200,
                          json_pack("{s:s,s:o,s:I,s:i,s:I}", "model", name, "embeddings", embs,
                                    "total_duration", (json_int_t)((long long)inf_now_ns() - t0),
                                    "load_duration", 0, "prompt_eval_count", (json_int_t)n_tokens));
    }
    srv_embd_tasks_free(h, tasks, r.n_inputs);
    srv_embd_request_free(&r);
    return ok;
}

/* ---- generation ---- */

/* An empty conversation (chat) or prompt (generate) only loads the model in
 * Ollama: it is loaded, so the answer is at once. */
static bool load_only(json_t *root, bool chat) {
    json_t *v = srv_field(root, chat ? "messages" : "prompt");
    return !v || (chat ? json_is_array(v) && !json_array_size(v)
                       : json_is_string(v) && !json_string_length(v));
}

static enum MHD_Result do_generate(srv_http *h, struct MHD_Connection *c, const inf_buf *body,
                                   bool chat) {
    if (h->cfg.embeddings)
        return fail(h, c, 501, "%s",
                    "This server does not support completions. Start it without `--embeddings`");
    /* The name and the load-only case first; the API's parser then parses
       the body again (a second bounded parse, inside the same bound on
       parses at once). */
    enum MHD_Result sent;
    srv_parse_enter(h);
    json_t *root = named_body(h, c, body, &sent);
    srv_parse_leave(h);
    if (!root) return sent;
    if (!load_only(root, chat)) {
        json_decref(root);
        return srv_generate(h, c, chat ? &srv_api_ollama_chat : &srv_api_ollama_generate, body);
    }
    char at[64];
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    srv_ollama_time(at, sizeof at, (long long)ts.tv_sec * 1000000000 + ts.tv_nsec);
    json_t *j =
        json_pack("{s:O,s:s}", "model",
                  srv_field(root, "model") ? srv_field(root, "model") : srv_field(root, "name"),
                  "created_at", at);
    if (chat)
        json_object_set_new(j, "message",
                            json_pack("{s:s,s:s}", "role", "assistant", "content", ""));
    else
        json_object_set_new(j, "response", json_string(""));
    json_object_set_new(j, "done", json_true());
    json_object_set_new(j, "done_reason", json_string("load"));
    json_decref(root);
    return srv_send_json(h, c, 200, j);
}

enum MHD_Result srv_ollama(srv_http *h, struct MHD_Connection *c, const char *path,
                           const inf_buf *body) {
    if (!strcmp(path, "/api/chat")) return do_generate(h, c, body, true);
    if (!strcmp(path, "/api/generate")) return do_generate(h, c, body, false);
    if (!strcmp(path, "/api/embed")) return do_embed(h, c, body, false);
    if (!strcmp(path, "/api/embeddings")) return do_embed(h, c, body, true);
    if (!strcmp(path, "/api/show")) return do_show(h, c, body);
    if (!strcmp(path, "/api/tags")) return do_tags(h, c);
    if (!strcmp(path, "/api/ps")) return do_ps(h, c);
    if (!strcmp(path, "/api/version"))
        return srv_send_json(h, c, 200, json_pack("{s:s}", "version", OLLAMA_API_VERSION));
    /* (http.c sends every other /api/ path here too, before the key check:
       nothing is served) */
    return fail(h, c, 404,
                "%s is not served: inferno runs the one model it was started with (no pull, "
                "push, create, copy or delete)",
                path);
}
