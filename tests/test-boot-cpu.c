/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * The boot CPU (loader/boot-cpu.h): processor 0's APIC id from /proc/cpuinfo, the BSP a
 * command line names, and the disable_cpu_apicid= word the loader appends: to every crash
 * image, and to any image loaded by a kernel that does not run on the machine's BSP (after a
 * panic on another CPU), never otherwise.
 */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "boot-cpu.h"
#include "loader-test-util.h"

#define CPUINFO(id0, id1)                                                                        \
	"processor\t: 0\nvendor_id\t: AuthenticAMD\nphysical id\t: 0\napicid\t\t: " id0          \
	"\ninitial apicid\t: " id0 "\nfpu\t\t: yes\n\n"                                          \
	"processor\t: 1\nvendor_id\t: AuthenticAMD\napicid\t\t: " id1 "\ninitial apicid\t: " id1 \
	"\n\n"

static void test_parse_cpuinfo(void **state) {
	uint32_t v = 77;

	assert_int_equal(boot_cpu_parse_cpuinfo(CPUINFO("0", "1"), &v), 0);
	assert_int_equal(v, 0);
	/* Processor 0 is the CPU the kernel booted on, whatever its APIC id. */
	assert_int_equal(boot_cpu_parse_cpuinfo(CPUINFO("1", "0"), &v), 0);
	assert_int_equal(v, 1);
	assert_int_equal(boot_cpu_parse_cpuinfo(CPUINFO("4294967295", "0"), &v), 0);
	assert_int_equal(v, UINT32_MAX);
	/* Not "initial apicid" of another processor, nor a key that only starts with it. */
	assert_int_equal(boot_cpu_parse_cpuinfo("processor\t: 1\napicid\t\t: 3\n", &v), -EBADMSG);
	assert_int_equal(boot_cpu_parse_cpuinfo("processor\t: 0\napicidx\t: 3\n", &v), -EBADMSG);
	assert_int_equal(boot_cpu_parse_cpuinfo("processor\t: 0\nflags\t: fpu\n", &v), -EBADMSG);
	v = 77;
	assert_int_equal(boot_cpu_parse_cpuinfo(CPUINFO("4294967296", "0"), &v), -EBADMSG);
	assert_int_equal(boot_cpu_parse_cpuinfo(CPUINFO("-1", "0"), &v), -EBADMSG);
	assert_int_equal(boot_cpu_parse_cpuinfo(CPUINFO("", "0"), &v), -EBADMSG);
	assert_int_equal(boot_cpu_parse_cpuinfo(CPUINFO("2x", "0"), &v), -EBADMSG);
	assert_int_equal(boot_cpu_parse_cpuinfo("processor\t: 0\napicid\t\t 3\n", &v), -EBADMSG);
	assert_int_equal(boot_cpu_parse_cpuinfo("", &v), -EBADMSG);
	assert_int_equal(v, 77);
}

static void test_parse_cmdline(void **state) {
	uint32_t v = 77;

	assert_int_equal(boot_cpu_parse_cmdline("root=/dev/vda ro quiet", &v), -ENOENT);
	assert_int_equal(boot_cpu_parse_cmdline("", &v), -ENOENT);
	assert_int_equal(boot_cpu_parse_cmdline("xdisable_cpu_apicid=3", &v), -ENOENT);
	assert_int_equal(boot_cpu_parse_cmdline("disable_cpu_apicid=", &v), -ENOENT);
	assert_int_equal(v, 77);
	assert_int_equal(boot_cpu_parse_cmdline("ro disable_cpu_apicid=0 quiet\n", &v), 0);
	assert_int_equal(v, 0);
	/* The last one counts, as in the kernel; hex as get_option() takes it. */
	assert_int_equal(boot_cpu_parse_cmdline("disable_cpu_apicid=2 disable_cpu_apicid=0x10", &v),
	                 0);
	assert_int_equal(v, 16);
	v = 77;
	assert_int_equal(boot_cpu_parse_cmdline("disable_cpu_apicid=zero", &v), -EBADMSG);
	assert_int_equal(boot_cpu_parse_cmdline("disable_cpu_apicid=1 disable_cpu_apicid=-1", &v),
	                 -EBADMSG);
	assert_int_equal(boot_cpu_parse_cmdline("disable_cpu_apicid=99999999999", &v), -EBADMSG);
	assert_int_equal(v, 77);
}

