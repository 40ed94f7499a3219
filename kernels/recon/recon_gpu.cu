// recon_gpu.cu — the CUDA path of the recon module (kinds `recon`, benchmark `recon`).
//
//  - filtering: the CPU's tables (ramp response times window, Parker and view weights,
//    compute/recon/filter.c) applied with batched cuFFT R2C / C2R in row chunks whose size
//    depends on the FFT length only (so a row's result does not depend on how many rows a
//    job has: a split run equals an unsplit one); cuFFT is unnormalised like FFTW, and the
//    table H is already divided by L, exactly as on the CPU;
//  - FBP / FDK backprojection: by default the CPU's own interpolation (recon_hd.h, read from
//    global memory), which matches the CPU to float rounding; with opts->gpu_hw_filter the
//    projections are read through a layered texture with hardware bilinear filtering (zero
//    border, +0.5 texel-centre convention), faster but with 8-bit interpolation weights, about
//    1e-3 relative to the CPU; many views per launch (per-view matrices in global memory, so
//    concurrent jobs on one device never share them), several voxels per thread in registers
//    (8 along z for cone, 4 slices of a batch for 2D);
//  - SART / SIRT: the CPU's Joseph projector (rc_ray + rc_joseph, double) and backprojector
//    taps (rc_tap_*), with residual and update kernels; every array stays on the device
//    across iterations and every launch covers all slices of a batch.
// Everything runs on a stream of its own; every CUDA and cuFFT call is checked, failures come
// back as gj_error (never abort), and every allocation is owned by an object freed on every
// path. No managed memory.
#include <cuda_runtime.h>
#include <cufft.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../gj_launch.cuh"
#include "recon/recon_gpu.h"
#include "recon/recon_hd.h"

