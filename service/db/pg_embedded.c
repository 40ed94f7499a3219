/*
 * pg_embedded.c — the private PostgreSQL of a default start (ARCHITECTURE.md: one binary, its defaults).
 *
 * Layout under DATA_DIR:
 *   pg/            the cluster (initdb once; initialised into pg.init and renamed,
 *                  so an interrupted initdb is simply redone)
 *   run/           the Unix socket; also gpujobd-pg.lock, held (flock) by the
 *                  gpujobd process that owns the running postmaster
 *   postgres.log   what initdb and postgres print
 *
 * The postmaster is a child of this process in its own process group (a Ctrl-C
 * on the terminal does not reach it), with PR_SET_PDEATHSIG so it stops when we
 * die. As root, initdb and postgres run as an unprivileged user (--pg-user,
 * default `postgres`): the child drops groups, gid and uid before exec. Only
 * async-signal-safe calls run between fork and exec.
 *
 * A supervisor thread watches the postmaster (waitpid, every 100 ms). When it dies
 * (killed, crashed, out of memory) it is started again on the same cluster, with
 * backoff until it runs: PostgreSQL's crash recovery makes the data consistent,
 * and the connection pool (db.c) reconnects on its own. The postmaster started by
 * a restart is the supervisor thread's child, so its PDEATHSIG fires when that
 * thread ends, which is at stop.
 *
 * The settings (struct gj_pg_options) come from service/config.c: --pg-bindir
 * names the directory of initdb/postgres; GPUJOBD_PG_NOSYNC=1 runs initdb
 * --no-sync and postgres with fsync=off (tests only).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <pthread.h>
#include <pwd.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <libpq-fe.h>

#include "common/fsutil.h"
#include "service/base/log.h"
#include "service/db/pg_embedded.h"

#define PG_SUPERUSER "gpujobd"
#define PG_DATABASE "gpujobd"
#define START_TIMEOUT_S 120
#define STOP_TIMEOUT_S 60

struct run_as {
    int drop;            /* 1: switch to uid/gid in the child */
    uid_t uid;
    gid_t gid;
    gid_t groups[64];
    int ngroups;
    char name[64];
};

/* One start: what its phases read and fill. */
struct start {
    const struct gj_pg_options *opt;
    struct run_as ra;
    char bindir[GJ_PATH_MAX];
    char dir[GJ_PATH_MAX];          /* DATA_DIR, resolved */
    char pgdir[GJ_PATH_MAX];        /* DATA_DIR/pg, the cluster */
    char rundir[GJ_PATH_MAX];       /* DATA_DIR/run, the socket and the lock */
    char log_path[GJ_PATH_MAX];     /* DATA_DIR/postgres.log */
    char lock_path[GJ_PATH_MAX];
    char host[3 * GJ_PATH_MAX];     /* rundir percent-encoded: the host of the URLs */
    int log_fd, devnull;            /* the children's output and input; -1 closed */
};

/* The running cluster. After start, pid changes only on the supervisor thread (a
 * restart), which stop joins before it reads pid. */
struct gj_pg_embedded {
    pid_t pid;
    int lock_fd;
    char data_dir[GJ_PATH_MAX];
    struct gj_pg_options opt;       /* a copy: restarts outlive the caller's */
    struct start st;                /* paths, user, log: what a restart needs (log_fd kept open) */
    pthread_t supervisor;
    int supervising;                /* the supervisor thread runs */
    pthread_mutex_t mu;
    pthread_cond_t wake;            /* CLOCK_MONOTONIC: stop asked */
    atomic_int stopping;
};

static int executable(const char *dir, const char *name)
{
    char p[GJ_PATH_MAX];
    if (gj_path_join(p, sizeof p, dir, name) != 0)
        return 0;
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode) && access(p, X_OK) == 0;
}

int gj_pg_bindir_usable(const char *dir)
{
    return executable(dir, "initdb") && executable(dir, "postgres");
}

/* The first directory of PATH holding both tools, with symlinks resolved
 * (/usr/local/bin/initdb -> .../15/bin/initdb) so that initdb finds its share
 * directory next to it. 0 found, -1 not. PATH is a lookup, not a setting. */
static int bindir_on_path(char *out, size_t n)
{
    const char *path = getenv("PATH");
    char *copy = path ? strdup(path) : NULL;
    if (!copy)
        return -1;
    int rc = -1;
    char *save = NULL;
    for (char *d = strtok_r(copy, ":", &save); d && rc != 0; d = strtok_r(NULL, ":", &save)) {
        if (!*d || !gj_pg_bindir_usable(d))
            continue;
        char p[GJ_PATH_MAX], real[GJ_PATH_MAX];
        char *slash = NULL;
        if (gj_path_join(p, sizeof p, d, "initdb") == 0 && realpath(p, real))
            slash = strrchr(real, '/');
        if (slash) {
            *slash = '\0';
            if (gj_pg_bindir_usable(real))
                d = real;
        }
        snprintf(out, n, "%s", d);
        rc = 0;
    }
    free(copy);
    return rc;
}

