// emu_runtime.cc — the CPU side of the gpu-emu suite's CUDA: launches (blocks in turn, a block's
// threads as ucontext fibers with real barriers), device memory, streams, events, layered
// textures and cuFFT by FFTW. See include/cuda_runtime.h.
#include <fftw3.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <ucontext.h>

#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "cuda_runtime.h"
#include "cufft.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#define GJ_EMU_ASAN 1
#else
#define GJ_EMU_ASAN 0
#endif

namespace gj_emu {

thread_local Where t_at;

namespace {

thread_local cudaError_t t_last = cudaSuccess;

[[noreturn]] void die(const char *what)
{
    fprintf(stderr, "gpu-emu: %s\n", what);
    abort();
}

// ---------------------------------------------------------------- fibers

const size_t STACK = GJ_EMU_ASAN ? (512u << 10) : (128u << 10);

struct Fiber {
    ucontext_t uc;
    std::unique_ptr<char[]> stack;
    unsigned linear = 0;
    bool done = false;
};

// One block's run: its fibers and barrier state.
struct BlockRun {
    const std::function<void()> *body = nullptr;
    std::vector<Fiber> *fibers = nullptr;
    ucontext_t sched;
    Fiber *cur = nullptr;
    unsigned nthreads = 0, live = 0;
    std::vector<unsigned> warp_live;
    unsigned block_arrived = 0, block_gen = 0;
    std::vector<unsigned> warp_arrived, warp_gen;
    std::vector<unsigned char> warp_slots;   // 32 lanes x 16 bytes per warp
    unsigned long epoch = 0;   // changes whenever a barrier makes progress
    bool fiber_mode = false, used_barrier = false;
#if GJ_EMU_ASAN
    void *fake_stack = nullptr;
    const void *sched_bottom = nullptr;
    size_t sched_size = 0;
#endif
};

thread_local BlockRun *t_run = nullptr;
thread_local std::vector<Fiber> t_fibers;   // reused launch after launch

void switch_to_fiber(BlockRun &r, Fiber &f)
{
    r.cur = &f;
#if GJ_EMU_ASAN
    __sanitizer_start_switch_fiber(&r.fake_stack, f.stack.get(), STACK);
#endif
    if (swapcontext(&r.sched, &f.uc) != 0)
        die("swapcontext failed");
#if GJ_EMU_ASAN
    __sanitizer_finish_switch_fiber(r.fake_stack, nullptr, nullptr);
#endif
    r.cur = nullptr;
}

// From a fiber back to the scheduler; `finished`: this fiber will not run again.
void yield_to_scheduler(BlockRun &r, bool finished)
{
    Fiber *f = r.cur;
#if GJ_EMU_ASAN
    void *fs = nullptr;
    __sanitizer_start_switch_fiber(finished ? nullptr : &fs, r.sched_bottom, r.sched_size);
#else
    (void)finished;
#endif
    if (swapcontext(&f->uc, &r.sched) != 0)
        die("swapcontext failed");
#if GJ_EMU_ASAN
    __sanitizer_finish_switch_fiber(fs, nullptr, nullptr);
#endif
}

void set_where(unsigned linear)
{
    const dim3 &b = t_at.bdim;
    t_at.tid.x = linear % b.x;
    t_at.tid.y = (linear / b.x) % b.y;
    t_at.tid.z = linear / (b.x * b.y);
}

void fiber_entry()
{
    BlockRun &r = *t_run;
#if GJ_EMU_ASAN
    __sanitizer_finish_switch_fiber(nullptr, &r.sched_bottom, &r.sched_size);
#endif
    (*r.body)();
    r.cur->done = true;
    r.live--;
    r.warp_live[r.cur->linear / 32]--;
    r.epoch++;
    yield_to_scheduler(r, true);
    die("a finished fiber was resumed");
}

// Runs the block's threads as fibers until all have returned.
void run_block_fibers(BlockRun &r, unsigned n, bool reverse)
{
    std::vector<Fiber> &fs = t_fibers;
    if (fs.size() < n)
        fs.resize(n);
    for (unsigned i = 0; i < n; i++) {
        Fiber &f = fs[i];
        if (!f.stack)
            f.stack.reset(new char[STACK]);
        if (getcontext(&f.uc) != 0)
            die("getcontext failed");
        f.uc.uc_stack.ss_sp = f.stack.get();
        f.uc.uc_stack.ss_size = STACK;
        f.uc.uc_link = nullptr;
        makecontext(&f.uc, fiber_entry, 0);
        f.linear = i;
        f.done = false;
    }
    r.fibers = &fs;
    // Warp by warp (reversed in odd blocks): a warp's lanes run until none of them can go on
    // (all wait at a block barrier, or have returned) before the next warp runs. So one warp
    // runs ahead of the others by a whole barrier interval, which exposes both a read before
    // another warp's write and a write (reuse of shared memory) before another warp's read.
    const unsigned nw = (n + 31) / 32;
    while (r.live > 0) {
        unsigned long pass = r.epoch;
        for (unsigned wk = 0; wk < nw; wk++) {
            unsigned w = reverse ? nw - 1 - wk : wk, lo = w * 32, hi = lo + 32 < n ? lo + 32 : n;
            for (;;) {
                unsigned long before = r.epoch;
                for (unsigned k = lo; k < hi; k++) {
                    unsigned i = reverse ? hi - 1 - (k - lo) : k;
                    if (fs[i].done)
                        continue;
                    set_where(i);
                    switch_to_fiber(r, fs[i]);
                }
                if (r.epoch == before)
                    break;
            }
        }
        if (r.epoch == pass && r.live > 0)
            die("deadlock: the live threads of a block wait at barriers that cannot complete "
                "(__syncthreads or a warp shuffle in divergent code)");
    }
}

std::mutex g_mu;
std::map<const void *, bool> g_uses_barrier;   // kernel -> its first launch used a barrier

void barrier_wait(BlockRun &r, unsigned &arrived, unsigned &gen, const unsigned &live)
{
    unsigned my = gen;
    arrived++;
    r.epoch++;
    for (;;) {
        if (gen != my)
            return;
        if (arrived >= live) {
            arrived = 0;
            gen++;
            r.epoch++;
            return;
        }
        Fiber *self = r.cur;
        yield_to_scheduler(r, false);
        r.cur = self;
        set_where(self->linear);
    }
}

BlockRun &need_fibers(const char *what)
{
    BlockRun *r = t_run;
    if (!r)
        die("a barrier outside a kernel");
    r->used_barrier = true;
    if (!r->fiber_mode) {
        fprintf(stderr, "gpu-emu: %s in a kernel whose first block made no barrier call\n", what);
        abort();
    }
    return *r;
}

cudaError_t check_config(dim3 g, dim3 b)
{
    unsigned long long nt = (unsigned long long)b.x * b.y * b.z;
    if (nt == 0 || nt > 1024 || b.z > 64 || g.x == 0 || g.y == 0 || g.z == 0 || g.x > 2147483647u ||
        g.y > 65535 || g.z > 65535)
        return cudaErrorInvalidConfiguration;
    return cudaSuccess;
}

} // namespace

int lane_id()
{
    const dim3 &b = t_at.bdim;
    return (int)((t_at.tid.x + b.x * (t_at.tid.y + b.y * t_at.tid.z)) % 32);
}

void sync_block()
{
    BlockRun &r = need_fibers("__syncthreads");
    barrier_wait(r, r.block_arrived, r.block_gen, r.live);
}

void warp_exchange(const void *v, void *out, size_t bytes, int src_lane)
{
    BlockRun &r = need_fibers("a warp shuffle");
    if (bytes > 16)
        die("warp shuffle of more than 16 bytes");
    unsigned linear = r.cur->linear, w = linear / 32;
    unsigned char *slots = r.warp_slots.data() + (size_t)w * 32 * 16;
    memcpy(slots + (linear % 32) * 16, v, bytes);
    barrier_wait(r, r.warp_arrived[w], r.warp_gen[w], r.warp_live[w]);
    unsigned src = w * 32 + (unsigned)src_lane;
    // a lane outside the block or already returned: the caller's own value (undefined on a GPU)
    if (src_lane < 0 || src_lane >= 32 || src >= r.nthreads || (*r.fibers)[src].done)
        memcpy(out, v, bytes);
    else
        memcpy(out, slots + (src % 32) * 16, bytes);
    barrier_wait(r, r.warp_arrived[w], r.warp_gen[w], r.warp_live[w]);
}

cudaError_t run_grid(const void *kernel, dim3 grid, dim3 block, const std::function<void()> &body)
{
    cudaError_t e = check_config(grid, block);
    if (e != cudaSuccess) {
        t_last = e;
        return e;
    }
    if (t_run)
        die("a launch from inside a kernel");
    // unknown kernel: its first block runs as fibers; if it made no barrier call, the rest
    // of this launch and later launches run without fibers
    int known;   // -1: not yet, 0: no barriers, 1: barriers
    {
        std::lock_guard<std::mutex> lk(g_mu);
        auto it = g_uses_barrier.find(kernel);
        known = it == g_uses_barrier.end() ? -1 : it->second;
    }
    const unsigned n = block.x * block.y * block.z, nw = (n + 31) / 32;
    Where saved = t_at;
    t_at.bdim = block;
    t_at.gdim = grid;
    for (unsigned bz = 0; bz < grid.z; bz++)
        for (unsigned by = 0; by < grid.y; by++)
            for (unsigned bx = 0; bx < grid.x; bx++) {
                t_at.bid = uint3{ bx, by, bz };
                bool reverse = ((bx + by + bz) & 1) != 0;
                BlockRun r;
                r.body = &body;
                r.nthreads = r.live = n;
                r.fiber_mode = known != 0;
                r.warp_live.assign(nw, 32);
                if (n % 32)
                    r.warp_live[nw - 1] = n % 32;
                r.warp_arrived.assign(nw, 0);
                r.warp_gen.assign(nw, 0);
                r.warp_slots.assign((size_t)nw * 32 * 16, 0);
                t_run = &r;
                if (r.fiber_mode) {
                    run_block_fibers(r, n, reverse);
                } else {
                    for (unsigned k = 0; k < n; k++) {
                        set_where(reverse ? n - 1 - k : k);
                        body();
                    }
                }
                t_run = nullptr;
                if (known < 0) {
                    known = r.used_barrier ? 1 : 0;
                    std::lock_guard<std::mutex> lk(g_mu);
                    g_uses_barrier[kernel] = known != 0;
                }
            }
    t_at = saved;
    return cudaSuccess;
}

} // namespace gj_emu

