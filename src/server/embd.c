#include "server/embd.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int bad(srv_error *e, const char *field, const char *msg, int i) {
    char where[64];
    if (i >= 0)
        snprintf(where, sizeof where, "input[%d]", i);
    else
        snprintf(where, sizeof where, "%s", field);
    return srv_error_set(e, 400, "invalid_request_error", NULL, where, "'%s': %s", where, msg);
}

/* One input's ids: a string (tokenized, with the appended token) or an
 * array of token ids (as given). */
static int one_input(srv_embd_request *r, const inf_exec *ex, json_t *v, int i, srv_error *e) {
    int32_t *ids = NULL;
    int n = 0;
    if (json_is_string(v)) {
        if (json_string_length(v) == 0) return bad(e, "input", "must not be an empty string", i);
        inf_err err = {{0}};
        if (ex->tokenize(ex->ctx, json_string_value(v), json_string_length(v), true, &ids, &n,
                         &err))
            return bad(e, "input", err.msg, i);
        if (ex->embd_eos >= 0 && (n == 0 || ids[n - 1] != ex->embd_eos)) {
            int32_t *grown = realloc(ids, ((size_t)n + 1) * sizeof *ids);
            if (!grown) {
                free(ids);
                return srv_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
            }
            ids = grown;
            ids[n++] = ex->embd_eos;
        }
    } else if (json_is_array(v)) {
        n = (int)json_array_size(v);
        if (n == 0) return bad(e, "input", "an array of token ids must not be empty", i);
        ids = malloc((size_t)n * sizeof *ids);
        if (!ids) return srv_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
        for (int k = 0; k < n; k++) {
            json_t *x = json_array_get(v, (size_t)k);
            if (!json_is_integer(x) || json_integer_value(x) < 0 ||
                json_integer_value(x) >= ex->n_vocab) {
                free(ids);
                return bad(e, "input", "every token id must be an integer in [0, n_vocab)", i);
            }
            ids[k] = (int32_t)json_integer_value(x);
        }
    } else {
        return bad(e, "input", "expected a string or an array of token ids", i);
    }
    if (n > ex->n_ctx) {
        free(ids);
        char msg[160];
        snprintf(msg, sizeof msg, "has %d tokens but the context holds %d", n, ex->n_ctx);
        return bad(e, "input", msg, i);
    }
    r->ids[r->n_inputs] = ids;
    r->n_ids[r->n_inputs] = n;
    r->n_inputs++;
    return 0;
}

int srv_embd_parse(srv_embd_request *r, const inf_exec *ex, const char *body, size_t len,
                   srv_error *e) {
    memset(r, 0, sizeof *r);
    size_t nv = srv_json_values(body, len);
    if (nv > SRV_MAX_JSON_VALUES)
        return srv_error_set(e, 413, "invalid_request_error", "request_too_large", NULL,
                             "the request body holds about %zu JSON values, more than the limit "
                             "of %d",
                             nv, SRV_MAX_JSON_VALUES);
    json_error_t je;
    json_t *root = srv_json_parse_body(body, len, &je);
    if (!root)
        return srv_error_set(e, 400, "invalid_request_error", NULL, NULL,
                             "malformed JSON in the request body: %s (line %d, column %d)", je.text,
                             je.line, je.column);
    int rc = -1;
    json_t *in = json_object_get(root, "input");
    json_t *dims = json_object_get(root, "dimensions");
    json_t *fmt = json_object_get(root, "encoding_format");
    json_t *model = json_object_get(root, "model");
    json_t *user = json_object_get(root, "user");
    if (!json_is_object(root)) {
        srv_error_set(e, 400, "invalid_request_error", NULL, NULL,
                      "the request body must be a JSON object");
        goto done;
    }
    if (!in) {
        bad(e, "input",
            "is required (a string, an array of strings, an array of token ids, or "
            "an array of arrays of token ids)",
            -1);
        goto done;
    }
    if (model && !json_is_string(model) && !json_is_null(model)) {
        bad(e, "model", "expected a string", -1);
        goto done;
    }
    if (user && !json_is_string(user) && !json_is_null(user)) {
        bad(e, "user", "expected a string", -1);
        goto done;
    }
    if (json_is_string(model)) {
        snprintf(r->model_buf, sizeof r->model_buf, "%s", json_string_value(model));
        r->model = r->model_buf;
    }
    r->dimensions = ex->n_embd;
    if (dims && !json_is_null(dims)) {
        if (!json_is_integer(dims) || json_integer_value(dims) < 1 ||
            json_integer_value(dims) > ex->n_embd) {
            char msg[96];
            snprintf(msg, sizeof msg, "expected an integer in [1, %d] (the model's width)",
                     ex->n_embd);
            bad(e, "dimensions", msg, -1);
            goto done;
        }
        r->dimensions = (int)json_integer_value(dims);
    }
    if (fmt && !json_is_null(fmt)) {
        const char *f = json_string_value(fmt);
        if (!f || (strcmp(f, "float") && strcmp(f, "base64"))) {
            bad(e, "encoding_format", "expected \"float\" or \"base64\"", -1);
            goto done;
        }
        r->base64 = !strcmp(f, "base64");
    }
    /* One input (a string, or an array of ids), or an array of inputs. */
    bool many =
        json_is_array(in) && json_array_size(in) > 0 && !json_is_number(json_array_get(in, 0));
    size_t n = many ? json_array_size(in) : 1;
    if (json_is_array(in) && json_array_size(in) == 0) {
        bad(e, "input", "must not be an empty array", -1);
        goto done;
    }
    if (n > SRV_MAX_EMBD_INPUTS) {
        srv_error_set(e, 413, "invalid_request_error", "request_too_large", "input",
                      "'input': %zu inputs, more than the limit of %d", n, SRV_MAX_EMBD_INPUTS);
        goto done;
    }
    r->ids = calloc(n, sizeof *r->ids);
    r->n_ids = calloc(n, sizeof *r->n_ids);
    if (!r->ids || !r->n_ids) {
        srv_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *v = many ? json_array_get(in, i) : in;
        if (many && !json_is_string(v) && !json_is_array(v)) {
            bad(e, "input",
                "expected a string or an array of token ids (inputs may not mix "
                "token ids and lists)",
                (int)i);
            goto done;
        }
        if (one_input(r, ex, v, many ? (int)i : -1, e)) goto done;
    }
    rc = 0;
done:
    json_decref(root);
    if (rc) srv_embd_request_free(r);
    return rc;
}

