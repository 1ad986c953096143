/* The compiled form of a grammar, shared by the compiler (gbnf.c) and the
 * matcher (matcher.c). */
#ifndef INF_GRAMMAR_GRAM_INT_H
#define INF_GRAMMAR_GRAM_INT_H

#include <stdint.h>

#include "grammar/grammar.h"

/* A rule's body is its alternatives, each a sequence of elements, separated
 * by G_ALT and closed by G_END. */
typedef enum { G_END, G_ALT, G_REF, G_CHAR } gram_type;

typedef struct gram_elem {
    uint8_t type; /* gram_type */
    uint8_t neg;  /* G_CHAR: matches what is NOT in the ranges */
    int32_t a;    /* G_REF: rule; G_CHAR: first range */
    int32_t b;    /* G_CHAR: number of ranges (sorted, disjoint, not adjacent) */
} gram_elem;

struct inf_gram {
    gram_elem *el; /* [n_el] every rule's body, one after another */
    int n_el;
    int32_t *rule_start; /* [n_rules] index of each rule's first element */
    int n_rules;
    uint32_t *ranges; /* [n_ranges][2] inclusive code point ranges */
    int n_ranges;
    int root;
};

static inline int gram_eos(const inf_gram *g, int32_t pos) {
    return g->el[pos].type == G_END || g->el[pos].type == G_ALT;
}

#endif
