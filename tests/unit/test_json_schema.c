/* json_schema.c: the JSON Schema (draft 2020-12) every kind's params go through at submit. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "common/gj_kind.h"
#include "common/json_schema.h"

static const char schema_text[] =
    "{\"type\":\"object\",\"additionalProperties\":false,\"required\":[\"geometry\"],"
    "\"properties\":{"
    " \"algorithm\":{\"enum\":[\"fbp\",\"sart\"]},"
    " \"iterations\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":1000},"
    " \"relaxation\":{\"type\":\"number\",\"exclusiveMinimum\":0},"
    " \"geometry\":{\"type\":\"object\",\"properties\":{"
    "   \"detector\":{\"type\":\"object\",\"required\":[\"cols\"],\"properties\":{"
    "     \"cols\":{\"type\":\"integer\",\"minimum\":1}}},"
    "   \"angles_deg\":{\"anyOf\":[{\"type\":\"array\",\"items\":{\"type\":\"number\"},\"minItems\":1},"
    "                   {\"type\":\"object\",\"required\":[\"count\"]}]}}}}}";

/* 0 or -1 as gj_schema_check says; err filled. */
static int check_with(const char *schema_json, const char *value_json, struct gj_error *err)
{
    json_t *schema = json_loads(schema_json, JSON_DECODE_ANY, NULL);
    json_t *value = json_loads(value_json, JSON_DECODE_ANY, NULL);
    assert_non_null(schema);
    assert_non_null(value);
    memset(err, 0, sizeof *err);
    int rc = gj_schema_check(schema, value, err);
    if (rc)
        assert_int_equal(err->status, 422);
    json_decref(schema);
    json_decref(value);
    return rc;
}

static int check(const char *value_text, struct gj_error *err)
{
    return check_with(schema_text, value_text, err);
}

static void accepts_valid(void **state)
{
    (void)state;
    struct gj_error err;
    assert_int_equal(check("{\"geometry\":{\"detector\":{\"cols\":363},\"angles_deg\":[0,1]},"
                           "\"algorithm\":\"fbp\",\"iterations\":3.0,\"relaxation\":0.5}", &err), 0);
}

static void names_nested_field(void **state)
{
    (void)state;
    struct gj_error err;
    assert_int_equal(check("{\"geometry\":{\"detector\":{\"cols\":0}}}", &err), -1);
    assert_string_equal(err.field, "geometry.detector.cols");
    assert_non_null(strstr(err.message, "at least 1"));
    assert_int_equal(err.status, 422);
}

static void rejects_unknown_field_and_missing(void **state)
{
    (void)state;
    struct gj_error err;
    assert_int_equal(check("{\"geometry\":{},\"colour\":1}", &err), -1);
    assert_string_equal(err.field, "colour");
    assert_int_equal(check("{}", &err), -1);
    assert_string_equal(err.field, "geometry");
    assert_int_equal(check("{\"geometry\":{\"detector\":{}}}", &err), -1);
    assert_string_equal(err.field, "geometry.detector.cols");
}

static void rejects_wrong_types_and_enum(void **state)
{
    (void)state;
    struct gj_error err;
    assert_int_equal(check("{\"geometry\":{},\"iterations\":2.5}", &err), -1);
    assert_string_equal(err.field, "iterations");
    assert_int_equal(check("{\"geometry\":{},\"algorithm\":\"art\"}", &err), -1);
    assert_non_null(strstr(err.message, "fbp, sart"));
    assert_int_equal(check("{\"geometry\":{},\"relaxation\":0}", &err), -1);
    assert_int_equal(check("{\"geometry\":{\"angles_deg\":[1,\"x\"]}}", &err), -1);
    assert_int_equal(check("{\"geometry\":{\"angles_deg\":{\"start\":0}}}", &err), -1);
    assert_int_equal(check("{\"geometry\":{\"angles_deg\":{\"count\":5}}}", &err), 0);
}