/* The highest /usr/lib/postgresql/N/bin holding both tools (Debian's layout). */
static int bindir_debian(char *out, size_t n)
{
    DIR *dir = opendir("/usr/lib/postgresql");
    long best = -1;
    if (!dir)
        return -1;
    struct dirent *e;
    while ((e = readdir(dir)) != NULL) {
        char *end;
        long v = strtol(e->d_name, &end, 10);
        if (end == e->d_name || *end || v <= best)
            continue;
        char bin[GJ_PATH_MAX];
        snprintf(bin, sizeof bin, "/usr/lib/postgresql/%s/bin", e->d_name);
        if (gj_pg_bindir_usable(bin)) {
            best = v;
            snprintf(out, n, "%s", bin);
        }
    }
    closedir(dir);
    return best >= 0 ? 0 : -1;
}

/* The directory holding initdb and postgres: --pg-bindir, PATH, then the highest
 * /usr/lib/postgresql/N/bin. */
static int find_bindir(const char *given, char *out, size_t n)
{
    if (given && *given) {
        if (!gj_pg_bindir_usable(given)) {
            gj_log_error("pg", "--pg-bindir %s has no initdb and postgres", given);
            return -1;
        }
        snprintf(out, n, "%s", given);
        return 0;
    }
    if (bindir_on_path(out, n) == 0 || bindir_debian(out, n) == 0)
        return 0;
    gj_log_error("pg", "no PostgreSQL server found (initdb and postgres on PATH or in "
                       "/usr/lib/postgresql/*/bin): install the postgresql package, or give --database-url");
    return -1;
}

static int resolve_user(const char *user, struct run_as *ra)
{
    memset(ra, 0, sizeof *ra);
    if (geteuid() != 0) {
        struct passwd *pw = getpwuid(geteuid());
        snprintf(ra->name, sizeof ra->name, "%s", pw ? pw->pw_name : "self");
        ra->uid = geteuid();
        ra->gid = getegid();
        return 0;
    }
    const char *name = user && *user ? user : "postgres";
    struct passwd pwbuf, *pw = NULL;
    char buf[4096];   /* getpwnam_r's strings */
    int rc = getpwnam_r(name, &pwbuf, buf, sizeof buf, &pw);
    if (rc != 0 || !pw) {
        gj_log_error("pg", "running as root: the embedded PostgreSQL needs an unprivileged user, "
                           "and user '%s' does not exist (create it, or give --pg-user)", name);
        return -1;
    }
    if (pw->pw_uid == 0) {
        gj_log_error("pg", "--pg-user %s is root; PostgreSQL refuses to run as root", name);
        return -1;
    }
    ra->drop = 1;
    ra->uid = pw->pw_uid;
    ra->gid = pw->pw_gid;
    snprintf(ra->name, sizeof ra->name, "%s", name);
    ra->ngroups = (int)(sizeof ra->groups / sizeof ra->groups[0]);
    if (getgrouplist(name, pw->pw_gid, ra->groups, &ra->ngroups) < 0) {
        /* More than 64 groups: keep just the primary one. */
        ra->groups[0] = pw->pw_gid;
        ra->ngroups = 1;
    }
    return 0;
}

/* Makes dir exist with mode, owned by the cluster user. */
static int make_owned_dir(const char *dir, mode_t mode, const struct run_as *ra)
{
    if (mkdir(dir, mode) != 0 && errno != EEXIST) {
        gj_log_error("pg", "cannot create %s: %s", dir, strerror(errno));
        return -1;
    }
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        gj_log_error("pg", "%s is not a directory", dir);
        return -1;
    }
    if (ra->drop && (st.st_uid != ra->uid) && chown(dir, ra->uid, ra->gid) != 0) {
        gj_log_error("pg", "cannot chown %s to %s: %s", dir, ra->name, strerror(errno));
        return -1;
    }
    if ((st.st_mode & 07777) != mode && chmod(dir, mode) != 0) {
        gj_log_error("pg", "cannot chmod %s: %s", dir, strerror(errno));
        return -1;
    }
    return 0;
}

static uid_t chown_uid;
static gid_t chown_gid;
static int chown_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)flag;
    (void)ftw;
    if (st->st_uid == chown_uid && st->st_gid == chown_gid)
        return 0;
    return lchown(path, chown_uid, chown_gid) == 0 ? 0 : -1;
}

/* A cluster created by another user (an earlier non-root run, a restored backup)
 * is handed to the cluster user as a whole. */
static int chown_tree(const char *dir, const struct run_as *ra)
{
    struct stat st;
    if (!ra->drop || stat(dir, &st) != 0 || st.st_uid == ra->uid)
        return 0;
    gj_log_info("pg", "changing the owner of %s to %s", dir, ra->name);
    chown_uid = ra->uid;
    chown_gid = ra->gid;
    if (nftw(dir, chown_entry, 32, FTW_PHYS) != 0) {
        gj_log_error("pg", "cannot chown %s to %s: %s", dir, ra->name, strerror(errno));
        return -1;
    }
    return 0;
}

