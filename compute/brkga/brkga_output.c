/*
 * brkga_output.c — result.json, results.xml (the thesis's Results format, Table 5-8),
 * statistics.csv (Table 5-6 with times per phase) and convergence.svg.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/fsutil.h"
#include "brkga/brkga_kind.h"

static int write_text(const char *dir, const char *name, const char *text, size_t len,
                      struct gj_error *err)
{
    char path[GJ_PATH_MAX];
    if (gj_path_join(path, sizeof path, dir, name) || gj_write_file(path, text, len))
        return gj_error_set(err, "", "cannot write %s: %s", name, strerror(errno));
    return 0;
}

static void xml_esc(FILE *f, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\'': fputs("&apos;", f); break;
        default: fputc(*s, f);
        }
    }
}

static const char *bw_name(int bw)
{
    switch (bw) {
    case 1: return "1G";
    case 10: return "10G";
    case 40: return "40G";
    default: return "100G";
    }
}

static int write_stats(const char *dir, const struct brkga_result *res, struct gj_error *err)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return gj_error_set(err, "", "out of memory");
    fputs("NumGenerations;NumUnUpdatedGenerations;SecondsSinceStart;SecondsSinceUpdate;"
          "IncumbentValue;MeanValue;Terminate;SecondsInitializeChromosomes;"
          "SecondsEvolveChromosomesSum;SecondsDecodeChromosomesSum;SecondsSortChromosomesSum;"
          "SecondsExchangeSum;Decodes\n", f);
    for (size_t i = 0; res && i < res->n_rows; i++) {
        const struct brkga_stat_row *r = &res->rows[i];
        fprintf(f, "%ld;%ld;%.6f;%.6f;%.6f;", r->generation, r->stall_generations, r->elapsed_s,
                r->since_update_s, r->best);
        if (isfinite(r->mean))
            fprintf(f, "%.6f", r->mean);
        fprintf(f, ";%s;%.6f;%.6f;%.6f;%.6f;%.6f;%ld\n", r->terminate ? "true" : "false", r->t_init,
                r->t_evolve, r->t_decode, r->t_sort, r->t_exchange, r->decodes);
    }
    fclose(f);
    int rc = write_text(dir, "statistics.csv", buf, len, err);
    free(buf);
    return rc;
}

static int write_svg(const char *dir, const struct brkga_result *res, struct gj_error *err)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return gj_error_set(err, "", "out of memory");
    const double W = 720, H = 420, L = 70, R = 20, T = 30, B = 50;
    double lo = INFINITY, hi = -INFINITY;
    size_t n = res ? res->n_hist : 0;
    for (size_t i = 0; i < n; i++) {
        double v[2] = { res->hist_best[i], res->hist_mean[i] };
        for (int k = 0; k < 2; k++)
            if (isfinite(v[k]) && fabs(v[k]) < BRKGA_INFEASIBLE) {
                lo = v[k] < lo ? v[k] : lo;
                hi = v[k] > hi ? v[k] : hi;
            }
    }
    if (!(lo <= hi)) {
        lo = 0;
        hi = 1;
    }
    if (hi - lo < 1e-9) {
        hi += 0.5;
        lo -= 0.5;
    }
    double gmax = n > 1 ? (double)(n - 1) : 1;
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
            "viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\" font-size=\"12\">\n", W, H, W, H);
    fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
    fprintf(f, "<text x=\"%.0f\" y=\"18\" text-anchor=\"middle\">BRKGA convergence: best and mean "
            "fitness per generation</text>\n", W / 2);
    fprintf(f, "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"black\"/>\n", L, H - B, W - R, H - B);
    fprintf(f, "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"black\"/>\n", L, T, L, H - B);
    for (int t = 0; t <= 4; t++) {
        double v = lo + (hi - lo) * t / 4.0, y = H - B - (H - T - B) * t / 4.0;
        fprintf(f, "<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">%.6g</text>\n", L - 5, y + 4, v);
        double g = gmax * t / 4.0, x = L + (W - L - R) * t / 4.0;
        fprintf(f, "<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\">%.0f</text>\n", x, H - B + 16, g);
    }
    fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">generation</text>\n", (L + W - R) / 2, H - 12);
    const char *color[2] = { "#d62728", "#1f77b4" };
    const char *label[2] = { "best", "mean (feasible)" };
    size_t step = n > 2000 ? n / 2000 + 1 : 1;
    for (int k = 0; k < 2; k++) {
        fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"", color[k]);
        for (size_t i = 0; i < n; i += (i + step < n || i == n - 1) ? step : (n - 1 - i)) {
            double v = k ? res->hist_mean[i] : res->hist_best[i];
            if (isfinite(v) && fabs(v) < BRKGA_INFEASIBLE)
                fprintf(f, "%.1f,%.1f ", L + (W - L - R) * (double)i / gmax,
                        H - B - (H - T - B) * (v - lo) / (hi - lo));
            if (i == n - 1)
                break;
        }
        fprintf(f, "\"/>\n");
        fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" fill=\"%s\">%s</text>\n", W - R - 120, T + 14 + 16 * k,
                color[k], label[k]);
    }
    fprintf(f, "</svg>\n");
    fclose(f);
    int rc = write_text(dir, "convergence.svg", buf, len, err);
    free(buf);
    return rc;
}

static json_t *common_json(const struct brkga_cfg *c, const struct brkga_params *prm,
                           const struct brkga_result *res, const char *note)
{
    json_t *o = json_object();
    json_object_set_new(o, "kind", json_string("brkga"));
    json_object_set_new(o, "decoder", json_string(c->tsp ? "tsp" : "network"));
    json_object_set_new(o, "master_seed", json_integer((json_int_t)prm->seed));
    json_object_set_new(o, "genes", json_integer((json_int_t)prm->n));
    json_object_set_new(o, "population_size", json_integer((json_int_t)prm->p));
    json_object_set_new(o, "elites", json_integer((json_int_t)prm->ne));
    json_object_set_new(o, "mutants", json_integer((json_int_t)prm->nm));
    json_object_set_new(o, "populations", json_integer(prm->K));
    json_object_set_new(o, "inheritance_prob", json_real(prm->rhoe));
    json_object_set_new(o, "device", json_string(prm->device >= 0 ? "gpu" : "cpu"));
    json_object_set_new(o, "threads", json_integer(prm->threads));
    if (res) {
        json_object_set_new(o, "generations", json_integer(res->generations));
        json_object_set_new(o, "decodes", json_integer(res->decodes));
        json_object_set_new(o, "stop_reason", json_string(brkga_stop_name(res->stop_reason)));
        json_object_set_new(o, "elapsed_s", json_real(res->elapsed_s));
        json_object_set_new(o, "resets", json_integer(res->resets));
        json_object_set_new(o, "exchanges", json_integer(res->exchanges));
        json_object_set_new(o, "history_length", json_integer((json_int_t)res->n_hist));
    }
    if (note)
        json_object_set_new(o, "note", json_string(note));
    return o;
}

/* The best chromosome's routing (all unrouted when there is no result). */
struct net_trace {
    struct brkga_net_trace tr;
    void *scratch;
    double fit;
    int feasible;
};

