/*
 * model_sync.c — this replica converges to the shared model store (model_sync.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "infer/serving/batcher.h"
#include "service/db/db.h"
#include "service/infer/model_cache.h"
#include "service/infer/model_sync.h"
#include "service/base/log.h"

#define COMPONENT "models"
#define API_ABSENT "this replica runs no models (--role api): inference runs on the replicas with --role " \
                   "worker (or all)"

/* A load this replica made for a version desired 'loaded': made again only when asked again. */
struct attempt {
    char name[GJ_MODEL_NAME_MAX];
    int64_t version;
    char requested_at[40];
};

static struct {
    pthread_mutex_t mu;
    pthread_cond_t passed;
    pthread_t thread;
    int running, stop, cond_ok;
    int wake[2];
    uint64_t asked, done;          /* passes asked for; the ask the last finished pass began after */
    int last_ok;
    char *url;
    char replica[256], role[16];
    int serving;
    json_t *(*devices_json)(const char *name, int64_t version);
    gj_model_repo *repo;
    struct gj_ms_snapshot snap;    /* what the last pass applied (under mu) */
    struct attempt *attempts;      /* the sync thread's (and start's) only */
    size_t n_attempts;
} S = { .mu = PTHREAD_MUTEX_INITIALIZER, .wake = { -1, -1 } };

/* ---- loading and placing ---- */

int gj_model_sync_place(const char *name, int64_t version, struct gj_error *err)
{
    gj_served_model *sm = NULL;
    if (gj_model_repo_load(S.repo, name, version, &sm, err) != 0) {
        if (!err->status)
            err->status = 422;
        return -1;
    }
    gj_batcher *b = gj_batcher_acquire(sm, err);
    if (!b) {
        gj_model_repo_fail(S.repo, name, gj_served_model_version(sm), err->message);
        gj_served_model_release(sm);
        err->status = 503;
        return -1;
    }
    int device = gj_batcher_device(b);
    gj_batcher_release(b);   /* the registry keeps it until the version is unloaded */
    if (device >= 0)
        gj_log_info(COMPONENT, "model %s version %" PRId64 " loaded on GPU %d", name,
                    gj_served_model_version(sm), device);
    else
        gj_log_info(COMPONENT, "model %s version %" PRId64 " loaded on the CPU", name, gj_served_model_version(sm));
    gj_served_model_release(sm);
    return 0;
}

static struct attempt *attempt_find(const char *name, int64_t version)
{
    for (size_t i = 0; i < S.n_attempts; i++)
        if (S.attempts[i].version == version && strcmp(S.attempts[i].name, name) == 0)
            return &S.attempts[i];
    return NULL;
}

/* Loads a version desired 'loaded' unless this request for it was tried already. */
static void load_if_asked(const char *name, const struct gj_ms_version *v)
{
    struct attempt *a = attempt_find(name, v->version);
    if (a && strcmp(a->requested_at, v->requested_at) == 0)
        return;
    if (!a) {
        struct attempt *grown = realloc(S.attempts, (S.n_attempts + 1) * sizeof *grown);
        if (!grown)
            return;
        S.attempts = grown;
        a = &S.attempts[S.n_attempts++];
        snprintf(a->name, sizeof a->name, "%s", name);
        a->version = v->version;
    }
    snprintf(a->requested_at, sizeof a->requested_at, "%s", v->requested_at);
    struct gj_error err = { 0 };
    if (gj_model_sync_place(name, v->version, &err) != 0)
        gj_log_warn(COMPONENT, "model %s version %" PRId64 " is to be loaded but its load failed here: %s", name,
                    v->version, err.message);
}

/* ---- one pass ---- */

static const char *effective_config(const struct gj_ms_model *m, const struct gj_ms_version *v)
{
    return v->config ? v->config : m->config;
}

static const struct gj_ms_version *snap_version(const struct gj_ms_snapshot *s, const char *name, int64_t version,
                                                const struct gj_ms_model **mout)
{
    const struct gj_ms_model *m = gj_model_store_find(s, name);
    for (size_t j = 0; m && j < m->n_versions; j++)
        if (m->versions[j].version == version) {
            *mout = m;
            return &m->versions[j];
        }
    return NULL;
}

/* Versions deleted, changed (files or config) or now unloaded lose their batchers: the
 * batchers hold the old model and their device memory. */
