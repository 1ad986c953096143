#include <stdio.h>

#include "cli/cli.h"

int cmd_template(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "inferno template: not implemented yet\n");
    return 1;
}
