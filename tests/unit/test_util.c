#include "harness.h"
#include "quant/dtype.h"
#include "util/err.h"
#include "util/half.h"

static void test_half(void) {
    CHECK(inf_f16_to_f32(0x3c00) == 1.0f);
    CHECK(inf_f16_to_f32(0xc000) == -2.0f);
    CHECK(inf_f16_to_f32(0x0001) == 5.9604644775390625e-08f);
    CHECK_INT(inf_f32_to_f16(1.0f), 0x3c00);
    CHECK_INT(inf_f32_to_f16(65504.0f), 0x7bff);
    CHECK_INT(inf_f32_to_f16(1e6f), 0x7c00);
    CHECK_INT(inf_f32_to_f16(5.9604644775390625e-08f), 0x0001);
    /* every finite half round-trips */
    int bad = 0;
    for (uint32_t h = 0; h < 0x10000; h++) {
        if ((h & 0x7c00) == 0x7c00) continue;
        if (inf_f32_to_f16(inf_f16_to_f32((uint16_t)h)) != h) bad++;
    }
    CHECK_INT(bad, 0);
    CHECK_INT(inf_f32_to_bf16(1.0f), 0x3f80);
    CHECK(inf_bf16_to_f32(0x3f80) == 1.0f);
    /* ties to even: 1 + 2^-8 is halfway between bf16 1.0 and 1.0078125 */
    CHECK_INT(inf_f32_to_bf16(1.00390625f), 0x3f80);
}

static void test_dtype(void) {
    CHECK_INT(inf_dtype_row_bytes(INF_Q8_0, 64), 68);
    CHECK_INT(inf_dtype_row_bytes(INF_Q4_K, 512), 288);
    CHECK_INT(inf_dtype_row_bytes(INF_Q4_K, 100), 0);
    CHECK(inf_dtype_get(34) == NULL); /* TQ1_0: no reader yet */
    CHECK_STR(inf_ggml_type_name(34), "TQ1_0");
    CHECK(inf_dtype_get(17) != NULL);
    CHECK_STR(inf_ggml_type_name(17), "IQ2_XS");
}

static void test_err(void) {
    inf_err e;
    CHECK_INT(inf_fail(&e, "field %s", "x"), -1);
    inf_fail_ctx(&e, "file.gguf");
    CHECK_STR(e.msg, "file.gguf: field x");
}

int main(void) {
    test_half();
    test_dtype();
    test_err();
    return th_report();
}
