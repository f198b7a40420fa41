/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "bootlog.h"
#include "fileio.h"
#include "kmsg.h"
#include "macros.h"

/*
 * Provenance: records read from /dev/kmsg of the development machine (Linux
 * 6.18, booted under a firecracker-like VMM), an excerpt of its 339 records
 * with their real sequence numbers and timestamps. The seq numbers show where
 * records were left out; the gaps the test expects are those of the excerpt.
 * Added by hand: a userspace record (facility 1), a dictionary continuation
 * line and a garbage line, which must be skipped.
 */
static const char kmsg_excerpt[] =
        "5,0,0,-;Linux version 6.18.44-fc-v669 (builder@sandboxing) (gcc (GCC) 15.3.0, GNU ld (GNU "
        "Binutils) 2.46) #1 SMP PREEMPT_DYNAMIC @0\n"
        "6,49,2536,-;Initmem setup node 0 [mem 0x0000000000001000-0x000000063fffffff]\n"
        "6,50,2571,-;On node 0, zone DMA: 1 pages in unavailable ranges\n"
        "6,51,2937,-;On node 0, zone DMA: 97 pages in unavailable ranges\n"
        "6,52,79825,-;IOAPIC[0]: apic_id 0, version 17, address 0xfec00000, GSI 0-23\n"
        "6,53,79832,-;ACPI: Using ACPI (MADT) for SMP configuration information\n"
        "5,76,92089,-;random: crng init done\n"
        "6,77,92090,-;printk: log buffer data + meta data: 131072 + 458752 = 589824 bytes\n"
        "6,78,140514,-;Dentry cache hash table entries: 4194304 (order: 13, 33554432 bytes, "
        "linear)\n"
        "6,79,164554,-;Inode-cache hash table entries: 2097152 (order: 12, 16777216 bytes, "
        "linear)\n"
        "6,82,164690,-;Policy zone: Normal\n"
        "6,83,164692,-;mem auto-init: stack:off, heap alloc:off, heap free:off\n"
        "6,84,181947,-;SLUB: HWalign=64, Order=0-3, MinObjects=0, CPUs=2, Nodes=1\n"
        "6,85,204825,-;ftrace: allocating 50755 entries in 200 pages\n"
        "14,86,205000,-;upgraded: a userspace line, not the kernel's\n"
        "6,225,285563,-;pnp: PnP ACPI: found 2 devices\n"
        " SUBSYSTEM=acpi\n"
        " DEVICE=+acpi:PNP0501:00\n"
        "6,226,288601,-;NET: Registered PF_INET protocol family\n"
        "6,227,293183,-;IP idents hash table entries: 262144 (order: 9, 2097152 bytes, linear)\n"
        "6,228,324907,-;tcp_listen_portaddr_hash hash table entries: 16384 (order: 6, 262144 "
        "bytes, linear)\n"
        "garbage that is no record\n"
        "6,250,341655,-;kvm: host DEBUGCTL refresh per vcpu_load (vendor request)\n"
        "6,251,341686,-;kvm-pvm: loaded (native=1 pcid=1 pge_off=1 emul_batch=1024 emul_ibpb=0)\n"
        "6,252,369516,-;clocksource: tsc: mask: 0xffffffffffffffff max_cycles: 0x212735223b2, "
        "max_idle_ns: 440795277976 ns\n"
        "6,253,369551,-;clocksource: Switched to clocksource tsc\n"
        "6,308,441645,-;clk: Disabling unused clocks\n"
        "6,309,450917,-;Freeing unused kernel image (initmem) memory: 3728K\n"
        "6,310,450930,-;Write protecting the kernel read-only data: 32768k\n"
        "6,312,460628,-;Freeing unused kernel image (rodata/data gap) memory: 2008K\n"
        "6,313,460634,-;Run /process_api as init process\n"
        "7,314,460635,-;  with arguments:\n"
        "6,338,1376667,-;EXT4-fs (vda): mounted filesystem 00000000-0000-0000-0000-000000000000 "
        "r/w without journal. Quota mode: none.\n";

