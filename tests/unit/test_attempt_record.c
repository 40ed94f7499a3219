/* service/jobs/attempt_record.c: a slot's attempt record between its gathering and the
 * statement that writes it: taken as GJ_ATTEMPT_RECORD_SQL's six parameters, handed back when
 * not written (unless a newer attempt replaced it), what the run chose added while it waits
 * and only to its own attempt. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <string.h>
#include <cmocka.h>
#include <jansson.h>

#include "common/gj_kind.h"
#include "service/jobs/attempt_record.h"

static const struct gj_kind kind = { .name = "unit-kind", .version = "7" };

static void claim_of(struct gj_claim *c, const char *id, int attempt, int stage)
{
    memset(c, 0, sizeof *c);
    snprintf(c->id, sizeof c->id, "%s", id);
    c->attempts = attempt;
    c->stage = stage;
}

static void gather(struct gj_attempt_record *r, const struct gj_claim *c)
{
    struct gj_job job = { .kind = kind.name };
    assert_int_equal(gj_attempt_record_gather(r, c, &kind, &job, GJ_DEVICE_CPU, "worker-a"), 0);
}

static json_t *environment_of(const struct gj_attempt_record_batch *b)
{
    json_t *env = json_loads(b->params[4], 0, NULL);
    assert_non_null(env);
    return env;
}

static void test_take_settle(void **state)
{
    (void)state;
    struct gj_attempt_record *r = gj_attempt_record_new();
    struct gj_claim c;
    struct gj_attempt_record_batch b;
    claim_of(&c, "00000000-0000-0000-0000-000000000001", 2, 1);
    assert_int_equal(gj_attempt_record_take(r, &b), 0);   /* nothing gathered */
    gather(r, &c);
    assert_int_equal(gj_attempt_record_pending(r), 1);
    assert_int_equal(gj_attempt_record_take(r, &b), 1);
    assert_string_equal(b.params[0], c.id);
    assert_string_equal(b.params[1], "2");
    assert_string_equal(b.params[2], "1");
    assert_string_equal(b.params[3], "worker-a");
    json_t *env = environment_of(&b);
    assert_string_equal(json_string_value(json_object_get(json_object_get(env, "kind"), "version")), "7");
    json_decref(env);
    assert_non_null(strchr(b.params[5], 'T'));   /* gathered at, ISO 8601 UTC */
    assert_int_equal(b.params[5][strlen(b.params[5]) - 1], 'Z');
    assert_int_equal(gj_attempt_record_pending(r), 0);
    gj_attempt_record_settle(r, &b, 0);          /* not written: it waits again */
    assert_int_equal(gj_attempt_record_pending(r), 1);
    assert_int_equal(gj_attempt_record_take(r, &b), 1);
    gj_attempt_record_settle(r, &b, 1);          /* written: gone */
    assert_int_equal(gj_attempt_record_pending(r), 0);
    gj_attempt_record_free(r);
}

static void test_newer_attempt_wins(void **state)
{
    (void)state;
    struct gj_attempt_record *r = gj_attempt_record_new();
    struct gj_claim first, second;
    struct gj_attempt_record_batch b;
    claim_of(&first, "00000000-0000-0000-0000-000000000001", 1, 0);
    claim_of(&second, "00000000-0000-0000-0000-000000000002", 1, 0);
    gather(r, &first);
    assert_int_equal(gj_attempt_record_take(r, &b), 1);
    gather(r, &second);                          /* the slot's next job, while the first is in flight */
    gj_attempt_record_settle(r, &b, 0);          /* the first's write failed: the second stays */
    assert_int_equal(gj_attempt_record_take(r, &b), 1);
    assert_string_equal(b.params[0], second.id);
    gj_attempt_record_settle(r, &b, 1);
    gj_attempt_record_free(r);
}

static void test_add_to_its_own_attempt(void **state)
{
    (void)state;
    struct gj_attempt_record *r = gj_attempt_record_new();
    struct gj_claim c, other;
    struct gj_attempt_record_batch b;
    claim_of(&c, "00000000-0000-0000-0000-000000000003", 1, 0);
    json_t *chosen = json_pack("{s:s}", "convolutions", "{\"x\": \"onednn\"}");
    assert_int_equal(gj_attempt_record_add(r, &c, chosen), 0);        /* nothing waits */
    gather(r, &c);
    claim_of(&other, c.id, 2, 0);
    assert_int_equal(gj_attempt_record_add(r, &other, chosen), 0);    /* another attempt's */
    claim_of(&other, c.id, 1, 1);
    assert_int_equal(gj_attempt_record_add(r, &other, chosen), 0);    /* another stage's */
    assert_int_equal(gj_attempt_record_add(r, &c, chosen), 1);
    assert_int_equal(gj_attempt_record_take(r, &b), 1);
    json_t *env = environment_of(&b);
    assert_string_equal(json_string_value(json_object_get(env, "convolutions")), "{\"x\": \"onednn\"}");
    assert_non_null(json_object_get(env, "kind"));                    /* the rest kept */
    json_decref(env);
    assert_int_equal(gj_attempt_record_add(r, &c, chosen), 0);        /* taken: the caller updates the row */
    gj_attempt_record_settle(r, &b, 1);
    json_decref(chosen);
    gj_attempt_record_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_take_settle),
        cmocka_unit_test(test_newer_attempt_wins),
        cmocka_unit_test(test_add_to_its_own_attempt),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
