#include "quant/dtype.h"

const char *inf_ggml_type_name(uint32_t type) {
    static const char *names[] = {
        "F32",   "F16",        "Q4_0",       "Q4_1",       "Q4_2",     "Q4_3",     "Q5_0",
        "Q5_1",  "Q8_0",       "Q8_1",       "Q2_K",       "Q3_K",     "Q4_K",     "Q5_K",
        "Q6_K",  "Q8_K",       "IQ2_XXS",    "IQ2_XS",     "IQ3_XXS",  "IQ1_S",    "IQ4_NL",
        "IQ3_S", "IQ2_S",      "IQ4_XS",     "I8",         "I16",      "I32",      "I64",
        "F64",   "IQ1_M",      "BF16",       "Q4_0_4_4",   "Q4_0_4_8", "Q4_0_8_8", "TQ1_0",
        "TQ2_0", "IQ4_NL_4_4", "IQ4_NL_4_8", "IQ4_NL_8_8", "MXFP4",
    };
    if (type >= sizeof names / sizeof names[0]) return "unknown";
    return names[type];
}

size_t inf_dtype_row_bytes(uint32_t type, int64_t n) {
    const inf_dtype_info *t = inf_dtype_get(type);
    if (!t || n <= 0 || n % t->block) return 0;
    return (size_t)(n / t->block) * t->block_bytes;
}
