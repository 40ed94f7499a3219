/*
 * onnx_cpu_dnnl.c — float32 2-D convolutions through oneDNN (the library PyTorch's CPU path
 * uses), where the build has it: its JIT kernels are generated for the CPU found at run time
 * (AVX-512, AVX2, ...) and work on channel-blocked layouts (nChw16c on AVX-512).
 *
 * Per Conv node, at session creation (the backend's scratch_bytes hook): a primitive for the
 * session's shapes with the layouts oneDNN prefers, the weights reordered once into its
 * layout, the fused ReLU as a post-op, and the scratch it needs (the blocked copies of input
 * and output, oneDNN's own scratchpad) added to the session's one scratch buffer. A run
 * reorders the input from NCHW into the blocked layout, convolves, and reorders the output
 * back into NCHW (reorders are skipped where oneDNN takes NCHW itself, e.g. 3-channel input,
 * and where the input or output is kept NHWC, the layout oneDNN chooses here:
 * onnx_plan_layout.c).
 *
 * Threads: each convolution is split by blocks of output channels (multiples of 16) into
 * one single-threaded primitive per pool thread, run by the session's own pool. oneDNN's
 * OpenMP team is never used (every call runs with an OpenMP thread count of 1): its workers
 * spin after each parallel region, and on a busy machine a spinning worker and a
 * descheduled one made a run up to 100x slower. So exactly `threads` threads compute, and
 * they sleep between kernels.
 *
 * Both oneDNN APIs are handled: 2.x (Debian 12) and 3.x (Ubuntu 24.04), which differ in how
 * memory and convolution descriptors are made.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "infer/onnx/onnx_cpu.h"
#include "infer/onnx/onnx_model.h"

#if ONNX_WITH_DNNL
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>

/* ---- the two APIs ------------------------------------------------------------------------- */

#if DNNL_VERSION_MAJOR >= 3
typedef dnnl_memory_desc_t md_t;                /* a handle this file owns */
typedef const_dnnl_memory_desc_t cmd_t;         /* one a primitive descriptor owns */
#define MDP(x) (x)
static int md_tag(md_t *md, int nd, const dnnl_dims_t d, dnnl_format_tag_t tag)
{
    *md = NULL;
    return dnnl_memory_desc_create_with_tag(md, nd, d, dnnl_f32, tag) != dnnl_success;
}
static int md_strides(md_t *md, int nd, const dnnl_dims_t d, const dnnl_dims_t st)
{
    *md = NULL;
    return dnnl_memory_desc_create_with_strides(md, nd, d, dnnl_f32, st) != dnnl_success;
}
static int md_copy(md_t *md, cmd_t from)
{
    *md = NULL;
    return dnnl_memory_desc_clone(md, from) != dnnl_success;
}
static int md_sub(md_t *md, cmd_t parent, const dnnl_dims_t d, const dnnl_dims_t off)
{
    *md = NULL;
    return dnnl_memory_desc_create_submemory(md, parent, d, off) != dnnl_success;
}
static void md_free(md_t md)
{
    if (md)
        dnnl_memory_desc_destroy(md);
}
static int conv_pd(dnnl_primitive_desc_t *pd, dnnl_engine_t eng, md_t src, md_t wei, md_t bias, md_t dst,
                   const dnnl_dims_t st, const dnnl_dims_t dil, const dnnl_dims_t pl, const dnnl_dims_t pr,
                   dnnl_primitive_attr_t attr)
{
    return dnnl_convolution_forward_primitive_desc_create(pd, eng, dnnl_forward_inference, dnnl_convolution_direct,
                                                          src, wei, bias, dst, st, dil, pl, pr, attr) != dnnl_success;
}
static int append_relu(dnnl_post_ops_t po)
{
    return dnnl_post_ops_append_eltwise(po, dnnl_eltwise_relu, 0.0f, 0.0f) != dnnl_success;
}
#else
typedef dnnl_memory_desc_t md_t;                /* a value */
typedef const dnnl_memory_desc_t *cmd_t;
#define MDP(x) (&(x))
static int md_tag(md_t *md, int nd, const dnnl_dims_t d, dnnl_format_tag_t tag)
{
    return dnnl_memory_desc_init_by_tag(md, nd, d, dnnl_f32, tag) != dnnl_success;
}
static int md_strides(md_t *md, int nd, const dnnl_dims_t d, const dnnl_dims_t st)
{
    return dnnl_memory_desc_init_by_strides(md, nd, d, dnnl_f32, st) != dnnl_success;
}
static int md_copy(md_t *md, cmd_t from)
{
    *md = *from;
    return 0;
}
static int md_sub(md_t *md, cmd_t parent, const dnnl_dims_t d, const dnnl_dims_t off)
{
    return dnnl_memory_desc_init_submemory(md, parent, d, off) != dnnl_success;
}
static void md_free(md_t md)
{
    (void)md;
}
static int conv_pd(dnnl_primitive_desc_t *pd, dnnl_engine_t eng, md_t src, md_t wei, md_t bias, md_t dst,
                   const dnnl_dims_t st, const dnnl_dims_t dil, const dnnl_dims_t pl, const dnnl_dims_t pr,
                   dnnl_primitive_attr_t attr)
{
    dnnl_convolution_desc_t cd;
    if (dnnl_dilated_convolution_forward_desc_init(&cd, dnnl_forward_inference, dnnl_convolution_direct, &src, &wei,
                                                   bias.ndims ? &bias : NULL, &dst, st, dil, pl, pr) != dnnl_success)
        return -1;
    return dnnl_primitive_desc_create(pd, &cd, attr, eng, NULL) != dnnl_success;
}
static int append_relu(dnnl_post_ops_t po)
{
    return dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_relu, 0.0f, 0.0f) != dnnl_success;
}
#endif

