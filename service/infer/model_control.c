/*
 * model_control.c — Triton's model control modes over the shared model store
 * (--model-control-mode, --load-model, --repository-poll-secs; infer.h).
 *
 *   on-use    (the default, this server's own) a version loads on its first use or when
 *             asked (POST /v1/models/{m}/load, /v2/repository/models/{m}/load);
 *   none      every version in the store is asked to load at start (its desired state
 *             'loaded': the replicas that run models load it); use never loads;
 *   explicit  at start only the --load-model models (every one for '*'); the others load
 *             only when asked; use never loads;
 *   poll      as none, and the seed directory (--models-dir) is read again every
 *             --repository-poll-secs: new, changed and removed versions reach the store
 *             (model_seeds_poll.c) and what is new or changed is asked to load.
 *
 * A load is a desired state in the store that every replica shares, so a replica starting
 * asks for loads without undoing what was asked before (a version asked to load stays
 * asked). Which of load and unload requests are refused in each mode is the routes'
 * business (gj_infer_model_control).
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "service/db/db.h"
#include "service/infer/infer_repo.h"
#include "service/infer/model_control.h"
#include "service/infer/model_sync.h"
#include "service/infer/model_seeds.h"
#include "service/infer/model_store.h"
#include "service/base/log.h"
#include "service/server.h"

#define COMPONENT "models"

static struct {
    char mode[16];
    char load[1024];           /* --load-model: comma-separated names, '*' every one */
    char *url, *seed_dir;
    int poll_secs;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t thread;
    int running, stop;
    gj_seed_memory *mem;
} C = { .mode = "on-use", .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER };

const char *gj_infer_model_control(void)
{
    return C.mode;
}

/* 1 when name is in the comma-separated list (or the list holds '*'). */
static int named(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = list; *p;) {
        while (*p == ',' || *p == ' ')
            p++;
        size_t len = strcspn(p, ",");
        while (len && p[len - 1] == ' ')
            len--;
        if ((len == 1 && *p == '*') || (len == n && len && strncmp(p, name, n) == 0))
            return 1;
        p += strcspn(p, ",");
    }
    return 0;
}

/* Whether a version is to be asked to load: the models the mode loads, versions not asked
 * yet; at start an unloaded one too (none and poll load everything; explicit what it is
 * told); a changed model's versions again (their requested_at moves, so every replica
 * loads the new files). */
static int to_load(const struct gj_ms_model *m, const struct gj_ms_version *v, int at_start)
{
    int ours = strcmp(C.mode, "explicit") != 0 || named(C.load, m->name);
    if (!ours)
        return 0;
    if (v->desired == GJ_DESIRED_AVAILABLE)
        return 1;
    if (v->desired == GJ_DESIRED_UNLOADED)
        return at_start;
    return C.mem && gj_seed_memory_changed(C.mem, m->name);
}

/* Asks for the loads the mode wants. 0, or -1 (database). */
static int request_loads(PGconn *conn, int at_start)
{
    struct gj_ms_snapshot snap;
    if (gj_model_store_read(conn, &snap) != 0)
        return -1;
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < snap.n_models; i++)
        for (size_t j = 0; rc == 0 && j < snap.models[i].n_versions; j++) {
            const struct gj_ms_version *v = &snap.models[i].versions[j];
            if (to_load(&snap.models[i], v, at_start) &&
                gj_model_store_set_desired(conn, snap.models[i].name, v->version, GJ_DESIRED_LOADED, NULL) < 0)
                rc = -1;
        }
    /* --load-model names the store does not have: said once, at start. */
    for (const char *p = C.load; at_start && strcmp(C.mode, "explicit") == 0 && *p;) {
        p += strspn(p, " ");
        size_t len = strcspn(p, ",");
        while (len && p[len - 1] == ' ')
            len--;
        char name[GJ_MODEL_NAME_MAX];
        snprintf(name, sizeof name, "%.*s", (int)(len < sizeof name ? len : sizeof name - 1), p);
        if (strcmp(name, "*") != 0 && name[0] && !gj_model_store_find(&snap, name))
            gj_log_error(COMPONENT, "--load-model %s: there is no such model (in the model store, or in %s)", name, C.seed_dir);
        p += strcspn(p, ",");
        p += *p == ',';
    }
    gj_model_store_snapshot_free(&snap);
    return rc;
}

