/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The configuration: values, file:line errors, drop-in order, policy_load(). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>

#include "fileio.h"
#include "macros.h"
#include "path-util.h"
#include "policy-internal.h"
#include "policy-test-util.h"
#include "string-util.h"

#define GiB (UINT64_C(1) << 30)

#ifndef POLICY_DEFAULT_CONF
#error "POLICY_DEFAULT_CONF (path of policy/upgraded.conf) must be defined"
#endif

/* Parses text as one file named test.conf; returns policy_parse_buffer/finish. */
static int parse(const char *text, Policy **ret, PolicyErrors *e) {
	_cleanup_(policy_freep) Policy *p = NULL;
	int r, k;

	assert_int_equal(policy_new_default(&p), 0);
	r = policy_parse_buffer(p, "test.conf", text, strlen(text), e);
	assert_true(r == 0 || r == -EBADMSG);
	k = policy_finish(p, e);
	assert_true(k == 0 || k == -EBADMSG);
	if (r == 0)
		r = k;
	if (r == 0 && ret)
		*ret = TAKE_PTR(p);
	return r;
}

static void assert_defaults(const Policy *p) {
	assert_int_equal(p->mode, POLICY_HANDOFF_MODE_AUTO);
	assert_false(p->allow_fast);
	assert_true(p->allow_taint == 0);
	assert_false(p->kdump_initrd_at_boot);
	assert_int_equal(strv_length(p->allowed_roots), 2);
	assert_string_equal(p->allowed_roots[0], "/boot");
	assert_string_equal(p->allowed_roots[1], "/var/lib/upgraded/images");
	assert_false(p->window.set);
	assert_true(p->max_vms == UINT64_MAX);
	assert_true(p->max_vm_memory == UINT64_MAX);
	/* The free-space check looks where libvirt writes managed-save images. */
	assert_string_equal(p->checkpoint_dir, "/var/lib/libvirt/qemu/save");
	assert_string_equal(p->metrics_dir, "/var/lib/prometheus/node-exporter");
	assert_true(p->margin_is_percent);
	assert_true(p->free_space_margin == 10);
	assert_int_equal(p->default_strategy, POLICY_VM_CHECKPOINT);
	assert_true(p->shutdown_timeout_usec == 120 * 1000000ULL);
	assert_true(p->pause_timeout_usec == 10 * 1000000ULL);
	assert_int_equal(p->save_parallel, 2);
	/* Debian's housekeeping timers wait for the restore on the boot after a handoff. */
	assert_int_equal(strv_length(p->defer_until_restored), 7);
	assert_string_equal(p->defer_until_restored[0], "apt-daily.timer");
	assert_string_equal(p->defer_until_restored[6], "man-db.timer");
	assert_int_equal(p->n_rules, 0);
}

/* [Restore] DeferUntilRestored=: appends to the default list, empty clears, and only
 * names or globs of unit types that can wait are taken. */
static void test_defer_until_restored(void **state) {
	_cleanup_(policy_freep) Policy *p = NULL, *q = NULL;
	PolicyErrors e = {};

	assert_int_equal(parse("[Restore]\nDeferUntilRestored=lab-*.timer\n", &p, &e), 0);
	assert_int_equal(strv_length(p->defer_until_restored), 8);
	assert_string_equal(p->defer_until_restored[7], "lab-*.timer");
	assert_int_equal(parse("[Restore]\nDeferUntilRestored=\n"
	                       "DeferUntilRestored=a.service  b@x.path\\x2d.socket\n"
	                       "DeferUntilRestored=pg_dump@*.timer\n",
	                       &q, &e),
	                 0);
	assert_int_equal(strv_length(q->defer_until_restored), 3);
	assert_string_equal(q->defer_until_restored[1], "b@x.path\\x2d.socket");
	policy_free(q);
	q = NULL;
	assert_int_equal(parse("[Restore]\nDeferUntilRestored=\n", &q, &e), 0);
	assert_null(q->defer_until_restored);

	static const char *const bad[] = { "multi-user.target", "a.mount",     "../x.timer",
		                           "a b/c.timer",       ".timer",      "-x.service",
		                           "x.timer.d",         "x.service\\;" };
	for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
		_cleanup_free_ char *text = NULL;

		assert_true(asprintf(&text, "[Restore]\nDeferUntilRestored=ok.timer %s\n", bad[i]) >
		            0);
		assert_int_equal(parse(text, NULL, &e), -EBADMSG);
		assert_true(e.n >= 1);
		assert_non_null(strstr(e.items[e.n - 1].message, "DeferUntilRestored="));
		policy_errors_done(&e);
	}
}

