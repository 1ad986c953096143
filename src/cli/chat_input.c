#include "cli/chat_input.h"

#include <stdlib.h>
#include <string.h>

typedef struct sbuf {
    char *s;
    size_t n, cap;
} sbuf;

static int sbuf_add(sbuf *b, const char *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        size_t cap = (b->n + n + 1) * 2;
        char *p = realloc(b->s, cap);
        if (!p) return -1;
        b->s = p;
        b->cap = cap;
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = 0;
    return 0;
}

/* One line without its end of line; -1 at EOF. */
static ssize_t read_line(FILE *f, char **line, size_t *cap, const char *prompt) {
    if (prompt) fputs(prompt, stdout), fflush(stdout);
    ssize_t n = getline(line, cap, f);
    if (n < 0) return -1;
    while (n > 0 && ((*line)[n - 1] == '\n' || (*line)[n - 1] == '\r'))
        (*line)[--n] = 0;
    return n;
}

static bool ends_with_quotes(const char *s, size_t n) {
    return n >= 3 && !memcmp(s + n - 3, "\"\"\"", 3);
}

chat_input_kind chat_input_read(FILE *f, char **text, const char *prompt, const char *cont) {
    *text = NULL;
    char *line = NULL;
    size_t cap = 0;
    sbuf b = {0};
    ssize_t n;
    chat_input_kind kind = CHAT_INPUT_EOF;
    /* The first line: skip empty ones. */
    do {
        n = read_line(f, &line, &cap, prompt);
    } while (n == 0);
    if (n < 0) goto done;
    if (line[0] == '/' && strncmp(line, "/\"", 2)) {
        kind = CHAT_INPUT_COMMAND;
        sbuf_add(&b, line, (size_t)n);
        goto done;
    }
    kind = CHAT_INPUT_MESSAGE;
    if (n >= 3 && !memcmp(line, "\"\"\"", 3)) {
        /* A """ block: the rest of this line, then whole lines, until one
         * that ends with """; the lines are joined by newlines, and an
         * opening or closing """ alone on its line adds no empty line. */
        const char *s = line + 3;
        size_t m = (size_t)n - 3;
        bool first = true;
        int lines = 0;
        for (;;) {
            bool last = ends_with_quotes(s, m);
            if (last) m -= 3;
            if (m > 0 || !(first || last)) {
                if (lines++) sbuf_add(&b, "\n", 1);
                sbuf_add(&b, s, m);
            }
            if (last) break;
            first = false;
            n = read_line(f, &line, &cap, cont);
            if (n < 0) break; /* unterminated at EOF: what came is the message */
            s = line;
            m = (size_t)n;
        }
    } else {
        /* Lines ending in a backslash continue. */
        for (;;) {
            bool more = n > 0 && line[n - 1] == '\\';
            sbuf_add(&b, line, (size_t)(more ? n - 1 : n));
            if (!more) break;
            n = read_line(f, &line, &cap, cont);
            if (n < 0) break;
            sbuf_add(&b, "\n", 1);
        }
    }
done:
    free(line);
    if (kind != CHAT_INPUT_EOF && !b.s) sbuf_add(&b, "", 0);
    if (kind != CHAT_INPUT_EOF && !b.s) kind = CHAT_INPUT_EOF; /* out of memory */
    *text = b.s;
    return kind;
}
