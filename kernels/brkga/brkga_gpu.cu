/*
 * brkga_gpu.cu — the GPU backend of the BRKGA engine (see compute/brkga/brkga_gpu.h).
 *
 * Populations live in device memory. Keys, crossover and mutants are drawn per gene
 * from the same Philox counters as the CPU backend (brkga_rng.h), ranking is a CUB
 * segmented radix sort of (fitness, slot) pairs (stable: ties by slot index, as the
 * CPU's sort), and the network decoder is brkga_net_decode.h, shared with the CPU,
 * one thread per chromosome with its own scratch. Built with -fmad=false so the
 * double arithmetic of the decoder is the CPU's. The host drives the generation loop
 * (brkga_solve in brkga_engine.c) through the backend functions below. All work goes to a
 * non-blocking stream of the backend's own, synchronised by that stream only: the legacy
 * default stream and cudaDeviceSynchronize would wait for (and break the CUDA-graph capture
 * of) an ONNX session running in another slot on the same GPU.
 */
#include <cuda_runtime.h>
#include <cub/cub.cuh>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../gj_launch.cuh"
#include "brkga/brkga_gpu.h"
#include "brkga/brkga_net.h"
#include "brkga/brkga_net_decode.h"
#include "brkga/brkga_rng.h"

#define CK(call)                                                                          \
    do {                                                                                  \
        cudaError_t e_ = (call);                                                          \
        if (e_ != cudaSuccess) {                                                          \
            snprintf(g_msg, sizeof g_msg, "CUDA: %s: %s", #call, cudaGetErrorString(e_)); \
            return -1;                                                                    \
        }                                                                                 \
    } while (0)

static thread_local char g_msg[256];

struct gpu_state {
    struct brkga_params prm;
    int device;
    size_t total;            /* K * p */
    float *cur, *nxt, *initial, *xbuf;
    double *fit, *nfit, *skey_in, *skey_out, *gathered, *xfit;
    uint32_t *sval_in, *order;
    int *offsets, *xsrc, *xdst;
    unsigned char *scratch;
    size_t scratch_bytes;
    void *cub_tmp;
    size_t cub_bytes;
    struct brkga_net_view view;       /* device pointers */
    void *model_mem[8];
    uint64_t thresh;
    uint32_t *h_order;
    cudaStream_t stream;   /* non-blocking: never the legacy default stream (see header) */
    double t_evolve, t_decode, t_sort;
    struct brkga_backend *be;
};

/* ---- kernels ---- */

__global__ void k_generate(float *cur, const float *initial, size_t n_initial, size_t p, size_t n,
                           size_t total_genes, uint64_t seed, uint32_t gen, int word)
{
    size_t g = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (g >= total_genes)
        return;
    size_t j = g % n, row = g / n, i = row % p, k = row / p;
    if (k == 0 && i < n_initial) {
        cur[g] = initial[i * n + j];
        return;
    }
    struct brkga_u4 u = brkga_philox(seed, (uint32_t)j, (uint32_t)i, gen,
                                     (uint32_t)k | (BRKGA_RNG_GENE << 24));
    cur[g] = brkga_key(u.w[word]);
}

__global__ void k_evolve(const float *cur, float *nxt, const uint32_t *order, size_t p, size_t n,
                         size_t ne, size_t nm, size_t total_genes, uint64_t seed, uint32_t gen,
                         uint64_t thresh)
{
    size_t g = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (g >= total_genes)
        return;
    size_t j = g % n, row = g / n, i = row % p, k = row / p;
    const uint32_t *ord = order + k * p;
    const float *base = cur + k * p * n;
    if (i < ne) {
        nxt[g] = base[(size_t)ord[i] * n + j];
    } else if (i < p - nm) {
        struct brkga_u4 pu = brkga_philox(seed, BRKGA_PARENT_GENE, (uint32_t)i, gen,
                                          (uint32_t)k | (BRKGA_RNG_PARENTS << 24));
        uint32_t e = ord[brkga_below(pu.w[0], (uint32_t)ne)];
        uint32_t o = ord[ne + brkga_below(pu.w[1], (uint32_t)(p - ne))];
        struct brkga_u4 u = brkga_philox(seed, (uint32_t)j, (uint32_t)i, gen,
                                         (uint32_t)k | (BRKGA_RNG_GENE << 24));
        nxt[g] = (uint64_t)u.w[1] < thresh ? base[(size_t)e * n + j] : base[(size_t)o * n + j];
    } else {
        struct brkga_u4 u = brkga_philox(seed, (uint32_t)j, (uint32_t)i, gen,
                                         (uint32_t)k | (BRKGA_RNG_GENE << 24));
        nxt[g] = brkga_key(u.w[0]);
    }
}

__global__ void k_copy_elite_fitness(const double *fit, double *nfit, const uint32_t *order,
                                     size_t p, size_t ne, int K)
{
    size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (size_t)K * ne)
        return;
    size_t k = t / ne, i = t % ne;
    nfit[k * p + i] = fit[k * p + order[k * p + i]];
}