/* Reads the last bytes of the log into a single line for an error message. */
static void log_tail(const char *log_path, char *out, size_t n)
{
    out[0] = '\0';
    int fd = open(log_path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    off_t end = lseek(fd, 0, SEEK_END);
    off_t start = end > (off_t)(n - 1) ? end - (off_t)(n - 1) : 0;
    ssize_t r = pread(fd, out, n - 1, start);
    close(fd);
    if (r <= 0) {
        out[0] = '\0';
        return;
    }
    out[r] = '\0';
    size_t len = (size_t)r;
    while (len > 0 && (out[len - 1] == '\n' || out[len - 1] == ' '))
        out[--len] = '\0';
    for (size_t i = 0; i < len; i++)
        if (out[i] == '\n')
            out[i] = '|';
}

/* Forks and execs argv[0] as the cluster user with stdout/stderr into log_fd.
 * Only async-signal-safe calls in the child. Returns the pid or -1. */
static pid_t spawn(char *const argv[], const struct run_as *ra, int log_fd, int devnull,
                   const char *cwd, int pdeathsig)
{
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);   /* no handler of ours runs in the child */
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        gj_log_error("pg", "fork: %s", strerror(e));
        return -1;
    }
    if (pid > 0) {
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        return pid;
    }
    /* Child. */
    for (int s = 1; s < NSIG; s++)
        if (s != SIGKILL && s != SIGSTOP)
            signal(s, SIG_DFL);
    setpgid(0, 0);
    if (ra->drop) {
        if (setgroups((size_t)ra->ngroups, ra->groups) != 0 || setgid(ra->gid) != 0 ||
            setuid(ra->uid) != 0 || getuid() == 0 || geteuid() == 0)
            _exit(126);
    }
    if (pdeathsig) {
        /* After the uid change (which clears it); and if we are already orphaned, stop. */
        if (prctl(PR_SET_PDEATHSIG, pdeathsig) != 0 || getppid() != parent)
            _exit(125);
    }
    if (dup2(devnull, 0) < 0 || dup2(log_fd, 1) < 0 || dup2(log_fd, 2) < 0)
        _exit(124);
    if (syscall(SYS_close_range, 3U, ~0U, 0U) != 0) {
        for (int fd = 3; fd < 4096; fd++)
            close(fd);
    }
    if (cwd && chdir(cwd) != 0)
        _exit(123);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    execv(argv[0], argv);
    _exit(127);
}

static const char *exit_text(int status, char *buf, size_t n)
{
    if (WIFEXITED(status))
        snprintf(buf, n, "exit status %d%s", WEXITSTATUS(status),
                 WEXITSTATUS(status) == 126 ? " (could not switch user)" : "");
    else if (WIFSIGNALED(status))
        snprintf(buf, n, "killed by signal %d", WTERMSIG(status));
    else
        snprintf(buf, n, "status %d", status);
    return buf;
}

static int write_pg_hba(const char *pgdir, const struct run_as *ra)
{
    char path[GJ_PATH_MAX];
    if (gj_path_join(path, sizeof path, pgdir, "pg_hba.conf") != 0)
        return -1;
    static const char hba[] =
        "# gpujobd embedded PostgreSQL: the Unix socket in DATA_DIR/run only (mode 0700).\n"
        "# TYPE  DATABASE  USER  METHOD\n"
        "local   all       all   trust\n";
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        gj_log_error("pg", "cannot write %s: %s", path, strerror(errno));
        return -1;
    }
    ssize_t w = write(fd, hba, sizeof hba - 1);
    int rc = (w == (ssize_t)(sizeof hba - 1)) ? 0 : -1;
    if (ra->drop && fchown(fd, ra->uid, ra->gid) != 0)
        rc = -1;
    if (close(fd) != 0)
        rc = -1;
    if (rc != 0)
        gj_log_error("pg", "cannot write %s", path);
    return rc;
}

/* initdb into DATA_DIR/pg.init, then renamed to DATA_DIR/pg: an interrupted
 * initdb leaves no half cluster behind. */
static int run_initdb(const struct start *st)
{
    const char *pgdir = st->pgdir;
    const struct run_as *ra = &st->ra;
    char tmpdir[GJ_PATH_MAX];
    if (snprintf(tmpdir, sizeof tmpdir, "%s.init", pgdir) >= (int)sizeof tmpdir)
        return -1;
    if (gj_rm_rf(tmpdir) != 0) {
        gj_log_error("pg", "cannot remove the leftover %s: %s", tmpdir, strerror(errno));
        return -1;
    }
    if (make_owned_dir(tmpdir, 0700, ra) != 0)
        return -1;
    char initdb[GJ_PATH_MAX], dflag[GJ_PATH_MAX + 16];
    if (gj_path_join(initdb, sizeof initdb, st->bindir, "initdb") != 0)
        return -1;
    snprintf(dflag, sizeof dflag, "--pgdata=%s", tmpdir);
    char *argv[12];
    int a = 0;
    argv[a++] = initdb;
    argv[a++] = dflag;
    argv[a++] = (char *)"--username=" PG_SUPERUSER;
    argv[a++] = (char *)"--auth-local=trust";
    argv[a++] = (char *)"--auth-host=reject";
    argv[a++] = (char *)"--encoding=UTF8";
    argv[a++] = (char *)"--locale=C";
    if (st->opt->nosync)
        argv[a++] = (char *)"--no-sync";
    argv[a] = NULL;
    gj_log_info("pg", "initialising the embedded PostgreSQL cluster in %s (as %s)", pgdir, ra->name);
    pid_t pid = spawn(argv, ra, st->log_fd, st->devnull, st->dir, 0);
    if (pid < 0)
        return -1;
    int status;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            gj_log_error("pg", "waitpid(initdb): %s", strerror(errno));
            return -1;
        }
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        char why[64], tail[600];
        log_tail(st->log_path, tail, sizeof tail);
        gj_log_error("pg", "initdb failed (%s): %s", exit_text(status, why, sizeof why), tail);
        gj_rm_rf(tmpdir);
        return -1;
    }
    if (write_pg_hba(tmpdir, ra) != 0)
        return -1;
    if (rename(tmpdir, pgdir) != 0) {
        gj_log_error("pg", "cannot rename %s to %s: %s", tmpdir, pgdir, strerror(errno));
        return -1;
    }
    return 0;
}

