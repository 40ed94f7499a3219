/* service/jobs/job_cache.c, without a database: a kept answer (its body, encoded as
 * gj_respond_json encodes it) is handed (a copy) to the tenant
 * that put it and to no other; a forget (the job's NOTIFY) drops it, and a read begun before the
 * forget does not put its older answer back; nothing is kept or answered while the cache is not
 * live (LISTEN down), and going live or down empties it; an answer older than the TTL is not
 * given; the table holds no more than its capacity. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <cmocka.h>

#include "service/jobs/job_cache.h"

#define JOB_A "0b7f2c6e-1d3a-4e5f-9a8b-7c6d5e4f3a2b"
#define TENANT_1 "9e8d7c6b-5a49-4382-a1b0-c9d8e7f6a5b4"
#define TENANT_2 "1a2b3c4d-5e6f-4a1b-8c2d-3e4f5a6b7c8d"

static json_t *job(const char *id, const char *state)
{
    return json_pack("{s:s, s:s, s:{s:i}}", "id", id, "state", state, "params", "n", 1);
}

static void put(struct gj_job_cache *jc, const char *id, const char *tenant, const char *state)
{
    json_t *j = job(id, state);
    gj_job_cache_put(jc, tenant, j, state, gj_job_cache_ticket(jc, id));
    json_decref(j);
}

/* The state kept for (id, tenant), or "" on a miss. */
static const char *kept_state(struct gj_job_cache *jc, const char *id, const char *tenant)
{
    static char state[16];
    size_t len = 0;
    char *text = gj_job_cache_get(jc, id, tenant, state, &len);
    if (!text)
        return "";
    assert_int_equal(strlen(text), len);
    json_t *j = json_loads(text, 0, NULL);
    assert_non_null(j);
    assert_int_equal(strcasecmp(json_string_value(json_object_get(j, "id")), id), 0);
    json_decref(j);
    free(text);
    return state;
}

static void test_hit_is_a_copy_for_its_tenant_only(void **st)
{
    (void)st;
    struct gj_job_cache *jc = gj_job_cache_new(64, 60000);
    gj_job_cache_set_live(jc, 1);
    put(jc, JOB_A, TENANT_1, "running");
    char state[16];
    size_t len = 0;
    char *text = gj_job_cache_get(jc, JOB_A, TENANT_1, state, &len);
    assert_non_null(text);
    assert_string_equal(state, "running");
    /* the body gj_respond_json would send: compact, in order, newline-terminated */
    assert_string_equal(text, "{\"id\":\"" JOB_A "\",\"state\":\"running\",\"params\":{\"n\":1}}\n");
    text[0] = 'X';   /* the caller's copy */
    free(text);
    assert_string_equal(kept_state(jc, JOB_A, TENANT_1), "running");
    assert_string_equal(kept_state(jc, JOB_A, TENANT_2), "");   /* another tenant: the database */
    /* the id as a client may type it */
    assert_string_equal(kept_state(jc, "0B7F2C6E-1D3A-4E5F-9A8B-7C6D5E4F3A2B", TENANT_1), "running");
    gj_job_cache_free(jc);
}

static void test_forget_and_the_ticket(void **st)
{
    (void)st;
    struct gj_job_cache *jc = gj_job_cache_new(64, 60000);
    gj_job_cache_set_live(jc, 1);
    put(jc, JOB_A, TENANT_1, "running");
    gj_job_cache_forget(jc, JOB_A);
    assert_string_equal(kept_state(jc, JOB_A, TENANT_1), "");
    /* a read began (ticket), the job changed (forget), the read ends: its answer is not kept */
    uint64_t ticket = gj_job_cache_ticket(jc, JOB_A);
    gj_job_cache_forget(jc, JOB_A);
    json_t *old = job(JOB_A, "running");
    gj_job_cache_put(jc, TENANT_1, old, "running", ticket);
    assert_string_equal(kept_state(jc, JOB_A, TENANT_1), "");
    /* the next read's is */
    gj_job_cache_put(jc, TENANT_1, old, "succeeded", gj_job_cache_ticket(jc, JOB_A));
    assert_string_equal(kept_state(jc, JOB_A, TENANT_1), "succeeded");
    json_decref(old);
    gj_job_cache_forget(jc, NULL);   /* any job */
    assert_string_equal(kept_state(jc, JOB_A, TENANT_1), "");
    gj_job_cache_free(jc);
}

static void test_not_live_keeps_and_answers_nothing(void **st)
{
    (void)st;
    struct gj_job_cache *jc = gj_job_cache_new(64, 60000);
    put(jc, JOB_A, TENANT_1, "running");   /* not live yet */
    assert_int_equal(gj_job_cache_size(jc), 0);
    gj_job_cache_set_live(jc, 1);
    put(jc, JOB_A, TENANT_1, "running");
    assert_int_equal(gj_job_cache_size(jc), 1);
    uint64_t ticket = gj_job_cache_ticket(jc, JOB_A);
    gj_job_cache_set_live(jc, 0);   /* LISTEN lost: emptied, bypassed */
    assert_int_equal(gj_job_cache_size(jc), 0);
    assert_string_equal(kept_state(jc, JOB_A, TENANT_1), "");
    put(jc, JOB_A, TENANT_1, "running");
    assert_int_equal(gj_job_cache_size(jc), 0);
    /* back: a read begun while it was down does not put what it read then */
    gj_job_cache_set_live(jc, 1);
    json_t *j = job(JOB_A, "running");
    gj_job_cache_put(jc, TENANT_1, j, "running", ticket);
    json_decref(j);
    assert_int_equal(gj_job_cache_size(jc), 0);
    gj_job_cache_free(jc);
}

static void test_ttl(void **st)
{
    (void)st;
    struct gj_job_cache *jc = gj_job_cache_new(64, 50);
    gj_job_cache_set_live(jc, 1);
    put(jc, JOB_A, TENANT_1, "running");
    assert_string_equal(kept_state(jc, JOB_A, TENANT_1), "running");
    struct timespec ts = { 0, 120 * 1000000L };
    nanosleep(&ts, NULL);
    assert_string_equal(kept_state(jc, JOB_A, TENANT_1), "");
    gj_job_cache_free(jc);
}

static void test_bounded(void **st)
{
    (void)st;
    struct gj_job_cache *jc = gj_job_cache_new(16, 60000);
    gj_job_cache_set_live(jc, 1);
    for (int i = 0; i < 500; i++) {
        char id[40];
        snprintf(id, sizeof id, "00000000-0000-4000-8000-%012d", i);
        put(jc, id, TENANT_1, "succeeded");
    }
    assert_true(gj_job_cache_size(jc) <= 16);
    assert_true(gj_job_cache_size(jc) > 0);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    gj_job_cache_write_metrics(jc, f);
    fclose(f);
    assert_non_null(strstr(text, "gpujobd_job_cache_entries "));
    free(text);
    gj_job_cache_free(jc);
    gj_job_cache_free(NULL);
    assert_null(gj_job_cache_get(NULL, JOB_A, TENANT_1, (char[16]){ 0 }, &len));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hit_is_a_copy_for_its_tenant_only),
        cmocka_unit_test(test_forget_and_the_ticket),
        cmocka_unit_test(test_not_live_keeps_and_answers_nothing),
        cmocka_unit_test(test_ttl),
        cmocka_unit_test(test_bounded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