/* ---- plans ---------------------------------------------------------------------------------- */

#define MAX_SLICES 64

/* One thread's part of a convolution: images [n0, n1) and output channels [o0, o1), written
 * blocked into its scratch (dst), then reordered into its part of the NCHW output
 * (dst_user). A slice of whole images (batch >= threads) reorders its own images' input
 * (in_reorder, from in_from into in_to); slices of channels share the conv's input parts. */
struct dnnl_slice {
    int64_t n0, n1, o0, o1;
    dnnl_primitive_t conv, dst_reorder;   /* dst_reorder: NULL where the output is NCHW */
    dnnl_primitive_t in_reorder;          /* NULL: none, or the slice's input is NCHW */
    dnnl_memory_t wei, bias, dst, dst_user, pad, in_from, in_to;
    int wei_shared;                       /* wei is slice 0's (slices of images share it) */
    size_t dst_off, pad_off, in_off;      /* in the session's scratch */
};

/* One part of the input's reorder into the blocked layout: channels [c0, c1) (multiples of
 * 16), from the NCHW input to the blocked copy in scratch (both submemories). */
struct dnnl_in_part {
    dnnl_primitive_t reorder;
    dnnl_memory_t from, to;
};

/* One Conv node: the input reordered into the blocked layout every slice reads (by parts,
 * one per thread; none where the primitives take NCHW), and the slices. Memories without a
 * buffer of their own get theirs at each run. */
struct dnnl_conv {
    const struct onnx_node *node;
    int n_in;
    struct dnnl_in_part in[MAX_SLICES];
    dnnl_memory_t src_user, src;          /* src: the blocked copy (NULL: src_user is read) */
    size_t src_off;
    int n, by_images;                     /* by_images: slices of whole images */
    struct dnnl_slice s[MAX_SLICES];
};

struct onnx_dnnl {
    dnnl_engine_t eng;
    int threads;
    dnnl_stream_t streams[MAX_SLICES];    /* part or slice k runs on stream k (never shared) */
    struct dnnl_conv **convs;             /* in preparation order, which is the run order */
    size_t n_convs, cap_convs, cursor;    /* cursor: where the next lookup starts */
};

static void slice_free(struct dnnl_slice *sl)
{
    dnnl_primitive_t prims[] = { sl->conv, sl->dst_reorder, sl->in_reorder };
    dnnl_memory_t mems[] = { sl->wei_shared ? NULL : sl->wei, sl->bias, sl->dst, sl->dst_user, sl->pad, sl->in_from,
                             sl->in_to };
    for (size_t i = 0; i < sizeof prims / sizeof *prims; i++)
        if (prims[i])
            dnnl_primitive_destroy(prims[i]);
    for (size_t i = 0; i < sizeof mems / sizeof *mems; i++)
        if (mems[i])
            dnnl_memory_destroy(mems[i]);
}

static void conv_free(struct dnnl_conv *p)
{
    for (int k = 0; k < MAX_SLICES; k++) {
        slice_free(&p->s[k]);
        if (p->in[k].reorder)
            dnnl_primitive_destroy(p->in[k].reorder);
        if (p->in[k].from)
            dnnl_memory_destroy(p->in[k].from);
        if (p->in[k].to)
            dnnl_memory_destroy(p->in[k].to);
    }
    if (p->src_user)
        dnnl_memory_destroy(p->src_user);
    if (p->src)
        dnnl_memory_destroy(p->src);
    free(p);
}