/* 1 when pid runs (a zombie, exited but not yet reaped by its new parent, does not). */
static int alive(long pid)
{
    if (kill((pid_t)pid, 0) != 0)
        return errno == EPERM;
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return 1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *rp = strrchr(buf, ')');   /* "pid (comm) S ..." */
    return !(rp && rp[1] == ' ' && rp[2] == 'Z');
}

/* What postmaster.pid names, when its process is alive (we hold the lock, so no
 * other gpujobd owns this cluster):
 *  - a postgres whose working directory is this cluster: a postmaster left
 *    running by an earlier gpujobd that died without stopping it; stop it, so
 *    that the one we use is our child;
 *  - any other process: the pid was reused after a crash or a container restart,
 *    and PostgreSQL would refuse to start; the file is stale, remove it.
 * A dead pid needs nothing: PostgreSQL removes its stale file itself. */
static int clear_previous_postmaster(const char *pgdir)
{
    char path[GJ_PATH_MAX];
    if (gj_path_join(path, sizeof path, pgdir, "postmaster.pid") != 0)
        return -1;
    FILE *f = fopen(path, "re");
    if (!f)
        return 0;
    char line1[64];
    int ok = fgets(line1, sizeof line1, f) != NULL;
    fclose(f);
    if (!ok)
        return 0;
    long pid = strtol(line1, NULL, 10);
    if (pid <= 1 || pid == getpid() || !alive(pid))
        return 0;

    char link[64], exe[GJ_PATH_MAX], cwd[GJ_PATH_MAX], real_pg[GJ_PATH_MAX];
    int is_ours = 0;
    snprintf(link, sizeof link, "/proc/%ld/exe", pid);
    ssize_t n = readlink(link, exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = '\0';
        const char *base = strrchr(exe, '/');
        base = base ? base + 1 : exe;
        snprintf(link, sizeof link, "/proc/%ld/cwd", pid);
        ssize_t m = readlink(link, cwd, sizeof cwd - 1);
        if (m > 0 && strcmp(base, "postgres") == 0 && realpath(pgdir, real_pg)) {
            cwd[m] = '\0';
            is_ours = strcmp(cwd, real_pg) == 0;
        }
    } else if (errno == EACCES) {
        return 0;   /* another user's process: PostgreSQL treats the file as stale itself */
    }
    if (!is_ours) {
        gj_log_warn("pg", "removing stale %s (pid %ld is now another process)", path, pid);
        if (unlink(path) != 0 && errno != ENOENT) {
            gj_log_error("pg", "cannot remove %s: %s", path, strerror(errno));
            return -1;
        }
        return 0;
    }
    gj_log_warn("pg", "stopping PostgreSQL (pid %ld) left running by an earlier gpujobd", pid);
    if (kill((pid_t)pid, SIGINT) != 0)
        return -1;
    for (int i = 0; i < STOP_TIMEOUT_S * 10; i++) {
        if (!alive(pid))
            return 0;
        struct timespec ts = { 0, 100000000L };
        nanosleep(&ts, NULL);
    }
    kill((pid_t)pid, SIGQUIT);
    for (int i = 0; i < 100; i++) {
        if (!alive(pid))
            return 0;
        struct timespec ts = { 0, 100000000L };
        nanosleep(&ts, NULL);
    }
    gj_log_error("pg", "the earlier PostgreSQL (pid %ld) does not stop", pid);
    return -1;
}

/* Percent-encodes s for a URL query value. */
static int url_encode(const char *s, char *out, size_t n)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        int plain = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
                    *p == '-' || *p == '_' || *p == '.' || *p == '~' || *p == '/';
        if (o + 4 >= n)
            return -1;
        if (plain) {
            out[o++] = (char)*p;
        } else {
            out[o++] = '%';
            out[o++] = hex[*p >> 4];
            out[o++] = hex[*p & 15];
        }
    }
    out[o] = '\0';
    return 0;
}

