/* ECMA-262 patterns (JSON Schema's dialect) as POSIX extended regexes under C.UTF-8. */
#include <locale.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json_schema_regex.h"

#define MAX_WIDE 512        /* non-ASCII code points one bracket expression may list */
#define MAX_WIDE_RANGE 256  /* non-ASCII code points one range may span */
#define MAX_GROUPS 64       /* nested groups */

static locale_t utf8_locale;
static pthread_once_t utf8_once = PTHREAD_ONCE_INIT;

static void utf8_locale_init(void)
{
    /* Collation too: glibc reads ranges and multibyte brackets through it. */
    utf8_locale = newlocale(LC_CTYPE_MASK | LC_COLLATE_MASK, "C.UTF-8", (locale_t)0);
}

/* ECMA-262's WhiteSpace and LineTerminator: what \s matches. */
static const uint32_t ecma_space[] = {
    0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x20, 0xA0, 0x1680, 0x2000, 0x2001, 0x2002, 0x2003,
    0x2004, 0x2005, 0x2006, 0x2007, 0x2008, 0x2009, 0x200A, 0x2028, 0x2029, 0x202F,
    0x205F, 0x3000, 0xFEFF,
};
/* What "." does not match. */
static const uint32_t ecma_line_end[] = { 0x0A, 0x0D, 0x2028, 0x2029 };

/* A bracket expression being built: ASCII members as a table, the others listed. */
struct cls {
    unsigned char ascii[128];
    uint32_t wide[MAX_WIDE];
    size_t n_wide;
};

/* One pattern element: a code point or a class escape (\d \w \s, negated: \D ...). */
enum atom_kind { ATOM_CP, ATOM_DIGIT, ATOM_WORD, ATOM_SPACE };
struct atom {
    enum atom_kind kind;
    int negated;
    uint32_t cp;
};

struct tr {
    const char *p;      /* next unread byte of the ECMA pattern */
    FILE *out;          /* the POSIX pattern being written */
    int can_repeat;     /* what came last may take a quantifier */
    int last_anchored;  /* what came last is a group holding ^ or $ */
    int depth;          /* open groups */
    unsigned char anchored[MAX_GROUPS];   /* per open group: it holds ^ or $ */
    char *why;
    size_t why_len;
};

__attribute__((format(printf, 2, 3)))
static int refuse(struct tr *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->why, t->why_len, fmt, ap);
    va_end(ap);
    return -1;
}

static void emit_utf8(FILE *out, uint32_t cp)
{
    if (cp < 0x80) {
        fputc((int)cp, out);
    } else if (cp < 0x800) {
        fputc(0xC0 | (int)(cp >> 6), out);
        fputc(0x80 | (int)(cp & 0x3F), out);
    } else if (cp < 0x10000) {
        fputc(0xE0 | (int)(cp >> 12), out);
        fputc(0x80 | (int)((cp >> 6) & 0x3F), out);
        fputc(0x80 | (int)(cp & 0x3F), out);
    } else {
        fputc(0xF0 | (int)(cp >> 18), out);
        fputc(0x80 | (int)((cp >> 12) & 0x3F), out);
        fputc(0x80 | (int)((cp >> 6) & 0x3F), out);
        fputc(0x80 | (int)(cp & 0x3F), out);
    }
}

/* Reads the UTF-8 code point at t->p. */
static int next_cp(struct tr *t, uint32_t *cp)
{
    const unsigned char *s = (const unsigned char *)t->p;
    int n = s[0] < 0x80 ? 1 : (s[0] & 0xE0) == 0xC0 ? 2 : (s[0] & 0xF0) == 0xE0 ? 3
          : (s[0] & 0xF8) == 0xF0 ? 4 : 0;
    if (!n)
        return refuse(t, "the pattern is not valid UTF-8");
    uint32_t v = n == 1 ? s[0] : s[0] & (0x7Fu >> n);
    for (int i = 1; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return refuse(t, "the pattern is not valid UTF-8");
        v = v << 6 | (s[i] & 0x3F);
    }
    *cp = v;
    t->p += n;
    return 0;
}

/* A code point outside brackets, escaped where POSIX gives it a meaning. */
static int emit_literal(struct tr *t, uint32_t cp)
{
    if (cp == 0)
        return refuse(t, "a NUL character in a pattern is not supported");
    if (cp < 0x80 && strchr("\\.[]()*+?{}|^$", (int)cp))
        fputc('\\', t->out);
    emit_utf8(t->out, cp);
    return 0;
}

