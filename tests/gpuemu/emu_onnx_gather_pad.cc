// kernels/infer/onnx_gather_pad.cu compiled as host C++ for the gpu-emu suite (see include/cuda_runtime.h).
// nvcc includes cuda_runtime.h before every .cu file; so does this.
#include <cuda_runtime.h>

#include "infer/onnx_gather_pad.cu"
