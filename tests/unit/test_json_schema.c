/* The schema subset every kind's params go through at submit. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
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

static int check(const char *value_text, struct gj_error *err)
{
    json_t *schema = json_loads(schema_text, 0, NULL);
    json_t *value = json_loads(value_text, 0, NULL);
    assert_non_null(schema);
    assert_non_null(value);
    memset(err, 0, sizeof *err);
    int rc = gj_schema_check(schema, value, err);
    json_decref(schema);
    json_decref(value);
    return rc;
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(accepts_valid),
        cmocka_unit_test(names_nested_field),
        cmocka_unit_test(rejects_unknown_field_and_missing),
        cmocka_unit_test(rejects_wrong_types_and_enum),
        cmocka_unit_test(noop_kind_validates_inputs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
