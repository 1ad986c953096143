/* libFuzzer target: the GGUF parser and the GGUF -> model loader on arbitrary
 * bytes. Everything it accepts is walked (every metadata value and array
 * element, the first and last byte of every tensor) so that an accepted but
 * inconsistent file shows up as an out-of-bounds read. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "modelfile/gguf.h"
#include "modelfile/gguf_model.h"

static volatile unsigned sink;

static void walk(const gguf_value *v, int depth) {
    if (v->type == GGUF_TYPE_STRING && v->str.len)
        sink += (unsigned char)v->str.ptr[0] + (unsigned char)v->str.ptr[v->str.len - 1];
    if (v->type != GGUF_TYPE_ARRAY) return;
    for (uint64_t i = 0; i < v->arr.n; i++) {
        gguf_value e = gguf_arr_at(v, i);
        walk(&e, depth + 1);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    gguf_file *g;
    inf_err err;
    if (gguf_parse(&g, data, size, "fuzz.gguf", &err)) return 0;
    for (int64_t i = 0; i < g->n_kv; i++)
        walk(&g->kv[i].val, 0);
    for (int64_t i = 0; i < g->n_tensors; i++) {
        const unsigned char *p = g->tensors[i].data;
        sink += p[0] + p[g->tensors[i].nbytes - 1];
    }
    inf_model_file *m;
    if (gguf_model_open(&m, g, &err) == 0) {
        for (int i = 0; i < m->vocab.n_tokens; i++)
            sink += (unsigned)strlen(m->vocab.tokens[i]);
        inf_model_close(m);
    }
    return 0;
}
