/* The Hugging Face tokenizer files -> the neutral vocabulary description.
 *
 * tokenizer.json gives the BPE model (model.vocab, model.merges), the added
 * tokens, the normalizer and the pre-tokenizer; tokenizer_config.json gives
 * the chat template and which tokens are bos/eos/pad. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "modelfile/model.h"
#include "tokenizer/pretok.h"

/* Ids above this are refused: a hostile file must not make us allocate an
 * array of 2^31 pointers. Real vocabularies are below 300k. */
#define HF_MAX_TOKENS (1 << 22)

/* Names that end a chat turn, for eot_id. */
static const char *const eot_names[] = {"<|im_end|>", "<|eot_id|>", "<end_of_turn>", "<|end|>"};

static char *hf_strdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

/* The id of a token by its exact text, or -1. Used a handful of times per
 * load, so a scan is fine. Added tokens sit at the end, so scan backwards. */
static int hf_find(const inf_vocab_desc *v, const char *text) {
    for (int i = v->n_tokens - 1; i >= 0; i--)
        if (v->tokens[i] && !strcmp(v->tokens[i], text)) return i;
    return -1;
}

static int hf_id(json_t *j, const char *path, const char *what, int *out, inf_err *err) {
    if (!json_is_integer(j)) return inf_fail(err, "%s: %s: expected an integer id", path, what);
    json_int_t id = json_integer_value(j);
    if (id < 0 || id >= HF_MAX_TOKENS)
        return inf_fail(err, "%s: %s: id %lld out of range [0, %d)", path, what, (long long)id,
                        HF_MAX_TOKENS);
    *out = (int)id;
    return 0;
}

