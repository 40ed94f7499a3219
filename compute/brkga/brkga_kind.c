/*
 * brkga_kind.c — the `brkga` job kind: parameters (JSON, or the thesis's Params.xml),
 * inputs, the run, and the outputs result.json, results.xml, statistics.csv and
 * convergence.svg. See compute/brkga/README.md for the formats.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <expat.h>

#include "gj_config.h"
#include "common/fsutil.h"
#include "common/gj_kind.h"
#include "brkga/brkga_engine.h"
#include "brkga/brkga_gpu.h"
#include "brkga/brkga_kind.h"
#include "brkga/brkga_net.h"
#include "brkga/brkga_tsp.h"

#define BK_MAX_INPUT (64u << 20)

static const char brkga_schema[] =
    "{\"$schema\":\"https://json-schema.org/draft/2020-12/schema\","
    "\"type\":\"object\",\"additionalProperties\":false,"
    "\"properties\":{"
    "\"decoder\":{\"enum\":[\"network\",\"tsp\"],\"description\":\"network (IP/MPLS over WSON, inputs "
    "network + demands) or tsp (input tsp); default network\"},"
    "\"sense\":{\"enum\":[\"minimize\",\"maximize\"]},"
    "\"population_factor\":{\"type\":\"number\",\"description\":\"a: p = a * genes (thesis Individuals)\"},"
    "\"max_population\":{\"type\":\"integer\",\"description\":\"cap of p (thesis MaxIndividuals)\"},"
    "\"population_size\":{\"type\":\"integer\",\"description\":\"fixed p (overrides factor and cap)\"},"
    "\"elites\":{\"type\":\"number\",\"description\":\"fraction of p kept as elites\"},"
    "\"mutants\":{\"type\":\"number\",\"description\":\"fraction of p replaced by mutants\"},"
    "\"inheritance_prob\":{\"type\":\"number\",\"description\":\"probability a gene comes from the elite parent, (0.5, 1]\"},"
    "\"primary_stop\":{\"type\":\"string\",\"description\":\"generations, generations_without_improvement, time, time_without_improvement, target, none\"},"
    "\"secondary_stop\":{\"type\":\"string\"},"
    "\"max_generations\":{\"type\":\"integer\",\"minimum\":0},"
    "\"max_generations_without_improvement\":{\"type\":\"integer\",\"minimum\":1},"
    "\"max_time_s\":{\"type\":\"number\",\"minimum\":0},"
    "\"max_time_without_improvement_s\":{\"type\":\"number\",\"minimum\":0},"
    "\"target_value\":{\"type\":\"number\"},"
    "\"seed\":{\"type\":\"integer\",\"minimum\":0},"
    "\"populations\":{\"type\":\"integer\"},"
    "\"exchange_interval\":{\"type\":\"integer\",\"minimum\":0},"
    "\"exchange_count\":{\"type\":\"integer\",\"minimum\":0},"
    "\"reset_after\":{\"type\":\"integer\",\"minimum\":0},"
    "\"initial_chromosomes\":{\"type\":\"array\",\"maxItems\":100000,\"items\":{\"type\":\"array\","
    "\"items\":{\"type\":\"number\",\"minimum\":0,\"maximum\":1}}},"
    "\"max_access_transit_links\":{\"type\":\"integer\",\"description\":\"maxVEdgesA_T\"},"
    "\"k_paths\":{\"type\":\"integer\",\"description\":\"numKSPRoutes\"},"
    "\"max_optical_path_length\":{\"type\":\"number\",\"description\":\"maxOPathLength; 0 unlimited\"},"
    "\"local_search\":{\"enum\":[\"none\",\"2opt\"]},"
    "\"known_optimum\":{\"type\":\"number\",\"description\":\"tsp: reported gap is measured against it\"},"
    "\"stats_interval\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":1000000},"
    "\"time_limit_s\":{\"type\":\"number\",\"minimum\":0.001,\"maximum\":86400},"
    "\"threads\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":256}"
    "}}";

static const struct gj_input_spec brkga_inputs[] = {
    { "network", 0, 0, "Network.xml (thesis format) or network JSON: nodes, edges, total_bw_per_link" },
    { "demands", 0, 0, "Demands.xml (thesis format) or demands JSON" },
    { "params", 0, 0, "optional Params.xml (thesis format); JSON params override its values" },
    { "tsp", 0, 0, "TSPLIB file (EUC_2D or ATT) for decoder tsp" },
};

/* ------------------------------------------------------------------ */
/* Parameters                                                          */

