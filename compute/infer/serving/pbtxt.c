/*
 * pbtxt.c — the protobuf text format into a protobuf-c message, by its descriptors.
 * See pbtxt.h. A lexer (tokens with their line and column), then a recursive reader that
 * fills each field where its descriptor says (offset, quantifier, oneof case).
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "infer/serving/pbtxt.h"

enum tok_kind { T_EOF = 0, T_IDENT, T_NUMBER, T_STRING, T_PUNCT };

struct tok {
    enum tok_kind kind;
    const char *s;     /* its text in the input */
    size_t n;
    int line, col;
};

struct reader {
    const char *text;
    size_t len, pos;
    int line, col;
    struct tok t;      /* the current token */
    const struct gj_pbtxt_options *opt;
    struct gj_error *err;
    char path[128];    /* the field being read, for err->field */
};

/* ---- errors ---- */

__attribute__((format(printf, 3, 4)))
static int fail_at(struct reader *r, const struct tok *t, const char *fmt, ...)
{
    char what[440];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    gj_error_set(r->err, r->path, "%s line %d, column %d: %s", r->opt && r->opt->source ? r->opt->source : "text",
                 t->line, t->col, what);
    return -1;
}

/* ---- the lexer ---- */

static int is_ident_start(int c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static int is_ident_char(int c)
{
    return is_ident_start(c) || (c >= '0' && c <= '9');
}

static int peekc(const struct reader *r, size_t ahead)
{
    return r->pos + ahead < r->len ? (unsigned char)r->text[r->pos + ahead] : -1;
}

static void advance(struct reader *r)
{
    if (r->text[r->pos] == '\n') {
        r->line++;
        r->col = 1;
    } else {
        r->col++;
    }
    r->pos++;
}

static void skip_space(struct reader *r)
{
    for (;;) {
        int c = peekc(r, 0);
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v') {
            advance(r);
        } else if (c == '#') {
            while (peekc(r, 0) >= 0 && peekc(r, 0) != '\n')
                advance(r);
        } else {
            return;
        }
    }
}

/* A quoted string's extent (escapes skipped over, not decoded). -1 when unterminated. */
static int lex_string(struct reader *r)
{
    int quote = peekc(r, 0);
    advance(r);
    for (;;) {
        int c = peekc(r, 0);
        if (c < 0 || c == '\n')
            return fail_at(r, &r->t, "a string is not closed on its line");
        advance(r);
        if (c == quote)
            return 0;
        if (c == '\\' && peekc(r, 0) >= 0 && peekc(r, 0) != '\n')
            advance(r);
    }
}

/* Reads the next token into r->t. 0, or -1 with err (a bad character, an open string). */
static int next(struct reader *r)
{
    skip_space(r);
    struct tok *t = &r->t;
    t->s = r->text + r->pos;
    t->line = r->line;
    t->col = r->col;
    int c = peekc(r, 0);
    if (c < 0) {
        t->kind = T_EOF;
        t->n = 0;
        return 0;
    }
    if (is_ident_start(c)) {
        t->kind = T_IDENT;
        while (is_ident_char(peekc(r, 0)))
            advance(r);
    } else if ((c >= '0' && c <= '9') || (c == '.' && peekc(r, 1) >= '0' && peekc(r, 1) <= '9')) {
        t->kind = T_NUMBER;
        int prev = 0;
        for (int d = peekc(r, 0); is_ident_char(d) || d == '.' ||
                                  ((d == '+' || d == '-') && (prev == 'e' || prev == 'E') &&
                                   !(t->s[0] == '0' && (t->s[1] == 'x' || t->s[1] == 'X')));
             d = peekc(r, 0)) {
            prev = d;
            advance(r);
        }
    } else if (c == '"' || c == '\'') {
        t->kind = T_STRING;
        if (lex_string(r) != 0)
            return -1;
    } else if (strchr("{}<>[]:,;-", c)) {
        t->kind = T_PUNCT;
        advance(r);
    } else {
        t->n = 1;
        return fail_at(r, t, "unexpected character '%c'", c >= 0x20 && c < 0x7f ? c : '?');
    }
    t->n = (size_t)(r->text + r->pos - t->s);
    return 0;
}

