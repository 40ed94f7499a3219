/* service/jobs/job_state.c: every pair of states, the public names, the cancel and delete
 * rules. The expected moves are written out here as a table of names, apart from the
 * state machine's own bit table, so a move added or dropped on one side fails. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <string.h>
#include <cmocka.h>

#include "service/jobs/job_state.h"

/* Each allowed move, by stored name; every pair not listed is refused. */
static const char *const allowed[][2] = {
    { "queued", "running" },      /* claimed */
    { "queued", "canceled" },     /* canceled before it ran */
    { "queued", "failed" },       /* a parent between stages, failed by its sub-task */
    { "running", "succeeded" },
    { "running", "failed" },
    { "running", "canceled" },    /* its worker saw cancel_requested */
    { "running", "queued" },      /* retried, released, or a parent with no sub-task pending */
    { "running", "subtasks" },    /* spawned sub-tasks */
    { "subtasks", "queued" },     /* the last sub-task succeeded: the next stage */
    { "subtasks", "failed" },     /* a sub-task failed */
    { "subtasks", "canceled" },
    { "waiting", "queued" },      /* its inputs from other jobs exist */
    { "waiting", "failed" },      /* an upstream failed, was canceled or deleted */
    { "waiting", "canceled" },
};

static int listed(const char *from, const char *to)
{
    for (size_t i = 0; i < sizeof allowed / sizeof allowed[0]; i++)
        if (strcmp(allowed[i][0], from) == 0 && strcmp(allowed[i][1], to) == 0)
            return 1;
    return 0;
}

static void test_every_pair(void **state)
{
    (void)state;
    for (int f = 0; f < GJ_JOB_STATE_COUNT; f++)
        for (int t = 0; t < GJ_JOB_STATE_COUNT; t++) {
            const char *from = gj_job_state_name(f), *to = gj_job_state_name(t);
            int want = listed(from, to), got = gj_job_state_can_move(f, t);
            if (want != got)
                fail_msg("%s -> %s: expected %s, got %s", from, to, want ? "allowed" : "refused",
                         got ? "allowed" : "refused");
        }
    assert_false(gj_job_state_can_move(GJ_JOB_STATE_COUNT, GJ_JOB_QUEUED));
    assert_false(gj_job_state_can_move(GJ_JOB_QUEUED, GJ_JOB_STATE_COUNT));
}

/* A final state has no way out; every other state reaches one, and can be canceled. */
static void test_final_states(void **state)
{
    (void)state;
    for (int s = 0; s < GJ_JOB_STATE_COUNT; s++) {
        int out = 0;
        for (int t = 0; t < GJ_JOB_STATE_COUNT; t++)
            out += gj_job_state_can_move(s, t);
        if (gj_job_state_final(s))
            assert_int_equal(out, 0);
        else
            assert_true(gj_job_state_can_move(s, GJ_JOB_CANCELED));
    }
    assert_true(gj_job_state_final(GJ_JOB_SUCCEEDED) && gj_job_state_final(GJ_JOB_FAILED) &&
                gj_job_state_final(GJ_JOB_CANCELED));
}

/* Names round-trip; a stored name is its public name except a parent's 'subtasks'; the
 * names the old schema swapped (blocked, and waiting meaning a parent) are gone. */
static void test_names(void **state)
{
    (void)state;
    for (int s = 0; s < GJ_JOB_STATE_COUNT; s++) {
        enum gj_job_state back;
        assert_int_equal(gj_job_state_parse(gj_job_state_name(s), &back), 0);
        assert_int_equal(back, s);
        const char *shown = gj_job_state_public(s, 0);
        assert_true(gj_job_public_state_known(shown));
        if (s != GJ_JOB_SUBTASKS)
            assert_string_equal(shown, gj_job_state_name(s));
    }
    enum gj_job_state x;
    assert_int_equal(gj_job_state_parse("blocked", &x), -1);
    assert_int_equal(gj_job_state_parse("", &x), -1);
    assert_int_equal(gj_job_state_parse(NULL, &x), -1);
    assert_int_equal(gj_job_state_parse("waiting", &x), 0);
    assert_int_equal(x, GJ_JOB_WAITING);
    assert_string_equal(gj_job_state_public(GJ_JOB_WAITING, 0), "waiting");
    assert_string_equal(gj_job_state_public(GJ_JOB_SUBTASKS, 1), "running");
    assert_string_equal(gj_job_state_public(GJ_JOB_QUEUED, 2), "running");   /* between stages */
    int n;
    const char *const *all = gj_job_public_states(&n);
    assert_int_equal(n, 6);
    const char *want[] = { "queued", "waiting", "running", "succeeded", "failed", "canceled" };
    for (int i = 0; i < n; i++)
        assert_string_equal(all[i], want[i]);
    for (int i = 0; i < n; i++)
        assert_int_equal(gj_job_public_final(all[i]), i >= 3);     /* succeeded, failed, canceled */
    assert_false(gj_job_public_final("subtasks"));
    assert_false(gj_job_public_final(NULL));
    assert_false(gj_job_public_state_known("subtasks"));
    assert_false(gj_job_public_state_known("blocked"));
}

static void test_cancel_and_delete_rules(void **state)
{
    (void)state;
    for (int s = 0; s < GJ_JOB_STATE_COUNT; s++) {
        enum gj_job_cancel_rule c = gj_job_cancel_rule(s);
        enum gj_job_delete_rule d = gj_job_delete_rule(s, 0);
        if (gj_job_state_final(s))
            assert_int_equal(c, GJ_CANCEL_FINISHED);
        else if (s == GJ_JOB_RUNNING)
            assert_int_equal(c, GJ_CANCEL_ASK_WORKER);
        else
            assert_int_equal(c, GJ_CANCEL_NOW);
        /* what cancel does now is a move the state machine allows */
        if (c == GJ_CANCEL_NOW)
            assert_true(gj_job_state_can_move(s, GJ_JOB_CANCELED));
        assert_int_equal(d, s == GJ_JOB_RUNNING ? GJ_DELETE_WHEN_STOPPED : GJ_DELETE_NOW);
        assert_int_equal(gj_job_delete_rule(s, 1), GJ_DELETE_REFUSED_SUBTASK);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_pair),
        cmocka_unit_test(test_final_states),
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_cancel_and_delete_rules),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