__global__ void k_decode(const struct brkga_net_view m, const float *keys, double *fit,
                         unsigned char *scratch, size_t scratch_bytes, size_t p, size_t n,
                         size_t first, int K)
{
    size_t per = p - first;
    size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (size_t)K * per)
        return;
    size_t k = t / per, i = first + t % per, c = k * p + i;
    double f = brkga_net_decode_view(&m, keys + c * n, scratch + c * scratch_bytes, NULL, NULL, NULL);
    if (f != f)   /* as the CPU backend (do_job): a NaN ranks as infeasible */
        f = BRKGA_INFEASIBLE;
    fit[c] = f;
}

__global__ void k_sort_input(const double *fit, double *skey, uint32_t *sval, size_t p,
                             size_t total, int maximize)
{
    size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= total)
        return;
    double v = maximize ? -fit[t] : fit[t];
    if (v == 0.0)
        v = 0.0;   /* -0.0 and +0.0 rank as equal, as on the CPU */
    skey[t] = v;
    sval[t] = (uint32_t)(t % p);
}

__global__ void k_gather(const double *fit, const uint32_t *order, double *out, size_t p,
                         size_t total)
{
    size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= total)
        return;
    out[t] = fit[(t / p) * p + order[t]];
}

/* rows src[r] (absolute chromosome index) -> buffer row r */
__global__ void k_rows_out(const float *keys, const double *fit, const int *src, float *buf,
                           double *bfit, size_t rows, size_t n)
{
    size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= rows * n)
        return;
    size_t r = t / n, j = t % n;
    buf[t] = keys[(size_t)src[r] * n + j];
    if (j == 0)
        bfit[r] = fit[src[r]];
}

__global__ void k_rows_in(float *keys, double *fit, const int *src_row, const int *dst,
                          const float *buf, const double *bfit, size_t rows, size_t n)
{
    size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= rows * n)
        return;
    size_t r = t / n, j = t % n;
    keys[(size_t)dst[r] * n + j] = buf[(size_t)src_row[r] * n + j];
    if (j == 0)
        fit[dst[r]] = bfit[src_row[r]];
}

static unsigned blocks(size_t n, unsigned tpb)
{
    return (unsigned)((n + tpb - 1) / tpb);
}

/* ---- backend functions ---- */

static int g_rank(struct gpu_state *s)
{
    double t0 = brkga_now();
    size_t total = s->total;
    GJ_LAUNCH(k_sort_input, blocks(total, 256), 256, 0, s->stream)(s->fit, s->skey_in, s->sval_in, s->prm.p, total,
                                               s->prm.maximize);
    CK(cudaGetLastError());
    size_t bytes = s->cub_bytes;
    CK(cub::DeviceSegmentedRadixSort::SortPairs(s->cub_tmp, bytes, s->skey_in, s->skey_out,
                                                s->sval_in, s->order, (int)total, s->prm.K,
                                                s->offsets, s->offsets + 1, 0, 64, s->stream));
    CK(cudaMemcpyAsync(s->h_order, s->order, total * sizeof(uint32_t), cudaMemcpyDeviceToHost, s->stream));
    CK(cudaStreamSynchronize(s->stream));
    s->t_sort += brkga_now() - t0;
    return 0;
}