void onnx_dnnl_free(struct onnx_dnnl *d)
{
    if (!d)
        return;
    for (size_t i = 0; i < d->n_convs; i++)
        conv_free(d->convs[i]);
    free(d->convs);
    for (int k = 0; k < MAX_SLICES; k++)
        if (d->streams[k])
            dnnl_stream_destroy(d->streams[k]);
    if (d->eng)
        dnnl_engine_destroy(d->eng);
    free(d);
}

static int dnnl_turned_off(void)
{
    const char *env = getenv("GJ_ONNX_DNNL");
    return env && !strcmp(env, "0");
}

static char version_text[64];

static void dnnl_version_text(void)
{
    const dnnl_version_t *v = dnnl_version();
    if (v)
        snprintf(version_text, sizeof version_text, "%d.%d.%d (%.8s)", v->major, v->minor, v->patch, v->hash);
}

const char *onnx_dnnl_version(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    if (dnnl_turned_off())
        return NULL;
    pthread_once(&once, dnnl_version_text);
    return version_text[0] ? version_text : NULL;
}

struct onnx_dnnl *onnx_dnnl_create(int threads)
{
    if (dnnl_turned_off())
        return NULL;   /* our own kernels only (comparisons) */
    struct onnx_dnnl *d = calloc(1, sizeof *d);
    if (!d)
        return NULL;
    d->threads = threads < 1 ? 1 : threads > MAX_SLICES ? MAX_SLICES : threads;
    int bad = dnnl_engine_create(&d->eng, dnnl_cpu, 0) != dnnl_success;
    for (int k = 0; !bad && k < d->threads; k++)
        bad = dnnl_stream_create(&d->streams[k], d->eng, dnnl_stream_default_flags) != dnnl_success;
    if (bad) {
        onnx_dnnl_free(d);
        return NULL;
    }
    return d;
}

/* Node's plan: runs look them up in the order they were prepared, so the search starts
 * after the last one found. */
static struct dnnl_conv *find_conv(struct onnx_dnnl *d, const struct onnx_node *node, size_t *at)
{
    for (size_t k = 0; k < d->n_convs; k++) {
        size_t i = (d->cursor + k) % d->n_convs;
        if (d->convs[i]->node == node) {
            d->cursor = i + 1;
            if (at)
                *at = i;
            return d->convs[i];
        }
    }
    return NULL;
}

static int run1(dnnl_stream_t st, dnnl_primitive_t prim, int n, const dnnl_exec_arg_t *args)
{
    return dnnl_primitive_execute(prim, st, n, args) != dnnl_success || dnnl_stream_wait(st) != dnnl_success;
}

static int is_nhwc(const struct onnx_tensor *t)
{
    return t->layout == ONNX_LAYOUT_NHWC;
}

/* Elements from one image to the next (a Concat's slice at batch > 1: onnx_plan_concat.c). */
static int64_t image_stride(const struct onnx_tensor *t)
{
    return t->nstride ? t->nstride : t->dims[1] * t->dims[2] * t->dims[3];
}

/* The user-side descriptor of images of t (dims d): NHWC, or NCHW with t's image stride. */
static int md_user(md_t *md, const struct onnx_tensor *t, const dnnl_dims_t d)
{
    if (is_nhwc(t) || !t->nstride)
        return md_tag(md, 4, d, is_nhwc(t) ? dnnl_nhwc : dnnl_nchw);
    dnnl_dims_t st = { image_stride(t), t->dims[2] * t->dims[3], t->dims[3], 1 };
    return md_strides(md, 4, d, st);
}

static size_t align64(size_t b)
{
    return (b + 63) / 64 * 64;
}

/* A reorder from `from` to `to`, or NULL (and 0) where both are the same layout. */
static int make_reorder(struct onnx_dnnl *d, cmd_t from, cmd_t to, dnnl_primitive_t *out)
{
    dnnl_primitive_desc_t pd;
    *out = NULL;
    if (dnnl_memory_desc_equal(from, to))
        return 0;
    if (dnnl_reorder_primitive_desc_create(&pd, from, d->eng, to, d->eng, NULL) != dnnl_success)
        return -1;
    int rc = dnnl_primitive_create(out, pd) != dnnl_success;
    dnnl_primitive_desc_destroy(pd);
    return rc;
}

