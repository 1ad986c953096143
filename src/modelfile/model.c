/* inf_modelfile_open: a path to the reader of its format. Nothing else lives
 * here; the readers share model_build.c. */
#include "modelfile/model.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "modelfile/gguf.h"
#include "modelfile/gguf_model.h"
#include "modelfile/hf.h"

int inf_modelfile_open(inf_model_file **out, const char *path, inf_err *err) {
    *out = NULL;
    struct stat st;
    if (stat(path, &st) != 0) return inf_fail(err, "%s: cannot open: %s", path, strerror(errno));
    if (S_ISDIR(st.st_mode)) return hf_model_open(out, path, err);
    if (!S_ISREG(st.st_mode))
        return inf_fail(err, "%s: not a model: expected a GGUF file or a Hugging Face folder",
                        path);
    gguf_file *g;
    if (gguf_open(&g, path, err)) return -1;
    return gguf_model_open(out, g, err);
}