static int g_decode(struct gpu_state *s, size_t first)
{
    double t0 = brkga_now();
    size_t jobs = (size_t)s->prm.K * (s->prm.p - first);
    GJ_LAUNCH(k_decode, blocks(jobs, 128), 128, 0, s->stream)(s->view, s->cur, s->fit, s->scratch, s->scratch_bytes,
                                         s->prm.p, s->prm.n, first, s->prm.K);
    CK(cudaGetLastError());
    CK(cudaStreamSynchronize(s->stream));
    s->t_decode += brkga_now() - t0;
    return 0;
}

static int g_init_impl(struct gpu_state *s, uint32_t gen, int word, const float *initial,
                       size_t n_initial)
{
    CK(cudaSetDevice(s->device));
    double t0 = brkga_now();
    size_t ninit = n_initial < s->prm.p ? n_initial : s->prm.p;
    if (ninit && initial)
        CK(cudaMemcpyAsync(s->initial, initial, ninit * s->prm.n * sizeof(float), cudaMemcpyHostToDevice,
                           s->stream));
    else
        ninit = 0;
    size_t genes = s->total * s->prm.n;
    GJ_LAUNCH(k_generate, blocks(genes, 256), 256, 0, s->stream)(s->cur, s->initial, ninit, s->prm.p, s->prm.n, genes,
                                            s->prm.seed, gen, word);
    CK(cudaGetLastError());
    CK(cudaStreamSynchronize(s->stream));
    s->t_evolve += brkga_now() - t0;
    if (g_decode(s, 0))
        return -1;
    return g_rank(s);
}

static int g_init(void *st, uint32_t gen, int word, const float *initial, size_t n_initial)
{
    struct gpu_state *s = (struct gpu_state *)st;
    int rc = g_init_impl(s, gen, word, initial, n_initial);
    if (rc)
        gj_error_set(&s->be->err, "", "%s", g_msg);
    return rc;
}

static int g_evolve_impl(struct gpu_state *s, uint32_t gen)
{
    CK(cudaSetDevice(s->device));
    double t0 = brkga_now();
    size_t genes = s->total * s->prm.n;
    GJ_LAUNCH(k_evolve, blocks(genes, 256), 256, 0, s->stream)(s->cur, s->nxt, s->order, s->prm.p, s->prm.n, s->prm.ne,
                                          s->prm.nm, genes, s->prm.seed, gen, s->thresh);
    CK(cudaGetLastError());
    size_t ne_all = (size_t)s->prm.K * s->prm.ne;
    GJ_LAUNCH(k_copy_elite_fitness, blocks(ne_all, 256), 256, 0, s->stream)(s->fit, s->nfit, s->order, s->prm.p,
                                                       s->prm.ne, s->prm.K);
    CK(cudaGetLastError());
    CK(cudaStreamSynchronize(s->stream));
    float *tk = s->cur; s->cur = s->nxt; s->nxt = tk;
    double *tf = s->fit; s->fit = s->nfit; s->nfit = tf;
    s->t_evolve += brkga_now() - t0;
    if (g_decode(s, s->prm.ne))   /* elites are not decoded again */
        return -1;
    return g_rank(s);
}

static int g_evolve(void *st, uint32_t gen)
{
    struct gpu_state *s = (struct gpu_state *)st;
    int rc = g_evolve_impl(s, gen);
    if (rc)
        gj_error_set(&s->be->err, "", "%s", g_msg);
    return rc;
}