/* The input's reorder from NCHW (src_user) into the primitives' layout (src), in parts of
 * whole blocks of 16 channels, one per thread where the input is large enough; *off: the
 * scratch used so far (the blocked copy is added). */
static int make_input_reorders(struct onnx_dnnl *d, struct dnnl_conv *p, const struct onnx_tensor *x, cmd_t src_user,
                               cmd_t src, size_t *off)
{
    if (dnnl_memory_desc_equal(src_user, src))
        return 0;   /* the primitives read NCHW */
    int64_t C = x->dims[1], blocks = (C + 15) / 16;
    int n = x->numel < 65536 ? 1 : d->threads;
    if (n > blocks)
        n = (int)blocks;
    int64_t per = (blocks + n - 1) / n * 16;
    if (dnnl_memory_create(&p->src, src, d->eng, DNNL_MEMORY_NONE) != dnnl_success)
        return -1;
    p->src_off = *off;
    *off += align64(dnnl_memory_desc_get_size(src));
    for (int k = 0; k < n && k * per < C; k++) {
        int64_t c0 = k * per, c1 = c0 + per < C ? c0 + per : C;
        dnnl_dims_t dims = { x->dims[0], c1 - c0, x->dims[2], x->dims[3] }, at = { 0, c0, 0, 0 };
        md_t from, to;
        memset(&from, 0, sizeof from);
        to = from;
        int rc = n == 1 ? md_copy(&from, src_user) || md_copy(&to, src)
                        : md_sub(&from, src_user, dims, at) || md_sub(&to, src, dims, at);
        rc = rc || make_reorder(d, MDP(from), MDP(to), &p->in[k].reorder) ||
             dnnl_memory_create(&p->in[k].from, MDP(from), d->eng, DNNL_MEMORY_NONE) != dnnl_success ||
             dnnl_memory_create(&p->in[k].to, MDP(to), d->eng, DNNL_MEMORY_NONE) != dnnl_success;
        md_free(from);
        md_free(to);
        if (rc || !p->in[k].reorder)
            return -1;
        p->n_in = k + 1;
    }
    return 0;
}

/* The slice's weights in its primitive's layout, once: a reorder from the model's OIHW. */
static int pack_weights(struct onnx_dnnl *d, struct dnnl_slice *sl, md_t user, cmd_t want, const float *w)
{
    dnnl_memory_t from = NULL;
    dnnl_primitive_t r = NULL;
    if (dnnl_memory_create(&sl->wei, want, d->eng, DNNL_MEMORY_ALLOCATE) != dnnl_success)
        return -1;
    int rc = dnnl_memory_create(&from, MDP(user), d->eng, (void *)w) != dnnl_success;
    if (!rc)
        rc = make_reorder(d, MDP(user), want, &r);
    if (!rc && r) {
        dnnl_exec_arg_t args[] = { { DNNL_ARG_FROM, from }, { DNNL_ARG_TO, sl->wei } };
        rc = run1(d->streams[0], r, 2, args);
    } else if (!rc) {
        void *h = NULL;
        rc = dnnl_memory_get_data_handle(sl->wei, &h) != dnnl_success;
        if (!rc)
            memcpy(h, w, dnnl_memory_desc_get_size(want));
    }
    if (r)
        dnnl_primitive_destroy(r);
    if (from)
        dnnl_memory_destroy(from);
    return rc;
}

/* The user-side descriptors of one slice: its weights (OIHW), bias and its channels of the
 * NCHW output (strided). */
struct slice_mds {
    md_t wei, bias, dst;
    int has_bias;
};

static int slice_user_mds(const struct onnx_kargs *a, const struct dnnl_slice *sl, struct slice_mds *m)
{
    const struct onnx_tensor *w = a->in[1], *y = a->out[0];
    int64_t M = y->dims[1], plane = y->dims[2] * y->dims[3], o0 = sl->o0, o1 = sl->o1;
    dnnl_dims_t wd = { o1 - o0, w->dims[1], w->dims[2], w->dims[3] };
    dnnl_dims_t dd = { sl->n1 - sl->n0, o1 - o0, y->dims[2], y->dims[3] };
    dnnl_dims_t ds = { image_stride(y), plane, y->dims[3], 1 }, ds_nhwc = { M * plane, 1, y->dims[3] * M, M };
    dnnl_dims_t bd = { o1 - o0 };
    m->has_bias = a->n_in > 2 && a->in[2];
    return md_tag(&m->wei, 4, wd, dnnl_oihw) || md_strides(&m->dst, 4, dd, is_nhwc(y) ? ds_nhwc : ds) ||
           (m->has_bias && md_tag(&m->bias, 1, bd, dnnl_x));
}