namespace {

const int MAXV = 1024;          // views per launch (cone: texture layers)
const int MAXL = 2048;          // 2D batch: slices per layered texture (the layer limit)
const int MAXTEX = 32768;       // 2D layered texture: largest width / height
const int ZPT = 8;              // cone: voxels per thread along z
const int SPT = 4;              // 2D: slices per thread

struct DG {
    int type, cols, rows, nx, ny, nz;
    float du, dv, off_u, off_v, sod, sdd, vx, vy, vz, ox, oy, oz;
    double ddu, ddv, doff_u, doff_v, dsod, dsdd;   // the projector's rays, as the CPU
    rc_grid grid;
};

// Device bytes this thread has allocated through the owners below, and their peak.
thread_local uint64_t t_cur_bytes, t_peak_bytes;

void track(int64_t delta)
{
    t_cur_bytes += (uint64_t)delta;
    if (t_cur_bytes > t_peak_bytes)
        t_peak_bytes = t_cur_bytes;
}

int ck(cudaError_t e, gj_error *err, const char *what, int line)
{
    if (e == cudaSuccess)
        return 0;
    gj_error_set(err, "", "CUDA error %s in %s (recon_gpu.cu:%d)", cudaGetErrorString(e), what, line);
    err->transient = 1;
    return -1;
}

int ckf(cufftResult r, gj_error *err, const char *what, int line)
{
    if (r == CUFFT_SUCCESS)
        return 0;
    gj_error_set(err, "", "cuFFT error %d in %s (recon_gpu.cu:%d)", (int)r, what, line);
    err->transient = 1;
    return -1;
}

#define CK(x) do { if (ck((x), err, #x, __LINE__)) return -1; } while (0)
#define CKF(x) do { if (ckf((x), err, #x, __LINE__)) return -1; } while (0)
#define CKL(what) do { if (ck(cudaGetLastError(), err, what, __LINE__)) return -1; } while (0)

// Owns device memory: freed when the scope ends, on every path.
struct DevBuf {
    void *p = nullptr;
    size_t bytes = 0;
    DevBuf() = default;
    DevBuf(const DevBuf &) = delete;
    DevBuf &operator=(const DevBuf &) = delete;
    ~DevBuf() { release(); }
    void release()
    {
        if (p) {
            cudaFree(p);
            track(-(int64_t)bytes);
        }
        p = nullptr;
        bytes = 0;
    }
    int alloc(size_t n, gj_error *err, const char *what, int line)
    {
        release();
        if (ck(cudaMalloc(&p, n ? n : 1), err, what, line)) {
            p = nullptr;
            return -1;
        }
        bytes = n ? n : 1;
        track((int64_t)bytes);
        return 0;
    }
    template <class T> T *as() { return static_cast<T *>(p); }
};
#define DALLOC(buf, n, what) do { if ((buf).alloc((n), err, what, __LINE__)) return -1; } while (0)

// Owns host memory from malloc.
struct HostBuf {
    void *p = nullptr;
    HostBuf() = default;
    explicit HostBuf(void *q) : p(q) {}
    HostBuf(const HostBuf &) = delete;
    HostBuf &operator=(const HostBuf &) = delete;
    ~HostBuf() { free(p); }
    template <class T> T *as() { return static_cast<T *>(p); }
};

struct TexArr {
    cudaArray_t arr = nullptr;
    cudaTextureObject_t tex = 0;
    size_t bytes = 0;
    TexArr() = default;
    TexArr(const TexArr &) = delete;
    TexArr &operator=(const TexArr &) = delete;
    ~TexArr()
    {
        if (tex)
            cudaDestroyTextureObject(tex);
        if (arr) {
            cudaFreeArray(arr);
            track(-(int64_t)bytes);
        }
    }
};

struct FftPlan {
    cufftHandle h = 0;
    bool made = false;
    FftPlan() = default;
    FftPlan(const FftPlan &) = delete;
    FftPlan &operator=(const FftPlan &) = delete;
    ~FftPlan() { if (made) cufftDestroy(h); }
};

struct Stream {
    cudaStream_t s = nullptr;
    Stream() = default;
    Stream(const Stream &) = delete;
    Stream &operator=(const Stream &) = delete;
    ~Stream() { if (s) cudaStreamDestroy(s); }
};

struct Event {
    cudaEvent_t e = nullptr;
    Event() = default;
    Event(const Event &) = delete;
    Event &operator=(const Event &) = delete;
    ~Event() { if (e) cudaEventDestroy(e); }
};

DG make_dg(const rc_geom *g)
{
    DG d;
    d.type = g->type; d.cols = g->cols; d.rows = g->rows; d.nx = g->nx; d.ny = g->ny; d.nz = g->nz;
    d.du = (float)g->du; d.dv = (float)g->dv; d.off_u = (float)g->off_u; d.off_v = (float)g->off_v;
    d.sod = (float)g->sod; d.sdd = (float)g->sdd; d.vx = (float)g->vx; d.vy = (float)g->vy; d.vz = (float)g->vz;
    d.ox = (float)g->ox; d.oy = (float)g->oy; d.oz = (float)g->oz;
    d.ddu = g->du; d.ddv = g->dv; d.doff_u = g->off_u; d.doff_v = g->off_v; d.dsod = g->sod; d.dsdd = g->sdd;
    d.grid.nx = g->nx; d.grid.ny = g->ny; d.grid.nz = g->nz;
    d.grid.vx = g->vx; d.grid.vy = g->vy; d.grid.vz = g->vz; d.grid.ox = g->ox; d.grid.oy = g->oy; d.grid.oz = g->oz;
    return d;
}

// Backprojection parameters of every view (12 floats each): parallel (cos, sin, 0...), else the
// normalised 3x4 matrix of the CPU (rc_view_matrix). Uploaded to d (device) on stream st.
int upload_view_matrices(const rc_geom *g, DevBuf &d, cudaStream_t st, gj_error *err)
{
    HostBuf h(malloc(sizeof(float) * 12 * (size_t)g->nviews));
    if (!h.p)
        return gj_error_set(err, "", "out of memory");
    float *out = h.as<float>();
    for (int v = 0; v < g->nviews; v++) {
        float *o = out + 12 * (size_t)v;
        if (g->type == RC_PARALLEL2D) {
            memset(o, 0, 12 * sizeof *o);
            o[0] = (float)cos(g->angles[v]);
            o[1] = (float)sin(g->angles[v]);
        } else {
            double A[12];
            rc_view_matrix(g, v, A);
            for (int k = 0; k < 12; k++)
                o[k] = (float)A[k];
        }
    }
    DALLOC(d, sizeof(float) * 12 * (size_t)g->nviews, "cudaMalloc view matrices");
    CK(cudaMemcpyAsync(d.p, out, sizeof(float) * 12 * (size_t)g->nviews, cudaMemcpyHostToDevice, st));
    // the host buffer is pageable: the copy has been staged when cudaMemcpyAsync returns, but
    // synchronise anyway before it is freed
    CK(cudaStreamSynchronize(st));
    return 0;
}

// ---------------------------------------------------------------- filtering

// Pre-weighting as rc_filter_projections: cosine weight (fan, cone) in double, Parker weight
// (table, 1 without short scan), zero padding to L.
__global__ void k_preweight(const float *p, float *buf, int64_t r0, int64_t nrows, int chunk, int L, DG g,
                            int nviews, const float *parker)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x, rr = blockIdx.y;
    if (c >= L || rr >= chunk)
        return;
    int64_t r = r0 + rr;
    float v = 0;
    if (r < nrows && c < g.cols) {
        int view = (int)((r / g.rows) % nviews), row = (int)(r % g.rows);
        double w = 1;
        if (g.type != RC_PARALLEL2D) {
            double u = (c - 0.5 * (g.cols - 1)) * g.ddu + g.doff_u;
            double vv = (row - 0.5 * (g.rows - 1)) * g.ddv + g.doff_v;
            w = g.dsdd / sqrt(g.dsdd * g.dsdd + u * u + (g.type == RC_CONE3D ? vv * vv : 0));
            w *= parker[(int64_t)view * g.cols + c];
        }
        v = (float)(p[r * g.cols + c] * w);
    }
    buf[(int64_t)rr * L + c] = v;
}

__global__ void k_mul_h(cufftComplex *F, const float *H, int n, int chunk)
{
    int k = blockIdx.x * blockDim.x + threadIdx.x, rr = blockIdx.y;
    if (k >= n || rr >= chunk)
        return;
    cufftComplex z = F[(int64_t)rr * n + k];
    z.x *= H[k];
    z.y *= H[k];
    F[(int64_t)rr * n + k] = z;
}

__global__ void k_store(float *p, const float *buf, int64_t r0, int64_t nrows, int chunk, int L, int cols, int rows,
                        int nviews, const float *vw)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x, rr = blockIdx.y;
    int64_t r = r0 + rr;
    if (c >= cols || rr >= chunk || r >= nrows)
        return;
    p[r * cols + c] = buf[(int64_t)rr * L + c] * vw[(r / rows) % nviews];
}