static int stopping_wait(int secs)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += secs;
    pthread_mutex_lock(&C.mu);
    while (!C.stop && pthread_cond_timedwait(&C.cv, &C.mu, &until) != ETIMEDOUT)
        ;
    int stop = C.stop;
    pthread_mutex_unlock(&C.mu);
    return stop;
}

static void *poll_main(void *arg)
{
    (void)arg;
    PGconn *conn = NULL;
    while (!stopping_wait(C.poll_secs)) {
        if (!conn && !(conn = gj_db_connect(C.url)))
            continue;
        if (gj_model_store_poll_seeds(conn, C.seed_dir, C.mem) != 0 || request_loads(conn, 0) != 0) {
            gj_log_warn(COMPONENT, "poll of %s failed: tried again in %d s", C.seed_dir, C.poll_secs);
            PQfinish(conn);
            conn = NULL;
        }
    }
    PQfinish(conn);
    return NULL;
}

int gj_infer_model_control_start(const struct gj_server *srv, const char *seed_dir)
{
    snprintf(C.mode, sizeof C.mode, "%s", srv->cfg.model_control_mode[0] ? srv->cfg.model_control_mode : "on-use");
    snprintf(C.load, sizeof C.load, "%s", srv->cfg.load_models);
    C.poll_secs = srv->cfg.repository_poll_secs > 0 ? srv->cfg.repository_poll_secs : 15;
    C.stop = 0;
    if (strcmp(C.mode, "on-use") == 0)
        return 0;
    C.url = strdup(srv->database_url);
    C.seed_dir = strdup(seed_dir);
    int poll = strcmp(C.mode, "poll") == 0;
    if (!C.url || !C.seed_dir || (poll && !(C.mem = gj_seed_memory_new())))
        return -1;
    PGconn *conn = gj_db_connect(C.url);
    /* poll: a first pass remembers what the directory holds (the import just made). */
    int rc = conn && (!poll || gj_model_store_poll_seeds(conn, C.seed_dir, C.mem) == 0) &&
             request_loads(conn, 1) == 0 ? 0 : -1;
    PQfinish(conn);
    if (rc != 0) {
        gj_log_error(COMPONENT, "--model-control-mode %s: the loads it asks for could not be recorded", C.mode);
        return -1;
    }
    if (poll)
        gj_log_info(COMPONENT, "model control mode poll: %s is read again every %d s", C.seed_dir, C.poll_secs);
    else
        gj_log_info(COMPONENT, "model control mode %s", C.mode);
    if (poll && (rc = pthread_create(&C.thread, NULL, poll_main, NULL)) != 0) {
        gj_log_error(COMPONENT, "poll thread: %s", strerror(rc));
        return -1;
    }
    C.running = poll;
    return 0;
}

void gj_infer_model_control_stop(void)
{
    pthread_mutex_lock(&C.mu);
    C.stop = 1;
    pthread_cond_broadcast(&C.cv);
    pthread_mutex_unlock(&C.mu);
    if (C.running)
        pthread_join(C.thread, NULL);
    C.running = 0;
    gj_seed_memory_free(C.mem);
    free(C.url);
    free(C.seed_dir);
    C.mem = NULL;
    C.url = C.seed_dir = NULL;
}

/* ---- explicit load and unload: desired states in the shared store ---- */

/* How long an answer waits for this replica to apply a change it made. */
#define APPLY_WAIT_MS 60000

/* This replica applies what it just changed in the store before it answers. */
void gj_infer_model_apply(void)
{
    if (gj_model_sync_now(APPLY_WAIT_MS) != 0)
        gj_log_warn(COMPONENT, "the model store's change is not applied here yet (the answer may lag)");
}

/* 1 when the model is in the repository and, for v > 0, has that version. */
int gj_infer_model_known(gj_model_repo *repo, const char *name, int64_t v)
{
    size_t n = 0;
    struct gj_error err = { 0 };
    struct gj_model_version_info *vs = calloc(GJ_MODEL_MAX_VERSIONS, sizeof *vs);
    int found = vs && gj_model_repo_versions(repo, name, vs, GJ_MODEL_MAX_VERSIONS, &n, &err) == 0;
    if (found && v > 0) {
        found = 0;
        for (size_t i = 0; i < n && i < GJ_MODEL_MAX_VERSIONS; i++)
            found |= vs[i].version == v;
    }
    free(vs);
    return found;
}

/* 1 when the model's version_policy serves the version (the config as the repository
 * has it). */