static void test_read(void **state) {
	struct fixture *f = *state;
	BootCpu b;

	/* Nothing readable: unknown, never parked. */
	assert_int_equal(boot_cpu_read(f->root, &b), 0);
	assert_false(b.known);
	assert_false(boot_cpu_parked(&b));

	write_root_file(f->root, "/proc/cmdline", "root=/dev/vda disable_cpu_apicid=0\n");
	assert_int_equal(boot_cpu_read(f->root, &b), 0);
	assert_false(b.known);

	/* A regular boot: the BSP is the CPU the kernel runs on. */
	write_root_file(f->root, "/proc/cmdline", "root=/dev/vda ro\n");
	write_root_file(f->root, "/proc/cpuinfo", CPUINFO("0", "1"));
	assert_int_equal(boot_cpu_read(f->root, &b), 0);
	assert_true(b.known);
	assert_int_equal(b.bsp, 0);
	assert_int_equal(b.running, 0);
	assert_false(boot_cpu_parked(&b));

	/* A kernel started after a panic on CPU 1: the BSP stays parked. */
	write_root_file(f->root, "/proc/cmdline", "root=/dev/vda disable_cpu_apicid=0\n");
	write_root_file(f->root, "/proc/cpuinfo", "processor\t: 0\napicid\t\t: 1\n");
	assert_int_equal(boot_cpu_read(f->root, &b), 0);
	assert_true(b.known);
	assert_int_equal(b.bsp, 0);
	assert_int_equal(b.running, 1);
	assert_true(boot_cpu_parked(&b));

	/* The word on a kernel that runs on that CPU is ignored, by the kernel and by us. */
	write_root_file(f->root, "/proc/cpuinfo", CPUINFO("0", "1"));
	assert_int_equal(boot_cpu_read(f->root, &b), 0);
	assert_false(boot_cpu_parked(&b));

	/* A malformed word is one the kernel ignored too. */
	write_root_file(f->root, "/proc/cmdline", "disable_cpu_apicid=x\n");
	write_root_file(f->root, "/proc/cpuinfo", "processor\t: 0\napicid\t\t: 1\n");
	assert_int_equal(boot_cpu_read(f->root, &b), 0);
	assert_true(b.known);
	assert_int_equal(b.bsp, 1);
	assert_false(boot_cpu_parked(&b));
}

static const char *build_cmdline(struct fixture *f, bool panic, struct loader_image **img) {
	struct loader_options o = opts_for(f);
	LoaderError e = LOADER_OK;

	o.panic = panic;
	assert_int_equal(loader_image_build(&o, img, &e, NULL), 0);
	assert_int_equal(e, LOADER_OK);
	return loader_image_cmdline(*img);
}

static void test_loader_appends(void **state) {
	struct fixture *f = *state;
	struct loader_image *img = NULL;

	write_root_file(f->root, "/proc/iomem",
	                "00100000-bfffffff : System RAM\n"
	                "  30000000-3fffffff : Crash kernel\n");

	/* Unknown CPUs: nothing appended, to either image. */
	assert_null(strstr(build_cmdline(f, false, &img), BOOT_CPU_PARAM));
	img = loader_image_free(img);
	assert_null(strstr(build_cmdline(f, true, &img), BOOT_CPU_PARAM));
	img = loader_image_free(img);

	/* A regular boot: the crash image names the BSP, the normal image does not. */
	write_root_file(f->root, "/proc/cmdline", "root=/dev/vda1\n");
	write_root_file(f->root, "/proc/cpuinfo", CPUINFO("2", "0"));
	assert_non_null(strstr(build_cmdline(f, true, &img),
	                       "console=ttyS0 disable_cpu_apicid=2 " LOADER_PANIC_CMDLINE_MARK
	                       " "));
	img = loader_image_free(img);
	assert_null(strstr(build_cmdline(f, false, &img), BOOT_CPU_PARAM));
	img = loader_image_free(img);

	/* The crash kernel, on CPU 0 after a panic there (its command line names BSP 2): the
	 * kernel it hands over to must leave CPU 2 alone. */
	write_root_file(f->root, "/proc/cmdline",
	                "root=/dev/vda1 disable_cpu_apicid=2 " LOADER_PANIC_CMDLINE_MARK "\n");
	write_root_file(f->root, "/proc/cpuinfo", CPUINFO("0", "2"));
	assert_non_null(strstr(build_cmdline(f, false, &img),
	                       "console=ttyS0 disable_cpu_apicid=2 " LOADER_HANDOFF_CMDLINE_MARK
	                       " "));
	img = loader_image_free(img);
	/* The crash kernel on the BSP itself: nothing to leave alone. */
	write_root_file(f->root, "/proc/cpuinfo", CPUINFO("2", "0"));
	assert_null(strstr(build_cmdline(f, false, &img), BOOT_CPU_PARAM));
	loader_image_free(img);
}

/* The longest word still fits: a caller's line of the maximum the daemon accepts, with the
 * longest APIC id, is exactly what the loader's budget allows. */
static void test_appended_max(void **state) {
	const char *word = BOOT_CPU_PARAM_MAX;

	assert_int_equal(strlen(word), strlen(" disable_cpu_apicid=") + 10);
	assert_int_equal(LOADER_CMDLINE_APPENDED_MAX,
	                 strlen(word) +
	                         strlen(" " LOADER_PANIC_CMDLINE_MARK " " PURGATORY_STAMPS_KEY) +
	                         PURGATORY_STAMPS_FIELD_LEN);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_cpuinfo),
		cmocka_unit_test(test_parse_cmdline),
		cmocka_unit_test_setup_teardown(test_read, setup, teardown),
		cmocka_unit_test_setup_teardown(test_loader_appends, setup, teardown),
		cmocka_unit_test(test_appended_max),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