static int g_exchange_impl(struct gpu_state *s, int M)
{
    CK(cudaSetDevice(s->device));
    int K = s->prm.K;
    size_t p = s->prm.p, n = s->prm.n, rows = (size_t)K * (size_t)M;
    size_t moves = (size_t)K * (size_t)(K - 1) * (size_t)M;
    int *src = (int *)malloc(rows * sizeof(int));
    int *srow = (int *)malloc(moves * sizeof(int)), *dst = (int *)malloc(moves * sizeof(int));
    if (!src || !srow || !dst) {
        free(src); free(srow); free(dst);
        snprintf(g_msg, sizeof g_msg, "out of memory");
        return -1;
    }
    /* same order as the CPU backend: best M of every population, then into the worst slots */
    for (int k = 0; k < K; k++)
        for (int m = 0; m < M; m++)
            src[k * M + m] = (int)((size_t)k * p + s->h_order[(size_t)k * p + (size_t)m]);
    size_t q = 0;
    for (int k = 0; k < K; k++) {
        size_t dest = p - 1;
        for (int j = 0; j < K; j++) {
            if (j == k)
                continue;
            for (int m = 0; m < M; m++, dest--, q++) {
                srow[q] = j * M + m;
                dst[q] = (int)((size_t)k * p + s->h_order[(size_t)k * p + dest]);
            }
        }
    }
    cudaError_t e = cudaMemcpyAsync(s->xsrc, src, rows * sizeof(int), cudaMemcpyHostToDevice, s->stream);
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(s->xdst, dst, moves * sizeof(int), cudaMemcpyHostToDevice, s->stream);
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(s->xdst + moves, srow, moves * sizeof(int), cudaMemcpyHostToDevice, s->stream);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(s->stream);   /* before the host tables are freed */
    free(src); free(srow); free(dst);
    CK(e);
    GJ_LAUNCH(k_rows_out, blocks(rows * n, 256), 256, 0, s->stream)(s->cur, s->fit, s->xsrc, s->xbuf, s->xfit, rows, n);
    CK(cudaGetLastError());
    GJ_LAUNCH(k_rows_in, blocks(moves * n, 256), 256, 0, s->stream)(s->cur, s->fit, s->xdst + moves, s->xdst, s->xbuf,
                                               s->xfit, moves, n);
    CK(cudaGetLastError());
    CK(cudaStreamSynchronize(s->stream));
    return g_rank(s);
}

static int g_exchange(void *st, int M)
{
    struct gpu_state *s = (struct gpu_state *)st;
    int rc = g_exchange_impl(s, M);
    if (rc)
        gj_error_set(&s->be->err, "", "%s", g_msg);
    return rc;
}

static int g_fitness_impl(struct gpu_state *s, double *out)
{
    CK(cudaSetDevice(s->device));
    GJ_LAUNCH(k_gather, blocks(s->total, 256), 256, 0, s->stream)(s->fit, s->order, s->gathered, s->prm.p, s->total);
    CK(cudaGetLastError());
    CK(cudaMemcpyAsync(out, s->gathered, s->total * sizeof(double), cudaMemcpyDeviceToHost, s->stream));
    CK(cudaStreamSynchronize(s->stream));
    return 0;
}

static int g_fitness(void *st, double *out)
{
    struct gpu_state *s = (struct gpu_state *)st;
    int rc = g_fitness_impl(s, out);
    if (rc)
        gj_error_set(&s->be->err, "", "%s", g_msg);
    return rc;
}

static int g_keys_impl(struct gpu_state *s, int k, size_t r, float *out)
{
    size_t slot = s->h_order[(size_t)k * s->prm.p + r];
    CK(cudaMemcpyAsync(out, s->cur + ((size_t)k * s->prm.p + slot) * s->prm.n, s->prm.n * sizeof(float),
                       cudaMemcpyDeviceToHost, s->stream));
    CK(cudaStreamSynchronize(s->stream));
    return 0;
}

