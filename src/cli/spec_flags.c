#include "cli/spec_flags.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

spec_flags spec_flags_defaults(void) {
    return (spec_flags){.kind = INF_SPEC_NONE, .p = inf_spec_defaults()};
}

static const char *const names[] = {"-md",         "--model-draft", "--spec",
                                    "--draft-max", "--draft",       "--draft-n",
                                    "--draft-min", "--draft-n-min", "--draft-p-min"};

bool spec_flag_is(const char *f) {
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(f, names[i])) return true;
    return false;
}

int spec_flag_set(spec_flags *s, const char *cmd, const char *f, const char *v) {
#define IS(x) (!strcmp(f, x))
    char *end;
    errno = 0;
    if (IS("-md") || IS("--model-draft")) {
        s->draft = v;
        if (s->kind == INF_SPEC_NONE) s->kind = INF_SPEC_DRAFT;
        return 0;
    }
    if (IS("--spec")) {
        if (!strcmp(v, "ngram"))
            s->kind = INF_SPEC_NGRAM;
        else if (!strcmp(v, "draft"))
            s->kind = INF_SPEC_DRAFT;
        else if (!strcmp(v, "none"))
            s->kind = INF_SPEC_NONE;
        else {
            fprintf(stderr, "inferno %s: --spec '%s': expected ngram, draft or none\n", cmd, v);
            return -1;
        }
        return 0;
    }
    if (IS("--draft-p-min")) {
        float x = strtof(v, &end);
        if (errno || end == v || *end || !(x >= 0 && x <= 1)) {
            fprintf(stderr, "inferno %s: bad value '%s' for %s (expected 0..1)\n", cmd, v, f);
            return -1;
        }
        s->p.p_min = x;
        return 0;
    }
    long n = strtol(v, &end, 10);
    if (errno || end == v || *end || n < 0 || n > INF_SPEC_MAX_DRAFT) {
        fprintf(stderr, "inferno %s: bad value '%s' for %s (expected 0..%d)\n", cmd, v, f,
                INF_SPEC_MAX_DRAFT);
        return -1;
    }
    if (IS("--draft-min") || IS("--draft-n-min"))
        s->p.n_min = (int)n;
    else
        s->p.n_max = (int)n;
    return 0;
#undef IS
}

int spec_flags_check(const spec_flags *s, const char *cmd) {
    inf_err err;
    if (inf_spec_check(&s->p, &err)) {
        fprintf(stderr, "inferno %s: %s\n", cmd, err.msg);
        return -1;
    }
    if (s->kind == INF_SPEC_DRAFT && !s->draft) {
        fprintf(stderr, "inferno %s: --spec draft needs a draft model (-md FILE)\n", cmd);
        return -1;
    }
    if (s->kind != INF_SPEC_DRAFT && s->draft) {
        fprintf(stderr, "inferno %s: -md %s is given but --spec is %s\n", cmd, s->draft,
                inf_spec_kind_name(s->kind));
        return -1;
    }
    return 0;
}

void spec_flags_apply(const spec_flags *s, inf_engine_opts *o) {
    o->spec_kind = s->kind;
    o->draft_path = s->kind == INF_SPEC_DRAFT ? s->draft : NULL;
    o->spec = s->p;
}