static void test_defaults(void **state) {
	_cleanup_(policy_freep) Policy *p = NULL, *q = NULL, *shipped = NULL;
	_cleanup_free_ char *text = NULL;
	PolicyErrors e = {};
	size_t size;
	int r;

	assert_int_equal(policy_new_default(&p), 0);
	assert_defaults(p);
	assert_int_equal(parse("", &q, &e), 0);
	assert_defaults(q);

	/* the shipped, commented file means exactly the defaults */
	assert_int_equal(read_file_full(POLICY_DEFAULT_CONF, 1 << 20, &text, &size), 0);
	assert_int_equal(parse(text, &shipped, &e), 0);
	assert_int_equal(e.n, 0);
	assert_defaults(shipped);
	/* and its commented-out values are valid when uncommented */
	for (char *c = strstr(text, "\n#"); c; c = strstr(c + 1, "\n#")) {
		char *eol = strchr(c + 2, '\n');

		/* "#Key=value" and "#[Section]" lines, not prose */
		if (eol && ((c[2] >= 'A' && c[2] <= 'Z' && memchr(c, '=', (size_t)(eol - c)) &&
		             !memchr(c, ' ', (size_t)(strcspn(c + 2, "=")))) ||
		            c[2] == '['))
			c[1] = ' ';
	}
	policy_free(shipped);
	shipped = NULL;
	r = parse(text, &shipped, &e);
	policy_errors_print(&e, stdout);
	assert_int_equal(r, 0);
	assert_int_equal(shipped->n_rules, 3);
	assert_string_equal(shipped->rules[0].name, "passthrough");
}

static void test_values(void **state) {
	_cleanup_(policy_freep) Policy *p = NULL;
	PolicyErrors e = {};

	assert_int_equal(parse("[Handoff]\n"
	                       "Mode=fast\n"
	                       "AllowFast=yes\n"
	                       "AllowTaint=O E\n"
	                       "AllowTaint=W\n"
	                       "KdumpInitrd=boot\n"
	                       "[Paths]\n"
	                       "AllowedRoots=/srv/k\n"
	                       "[Commit]\n"
	                       "MaintenanceWindow=Mon-Fri 22:00-02:00\n"
	                       "MaxVMs=10\n"
	                       "MaxVMMemory=256G\n"
	                       "CheckpointDir=/srv/ckpt\n"
	                       "FreeSpaceMargin=2G\n"
	                       "[VM]\n"
	                       "DefaultStrategy=shutdown\n"
	                       "ShutdownTimeoutSec=30\n"
	                       "PauseTimeoutSec=3\n"
	                       "SaveParallel=4\n"
	                       "[Metrics]\n"
	                       "TextfileDirectory=/run/prometheus\n",
	                       &p, &e),
	                 0);
	assert_int_equal(p->mode, POLICY_HANDOFF_MODE_FAST);
	assert_true(p->allow_fast);
	assert_true(p->allow_taint == ((1u << 12) | (1u << 13) | (1u << 9)));
	assert_true(p->kdump_initrd_at_boot);
	/* lists append to the default */
	assert_int_equal(strv_length(p->allowed_roots), 3);
	assert_string_equal(p->allowed_roots[2], "/srv/k");
	assert_true(p->window.set);
	assert_int_equal(p->window.days, 0x3e);
	assert_int_equal(p->window.start, 22 * 60);
	assert_int_equal(p->window.end, 2 * 60);
	assert_true(p->max_vms == 10);
	assert_true(p->max_vm_memory == 256 * GiB);
	assert_string_equal(p->checkpoint_dir, "/srv/ckpt");
	assert_string_equal(p->metrics_dir, "/run/prometheus");
	assert_false(p->margin_is_percent);
	assert_true(p->free_space_margin == 2 * GiB);
	assert_int_equal(p->default_strategy, POLICY_VM_SHUTDOWN);
	assert_true(p->shutdown_timeout_usec == 30 * 1000000ULL);
	assert_true(p->pause_timeout_usec == 3 * 1000000ULL);
	assert_int_equal(p->save_parallel, 4);
}

static void test_empty_assignment_resets(void **state) {
	_cleanup_(policy_freep) Policy *p = NULL;
	PolicyErrors e = {};

	/* one file may not assign a scalar twice, but a list may be cleared and refilled */
	assert_int_equal(parse("[Paths]\nAllowedRoots=\nAllowedRoots=/a /b\n"
	                       "[Handoff]\nAllowTaint=O\nAllowTaint=\n"
	                       "[Commit]\nMaxVMs=\n"
	                       "[Metrics]\nTextfileDirectory=\n",
	                       &p, &e),
	                 0);
	assert_string_equal(p->metrics_dir, "/var/lib/prometheus/node-exporter");
	assert_int_equal(strv_length(p->allowed_roots), 2);
	assert_string_equal(p->allowed_roots[0], "/a");
	assert_true(p->allow_taint == 0);
	assert_true(p->max_vms == UINT64_MAX);
}