static void noop_kind_validates_inputs(void **state)
{
    (void)state;
    const struct gj_kind *noop = gj_kind_find("noop");
    assert_non_null(noop);
    json_t *params = json_loads("{\"sleep_ms\":1}", 0, NULL);
    struct gj_input bad[] = { { "bogus", NULL, 3 } };
    struct gj_job job = { "noop", params, bad, 1 };
    struct gj_error err = { 0 };
    assert_int_equal(gj_kind_validate(noop, &job, &err), -1);
    assert_non_null(strstr(err.message, "bogus"));
    struct gj_input good[] = { { "input", NULL, 3 }, { "input.2", NULL, 4 } };
    job.inputs = good;
    job.n_inputs = 2;
    assert_int_equal(gj_kind_validate(noop, &job, &err), 0);
    json_decref(params);
}


/* ---- compiling: a kind can never ship a schema whose constraints are ignored ---- */

static void every_kind_schema_compiles(void **state)
{
    (void)state;
    assert_true(gj_kind_count() > 0);
    for (size_t i = 0; i < gj_kind_count(); i++) {
        const struct gj_kind *k = gj_kind_at(i);
        json_error_t jerr;
        json_t *doc = json_loads(k->params_schema, 0, &jerr);
        if (!doc)
            fail_msg("kind %s: params_schema does not parse: %s", k->name, jerr.text);
        struct gj_error err = { 0 };
        struct gj_schema *s = gj_schema_compile(doc, &err);
        if (!s)
            fail_msg("kind %s: params_schema refused: %s", k->name, err.message);
        gj_schema_free(s);
        json_decref(doc);
    }
}

/* A kind's schema is compiled once and kept: the same compiled form at every submit, all of
 * them at start-up; a refused schema is the service's fault (500, naming the kind), at
 * start-up and at every submit of that kind. */
static void kind_schema_compiled_once(void **state)
{
    (void)state;
    struct gj_error err = { 0 };
    assert_int_equal(gj_kind_schemas_compile(&err), 0);
    for (size_t i = 0; i < gj_kind_count(); i++) {
        const struct gj_schema *s = gj_kind_schema(gj_kind_at(i), &err);
        assert_non_null(s);
        assert_ptr_equal(gj_kind_schema(gj_kind_at(i), &err), s);
    }
    static const struct gj_kind bad = { .name = "misspelt",
                                        .params_schema = "{\"type\":\"object\",\"maxLenght\":3}" };
    assert_null(gj_kind_schema(&bad, &err));
    assert_int_equal(err.status, 500);
    assert_non_null(strstr(err.message, "misspelt"));
    assert_non_null(strstr(err.message, "maxLenght"));
    json_t *params = json_object();
    struct gj_job job = { "misspelt", params, NULL, 0 };
    gj_error_clear(&err);
    assert_int_equal(gj_kind_validate(&bad, &job, &err), -1);
    assert_int_equal(err.status, 500);
    json_decref(params);
}

/* Compiles text; returns the refusal message ("" when it compiled). */
static const char *refusal(const char *text, struct gj_error *err)
{
    json_t *doc = json_loads(text, JSON_DECODE_ANY, NULL);
    assert_non_null(doc);
    memset(err, 0, sizeof *err);
    struct gj_schema *s = gj_schema_compile(doc, err);
    if (s) {
        gj_schema_free(s);
        err->message[0] = 0;
    } else {
        assert_int_equal(err->status, 500);
    }
    json_decref(doc);
    return err->message;
}

