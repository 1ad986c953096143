#include <stdio.h>

#include "cli/cli.h"

int cmd_chat(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "inferno chat: not implemented yet\n");
    return 1;
}
