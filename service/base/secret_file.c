/*
 * secret_file.c — secrets read from files, refused when other users could read them
 * (secret_file.h says the rule). The check is made on the opened descriptor, so the
 * file checked is the file read.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "service/base/secret_file.h"

/* The permission rule on an open file: 0, or -1 with why. */
static int check_fd(int fd, const char *path, char *why, size_t n)
{
    struct stat st;
    if (fstat(fd, &st) != 0) {
        snprintf(why, n, "%s: %s", path, strerror(errno));
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(why, n, "%s is not a regular file", path);
        return -1;
    }
    unsigned mode = (unsigned)st.st_mode & 07777;
    if (st.st_uid == geteuid() && (mode & 077) == 0)
        return 0;
    if (st.st_uid == 0 && (mode & 037) == 0)
        return 0;
    if (st.st_uid != geteuid() && st.st_uid != 0) {
        snprintf(why, n, "%s is owned by uid %u, neither this user (uid %u) nor root: a secret's file "
                         "belongs to the user that reads it", path, (unsigned)st.st_uid, (unsigned)geteuid());
        return -1;
    }
    snprintf(why, n, "%s has loose permissions (mode %04o): other users could read or change it; "
                     "chmod 600 it (or 0440/0640 owned by root, as a Kubernetes Secret with defaultMode 0440)",
             path, mode);
    return -1;
}

static int open_checked(const char *path, char *why, size_t n)
{
    if (!path || !*path) {
        snprintf(why, n, "no file named");
        return -1;
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        snprintf(why, n, "cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    if (check_fd(fd, path, why, n) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

int gj_secret_file_check(const char *path, char *why, size_t why_size)
{
    int fd = open_checked(path, why, why_size);
    if (fd < 0)
        return -1;
    close(fd);
    return 0;
}

/* Reads all of fd into out, up to cap bytes; the length, or -1 (too long: cap read). */
static long read_all(int fd, char *out, size_t cap)
{
    size_t len = 0;
    for (;;) {
        if (len == cap)
            return -1;
        ssize_t r = read(fd, out + len, cap - len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -2;
        if (r == 0)
            return (long)len;
        len += (size_t)r;
    }
}

/* What is wrong with the secret's text (its newline taken off), or NULL. */
static const char *content_problem(char *s, long len)
{
    if (len > 0 && s[len - 1] == '\n')
        s[--len] = '\0';
    if (len > 0 && s[len - 1] == '\r')
        s[--len] = '\0';
    if (len == 0)
        return "is empty";
    if (memchr(s, '\0', (size_t)len))
        return "holds a NUL byte";
    if (memchr(s, '\n', (size_t)len) || memchr(s, '\r', (size_t)len))
        return "holds more than one line";
    return NULL;
}

int gj_secret_file_read(const char *path, char *out, size_t out_size, char *why, size_t why_size)
{
    if (!out || out_size < 2) {
        snprintf(why, why_size, "internal: no room for the secret");
        return -1;
    }
    int fd = open_checked(path, why, why_size);
    if (fd < 0)
        return -1;
    long len = read_all(fd, out, out_size - 1);
    int saved = errno;
    close(fd);
    const char *bad = NULL;
    if (len == -1)
        bad = "is too long";
    else if (len == -2)
        bad = strerror(saved);
    else
        out[len] = '\0';
    if (!bad)
        bad = content_problem(out, len);
    if (bad) {
        OPENSSL_cleanse(out, out_size);
        snprintf(why, why_size, "%s %s", path, bad);
        return -1;
    }
    return 0;
}
