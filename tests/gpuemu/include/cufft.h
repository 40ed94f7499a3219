/*
 * cufft.h (gpu-emu) — the cuFFT calls of kernels/recon, by FFTW (single precision): 1-D batched
 * R2C and C2R plans, unnormalised like cuFFT. Work areas are accepted and not used.
 */
#ifndef GJ_EMU_CUFFT_H
#define GJ_EMU_CUFFT_H

#include <stddef.h>

#include "cuda_runtime_api.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef int cufftHandle;
typedef float cufftReal;
typedef struct {
    float x, y;
} cufftComplex;

typedef enum cufftResult_t {
    CUFFT_SUCCESS = 0,
    CUFFT_INVALID_PLAN = 1,
    CUFFT_ALLOC_FAILED = 2,
    CUFFT_INVALID_VALUE = 4,
    CUFFT_EXEC_FAILED = 6,
    CUFFT_NOT_SUPPORTED = 16
} cufftResult;

typedef enum cufftType_t { CUFFT_R2C = 0x2a, CUFFT_C2R = 0x2c } cufftType;

cufftResult cufftCreate(cufftHandle *plan);
cufftResult cufftDestroy(cufftHandle plan);
cufftResult cufftSetAutoAllocation(cufftHandle plan, int autoalloc);
cufftResult cufftMakePlanMany(cufftHandle plan, int rank, int *n, int *inembed, int istride, int idist,
                              int *onembed, int ostride, int odist, cufftType type, int batch, size_t *work);
cufftResult cufftSetStream(cufftHandle plan, cudaStream_t s);
cufftResult cufftSetWorkArea(cufftHandle plan, void *work);
cufftResult cufftExecR2C(cufftHandle plan, cufftReal *in, cufftComplex *out);
cufftResult cufftExecC2R(cufftHandle plan, cufftComplex *in, cufftReal *out);

#ifdef __cplusplus
}
#endif

#endif
