/* The packed-weight arena: the memory of the backends' repacked weights.
 *
 * Copies are cut from large chunks mapped once and advised for 2 MiB huge
 * pages (THP "madvise" mode), so every copy gets huge pages however small it
 * is (a MoE expert of about 1 MiB, rounded up to a huge page of its own,
 * would double the model's memory) and the kernel clears them at huge-page
 * speed when they are first written. Each chunk counts the copies cut from
 * it and is unmapped when the last of them is released, so two models on
 * one backend, or a model freed and another loaded, reuse nothing stale and
 * leak nothing. Process-wide and thread-safe. */
#ifndef INF_BACKEND_ARENA_H
#define INF_BACKEND_ARENA_H

#include <stddef.h>

typedef struct inf_arena_chunk inf_arena_chunk;

/* n bytes (n > 0), 4 KiB aligned, not yet touched (zero when first read).
 * *chunk receives the chunk to hand to inf_arena_release with it. Returns
 * NULL when the memory cannot be had (the chunk's mapping or its record:
 * inf_alloc's injected failures reach the latter). */
void *inf_arena_alloc(size_t n, inf_arena_chunk **chunk);

/* Gives back one copy cut from chunk (NULL is a no-op); the chunk is
 * unmapped with its last copy. The copy's bytes are not reused before that. */
void inf_arena_release(inf_arena_chunk *chunk);

/* A chunk over memory mapped elsewhere, [base, base + size) (a pack cache's
 * file), holding one reference for the caller: copies handed out from it
 * take theirs with inf_arena_retain, and the range is unmapped when the
 * last reference goes. NULL (nothing adopted) without memory for its record. */
inf_arena_chunk *inf_arena_adopt(void *base, size_t size);
/* One more copy cut from chunk (NULL is a no-op). */
void inf_arena_retain(inf_arena_chunk *chunk);

/* Chunks mapped now (for tests). */
int inf_arena_chunks(void);

#endif
