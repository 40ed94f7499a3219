/*
 * upload_archive.c — CARMIN's UploadData of type Archive (carmin_fs.h): a zip, read by
 * libarchive, whose entries become files and directories under a new directory. Everything is
 * written in the caller's transaction, so a refusal anywhere leaves nothing behind.
 *
 * Two passes over the zip: the first reads only the headers and refuses, before anything is
 * written, more than CARMIN_MAX_ENTRIES entries, an entry that is not a plain file or directory
 * (links, devices, sockets; libarchive reads a FIFO's mode as a plain file's), an encrypted
 * one, and a name that is absolute, has an empty, "." or ".." part, is not a plain name
 * (carmin_path_normalize) or makes a path over CARMIN_PATH_MAX.
 * The second writes: an entry's directory parts make directories, a name ending in '/' one too;
 * a path named twice (a file where an earlier entry made a file or a directory) is refused, a
 * directory named again is the same directory. The bytes are counted as they inflate, never
 * taken from the zip's headers, and stop at the least of the bounds (a zip bomb; entries that
 * share one compressed file): the caller's limit, --archive-max-bytes, --archive-max-ratio
 * times the zip's bytes (but at least RATIO_FLOOR), and what the disk of DATA_DIR had free
 * above --upload-disk-reserve when the extraction began (the large objects written fill the
 * database's disk, the same one for the embedded PostgreSQL). libarchive reads a '\' in
 * a name as '/', as Windows tools mean it: "a\b" is b under a, and "..\x" has a ".." part.
 *
 * The extraction runs on a thread of archive_pool.c, never an HTTP thread, and stops between
 * pieces once *cancel is set (the server is stopping: the caller rolls back).
 */
#include <archive.h>
#include <archive_entry.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>

#include "common/fsutil.h"
#include "service/db/blobstore.h"
#include "service/carmin/carmin.h"
#include "service/carmin/carmin_fs.h"
#include "service/config.h"
#include "service/db/storage_quota.h"

#define PIECE (1 << 16)     /* bytes inflated at a time */
#define RATIO_FLOOR ((uint64_t)1 << 20)   /* a small zip may always hold this much */
#define SHOWN_MAX 100       /* an entry's name in a message, cut to this */
#define NOT_PLAIN "has a part that is not a plain name (printable ASCII, no '\\', at most 200 bytes)"

struct unzip {
    PGconn *c;
    const char *tenant;
    const char *dir;                    /* the new directory, normalized */
    size_t dir_len;
    const atomic_int *cancel;           /* set: stop now, nothing is kept */
    uint64_t limit, inflated;           /* the files' bytes allowed in all, and so far */
    int limit_code;                     /* the refusal past limit: CARMIN_TOO_LARGE or _NO_SPACE */
    char limit_why[160];                /* which bound limit is, for the message */
    int paths;                          /* paths made under dir */
    char known_dir[CARMIN_PATH_MAX];    /* the last entry's parent, known to be a directory */
    char path[CARMIN_PATH_MAX];         /* the current entry's path, normalized */
    char shown[SHOWN_MAX + 4];          /* its name as sent, printable */
    int is_dir;
    char *piece;
    int code;                           /* the CARMIN error code of a refusal */
    char *why;                          /* its sentence (256 bytes) */
};

