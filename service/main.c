/*
 * main.c — gpujobd: one binary, subcommands (ARCHITECTURE.md: one binary, its defaults).
 */
#include <stdio.h>
#include <string.h>

#include "gj_config.h"
#include "common/gj_kind.h"
#include "common/gj_provenance.h"
#include "service/cli/cli.h"
#include "service/module.h"

static int cmd_version(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    printf("gpujobd %s (%s), build %s\n", GJ_VERSION, GJ_HAVE_CUDA ? "CUDA" : "CPU only", gj_build_describe());
    printf("kinds:");
    for (size_t i = 0; i < gj_kind_count(); i++)
        printf(" %s", gj_kind_at(i)->name);
    printf("\n");
    return 0;
}

/* The core's subcommands; the modules bring theirs (module.h), listed in --help after
 * them, before version. */
static const struct gj_subcommand subcommands[] = {
    { "serve", gj_cmd_serve, "serve [--listen ADDR:PORT] [--data-dir DIR] [--database-url URL] ..." },
    { "migrate", gj_cmd_migrate, "migrate [--database-url URL]" },
    { "blobs", gj_cmd_blobs, "blobs migrate --to s3 [--database-url URL] --s3-endpoint URL --s3-bucket NAME ..." },
    { "run", gj_cmd_run, "run KIND --params FILE [--input NAME=FILE]... --out DIR" },
    { "bench", gj_cmd_bench, "bench NAME [ARGS...]" },
    { "submit", gj_cmd_client, "submit KIND --server URL [--params FILE] [--input NAME=FILE|NAME=job:ID/OUT]... "
                               "[--wait] [--out DIR]" },
    { "status", gj_cmd_client, "status ID [--json]" },
    { "wait", gj_cmd_client, "wait ID [--out DIR]" },
    { "fetch", gj_cmd_client, "fetch ID --out DIR" },
    { "cancel", gj_cmd_client, "cancel ID" },
    { "rerun", gj_cmd_client, "rerun ID [--wait] [--out DIR]" },
    { "version", cmd_version, "version" },
};
#define N_CORE (sizeof subcommands / sizeof subcommands[0])

/* The subcommand called name, the core's first, or NULL. */
static const struct gj_subcommand *find_subcommand(const char *name)
{
    for (size_t i = 0; i < N_CORE; i++)
        if (strcmp(name, subcommands[i].name) == 0)
            return &subcommands[i];
    for (size_t m = 0; gj_service_modules[m]; m++)
        for (const struct gj_subcommand *c = gj_service_modules[m]->subcommands; c && c->name; c++)
            if (strcmp(name, c->name) == 0)
                return c;
    return NULL;
}

static void usage(FILE *to)
{
    fprintf(to, "usage: gpujobd COMMAND [OPTIONS]\n\ncommands:\n");
    for (size_t i = 0; i + 1 < N_CORE; i++)
        fprintf(to, "  gpujobd %s\n", subcommands[i].usage);
    for (size_t m = 0; gj_service_modules[m]; m++)
        for (const struct gj_subcommand *c = gj_service_modules[m]->subcommands; c && c->name; c++)
            fprintf(to, "  gpujobd %s\n", c->usage);
    fprintf(to, "  gpujobd %s\n", subcommands[N_CORE - 1].usage);   /* version, last */
    fprintf(to, "\nEvery option of serve has an environment twin: --data-dir is GPUJOBD_DATA_DIR.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (strcmp(argv[1], "--version") == 0)
        return cmd_version(argc - 1, argv + 1);
    const struct gj_subcommand *cmd = find_subcommand(argv[1]);
    if (cmd)
        return cmd->main(argc - 1, argv + 1);
    fprintf(stderr, "gpujobd: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
