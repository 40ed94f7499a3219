/*
 * bench_recon.c — `gpujobd bench recon [options]`:
 *   1. FDK backprojection throughput (GUPS = N^3 * views / s / 1e9) on the RabbitCT
 *      geometry: 496 views of 1248x960 into a 256 mm cube at N = 256 (and 512 with
 *      --n512), projection matrices (RabbitCT convention), filtered analytic projections
 *      of the Kak-Slaney phantom; the update f += bilinear / w^2 is timed alone.
 *   2. Batch 2D FBP, 512^2, 180 views, 725 bins: images per second (and PSNR).
 *   3. Batch SART, 256^2, 180 views, 363 bins, relaxation 0.02, 2 x 180 sub-iterations.
 *   4. scikit-image iradon on the same 512^2 sinogram (compute/recon/bench_skimage.py,
 *      run with /usr/bin/python3): time ratio and PSNR of both against the truth.
 * CPU always; the GPU too where one is present. Options: --n512, --views N (FDK views,
 * default 496), --batch N (FBP images, default 24), --sart-batch N (default 4),
 * --threads N, --no-fdk, --no-skimage, --json FILE.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/fsutil.h"
#include "gj_config.h"
#include "recon/recon.h"
#include "recon/recon_gpu.h"

#define RC_SKIMAGE_SCRIPT "compute/recon/bench_skimage.py"

int gj_bench_recon_main(int argc, char **argv);

/* CPU seconds of the whole process (all threads): on a shared machine the wall time
 * alone overstates the cost, so both are reported. */
static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static json_t *geo_json(const char *text)
{
    json_error_t e;
    return json_loads(text, 0, &e);
}

static int make_geom(const char *text, struct rc_geom *g, struct rc_opts *o, int threads)
{
    json_t *j = geo_json(text);
    struct gj_error err = { 0 };
    int rc = !j || rc_geom_parse(j, g, &err) || rc_opts_parse(j, g, o, &err);
    if (rc)
        fprintf(stderr, "bench recon: internal geometry error: %s %s\n", err.field, err.message);
    json_decref(j);
    o->threads = threads;
    return rc ? -1 : 0;
}

/* The same backprojection on GPU 0, when there is one. */
static void fdk_gpu(const struct rc_geom *g, int N, int views, const float *proj, float *vol, json_t *out)
{
#if GJ_HAVE_CUDA
    if (rc_gpu_device_count() <= 0)
        return;
    struct gj_error err = { 0 };
    memset(vol, 0, rc_vol_count(g) * 4);
    double s = rc_gpu_backproject_matrices(0, g, proj, vol, &err);
    if (s > 0) {
        printf("FDK %d^3 (gpu): backprojection %.3f s = %.2f GUPS\n", N, s, (double)N * N * N * views / s / 1e9);
        json_array_append_new(json_object_get(out, "fdk"),
                              json_pack("{s:i, s:s, s:f, s:f}", "n", N, "device", "gpu", "backprojection_s", s,
                                        "gups", (double)N * N * N * views / s / 1e9));
    } else {
        printf("FDK gpu: %s\n", err.message);
    }
#else
    (void)g; (void)N; (void)views; (void)proj; (void)vol; (void)out;
#endif
}