static int get_num(json_t *p, const char *k, double *out, struct gj_error *err)
{
    json_t *v = json_object_get(p, k);
    if (!v)
        return 0;
    if (!json_is_number(v))
        return gj_error_set(err, k, "%s must be a number", k);
    *out = json_number_value(v);
    if (!isfinite(*out))
        return gj_error_set(err, k, "%s must be finite", k);
    return 0;
}

static int get_int(json_t *p, const char *k, long long *out, long long lo, long long hi,
                   struct gj_error *err)
{
    json_t *v = json_object_get(p, k);
    if (!v)
        return 0;
    if (!json_is_integer(v))
        return gj_error_set(err, k, "%s must be an integer", k);
    long long x = json_integer_value(v);
    if (x < lo || x > hi)
        return gj_error_set(err, k, "%s is %lld; it must be in %lld..%lld", k, x, lo, hi);
    *out = x;
    return 0;
}

int brkga_cfg_read(json_t *p, struct brkga_cfg *c, struct gj_error *err)
{
    memset(c, 0, sizeof *c);
    c->pop_factor = 4.0;
    c->max_pop = 4096;
    c->elites = 0.3;
    c->mutants = 0.2;
    c->rhoe = 0.65;
    c->primary = BRKGA_STOP_GENERATIONS;
    c->secondary = BRKGA_STOP_NONE;
    c->max_gens = 1000;
    c->max_stall_gens = 100;
    c->max_time = 60;
    c->max_stall_time = 3600;
    c->K = 1;
    c->xcount = 2;
    c->max_at = 4;
    c->kpaths = 20;
    c->stats_interval = 100;
    c->time_limit = 3600;
    if (!json_is_object(p))
        return gj_error_set(err, "", "params must be a JSON object");
    const char *s;
    json_t *v;
    if ((v = json_object_get(p, "decoder"))) {
        s = json_string_value(v);
        if (!s || (strcmp(s, "network") && strcmp(s, "tsp")))
            return gj_error_set(err, "decoder", "decoder must be \"network\" or \"tsp\"");
        c->tsp = !strcmp(s, "tsp");
    }
    if ((v = json_object_get(p, "sense"))) {
        s = json_string_value(v);
        if (!s || (strcmp(s, "minimize") && strcmp(s, "maximize")))
            return gj_error_set(err, "sense", "sense must be \"minimize\" or \"maximize\"");
        c->maximize = !strcmp(s, "maximize");
    }
    if (c->maximize)
        return gj_error_set(err, "sense", "the %s decoder minimises (%s); sense \"maximize\" has no "
                            "meaning for it", c->tsp ? "tsp" : "network",
                            c->tsp ? "tour length" : "optical links used");
    long long x;
    if (get_num(p, "population_factor", &c->pop_factor, err))
        return -1;
    if (!(c->pop_factor > 0) || c->pop_factor > 1e6)
        return gj_error_set(err, "population_factor", "population_factor must be in (0, 1e6]");
    x = c->max_pop;
    if (get_int(p, "max_population", &x, 2, 1 << 22, err))
        return -1;
    c->max_pop = x;
    x = 0;
    if (get_int(p, "population_size", &x, 2, 1 << 22, err))
        return -1;
    c->pop_size = x;
    if (get_num(p, "elites", &c->elites, err) || get_num(p, "mutants", &c->mutants, err) ||
        get_num(p, "inheritance_prob", &c->rhoe, err))
        return -1;
    if (!(c->elites > 0 && c->elites < 1))
        return gj_error_set(err, "elites", "elites is %g; it is a fraction of the population in (0, 1)",
                            c->elites);
    if (!(c->mutants >= 0 && c->mutants < 1))
        return gj_error_set(err, "mutants", "mutants is %g; it is a fraction of the population in [0, 1)",
                            c->mutants);
    if (c->elites + c->mutants >= 1)
        return gj_error_set(err, "mutants", "elites (%g) + mutants (%g) leave no room for crossover: "
                            "together they must be less than the whole population", c->elites,
                            c->mutants);
    if (!(c->rhoe > 0.5 && c->rhoe <= 1))
        return gj_error_set(err, "inheritance_prob", "inheritance_prob is %g; it must be in (0.5, 1]",
                            c->rhoe);
    const char *names[2] = { "primary_stop", "secondary_stop" };
    int *crit[2] = { &c->primary, &c->secondary };
    for (int i = 0; i < 2; i++) {
        if (!(v = json_object_get(p, names[i])))
            continue;
        s = json_string_value(v);
        int id = s ? brkga_stop_parse(s) : -2;
        if (id == -2)
            return gj_error_set(err, names[i], "%s '%.40s' is not one of generations, "
                                "generations_without_improvement, time, time_without_improvement, "
                                "target, none", names[i], s ? s : "");
        *crit[i] = id;
    }
    x = c->max_gens;
    if (get_int(p, "max_generations", &x, 0, 100000000, err))
        return -1;
    c->max_gens = x;
    x = c->max_stall_gens;
    if (get_int(p, "max_generations_without_improvement", &x, 1, 100000000, err))
        return -1;
    c->max_stall_gens = x;
    if (get_num(p, "max_time_s", &c->max_time, err) ||
        get_num(p, "max_time_without_improvement_s", &c->max_stall_time, err))
        return -1;
    if (c->max_time < 0 || c->max_stall_time < 0)
        return gj_error_set(err, "max_time_s", "times must not be negative");
    if (json_object_get(p, "target_value")) {
        if (get_num(p, "target_value", &c->target, err))
            return -1;
        c->have_target = 1;
    }
    if (c->primary == BRKGA_STOP_NONE && c->secondary == BRKGA_STOP_NONE)
        return gj_error_set(err, "primary_stop", "no stop criterion: set primary_stop");
    if ((v = json_object_get(p, "seed"))) {
        if (!json_is_integer(v) || json_integer_value(v) < 0)
            return gj_error_set(err, "seed", "seed must be a non-negative integer");
        c->seed = (uint64_t)json_integer_value(v);
        c->have_seed = 1;
    }
    x = 1;
    if (get_int(p, "populations", &x, 1, 64, err))
        return -1;
    c->K = (int)x;
    x = 0;
    if (get_int(p, "exchange_interval", &x, 0, 100000000, err))
        return -1;
    c->xint = (int)x;
    x = c->xcount;
    if (get_int(p, "exchange_count", &x, 0, 1000000, err))
        return -1;
    c->xcount = (int)x;
    x = 0;
    if (get_int(p, "reset_after", &x, 0, 100000000, err))
        return -1;
    c->reset_after = (int)x;
    x = c->max_at;
    if (get_int(p, "max_access_transit_links", &x, 1, 100000, err))
        return -1;
    c->max_at = (int)x;
    x = c->kpaths;
    if (get_int(p, "k_paths", &x, 1, 1000, err))
        return -1;
    c->kpaths = (int)x;
    if (get_num(p, "max_optical_path_length", &c->max_olen, err))
        return -1;
    if (c->max_olen < 0)
        return gj_error_set(err, "max_optical_path_length", "max_optical_path_length must not be "
                            "negative (0: unlimited)");
    if ((v = json_object_get(p, "local_search"))) {
        s = json_string_value(v);
        if (!s || (strcmp(s, "none") && strcmp(s, "2opt")))
            return gj_error_set(err, "local_search", "local_search must be \"none\" or \"2opt\"");
        c->local_search = !strcmp(s, "2opt");
    }
    if (json_object_get(p, "known_optimum")) {
        if (get_num(p, "known_optimum", &c->known_opt, err))
            return -1;
        c->have_known_opt = 1;
    }
    x = c->stats_interval;
    if (get_int(p, "stats_interval", &x, 1, 1000000, err))
        return -1;
    c->stats_interval = (int)x;
    if (get_num(p, "time_limit_s", &c->time_limit, err))
        return -1;
    if (!(c->time_limit > 0 && c->time_limit <= 86400))
        return gj_error_set(err, "time_limit_s", "time_limit_s must be in (0, 86400]");
    x = 0;
    if (get_int(p, "threads", &x, 1, 256, err))
        return -1;
    c->threads = (int)x;
    if ((v = json_object_get(p, "initial_chromosomes"))) {
        if (!json_is_array(v))
            return gj_error_set(err, "initial_chromosomes", "initial_chromosomes must be an array of "
                                "arrays of keys in [0, 1]");
        size_t i;
        json_t *row;
        json_array_foreach(v, i, row) {
            if (!json_is_array(row))
                return gj_error_set(err, "initial_chromosomes", "initial_chromosomes[%zu] is not an "
                                    "array", i);
            size_t j;
            json_t *k;
            json_array_foreach(row, j, k) {
                double d = json_number_value(k);
                if (!json_is_number(k) || !(d >= 0 && d <= 1))
                    return gj_error_set(err, "initial_chromosomes", "initial_chromosomes[%zu][%zu] "
                                        "is not a key in [0, 1]", i, j);
            }
        }
        c->initial = v;
    }
    return 0;
}

