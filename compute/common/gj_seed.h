/*
 * gj_seed.h — the seed a kind that draws random numbers uses when the user gave none; the
 * kind writes it into the job's params, so the provenance record and a rerun use it too.
 */
#ifndef GJ_SEED_H
#define GJ_SEED_H

#include <jansson.h>

/* A fresh seed from the kernel's random source, in [0, 2^53) so that every JSON client reads
 * it exactly. */
json_int_t gj_fresh_seed(void);

#endif
