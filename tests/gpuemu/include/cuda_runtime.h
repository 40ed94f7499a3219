/*
 * cuda_runtime.h (gpu-emu) — the CUDA execution model on the CPU, for compiling every kernels/ .cu file
 * as host C++ (suite gpu-emu; see HACKING.md "Kernels on the CPU").
 *
 * A launch (GJ_LAUNCH, kernels/gj_launch.cuh) runs the grid's blocks one after another in the
 * calling thread. The threads of a block run as fibers (ucontext): __syncthreads() and the warp
 * shuffles are real barriers (a thread waits until every live thread of its block, or warp,
 * has arrived), __shared__ variables are per block (thread_local statics, reused block after
 * block: never shared by two blocks running at once, since only one runs at a time). A block
 * runs warp by warp: a warp's lanes go on until all of them wait at a block barrier, then the
 * next warp (in reverse in odd blocks), so a missing barrier loses a write whichever
 * direction the race goes. A kernel whose first block made no barrier call runs its other blocks
 * and later launches without fibers (one thread after another); a barrier there aborts.
 */
#ifndef GJ_EMU_CUDA_RUNTIME_H
#define GJ_EMU_CUDA_RUNTIME_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <functional>

#include "cuda_runtime_api.h"

#define GJ_CUDA_EMU 1

#define __global__
#define __device__
#define __host__
#define __constant__
/* always inlined, as nvcc does: the helpers of a shared .cuh then belong to each kernel file
 * even at -O0 (otherwise the linker keeps one copy, and a tid-shifted file would share it) */
#define __forceinline__ __attribute__((always_inline)) inline
#define __shared__ static thread_local

/* The mutation check (tests/gpuemu/meson.build): a kernel file built with GJ_EMU_TID_SHIFT=1
 * sees threadIdx.x one too high; the suite must then fail. */
#ifndef GJ_EMU_TID_SHIFT
#define GJ_EMU_TID_SHIFT 0
#endif

struct uint3 {
    unsigned x, y, z;
};

struct dim3 {
    unsigned x, y, z;
    dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};

namespace gj_emu {

struct Where {
    uint3 tid, bid;
    dim3 bdim, gdim;
};
extern thread_local Where t_at;   /* the running thread's indices */

inline uint3 thread_idx(unsigned shift)
{
    uint3 t = t_at.tid;
    t.x += shift;
    return t;
}

/* Runs body (one thread of the kernel) for every thread of grid x block; kernel identifies the
 * kernel (its address) for the barrier-free fast path. Returns the launch status. */
cudaError_t run_grid(const void *kernel, dim3 grid, dim3 block, const std::function<void()> &body);

void sync_block();
/* The warp's exchange: every live lane publishes `bytes` of v, then reads lane src's. */
void warp_exchange(const void *v, void *out, size_t bytes, int src_lane);
int lane_id();

template <class... P> struct Launch {
    void (*k)(P...);
    dim3 g, b;
    void operator()(P... args) const
    {
        cudaError_t e = run_grid((const void *)k, g, b, [&] { k(args...); });
        (void)e;
    }
};

template <class... P>
Launch<P...> launcher(void (*k)(P...), dim3 g, dim3 b, size_t shmem = 0, cudaStream_t st = 0)
{
    (void)shmem;
    (void)st;
    return Launch<P...>{ k, g, b };
}

} // namespace gj_emu

#define GJ_LAUNCH(k, ...) ::gj_emu::launcher(k, __VA_ARGS__)

#define threadIdx (::gj_emu::thread_idx(GJ_EMU_TID_SHIFT))
#define blockIdx (::gj_emu::t_at.bid)
#define blockDim (::gj_emu::t_at.bdim)
#define gridDim (::gj_emu::t_at.gdim)
#define warpSize 32

inline void __syncthreads() { gj_emu::sync_block(); }

template <class T> T __shfl_sync(unsigned mask, T v, int src, int width = 32)
{
    (void)mask;
    T out;
    int lane = gj_emu::lane_id();
    gj_emu::warp_exchange(&v, &out, sizeof v, (lane & ~(width - 1)) + (src & (width - 1)));
    return out;
}

template <class T> T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32)
{
    (void)mask;
    T out;
    int lane = gj_emu::lane_id(), src = lane ^ lane_mask;
    gj_emu::warp_exchange(&v, &out, sizeof v, (src & ~(width - 1)) == (lane & ~(width - 1)) ? src : lane);
    return out;
}

template <class T> T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32)
{
    (void)mask;
    T out;
    int lane = gj_emu::lane_id(), src = lane + (int)delta;
    gj_emu::warp_exchange(&v, &out, sizeof v, (src & ~(width - 1)) == (lane & ~(width - 1)) ? src : lane);
    return out;
}

/* Atomics: one thread of the process runs at a time within a launch (fibers switch only at
 * barriers), so plain read-modify-write is atomic here. */
