/* libFuzzer target: the safetensors parser on arbitrary bytes; every tensor
 * it accepts has its first and last byte read. */
#include <stddef.h>
#include <stdint.h>

#include "modelfile/safetensors.h"

static volatile unsigned sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    st_file *f;
    inf_err err;
    if (st_parse(&f, data, size, "fuzz.safetensors", &err)) return 0;
    for (int i = 0; i < f->n_tensors; i++) {
        const unsigned char *p = f->tensors[i].data;
        sink += p[0] + p[f->tensors[i].nbytes - 1];
    }
    st_close(f);
    return 0;
}