/* ---- Params.xml ---- */
struct px_state {
    json_t *obj;
    char path[4][32];
    int depth;
    char text[256];
    size_t tlen;
    int failed;
    char msg[256];
    XML_Parser parser;
};

static void px_fail(struct px_state *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void px_fail(struct px_state *s, const char *fmt, ...)
{
    if (s->failed)
        return;
    s->failed = 1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->msg, sizeof s->msg, fmt, ap);
    va_end(ap);
    XML_StopParser(s->parser, XML_FALSE);
}

static int px_set_number(struct px_state *s, const char *key, const char *text, int integer,
                         const char *where)
{
    char *end;
    errno = 0;
    if (integer) {
        long long v = strtoll(text, &end, 10);
        while (*end == ' ' || *end == '\t' || *end == '\n' || *end == '\r')
            end++;
        if (end == text || *end || errno) {
            px_fail(s, "params: %s '%.40s' is not an integer", where, text);
            return -1;
        }
        json_object_set_new(s->obj, key, json_integer(v));
    } else {
        double v = strtod(text, &end);
        while (*end == ' ' || *end == '\t' || *end == '\n' || *end == '\r')
            end++;
        if (end == text || *end || errno || !isfinite(v)) {
            px_fail(s, "params: %s '%.40s' is not a number", where, text);
            return -1;
        }
        json_object_set_new(s->obj, key, json_real(v));
    }
    return 0;
}