static int is_punct(const struct tok *t, char c)
{
    return t->kind == T_PUNCT && t->s[0] == c;
}

static int tok_is(const struct tok *t, const char *word)
{
    return t->kind == T_IDENT && t->n == strlen(word) && memcmp(t->s, word, t->n) == 0;
}

static const char *kind_name(const struct tok *t)
{
    switch (t->kind) {
    case T_EOF: return "the end of the text";
    case T_IDENT: return "a name";
    case T_NUMBER: return "a number";
    case T_STRING: return "a string";
    default: return "punctuation";
    }
}

/* Consumes punctuation c. */
static int expect(struct reader *r, char c)
{
    if (!is_punct(&r->t, c))
        return fail_at(r, &r->t, "'%c' expected, found %s%s%.*s%s", c, kind_name(&r->t),
                       r->t.n ? " '" : "", (int)(r->t.n > 40 ? 40 : r->t.n), r->t.s, r->t.n ? "'" : "");
    return next(r);
}

/* ---- scalar values ---- */

/* Decodes one escape at s (after the backslash) into out; the bytes consumed, 0 if bad. */
static size_t unescape_one(const char *s, size_t n, char *out)
{
    static const char from[] = "abfnrtv\\'\"?", to[] = "\a\b\f\n\r\t\v\\'\"?";
    const char *hit = n ? strchr(from, s[0]) : NULL;
    if (hit && s[0]) {
        *out = to[hit - from];
        return 1;
    }
    if (n && (s[0] == 'x' || s[0] == 'X')) {
        unsigned v = 0;
        size_t i = 1;
        for (; i < n && i < 3; i++) {
            int c = s[i], d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
                            : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
            if (d < 0)
                break;
            v = v * 16 + (unsigned)d;
        }
        *out = (char)v;
        return i > 1 ? i : 0;
    }
    if (n && s[0] >= '0' && s[0] <= '7') {
        unsigned v = 0;
        size_t i = 0;
        for (; i < n && i < 3 && s[i] >= '0' && s[i] <= '7'; i++)
            v = v * 8 + (unsigned)(s[i] - '0');
        if (v > 255)
            return 0;
        *out = (char)v;
        return i;
    }
    return 0;
}

static int utf8_ok(const unsigned char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        unsigned c = s[i];
        size_t k = c < 0x80 ? 0 : (c & 0xE0) == 0xC0 ? 1 : (c & 0xF0) == 0xE0 ? 2 : (c & 0xF8) == 0xF0 ? 3 : 9;
        if (k == 9 || i + k >= n + (k ? 0 : 1) || (k == 1 && c < 0xC2))
            return 0;
        uint32_t cp = k ? c & (0x3Fu >> k) : c;
        for (size_t j = 1; j <= k; j++) {
            if ((s[i + j] & 0xC0) != 0x80)
                return 0;
            cp = cp << 6 | (s[i + j] & 0x3Fu);
        }
        if ((k == 2 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) || (k == 3 && (cp < 0x10000 || cp > 0x10FFFF)))
            return 0;
        i += k + 1;
    }
    return 1;
}

/* One or more adjacent string tokens, decoded, as a malloc'd C string. NULL with err. */
static char *read_string(struct reader *r)
{
    struct tok first = r->t;
    if (r->t.kind != T_STRING)
        return fail_at(r, &r->t, "a quoted string expected, found %s", kind_name(&r->t)), NULL;
    size_t cap = 0, len = 0;
    char *out = NULL;
    while (r->t.kind == T_STRING) {
        const char *s = r->t.s + 1;
        size_t n = r->t.n - 2;
        char *grown = realloc(out, cap + n + 1);
        if (!grown) {
            free(out);
            return fail_at(r, &r->t, "out of memory"), NULL;
        }
        out = grown;
        cap += n + 1;
        for (size_t i = 0; i < n; i++) {
            if (s[i] != '\\') {
                out[len++] = s[i];
                continue;
            }
            size_t used = unescape_one(s + i + 1, n - i - 1, &out[len]);
            if (!used) {
                free(out);
                return fail_at(r, &r->t, "a bad escape '\\%c' in a string", i + 1 < n ? s[i + 1] : ' '), NULL;
            }
            len++;
            i += used;
        }
        if (next(r) != 0) {
            free(out);
            return NULL;
        }
    }
    out[len] = '\0';
    if (strlen(out) != len || !utf8_ok((const unsigned char *)out, len)) {
        free(out);
        return fail_at(r, &first, "a string must be UTF-8 text without NUL"), NULL;
    }
    return out;
}