// ---------------------------------------------------------------- runtime API

using gj_emu::t_last;

struct gj_emu_stream {
    unsigned flags;
};
struct gj_emu_event {
    double t;
};
struct gj_emu_array {
    size_t w, h, layers;
    float *data;
};

namespace {
struct Texture {
    gj_emu_array *arr;
    cudaTextureDesc desc;
};

cudaError_t fail(cudaError_t e)
{
    t_last = e;
    return e;
}

double now_s()
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}
} // namespace

extern "C" {

cudaError_t cudaGetDeviceCount(int *count)
{
    *count = 1;
    return cudaSuccess;
}

cudaError_t cudaSetDevice(int device)
{
    return device == 0 ? cudaSuccess : fail(cudaErrorInvalidDevice);
}

cudaError_t cudaGetLastError(void)
{
    cudaError_t e = t_last;
    t_last = cudaSuccess;
    return e;
}

cudaError_t cudaPeekAtLastError(void) { return t_last; }

const char *cudaGetErrorString(cudaError_t e)
{
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    }
    return "unknown error";
}

cudaError_t cudaDeviceSynchronize(void) { return cudaSuccess; }

cudaError_t cudaMalloc(void **p, size_t bytes)
{
    *p = malloc(bytes ? bytes : 1);
    return *p ? cudaSuccess : fail(cudaErrorMemoryAllocation);
}

