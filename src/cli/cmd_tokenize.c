#include <stdio.h>

#include "cli/cli.h"

int cmd_tokenize(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "inferno tokenize: not implemented yet\n");
    return 1;
}