/* Creates database gpujobd unless it exists; host: the socket directory, encoded. */
static int create_database(const char *host)
{
    char url[4 * GJ_PATH_MAX];
    snprintf(url, sizeof url, "postgresql:///postgres?host=%s&user=%s", host, PG_SUPERUSER);
    PGconn *conn = PQconnectdb(url);
    if (!conn || PQstatus(conn) != CONNECTION_OK) {
        gj_log_error("pg", "cannot connect to the embedded PostgreSQL: %s",
                     conn ? PQerrorMessage(conn) : "out of memory");
        PQfinish(conn);
        return -1;
    }
    const char *p[1] = { PG_DATABASE };
    PGresult *res = PQexecParams(conn, "SELECT 1 FROM pg_database WHERE datname = $1", 1, NULL, p, NULL,
                                 NULL, 0);
    if (!res || PQresultStatus(res) != PGRES_TUPLES_OK) {
        gj_log_error("pg", "cannot list databases: %s", PQerrorMessage(conn));
        PQclear(res);
        PQfinish(conn);
        return -1;
    }
    int exists = PQntuples(res) > 0;
    PQclear(res);
    int rc = 0;
    if (!exists) {
        /* An identifier cannot be a parameter; the name is a constant. */
        res = PQexecParams(conn, "CREATE DATABASE " PG_DATABASE, 0, NULL, NULL, NULL, NULL, 0);
        if (!res || PQresultStatus(res) != PGRES_COMMAND_OK) {
            const char *st = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
            if (!st || strcmp(st, "42P04") != 0) {   /* duplicate_database: fine */
                gj_log_error("pg", "cannot create database %s: %s", PG_DATABASE, PQerrorMessage(conn));
                rc = -1;
            }
        } else {
            gj_log_info("pg", "created database %s", PG_DATABASE);
        }
        PQclear(res);
    }
    PQfinish(conn);
    return rc;
}

/* Waits for pid to exit, up to timeout_s; 1 exited, 0 still running. */
static int wait_exit(pid_t pid, int timeout_s, int *status)
{
    for (int i = 0; i < timeout_s * 20; i++) {
        pid_t r = waitpid(pid, status, WNOHANG);
        if (r == pid)
            return 1;
        if (r < 0 && errno != EINTR)
            return 1;   /* reaped elsewhere */
        struct timespec ts = { 0, 50000000L };
        nanosleep(&ts, NULL);
    }
    return 0;
}

/* DATA_DIR created and resolved, and the paths under it. */
static int find_paths(struct start *st, const char *data_dir)
{
    if (gj_mkdir_p(data_dir, 0700) != 0) {
        gj_log_error("pg", "cannot create %s: %s", data_dir, strerror(errno));
        return -1;
    }
    if (!realpath(data_dir, st->dir)) {
        gj_log_error("pg", "%s: %s", data_dir, strerror(errno));
        return -1;
    }
    const char *dir = st->dir;
    if (strchr(dir, ',') || strchr(dir, '\'') || strchr(dir, '"') || strchr(dir, '\\')) {
        gj_log_error("pg", "data dir %s: a path with , ' \" or \\ cannot hold the PostgreSQL socket", dir);
        return -1;
    }
    if (gj_path_join(st->pgdir, sizeof st->pgdir, dir, "pg") != 0 ||
        gj_path_join(st->rundir, sizeof st->rundir, dir, "run") != 0 ||
        gj_path_join(st->log_path, sizeof st->log_path, dir, "postgres.log") != 0 ||
        gj_path_join(st->lock_path, sizeof st->lock_path, st->rundir, "gpujobd-pg.lock") != 0 ||
        url_encode(st->rundir, st->host, sizeof st->host) != 0) {
        gj_log_error("pg", "data dir path too long: %s", dir);
        return -1;
    }
    if (strlen(st->rundir) + strlen("/.s.PGSQL.5432.lock") >= sizeof(((struct sockaddr_un *)0)->sun_path)) {
        gj_log_error("pg", "data dir %s is too long for a Unix socket path (at most about 85 characters)", dir);
        return -1;
    }
    return 0;
}

/* As root, the cluster user must be able to reach DATA_DIR/pg and DATA_DIR/run:
 * DATA_DIR gets search permission (not read) for others, and every parent must
 * already be searchable by it. */
static int let_cluster_user_in(const struct start *st)
{
    const struct run_as *ra = &st->ra;
    struct stat sb;
    if (!ra->drop)
        return 0;
    if (stat(st->dir, &sb) == 0 && (sb.st_mode & 0011) != 0011 &&
        chmod(st->dir, (sb.st_mode & 07777) | 0011) != 0) {
        gj_log_error("pg", "cannot chmod %s: %s", st->dir, strerror(errno));
        return -1;
    }
    char parent[GJ_PATH_MAX];
    snprintf(parent, sizeof parent, "%s", st->dir);
    for (char *slash = strrchr(parent, '/'); slash && slash != parent; slash = strrchr(parent, '/')) {
        *slash = '\0';
        if (stat(parent, &sb) == 0 && !(sb.st_mode & S_IXOTH) &&
            !(sb.st_uid == ra->uid && (sb.st_mode & S_IXUSR)) &&
            !(sb.st_gid == ra->gid && (sb.st_mode & S_IXGRP))) {
            gj_log_error("pg", "user %s cannot reach %s: %s is not searchable (chmod o+x it, or "
                               "use a --data-dir elsewhere)", ra->name, st->dir, parent);
            return -1;
        }
    }
    return 0;
}