static int g_keys(void *st, int k, size_t r, float *out)
{
    struct gpu_state *s = (struct gpu_state *)st;
    int rc = g_keys_impl(s, k, r, out);
    if (rc)
        gj_error_set(&s->be->err, "", "%s", g_msg);
    return rc;
}

static void g_times(void *st, double *te, double *td, double *ts)
{
    struct gpu_state *s = (struct gpu_state *)st;
    *te = s->t_evolve;
    *td = s->t_decode;
    *ts = s->t_sort;
}

static void g_destroy(void *st)
{
    struct gpu_state *s = (struct gpu_state *)st;
    if (!s)
        return;
    cudaSetDevice(s->device);
    void *ptrs[] = { s->cur, s->nxt, s->initial, s->xbuf, s->fit, s->nfit, s->skey_in, s->skey_out,
                     s->gathered, s->xfit, s->sval_in, s->order, s->offsets, s->xsrc, s->xdst,
                     s->scratch, s->cub_tmp };
    for (size_t i = 0; i < sizeof ptrs / sizeof ptrs[0]; i++)
        if (ptrs[i])
            cudaFree(ptrs[i]);
    for (int i = 0; i < 8; i++)
        if (s->model_mem[i])
            cudaFree(s->model_mem[i]);
    if (s->stream)
        cudaStreamDestroy(s->stream);
    free(s->h_order);
    free(s);
}

template <typename T>
static int upload(void **slot, const T *host, size_t count, const T **dev, cudaStream_t st)
{
    void *d = NULL;
    size_t bytes = (count ? count : 1) * sizeof(T);
    CK(cudaMalloc(&d, bytes));
    *slot = d;
    if (count) {
        CK(cudaMemcpyAsync(d, host, count * sizeof(T), cudaMemcpyHostToDevice, st));
        CK(cudaStreamSynchronize(st));
    }
    *dev = (const T *)d;
    return 0;
}