static void refuses_what_it_does_not_implement(void **state)
{
    (void)state;
    struct gj_error err;
    static const struct { const char *schema, *field, *says; } cases[] = {
        { "{\"properties\":{\"a\":{\"maxLenght\":3}}}", "#/properties/a", "unknown keyword \"maxLenght\"" },
        { "{\"unevaluatedProperties\":false}", "#", "\"unevaluatedProperties\" is not supported" },
        { "{\"items\":{\"$dynamicRef\":\"#x\"}}", "#/items", "dynamic references" },
        { "{\"definitions\":{}}", "#", "use $defs" },
        { "{\"additionalItems\":false}", "#", "use prefixItems and items" },
        { "{\"$ref\":\"other.json#/x\"}", "#/$ref", "only references into this schema" },
        { "{\"$ref\":\"#foo\"}", "#/$ref", "anchors are not" },
        { "{\"$ref\":\"#/$defs/missing\"}", "#/$ref", "does not name a schema" },
        { "{\"enum\":[{}],\"$ref\":\"#/enum/0\"}", "#/$ref", "does not name a schema" },
        { "{\"$defs\":{\"a\":{\"$id\":\"x.json\"}}}", "#/$defs/a", "\"$id\" is supported at the root only" },
        { "{\"$schema\":\"http://json-schema.org/draft-07/schema#\"}", "#/$schema", "only draft 2020-12" },
        { "{\"minLength\":-1}", "#/minLength", "non-negative integer" },
        { "{\"multipleOf\":0}", "#/multipleOf", "above 0" },
        { "{\"type\":\"strin\"}", "#/type", "type name" },
        { "{\"type\":[\"string\",\"string\"]}", "#/type", "distinct type names" },
        { "{\"required\":[1]}", "#/required", "array of strings" },
        { "{\"anyOf\":[]}", "#/anyOf", "non-empty array of schemas" },
        { "{\"properties\":{\"a\":3}}", "#/properties/a", "object or a boolean" },
        { "{\"pattern\":\"(?=a)\"}", "#/pattern", "lookahead" },
        { "{\"patternProperties\":{\"a/b~\\\\1\":{}}}", "#/patternProperties/a~1b~0\\1", "backreferences" },
        { "{\"pattern\":\"[\\\\u0100-\\\\uffff]\"}", "#/pattern", "beyond ASCII spans more than 256" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *says = refusal(cases[i].schema, &err);
        if (!strstr(says, cases[i].says) || strcmp(err.field, cases[i].field) != 0)
            fail_msg("%s: got field '%s', message '%s'", cases[i].schema, err.field, says);
    }
    /* Annotations and format are accepted (format is not asserted, as 2020-12 says). */
    assert_string_equal(refusal("{\"$schema\":\"https://json-schema.org/draft/2020-12/schema\","
                                "\"$id\":\"urn:x\",\"title\":\"t\",\"description\":\"d\",\"default\":1,"
                                "\"examples\":[1],\"$comment\":\"c\",\"deprecated\":false,"
                                "\"format\":\"uuid\",\"$ref\":\"urn:x#/$defs/a\",\"$defs\":{\"a\":true}}",
                                &err), "");
    /* 65 nested schemas */
    char deep[1024] = "";
    for (int i = 0; i < 65; i++)
        strcat(deep, "{\"not\":");
    strcat(deep, "true");
    for (int i = 0; i < 65; i++)
        strcat(deep, "}");
    assert_non_null(strstr(refusal(deep, &err), "nest deeper than 64"));
}

static void check_refuses_a_refused_schema(void **state)
{
    (void)state;
    json_t *schema = json_loads("{\"properties\":{\"a\":{\"if\":true,\"thn\":false}}}", 0, NULL);
    json_t *value = json_loads("{\"a\":1}", 0, NULL);
    struct gj_error err = { 0 };
    assert_int_equal(gj_schema_check(schema, value, &err), -1);
    assert_int_equal(err.status, 500);
    assert_string_equal(err.field, "");   /* the schema's fault, not a field's */
    assert_non_null(strstr(err.message, "\"thn\""));
    json_decref(schema);
    json_decref(value);
}

/* ---- validating ---- */

static void lengths_count_code_points(void **state)
{
    (void)state;
    struct gj_error err;
    const char *max3 = "{\"properties\":{\"name\":{\"maxLength\":3}}}";
    assert_int_equal(check_with(max3, "{\"name\":\"\xc3\xa9\xc3\xa9\xc3\xa9\"}", &err), 0);  /* 6 bytes */
    assert_int_equal(check_with(max3, "{\"name\":\"\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\"}", &err), -1);
    assert_string_equal(err.field, "name");
    assert_non_null(strstr(err.message, "at most 3 characters"));
    const char *min2 = "{\"minLength\":2}";
    assert_int_equal(check_with(min2, "\"\xf0\x9f\x98\x80\"", &err), -1);   /* one emoji, 4 bytes */
    assert_int_equal(check_with(min2, "\"\xf0\x9f\x98\x80\xf0\x9f\x98\x80\"", &err), 0);
}

static void numbers_compare_exactly(void **state)
{
    (void)state;
    struct gj_error err;
    /* 2^53 + 1 is no double: a double compare would let 2^53 + 2 through */
    assert_int_equal(check_with("{\"maximum\":9007199254740993}", "9007199254740993", &err), 0);
    assert_int_equal(check_with("{\"maximum\":9007199254740993}", "9007199254740994", &err), -1);
    assert_non_null(strstr(err.message, "at most 9007199254740993 (got 9007199254740994)"));
    assert_int_equal(check_with("{\"exclusiveMinimum\":0}", "0.0", &err), -1);
    assert_int_equal(check_with("{\"const\":1}", "1.0", &err), 0);
    assert_int_equal(check_with("{\"enum\":[[1,{\"a\":2.0}]]}", "[1.0,{\"a\":2}]", &err), 0);
    assert_int_equal(check_with("{\"enum\":[\"x\",2,null]}", "3", &err), -1);
    assert_non_null(strstr(err.message, "one of: x, 2, null"));
    assert_int_equal(check_with("{\"multipleOf\":0.1}", "0.3", &err), 0);
    assert_int_equal(check_with("{\"multipleOf\":0.1}", "0.35", &err), -1);
    assert_int_equal(check_with("{\"multipleOf\":3}", "-9", &err), 0);
    assert_int_equal(check_with("{\"type\":\"integer\"}", "1e300", &err), 0);
}

static void messages_name_the_field(void **state)
{
    (void)state;
    struct gj_error err;
    static const struct { const char *schema, *value, *field, *says; } cases[] = {
        { "{\"properties\":{\"a\":{\"prefixItems\":[{\"type\":\"integer\"}],\"items\":false}}}",
          "{\"a\":[1,2]}", "a", "at most 1 items" },
        { "{\"properties\":{\"a\":{\"items\":{\"type\":\"integer\"}}}}", "{\"a\":[1,\"x\"]}", "a[1]",
          "a[1] must be an integer, not string" },
        { "{\"items\":{\"type\":\"integer\"}}", "[1,\"x\"]", "params[1]", "must be an integer" },
        { "{\"dependentRequired\":{\"a\":[\"b\"]}}", "{\"a\":1}", "b", "b is required when a is given" },
        { "{\"propertyNames\":{\"maxLength\":2}}", "{\"abc\":1}", "abc", "field name 'abc' is not allowed" },
        { "{\"patternProperties\":{\"^x_\":{\"type\":\"string\"}},\"additionalProperties\":false}",
          "{\"x_a\":1}", "x_a", "must be a string" },
        { "{\"patternProperties\":{\"^x_\":true},\"additionalProperties\":false}", "{\"y\":1}", "y",
          "y is not a known field" },
        { "{\"properties\":{\"a\":{\"contains\":{\"const\":1},\"minContains\":2}}}", "{\"a\":[1,2]}", "a",
          "at least 2 item(s) matching \"contains\" (found 1)" },
        { "{\"properties\":{\"a\":{\"uniqueItems\":true}}}",
          "{\"a\":[{\"x\":1,\"y\":2},3,{\"y\":2,\"x\":1.0}]}", "a", "[0] and [2] are equal" },
        { "{\"if\":{\"required\":[\"a\"]},\"then\":{\"properties\":{\"b\":{\"minimum\":1}}}}",
          "{\"a\":1,\"b\":0}", "b", "b must be at least 1 (got 0)" },
        { "{\"oneOf\":[{\"type\":\"integer\"},{\"minimum\":0}]}", "3", "", "matches forms 1 and 2" },
        { "{\"anyOf\":[{\"type\":\"integer\"},{\"type\":\"string\"}]}", "1.5", "",
          "params matches none of the accepted forms (params must be an integer, not number)" },
        { "{\"not\":{\"const\":\"x\"}}", "\"x\"", "", "must not match" },
        { "{\"properties\":{\"a\":false}}", "{\"a\":1}", "a", "a is not allowed" },
        { "{\"type\":[\"string\",\"null\"]}", "1", "", "one of the types string, null, not integer" },
        { "{\"pattern\":\"^[a-z]+$\"}", "\"A\"", "", "must match the pattern ^[a-z]+$" },
        { "{\"maxProperties\":1}", "{\"a\":1,\"b\":2}", "", "at most 1 fields" },
        { "{\"$defs\":{\"n\":{\"type\":\"integer\"}},\"properties\":{\"a\":{\"$ref\":\"#/$defs/n\"}}}",
          "{\"a\":\"x\"}", "a", "a must be an integer" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (check_with(cases[i].schema, cases[i].value, &err) != -1 ||
            strcmp(err.field, cases[i].field) != 0 || !strstr(err.message, cases[i].says))
            fail_msg("%s with %s: field '%s', message '%s'", cases[i].schema, cases[i].value,
                     err.field, err.message);
    }
}

/* Messages quote user input: cut at a character boundary, so they stay valid UTF-8. */
static void messages_stay_valid_utf8(void **state)
{
    (void)state;
    struct gj_error err;
    char value[8192] = "{\"";
    for (int i = 0; i < 400; i++)
        strcat(value, "\xc3\xa9");
    strcat(value, "\":\"");
    for (int i = 0; i < 2000; i++)
        strcat(value, "\xe2\x82\xac");
    strcat(value, "\"}");
    assert_int_equal(check_with("{\"additionalProperties\":{\"enum\":[\"a\"]}}", value, &err), -1);
    json_t *field = json_string(err.field), *message = json_string(err.message);
    assert_non_null(field);     /* NULL when not valid UTF-8 */
    assert_non_null(message);
    json_decref(field);
    json_decref(message);
}

static void unique_items_is_not_quadratic(void **state)
{
    (void)state;
    json_t *schema = json_loads("{\"uniqueItems\":true}", 0, NULL);
    struct gj_error err = { 0 };
    struct gj_schema *s = gj_schema_compile(schema, &err);
    assert_non_null(s);
    json_t *arr = json_array();
    for (int i = 0; i < 100000; i++)
        json_array_append_new(arr, i % 2 ? json_integer(i) : json_real(i + 0.5));
    assert_int_equal(gj_schema_validate(s, arr, &err), 0);
    json_array_append_new(arr, json_real(99999.0));   /* equals the integer 99999 */
    assert_int_equal(gj_schema_validate(s, arr, &err), -1);
    assert_non_null(strstr(err.message, "[99999] and [100000] are equal"));
    gj_schema_free(s);
    json_decref(arr);
    json_decref(schema);
}

static void deep_values_and_ref_loops_stop(void **state)
{
    (void)state;
    struct gj_error err;
    char value[4096] = "";
    for (int i = 0; i < 1000; i++)
        strcat(value, "[");
    for (int i = 0; i < 1000; i++)
        strcat(value, "]");
    const char *tree = "{\"$defs\":{\"n\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/n\"}}},"
                       "\"$ref\":\"#/$defs/n\"}";
    assert_int_equal(check_with(tree, "[[[]],[]]", &err), 0);
    assert_int_equal(check_with(tree, value, &err), -1);
    assert_non_null(strstr(err.message, "nested too deeply"));
    /* A schema that refers to itself without descending stops too. */
    assert_int_equal(check_with("{\"$ref\":\"#\"}", "1", &err), -1);
    assert_non_null(strstr(err.message, "nested too deeply"));
}

/* Patterns: ECMA-262 in Unicode mode; each answer checked against node's RegExp(p, "u"). */
static void patterns_follow_ecma262(void **state)
{
    (void)state;
    static const struct { const char *pattern, *text; int match; } cases[] = {
        { "^\\d+$", "123", 1 }, { "^\\d+$", "\xd9\xa1", 0 }, { "^\\w+$", "\xc3\xa9", 0 },
        { "^\\s$", "\xc2\xa0", 1 }, { "^\\s$", "\xef\xbb\xbf", 1 }, { "^.$", "\xc3\xa9", 1 },
        { "^.$", "\xf0\x9f\x98\x80", 1 }, { "^..$", "\xf0\x9f\x98\x80", 0 }, { "^.$", "\n", 0 },
        { "^.$", "\xe2\x80\xa8", 0 }, { "^[^a]$", "\n", 1 }, { "^[\\s\\S]+$", "a\nb", 1 },
        { "^[^\\d\\s]$", "1", 0 }, { "^[a\\D]+$", "1", 0 }, { "^[\\]a]+$", "]a]", 1 },
        { "^[\\^]$", "^", 1 }, { "^[-a]+$", "-a", 1 }, { "^[[:]+$", "[:", 1 },
        { "^[\\\\]$", "\\", 1 }, { "^[\xc3\xa1-\xc3\xa9]$", "\xc3\xa2", 1 },
        { "^[\xc3\xa1-\xc3\xa9]$", "a", 0 }, { "^\\u{1F600}$", "\xf0\x9f\x98\x80", 1 },
        { "^\\uD83D\\uDE00$", "\xf0\x9f\x98\x80", 1 }, { "^a+?$", "aaa", 1 }, { "^a{2,3}$", "aaaa", 0 },
        { "^(?:ab)+$", "abab", 1 }, { "^(?<n>ab)$", "ab", 1 }, { "abc", "xxabcxx", 1 },
        { "abc$", "abc\n", 0 }, { "\na$", "x\na", 1 }, { "\n^a", "\na", 0 }, { "^[]$", "", 0 },
        { "^[^]$", "\n", 1 }, { "^\\cJ$", "\n", 1 }, { "^\\/$", "/", 1 }, { "^\\x41$", "A", 1 },
    };
    struct gj_error err;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *schema = json_pack("{ss}", "pattern", cases[i].pattern);
        json_t *text = json_string(cases[i].text);
        memset(&err, 0, sizeof err);
        int rc = gj_schema_check(schema, text, &err);
        if ((rc == 0) != cases[i].match)
            fail_msg("/%s/u on \"%s\": expected %s (%s)", cases[i].pattern, cases[i].text,
                     cases[i].match ? "a match" : "none", err.message);
        json_decref(schema);
        json_decref(text);
    }
    /* What Unicode mode rejects, and what glibc would answer wrongly, is refused. */
    static const char *const refused[] = {
        "a**", "a{", "]", "\\-", "(", ")", "\\bfoo", "(?<=a)b", "(a)\\1", "\\p{L}", "(^a){2}",
        "[z-a]", "[\\d-z]",
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        json_t *schema = json_pack("{ss}", "pattern", refused[i]);
        char *text = json_dumps(schema, 0);
        if (!refusal(text, &err)[0])
            fail_msg("/%s/ compiled", refused[i]);
        free(text);
        json_decref(schema);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(accepts_valid),
        cmocka_unit_test(names_nested_field),
        cmocka_unit_test(rejects_unknown_field_and_missing),
        cmocka_unit_test(rejects_wrong_types_and_enum),
        cmocka_unit_test(noop_kind_validates_inputs),
        cmocka_unit_test(every_kind_schema_compiles),
        cmocka_unit_test(kind_schema_compiled_once),
        cmocka_unit_test(refuses_what_it_does_not_implement),
        cmocka_unit_test(check_refuses_a_refused_schema),
        cmocka_unit_test(lengths_count_code_points),
        cmocka_unit_test(numbers_compare_exactly),
        cmocka_unit_test(messages_name_the_field),
        cmocka_unit_test(messages_stay_valid_utf8),
        cmocka_unit_test(unique_items_is_not_quadratic),
        cmocka_unit_test(deep_values_and_ref_loops_stop),
        cmocka_unit_test(patterns_follow_ecma262),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