/* The primitive descriptor of one slice; src: the input's layout, or NULL for oneDNN's choice. */
static int slice_pd(struct onnx_dnnl *d, const struct onnx_kargs *a, const struct dnnl_slice *sl, cmd_t src,
                    const struct slice_mds *m, dnnl_primitive_desc_t *pd)
{
    const struct onnx_tensor *x = a->in[0], *w = a->in[1], *y = a->out[0];
    const struct onnx_params *p = a->p;
    int64_t n = sl->n1 - sl->n0;
    dnnl_dims_t sd = { n, x->dims[1], x->dims[2], x->dims[3] };
    dnnl_dims_t dd = { n, sl->o1 - sl->o0, y->dims[2], y->dims[3] };
    dnnl_dims_t wd = { sl->o1 - sl->o0, w->dims[1], w->dims[2], w->dims[3] };
    dnnl_dims_t st = { p->strides[0], p->strides[1] }, dil = { p->dilations[0] - 1, p->dilations[1] - 1 };
    dnnl_dims_t pl = { p->pads[0], p->pads[1] }, pr;
    for (int i = 0; i < 2; i++)   /* the end padding that gives exactly the planned output size */
        pr[i] = (dd[2 + i] - 1) * st[i] + (w->dims[2 + i] - 1) * p->dilations[i] + 1 - sd[2 + i] - pl[i];
    md_t src_md, wei_any, dst_any;
    memset(&src_md, 0, sizeof src_md);
    wei_any = dst_any = src_md;
    int rc = src ? md_copy(&src_md, src) : md_tag(&src_md, 4, sd, is_nhwc(x) ? dnnl_nhwc : dnnl_format_tag_any);
    rc = rc || md_tag(&wei_any, 4, wd, dnnl_format_tag_any) || md_tag(&dst_any, 4, dd, dnnl_format_tag_any);
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t po = NULL;
    rc = rc || dnnl_primitive_attr_create(&attr) != dnnl_success ||
         dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user) != dnnl_success;
    if (!rc && p->fused_relu)
        rc = dnnl_post_ops_create(&po) != dnnl_success || append_relu(po) ||
             dnnl_primitive_attr_set_post_ops(attr, po) != dnnl_success;
    if (!rc)
        rc = conv_pd(pd, d->eng, src_md, wei_any, m->bias, dst_any, st, dil, pl, pr, attr);
    if (po)
        dnnl_post_ops_destroy(po);
    if (attr)
        dnnl_primitive_attr_destroy(attr);
    md_free(src_md);
    md_free(wei_any);
    md_free(dst_any);
    return rc;
}

/* A slice of whole images: its images of the NCHW input, and their blocked copy where the
 * primitive wants one. */
static int slice_input(struct onnx_dnnl *d, struct dnnl_slice *sl, const struct onnx_tensor *x, cmd_t src,
                       size_t *off)
{
    dnnl_dims_t sd = { sl->n1 - sl->n0, x->dims[1], x->dims[2], x->dims[3] };
    md_t from;
    memset(&from, 0, sizeof from);
    int rc = md_user(&from, x, sd) || make_reorder(d, MDP(from), src, &sl->in_reorder) ||
             dnnl_memory_create(&sl->in_from, MDP(from), d->eng, DNNL_MEMORY_NONE) != dnnl_success;
    if (!rc && sl->in_reorder) {
        rc = dnnl_memory_create(&sl->in_to, src, d->eng, DNNL_MEMORY_NONE) != dnnl_success;
        sl->in_off = *off;
        *off += align64(dnnl_memory_desc_get_size(src));
    }
    md_free(from);
    return rc;
}

