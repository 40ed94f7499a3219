/* cmd_bench.c — `gpujobd bench NAME ...`: the module benchmarks of the registry. */
#include <stdio.h>
#include <string.h>

#include "common/gj_kind.h"
#include "service/cli/cli.h"

int gj_cmd_bench(int argc, char **argv)
{
    if (argc >= 2) {
        for (size_t i = 0; i < gj_bench_count(); i++)
            if (strcmp(gj_bench_at(i)->name, argv[1]) == 0)
                return gj_bench_at(i)->main(argc - 1, argv + 1);
        fprintf(stderr, "gpujobd bench: unknown benchmark '%s'\n", argv[1]);
    }
    fprintf(stderr, "usage: gpujobd bench NAME [ARGS...]\nbenchmarks:\n");
    for (size_t i = 0; i < gj_bench_count(); i++)
        fprintf(stderr, "  %-8s %s\n", gj_bench_at(i)->name, gj_bench_at(i)->summary);
    return 2;
}