static int parse_hex(struct tr *t, int digits, uint32_t *cp)
{
    uint32_t v = 0;
    for (int i = 0; i < digits; i++) {
        char c = t->p[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
              : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0)
            return refuse(t, "a \\x or \\u escape needs %d hexadecimal digits", digits);
        v = v * 16 + (uint32_t)d;
    }
    t->p += digits;
    *cp = v;
    return 0;
}

/* \uHHHH (a surrogate pair as two of them) or \u{H...}; t->p is after the 'u'. */
static int parse_unicode_escape(struct tr *t, uint32_t *cp)
{
    if (*t->p == '{') {
        const char *end = strchr(t->p, '}');
        int digits = end ? (int)(end - t->p - 1) : 0;
        t->p++;
        if (digits < 1 || digits > 6 || parse_hex(t, digits, cp) || *cp > 0x10FFFF)
            return refuse(t, "a malformed \\u{...} escape");
        t->p++;
        return 0;
    }
    if (parse_hex(t, 4, cp))
        return -1;
    if (*cp >= 0xD800 && *cp <= 0xDBFF && t->p[0] == '\\' && t->p[1] == 'u') {
        const char *save = t->p;
        uint32_t lo = 0;
        t->p += 2;
        if (parse_hex(t, 4, &lo) == 0 && lo >= 0xDC00 && lo <= 0xDFFF) {
            *cp = 0x10000 + ((*cp - 0xD800) << 10) + (lo - 0xDC00);
            return 0;
        }
        t->p = save;
    }
    if (*cp >= 0xD800 && *cp <= 0xDFFF)
        return refuse(t, "a lone surrogate \\u%04X is not a character", (unsigned)*cp);
    return 0;
}

/* The escape after a backslash; t->p is past the backslash. */
static int parse_escape(struct tr *t, int in_class, struct atom *a)
{
    char c = *t->p;
    if (!c)
        return refuse(t, "the pattern ends with a lone backslash");
    t->p++;
    *a = (struct atom){ ATOM_CP, c >= 'A' && c <= 'Z', 0 };
    switch (c) {
    case 'd': case 'D': a->kind = ATOM_DIGIT; return 0;
    case 'w': case 'W': a->kind = ATOM_WORD; return 0;
    case 's': case 'S': a->kind = ATOM_SPACE; return 0;
    case 'b': case 'B':
        if (in_class && c == 'b')
            return a->negated = 0, a->cp = 8, 0;   /* backspace, inside brackets */
        return refuse(t, "word boundaries (\\b, \\B) are not supported (POSIX's differ from "
                      "ECMA-262's beyond ASCII)");
    case 't': a->cp = '\t'; break;
    case 'n': a->cp = '\n'; break;
    case 'v': a->cp = '\v'; break;
    case 'f': a->cp = '\f'; break;
    case 'r': a->cp = '\r'; break;
    case 'x': return a->negated = 0, parse_hex(t, 2, &a->cp);
    case 'u': return a->negated = 0, parse_unicode_escape(t, &a->cp);
    case 'p': case 'P': return refuse(t, "Unicode property escapes (\\p{...}) are not supported");
    case 'k': return refuse(t, "named backreferences (\\k<...>) are not supported");
    case 'c':
        if ((*t->p | 0x20) < 'a' || (*t->p | 0x20) > 'z')
            return refuse(t, "\\c must be followed by a letter");
        a->cp = (uint32_t)(*t->p++ % 32);
        break;
    default:
        if (c >= '0' && c <= '9')
            return refuse(t, c == '0' ? "\\0 (NUL) is not supported"
                                      : "backreferences (\\1 ... \\9) are not supported");
        if ((unsigned char)c >= 0x80 || !strchr(in_class ? "^$\\.*+?()[]{}|/-" : "^$\\.*+?()[]{}|/", c))
            return refuse(t, "unknown escape \\%c", (unsigned char)c < 0x80 ? c : '?');
        a->cp = (unsigned char)c;
    }
    a->negated = 0;
    return 0;
}

static int cls_add(struct tr *t, struct cls *c, uint32_t cp)
{
    if (cp < 128) {
        c->ascii[cp] = 1;
        return 0;
    }
    if (c->n_wide == MAX_WIDE)
        return refuse(t, "a [...] lists more than %d characters beyond ASCII", MAX_WIDE);
    c->wide[c->n_wide++] = cp;
    return 0;
}

