/* When an engine keeps its packed weights in a pack cache file
 * (backend/pack_cache.h), and where that file lives.
 *
 * auto (the default): whenever the backend packs weights and the cache's
 * file system keeps 5 % of itself and 1 GiB free after it. A load then
 * maps pages the page cache already holds instead of packing into fresh
 * memory (which, besides the packing, pays the first touch of every page),
 * processes serving the same model share one copy, and a model whose file
 * and packed copy do not both fit in memory (Qwen3-30B-A3B Q4_K_M on
 * 24 GiB) no longer reads its whole file from disk at every load.
 * on: always (an error when no cache can be had); off: never (the weights
 * are packed in anonymous memory at every load). Each load first sweeps the
 * directory of caches no load can use again (inf_pack_cache_sweep: model
 * file gone or replaced, an older layout of the same level). The cache lives in --pack-cache-dir,
 * else $INFERNO_CACHE_DIR, $XDG_CACHE_HOME/inferno or ~/.cache/inferno, as <model file name>-<hash
 * of its path and the packing layout>.pack, so a model file replaced in place rewrites its own
 * cache rather than adding another. */
#ifndef INF_RUNTIME_ENGINE_PACK_H
#define INF_RUNTIME_ENGINE_PACK_H

#include <stdbool.h>
#include <stddef.h>

#include "backend/backend.h"
#include "backend/pack_cache.h"
#include "modelfile/model.h"
#include "util/err.h"

typedef enum inf_pack_mode { INF_PACK_AUTO, INF_PACK_ON, INF_PACK_OFF } inf_pack_mode;

/* "auto", "on" or "off"; -1 with a message naming flag otherwise. */
int inf_pack_mode_parse(inf_pack_mode *out, const char *v, const char *flag, inf_err *err);

/* The pack cache for mf's weights on be under mode, in dir (NULL: the
 * default above): *out NULL when none is used. note (cap bytes) gets what the
 * user should know ("" for nothing): the cache written or read, or why it
 * could not be used in auto mode. Returns -1 with a message only when mode
 * is on and no cache can be had. */
int engine_pack_open(inf_pack_cache **out, const inf_model_file *mf, const inf_backend *be,
                     inf_pack_mode mode, const char *dir, char *note, size_t cap, inf_err *err);

/* After the weights are bound (ok) or their binding failed: finishes pc
 * when ok (see inf_pack_cache_finish), appends the outcome to note (what
 * was written, what went wrong; a cache mapped only under on: in auto mode
 * that is the quiet, usual case), and closes it (a cache left unfinished is
 * removed). NULL is a no-op. */
void engine_pack_close(inf_pack_cache *pc, inf_pack_mode mode, bool ok, char *note, size_t cap);

#endif
