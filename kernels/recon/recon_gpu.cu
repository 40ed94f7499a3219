// recon_gpu.cu — the CUDA path of the recon module (kinds `recon`, benchmark `recon`).
//
//  - filtering: the CPU's tables (ramp response times window, Parker and view weights,
//    compute/recon/filter.c) applied with batched cuFFT R2C / C2R in row chunks;
//  - FBP / FDK backprojection: filtered projections in a layered CUDA array read through a
//    texture object with hardware bilinear filtering (zero border), many views per launch
//    with per-view matrices in constant memory, several voxels per thread in registers
//    (8 along z for cone, 4 slices of a batch for 2D);
//  - SART / SIRT: Joseph forward projection, the voxel-driven backprojection with its
//    normalisation, residual and update kernels; every array stays on the device across
//    iterations and every launch covers all slices of a batch.
// Every CUDA and cuFFT call is checked; failures come back as gj_error, never abort.
#include <cuda_runtime.h>
#include <cufft.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "recon/recon_gpu.h"

namespace {

const int MAXV = 1024;          // views per launch (constant memory: 12 floats each)
const int ZPT = 8;              // cone: voxels per thread along z
const int SPT = 4;              // 2D: slices per thread
__constant__ float c_mat[MAXV * 12];

struct DG {
    int type, cols, rows, nx, ny, nz;
    float du, dv, off_u, off_v, sod, sdd, vx, vy, vz, ox, oy, oz;
};

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
    ~DevBuf() { if (p) cudaFree(p); }
    template <class T> T *as() { return static_cast<T *>(p); }
};

struct TexArr {
    cudaArray_t arr = nullptr;
    cudaTextureObject_t tex = 0;
    ~TexArr()
    {
        if (tex)
            cudaDestroyTextureObject(tex);
        if (arr)
            cudaFreeArray(arr);
    }
};

struct FftPlan {
    cufftHandle h = 0;
    bool made = false;
    ~FftPlan() { if (made) cufftDestroy(h); }
};

DG make_dg(const rc_geom *g)
{
    DG d;
    d.type = g->type; d.cols = g->cols; d.rows = g->rows; d.nx = g->nx; d.ny = g->ny; d.nz = g->nz;
    d.du = (float)g->du; d.dv = (float)g->dv; d.off_u = (float)g->off_u; d.off_v = (float)g->off_v;
    d.sod = (float)g->sod; d.sdd = (float)g->sdd; d.vx = (float)g->vx; d.vy = (float)g->vy; d.vz = (float)g->vz;
    d.ox = (float)g->ox; d.oy = (float)g->oy; d.oz = (float)g->oz;
    return d;
}

// Per view: parallel (cos, sin, ...) or the normalised 3x4 matrix, as the CPU's view_matrix.
void view_params(const rc_geom *g, int v, float *out)
{
    double b = g->angles[v], ca = cos(b), sa = sin(b), A[12];
    if (g->type == RC_PARALLEL2D) {
        memset(out, 0, 12 * sizeof *out);
        out[0] = (float)ca;
        out[1] = (float)sa;
        return;
    }
    if (g->mat) {
        memcpy(A, g->mat + 12 * v, sizeof A);
    } else {
        double a[3] = { ca, sa, 0 }, e[3] = { -sa, ca, 0 }, r0[4], r1[4], r2[4];
        double cu = 0.5 * (g->cols - 1) - g->off_u / g->du, cv = 0.5 * (g->rows - 1) - g->off_v / g->dv;
        for (int k = 0; k < 3; k++) {
            r2[k] = e[k];
            r0[k] = g->sdd / g->du * a[k] + cu * e[k];
            r1[k] = g->sdd / g->dv * (k == 2 ? 1.0 : 0.0) + cv * e[k];
        }
        r2[3] = g->sod;
        r0[3] = cu * g->sod;
        r1[3] = cv * g->sod;
        for (int c = 0; c < 4; c++) {
            A[3 * c] = r0[c];
            A[3 * c + 1] = r1[c];
            A[3 * c + 2] = r2[c];
        }
    }
    for (int k = 0; k < 12; k++)
        out[k] = (float)A[k];
}

// ---------------------------------------------------------------- filtering

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
        float w = 1;
        if (g.type != RC_PARALLEL2D) {
            float u = (c - 0.5f * (g.cols - 1)) * g.du + g.off_u;
            float vv = g.type == RC_CONE3D ? (row - 0.5f * (g.rows - 1)) * g.dv + g.off_v : 0.0f;
            w = g.sdd * rsqrtf(g.sdd * g.sdd + u * u + vv * vv) * parker[(int64_t)view * g.cols + c];
        }
        v = p[r * g.cols + c] * w;
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

