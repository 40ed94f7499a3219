/*
 * pbw.h — a tiny protobuf writer for the ONNX tests: builds model files field by field,
 * independently of the runtime's generated decoder (so tests can also write broken ones).
 */
#ifndef PBW_H
#define PBW_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct pb {
    uint8_t *b;
    size_t n, cap;
};

static inline void pb_put(struct pb *p, const void *d, size_t n)
{
    if (p->n + n > p->cap) {
        size_t c = p->cap ? p->cap * 2 : 256;
        while (c < p->n + n)
            c *= 2;
        p->b = realloc(p->b, c);
        if (!p->b)
            abort();
        p->cap = c;
    }
    if (n)
        memcpy(p->b + p->n, d, n);
    p->n += n;
}

static inline void pb_varint(struct pb *p, uint64_t v)
{
    uint8_t t[10];
    int k = 0;
    do {
        t[k] = v & 0x7f;
        v >>= 7;
        if (v)
            t[k] |= 0x80;
        k++;
    } while (v);
    pb_put(p, t, (size_t)k);
}

static inline void pb_tag(struct pb *p, int field, int wt) { pb_varint(p, ((uint64_t)field << 3) | (uint64_t)wt); }
static inline void pb_int(struct pb *p, int field, int64_t v) { pb_tag(p, field, 0); pb_varint(p, (uint64_t)v); }
static inline void pb_float(struct pb *p, int field, float f) { pb_tag(p, field, 5); pb_put(p, &f, 4); }
static inline void pb_bytes(struct pb *p, int field, const void *d, size_t n)
{
    pb_tag(p, field, 2);
    pb_varint(p, n);
    pb_put(p, d, n);
}
static inline void pb_str(struct pb *p, int field, const char *s) { pb_bytes(p, field, s, strlen(s)); }
/* Appends sub as a length-delimited field and frees it. */
static inline void pb_msg(struct pb *p, int field, struct pb *sub)
{
    pb_bytes(p, field, sub->b, sub->n);
    free(sub->b);
    memset(sub, 0, sizeof *sub);
}

/* ---- ONNX pieces ---- */
/* TensorProto.DataType */
enum { T_FLOAT = 1, T_UINT8 = 2, T_INT8 = 3, T_UINT16 = 4, T_INT16 = 5, T_INT32 = 6, T_INT64 = 7, T_STRING = 8,
       T_BOOL = 9, T_FLOAT16 = 10, T_DOUBLE = 11, T_UINT32 = 12, T_UINT64 = 13, T_BFLOAT16 = 16 };

/* Bytes of one element in raw_data (0: STRING, never raw). */
static inline size_t pb_elem_size(int elem)
{
    switch (elem) {
    case T_UINT8: case T_INT8: case T_BOOL: return 1;
    case T_UINT16: case T_INT16: case T_FLOAT16: case T_BFLOAT16: return 2;
    case T_FLOAT: case T_INT32: case T_UINT32: return 4;
    case T_INT64: case T_DOUBLE: case T_UINT64: return 8;
    default: return 0;
    }
}

/* TensorProto with raw data. */
static inline struct pb pb_tensor(const char *name, int dtype, int rank, const int64_t *dims, const void *data,
                           size_t bytes)
{
    struct pb t = { 0 };
    for (int i = 0; i < rank; i++)
        pb_int(&t, 1, dims[i]);
    pb_int(&t, 2, dtype);
    if (name)
        pb_str(&t, 8, name);
    pb_bytes(&t, 9, data, bytes);
    return t;
}

/* ValueInfoProto; a dim of -1 becomes dim_param "N". */
static inline struct pb pb_vinfo(const char *name, int elem, int rank, const int64_t *dims)
{
    struct pb shape = { 0 }, tt = { 0 }, tp = { 0 }, vi = { 0 };
    for (int i = 0; i < rank; i++) {
        struct pb d = { 0 };
        if (dims[i] < 0)
            pb_str(&d, 2, "N");
        else
            pb_int(&d, 1, dims[i]);
        pb_msg(&shape, 1, &d);
    }
    pb_int(&tt, 1, elem);
    pb_msg(&tt, 2, &shape);
    pb_msg(&tp, 1, &tt);
    pb_str(&vi, 1, name);
    pb_msg(&vi, 2, &tp);
    return vi;
}

static inline struct pb pb_attr_int(const char *name, int64_t v)
{
    struct pb a = { 0 };
    pb_str(&a, 1, name);
    pb_int(&a, 20, 2);
    pb_int(&a, 3, v);
    return a;
}

