/* Backend construction by name, and the one free function for all of them. */
#include "backend/select.h"

#include <stdio.h>
#include <string.h>

#include "backend/cpu_features.h"
#include "backend/pool.h"
#include "backend/simd.h"
#include "backend/trace.h"

int inf_backend_create(inf_backend **out, const inf_backend_opts *o, inf_err *err) {
    *out = NULL;
    const char *name = o->name ? o->name : "pool";
    inf_isa isa = inf_isa_default();
    if (o->isa) {
        inf_isa want;
        if (inf_isa_parse(o->isa, &want) != 0)
            return inf_fail(
                err, "--isa: unknown level '%s' (expected amx, avx512, avx2, neon or scalar)",
                o->isa);
        isa = inf_isa_clamp(want);
    }
    inf_attn_impl attn = INF_ATTN_FLASH;
    if (o->attn && !strcmp(o->attn, "materialized"))
        attn = INF_ATTN_MATERIALIZED;
    else if (o->attn && strcmp(o->attn, "flash") != 0)
        return inf_fail(err, "--attn: unknown attention '%s' (expected flash or materialized)",
                        o->attn);
    inf_backend *be;
    if (!strcmp(name, "scalar")) {
        if (attn == INF_ATTN_MATERIALIZED)
            return inf_fail(err, "--attn materialized: the scalar backend has only flash "
                                 "attention (use --backend simd or pool)");
        be = (inf_backend *)inf_backend_scalar();
    } else if (!strcmp(name, "simd") || !strcmp(name, "pool")) {
        int nth = 1;
        if (!strcmp(name, "pool")) nth = o->n_threads > 0 ? o->n_threads : inf_physical_cores();
        be = inf_backend_simd_create(isa, nth, !strcmp(name, "pool"), attn);
        if (!be) return inf_fail(err, "backend %s: out of memory", name);
        if (inf_backend_simd_attn(be) != attn) {
            inf_fail(err, "--attn materialized: the %s kernels have none (avx512 and amx do)",
                     inf_isa_name(inf_backend_simd_isa(be)));
            inf_backend_simd_free(be);
            return -1;
        }
    } else {
        return inf_fail(err, "--backend: unknown backend '%s' (expected scalar, simd or pool)",
                        name);
    }
    if (o->trace) {
        inf_backend *tr = inf_trace_wrap(be);
        if (!tr) {
            inf_backend_free(be);
            return inf_fail(err, "trace: out of memory");
        }
        be = tr;
    }
    *out = be;
    return 0;
}

void inf_backend_free(inf_backend *be) {
    if (!be) return;
    if (inf_trace_is(be)) {
        inf_backend *inner = (inf_backend *)inf_trace_inner(be);
        inf_trace_free(be);
        be = inner;
    }
    if (inf_backend_is_simd(be)) inf_backend_simd_free(be);
    /* the scalar backend is static */
}

const char *inf_backend_describe(const inf_backend *be, char *buf, int cap) {
    const inf_backend *in = inf_trace_is(be) ? inf_trace_inner(be) : be;
    if (inf_backend_is_simd(in))
        snprintf(buf, (size_t)cap, "%s x%d%s%s", in->name, inf_backend_simd_threads(in),
                 inf_backend_simd_attn(in) == INF_ATTN_MATERIALIZED ? " materialized-attn" : "",
                 inf_trace_is(be) ? " (traced)" : "");
    else
        snprintf(buf, (size_t)cap, "%s%s", in->name, inf_trace_is(be) ? " (traced)" : "");
    return buf;
}

const char *inf_backend_pack_layout(const inf_backend *be) {
    const inf_backend *in = inf_trace_is(be) ? inf_trace_inner(be) : be;
    return inf_backend_is_simd(in) ? inf_backend_simd_pack_layout(in) : NULL;
}

void inf_backend_set_pack_cache(const inf_backend *be, struct inf_pack_cache *pc) {
    const inf_backend *in = inf_trace_is(be) ? inf_trace_inner(be) : be;
    if (inf_backend_is_simd(in)) inf_backend_simd_set_pack_cache(in, pc);
}
