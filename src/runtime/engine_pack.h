/* When an engine keeps its packed weights in a pack cache file
 * (backend/pack_cache.h), and where that file lives.
 *
 * auto (the default): when the file and its packed copy cannot both stay in
 * memory (twice the model's bytes above 90 % of the machine's memory), so
 * that the page cache could not keep the file from one load to the next;
 * on: always; off: never (the weights are packed in anonymous memory at
 * every load). The cache lives in --pack-cache-dir, else $INFERNO_CACHE_DIR,
 * $XDG_CACHE_HOME/inferno or ~/.cache/inferno, as
 * <model file name>-<hash of its path and the packing layout>.pack, so a
 * model file replaced in place rewrites its own cache rather than adding
 * another. */
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
 * when ok (see inf_pack_cache_finish), appends the outcome to note, and
 * closes it (a cache left unfinished is removed). NULL is a no-op. */
void engine_pack_close(inf_pack_cache *pc, bool ok, char *note, size_t cap);

#endif