static void drop_stale_batchers(const struct gj_ms_snapshot *old, const struct gj_ms_snapshot *now)
{
    for (size_t i = 0; i < old->n_models; i++) {
        const struct gj_ms_model *om = &old->models[i];
        for (size_t j = 0; j < om->n_versions; j++) {
            const struct gj_ms_version *ov = &om->versions[j];
            const struct gj_ms_model *nm = NULL;
            const struct gj_ms_version *nv = snap_version(now, om->name, ov->version, &nm);
            const char *oc = effective_config(om, ov), *nc = nv ? effective_config(nm, nv) : NULL;
            if (!nv || strcmp(ov->digest, nv->digest) != 0 || !oc || !nc || strcmp(oc, nc) != 0 ||
                (nv->desired == GJ_DESIRED_UNLOADED && ov->desired != GJ_DESIRED_UNLOADED))
                gj_batcher_registry_drop(om->name, ov->version);
        }
    }
}

/* Where a serving replica has a version's files, or why not (in why). */
static const char *version_dir(PGconn *conn, const struct gj_ms_model *m, const struct gj_ms_version *v,
                               const struct gj_model_config *cfg, int have_cfg, char *dir, char *why, size_t n)
{
    int64_t all[GJ_MODEL_MAX_VERSIONS];
    for (size_t j = 0; j < m->n_versions && j < GJ_MODEL_MAX_VERSIONS; j++)
        all[j] = m->versions[j].version;
    if (!S.serving) {
        snprintf(why, n, "%s", API_ABSENT);
        return NULL;
    }
    if (have_cfg && !gj_model_policy_serves(cfg, all, m->n_versions, v->version)) {
        snprintf(why, n, "version %" PRId64 " is outside the model's version_policy (config.json)", v->version);
        return NULL;
    }
    struct gj_error err = { 0 };
    if (gj_model_cache_get(conn, v, dir, &err) != 0) {
        snprintf(why, n, "its files could not be fetched from the model store: %s", err.message);
        gj_log_warn(COMPONENT, "model %s version %" PRId64 ": %s", m->name, v->version, why);
        return NULL;
    }
    return dir;
}

/* Declares one model of the snapshot to the repository, then loads what is to be loaded. */
static void declare_model(PGconn *conn, const struct gj_ms_model *m)
{
    size_t n = m->n_versions;
    struct gj_model_version_decl *d = calloc(n ? n : 1, sizeof *d);
    char (*dirs)[GJ_PATH_MAX] = calloc(n ? n : 1, sizeof *dirs);
    char (*why)[600] = calloc(n ? n : 1, sizeof *why);
    struct gj_model_config cfg;
    struct gj_error err = { 0 };
    int have_cfg = m->config && gj_model_config_load_text(m->config, strlen(m->config), m->name, &cfg, &err) == 0;
    for (size_t j = 0; d && dirs && why && j < n; j++) {
        const struct gj_ms_version *v = &m->versions[j];
        d[j].version = v->version;
        d[j].config = v->config;
        d[j].unloaded = v->desired == GJ_DESIRED_UNLOADED;
        d[j].dir = version_dir(conn, m, v, &cfg, have_cfg, dirs[j], why[j], sizeof why[j]);
        d[j].absent = why[j];
    }
    gj_model_config_free(&cfg);
    if (!d || !dirs || !why || gj_model_repo_declare(S.repo, m->name, m->config, d, n, &err) != 0)
        gj_log_error(COMPONENT, "model %s: %s", m->name, d && dirs && why ? err.message : "out of memory");
    else
        for (size_t j = 0; j < n; j++)
            if (d[j].dir && m->versions[j].desired == GJ_DESIRED_LOADED)
                load_if_asked(m->name, &m->versions[j]);
    free(d);
    free(dirs);
    free(why);
}

/* Models the repository has that the store has not any more go. */
static void remove_gone(const struct gj_ms_snapshot *snap)
{
    size_t n = gj_model_repo_count(S.repo);
    char (*names)[GJ_MODEL_NAME_MAX] = calloc(n ? n : 1, sizeof *names);
    size_t k = 0;
    for (size_t i = 0; names && i < n; i++)
        if (gj_model_repo_name(S.repo, i, names[k], sizeof names[k]) == 0 && !gj_model_store_find(snap, names[k]))
            k++;
    for (size_t i = 0; i < k; i++) {
        gj_model_repo_remove(S.repo, names[i]);
        gj_log_info(COMPONENT, "model %s: deleted from the model store, gone here", names[i]);
    }
    free(names);
}

static const char *state_label(enum gj_model_state s)
{
    switch (s) {
    case GJ_MODEL_READY: return "loaded";
    case GJ_MODEL_FAILED: return "failed";
    case GJ_MODEL_UNLOADED: return "unloaded";
    case GJ_MODEL_AVAILABLE:
    default: return "available";
    }
}