static void trace_free(struct net_trace *t)
{
    free(t->tr.metric);
    free(t->tr.vl_load);
    free(t->tr.ol_load);
    free(t->tr.route);
    free(t->tr.order);
    free(t->scratch);
}

static int trace_best(const struct brkga_net_model *m, const struct brkga_result *res, struct net_trace *t,
                      struct gj_error *err)
{
    int V = m->n_vlinks, D = m->n_demands, O = m->n_olinks;
    memset(t, 0, sizeof *t);
    t->tr.metric = calloc((size_t)V + 1, sizeof(double));
    t->tr.vl_load = calloc((size_t)V + 1, sizeof(long));
    t->tr.ol_load = calloc((size_t)O + 1, sizeof(long));
    t->tr.route = malloc(((size_t)D + 1) * sizeof(int));
    t->tr.order = malloc(((size_t)D + 1) * sizeof(int));
    t->tr.failed_demand = -1;
    t->scratch = malloc(brkga_net_scratch_bytes(m));
    if (!t->tr.metric || !t->tr.vl_load || !t->tr.ol_load || !t->tr.route || !t->tr.order || !t->scratch)
        return gj_error_set(err, "", "out of memory");
    for (int d = 0; d < D; d++)
        t->tr.route[d] = -1;
    t->fit = BRKGA_INFEASIBLE;
    if (res) {
        t->fit = brkga_net_decode(m, res->best_keys, t->scratch, &t->tr);
        if (t->fit != res->best)
            return gj_error_set(err, "", "internal: the best chromosome decodes to %g, not %g", t->fit,
                                res->best);
    }
    t->feasible = t->fit < BRKGA_INFEASIBLE;
    return 0;
}