cudaError_t cudaFree(void *p)
{
    free(p);
    return cudaSuccess;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind)
{
    (void)kind;
    if (bytes && (!dst || !src))
        return fail(cudaErrorInvalidValue);
    if (bytes)
        memmove(dst, src, bytes);
    return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind, cudaStream_t s)
{
    (void)s;
    return cudaMemcpy(dst, src, bytes, kind);
}

cudaError_t cudaMemset(void *p, int v, size_t bytes)
{
    if (bytes && !p)
        return fail(cudaErrorInvalidValue);
    if (bytes)
        memset(p, v, bytes);
    return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void *p, int v, size_t bytes, cudaStream_t s)
{
    (void)s;
    return cudaMemset(p, v, bytes);
}

cudaError_t cudaStreamCreate(cudaStream_t *s) { return cudaStreamCreateWithFlags(s, 0); }

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags)
{
    *s = new gj_emu_stream{ flags };
    return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t s)
{
    delete s;
    return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
    (void)s;
    return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t *e)
{
    *e = new gj_emu_event{ 0 };
    return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t e)
{
    delete e;
    return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s)
{
    (void)s;
    e->t = now_s();
    return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t e)
{
    (void)e;
    return cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b)
{
    *ms = (float)((b->t - a->t) * 1e3);
    return cudaSuccess;
}

} // extern "C"