static const char *px_attr(const XML_Char **a, const char *n)
{
    for (int i = 0; a[i]; i += 2)
        if (!strcmp(a[i], n))
            return a[i + 1];
    return NULL;
}

static void XMLCALL px_start(void *ud, const XML_Char *el, const XML_Char **a)
{
    struct px_state *s = ud;
    if (s->failed)
        return;
    if (s->depth >= 4) {
        px_fail(s, "params: elements nested too deeply");
        return;
    }
    snprintf(s->path[s->depth], sizeof s->path[0], "%s", el);
    s->depth++;
    s->tlen = 0;
    const char *v;
    if (s->depth == 1) {
        if (strcmp(el, "Params")) {
            px_fail(s, "params: the root element is <%.40s>, expected <Params>", el);
            return;
        }
        if ((v = px_attr(a, "sense")))
            json_object_set_new(s->obj, "sense", json_string(v));
    } else if (s->depth == 2 && !strcmp(el, "Population")) {
        static const char *const an[2] = { "primaryStopCriteria", "secondaryStopCriteria" };
        static const char *const jn[2] = { "primary_stop", "secondary_stop" };
        for (int i = 0; i < 2; i++)
            if ((v = px_attr(a, an[i]))) {
                int id = brkga_stop_parse(v);
                if (id == -2) {
                    px_fail(s, "params: <Population %s=\"%.40s\"> is not a known criterion "
                            "(Generations, NonUpdatedIncumbent, Time, NonUpdatedTime, Optimal, None)",
                            an[i], v);
                    return;
                }
                json_object_set_new(s->obj, jn[i], json_string(brkga_stop_name(id)));
            }
    } else if (s->depth == 2 && !strcmp(el, "Decoder")) {
        if ((v = px_attr(a, "maxVEdgesA_T")) && px_set_number(s, "max_access_transit_links", v, 1, "maxVEdgesA_T"))
            return;
        if ((v = px_attr(a, "maxOPathLength")) && px_set_number(s, "max_optical_path_length", v, 0, "maxOPathLength"))
            return;
        if ((v = px_attr(a, "numKSPRoutes")) && px_set_number(s, "k_paths", v, 1, "numKSPRoutes"))
            return;
    } else if (s->depth == 2 && !strcmp(el, "Execution")) {
        const char *use = px_attr(a, "usePredefinedMasterSeed");
        if (use && !strcmp(use, "true") && (v = px_attr(a, "predefinedMasterSeed")) &&
            px_set_number(s, "seed", v, 1, "predefinedMasterSeed"))
            return;
        if ((v = px_attr(a, "iterationsBetweenExternalizeStatistics")) &&
            px_set_number(s, "stats_interval", v, 1, "iterationsBetweenExternalizeStatistics"))
            return;
    }
}

