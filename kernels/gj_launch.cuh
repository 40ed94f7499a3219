/*
 * gj_launch.cuh — the one way our kernels are launched: GJ_LAUNCH(kernel, grid, block[, shmem,
 * stream])(args...) is kernel<<<grid, block, shmem, stream>>>(args...) under nvcc; the gpu-emu
 * suite's header (tests/gpuemu/include/cuda_runtime.h) defines it first to run the grid on the
 * CPU, so the kernel sources are the same in both builds.
 */
#ifndef GJ_LAUNCH_CUH
#define GJ_LAUNCH_CUH

#ifndef GJ_LAUNCH
#define GJ_LAUNCH(kernel, ...) kernel<<<__VA_ARGS__>>>
#endif

#endif