static void test_syntax_variants(void **state) {
	_cleanup_(policy_freep) Policy *p = NULL;
	PolicyErrors e = {};

	/* BOM, CRLF, indentation, ':' separator, comments, inline "; comment" */
	assert_int_equal(parse("\xef\xbb\xbf# comment\r\n"
	                       "; another\r\n"
	                       "  [Handoff]\r\n"
	                       "\tMode = verified ; inline\r\n"
	                       "   AllowFast: yes\r\n"
	                       "\r\n"
	                       "[VM]\n"
	                       "  \n"
	                       "SaveParallel=3",
	                       &p, &e),
	                 0);
	assert_int_equal(p->mode, POLICY_HANDOFF_MODE_VERIFIED);
	assert_true(p->allow_fast);
	assert_int_equal(p->save_parallel, 3);
}

/* ---------- errors with file:line ---------- */

static void test_errors_table(void **state) {
	static const struct {
		const char *text;
		unsigned line;
		const char *message; /* substring */
	} cases[] = {
		{ "[Handoff]\nMode=fast\nAllowFats=yes\n", 3,
		  "Unknown key AllowFats= in [Handoff]" },
		{ "[Handoff]\nMode=quick\n", 2, "'quick' is not one of verified, fast, auto" },
		{ "[Handoff]\nMode=Fast\n", 2, "'Fast'" },
		{ "[Handoff]\nAllowFast=maybe\n", 2, "is not a boolean" },
		{ "[Handoff]\nAllowTaint=G\n", 2, "taint letters" },
		{ "[Handoff]\nKdumpInitrd=never\n", 2, "'never' is not one of boot, stage" },
		{ "[Handoff]\nMode=fast\n\nMode=auto\n", 4,
		  "Mode= is set twice in [Handoff] (first on line 2)" },
		{ "[Handoff]\nMode=fast\n[Handoff]\nMode=auto\n", 4, "set twice" },
		{ "[Handof]\nMode=fast\nAllowFast=no\n", 2, "Unknown section [Handof]" },
		{ "Mode=fast\n", 1, "Mode= is outside of any section" },
		{ "[Handoff]\nthis is garbage\n", 2,
		  "Expected KEY=VALUE, [Section], or a comment" },
		{ "[Handoff\nMode=fast\n", 1, "Invalid section header" },
		{ "[Handoff\nBogus=1\n[VM]\nSaveParallel=2\n", 1, "Invalid section header" },
		{ "[#invalid]\nMode=fast\n", 2, "Unknown section [#invalid]" },
		{ "[Handoff] Mode=fast\nAllowFast=yes\n", 1, "Unexpected text after the section" },
		{ "[Handoff] ; ok\n[VM] # ok\n[Commit]x\n", 3,
		  "Unexpected text after the section" },
		{ "[Handoff]\n=fast\n", 2, "Assignment without a key" },
		{ "[Paths]\nAllowedRoots=boot\n", 2, "'boot' is not a normalized absolute path" },
		{ "[Paths]\nAllowedRoots=/boot/../etc\n", 2, "not a normalized" },
		{ "[Paths]\nAllowedRoots=\n", 0, "AllowedRoots= is empty" },
		{ "[Commit]\nMaintenanceWindow=Sat 02:00\n", 2, "is not a window" },
		{ "[Commit]\nMaintenanceWindow=Sat 02:00-02:00\n", 2, "is not a window" },
		{ "[Commit]\nMaintenanceWindow=Sab 02:00-03:00\n", 2, "is not a window" },
		{ "[Commit]\nMaintenanceWindow=Sat, 02:00-03:00\n", 2, "is not a window" },
		{ "[Commit]\nMaintenanceWindow=25:00-26:00\n", 2, "is not a window" },
		{ "[Commit]\nMaxVMs=-1\n", 2, "is not a number or 'infinity'" },
		{ "[Commit]\nMaxVMs=ten\n", 2, "is not a number" },
		{ "[Commit]\nMaxVMMemory=12Q\n", 2, "is not a size" },
		{ "[Commit]\nMaxVMMemory=99999999999999999999\n", 2, "is not a size" },
		{ "[Commit]\nMaxVMMemory=17179869184T\n", 2, "is not a size" },
		{ "[Commit]\nCheckpointDir=relative\n", 2, "not a normalized absolute directory" },
		{ "[Commit]\nCheckpointDir=/\n", 2, "not a normalized absolute directory" },
		{ "[Metrics]\nTextfileDirectory=a/b\n", 2, "not a normalized absolute directory" },
		{ "[Commit]\nFreeSpaceMargin=5000%\n", 2, "percentage" },
		{ "[Commit]\nFreeSpaceMargin=%\n", 2, "percentage" },
		{ "[VM]\nDefaultStrategy=hibernate\n", 2,
		  "not one of checkpoint, keep-ram, shutdown, ignore" },
		{ "[VM]\nKeepRamDigest=sha1\n", 2, "not one of mark, sampled, full" },
		{ "[VM]\nKeepRamFallback=yes\n", 2, "not one of checkpoint, none" },
		{ "[Reports]\nKeep=0\n", 2, "not a number from 1 or 'infinity'" },
		{ "[Reports]\nKeep=many\n", 2, "not a number from 1 or 'infinity'" },
		{ "[VM]\nShutdownTimeoutSec=0\n", 2, "number of seconds" },
		{ "[VM]\nShutdownTimeoutSec=90s\n", 2, "number of seconds" },
		{ "[VM]\nPauseTimeoutSec=0\n", 2, "number of seconds 1..3600" },
		{ "[VM]\nPauseTimeoutSec=3601\n", 2, "number of seconds 1..3600" },
		{ "[VM]\nSaveParallel=65\n", 2, "is not a number 1..64" },
		{ "[VM]\nStrategy=keep-ram\n", 2, "Unknown key Strategy= in [VM]" },
		{ "[VMRule:]\nName=a\nStrategy=keep-ram\n", 2, "Invalid rule name" },
		{ "[VMRule:a b]\nName=a\nStrategy=keep-ram\n", 2, "Invalid rule name" },
		{ "[VMRule:a]\nName=x\n", 2, "[VMRule:a] has no Strategy=" },
		{ "\n[VMRule:a]\n\nStrategy=keep-ram\n", 4, "has no Name=, Metadata=" },
		{ "[VMRule:a]\nMemoryAbove=8G\nMemoryBelow=8G\nStrategy=keep-ram\n", 2,
		  "can never match" },
		{ "[VMRule:a]\nName=x\nMetadata=novalue\nStrategy=keep-ram\n", 3,
		  "is not KEY=VALUE" },
		{ "[VMRule:a]\nName=x\nMetadata==x\nStrategy=keep-ram\n", 3, "is not KEY=VALUE" },
		{ "[VMRule:a]\nName=x\nMode=fast\nStrategy=keep-ram\n", 3,
		  "Unknown key Mode= in [VMRule:a]" },
		{ "[VMRule:a]\nName=x\nStrategy=keep-ram\nStrategy=shutdown\n", 4, "set twice" },
		{ "[VMRule:0123456789012345678901234567890123456789x]\nName=x\nStrategy=keep-ram\n",
		  2, "too long" },
		{ "[Handoff]\nMode=fast\x01\n", 2, "control characters" },
		{ "[Handoff]\nMo\x1b[31mde=fast\n", 2, "Key name contains control characters" },
		{ "[Hand\x1b[0moff]\nMode=fast\nAllowFast=no\n", 2,
		  "Section name contains control" },
	};

	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		_cleanup_(policy_freep) Policy *p = NULL;
		PolicyErrors e = {};

		print_message("case %zu: %s\n", i, cases[i].text);
		assert_int_equal(parse(cases[i].text, &p, &e), -EBADMSG);
		assert_null(p);
		policy_errors_print(&e, stdout);
		assert_int_equal(e.n, 1);
		assert_int_equal(e.items[0].line, cases[i].line);
		assert_string_equal(e.items[0].file, cases[i].line ? "test.conf" : "");
		assert_non_null(strstr(e.items[0].message, cases[i].message));
		policy_errors_done(&e);
	}
}

