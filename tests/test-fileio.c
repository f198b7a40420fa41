/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>

#include "fileio.h"
#include "json-util.h"
#include "macros.h"
#include "path-util.h"

static int setup_tmpdir(void **state) {
	char *d = strdup("/tmp/test-fileio.XXXXXX");

	if (!d || !mkdtemp(d)) {
		free(d);
		return -1;
	}
	*state = d;
	return 0;
}

static int teardown_tmpdir(void **state) {
	char *d = *state;
	_cleanup_free_ char *cmd = NULL;

	if (asprintf(&cmd, "rm -rf '%s'", d) >= 0)
		(void)!system(cmd);
	free(d);
	return 0;
}

static size_t count_entries(const char *dir) {
	DIR *d = opendir(dir);
	struct dirent *de;
	size_t n = 0;

	assert_non_null(d);
	while ((de = readdir(d)))
		if (de->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

static void test_write_file_atomic_replaces_and_leaves_no_temp(void **state) {
	_cleanup_free_ char *p = NULL, *data = NULL;
	const char *dir = *state;
	struct stat st;
	size_t size;

	assert_int_equal(path_join(dir, "record.json", &p), 0);
	assert_int_equal(write_file_atomic(p, "old", 3, 0600), 0);
	assert_int_equal(write_file_atomic(p, "{\"new\":1}", 9, 0640), 0);

	assert_int_equal(read_file_full(p, 1024, &data, &size), 0);
	assert_int_equal(size, 9);
	assert_string_equal(data, "{\"new\":1}");
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0640);
	/* Only the target exists: the temporary file was renamed, not left behind. */
	assert_int_equal(count_entries(dir), 1);
}

static void test_write_file_atomic_fails_cleanly(void **state) {
	_cleanup_free_ char *p = NULL;
	const char *dir = *state;

	assert_int_equal(path_join(dir, "missing/record.json", &p), 0);
	assert_int_equal(write_file_atomic(p, "x", 1, 0600), -ENOENT);
	assert_int_equal(write_file_atomic(NULL, "x", 1, 0600), -EINVAL);
	assert_int_equal(count_entries(dir), 0);
}

static void test_read_file_full_limits(void **state) {
	_cleanup_free_ char *p = NULL, *data = NULL;
	const char *dir = *state;
	char big[10000];
	size_t size = 12345;

	memset(big, 'a', sizeof(big));
	assert_int_equal(path_join(dir, "big", &p), 0);
	assert_int_equal(write_file_atomic(p, big, sizeof(big), 0600), 0);

	assert_int_equal(read_file_full(p, 9999, &data, &size), -EFBIG);
	assert_null(data);
	assert_int_equal(size, 12345); /* untouched on failure */
	assert_int_equal(read_file_full(p, 10000, &data, &size), 0);
	assert_int_equal(size, 10000);
	assert_int_equal(data[10000], '\0');
	assert_int_equal(read_file_full("/nonexistent/x", 10, &data, NULL), -ENOENT);
}

static void test_read_file_full_empty(void **state) {
	_cleanup_free_ char *p = NULL, *data = NULL;
	size_t size = 1;

	assert_int_equal(path_join(*state, "empty", &p), 0);
	assert_int_equal(write_file_atomic(p, NULL, 0, 0600), 0);
	assert_int_equal(read_file_full(p, 10, &data, &size), 0);
	assert_int_equal(size, 0);
	assert_string_equal(data, "");
}

static void test_mkdir_p(void **state) {
	_cleanup_free_ char *p = NULL, *f = NULL;
	struct stat st;

	assert_int_equal(path_join(*state, "var/lib/upgraded/reports", &p), 0);
	assert_int_equal(mkdir_p(p, 0755), 0);
	assert_int_equal(mkdir_p(p, 0755), 0); /* idempotent */
	assert_int_equal(stat(p, &st), 0);
	assert_true(S_ISDIR(st.st_mode));

	assert_int_equal(path_join(*state, "file", &f), 0);
	assert_int_equal(write_file_atomic(f, "x", 1, 0600), 0);
	assert_int_equal(mkdir_p(f, 0755), -ENOTDIR);
}

/* read_at: a read at the fd's offset moves it, a pread at an offset leaves it alone. */
static void test_read_at(void **state) {
	_cleanup_free_ char *p = NULL;
	_cleanup_close_ int fd = -EBADF;
	char buf[8] = {};

	assert_int_equal(path_join(*state, "f", &p), 0);
	assert_int_equal(write_file_atomic(p, "abcdef", 6, 0600), 0);
	fd = open(p, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(read_at(fd, buf, 2, 3), 2);
	assert_memory_equal(buf, "de", 2);
	assert_int_equal(read_at(fd, buf, 3, -1), 3);
	assert_memory_equal(buf, "abc", 3);
	assert_int_equal(read_at(fd, buf, sizeof(buf), 6), 0);
	assert_int_equal(read_at(-1, buf, 1, -1), -EBADF);
}

/* json_write_file_atomic makes the directory and writes a document that reads back. */
static void test_json_write_file_atomic(void **state) {
	_cleanup_free_ char *dir = NULL, *p = NULL;
	_cleanup_json_ json_object *o = json_object_new_object(), *back = NULL;
	json_object *v;

	assert_non_null(o);
	assert_int_equal(json_object_object_add(o, "path", json_object_new_string("/a/b")), 0);
	assert_int_equal(path_join(*state, "new/dir", &dir), 0);
	assert_int_equal(path_join(dir, "doc.json", &p), 0);
	assert_int_equal(json_write_file_atomic(dir, p, o), 0);
	back = json_object_from_file(p);
	assert_non_null(back);
	assert_true(json_object_object_get_ex(back, "path", &v));
	assert_string_equal(json_object_get_string(v), "/a/b");
	assert_int_equal(count_entries(dir), 1);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_write_file_atomic_replaces_and_leaves_no_temp,
		                                setup_tmpdir, teardown_tmpdir),
		cmocka_unit_test_setup_teardown(test_write_file_atomic_fails_cleanly, setup_tmpdir,
		                                teardown_tmpdir),
		cmocka_unit_test_setup_teardown(test_read_file_full_limits, setup_tmpdir,
		                                teardown_tmpdir),
		cmocka_unit_test_setup_teardown(test_read_file_full_empty, setup_tmpdir,
		                                teardown_tmpdir),
		cmocka_unit_test_setup_teardown(test_mkdir_p, setup_tmpdir, teardown_tmpdir),
		cmocka_unit_test_setup_teardown(test_read_at, setup_tmpdir, teardown_tmpdir),
		cmocka_unit_test_setup_teardown(test_json_write_file_atomic, setup_tmpdir,
		                                teardown_tmpdir),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
