/* onnx_bench — the `gpujobd bench onnx` program as a standalone binary (for
 * bench_vs_onnxruntime.sh when gpujobd is not at hand). */
#include "infer/onnx/onnx_model.h"

int main(int argc, char **argv)
{
    return gj_bench_onnx_main(argc, argv);
}
