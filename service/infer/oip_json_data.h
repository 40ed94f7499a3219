/*
 * oip_json_data.h — an inference request's numeric `data` arrays read straight from its JSON
 * text, before jansson parses it (jansson makes a json_t, a malloc, of every number: ~500 ns
 * a value, 30-60 ms for a batch of 8 images).
 *
 * For each element of the top-level `inputs` array whose `data` is an array (nested arrays
 * allowed, at most OIP_JSON_MAX_NEST deep) of only numbers, true and false, the values are
 * read as jansson reads them (an integer literal as json_int_t, any other number by strtod:
 * the same value, bit for bit); jansson then parses the rest of the text, which gives it
 * that `data` as the integer 0. An array this cannot read exactly as jansson would (a
 * string, an object, a number jansson refuses, anything malformed) is left to jansson, and
 * so is all text after a point where the scan stopped: jansson's errors are answered as
 * before, their line, column and position those of the text as sent. Private to
 * service/infer.
 */
#ifndef GJ_OIP_JSON_DATA_H
#define GJ_OIP_JSON_DATA_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#define OIP_JSON_MAX_NEST 9          /* arrays in one `data`: as oip_tensor.c counts them */

enum oip_json_kind { OIP_JSON_INT, OIP_JSON_REAL, OIP_JSON_FALSE, OIP_JSON_TRUE };

union oip_json_num {
    int64_t i;                       /* OIP_JSON_INT */
    double d;                        /* OIP_JSON_REAL */
};

/* One input's `data`, its leaves in order. */
struct oip_json_values {
    size_t count;
    union oip_json_num *num;
    uint8_t *kind;                   /* enum oip_json_kind */
};

struct oip_json_data;                /* the arrays read from one request's text */

/* Parses text[0, len) as json_loadb(text, len, flags, err) would, its inputs' numeric data
 * arrays read into *data (freed first; NULL while none) and given to jansson as 0. The text
 * is not changed, nor referenced by *data. NULL (jansson's error in err, *data NULL) or the
 * document. */
json_t *oip_json_data_load(const char *text, size_t len, size_t flags, json_error_t *err,
                           struct oip_json_data **data);

/* The values read for input `input` of the inputs array, or NULL (its data is text). */
const struct oip_json_values *oip_json_data_for(const struct oip_json_data *d, size_t input);

/* Frees input `input`'s values (once they are in its tensor). */
void oip_json_data_drop(struct oip_json_data *d, size_t input);

/* Frees d and every value in it (NULL: nothing). */
void oip_json_data_free(struct oip_json_data *d);

/* The JSON number (RFC 8259) at s[0, len) as jansson gives it: *kind OIP_JSON_INT with an
 * integer literal that fits json_int_t, OIP_JSON_REAL with any other finite number. The
 * bytes it took, or 0 (not a number, or one jansson refuses: an integer or real overflow).
 * When it stops before len, s[taken] is not part of a number. */
size_t oip_json_number(const char *s, size_t len, uint8_t *kind, union oip_json_num *num);

#endif
