/* service/base/uuid.c: the canonical 8-4-4-4-12 form, either case; nothing else. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "service/base/uuid.h"

static void test_uuid(void **state)
{
    (void)state;
    assert_true(gj_is_uuid("0f8fad5b-d9cb-469f-a165-70867728950e"));
    assert_true(gj_is_uuid("0F8FAD5B-D9CB-469F-A165-70867728950E"));
    assert_false(gj_is_uuid("0f8fad5b-d9cb-469f-a165-70867728950"));
    assert_false(gj_is_uuid("0f8fad5b-d9cb-469f-a165-70867728950e0"));
    assert_false(gj_is_uuid("0f8fad5bxd9cb-469f-a165-70867728950e"));
    assert_false(gj_is_uuid("0f8fad5b-d9cb-469f-a165-70867728950g"));
    assert_false(gj_is_uuid("' OR 1=1 --"));
    assert_false(gj_is_uuid(""));
    assert_false(gj_is_uuid(NULL));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_uuid),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