static int hf_vocab(inf_vocab_desc *v, json_t *root, const char *path, inf_err *err) {
    json_t *model = json_object_get(root, "model");
    if (!json_is_object(model)) return inf_fail(err, "%s: model: expected an object", path);
    const char *type = json_string_value(json_object_get(model, "type"));
    /* Older files omit model.type; their shape (vocab + merges) says BPE. */
    if (type && strcmp(type, "BPE"))
        return inf_fail(err, "%s: model.type is \"%s\"; only \"BPE\" is supported", path, type);
    if (json_is_true(json_object_get(model, "ignore_merges")))
        return inf_fail(err, "%s: model.ignore_merges = true is not supported", path);
    if (json_is_true(json_object_get(model, "byte_fallback")))
        return inf_fail(err, "%s: model.byte_fallback = true is not supported", path);
    json_t *vocab = json_object_get(model, "vocab");
    if (!json_is_object(vocab)) return inf_fail(err, "%s: model.vocab: expected an object", path);
    json_t *added = json_object_get(root, "added_tokens");
    if (added && !json_is_null(added) && !json_is_array(added))
        return inf_fail(err, "%s: added_tokens: expected an array", path);

    /* First pass: the highest id decides the table size. */
    int max_id = -1, id;
    const char *key;
    json_t *val;
    json_object_foreach(vocab, key, val) {
        if (hf_id(val, path, "model.vocab", &id, err))
            return inf_fail_ctx(err, "token \"%s\"", key);
        if (id > max_id) max_id = id;
    }
    size_t i;
    json_t *at;
    json_array_foreach(added, i, at) {
        if (!json_is_object(at) || !json_is_string(json_object_get(at, "content")))
            return inf_fail(err, "%s: added_tokens[%zu]: expected {id, content, special}", path, i);
        if (hf_id(json_object_get(at, "id"), path, "added_tokens[].id", &id, err)) return -1;
        if (id > max_id) max_id = id;
    }
    if (max_id < 0) return inf_fail(err, "%s: model.vocab is empty", path);

    v->n_tokens = max_id + 1;
    v->tokens = calloc((size_t)v->n_tokens, sizeof *v->tokens);
    v->token_type = calloc((size_t)v->n_tokens, sizeof *v->token_type);
    if (!v->tokens || !v->token_type) return inf_fail(err, "%s: out of memory", path);

    json_object_foreach(vocab, key, val) {
        id = (int)json_integer_value(val);
        if (v->tokens[id])
            return inf_fail(err, "%s: model.vocab: id %d used by both \"%s\" and \"%s\"", path, id,
                            v->tokens[id], key);
        if (!(v->tokens[id] = hf_strdup(key))) return inf_fail(err, "%s: out of memory", path);
        v->token_type[id] = INF_TOKEN_NORMAL;
    }
    /* An added token may re-declare a vocabulary entry; its text and type win,
     * as in the GGUF converter. */
    json_array_foreach(added, i, at) {
        id = (int)json_integer_value(json_object_get(at, "id"));
        const char *content = json_string_value(json_object_get(at, "content"));
        if (!content[0]) return inf_fail(err, "%s: added_tokens[%zu]: empty content", path, i);
        free(v->tokens[id]);
        if (!(v->tokens[id] = hf_strdup(content))) return inf_fail(err, "%s: out of memory", path);
        v->token_type[id] = json_is_true(json_object_get(at, "special")) ? INF_TOKEN_CONTROL
                                                                         : INF_TOKEN_USER_DEFINED;
    }
    /* Holes get the converter's "[PAD<id>]" unused tokens. Padding beyond the
     * highest id (to the model's embedding rows) is the caller's business. */
    for (id = 0; id < v->n_tokens; id++) {
        if (v->tokens[id]) continue;
        char pad[32];
        snprintf(pad, sizeof pad, "[PAD%d]", id);
        if (!(v->tokens[id] = hf_strdup(pad))) return inf_fail(err, "%s: out of memory", path);
        v->token_type[id] = INF_TOKEN_UNUSED;
    }

    /* Merges: "a b" strings (older files) or ["a", "b"] pairs (newer). */
    json_t *merges = json_object_get(model, "merges");
    if (merges && !json_is_null(merges) && !json_is_array(merges))
        return inf_fail(err, "%s: model.merges: expected an array", path);
    size_t n_merges = json_array_size(merges);
    if (n_merges > (size_t)HF_MAX_TOKENS * 4)
        return inf_fail(err, "%s: model.merges: %zu entries is too many", path, n_merges);
    v->merges = calloc(n_merges ? n_merges : 1, sizeof *v->merges);
    if (!v->merges) return inf_fail(err, "%s: out of memory", path);
    json_t *m;
    json_array_foreach(merges, i, m) {
        const char *a, *b;
        char *joined;
        if (json_is_string(m)) {
            const char *s = json_string_value(m), *sp = strchr(s, ' ');
            if (!sp || sp == s || !sp[1] || strchr(sp + 1, ' '))
                return inf_fail(err, "%s: model.merges[%zu] = \"%s\": expected \"left right\"",
                                path, i, s);
            joined = hf_strdup(s);
        } else if (json_is_array(m) && json_array_size(m) == 2 &&
                   (a = json_string_value(json_array_get(m, 0))) &&
                   (b = json_string_value(json_array_get(m, 1)))) {
            if (!a[0] || !b[0] || strchr(a, ' ') || strchr(b, ' '))
                return inf_fail(err,
                                "%s: model.merges[%zu]: parts must be non-empty and have no space",
                                path, i);
            size_t la = strlen(a), lb = strlen(b);
            joined = malloc(la + lb + 2);
            if (joined) {
                memcpy(joined, a, la);
                joined[la] = ' ';
                memcpy(joined + la + 1, b, lb + 1);
            }
        } else {
            return inf_fail(err, "%s: model.merges[%zu]: expected \"a b\" or [\"a\", \"b\"]", path,
                            i);
        }
        if (!joined) return inf_fail(err, "%s: out of memory", path);
        v->merges[v->n_merges++] = joined;
    }
    return 0;
}

/* Finds the split pattern in pre_tokenizer (a Split, possibly inside a
 * Sequence; a ByteLevel with use_regex states GPT-2's pattern). */