static inline struct pb pb_attr_float(const char *name, float v)
{
    struct pb a = { 0 };
    pb_str(&a, 1, name);
    pb_int(&a, 20, 1);
    pb_float(&a, 2, v);
    return a;
}

static inline struct pb pb_attr_ints(const char *name, int n, const int64_t *v)
{
    struct pb a = { 0 };
    pb_str(&a, 1, name);
    pb_int(&a, 20, 7);
    for (int i = 0; i < n; i++)
        pb_int(&a, 8, v[i]);
    return a;
}

static inline struct pb pb_attr_str(const char *name, const char *v)
{
    struct pb a = { 0 };
    pb_str(&a, 1, name);
    pb_int(&a, 20, 3);
    pb_str(&a, 4, v);
    return a;
}

static inline struct pb pb_attr_tensor(const char *name, struct pb *t)
{
    struct pb a = { 0 };
    pb_str(&a, 1, name);
    pb_int(&a, 20, 4);
    pb_msg(&a, 5, t);
    return a;
}

/* NodeProto; inputs/outputs NULL-terminated; attrs: n pb buffers (consumed). */
static inline struct pb pb_node(const char *op, const char *const *in, const char *const *out, int n_attr,
                         struct pb *attrs)
{
    struct pb nd = { 0 };
    for (; in && *in; in++)
        pb_str(&nd, 1, *in);
    for (; out && *out; out++)
        pb_str(&nd, 2, *out);
    pb_str(&nd, 3, op);   /* node name = op type */
    pb_str(&nd, 4, op);
    for (int i = 0; i < n_attr; i++)
        pb_msg(&nd, 5, &attrs[i]);
    return nd;
}

/* ModelProto around a finished GraphProto. */
static inline struct pb pb_model(struct pb *graph, int64_t opset)
{
    struct pb m = { 0 }, os = { 0 };
    pb_int(&m, 1, 8);
    pb_str(&m, 2, "pbw");
    pb_int(&os, 2, opset);
    pb_msg(&m, 8, &os);
    pb_msg(&m, 7, graph);
    return m;
}

/* ---- a graph builder: values and nodes in order, then the model ---- */

struct gb {
    struct pb g;
    int64_t opset;   /* 0: 17 */
};

/* NULL-terminated names and dims as literals: S("x", "w"), D(1, 3, 8, 8). */
#define S(...) ((const char *const[]){ __VA_ARGS__, NULL })
#define D(...) ((const int64_t[]){ __VA_ARGS__ })

static inline void gb_input(struct gb *b, const char *name, int elem, int rank, const int64_t *dims)
{
    struct pb v = pb_vinfo(name, elem, rank, dims);
    pb_msg(&b->g, 11, &v);
}

/* An initializer of elem (any but T_STRING) with its raw data. */
static inline void gb_init(struct gb *b, const char *name, int elem, int rank, const int64_t *dims,
                           const void *data)
{
    int64_t n = 1;
    for (int i = 0; i < rank; i++)
        n *= dims[i];
    struct pb t = pb_tensor(name, elem, rank, dims, data, (size_t)n * pb_elem_size(elem));
    pb_msg(&b->g, 5, &t);
}

/* A 1-D STRING initializer of n NUL-terminated strings (string_data). */
static inline void gb_init_strings(struct gb *b, const char *name, int n, const char *const *strs)
{
    struct pb t = { 0 };
    pb_int(&t, 1, n);
    pb_int(&t, 2, T_STRING);
    for (int i = 0; i < n; i++)
        pb_str(&t, 6, strs[i]);
    pb_str(&t, 8, name);
    pb_msg(&b->g, 5, &t);
}

static inline void gb_node(struct gb *b, const char *op, const char *const *in, const char *const *out,
                           int n_attr, struct pb *attrs)
{
    struct pb nd = pb_node(op, in, out, n_attr, attrs);
    pb_msg(&b->g, 1, &nd);
}

static inline void gb_output(struct gb *b, const char *name)
{
    struct pb v = { 0 };
    pb_str(&v, 1, name);
    pb_msg(&b->g, 12, &v);
}

/* The model file (the builder's buffer is consumed). */
static inline struct pb gb_finish(struct gb *b)
{
    pb_str(&b->g, 2, "test");
    return pb_model(&b->g, b->opset ? b->opset : 17);
}

#endif
