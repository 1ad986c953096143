#include <stdio.h>

#include "cli/cli.h"

int cmd_bench(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "inferno bench: not implemented yet\n");
    return 1;
}