int gpu_filter(const rc_geom *g, int filter, float *d_proj, int64_t nrows, gj_error *err)
{
    int L;
    float *H, *parker, *vw;
    if (rc_filter_tables(g, filter, &L, &H, &parker, &vw, err))
        return -1;
    DevBuf dH, dP, dW, dbuf, dF;
    int nh = L / 2 + 1;
    int rc = -1;
    do {
        if (ck(cudaMalloc(&dH.p, sizeof(float) * nh), err, "cudaMalloc H", __LINE__) ||
            ck(cudaMalloc(&dP.p, sizeof(float) * (size_t)g->nviews * g->cols), err, "cudaMalloc parker", __LINE__) ||
            ck(cudaMalloc(&dW.p, sizeof(float) * g->nviews), err, "cudaMalloc vw", __LINE__) ||
            ck(cudaMemcpy(dH.p, H, sizeof(float) * nh, cudaMemcpyHostToDevice), err, "copy H", __LINE__) ||
            ck(cudaMemcpy(dP.p, parker, sizeof(float) * (size_t)g->nviews * g->cols, cudaMemcpyHostToDevice), err,
               "copy parker", __LINE__) ||
            ck(cudaMemcpy(dW.p, vw, sizeof(float) * g->nviews, cudaMemcpyHostToDevice), err, "copy vw", __LINE__))
            break;
        rc = 0;
    } while (0);
    free(H);
    free(parker);
    free(vw);
    if (rc)
        return -1;
    int chunk = (int)((256ll << 20) / ((int64_t)L * 4));
    if (chunk > 65535)
        chunk = 65535;
    if (chunk > nrows)
        chunk = (int)nrows;
    if (chunk < 1)
        chunk = 1;
    CK(cudaMalloc(&dbuf.p, sizeof(float) * (size_t)chunk * L));
    CK(cudaMalloc(&dF.p, sizeof(cufftComplex) * (size_t)chunk * nh));
    FftPlan pf, pb;
    int n[1] = { L };
    CKF(cufftPlanMany(&pf.h, 1, n, NULL, 1, L, NULL, 1, nh, CUFFT_R2C, chunk));
    pf.made = true;
    CKF(cufftPlanMany(&pb.h, 1, n, NULL, 1, nh, NULL, 1, L, CUFFT_C2R, chunk));
    pb.made = true;
    DG dg = make_dg(g);
    for (int64_t r0 = 0; r0 < nrows; r0 += chunk) {
        dim3 b(256), gw((L + 255) / 256, chunk), gh((nh + 255) / 256, chunk), gs((g->cols + 255) / 256, chunk);
        k_preweight<<<gw, b>>>(d_proj, dbuf.as<float>(), r0, nrows, chunk, L, dg, g->nviews, dP.as<float>());
        CKL("k_preweight");
        CKF(cufftExecR2C(pf.h, dbuf.as<float>(), dF.as<cufftComplex>()));
        k_mul_h<<<gh, b>>>(dF.as<cufftComplex>(), dH.as<float>(), nh, chunk);
        CKL("k_mul_h");
        CKF(cufftExecC2R(pb.h, dF.as<cufftComplex>(), dbuf.as<float>()));
        k_store<<<gs, b>>>(d_proj, dbuf.as<float>(), r0, nrows, chunk, L, g->cols, g->rows, g->nviews, dW.as<float>());
        CKL("k_store");
    }
    CK(cudaDeviceSynchronize());
    return 0;
}

// ---------------------------------------------------------------- texture backprojection

int make_layered(TexArr &t, const float *d_src, int w, int h, int layers, bool linear, gj_error *err)
{
    cudaChannelFormatDesc fd = cudaCreateChannelDesc<float>();
    cudaExtent ext = make_cudaExtent((size_t)w, (size_t)h, (size_t)layers);
    CK(cudaMalloc3DArray(&t.arr, &fd, ext, cudaArrayLayered));
    cudaMemcpy3DParms cp = {};
    cp.srcPtr = make_cudaPitchedPtr((void *)d_src, (size_t)w * sizeof(float), (size_t)w, (size_t)h);
    cp.dstArray = t.arr;
    cp.extent = ext;
    cp.kind = cudaMemcpyDeviceToDevice;
    CK(cudaMemcpy3D(&cp));
    cudaResourceDesc rd = {};
    rd.resType = cudaResourceTypeArray;
    rd.res.array.array = t.arr;
    cudaTextureDesc td = {};
    td.addressMode[0] = td.addressMode[1] = td.addressMode[2] = cudaAddressModeBorder;
    td.filterMode = linear ? cudaFilterModeLinear : cudaFilterModePoint;
    td.readMode = cudaReadModeElementType;
    td.normalizedCoords = 0;
    CK(cudaCreateTextureObject(&t.tex, &rd, &td, NULL));
    return 0;
}