void srv_embd_request_free(srv_embd_request *r) {
    for (int i = 0; r->ids && i < r->n_inputs; i++)
        free(r->ids[i]);
    free(r->ids);
    free(r->n_ids);
    memset(r, 0, sizeof *r);
}

void srv_embd_normalize(float *v, int dims) {
    double ss = 0;
    for (int i = 0; i < dims; i++)
        ss += (double)v[i] * v[i];
    if (!(ss > 0)) return;
    double inv = 1.0 / sqrt(ss);
    for (int i = 0; i < dims; i++)
        v[i] = (float)(v[i] * inv);
}

/* Standard base64 of n bytes (malloc'd, NUL-terminated). */
static char *base64(const unsigned char *p, size_t n) {
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char *out = malloc((n + 2) / 3 * 4 + 1), *w = out;
    if (!out) return NULL;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t x = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) |
                     (i + 2 < n ? p[i + 2] : 0);
        *w++ = tab[x >> 18 & 63];
        *w++ = tab[x >> 12 & 63];
        *w++ = i + 1 < n ? tab[x >> 6 & 63] : '=';
        *w++ = i + 2 < n ? tab[x & 63] : '=';
    }
    *w = 0;
    return out;
}

static json_t *embedding_json(const float *v, int dims, bool b64) {
    if (!b64) {
        json_t *a = json_array();
        for (int i = 0; a && i < dims; i++)
            json_array_append_new(a, json_real(v[i]));
        return a;
    }
    unsigned char *bytes = malloc((size_t)dims * 4);
    if (!bytes) return NULL;
    for (int i = 0; i < dims; i++) {
        uint32_t u;
        memcpy(&u, &v[i], 4);
        for (int k = 0; k < 4; k++)
            bytes[4 * i + k] = (unsigned char)(u >> (8 * k)); /* little-endian on any host */
    }
    char *s = base64(bytes, (size_t)dims * 4);
    free(bytes);
    json_t *j = s ? json_string(s) : NULL;
    free(s);
    return j;
}

char *srv_embd_response(const srv_embd_request *r, float *const *embs, const char *model) {
    json_t *data = json_array();
    long tokens = 0;
    for (int i = 0; data && i < r->n_inputs; i++) {
        json_t *o = json_object();
        json_object_set_new(o, "object", json_string("embedding"));
        json_object_set_new(o, "index", json_integer(i));
        json_t *emb = embedding_json(embs[i], r->dimensions, r->base64);
        if (!emb) {
            json_decref(o);
            json_decref(data);
            return NULL;
        }
        json_object_set_new(o, "embedding", emb);
        json_array_append_new(data, o);
        tokens += r->n_ids[i];
    }
    json_t *root = json_object();
    json_object_set_new(root, "object", json_string("list"));
    json_object_set_new(root, "data", data);
    json_object_set_new(root, "model", json_string(model));
    json_t *usage = json_object();
    json_object_set_new(usage, "prompt_tokens", json_integer(tokens));
    json_object_set_new(usage, "total_tokens", json_integer(tokens));
    json_object_set_new(root, "usage", usage);
    return srv_json_dump_free(root);
}
