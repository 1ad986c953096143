/* The web chat page: files from webui/ built into the binary, served from
 * memory at / (index.html) and their own paths, unless --no-webui. */
#ifndef INF_SERVER_WEBUI_H
#define INF_SERVER_WEBUI_H

#include <stddef.h>

typedef struct srv_asset {
    const char *path; /* "/index.html", "/app.js", ... */
    const char *type; /* Content-Type */
    const unsigned char *data;
    size_t len;
} srv_asset;

/* The file served at url ("/" is "/index.html"; a query string is
 * ignored), or NULL when there is none. */
const srv_asset *srv_webui_asset(const char *url);

#endif