/* An optional '-' before a number: *neg 1 when there was one. */
static int read_sign(struct reader *r, int *neg)
{
    *neg = is_punct(&r->t, '-');
    return *neg ? next(r) : 0;
}

/* An integer (an optional '-', then decimal, 0x hex or 0 octal) within [lo, hi] (as
 * signed) or [0, uhi] (unsigned: is_unsigned). */
static int read_integer(struct reader *r, int is_unsigned, int64_t lo, int64_t hi, uint64_t uhi, uint64_t *out)
{
    struct tok at = r->t;
    int neg;
    if (read_sign(r, &neg) != 0)
        return -1;
    if (r->t.kind != T_NUMBER)
        return fail_at(r, &at, "an integer expected, found %s", kind_name(&r->t));
    char buf[72];
    if (r->t.n >= sizeof buf)
        return fail_at(r, &at, "the number is too long");
    memcpy(buf, r->t.s, r->t.n);
    buf[r->t.n] = '\0';
    char *end;
    errno = 0;
    unsigned long long v = strtoull(buf, &end, 0);
    if (*end || buf[0] == '-' || buf[0] == '+')
        return fail_at(r, &at, "'%s' is not an integer", buf);
    int range = errno == ERANGE;
    if (is_unsigned) {
        if (neg && v)
            return fail_at(r, &at, "this field takes no negative number");
        if (range || v > uhi)
            return fail_at(r, &at, "%s is out of range (at most %llu)", buf, (unsigned long long)uhi);
        *out = v;
    } else {
        uint64_t limit = neg ? (uint64_t)hi + 1 : (uint64_t)hi;
        if (range || v > limit || (neg && -(int64_t)(v - 1) - 1 < lo))
            return fail_at(r, &at, "%s%s is out of range (%lld to %lld)", neg ? "-" : "", buf, (long long)lo,
                           (long long)hi);
        *out = neg ? (uint64_t)(-(int64_t)(v - 1) - 1) : v;
    }
    return next(r);
}

static int read_float(struct reader *r, double *out)
{
    struct tok at = r->t;
    int neg;
    if (read_sign(r, &neg) != 0)
        return -1;
    char buf[72];
    if ((r->t.kind != T_NUMBER && r->t.kind != T_IDENT) || r->t.n >= sizeof buf)
        return fail_at(r, &at, "a number expected, found %s", kind_name(&r->t));
    memcpy(buf, r->t.s, r->t.n);
    buf[r->t.n] = '\0';
    if (r->t.kind == T_IDENT) {
        if (!strcasecmp(buf, "inf") || !strcasecmp(buf, "infinity"))
            *out = INFINITY;
        else if (!strcasecmp(buf, "nan"))
            *out = NAN;
        else
            return fail_at(r, &at, "'%s' is not a number", buf);
    } else {
        size_t n = strlen(buf);
        if (n > 1 && (buf[n - 1] == 'f' || buf[n - 1] == 'F') && !(buf[0] == '0' && (buf[1] == 'x' || buf[1] == 'X')))
            buf[n - 1] = '\0';
        char *end;
        *out = strtod(buf, &end);
        if (*end || buf[0] == '+' || buf[0] == '-' || (buf[0] == '0' && (buf[1] == 'x' || buf[1] == 'X')))
            return fail_at(r, &at, "'%s' is not a number", buf);
    }
    if (neg)
        *out = -*out;
    return next(r);
}

