/* The pack cache: a model's packed weights kept in a file.
 *
 * A SIMD level repacks every integer and BF16 weight into panels at load
 * time (kernels.h), a copy about as large as the file. Where the file and its
 * copy do not both fit in memory, the page cache cannot keep the file between
 * runs, and every load reads it from disk again (the 17 GiB Qwen3-30B-A3B on
 * a 24 GiB machine: 52 s). A pack cache writes the panels once into a file
 * and maps it: later loads map the panels straight from the page cache, the
 * model file's packed tensors are never read, and resident memory is the
 * panels plus the tensors read in place.
 *
 * One cache file holds one model's panels for one packing layout; `ident`
 * (the model files' identity, inf_model_file_ident, and the layout's name) is
 * stored in it and must match whole. The file:
 *   [0, 4096)                   header: magic, table and identity offsets,
 *                               the hash of table + identity
 *   [4096, table)               the panels, each entry 4 KiB aligned
 *   [table, table + n * entry)  the entries, sorted by (file, offset)
 *   [ident, ident + len)        the identity text
 * Each entry names its weight by where its bytes lie in the model's files
 * (inf_weight.src_file, src_offset), its type and shape, the packed shape,
 * and a hash of its panels (inf_pack_cache_hash), checked by the backend
 * before it uses them. A cache is written under a temporary name, then
 * renamed into place (a reader sees a whole cache or none), and not synced:
 * what a crash leaves unwritten fails a hash and is written again.
 *
 * The mapping is an arena chunk (arena.h): every packed weight that points
 * into it holds a reference, so it lives as long as the last of them. */
#ifndef INF_BACKEND_PACK_CACHE_H
#define INF_BACKEND_PACK_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/kernels.h"
#include "util/err.h"

typedef struct inf_pack_cache inf_pack_cache;

/* Opens the cache at path for ident. A complete cache there with the same
 * identity: read mode. Otherwise (none, another identity, damaged): write
 * mode, into a new file beside path that inf_pack_cache_finish renames to
 * it; expect_bytes is what the panels will take (refused when the file
 * system would keep less than keep_share of itself, and 1 GiB, free after
 * them), max_bytes the most they may take. Returns -1 with a message naming
 * path when neither can be done. */
int inf_pack_cache_open(inf_pack_cache **out, const char *path, const char *ident,
                        size_t expect_bytes, double keep_share, size_t max_bytes, inf_err *err);
bool inf_pack_cache_writing(const inf_pack_cache *pc);
const char *inf_pack_cache_path(const inf_pack_cache *pc);

/* Read mode: the stored panels of w with p's shape (from inf_pack_plan):
 * sets p->data into the mapping and *hash to the stored hash, and returns
 * true; false when the cache has no such entry. The caller checks the hash
 * and then takes the panels with inf_pack_cache_claim, or reports
 * inf_pack_cache_damaged. */
bool inf_pack_cache_find(inf_pack_cache *pc, const inf_weight *w, inf_packed *p, uint64_t *hash);
void inf_pack_cache_claim(inf_pack_cache *pc, inf_packed *p);
void inf_pack_cache_damaged(inf_pack_cache *pc);

/* Write mode: room in the file for w's panels of p's shape: sets p->data and
 * p->chunk (a reference taken) and returns 0; -1 when the file cannot grow
 * (no space left, or past max_bytes): the reason is kept for finish, and this
 * and every later weight go to anonymous memory. Once the panels are filled,
 * inf_pack_cache_commit records them with their hash. */
int inf_pack_cache_reserve(inf_pack_cache *pc, const inf_weight *w, inf_packed *p);
void inf_pack_cache_commit(inf_pack_cache *pc, uint64_t hash);

/* Ends the load. Write mode: writes the table and the identity and renames
 * the file into place (no file when no weight was packed into it). Read
 * mode: removes a cache found damaged (the next load writes it again). Returns 0, or -1 with a
 * message saying why the cache is not there for the next load (the weights already prepared stay
 * valid either way). */
int inf_pack_cache_finish(inf_pack_cache *pc, inf_err *err);

/* Removes, from dir, what earlier loads left that no load can use: each
 * cache whose identity text stale(ident, arg) calls stale, and the temporary
 * file of a writer that is no longer running. Files that are not caches
 * (another name, another magic) are left alone. */
void inf_pack_cache_sweep(const char *dir, bool (*stale)(const char *ident, void *arg), void *arg);

/* Weights found / packed into the cache, and the bytes of their panels. */
void inf_pack_cache_stats(const inf_pack_cache *pc, int64_t *n_weights, size_t *bytes);

/* Closes pc (NULL is a no-op); an unfinished file is removed. The mapping
 * stays while packed weights use it. */
void inf_pack_cache_close(inf_pack_cache *pc);

/* The hash of n bytes of panels: the XXH3 of the XXH3s of its pieces of
 * INF_PACK_HASH_PIECE bytes, so the pieces can be hashed on any threads. */
#define INF_PACK_HASH_PIECE ((size_t)256 << 10)
uint64_t inf_pack_hash_piece(const uint8_t *data, size_t n);
uint64_t inf_pack_hash_combine(const uint64_t *piece_hashes, size_t n_pieces);
/* The same hash on one thread, with no memory allocated. */
uint64_t inf_pack_hash(const uint8_t *data, size_t n);

#endif
