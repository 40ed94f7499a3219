/*
 * cmd_client.c — the client a pipeline step calls (issue 15):
 *
 *   gpujobd submit KIND [--params FILE] [--input NAME=FILE|NAME=blob:ID|NAME=job:ID/OUTPUT]...
 *                  [--name N] [--label K=V]... [--callback-url URL] [--timeout SECONDS]
 *                  [--wait] [--out DIR]
 *   gpujobd status ID [--json]     gpujobd wait ID [--out DIR]
 *   gpujobd fetch ID --out DIR     gpujobd cancel ID
 *   gpujobd rerun ID [--wait] [--out DIR]   (the job again, as it was; says whether it reproduced it)
 *
 * each with --server URL, --key-file F, --cacert F, --retries N (environment: GPUJOBD_SERVER,
 * GPUJOBD_API_KEY or GPUJOBD_KEY_FILE, GPUJOBD_CACERT). Files are sent in the submit itself
 * (multipart) under an Idempotency-Key made once per command, so a submit retried after a lost
 * answer never makes a second job.
 *
 * Exit status, which a workflow manager can rely on: 0 the job succeeded (or the command did
 * what it was asked), 1 the job failed or was canceled, 2 bad usage, params or inputs (the
 * server's message on stderr, naming the field), 3 the server could not be reached (or kept
 * answering 5xx) after the retries.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>
#include <curl/curl.h>
#include <jansson.h>

#include "common/fsutil.h"
#include "service/cli/cli.h"
#include "service/cli/client_http.h"
#include "service/jobs/job_state.h"

enum { EXIT_DONE = 0, EXIT_JOB_FAILED = 1, EXIT_USAGE = 2, EXIT_UNREACHABLE = 3 };
#define MAX_INPUTS 64
#define MAX_LABELS 64
#define WAIT_POLL_S "30"

struct opts {
    struct gj_client c;
    const char *cmd;                 /* for messages */
    const char *target;              /* KIND for submit, else the job id */
    const char *params, *name, *callback, *out, *timeout;
    const char *inputs[MAX_INPUTS];
    const char *labels[MAX_LABELS];
    int n_inputs, n_labels, wait, json;
};

/* why NULL: asked for (--help), on stdout, exit 0. */
static int usage(const char *cmd, const char *why)
{
    FILE *to = why ? stderr : stdout;
    if (why)
        fprintf(stderr, "gpujobd %s: %s\n", cmd, why);
    fprintf(to,
            "usage: gpujobd submit KIND [--params FILE] [--input NAME=FILE|NAME=blob:ID|NAME=job:ID/OUTPUT]...\n"
            "                      [--name N] [--label K=V]... [--callback-url URL] [--timeout SECONDS]\n"
            "                      [--wait] [--out DIR]\n"
            "       gpujobd status ID [--json] | wait ID [--out DIR] | fetch ID --out DIR | cancel ID\n"
            "       gpujobd rerun ID [--wait] [--out DIR]\n"
            "options of each: --server URL --key-file FILE --cacert FILE --retries N\n"
            "  (GPUJOBD_SERVER, GPUJOBD_API_KEY or GPUJOBD_KEY_FILE, GPUJOBD_CACERT)\n"
            "exit: 0 succeeded, 1 failed or canceled, 2 bad usage/params/inputs, 3 server unreachable\n");
    return why ? EXIT_USAGE : -1;
}