int make_plan(FftPlan &pl, int L, int chunk, bool forward, size_t *work, cudaStream_t st, gj_error *err)
{
    CKF(cufftCreate(&pl.h));
    pl.made = true;
    CKF(cufftSetAutoAllocation(pl.h, 0));   // one work area for both plans, counted below
    int n[1] = { L }, nh = L / 2 + 1;
    if (forward)
        CKF(cufftMakePlanMany(pl.h, 1, n, NULL, 1, L, NULL, 1, nh, CUFFT_R2C, chunk, work));
    else
        CKF(cufftMakePlanMany(pl.h, 1, n, NULL, 1, nh, NULL, 1, L, CUFFT_C2R, chunk, work));
    CKF(cufftSetStream(pl.h, st));
    return 0;
}

// Filters nrows detector rows of d_proj in place (rows of nsets x views x rows).
int gpu_filter(const rc_geom *g, int filter, float *d_proj, int64_t nrows, cudaStream_t st, gj_error *err)
{
    int L;
    float *H, *parker, *vw;
    if (rc_filter_tables(g, filter, &L, &H, &parker, &vw, err))
        return -1;
    HostBuf hH(H), hP(parker), hW(vw);
    const int nh = L / 2 + 1;
    DevBuf dH, dP, dW, dbuf, dF, dwork;
    DALLOC(dH, sizeof(float) * nh, "cudaMalloc H");
    DALLOC(dP, sizeof(float) * (size_t)g->nviews * g->cols, "cudaMalloc parker");
    DALLOC(dW, sizeof(float) * g->nviews, "cudaMalloc view weights");
    CK(cudaMemcpyAsync(dH.p, H, sizeof(float) * nh, cudaMemcpyHostToDevice, st));
    CK(cudaMemcpyAsync(dP.p, parker, sizeof(float) * (size_t)g->nviews * g->cols, cudaMemcpyHostToDevice, st));
    CK(cudaMemcpyAsync(dW.p, vw, sizeof(float) * g->nviews, cudaMemcpyHostToDevice, st));
    // rows per FFT batch: about 32 MiB of real rows, whatever nrows is (the plan, and with it
    // each row's arithmetic, is the same for every job of this detector width)
    int64_t chunk64 = (32ll << 20) / ((int64_t)L * 4);
    int chunk = (int)(chunk64 > 65535 ? 65535 : chunk64 < 1 ? 1 : chunk64);
    DALLOC(dbuf, sizeof(float) * (size_t)chunk * L, "cudaMalloc FFT rows");
    DALLOC(dF, sizeof(cufftComplex) * (size_t)chunk * nh, "cudaMalloc FFT spectra");
    FftPlan pf, pb;
    size_t wf = 0, wb = 0;
    if (make_plan(pf, L, chunk, true, &wf, st, err) || make_plan(pb, L, chunk, false, &wb, st, err))
        return -1;
    DALLOC(dwork, wf > wb ? wf : wb, "cudaMalloc cuFFT work area");
    CKF(cufftSetWorkArea(pf.h, dwork.p));
    CKF(cufftSetWorkArea(pb.h, dwork.p));
    DG dg = make_dg(g);
    dim3 b(256), gw((L + 255) / 256, chunk), gh((nh + 255) / 256, chunk), gs((g->cols + 255) / 256, chunk);
    for (int64_t r0 = 0; r0 < nrows; r0 += chunk) {
        GJ_LAUNCH(k_preweight, gw, b, 0, st)(d_proj, dbuf.as<float>(), r0, nrows, chunk, L, dg, g->nviews, dP.as<float>());
        CKL("k_preweight");
        CKF(cufftExecR2C(pf.h, dbuf.as<float>(), dF.as<cufftComplex>()));
        GJ_LAUNCH(k_mul_h, gh, b, 0, st)(dF.as<cufftComplex>(), dH.as<float>(), nh, chunk);
        CKL("k_mul_h");
        CKF(cufftExecC2R(pb.h, dF.as<cufftComplex>(), dbuf.as<float>()));
        GJ_LAUNCH(k_store, gs, b, 0, st)(d_proj, dbuf.as<float>(), r0, nrows, chunk, L, g->cols, g->rows, g->nviews,
                                  dW.as<float>());
        CKL("k_store");
    }
    CK(cudaStreamSynchronize(st));
    return 0;
}

// ---------------------------------------------------------------- backprojection (FBP / FDK)

int make_layered(TexArr &t, const float *d_src, int w, int h, int layers, cudaStream_t st, gj_error *err)
{
    cudaChannelFormatDesc fd = cudaCreateChannelDesc<float>();
    cudaExtent ext = make_cudaExtent((size_t)w, (size_t)h, (size_t)layers);
    CK(cudaMalloc3DArray(&t.arr, &fd, ext, cudaArrayLayered));
    t.bytes = (size_t)w * h * layers * sizeof(float);
    track((int64_t)t.bytes);
    cudaMemcpy3DParms cp = {};
    cp.srcPtr = make_cudaPitchedPtr((void *)d_src, (size_t)w * sizeof(float), (size_t)w, (size_t)h);
    cp.dstArray = t.arr;
    cp.extent = ext;
    cp.kind = cudaMemcpyDeviceToDevice;
    CK(cudaMemcpy3DAsync(&cp, st));
    cudaResourceDesc rd = {};
    rd.resType = cudaResourceTypeArray;
    rd.res.array.array = t.arr;
    cudaTextureDesc td = {};
    // zero outside the detector, as the CPU's zero padding; unnormalised coordinates, so
    // texel i has its centre at i + 0.5
    td.addressMode[0] = td.addressMode[1] = td.addressMode[2] = cudaAddressModeBorder;
    td.filterMode = cudaFilterModeLinear;
    td.readMode = cudaReadModeElementType;
    td.normalizedCoords = 0;
    CK(cudaCreateTextureObject(&t.tex, &rd, &td, NULL));
    return 0;
}

