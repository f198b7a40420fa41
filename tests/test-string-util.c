/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "handoff-mode.h"
#include "macros.h"
#include "string-util.h"

static void test_string_has_cc(void **state) {
	assert_false(string_has_cc("root=/dev/vda1 console=ttyS0,115200 quiet"));
	assert_false(string_has_cc(""));
	assert_false(string_has_cc(NULL));
	assert_true(string_has_cc("quiet\ninit=/bin/sh"));
	assert_true(string_has_cc("a\tb"));
	assert_true(string_has_cc("\x1b[31m"));
	assert_true(string_has_cc("del\x7f"));
	/* UTF-8 is not a control character. */
	assert_false(string_has_cc("caf\xc3\xa9"));
}

static void test_strv_extend_and_length(void **state) {
	_cleanup_strv_free_ char **l = NULL;

	assert_int_equal(strv_length(l), 0);
	assert_int_equal(strv_extend(&l, "/boot"), 0);
	assert_int_equal(strv_extend(&l, "/var/lib/upgraded/images"), 0);
	assert_int_equal(strv_length(l), 2);
	assert_string_equal(l[0], "/boot");
	assert_string_equal(l[1], "/var/lib/upgraded/images");
	assert_null(l[2]);
}

static void test_strstrip(void **state) {
	char a[] = "  Handoff = fast \t\n";
	char b[] = "";
	char c[] = "   ";

	assert_string_equal(strstrip(a), "Handoff = fast");
	assert_string_equal(strstrip(b), "");
	assert_string_equal(strstrip(c), "");
}

static void test_safe_atou64(void **state) {
	unsigned long long v = 7;

	assert_int_equal(safe_atou64("0", &v), 0);
	assert_int_equal(v, 0);
	assert_int_equal(safe_atou64("18446744073709551615", &v), 0);
	assert_true(v == 18446744073709551615ULL);
	v = 7;
	assert_int_equal(safe_atou64("18446744073709551616", &v), -ERANGE);
	assert_int_equal(safe_atou64("-1", &v), -EINVAL);
	assert_int_equal(safe_atou64(" 1", &v), -EINVAL);
	assert_int_equal(safe_atou64("1x", &v), -EINVAL);
	assert_int_equal(safe_atou64("", &v), -EINVAL);
	assert_int_equal(v, 7);
}

static void test_safe_atou64_prefix(void **state) {
	unsigned long long v = 7;
	const char *end = NULL;

	assert_int_equal(safe_atou64_prefix("512MiB", &v, &end), 0);
	assert_int_equal(v, 512);
	assert_string_equal(end, "MiB");
	assert_int_equal(safe_atou64_prefix("42", &v, &end), 0);
	assert_int_equal(v, 42);
	assert_string_equal(end, "");
	v = 7;
	end = NULL;
	assert_int_equal(safe_atou64_prefix("K1", &v, &end), -EINVAL);
	assert_int_equal(safe_atou64_prefix("99999999999999999999G", &v, &end), -ERANGE);
	assert_int_equal(v, 7);
	assert_null(end);
}

/* The handoff mode's names, the only place it becomes a string. */
static void test_handoff_mode_names(void **state) {
	assert_string_equal(handoff_mode_to_string(HANDOFF_MODE_VERIFIED), "verified");
	assert_string_equal(handoff_mode_to_string(HANDOFF_MODE_FAST), "fast");
	assert_null(handoff_mode_to_string(_HANDOFF_MODE_INVALID));
	assert_null(handoff_mode_to_string(_HANDOFF_MODE_MAX));
	assert_int_equal(handoff_mode_from_string("fast"), HANDOFF_MODE_FAST);
	assert_int_equal(handoff_mode_from_string("verified"), HANDOFF_MODE_VERIFIED);
	assert_int_equal(handoff_mode_from_string("auto"), _HANDOFF_MODE_INVALID);
	assert_int_equal(handoff_mode_from_string(NULL), _HANDOFF_MODE_INVALID);
}

/* Every cut lands on a character boundary, so the result is valid UTF-8 whatever the
 * input: sd-bus refuses to send a reply that is not (and the caller waits). */
static void test_string_escape_cut(void **state) {
	char buf[ESCAPE_CUT_SIZE(32)];

	assert_string_equal(string_escape_cut("abc", SIZE_MAX, 32, buf), "abc");
	assert_string_equal(string_escape_cut(NULL, SIZE_MAX, 32, buf), "");
	assert_string_equal(string_escape_cut("", SIZE_MAX, 32, buf), "");
	/* 31 'a' and an é (2 bytes) in a 32-byte budget: the é does not fit whole. */
	assert_string_equal(
	        string_escape_cut("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\xc3\xa9", SIZE_MAX, 32, buf),
	        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa...");
	assert_string_equal(
	        string_escape_cut("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\xc3\xa9", SIZE_MAX, 32, buf),
	        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\xc3\xa9");
	/* Control characters and bytes that are not UTF-8 are escaped. */
	assert_string_equal(string_escape_cut("a\nb\x7f", SIZE_MAX, 32, buf), "a\\x0ab\\x7f");
	assert_string_equal(string_escape_cut("\xc3(\xff\xed\xa0\x80\xc0\xaf", SIZE_MAX, 32, buf),
	                    "\\xc3(\\xff\\xed\\xa0\\x80\\xc0\\xaf");
	/* A 4-byte character kept whole; len bounds the input. */
	assert_string_equal(string_escape_cut("\xf0\x9f\x98\x80z", SIZE_MAX, 32, buf),
	                    "\xf0\x9f\x98\x80z");
	assert_string_equal(string_escape_cut("\xf0\x9f\x98\x80z", 3, 32, buf), "\\xf0\\x9f\\x98");
	assert_string_equal(string_escape_cut("abcdef", 3, 32, buf), "abc");
	/* An escape that does not fit is left out whole. */
	assert_string_equal(string_escape_cut("a\x01", SIZE_MAX, 2, buf), "a...");
	assert_string_equal(QUOTE_CUT("caf\xc3\xa9", 4), "caf...");
	assert_int_equal(utf8_char_len("\xf4\x90\x80\x80", 4), 0); /* beyond U+10FFFF */
	assert_int_equal(utf8_char_len("\xe2\x82\xac", 3), 3);
	assert_int_equal(utf8_char_len("\xe2\x82\xac", 2), 0);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_string_has_cc),
		cmocka_unit_test(test_strv_extend_and_length),
		cmocka_unit_test(test_strstrip),
		cmocka_unit_test(test_safe_atou64),
		cmocka_unit_test(test_string_escape_cut),
		cmocka_unit_test(test_safe_atou64_prefix),
		cmocka_unit_test(test_handoff_mode_names),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