/* Optical links on virtual link vl's path (core-core hops). */
static int vlink_optical_links(const struct brkga_net *net, const struct brkga_vlink *vl)
{
    const struct brkga_node *nodes = net->in.nodes;
    int nol = 0;
    for (int h = 0; h + 1 < vl->path_len; h++)
        nol += nodes[vl->path[h]].type == BRKGA_NODE_CORE && nodes[vl->path[h + 1]].type == BRKGA_NODE_CORE;
    return nol;
}

static json_t *vlinks_json(const struct brkga_net *net, const struct net_trace *t)
{
    const struct brkga_node *nodes = net->in.nodes;
    json_t *vls = json_array();
    for (int v = 0; v < net->m.n_vlinks; v++) {
        const struct brkga_vlink *vl = &net->vlinks[v];
        json_t *hops = json_array();
        for (int h = 0; h + 1 < vl->path_len; h++)
            json_array_append_new(hops, json_pack("[s,s]", nodes[vl->path[h]].name,
                                                  nodes[vl->path[h + 1]].name));
        json_array_append_new(vls, json_pack("{s:i,s:s,s:s,s:f,s:f,s:I,s:o,s:i}", "id", v, "a",
                                             nodes[vl->a].name, "b", nodes[vl->b].name, "distance",
                                             vl->distance, "metric", t->tr.metric[v], "load",
                                             (json_int_t)t->tr.vl_load[v], "optical_hops", hops,
                                             "optical_links", vlink_optical_links(net, vl)));
    }
    return vls;
}

static json_t *olinks_json(const struct brkga_net *net, const struct net_trace *t)
{
    const struct brkga_node *nodes = net->in.nodes;
    json_t *ols = json_array();
    for (int k = 0; k < net->m.n_olinks; k++)
        if (t->tr.ol_load[k] > 0) {
            const struct brkga_edge *e = &net->in.edges[net->olink_edge[k]];
            json_array_append_new(ols, json_pack("{s:s,s:s,s:I}", "a", nodes[e->a].name, "b",
                                                 nodes[e->b].name, "load", (json_int_t)t->tr.ol_load[k]));
        }
    return ols;
}

/* Route r's node at step q, walked from demand d's source (routes are stored from the
 * lower MPLS index). */
static int route_node(const struct brkga_net *net, int d, int r, int q)
{
    int len = net->route_nodes_len[r], *rn = net->route_nodes[r];
    return rn[0] != net->in.demands[d].src ? rn[len - 1 - q] : rn[q];
}

static json_t *demand_json(const struct brkga_net *net, const struct net_trace *t, int d)
{
    const struct brkga_node *nodes = net->in.nodes;
    const struct brkga_net_model *m = &net->m;
    const struct brkga_demand *dm = &net->in.demands[d];
    json_t *jd = json_pack("{s:i,s:s,s:s,s:s,s:i}", "id", d, "source", nodes[dm->src].name,
                           "destination", nodes[dm->dst].name, "bw", bw_name(dm->bw), "bw_gbps", dm->bw);
    int r = t->tr.route[d];
    json_object_set_new(jd, "routed", json_boolean(r >= 0));
    if (r < 0) {
        json_object_set_new(jd, "reason", json_string(net->dem_unroutable[d]
            ? "no path between its nodes in the pruned MPLS network"
            : "no candidate route with enough capacity in the best solution"));
        return jd;
    }
    int rev = net->route_nodes[r][0] != dm->src;
    json_t *path = json_array(), *vlist = json_array();
    for (int q = 0; q < net->route_nodes_len[r]; q++)
        json_array_append_new(path, json_string(nodes[route_node(net, d, r, q)].name));
    int a = m->route_vl_off[r], b = m->route_vl_off[r + 1];
    for (int k = 0; k < b - a; k++)
        json_array_append_new(vlist, json_integer(m->route_vl[rev ? b - 1 - k : a + k]));
    json_object_set_new(jd, "route_index", json_integer(r - m->dem_route[2 * d]));
    json_object_set_new(jd, "route", path);
    json_object_set_new(jd, "virtual_links", vlist);
    return jd;
}

