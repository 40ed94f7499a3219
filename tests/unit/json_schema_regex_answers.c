/*
 * For json_schema_regex_vs_node.js: reads a JSON array of [pattern, text] pairs
 * (argv[1]) and prints, as a JSON array, what a schema {"pattern": pattern} says
 * of each text: "match", "no", or "refused: <why>".
 */
#include <stdio.h>
#include <stdlib.h>

#include "common/json_schema.h"

static json_t *answer(const json_t *pattern, const json_t *text)
{
    json_t *doc = json_pack("{sO}", "pattern", (json_t *)pattern);
    struct gj_error err = { 0 };
    struct gj_schema *s = doc ? gj_schema_compile(doc, &err) : NULL;
    json_t *a;
    if (!s)
        a = json_sprintf("refused: %s", err.message);
    else
        a = json_string(gj_schema_validate(s, text, &err) == 0 ? "match" : "no");
    gj_schema_free(s);
    json_decref(doc);
    return a;
}

int main(int argc, char **argv)
{
    json_error_t jerr;
    json_t *cases = argc == 2 ? json_load_file(argv[1], 0, &jerr) : NULL;
    if (!json_is_array(cases)) {
        fprintf(stderr, "usage: %s CASES.json (%s)\n", argv[0], argc == 2 ? jerr.text : "no file");
        return 2;
    }
    json_t *answers = json_array();
    size_t i;
    json_t *c;
    json_array_foreach(cases, i, c)
        json_array_append_new(answers, answer(json_array_get(c, 0), json_array_get(c, 1)));
    int rc = json_dumpf(answers, stdout, JSON_COMPACT) == 0 ? 0 : 1;
    json_decref(answers);
    json_decref(cases);
    return rc;
}
