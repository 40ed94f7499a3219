/*
 * secret_file.h — secrets read from files (a mounted Kubernetes Secret, a file only the
 * service user reads): the admin key, the database password, the pseudonymisation
 * secret, and the check of a TLS private key's file.
 *
 * A secret's file must be a regular file (a symbolic link to one is followed, as a
 * Secret volume's are) that no other user can read or write, as libpq asks of
 * ~/.pgpass and sslkey: owned by this user with no group or other permission (0600,
 * 0400), or owned by root and at most readable by its group (0640, 0440: a Secret's
 * defaultMode with fsGroup). Anything looser is refused, saying the file's mode and
 * how to fix it. No message ever holds what a file contains.
 */
#ifndef GJ_SECRET_FILE_H
#define GJ_SECRET_FILE_H

#include <stddef.h>

/* Checks the file at path as above. 0, or -1 with why (one line, no contents). */
int gj_secret_file_check(const char *path, char *why, size_t why_size);

/* Reads the secret in path into out (out_size bytes, NUL-terminated): the whole file
 * less one trailing newline ("\n" or "\r\n"). Refuses, as -1 with why: a file that
 * fails gj_secret_file_check, an empty secret, one of out_size bytes or more, one
 * holding a NUL or another line. out is wiped on failure. */
int gj_secret_file_read(const char *path, char *out, size_t out_size, char *why, size_t why_size);

#endif