/* glibc cannot compile ranges beyond ASCII under C.UTF-8: those are spelled out. */
static int cls_add_range(struct tr *t, struct cls *c, uint32_t lo, uint32_t hi)
{
    if (lo > hi)
        return refuse(t, "a range in [...] is out of order");
    if (hi >= 128 && hi - (lo > 128 ? lo : 128) >= MAX_WIDE_RANGE)
        return refuse(t, "a range beyond ASCII spans more than %d characters", MAX_WIDE_RANGE);
    for (uint32_t cp = lo; cp <= hi; cp++)
        if (cls_add(t, c, cp))
            return -1;
    return 0;
}

static void cls_clear(struct cls *c)
{
    memset(c->ascii, 0, sizeof c->ascii);
    c->n_wide = 0;
}

static int cls_has(const struct cls *c, uint32_t cp)
{
    if (cp < 128)
        return c->ascii[cp];
    for (size_t i = 0; i < c->n_wide; i++)
        if (c->wide[i] == cp)
            return 1;
    return 0;
}

/* Keeps the members of a that are (keep_if_in_b) or are not in b. */
static void cls_filter(struct cls *a, const struct cls *b, int keep_if_in_b)
{
    size_t n = 0;
    for (int i = 0; i < 128; i++)
        a->ascii[i] = a->ascii[i] && b->ascii[i] == keep_if_in_b;
    for (size_t i = 0; i < a->n_wide; i++)
        if (cls_has(b, a->wide[i]) == keep_if_in_b)
            a->wide[n++] = a->wide[i];
    a->n_wide = n;
}

/* Adds a code point or the members of \d \w \s (the positive escape: a->negated is
 * the caller's to handle). */
static int cls_add_atom(struct tr *t, struct cls *c, const struct atom *a)
{
    if (a->kind == ATOM_CP)
        return cls_add(t, c, a->cp);
    if (a->kind == ATOM_DIGIT)
        return cls_add_range(t, c, '0', '9');
    if (a->kind == ATOM_WORD)
        return cls_add_range(t, c, '0', '9') || cls_add_range(t, c, 'A', 'Z') ||
               cls_add_range(t, c, 'a', 'z') || cls_add(t, c, '_');
    for (size_t i = 0; i < sizeof ecma_space / sizeof ecma_space[0]; i++)
        if (cls_add(t, c, ecma_space[i]))
            return -1;
    return 0;
}

/* ASCII members other than "]^-[" as runs ("a-z"); 1 when it wrote any. */
static int emit_ascii_runs(FILE *out, const unsigned char *ascii)
{
    int any = 0;
    for (int i = 1; i < 128; i++) {
        if (!ascii[i] || strchr("]^-[", i))
            continue;
        int j = i;
        while (j + 1 < 128 && ascii[j + 1] && !strchr("]^-[", j + 1))
            j++;
        fputc(i, out);
        if (j - i >= 2) {
            fputc('-', out);
            fputc(j, out);
        } else {
            for (int k = i + 1; k <= j; k++)
                fputc(k, out);
        }
        i = j;
        any = 1;
    }
    return any;
}

/* A POSIX bracket expression: "]" first, "[" where no ":.=" can follow it, "^" not
 * first, "-" last. */
static int emit_class(struct tr *t, const struct cls *c, int negated)
{
    size_t members = c->n_wide;
    for (int i = 1; i < 128; i++)
        members += c->ascii[i];
    if (members == 0) {
        fputs(negated ? "." : "(\\b\\B)", t->out);   /* [^] is anything; [] nothing */
        return 0;
    }
    if (!negated && members == 1 && c->ascii['^']) {
        fputs("\\^", t->out);
        return 0;
    }
    fputs(negated ? "[^" : "[", t->out);
    int emitted = c->ascii[']'];
    if (emitted)
        fputc(']', t->out);
    emitted |= emit_ascii_runs(t->out, c->ascii);
    for (size_t i = 0; i < c->n_wide; i++)
        emit_utf8(t->out, c->wide[i]);
    emitted |= c->n_wide > 0;
    if (c->ascii['[']) {
        fputc('[', t->out);
        emitted = 1;
    }
    int dash = c->ascii['-'];
    if (c->ascii['^']) {
        fputs(!emitted && dash ? "-^" : "^", t->out);
        dash = dash && emitted;
    }
    if (dash)
        fputc('-', t->out);
    fputc(']', t->out);
    return 0;
}