static void XMLCALL px_text(void *ud, const XML_Char *t, int len)
{
    struct px_state *s = ud;
    if (s->failed)
        return;
    if (s->tlen + (size_t)len >= sizeof s->text) {
        px_fail(s, "params: element text longer than %zu bytes", sizeof s->text - 1);
        return;
    }
    memcpy(s->text + s->tlen, t, (size_t)len);
    s->tlen += (size_t)len;
}

static void XMLCALL px_end(void *ud, const XML_Char *el)
{
    struct px_state *s = ud;
    if (s->failed)
        return;
    s->text[s->tlen] = '\0';
    char *t = s->text;
    while (*t == ' ' || *t == '\n' || *t == '\t' || *t == '\r')
        t++;
    if (s->depth == 3) {
        static const struct { const char *parent, *el, *key; int integer; } map[] = {
            { "Etnia", "Individuals", "population_factor", 0 },
            { "Etnia", "MaxIndividuals", "max_population", 1 },
            { "Etnia", "Elites", "elites", 0 },
            { "Etnia", "Mutants", "mutants", 0 },
            { "Etnia", "InheritanceProb", "inheritance_prob", 0 },
            { "Population", "MaxGenerations", "max_generations", 1 },
            { "Population", "MaxNonUpdatedIncumbent", "max_generations_without_improvement", 1 },
            { "Population", "MaxTime", "max_time_s", 0 },
            { "Population", "MaxTimeNonUpdated", "max_time_without_improvement_s", 0 },
            { "Population", "OptimalValue", "target_value", 0 },
        };
        for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
            if (!strcmp(s->path[1], map[i].parent) && !strcmp(el, map[i].el)) {
                char where[80];
                snprintf(where, sizeof where, "<%s>", map[i].el);
                px_set_number(s, map[i].key, t, map[i].integer, where);
                break;
            }
    }
    s->depth--;
    s->tlen = 0;
}

static void XMLCALL px_entity(void *ud, const XML_Char *name, int is_param, const XML_Char *value,
                              int value_len, const XML_Char *base, const XML_Char *sys,
                              const XML_Char *pub, const XML_Char *notation)
{
    (void)name; (void)is_param; (void)value; (void)value_len; (void)base; (void)sys; (void)pub;
    (void)notation;
    px_fail(ud, "params: XML entity declarations are not accepted");
}

json_t *brkga_params_xml(const char *text, size_t len, char *msg, size_t msglen)
{
    struct px_state s;
    memset(&s, 0, sizeof s);
    s.obj = json_object();
    s.parser = XML_ParserCreate(NULL);
    if (!s.obj || !s.parser) {
        json_decref(s.obj);
        if (s.parser)
            XML_ParserFree(s.parser);
        snprintf(msg, msglen, "out of memory");
        return NULL;
    }
    XML_SetUserData(s.parser, &s);
    XML_SetElementHandler(s.parser, px_start, px_end);
    XML_SetCharacterDataHandler(s.parser, px_text);
    XML_SetEntityDeclHandler(s.parser, px_entity);
    if (XML_Parse(s.parser, text, (int)len, XML_TRUE) == XML_STATUS_ERROR && !s.failed) {
        s.failed = 1;
        snprintf(s.msg, sizeof s.msg, "params: malformed XML at line %lu: %s",
                 (unsigned long)XML_GetCurrentLineNumber(s.parser),
                 XML_ErrorString(XML_GetErrorCode(s.parser)));
    }
    XML_ParserFree(s.parser);
    if (s.failed) {
        snprintf(msg, msglen, "%s", s.msg);
        json_decref(s.obj);
        return NULL;
    }
    return s.obj;
}

/* ------------------------------------------------------------------ */

