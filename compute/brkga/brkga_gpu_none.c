/* brkga_gpu_none.c — a build without CUDA has no GPU backend: it says so to the caller. */
#include <stdio.h>

#include "brkga/brkga_gpu.h"

int brkga_gpu_device_count(void)
{
    return 0;
}

int brkga_gpu_backend(const struct brkga_params *prm, const struct brkga_decoder *dec,
                      struct brkga_backend *be)
{
    (void)prm;
    (void)dec;
    gj_error_set(&be->err, "", "this gpujobd was built without CUDA: no GPU path for brkga");
    return -1;
}
