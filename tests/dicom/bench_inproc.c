/*
 * bench_inproc.c — decode rate of the DICOM reader inside one process (no
 * exec, no dynamic linking per file): open + decode frame 1 to float32, for
 * each FILE given, ROUNDS times. Used by tests/dicom/bench_decode.sh.
 *
 * usage: dicom_bench_inproc ROUNDS FILE...   prints "files/s MB/s files/CPU-s
 * MB/CPU-s" (wall clock, then process CPU time) where MB is decoded pixel data
 * (rows*cols*samples*bits_allocated/8), 1 MB = 10^6 bytes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "infer/dicom.h"

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s ROUNDS FILE...\n", argv[0]);
        return 2;
    }
    int rounds = atoi(argv[1]);
    struct timespec t0, t1, c0, c1;
    double bytes = 0;
    long files = 0;
    struct gj_error err = { 0 };
    clock_gettime(CLOCK_MONOTONIC, &t0);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
    for (int r = 0; r < rounds; r++) {
        for (int i = 2; i < argc; i++) {
            gj_dicom *d;
            struct gj_dicom_image img;
            if (gj_dicom_open_file(argv[i], &d, &err) < 0 ||
                gj_dicom_image_info(d, &img, &err) < 0) {
                fprintf(stderr, "%s: %s\n", argv[i], err.message);
                return 1;
            }
            uint64_t n = gj_dicom_frame_floats(&img);
            float *v = malloc(n * sizeof *v);
            if (!v || gj_dicom_decode_frame(d, 0, v, n, &err) < 0) {
                fprintf(stderr, "%s: %s\n", argv[i], err.message);
                return 1;
            }
            bytes += (double)n * (img.bits_allocated / 8);
            files++;
            free(v);
            gj_dicom_free(d);
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    double c = (double)(c1.tv_sec - c0.tv_sec) + (double)(c1.tv_nsec - c0.tv_nsec) * 1e-9;
    printf("%.1f %.1f %.1f %.1f\n", files / s, bytes / s / 1e6, files / c, bytes / c / 1e6);
    return 0;
}
