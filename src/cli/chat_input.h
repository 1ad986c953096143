/* What `inferno chat` reads as one message, the way Ollama's REPL reads it:
 * a line; a line ending in a backslash continues on the next line; a
 * message opened by three double quotes (""") runs until a line that ends
 * with them, newlines kept. Commands (/bye, /clear, ...) are lines of their
 * own outside a message. */
#ifndef INF_CLI_CHAT_INPUT_H
#define INF_CLI_CHAT_INPUT_H

#include <stdbool.h>
#include <stdio.h>

typedef enum chat_input_kind {
    CHAT_INPUT_EOF,     /* end of input */
    CHAT_INPUT_MESSAGE, /* *text is the message */
    CHAT_INPUT_COMMAND, /* *text is the command line, e.g. "/clear" */
} chat_input_kind;

/* Reads the next message or command from f. *text is malloc'd (free it),
 * NULL at EOF. prompt/cont are printed before the first and each continued
 * line when not NULL. An unterminated """ block at end of input is still a
 * message. Empty lines are skipped. */
chat_input_kind chat_input_read(FILE *f, char **text, const char *prompt, const char *cont);

#endif