/* Slice k's primitive, packed weights and memories; *off: the scratch used so far. */
static int make_slice(struct onnx_dnnl *d, const struct onnx_kargs *a, struct dnnl_conv *p, int k, md_t src_user,
                      size_t *off)
{
    struct dnnl_slice *sl = &p->s[k];
    const struct onnx_tensor *w = a->in[1];
    int64_t kk = w->dims[1] * w->dims[2] * w->dims[3];
    struct slice_mds m;
    memset(&m, 0, sizeof m);
    dnnl_primitive_desc_t pd = NULL;
    cmd_t src0 = NULL;   /* slices of channels after the first read the layout the first chose */
    if (k && !p->by_images && dnnl_memory_get_memory_desc(p->src ? p->src : p->src_user, &src0) != dnnl_success)
        return -1;
    int rc = slice_user_mds(a, sl, &m) || slice_pd(d, a, sl, src0, &m, &pd);
    if (!rc) {
        cmd_t src = dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
        cmd_t dst = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
        cmd_t pad = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
        cmd_t wei = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0), wei0 = NULL;
        if (k && p->by_images && dnnl_memory_get_memory_desc(p->s[0].wei, &wei0) == dnnl_success &&
            dnnl_memory_desc_equal(wei, wei0)) {   /* one packed copy for all threads */
            sl->wei = p->s[0].wei;
            sl->wei_shared = 1;
        }
        rc = dnnl_primitive_create(&sl->conv, pd) != dnnl_success ||
             (!sl->wei_shared && pack_weights(d, sl, m.wei, wei, (const float *)w->data + sl->o0 * kk)) ||
             make_reorder(d, dst, MDP(m.dst), &sl->dst_reorder) ||
             dnnl_memory_create(&sl->dst_user, MDP(m.dst), d->eng, DNNL_MEMORY_NONE) != dnnl_success ||
             (m.has_bias && dnnl_memory_create(&sl->bias, MDP(m.bias), d->eng, DNNL_MEMORY_NONE) != dnnl_success);
        if (!rc && p->by_images)
            rc = slice_input(d, sl, a->in[0], src, off);
        else if (!rc && !k)   /* the first slice of channels chooses the input's layout for all */
            rc = dnnl_memory_create(&p->src_user, MDP(src_user), d->eng, DNNL_MEMORY_NONE) != dnnl_success ||
                 make_input_reorders(d, p, a->in[0], MDP(src_user), src, off);
        if (!rc && sl->dst_reorder) {
            rc = dnnl_memory_create(&sl->dst, dst, d->eng, DNNL_MEMORY_NONE) != dnnl_success;
            sl->dst_off = *off;
            *off += align64(dnnl_memory_desc_get_size(dst));
        }
        if (!rc && pad && dnnl_memory_desc_get_size(pad)) {
            rc = dnnl_memory_create(&sl->pad, pad, d->eng, DNNL_MEMORY_NONE) != dnnl_success;
            sl->pad_off = *off;
            *off += align64(dnnl_memory_desc_get_size(pad));
        }
    }
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    md_free(m.wei);
    md_free(m.bias);
    md_free(m.dst);
    return rc;
}

/* Only float32 4-D ungrouped convolutions with constant weights and bias; the rest stays
 * with our kernel. */
static int eligible(const struct onnx_kargs *a)
{
    if (a->n_in < 2 || !a->in[0] || !a->in[1] || a->n_out < 1 || !a->out[0])
        return 0;
    const struct onnx_tensor *x = a->in[0], *w = a->in[1], *y = a->out[0];
    const struct onnx_tensor *b = a->n_in > 2 ? a->in[2] : NULL;
    if (x->rank != 4 || w->rank != 4 || y->rank != 4 || y->numel == 0 || a->p->group != 1 ||
        x->elem != ONNX_ELEM_FLOAT || w->elem != ONNX_ELEM_FLOAT || (b && b->elem != ONNX_ELEM_FLOAT) ||
        y->elem != ONNX_ELEM_FLOAT)
        return 0;
    return (a->const_in & 2u) && (!b || (a->const_in & 4u));
}

/* The slices: one per thread, of whole images where the batch has one for each thread
 * (each thread then runs the whole convolution on its images, input reorder included),
 * else of output channels, at least 16 each (one AVX-512 block); a convolution not worth
 * a thread stays whole. */
static void plan_slices(const struct onnx_dnnl *d, const struct onnx_kargs *a, struct dnnl_conv *p)
{
    const struct onnx_tensor *w = a->in[1], *y = a->out[0];
    double flops = 2.0 * (double)y->numel * (double)(w->dims[1] * w->dims[2] * w->dims[3]);
    int64_t N = y->dims[0], M = y->dims[1], blocks = (M + 15) / 16;
    int n = flops < 1e6 ? 1 : d->threads;
    p->by_images = n > 1 && N >= n;
    if (!p->by_images && n > blocks)
        n = (int)blocks;
    int64_t total = p->by_images ? N : M, per = (total + n - 1) / n;
    if (!p->by_images)
        per = (per + 15) / 16 * 16;
    p->n = 0;
    for (int k = 0; k < n && k * per < total; k++) {
        int64_t lo = k * per, hi = lo + per < total ? lo + per : total;
        struct dnnl_slice *sl = &p->s[p->n++];
        sl->n0 = p->by_images ? lo : 0;
        sl->n1 = p->by_images ? hi : N;
        sl->o0 = p->by_images ? 0 : lo;
        sl->o1 = p->by_images ? M : hi;
    }
}