// Bilinear sample at pixel coordinates (x = column, y = row), zero outside: hardware, or
// in software from point samples (the same arithmetic as the CPU, for the tests).
__device__ __forceinline__ float sample(cudaTextureObject_t tex, float x, float y, int layer, bool hw)
{
    if (hw)
        return tex2DLayered<float>(tex, x + 0.5f, y + 0.5f, layer);
    float fx = floorf(x), fy = floorf(y), ax = x - fx, ay = y - fy;
    float a = tex2DLayered<float>(tex, fx + 0.5f, fy + 0.5f, layer), b = tex2DLayered<float>(tex, fx + 1.5f, fy + 0.5f, layer);
    float c = tex2DLayered<float>(tex, fx + 0.5f, fy + 1.5f, layer), d = tex2DLayered<float>(tex, fx + 1.5f, fy + 1.5f, layer);
    float top = a + ax * (b - a), bot = c + ax * (d - c);
    return top + ay * (bot - top);
}

// 2D batch: texture (cols x views x layers = slices); SPT slices per thread.
template <bool HW>
__global__ void k_bp2d(cudaTextureObject_t tex, float *vol, DG g, int nslices, int v0, int nv)
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
        const float *A = c_mat + 12 * k;
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
        for (int s = 0; s < SPT; s++)
            if (s0 + s < nslices)
                acc[s] += w * sample(tex, uc, (float)(v0 + k), s0 + s, HW);
    }
#pragma unroll
    for (int s = 0; s < SPT; s++)
        if (s0 + s < nslices)
            vol[((int64_t)(s0 + s) * g.ny + j) * g.nx + i] += acc[s];
}

// Cone: texture (cols x rows x layers = views); ZPT voxels along z per thread, slices [z0, z0+nzs).
template <bool HW>
__global__ void k_bp3d(cudaTextureObject_t tex, float *vol, DG g, int z0, int nzs, int nv, float sod2)
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
    for (int k = 0; k < nv; k++) {
        const float *A = c_mat + 12 * k;
        float bw = A[2] * x + A[5] * y + A[11], bu = A[0] * x + A[3] * y + A[9], bv = A[1] * x + A[4] * y + A[10];
#pragma unroll
        for (int s = 0; s < ZPT; s++) {
            float z = (z0 + kb + s - 0.5f * (g.nz - 1)) * g.vz + g.oz;
            float w = bw + A[8] * z;
            if (!(w > 1e-6f))
                continue;
            float iw = 1.0f / w;
            float uc = (bu + A[6] * z) * iw, vr = (bv + A[7] * z) * iw;
            acc[s] += sod2 * iw * iw * sample(tex, uc, vr, k, HW);
        }
    }
#pragma unroll
    for (int s = 0; s < ZPT; s++)
        if (kb + s < nzs)
            vol[((int64_t)(kb + s) * g.ny + j) * g.nx + i] += acc[s];
}

int upload_views(const rc_geom *g, int v0, int nv)
{
    float *buf = (float *)malloc(sizeof(float) * 12 * (size_t)nv);
    if (!buf)
        return -1;
    for (int k = 0; k < nv; k++)
        view_params(g, v0 + k, buf + 12 * k);
    cudaError_t e = cudaMemcpyToSymbol(c_mat, buf, sizeof(float) * 12 * (size_t)nv);
    free(buf);
    return e == cudaSuccess ? 0 : -1;
}