static int load_input(const struct gj_job *job, const char *name, char **data, size_t *len,
                      struct gj_error *err)
{
    const struct gj_input *in = gj_job_input(job, name);
    if (!in || !in->path)
        return gj_error_set(err, name, "input '%s' is missing", name);
    if (gj_read_file(in->path, BK_MAX_INPUT, data, len))
        return gj_error_set(err, name, "cannot read input '%s': %s (at most %u MiB)", name,
                            strerror(errno), BK_MAX_INPUT >> 20);
    return 0;
}

/* The effective parameters: Params.xml (when given) overlaid by the job's JSON. */
static json_t *effective_params(const struct gj_job *job, struct gj_error *err)
{
    const struct gj_input *px = gj_job_input(job, "params");
    json_t *base;
    if (px && px->path) {
        char *text;
        size_t len;
        if (load_input(job, "params", &text, &len, err))
            return NULL;
        char msg[300];
        base = brkga_params_xml(text, len, msg, sizeof msg);
        free(text);
        if (!base) {
            gj_error_set(err, "params", "%s", msg);
            return NULL;
        }
    } else {
        base = json_object();
    }
    if (!base || (json_is_object(job->params) && json_object_update(base, job->params))) {
        json_decref(base);
        gj_error_set(err, "", "out of memory");
        return NULL;
    }
    return base;
}

static int brkga_validate(const struct gj_job *job, struct gj_error *err)
{
    struct brkga_cfg c;
    if (brkga_cfg_read(job->params, &c, err))
        return -1;
    const char *need[2] = { NULL, NULL };
    if (c.tsp)
        need[0] = "tsp";
    else {
        need[0] = "network";
        need[1] = "demands";
    }
    for (int i = 0; i < 2; i++)
        if (need[i] && !gj_job_input(job, need[i]))
            return gj_error_set(err, need[i], "decoder %s needs the input '%s'",
                                c.tsp ? "tsp" : "network", need[i]);
    for (size_t i = 0; i < job->n_inputs; i++)
        if (job->inputs[i].size > BK_MAX_INPUT)
            return gj_error_set(err, job->inputs[i].name, "input '%s' is %llu bytes; at most %u MiB",
                                job->inputs[i].name, (unsigned long long)job->inputs[i].size,
                                BK_MAX_INPUT >> 20);
    if (c.K > 1 && c.xint > 0 && c.xcount == 0)
        return gj_error_set(err, "exchange_count", "exchange_interval is set but exchange_count is 0");
    return 0;
}

/* Loads the problem; fills the decoder. */
int brkga_problem_load(const struct gj_job *job, const struct brkga_cfg *c, struct brkga_problem *pb,
                       struct gj_error *err)
{
    memset(pb, 0, sizeof *pb);
    char msg[512];
    pb->tsp_mode = c->tsp;
    if (c->tsp) {
        char *text;
        size_t len;
        if (load_input(job, "tsp", &text, &len, err))
            return -1;
        int rc = brkga_tsp_parse(text, len, &pb->tsp, msg, sizeof msg);
        free(text);
        if (rc)
            return gj_error_set(err, "tsp", "%s", msg);
        pb->tsp.local_search = c->local_search;
        pb->dec.n_genes = (size_t)pb->tsp.n;
        pb->dec.scratch_bytes = brkga_tsp_scratch_bytes(&pb->tsp);
        pb->dec.ctx = &pb->tsp;
        pb->dec.decode = brkga_tsp_decode_cb;
        return 0;
    }
    char *nt = NULL, *dt = NULL;
    size_t nl = 0, dl = 0;
    struct brkga_net_input in;
    memset(&in, 0, sizeof in);
    if (load_input(job, "network", &nt, &nl, err))
        return -1;
    if (load_input(job, "demands", &dt, &dl, err)) {
        free(nt);
        return -1;
    }
    int rc = brkga_net_parse_network(nt, nl, &in, msg, sizeof msg);
    if (rc)
        gj_error_set(err, "network", "%s", msg);
    else if ((rc = brkga_net_parse_demands(dt, dl, &in, msg, sizeof msg)))
        gj_error_set(err, "demands", "%s", msg);
    free(nt);
    free(dt);
    if (rc) {
        brkga_net_input_free(&in);
        return -1;
    }
    if (brkga_net_build(&pb->net, &in, c->max_at, c->kpaths, c->max_olen, msg, sizeof msg)) {
        brkga_net_input_free(&in);
        return gj_error_set(err, "network", "%s", msg);
    }
    pb->have_net = 1;
    pb->dec.n_genes = (size_t)(pb->net.m.n_vlinks + pb->net.m.n_demands);
    pb->dec.scratch_bytes = brkga_net_scratch_bytes(&pb->net.m);
    pb->dec.ctx = &pb->net.m;
    pb->dec.decode = brkga_net_decode_cb;
    pb->dec.gpu_network = 1;
    return 0;
}

