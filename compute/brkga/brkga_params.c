/*
 * brkga_params.c — the parameters of the brkga kind: the job's JSON params (checked
 * at submit, messages naming the param) and the thesis's Params.xml, read into the
 * same JSON names (README.md lists both).
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <expat.h>

#include "brkga/brkga_kind.h"

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

/* get_int into a long or an int (left as it is when the param is absent). */
static int get_long(json_t *p, const char *k, long *out, long lo, long hi, struct gj_error *err)
{
    long long x = *out;
    if (get_int(p, k, &x, lo, hi, err))
        return -1;
    *out = (long)x;
    return 0;
}

static int get_i(json_t *p, const char *k, int *out, int lo, int hi, struct gj_error *err)
{
    long long x = *out;
    if (get_int(p, k, &x, lo, hi, err))
        return -1;
    *out = (int)x;
    return 0;
}

/* One of two words; *out = 1 for the second. */
static int get_choice(json_t *p, const char *k, const char *a, const char *b, int *out,
                      struct gj_error *err)
{
    json_t *v = json_object_get(p, k);
    if (!v)
        return 0;
    const char *s = json_string_value(v);
    if (!s || (strcmp(s, a) && strcmp(s, b)))
        return gj_error_set(err, k, "%s must be \"%s\" or \"%s\"", k, a, b);
    *out = !strcmp(s, b);
    return 0;
}

static void cfg_defaults(struct brkga_cfg *c)
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
}

static int read_decoder(json_t *p, struct brkga_cfg *c, struct gj_error *err)
{
    if (get_choice(p, "decoder", "network", "tsp", &c->tsp, err) ||
        get_choice(p, "sense", "minimize", "maximize", &c->maximize, err))
        return -1;
    if (c->maximize)
        return gj_error_set(err, "sense", "the %s decoder minimises (%s); sense \"maximize\" has no "
                            "meaning for it", c->tsp ? "tsp" : "network",
                            c->tsp ? "tour length" : "optical links used");
    return 0;
}

static int read_population(json_t *p, struct brkga_cfg *c, struct gj_error *err)
{
    if (get_num(p, "population_factor", &c->pop_factor, err))
        return -1;
    if (!(c->pop_factor > 0) || c->pop_factor > 1e6)
        return gj_error_set(err, "population_factor", "population_factor must be in (0, 1e6]");
    if (get_long(p, "max_population", &c->max_pop, 2, 1 << 22, err) ||
        get_long(p, "population_size", &c->pop_size, 2, 1 << 22, err))
        return -1;
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
    return 0;
}

static int read_stops(json_t *p, struct brkga_cfg *c, struct gj_error *err)
{
    const char *names[2] = { "primary_stop", "secondary_stop" };
    int *crit[2] = { &c->primary, &c->secondary };
    for (int i = 0; i < 2; i++) {
        json_t *v = json_object_get(p, names[i]);
        if (!v)
            continue;
        const char *s = json_string_value(v);
        int id = s ? brkga_stop_parse(s) : -2;
        if (id == -2)
            return gj_error_set(err, names[i], "%s '%.40s' is not one of generations, "
                                "generations_without_improvement, time, time_without_improvement, "
                                "target, none", names[i], s ? s : "");
        *crit[i] = id;
    }
    if (get_long(p, "max_generations", &c->max_gens, 0, 100000000, err) ||
        get_long(p, "max_generations_without_improvement", &c->max_stall_gens, 1, 100000000, err))
        return -1;
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
    return 0;
}

/* The seed, and the populations with their exchanges and resets (brkgaAPI). */
static int read_populations(json_t *p, struct brkga_cfg *c, struct gj_error *err)
{
    json_t *v = json_object_get(p, "seed");
    if (v) {
        if (!json_is_integer(v) || json_integer_value(v) < 0)
            return gj_error_set(err, "seed", "seed must be a non-negative integer");
        c->seed = (uint64_t)json_integer_value(v);
        c->have_seed = 1;
    }
    return get_i(p, "populations", &c->K, 1, 64, err) ||
           get_i(p, "exchange_interval", &c->xint, 0, 100000000, err) ||
           get_i(p, "exchange_count", &c->xcount, 0, 1000000, err) ||
           get_i(p, "reset_after", &c->reset_after, 0, 100000000, err) ? -1 : 0;
}

/* The decoders' own params: network pre-computation, tsp local search. */
static int read_problem(json_t *p, struct brkga_cfg *c, struct gj_error *err)
{
    if (get_i(p, "max_access_transit_links", &c->max_at, 1, 100000, err) ||
        get_i(p, "k_paths", &c->kpaths, 1, 1000, err) ||
        get_num(p, "max_optical_path_length", &c->max_olen, err))
        return -1;
    if (c->max_olen < 0)
        return gj_error_set(err, "max_optical_path_length", "max_optical_path_length must not be "
                            "negative (0: unlimited)");
    if (get_choice(p, "local_search", "none", "2opt", &c->local_search, err))
        return -1;
    if (json_object_get(p, "known_optimum")) {
        if (get_num(p, "known_optimum", &c->known_opt, err))
            return -1;
        c->have_known_opt = 1;
    }
    return 0;
}

