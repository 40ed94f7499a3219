/* gpu_glue.c — whether the CUDA path can be used here (0 in a CPU-only build). */
#include "recon/recon.h"
#include "recon/recon_gpu.h"

int rc_gpu_available(void)
{
#if GJ_HAVE_CUDA
    return rc_gpu_device_count() > 0;
#else
    return 0;
#endif
}