void brkga_problem_free(struct brkga_problem *pb)
{
    if (pb->have_net)
        brkga_net_free(&pb->net);
    if (pb->tsp_mode)
        brkga_tsp_free(&pb->tsp);
    memset(pb, 0, sizeof *pb);
}

/* Fills the engine parameters from cfg and the problem size. */
int brkga_params_fill(const struct brkga_cfg *c, size_t n, struct brkga_params *prm,
                      struct gj_error *err)
{
    memset(prm, 0, sizeof *prm);
    prm->maximize = c->maximize;
    prm->n = n;
    if (c->pop_size)
        prm->p = (size_t)c->pop_size;
    else {
        double p = floor(c->pop_factor * (double)n);
        prm->p = p > (double)c->max_pop ? (size_t)c->max_pop : (size_t)p;
    }
    prm->ne = (size_t)floor(c->elites * (double)prm->p);
    prm->nm = (size_t)floor(c->mutants * (double)prm->p);
    prm->rhoe = c->rhoe;
    prm->K = c->K;
    prm->exchange_interval = c->xint;
    prm->exchange_count = c->xcount;
    prm->reset_after = c->reset_after;
    prm->primary = c->primary;
    prm->secondary = c->secondary;
    prm->max_generations = c->max_gens;
    prm->max_stall_generations = c->max_stall_gens;
    prm->max_time_s = c->max_time;
    prm->max_stall_time_s = c->max_stall_time;
    prm->target = c->target;
    prm->hard_time_limit_s = c->time_limit;
    prm->seed = c->seed;
    prm->stats_interval = c->stats_interval;
    prm->device = -1;
    prm->threads = 1;
    char msg[256];
    if (brkga_check_params(prm, msg, sizeof msg))
        return gj_error_set(err, prm->p < 2 || prm->ne < 1 ? "population_factor" : "elites",
                            "with %zu genes and p = %zu: %s", n, prm->p, msg);
    return 0;
}

static int brkga_estimate(const struct gj_job *job, struct gj_needs *needs, struct gj_error *err)
{
    json_t *p = effective_params(job, err);
    if (!p)
        return -1;
    struct brkga_cfg c;
    struct brkga_problem pb;
    struct brkga_params prm;
    int rc = -1;
    if (brkga_cfg_read(p, &c, err) || brkga_problem_load(job, &c, &pb, err))
        goto out;
    if (brkga_params_fill(&c, pb.dec.n_genes, &prm, err) == 0) {
        uint64_t total = (uint64_t)prm.K * prm.p;
        needs->can_use_gpu = !c.tsp && GJ_HAVE_CUDA;
        needs->needs_gpu = 0;
        needs->device_bytes = needs->can_use_gpu
            ? total * (2 * prm.n * 4 + 32 + pb.dec.scratch_bytes) + (64u << 20) : 0;
        needs->host_bytes = total * (2 * prm.n * 4 + 24) + (uint64_t)pb.dec.scratch_bytes * 256 +
                            (16u << 20);
        rc = 0;
    }
    brkga_problem_free(&pb);
out:
    json_decref(p);
    return rc;
}

/* ------------------------------------------------------------------ */

struct hook_ctx { struct gj_ctx *ctx; };

static int hk_cancelled(void *h)
{
    return gj_cancelled(((struct hook_ctx *)h)->ctx);
}

static void hk_progress(void *h, double f, const char *m)
{
    gj_progress(((struct hook_ctx *)h)->ctx, f, m);
}

static uint64_t fresh_seed(void)
{
    uint64_t s = 0;
    int fd = open("/dev/urandom", O_RDONLY);
    if (fd >= 0) {
        if (read(fd, &s, sizeof s) != (ssize_t)sizeof s)
            s = 0;
        close(fd);
    }
    if (!s) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        s = (uint64_t)ts.tv_sec * 1000000007ull ^ (uint64_t)ts.tv_nsec;
    }
    return s & 0x7FFFFFFFFFFFFFFFull;
}