static int refuse(struct unzip *z, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int refuse(struct unzip *z, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(z->why, 256, fmt, ap);
    va_end(ap);
    z->code = code;
    return -1;
}

static int db_failed(struct unzip *z)
{
    return refuse(z, CARMIN_UNAVAILABLE, "the database is unavailable; try again");
}

/* The name for a message: printable ASCII (JSON's text must be UTF-8), cut at SHOWN_MAX. */
static void show_name(const char *name, char out[SHOWN_MAX + 4])
{
    size_t i = 0;
    for (; name[i] && i < SHOWN_MAX; i++)
        out[i] = name[i] >= 0x20 && name[i] < 0x7f ? name[i] : '?';
    snprintf(out + i, 4, "%s", name[i] ? "..." : "");
}

/* Why the first n bytes of an entry's name cannot be a path under the directory, for the
 * client; NULL when carmin_path_normalize is left to judge it. */
static const char *name_problem(const char *name, size_t n)
{
    if (n == 0)
        return "has an empty name";
    if (name[0] == '/')
        return "is absolute";
    for (size_t at = 0; at <= n;) {
        const char *end = memchr(name + at, '/', n - at);
        size_t len = end ? (size_t)(end - name) - at : n - at;
        if (len == 0)
            return "has an empty part (\"//\")";
        if (len <= 2 && memcmp(name + at, "..", len) == 0)
            return len == 1 ? "has a \".\" part" : "has a \"..\" part";
        at += len + 1;
    }
    return NULL;
}

/* The entry's path under the directory into z->path: 1, or -1 refused. */
static int entry_path(struct unzip *z, const char *name)
{
    char joined[CARMIN_PATH_MAX];
    size_t n = strlen(name);
    if (z->is_dir && n > 1 && name[n - 1] == '/')
        n--;   /* "a/b/": the directory a/b */
    const char *problem = name_problem(name, n);
    if (!problem && z->dir_len + 1 + n >= CARMIN_PATH_MAX)
        return refuse(z, CARMIN_BAD_REQUEST, "entry \"%s\" makes a path of over %d bytes", z->shown,
                      CARMIN_PATH_MAX - 1);
    if (!problem) {
        snprintf(joined, sizeof joined, "%s/%.*s", z->dir + 1, (int)n, name);
        if (carmin_path_normalize(joined, z->path) != 0 || strncmp(z->path, z->dir, z->dir_len) != 0 ||
            z->path[z->dir_len] != '/')
            problem = NOT_PLAIN;
    }
    return problem ? refuse(z, CARMIN_BAD_REQUEST, "entry \"%s\" %s", z->shown, problem) : 1;
}

/* Reads the next entry's header and judges it: 1 an entry (z->path, z->is_dir), 0 the end,
 * -1 refused. */
static int next_entry(struct unzip *z, struct archive *a)
{
    struct archive_entry *e;
    int rc = archive_read_next_header(a, &e);
    if (rc == ARCHIVE_EOF)
        return 0;
    if (rc < ARCHIVE_WARN)
        return refuse(z, CARMIN_BAD_REQUEST, "the archive is not a readable zip: %s", archive_error_string(a));
    /* NULL when the name is not text of the server's locale: never printable ASCII, then */
    const char *name = archive_entry_pathname(e);
    if (!name)
        return refuse(z, CARMIN_BAD_REQUEST, "an entry's name " NOT_PLAIN);
    show_name(name, z->shown);
    unsigned int type = archive_entry_filetype(e);
    if (archive_entry_is_encrypted(e))
        return refuse(z, CARMIN_BAD_REQUEST, "entry \"%s\" is encrypted: encrypted entries are not taken", z->shown);
    if (archive_entry_hardlink(e) || archive_entry_symlink(e) || type == AE_IFLNK)
        return refuse(z, CARMIN_BAD_REQUEST, "entry \"%s\" is a link: links are not taken", z->shown);
    if (type != AE_IFREG && type != AE_IFDIR)
        return refuse(z, CARMIN_BAD_REQUEST, "entry \"%s\" is not a file or a directory (a device, FIFO or socket)",
                      z->shown);
    z->is_dir = type == AE_IFDIR;
    return entry_path(z, name);
}

static struct archive *open_zip(struct unzip *z, const void *zip, size_t n)
{
    struct archive *a = archive_read_new();
    if (!a) {
        refuse(z, CARMIN_INTERNAL, "out of memory");
        return NULL;
    }
    if (archive_read_support_format_zip(a) != ARCHIVE_OK || archive_read_open_memory(a, zip, n) != ARCHIVE_OK) {
        refuse(z, CARMIN_BAD_REQUEST, "base64Content is not a zip archive: %s", archive_error_string(a));
        archive_read_free(a);
        return NULL;
    }
    return a;
}

/* The first pass: headers only, nothing written. 0, or -1 refused. */
static int check_entries(struct unzip *z, const void *zip, size_t n)
{
    struct archive *a = open_zip(z, zip, n);
    if (!a)
        return -1;
    int rc, count = 0;
    while ((rc = next_entry(z, a)) == 1 && ++count <= CARMIN_MAX_ENTRIES)
        ;
    if (rc == 1)
        rc = refuse(z, CARMIN_BAD_REQUEST, "the archive has over %d entries", CARMIN_MAX_ENTRIES);
    archive_read_free(a);
    return rc;
}

/* Makes path (under dir) a directory (blob NULL) or a file. 0, or -1 refused. */
static int put_path(struct unzip *z, const char *path, const char *blob)
{
    if (++z->paths > CARMIN_MAX_ENTRIES)
        return refuse(z, CARMIN_BAD_REQUEST, "the archive makes over %d paths (its entries and their directories)",
                      CARMIN_MAX_ENTRIES);
    return carmin_fs_put(z->c, z->tenant, path, blob, NULL) == 0 ? 0 : db_failed(z);
}

/* path, a parent of the current entry, is a directory: made when missing. 0, or -1 refused. */
static int ensure_dir(struct unzip *z, const char *path)
{
    struct carmin_entry e;
    int found = carmin_fs_stat(z->c, z->tenant, path, &e);
    if (found < 0)
        return db_failed(z);
    if (found && !e.is_dir)
        return refuse(z, CARMIN_BAD_REQUEST, "entry \"%s\" is under %s, a file of the archive", z->shown,
                      path + z->dir_len + 1);
    return found ? 0 : put_path(z, path, NULL);
}

/* The current entry's parents below dir are directories. 0, or -1 refused. */
static int ensure_parents(struct unzip *z)
{
    char parent[CARMIN_PATH_MAX];
    carmin_path_parent(z->path, parent);
    if (strcmp(parent, z->known_dir) == 0)
        return 0;   /* entries come grouped by directory: one look for the lot */
    size_t len = strlen(parent);
    for (size_t i = z->dir_len + 1; i <= len; i++) {
        if (parent[i] != '/' && parent[i] != '\0')
            continue;
        parent[i] = '\0';
        int rc = ensure_dir(z, parent);
        parent[i] = i < len ? '/' : '\0';
        if (rc != 0)
            return -1;
    }
    snprintf(z->known_dir, sizeof z->known_dir, "%s", parent);
    return 0;
}

/* The current entry's bytes into w, counted against the limit as they inflate. 0, or -1. */
static int copy_data(struct unzip *z, struct archive *a, struct gj_blob_writer *w)
{
    for (;;) {
        la_ssize_t got = archive_read_data(a, z->piece, PIECE);
        if (got == 0)
            return 0;
        if (got < 0)
            return refuse(z, CARMIN_BAD_REQUEST, "entry \"%s\" cannot be read: %s", z->shown, archive_error_string(a));
        if (atomic_load(z->cancel))
            return refuse(z, CARMIN_UNAVAILABLE, "the server is stopping");
        z->inflated += (uint64_t)got;
        if (z->inflated > z->limit)
            return refuse(z, z->limit_code, "the archive's files come to over %llu bytes, %s",
                          (unsigned long long)z->limit, z->limit_why);
        if (gj_blob_writer_write(w, z->piece, (size_t)got) != 0)
            return db_failed(z);
    }
}

static int put_file(struct unzip *z, struct archive *a)
{
    char blob[GJ_UUID_LEN + 1];
    struct gj_blob_writer *w = gj_blob_writer_open(z->c, z->tenant, "application/octet-stream", 0);
    if (!w)
        return db_failed(z);
    if (copy_data(z, a, w) != 0) {
        gj_blob_writer_abort(w);
        return -1;
    }
    int committed = gj_blob_writer_commit(w, NULL, blob);
    if (committed == GJ_BLOB_OVER_QUOTA) {
        char quota[256];
        gj_storage_refusal_text(gj_storage_last_refusal(), quota, sizeof quota);
        return refuse(z, CARMIN_OVER_QUOTA, "%s", quota);
    }
    if (committed != 0)
        return db_failed(z);
    return put_path(z, z->path, blob);
}

/* Writes the current entry. 0, or -1 refused. */
static int place(struct unzip *z, struct archive *a)
{
    struct carmin_entry e;
    if (ensure_parents(z) != 0)
        return -1;
    int found = carmin_fs_stat(z->c, z->tenant, z->path, &e);
    if (found < 0)
        return db_failed(z);
    if (found && !(z->is_dir && e.is_dir))
        return refuse(z, CARMIN_BAD_REQUEST, "entry \"%s\" names a path an earlier entry made", z->shown);
    if (z->is_dir)
        return found ? 0 : put_path(z, z->path, NULL);
    return put_file(z, a);
}

/* The second pass. 0, or -1 refused. */
static int write_entries(struct unzip *z, const void *zip, size_t n)
{
    struct archive *a = open_zip(z, zip, n);
    int rc = a ? 1 : -1;
    while (rc == 1 && (rc = next_entry(z, a)) == 1)
        rc = place(z, a) == 0 ? 1 : -1;
    if (a)
        archive_read_free(a);
    return rc;
}

/* The server's settings (carmin_archive_configure), read by every extraction. */
static struct {
    uint64_t ratio, max_bytes, disk_reserve;
    char data_dir[GJ_PATH_MAX];
} bounds = { 100, (uint64_t)1 << 30, 0, "" };

void carmin_archive_configure(const struct gj_config *cfg)
{
    bounds.ratio = (uint64_t)cfg->archive_max_ratio;
    bounds.max_bytes = cfg->archive_max_bytes;
    bounds.disk_reserve = cfg->upload_disk_reserve;
    snprintf(bounds.data_dir, sizeof bounds.data_dir, "%s", cfg->data_dir);
}

/* z->limit lowered to bytes when that is less, with its reason. */
static void bound(struct unzip *z, uint64_t bytes, int code, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void bound(struct unzip *z, uint64_t bytes, int code, const char *fmt, ...)
{
    if (bytes >= z->limit)
        return;
    z->limit = bytes;
    z->limit_code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(z->limit_why, sizeof z->limit_why, fmt, ap);
    va_end(ap);
}

/* The least of the bounds for a zip of n bytes (the file's header). */
static void set_limit(struct unzip *z, uint64_t caller_limit, size_t n)
{
    z->limit = UINT64_MAX;
    bound(z, caller_limit, CARMIN_TOO_LARGE, "the server's upload limit");
    bound(z, bounds.max_bytes, CARMIN_TOO_LARGE, "the server's --archive-max-bytes");
    uint64_t by_ratio = (uint64_t)n > UINT64_MAX / bounds.ratio ? UINT64_MAX : (uint64_t)n * bounds.ratio;
    bound(z, by_ratio > RATIO_FLOOR ? by_ratio : RATIO_FLOOR, CARMIN_TOO_LARGE,
          "%llu times the zip's %zu bytes (--archive-max-ratio)", (unsigned long long)bounds.ratio, n);
    struct statvfs st;
    if (bounds.data_dir[0] && statvfs(bounds.data_dir, &st) == 0) {
        uint64_t avail = (uint64_t)st.f_bavail * (uint64_t)st.f_frsize;
        uint64_t room = avail > bounds.disk_reserve ? avail - bounds.disk_reserve : 0;
        bound(z, room, CARMIN_NO_SPACE, "what the disk has free (%llu MiB) above --upload-disk-reserve (%llu MiB)",
              (unsigned long long)(avail >> 20), (unsigned long long)(bounds.disk_reserve >> 20));
    }
}

static int extract(struct unzip *z, const void *zip, size_t n)
{
    if (check_entries(z, zip, n) != 0)
        return z->code;
    if (!(z->piece = malloc(PIECE))) {
        refuse(z, CARMIN_INTERNAL, "out of memory");
        return z->code;
    }
    int rc = write_entries(z, zip, n);
    free(z->piece);
    return rc == 0 ? 0 : z->code;
}

int carmin_archive_extract(PGconn *c, const char *tenant, const char *dir, const void *zip, size_t n,
                           uint64_t limit, const atomic_int *cancel, char why[256])
{
    struct unzip z = { .c = c, .tenant = tenant, .dir = dir, .dir_len = strlen(dir), .cancel = cancel, .why = why };
    snprintf(z.known_dir, sizeof z.known_dir, "%s", dir);
    why[0] = '\0';
    set_limit(&z, limit, n);
    return extract(&z, zip, n);
}