/* One gpujobd per cluster: an exclusive flock on DATA_DIR/run/gpujobd-pg.lock,
 * held (pg->lock_fd) as long as the postmaster runs. */
static int take_lock(struct gj_pg_embedded *pg, const struct start *st)
{
    pg->lock_fd = open(st->lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (pg->lock_fd < 0) {
        gj_log_error("pg", "cannot open %s: %s", st->lock_path, strerror(errno));
        return -1;
    }
    if (flock(pg->lock_fd, LOCK_EX | LOCK_NB) != 0) {
        gj_log_error("pg", "the embedded PostgreSQL of %s is in use by another gpujobd process "
                           "(%s is locked)", st->dir, st->lock_path);
        return -1;
    }
    return 0;
}

/* postgres.log (appended; one previous log kept when it grew large) and /dev/null,
 * the children's output and input. */
static int open_log(struct start *st)
{
    struct stat lst;
    if (stat(st->log_path, &lst) == 0 && lst.st_size > 16 * 1024 * 1024) {
        char old_log[GJ_PATH_MAX];
        if (snprintf(old_log, sizeof old_log, "%s.1", st->log_path) < (int)sizeof old_log &&
            rename(st->log_path, old_log) != 0)
            gj_log_warn("pg", "cannot rotate %s: %s", st->log_path, strerror(errno));
    }
    st->log_fd = open(st->log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    st->devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (st->log_fd < 0 || st->devnull < 0) {
        gj_log_error("pg", "cannot open %s: %s", st->log_fd < 0 ? st->log_path : "/dev/null", strerror(errno));
        return -1;
    }
    if (st->ra.drop && fchown(st->log_fd, st->ra.uid, st->ra.gid) != 0) {
        gj_log_error("pg", "cannot chown %s: %s", st->log_path, strerror(errno));
        return -1;
    }
    return 0;
}

/* A cluster in DATA_DIR/pg, owned by the cluster user, with no postmaster of an
 * earlier run in its way: initdb on first use. */
static int ensure_cluster(const struct start *st)
{
    char version_file[GJ_PATH_MAX];
    if (gj_path_join(version_file, sizeof version_file, st->pgdir, "PG_VERSION") != 0)
        return -1;
    if (access(version_file, F_OK) != 0) {
        struct stat sb;
        if (stat(st->pgdir, &sb) == 0) {
            gj_log_error("pg", "%s exists but holds no PostgreSQL cluster (no PG_VERSION); move it away",
                         st->pgdir);
            return -1;
        }
        if (run_initdb(st) != 0)
            return -1;
    } else if (chown_tree(st->pgdir, &st->ra) != 0) {
        return -1;
    }
    return clear_previous_postmaster(st->pgdir);
}

/* The postmaster's command line, its strings in args. */
struct postgres_args {
    char postgres[GJ_PATH_MAX], pgdir[GJ_PATH_MAX], sockdir[GJ_PATH_MAX + 32];
    char *argv[24];
};

static int postgres_argv(const struct start *st, struct postgres_args *pa)
{
    if (gj_path_join(pa->postgres, sizeof pa->postgres, st->bindir, "postgres") != 0)
        return -1;
    snprintf(pa->pgdir, sizeof pa->pgdir, "%s", st->pgdir);
    snprintf(pa->sockdir, sizeof pa->sockdir, "unix_socket_directories=%s", st->rundir);
    char **argv = pa->argv;
    int a = 0;
    argv[a++] = pa->postgres;
    argv[a++] = (char *)"-D";
    argv[a++] = pa->pgdir;
    argv[a++] = (char *)"-c";
    argv[a++] = (char *)"listen_addresses=";
    argv[a++] = (char *)"-c";
    argv[a++] = pa->sockdir;
    argv[a++] = (char *)"-c";
    argv[a++] = (char *)"unix_socket_permissions=0700";
    argv[a++] = (char *)"-c";
    argv[a++] = (char *)"logging_collector=off";
    argv[a++] = (char *)"-c";
    argv[a++] = (char *)"log_line_prefix=%m [%p] ";
    /* Blobs are large objects: deleting one leaves dead rows in pg_largeobject, and at the
     * default throttling autovacuum falls behind sustained upload churn, so the database grows
     * without bound (bench/soak.py: 27 GiB in 20 minutes at 22 MB/s; with these, flat). */
    argv[a++] = (char *)"-c";
    argv[a++] = (char *)"autovacuum_vacuum_cost_delay=0";
    argv[a++] = (char *)"-c";
    argv[a++] = (char *)"autovacuum_naptime=10s";
    if (st->opt->nosync) {
        /* Not synchronous_commit=off: its commits wait in shared memory, and a postmaster
         * killed then (the chaos tests do) loses commits the service acknowledged. */
        argv[a++] = (char *)"-c";
        argv[a++] = (char *)"fsync=off";
        argv[a++] = (char *)"-c";
        argv[a++] = (char *)"full_page_writes=off";
    }
    argv[a] = NULL;
    return 0;
}

enum ready { READY, RETRY, EXITED, TIMED_OUT, STOPPING };

/* Waits until the postmaster pg->pid accepts connections or exits. RETRY: it
 * exited because backends of a postmaster killed a moment ago still hold its
 * shared memory (they notice its death and exit within a second). STOPPING: a
 * stop was asked meanwhile (a restart gives way to it). */
static enum ready wait_ready(struct gj_pg_embedded *pg, const struct start *st, const char *ping, int attempt)
{
    for (int i = 0; i < START_TIMEOUT_S * 20; i++) {
        int status;
        if (waitpid(pg->pid, &status, WNOHANG) == pg->pid) {
            char why[64], tail[800];
            log_tail(st->log_path, tail, sizeof tail);
            pg->pid = -1;
            if (attempt < 5 && strstr(tail, "is still in use")) {
                gj_log_warn("pg", "postgres could not start yet (%s); retrying", exit_text(status, why, sizeof why));
                struct timespec ts = { 1, 0 };
                nanosleep(&ts, NULL);
                return RETRY;
            }
            gj_log_error("pg", "postgres exited at start (%s): %s", exit_text(status, why, sizeof why), tail);
            return EXITED;
        }
        if (atomic_load(&pg->stopping))
            return STOPPING;
        if (PQping(ping) == PQPING_OK)
            return READY;
        struct timespec ts = { 0, 50000000L };
        nanosleep(&ts, NULL);
    }
    gj_log_error("pg", "postgres did not accept connections within %d s (see %s)", START_TIMEOUT_S, st->log_path);
    return TIMED_OUT;
}

/* Spawns the postmaster (pg->pid) and waits until it accepts connections. On
 * failure pg->pid is -1, or the pid of a postmaster that never became ready. */
static int start_postmaster(struct gj_pg_embedded *pg, const struct start *st)
{
    struct postgres_args pa;
    char ping[4 * GJ_PATH_MAX];
    if (postgres_argv(st, &pa) != 0)
        return -1;
    snprintf(ping, sizeof ping, "postgresql:///postgres?host=%s&user=%s&connect_timeout=5", st->host,
             PG_SUPERUSER);
    for (int attempt = 1;; attempt++) {
        pg->pid = spawn(pa.argv, &st->ra, st->log_fd, st->devnull, st->pgdir, SIGINT);
        if (pg->pid < 0)
            return -1;
        enum ready r = wait_ready(pg, st, ping, attempt);
        if (r != RETRY)
            return r == READY ? 0 : -1;
    }
}

/* ---- supervision: a postmaster that dies is started again ---------------------- */

#define WATCH_PERIOD_MS 100
#define RESTART_BACKOFF_MAX_S 10

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Sleeps ms, or less when stop is asked; 1 when stopping. */
static int nap(struct gj_pg_embedded *pg, int ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&pg->mu);
    while (!atomic_load(&pg->stopping))
        if (pthread_cond_timedwait(&pg->wake, &pg->mu, &ts) == ETIMEDOUT)
            break;
    pthread_mutex_unlock(&pg->mu);
    return atomic_load(&pg->stopping);
}

/* A postmaster that started but never became ready is stopped before the next try. */
static void kill_unready(struct gj_pg_embedded *pg)
{
    if (pg->pid <= 0)
        return;
    int status;
    kill(pg->pid, SIGQUIT);
    if (!wait_exit(pg->pid, 5, &status)) {
        kill(pg->pid, SIGKILL);
        while (waitpid(pg->pid, &status, 0) < 0 && errno == EINTR) {
        }
    }
    pg->pid = -1;
}

/* The postmaster died (status as waitpid gave it, or -1 unknown): start it again,
 * with backoff, until it runs or stop is asked. */
static void restart(struct gj_pg_embedded *pg, int status)
{
    char why[64] = "vanished";
    if (status != -1)
        exit_text(status, why, sizeof why);
    gj_log_error("pg", "embedded PostgreSQL (pid %d) exited (%s); restarting it", (int)pg->pid, why);
    pg->pid = -1;
    double t0 = mono_s();
    int backoff_s = 1;
    while (!atomic_load(&pg->stopping)) {
        if (clear_previous_postmaster(pg->st.pgdir) == 0 && start_postmaster(pg, &pg->st) == 0) {
            gj_log_info("pg", "embedded PostgreSQL restarted (pid %d) after %.1f s", (int)pg->pid, mono_s() - t0);
            return;
        }
        if (atomic_load(&pg->stopping))
            return;   /* stop takes the half-started postmaster down */
        kill_unready(pg);
        gj_log_error("pg", "embedded PostgreSQL did not restart; next try in %d s (see %s)", backoff_s,
                     pg->st.log_path);
        if (nap(pg, backoff_s * 1000))
            return;
        backoff_s = backoff_s * 2 > RESTART_BACKOFF_MAX_S ? RESTART_BACKOFF_MAX_S : backoff_s * 2;
    }
}

static void *supervise(void *arg)
{
    struct gj_pg_embedded *pg = arg;
    while (!nap(pg, WATCH_PERIOD_MS)) {
        int status = 0;
        pid_t r = waitpid(pg->pid, &status, WNOHANG);
        if (r == pg->pid)
            restart(pg, status);
        else if (r < 0 && errno == ECHILD && !alive(pg->pid))   /* reaped elsewhere */
            restart(pg, -1);
    }
    return NULL;
}

static int start_supervisor(struct gj_pg_embedded *pg)
{
    int rc = pthread_create(&pg->supervisor, NULL, supervise, pg);
    if (rc) {
        gj_log_error("pg", "cannot start the PostgreSQL supervisor: %s", strerror(rc));
        return -1;
    }
    pg->supervising = 1;
    return 0;
}

/* The struct with its locks, before any phase runs (stop can take it down from here). */
static struct gj_pg_embedded *pg_new(const struct gj_pg_options *opt)
{
    struct gj_pg_embedded *pg = calloc(1, sizeof *pg);
    if (!pg)
        return NULL;
    pthread_condattr_t ca;
    int ok = pthread_condattr_init(&ca) == 0;
    if (ok) {
        ok = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) == 0 && pthread_cond_init(&pg->wake, &ca) == 0;
        pthread_condattr_destroy(&ca);
    }
    if (!ok || pthread_mutex_init(&pg->mu, NULL) != 0) {
        if (ok)
            pthread_cond_destroy(&pg->wake);
        free(pg);
        return NULL;
    }
    pg->pid = -1;
    pg->lock_fd = -1;
    if (opt)
        pg->opt = *opt;
    pg->st.opt = &pg->opt;
    pg->st.log_fd = -1;
    pg->st.devnull = -1;
    atomic_init(&pg->stopping, 0);
    return pg;
}