static void test_every_error_reported(void **state) {
	/* syntax errors (libinih stops counting after the first) and value errors
	 * mixed: each one with its own line, and the keys between them still checked */
	static const char text[] = "[Handoff]\n"          /* 1 */
	                           "garbage one\n"        /* 2 */
	                           "Mode=fast\n"          /* 3 */
	                           "Bogus=1\n"            /* 4 */
	                           "garbage two\n"        /* 5 */
	                           "[Broken\n"            /* 6 */
	                           "Mode=auto\n"          /* 7: below a broken header: ignored */
	                           "[VM]\n"               /* 8 */
	                           "SaveParallel=0\n"     /* 9 */
	                           "more garbage\n"       /* 10 */
	                           "DefaultStrategy=x\n"; /* 11 */
	static const unsigned lines[] = { 2, 4, 5, 6, 9, 10, 11 };
	PolicyErrors e = {};
	_cleanup_free_ char *out = NULL;
	size_t size;
	FILE *f;

	assert_int_equal(parse(text, NULL, &e), -EBADMSG);
	policy_errors_print(&e, stdout);
	assert_int_equal(e.n, ELEMENTSOF(lines));
	/* reported in line order within the file */
	for (size_t i = 0; i < ELEMENTSOF(lines); i++)
		assert_int_equal(e.items[i].line, lines[i]);

	f = open_memstream(&out, &size);
	policy_errors_print(&e, f);
	fclose(f);
	assert_non_null(strstr(out, "test.conf:4: Unknown key Bogus= in [Handoff]\n"));
	assert_non_null(strstr(out, "test.conf:6: Invalid section header"));
	policy_errors_done(&e);
}