static int brkga_run(struct gj_ctx *ctx, struct gj_error *err)
{
    const struct gj_job *job = ctx->job;
    json_t *p = effective_params(job, err);
    if (!p)
        return GJ_RUN_FAILED;
    struct brkga_cfg c;
    struct brkga_problem pb;
    struct brkga_params prm;
    struct brkga_result res;
    memset(&res, 0, sizeof res);
    memset(&pb, 0, sizeof pb);
    float *initial = NULL;
    int rc = GJ_RUN_FAILED;
    if (brkga_cfg_read(p, &c, err) || brkga_problem_load(job, &c, &pb, err) ||
        brkga_params_fill(&c, pb.dec.n_genes, &prm, err))
        goto out;
    if (!c.have_seed)
        c.seed = fresh_seed();
    prm.seed = c.seed;
    prm.threads = ctx->cpu_threads > 0 ? ctx->cpu_threads : 1;
    if (c.threads && c.threads < prm.threads)
        prm.threads = c.threads;
    if (c.initial) {
        size_t m = json_array_size(c.initial);
        initial = malloc((m ? m : 1) * prm.n * sizeof *initial);
        if (!initial) {
            gj_error_set(err, "", "out of memory");
            goto out;
        }
        for (size_t i = 0; i < m; i++) {
            json_t *row = json_array_get(c.initial, i);
            if (json_array_size(row) != prm.n) {
                gj_error_set(err, "initial_chromosomes", "initial_chromosomes[%zu] has %zu keys; this "
                             "problem has %zu genes", i, json_array_size(row), prm.n);
                goto out;
            }
            for (size_t j = 0; j < prm.n; j++) {
                double k = json_number_value(json_array_get(row, j));
                /* onto the engine's 24-bit grid, in [0, 1) */
                float q = (float)(floor(k * 16777216.0) / 16777216.0);
                initial[i * prm.n + j] = q >= 1.0f ? 16777215.0f / 16777216.0f : q;
            }
        }
        prm.initial = initial;
        prm.n_initial = m;
    }
    if (pb.have_net && pb.net.n_unroutable) {
        gj_logf(ctx, "brkga: %s; no chromosome can be feasible", pb.net.unroutable_msg);
        if (brkga_write_outputs(ctx->output_dir, &c, &prm, &pb, NULL, "unroutable", err))
            goto out;
        rc = GJ_RUN_OK;
        goto out;
    }
    if (ctx->device >= 0 && pb.dec.gpu_network)
        prm.device = ctx->device;
    struct hook_ctx hc = { ctx };
    struct brkga_hooks hooks = { &hc, hk_cancelled, hk_progress };
    char msg[300];
    gj_logf(ctx, "brkga: %zu genes, %d population(s) of %zu (%zu elites, %zu mutants), seed %" PRIu64
            ", %s, %d thread(s)", prm.n, prm.K, prm.p, prm.ne, prm.nm, prm.seed,
            prm.device >= 0 ? "gpu" : "cpu", prm.threads);
    if (brkga_solve(&prm, &pb.dec, &hooks, &res, msg, sizeof msg)) {
        if (prm.device < 0) {
            gj_error_set(err, "", "%s", msg);
            goto out;
        }
        gj_logf(ctx, "brkga: GPU path failed (%s); running on the CPU", msg);
        prm.device = -1;
        if (brkga_solve(&prm, &pb.dec, &hooks, &res, msg, sizeof msg)) {
            gj_error_set(err, "", "%s", msg);
            goto out;
        }
    }
    if (res.stop_reason == BRKGA_STOP_CANCELLED) {
        rc = GJ_RUN_CANCELED;
        goto out;
    }
    if (brkga_write_outputs(ctx->output_dir, &c, &prm, &pb, &res, NULL, err))
        goto out;
    rc = GJ_RUN_OK;
out:
    brkga_result_free(&res);
    brkga_problem_free(&pb);
    free(initial);
    json_decref(p);
    return rc;
}

const struct gj_kind gj_kind_brkga = {
    .name = "brkga",
    .summary = "Biased random-key GA: IP/MPLS-over-WSON network design (thesis decoder) or TSP",
    .params_schema = brkga_schema,
    .inputs = brkga_inputs,
    .n_inputs = sizeof brkga_inputs / sizeof brkga_inputs[0],
    .validate = brkga_validate,
    .estimate = brkga_estimate,
    .run = brkga_run,
};