static int g_create(struct gpu_state *s, const struct brkga_net_model *m)
{
    const struct brkga_params *prm = &s->prm;
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count <= s->device) {
        snprintf(g_msg, sizeof g_msg, "no CUDA device %d (%d found)", s->device, count);
        return -1;
    }
    CK(cudaSetDevice(s->device));
    CK(cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking));
    size_t total = s->total, n = prm->n;
    CK(cudaMalloc((void **)&s->cur, total * n * sizeof(float)));
    CK(cudaMalloc((void **)&s->nxt, total * n * sizeof(float)));
    CK(cudaMalloc((void **)&s->initial, (prm->n_initial ? prm->n_initial : 1) * n * sizeof(float)));
    CK(cudaMalloc((void **)&s->fit, total * sizeof(double)));
    CK(cudaMalloc((void **)&s->nfit, total * sizeof(double)));
    CK(cudaMalloc((void **)&s->skey_in, total * sizeof(double)));
    CK(cudaMalloc((void **)&s->skey_out, total * sizeof(double)));
    CK(cudaMalloc((void **)&s->gathered, total * sizeof(double)));
    CK(cudaMalloc((void **)&s->sval_in, total * sizeof(uint32_t)));
    CK(cudaMalloc((void **)&s->order, total * sizeof(uint32_t)));
    CK(cudaMalloc((void **)&s->offsets, ((size_t)prm->K + 1) * sizeof(int)));
    size_t xrows = (size_t)prm->K * (size_t)(prm->exchange_count > 0 ? prm->exchange_count : 1);
    size_t xmoves = xrows * (size_t)(prm->K > 1 ? prm->K - 1 : 1);
    CK(cudaMalloc((void **)&s->xbuf, xrows * n * sizeof(float)));
    CK(cudaMalloc((void **)&s->xfit, xrows * sizeof(double)));
    CK(cudaMalloc((void **)&s->xsrc, xrows * sizeof(int)));
    CK(cudaMalloc((void **)&s->xdst, 2 * xmoves * sizeof(int)));
    s->scratch_bytes = (brkga_net_scratch_size(m->n_vlinks, m->n_demands, m->n_olinks) + 15) & ~(size_t)15;
    CK(cudaMalloc((void **)&s->scratch, total * s->scratch_bytes));
    int *off = (int *)malloc(((size_t)prm->K + 1) * sizeof(int));
    s->h_order = (uint32_t *)malloc(total * sizeof(uint32_t));
    if (!off || !s->h_order) {
        free(off);
        snprintf(g_msg, sizeof g_msg, "out of memory");
        return -1;
    }
    for (int k = 0; k <= prm->K; k++)
        off[k] = (int)((size_t)k * prm->p);
    cudaError_t e = cudaMemcpyAsync(s->offsets, off, ((size_t)prm->K + 1) * sizeof(int),
                                    cudaMemcpyHostToDevice, s->stream);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(s->stream);
    free(off);
    CK(e);
    s->cub_bytes = 0;
    CK(cub::DeviceSegmentedRadixSort::SortPairs(NULL, s->cub_bytes, s->skey_in, s->skey_out,
                                                s->sval_in, s->order, (int)total, prm->K,
                                                s->offsets, s->offsets + 1));
    CK(cudaMalloc(&s->cub_tmp, s->cub_bytes ? s->cub_bytes : 1));
    /* the model */
    struct brkga_net_view *v = &s->view;
    v->n_vlinks = m->n_vlinks;
    v->n_demands = m->n_demands;
    v->n_olinks = m->n_olinks;
    v->capacity = m->capacity;
    int R = m->n_routes;
    if (upload(&s->model_mem[0], m->vl_dist, (size_t)m->n_vlinks, &v->vl_dist, s->stream) ||
        upload(&s->model_mem[1], m->dem_bw, (size_t)m->n_demands, &v->dem_bw, s->stream) ||
        upload(&s->model_mem[2], m->dem_route, 2 * (size_t)m->n_demands, &v->dem_route, s->stream) ||
        upload(&s->model_mem[3], m->route_vl_off, (size_t)R + 1, &v->route_vl_off, s->stream) ||
        upload(&s->model_mem[4], m->route_vl, (size_t)m->route_vl_off[R], &v->route_vl, s->stream) ||
        upload(&s->model_mem[5], m->route_ol_off, (size_t)R + 1, &v->route_ol_off, s->stream) ||
        upload(&s->model_mem[6], m->route_ol, (size_t)m->route_ol_off[R], &v->route_ol, s->stream) ||
        upload(&s->model_mem[7], m->route_ol_mult, (size_t)m->route_ol_off[R], &v->route_ol_mult, s->stream))
        return -1;
    s->thresh = (uint64_t)ldexp(prm->rhoe, 32);
    return 0;
}

extern "C" int brkga_gpu_device_count(void)
{
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return count;
}

extern "C" int brkga_gpu_backend(const struct brkga_params *prm, const struct brkga_decoder *dec,
                                 struct brkga_backend *be)
{
    if (!dec->gpu_network) {
        gj_error_set(&be->err, "", "this decoder has no GPU form (only the network decoder)");
        return -1;
    }
    struct gpu_state *s = (struct gpu_state *)calloc(1, sizeof *s);
    if (!s) {
        gj_error_set(&be->err, "", "out of memory");
        return -1;
    }
    s->prm = *prm;
    s->device = prm->device;
    s->total = (size_t)prm->K * prm->p;
    s->be = be;
    if (g_create(s, (const struct brkga_net_model *)dec->ctx)) {
        gj_error_set(&be->err, "", "%s", g_msg);
        g_destroy(s);
        return -1;
    }
    be->st = s;
    be->init = g_init;
    be->evolve = g_evolve;
    be->exchange = g_exchange;
    be->fitness = g_fitness;
    be->keys = g_keys;
    be->times = g_times;
    be->destroy = g_destroy;
    return 0;
}