static void net_json(const struct brkga_net *net, const struct net_trace *t, json_t *o)
{
    json_object_set_new(o, "best_fitness", t->feasible ? json_integer((json_int_t)t->fit) : json_null());
    json_object_set_new(o, "feasible", json_boolean(t->feasible));
    json_object_set_new(o, "capacity_per_link", json_integer(net->m.capacity));
    json_object_set_new(o, "virtual_links", vlinks_json(net, t));
    json_object_set_new(o, "optical_links_used", olinks_json(net, t));
    json_t *dems = json_array(), *unr = json_array();
    for (int d = 0; d < net->m.n_demands; d++) {
        json_array_append_new(dems, demand_json(net, t, d));
        if (t->tr.route[d] < 0)
            json_array_append_new(unr, json_integer(d));
    }
    json_object_set_new(o, "demands", dems);
    json_object_set_new(o, "unroutable_demands", unr);
    if (!t->feasible)
        json_object_set_new(o, "message", json_string(
            net->n_unroutable ? net->unroutable_msg
                              : "no feasible routing was found: some demand found no route with "
                                "enough capacity (see unroutable_demands)"));
}

/* <Hop nodeA=... nodeB=...></Hop> */
static void xml_hop(FILE *f, const char *indent, const char *a, const char *b)
{
    fprintf(f, "%s<Hop nodeA=\"", indent);
    xml_esc(f, a);
    fputs("\" nodeB=\"", f);
    xml_esc(f, b);
    fputs("\"></Hop>\n", f);
}

static void xml_vlinks(FILE *f, const struct brkga_net *net, const struct net_trace *t)
{
    const struct brkga_node *nodes = net->in.nodes;
    fprintf(f, "  <VirtualLinks numVirtualLinks=\"%d\">\n", net->m.n_vlinks);
    for (int v = 0; v < net->m.n_vlinks; v++) {
        const struct brkga_vlink *vl = &net->vlinks[v];
        fputs("    <VLink nodeA=\"", f);
        xml_esc(f, nodes[vl->a].name);
        fputs("\" nodeB=\"", f);
        xml_esc(f, nodes[vl->b].name);
        fprintf(f, "\" distance=\"%g\" mplsEdgeID=\"%d\" metric=\"%f\" bw=\"%ld\" layer=\"OPTICAL\" "
                "numHops=\"%d\" numOpticalLinks=\"%d\">\n", vl->distance, v, t->tr.metric[v],
                t->tr.vl_load[v], vl->path_len - 1, vlink_optical_links(net, vl));
        for (int h = 0; h + 1 < vl->path_len; h++)
            xml_hop(f, "      ", nodes[vl->path[h]].name, nodes[vl->path[h + 1]].name);
        fputs("    </VLink>\n", f);
    }
    fputs("  </VirtualLinks>\n", f);
}

static void xml_traffic(FILE *f, const struct brkga_net *net, const struct net_trace *t)
{
    const struct brkga_node *nodes = net->in.nodes;
    fputs("  <Traffic>\n", f);
    for (int d = 0; d < net->m.n_demands; d++) {
        const struct brkga_demand *dm = &net->in.demands[d];
        int r = t->tr.route[d];
        fputs("    <Demand source=\"", f);
        xml_esc(f, nodes[dm->src].name);
        fputs("\" destination=\"", f);
        xml_esc(f, nodes[dm->dst].name);
        fprintf(f, "\" bw=\"%s\"", bw_name(dm->bw));
        if (r < 0 || !t->feasible) {
            fputs(" layer=\"MPLS\">\n      <UnableToRoute></UnableToRoute>\n    </Demand>\n", f);
            continue;
        }
        fprintf(f, " routeSelected=\"%d\" layer=\"MPLS\">\n", r - net->m.dem_route[2 * d]);
        for (int q = 0; q + 1 < net->route_nodes_len[r]; q++)
            xml_hop(f, "      ", nodes[route_node(net, d, r, q)].name, nodes[route_node(net, d, r, q + 1)].name);
        fputs("    </Demand>\n", f);
    }
    fputs("  </Traffic>\n", f);
}

