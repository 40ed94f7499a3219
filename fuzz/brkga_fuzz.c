/*
 * brkga_fuzz.c — libFuzzer harness for the brkga parsers: the first byte picks the
 * parser (network + pre-computation, demands against the section 6.1 network, TSPLIB,
 * Params.xml); the rest is the input. Built by fuzz/build.sh, run by fuzz/smoke.sh.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "brkga/brkga_kind.h"
#include "brkga/brkga_net.h"
#include "brkga/brkga_tsp.h"

static const char net14[] =
    "<Network totalBWPerLink=\"100\"><Node type=\"source\" name=\"A1\" location=\"X2\"/>"
    "<Node type=\"source\" name=\"A2\" location=\"X4\"/><Node type=\"transit\" name=\"T1\" location=\"X1\"/>"
    "<Node type=\"transit\" name=\"T2\" location=\"X3\"/><Node type=\"core\" name=\"X1\"/>"
    "<Node type=\"core\" name=\"X2\"/><Node type=\"core\" name=\"X3\"/><Node type=\"core\" name=\"X4\"/>"
    "<Edge A=\"X1\" B=\"X2\" distance=\"3\"/><Edge A=\"X2\" B=\"X3\" distance=\"4\"/>"
    "<Edge A=\"X3\" B=\"X4\" distance=\"5\"/></Network>";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    int which = data[0] % 4;
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    struct gj_error ge = { 0 };
    if (which == 0 || which == 1) {
        struct brkga_net_input in;
        memset(&in, 0, sizeof in);
        int rc = which == 0 ? brkga_net_parse_network(text, len, &in, &ge)
                            : brkga_net_parse_network(net14, sizeof net14 - 1, &in, &ge);
        if (rc == 0) {
            const char *dem = "<Traffic><Demand source=\"A1\" destination=\"A2\" bw=\"10G\"/></Traffic>";
            rc = which == 0 ? brkga_net_parse_demands(dem, strlen(dem), &in, &ge)
                            : brkga_net_parse_demands(text, len, &in, &ge);
        }
        if (rc == 0 && in.n_nodes <= 200 && in.n_edges <= 2000 && in.n_demands <= 200) {
            struct brkga_net net;
            if (brkga_net_build(&net, &in, 2, 4, 0, NULL, &ge) == 0) {
                float *keys = calloc((size_t)(net.m.n_vlinks + net.m.n_demands) + 1, sizeof *keys);
                void *scratch = malloc(brkga_net_scratch_bytes(&net.m));
                if (keys && scratch)
                    brkga_net_decode(&net.m, keys, scratch, NULL);
                free(keys);
                free(scratch);
                brkga_net_free(&net);
            }
        } else {
            brkga_net_input_free(&in);
        }
    } else if (which == 2) {
        struct brkga_tsp t;
        if (brkga_tsp_parse(text, len, &t, &ge) == 0) {
            if (t.n <= 200) {
                float *keys = calloc((size_t)t.n, sizeof *keys);
                void *scratch = malloc(brkga_tsp_scratch_bytes(&t));
                t.local_search = 1;
                if (keys && scratch)
                    brkga_tsp_decode_cb(&t, keys, scratch);
                free(keys);
                free(scratch);
            }
            brkga_tsp_free(&t);
        }
    } else {
        json_t *p = brkga_params_xml(text, len, &ge);
        if (p) {
            struct brkga_cfg c;
            struct gj_error err;
            brkga_cfg_read(p, &c, &err);
            json_decref(p);
        }
    }
    return 0;
}
