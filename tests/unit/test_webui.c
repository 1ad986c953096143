/* The chat page's files as built into the library (server/webui.c): found by
 * path, with their types, and byte for byte the files of webui/ — every file
 * there, so one added without a line in webui.c's table fails here. Run from
 * the repository root (scripts/run-tests.sh does). */
#include "harness.h"
#include "server/webui.h"

#include <dirent.h>
#include <stdlib.h>

static void test_lookup(void) {
    const srv_asset *index = srv_webui_asset("/index.html");
    CHECK(index != NULL);
    if (!index) return;
    CHECK(srv_webui_asset("/") == index);
    CHECK(srv_webui_asset("/?chat=1") == index);
    CHECK(srv_webui_asset("/index.html?x") == index);
    CHECK_STR(index->type, "text/html; charset=utf-8");
    CHECK(index->len > 15 && !memcmp(index->data, "<!doctype html>", 15));
    const srv_asset *app = srv_webui_asset("/app.js");
    CHECK(app && !strcmp(app->type, "text/javascript; charset=utf-8"));
    CHECK(srv_webui_asset("/style.css") && srv_webui_asset("/markdown.js"));
    const char *none[] = {"",   "/nope",       "/index.html/", "/INDEX.HTML",      "/index.htm",
                          "//", "/app.js.map", "app.js",       "/../webui/app.js", "/v1/models"};
    for (size_t i = 0; i < sizeof none / sizeof none[0]; i++)
        CHECK_MSG(srv_webui_asset(none[i]) == NULL, "\"%s\" found", none[i]);
}

/* The whole file, or NULL; *len its size. */
static unsigned char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    unsigned char *buf = NULL;
    size_t cap = 0, n = 0;
    for (;;) {
        if (n == cap && !(buf = realloc(buf, cap = cap ? 2 * cap : 65536))) break;
        size_t got = fread(buf + n, 1, cap - n, f);
        if (!got) break;
        n += got;
    }
    fclose(f);
    *len = n;
    return buf;
}

static void test_files_match(void) {
    DIR *d = opendir("webui");
    CHECK_MSG(d != NULL, "no webui/ here (run from the repository root)");
    if (!d) return;
    int files = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        char path[512], url[512];
        snprintf(path, sizeof path, "webui/%s", e->d_name);
        snprintf(url, sizeof url, "/%s", e->d_name);
        size_t len = 0;
        unsigned char *want = read_file(path, &len);
        const srv_asset *a = srv_webui_asset(url);
        CHECK_MSG(a != NULL, "%s is not built in (a line in src/server/webui.c)", path);
        if (a)
            CHECK_MSG(want && a->len == len && !memcmp(a->data, want, len),
                      "%s: %zu bytes built in, %zu on disk (a stale build? make all tests)", path,
                      a->len, len);
        free(want);
        files++;
    }
    closedir(d);
    CHECK(files >= 4);
}

int main(void) {
    test_lookup();
    test_files_match();
    return th_report();
}