int onnx_dnnl_conv_takes(const struct onnx_dnnl *d, const struct onnx_kargs *a)
{
    return d && eligible(a);
}

size_t onnx_dnnl_conv_prepare(struct onnx_dnnl *d, const struct onnx_kargs *a)
{
    if (!d || !eligible(a))
        return (size_t)-1;
    size_t at = 0;
    struct dnnl_conv *p = find_conv(d, a->node, &at);
    if (p) {   /* prepared again: replace */
        conv_free(p);
        memmove(d->convs + at, d->convs + at + 1, (d->n_convs - at - 1) * sizeof *d->convs);
        d->n_convs--;
    }
    if (d->n_convs == d->cap_convs) {
        size_t cap = d->cap_convs ? 2 * d->cap_convs : 64;
        struct dnnl_conv **grown = realloc(d->convs, cap * sizeof *grown);
        if (!grown)
            return (size_t)-1;
        d->convs = grown;
        d->cap_convs = cap;
    }
    p = calloc(1, sizeof *p);
    if (!p)
        return (size_t)-1;
    p->node = a->node;
    omp_set_num_threads(1);   /* each primitive is made for (and run on) one thread */
    const struct onnx_tensor *x = a->in[0];
    dnnl_dims_t sd = { x->dims[0], x->dims[1], x->dims[2], x->dims[3] };
    md_t src_user;
    memset(&src_user, 0, sizeof src_user);
    int rc = md_user(&src_user, x, sd);
    plan_slices(d, a, p);
    size_t off = 0;
    for (int k = 0; !rc && k < p->n; k++)
        rc = make_slice(d, a, p, k, src_user, &off);
    md_free(src_user);
    if (rc) {
        conv_free(p);
        return (size_t)-1;
    }
    d->convs[d->n_convs++] = p;
    return off;
}

/* The implementation oneDNN chose for slice sl (its primitive descriptor's name). */
static const char *slice_impl(const struct dnnl_slice *sl)
{
    const_dnnl_primitive_desc_t pd = NULL;
    const char *name = NULL;
    if (!sl->conv || dnnl_primitive_get_primitive_desc(sl->conv, &pd) != dnnl_success ||
        dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, (void *)&name) != dnnl_success || !name)
        return "unknown";
    return name;
}

int onnx_dnnl_conv_impl(struct onnx_dnnl *d, const struct onnx_node *node, char *buf, size_t len)
{
    struct dnnl_conv *p = d ? find_conv(d, node, NULL) : NULL;
    if (!p || len == 0)
        return 0;
    size_t at = (size_t)snprintf(buf, len, "onednn");
    /* each slice has its primitive; slices of fewer channels may be given another kernel */
    for (int k = 0; k < p->n && at < len; k++) {
        const char *name = slice_impl(&p->s[k]);
        int seen = 0;
        for (int j = 0; j < k && !seen; j++)
            seen = strcmp(slice_impl(&p->s[j]), name) == 0;
        if (!seen)
            at += (size_t)snprintf(buf + at, len - at, "%s%s", k ? ", " : " ", name);
    }
    return 1;
}

struct slice_run {
    struct onnx_dnnl *d;
    struct dnnl_conv *p;
    const struct onnx_kargs *a;
    _Atomic int failed;
};