struct gj_pg_embedded *gj_pg_embedded_start(const char *data_dir, const struct gj_pg_options *opt,
                                            char *url, size_t url_size)
{
    if (!data_dir || !*data_dir || !url || url_size == 0) {
        gj_log_error("pg", "no data directory for the embedded PostgreSQL");
        return NULL;
    }
    url[0] = '\0';
    struct gj_pg_embedded *pg = pg_new(opt);
    if (!pg)
        return NULL;
    struct start *st = &pg->st;
    if (find_bindir(st->opt->bindir, st->bindir, sizeof st->bindir) != 0 ||
        resolve_user(st->opt->user, &st->ra) != 0 || find_paths(st, data_dir) != 0 ||
        let_cluster_user_in(st) != 0 || make_owned_dir(st->rundir, 0700, &st->ra) != 0) {
        gj_pg_embedded_stop(pg);
        return NULL;
    }
    snprintf(pg->data_dir, sizeof pg->data_dir, "%s", st->dir);
    int ok = take_lock(pg, st) == 0 && open_log(st) == 0 && ensure_cluster(st) == 0 &&
             start_postmaster(pg, st) == 0 && create_database(st->host) == 0;
    if (ok) {
        int n = snprintf(url, url_size, "postgresql:///%s?host=%s&user=%s", PG_DATABASE, st->host, PG_SUPERUSER);
        if (n < 0 || (size_t)n >= url_size) {
            gj_log_error("pg", "database URL does not fit its buffer");
            url[0] = '\0';
            ok = 0;
        }
    }
    if (!ok || start_supervisor(pg) != 0) {
        url[0] = '\0';
        gj_pg_embedded_stop(pg);   /* stops a postmaster that never became ready; unlocks */
        return NULL;
    }
    gj_log_info("pg", "embedded PostgreSQL running (pid %d, socket in %s, log %s)", (int)pg->pid, st->rundir,
                st->log_path);
    return pg;
}