// 2D batch, slices [s0, s0 + ns) of the launch (SPT per thread), views [v0, v0 + nv):
// hardware: texture (cols x views x layers = slices of the launch); software: proj (the
// launch's sinograms, ns x views x cols) through the CPU's taps.
template <bool HW>
__global__ void k_bp2d(cudaTextureObject_t tex, const float *__restrict__ proj, float *vol, DG g, int nslices,
                       int nviews, int v0, int nv, const float *__restrict__ mats)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x, j = blockIdx.y * blockDim.y + threadIdx.y;
    int s0 = blockIdx.z * SPT;
    if (i >= g.nx || j >= g.ny)
        return;
    float x = (i - 0.5f * (g.nx - 1)) * g.vx + g.ox, y = (j - 0.5f * (g.ny - 1)) * g.vy + g.oy;
    float cu = 0.5f * (g.cols - 1) - g.off_u / g.du;
    float acc[SPT];
#pragma unroll
    for (int s = 0; s < SPT; s++)
        acc[s] = 0;
    for (int k = 0; k < nv; k++) {
        const int v = v0 + k;
        const float *A = mats + 12 * (size_t)v;
        float uc, w = 1;
        if (g.type == RC_PARALLEL2D) {
            uc = (x * A[0] + y * A[1]) / g.du + cu;
        } else {
            float L = A[2] * x + A[5] * y + A[11];
            if (!(L > 1e-6f))
                continue;
            float iw = 1.0f / L;
            uc = (A[0] * x + A[3] * y + A[9]) * iw;
            w = g.sod * g.sod * iw * iw;
        }
#pragma unroll
        for (int s = 0; s < SPT; s++) {
            if (s0 + s >= nslices)
                break;
            float val, sn;
            if (HW) {
                val = tex2DLayered<float>(tex, uc + 0.5f, (float)v + 0.5f, s0 + s);
            } else {
                const float *qv = proj + ((int64_t)(s0 + s) * nviews + v) * g.cols;
                int in = g.type == RC_PARALLEL2D ? rc_tap_par(qv, g.cols, uc, &val, &sn)
                                                 : rc_tap_fan(qv, g.cols, uc, &val, &sn);
                if (!in)
                    continue;
            }
            acc[s] += w * val;
        }
    }
#pragma unroll
    for (int s = 0; s < SPT; s++)
        if (s0 + s < nslices)
            vol[((int64_t)(s0 + s) * g.ny + j) * g.nx + i] += acc[s];
}

// Cone: views [v0, v0 + nv) (texture layers 0..nv-1 in hardware mode; proj holds all views),
// ZPT voxels along z per thread, slices [z0, z0 + nzs) of the volume (vol points to slice z0).
template <bool HW>
__global__ void k_bp3d(cudaTextureObject_t tex, const float *__restrict__ proj, float *vol, DG g, int z0, int nzs,
                       int v0, int nv, float sod2, const float *__restrict__ mats)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x, j = blockIdx.y * blockDim.y + threadIdx.y;
    int kb = blockIdx.z * ZPT;
    if (i >= g.nx || j >= g.ny)
        return;
    float x = (i - 0.5f * (g.nx - 1)) * g.vx + g.ox, y = (j - 0.5f * (g.ny - 1)) * g.vy + g.oy;
    float acc[ZPT];
#pragma unroll
    for (int s = 0; s < ZPT; s++)
        acc[s] = 0;
    const int64_t pview = (int64_t)g.rows * g.cols;
    for (int k = 0; k < nv; k++) {
        const float *A = mats + 12 * (size_t)(v0 + k);
        const float *qv = proj + (int64_t)(v0 + k) * pview;
        float bw = A[2] * x + A[5] * y + A[11], bu = A[0] * x + A[3] * y + A[9], bv = A[1] * x + A[4] * y + A[10];
#pragma unroll
        for (int s = 0; s < ZPT; s++) {
            if (kb + s >= nzs)
                break;
            float z = (z0 + kb + s - 0.5f * (g.nz - 1)) * g.vz + g.oz;   // global slice index: slabs agree
            float w = bw + A[8] * z;
            if (!(w > 1e-6f))
                continue;
            float iw = 1.0f / w;
            float uc = (bu + A[6] * z) * iw, vr = (bv + A[7] * z) * iw;
            float val, sn;
            if (HW)
                val = tex2DLayered<float>(tex, uc + 0.5f, vr + 0.5f, k);
            else if (!rc_tap_cone(qv, g.cols, g.rows, uc, vr, &val, &sn))
                continue;
            acc[s] += sod2 * iw * iw * val;
        }
    }
