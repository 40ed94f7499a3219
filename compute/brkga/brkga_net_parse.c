/*
 * brkga_net_parse.c — the network and demand inputs (Network.xml / Demands.xml of the
 * thesis, or their JSON forms; expat and jansson): bounded, with messages that name
 * the element, and names resolved to node indices.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <expat.h>
#include <jansson.h>

#include "brkga/brkga_net.h"

#define MAX_NODES 20000
#define MAX_EDGES 400000
#define MAX_DEMANDS 200000
#define MAX_NAME 200

void brkga_net_input_free(struct brkga_net_input *in)
{
    for (size_t i = 0; i < in->n_nodes; i++) {
        free(in->nodes[i].name);
        free(in->nodes[i].location);
    }
    free(in->nodes);
    free(in->edges);
    free(in->demands);
    memset(in, 0, sizeof *in);
}

/* ---- raw records before name resolution ---- */
struct raw_edge { char *a, *b; double distance; };
struct raw_demand { char *src, *dst; int bw; };

struct parse_state {
    struct brkga_net_input *in;
    struct raw_edge *edges;
    size_t n_edges, cap_edges;
    struct raw_demand *dems;
    size_t n_dems, cap_dems;
    size_t cap_nodes;
    int root_seen, depth, mode;   /* mode 0 network, 1 demands */
    const char *what;             /* the input: "network" or "demands" */
    struct gj_error *err;
    int failed;
    XML_Parser parser;
};

static void pfail(struct parse_state *ps, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void pfail(struct parse_state *ps, const char *fmt, ...)
{
    if (ps->failed)
        return;
    ps->failed = 1;
    char msg[sizeof ps->err->message];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    gj_error_set(ps->err, ps->what, "%s", msg);
    if (ps->parser)
        XML_StopParser(ps->parser, XML_FALSE);
}

static int check_name(struct parse_state *ps, const char *what, const char *name)
{
    if (!name || !*name) {
        pfail(ps, "%s has no name", what);
        return -1;
    }
    size_t n = strlen(name);
    if (n > MAX_NAME) {
        pfail(ps, "%s: name longer than %d characters", what, MAX_NAME);
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)name[i] < 0x20) {
            pfail(ps, "%s: name contains a control character", what);
            return -1;
        }
    return 0;
}

static int parse_number(const char *s, double *out)
{
    if (!s || !*s)
        return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    while (*end && isspace((unsigned char)*end))
        end++;
    if (*end || errno || !isfinite(v))
        return -1;
    *out = v;
    return 0;
}

static int parse_bw(const char *s)
{
    static const char *const ok[] = { "1G", "10G", "40G", "100G" };
    static const int val[] = { 1, 10, 40, 100 };
    for (int i = 0; i < 4; i++)
        if (s && strcmp(s, ok[i]) == 0)
            return val[i];
    return -1;
}

static int add_node(struct parse_state *ps, const char *name, const char *type, const char *loc)
{
    struct brkga_net_input *in = ps->in;
    char what[64];
    snprintf(what, sizeof what, "network: Node %zu", in->n_nodes + 1);
    if (check_name(ps, what, name))
        return -1;
    int t;
    if (!type) {
        pfail(ps, "network: node '%s' has no type (source, transit or core)", name);
        return -1;
    }
    if (!strcmp(type, "source") || !strcmp(type, "access"))
        t = BRKGA_NODE_ACCESS;
    else if (!strcmp(type, "transit"))
        t = BRKGA_NODE_TRANSIT;
    else if (!strcmp(type, "core"))
        t = BRKGA_NODE_CORE;
    else {
        pfail(ps, "network: node '%s' has type '%.40s'; expected source, transit or core", name, type);
        return -1;
    }
    if (loc && check_name(ps, what, loc))
        return -1;
    if (in->n_nodes >= MAX_NODES) {
        pfail(ps, "network: more than %d nodes", MAX_NODES);
        return -1;
    }
    if (in->n_nodes == ps->cap_nodes) {
        size_t nc = ps->cap_nodes ? ps->cap_nodes * 2 : 64;
        struct brkga_node *g = realloc(in->nodes, nc * sizeof *g);
        if (!g) {
            pfail(ps, "out of memory");
            return -1;
        }
        in->nodes = g;
        ps->cap_nodes = nc;
    }
    struct brkga_node *nd = &in->nodes[in->n_nodes];
    nd->name = strdup(name);
    nd->location = loc && *loc ? strdup(loc) : NULL;
    nd->loc = -1;
    nd->type = t;
    in->n_nodes++;
    if (!nd->name || (loc && *loc && !nd->location)) {
        pfail(ps, "out of memory");
        return -1;
    }
    return 0;
}