/* Ends the supervisor first: from then on pg->pid is this thread's to read. */
static void stop_supervisor(struct gj_pg_embedded *pg)
{
    pthread_mutex_lock(&pg->mu);
    atomic_store(&pg->stopping, 1);
    pthread_cond_broadcast(&pg->wake);
    pthread_mutex_unlock(&pg->mu);
    if (!pg->supervising)
        return;
    int rc = pthread_join(pg->supervisor, NULL);
    if (rc)
        gj_log_error("pg", "pthread_join: %s", strerror(rc));
    pg->supervising = 0;
}

void gj_pg_embedded_stop(struct gj_pg_embedded *pg)
{
    if (!pg)
        return;
    stop_supervisor(pg);
    if (pg->pid > 0) {
        int status = 0;
        if (kill(pg->pid, SIGINT) != 0 && errno != ESRCH)
            gj_log_error("pg", "kill(postgres, SIGINT): %s", strerror(errno));
        if (!wait_exit(pg->pid, STOP_TIMEOUT_S, &status)) {
            gj_log_warn("pg", "postgres did not stop within %d s; immediate shutdown", STOP_TIMEOUT_S);
            kill(pg->pid, SIGQUIT);
            if (!wait_exit(pg->pid, 10, &status)) {
                kill(pg->pid, SIGKILL);
                while (waitpid(pg->pid, &status, 0) < 0 && errno == EINTR) {
                }
            }
        }
        gj_log_info("pg", "embedded PostgreSQL stopped");
    }
    if (pg->lock_fd >= 0)
        close(pg->lock_fd);
    if (pg->st.log_fd >= 0)
        close(pg->st.log_fd);
    if (pg->st.devnull >= 0)
        close(pg->st.devnull);
    pthread_cond_destroy(&pg->wake);
    pthread_mutex_destroy(&pg->mu);
    free(pg);
}