static void bench_fdk(int N, int views, int threads, json_t *out)
{
    /* C-arm like circular short scan: 496 views over 200 degrees, sod 750, sdd 1200,
     * 1248 x 960 pixels of 0.32 mm (a 250 mm field of view at the isocentre) */
    char text[1024];
    snprintf(text, sizeof text,
             "{\"geometry\":{\"type\":\"cone3d\",\"angles_deg\":{\"start\":0,\"step\":%.9g,\"count\":%d},"
             "\"detector\":{\"cols\":1248,\"rows\":960,\"spacing_u\":0.32,\"spacing_v\":0.32},"
             "\"source_origin_mm\":750,\"source_detector_mm\":1200},"
             "\"volume\":{\"nx\":%d,\"ny\":%d,\"nz\":%d,\"voxel_mm\":%.9g},\"short_scan\":true}",
             200.0 / 495 * 495 / (views > 1 ? views - 1 : 1), views, N, N, N, 256.0 / N);
    struct rc_geom g;
    struct rc_opts o;
    if (make_geom(text, &g, &o, threads))
        return;
    /* RabbitCT supplies matrices: use them for the backprojection */
    g.mat = malloc(sizeof(double) * 12 * (size_t)views);
    rc_circular_matrices(&g, g.mat);
    for (int v = 0; v < views; v++) {
        double *A = g.mat + 12 * v, n = sqrt(A[2] * A[2] + A[5] * A[5] + A[8] * A[8]);
        for (int k = 0; k < 12; k++)
            A[k] /= n;
    }
    uint64_t np = rc_proj_count(&g);
    float *proj = malloc(np * 4), *vol = calloc(rc_vol_count(&g), 4);
    if (!proj || !vol) {
        fprintf(stderr, "bench recon: out of memory for FDK %d^3\n", N);
        free(proj);
        free(vol);
        rc_geom_free(&g);
        return;
    }
    struct rc_phantom ph;
    rc_phantom_make(RC_PH_KAK3D, 100.0, 0.02, &ph);
    double t0 = gj_now();
    struct rc_geom gc = g;
    gc.mat = NULL;   /* analytic projections of the circular geometry the matrices describe */
    rc_phantom_project(&ph, &gc, proj, threads, NULL);
    double t_proj = gj_now() - t0;
    struct gj_error err = { 0 };
    t0 = gj_now();
    rc_filter_projections(&g, RC_RAMLAK, proj, 1, threads, NULL, &err);
    double t_filt = gj_now() - t0;
    t0 = gj_now();
    double c0 = cpu_now();
    rc_backproject(&g, proj, vol, 0, N, NULL, 1, 0, views, threads, NULL);
    double t_bp = gj_now() - t0, c_bp = cpu_now() - c0;
    double gups = (double)N * N * N * views / t_bp / 1e9;
    printf("FDK %d^3 from %d views of 1248x960 (cpu, %d threads): backprojection %.2f s wall (%.2f s CPU) = %.3f GUPS "
           "(%.3f GUPS per CPU-second); filtering %.2f s; (analytic projections %.1f s, not timed)\n", N, views, threads,
           t_bp, c_bp, gups, (double)N * N * N * views / c_bp / 1e9, t_filt, t_proj);
    json_t *r = json_pack("{s:i, s:i, s:s, s:i, s:f, s:f, s:f}", "n", N, "views", views, "device", "cpu", "threads",
                          threads, "backprojection_s", t_bp, "gups", gups, "filter_s", t_filt);
    /* sanity: the centre of the reconstruction is the phantom's 0.02 * (2 - 0.98) */
    float c = vol[(size_t)N / 2 * N * N + (size_t)N / 2 * N + N / 2];
    json_object_set_new(r, "centre_value", json_real(c));
    json_array_append_new(json_object_get(out, "fdk"), r);
    fdk_gpu(&g, N, views, proj, vol, out);
    free(proj);
    free(vol);
    rc_geom_free(&g);
}

static int write_raw(const char *dir, const char *name, const float *d, size_t n)
{
    char p[GJ_PATH_MAX];
    return gj_path_join(p, sizeof p, dir, name) || gj_write_file(p, d, n * 4);
}

/* The batch on GPU 0, when there is one. */
static void batch_gpu(const struct rc_geom *g, const struct rc_opts *o, const struct rc_phantom *ph, const char *name,
                      int batch, int threads, float *proj, float *vol, const float *truth, json_t *out)
{
#if GJ_HAVE_CUDA
    if (rc_gpu_device_count() <= 0)
        return;
    struct gj_error err = { 0 };
    /* one slice untimed first: the process's first GPU call creates the context and loads the
     * module (up to seconds), no part of a batch's time; then fresh projections (the CPU run
     * and this one may filter them in place) */
    if (rc_gpu_reconstruct(0, g, o, proj, vol, 0, g->nz > 1 ? 1 : g->nz, NULL, &err) != 0) {
        printf("batch %s gpu: %s\n", name, err.message);
        return;
    }
    rc_phantom_project(ph, g, proj, threads, NULL);
    double t0 = gj_now();
    if (rc_gpu_reconstruct(0, g, o, proj, vol, 0, g->nz, NULL, &err) == 0) {
        double t = gj_now() - t0;
        printf("batch %s (gpu): %.3f s = %.2f images/s; PSNR %.2f dB\n", name, t, batch / t,
               rc_psnr(vol, truth, (size_t)g->nx * g->ny, 1.0));
        json_array_append_new(json_object_get(out, name),
                              json_pack("{s:s, s:f, s:f}", "device", "gpu", "seconds", t, "images_per_s", batch / t));
    } else {
        printf("batch %s gpu: %s\n", name, err.message);
    }
#else
    (void)g; (void)o; (void)ph; (void)name; (void)batch; (void)threads; (void)proj; (void)vol; (void)truth;
    (void)out;
#endif
}

