/* CPU feature detection (cpuid/xgetbv on x86-64, compile-time on aarch64). */
#include "backend/cpu_features.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18

static unsigned long long xgetbv0(void) {
    unsigned int lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((unsigned long long)hi << 32) | lo;
}
#endif

static inf_cpu_features g_features;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void detect(void) {
    inf_cpu_features *f = &g_features;
    memset(f, 0, sizeof *f);
#if defined(__x86_64__)
    unsigned a, b, c, d;
    if (!__get_cpuid(0, &a, &b, &c, &d)) return;
    f->amd = b == 0x68747541u && d == 0x69746e65u && c == 0x444d4163u; /* "AuthenticAMD" */
    if (!__get_cpuid(1, &a, &b, &c, &d)) return;
    bool osxsave = c & (1u << 27);
    f->fma = c & (1u << 12);
    f->f16c = c & (1u << 29);
    if (!osxsave) return;
    unsigned long long xcr0 = xgetbv0();
    bool ymm_os = (xcr0 & 0x6) == 0x6;
    bool zmm_os = (xcr0 & 0xe6) == 0xe6;
    if (__get_cpuid_max(0, 0) < 7) return;
    __cpuid_count(7, 0, a, b, c, d);
    f->avx2 = ymm_os && (b & (1u << 5));
    if (!ymm_os) f->fma = f->f16c = false;
    if (zmm_os) {
        f->avx512f = b & (1u << 16);
        f->avx512dq = b & (1u << 17);
        f->avx512bw = b & (1u << 30);
        f->avx512vl = b & (1u << 31);
        f->avx512vnni = c & (1u << 11);
        f->amx_bf16 = d & (1u << 22);
        f->amx_tile = d & (1u << 24);
        f->amx_int8 = d & (1u << 25);
        unsigned a1, b1, c1, d1;
        __cpuid_count(7, 1, a1, b1, c1, d1);
        f->avx512bf16 = a1 & (1u << 5);
    }
    if (f->amx_tile && f->amx_bf16) {
        /* Linux keeps the 8 KiB tile state off until a process asks for it. */
        f->amx_permitted = syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
    }
#elif defined(__aarch64__)
    f->neon = true;
#endif
}

const inf_cpu_features *inf_cpu_features_get(void) {
    pthread_once(&g_once, detect);
    return &g_features;
}

inf_isa inf_isa_best(void) {
    const inf_cpu_features *f = inf_cpu_features_get();
    if (f->neon) return INF_ISA_NEON;
    bool avx2 = f->avx2 && f->fma && f->f16c;
    bool avx512 = avx2 && f->avx512f && f->avx512bw && f->avx512vl && f->avx512dq &&
                  f->avx512bf16 && f->avx512vnni;
    if (avx512 && f->amx_tile && f->amx_bf16 && f->amx_int8 && f->amx_permitted) return INF_ISA_AMX;
    if (avx512) return INF_ISA_AVX512;
    if (avx2) return INF_ISA_AVX2;
    return INF_ISA_SCALAR;
}

static const char *const isa_names[] = {"scalar", "neon", "avx2", "avx512", "amx"};

const char *inf_isa_name(inf_isa isa) {
    return (unsigned)isa < sizeof isa_names / sizeof *isa_names ? isa_names[isa] : "?";
}

int inf_isa_parse(const char *s, inf_isa *out) {
    for (unsigned i = 0; i < sizeof isa_names / sizeof *isa_names; i++)
        if (s && !strcmp(s, isa_names[i])) {
            *out = (inf_isa)i;
            return 0;
        }
    return -1;
}

inf_isa inf_isa_clamp(inf_isa requested) {
    inf_isa best = inf_isa_best();
    if (requested == INF_ISA_NEON) return best == INF_ISA_NEON ? best : INF_ISA_SCALAR;
    if (best == INF_ISA_NEON) return requested == INF_ISA_SCALAR ? requested : best;
    return requested < best ? requested : best;
}

inf_isa inf_isa_default(void) {
    inf_isa isa = inf_isa_best();
    const char *env = getenv("INFERNO_ISA");
    inf_isa want;
    if (env && *env && inf_isa_parse(env, &want) == 0) isa = inf_isa_clamp(want);
    return isa;
}