static int add_edge(struct parse_state *ps, const char *a, const char *b, const char *dist)
{
    char what[64];
    snprintf(what, sizeof what, "network: Edge %zu", ps->n_edges + 1);
    if (check_name(ps, what, a) || check_name(ps, what, b))
        return -1;
    double d;
    if (parse_number(dist, &d)) {
        pfail(ps, "%s (%s-%s): distance '%.40s' is not a number", what, a, b, dist ? dist : "");
        return -1;
    }
    if (d < 0) {
        pfail(ps, "%s (%s-%s): negative distance %g", what, a, b, d);
        return -1;
    }
    if (ps->n_edges >= MAX_EDGES) {
        pfail(ps, "network: more than %d edges", MAX_EDGES);
        return -1;
    }
    if (ps->n_edges == ps->cap_edges) {
        size_t nc = ps->cap_edges ? ps->cap_edges * 2 : 64;
        struct raw_edge *g = realloc(ps->edges, nc * sizeof *g);
        if (!g) {
            pfail(ps, "out of memory");
            return -1;
        }
        ps->edges = g;
        ps->cap_edges = nc;
    }
    struct raw_edge *e = &ps->edges[ps->n_edges++];
    e->a = strdup(a);
    e->b = strdup(b);
    e->distance = d;
    if (!e->a || !e->b) {
        pfail(ps, "out of memory");
        return -1;
    }
    return 0;
}

static int add_demand(struct parse_state *ps, const char *s, const char *d, int bw, const char *bwtext)
{
    char what[64];
    snprintf(what, sizeof what, "demands: Demand %zu", ps->n_dems + 1);
    if (check_name(ps, what, s) || check_name(ps, what, d))
        return -1;
    if (bw < 0) {
        pfail(ps, "%s (%s->%s): bandwidth '%.40s' is not one of 1G, 10G, 40G, 100G", what, s, d,
              bwtext ? bwtext : "(missing)");
        return -1;
    }
    if (ps->n_dems >= MAX_DEMANDS) {
        pfail(ps, "demands: more than %d demands", MAX_DEMANDS);
        return -1;
    }
    if (ps->n_dems == ps->cap_dems) {
        size_t nc = ps->cap_dems ? ps->cap_dems * 2 : 64;
        struct raw_demand *g = realloc(ps->dems, nc * sizeof *g);
        if (!g) {
            pfail(ps, "out of memory");
            return -1;
        }
        ps->dems = g;
        ps->cap_dems = nc;
    }
    struct raw_demand *r = &ps->dems[ps->n_dems++];
    r->src = strdup(s);
    r->dst = strdup(d);
    r->bw = bw;
    if (!r->src || !r->dst) {
        pfail(ps, "out of memory");
        return -1;
    }
    return 0;
}

static const char *attr(const XML_Char **atts, const char *name)
{
    for (int i = 0; atts[i]; i += 2)
        if (strcmp(atts[i], name) == 0)
            return atts[i + 1];
    return NULL;
}

static void XMLCALL on_start(void *ud, const XML_Char *el, const XML_Char **atts)
{
    struct parse_state *ps = ud;
    if (ps->failed)
        return;
    ps->depth++;
    if (ps->depth > 16) {
        pfail(ps, "%s: elements nested too deeply", ps->what);
        return;
    }
    if (ps->depth == 1) {
        const char *want = ps->mode ? "Traffic" : "Network";
        if (strcmp(el, want) != 0) {
            pfail(ps, "%s: the root element is <%.40s>, expected <%s>", ps->what, el, want);
            return;
        }
        ps->root_seen = 1;
        if (!ps->mode) {
            const char *bw = attr(atts, "totalBWPerLink");
            double v;
            if (!bw || parse_number(bw, &v) || v <= 0 || v > 1e12 || v != floor(v)) {
                pfail(ps, "network: <Network totalBWPerLink> must be a positive integer (Gbps)%s",
                      bw ? "" : "; it is missing");
                return;
            }
            ps->in->total_bw = (long)v;
        }
        return;
    }
    if (ps->depth != 2)
        return;
    if (!ps->mode && strcmp(el, "Node") == 0)
        add_node(ps, attr(atts, "name"), attr(atts, "type"), attr(atts, "location"));
    else if (!ps->mode && strcmp(el, "Edge") == 0)
        add_edge(ps, attr(atts, "A"), attr(atts, "B"), attr(atts, "distance"));
    else if (ps->mode && strcmp(el, "Demand") == 0)
        add_demand(ps, attr(atts, "source"), attr(atts, "destination"),
                   parse_bw(attr(atts, "bw")), attr(atts, "bw"));
}