// d_proj: filtered projections on the device; d_vol: zeroed slices [z0, z0+nzs).
int gpu_backproject_tex(const rc_geom *g, const float *d_proj, float *d_vol, int z0, int nzs, bool hw, gj_error *err)
{
    DG dg = make_dg(g);
    dim3 b(32, 8);
    if (g->type != RC_CONE3D) {
        int64_t pset = (int64_t)g->nviews * g->cols;
        for (int s0 = 0; s0 < nzs; s0 += 2048) {
            int ns = nzs - s0 < 2048 ? nzs - s0 : 2048;
            TexArr t;
            if (make_layered(t, d_proj + s0 * pset, g->cols, g->nviews, ns, hw, err))
                return -1;
            for (int v0 = 0; v0 < g->nviews; v0 += MAXV) {
                int nv = g->nviews - v0 < MAXV ? g->nviews - v0 : MAXV;
                if (upload_views(g, v0, nv))
                    return gj_error_set(err, "", "CUDA: cannot upload view parameters");
                dim3 gr((g->nx + 31) / 32, (g->ny + 7) / 8, (ns + SPT - 1) / SPT);
                if (hw)
                    k_bp2d<true><<<gr, b>>>(t.tex, d_vol + (int64_t)s0 * g->nx * g->ny, dg, ns, v0, nv);
                else
                    k_bp2d<false><<<gr, b>>>(t.tex, d_vol + (int64_t)s0 * g->nx * g->ny, dg, ns, v0, nv);
                CKL("k_bp2d");
            }
            CK(cudaDeviceSynchronize());
        }
        return 0;
    }
    int64_t view = (int64_t)g->rows * g->cols;
    for (int v0 = 0; v0 < g->nviews; v0 += MAXV) {
        int nv = g->nviews - v0 < MAXV ? g->nviews - v0 : MAXV;
        TexArr t;
        if (make_layered(t, d_proj + v0 * view, g->cols, g->rows, nv, hw, err))
            return -1;
        if (upload_views(g, v0, nv))
            return gj_error_set(err, "", "CUDA: cannot upload view parameters");
        dim3 gr((g->nx + 31) / 32, (g->ny + 7) / 8, (nzs + ZPT - 1) / ZPT);
        float sod2 = (float)(g->sod * g->sod);
        if (hw)
            k_bp3d<true><<<gr, b>>>(t.tex, d_vol, dg, z0, nzs, nv, sod2);
        else
            k_bp3d<false><<<gr, b>>>(t.tex, d_vol, dg, z0, nzs, nv, sod2);
        CKL("k_bp3d");
        CK(cudaDeviceSynchronize());
    }
    return 0;
}

// ---------------------------------------------------------------- iterative (SART / SIRT)

// Per view for the projector: ray origin / direction data. Parallel: (ca, sa); circular:
// (ca, sa); matrices: inverse 3x3 (9) and the source (3).
__device__ void ray_d(const DG &g, const float *vp, bool mat, int c, int r, float *p, float *d)
{
    float u = (c - 0.5f * (g.cols - 1)) * g.du + g.off_u, vv = (r - 0.5f * (g.rows - 1)) * g.dv + g.off_v;
    if (mat) {
        for (int k = 0; k < 3; k++) {
            d[k] = vp[3 * k] * c + vp[3 * k + 1] * r + vp[3 * k + 2];
            p[k] = vp[9 + k];
        }
        return;
    }
    float ca = vp[0], sa = vp[1];
    if (g.type == RC_PARALLEL2D) {
        p[0] = u * ca; p[1] = u * sa; p[2] = 0;
        d[0] = -sa; d[1] = ca; d[2] = 0;
    } else {
        p[0] = g.sod * sa; p[1] = -g.sod * ca; p[2] = 0;
        d[0] = -g.sdd * sa + u * ca; d[1] = g.sdd * ca + u * sa; d[2] = g.type == RC_CONE3D ? vv : 0;
    }
}