static int read_bool(struct reader *r, protobuf_c_boolean *out)
{
    if (tok_is(&r->t, "true") || tok_is(&r->t, "True") || tok_is(&r->t, "t"))
        *out = 1;
    else if (tok_is(&r->t, "false") || tok_is(&r->t, "False") || tok_is(&r->t, "f"))
        *out = 0;
    else if (r->t.kind == T_NUMBER && r->t.n == 1 && (r->t.s[0] == '0' || r->t.s[0] == '1'))
        *out = r->t.s[0] == '1';
    else
        return fail_at(r, &r->t, "true or false expected");
    return next(r);
}

static int read_enum(struct reader *r, const ProtobufCEnumDescriptor *e, int32_t *out)
{
    if (r->t.kind == T_IDENT) {
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)r->t.n, r->t.s);
        const ProtobufCEnumValue *v = protobuf_c_enum_descriptor_get_value_by_name(e, name);
        if (!v) {
            char list[300] = "";
            for (unsigned i = 0; i < e->n_values && strlen(list) < 250; i++)
                snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", e->values[i].name);
            return fail_at(r, &r->t, "'%s' is not a %s (one of %s)", name, e->short_name, list);
        }
        *out = v->value;
        return next(r);
    }
    uint64_t n;
    struct tok at = r->t;
    if (read_integer(r, 0, INT32_MIN, INT32_MAX, 0, &n) != 0)
        return -1;
    if (!protobuf_c_enum_descriptor_get_value(e, (int)(int64_t)n))
        return fail_at(r, &at, "%lld is not a value of %s", (long long)(int64_t)n, e->short_name);
    *out = (int32_t)(int64_t)n;
    return 0;
}

/* Reads one scalar of field f into dst (the field's storage or an array element). */
static int read_scalar(struct reader *r, const ProtobufCFieldDescriptor *f, void *dst)
{
    uint64_t u;
    double d;
    switch (f->type) {
    case PROTOBUF_C_TYPE_INT32: case PROTOBUF_C_TYPE_SINT32: case PROTOBUF_C_TYPE_SFIXED32:
        if (read_integer(r, 0, INT32_MIN, INT32_MAX, 0, &u))
            return -1;
        *(int32_t *)dst = (int32_t)(int64_t)u;
        return 0;
    case PROTOBUF_C_TYPE_UINT32: case PROTOBUF_C_TYPE_FIXED32:
        if (read_integer(r, 1, 0, 0, UINT32_MAX, &u))
            return -1;
        *(uint32_t *)dst = (uint32_t)u;
        return 0;
    case PROTOBUF_C_TYPE_INT64: case PROTOBUF_C_TYPE_SINT64: case PROTOBUF_C_TYPE_SFIXED64:
        if (read_integer(r, 0, INT64_MIN, INT64_MAX, 0, &u))
            return -1;
        *(int64_t *)dst = (int64_t)u;
        return 0;
    case PROTOBUF_C_TYPE_UINT64: case PROTOBUF_C_TYPE_FIXED64:
        return read_integer(r, 1, 0, 0, UINT64_MAX, (uint64_t *)dst);
    case PROTOBUF_C_TYPE_FLOAT:
        if (read_float(r, &d))
            return -1;
        *(float *)dst = (float)d;
        return 0;
    case PROTOBUF_C_TYPE_DOUBLE:
        return read_float(r, (double *)dst);
    case PROTOBUF_C_TYPE_BOOL:
        return read_bool(r, (protobuf_c_boolean *)dst);
    case PROTOBUF_C_TYPE_ENUM:
        return read_enum(r, f->descriptor, (int32_t *)dst);
    case PROTOBUF_C_TYPE_STRING: {
        char *s = read_string(r);
        if (!s)
            return -1;
        *(char **)dst = s;
        return 0;
    }
    default:
        return fail_at(r, &r->t, "field '%s': this kind of field is not read from text here", f->name);
    }
}

/* ---- messages ---- */