#pragma unroll
    for (int s = 0; s < ZPT; s++)
        if (kb + s < nzs)
            vol[((int64_t)(kb + s) * g.ny + j) * g.nx + i] += acc[s];
}

// d_proj: filtered projections on the device (2D: the nzs sinograms of the slab; cone: all
// views); d_vol: zeroed slices [z0, z0+nzs).
int gpu_backproject(const rc_geom *g, const float *d_proj, float *d_vol, int z0, int nzs, bool hw, cudaStream_t st,
                    gj_error *err)
{
    DG dg = make_dg(g);
    DevBuf dm;
    if (upload_view_matrices(g, dm, st, err))
        return -1;
    dim3 b(32, 8);
    if (g->type != RC_CONE3D) {
        const int64_t pset = (int64_t)g->nviews * g->cols;
        if (g->cols > MAXTEX || g->nviews > MAXTEX)
            hw = false;   // beyond a layered texture: the software path has no such limit
        for (int s0 = 0; s0 < nzs; s0 += MAXL) {
            int ns = nzs - s0 < MAXL ? nzs - s0 : MAXL;
            TexArr t;
            if (hw && make_layered(t, d_proj + s0 * pset, g->cols, g->nviews, ns, st, err))
                return -1;
            for (int v0 = 0; v0 < g->nviews; v0 += MAXV) {
                int nv = g->nviews - v0 < MAXV ? g->nviews - v0 : MAXV;
                dim3 gr((g->nx + 31) / 32, (g->ny + 7) / 8, (ns + SPT - 1) / SPT);
                float *vs = d_vol + (int64_t)s0 * g->nx * g->ny;
                if (hw)
                    GJ_LAUNCH(k_bp2d<true>, gr, b, 0, st)(t.tex, NULL, vs, dg, ns, g->nviews, v0, nv, dm.as<float>());
                else
                    GJ_LAUNCH(k_bp2d<false>, gr, b, 0, st)(0, d_proj + s0 * pset, vs, dg, ns, g->nviews, v0, nv,
                                                    dm.as<float>());
                CKL("k_bp2d");
            }
            CK(cudaStreamSynchronize(st));   // before t is destroyed
        }
        return 0;
    }
    const int64_t view = (int64_t)g->rows * g->cols;
    const float sod2 = (float)(g->sod * g->sod);
    if (g->cols > MAXTEX || g->rows > MAXTEX)
        hw = false;   // beyond a layered texture, as in 2D: the software path has no such limit
    dim3 gr((g->nx + 31) / 32, (g->ny + 7) / 8, (nzs + ZPT - 1) / ZPT);
    for (int v0 = 0; v0 < g->nviews; v0 += MAXV) {
        int nv = g->nviews - v0 < MAXV ? g->nviews - v0 : MAXV;
        if (hw) {
            TexArr t;
            if (make_layered(t, d_proj + v0 * view, g->cols, g->rows, nv, st, err))
                return -1;
            GJ_LAUNCH(k_bp3d<true>, gr, b, 0, st)(t.tex, d_proj, d_vol, dg, z0, nzs, v0, nv, sod2, dm.as<float>());
            CKL("k_bp3d");
            CK(cudaStreamSynchronize(st));   // before t is destroyed
        } else {
            GJ_LAUNCH(k_bp3d<false>, gr, b, 0, st)(0, d_proj, d_vol, dg, z0, nzs, v0, nv, sod2, dm.as<float>());
            CKL("k_bp3d");
        }
    }
    CK(cudaStreamSynchronize(st));
    return 0;
}

// ---------------------------------------------------------------- iterative (SART / SIRT)

// One thread per ray of the listed views, for every problem (2D slice) at once; the ray and
// the line integral are the CPU's (recon_hd.h). vparams: 12 doubles per view, (cos, sin) or,
// with matrices, the inverse 3x3 (row-major) and the source.
__global__ void k_forward(const float *vol, float *q, DG g, int nzv, int nprob, const int *vlist, int nv,
                          const double *vparams, int mat)
{
    int64_t id = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    int64_t per = (int64_t)nv * g.rows * g.cols;
    if (id >= per * nprob)
        return;
    int prob = (int)(id / per);
    int64_t rem = id % per;
    int vi = (int)(rem / ((int64_t)g.rows * g.cols)), r = (int)((rem / g.cols) % g.rows), c = (int)(rem % g.cols);
    const double *vp = vparams + 12 * (size_t)vlist[vi];
    double u = (c - 0.5 * (g.cols - 1)) * g.ddu + g.doff_u, vv = (r - 0.5 * (g.rows - 1)) * g.ddv + g.doff_v;
    double p[3], d[3];
    rc_ray(g.type, vp[0], vp[1], g.dsod, g.dsdd, u, vv, mat ? vp : NULL, vp + 9, c, r, p, d);
    int64_t vox = (int64_t)g.nx * g.ny * nzv;
    q[id] = (float)rc_joseph(&g.grid, vol + prob * vox, nzv, p, d);   // compact layout [prob][vi][rows][cols]
}

