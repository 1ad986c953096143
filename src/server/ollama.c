/* Placeholder until Ollama's API lands. */
#include <stdlib.h>
#include <string.h>

#include "server/http_int.h"

enum MHD_Result srv_ollama_error(srv_http *h, struct MHD_Connection *c, const srv_error *e) {
    json_t *j = json_pack("{s:s}", "error", e->msg);
    return srv_send_json(h, c, e->status, j);
}

enum MHD_Result srv_ollama(srv_http *h, struct MHD_Connection *c, const char *path,
                           const inf_buf *body) {
    (void)body;
    srv_error e;
    srv_error_set(&e, 501, "not_supported_error", NULL, NULL, "%s is not implemented yet", path);
    return srv_ollama_error(h, c, &e);
}