/* The key: the first line of the file, or the variable. 0, or -1 (said why). */
static int read_key(struct opts *o, const char *key_file)
{
    const char *env = getenv("GPUJOBD_API_KEY");
    if (!key_file && env && *env) {
        snprintf(o->c.key, sizeof o->c.key, "%s", env);
        return 0;
    }
    key_file = key_file ? key_file : getenv("GPUJOBD_KEY_FILE");
    if (!key_file || !*key_file) {
        fprintf(stderr, "gpujobd %s: no API key: give --key-file, GPUJOBD_KEY_FILE or GPUJOBD_API_KEY\n", o->cmd);
        return -1;
    }
    char *text = NULL;
    size_t len = 0;
    if (gj_read_file(key_file, 4096, &text, &len) != 0) {
        fprintf(stderr, "gpujobd %s: cannot read the key file %s: %s\n", o->cmd, key_file, strerror(errno));
        return -1;
    }
    text[strcspn(text, "\r\n")] = '\0';
    snprintf(o->c.key, sizeof o->c.key, "%s", text);
    free(text);
    return o->c.key[0] ? 0 : -1;
}

static int take_list(const char **list, int *n, int max, const char *v)
{
    if (*n >= max)
        return -1;
    list[(*n)++] = v;
    return 0;
}

/* One option at argv[*i]; 0, or -1 unknown or missing its value. */
static int parse_opt(struct opts *o, int argc, char **argv, int *i, const char **key_file)
{
    const char *a = argv[*i];
    if (!strcmp(a, "--wait") || !strcmp(a, "--json")) {
        *(a[2] == 'w' ? &o->wait : &o->json) = 1;
        return 0;
    }
    if (*i + 1 >= argc)
        return -1;
    const char *v = argv[++*i];
    if (!strcmp(a, "--server"))
        snprintf(o->c.server, sizeof o->c.server, "%s", v);
    else if (!strcmp(a, "--cacert"))
        snprintf(o->c.cacert, sizeof o->c.cacert, "%s", v);
    else if (!strcmp(a, "--key-file"))
        *key_file = v;
    else if (!strcmp(a, "--retries"))
        o->c.retries = atoi(v) < 0 ? 0 : atoi(v) > 20 ? 20 : atoi(v);
    else if (!strcmp(a, "--params"))
        o->params = v;
    else if (!strcmp(a, "--name"))
        o->name = v;
    else if (!strcmp(a, "--callback-url"))
        o->callback = v;
    else if (!strcmp(a, "--timeout"))
        o->timeout = v;
    else if (!strcmp(a, "--out"))
        o->out = v;
    else if (!strcmp(a, "--input"))
        return take_list(o->inputs, &o->n_inputs, MAX_INPUTS, v);
    else if (!strcmp(a, "--label"))
        return take_list(o->labels, &o->n_labels, MAX_LABELS, v);
    else
        return -1;
    return 0;
}

static int parse(struct opts *o, int argc, char **argv)
{
    const char *key_file = NULL, *env;
    o->cmd = argv[0];
    o->c.retries = 5;
    if ((env = getenv("GPUJOBD_SERVER")))
        snprintf(o->c.server, sizeof o->c.server, "%s", env);
    if ((env = getenv("GPUJOBD_CACERT")))
        snprintf(o->c.cacert, sizeof o->c.cacert, "%s", env);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
            return usage(o->cmd, NULL);
        if (argv[i][0] != '-' && !o->target)
            o->target = argv[i];
        else if (parse_opt(o, argc, argv, &i, &key_file) != 0) {
            char why[200];
            snprintf(why, sizeof why, "unknown option, or one missing its value: %.100s", argv[i]);
            return usage(o->cmd, why);
        }
    }
    size_t sl = strlen(o->c.server);
    while (sl > 0 && o->c.server[sl - 1] == '/')
        o->c.server[--sl] = '\0';
    if (!o->target)
        return usage(o->cmd, strcmp(o->cmd, "submit") ? "which job? give its id" : "which kind?");
    if (!sl)
        return usage(o->cmd, "no server: give --server URL or GPUJOBD_SERVER");
    return read_key(o, key_file) == 0 ? 0 : EXIT_USAGE;
}