// residual: res = (p - A x) / (A 1) for the listed views, into the full layout.
__global__ void k_residual(const float *fp, const float *p, const float *rowsum, float *res, int nprob, int nviews,
                           int rays_per_view, const int *vlist, int nv)
{
    int64_t id = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    int64_t per = (int64_t)nv * rays_per_view;
    if (id >= per * nprob)
        return;
    int prob = (int)(id / per);
    int64_t rem = id % per;
    int vi = (int)(rem / rays_per_view), k = (int)(rem % rays_per_view);
    int64_t full = ((int64_t)prob * nviews + vlist[vi]) * rays_per_view + k;
    float w = rowsum[full];
    res[full] = w > 1e-6f ? (p[full] - fp[id]) / w : 0.0f;
}

// Voxel-driven backprojection of the residual with its normalisation (the CPU's bp_rows taps);
// one thread per voxel of every problem.
__global__ void k_bp_iter(const float *res, float *upd, float *norm, DG g, int nzv, int nprob, int nviews,
                          const int *vlist, int nv, const float *mats)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x, j = blockIdx.y * blockDim.y + threadIdx.y, kz = blockIdx.z;
    if (i >= g.nx || j >= g.ny || kz >= nzv * nprob)
        return;
    int prob = kz / nzv, k = kz % nzv;
    float x = (i - 0.5f * (g.nx - 1)) * g.vx + g.ox, y = (j - 0.5f * (g.ny - 1)) * g.vy + g.oy;
    float z = g.type == RC_CONE3D ? (k - 0.5f * (g.nz - 1)) * g.vz + g.oz : 0.0f;
    float cu = 0.5f * (g.cols - 1) - g.off_u / g.du;
    const float *q = res + (int64_t)prob * nviews * g.rows * g.cols;
    float s = 0, sn = 0;
    for (int a = 0; a < nv; a++) {
        int v = vlist[a];
        const float *A = mats + 12 * (size_t)v;
        const float *qv = q + (int64_t)v * g.rows * g.cols;
        float val, wt;
        int in;
        if (g.type == RC_PARALLEL2D) {
            in = rc_tap_par(qv, g.cols, (x * A[0] + y * A[1]) / g.du + cu, &val, &wt);
        } else {
            float w = A[2] * x + A[5] * y + A[8] * z + A[11];
            if (!(w > 1e-6f))
                continue;
            float iw = 1.0f / w, uc = (A[0] * x + A[3] * y + A[6] * z + A[9]) * iw;
            if (g.rows == 1)
                in = rc_tap_fan(qv, g.cols, uc, &val, &wt);
            else
                in = rc_tap_cone(qv, g.cols, g.rows, uc, (A[1] * x + A[4] * y + A[7] * z + A[10]) * iw, &val, &wt);
        }
        if (in) {
            s += val;
            sn += wt;
        }
    }
    int64_t o = ((int64_t)kz * g.ny + j) * g.nx + i;
    upd[o] = s;
    norm[o] = sn;
}

__global__ void k_update(float *x, const float *upd, const float *norm, int64_t n, float lam, int nonneg)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    float v = x[i];
    if (norm[i] > 1e-6f)
        v += lam * upd[i] / norm[i];
    if (nonneg && v < 0)
        v = 0;
    x[i] = v;
}

__global__ void k_fill(float *x, int64_t n, float v)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] = v;
}

unsigned blocks(int64_t n) { return (unsigned)((n + 255) / 256); }

// SART / SIRT of nprob independent problems (2D slices, or one cone volume) resident on the
// device: d_p their projections, d_x their volumes (zeroed).
// Progress and cancellation between launches: the hooks of rc_reconstruct, and the share of
// the whole job [lo, lo + span) a step covers. A check waits for the stream, so it is made
// only every few sub-iterations.
struct Checkpoint {
    rc_hooks *h;
    double lo, span;
    // 1: cancelled (stop now); 0: go on. Reports fraction f of this step's share.
    int at(double f) const
    {
        if (!h)
            return 0;
        if (h->progress)
            h->progress(h->ctx, lo + span * f);
        return h->cancelled && h->cancelled(h->ctx) ? 1 : 0;
    }
};

