/*
 * The official JSON-Schema-Test-Suite, draft 2020-12 (tests/conformance/, MIT),
 * against compute/common/json_schema.c.
 *
 * - Files of supported keywords: every group's schema compiles and every test
 *   gets the expected answer, except the deviations listed below.
 * - Files of refused keywords: every group's schema is refused when compiled.
 * - Every deviation must still happen (a fixed one fails the run until it is
 *   taken off the list), and every file of the folder is in exactly one list.
 * - An invalid answer must come with a message.
 *
 * Prints one line per file. Argument: the suite's draft2020-12 folder.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json_schema.h"

static const char *const supported_files[] = {
    "additionalProperties.json", "allOf.json", "anyOf.json", "boolean_schema.json",
    "const.json", "contains.json", "content.json", "default.json", "defs.json",
    "dependentRequired.json", "dependentSchemas.json", "enum.json",
    "exclusiveMaximum.json", "exclusiveMinimum.json", "format.json", "if-then-else.json",
    "infinite-loop-detection.json", "items.json", "maxContains.json", "maxItems.json",
    "maxLength.json", "maxProperties.json", "maximum.json", "minContains.json",
    "minItems.json", "minLength.json", "minProperties.json", "minimum.json",
    "multipleOf.json", "not.json", "oneOf.json", "pattern.json", "patternProperties.json",
    "prefixItems.json", "properties.json", "propertyNames.json", "ref.json",
    "required.json", "type.json", "uniqueItems.json",
};

/* Every group of these uses a keyword json_schema.h lists as refused. */
static const char *const refused_files[] = {
    "anchor.json",                 /* $anchor */
    "dynamicRef.json",             /* $dynamicRef, $dynamicAnchor */
    "refRemote.json",              /* remote $ref */
    "unevaluatedItems.json",       /* unevaluatedItems */
    "unevaluatedProperties.json",  /* unevaluatedProperties */
    "vocabulary.json",             /* custom meta-schemas ($schema other than 2020-12) */
};

struct deviation {
    const char *file;
    const char *group;    /* the group's description */
    const char *test;     /* NULL: the group's schema is refused; else this test's answer is wrong */
    const char *reason;
    const char *mention;  /* the refusal's message must contain this */
    int seen;
};

/* Each: why the group is refused, and what the refusal's message must say. */
#define META "a remote $ref (to the draft 2020-12 meta-schema)", "only references into this schema"
#define SUB_ID "$id below the root (an embedded resource)", "\"$id\" is supported at the root only"
#define NOT_LOCAL "a $ref relative to a base URI, not \"#...\"", "only references into this schema"
#define ANCHOR "a $ref to an anchor", "anchors are not"
#define UNEVALUATED "unevaluatedProperties", "\"unevaluatedProperties\" is not supported"
#define PROPERTY_ESCAPE "\\p{Letter}: a Unicode property escape in a pattern", \
    "Unicode property escapes (\\p{...}) are not supported"

static struct deviation deviations[] = {
    { "defs.json", "validate definition against metaschema", NULL, META, 0 },
    { "ref.json", "remote ref, containing refs itself", NULL, META, 0 },
    { "ref.json", "Recursive references between schemas", NULL, NOT_LOCAL, 0 },
    { "ref.json", "order of evaluation: $id and $ref", NULL, NOT_LOCAL, 0 },
    { "ref.json", "order of evaluation: $id and $ref on nested schema", NULL, NOT_LOCAL, 0 },
    { "ref.json", "URN ref with nested pointer ref", NULL, NOT_LOCAL, 0 },
    { "ref.json", "ref to if", NULL, NOT_LOCAL, 0 },
    { "ref.json", "ref to then", NULL, NOT_LOCAL, 0 },
    { "ref.json", "ref to else", NULL, NOT_LOCAL, 0 },
    { "ref.json", "refs with relative uris and defs", NULL, SUB_ID, 0 },
    { "ref.json", "relative refs with absolute uris and defs", NULL, SUB_ID, 0 },
    { "ref.json", "$id must be resolved against nearest parent, not just immediate parent", NULL,
      SUB_ID, 0 },
    { "ref.json", "ref with absolute-path-reference", NULL, SUB_ID, 0 },
    { "ref.json", "order of evaluation: $id and $anchor and $ref", NULL, ANCHOR, 0 },
    { "ref.json", "URN base URI with URN and anchor ref", NULL, ANCHOR, 0 },
    { "ref.json", "ref creates new scope when adjacent to keywords", NULL, UNEVALUATED, 0 },
    { "not.json", "collect annotations inside a 'not', even if collection is disabled", NULL,
      UNEVALUATED, 0 },
    { "pattern.json", "pattern with Unicode property escape requires unicode mode", NULL,
      PROPERTY_ESCAPE, 0 },
    { "patternProperties.json", "patternProperties with Unicode property escape", NULL,
      PROPERTY_ESCAPE, 0 },
};

struct tally {
    int groups, tests, passed, failed, refused, deviated;
};

static int failures;

static struct deviation *find_deviation(const char *file, const char *group, const char *test)
{
    for (size_t i = 0; i < sizeof deviations / sizeof deviations[0]; i++) {
        struct deviation *d = &deviations[i];
        if (strcmp(d->file, file) == 0 && strcmp(d->group, group) == 0 &&
            (d->test ? test && strcmp(d->test, test) == 0 : !test))
            return d;
    }
    return NULL;
}

static int listed(const char *const *list, size_t n, const char *file)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(list[i], file) == 0)
            return 1;
    return 0;
}

#define N_SUPPORTED (sizeof supported_files / sizeof supported_files[0])
#define N_REFUSED (sizeof refused_files / sizeof refused_files[0])

