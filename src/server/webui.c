/* The web chat page: the files of webui/ built into the binary.
 *
 * The assembler copies each file into .rodata with .incbin (gcc and clang, on
 * x86-64 and aarch64 ELF), between a start and an end symbol, so the binary
 * needs no files at run time and the build needs no generator. Paths are
 * relative to the repository root, where make runs; the Makefile makes this
 * object depend on the files of webui/, which the compiler's -MMD cannot see. */
#include "server/webui.h"

#include <pthread.h>
#include <string.h>

/* WEBUI_FILE(sym, "webui/x"): the bytes of webui/x between inf_webui_sym and
 * inf_webui_sym_end (hidden: no other object or library sees them). */
#define WEBUI_FILE(sym, file)                                                                      \
    __asm__(".pushsection .rodata\n"                                                               \
            ".balign 16\n"                                                                         \
            ".globl inf_webui_" #sym "\n"                                                          \
            ".hidden inf_webui_" #sym "\n"                                                         \
            "inf_webui_" #sym ":\n"                                                                \
            ".incbin \"" file "\"\n"                                                               \
            ".globl inf_webui_" #sym "_end\n"                                                      \
            ".hidden inf_webui_" #sym "_end\n"                                                     \
            "inf_webui_" #sym "_end:\n"                                                            \
            ".popsection\n");                                                                      \
    extern const unsigned char inf_webui_##sym[], inf_webui_##sym##_end[]

WEBUI_FILE(index_html, "webui/index.html");
WEBUI_FILE(style_css, "webui/style.css");
WEBUI_FILE(markdown_js, "webui/markdown.js");
WEBUI_FILE(app_js, "webui/app.js");
WEBUI_FILE(favicon_svg, "webui/favicon.svg");

#define ASSET(url, type, sym)                                                                      \
    { {url, type, inf_webui_##sym, 0}, inf_webui_##sym##_end }

/* A file and where its bytes end: an end minus a start is no constant C can
 * put in a static initializer, so the lengths are filled in once. */
static struct webui_file {
    srv_asset a;
    const unsigned char *end;
} files[] = {
    ASSET("/index.html", "text/html; charset=utf-8", index_html),
    ASSET("/style.css", "text/css; charset=utf-8", style_css),
    ASSET("/markdown.js", "text/javascript; charset=utf-8", markdown_js),
    ASSET("/app.js", "text/javascript; charset=utf-8", app_js),
    ASSET("/favicon.svg", "image/svg+xml", favicon_svg),
};

static pthread_once_t files_once = PTHREAD_ONCE_INIT;

static void files_measure(void) {
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
        files[i].a.len = (size_t)(files[i].end - files[i].a.data);
}

const srv_asset *srv_webui_asset(const char *url) {
    pthread_once(&files_once, files_measure);
    size_t n = strcspn(url, "?");
    if (n == 1 && url[0] == '/') url = "/index.html", n = strlen(url);
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
        if (strlen(files[i].a.path) == n && !memcmp(files[i].a.path, url, n)) return &files[i].a;
    return NULL;
}