/* The source tree that holds bench_skimage.py: $GJ_SOURCE_ROOT, else the nearest folder above
 * the executable that has it (a build dir, or a folder of binaries built elsewhere and carried
 * into the tree), else the working directory. No path of the build machine is compiled in. */
static void source_root(char *root, size_t len)
{
    const char *env = getenv("GJ_SOURCE_ROOT");
    if (env && *env) {
        snprintf(root, len, "%s", env);
        return;
    }
    char exe[4096], probe[4200];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = '\0';
    for (char *slash = strrchr(exe, '/'); slash && slash > exe; slash = strrchr(exe, '/')) {
        *slash = '\0';
        snprintf(probe, sizeof probe, "%s/" RC_SKIMAGE_SCRIPT, exe);
        if (access(probe, R_OK) == 0) {
            snprintf(root, len, "%s", exe);
            return;
        }
    }
    snprintf(root, len, ".");
}

/* The first image against scikit-image's iradon on the same sinogram (bench_skimage.py). */
static void skimage_compare(const char *skdir, int N, int bins, int batch, double t, const float *sino,
                            const float *truth, const float *vol, uint64_t np, json_t *out)
{
    uint64_t slice = (uint64_t)N * N;
    write_raw(skdir, "sino.raw", sino, np / batch);
    write_raw(skdir, "truth.raw", truth, slice);
    write_raw(skdir, "ours.raw", vol, slice);
    char cmd[8192], res[4096], root[4096];
    source_root(root, sizeof root);
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s/" RC_SKIMAGE_SCRIPT "' %s %d %d 180 %.6f", root, skdir, N, bins,
             t / batch);
    FILE *p = popen(cmd, "r");
    size_t n = p ? fread(res, 1, sizeof res - 1, p) : 0;
    res[n] = '\0';
    int rc = p ? pclose(p) : -1;
    if (rc == 0 && n) {
        printf("%s", res);
        json_error_t e;
        json_t *sk = json_loads(strrchr(res, '{') ? strrchr(res, '{') : res, 0, &e);
        if (sk)
            json_object_set_new(out, "skimage", sk);
    } else {
        printf("scikit-image comparison skipped (/usr/bin/python3 with skimage not available)\n");
    }
}

static void bench_batch(int algo, int batch, int threads, const char *skdir, json_t *out)
{
    char text[1024];
    int N = algo == RC_FBP ? 512 : 256, bins = algo == RC_FBP ? 725 : 363;
    /* pixel centres at integers from -N/2 (offset -0.5 voxel) so that scikit-image's
     * grid (centre at index N//2) and ours coincide */
    snprintf(text, sizeof text,
             "{\"geometry\":{\"type\":\"parallel2d\",\"angles_deg\":{\"start\":0,\"step\":1,\"count\":180},"
             "\"detector\":{\"cols\":%d,\"spacing_u\":1}},\"volume\":{\"nx\":%d,\"ny\":%d,\"nz\":%d,\"voxel_mm\":1,"
             "\"offset_mm\":[-0.5,-0.5,0]},\"batch\":%d,\"algorithm\":\"%s\",\"iterations\":2,\"subsets\":180,"
             "\"relaxation\":0.02}",
             bins, N, N, batch, batch, algo == RC_FBP ? "fbp" : "sart");
    struct rc_geom g;
    struct rc_opts o;
    if (make_geom(text, &g, &o, threads))
        return;
    uint64_t np = rc_proj_count(&g), nv = rc_vol_count(&g), slice = (uint64_t)N * N;
    float *proj = malloc(np * 4), *vol = malloc(nv * 4), *truth = malloc(nv * 4), *sino = malloc(np / batch * 4);
    if (!proj || !vol || !truth || !sino) {
        fprintf(stderr, "bench recon: out of memory for the %d-image batch\n", batch);
        free(proj);
        free(vol);
        free(truth);
        free(sino);
        rc_geom_free(&g);
        return;
    }
    struct rc_phantom ph;
    rc_phantom_make(RC_PH_SHEPP2D, N / 2.0, 1.0, &ph);
    rc_phantom_project(&ph, &g, proj, threads, NULL);
    rc_phantom_truth(&ph, &g, 4, truth, threads, NULL);
    memcpy(sino, proj, np / batch * 4);
    struct gj_error err = { 0 };
    double t0 = gj_now(), c0 = cpu_now();
    rc_reconstruct(&g, &o, proj, vol, 0, g.nz, NULL, &err);
    double t = gj_now() - t0, ct = cpu_now() - c0;
    double psnr = rc_psnr(vol, truth, slice, 1.0);
    const char *name = algo == RC_FBP ? "fbp" : "sart";
    printf("batch %s %dx%d, 180 views, %d bins, %d images (cpu, %d threads): %.3f s = %.2f images/s, "
           "%.4f s per image (%.3f CPU-s per image); PSNR %.2f dB%s\n", name, N, N, bins, batch, threads, t, batch / t,
           t / batch, ct / batch, psnr,
           algo == RC_SART ? " (relaxation 0.02, 2 x 180 sub-iterations)" : "");
    json_array_append_new(json_object_get(out, name),
                          json_pack("{s:i, s:i, s:i, s:s, s:i, s:f, s:f, s:f}", "n", N, "bins", bins, "images", batch,
                                    "device", "cpu", "threads", threads, "seconds", t, "images_per_s", batch / t,
                                    "psnr_db", psnr));
    json_object_set_new(json_array_get(json_object_get(out, name), json_array_size(json_object_get(out, name)) - 1),
                        "cpu_s_per_image", json_real(ct / batch));
    batch_gpu(&g, &o, &ph, name, batch, threads, proj, vol, truth, out);
    if (skdir && algo == RC_FBP)
        skimage_compare(skdir, N, bins, batch, t, sino, truth, vol, np, out);
    free(proj);
    free(vol);
    free(truth);
    free(sino);
    rc_geom_free(&g);
}