/* What a call that got no usable answer means for the exit status, said on stderr. */
static int report(const struct opts *o, int rc, const struct gj_client_resp *r)
{
    if (rc != 0 || r->status >= 500 || r->status == 0) {
        fprintf(stderr, "gpujobd %s: the server %s cannot be reached: %s\n", o->cmd, o->c.server,
                rc != 0 ? r->error : r->status ? "it answers with an error (5xx)" : r->error);
        return EXIT_UNREACHABLE;
    }
    json_t *p = r->body ? json_loads(r->body, 0, NULL) : NULL;
    const char *field = json_string_value(json_object_get(p, "field"));
    const char *detail = json_string_value(json_object_get(p, "detail"));
    fprintf(stderr, "gpujobd %s: %s%s%s (HTTP %ld)\n", o->cmd, field ? field : "", field ? ": " : "",
            detail ? detail : "the server refused the request", r->status);
    json_decref(p);
    return EXIT_USAGE;
}

/* GET path as JSON into *out. 0, or an exit status (said). */
static int get_json(const struct opts *o, const char *path, json_t **out)
{
    struct gj_client_resp r;
    int rc = gj_client_call(&o->c, "GET", path, NULL, NULL, 0, NULL, NULL, &r);
    if (rc != 0 || r.status != 200) {
        rc = report(o, rc, &r);
        gj_client_resp_free(&r);
        return rc;
    }
    *out = json_loads(r.body ? r.body : "", 0, NULL);
    gj_client_resp_free(&r);
    if (!*out) {
        fprintf(stderr, "gpujobd %s: the server's answer is not JSON\n", o->cmd);
        return EXIT_UNREACHABLE;
    }
    return 0;
}

/* ---- fetch ---------------------------------------------------------------------------- */

static int fetch_outputs(const struct opts *o, const char *id, const char *dir)
{
    char path[300];
    json_t *list = NULL;
    snprintf(path, sizeof path, "/v1/jobs/%s/outputs", id);
    int rc = get_json(o, path, &list);
    if (rc)
        return rc;
    if (gj_mkdir_p(dir, 0755) != 0) {
        fprintf(stderr, "gpujobd %s: cannot make %s: %s\n", o->cmd, dir, strerror(errno));
        json_decref(list);
        return EXIT_USAGE;
    }
    size_t i;
    json_t *out;
    json_array_foreach(json_object_get(list, "outputs"), i, out) {
        const char *name = json_string_value(json_object_get(out, "name"));
        char file[2048], url[600];
        if (!name || !gj_safe_name(name) || gj_path_join(file, sizeof file, dir, name) != 0)
            continue;                 /* never written outside dir */
        snprintf(url, sizeof url, "/v1/jobs/%s/outputs/%s", id, name);
        struct gj_client_resp r;
        int crc = gj_client_call(&o->c, "GET", url, NULL, NULL, 0, NULL, file, &r);
        if (crc != 0 || r.status != 200 || r.error[0]) {
            rc = crc != 0 || r.status != 200 ? report(o, crc, &r) : EXIT_USAGE;
            if (r.error[0] && crc == 0 && r.status == 200)
                fprintf(stderr, "gpujobd %s: %s\n", o->cmd, r.error);
        }
        gj_client_resp_free(&r);
        if (rc)
            break;
    }
    json_decref(list);
    return rc;
}

/* ---- wait ----------------------------------------------------------------------------- */

static void show(const char *id, const char *state, double progress, const char *last_state, int tty)
{
    if (tty) {
        int filled = (int)(progress * 30 + 0.5);
        fprintf(stderr, "\r%s [%.*s%*s] %3d%% %-9s", id, filled, "##############################", 30 - filled, "",
                (int)(progress * 100 + 0.5), state);
    } else if (strcmp(state, last_state) != 0) {
        fprintf(stderr, "job %s: %s\n", id, state);
    }
}