static int read_fields(struct reader *r, ProtobufCMessage *m, char close, int depth);

static size_t elem_size(const ProtobufCFieldDescriptor *f)
{
    switch (f->type) {
    case PROTOBUF_C_TYPE_INT64: case PROTOBUF_C_TYPE_SINT64: case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_UINT64: case PROTOBUF_C_TYPE_FIXED64:
        return 8;
    case PROTOBUF_C_TYPE_DOUBLE:
        return sizeof(double);
    case PROTOBUF_C_TYPE_BOOL:
        return sizeof(protobuf_c_boolean);
    case PROTOBUF_C_TYPE_STRING: case PROTOBUF_C_TYPE_MESSAGE:
        return sizeof(void *);
    case PROTOBUF_C_TYPE_BYTES:
        return sizeof(ProtobufCBinaryData);
    default:
        return 4;
    }
}

/* A new message of type d, or NULL. */
static ProtobufCMessage *new_message(const ProtobufCMessageDescriptor *d)
{
    ProtobufCMessage *m = malloc(d->sizeof_message);
    if (m)
        d->message_init(m);
    return m;
}

/* A message value: { fields } or < fields >, into a new message stored at *slot before it
 * is read (so that an error frees it with its parent). */
static int read_message_value(struct reader *r, const ProtobufCFieldDescriptor *f, ProtobufCMessage **slot,
                              int depth)
{
    if (depth >= GJ_PBTXT_MAX_DEPTH)
        return fail_at(r, &r->t, "messages are nested more than %d deep", GJ_PBTXT_MAX_DEPTH);
    if (!is_punct(&r->t, '{') && !is_punct(&r->t, '<'))
        return fail_at(r, &r->t, "field '%s' is a message: '{' expected, found %s", f->name, kind_name(&r->t));
    char close = r->t.s[0] == '{' ? '}' : '>';
    if (!(*slot = new_message(f->descriptor)))
        return fail_at(r, &r->t, "out of memory");
    if (next(r) != 0 || read_fields(r, *slot, close, depth + 1) != 0)
        return -1;
    return expect(r, close);
}

/* Appends one value to repeated field f of m. */
static int append_value(struct reader *r, ProtobufCMessage *m, const ProtobufCFieldDescriptor *f, int depth)
{
    size_t *n = (size_t *)((char *)m + f->quantifier_offset);
    char **arr = (char **)((char *)m + f->offset);
    size_t es = elem_size(f);
    char *grown = realloc(*arr, (*n + 1) * es);
    if (!grown)
        return fail_at(r, &r->t, "out of memory");
    *arr = grown;
    void *slot = grown + *n * es;
    memset(slot, 0, es);
    if (f->type == PROTOBUF_C_TYPE_MESSAGE) {
        (*n)++;   /* counted first: an error frees what was begun */
        return read_message_value(r, f, (ProtobufCMessage **)slot, depth);
    }
    if (read_scalar(r, f, slot) != 0)
        return -1;
    (*n)++;
    return 0;
}

/* The value(s) of a repeated field after its name: `: v`, `: [v, ...]`, `{...}`, `[{...}]`. */
static int read_repeated(struct reader *r, ProtobufCMessage *m, const ProtobufCFieldDescriptor *f, int depth)
{
    if (!is_punct(&r->t, '['))
        return append_value(r, m, f, depth);
    if (next(r) != 0)
        return -1;
    if (is_punct(&r->t, ']'))
        return next(r);
    for (;;) {
        if (append_value(r, m, f, depth) != 0)
            return -1;
        if (is_punct(&r->t, ']'))
            return next(r);
        if (expect(r, ',') != 0)
            return -1;
    }
}