__device__ float joseph_d(const DG &g, const float *vol, int nzv, const float *p, const float *d)
{
    int nx = g.nx, ny = g.ny;
    float xmin = -0.5f * (nx - 1) * g.vx + g.ox, ymin = -0.5f * (ny - 1) * g.vy + g.oy, zmin = -0.5f * (g.nz - 1) * g.vz + g.oz;
    float P[3] = { (p[0] - xmin) / g.vx, (p[1] - ymin) / g.vy, nzv > 1 ? (p[2] - zmin) / g.vz : 0 };
    float D[3] = { d[0] / g.vx, d[1] / g.vy, nzv > 1 ? d[2] / g.vz : 0 };
    int m = fabsf(D[0]) >= fabsf(D[1]) ? 0 : 1;
    if (nzv > 1 && fabsf(D[2]) > fabsf(D[m]))
        m = 2;
    if (!(fabsf(D[m]) > 0))
        return 0;
    int n[3] = { nx, ny, nzv };
    int o1 = (m + 1) % 3, o2 = (m + 2) % 3;
    float step;
    if (nzv == 1) {
        o1 = 1 - m;
        o2 = 2;
        step = sqrtf(d[0] * d[0] + d[1] * d[1]) / fabsf(D[m]);
    } else {
        step = sqrtf(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]) / fabsf(D[m]);
    }
    int64_t str[3] = { 1, nx, (int64_t)nx * ny };
    float sum = 0;
    for (int im = 0; im < n[m]; im++) {
        float t = (im - P[m]) / D[m];
        float a1 = P[o1] + t * D[o1];
        if (!(a1 > -1.0f && a1 < n[o1]))
            continue;
        int i1 = (int)floorf(a1);
        float f1 = a1 - i1;
        if (nzv == 1) {
            float s = 0;
            if (i1 >= 0)
                s += (1 - f1) * vol[im * str[m] + i1 * str[o1]];
            if (i1 + 1 < n[o1])
                s += f1 * vol[im * str[m] + (i1 + 1) * str[o1]];
            sum += s;
            continue;
        }
        float a2 = P[o2] + t * D[o2];
        if (!(a2 > -1.0f && a2 < n[o2]))
            continue;
        int i2 = (int)floorf(a2);
        float f2 = a2 - i2, s = 0;
        for (int e2 = 0; e2 < 2; e2++) {
            int j2 = i2 + e2;
            if (j2 < 0 || j2 >= n[o2])
                continue;
            float w2 = e2 ? f2 : 1 - f2;
            if (i1 >= 0)
                s += w2 * (1 - f1) * vol[im * str[m] + i1 * str[o1] + j2 * str[o2]];
            if (i1 + 1 < n[o1])
                s += w2 * f1 * vol[im * str[m] + (i1 + 1) * str[o1] + j2 * str[o2]];
        }
        sum += s;
    }
    return sum * step;
}

// One thread per ray of the listed views, for every problem (2D slice) at once.
__global__ void k_forward(const float *vol, float *q, DG g, int nzv, int nprob, const int *vlist, int nv,
                          const float *vparams, int mat)
{
    int64_t id = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    int64_t per = (int64_t)nv * g.rows * g.cols;
    if (id >= per * nprob)
        return;
    int prob = (int)(id / per);
    int64_t rem = id % per;
    int vi = (int)(rem / ((int64_t)g.rows * g.cols)), r = (int)((rem / g.cols) % g.rows), c = (int)(rem % g.cols);
    int v = vlist[vi];
    float p[3], d[3];
    ray_d(g, vparams + 12 * v, mat != 0, c, r, p, d);
    int64_t vox = (int64_t)g.nx * g.ny * nzv;
    float val = joseph_d(g, vol + prob * vox, nzv, p, d);
    q[id] = val;   // compact layout [prob][vi][rows][cols]
}

// residual: res = (p - A x) / (A 1) for the listed views, scattered into the full layout.
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

__global__ void k_scatter(const float *fp, float *dst, int nprob, int nviews, int rays_per_view, const int *vlist, int nv)
{
    int64_t id = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    int64_t per = (int64_t)nv * rays_per_view;
    if (id >= per * nprob)
        return;
    int prob = (int)(id / per);
    int64_t rem = id % per;
    int vi = (int)(rem / rays_per_view), k = (int)(rem % rays_per_view);
    dst[((int64_t)prob * nviews + vlist[vi]) * rays_per_view + k] = fp[id];
}