static void test_bootlog_kmsg_excerpt(void **state) {
	Bootlog b;

	assert_int_equal(bootlog_parse(kmsg_excerpt, strlen(kmsg_excerpt), &b), 0);
	assert_int_equal(b.n_messages, 29);
	assert_int_equal(b.n_skipped, 2); /* the userspace record and the garbage line */
	assert_int_equal(b.first_seq, 0);
	assert_int_equal(b.last_us, 1376667);
	assert_true(b.has_init);
	assert_string_equal(b.init_marker, "run-init");
	assert_int_equal(b.init_us, 460634);
	assert_true(b.gaps_until_init);

	/* the 0.9 s before the EXT4 line is after init: not a kernel stall */
	assert_int_equal(b.n_gaps, 5);
	assert_int_equal(b.gaps[0].end_us - b.gaps[0].start_us, 80738);
	assert_int_equal(b.gaps[0].seq, 225);
	assert_string_equal(b.gaps[0].message, "pnp: PnP ACPI: found 2 devices");
	assert_string_equal(b.gaps[0].previous, "ftrace: allocating 50755 entries in 200 pages");
	assert_int_equal(b.gaps[1].end_us - b.gaps[1].start_us, 76888);
	assert_int_equal(b.gaps[1].seq, 52);
	assert_int_equal(b.gaps[2].end_us - b.gaps[2].start_us, 72094);
	assert_string_equal(b.gaps[2].message, "clk: Disabling unused clocks");
	assert_int_equal(b.gaps[3].end_us - b.gaps[3].start_us, 48424);
	assert_int_equal(b.gaps[3].seq, 78);
	assert_int_equal(b.gaps[4].end_us - b.gaps[4].start_us, 31724);
	assert_int_equal(b.gaps[4].seq, 228);
	bootlog_done(&b);
}

static void test_bootlog_json(void **state) {
	struct json_object *j, *v, *g;
	Bootlog b;

	assert_int_equal(bootlog_parse(kmsg_excerpt, strlen(kmsg_excerpt), &b), 0);
	assert_int_equal(bootlog_to_json(&b, &j), 0);
	assert_true(json_object_object_get_ex(j, "init_us", &v));
	assert_int_equal(json_object_get_uint64(v), 460634);
	assert_true(json_object_object_get_ex(j, "init_marker", &v));
	assert_string_equal(json_object_get_string(v), "run-init");
	assert_true(json_object_object_get_ex(j, "truncated", &v));
	assert_false(json_object_get_boolean(v));
	assert_true(json_object_object_get_ex(j, "gaps", &v));
	assert_int_equal(json_object_array_length(v), 5);
	g = json_object_array_get_idx(v, 0);
	assert_true(json_object_object_get_ex(g, "gap_us", &v));
	assert_int_equal(json_object_get_uint64(v), 80738);
	assert_true(json_object_object_get_ex(g, "message", &v));
	assert_string_equal(json_object_get_string(v), "pnp: PnP ACPI: found 2 devices");
	json_object_put(j);
	bootlog_done(&b);
}

/* dmesg format, no "Run ... as init process" line (printed at debug level by
 * old kernels), and a log whose start was overwritten. */
static void test_bootlog_dmesg_free_initmem(void **state) {
	static const char text[] =
	        "[    0.000000] Linux version 6.1.0-57-cloud-amd64\n"
	        "[    0.100000] x86/mm: stall here\n"
	        "[   10.100000] x86/mm: Checked W+X mappings: passed\n"
	        "[   10.200000] Freeing unused kernel image (initmem) memory: 2800K\n"
	        "[   10.300000] Write protecting the kernel read-only data\n"
	        "[   30.000000] systemd[1]: late\n";
	Bootlog b;

	assert_int_equal(bootlog_parse(text, strlen(text), &b), 0);
	assert_int_equal(b.n_messages, 6);
	assert_true(b.has_init);
	assert_string_equal(b.init_marker, "free-initmem");
	assert_int_equal(b.init_us, 10200000);
	/* gaps stop at the marker: the 19.7 s before the systemd line is userspace's */
	assert_true(b.gaps_until_init);
	assert_int_equal(b.n_gaps, 3);
	assert_int_equal(b.gaps[0].end_us - b.gaps[0].start_us, 10000000);
	assert_string_equal(b.gaps[0].message, "x86/mm: Checked W+X mappings: passed");
	assert_string_equal(b.gaps[0].previous, "x86/mm: stall here");
	assert_int_equal(b.gaps[1].end_us - b.gaps[1].start_us, 100000);
	bootlog_done(&b);

	static const char late[] = "6,5000,9000000,-;first record still in the buffer\n"
	                           "6,5001,9000100,-;next\n";
	assert_int_equal(bootlog_parse(late, strlen(late), &b), 0);
	assert_int_equal(b.first_seq, 5000);
	assert_false(b.has_init);
	assert_false(b.gaps_until_init);
	assert_int_equal(b.n_gaps, 1);
	bootlog_done(&b);
}

