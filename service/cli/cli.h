/* cli.h — the subcommands of the one binary (ARCHITECTURE.md: one binary, its defaults). Each returns an exit status. */
#ifndef GJ_CLI_H
#define GJ_CLI_H

int gj_cmd_serve(int argc, char **argv);
int gj_cmd_migrate(int argc, char **argv);
int gj_cmd_blobs(int argc, char **argv);
int gj_cmd_run(int argc, char **argv);
int gj_cmd_bench(int argc, char **argv);
/* submit, status, wait, fetch, cancel, rerun: the job client (cmd_client.c); argv[0] names which. */
int gj_cmd_client(int argc, char **argv);

#endif
