/* Placeholder until the page lands: no files. */
#include "server/webui.h"

const srv_asset *srv_webui_asset(const char *url) {
    (void)url;
    return NULL;
}