static int hf_pretok(json_t *pt, const char *path, const char **regex, inf_err *err) {
    const char *type = json_string_value(json_object_get(pt, "type"));
    if (!type) return inf_fail(err, "%s: pre_tokenizer: missing type", path);
    if (!strcmp(type, "Sequence")) {
        size_t i;
        json_t *sub;
        json_array_foreach(json_object_get(pt, "pretokenizers"), i, sub) {
            if (hf_pretok(sub, path, regex, err)) return -1;
        }
        return 0;
    }
    if (!strcmp(type, "Split")) {
        const char *re =
            json_string_value(json_object_get(json_object_get(pt, "pattern"), "Regex"));
        const char *behavior = json_string_value(json_object_get(pt, "behavior"));
        if (!re)
            return inf_fail(err,
                            "%s: pre_tokenizer Split: only a {\"Regex\": ...} pattern is "
                            "supported",
                            path);
        if ((behavior && strcmp(behavior, "Isolated")) ||
            json_is_true(json_object_get(pt, "invert")))
            return inf_fail(err,
                            "%s: pre_tokenizer Split: only behavior Isolated without invert "
                            "is supported",
                            path);
        if (*regex) return inf_fail(err, "%s: pre_tokenizer: more than one split pattern", path);
        *regex = re;
        return 0;
    }
    if (!strcmp(type, "ByteLevel")) {
        if (json_is_true(json_object_get(pt, "add_prefix_space")))
            return inf_fail(err, "%s: pre_tokenizer ByteLevel: add_prefix_space is not supported",
                            path);
        json_t *use = json_object_get(pt, "use_regex");
        if (!use || json_is_true(use)) {
            if (*regex)
                return inf_fail(err, "%s: pre_tokenizer: more than one split pattern", path);
            *regex = tok_pre_by_name("gpt2")->regex;
        }
        return 0;
    }
    return inf_fail(err, "%s: pre_tokenizer type \"%s\" is not supported", path, type);
}

static int hf_normalizer(json_t *n, const char *path, bool *nfc, inf_err *err) {
    if (!n || json_is_null(n)) return 0;
    const char *type = json_string_value(json_object_get(n, "type"));
    if (type && !strcmp(type, "NFC")) {
        *nfc = true;
        return 0;
    }
    if (type && !strcmp(type, "Sequence") &&
        json_array_size(json_object_get(n, "normalizers")) == 0)
        return 0;
    return inf_fail(err, "%s: normalizer \"%s\" is not supported (only NFC or none)", path,
                    type ? type : "?");
}

/* A token named in tokenizer_config.json: "text", {"content": "text"} or null. */
static int hf_config_token(inf_vocab_desc *v, json_t *cfg, const char *field, const char *path,
                           int *out, inf_err *err) {
    json_t *j = json_object_get(cfg, field);
    if (!j || json_is_null(j)) return 0;
    const char *text =
        json_is_object(j) ? json_string_value(json_object_get(j, "content")) : json_string_value(j);
    if (!text) return inf_fail(err, "%s: %s: expected a string or {\"content\": ...}", path, field);
    int id = hf_find(v, text);
    if (id < 0) return inf_fail(err, "%s: %s \"%s\" is not in the vocabulary", path, field, text);
    *out = id;
    return 0;
}

static int hf_config(inf_vocab_desc *v, const char *path, inf_err *err) {
    json_error_t jerr;
    json_t *cfg = json_load_file(path, 0, &jerr);
    if (!cfg) return inf_fail(err, "%s:%d:%d: %s", path, jerr.line, jerr.column, jerr.text);
    int rc = -1;
    if (!json_is_object(cfg)) {
        inf_fail(err, "%s: expected a JSON object", path);
        goto out;
    }
    if (hf_config_token(v, cfg, "bos_token", path, &v->bos_id, err) ||
        hf_config_token(v, cfg, "eos_token", path, &v->eos_id, err) ||
        hf_config_token(v, cfg, "pad_token", path, &v->pad_id, err))
        goto out;
    json_t *add_bos = json_object_get(cfg, "add_bos_token");
    if (add_bos && !json_is_boolean(add_bos) && !json_is_null(add_bos)) {
        inf_fail(err, "%s: add_bos_token: expected true or false", path);
        goto out;
    }
    v->add_bos = json_is_true(add_bos);
    if (v->add_bos && v->bos_id < 0) {
        inf_fail(err, "%s: add_bos_token is true but bos_token is not set", path);
        goto out;
    }
    /* chat_template: a string, or a list of {name, template} (take "default",
     * else the first). */
    json_t *ct = json_object_get(cfg, "chat_template");
    const char *tmpl = json_string_value(ct);
    if (json_is_array(ct)) {
        size_t i;
        json_t *e;
        json_array_foreach(ct, i, e) {
            const char *name = json_string_value(json_object_get(e, "name"));
            const char *t = json_string_value(json_object_get(e, "template"));
            if (!t) continue;
            if (!tmpl || (name && !strcmp(name, "default"))) tmpl = t;
        }
    }
    if (ct && !json_is_null(ct) && !tmpl) {
        inf_fail(err, "%s: chat_template: expected a string or a list of {name, template}", path);
        goto out;
    }
    if (tmpl && !(v->chat_template = hf_strdup(tmpl))) {
        inf_fail(err, "%s: out of memory", path);
        goto out;
    }
    rc = 0;
out:
    json_decref(cfg);
    return rc;
}

