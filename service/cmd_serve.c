#include <stdio.h>
#include "service/cli.h"
int gj_cmd_serve(int argc, char **argv) { (void)argc; (void)argv; fprintf(stderr, "serve: under construction\n"); return 1; }