static int settle(const struct opts *o, const char *id, json_t *job)
{
    const char *state = json_string_value(json_object_get(job, "state"));
    const char *reproduced = json_string_value(json_object_get(job, "reproduced"));
    if (reproduced)   /* a rerun: what POST /v1/jobs/{id}/rerun compared */
        fprintf(stderr, "gpujobd %s: job %s reproduced job %s: %s\n", o->cmd, id,
                json_string_value(json_object_get(job, "rerun_of")), reproduced);
    if (!strcmp(state, "succeeded"))
        return o->out ? fetch_outputs(o, id, o->out) : EXIT_DONE;
    json_t *err = json_object_get(job, "error");
    const char *field = json_string_value(json_object_get(err, "field"));
    const char *msg = json_string_value(json_object_get(err, "message"));
    fprintf(stderr, "gpujobd %s: job %s %s%s%s%s%s\n", o->cmd, id, state, msg ? ": " : "", field && *field ? field : "",
            field && *field ? ": " : "", msg ? msg : "");
    return EXIT_JOB_FAILED;
}

static int wait_job(const struct opts *o, const char *id)
{
    char path[300], last[16] = "";
    int tty = isatty(STDERR_FILENO);
    for (;;) {
        json_t *job = NULL;
        /* the first look is immediate (the long poll returns once the state differs) */
        snprintf(path, sizeof path, last[0] ? "/v1/jobs/%s?wait=" WAIT_POLL_S : "/v1/jobs/%s", id);
        int rc = get_json(o, path, &job);
        if (rc)
            return rc;
        const char *state = json_string_value(json_object_get(job, "state"));
        if (!state) {
            json_decref(job);
            fprintf(stderr, "gpujobd %s: the server's answer has no state\n", o->cmd);
            return EXIT_UNREACHABLE;
        }
        show(id, state, json_number_value(json_object_get(job, "progress")), last, tty);
        snprintf(last, sizeof last, "%s", state);
        if (gj_job_public_final(state)) {
            if (tty)
                fputc('\n', stderr);
            rc = settle(o, id, job);
            json_decref(job);
            return rc;
        }
        json_decref(job);
    }
}

/* ---- submit --------------------------------------------------------------------------- */

/* --input NAME=... into the job's inputs or a file part. 0, or -1 (said). */
static int add_input(const struct opts *o, const char *arg, json_t *inputs, struct gj_client_part *parts,
                     size_t *n_parts, char *names, size_t name_cap)
{
    const char *eq = strchr(arg, '=');
    size_t nl = eq ? (size_t)(eq - arg) : 0;
    if (!eq || nl == 0 || nl >= name_cap || !eq[1]) {
        fprintf(stderr, "gpujobd %s: --input wants NAME=FILE, NAME=blob:ID or NAME=job:ID/OUTPUT (got '%s')\n",
                o->cmd, arg);
        return -1;
    }
    memcpy(names, arg, nl);
    names[nl] = '\0';
    const char *v = eq + 1, *slash = strchr(v, '/');
    if (!strncmp(v, "blob:", 5))
        return json_object_set_new(inputs, names, json_string(v + 5));
    if (!strncmp(v, "job:", 4) && slash) {
        json_t *ref = json_pack("{s:s%, s:s}", "job", v + 4, (size_t)(slash - v - 4), "output", slash + 1);
        return json_object_set_new(inputs, names, ref);
    }
    if (access(v, R_OK) != 0) {
        fprintf(stderr, "gpujobd %s: --input %s: cannot read %s: %s\n", o->cmd, names, v, strerror(errno));
        return -1;
    }
    parts[(*n_parts)++] = (struct gj_client_part){ .name = names, .path = v };
    return 0;
}

static json_t *labels_of(const struct opts *o)
{
    json_t *l = json_object();
    for (int i = 0; l && i < o->n_labels; i++) {
        const char *eq = strchr(o->labels[i], '=');
        if (!eq || eq == o->labels[i]) {
            fprintf(stderr, "gpujobd %s: --label wants KEY=VALUE (got '%s')\n", o->cmd, o->labels[i]);
            json_decref(l);
            return NULL;
        }
        char key[256];
        snprintf(key, sizeof key, "%.*s", (int)(eq - o->labels[i]), o->labels[i]);
        json_object_set_new(l, key, json_string(eq + 1));
    }
    return l;
}

