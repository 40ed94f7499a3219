/*
 * main.c — gpujobd: one binary, subcommands (ARCHITECTURE.md: one binary, its defaults).
 */
#include <stdio.h>
#include <string.h>

#include "gj_config.h"
#include "common/gj_kind.h"
#include "service/cli/cli.h"
#include "infer/dicom.h"

static int cmd_version(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    printf("gpujobd %s (%s)\n", GJ_VERSION, GJ_HAVE_CUDA ? "CUDA" : "CPU only");
    printf("kinds:");
    for (size_t i = 0; i < gj_kind_count(); i++)
        printf(" %s", gj_kind_at(i)->name);
    printf("\n");
    return 0;
}

struct subcommand {
    const char *name;
    int (*main)(int argc, char **argv);
    const char *usage;
};

static const struct subcommand subcommands[] = {
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
    { "dicom", gj_dicom_cli_main, "dicom info FILE [--pixels OUT.f32]" },
    { "version", cmd_version, "version" },
};

static void usage(FILE *to)
{
    fprintf(to, "usage: gpujobd COMMAND [OPTIONS]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof subcommands / sizeof subcommands[0]; i++)
        fprintf(to, "  gpujobd %s\n", subcommands[i].usage);
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
    for (size_t i = 0; i < sizeof subcommands / sizeof subcommands[0]; i++)
        if (strcmp(argv[1], subcommands[i].name) == 0)
            return subcommands[i].main(argc - 1, argv + 1);
    fprintf(stderr, "gpujobd: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
