/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "architecture.h"
#include "fileio.h"
#include "handoff-facts.h"
#include "macros.h"

/* /proc/interrupts rows in the layout of Linux 6.1 arch/x86/kernel/irq.c
 * (arch_show_interrupts: "%*s: ", "%10u " per CPU, then the description). */
static const char interrupts[] = "            CPU0       CPU1       \n"
                                 "   0:         35          0   IO-APIC   2-edge      timer\n"
                                 " NMI:          0          0   Non-maskable interrupts\n"
                                 " MCE:          1          2   Machine check exceptions\n"
                                 " MCP:        110        110   Machine check polls\n"
                                 " THR:          0          4   Threshold APIC interrupts\n"
                                 " DFR:          8          0   Deferred Error APIC interrupts\n"
                                 " ERR:          0\n"
                                 " MIS:          0\n";

static void test_health_interrupts_sum(void **state) {
	uint64_t n = 0;

	/* MCE + THR + DFR; MCP counts polls, not errors. */
	assert_int_equal(health_parse_interrupts(interrupts, &n), 0);
	assert_int_equal(n, 1 + 2 + 4 + 8);
	assert_int_equal(health_parse_interrupts(" MCE:          0          0   Machine check "
	                                         "exceptions\n",
	                                         &n),
	                 0);
	assert_int_equal(n, 0);
}

static void test_health_interrupts_refusals(void **state) {
	uint64_t n = 42;

	/* A kernel without machine-check support has no MCE row: unknown, not 0. */
	assert_int_equal(health_parse_interrupts("           CPU0\n NMI:   0   Non-maskable\n", &n),
	                 -ENOENT);
	assert_int_equal(health_parse_interrupts("", &n), -ENOENT);
	assert_int_equal(health_parse_interrupts(" MCE: x  Machine check exceptions\n", &n),
	                 -EBADMSG);
	assert_int_equal(health_parse_interrupts(" MCE:   12abc  Machine check\n", &n), -EBADMSG);
	assert_int_equal(health_parse_interrupts(" MCE: 18446744073709551615 1 Machine\n", &n),
	                 -EBADMSG);
	assert_int_equal(health_parse_interrupts(" MCE: 99999999999999999999999 Machine\n", &n),
	                 -EBADMSG);
	assert_int_equal(n, 42); /* untouched on failure */
	assert_int_equal(health_parse_interrupts(NULL, &n), -EINVAL);
}

/* The real file of the machine running the tests, when its kernel counts
 * machine checks: the parser must accept what the kernel writes. */
static void test_health_interrupts_this_host(void **state) {
	char *text = NULL;
	uint64_t n;
	int r;

	if (read_file_full("/proc/interrupts", 1 << 20, &text, NULL) < 0 || !strstr(text, "MCE:")) {
		free(text); /* skip() jumps over cleanup attributes */
		skip();
	}
	r = health_parse_interrupts(text, &n);
	free(text);
	assert_int_equal(r, 0);
}

static const char kmsg[] = "6,0,0,-;Linux version 6.1.0-57-cloud-amd64\n"
                           " SUBSYSTEM=cpu\n"
                           "4,1,1000,-;mce: [Hardware Error]: Machine check events logged\n"
                           "6,2,2000,c;EDAC MC0: 1 CE memory read error on CPU_SrcID#0\n"
                           "3,3,3000,-;mce: [Hardware Error]: CPU 1: Machine Check: 0 Bank 5\n";

/* arm64: a recoverable SEA as APEI GHES logs it (drivers/acpi/apei/ghes.c, cper.c: every
 * line of the event with the "[Hardware Error]" prefix), then memory-failure's outcome. */
static const char kmsg_ghes[] =
        "6,0,0,-;Linux version 6.1.0-57-cloud-arm64\n"
        "3,1,1000,-;{1}[Hardware Error]: Hardware error from APEI Generic Hardware Error "
        "Source: 0\n"
        "3,2,1000,-;{1}[Hardware Error]: event severity: recoverable\n"
        "3,3,2000,-;Memory failure: 0x4321: recovery action for dirty LRU page: Recovered\n";