/* Bytes that are not UTF-8 (or are control characters) in a key, a value or a file name
 * are quoted as \xNN: the error stays text with its FILE:LINE, for a terminal and a D-Bus
 * reply alike. */
static void test_errors_escape_bytes(void **state) {
	static const char text[] = "[VM]\n"
	                           "Bog\xffus=1\n"
	                           "SaveParallel=\xfe\xff\n"
	                           "DefaultStrategy=caf\xc3\xa9\n";
	_cleanup_(policy_freep) Policy *p = NULL;
	_cleanup_free_ char *out = NULL;
	PolicyErrors e = {};
	size_t size;
	FILE *f;

	assert_int_equal(policy_new_default(&p), 0);
	assert_int_equal(policy_parse_buffer(p, "bad\x80name.conf", text, sizeof(text) - 1, &e),
	                 -EBADMSG);
	f = open_memstream(&out, &size);
	policy_errors_print(&e, f);
	fclose(f);
	printf("%s", out);
	assert_int_equal(e.n, 3);
	assert_non_null(strstr(out, "bad\\x80name.conf:2: Unknown key Bog\\xffus= in [VM]\n"));
	assert_non_null(strstr(out, "bad\\x80name.conf:3: "));
	assert_non_null(strstr(out, "'\\xfe\\xff'"));
	/* valid UTF-8 stays as it is */
	assert_non_null(strstr(out, "bad\\x80name.conf:4: "));
	assert_non_null(strstr(out, "caf\xc3\xa9"));
	for (size_t i = 0; i < size; i++)
		assert_true((unsigned char)out[i] >= 0x20 || out[i] == '\n');
	assert_null(strchr(out, '\xff'));
	assert_null(strchr(out, '\xfe'));
	assert_null(strchr(out, '\x80'));
	policy_errors_done(&e);
}

static void test_long_and_nul_lines(void **state) {
	_cleanup_free_ char *text = NULL;
	PolicyErrors e = {};
	char *x;

	/* a 300-character line: one error on its own line, not a split into two lines */
	assert_true(asprintf(&text, "[Paths]\nAllowedRoots=/%0300d\n[VM]\nSaveParallel=x\n", 0) >
	            0);
	assert_int_equal(parse(text, NULL, &e), -EBADMSG);
	policy_errors_print(&e, stdout);
	assert_int_equal(e.n, 2);
	assert_int_equal(e.items[0].line, 2);
	assert_non_null(strstr(e.items[0].message, "too long"));
	assert_int_equal(e.items[1].line, 4);
	policy_errors_done(&e);

	/* a NUL byte inside a line */
	{
		static const char nul[] = "[Handoff]\nMode=fast\0garbage\nAllowFast=yes\n";
		_cleanup_(policy_freep) Policy *p = NULL;

		assert_int_equal(policy_new_default(&p), 0);
		assert_int_equal(policy_parse_buffer(p, "nul.conf", nul, sizeof(nul) - 1, &e),
		                 -EBADMSG);
		assert_int_equal(e.n, 1);
		assert_int_equal(e.items[0].line, 2);
		assert_non_null(strstr(e.items[0].message, "NUL"));
		policy_errors_done(&e);
	}

	/* many syntax errors: bounded work, a final note */
	free(text);
	text = malloc(200 * 4 + 16);
	assert_non_null(text);
	strcpy(text, "[VM]\n");
	x = text + strlen(text);
	for (int i = 0; i < 200; i++) {
		memcpy(x, "xx\n", 3);
		x += 3;
	}
	*x = '\0';
	assert_int_equal(parse(text, NULL, &e), -EBADMSG);
	assert_int_equal(e.n, POLICY_MAX_SYNTAX_ERRORS + 1);
	assert_non_null(strstr(e.items[e.n - 1].message, "Too many syntax errors"));
	policy_errors_done(&e);
}