// Voxel-driven backprojection of the residual with its normalisation (software bilinear,
// as the CPU's bp_rows); one thread per voxel of every problem.
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
        const float *A = mats + 12 * v;
        const float *qv = q + (int64_t)v * g.rows * g.cols;
        float uc, vr = 0;
        if (g.type == RC_PARALLEL2D) {
            uc = (x * A[0] + y * A[1]) / g.du + cu;
        } else {
            float w = A[2] * x + A[5] * y + A[8] * z + A[11];
            if (!(w > 1e-6f))
                continue;
            uc = (A[0] * x + A[3] * y + A[6] * z + A[9]) / w;
            vr = g.rows > 1 ? (A[1] * x + A[4] * y + A[7] * z + A[10]) / w : 0.0f;
        }
        if (!(uc > -1.0f && uc < g.cols && vr > -1.0f && vr < g.rows))
            continue;
        int ic = (int)floorf(uc), ir = (int)floorf(vr);
        float fu = uc - ic, fv = g.rows > 1 ? vr - ir : 0.0f;
        for (int e2 = 0; e2 < (g.rows > 1 ? 2 : 1); e2++) {
            int rr = ir + e2;
            if (rr < 0 || rr >= g.rows)
                continue;
            float wr = e2 ? fv : 1 - fv;
            for (int e1 = 0; e1 < 2; e1++) {
                int cc = ic + e1;
                if (cc < 0 || cc >= g.cols)
                    continue;
                float wt = wr * (e1 ? fu : 1 - fu);
                s += wt * qv[(int64_t)rr * g.cols + cc];
                sn += wt;
            }
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

int inv3(const double m[9], double r[9])
{
    double det = m[0] * (m[4] * m[8] - m[5] * m[7]) - m[1] * (m[3] * m[8] - m[5] * m[6]) + m[2] * (m[3] * m[7] - m[4] * m[6]);
    if (fabs(det) < 1e-300)
        return -1;
    r[0] = (m[4] * m[8] - m[5] * m[7]) / det; r[1] = (m[2] * m[7] - m[1] * m[8]) / det; r[2] = (m[1] * m[5] - m[2] * m[4]) / det;
    r[3] = (m[5] * m[6] - m[3] * m[8]) / det; r[4] = (m[0] * m[8] - m[2] * m[6]) / det; r[5] = (m[2] * m[3] - m[0] * m[5]) / det;
    r[6] = (m[3] * m[7] - m[4] * m[6]) / det; r[7] = (m[1] * m[6] - m[0] * m[7]) / det; r[8] = (m[0] * m[4] - m[1] * m[3]) / det;
    return 0;
}

unsigned blocks(int64_t n) { return (unsigned)((n + 255) / 256); }

int gpu_iterate(const rc_geom *g, const rc_opts *o, const float *d_p, float *d_x, int nprob, gj_error *err)
{
    DG dg = make_dg(g);
    const int nzv = g->type == RC_CONE3D ? g->nz : 1;
    const int rpv = g->rows * g->cols;
    const int64_t nrays = (int64_t)nprob * g->nviews * rpv, nvox = (int64_t)nprob * g->nx * g->ny * nzv;
    const int subsets = o->algo == RC_SIRT ? 1 : o->subsets;
    const int maxnv = (g->nviews + subsets - 1) / subsets;
    // per-view tables: projector (ray) parameters and backprojector matrices
    float *hv = (float *)malloc(sizeof(float) * 12 * (size_t)g->nviews);
    float *hm = (float *)malloc(sizeof(float) * 12 * (size_t)g->nviews);
    int *order = (int *)malloc(sizeof(int) * (size_t)subsets), *vl = (int *)malloc(sizeof(int) * (size_t)g->nviews);
    if (!hv || !hm || !order || !vl) {
        free(hv); free(hm); free(order); free(vl);
        return gj_error_set(err, "", "out of memory");
    }
    for (int v = 0; v < g->nviews; v++) {
        view_params(g, v, hm + 12 * v);
        double b = g->angles[v];
        memset(hv + 12 * v, 0, 12 * sizeof(float));
        hv[12 * v] = (float)cos(b);
        hv[12 * v + 1] = (float)sin(b);
        if (g->mat) {
            const double *A = g->mat + 12 * v;
            double M[9], Mi[9] = { 0 };
            for (int r = 0; r < 3; r++)
                for (int k = 0; k < 3; k++)
                    M[3 * r + k] = A[3 * k + r];
            inv3(M, Mi);
            for (int k = 0; k < 9; k++)
                hv[12 * v + k] = (float)Mi[k];
            for (int r = 0; r < 3; r++)
                hv[12 * v + 9 + r] = (float)-(Mi[3 * r] * A[9] + Mi[3 * r + 1] * A[10] + Mi[3 * r + 2] * A[11]);
        }
    }
    int stride = (int)(subsets / 1.618 + 0.5);
    if (stride < 1)
        stride = 1;
    for (;; stride++) {
        int a = stride, b = subsets;
        while (b) { int t = a % b; a = b; b = t; }
        if (a == 1)
            break;
    }
    for (int s = 0; s < subsets; s++)
        order[s] = (int)(((int64_t)s * stride) % subsets);
    DevBuf dv, dm, dl, drow, dres, dfp, dupd, dnorm, dones;
    int rc = 0;
    do {
        if (ck(cudaMalloc(&dv.p, sizeof(float) * 12 * (size_t)g->nviews), err, "cudaMalloc", __LINE__) ||
            ck(cudaMalloc(&dm.p, sizeof(float) * 12 * (size_t)g->nviews), err, "cudaMalloc", __LINE__) ||
            ck(cudaMalloc(&dl.p, sizeof(int) * (size_t)g->nviews), err, "cudaMalloc", __LINE__) ||
            ck(cudaMalloc(&drow.p, sizeof(float) * nrays), err, "cudaMalloc rowsum", __LINE__) ||
            ck(cudaMalloc(&dres.p, sizeof(float) * nrays), err, "cudaMalloc residual", __LINE__) ||
            ck(cudaMalloc(&dfp.p, sizeof(float) * nrays), err, "cudaMalloc projection", __LINE__) ||
            ck(cudaMalloc(&dupd.p, sizeof(float) * nvox), err, "cudaMalloc update", __LINE__) ||
            ck(cudaMalloc(&dnorm.p, sizeof(float) * nvox), err, "cudaMalloc norm", __LINE__) ||
            ck(cudaMalloc(&dones.p, sizeof(float) * nvox), err, "cudaMalloc ones", __LINE__) ||
            ck(cudaMemcpy(dv.p, hv, sizeof(float) * 12 * (size_t)g->nviews, cudaMemcpyHostToDevice), err, "copy", __LINE__) ||
            ck(cudaMemcpy(dm.p, hm, sizeof(float) * 12 * (size_t)g->nviews, cudaMemcpyHostToDevice), err, "copy", __LINE__))
            rc = -1;
    } while (0);
    free(hv);
    free(hm);
    if (rc) {
        free(order);
        free(vl);
        return -1;
    }
    int mat = g->mat != NULL;
    // row sums: Joseph projection of ones, all views
    for (int v = 0; v < g->nviews; v++)
        vl[v] = v;
    k_fill<<<blocks(nvox), 256>>>(dones.as<float>(), nvox, 1.0f);
    if (ck(cudaGetLastError(), err, "k_fill", __LINE__) ||
        ck(cudaMemcpy(dl.p, vl, sizeof(int) * (size_t)g->nviews, cudaMemcpyHostToDevice), err, "copy", __LINE__)) {
        free(order); free(vl);
        return -1;
    }
    k_forward<<<blocks(nrays), 256>>>(dones.as<float>(), dfp.as<float>(), dg, nzv, nprob, dl.as<int>(), g->nviews,
                                      dv.as<float>(), mat);
    k_scatter<<<blocks(nrays), 256>>>(dfp.as<float>(), drow.as<float>(), nprob, g->nviews, rpv, dl.as<int>(), g->nviews);
    if (ck(cudaGetLastError(), err, "row sums", __LINE__)) {
        free(order); free(vl);
        return -1;
    }
    dim3 b(32, 8), gr((g->nx + 31) / 32, (g->ny + 7) / 8, nzv * nprob);
    for (int it = 0; it < o->iterations && !rc; it++)
        for (int si = 0; si < subsets && !rc; si++) {
            int s = order[si], nv = 0;
            for (int v = s; v < g->nviews; v += subsets)
                vl[nv++] = v;
            int64_t n = (int64_t)nprob * nv * rpv;
            if (ck(cudaMemcpy(dl.p, vl, sizeof(int) * (size_t)nv, cudaMemcpyHostToDevice), err, "copy views", __LINE__)) {
                rc = -1;
                break;
            }
            k_forward<<<blocks(n), 256>>>(d_x, dfp.as<float>(), dg, nzv, nprob, dl.as<int>(), nv, dv.as<float>(), mat);
            k_residual<<<blocks(n), 256>>>(dfp.as<float>(), d_p, drow.as<float>(), dres.as<float>(), nprob, g->nviews, rpv,
                                           dl.as<int>(), nv);
            k_bp_iter<<<gr, b>>>(dres.as<float>(), dupd.as<float>(), dnorm.as<float>(), dg, nzv, nprob, g->nviews,
                                 dl.as<int>(), nv, dm.as<float>());
            k_update<<<blocks(nvox), 256>>>(d_x, dupd.as<float>(), dnorm.as<float>(), nvox, (float)o->relaxation, o->nonneg);
            if (ck(cudaGetLastError(), err, "SART sub-iteration", __LINE__))
                rc = -1;
        }
    (void)maxnv;
    free(order);
    free(vl);
    if (!rc && ck(cudaDeviceSynchronize(), err, "SART", __LINE__))
        rc = -1;
    return rc;
}

} // namespace