/* The post-processor's trailing special token: a TemplateProcessing (alone
 * or in a Sequence) whose "single" template ends with a SpecialToken after
 * the text, as Qwen3-Embedding appends <|endoftext|>. */
static int hf_post_processor(inf_vocab_desc *v, json_t *pp, const char *path, inf_err *err) {
    if (!json_is_object(pp)) return 0;
    const char *type = json_string_value(json_object_get(pp, "type"));
    if (type && !strcmp(type, "Sequence")) {
        size_t i;
        json_t *p;
        json_array_foreach(json_object_get(pp, "processors"), i, p) {
            if (hf_post_processor(v, p, path, err)) return -1;
        }
        return 0;
    }
    if (!type || strcmp(type, "TemplateProcessing")) return 0;
    json_t *single = json_object_get(pp, "single");
    size_t n = json_array_size(single);
    if (n < 2 || !json_object_get(json_array_get(single, n - 2), "Sequence")) return 0;
    json_t *sp = json_object_get(json_array_get(single, n - 1), "SpecialToken");
    if (!sp) return 0;
    const char *name = json_string_value(json_object_get(sp, "id"));
    int id = name ? hf_find(v, name) : -1;
    if (id < 0)
        return inf_fail(err,
                        "%s: post_processor: the special token it appends (%s) is not in the "
                        "vocabulary",
                        path, name ? name : "?");
    v->add_eos = true;
    v->add_eos_id = id;
    return 0;
}

int inf_vocab_from_hf(inf_vocab_desc *v, const char *tokenizer_json_path,
                      const char *tokenizer_config_path, inf_err *err) {
    const char *path = tokenizer_json_path;
    *v = (inf_vocab_desc){.bos_id = -1, .eos_id = -1, .pad_id = -1, .eot_id = -1};
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    if (!root) return inf_fail(err, "%s:%d:%d: %s", path, jerr.line, jerr.column, jerr.text);
    int rc = -1;
    const char *regex = NULL;
    if (!json_is_object(root)) {
        inf_fail(err, "%s: expected a JSON object", path);
        goto out;
    }
    if (hf_vocab(v, root, path, err) ||
        hf_normalizer(json_object_get(root, "normalizer"), path, &v->nfc, err))
        goto out;
    json_t *pt = json_object_get(root, "pre_tokenizer");
    if (pt && !json_is_null(pt) && hf_pretok(pt, path, &regex, err)) goto out;
    if (!regex) {
        inf_fail(err, "%s: pre_tokenizer: no split pattern (expected a Split with a Regex)", path);
        goto out;
    }
    const tok_pre_info *known = tok_pre_by_regex(regex);
    v->model = hf_strdup("gpt2");
    v->pretok_regex = hf_strdup(regex);
    v->pre = hf_strdup(known ? known->name : "default");
    if (!v->model || !v->pretok_regex || !v->pre) {
        inf_fail(err, "%s: out of memory", path);
        goto out;
    }
    for (size_t i = 0; i < sizeof eot_names / sizeof eot_names[0] && v->eot_id < 0; i++)
        v->eot_id = hf_find(v, eot_names[i]);
    if (hf_post_processor(v, json_object_get(root, "post_processor"), path, err)) goto out;
    if (tokenizer_config_path && hf_config(v, tokenizer_config_path, err)) goto out;
    rc = 0;
out:
    json_decref(root);
    if (rc) inf_vocab_desc_free(v);
    return rc;
}
