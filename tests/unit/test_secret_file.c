/* Secrets from files: the permission rule (this user's 0600, root's 0640/0440, a
 * Secret volume's symbolic link followed), one line of contents, and messages that
 * name the file and its mode but never what it holds. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "service/base/secret_file.h"

#define SECRET "s3cr3t-Value-that-must-not-show"

static char dir[] = "/tmp/gj-secret-XXXXXX";
static char why[4096];

static const char *write_file(const char *name, const char *text, size_t n, mode_t mode)
{
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    unlink(path);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(chmod(path, mode), 0);
    return path;
}

static void reads_one_line_without_its_newline(void **state)
{
    (void)state;
    char out[128];
    assert_int_equal(gj_secret_file_read(write_file("a", SECRET "\n", strlen(SECRET) + 1, 0600), out, sizeof out,
                                         why, sizeof why), 0);
    assert_string_equal(out, SECRET);
    assert_int_equal(gj_secret_file_read(write_file("b", SECRET "\r\n", strlen(SECRET) + 2, 0400), out, sizeof out,
                                         why, sizeof why), 0);
    assert_string_equal(out, SECRET);
    assert_int_equal(gj_secret_file_read(write_file("c", SECRET, strlen(SECRET), 0600), out, sizeof out, why,
                                         sizeof why), 0);
    assert_string_equal(out, SECRET);
}

static void loose_permissions_refused(void **state)
{
    (void)state;
    char out[128];
    const mode_t loose[] = { 0644, 0604, 0602, 0660, 0620, 0610, 0666, 0777 };
    for (size_t i = 0; i < sizeof loose / sizeof loose[0]; i++) {
        const char *p = write_file("loose", SECRET "\n", strlen(SECRET) + 1, loose[i]);
        assert_int_equal(gj_secret_file_read(p, out, sizeof out, why, sizeof why), -1);
        char mode[16];
        snprintf(mode, sizeof mode, "mode %04o", (unsigned)loose[i]);
        assert_non_null(strstr(why, mode));
        assert_non_null(strstr(why, p));
        assert_non_null(strstr(why, "chmod 600"));
        assert_null(strstr(why, SECRET));
        assert_null(strstr(out, SECRET));   /* wiped */
        assert_int_equal(gj_secret_file_check(p, why, sizeof why), -1);
    }
    /* group read: only for a file root owns (a Secret volume with fsGroup) */
    const char *p = write_file("group", SECRET, strlen(SECRET), 0640);
    assert_int_equal(gj_secret_file_read(p, out, sizeof out, why, sizeof why), geteuid() == 0 ? 0 : -1);
    p = write_file("group", SECRET, strlen(SECRET), 0440);
    assert_int_equal(gj_secret_file_check(p, why, sizeof why), geteuid() == 0 ? 0 : -1);
}

static void other_owner_refused(void **state)
{
    (void)state;
    if (geteuid() != 0)
        skip();   /* only root can give a file away; run as root by CI */
    const char *p = write_file("theirs", SECRET, strlen(SECRET), 0600);
    assert_int_equal(chown(p, 65534, 65534), 0);
    assert_int_equal(gj_secret_file_check(p, why, sizeof why), -1);
    assert_non_null(strstr(why, "owned by uid 65534"));
}

static void symlink_followed_and_non_files_refused(void **state)
{
    (void)state;
    char out[128], target[512], link[512], sub[512];
    snprintf(target, sizeof target, "%s", write_file("..data-admin.key", SECRET, strlen(SECRET), 0600));
    snprintf(link, sizeof link, "%s/admin.key", dir);
    unlink(link);
    assert_int_equal(symlink(target, link), 0);
    assert_int_equal(gj_secret_file_read(link, out, sizeof out, why, sizeof why), 0);
    assert_string_equal(out, SECRET);
    snprintf(sub, sizeof sub, "%s/sub", dir);
    mkdir(sub, 0700);
    assert_int_equal(gj_secret_file_read(sub, out, sizeof out, why, sizeof why), -1);
    assert_non_null(strstr(why, "not a regular file"));
    snprintf(sub, sizeof sub, "%s/missing", dir);
    assert_int_equal(gj_secret_file_read(sub, out, sizeof out, why, sizeof why), -1);
    assert_non_null(strstr(why, "No such file"));
}

static void bad_contents_refused_unshown(void **state)
{
    (void)state;
    char out[16];
    struct {
        const char *text;
        size_t n;
        const char *expect;
    } cases[] = {
        { "", 0, "is empty" },
        { "\n", 1, "is empty" },
        { "abc\ndef\n", 8, "more than one line" },
        { "abc\0def", 7, "NUL" },
        { "0123456789abcdefXYZ", 19, "too long" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *p = write_file("bad", cases[i].text, cases[i].n, 0600);
        assert_int_equal(gj_secret_file_read(p, out, sizeof out, why, sizeof why), -1);
        assert_non_null(strstr(why, cases[i].expect));
        assert_null(strstr(why, "abc"));
        assert_null(strstr(why, "0123"));
    }
}

static int setup(void **state)
{
    (void)state;
    umask(022);
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(reads_one_line_without_its_newline),
        cmocka_unit_test(loose_permissions_refused),
        cmocka_unit_test(other_owner_refused),
        cmocka_unit_test(symlink_followed_and_non_files_refused),
        cmocka_unit_test(bad_contents_refused_unshown),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