/* [{"model", "version", "state", "reason"?, "devices"}] of every version here. */
static json_t *local_states(const struct gj_ms_snapshot *snap)
{
    json_t *a = json_array();
    struct gj_model_version_info *vi = calloc(GJ_MODEL_MAX_VERSIONS, sizeof *vi);
    for (size_t i = 0; a && vi && S.serving && i < snap->n_models; i++) {
        size_t n = 0;
        struct gj_error err = { 0 };
        const char *name = snap->models[i].name;
        if (gj_model_repo_versions(S.repo, name, vi, GJ_MODEL_MAX_VERSIONS, &n, &err) != 0)
            continue;
        for (size_t j = 0; j < n && j < GJ_MODEL_MAX_VERSIONS; j++) {
            json_t *one = json_pack("{s:s, s:I, s:s, s:o}", "model", name, "version", (json_int_t)vi[j].version,
                                    "state", state_label(vi[j].state), "devices",
                                    S.devices_json ? S.devices_json(name, vi[j].version) : json_array());
            if (one && vi[j].reason[0])
                json_object_set_new(one, "reason", json_string(vi[j].reason));
            json_array_append_new(a, one);
        }
    }
    free(vi);
    return a;
}

/* Reads, applies, reports. 0, or -1 when the store could not be read or written. */
static int run_pass(PGconn *conn)
{
    struct gj_ms_snapshot snap;
    if (gj_model_store_read(conn, &snap) != 0)
        return -1;
    /* First: a batcher made below for a version is not the stale one. (S.snap changes on
     * this thread only: read here without the lock.) */
    drop_stale_batchers(&S.snap, &snap);
    for (size_t i = 0; i < snap.n_models; i++)
        declare_model(conn, &snap.models[i]);
    remove_gone(&snap);
    pthread_mutex_lock(&S.mu);
    struct gj_ms_snapshot old = S.snap;
    S.snap = snap;
    pthread_mutex_unlock(&S.mu);
    gj_model_store_snapshot_free(&old);
    json_t *states = local_states(&snap);
    int rc = states ? gj_model_store_report(conn, S.replica, S.role, S.serving, snap.generation, states) : -1;
    json_decref(states);
    if (S.serving)
        gj_model_cache_prune(&snap);   /* the snapshot stays S.snap's until the next pass */
    return rc;
}

/* ---- the thread ---- */

static int stopping(void)
{
    pthread_mutex_lock(&S.mu);
    int s = S.stop;
    pthread_mutex_unlock(&S.mu);
    return s;
}

static void drain_wake(void)
{
    char buf[64];
    while (read(S.wake[0], buf, sizeof buf) > 0)
        ;
}

static PGconn *connect_listen(void)
{
    PGconn *conn = gj_db_connect(S.url);
    if (conn && gj_db_cmd(conn, "LISTEN gpujobd_models", 0, NULL) != 0) {
        PQfinish(conn);
        conn = NULL;
    }
    return conn;
}

/* Waits for a notification, an ask or stop, at most ms. -1 when the connection broke. */
static int wait_news(PGconn *conn, int ms)
{
    PGnotify *note;
    int got = 0;
    if (conn && PQconsumeInput(conn))
        while ((note = PQnotifies(conn)) != NULL) {
            PQfreemem(note);
            got = 1;
        }
    if (got)
        return 0;   /* arrived during the last pass */
    struct pollfd fds[2] = { { .fd = S.wake[0], .events = POLLIN }, { .fd = conn ? PQsocket(conn) : -1, .events = POLLIN } };
    int rc = poll(fds, conn ? 2 : 1, ms);
    if (rc > 0 && fds[0].revents)
        drain_wake();
    if (rc > 0 && conn && fds[1].revents) {
        if (!PQconsumeInput(conn))
            return -1;
        while ((note = PQnotifies(conn)) != NULL)
            PQfreemem(note);
    }
    return 0;
}

static void pass_finished(uint64_t began_after, int ok)
{
    pthread_mutex_lock(&S.mu);
    S.done = began_after;
    S.last_ok = ok;
    pthread_cond_broadcast(&S.passed);
    pthread_mutex_unlock(&S.mu);
}

static void *sync_main(void *arg)
{
    (void)arg;
    PGconn *conn = NULL;
    int backoff = 100, down_logged = 0;
    while (!stopping()) {
        if (!conn && !(conn = connect_listen())) {
            if (!down_logged)
                gj_log_warn(COMPONENT, "model store: no connection; trying again");
            down_logged = 1;
            wait_news(NULL, backoff);
            backoff = backoff * 2 > GJ_MODEL_RESYNC_MS ? GJ_MODEL_RESYNC_MS : backoff * 2;
            continue;
        }
        backoff = 100;
        down_logged = 0;
        pthread_mutex_lock(&S.mu);
        uint64_t began_after = S.asked;
        pthread_mutex_unlock(&S.mu);
        int ok = run_pass(conn) == 0;
        pass_finished(began_after, ok);
        if ((!ok && !gj_db_ok(conn)) || wait_news(conn, GJ_MODEL_RESYNC_MS) != 0) {
            PQfinish(conn);
            conn = NULL;
        }
    }
    PQfinish(conn);
    return NULL;
}

