/*
 * routes_oip_logging.c — Triton's logging extension on /v2, mapped onto this server's log
 * (service/base/log.h: JSON lines on stderr above a level threshold):
 *
 *   GET  /v2/logging     admin: {"log_file", "log_info", "log_warning", "log_error",
 *                        "log_verbose_level", "log_format"}
 *   POST /v2/logging     admin: the settings given change (null: unchanged, as Triton);
 *                        the answer is every setting after the change
 *
 * The level is a threshold here: log_error (error lines), log_warning (and warnings),
 * log_info (and info lines), log_verbose_level > 0 (and debug lines; every level above 0
 * is the same debug level). A combination a threshold cannot hold (warnings without errors,
 * info without warnings, verbose without info) is refused (400) rather than half applied.
 * Every line is JSON with an ISO 8601 timestamp, so log_format is "ISO8601" and Triton's
 * "default" (glog's layout) is refused; log_file is "" (stderr) and, as Triton's, cannot be
 * set over the network. Changes apply to the whole process at once.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "service/http/http_server.h"
#include "service/infer/infer.h"
#include "service/infer/oip.h"
#include "service/base/log.h"

#define COMPONENT "oip"

/* The verbose level last set (reported back as given; any value above 0 logs debug). */
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static json_int_t g_verbose = 1;

struct log_flags {
    int info, warning, error;
    json_int_t verbose;
};

static struct log_flags current_flags(void)
{
    enum gj_log_level level = gj_log_level();
    struct log_flags f = { level <= GJ_LOG_INFO, level <= GJ_LOG_WARN, level <= GJ_LOG_ERROR, 0 };
    if (level == GJ_LOG_DEBUG)
        f.verbose = g_verbose;
    return f;
}

static json_t *settings_json(void)
{
    struct log_flags f = current_flags();
    return json_pack("{s:s, s:b, s:b, s:b, s:I, s:s}", "log_file", "", "log_info", f.info, "log_warning",
                     f.warning, "log_error", f.error, "log_verbose_level", f.verbose, "log_format", "ISO8601");
}

static void logging_get(struct gj_req *r)
{
    struct gj_error err = { 0 };
    gj_respond_json(r, 200, oip_log_settings(NULL, "", &err));
}

/* A boolean setting into *flag (null: unchanged). 0, or -1 refused (err). */
static int read_bool(struct gj_error *err, const char *key, json_t *v, int *flag)
{
    if (json_is_null(v))
        return 0;
    if (!json_is_boolean(v)) {
        oip_refuse(err, 400, "'%s' is a boolean", key);
        return -1;
    }
    *flag = json_is_true(v);
    return 0;
}

/* One setting of the request into f. 0, or -1 refused (err). */
static int read_setting(struct gj_error *err, const char *key, json_t *v, struct log_flags *f)
{
    if (strcmp(key, "log_info") == 0)
        return read_bool(err, key, v, &f->info);
    if (strcmp(key, "log_warning") == 0)
        return read_bool(err, key, v, &f->warning);
    if (strcmp(key, "log_error") == 0)
        return read_bool(err, key, v, &f->error);
    if (strcmp(key, "log_verbose_level") == 0) {
        if (!json_is_null(v) && (!json_is_integer(v) || json_integer_value(v) < 0 ||
                                 json_integer_value(v) > (json_int_t)UINT32_MAX)) {
            oip_refuse(err, 400, "'log_verbose_level' is an integer from 0 to 4294967295");
            return -1;
        }
        if (!json_is_null(v))
            f->verbose = json_integer_value(v);
        return 0;
    }
    if (strcmp(key, "log_file") == 0) {
        if (!json_is_null(v)) {
            oip_refuse(err, 501, "log file location can not be updated through network protocol");
            return -1;
        }
        return 0;
    }
    if (strcmp(key, "log_format") == 0) {
        const char *s = json_string_value(v);
        if (json_is_null(v) || (s && strcmp(s, "ISO8601") == 0))
            return 0;
        if (s && strcmp(s, "default") == 0)
            oip_refuse(err, 400, "log_format 'default' (glog's layout) is not written by this server: every "
                      "line is JSON with an ISO 8601 timestamp (log_format ISO8601)");
        else
            oip_refuse(err, 503, "invalid argument for --log_format, got: %s", s ? s : "(not a string)");
        return -1;
    }
    oip_refuse(err, 400, "unknown log setting '%s': the settings are log_file, log_info, log_warning, log_error, "
              "log_verbose_level and log_format", key);
    return -1;
}

/* The level threshold holding f; -1 when none does (refused (err)). */
static int level_of(struct gj_error *err, const struct log_flags *f, enum gj_log_level *level)
{
    if ((f->warning && !f->error) || (f->info && !f->warning) || (f->verbose > 0 && !f->info)) {
        oip_refuse(err, 400, "this server's log level is a threshold: log_warning needs log_error, log_info "
                  "needs log_warning, and a log_verbose_level above 0 needs log_info");
        return -1;
    }
    *level = f->verbose > 0 ? GJ_LOG_DEBUG : f->info ? GJ_LOG_INFO : f->warning ? GJ_LOG_WARN
             : f->error ? GJ_LOG_ERROR : GJ_LOG_OFF;
    return 0;
}

json_t *oip_log_settings(const json_t *body, const char *via, struct gj_error *err)
{
    pthread_mutex_lock(&g_lock);
    struct log_flags f = current_flags();
    const char *key;
    json_t *v;
    enum gj_log_level level;
    json_object_foreach((json_t *)body, key, v) {
        if (read_setting(err, key, v, &f) != 0) {
            pthread_mutex_unlock(&g_lock);
            return NULL;
        }
    }
    if (body && level_of(err, &f, &level) != 0) {
        pthread_mutex_unlock(&g_lock);
        return NULL;
    }
    if (body) {
        if (f.verbose > 0)
            g_verbose = f.verbose;
        gj_log_warn(COMPONENT, "log settings changed through %s: level %s", via,
                    level == GJ_LOG_OFF ? "off" : level == GJ_LOG_DEBUG ? "debug" : level == GJ_LOG_INFO ? "info"
                    : level == GJ_LOG_WARN ? "warn" : "error");   /* written before a quieter level hides it */
        gj_log_set_level(level);
    }
    json_t *o = settings_json();
    pthread_mutex_unlock(&g_lock);
    return o;
}

static void logging_post(struct gj_req *r)
{
    if (!json_is_object(r->json)) {
        oip_error(r, 400, "the log settings are a JSON object, e.g. {\"log_verbose_level\": 1}");
        return;
    }
    struct gj_error err = { 0 };
    json_t *o = oip_log_settings(r->json, "/v2/logging", &err);
    if (o)
        gj_respond_json(r, 200, o);
    else
        oip_error(r, err.status, "%s", err.message);
}

static const struct gj_route logging_routes[] = {
    { "GET", "/v2/logging", GJ_AUTH_ADMIN, GJ_BODY_NONE, NULL, NULL, logging_get, NULL },
    { "POST", "/v2/logging", GJ_AUTH_ADMIN, GJ_BODY_JSON, NULL, NULL, logging_post, NULL },
};
const struct gj_route_table gj_infer_routes_oip_logging = {
    logging_routes, sizeof logging_routes / sizeof logging_routes[0]
};