extern "C" int rc_gpu_device_count(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError();   // clear the sticky error: no driver means zero GPUs
        return 0;
    }
    return n;
}

extern "C" int rc_gpu_reconstruct(int device, const struct rc_geom *g, const struct rc_opts *o, float *proj,
                                  float *vol, int z0, int nzs, struct gj_error *err)
{
    if (rc_gpu_device_count() <= device)
        return gj_error_set(err, "", "GPU %d is not available", device);
    CK(cudaSetDevice(device));
    const bool two_d = g->type != RC_CONE3D;
    const int64_t pset = (int64_t)g->nviews * g->rows * g->cols;
    const int64_t np = two_d ? pset * nzs : pset, nv = (int64_t)g->nx * g->ny * nzs;
    DevBuf dp, dvol;
    CK(cudaMalloc(&dp.p, sizeof(float) * np));
    CK(cudaMalloc(&dvol.p, sizeof(float) * nv));
    CK(cudaMemcpy(dp.p, proj, sizeof(float) * np, cudaMemcpyHostToDevice));
    CK(cudaMemset(dvol.p, 0, sizeof(float) * nv));
    if (o->algo == RC_FBP || o->algo == RC_FDK) {
        if (gpu_filter(g, o->filter, dp.as<float>(), two_d ? (int64_t)nzs * g->nviews : (int64_t)g->nviews * g->rows, err))
            return -1;
        if (gpu_backproject_tex(g, dp.as<float>(), dvol.as<float>(), z0, nzs, !o->gpu_precise, err))
            return -1;
    } else {
        if (!two_d && (z0 != 0 || nzs != g->nz))
            return gj_error_set(err, "", "internal: iterative cone reconstruction needs the whole volume");
        if (!two_d) {
            if (gpu_iterate(g, o, dp.as<float>(), dvol.as<float>(), 1, err))
                return -1;
        } else {
            // slices of a batch are independent problems: up to 4096 per launch (grid limits)
            for (int s0 = 0; s0 < nzs; s0 += 4096) {
                int ns = nzs - s0 < 4096 ? nzs - s0 : 4096;
                if (gpu_iterate(g, o, dp.as<float>() + (int64_t)s0 * pset, dvol.as<float>() + (int64_t)s0 * g->nx * g->ny,
                                ns, err))
                    return -1;
            }
        }
    }
    CK(cudaMemcpy(vol, dvol.p, sizeof(float) * nv, cudaMemcpyDeviceToHost));
    return 0;
}

