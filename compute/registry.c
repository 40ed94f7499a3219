/*
 * registry.c — every job kind and benchmark the binary knows.
 * A module adds its kind here with one line; nothing else lists kinds.
 */
#include <string.h>

#include "common/gj_kind.h"

extern const struct gj_kind gj_kind_noop;
extern const struct gj_kind gj_kind_infer;   /* compute/infer/serving/kind_infer.c */
int gj_bench_onnx_main(int argc, char **argv);   /* compute/infer/onnx/onnx_bench.c */
int gj_bench_infer_main(int argc, char **argv);  /* compute/infer/serving/bench_infer.c */
extern const struct gj_kind gj_kind_brkga; int gj_bench_brkga_main(int argc, char **argv);
extern const struct gj_kind gj_kind_recon, gj_kind_phantom; int gj_bench_recon_main(int argc, char **argv);

static const struct gj_kind *const kinds[] = {
    &gj_kind_noop,
    &gj_kind_infer,
    &gj_kind_brkga,
    &gj_kind_recon, &gj_kind_phantom,
};

static const struct gj_bench benches[] = {
    { NULL, NULL, NULL },   /* keeps the array non-empty; never listed */
    { "recon", "FDK GUPS (RabbitCT geometry), batch FBP / SART images/s, scikit-image comparison; CPU and GPU", gj_bench_recon_main },
    { "onnx", "ONNX runtime (CPU): inferences/s of models per batch size", gj_bench_onnx_main },
    { "infer", "inference serving in process: batcher req/s, p50/p99 vs concurrency; --runtime: session inf/s per batch (CPU, GPU)", gj_bench_infer_main },
    { "brkga", "BRKGA decodes/s and generations/s (network decoder, TSP), CPU and GPU", gj_bench_brkga_main },
};

size_t gj_kind_count(void)
{
    return sizeof kinds / sizeof kinds[0];
}

const struct gj_kind *gj_kind_at(size_t i)
{
    return i < gj_kind_count() ? kinds[i] : NULL;
}

const struct gj_kind *gj_kind_find(const char *name)
{
    for (size_t i = 0; i < gj_kind_count(); i++)
        if (strcmp(kinds[i]->name, name) == 0)
            return kinds[i];
    return NULL;
}

int gj_kind_schemas_compile(struct gj_error *err)
{
    for (size_t i = 0; i < gj_kind_count(); i++)
        if (!gj_kind_schema(kinds[i], err))
            return -1;
    return 0;
}

size_t gj_bench_count(void)
{
    return sizeof benches / sizeof benches[0] - 1;
}

const struct gj_bench *gj_bench_at(size_t i)
{
    return i < gj_bench_count() ? &benches[i + 1] : NULL;
}