static int run_slice(struct onnx_dnnl *d, struct dnnl_conv *p, const struct onnx_kargs *a, int k)
{
    struct dnnl_slice *sl = &p->s[k];
    char *scratch = a->scratch;
    const struct onnx_tensor *x = a->in[0], *y = a->out[0];
    int64_t plane = y->dims[2] * y->dims[3];
    omp_set_num_threads(1);
    dnnl_memory_t src = p->src ? p->src : p->src_user;
    if (p->by_images) {
        float *from = (float *)x->data + sl->n0 * image_stride(x);
        if (dnnl_memory_set_data_handle(sl->in_from, from) != dnnl_success ||
            (sl->in_to && dnnl_memory_set_data_handle(sl->in_to, scratch + sl->in_off) != dnnl_success))
            return -1;
        src = sl->in_to ? sl->in_to : sl->in_from;
        dnnl_exec_arg_t in[] = { { DNNL_ARG_FROM, sl->in_from }, { DNNL_ARG_TO, sl->in_to } };
        if (sl->in_reorder && run1(d->streams[k], sl->in_reorder, 2, in))
            return -1;
    }
    float *to = (float *)y->data + sl->n0 * image_stride(y) + sl->o0 * (is_nhwc(y) ? 1 : plane);
    if (dnnl_memory_set_data_handle(sl->dst_user, to) != dnnl_success ||
        (sl->dst && dnnl_memory_set_data_handle(sl->dst, scratch + sl->dst_off) != dnnl_success) ||
        (sl->pad && dnnl_memory_set_data_handle(sl->pad, scratch + sl->pad_off) != dnnl_success) ||
        (sl->bias && dnnl_memory_set_data_handle(sl->bias, (float *)a->in[2]->data + sl->o0) != dnnl_success))
        return -1;
    dnnl_exec_arg_t args[5] = { { DNNL_ARG_SRC, src }, { DNNL_ARG_WEIGHTS, sl->wei },
                                { DNNL_ARG_DST, sl->dst ? sl->dst : sl->dst_user } };
    int n = 3;
    if (sl->bias)
        args[n++] = (dnnl_exec_arg_t){ DNNL_ARG_BIAS, sl->bias };
    if (sl->pad)
        args[n++] = (dnnl_exec_arg_t){ DNNL_ARG_SCRATCHPAD, sl->pad };
    if (run1(d->streams[k], sl->conv, n, args))
        return -1;
    if (!sl->dst_reorder)
        return 0;
    dnnl_exec_arg_t out[] = { { DNNL_ARG_FROM, sl->dst }, { DNNL_ARG_TO, sl->dst_user } };
    return run1(d->streams[k], sl->dst_reorder, 2, out);
}

static void in_task(void *vctx, int64_t b, int64_t e)
{
    struct slice_run *r = vctx;
    omp_set_num_threads(1);
    for (int64_t k = b; k < e; k++) {
        struct dnnl_in_part *in = &r->p->in[k];
        dnnl_exec_arg_t args[] = { { DNNL_ARG_FROM, in->from }, { DNNL_ARG_TO, in->to } };
        if (dnnl_memory_set_data_handle(in->from, r->a->in[0]->data) != dnnl_success ||
            dnnl_memory_set_data_handle(in->to, (char *)r->a->scratch + r->p->src_off) != dnnl_success ||
            run1(r->d->streams[k], in->reorder, 2, args))
            r->failed = 1;
    }
}

static void slice_task(void *vctx, int64_t b, int64_t e)
{
    struct slice_run *r = vctx;
    for (int64_t k = b; k < e; k++)
        if (run_slice(r->d, r->p, r->a, (int)k))
            r->failed = 1;
}

int onnx_dnnl_conv_run(struct onnx_backend_ctx *c, struct onnx_dnnl *d, const struct onnx_kargs *a)
{
    struct dnnl_conv *p = d ? find_conv(d, a->node, NULL) : NULL;
    if (!p)
        return 1;   /* not prepared: our kernel runs it */
    omp_set_num_threads(1);
    if ((p->src_user && dnnl_memory_set_data_handle(p->src_user, a->in[0]->data) != dnnl_success) ||
        (p->src && dnnl_memory_set_data_handle(p->src, (char *)a->scratch + p->src_off) != dnnl_success))
        return -1;
    struct slice_run r = { d, p, a, 0 };
    if (p->n_in)
        par(c, p->n_in, 1, in_task, &r);
    if (!r.failed)
        par(c, p->n, 1, slice_task, &r);
    return r.failed ? -1 : 0;
}

#else /* !ONNX_WITH_DNNL: our own kernels only */

const char *onnx_dnnl_version(void)
{
    return NULL;
}

struct onnx_dnnl *onnx_dnnl_create(int threads)
{
    (void)threads;
    return NULL;
}

void onnx_dnnl_free(struct onnx_dnnl *d)
{
    (void)d;
}

int onnx_dnnl_conv_takes(const struct onnx_dnnl *d, const struct onnx_kargs *a)
{
    (void)d;
    (void)a;
    return 0;
}

size_t onnx_dnnl_conv_prepare(struct onnx_dnnl *d, const struct onnx_kargs *a)
{
    (void)d;
    (void)a;
    return (size_t)-1;
}

int onnx_dnnl_conv_impl(struct onnx_dnnl *d, const struct onnx_node *node, char *buf, size_t len)
{
    (void)d;
    (void)node;
    (void)buf;
    (void)len;
    return 0;
}

int onnx_dnnl_conv_run(struct onnx_backend_ctx *c, struct onnx_dnnl *d, const struct onnx_kargs *a)
{
    (void)c;
    (void)d;
    (void)a;
    return 1;
}

#endif