static void fail(const char *file, const char *group, const char *test, const char *what)
{
    failures++;
    fprintf(stderr, "FAIL %s / %s%s%s: %s\n", file, group, test ? " / " : "", test ? test : "", what);
}

/* A refusal for one of the reasons json_schema.h lists, not e.g. a malformed schema. */
static int documented_refusal(const char *message)
{
    return strstr(message, "is not supported") || strstr(message, "is supported at the root only") ||
           strstr(message, "only draft 2020-12 is supported");
}

/* Runs one group's tests against its compiled schema. */
static void run_tests(const char *file, const char *group, const struct gj_schema *s,
                      const json_t *tests, struct tally *t)
{
    size_t i;
    const json_t *test;
    json_array_foreach(tests, i, test) {
        const char *name = json_string_value(json_object_get(test, "description"));
        int expected = json_is_true(json_object_get(test, "valid"));
        struct gj_error err = { 0 };
        int valid = gj_schema_validate(s, json_object_get(test, "data"), &err) == 0;
        struct deviation *d = find_deviation(file, group, name);
        t->tests++;
        if (!valid && !err.message[0])
            fail(file, group, name, "invalid without a message");
        if (d) {
            d->seen = 1;
            t->deviated += valid != expected;
            if (valid == expected)
                fail(file, group, name, "listed as a deviation but now right: take it off the list");
        } else if (valid == expected) {
            t->passed++;
        } else {
            char what[700];
            snprintf(what, sizeof what, "expected %s, got %s (%s)", expected ? "valid" : "invalid",
                     valid ? "valid" : "invalid", err.message);
            fail(file, group, name, what);
            t->failed++;
        }
    }
}

static void run_group(const char *file, int refused_file, const json_t *g, struct tally *t)
{
    const char *group = json_string_value(json_object_get(g, "description"));
    const json_t *tests = json_object_get(g, "tests");
    struct gj_error err = { 0 };
    struct gj_schema *s = gj_schema_compile(json_object_get(g, "schema"), &err);
    struct deviation *d = find_deviation(file, group, NULL);
    t->groups++;
    if (refused_file || d) {
        if (d)
            d->seen = 1;
        if (s)
            fail(file, group, NULL, "expected the schema to be refused, but it compiled");
        else if (err.status != 500 || !(d ? strstr(err.message, d->mention) != NULL
                                          : documented_refusal(err.message)))
            fail(file, group, NULL, err.message[0] ? err.message : "refused without a message");
        else
            t->refused++;
        t->tests += (int)json_array_size(tests);
        gj_schema_free(s);
        return;
    }
    if (!s) {
        fail(file, group, NULL, err.message);
        t->tests += (int)json_array_size(tests);
        t->failed += (int)json_array_size(tests);
        return;
    }
    run_tests(file, group, s, tests, t);
    gj_schema_free(s);
}

static void run_file(const char *dir, const char *file, int refused_file, struct tally *all)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    json_error_t jerr;
    json_t *groups = json_load_file(path, JSON_ALLOW_NUL, &jerr);
    if (!groups) {
        fail(file, "(file)", NULL, jerr.text);
        return;
    }
    struct tally t = { 0 };
    size_t i;
    const json_t *g;
    json_array_foreach(groups, i, g)
        run_group(file, refused_file, g, &t);
    json_decref(groups);
    printf("%-30s %-9s %6d %6d %6d %6d %8d %10d\n", file, refused_file ? "refused" : "supported",
           t.groups, t.tests, t.passed, t.failed, t.refused, t.deviated);
    all->groups += t.groups;
    all->tests += t.tests;
    all->passed += t.passed;
    all->failed += t.failed;
    all->refused += t.refused;
    all->deviated += t.deviated;
}

/* Every file of the folder is in one list, and every listed file exists. */
static void check_lists(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    size_t found = 0;
    if (!d) {
        fail(dir, "(folder)", NULL, "cannot be opened");
        return;
    }
    while ((e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name);
        if (n < 5 || strcmp(e->d_name + n - 5, ".json") != 0)
            continue;
        found++;
        int a = listed(supported_files, N_SUPPORTED, e->d_name);
        int b = listed(refused_files, N_REFUSED, e->d_name);
        if (a + b != 1)
            fail(e->d_name, "(file)", NULL, "must be in exactly one of the two lists");
    }
    closedir(d);
    if (found != N_SUPPORTED + N_REFUSED)
        fail(dir, "(folder)", NULL, "a listed file is missing");
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s SUITE/draft2020-12\n", argv[0]);
        return 2;
    }
    check_lists(argv[1]);
    struct tally all = { 0 };
    printf("%-30s %-9s %6s %6s %6s %6s %8s %10s\n", "file", "keywords", "groups", "tests",
           "passed", "failed", "refused", "known-wrong");
    for (size_t i = 0; i < N_SUPPORTED; i++)
        run_file(argv[1], supported_files[i], 0, &all);
    for (size_t i = 0; i < N_REFUSED; i++)
        run_file(argv[1], refused_files[i], 1, &all);
    printf("%-30s %-9s %6d %6d %6d %6d %8d %10d\n", "total", "", all.groups, all.tests, all.passed,
           all.failed, all.refused, all.deviated);
    printf("\nKnown deviations (refused: the group's schema is refused at compile):\n");
    for (size_t i = 0; i < sizeof deviations / sizeof deviations[0]; i++) {
        const struct deviation *d = &deviations[i];
        printf("  %s / %s%s%s: %s — %s\n", d->file, d->group, d->test ? " / " : "",
               d->test ? d->test : "", d->test ? "wrong answer" : "refused", d->reason);
        if (!d->seen)
            fail(d->file, d->group, d->test, "listed as a deviation but not in the suite");
    }
    printf("\n%d failure(s)\n", failures);
    return failures ? 1 : 0;
}
