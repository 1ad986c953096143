#include <stdio.h>

#include "cli/cli.h"

int cmd_serve(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "inferno serve: not implemented yet\n");
    return 1;
}