static void test_parse_buffer_invalid(void **state) {
	_cleanup_(policy_freep) Policy *p = NULL;

	assert_int_equal(policy_new_default(&p), 0);
	assert_int_equal(policy_parse_buffer(NULL, "x", "", 0, NULL), -EINVAL);
	assert_int_equal(policy_parse_buffer(p, NULL, "", 0, NULL), -EINVAL);
	assert_int_equal(policy_parse_buffer(p, "x", NULL, 1, NULL), -EINVAL);
	assert_int_equal(policy_parse_buffer(p, "x", NULL, 0, NULL), 0);
	/* without an error list, errors still fail the parse */
	assert_int_equal(policy_parse_buffer(p, "x", "[X]\na=b\n", 8, NULL), -EBADMSG);
}

/* ---------- value parsers ---------- */

static void test_parse_size(void **state) {
	static const struct {
		const char *s;
		int r;
		uint64_t v;
	} cases[] = {
		{ "0", 0, 0 },
		{ "4096", 0, 4096 },
		{ "512K", 0, 512 << 10 },
		{ "512KiB", 0, 512 << 10 },
		{ "3M", 0, 3 << 20 },
		{ "64G", 0, 64 * GiB },
		{ "2TiB", 0, UINT64_C(2) << 40 },
		{ "10B", 0, 10 },
		{ "16777215T", 0, UINT64_C(16777215) << 40 },
		{ "16777216T", -ERANGE, 0 },
		{ "18446744073709551616", -ERANGE, 0 },
		{ "", -EINVAL, 0 },
		{ "G", -EINVAL, 0 },
		{ "-1", -EINVAL, 0 },
		{ " 1", -EINVAL, 0 },
		{ "1 G", -EINVAL, 0 },
		{ "1g", -EINVAL, 0 },
		{ "1.5G", -EINVAL, 0 },
	};

	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		uint64_t v = 12345;

		assert_int_equal(policy_parse_size(cases[i].s, &v), cases[i].r);
		assert_true(v == (cases[i].r == 0 ? cases[i].v : 12345));
	}
}

static void test_window(void **state) {
	static const struct {
		const char *s;
		int wday;
		unsigned h, m;
		bool in;
	} cases[] = {
		{ "Sat,Sun 02:00-04:00", 6, 2, 0, true },
		{ "Sat,Sun 02:00-04:00", 0, 3, 59, true },
		{ "Sat,Sun 02:00-04:00", 6, 4, 0, false },
		{ "Sat,Sun 02:00-04:00", 6, 1, 59, false },
		{ "Sat,Sun 02:00-04:00", 1, 3, 0, false },
		/* wrapping: belongs to the day it starts */
		{ "Fri 22:00-02:00", 5, 23, 0, true },
		{ "Fri 22:00-02:00", 6, 1, 0, true },
		{ "Fri 22:00-02:00", 6, 2, 0, false },
		{ "Fri 22:00-02:00", 5, 1, 0, false },
		{ "Fri 22:00-02:00", 4, 23, 0, false },
		{ "Sun 23:00-01:00", 1, 0, 30, true },
		{ "Sat 23:00-01:00", 0, 0, 30, true },
		/* ranges, with wrap over the week */
		{ "Mon-Fri 09:00-17:00", 3, 12, 0, true },
		{ "Mon-Fri 09:00-17:00", 6, 12, 0, false },
		{ "Fri-Mon 09:00-17:00", 0, 12, 0, true },
		{ "Fri-Mon 09:00-17:00", 2, 12, 0, false },
		{ "mon,WED 09:00-17:00", 3, 9, 0, true },
		/* every day, up to midnight */
		{ "03:00-04:00", 2, 3, 30, true },
		{ "22:00-24:00", 2, 23, 59, true },
		{ "22:00-24:00", 3, 0, 0, false },
		{ "Sat,Sun 00:00-24:00", 6, 0, 0, true },
		{ "Sat,Sun 00:00-24:00", 0, 23, 59, true },
		{ "Sat,Sun 00:00-24:00", 1, 0, 0, false },
		{ "Sun 22:00-00:00", 0, 23, 59, true },
		{ "Sun 22:00-00:00", 1, 0, 0, false },
	};
	static const char *const bad[] = {
		"",
		"02:00-04:00 ",
		"Sat",
		"Sat ",
		"Sat 2:00-4:00",
		"Sat 02:00-04",
		"Sat 02:60-04:00",
		"Sat 24:00-01:00",
		"Sat 24:30-01:00",
		"Sat 01:00-01:00",
		"Sat,,Sun 01:00-02:00",
		"Mon-Fry 01:00-02:00",
		",Sat 01:00-02:00",
		"Sat- 01:00-02:00",
		"Satu 01:00-02:00",
	};

	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		PolicyWindow w = {};

		assert_int_equal(policy_parse_window(cases[i].s, &w), 0);
		assert_int_equal(
		        policy_window_contains(&w, cases[i].wday, cases[i].h * 60 + cases[i].m),
		        cases[i].in);
	}
	for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
		PolicyWindow w = { .start = 7 };

		print_message("bad window '%s'\n", bad[i]);
		assert_int_equal(policy_parse_window(bad[i], &w), -EINVAL);
		assert_int_equal(w.start, 7);
	}
	/* no window: always */
	assert_true(policy_window_contains(&(PolicyWindow){}, 3, 0));
}