/* A non-repeated field: refused when given before or when its oneof has another member. */
static int read_single(struct reader *r, ProtobufCMessage *m, const ProtobufCFieldDescriptor *f,
                       const struct tok *name, unsigned char *seen, int depth)
{
    const ProtobufCMessageDescriptor *d = m->descriptor;
    unsigned idx = (unsigned)(f - d->fields);
    if (seen[idx])
        return fail_at(r, name, "field '%s' is given more than once", f->name);
    seen[idx] = 1;
    void *dst = (char *)m + f->offset;
    if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
        uint32_t *which = (uint32_t *)((char *)m + f->quantifier_offset);
        if (*which) {
            for (unsigned i = 0; i < d->n_fields; i++)
                if (d->fields[i].id == *which)
                    return fail_at(r, name, "'%s' and '%s' are alternatives: give one of them", d->fields[i].name,
                                   f->name);
        }
        *which = f->id;
        if (f->type == PROTOBUF_C_TYPE_STRING)
            *(char **)dst = NULL;
    }
    if (f->type == PROTOBUF_C_TYPE_MESSAGE)
        return read_message_value(r, f, (ProtobufCMessage **)dst, depth);
    if (f->label == PROTOBUF_C_LABEL_OPTIONAL && f->type != PROTOBUF_C_TYPE_STRING)
        *(protobuf_c_boolean *)((char *)m + f->quantifier_offset) = 1;
    if (f->type == PROTOBUF_C_TYPE_STRING) {   /* the default string is not ours to free */
        char *s = NULL;
        if (read_scalar(r, f, &s) != 0)
            return -1;
        *(char **)dst = s;
        return 0;
    }
    return read_scalar(r, f, dst);
}

static int listed(const char *const *list, const char *msg, const char *field)
{
    size_t ml = strlen(msg);
    for (size_t i = 0; list && list[i]; i++)
        if (strncmp(list[i], msg, ml) == 0 && list[i][ml] == '.' && strcmp(list[i] + ml + 1, field) == 0)
            return 1;
    return 0;
}

static int skip_fields(struct reader *r, char close, int depth);

/* Skips one value of a field the schema does not have: a scalar, a message or a list. */
static int skip_value(struct reader *r, int depth)
{
    if (depth >= GJ_PBTXT_MAX_DEPTH)
        return fail_at(r, &r->t, "messages are nested more than %d deep", GJ_PBTXT_MAX_DEPTH);
    if (is_punct(&r->t, '{') || is_punct(&r->t, '<')) {
        char close = r->t.s[0] == '{' ? '}' : '>';
        if (next(r) != 0 || skip_fields(r, close, depth + 1) != 0)
            return -1;
        return expect(r, close);
    }
    if (is_punct(&r->t, '[')) {
        if (next(r) != 0)
            return -1;
        while (!is_punct(&r->t, ']')) {
            if (skip_value(r, depth + 1) != 0)
                return -1;
            if (!is_punct(&r->t, ']') && expect(r, ',') != 0)
                return -1;
        }
        return next(r);
    }
    if (is_punct(&r->t, '-') && next(r) != 0)
        return -1;
    if (r->t.kind == T_STRING) {
        while (r->t.kind == T_STRING)
            if (next(r) != 0)
                return -1;
        return 0;
    }
    if (r->t.kind != T_IDENT && r->t.kind != T_NUMBER)
        return fail_at(r, &r->t, "a value expected, found %s", kind_name(&r->t));
    return next(r);
}

static int skip_fields(struct reader *r, char close, int depth)
{
    while (!is_punct(&r->t, close)) {
        if (r->t.kind != T_IDENT)
            return fail_at(r, &r->t, "a field name expected, found %s", kind_name(&r->t));
        if (next(r) != 0 || (is_punct(&r->t, ':') && next(r) != 0) || skip_value(r, depth) != 0)
            return -1;
        if ((is_punct(&r->t, ',') || is_punct(&r->t, ';')) && next(r) != 0)
            return -1;
    }
    return 0;
}