namespace gj_emu {
template <class T> T atomic_add(T *p, T v) { T o = *p; *p = o + v; return o; }
template <class T> T atomic_max(T *p, T v) { T o = *p; if (v > o) *p = v; return o; }
template <class T> T atomic_min(T *p, T v) { T o = *p; if (v < o) *p = v; return o; }
template <class T> T atomic_exch(T *p, T v) { T o = *p; *p = v; return o; }
template <class T> T atomic_cas(T *p, T cmp, T v) { T o = *p; if (o == cmp) *p = v; return o; }
}
/* the overloads CUDA has (so arguments convert as they do under nvcc) */
#define GJ_EMU_ATOMICS(T) \
    inline T atomicAdd(T *p, T v) { return gj_emu::atomic_add(p, v); } \
    inline T atomicMax(T *p, T v) { return gj_emu::atomic_max(p, v); } \
    inline T atomicMin(T *p, T v) { return gj_emu::atomic_min(p, v); } \
    inline T atomicExch(T *p, T v) { return gj_emu::atomic_exch(p, v); } \
    inline T atomicCAS(T *p, T cmp, T v) { return gj_emu::atomic_cas(p, cmp, v); }
GJ_EMU_ATOMICS(int)
GJ_EMU_ATOMICS(unsigned)
GJ_EMU_ATOMICS(unsigned long long)
#undef GJ_EMU_ATOMICS
inline float atomicAdd(float *p, float v) { return gj_emu::atomic_add(p, v); }
inline double atomicAdd(double *p, double v) { return gj_emu::atomic_add(p, v); }

/* ---- arrays and texture objects (what kernels/recon uses: float, layered, 2D) ---- */

enum cudaChannelFormatKind { cudaChannelFormatKindFloat = 2 };
struct cudaChannelFormatDesc {
    int x, y, z, w;
    enum cudaChannelFormatKind f;
};
template <class T> cudaChannelFormatDesc cudaCreateChannelDesc();
template <> inline cudaChannelFormatDesc cudaCreateChannelDesc<float>()
{
    return cudaChannelFormatDesc{ 32, 0, 0, 0, cudaChannelFormatKindFloat };
}

struct cudaExtent {
    size_t width, height, depth;
};
inline cudaExtent make_cudaExtent(size_t w, size_t h, size_t d) { return cudaExtent{ w, h, d }; }
struct cudaPitchedPtr {
    void *ptr;
    size_t pitch, xsize, ysize;
};
inline cudaPitchedPtr make_cudaPitchedPtr(void *p, size_t pitch, size_t xs, size_t ys)
{
    return cudaPitchedPtr{ p, pitch, xs, ys };
}
struct cudaPos {
    size_t x, y, z;
};

typedef struct gj_emu_array *cudaArray_t;
#define cudaArrayDefault 0x00
#define cudaArrayLayered 0x01

cudaError_t cudaMalloc3DArray(cudaArray_t *a, const cudaChannelFormatDesc *fd, cudaExtent ext, unsigned flags);
cudaError_t cudaFreeArray(cudaArray_t a);

struct cudaMemcpy3DParms {
    cudaArray_t srcArray;
    cudaPos srcPos;
    cudaPitchedPtr srcPtr;
    cudaArray_t dstArray;
    cudaPos dstPos;
    cudaPitchedPtr dstPtr;
    cudaExtent extent;
    enum cudaMemcpyKind kind;
};
cudaError_t cudaMemcpy3D(const cudaMemcpy3DParms *p);
cudaError_t cudaMemcpy3DAsync(const cudaMemcpy3DParms *p, cudaStream_t s);

enum cudaResourceType { cudaResourceTypeArray = 0 };
struct cudaResourceDesc {
    enum cudaResourceType resType;
    struct {
        struct {
            cudaArray_t array;
        } array;
    } res;
};
enum cudaTextureAddressMode { cudaAddressModeWrap = 0, cudaAddressModeClamp = 1, cudaAddressModeMirror = 2,
                              cudaAddressModeBorder = 3 };
enum cudaTextureFilterMode { cudaFilterModePoint = 0, cudaFilterModeLinear = 1 };
enum cudaTextureReadMode { cudaReadModeElementType = 0 };
struct cudaTextureDesc {
    enum cudaTextureAddressMode addressMode[3];
    enum cudaTextureFilterMode filterMode;
    enum cudaTextureReadMode readMode;
    int sRGB;
    float borderColor[4];
    int normalizedCoords;
};
struct cudaResourceViewDesc;
cudaError_t cudaCreateTextureObject(cudaTextureObject_t *t, const cudaResourceDesc *rd, const cudaTextureDesc *td,
                                    const cudaResourceViewDesc *vd);
cudaError_t cudaDestroyTextureObject(cudaTextureObject_t t);

namespace gj_emu {
/* A layered 2D fetch with the texture unit's addressing and its linear filtering (weights in
 * 1.8 fixed point, as the CUDA programming guide's "Linear Filtering" appendix). */
float tex2d_layered(cudaTextureObject_t t, float x, float y, int layer);
}

template <class T> T tex2DLayered(cudaTextureObject_t t, float x, float y, int layer);
template <> inline float tex2DLayered<float>(cudaTextureObject_t t, float x, float y, int layer)
{
    return gj_emu::tex2d_layered(t, x, y, layer);
}

#endif
