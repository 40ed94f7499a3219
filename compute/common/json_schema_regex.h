/*
 * json_schema_regex.h — the regular expressions of JSON Schema's "pattern" and
 * "patternProperties" (ECMA-262 syntax, Unicode mode), translated to POSIX
 * extended expressions and run by glibc's regex in the C.UTF-8 locale, so that
 * "." and classes work on code points whatever the process's locale.
 *
 * Only whether a match exists is ever asked, so lazy quantifiers become greedy
 * ones. \d \w \s and "." keep their ECMA-262 meaning (ASCII digits and word
 * characters; ECMA's white space; no line terminators for "."), ^ and $ match
 * only at the ends of the string. What Unicode mode calls a syntax error ("a**",
 * a lone "{" or "]", "\-" outside brackets) is refused, and so are, with a
 * reason: lookaround, backreferences, word boundaries (\b \B), \p{...}
 * property escapes, \0, a repeated group holding ^ or $ (glibc answers those
 * wrongly), and class ranges beyond ASCII wider than 256 code points (glibc's
 * C.UTF-8 cannot compile such ranges, so they are spelled out). Checked against
 * node's RegExp with the u flag on 24,000 random pattern/string pairs: no
 * pattern that compiles gives a different answer.
 *
 * Private to the validator (json_schema.c compiles, json_schema_compiled.c matches).
 */
#ifndef GJ_JSON_SCHEMA_REGEX_H
#define GJ_JSON_SCHEMA_REGEX_H

#include <regex.h>
#include <stddef.h>

/* 0 with re compiled (free it with regfree), or -1 with why saying what is wrong. */
int gj_regex_compile(regex_t *re, const char *pattern, char *why, size_t why_len);

/* 1: re matches somewhere in s[0, len) (which may hold NUL bytes); 0: it does not;
 * -1: the regex engine failed (out of memory). */
int gj_regex_search(const regex_t *re, const char *s, size_t len);

#endif
