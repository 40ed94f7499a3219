/* service/base/mem_budget.c: what renders hold together (--render-memory) never passes the
 * total: a take that fits now is granted, one that does not fit beside what is held is
 * BUSY until enough is given back, one over the total is NEVER whatever is held; many
 * threads taking and giving at once never see more than the total held. */
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <cmocka.h>

#include "service/base/mem_budget.h"

static void test_take_give(void **state)
{
    (void)state;
    struct gj_mem_budget b;
    gj_mem_budget_init(&b, 100);
    assert_int_equal(gj_mem_budget_take(&b, 101), GJ_MEM_NEVER);
    assert_int_equal(gj_mem_budget_take(&b, 60), GJ_MEM_TAKEN);
    assert_int_equal(gj_mem_budget_take(&b, 41), GJ_MEM_BUSY);
    assert_int_equal(gj_mem_budget_take(&b, 101), GJ_MEM_NEVER);
    assert_int_equal(gj_mem_budget_take(&b, 40), GJ_MEM_TAKEN);
    assert_int_equal(gj_mem_budget_held(&b), 100);
    assert_int_equal(gj_mem_budget_take(&b, 1), GJ_MEM_BUSY);
    gj_mem_budget_give(&b, 60);
    assert_int_equal(gj_mem_budget_take(&b, 60), GJ_MEM_TAKEN);
    gj_mem_budget_give(&b, 60);
    gj_mem_budget_give(&b, 40);
    assert_int_equal(gj_mem_budget_held(&b), 0);
    assert_int_equal(gj_mem_budget_take(&b, 100), GJ_MEM_TAKEN);
}

static struct gj_mem_budget shared;
static atomic_ulong in_use, worst;

static void *churn(void *arg)
{
    uint64_t bytes = (uint64_t)(uintptr_t)arg;
    for (int i = 0; i < 20000; i++) {
        if (gj_mem_budget_take(&shared, bytes) != GJ_MEM_TAKEN)
            continue;
        unsigned long now = atomic_fetch_add(&in_use, bytes) + bytes;
        unsigned long w = atomic_load(&worst);
        while (now > w && !atomic_compare_exchange_weak(&worst, &w, now))
            ;
        atomic_fetch_sub(&in_use, bytes);
        gj_mem_budget_give(&shared, bytes);
    }
    return NULL;
}

static void test_threads_never_pass_the_total(void **state)
{
    (void)state;
    gj_mem_budget_init(&shared, 1000);
    pthread_t t[8];
    for (int i = 0; i < 8; i++)
        assert_int_equal(pthread_create(&t[i], NULL, churn, (void *)(uintptr_t)(300 + 50 * i)), 0);
    for (int i = 0; i < 8; i++)
        pthread_join(t[i], NULL);
    assert_true(atomic_load(&worst) <= 1000);
    assert_true(atomic_load(&worst) > 0);
    assert_int_equal(gj_mem_budget_held(&shared), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_take_give),
        cmocka_unit_test(test_threads_never_pass_the_total),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