static void XMLCALL on_end(void *ud, const XML_Char *el)
{
    (void)el;
    struct parse_state *ps = ud;
    ps->depth--;
}

static void XMLCALL on_entity(void *ud, const XML_Char *name, int is_param, const XML_Char *value,
                              int value_len, const XML_Char *base, const XML_Char *sys,
                              const XML_Char *pub, const XML_Char *notation)
{
    (void)name; (void)is_param; (void)value; (void)value_len; (void)base; (void)sys; (void)pub;
    (void)notation;
    pfail(ud, "XML entity declarations are not accepted");
}

static int parse_xml(struct parse_state *ps, const char *text, size_t len)
{
    XML_Parser p = XML_ParserCreate(NULL);
    if (!p)
        return gj_error_set(ps->err, ps->what, "out of memory");
    ps->parser = p;
    XML_SetUserData(p, ps);
    XML_SetElementHandler(p, on_start, on_end);
    XML_SetEntityDeclHandler(p, on_entity);
    XML_SetParamEntityParsing(p, XML_PARAM_ENTITY_PARSING_NEVER);
    if (XML_Parse(p, text, (int)len, XML_TRUE) == XML_STATUS_ERROR && !ps->failed) {
        pfail(ps, "%s: malformed XML at line %lu: %s", ps->what,
              (unsigned long)XML_GetCurrentLineNumber(p), XML_ErrorString(XML_GetErrorCode(p)));
    }
    XML_ParserFree(p);
    ps->parser = NULL;
    if (!ps->failed && !ps->root_seen)
        pfail(ps, "%s: no root element", ps->what);
    return ps->failed ? -1 : 0;
}