static int class_atom(struct tr *t, struct atom *a)
{
    if (*t->p == '\\') {
        t->p++;
        return parse_escape(t, 1, a);
    }
    *a = (struct atom){ ATOM_CP, 0, 0 };
    return next_cp(t, &a->cp);
}

/* \D \W \S inside [...]: the class becomes the complement of what all of them leave
 * out, less its other members; *excluded holds that common part. */
static int class_add_negated(struct tr *t, struct cls *excluded, int first, const struct atom *a)
{
    struct cls members;
    struct atom positive = *a;
    positive.negated = 0;
    cls_clear(&members);
    if (cls_add_atom(t, &members, &positive))
        return -1;
    if (first)
        *excluded = members;
    else
        cls_filter(excluded, &members, 1);
    return 0;
}

/* One member of [...]: a code point, a range, or a class escape. */
static int class_member(struct tr *t, struct cls *c, struct cls *excluded, int *n_negated)
{
    struct atom lo, hi;
    if (class_atom(t, &lo))
        return -1;
    if (t->p[0] == '-' && t->p[1] && t->p[1] != ']') {
        t->p++;
        if (class_atom(t, &hi))
            return -1;
        if (lo.kind != ATOM_CP || hi.kind != ATOM_CP)
            return refuse(t, "a class escape cannot bound a range in [...]");
        return cls_add_range(t, c, lo.cp, hi.cp);
    }
    if (lo.negated)
        return class_add_negated(t, excluded, (*n_negated)++ == 0, &lo);
    return cls_add_atom(t, c, &lo);
}

/* [...]; t->p is past the '['. [\s\S] is anything. */
static int parse_class(struct tr *t)
{
    struct cls c, excluded;
    int n_negated = 0;
    cls_clear(&c);
    cls_clear(&excluded);
    int negated = *t->p == '^';
    t->p += negated;
    while (*t->p != ']') {
        if (!*t->p)
            return refuse(t, "a '[' is not closed");
        if (class_member(t, &c, &excluded, &n_negated))
            return -1;
    }
    t->p++;
    if (!n_negated)
        return emit_class(t, &c, negated);
    cls_filter(&excluded, &c, 0);
    return emit_class(t, &excluded, !negated);
}

static int emit_escape_class(struct tr *t, const struct atom *a)
{
    struct cls c;
    cls_clear(&c);
    struct atom positive = *a;
    positive.negated = 0;
    return cls_add_atom(t, &c, &positive) || emit_class(t, &c, a->negated);
}

static int escape_outside_class(struct tr *t)
{
    struct atom a;
    if (parse_escape(t, 0, &a))
        return -1;
    return a.kind == ATOM_CP ? emit_literal(t, a.cp) : emit_escape_class(t, &a);
}

static int emit_dot(struct tr *t)
{
    struct cls c;
    cls_clear(&c);
    for (size_t i = 0; i < sizeof ecma_line_end / sizeof ecma_line_end[0]; i++)
        cls_add(t, &c, ecma_line_end[i]);
    return emit_class(t, &c, 1);
}

/* A quantifier of len bytes at t->p. Only whether a match exists is asked, so a lazy
 * one ("*?") is written greedy: it matches where the greedy one does. */
static int quantifier(struct tr *t, size_t len)
{
    if (!t->can_repeat)
        return refuse(t, "a quantifier with nothing to repeat");
    if (t->last_anchored)   /* glibc lets "(^a){2}" match "aa" */
        return refuse(t, "a repeated group holding ^ or $ is not supported");
    fwrite(t->p, 1, len, t->out);
    t->p += len;
    if (*t->p == '?')
        t->p++;
    t->can_repeat = 0;
    return 0;
}

/* {n}, {n,}, {n,m}; any other '{' is a syntax error in Unicode mode. */
static int brace(struct tr *t)
{
    const char *q = t->p + 1;
    size_t digits = strspn(q, "0123456789");
    q += digits;
    if (digits && *q == ',')
        q += 1 + strspn(q + 1, "0123456789");
    if (digits && *q == '}')
        return quantifier(t, (size_t)(q + 1 - t->p));
    return refuse(t, "a '{' that does not start a quantifier must be escaped (\\{)");
}