static void test_health_kmsg_count(void **state) {
	uint64_t n = 0;

	assert_int_equal(health_count_kmsg_hw_errors(kmsg, strlen(kmsg), &n), 0);
	assert_int_equal(n, 2);
	assert_int_equal(health_count_kmsg_hw_errors("", 0, &n), 0);
	assert_int_equal(n, 0);
	/* Without the final newline. */
	assert_int_equal(health_count_kmsg_hw_errors("6,0,0,-;x [Hardware Error]: y", 30, &n), 0);
	assert_int_equal(n, 1);
	/* The count stops at size. */
	assert_int_equal(health_count_kmsg_hw_errors(kmsg, strchr(kmsg + 60, '\n') - kmsg, &n), 0);
	assert_int_equal(n, 1);
}

static void test_health_kmsg_incomplete(void **state) {
	static const char wrapped[] = "6,5,0,-;first kept record\n6,6,1,-;next\n";
	static const char gap[] = "6,0,0,-;a\n6,1,1,-;b\n6,3,3,-;d\n";
	uint64_t n = 7;

	/* Overwritten records ([Hardware Error] lines may have been among them). */
	assert_int_equal(health_count_kmsg_hw_errors(wrapped, strlen(wrapped), &n), -ESTALE);
	assert_int_equal(health_count_kmsg_hw_errors(gap, strlen(gap), &n), -ESTALE);
	assert_int_equal(health_count_kmsg_hw_errors("6;no sequence\n", 14, &n), -EBADMSG);
	assert_int_equal(health_count_kmsg_hw_errors("6,x,0,-;bad\n", 12, &n), -EBADMSG);
	assert_int_equal(health_count_kmsg_hw_errors("6,0,0,- no semicolon\n", 21, &n), -EBADMSG);
	assert_int_equal(n, 7);
}

static void put(const char *dir, const char *name, const char *text) {
	_cleanup_free_ char *path = NULL, *parent = NULL;

	assert_true(asprintf(&path, "%s/%s", dir, name) > 0);
	parent = strdup(path);
	assert_non_null(parent);
	*strrchr(parent, '/') = '\0';
	assert_int_equal(mkdir_p(parent, 0755), 0);
	assert_int_equal(write_file_atomic(path, text, strlen(text), 0644), 0);
}

static char *tmpdir(void) {
	char *d = strdup("/tmp/test-health.XXXXXX");

	assert_non_null(d);
	assert_non_null(mkdtemp(d));
	return d;
}

static void rm_rf(const char *dir) {
	_cleanup_free_ char *cmd = NULL;

	assert_true(asprintf(&cmd, "rm -rf '%s'", dir) > 0);
	assert_int_equal(system(cmd), 0);
}

static void test_health_edac(void **state) {
	_cleanup_free_ char *d = tmpdir(), *mc = NULL;
	uint64_t n = 99;

	assert_true(asprintf(&mc, "%s/mc", d) > 0);
	assert_int_equal(health_edac_errors(mc, &n), -ENOENT); /* no EDAC at all */
	assert_int_equal(mkdir(mc, 0755), 0);
	put(mc, "power/control", "auto\n");
	assert_int_equal(health_edac_errors(mc, &n), -ENOENT); /* no controller */
	assert_int_equal(n, 99);
	put(mc, "mc0/ce_count", "3\n");
	put(mc, "mc0/ue_count", "0\n");
	put(mc, "mc1/ce_count", "0\n");
	put(mc, "mc1/ue_count", "1\n");
	put(mc, "mcx/ce_count", "1000\n"); /* not a controller */
	assert_int_equal(health_edac_errors(mc, &n), 0);
	assert_int_equal(n, 4);
	put(mc, "mc2/ce_count", "0\n"); /* ue_count missing */
	assert_int_equal(health_edac_errors(mc, &n), -EBADMSG);
	put(mc, "mc2/ue_count", "many\n");
	assert_int_equal(health_edac_errors(mc, &n), -EBADMSG);
	assert_int_equal(n, 4);
	rm_rf(d);
}

static bool holds_bytes(void) {
	return true;
}

static int map_unchanged(const char *root) {
	return 1;
}