/* --timeout as the job's timeout_seconds (the server checks its range). 0, or -1 said. */
static int timeout_of(const struct opts *o, json_t *job)
{
    char *end;
    errno = 0;
    long long t = strtoll(o->timeout, &end, 10);
    if (errno || end == o->timeout || *end || t < 0) {
        fprintf(stderr, "gpujobd %s: --timeout %s: a whole number of seconds (0: no limit)\n", o->cmd, o->timeout);
        return -1;
    }
    json_object_set_new(job, "timeout_seconds", json_integer(t));
    return 0;
}

/* The job JSON (params, refs, name, labels, timeout); NULL (said) on a bad file or option. */
static json_t *job_of(const struct opts *o, json_t *inputs)
{
    json_error_t e;
    json_t *params = o->params ? json_load_file(o->params, JSON_REJECT_DUPLICATES, &e) : json_object();
    if (!params) {
        fprintf(stderr, "gpujobd %s: --params %s: %s (line %d)\n", o->cmd, o->params, e.text, e.line);
        return NULL;
    }
    json_t *labels = labels_of(o);
    json_t *job = labels ? json_pack("{s:s, s:o, s:O}", "kind", o->target, "params", params, "inputs", inputs)
                         : (json_decref(params), NULL);
    if (job && o->n_labels)
        json_object_set(job, "labels", labels);
    if (job && o->name)
        json_object_set_new(job, "name", json_string(o->name));
    if (job && o->callback)
        json_object_set_new(job, "callback_url", json_string(o->callback));
    json_decref(labels);
    if (job && o->timeout && timeout_of(o, job) != 0) {
        json_decref(job);
        return NULL;
    }
    return job;
}

static void idempotency_key(char out[33])
{
    unsigned char b[16] = { 0 };
    if (getrandom(b, sizeof b, 0) != (ssize_t)sizeof b) {
        for (size_t i = 0; i < sizeof b; i++)
            b[i] = (unsigned char)(rand() ^ getpid());
    }
    for (size_t i = 0; i < sizeof b; i++)
        snprintf(out + 2 * i, 3, "%02x", b[i]);
}

/* Sends the job; its id into id. 0, or an exit status (said). */
static int send_job(const struct opts *o, json_t *job, struct gj_client_part *parts, size_t n_parts, char id[64])
{
    char *text = json_dumps(job, JSON_COMPACT), key[33];
    if (!text)
        return EXIT_USAGE;
    idempotency_key(key);
    struct gj_client_resp r;
    int rc;
    if (n_parts) {
        parts[n_parts] = (struct gj_client_part){ .name = "job", .data = text };
        rc = gj_client_call(&o->c, "POST", "/v1/jobs", NULL, parts, n_parts + 1, key, NULL, &r);
    } else {
        rc = gj_client_call(&o->c, "POST", "/v1/jobs", text, NULL, 0, key, NULL, &r);
    }
    free(text);
    json_t *ans = rc == 0 && (r.status == 200 || r.status == 201) ? json_loads(r.body ? r.body : "", 0, NULL) : NULL;
    const char *jid = json_string_value(json_object_get(ans, "id"));
    if (jid)
        snprintf(id, 64, "%s", jid);
    else
        rc = ans ? EXIT_UNREACHABLE : report(o, rc, &r);
    json_decref(ans);
    gj_client_resp_free(&r);
    return jid ? 0 : rc ? rc : EXIT_UNREACHABLE;
}