cudaError_t cudaMalloc3DArray(cudaArray_t *a, const cudaChannelFormatDesc *fd, cudaExtent ext, unsigned flags)
{
    if (fd->f != cudaChannelFormatKindFloat || fd->x != 32 || ext.width == 0 || ext.height == 0)
        return fail(cudaErrorInvalidValue);
    // the layered limits of current GPUs (2D layered: 32768 x 32768 x 2048 layers)
    size_t layers = (flags & cudaArrayLayered) ? ext.depth : 1;
    if (ext.width > 32768 || ext.height > 32768 || layers > 2048 || layers == 0)
        return fail(cudaErrorInvalidValue);
    float *d = (float *)malloc(sizeof(float) * ext.width * ext.height * layers);
    if (!d)
        return fail(cudaErrorMemoryAllocation);
    *a = new gj_emu_array{ ext.width, ext.height, layers, d };
    return cudaSuccess;
}

cudaError_t cudaFreeArray(cudaArray_t a)
{
    if (a)
        free(a->data);
    delete a;
    return cudaSuccess;
}

cudaError_t cudaMemcpy3D(const cudaMemcpy3DParms *p)
{
    // what recon uses: a pitched linear source into a whole array
    gj_emu_array *a = p->dstArray;
    if (!a || !p->srcPtr.ptr || p->extent.width != a->w || p->extent.height != a->h || p->extent.depth != a->layers ||
        p->srcPtr.pitch < a->w * sizeof(float))
        return fail(cudaErrorInvalidValue);
    const char *src = (const char *)p->srcPtr.ptr;
    for (size_t l = 0; l < a->layers; l++)
        for (size_t y = 0; y < a->h; y++)
            memcpy(a->data + (l * a->h + y) * a->w, src + (l * p->srcPtr.ysize + y) * p->srcPtr.pitch,
                   a->w * sizeof(float));
    return cudaSuccess;
}

cudaError_t cudaMemcpy3DAsync(const cudaMemcpy3DParms *p, cudaStream_t s)
{
    (void)s;
    return cudaMemcpy3D(p);
}

cudaError_t cudaCreateTextureObject(cudaTextureObject_t *t, const cudaResourceDesc *rd, const cudaTextureDesc *td,
                                    const cudaResourceViewDesc *vd)
{
    (void)vd;
    if (rd->resType != cudaResourceTypeArray || !rd->res.array.array || td->normalizedCoords)
        return fail(cudaErrorInvalidValue);
    *t = (cudaTextureObject_t)(uintptr_t) new Texture{ rd->res.array.array, *td };
    return cudaSuccess;
}

cudaError_t cudaDestroyTextureObject(cudaTextureObject_t t)
{
    delete (Texture *)(uintptr_t)t;
    return cudaSuccess;
}

namespace gj_emu {

namespace {
// Texel (i, j) of the layer under the address mode (border: 0 outside).
float texel(const Texture &t, const float *layer, long i, long j)
{
    long w = (long)t.arr->w, h = (long)t.arr->h;
    if (i < 0 || i >= w || j < 0 || j >= h) {
        if (t.desc.addressMode[0] == cudaAddressModeBorder)
            return t.desc.borderColor[0];
        i = i < 0 ? 0 : i >= w ? w - 1 : i;   // clamp (the other modes are not used here)
        j = j < 0 ? 0 : j >= h ? h - 1 : j;
    }
    return layer[j * w + i];
}

// A filtering weight as the texture unit holds it: 8 fractional bits.
float weight8(float f)
{
    return rintf(f * 256.0f) / 256.0f;
}
} // namespace

float tex2d_layered(cudaTextureObject_t h, float x, float y, int layer)
{
    const Texture &t = *(const Texture *)(uintptr_t)h;
    long nl = (long)t.arr->layers;
    long l = layer < 0 ? 0 : layer >= nl ? nl - 1 : layer;
    const float *base = t.arr->data + (size_t)l * t.arr->w * t.arr->h;
    if (t.desc.filterMode == cudaFilterModePoint)
        return texel(t, base, (long)floorf(x), (long)floorf(y));
    float xb = x - 0.5f, yb = y - 0.5f, fi = floorf(xb), fj = floorf(yb);
    float a = weight8(xb - fi), b = weight8(yb - fj);
    long i = (long)fi, j = (long)fj;
    return (1 - a) * (1 - b) * texel(t, base, i, j) + a * (1 - b) * texel(t, base, i + 1, j) +
           (1 - a) * b * texel(t, base, i, j + 1) + a * b * texel(t, base, i + 1, j + 1);
}

} // namespace gj_emu

// ---------------------------------------------------------------- cuFFT by FFTW