// SART/SIRT on the device. 0, 1 when cancelled, or -1 with err.
int gpu_iterate(const rc_geom *g, const rc_opts *o, const float *d_p, float *d_x, int nprob, cudaStream_t st,
                const Checkpoint &cp, gj_error *err)
{
    DG dg = make_dg(g);
    const int nzv = g->type == RC_CONE3D ? g->nz : 1;
    const int rpv = g->rows * g->cols;
    const int64_t nrays = (int64_t)nprob * g->nviews * rpv, nvox = (int64_t)nprob * g->nx * g->ny * nzv;
    const int subsets = o->algo == RC_SIRT ? 1 : o->subsets;
    const int mat = g->mat != NULL;
    // the projector's per-view parameters (double, as the CPU's rays)
    HostBuf hv(calloc(12 * (size_t)g->nviews, sizeof(double)));
    HostBuf hl(malloc(sizeof(int) * (size_t)g->nviews * 2)), hoff(malloc(sizeof(int) * ((size_t)subsets + 1)));
    HostBuf order(malloc(sizeof(int) * (size_t)subsets));
    if (!hv.p || !hl.p || !hoff.p || !order.p)
        return gj_error_set(err, "", "out of memory");
    double *pv = hv.as<double>();
    for (int v = 0; v < g->nviews; v++) {
        double *q = pv + 12 * (size_t)v;
        q[0] = cos(g->angles[v]);
        q[1] = sin(g->angles[v]);
        if (mat) {
            double Mi[9], C[3];
            if (rc_matrix_ray(g, v, Mi, C) == 0) {   // singular: all zero, a zero ray as on the CPU
                memcpy(q, Mi, sizeof Mi);
                memcpy(q + 9, C, sizeof C);
            } else {
                memset(q, 0, 12 * sizeof *q);
            }
        }
    }
    // subset order: the CPU's
    int *ord = order.as<int>(), *vl = hl.as<int>(), *off = hoff.as<int>();
    rc_subset_order(subsets, ord);
    // view lists: all views (row sums), then each sub-iteration's subset in order
    for (int v = 0; v < g->nviews; v++)
        vl[v] = v;
    int n = g->nviews;
    for (int si = 0; si < subsets; si++) {
        off[si] = n;
        for (int v = ord[si]; v < g->nviews; v += subsets)
            vl[n++] = v;
    }
    off[subsets] = n;
    DevBuf dv, dm, dl, drow, dres, dfp, dupd, dnorm, dones;
    DALLOC(dv, sizeof(double) * 12 * (size_t)g->nviews, "cudaMalloc ray parameters");
    DALLOC(dl, sizeof(int) * (size_t)n, "cudaMalloc view lists");
    DALLOC(drow, sizeof(float) * nrays, "cudaMalloc row sums");
    DALLOC(dres, sizeof(float) * nrays, "cudaMalloc residual");
    DALLOC(dfp, sizeof(float) * nrays, "cudaMalloc forward projection");
    DALLOC(dupd, sizeof(float) * nvox, "cudaMalloc update");
    DALLOC(dnorm, sizeof(float) * nvox, "cudaMalloc normalisation");
    DALLOC(dones, sizeof(float) * nvox, "cudaMalloc ones");
    CK(cudaMemcpyAsync(dv.p, pv, sizeof(double) * 12 * (size_t)g->nviews, cudaMemcpyHostToDevice, st));
    CK(cudaMemcpyAsync(dl.p, vl, sizeof(int) * (size_t)n, cudaMemcpyHostToDevice, st));
    if (upload_view_matrices(g, dm, st, err))   // synchronises: the host tables may go
        return -1;
    // row sums A 1: the Joseph projection of ones over all views (the list is the identity,
    // so the compact layout is the full one)
    GJ_LAUNCH(k_fill, blocks(nvox), 256, 0, st)(dones.as<float>(), nvox, 1.0f);
    CKL("k_fill");
    GJ_LAUNCH(k_forward, blocks(nrays), 256, 0, st)(dones.as<float>(), drow.as<float>(), dg, nzv, nprob, dl.as<int>(),
                                             g->nviews, dv.as<double>(), mat);
    CKL("k_forward (row sums)");
    CK(cudaStreamSynchronize(st));
    dones.release();
    dim3 b(32, 8), gr((g->nx + 31) / 32, (g->ny + 7) / 8, nzv * nprob);
    const int total = o->iterations * subsets;
    for (int it = 0; it < o->iterations; it++)
        for (int si = 0; si < subsets; si++) {
            const int done = it * subsets + si;
            if (done > 0 && done % 8 == 0) {   // the stream must catch up before a check
                CK(cudaStreamSynchronize(st));
                if (cp.at((double)done / total))
                    return 1;
            }
            const int *dlist = dl.as<int>() + off[si];
            int nv = off[si + 1] - off[si];
            int64_t nr = (int64_t)nprob * nv * rpv;
            GJ_LAUNCH(k_forward, blocks(nr), 256, 0, st)(d_x, dfp.as<float>(), dg, nzv, nprob, dlist, nv, dv.as<double>(),
                                                  mat);
            CKL("k_forward");
            GJ_LAUNCH(k_residual, blocks(nr), 256, 0, st)(dfp.as<float>(), d_p, drow.as<float>(), dres.as<float>(), nprob,
                                                   g->nviews, rpv, dlist, nv);
            CKL("k_residual");
            GJ_LAUNCH(k_bp_iter, gr, b, 0, st)(dres.as<float>(), dupd.as<float>(), dnorm.as<float>(), dg, nzv, nprob,
                                        g->nviews, dlist, nv, dm.as<float>());
            CKL("k_bp_iter");
            GJ_LAUNCH(k_update, blocks(nvox), 256, 0, st)(d_x, dupd.as<float>(), dnorm.as<float>(), nvox,
                                                   (float)o->relaxation, o->nonneg);
            CKL("k_update");
        }
    CK(cudaStreamSynchronize(st));
    return 0;
}

} // namespace

extern "C" int rc_gpu_device_count(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError();   // clear the error: no driver means zero GPUs
        return 0;
    }
    return n;
}

extern "C" uint64_t rc_gpu_peak_bytes(void)
{
    return t_peak_bytes;
}