static int group_open(struct tr *t)
{
    const char *p = t->p;
    if (t->depth == MAX_GROUPS)
        return refuse(t, "groups nest deeper than %d", MAX_GROUPS);
    t->anchored[t->depth++] = 0;
    if (p[1] != '?') {
        t->p++;
    } else if (p[2] == ':') {
        t->p += 3;
    } else if (p[2] == '<' && p[3] != '=' && p[3] != '!') {
        const char *end = strchr(p + 3, '>');
        if (!end)
            return refuse(t, "a named group \"(?<\" is not closed");
        t->p = end + 1;
    } else if (p[2] == '=' || p[2] == '!' || p[2] == '<') {
        return refuse(t, "lookahead and lookbehind ((?= (?! (?<= (?<!) are not supported");
    } else {
        return refuse(t, "unknown group syntax after \"(?\"");
    }
    fputc('(', t->out);
    return 0;
}

static int group_close(struct tr *t)
{
    if (t->depth == 0)
        return refuse(t, "a ')' closes no group");
    int anchored = t->anchored[--t->depth];
    if (t->depth)
        t->anchored[t->depth - 1] |= anchored;
    t->p++;
    fputc(')', t->out);
    t->last_anchored = anchored;
    return 0;
}

/* glibc's ^ and $ also match next to a newline inside the string, even without
 * REG_NEWLINE; its \` and \' match only at the ends, as ECMA-262's ^ and $ do. */
static int anchor(struct tr *t, char c)
{
    if (t->depth)
        t->anchored[t->depth - 1] = 1;
    t->p++;
    fputs(c == '^' ? "\\`" : "\\'", t->out);
    return 0;
}

/* ECMA-262 in Unicode mode, as JSON Schema reads patterns: what it calls a syntax
 * error ("a**", a lone "{") is refused rather than guessed at. */
static int translate(struct tr *t)
{
    while (*t->p) {
        char c = *t->p;
        uint32_t cp;
        int rc = 0, atom = 1;
        switch (c) {
        case '\\': t->p++; rc = escape_outside_class(t); break;
        case '[': t->p++; rc = parse_class(t); break;
        case '(': rc = group_open(t); atom = 0; break;
        case ')': rc = group_close(t); break;
        case '.': t->p++; rc = emit_dot(t); break;
        case '{': rc = brace(t); atom = 0; break;
        case '*': case '+': case '?': rc = quantifier(t, 1); atom = 0; break;
        case '}': case ']': rc = refuse(t, "a lone '%c' must be escaped (\\%c)", c, c); break;
        case '^': case '$': rc = anchor(t, c); atom = 0; break;
        case '|': t->p++; fputc(c, t->out); atom = 0; break;
        default: rc = next_cp(t, &cp) || emit_literal(t, cp);
        }
        if (rc)
            return -1;
        if (c != '{' && c != '*' && c != '+' && c != '?') {
            t->can_repeat = atom;
            t->last_anchored &= c == ')';
        }
    }
    return t->depth ? refuse(t, "a '(' is not closed") : 0;
}

static int compile_ere(regex_t *re, const char *ere, char *why, size_t why_len)
{
    locale_t old = uselocale(utf8_locale);
    int rc = regcomp(re, ere, REG_EXTENDED | REG_NOSUB);
    uselocale(old);
    if (rc == 0)
        return 0;
    char what[128];
    regerror(rc, re, what, sizeof what);
    snprintf(why, why_len, "not a valid regular expression (%s)", what);
    return -1;
}

int gj_regex_compile(regex_t *re, const char *pattern, char *why, size_t why_len)
{
    pthread_once(&utf8_once, utf8_locale_init);
    if (!utf8_locale) {
        snprintf(why, why_len, "the C.UTF-8 locale is not available");
        return -1;
    }
    char *ere = NULL;
    size_t ere_len = 0;
    FILE *out = open_memstream(&ere, &ere_len);
    if (!out) {
        snprintf(why, why_len, "out of memory");
        return -1;
    }
    struct tr t = { .p = pattern, .out = out, .why = why, .why_len = why_len };
    int rc = translate(&t);
    if (fclose(out) != 0 && rc == 0) {
        snprintf(why, why_len, "out of memory");
        rc = -1;
    }
    if (rc == 0)
        rc = compile_ere(re, ere, why, why_len);
    free(ere);
    return rc;
}

int gj_regex_search(const regex_t *re, const char *s, size_t len)
{
    regmatch_t m = { .rm_so = 0, .rm_eo = (regoff_t)len };
    locale_t old = uselocale(utf8_locale);
    int rc = regexec(re, s, 1, &m, REG_STARTEND);
    uselocale(old);
    return rc == 0 ? 1 : rc == REG_NOMATCH ? 0 : -1;
}