static int policy_serves(gj_model_repo *repo, const char *name, int64_t version)
{
    struct gj_model_config cfg;
    struct gj_error err = { 0 };
    struct gj_model_version_info *vs = calloc(GJ_MODEL_MAX_VERSIONS, sizeof *vs);
    int64_t *all = calloc(GJ_MODEL_MAX_VERSIONS, sizeof *all);
    size_t n = 0;
    int serves = 1;
    if (vs && all && gj_model_repo_config(repo, name, version, &cfg, &err) == 0 &&
        gj_model_repo_versions(repo, name, vs, GJ_MODEL_MAX_VERSIONS, &n, &err) == 0) {
        for (size_t i = 0; i < n && i < GJ_MODEL_MAX_VERSIONS; i++)
            all[i] = vs[i].version;
        serves = gj_model_policy_serves(&cfg, all, n < GJ_MODEL_MAX_VERSIONS ? n : GJ_MODEL_MAX_VERSIONS, version);
    }
    gj_model_config_free(&cfg);
    free(vs);
    free(all);
    return serves;
}

/* Sets err's status and returns -1. */
static int fail(struct gj_error *err, int status, const char *field, const char *fmt, const char *name,
                int64_t v)
{
    gj_error_set(err, field, fmt, name, v);
    err->status = status;
    return -1;
}

/* The version a load or unload names (version > 0, else the model's default) once this
 * replica has applied what other replicas changed a moment ago; -1 with err 404. */
static int64_t resolve_known(gj_model_repo *repo, const char *name, int64_t v, struct gj_error *err)
{
    gj_infer_model_apply();
    int64_t resolved = gj_infer_model_known(repo, name, v) ? gj_model_repo_resolve(repo, name, v, err) : -1;
    if (resolved < 0)
        return fail(err, 404, "name", v > 0 ? "unknown model '%s' version %" PRId64 : "unknown model '%s'", name,
                    v);
    return resolved;
}

int gj_infer_model_load(PGconn *conn, const char *name, int64_t version, int64_t *loaded, struct gj_error *err)
{
    gj_model_repo *repo = gj_infer_repo();
    if (!repo)
        return fail(err, 503, "", "the model repository is not available", "", 0);
    int64_t v = *loaded = resolve_known(repo, name, version, err);
    if (v < 0)
        return -1;
    if (!policy_serves(repo, name, v))
        return fail(err, 409, "version", "model '%s' version %" PRId64 " is outside the model's version_policy "
                    "(config.json): it is never loaded", name, v);
    int found = gj_model_store_set_desired(conn, name, v, GJ_DESIRED_LOADED, NULL);
    if (found <= 0)
        return found == 0 ? fail(err, 404, "name", "unknown model '%s' version %" PRId64, name, v)
                          : fail(err, 503, "", "the database is not available; retry shortly", "", 0);
    if (gj_model_sync_serving() && gj_model_sync_place(name, v, err) != 0) {
        gj_infer_model_apply();
        if (err->status != 503)
            err->status = 422;
        else if (!err->field[0])
            snprintf(err->field, sizeof err->field, "model");   /* not the database's 503 */
        return -1;
    }
    gj_infer_model_apply();
    return 0;
}

int gj_infer_model_unload(PGconn *conn, const char *name, int64_t version, int64_t *unloaded,
                          struct gj_error *err)
{
    gj_model_repo *repo = gj_infer_repo();
    if (!repo)
        return fail(err, 503, "", "the model repository is not available", "", 0);
    int64_t v = *unloaded = resolve_known(repo, name, version, err);
    if (v < 0)
        return -1;
    enum gj_model_desired before = GJ_DESIRED_AVAILABLE;
    int found = gj_model_store_set_desired(conn, name, v, GJ_DESIRED_UNLOADED, &before);
    if (found <= 0)
        return found == 0 ? fail(err, 404, "name", "unknown model '%s' version %" PRId64, name, v)
                          : fail(err, 503, "", "the database is not available; retry shortly", "", 0);
    if (before == GJ_DESIRED_UNLOADED)
        return fail(err, 409, "version", "model '%s' version %" PRId64 " is not loaded: it is unloaded already",
                    name, v);
    gj_infer_model_apply();   /* its batchers, and their device memory, are gone here */
    gj_log_info(COMPONENT, "model %s version %" PRId64 " unloaded", name, v);
    return 0;
}
