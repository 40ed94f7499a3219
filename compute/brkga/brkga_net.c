/*
 * brkga_net.c — network/demand parsing (expat XML, jansson JSON), the
 * pre-computation of seed 002 section 4.1.1 / 5.5, and the CPU decoder wrapper.
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

#include "brkga/brkga_engine.h"
#include "brkga/brkga_net.h"
#include "brkga/brkga_net_decode.h"

#define MAX_NODES 20000
#define MAX_EDGES 400000
#define MAX_DEMANDS 200000
#define MAX_NAME 200
#define BRKGA_NET_MAX_TRANSIT 1000
#define BRKGA_NET_MAX_ACCESS 10000
#define BRKGA_NET_MAX_ROUTES 4000000

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
    char *msg;
    size_t msglen;
    int failed;
    XML_Parser parser;
};

static void pfail(struct parse_state *ps, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void pfail(struct parse_state *ps, const char *fmt, ...)
{
    if (ps->failed)
        return;
    ps->failed = 1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ps->msg, ps->msglen, fmt, ap);
    va_end(ap);
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
        pfail(ps, "%s: elements nested too deeply", ps->mode ? "demands" : "network");
        return;
    }
    if (ps->depth == 1) {
        const char *want = ps->mode ? "Traffic" : "Network";
        if (strcmp(el, want) != 0) {
            pfail(ps, "%s: the root element is <%.40s>, expected <%s>",
                  ps->mode ? "demands" : "network", el, want);
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
        return brkga_fail(ps->msg, ps->msglen, "out of memory");
    ps->parser = p;
    XML_SetUserData(p, ps);
    XML_SetElementHandler(p, on_start, on_end);
    XML_SetEntityDeclHandler(p, on_entity);
    XML_SetParamEntityParsing(p, XML_PARAM_ENTITY_PARSING_NEVER);
    const char *what = ps->mode ? "demands" : "network";
    if (XML_Parse(p, text, (int)len, XML_TRUE) == XML_STATUS_ERROR && !ps->failed) {
        pfail(ps, "%s: malformed XML at line %lu: %s", what,
              (unsigned long)XML_GetCurrentLineNumber(p), XML_ErrorString(XML_GetErrorCode(p)));
    }
    XML_ParserFree(p);
    ps->parser = NULL;
    if (!ps->failed && !ps->root_seen)
        pfail(ps, "%s: no root element", what);
    return ps->failed ? -1 : 0;
}

/* ---- JSON ---- */
static const char *jstr(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

static int parse_json(struct parse_state *ps, const char *text, size_t len)
{
    json_error_t je;
    const char *what = ps->mode ? "demands" : "network";
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        return brkga_fail(ps->msg, ps->msglen, "%s: malformed JSON at line %d: %s", what, je.line, je.text);
    int rc = -1;
    if (!json_is_object(root)) {
        pfail(ps, "%s: the JSON document must be an object", what);
        goto out;
    }
    ps->root_seen = 1;
    if (!ps->mode) {
        json_t *bw = json_object_get(root, "total_bw_per_link");
        if (!json_is_integer(bw) || json_integer_value(bw) <= 0 || json_integer_value(bw) > 1000000000000LL) {
            pfail(ps, "network: total_bw_per_link must be a positive integer (Gbps)");
            goto out;
        }
        ps->in->total_bw = (long)json_integer_value(bw);
        json_t *nodes = json_object_get(root, "nodes"), *edges = json_object_get(root, "edges");
        if (!json_is_array(nodes) || !json_is_array(edges)) {
            pfail(ps, "network: 'nodes' and 'edges' must be arrays");
            goto out;
        }
        size_t i;
        json_t *v;
        json_array_foreach(nodes, i, v) {
            if (!json_is_object(v)) {
                pfail(ps, "network: nodes[%zu] is not an object", i);
                goto out;
            }
            if (add_node(ps, jstr(v, "name"), jstr(v, "type"), jstr(v, "location")))
                goto out;
        }
        json_array_foreach(edges, i, v) {
            json_t *d = json_is_object(v) ? json_object_get(v, "distance") : NULL;
            if (!json_is_object(v) || !json_is_number(d)) {
                pfail(ps, "network: edges[%zu] needs a, b and a numeric distance", i);
                goto out;
            }
            char num[64];
            snprintf(num, sizeof num, "%.17g", json_number_value(d));
            if (add_edge(ps, jstr(v, "a"), jstr(v, "b"), num))
                goto out;
        }
    } else {
        json_t *dems = json_object_get(root, "demands");
        if (!json_is_array(dems)) {
            pfail(ps, "demands: 'demands' must be an array");
            goto out;
        }
        size_t i;
        json_t *v;
        json_array_foreach(dems, i, v) {
            if (!json_is_object(v)) {
                pfail(ps, "demands: demands[%zu] is not an object", i);
                goto out;
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
                goto out;
        }
    }
    rc = 0;
out:
    json_decref(root);
    return ps->failed ? -1 : rc;
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

static int map_build(struct name_map *m, const struct brkga_net_input *in, char *msg, size_t len)
{
    m->cap = 16;
    while (m->cap < in->n_nodes * 2 + 2)
        m->cap *= 2;
    m->slot = malloc(m->cap * sizeof *m->slot);
    m->nodes = in->nodes;
    if (!m->slot)
        return brkga_fail(msg, len, "out of memory");
    for (size_t i = 0; i < m->cap; i++)
        m->slot[i] = -1;
    for (size_t i = 0; i < in->n_nodes; i++) {
        size_t h = hash_str(in->nodes[i].name) & (m->cap - 1);
        while (m->slot[h] >= 0) {
            if (strcmp(in->nodes[m->slot[h]].name, in->nodes[i].name) == 0)
                return brkga_fail(msg, len, "network: node '%s' is declared twice", in->nodes[i].name);
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

int brkga_net_parse_network(const char *text, size_t len, struct brkga_net_input *in,
                            char *msg, size_t msglen)
{
    struct parse_state ps = { .in = in, .msg = msg, .msglen = msglen, .mode = 0 };
    size_t off;
    const char *first = skip_ws(text, len, &off);
    int rc;
    if (!first)
        return brkga_fail(msg, msglen, "network: the file is empty");
    if (*first == '<')
        rc = parse_xml(&ps, text, len);
    else if (*first == '{')
        rc = parse_json(&ps, text, len);
    else
        return brkga_fail(msg, msglen, "network: neither XML nor JSON (starts with 0x%02x)", (unsigned char)*first);
    struct name_map map = { 0 };
    if (rc == 0 && in->n_nodes == 0)
        rc = brkga_fail(msg, msglen, "network: no nodes");
    if (rc == 0)
        rc = map_build(&map, in, msg, msglen);
    if (rc == 0) {
        for (size_t i = 0; i < in->n_nodes; i++) {
            const struct brkga_node *nd = &in->nodes[i];
            if (!nd->location)
                continue;
            int l = map_find(&map, nd->location);
            if (l < 0) {
                rc = brkga_fail(msg, msglen, "network: node '%s' is located at '%s', which is not declared",
                          nd->name, nd->location);
                break;
            }
            if (in->nodes[l].type != BRKGA_NODE_CORE || nd->type == BRKGA_NODE_CORE) {
                rc = brkga_fail(msg, msglen, "network: node '%s' is located at '%s': a location must be a "
                          "core node and belong to a source or transit node", nd->name, nd->location);
                break;
            }
        }
    }
    if (rc == 0) {
        in->edges = calloc(ps.n_edges ? ps.n_edges : 1, sizeof *in->edges);
        if (!in->edges)
            rc = brkga_fail(msg, msglen, "out of memory");
        for (size_t i = 0; rc == 0 && i < ps.n_edges; i++) {
            struct raw_edge *e = &ps.edges[i];
            int a = map_find(&map, e->a), b = map_find(&map, e->b);
            if (a < 0 || b < 0) {
                rc = brkga_fail(msg, msglen, "network: Edge %zu (%s-%s) refers to node '%s', which is not "
                          "declared", i + 1, e->a, e->b, a < 0 ? e->a : e->b);
                break;
            }
            if (a == b) {
                rc = brkga_fail(msg, msglen, "network: Edge %zu connects '%s' to itself", i + 1, e->a);
                break;
            }
            if (in->nodes[a].type != BRKGA_NODE_CORE && in->nodes[b].type != BRKGA_NODE_CORE) {
                rc = brkga_fail(msg, msglen, "network: Edge %zu (%s-%s) joins two MPLS nodes; an edge "
                          "must have a core (WSON) node at one end at least", i + 1, e->a, e->b);
                break;
            }
            in->edges[i].a = a;
            in->edges[i].b = b;
            in->edges[i].distance = e->distance;
        }
        in->n_edges = rc == 0 ? ps.n_edges : 0;
    }
    free(map.slot);
    free_raw(&ps);
    return rc;
}

int brkga_net_parse_demands(const char *text, size_t len, struct brkga_net_input *in,
                            char *msg, size_t msglen)
{
    struct parse_state ps = { .in = in, .msg = msg, .msglen = msglen, .mode = 1 };
    size_t off;
    const char *first = skip_ws(text, len, &off);
    int rc;
    if (!first)
        return brkga_fail(msg, msglen, "demands: the file is empty");
    if (*first == '<')
        rc = parse_xml(&ps, text, len);
    else if (*first == '{')
        rc = parse_json(&ps, text, len);
    else
        return brkga_fail(msg, msglen, "demands: neither XML nor JSON (starts with 0x%02x)", (unsigned char)*first);
    struct name_map map = { 0 };
    if (rc == 0 && ps.n_dems == 0)
        rc = brkga_fail(msg, msglen, "demands: no demands");
    if (rc == 0)
        rc = map_build(&map, in, msg, msglen);
    if (rc == 0) {
        in->demands = calloc(ps.n_dems, sizeof *in->demands);
        if (!in->demands)
            rc = brkga_fail(msg, msglen, "out of memory");
        for (size_t i = 0; rc == 0 && i < ps.n_dems; i++) {
            struct raw_demand *r = &ps.dems[i];
            int s = map_find(&map, r->src), d = map_find(&map, r->dst);
            if (s < 0 || d < 0) {
                rc = brkga_fail(msg, msglen, "demands: Demand %zu (%s->%s): node '%s' is not in the network",
                          i + 1, r->src, r->dst, s < 0 ? r->src : r->dst);
                break;
            }
            if (in->nodes[s].type != BRKGA_NODE_ACCESS || in->nodes[d].type != BRKGA_NODE_ACCESS) {
                rc = brkga_fail(msg, msglen, "demands: Demand %zu (%s->%s): '%s' is not a source (access) node",
                          i + 1, r->src, r->dst,
                          in->nodes[s].type != BRKGA_NODE_ACCESS ? r->src : r->dst);
                break;
            }
            if (s == d) {
                rc = brkga_fail(msg, msglen, "demands: Demand %zu has the same source and destination '%s'",
                          i + 1, r->src);
                break;
            }
            in->demands[i].src = s;
            in->demands[i].dst = d;
            in->demands[i].bw = r->bw;
        }
        in->n_demands = rc == 0 ? ps.n_dems : 0;
    }
    free(map.slot);
    free_raw(&ps);
    return rc;
}

/* ------------------------------------------------------------------ */
/* Pre-computation                                                     */

struct heap { double *d; int *v; int n, cap; };

static int heap_less(const struct heap *h, int i, int j)
{
    return h->d[i] < h->d[j] || (h->d[i] == h->d[j] && h->v[i] < h->v[j]);
}

static void heap_swap(struct heap *h, int i, int j)
{
    double td = h->d[i]; h->d[i] = h->d[j]; h->d[j] = td;
    int tv = h->v[i]; h->v[i] = h->v[j]; h->v[j] = tv;
}

static int heap_push(struct heap *h, double d, int v)
{
    if (h->n == h->cap) {
        int nc = h->cap ? h->cap * 2 : 64;
        double *nd = realloc(h->d, (size_t)nc * sizeof *nd);
        if (!nd)
            return -1;
        h->d = nd;
        int *nv = realloc(h->v, (size_t)nc * sizeof *nv);
        if (!nv)
            return -1;
        h->v = nv;
        h->cap = nc;
    }
    int i = h->n++;
    h->d[i] = d;
    h->v[i] = v;
    while (i > 0 && heap_less(h, i, (i - 1) / 2)) {
        heap_swap(h, i, (i - 1) / 2);
        i = (i - 1) / 2;
    }
    return 0;
}

static void heap_pop(struct heap *h, double *d, int *v)
{
    *d = h->d[0];
    *v = h->v[0];
    h->n--;
    h->d[0] = h->d[h->n];
    h->v[0] = h->v[h->n];
    int i = 0;
    for (;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        if (l < h->n && heap_less(h, l, m)) m = l;
        if (r < h->n && heap_less(h, r, m)) m = r;
        if (m == i)
            break;
        heap_swap(h, i, m);
        i = m;
    }
}

/* Graph in CSR form: neighbours of u are adj[off[u]..off[u+1]) with edge ids. */
struct csr { int n; int *off, *to, *eid; double *w; };

static void csr_free(struct csr *g)
{
    free(g->off); free(g->to); free(g->eid); free(g->w);
    memset(g, 0, sizeof *g);
}

static int csr_build(struct csr *g, int n, int m, const int *ea, const int *eb, const double *ew)
{
    g->n = n;
    g->off = calloc((size_t)n + 1, sizeof(int));
    g->to = malloc((size_t)(2 * m + 1) * sizeof(int));
    g->eid = malloc((size_t)(2 * m + 1) * sizeof(int));
    g->w = malloc((size_t)(2 * m + 1) * sizeof(double));
    if (!g->off || !g->to || !g->eid || !g->w)
        return -1;
    for (int e = 0; e < m; e++) {
        g->off[ea[e] + 1]++;
        g->off[eb[e] + 1]++;
    }
    for (int u = 0; u < n; u++)
        g->off[u + 1] += g->off[u];
    int *fill = malloc((size_t)n * sizeof(int));
    if (!fill)
        return -1;
    memcpy(fill, g->off, (size_t)n * sizeof(int));
    for (int e = 0; e < m; e++) {
        int i = fill[ea[e]]++;
        g->to[i] = eb[e]; g->eid[i] = e; g->w[i] = ew[e];
        i = fill[eb[e]]++;
        g->to[i] = ea[e]; g->eid[i] = e; g->w[i] = ew[e];
    }
    free(fill);
    return 0;
}

/* Dijkstra from src; nodes with terminal[u] set (other than src) are reached but not
 * expanded. blocked_node / blocked_edge (may be NULL) are skipped. Fills dist, pred_e
 * (edge into the node) and pred_v. */
static int dijkstra(const struct csr *g, int src, const unsigned char *terminal,
                    const unsigned char *blocked_node, const unsigned char *blocked_edge,
                    double *dist, int *pred_v, int *pred_e, struct heap *h)
{
    for (int u = 0; u < g->n; u++) {
        dist[u] = INFINITY;
        pred_v[u] = -1;
        pred_e[u] = -1;
    }
    h->n = 0;
    dist[src] = 0;
    if (heap_push(h, 0, src))
        return -1;
    while (h->n) {
        double d;
        int u;
        heap_pop(h, &d, &u);
        if (d > dist[u])
            continue;
        if (u != src && terminal && terminal[u])
            continue;
        for (int i = g->off[u]; i < g->off[u + 1]; i++) {
            int v = g->to[i];
            if ((blocked_node && blocked_node[v]) || (blocked_edge && blocked_edge[g->eid[i]]))
                continue;
            double nd = d + g->w[i];
            if (nd < dist[v]) {
                dist[v] = nd;
                pred_v[v] = u;
                pred_e[v] = g->eid[i];
                if (heap_push(h, nd, v))
                    return -1;
            }
        }
    }
    return 0;
}

/* A path on the MPLS graph: nodes and the virtual links between them. */
struct mpath { int *nodes; int *edges; int len; double cost; long seq; };

static void mpath_free(struct mpath *p)
{
    free(p->nodes);
    free(p->edges);
    p->nodes = p->edges = NULL;
}

static int mpath_cmp(const struct mpath *a, const struct mpath *b)
{
    if (a->cost != b->cost)
        return a->cost < b->cost ? -1 : 1;
    if (a->len != b->len)
        return a->len < b->len ? -1 : 1;
    /* then the order Yen found them in (as the thesis's Table 6-6 lists them) */
    return a->seq < b->seq ? -1 : a->seq > b->seq;
}

static int mpath_same(const struct mpath *a, const struct mpath *b)
{
    if (a->len != b->len)
        return 0;
    for (int i = 0; i < a->len - 1; i++)
        if (a->edges[i] != b->edges[i])
            return 0;
    return 1;
}

struct yen_ws {
    const struct csr *g;
    const unsigned char *terminal;
    unsigned char *bn, *be;
    double *dist;
    int *pv, *pe;
    struct heap h;
    const double *ecost;
};

/* Shortest path src->dst under the current blocks; found = 0 when none. */
static int yen_sp(struct yen_ws *w, int src, int dst, struct mpath *out, int *found)
{
    *found = 0;
    if (dijkstra(w->g, src, w->terminal, w->bn, w->be, w->dist, w->pv, w->pe, &w->h))
        return -1;
    if (!isfinite(w->dist[dst]))
        return 0;
    int len = 1;
    for (int u = dst; u != src; u = w->pv[u])
        len++;
    out->nodes = malloc((size_t)len * sizeof(int));
    out->edges = malloc((size_t)len * sizeof(int));
    if (!out->nodes || !out->edges)
        return -1;
    out->len = len;
    int i = len - 1;
    for (int u = dst; ; u = w->pv[u]) {
        out->nodes[i] = u;
        if (u == src)
            break;
        out->edges[i - 1] = w->pe[u];
        i--;
    }
    *found = 1;
    return 0;
}

static double mpath_cost(const struct mpath *p, const double *ecost)
{
    double c = 0;
    for (int i = 0; i < p->len - 1; i++)
        c += ecost[p->edges[i]];
    return c;
}

/* Yen's K shortest loopless paths from s to t. Fills A (caller frees) and nA. */
static int yen(struct yen_ws *w, int s, int t, int K, struct mpath **A_out, int *nA_out)
{
    struct mpath *A = calloc((size_t)K, sizeof *A);
    struct mpath *B = NULL;
    int nA = 0, nB = 0, capB = 0, rc = -1;
    long seq = 0;
    if (!A)
        return -1;
    int found;
    memset(w->bn, 0, (size_t)w->g->n);
    memset(w->be, 0, (size_t)w->g->off[w->g->n] / 2 + 1);
    if (yen_sp(w, s, t, &A[0], &found))
        goto out;
    if (!found) {
        rc = 0;
        goto out;
    }
    A[0].cost = mpath_cost(&A[0], w->ecost);
    nA = 1;
    while (nA < K) {
        struct mpath *prev = &A[nA - 1];
        for (int i = 0; i < prev->len - 1; i++) {
            int spur = prev->nodes[i];
            memset(w->bn, 0, (size_t)w->g->n);
            memset(w->be, 0, (size_t)w->g->off[w->g->n] / 2 + 1);
            for (int a = 0; a < nA; a++) {
                struct mpath *p = &A[a];
                if (p->len <= i + 1)
                    continue;
                int same = 1;
                for (int z = 0; z <= i && same; z++)
                    same = p->nodes[z] == prev->nodes[z];
                if (same)
                    w->be[p->edges[i]] = 1;
            }
            for (int z = 0; z < i; z++)
                w->bn[prev->nodes[z]] = 1;
            struct mpath sp = { 0 };
            if (yen_sp(w, spur, t, &sp, &found)) {
                mpath_free(&sp);
                goto out;
            }
            if (!found)
                continue;
            struct mpath tot;
            tot.len = i + sp.len;
            tot.nodes = malloc((size_t)tot.len * sizeof(int));
            tot.edges = malloc((size_t)tot.len * sizeof(int));
            if (!tot.nodes || !tot.edges) {
                mpath_free(&sp);
                mpath_free(&tot);
                goto out;
            }
            for (int z = 0; z < i; z++) {
                tot.nodes[z] = prev->nodes[z];
                tot.edges[z] = prev->edges[z];
            }
            for (int z = 0; z < sp.len; z++)
                tot.nodes[i + z] = sp.nodes[z];
            for (int z = 0; z < sp.len - 1; z++)
                tot.edges[i + z] = sp.edges[z];
            mpath_free(&sp);
            tot.cost = mpath_cost(&tot, w->ecost);
            tot.seq = seq++;
            int dup = 0;
            for (int a = 0; a < nA && !dup; a++)
                dup = mpath_same(&A[a], &tot);
            for (int b = 0; b < nB && !dup; b++)
                dup = mpath_same(&B[b], &tot);
            if (dup) {
                mpath_free(&tot);
                continue;
            }
            if (nB == capB) {
                int nc = capB ? capB * 2 : 16;
                struct mpath *g = realloc(B, (size_t)nc * sizeof *g);
                if (!g) {
                    mpath_free(&tot);
                    goto out;
                }
                B = g;
                capB = nc;
            }
            B[nB++] = tot;
        }
        if (nB == 0)
            break;
        int best = 0;
        for (int b = 1; b < nB; b++)
            if (mpath_cmp(&B[b], &B[best]) < 0)
                best = b;
        A[nA++] = B[best];
        B[best] = B[--nB];
    }
    rc = 0;
out:
    for (int b = 0; b < nB; b++)
        mpath_free(&B[b]);
    free(B);
    if (rc) {
        for (int a = 0; a < K; a++)   /* calloc'd: a partly built path is freed too */
            mpath_free(&A[a]);
        free(A);
        return -1;
    }
    *A_out = A;
    *nA_out = nA;
    return 0;
}

void brkga_net_free(struct brkga_net *net)
{
    brkga_net_input_free(&net->in);
    free(net->olink_edge);
    if (net->vlinks)
        for (int v = 0; v < net->m.n_vlinks; v++)
            free(net->vlinks[v].path);
    free(net->vlinks);
    if (net->route_nodes)
        for (int r = 0; r < net->m.n_routes; r++)
            free(net->route_nodes[r]);
    free(net->route_nodes);
    free(net->route_nodes_len);
    free(net->dem_unroutable);
    struct brkga_net_model *m = &net->m;
    free(m->vl_dist); free(m->dem_bw); free(m->dem_route); free(m->route_vl_off);
    free(m->route_vl); free(m->route_ol_off); free(m->route_ol); free(m->route_ol_mult);
    memset(net, 0, sizeof *net);
}

struct growable { int *v; size_t n, cap; };

static int grow_push(struct growable *g, int x)
{
    if (g->n == g->cap) {
        size_t nc = g->cap ? g->cap * 2 : 256;
        int *nv = realloc(g->v, nc * sizeof *nv);
        if (!nv)
            return -1;
        g->v = nv;
        g->cap = nc;
    }
    g->v[g->n++] = x;
    return 0;
}

struct pair_routes { int s, t, first, count; };

/* brkga_net_build owns its input from the start: a refusal frees it too. */
static int build_refused(struct brkga_net *net, char *msg, size_t msglen, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int build_refused(struct brkga_net *net, char *msg, size_t msglen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (msg && msglen)
        vsnprintf(msg, msglen, fmt, ap);
    va_end(ap);
    brkga_net_free(net);
    return -1;
}

int brkga_net_build(struct brkga_net *net, struct brkga_net_input *in, int max_at, int K,
                    double max_len, char *msg, size_t msglen)
{
    memset(net, 0, sizeof *net);
    net->in = *in;
    memset(in, 0, sizeof *in);
    in = &net->in;
    int N = (int)in->n_nodes, rc = -1;
    int *acc = NULL, *tra = NULL, *mpls_id = NULL, *mpls_node = NULL, *olink_of_edge = NULL;
    int *ea = NULL, *eb = NULL, *pv = NULL, *pe = NULL, *vla = NULL, *vlb = NULL;
    double *ew = NULL, *dist = NULL, *tdist = NULL;
    int **tpath_e = NULL;
    unsigned char *terminal = NULL, *mterm = NULL;
    struct csr g = { 0 }, mg = { 0 };
    struct heap h = { 0 };
    struct yen_ws w = { 0 };
    struct pair_routes *pairs = NULL;
    struct name_map nmap = { 0 };
    struct growable rvl = { 0 }, rvl_off = { 0 }, rol = { 0 }, rmul = { 0 }, rol_off = { 0 };
    int n_pairs = 0, cap_pairs = 0;
    if (K < 1)
        K = 1;
    if (in->n_demands == 0)
        return build_refused(net, msg, msglen, "demands: no demands");
    for (int u = 0; u < N; u++) {
        if (in->nodes[u].type == BRKGA_NODE_ACCESS) net->n_access++;
        else if (in->nodes[u].type == BRKGA_NODE_TRANSIT) net->n_transit++;
        else net->n_core++;
    }
    if (net->n_transit == 0)
        return build_refused(net, msg, msglen, "network: there is no transit node");
    if (net->n_core == 0)
        return build_refused(net, msg, msglen, "network: there is no core (WSON) node");
    if (net->n_transit > BRKGA_NET_MAX_TRANSIT || net->n_access > BRKGA_NET_MAX_ACCESS)
        return build_refused(net, msg, msglen, "network: %d transit and %d source nodes; at most %d and %d",
                    net->n_transit, net->n_access, BRKGA_NET_MAX_TRANSIT, BRKGA_NET_MAX_ACCESS);
    int A = net->n_access, T = net->n_transit, M = A + T;
    acc = malloc((size_t)A * sizeof(int) + 1);
    tra = malloc((size_t)T * sizeof(int));
    mpls_id = malloc((size_t)N * sizeof(int));
    mpls_node = malloc((size_t)M * sizeof(int));
    terminal = calloc((size_t)N, 1);
    if (!acc || !tra || !mpls_id || !mpls_node || !terminal)
        goto oom;
    {
        int ia = 0, it = 0;
        for (int u = 0; u < N; u++) {
            mpls_id[u] = -1;
            if (in->nodes[u].type == BRKGA_NODE_ACCESS) acc[ia++] = u;
            else if (in->nodes[u].type == BRKGA_NODE_TRANSIT) tra[it++] = u;
            if (in->nodes[u].type != BRKGA_NODE_CORE)
                terminal[u] = 1;
        }
        for (int i = 0; i < A; i++) { mpls_id[acc[i]] = i; mpls_node[i] = acc[i]; }
        for (int i = 0; i < T; i++) { mpls_id[tra[i]] = A + i; mpls_node[A + i] = tra[i]; }
    }
    /* optical graph: the edges plus implicit attachments from `location` */
    if (map_build(&nmap, in, msg, msglen))
        goto out;
    {
        int m = (int)in->n_edges, extra = 0;
        for (int u = 0; u < N; u++)
            if (in->nodes[u].location) extra++;
        ea = malloc((size_t)(m + extra + 1) * sizeof(int));
        eb = malloc((size_t)(m + extra + 1) * sizeof(int));
        ew = malloc((size_t)(m + extra + 1) * sizeof(double));
        olink_of_edge = malloc((size_t)(m + extra + 1) * sizeof(int));
        net->olink_edge = malloc((size_t)(m + 1) * sizeof(int));
        if (!ea || !eb || !ew || !olink_of_edge || !net->olink_edge)
            goto oom;
        int no = 0;
        for (int e = 0; e < m; e++) {
            ea[e] = in->edges[e].a;
            eb[e] = in->edges[e].b;
            ew[e] = in->edges[e].distance;
            int core = in->nodes[ea[e]].type == BRKGA_NODE_CORE && in->nodes[eb[e]].type == BRKGA_NODE_CORE;
            olink_of_edge[e] = core ? no : -1;
            if (core)
                net->olink_edge[no++] = e;
        }
        net->m.n_olinks = no;
        int me = m;
        for (int u = 0; u < N; u++) {
            if (!in->nodes[u].location)
                continue;
            int l = map_find(&nmap, in->nodes[u].location);
            if (l < 0)
                continue;
            /* an explicit edge to the same core node may exist: the parallel 0-length
             * attachment is harmless (attachments are not optical links) */
            ea[me] = u; eb[me] = l; ew[me] = 0; olink_of_edge[me] = -1;
            me++;
        }
        unsigned char *att = calloc((size_t)N, 1);
        if (!att)
            goto oom;
        for (int e = 0; e < me; e++)
            att[ea[e]] = att[eb[e]] = 1;
        for (int u = 0; u < N; u++) {
            if (in->nodes[u].type == BRKGA_NODE_CORE || att[u])
                continue;
            free(att);
            brkga_fail(msg, msglen, "network: %s node '%s' is attached to no core node (give it a "
                 "location or an Edge to a core node)",
                 in->nodes[u].type == BRKGA_NODE_ACCESS ? "source" : "transit", in->nodes[u].name);
            goto out;
        }
        free(att);
        if (net->m.n_olinks == 0) {
            brkga_fail(msg, msglen, "network: there is no optical link (edge between two core nodes)");
            goto out;
        }
        if (csr_build(&g, N, me, ea, eb, ew))
            goto oom;
    }
    /* Dijkstra from every transit node (the complete MPLS network) */
    dist = malloc((size_t)N * sizeof(double));
    pv = malloc((size_t)N * sizeof(int));
    pe = malloc((size_t)N * sizeof(int));
    tdist = malloc((size_t)T * (size_t)N * sizeof(double));
    tpath_e = calloc((size_t)T * (size_t)M, sizeof(int *));   /* edge list, length-prefixed */
    if (!dist || !pv || !pe || !tdist || !tpath_e)
        goto oom;
    for (int i = 0; i < T; i++) {
        if (dijkstra(&g, tra[i], terminal, NULL, NULL, dist, pv, pe, &h))
            goto oom;
        for (int j = 0; j < M; j++) {
            int v = mpls_node[j];
            double d = dist[v];
            if (v == tra[i] || !isfinite(d) || (max_len > 0 && d > max_len)) {
                tdist[(size_t)i * N + j] = INFINITY;
                continue;
            }
            tdist[(size_t)i * N + j] = d;
            int len = 0;
            for (int u = v; u != tra[i]; u = pv[u])
                len++;
            int *p = malloc((size_t)(len + 1) * sizeof(int));
            if (!p)
                goto oom;
            p[0] = len;
            int k = len;
            for (int u = v; u != tra[i]; u = pv[u])
                p[k--] = pe[u];
            tpath_e[(size_t)i * M + j] = p;
        }
    }
    /* virtual links: access-transit (pruned to max_at cheapest), then transit-transit */
    {
        int cap = A * T + T * (T - 1) / 2 + 1, nv = 0;
        vla = malloc((size_t)cap * sizeof(int));
        vlb = malloc((size_t)cap * sizeof(int));
        net->vlinks = calloc((size_t)cap, sizeof *net->vlinks);
        if (!vla || !vlb || !net->vlinks)
            goto oom;
        int *cand = malloc((size_t)T * sizeof(int) + 1);
        unsigned char *keep = malloc((size_t)T + 1);
        if (!cand || !keep) {
            free(cand);
            free(keep);
            goto oom;
        }
        for (int a = 0; a < A; a++) {
            int nc = 0;
            for (int i = 0; i < T; i++)
                if (isfinite(tdist[(size_t)i * N + a]))
                    cand[nc++] = i;
            memset(keep, 0, (size_t)T + 1);
            int lim = max_at > 0 && max_at < nc ? max_at : nc;
            /* stable insertion sort by distance (ties: transit order) */
            for (int x = 1; x < nc; x++) {
                int c = cand[x], y = x - 1;
                while (y >= 0 && tdist[(size_t)cand[y] * N + a] > tdist[(size_t)c * N + a]) {
                    cand[y + 1] = cand[y];
                    y--;
                }
                cand[y + 1] = c;
            }
            for (int x = 0; x < lim; x++)
                keep[cand[x]] = 1;
            for (int i = 0; i < T; i++)
                if (keep[i]) {
                    vla[nv] = A + i;
                    vlb[nv] = a;
                    nv++;
                }
        }
        free(cand);
        free(keep);
        for (int j = 1; j < T; j++)
            for (int i = 0; i < j; i++)
                if (isfinite(tdist[(size_t)i * N + A + j])) {
                    vla[nv] = A + i;
                    vlb[nv] = A + j;
                    nv++;
                }
        net->m.n_vlinks = nv;
        net->m.vl_dist = malloc((size_t)(nv + 1) * sizeof(double));
        if (!net->m.vl_dist)
            goto oom;
        for (int v = 0; v < nv; v++) {
            int ti = vla[v] - A, j = vlb[v];
            struct brkga_vlink *vl = &net->vlinks[v];
            vl->a = tra[ti];
            vl->b = mpls_node[j];
            vl->distance = tdist[(size_t)ti * N + j];
            net->m.vl_dist[v] = vl->distance;
            int *p = tpath_e[(size_t)ti * M + j];
            vl->path_len = p[0] + 1;
            vl->path = malloc((size_t)vl->path_len * sizeof(int));
            if (!vl->path)
                goto oom;
            int u = tra[ti];
            vl->path[0] = u;
            for (int k = 1; k <= p[0]; k++) {
                int e = p[k];
                u = ea[e] == u ? eb[e] : ea[e];
                vl->path[k] = u;
            }
        }
    }
    /* MPLS graph and Yen per distinct demand pair */
    {
        int nv = net->m.n_vlinks;
        if (nv == 0) {
            brkga_fail(msg, msglen, "network: no virtual link could be built (is the optical network "
                 "connected, and max_optical_path_length large enough?)");
            goto out;
        }
        if (csr_build(&mg, M, nv, vla, vlb, net->m.vl_dist))
            goto oom;
        mterm = calloc((size_t)M, 1);
        if (!mterm)
            goto oom;
        for (int a = 0; a < A; a++)
            mterm[a] = 1;
        w.g = &mg;
        w.terminal = mterm;
        w.bn = calloc((size_t)M + 1, 1);
        w.be = calloc((size_t)nv + 1, 1);
        w.dist = malloc((size_t)M * sizeof(double));
        w.pv = malloc((size_t)M * sizeof(int));
        w.pe = malloc((size_t)M * sizeof(int));
        w.ecost = net->m.vl_dist;
        int D = (int)in->n_demands;
        net->m.n_demands = D;
        net->m.dem_bw = malloc((size_t)D * sizeof(int));
        net->m.dem_route = malloc((size_t)D * 2 * sizeof(int));
        net->dem_unroutable = calloc((size_t)D, sizeof(int));
        if (!w.bn || !w.be || !w.dist || !w.pv || !w.pe || !net->m.dem_bw || !net->m.dem_route ||
            !net->dem_unroutable)
            goto oom;
        if (grow_push(&rvl_off, 0) || grow_push(&rol_off, 0))
            goto oom;
        struct growable rnodes_len = { 0 };
        int **rnodes = NULL;
        size_t rnodes_cap = 0;
        for (int d = 0; d < D; d++) {
            int s = mpls_id[in->demands[d].src], t = mpls_id[in->demands[d].dst];
            if (s > t) { int x = s; s = t; t = x; }
            net->m.dem_bw[d] = in->demands[d].bw;
            int pi = -1;
            for (int q = 0; q < n_pairs; q++)
                if (pairs[q].s == s && pairs[q].t == t) { pi = q; break; }
            if (pi < 0) {
                struct mpath *P = NULL;
                int nP = 0;
                if (yen(&w, s, t, K, &P, &nP))
                    goto oom_r;
                if ((long)rvl_off.n - 1 + nP > BRKGA_NET_MAX_ROUTES) {
                    for (int z = 0; z < nP; z++) mpath_free(&P[z]);
                    free(P);
                    for (size_t z = 0; z < rnodes_len.n; z++)
                        free(rnodes[z]);
                    free(rnodes);
                    free(rnodes_len.v);
                    brkga_fail(msg, msglen, "more than %d candidate routes: lower k_paths", BRKGA_NET_MAX_ROUTES);
                    goto out;
                }
                if (n_pairs == cap_pairs) {
                    int nc = cap_pairs ? cap_pairs * 2 : 32;
                    struct pair_routes *gp = realloc(pairs, (size_t)nc * sizeof *gp);
                    if (!gp) {
                        for (int z = 0; z < nP; z++) mpath_free(&P[z]);
                        free(P);
                        goto oom_r;
                    }
                    pairs = gp;
                    cap_pairs = nc;
                }
                pi = n_pairs++;
                pairs[pi].s = s;
                pairs[pi].t = t;
                pairs[pi].first = (int)rvl_off.n - 1;
                pairs[pi].count = nP;
                int failed = 0;
                for (int z = 0; z < nP; z++) {
                    struct mpath *p = &P[z];
                    for (int q = 0; q < p->len - 1 && !failed; q++)
                        failed = grow_push(&rvl, p->edges[q]);
                    failed = failed || grow_push(&rvl_off, (int)rvl.n);
                    /* optical links with multiplicity */
                    size_t base = rol.n;
                    for (int q = 0; q < p->len - 1 && !failed; q++) {
                        struct brkga_vlink *vl = &net->vlinks[p->edges[q]];
                        for (int h2 = 0; h2 + 1 < vl->path_len && !failed; h2++) {
                            int x = vl->path[h2], y = vl->path[h2 + 1];
                            if (in->nodes[x].type != BRKGA_NODE_CORE || in->nodes[y].type != BRKGA_NODE_CORE)
                                continue;
                            /* the edge Dijkstra used */
                            int ol = -1;
                            for (int e = g.off[x]; e < g.off[x + 1]; e++)
                                if (g.to[e] == y && olink_of_edge[g.eid[e]] >= 0) {
                                    if (ol < 0 || in->edges[g.eid[e]].distance <
                                                      in->edges[net->olink_edge[ol]].distance)
                                        ol = olink_of_edge[g.eid[e]];
                                }
                            size_t f;
                            for (f = base; f < rol.n; f++)
                                if (rol.v[f] == ol)
                                    break;
                            if (f < rol.n)
                                rmul.v[f]++;
                            else
                                failed = grow_push(&rol, ol) || grow_push(&rmul, 1);
                        }
                    }
                    failed = failed || grow_push(&rol_off, (int)rol.n);
                    if (!failed && rnodes_len.n == rnodes_cap) {
                        size_t nc = rnodes_cap ? rnodes_cap * 2 : 256;
                        int **gr = realloc(rnodes, nc * sizeof *gr);
                        if (!gr)
                            failed = 1;
                        else {
                            rnodes = gr;
                            rnodes_cap = nc;
                        }
                    }
                    if (!failed) {
                        int *nn = malloc((size_t)p->len * sizeof(int));
                        if (!nn)
                            failed = 1;
                        else {
                            for (int q = 0; q < p->len; q++)
                                nn[q] = mpls_node[p->nodes[q]];
                            rnodes[rnodes_len.n] = nn;
                            failed = grow_push(&rnodes_len, p->len);
                            if (failed)
                                free(nn);
                        }
                    }
                }
                for (int z = 0; z < nP; z++)
                    mpath_free(&P[z]);
                free(P);
                if (failed)
                    goto oom_r;
            }
            net->m.dem_route[2 * d] = pairs[pi].first;
            net->m.dem_route[2 * d + 1] = pairs[pi].first + pairs[pi].count;
            if (pairs[pi].count > net->m.max_routes)
                net->m.max_routes = pairs[pi].count;
            if (pairs[pi].count == 0) {
                net->dem_unroutable[d] = 1;
                if (!net->n_unroutable++)
                    snprintf(net->unroutable_msg, sizeof net->unroutable_msg,
                             "demand %d (%s->%s) has no path in the MPLS network", d,
                             in->nodes[in->demands[d].src].name, in->nodes[in->demands[d].dst].name);
            }
        }
        net->m.n_routes = (int)rvl_off.n - 1;
        net->route_nodes = rnodes;
        net->route_nodes_len = rnodes_len.v;
        net->m.route_vl = rvl.v;
        net->m.route_vl_off = rvl_off.v;
        net->m.route_ol = rol.v;
        net->m.route_ol_off = rol_off.v;
        net->m.route_ol_mult = rmul.v;
        memset(&rvl, 0, sizeof rvl);
        memset(&rvl_off, 0, sizeof rvl_off);
        memset(&rol, 0, sizeof rol);
        memset(&rol_off, 0, sizeof rol_off);
        memset(&rmul, 0, sizeof rmul);
        if (!net->m.route_vl && grow_push(&rvl, 0) == 0) { net->m.route_vl = rvl.v; memset(&rvl, 0, sizeof rvl); }
        if (!net->m.route_ol && grow_push(&rol, 0) == 0) { net->m.route_ol = rol.v; memset(&rol, 0, sizeof rol); }
        if (!net->m.route_ol_mult && grow_push(&rmul, 0) == 0) { net->m.route_ol_mult = rmul.v; memset(&rmul, 0, sizeof rmul); }
        if (!net->m.route_vl || !net->m.route_ol || !net->m.route_ol_mult)
            goto oom;
        goto built;
oom_r:
        for (size_t z = 0; z < rnodes_len.n; z++)
            free(rnodes[z]);
        free(rnodes);
        free(rnodes_len.v);
        goto oom;
    }
built:
    net->m.capacity = in->total_bw;
    rc = 0;
    goto out;
oom:
    brkga_fail(msg, msglen, "out of memory during pre-computation");
out:
    free(acc); free(tra); free(mpls_id); free(mpls_node); free(olink_of_edge);
    free(ea); free(eb); free(ew); free(pv); free(pe); free(vla); free(vlb);
    free(dist); free(tdist);
    if (tpath_e)
        for (size_t i = 0; i < (size_t)T * (size_t)M; i++)
            free(tpath_e[i]);
    free(tpath_e);
    free(terminal); free(mterm);
    csr_free(&g); csr_free(&mg);
    free(h.d); free(h.v);
    free(w.bn); free(w.be); free(w.dist); free(w.pv); free(w.pe); free(w.h.d); free(w.h.v);
    free(pairs);
    free(nmap.slot);
    free(rvl.v); free(rvl_off.v); free(rol.v); free(rol_off.v); free(rmul.v);
    if (rc)
        brkga_net_free(net);
    return rc;
}

static void view_of(const struct brkga_net_model *m, struct brkga_net_view *v)
{
    v->n_vlinks = m->n_vlinks;
    v->n_demands = m->n_demands;
    v->n_olinks = m->n_olinks;
    v->capacity = m->capacity;
    v->vl_dist = m->vl_dist;
    v->dem_bw = m->dem_bw;
    v->dem_route = m->dem_route;
    v->route_vl_off = m->route_vl_off;
    v->route_vl = m->route_vl;
    v->route_ol_off = m->route_ol_off;
    v->route_ol = m->route_ol;
    v->route_ol_mult = m->route_ol_mult;
}

size_t brkga_net_scratch_bytes(const struct brkga_net_model *m)
{
    return brkga_net_scratch_size(m->n_vlinks, m->n_demands, m->n_olinks);
}

double brkga_net_decode(const struct brkga_net_model *m, const float *keys, void *scratch,
                        struct brkga_net_trace *trace)
{
    struct brkga_net_view v;
    view_of(m, &v);
    if (!trace)
        return brkga_net_decode_view(&v, keys, scratch, NULL, NULL, NULL);
    double f = brkga_net_decode_view(&v, keys, scratch, trace->route, trace->order,
                                     &trace->failed_demand);
    for (int i = 0; i < m->n_vlinks; i++) {
        trace->metric[i] = (double)keys[i] * m->vl_dist[i];
        trace->vl_load[i] = 0;
    }
    for (int o = 0; o < m->n_olinks; o++)
        trace->ol_load[o] = 0;
    for (int d = 0; d < m->n_demands; d++) {
        int r = trace->route[d];
        if (r < 0)
            continue;
        for (int t = m->route_vl_off[r]; t < m->route_vl_off[r + 1]; t++)
            trace->vl_load[m->route_vl[t]] += m->dem_bw[d];
        for (int t = m->route_ol_off[r]; t < m->route_ol_off[r + 1]; t++)
            trace->ol_load[m->route_ol[t]] += (long)m->dem_bw[d] * m->route_ol_mult[t];
    }
    return f;
}

double brkga_net_decode_cb(void *ctx, float *keys, void *scratch)
{
    return brkga_net_decode(ctx, keys, scratch, NULL);
}