extern "C" double rc_gpu_backproject_matrices(int device, const struct rc_geom *g, const float *proj, float *vol,
                                              struct gj_error *err)
{
    if (rc_gpu_device_count() <= device) {
        gj_error_set(err, "", "GPU %d is not available", device);
        return -1;
    }
    if (ck(cudaSetDevice(device), err, "cudaSetDevice", __LINE__))
        return -1;
    const int64_t np = (int64_t)g->nviews * g->rows * g->cols, nv = (int64_t)g->nx * g->ny * g->nz;
    DevBuf dp, dvol;
    cudaEvent_t e0 = nullptr, e1 = nullptr;
    float ms = -1;
    if (ck(cudaMalloc(&dp.p, sizeof(float) * np), err, "cudaMalloc", __LINE__) ||
        ck(cudaMalloc(&dvol.p, sizeof(float) * nv), err, "cudaMalloc", __LINE__) ||
        ck(cudaMemcpy(dp.p, proj, sizeof(float) * np, cudaMemcpyHostToDevice), err, "copy", __LINE__) ||
        ck(cudaMemset(dvol.p, 0, sizeof(float) * nv), err, "memset", __LINE__) ||
        ck(cudaEventCreate(&e0), err, "event", __LINE__) || ck(cudaEventCreate(&e1), err, "event", __LINE__) ||
        ck(cudaEventRecord(e0), err, "event", __LINE__) ||
        gpu_backproject_tex(g, dp.as<float>(), dvol.as<float>(), 0, g->nz, true, err) ||
        ck(cudaEventRecord(e1), err, "event", __LINE__) || ck(cudaEventSynchronize(e1), err, "event", __LINE__) ||
        ck(cudaEventElapsedTime(&ms, e0, e1), err, "event", __LINE__) ||
        ck(cudaMemcpy(vol, dvol.p, sizeof(float) * nv, cudaMemcpyDeviceToHost), err, "copy", __LINE__))
        ms = -1;
    if (e0)
        cudaEventDestroy(e0);
    if (e1)
        cudaEventDestroy(e1);
    return ms > 0 ? ms / 1000.0 : -1;
}