static int submit(const struct opts *o)
{
    static char names[MAX_INPUTS][128];
    struct gj_client_part parts[MAX_INPUTS + 1];
    size_t n_parts = 0;
    json_t *inputs = json_object(), *job = NULL;
    int rc = EXIT_USAGE;
    for (int i = 0; i < o->n_inputs; i++)
        if (add_input(o, o->inputs[i], inputs, parts, &n_parts, names[i], sizeof names[i]) != 0)
            goto out;
    if (!(job = job_of(o, inputs)))
        goto out;
    char id[64];
    if ((rc = send_job(o, job, parts, n_parts, id)) != 0)
        goto out;
    printf("%s\n", id);
    fflush(stdout);
    rc = o->wait ? wait_job(o, id) : EXIT_DONE;
out:
    json_decref(job);
    json_decref(inputs);
    return rc;
}

/* ---- status, cancel ------------------------------------------------------------------- */

static int status(const struct opts *o)
{
    char path[300];
    json_t *job = NULL;
    snprintf(path, sizeof path, "/v1/jobs/%s", o->target);
    int rc = get_json(o, path, &job);
    if (rc)
        return rc;
    if (o->json)
        json_dumpf(job, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    else
        fputs(json_string_value(json_object_get(job, "state")) ? json_string_value(json_object_get(job, "state"))
                                                                 : "unknown", stdout);
    putchar('\n');
    json_decref(job);
    return EXIT_DONE;
}

static int cancel(const struct opts *o)
{
    char path[300];
    snprintf(path, sizeof path, "/v1/jobs/%s/cancel", o->target);
    struct gj_client_resp r;
    int rc = gj_client_call(&o->c, "POST", path, NULL, NULL, 0, NULL, NULL, &r);
    if (rc != 0 || r.status / 100 != 2)
        rc = report(o, rc, &r);
    gj_client_resp_free(&r);
    return rc;
}

/* POST /v1/jobs/ID/rerun: prints the new job's id, then waits for it with --wait. */
static int rerun(const struct opts *o)
{
    char path[300];
    snprintf(path, sizeof path, "/v1/jobs/%s/rerun", o->target);
    char key[33];
    idempotency_key(key);   /* a retry after a lost answer gets the same rerun, not a second one */
    struct gj_client_resp r;
    int rc = gj_client_call(&o->c, "POST", path, NULL, NULL, 0, key, NULL, &r);
    if (rc != 0 || (r.status != 201 && r.status != 200)) {
        rc = report(o, rc, &r);
        gj_client_resp_free(&r);
        return rc;
    }
    json_t *job = json_loads(r.body ? r.body : "", 0, NULL);
    gj_client_resp_free(&r);
    const char *id = json_string_value(json_object_get(job, "id"));
    if (!id) {
        json_decref(job);
        fprintf(stderr, "gpujobd %s: the server's answer names no job\n", o->cmd);
        return EXIT_UNREACHABLE;
    }
    printf("%s\n", id);
    fflush(stdout);
    rc = o->wait || o->out ? wait_job(o, id) : EXIT_DONE;
    json_decref(job);
    return rc;
}

int gj_cmd_client(int argc, char **argv)
{
    struct opts o = { 0 };
    int rc = parse(&o, argc, argv);
    if (rc)
        return rc < 0 ? EXIT_DONE : rc;
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        fprintf(stderr, "gpujobd %s: libcurl could not start\n", o.cmd);
        return EXIT_UNREACHABLE;
    }
    if (!strcmp(o.cmd, "submit"))
        rc = submit(&o);
    else if (!strcmp(o.cmd, "status"))
        rc = status(&o);
    else if (!strcmp(o.cmd, "wait"))
        rc = wait_job(&o, o.target);
    else if (!strcmp(o.cmd, "fetch"))
        rc = o.out ? fetch_outputs(&o, o.target, o.out) : usage(o.cmd, "fetch needs --out DIR");
    else if (!strcmp(o.cmd, "rerun"))
        rc = rerun(&o);
    else
        rc = cancel(&o);
    curl_global_cleanup();
    return rc;
}
