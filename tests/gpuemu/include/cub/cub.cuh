/*
 * cub/cub.cuh (gpu-emu) — CUB's DeviceSegmentedRadixSort::SortPairs by a stable sort of each
 * segment on the keys' radix order (CUB's bit twiddling: -0.0 before +0.0, NaNs by sign at the
 * ends), with the same calling convention (a size query with temp == NULL, then the sort).
 */
#ifndef GJ_EMU_CUB_CUH
#define GJ_EMU_CUB_CUH

#include <stdint.h>
#include <string.h>

#include <algorithm>
#include <vector>

#include "../cuda_runtime.h"

namespace cub {

namespace detail {
inline uint64_t radix_key(double d)
{
    uint64_t b;
    memcpy(&b, &d, sizeof b);
    return (b >> 63) ? ~b : b | (1ull << 63);
}
} // namespace detail

struct DeviceSegmentedRadixSort {
    template <class V, class OffIt>
    static cudaError_t SortPairs(void *temp, size_t &temp_bytes, const double *keys_in, double *keys_out,
                                 const V *vals_in, V *vals_out, int num_items, int num_segments, OffIt begin,
                                 OffIt end, int begin_bit = 0, int end_bit = 64, cudaStream_t s = 0)
    {
        (void)s;
        if (!temp) {
            temp_bytes = 1;
            return cudaSuccess;
        }
        if (begin_bit != 0 || end_bit != 64 || num_items < 0)
            return cudaErrorInvalidValue;
        std::vector<int> idx;
        for (int sg = 0; sg < num_segments; sg++) {
            int b = begin[sg], e = end[sg];
            if (b < 0 || e > num_items || b > e)
                return cudaErrorInvalidValue;
            idx.resize((size_t)(e - b));
            for (int i = b; i < e; i++)
                idx[(size_t)(i - b)] = i;
            std::stable_sort(idx.begin(), idx.end(), [&](int x, int y) {
                return detail::radix_key(keys_in[x]) < detail::radix_key(keys_in[y]);
            });
            for (int i = b; i < e; i++) {
                keys_out[i] = keys_in[idx[(size_t)(i - b)]];
                vals_out[i] = vals_in[idx[(size_t)(i - b)]];
            }
        }
        return cudaSuccess;
    }
};

} // namespace cub

#endif