/* handoff_facts_gather: every fact from the files below root and the backend's table. */
static void test_handoff_facts_gather(void **state) {
	static const KexecBackend holding = { .name = "holding",
		                              .holds_staged_bytes = holds_bytes,
		                              .memory_map_unchanged = map_unchanged };
	_cleanup_free_ char *root = tmpdir();
	HandoffFacts f = { .taint = 5 };

	/* Nothing there: everything unknown; the digests are always taken at stage. */
	handoff_facts_gather(root, &kexec_backend_record, &f);
	assert_false(f.have_mce);
	assert_false(f.have_edac);
	assert_false(f.have_taint);
	assert_false(f.files_unchanged);
	assert_false(f.memory_map_unchanged);
	assert_false(f.iommu_enabled);
	assert_true(f.digests_at_stage);

	/* What the backend holds, the taint flags and an IOMMU. */
	put(root, "proc/sys/kernel/tainted", "4096\n");
	put(root, "sys/class/iommu/dmar0/uevent", "\n");
	put(root, "sys/kernel/iommu_groups/0/type", "DMA-FQ\n");
	handoff_facts_gather(root, &holding, &f);
	assert_true(f.files_unchanged);
	assert_true(f.memory_map_unchanged);
	assert_true(f.have_taint);
	assert_int_equal(f.taint, 4096);
	assert_true(f.iommu_enabled);

	/* Counters without the machinecheck subsystem (x86_64) or a GHES device (arm64):
	 * the kernel learns of no hardware error, so even a clean /proc/interrupts proves
	 * nothing. The facts name the architecture and say why. */
	put(root, "proc/interrupts", " MCE: 0 0 Machine check exceptions\n");
	put(root, "dev/kmsg", "6,0,0,-;Linux version\n");
	handoff_facts_gather(root, &kexec_backend_record, &f);
	assert_false(f.have_mce);
	assert_string_equal(f.architecture, UPGRADED_ARCHITECTURE);
	assert_non_null(f.mce_unknown);
	assert_non_null(strstr(f.edac_unknown, "no EDAC driver"));

	/* The host's source of hardware errors, whichever architecture runs the test. */
	put(root, "sys/devices/system/machinecheck/machinecheck0/check_interval", "300\n");
	put(root, "sys/bus/platform/drivers/GHES/GHES.0/uevent", "\n");
	handoff_facts_gather(root, &kexec_backend_record, &f);
	assert_true(f.have_mce);
	assert_int_equal(f.mce_errors, 0);
	assert_null(f.mce_unknown);

	put(root, "dev/kmsg", kmsg);
	put(root, "sys/devices/system/edac/mc/mc0/ce_count", "2\n");
	put(root, "sys/devices/system/edac/mc/mc0/ue_count", "0\n");
	handoff_facts_gather(root, &kexec_backend_record, &f);
	assert_true(f.have_mce);
	assert_int_equal(f.mce_errors, 2);
	assert_true(f.have_edac);
	assert_int_equal(f.edac_errors, 2);

	/* A log that lost its first records cannot prove there was no error. */
	put(root, "dev/kmsg", "6,40,0,-;late record\n");
	handoff_facts_gather(root, &kexec_backend_record, &f);
	assert_false(f.have_mce);
	assert_true(f.have_edac);
	rm_rf(root);
}

/* Hardware errors by architecture: x86_64 counts machine-check interrupts and the logged
 * records, arm64 the records GHES logs (SEA, SError, RAS); each says why it cannot. */
