/*
 * gj_error.h — an error a user can act on: which field, what is wrong.
 */
#ifndef GJ_ERROR_H
#define GJ_ERROR_H

#ifdef __cplusplus
extern "C" {   /* the CUDA sources report through it too */
#endif

struct gj_error {
    char field[128];    /* JSON path of the offending field ("geometry.detector.cols"), or "" */
    char message[512];  /* a sentence a user can act on */
    int status;         /* HTTP status the service should answer at submit (400, 413, 422); 0: 422 */
    int transient;      /* 1: the failure may not recur (retry with backoff) */
};

/* Sets err (if not NULL) and returns -1, so callers can `return gj_error_set(...)`. */
int gj_error_set(struct gj_error *err, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* As gj_error_set, with the HTTP status the service answers with (404, 409, 503...): the
 * service's one way of reporting an error, converted to an answer at the route's edge. */
int gj_error_status(struct gj_error *err, int status, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void gj_error_clear(struct gj_error *err);

#ifdef __cplusplus
}
#endif

#endif