/* results.xml: Table 5-8's Results. */
static int write_results_xml(const char *dir, const struct brkga_net *net, const struct brkga_params *prm,
                             const struct net_trace *t, struct gj_error *err)
{
    char *xbuf = NULL;
    size_t xlen = 0;
    FILE *f = open_memstream(&xbuf, &xlen);
    if (!f)
        return gj_error_set(err, "", "out of memory");
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Results>\n");
    fprintf(f, "  <MasterSeed masterSeed=\"%" PRIu64 "\"></MasterSeed>\n", prm->seed);
    xml_vlinks(f, net, t);
    xml_traffic(f, net, t);
    fprintf(f, "  <FinalIncumbentValue value=\"%f\"></FinalIncumbentValue>\n</Results>\n", t->fit);
    fclose(f);
    int rc = write_text(dir, "results.xml", xbuf, xlen, err);
    free(xbuf);
    return rc;
}

static int net_outputs(const char *dir, const struct brkga_params *prm, struct brkga_problem *pb,
                       const struct brkga_result *res, json_t *o, struct gj_error *err)
{
    struct net_trace t;
    int rc = trace_best(&pb->net.m, res, &t, err);
    if (rc == 0) {
        net_json(&pb->net, &t, o);
        rc = write_results_xml(dir, &pb->net, prm, &t, err);
    }
    trace_free(&t);
    return rc;
}

static int tsp_outputs(const struct brkga_cfg *c, struct brkga_problem *pb,
                       const struct brkga_result *res, json_t *o, struct gj_error *err)
{
    const struct brkga_tsp *t = &pb->tsp;
    int *tour = malloc((size_t)t->n * sizeof(int));
    void *scratch = malloc(brkga_tsp_scratch_bytes(t));
    if (!tour || !scratch) {
        free(tour);
        free(scratch);
        return gj_error_set(err, "", "out of memory");
    }
    long L = brkga_tsp_tour(t, res->best_keys, tour, scratch);
    json_t *jt = json_array();
    for (int i = 0; i < t->n; i++)
        json_array_append_new(jt, json_integer(tour[i] + 1));
    json_object_set_new(o, "instance", json_string(t->name));
    json_object_set_new(o, "cities", json_integer(t->n));
    json_object_set_new(o, "distance", json_string(t->att ? "ATT" : t->geo ? "GEO" : "EUC_2D"));
    json_object_set_new(o, "local_search", json_string(t->local_search ? "2opt" : "none"));
    json_object_set_new(o, "best_fitness", json_integer(L));
    json_object_set_new(o, "tour_length", json_integer(L));
    json_object_set_new(o, "feasible", json_true());
    json_object_set_new(o, "tour", jt);
    if (c->have_known_opt) {
        json_object_set_new(o, "known_optimum", json_real(c->known_opt));
        json_object_set_new(o, "gap_percent", json_real(100.0 * ((double)L - c->known_opt) / c->known_opt));
    }
    free(tour);
    free(scratch);
    if ((double)L != res->best)
        return gj_error_set(err, "", "internal: the best tour measures %ld, not %g", L, res->best);
    return 0;
}

int brkga_write_outputs(const char *dir, const struct brkga_cfg *c, const struct brkga_params *prm,
                        struct brkga_problem *pb, const struct brkga_result *res, const char *note,
                        struct gj_error *err)
{
    json_t *o = common_json(c, prm, res, note);
    if (!o)
        return gj_error_set(err, "", "out of memory");
    int rc;
    if (pb->have_net)
        rc = net_outputs(dir, prm, pb, res, o, err);
    else
        rc = res ? tsp_outputs(c, pb, res, o, err) : 0;
    if (rc == 0) {
        char *text = json_dumps(o, JSON_INDENT(2) | JSON_REAL_PRECISION(10));
        if (!text)
            rc = gj_error_set(err, "", "out of memory");
        else {
            rc = write_text(dir, "result.json", text, strlen(text), err);
            free(text);
        }
    }
    json_decref(o);
    if (rc == 0)
        rc = write_stats(dir, res, err);
    if (rc == 0)
        rc = write_svg(dir, res, err);
    return rc;
}