static void test_health_hw_errors_by_arch(void **state) {
	_cleanup_free_ char *root = tmpdir();
	const char *why = NULL;
	uint64_t n = 99;

	put(root, "proc/interrupts", " MCE: 1 0 Machine check exceptions\n");
	put(root, "dev/kmsg", kmsg_ghes); /* two [Hardware Error] records */
	assert_int_equal(health_hw_errors(root, "x86_64", &n, &why), -ENOENT);
	assert_non_null(strstr(why, "/sys/devices/system/machinecheck"));
	assert_int_equal(health_hw_errors(root, "arm64", &n, &why), -ENOENT);
	assert_non_null(strstr(why, "GHES"));
	assert_int_equal(n, 99);

	/* A GHES driver directory without a bound device reports nothing either. */
	put(root, "sys/bus/platform/drivers/GHES/uevent", "\n");
	assert_int_equal(health_hw_errors(root, "arm64", &n, &why), -ENOENT);
	put(root, "sys/bus/platform/drivers/GHES/GHES.0/uevent", "\n");
	why = NULL;
	assert_int_equal(health_hw_errors(root, "arm64", &n, &why), 0);
	assert_int_equal(n, 2); /* the records; arm64 has no MCE row to add */
	assert_null(why);
	put(root, "sys/devices/system/machinecheck/machinecheck0/check_interval", "300\n");
	put(root, "dev/kmsg", kmsg); /* two mce: [Hardware Error] records */
	assert_int_equal(health_hw_errors(root, "x86_64", &n, &why), 0);
	assert_int_equal(n, 3); /* one MCE interrupt and the two records */

	/* A wrapped log: unknown on both, and said so. */
	put(root, "dev/kmsg", "6,40,0,-;late record\n");
	assert_int_equal(health_hw_errors(root, "arm64", &n, &why), -ESTALE);
	assert_non_null(strstr(why, "not complete since boot"));
	assert_int_equal(health_hw_errors(root, "x86_64", &n, &why), -ESTALE);
	assert_non_null(strstr(why, "not complete since boot"));

	assert_int_equal(health_hw_errors(root, "riscv64", &n, &why), -EOPNOTSUPP);
	assert_non_null(strstr(why, "architecture"));
	assert_int_equal(health_hw_errors(root, NULL, &n, &why), -EINVAL);
	assert_int_equal(n, 3);
	rm_rf(root);
}

/* "IOMMU present" is not "DMA translated": passthrough (iommu=pt, identity groups) lets a
 * device write physical memory as if there were no IOMMU. */
static void test_health_iommu_translates(void **state) {
	_cleanup_free_ char *root = tmpdir();
	HandoffFacts f = { .iommu_enabled = true };

	assert_false(health_iommu_translates(root)); /* nothing registered */
	handoff_facts_gather(root, &kexec_backend_record, &f);
	assert_false(f.iommu_enabled);
	put(root, "sys/class/iommu/dmar0/uevent", "\n");
	assert_false(health_iommu_translates(root)); /* a unit but no group */
	put(root, "sys/kernel/iommu_groups/0/type", "DMA-FQ\n");
	put(root, "sys/kernel/iommu_groups/1/type", "DMA\n");
	put(root, "sys/kernel/iommu_groups/2/type", "unmanaged\n");
	put(root, "proc/cmdline", "root=/dev/vda1 ro intel_iommu=on\n");
	assert_true(health_iommu_translates(root));
	handoff_facts_gather(root, &kexec_backend_record, &f);
	assert_true(f.iommu_enabled);

	/* One identity group: a device passes through. */
	put(root, "sys/kernel/iommu_groups/3/type", "identity\n");
	assert_false(health_iommu_translates(root));
	handoff_facts_gather(root, &kexec_backend_record, &f);
	assert_false(f.iommu_enabled);
	/* A type that cannot be read is not known to translate. */
	put(root, "sys/kernel/iommu_groups/3/type", "\n");
	assert_false(health_iommu_translates(root));
	put(root, "sys/kernel/iommu_groups/3/type", "DMA\n");
	assert_true(health_iommu_translates(root));

	/* The command line asks for passthrough. */
	put(root, "proc/cmdline", "root=/dev/vda1 iommu=pt ro\n");
	assert_false(health_iommu_translates(root));
	put(root, "proc/cmdline", "root=/dev/vda1 iommu.passthrough=1\n");
	assert_false(health_iommu_translates(root));
	put(root, "proc/cmdline", "root=/dev/vda1 iommu.passthrough=0\n");
	assert_true(health_iommu_translates(root));
	rm_rf(root);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_health_interrupts_sum),
		cmocka_unit_test(test_health_interrupts_refusals),
		cmocka_unit_test(test_health_interrupts_this_host),
		cmocka_unit_test(test_health_kmsg_count),
		cmocka_unit_test(test_health_kmsg_incomplete),
		cmocka_unit_test(test_health_edac),
		cmocka_unit_test(test_handoff_facts_gather),
		cmocka_unit_test(test_health_hw_errors_by_arch),
		cmocka_unit_test(test_health_iommu_translates),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
