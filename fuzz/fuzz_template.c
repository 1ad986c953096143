/* libFuzzer target for the chat-template parser and interpreter: the input
 * is a template source rendered with a small fixed chat context under tight
 * limits. Any crash, hang or leak is a bug; errors are expected.
 *
 *   make fuzz && build-fuzz/fuzz/fuzz_template -dict=fuzz/template.dict -max_len=4096 \
 *       -timeout=5 fuzz/corpus-template fuzz/corpus/template */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "template/template.h"

static json_t *context(void) {
    static json_t *ctx;
    if (!ctx)
        ctx = json_loads("{\"messages\": [{\"role\": \"system\", \"content\": \"sys\"},"
                         " {\"role\": \"user\", \"content\": \"hi <tool_response>\"},"
                         " {\"role\": \"assistant\", \"content\": \"<think>r</think>ok\", "
                         "\"reasoning_content\": \"r\","
                         "  \"tool_calls\": [{\"function\": {\"name\": \"f\", \"arguments\": "
                         "{\"a\": [1, 2.5, null]}}}]},"
                         " {\"role\": \"tool\", \"content\": \"{}\"}],"
                         " \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\"}}],"
                         " \"add_generation_prompt\": true, \"enable_thinking\": false,"
                         " \"bos_token\": \"<s>\", \"eos_token\": \"</s>\"}",
                         0, NULL);
    return ctx;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *src = malloc(size + 1);
    if (!src) return 0;
    memcpy(src, data, size);
    src[size] = 0; /* a NUL inside ends the source early, like a C string */
    inf_tmpl_limits lim = inf_tmpl_default_limits();
    lim.max_iterations = 10000;
    lim.max_steps = 1000000;
    lim.max_output = 1 << 20;
    lim.max_memory = 64 << 20;
    char *out = NULL;
    size_t len = 0;
    inf_err err;
    if (inf_tmpl_render(&out, &len, src, context(), &lim, &err) == 0) {
        if (strlen(out) > len) abort(); /* the reported length covers the text */
        free(out);
    }
    free(src);
    return 0;
}
