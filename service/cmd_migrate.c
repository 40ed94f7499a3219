#include <stdio.h>
#include "service/cli.h"
int gj_cmd_migrate(int argc, char **argv) { (void)argc; (void)argv; fprintf(stderr, "migrate: under construction\n"); return 1; }
