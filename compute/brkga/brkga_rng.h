/*
 * brkga_rng.h — Philox4x32-10 (Salmon et al., SC'11), the counter-based generator
 * every random draw of the BRKGA engine comes from. Shared by the C engine and
 * the CUDA kernels, so both draw bit-identical numbers.
 *
 * Key:     the 64-bit master seed (low, high word).
 * Counter: (gene, individual, generation, population | purpose << 24).
 * A draw depends only on these, never on the thread that makes it, so a run is
 * the same for any thread count and on the GPU.
 */
#ifndef BRKGA_RNG_H
#define BRKGA_RNG_H

#include <stdint.h>

#ifdef __CUDACC__
#define BRKGA_HD __host__ __device__ __forceinline__
#else
#define BRKGA_HD static inline
#endif

struct brkga_u4 { uint32_t w[4]; };

BRKGA_HD void brkga_mulhilo(uint32_t a, uint32_t b, uint32_t *hi, uint32_t *lo)
{
    uint64_t p = (uint64_t)a * (uint64_t)b;
    *hi = (uint32_t)(p >> 32);
    *lo = (uint32_t)p;
}

BRKGA_HD struct brkga_u4 brkga_philox(uint64_t seed, uint32_t c0, uint32_t c1, uint32_t c2,
                                      uint32_t c3)
{
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
    uint32_t x0 = c0, x1 = c1, x2 = c2, x3 = c3;
    for (int r = 0; r < 10; r++) {
        uint32_t hi0, lo0, hi1, lo1;
        brkga_mulhilo(0xD2511F53u, x0, &hi0, &lo0);
        brkga_mulhilo(0xCD9E8D57u, x2, &hi1, &lo1);
        uint32_t y0 = hi1 ^ x1 ^ k0, y1 = lo1, y2 = hi0 ^ x3 ^ k1, y3 = lo0;
        x0 = y0; x1 = y1; x2 = y2; x3 = y3;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    struct brkga_u4 out;
    out.w[0] = x0; out.w[1] = x1; out.w[2] = x2; out.w[3] = x3;
    return out;
}

/* A key in [0,1): the top 24 bits, exact in a float. */
BRKGA_HD float brkga_key(uint32_t u)
{
    return (float)(u >> 8) * (1.0f / 16777216.0f);
}

/* Uniform integer in [0, n) by multiply-shift (exact, no float). */
BRKGA_HD uint32_t brkga_below(uint32_t u, uint32_t n)
{
    return (uint32_t)(((uint64_t)u * (uint64_t)n) >> 32);
}

/* Purposes (the top byte of counter word 3). */
#define BRKGA_RNG_GENE 0u     /* per gene: w0 key (initial / mutant), w1 crossover coin, w2 reset key */
#define BRKGA_RNG_PARENTS 1u  /* per individual: w0 elite parent, w1 non-elite parent */
#define BRKGA_PARENT_GENE 0xFFFFFFFFu

#endif
