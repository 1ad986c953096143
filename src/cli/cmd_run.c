#include <stdio.h>

#include "cli/cli.h"

int cmd_run(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "inferno run: not implemented yet\n");
    return 1;
}
