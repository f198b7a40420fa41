/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "cmdline.h"
#include "macros.h"
#include "upgrade-bus.h"

static void expect_invalid(const char *s) {
	_cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;

	assert_true(cmdline_validate(s, &e) < 0);
	assert_true(sd_bus_error_has_name(&e, UPGRADE_ERROR_INVALID_CMDLINE));
}

static void test_cmdline_validate_accepts_ordinary_lines(void **state) {
	assert_int_equal(cmdline_validate("", NULL), 0);
	assert_int_equal(cmdline_validate("root=/dev/vda1 ro quiet", NULL), 0);
	assert_int_equal(cmdline_validate("console=ttyS0 foo=\"a b\" upgradedx=1", NULL), 0);
	/* A reserved prefix inside a quoted value is a value, not a parameter... */
	assert_int_equal(cmdline_validate("foo=\"x upgraded.other=1\"", NULL), 0);
}

static void test_cmdline_validate_rejects_control_characters(void **state) {
	expect_invalid("root=/dev/vda1\nro");
	expect_invalid("root=/dev/vda1\tro");
	expect_invalid("a\x7f");
	expect_invalid(NULL);
}

/* The kernel takes 0xa0 for a space: "ro\xa0upgraded.foo=1" holds the reserved word
 * upgraded.foo=1 there. Non-ASCII is refused, and the split matches the kernel's. */
static void test_cmdline_validate_rejects_non_ascii(void **state) {
	_cleanup_free_ char *s = NULL;

	expect_invalid("ro\xa0upgraded.foo=1");
	expect_invalid("ro\xc2\xa0upgraded.foo=1");
	expect_invalid("console=ttyS0 caf\xc3\xa9=1");
	expect_invalid("\xa0");
	assert_int_equal(cmdline_strip_for_reuse("ro\xa0upgraded.foo=1\xa0quiet", &s), 0);
	assert_string_equal(s, "ro quiet");
	assert_true(cmdline_has_word("ro\xa0upgraded.panic=1", "upgraded.panic=1"));
	assert_true(cmdline_has_word("ro\vquiet", "quiet"));
}

static void test_cmdline_validate_rejects_too_long(void **state) {
	char buf[CMDLINE_MAX + 2];

	memset(buf, 'a', CMDLINE_MAX);
	buf[CMDLINE_MAX] = '\0';
	assert_int_equal(cmdline_validate(buf, NULL), 0);
	buf[CMDLINE_MAX] = 'a';
	buf[CMDLINE_MAX + 1] = '\0';
	expect_invalid(buf);
}

static void test_cmdline_validate_rejects_smuggled_stamps(void **state) {
	expect_invalid("quiet upgraded.stamps=0x1000");
	expect_invalid("upgraded.stamps=1");
	expect_invalid("quiet \"upgraded.stamps=1\"");
	expect_invalid("quiet upgraded.anything");
	expect_invalid("quiet upgraded.panic=1");
	/* ...but the loader's own keys are refused even there: the next kernel's reader
	 * finds "upgraded.stamps=" after any blank, quoted or not. */
	expect_invalid("foo=\"x upgraded.stamps=1\"");
	expect_invalid("foo=\"x upgraded.panic=1\"");
	expect_invalid("foo=xupgraded.stamps=1");
	expect_invalid("quiet foo=\"unbalanced");
}

/* After "--" the kernel hands every word to init, and upgraded's parameters come after the
 * caller's words: a "--" of its own (quoted too: the kernel strips the quotes) is refused. */
static void test_cmdline_validate_rejects_init_separator(void **state) {
	expect_invalid("root=/dev/vda1 ro -- single");
	expect_invalid("--");
	expect_invalid("quiet --");
	expect_invalid("quiet \"--\" x");
	/* ...a word that only starts or ends with it is a parameter like any other. */
	assert_int_equal(cmdline_validate("quiet --x foo=-- a--", NULL), 0);
	assert_int_equal(cmdline_validate("foo=\"a -- b\"", NULL), 0);
}

static void test_cmdline_strip_for_reuse(void **state) {
	_cleanup_free_ char *a = NULL, *b = NULL, *c = NULL;

	assert_int_equal(cmdline_strip_for_reuse("BOOT_IMAGE=/vmlinuz-6.1 root=/dev/vda1 ro "
	                                         "upgraded.stamps=0x1 quiet\n",
	                                         &a),
	                 0);
	assert_string_equal(a, "root=/dev/vda1 ro quiet");
	assert_int_equal(cmdline_validate(a, NULL), 0);
	assert_int_equal(cmdline_strip_for_reuse("  ", &b), 0);
	assert_string_equal(b, "");
	assert_int_equal(cmdline_strip_for_reuse("a=\"x y\"  b", &c), 0);
	assert_string_equal(c, "a=\"x y\" b");
}

static void test_cmdline_has_word_panic_mark(void **state) {
	assert_true(cmdline_has_word("root=/dev/vda reset_devices upgraded.panic=1 "
	                             "upgraded.stamps=x\n",
	                             CMDLINE_PANIC_MARK));
	assert_true(cmdline_has_word("upgraded.panic=1", CMDLINE_PANIC_MARK));
	/* Not the mark: another value, a prefix, a longer word, inside quotes. */
	assert_false(cmdline_has_word("upgraded.panic=10 quiet", CMDLINE_PANIC_MARK));
	assert_false(cmdline_has_word("upgraded.panic=0", CMDLINE_PANIC_MARK));
	assert_false(cmdline_has_word("xupgraded.panic=1", CMDLINE_PANIC_MARK));
	assert_false(cmdline_has_word("a=\"upgraded.panic=1\"", CMDLINE_PANIC_MARK));
	assert_false(cmdline_has_word("", CMDLINE_PANIC_MARK));
	assert_false(cmdline_has_word(NULL, CMDLINE_PANIC_MARK));
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cmdline_validate_accepts_ordinary_lines),
		cmocka_unit_test(test_cmdline_validate_rejects_control_characters),
		cmocka_unit_test(test_cmdline_validate_rejects_non_ascii),
		cmocka_unit_test(test_cmdline_validate_rejects_too_long),
		cmocka_unit_test(test_cmdline_validate_rejects_smuggled_stamps),
		cmocka_unit_test(test_cmdline_validate_rejects_init_separator),
		cmocka_unit_test(test_cmdline_strip_for_reuse),
		cmocka_unit_test(test_cmdline_has_word_panic_mark),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