/* Statistics, the service's time limit, threads. */
static int read_limits(json_t *p, struct brkga_cfg *c, struct gj_error *err)
{
    if (get_i(p, "stats_interval", &c->stats_interval, 1, 1000000, err) ||
        get_num(p, "time_limit_s", &c->time_limit, err))
        return -1;
    if (!(c->time_limit > 0 && c->time_limit <= 86400))
        return gj_error_set(err, "time_limit_s", "time_limit_s must be in (0, 86400]");
    return get_i(p, "threads", &c->threads, 1, 256, err);
}

static int read_initial(json_t *p, struct brkga_cfg *c, struct gj_error *err)
{
    json_t *v = json_object_get(p, "initial_chromosomes");
    if (!v)
        return 0;
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
    return 0;
}

int brkga_cfg_read(json_t *p, struct brkga_cfg *c, struct gj_error *err)
{
    cfg_defaults(c);
    if (!json_is_object(p))
        return gj_error_set(err, "", "params must be a JSON object");
    if (read_decoder(p, c, err) || read_population(p, c, err) || read_stops(p, c, err) ||
        read_populations(p, c, err) || read_problem(p, c, err) || read_limits(p, c, err) ||
        read_initial(p, c, err))
        return -1;
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
    struct gj_error *err;
    XML_Parser parser;
};

static void px_fail(struct px_state *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void px_fail(struct px_state *s, const char *fmt, ...)
{
    if (s->failed)
        return;
    s->failed = 1;
    char msg[sizeof s->err->message];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    gj_error_set(s->err, "params", "%s", msg);
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

/* <Population primaryStopCriteria=... secondaryStopCriteria=...> */
static void px_population(struct px_state *s, const XML_Char **a)
{
    static const char *const an[2] = { "primaryStopCriteria", "secondaryStopCriteria" };
    static const char *const jn[2] = { "primary_stop", "secondary_stop" };
    const char *v;
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
}

/* <Decoder maxVEdgesA_T=... maxOPathLength=... numKSPRoutes=...> */
static void px_decoder(struct px_state *s, const XML_Char **a)
{
    const char *v;
    if ((v = px_attr(a, "maxVEdgesA_T")) && px_set_number(s, "max_access_transit_links", v, 1, "maxVEdgesA_T"))
        return;
    if ((v = px_attr(a, "maxOPathLength")) && px_set_number(s, "max_optical_path_length", v, 0, "maxOPathLength"))
        return;
    if ((v = px_attr(a, "numKSPRoutes")))
        px_set_number(s, "k_paths", v, 1, "numKSPRoutes");
}

/* <Execution usePredefinedMasterSeed=... predefinedMasterSeed=... iterationsBetween...> */
static void px_execution(struct px_state *s, const XML_Char **a)
{
    const char *v, *use = px_attr(a, "usePredefinedMasterSeed");
    if (use && !strcmp(use, "true") && (v = px_attr(a, "predefinedMasterSeed")) &&
        px_set_number(s, "seed", v, 1, "predefinedMasterSeed"))
        return;
    if ((v = px_attr(a, "iterationsBetweenExternalizeStatistics")))
        px_set_number(s, "stats_interval", v, 1, "iterationsBetweenExternalizeStatistics");
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
        px_population(s, a);
    } else if (s->depth == 2 && !strcmp(el, "Decoder")) {
        px_decoder(s, a);
    } else if (s->depth == 2 && !strcmp(el, "Execution")) {
        px_execution(s, a);
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

json_t *brkga_params_xml(const char *text, size_t len, struct gj_error *err)
{
    struct px_state s;
    memset(&s, 0, sizeof s);
    s.err = err;
    s.obj = json_object();
    s.parser = XML_ParserCreate(NULL);
    if (!s.obj || !s.parser) {
        json_decref(s.obj);
        if (s.parser)
            XML_ParserFree(s.parser);
        gj_error_set(err, "params", "out of memory");
        return NULL;
    }
    XML_SetUserData(s.parser, &s);
    XML_SetElementHandler(s.parser, px_start, px_end);
    XML_SetCharacterDataHandler(s.parser, px_text);
    XML_SetEntityDeclHandler(s.parser, px_entity);
    if (XML_Parse(s.parser, text, (int)len, XML_TRUE) == XML_STATUS_ERROR && !s.failed) {
        s.failed = 1;
        gj_error_set(err, "params", "params: malformed XML at line %lu: %s",
                     (unsigned long)XML_GetCurrentLineNumber(s.parser),
                     XML_ErrorString(XML_GetErrorCode(s.parser)));
    }
    XML_ParserFree(s.parser);
    if (s.failed) {
        json_decref(s.obj);
        return NULL;
    }
    return s.obj;
}