namespace {
struct Plan {
    cufftType type = CUFFT_R2C;
    fftwf_plan p = nullptr;
    ~Plan()
    {
        if (p)
            fftwf_destroy_plan(p);
    }
};
std::mutex g_fft_mu;   // the FFTW planner is not thread-safe
std::map<int, std::unique_ptr<Plan>> g_plans;
int g_next_plan = 1;

Plan *plan_of(cufftHandle h)
{
    auto it = g_plans.find(h);
    return it == g_plans.end() ? nullptr : it->second.get();
}
} // namespace

extern "C" {

cufftResult cufftCreate(cufftHandle *plan)
{
    std::lock_guard<std::mutex> lk(g_fft_mu);
    *plan = g_next_plan++;
    g_plans[*plan].reset(new Plan);
    return CUFFT_SUCCESS;
}

cufftResult cufftDestroy(cufftHandle plan)
{
    std::lock_guard<std::mutex> lk(g_fft_mu);
    return g_plans.erase(plan) ? CUFFT_SUCCESS : CUFFT_INVALID_PLAN;
}

cufftResult cufftSetAutoAllocation(cufftHandle plan, int autoalloc)
{
    (void)autoalloc;
    std::lock_guard<std::mutex> lk(g_fft_mu);
    return plan_of(plan) ? CUFFT_SUCCESS : CUFFT_INVALID_PLAN;
}

cufftResult cufftMakePlanMany(cufftHandle plan, int rank, int *n, int *inembed, int istride, int idist,
                              int *onembed, int ostride, int odist, cufftType type, int batch, size_t *work)
{
    std::lock_guard<std::mutex> lk(g_fft_mu);
    Plan *p = plan_of(plan);
    if (!p)
        return CUFFT_INVALID_PLAN;
    if (rank != 1 || inembed || onembed || n[0] < 1 || batch < 1)
        return CUFFT_NOT_SUPPORTED;
    size_t nh = (size_t)n[0] / 2 + 1;
    // FFTW plans against arrays; FFTW_ESTIMATE does not touch them, and the execution uses
    // the caller's arrays (fftwf_execute_dft_*, unaligned allowed)
    size_t rlen = (size_t)(type == CUFFT_R2C ? idist : odist) * batch, clen = (size_t)(type == CUFFT_R2C ? odist : idist) * batch;
    float *r = fftwf_alloc_real(rlen);
    fftwf_complex *c = fftwf_alloc_complex(clen > nh ? clen : nh);
    if (!r || !c) {
        fftwf_free(r);
        fftwf_free(c);
        return CUFFT_ALLOC_FAILED;
    }
    unsigned flags = FFTW_ESTIMATE | FFTW_UNALIGNED;
    if (type == CUFFT_R2C)
        p->p = fftwf_plan_many_dft_r2c(1, n, batch, r, nullptr, istride, idist, c, nullptr, ostride, odist, flags);
    else
        p->p = fftwf_plan_many_dft_c2r(1, n, batch, c, nullptr, istride, idist, r, nullptr, ostride, odist,
                                       flags | FFTW_DESTROY_INPUT);
    fftwf_free(r);
    fftwf_free(c);
    p->type = type;
    if (work)
        *work = 0;
    return p->p ? CUFFT_SUCCESS : CUFFT_INVALID_VALUE;
}

cufftResult cufftSetStream(cufftHandle plan, cudaStream_t s)
{
    (void)s;
    std::lock_guard<std::mutex> lk(g_fft_mu);
    return plan_of(plan) ? CUFFT_SUCCESS : CUFFT_INVALID_PLAN;
}

cufftResult cufftSetWorkArea(cufftHandle plan, void *work)
{
    (void)work;
    std::lock_guard<std::mutex> lk(g_fft_mu);
    return plan_of(plan) ? CUFFT_SUCCESS : CUFFT_INVALID_PLAN;
}

cufftResult cufftExecR2C(cufftHandle plan, cufftReal *in, cufftComplex *out)
{
    Plan *p;
    {
        std::lock_guard<std::mutex> lk(g_fft_mu);
        p = plan_of(plan);
    }
    if (!p || !p->p || p->type != CUFFT_R2C)
        return CUFFT_INVALID_PLAN;
    fftwf_execute_dft_r2c(p->p, in, (fftwf_complex *)out);
    return CUFFT_SUCCESS;
}

cufftResult cufftExecC2R(cufftHandle plan, cufftComplex *in, cufftReal *out)
{
    Plan *p;
    {
        std::lock_guard<std::mutex> lk(g_fft_mu);
        p = plan_of(plan);
    }
    if (!p || !p->p || p->type != CUFFT_C2R)
        return CUFFT_INVALID_PLAN;
    fftwf_execute_dft_c2r(p->p, (fftwf_complex *)in, out);
    return CUFFT_SUCCESS;
}

} // extern "C"