/* ---- JSON ---- */
static const char *jstr(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

static int json_network(struct parse_state *ps, json_t *root)
{
    json_t *bw = json_object_get(root, "total_bw_per_link");
    if (!json_is_integer(bw) || json_integer_value(bw) <= 0 || json_integer_value(bw) > 1000000000000LL) {
        pfail(ps, "network: total_bw_per_link must be a positive integer (Gbps)");
        return -1;
    }
    ps->in->total_bw = (long)json_integer_value(bw);
    json_t *nodes = json_object_get(root, "nodes"), *edges = json_object_get(root, "edges");
    if (!json_is_array(nodes) || !json_is_array(edges)) {
        pfail(ps, "network: 'nodes' and 'edges' must be arrays");
        return -1;
    }
    size_t i;
    json_t *v;
    json_array_foreach(nodes, i, v) {
        if (!json_is_object(v)) {
            pfail(ps, "network: nodes[%zu] is not an object", i);
            return -1;
        }
        if (add_node(ps, jstr(v, "name"), jstr(v, "type"), jstr(v, "location")))
            return -1;
    }
    json_array_foreach(edges, i, v) {
        json_t *d = json_is_object(v) ? json_object_get(v, "distance") : NULL;
        if (!json_is_object(v) || !json_is_number(d)) {
            pfail(ps, "network: edges[%zu] needs a, b and a numeric distance", i);
            return -1;
        }
        char num[64];
        snprintf(num, sizeof num, "%.17g", json_number_value(d));
        if (add_edge(ps, jstr(v, "a"), jstr(v, "b"), num))
            return -1;
    }
    return 0;
}

static int json_demands(struct parse_state *ps, json_t *root)
{
    json_t *dems = json_object_get(root, "demands");
    if (!json_is_array(dems)) {
        pfail(ps, "demands: 'demands' must be an array");
        return -1;
    }
    size_t i;
    json_t *v;
    json_array_foreach(dems, i, v) {
        if (!json_is_object(v)) {
            pfail(ps, "demands: demands[%zu] is not an object", i);
            return -1;
        }
        json_t *bw = json_object_get(v, "bw");
        int b = -1;
        char text_bw[48] = "(missing)";
        if (json_is_string(bw)) {
            b = parse_bw(json_string_value(bw));
            snprintf(text_bw, sizeof text_bw, "%.40s", json_string_value(bw));
        } else if (json_is_integer(bw)) {
            json_int_t x = json_integer_value(bw);
            b = (x == 1 || x == 10 || x == 40 || x == 100) ? (int)x : -1;
            snprintf(text_bw, sizeof text_bw, "%lld", (long long)x);
        }
        if (add_demand(ps, jstr(v, "source"), jstr(v, "destination"), b, text_bw))
            return -1;
    }
    return 0;
}

static int parse_json(struct parse_state *ps, const char *text, size_t len)
{
    json_error_t je;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        return gj_error_set(ps->err, ps->what, "%s: malformed JSON at line %d: %s", ps->what, je.line,
                            je.text);
    if (!json_is_object(root))
        pfail(ps, "%s: the JSON document must be an object", ps->what);
    else {
        ps->root_seen = 1;
        if (ps->mode)
            json_demands(ps, root);
        else
            json_network(ps, root);
    }
    json_decref(root);
    return ps->failed ? -1 : 0;
}

/* ---- name lookup ---- */
struct name_map { int *slot; size_t cap; const struct brkga_node *nodes; };

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static int map_build(struct name_map *m, const struct brkga_net_input *in, struct gj_error *err)
{
    m->cap = 16;
    while (m->cap < in->n_nodes * 2 + 2)
        m->cap *= 2;
    m->slot = malloc(m->cap * sizeof *m->slot);
    m->nodes = in->nodes;
    if (!m->slot)
        return gj_error_set(err, "network", "out of memory");
    for (size_t i = 0; i < m->cap; i++)
        m->slot[i] = -1;
    for (size_t i = 0; i < in->n_nodes; i++) {
        size_t h = hash_str(in->nodes[i].name) & (m->cap - 1);
        while (m->slot[h] >= 0) {
            if (strcmp(in->nodes[m->slot[h]].name, in->nodes[i].name) == 0)
                return gj_error_set(err, "network", "network: node '%s' is declared twice", in->nodes[i].name);
            h = (h + 1) & (m->cap - 1);
        }
        m->slot[h] = (int)i;
    }
    return 0;
}

static int map_find(const struct name_map *m, const char *name)
{
    size_t h = hash_str(name) & (m->cap - 1);
    while (m->slot[h] >= 0) {
        if (strcmp(m->nodes[m->slot[h]].name, name) == 0)
            return m->slot[h];
        h = (h + 1) & (m->cap - 1);
    }
    return -1;
}

static void free_raw(struct parse_state *ps)
{
    for (size_t i = 0; i < ps->n_edges; i++) {
        free(ps->edges[i].a);
        free(ps->edges[i].b);
    }
    free(ps->edges);
    for (size_t i = 0; i < ps->n_dems; i++) {
        free(ps->dems[i].src);
        free(ps->dems[i].dst);
    }
    free(ps->dems);
}

static const char *skip_ws(const char *t, size_t len, size_t *off)
{
    size_t i = 0;
    if (len >= 3 && (unsigned char)t[0] == 0xEF && (unsigned char)t[1] == 0xBB && (unsigned char)t[2] == 0xBF)
        i = 3;
    while (i < len && isspace((unsigned char)t[i]))
        i++;
    *off = i;
    return i < len ? t + i : NULL;
}

/* Parses XML or JSON, chosen by the first non-blank byte, into ps (raw records). */
static int parse_text(struct parse_state *ps, const char *text, size_t len)
{
    size_t off;
    const char *first = skip_ws(text, len, &off);
    if (!first)
        return gj_error_set(ps->err, ps->what, "%s: the file is empty", ps->what);
    if (*first == '<')
        return parse_xml(ps, text, len);
    if (*first == '{')
        return parse_json(ps, text, len);
    return gj_error_set(ps->err, ps->what, "%s: neither XML nor JSON (starts with 0x%02x)", ps->what,
                        (unsigned char)*first);
}

/* Each node's location: a declared core node, given to a source or transit node. */
static int resolve_locations(struct brkga_net_input *in, const struct name_map *map, struct gj_error *err)
{
    for (size_t i = 0; i < in->n_nodes; i++) {
        struct brkga_node *nd = &in->nodes[i];
        if (!nd->location)
            continue;
        int l = map_find(map, nd->location);
        if (l < 0)
            return gj_error_set(err, "network", "network: node '%s' is located at '%s', which is not "
                                "declared", nd->name, nd->location);
        if (in->nodes[l].type != BRKGA_NODE_CORE || nd->type == BRKGA_NODE_CORE)
            return gj_error_set(err, "network", "network: node '%s' is located at '%s': a location must "
                                "be a core node and belong to a source or transit node", nd->name,
                                nd->location);
        nd->loc = l;
    }
    return 0;
}

/* The raw edges by node index; an edge needs a core node at one end. */
static int resolve_edges(struct brkga_net_input *in, const struct parse_state *ps, const struct name_map *map,
                         struct gj_error *err)
{
    in->edges = calloc(ps->n_edges ? ps->n_edges : 1, sizeof *in->edges);
    if (!in->edges)
        return gj_error_set(err, "network", "out of memory");
    for (size_t i = 0; i < ps->n_edges; i++) {
        const struct raw_edge *e = &ps->edges[i];
        int a = map_find(map, e->a), b = map_find(map, e->b);
        if (a < 0 || b < 0)
            return gj_error_set(err, "network", "network: Edge %zu (%s-%s) refers to node '%s', which is "
                                "not declared", i + 1, e->a, e->b, a < 0 ? e->a : e->b);
        if (a == b)
            return gj_error_set(err, "network", "network: Edge %zu connects '%s' to itself", i + 1, e->a);
        if (in->nodes[a].type != BRKGA_NODE_CORE && in->nodes[b].type != BRKGA_NODE_CORE)
            return gj_error_set(err, "network", "network: Edge %zu (%s-%s) joins two MPLS nodes; an edge "
                                "must have a core (WSON) node at one end at least", i + 1, e->a, e->b);
        in->edges[i].a = a;
        in->edges[i].b = b;
        in->edges[i].distance = e->distance;
    }
    in->n_edges = ps->n_edges;
    return 0;
}

int brkga_net_parse_network(const char *text, size_t len, struct brkga_net_input *in,
                            struct gj_error *err)
{
    struct parse_state ps = { .in = in, .err = err, .mode = 0, .what = "network" };
    struct name_map map = { 0 };
    int rc = parse_text(&ps, text, len);
    if (rc == 0 && in->n_nodes == 0)
        rc = gj_error_set(err, "network", "network: no nodes");
    if (rc == 0)
        rc = map_build(&map, in, err);
    if (rc == 0)
        rc = resolve_locations(in, &map, err);
    if (rc == 0)
        rc = resolve_edges(in, &ps, &map, err);
    free(map.slot);
    free_raw(&ps);
    return rc;
}

/* The raw demands by node index, between two distinct source (access) nodes. */
static int resolve_demands(struct brkga_net_input *in, const struct parse_state *ps, const struct name_map *map,
                           struct gj_error *err)
{
    in->demands = calloc(ps->n_dems, sizeof *in->demands);
    if (!in->demands)
        return gj_error_set(err, "demands", "out of memory");
    for (size_t i = 0; i < ps->n_dems; i++) {
        const struct raw_demand *r = &ps->dems[i];
        int s = map_find(map, r->src), d = map_find(map, r->dst);
        if (s < 0 || d < 0)
            return gj_error_set(err, "demands", "demands: Demand %zu (%s->%s): node '%s' is not in the "
                                "network", i + 1, r->src, r->dst, s < 0 ? r->src : r->dst);
        if (in->nodes[s].type != BRKGA_NODE_ACCESS || in->nodes[d].type != BRKGA_NODE_ACCESS)
            return gj_error_set(err, "demands", "demands: Demand %zu (%s->%s): '%s' is not a source "
                                "(access) node", i + 1, r->src, r->dst,
                                in->nodes[s].type != BRKGA_NODE_ACCESS ? r->src : r->dst);
        if (s == d)
            return gj_error_set(err, "demands", "demands: Demand %zu has the same source and destination "
                                "'%s'", i + 1, r->src);
        in->demands[i].src = s;
        in->demands[i].dst = d;
        in->demands[i].bw = r->bw;
    }
    in->n_demands = ps->n_dems;
    return 0;
}

int brkga_net_parse_demands(const char *text, size_t len, struct brkga_net_input *in,
                            struct gj_error *err)
{
    struct parse_state ps = { .in = in, .err = err, .mode = 1, .what = "demands" };
    struct name_map map = { 0 };
    int rc = parse_text(&ps, text, len);
    if (rc == 0 && ps.n_dems == 0)
        rc = gj_error_set(err, "demands", "demands: no demands");
    if (rc == 0)
        rc = map_build(&map, in, err);
    if (rc == 0)
        rc = resolve_demands(in, &ps, &map, err);
    free(map.slot);
    free_raw(&ps);
    return rc;
}
