/* CPU feature detection and the ISA level the SIMD kernels run at.
 *
 * Detection runs once (first call) and is cached. The AMX tile state is
 * requested from the kernel (arch_prctl ARCH_REQ_XCOMP_PERM) during detection;
 * AMX counts as present only when the request succeeds. The level can be
 * forced lower with the INFERNO_ISA environment variable or a --isa flag. */
#ifndef INF_BACKEND_CPU_FEATURES_H
#define INF_BACKEND_CPU_FEATURES_H

#include <stdbool.h>

typedef enum inf_isa {
    INF_ISA_SCALAR = 0,
    INF_ISA_NEON,   /* aarch64 Advanced SIMD */
    INF_ISA_AVX2,   /* AVX2 + FMA + F16C */
    INF_ISA_AVX512, /* F/BW/VL/DQ + BF16 + VNNI */
    INF_ISA_AMX,    /* AVX512 level plus AMX-TILE/BF16/INT8 with permission granted */
} inf_isa;

typedef struct inf_cpu_features {
    bool avx2, fma, f16c;
    bool avx512f, avx512bw, avx512vl, avx512dq, avx512bf16, avx512vnni;
    bool amx_tile, amx_bf16, amx_int8, amx_permitted;
    bool neon;
    bool amd; /* vendor AuthenticAMD (tuning only: prefetch distances) */
} inf_cpu_features;

/* The features of the running CPU (detected on first call; thread-safe). */
const inf_cpu_features *inf_cpu_features_get(void);

/* The best ISA level the CPU supports. */
inf_isa inf_isa_best(void);

/* The level to use by default: the best one, lowered by INFERNO_ISA when set
 * to a valid lower level name. */
inf_isa inf_isa_default(void);

/* "scalar", "neon", "avx2", "avx512", "amx". */
const char *inf_isa_name(inf_isa isa);

/* Parses a level name; returns 0, or -1 for an unknown name. */
int inf_isa_parse(const char *s, inf_isa *out);

/* min(requested, best): a level the CPU can run. */
inf_isa inf_isa_clamp(inf_isa requested);

#endif