static void test_taint(void **state) {
	uint64_t t = 0;
	char buf[32];

	assert_int_equal(policy_parse_taint("P O E", &t), 0);
	assert_true(t == ((1u << 0) | (1u << 12) | (1u << 13)));
	assert_int_equal(policy_parse_taint("OE", &t), 0);
	assert_true(t == ((1u << 12) | (1u << 13)));
	assert_int_equal(policy_parse_taint("o", &t), -EINVAL);
	assert_int_equal(policy_parse_taint("G", &t), -EINVAL);
	assert_string_equal(policy_taint_to_string((1u << 7) | (1u << 9), buf), "DW");
	assert_string_equal(policy_taint_to_string(UINT64_C(1) << 40, buf), "?");
	assert_string_equal(policy_taint_to_string(0, buf), "");
}

/* ---------- policy_load() ---------- */

static void test_load_nothing_is_defaults(void **state) {
	char *root = make_root();
	Policy *p = NULL;
	PolicyErrors e = {};

	assert_int_equal(policy_load(root, &p, &e), 0);
	assert_int_equal(e.n, 0);
	assert_defaults(p);
	policy_free(p);
	/* an empty drop-in directory too */
	write_at(root, "/etc/upgraded/upgraded.conf.d/README", "not a .conf\n");
	assert_int_equal(policy_load(root, &p, NULL), 0);
	assert_defaults(p);
	policy_free(p);
	rm_root(root);
}

static void test_load_dropin_order(void **state) {
	char *root = make_root();
	_cleanup_free_ char *masked = NULL;
	Policy *p = NULL;
	PolicyErrors e = {};

	write_at(root, "/etc/upgraded/upgraded.conf",
	         "[Handoff]\nMode=verified\n[VM]\nSaveParallel=3\n"
	         "[VMRule:big]\nMemoryAbove=8G\nStrategy=checkpoint\n"
	         "[Paths]\nAllowedRoots=/main\n");
	/* byte order, not creation order: 10 < 20 < 9 */
	write_at(root, "/etc/upgraded/upgraded.conf.d/20-b.conf",
	         "[Handoff]\nMode=auto\n[VMRule:small]\nMemoryBelow=1G\nStrategy=ignore\n");
	write_at(root, "/etc/upgraded/upgraded.conf.d/9-c.conf",
	         "[Handoff]\nMode=fast\n[VMRule:big]\nStrategy=shutdown\n[Paths]\nAllowedRoots=/"
	         "c\n");
	write_at(root, "/etc/upgraded/upgraded.conf.d/10-a.conf", "[Handoff]\nMode=verified\n");
	write_at(root, "/etc/upgraded/upgraded.conf.d/30-off.conf.disabled", "garbage\n");
	write_at(root, "/etc/upgraded/upgraded.conf.d/.hidden.conf", "garbage\n");
	/* masked: a link to /dev/null */
	assert_int_equal(path_prefix_root(root, "/etc/upgraded/upgraded.conf.d/40-m.conf", &masked),
	                 0);
	assert_int_equal(symlink("/dev/null", masked), 0);

	assert_int_equal(policy_load(root, &p, &e), 0);
	policy_errors_print(&e, stdout);
	assert_int_equal(e.n, 0);
	assert_int_equal(p->mode, POLICY_HANDOFF_MODE_FAST); /* 9-c.conf is last */
	assert_int_equal(p->save_parallel, 3);
	/* a rule keeps its first position; a later file overrides its keys */
	assert_int_equal(p->n_rules, 2);
	assert_string_equal(p->rules[0].name, "big");
	assert_int_equal(p->rules[0].strategy, POLICY_VM_SHUTDOWN);
	assert_true(p->rules[0].memory_above == 8 * GiB);
	assert_string_equal(p->rules[1].name, "small");
	/* lists append across files */
	assert_int_equal(strv_length(p->allowed_roots), 4);
	assert_string_equal(p->allowed_roots[2], "/main");
	assert_string_equal(p->allowed_roots[3], "/c");
	policy_free(p);
	rm_root(root);
}