static void test_bootlog_bad_input(void **state) {
	static const char junk[] =
	        "\n\n;;;\n1,2\n[abc] x\n[ 1.5\n,,,;\n99999999999999999999,1,1,-;x\n";
	char big[600];
	Bootlog b;

	assert_int_equal(bootlog_parse(NULL, 0, &b), 0);
	assert_int_equal(b.n_messages, 0);
	assert_false(b.has_init);
	assert_int_equal(bootlog_parse(NULL, 5, &b), -EINVAL);
	assert_int_equal(bootlog_parse(junk, strlen(junk), &b), 0);
	assert_int_equal(b.n_gaps, 0);
	bootlog_done(&b);

	/* no trailing newline, no NUL terminator needed, long messages are cut */
	memset(big, 'x', sizeof(big));
	memcpy(big, "6,1,10,-;", 9);
	assert_int_equal(bootlog_parse(big, sizeof(big), &b), 0);
	assert_int_equal(b.n_messages, 1);
	bootlog_done(&b);

	static const char two[] = "6,1,10,-;a\n6,2,20,-;b";
	assert_int_equal(bootlog_parse(two, sizeof(two) - 1, &b), 0);
	assert_int_equal(b.n_gaps, 1);
	assert_string_equal(b.gaps[0].message, "b");
	bootlog_done(&b);

	/* timestamps going backwards (records of different CPUs) are no gap */
	static const char back[] = "6,1,50,-;a\n6,2,20,-;b\n";
	assert_int_equal(bootlog_parse(back, sizeof(back) - 1, &b), 0);
	assert_int_equal(b.n_gaps, 0);
	bootlog_done(&b);
}

static void test_bootlog_top_gaps_order(void **state) {
	static const char text[] = "6,0,0,-;m0\n6,1,10,-;m1\n6,2,40,-;m2\n6,3,41,-;m3\n"
	                           "6,4,141,-;m4\n6,5,143,-;m5\n6,6,163,-;m6\n6,7,213,-;m7\n"
	                           "6,8,214,-;m8\n6,9,274,-;m9\n";
	const uint64_t want[] = { 100, 60, 50, 30, 20 };
	Bootlog b;

	assert_int_equal(bootlog_parse(text, strlen(text), &b), 0);
	assert_int_equal(b.n_gaps, 5);
	for (size_t i = 0; i < 5; i++)
		assert_int_equal(b.gaps[i].end_us - b.gaps[i].start_us, want[i]);
	assert_string_equal(b.gaps[0].message, "m4");
	bootlog_done(&b);
}

static void test_bootlog_read_kmsg_file(void **state) {
	char path[] = "/tmp/test-bootlog.XXXXXX";
	_cleanup_free_ char *text = NULL;
	size_t size = 0;
	int fd = mkstemp(path);

	assert_true(fd >= 0);
	assert_int_equal(write_all(fd, kmsg_excerpt, strlen(kmsg_excerpt)), 0);
	close(fd);
	assert_int_equal(kmsg_read_all(path, &text, &size), 0);
	assert_int_equal(size, strlen(kmsg_excerpt));
	assert_memory_equal(text, kmsg_excerpt, size);
	unlink(path);
	assert_int_equal(kmsg_read_all("/nonexistent/kmsg", &text, &size), -ENOENT);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bootlog_kmsg_excerpt),
		cmocka_unit_test(test_bootlog_json),
		cmocka_unit_test(test_bootlog_dmesg_free_initmem),
		cmocka_unit_test(test_bootlog_bad_input),
		cmocka_unit_test(test_bootlog_top_gaps_order),
		cmocka_unit_test(test_bootlog_read_kmsg_file),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