int gj_bench_recon_main(int argc, char **argv)
{
    int n512 = 0, views = 496, batch = 24, sbatch = 4, fdk = 1, sk = 1;
    int threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
    const char *json_path = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--n512") == 0)
            n512 = 1;
        else if (strcmp(argv[i], "--no-fdk") == 0)
            fdk = 0;
        else if (strcmp(argv[i], "--no-skimage") == 0)
            sk = 0;
        else if (i + 1 < argc && strcmp(argv[i], "--views") == 0)
            views = atoi(argv[++i]);
        else if (i + 1 < argc && strcmp(argv[i], "--batch") == 0)
            batch = atoi(argv[++i]);
        else if (i + 1 < argc && strcmp(argv[i], "--sart-batch") == 0)
            sbatch = atoi(argv[++i]);
        else if (i + 1 < argc && strcmp(argv[i], "--threads") == 0)
            threads = atoi(argv[++i]);
        else if (i + 1 < argc && strcmp(argv[i], "--json") == 0)
            json_path = argv[++i];
        else {
            fprintf(stderr, "usage: gpujobd bench recon [--n512] [--views N] [--batch N] [--sart-batch N] "
                            "[--threads N] [--no-fdk] [--no-skimage] [--json FILE]\n");
            return 2;
        }
    }
    if (views < 2 || views > 5000 || batch < 1 || batch > 10000 || sbatch < 1 || sbatch > 10000 || threads < 1) {
        fprintf(stderr, "bench recon: bad option value\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);   /* one line per result, also into a file or pipe */
    json_t *out = json_pack("{s:[], s:[], s:[], s:i}", "fdk", "fbp", "sart", "threads", threads);
    printf("gpujobd bench recon: %d CPU threads, GPU %s\n", threads, rc_gpu_available() ? "present" : "absent");
    char skdir[GJ_PATH_MAX];
    int have_dir = sk && gj_make_temp_dir(skdir, sizeof skdir, "gpujobd-bench-recon") == 0;
    bench_batch(RC_FBP, batch, threads, have_dir ? skdir : NULL, out);
    bench_batch(RC_SART, sbatch, threads, NULL, out);
    if (fdk) {
        bench_fdk(256, views, threads, out);
        if (n512)
            bench_fdk(512, views, threads, out);
    }
    if (have_dir)
        gj_rm_rf(skdir);
    if (json_path) {
        char *text = json_dumps(out, JSON_INDENT(2));
        if (text)
            gj_write_file(json_path, text, strlen(text));
        free(text);
    }
    json_decref(out);
    return 0;
}