int gj_model_sync_now(int timeout_ms)
{
    pthread_mutex_lock(&S.mu);
    uint64_t ticket = ++S.asked;
    pthread_mutex_unlock(&S.mu);
    char b = 1;
    if (S.wake[1] >= 0 && write(S.wake[1], &b, 1) < 0 && errno != EAGAIN)
        gj_log_warn(COMPONENT, "model sync: wake: %s", strerror(errno));
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += timeout_ms / 1000;
    until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&S.mu);
    while (S.running && !S.stop && S.done < ticket)
        if (pthread_cond_timedwait(&S.passed, &S.mu, &until) == ETIMEDOUT)
            break;
    int ok = S.done >= ticket && S.last_ok;
    pthread_mutex_unlock(&S.mu);
    return ok ? 0 : -1;
}

/* ---- start, stop, what the last pass read ---- */

static int init_sync(const struct gj_model_sync_config *cfg, gj_model_repo *repo)
{
    pthread_condattr_t attr;
    if (pthread_condattr_init(&attr) != 0)
        return -1;
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    int rc = pthread_cond_init(&S.passed, &attr);
    pthread_condattr_destroy(&attr);
    S.cond_ok = rc == 0;
    if (rc != 0 || pipe2(S.wake, O_CLOEXEC | O_NONBLOCK) != 0)
        return -1;
    S.url = strdup(cfg->database_url);
    snprintf(S.replica, sizeof S.replica, "%s", cfg->replica);
    snprintf(S.role, sizeof S.role, "%s", cfg->role);
    S.serving = cfg->serving;
    S.devices_json = cfg->devices_json;
    S.repo = repo;
    S.stop = 0;
    return S.url ? 0 : -1;
}

int gj_model_sync_start(const struct gj_model_sync_config *cfg, gj_model_repo *repo)
{
    if (init_sync(cfg, repo) != 0) {
        gj_log_error(COMPONENT, "model sync: cannot start (%s)", strerror(errno));
        gj_model_sync_stop();
        return -1;
    }
    PGconn *conn = gj_db_connect(S.url);
    int rc = conn && run_pass(conn) == 0 ? 0 : -1;
    PQfinish(conn);
    if (rc != 0)
        gj_log_error(COMPONENT, "the first pass over the model store failed");
    else if ((rc = pthread_create(&S.thread, NULL, sync_main, NULL)) != 0)
        gj_log_error(COMPONENT, "model sync: pthread_create: %s", strerror(rc));
    if (rc != 0) {
        gj_model_sync_stop();
        return -1;
    }
    S.running = 1;
    return 0;
}

void gj_model_sync_stop(void)
{
    pthread_mutex_lock(&S.mu);
    S.stop = 1;
    if (S.cond_ok)
        pthread_cond_broadcast(&S.passed);
    pthread_mutex_unlock(&S.mu);
    char b = 1;
    if (S.wake[1] >= 0 && write(S.wake[1], &b, 1) < 0 && errno != EAGAIN)
        gj_log_warn(COMPONENT, "model sync: wake: %s", strerror(errno));
    if (S.running)
        pthread_join(S.thread, NULL);
    S.running = 0;
    if (S.url) {   /* this replica's reports go: it serves nothing any more */
        PGconn *conn = gj_db_connect(S.url);
        if (conn)
            gj_model_store_leave(conn, S.replica);
        PQfinish(conn);
    }
    for (int i = 0; i < 2; i++)
        if (S.wake[i] >= 0)
            close(S.wake[i]);
    S.wake[0] = S.wake[1] = -1;
    pthread_mutex_lock(&S.mu);
    gj_model_store_snapshot_free(&S.snap);
    pthread_mutex_unlock(&S.mu);
    if (S.cond_ok)
        pthread_cond_destroy(&S.passed);
    S.cond_ok = 0;
    free(S.url);
    free(S.attempts);
    S.url = NULL;
    S.attempts = NULL;
    S.n_attempts = 0;
    S.repo = NULL;
}

int gj_model_sync_desired(const char *name, int64_t version, enum gj_model_desired *d)
{
    pthread_mutex_lock(&S.mu);
    const struct gj_ms_model *m = NULL;
    const struct gj_ms_version *v = snap_version(&S.snap, name, version, &m);
    if (v)
        *d = v->desired;
    pthread_mutex_unlock(&S.mu);
    return v != NULL;
}

int64_t gj_model_sync_generation(void)
{
    pthread_mutex_lock(&S.mu);
    int64_t g = S.snap.generation;
    pthread_mutex_unlock(&S.mu);
    return g;
}

const char *gj_model_sync_replica(void)
{
    return S.replica;
}

int gj_model_sync_serving(void)
{
    return S.serving;
}