extern "C" int rc_gpu_reconstruct(int device, const struct rc_geom *g, const struct rc_opts *o, float *proj,
                                  float *vol, int z0, int nzs, struct rc_hooks *hooks, struct gj_error *err)
{
    if (device < 0 || rc_gpu_device_count() <= device)
        return gj_error_set(err, "", "GPU %d is not available", device);
    if (nzs < 1 || z0 < 0 || z0 + nzs > g->nz)
        return gj_error_set(err, "", "internal: slices [%d, %d) outside the volume of %d", z0, z0 + nzs, g->nz);
    CK(cudaSetDevice(device));
    t_cur_bytes = t_peak_bytes = 0;
    Stream st;
    CK(cudaStreamCreateWithFlags(&st.s, cudaStreamNonBlocking));
    const bool two_d = g->type != RC_CONE3D;
    const int64_t pset = (int64_t)g->nviews * g->rows * g->cols;
    const int64_t np = two_d ? pset * nzs : pset, nv = (int64_t)g->nx * g->ny * nzs;
    DevBuf dp, dvol;
    DALLOC(dp, sizeof(float) * np, "cudaMalloc projections");
    DALLOC(dvol, sizeof(float) * nv, "cudaMalloc volume");
    CK(cudaMemcpyAsync(dp.p, proj, sizeof(float) * np, cudaMemcpyHostToDevice, st.s));
    CK(cudaMemsetAsync(dvol.p, 0, sizeof(float) * nv, st.s));
    Checkpoint cp = { hooks, 0.0, 1.0 };
    if (cp.at(0.0))
        return 1;
    double t0 = gj_now();
    if (o->algo == RC_FBP || o->algo == RC_FDK) {
        // gpu_filter and gpu_backproject end with a stream sync, so wall time is kernel time
        if (gpu_filter(g, o->filter, dp.as<float>(), two_d ? (int64_t)nzs * g->nviews : (int64_t)g->nviews * g->rows,
                       st.s, err))
            return -1;
        double t1 = gj_now();
        if (cp.at(0.3))
            return 1;
        if (gpu_backproject(g, dp.as<float>(), dvol.as<float>(), z0, nzs, o->gpu_hw_filter != 0, st.s, err))
            return -1;
        if (hooks) {
            hooks->t_filter = t1 - t0;
            hooks->t_backproject = gj_now() - t1;
        }
    } else {
        if (!two_d && (z0 != 0 || nzs != g->nz))
            return gj_error_set(err, "", "internal: iterative cone reconstruction needs the whole volume");
        // slices of a 2D batch are independent problems: up to 4096 per launch (grid z)
        const int per_launch = two_d ? 4096 : 1;
        const int nprob_all = two_d ? nzs : 1;
        for (int s0 = 0; s0 < nprob_all; s0 += per_launch) {
            int ns = nprob_all - s0 < per_launch ? nprob_all - s0 : per_launch;
            Checkpoint part = { hooks, (double)s0 / nprob_all, (double)ns / nprob_all };
            int r = gpu_iterate(g, o, dp.as<float>() + (int64_t)s0 * pset,
                                dvol.as<float>() + (int64_t)s0 * g->nx * g->ny, ns, st.s, part, err);
            if (r)
                return r;
        }
        if (hooks)
            hooks->t_iterate = gj_now() - t0;
    }
    CK(cudaMemcpyAsync(vol, dvol.p, sizeof(float) * nv, cudaMemcpyDeviceToHost, st.s));
    CK(cudaStreamSynchronize(st.s));
    return 0;
}

extern "C" double rc_gpu_backproject_matrices(int device, const struct rc_geom *g, const float *proj, float *vol,
                                              struct gj_error *err)
{
    if (device < 0 || rc_gpu_device_count() <= device) {
        gj_error_set(err, "", "GPU %d is not available", device);
        return -1;
    }
    if (g->type != RC_CONE3D) {
        gj_error_set(err, "", "internal: matrix backprojection needs a cone geometry");
        return -1;
    }
    if (ck(cudaSetDevice(device), err, "cudaSetDevice", __LINE__))
        return -1;
    t_cur_bytes = t_peak_bytes = 0;
    const int64_t np = (int64_t)g->nviews * g->rows * g->cols, nv = (int64_t)g->nx * g->ny * g->nz;
    Stream st;
    DevBuf dp, dvol;
    Event e0, e1;
    float ms = -1;
    if (ck(cudaStreamCreateWithFlags(&st.s, cudaStreamNonBlocking), err, "stream", __LINE__) ||
        dp.alloc(sizeof(float) * np, err, "cudaMalloc", __LINE__) ||
        dvol.alloc(sizeof(float) * nv, err, "cudaMalloc", __LINE__) ||
        ck(cudaMemcpyAsync(dp.p, proj, sizeof(float) * np, cudaMemcpyHostToDevice, st.s), err, "copy", __LINE__) ||
        ck(cudaMemsetAsync(dvol.p, 0, sizeof(float) * nv, st.s), err, "memset", __LINE__) ||
        ck(cudaEventCreate(&e0.e), err, "event", __LINE__) || ck(cudaEventCreate(&e1.e), err, "event", __LINE__) ||
        ck(cudaEventRecord(e0.e, st.s), err, "event", __LINE__) ||
        gpu_backproject(g, dp.as<float>(), dvol.as<float>(), 0, g->nz, true, st.s, err) ||
        ck(cudaEventRecord(e1.e, st.s), err, "event", __LINE__) || ck(cudaEventSynchronize(e1.e), err, "event", __LINE__) ||
        ck(cudaEventElapsedTime(&ms, e0.e, e1.e), err, "event", __LINE__) ||
        ck(cudaMemcpyAsync(vol, dvol.p, sizeof(float) * nv, cudaMemcpyDeviceToHost, st.s), err, "copy", __LINE__) ||
        ck(cudaStreamSynchronize(st.s), err, "sync", __LINE__))
        return -1;
    return ms > 0 ? ms / 1000.0 : -1;
}
