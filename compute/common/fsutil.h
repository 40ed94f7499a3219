/*
 * fsutil.h — small file helpers every module needs. All return 0 or -1 with errno set.
 */
#ifndef GJ_FSUTIL_H
#define GJ_FSUTIL_H

#include <stddef.h>
#include <stdint.h>

/* The one size of a path buffer (with its NUL), service and compute alike: Linux's
 * PATH_MAX, the longest path a system call accepts. Building a longer path is an
 * error the caller reports (gj_path_join returns -1), never a silent truncation. */
#define GJ_PATH_MAX 4096

/* Reads a whole file of at most max_bytes into a NUL-terminated buffer (caller frees). */
int gj_read_file(const char *path, size_t max_bytes, char **data, size_t *len);
/* Writes data to path through a temporary file and rename(), so readers never see half a file. */
int gj_write_file(const char *path, const void *data, size_t len);
/* Joins dir and name into out (size n); -1 when it does not fit. */
int gj_path_join(char *out, size_t n, const char *dir, const char *name);
int gj_mkdir_p(const char *path, int mode);
/* Removes a directory tree; missing is not an error. */
int gj_rm_rf(const char *path);
/* Creates a fresh private directory named prefix-XXXXXX under $TMPDIR (when it is an absolute
 * path) or /tmp, and writes its path into out (size n). */
int gj_make_temp_dir(char *out, size_t n, const char *prefix);
/* Size of a regular file. */
int gj_file_size(const char *path, uint64_t *size);
/* 1 when name is a plain file name: no '/', not '.' or '..', printable ASCII, <= 200 bytes. */
int gj_safe_name(const char *name);

#endif