/* The field named by the current token, or NULL when it is skipped (*skipped) or refused. */
static const ProtobufCFieldDescriptor *field_named(struct reader *r, const ProtobufCMessageDescriptor *d,
                                                 int *skipped)
{
    *skipped = 0;
    if (is_punct(&r->t, '['))
        return fail_at(r, &r->t, "extensions and Any ([...] field names) are not read here"), NULL;
    if (r->t.kind != T_IDENT)
        return fail_at(r, &r->t, "a field name expected, found %s", kind_name(&r->t)), NULL;
    char name[128];
    snprintf(name, sizeof name, "%.*s", (int)r->t.n, r->t.s);
    const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field_by_name(d, name);
    if (f)
        return f;
    const char *const *skip = r->opt ? r->opt->skip : NULL, *const *unsupported = r->opt ? r->opt->unsupported : NULL;
    if (listed(skip, d->name, name)) {
        *skipped = 1;
        return NULL;
    }
    if (listed(unsupported, d->name, name))
        return fail_at(r, &r->t, "'%s' is not supported by this server", name), NULL;
    return fail_at(r, &r->t, "%s has no field '%s'", d->short_name, name), NULL;
}

/* Fields until close ('}', '>', or 0 for the end of the text). */
static int read_fields(struct reader *r, ProtobufCMessage *m, char close, int depth)
{
    const ProtobufCMessageDescriptor *d = m->descriptor;
    unsigned char *seen = calloc(d->n_fields ? d->n_fields : 1, 1);
    if (!seen)
        return fail_at(r, &r->t, "out of memory");
    size_t path_len = strlen(r->path);
    int rc = 0;
    while (rc == 0 && !(close ? is_punct(&r->t, close) : r->t.kind == T_EOF)) {
        if (r->t.kind == T_EOF) {
            rc = fail_at(r, &r->t, "'%c' expected before the end of the text", close);
            break;
        }
        if (r->t.kind == T_PUNCT && !is_punct(&r->t, '[')) {
            rc = close ? fail_at(r, &r->t, "a field name or '%c' expected, found '%c'", close, r->t.s[0])
                       : fail_at(r, &r->t, "a field name expected, found '%c'", r->t.s[0]);
            break;
        }
        int skipped;
        const ProtobufCFieldDescriptor *f = field_named(r, d, &skipped);
        if (!f && !skipped) {
            rc = -1;
            break;
        }
        snprintf(r->path + path_len, sizeof r->path - path_len, "%s%.*s", path_len ? "." : "", (int)r->t.n, r->t.s);
        struct tok name = r->t;
        if ((rc = next(r)) != 0)
            break;
        int colon = is_punct(&r->t, ':');
        if (colon && (rc = next(r)) != 0)
            break;
        if (skipped)
            rc = skip_value(r, depth);
        else if (!colon && f->type != PROTOBUF_C_TYPE_MESSAGE)
            rc = fail_at(r, &name, "':' expected after '%s'", f->name);
        else if (f->label == PROTOBUF_C_LABEL_REPEATED)
            rc = read_repeated(r, m, f, depth);
        else if (is_punct(&r->t, '['))
            rc = fail_at(r, &r->t, "field '%s' takes one value, not a list", f->name);
        else
            rc = read_single(r, m, f, &name, seen, depth);
        r->path[path_len] = '\0';
        if (rc == 0 && (is_punct(&r->t, ',') || is_punct(&r->t, ';')))
            rc = next(r);
    }
    free(seen);
    return rc;
}

ProtobufCMessage *gj_pbtxt_parse(const ProtobufCMessageDescriptor *desc, const char *text, size_t len,
                                 const struct gj_pbtxt_options *opt, struct gj_error *err)
{
    struct reader r = { .text = text, .len = len, .line = 1, .col = 1, .opt = opt, .err = err };
    ProtobufCMessage *m = new_message(desc);
    if (!m)
        return gj_error_set(err, "", "out of memory"), NULL;
    if (memchr(text, '\0', len)) {
        protobuf_c_message_free_unpacked(m, NULL);
        return gj_error_set(err, "", "%s: the text holds a NUL byte", opt && opt->source ? opt->source : "text"), NULL;
    }
    if (next(&r) != 0 || read_fields(&r, m, 0, 0) != 0) {
        protobuf_c_message_free_unpacked(m, NULL);
        return NULL;
    }
    return m;
}