static void test_load_errors_fail_whole_load(void **state) {
	char *root = make_root();
	_cleanup_free_ char *dropin = NULL, *out = NULL, *dir = NULL;
	Policy *p = (Policy *)0x1;
	PolicyErrors e = {};
	size_t size;
	FILE *f;

	write_at(root, "/etc/upgraded/upgraded.conf", "[Handoff]\nMode=fast\nAllowFast=perhaps\n");
	write_at(root, "/etc/upgraded/upgraded.conf.d/50-x.conf",
	         "[VM]\n\nSaveParallel=1\nFoo=2\n");
	assert_int_equal(policy_load(root, &p, &e), -EBADMSG);
	assert_ptr_equal(p, (Policy *)0x1); /* untouched */
	assert_int_equal(e.n, 2);
	assert_int_equal(e.items[0].line, 3);
	assert_non_null(strstr(e.items[0].file, "/etc/upgraded/upgraded.conf"));
	assert_int_equal(e.items[1].line, 4);
	assert_true(path_startswith(e.items[1].file, root));
	assert_non_null(strstr(e.items[1].file, "/etc/upgraded/upgraded.conf.d/50-x.conf"));
	policy_errors_done(&e);

	/* --check-config prints the same errors and fails */
	f = open_memstream(&out, &size);
	assert_int_equal(policy_check_config(root, false, f, f), -EBADMSG);
	fclose(f);
	assert_true(asprintf(&dropin,
	                     "%s/etc/upgraded/upgraded.conf.d/50-x.conf:4: Unknown key "
	                     "Foo= in [VM]\n",
	                     root) > 0);
	assert_non_null(strstr(out, dropin));
	assert_non_null(strstr(out, "2 errors"));
	free(out);
	out = NULL;

	/* a drop-in directory that is a file is an error too, and a directory named .conf */
	write_at(root, "/etc/upgraded/upgraded.conf", "[Handoff]\nMode=fast\n");
	assert_int_equal(path_prefix_root(root, "/etc/upgraded/upgraded.conf.d/60-dir.conf", &dir),
	                 0);
	assert_int_equal(mkdir(dir, 0755), 0);
	assert_int_equal(policy_load(root, &p, &e), -EBADMSG);
	policy_errors_print(&e, stdout);
	assert_int_equal(e.n, 2);
	assert_non_null(strstr(e.items[1].message, "Not a regular file"));
	policy_errors_done(&e);
	assert_int_equal(rmdir(dir), 0);

	/* fixed: OK */
	write_at(root, "/etc/upgraded/upgraded.conf.d/50-x.conf", "[VM]\nSaveParallel=1\n");
	f = open_memstream(&out, &size);
	assert_int_equal(policy_check_config(root, false, f, f), 0);
	fclose(f);
	assert_string_equal(out, "configuration OK\n");
	assert_int_equal(policy_load(root, &p, NULL), 0);
	assert_int_equal(p->mode, POLICY_HANDOFF_MODE_FAST);
	policy_free(p);
	rm_root(root);
}

static void test_load_unreadable(void **state) {
	char *root = make_root();
	_cleanup_free_ char *path = NULL;
	Policy *p = NULL;
	PolicyErrors e = {};
	int fd;

	/* larger than 1 MiB */
	assert_int_equal(path_prefix_root(root, "/etc/upgraded/upgraded.conf", &path), 0);
	write_at(root, "/etc/upgraded/upgraded.conf", "");
	fd = open(path, O_WRONLY);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, 2 * 1024 * 1024), 0);
	close(fd);
	assert_int_equal(policy_load(root, &p, &e), -EFBIG);
	assert_null(p);
	assert_int_equal(e.n, 1);
	assert_non_null(strstr(e.items[0].message, "larger than 1 MiB"));
	policy_errors_done(&e);
	rm_root(root);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_values),
		cmocka_unit_test(test_defer_until_restored),
		cmocka_unit_test(test_empty_assignment_resets),
		cmocka_unit_test(test_syntax_variants),
		cmocka_unit_test(test_errors_table),
		cmocka_unit_test(test_every_error_reported),
		cmocka_unit_test(test_errors_escape_bytes),
		cmocka_unit_test(test_long_and_nul_lines),
		cmocka_unit_test(test_parse_buffer_invalid),
		cmocka_unit_test(test_parse_size),
		cmocka_unit_test(test_window),
		cmocka_unit_test(test_taint),
		cmocka_unit_test(test_load_nothing_is_defaults),
		cmocka_unit_test(test_load_dropin_order),
		cmocka_unit_test(test_load_errors_fail_whole_load),
		cmocka_unit_test(test_load_unreadable),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
