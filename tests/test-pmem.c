/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Kept-memory facts (daemon/pmem): a crafted root per case, laid out like the
 * lab host booted with memmap=2G!5G (q35, 6 GiB: RAM 0-2G and 4G-8G), a DAX
 * ext4 on /dev/pmem0 holding libvirt's memory_backing_dir; each case breaks
 * one part and expects its named reason. The firmware map and the region are
 * the lab host's (lab-keep-ram console, 6.1.0-47: "BIOS-e820:" and "user:"
 * lines, "user: [mem 0x140000000-0x1bfffffff] persistent (type 12)").
 */
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fileio.h"
#include "macros.h"
#include "path-util.h"
#include "pmem.h"
#include "string-util.h"

#define RAM_DIR    "/var/lib/libvirt/qemu/ram"
#define LAB_MEMMAP "memmap=2G!5G"

static const char iomem_lab[] = "00000000-00000fff : Reserved\n"
                                "00001000-0009fbff : System RAM\n"
                                "00100000-7ffd5fff : System RAM\n"
                                "7ffd6000-7fffffff : Reserved\n"
                                "100000000-13fffffff : System RAM\n"
                                "140000000-1bfffffff : Persistent Memory (legacy)\n"
                                "  140000000-1bfffffff : namespace0.0\n"
                                "1c0000000-1ffffffff : System RAM\n";

static const char mountinfo_lab[] =
        "22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw,errors=remount-ro\n"
        "23 22 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw\n"
        "61 22 259:0 / " RAM_DIR " rw,relatime shared:30 - ext4 /dev/pmem0 rw,dax=always\n";

typedef struct Fixture {
	char root[64];
} Fixture;

static void put(const Fixture *f, const char *path, const char *content) {
	_cleanup_free_ char *p = NULL, *dir = NULL;

	assert_int_equal(path_prefix_root(f->root, path, &p), 0);
	dir = strdup(p);
	assert_non_null(dir);
	*strrchr(dir, '/') = 0;
	assert_int_equal(mkdir_p(dir, 0755), 0);
	assert_int_equal(write_file_atomic(p, content, strlen(content), 0644), 0);
}

static void put_memmap(const Fixture *f, unsigned i, const char *start, const char *end,
                       const char *type) {
	char p[128];

	snprintf(p, sizeof(p), "/sys/firmware/memmap/%u/start", i);
	put(f, p, start);
	snprintf(p, sizeof(p), "/sys/firmware/memmap/%u/end", i);
	put(f, p, end);
	snprintf(p, sizeof(p), "/sys/firmware/memmap/%u/type", i);
	put(f, p, type);
}

static int setup(void **state) {
	Fixture *f = calloc(1, sizeof(*f));

	if (!f)
		return -1;
	strcpy(f->root, "/tmp/test-pmem.XXXXXX");
	if (!mkdtemp(f->root))
		return -1;
	put(f, "/proc/iomem", iomem_lab);
	put_memmap(f, 0, "0x0", "0x9fbff", "System RAM");
	put_memmap(f, 1, "0x9fc00", "0x9ffff", "Reserved");
	put_memmap(f, 2, "0xf0000", "0xfffff", "Reserved");
	put_memmap(f, 3, "0x100000", "0x7ffd5fff", "System RAM");
	put_memmap(f, 4, "0x7ffd6000", "0x7fffffff", "Reserved");
	put_memmap(f, 5, "0xb0000000", "0xbfffffff", "Reserved");
	put_memmap(f, 6, "0xfed1c000", "0xfed1ffff", "Reserved");
	put_memmap(f, 7, "0xfffc0000", "0xffffffff", "Reserved");
	put_memmap(f, 8, "0x100000000", "0x1ffffffff", "System RAM");
	put_memmap(f, 9, "0xfd00000000", "0xffffffffff", "Reserved");
	put(f, "/sys/block/pmem0/dev", "259:0\n");
	put(f, "/sys/block/pmem0/device/resource", "0x140000000\n");
	put(f, "/sys/block/vda/dev", "254:0\n");
	put(f, "/proc/self/mountinfo", mountinfo_lab);
	put(f, "/etc/libvirt/qemu.conf",
	    "# memory_backing_dir = \"/nope\"\n"
	    "memory_backing_dir = \"" RAM_DIR "\"\n");
	put(f, RAM_DIR "/libvirt/qemu/1-vm/pc.ram", "ram");
	*state = f;
	return 0;
}

static int teardown(void **state) {
	Fixture *f = *state;
	_cleanup_free_ char *cmd = NULL;

	if (asprintf(&cmd, "rm -rf '%s'", f->root) >= 0)
		(void)!system(cmd);
	free(f);
	return 0;
}

static void gather(const Fixture *f, const char *staged, PmemFacts *ret) {
	PmemOptions o = { .root = f->root, .staged_cmdline = staged, .backend = "kexec_load" };

	assert_int_equal(pmem_facts_gather(&o, ret), 0);
}

/* The reasons' codes, space-separated, for one comparison. */
static char *codes(const PolicyReasons *r) {
	char *s = strdup(""), *n;

	for (size_t i = 0; s && i < r->n; i++) {
		if (asprintf(&n, "%s%s%s", s, *s ? " " : "", r->items[i].code) < 0)
			n = NULL;
		free(s);
		s = n;
	}
	assert_non_null(s);
	return s;
}

static void assert_codes(const PmemFacts *f, const char *want) {
	_cleanup_free_ char *got = codes(&f->reasons);

	assert_string_equal(got, want);
}

static void test_pmem_ready_host(void **state) {
	Fixture *f = *state;
	_cleanup_(pmem_facts_done) PmemFacts p = {};
	PolicyReasons r = {};
	json_object *j = NULL;

	gather(f, "root=/dev/vda " LAB_MEMMAP " console=ttyS0", &p);
	assert_codes(&p, "kept-memory-ready");
	assert_true(pmem_facts_ready(&p));
	assert_int_equal(p.n_regions, 1);
	assert_true(p.regions[0].emulated);
	assert_true(p.regions[0].in_ram);
	assert_string_equal(p.regions[0].device, "pmem0");
	assert_string_equal(p.backing_dir, RAM_DIR);
	assert_string_equal(p.backing_dir_from, "qemu.conf");
	assert_string_equal(p.mount.source, "/dev/pmem0");

	assert_int_equal(pmem_path_check(&p, f->root, RAM_DIR "/libvirt/qemu/1-vm/pc.ram", &r), 1);
	assert_int_equal(r.n, 0);
	/* Elsewhere: named. */
	assert_int_equal(pmem_path_check(&p, f->root, "/var/lib/libvirt/images/vm.ram", &r), 0);
	assert_int_equal(r.n, 1);
	assert_string_equal(r.items[0].code, "kept-memory-file-elsewhere");
	policy_reasons_done(&r);
	assert_int_equal(pmem_path_check(&p, f->root, "relative", &r), -EINVAL);

	/* keep-ram's callback shape. */
	{
		PmemKeptCheck k = { .facts = &p, .root = f->root };
		char *why = NULL;

		assert_true(pmem_on_kept_memory(RAM_DIR "/libvirt/qemu/1-vm/pc.ram", &why, &k));
		assert_null(why);
		assert_false(pmem_on_kept_memory("/srv/vm.ram", &why, &k));
		assert_non_null(strstr(why, "kept-memory-file-elsewhere: "));
		free(why);
		assert_false(pmem_on_kept_memory("relative", &why, &k));
		assert_non_null(strstr(why, "cannot check"));
		free(why);
	}

	assert_int_equal(pmem_facts_to_json(&p, &j), 0);
	assert_true(json_object_get_boolean(json_object_object_get(j, "ready")));
	assert_string_equal(
	        json_object_get_string(json_object_object_get(
	                json_object_array_get_idx(json_object_object_get(j, "regions"), 0),
	                "start")),
	        "0x140000000");
	json_object_put(j);
}

static void test_pmem_no_region(void **state) {
	Fixture *f = *state;
	_cleanup_(pmem_facts_done) PmemFacts p = {};
	PolicyReasons r = {};

	put(f, "/proc/iomem", "00100000-7ffdefff : System RAM\n");
	gather(f, LAB_MEMMAP, &p);
	assert_codes(&p, "kept-memory-no-region");
	assert_false(pmem_facts_ready(&p));
	/* A VM's check carries the host's reason too. */
	assert_int_equal(pmem_path_check(&p, f->root, RAM_DIR "/libvirt/qemu/1-vm/pc.ram", &r), 0);
	assert_int_equal(r.n, 1);
	assert_string_equal(r.items[0].code, "kept-memory-no-region");
	policy_reasons_done(&r);
}

/* A root with nothing at all: a fact, not an error; JSON with nulls. */
static void test_pmem_bare_root(void **state) {
	_cleanup_(pmem_facts_done) PmemFacts p = {};
	PmemOptions o = { .root = "/nonexistent-root", .backend = "kexec_load" };
	json_object *j = NULL;

	assert_int_equal(pmem_facts_gather(&o, &p), 0);
	assert_codes(&p, "kept-memory-no-region");
	assert_string_equal(p.backing_dir_from, "default");
	assert_int_equal(pmem_facts_to_json(&p, &j), 0);
	assert_null(json_object_object_get(json_object_object_get(j, "mount"), "mount_point"));
	json_object_put(j);
}

static void test_pmem_hidden(void **state) {
	Fixture *f = *state;
	_cleanup_(pmem_facts_done) PmemFacts p = {};

	put(f, "/proc/iomem",
	    "00000000-00000000 : System RAM\n"
	    "00000000-00000000 : Persistent Memory (legacy)\n");
	gather(f, LAB_MEMMAP, &p);
	assert_codes(&p, "kept-memory-hidden");
}

/* memmap= outside RAM (e.g. 512M!3G on q35): a device whose writes vanish. */
static void test_pmem_outside_ram(void **state) {
	Fixture *f = *state;
	_cleanup_(pmem_facts_done) PmemFacts p = {};

	put(f, "/proc/iomem", "c0000000-dfffffff : Persistent Memory (legacy)\n");
	put(f, "/sys/block/pmem0/device/resource", "0xc0000000\n");
	gather(f, "memmap=512M!3G", &p);
	assert_codes(&p, "kept-memory-not-ram");
	assert_int_equal(p.n_regions, 1);
	assert_false(p.regions[0].in_ram);
}

static void test_pmem_no_device(void **state) {
	Fixture *f = *state;
	_cleanup_(pmem_facts_done) PmemFacts p = {};
	_cleanup_free_ char *dir = NULL;
	_cleanup_free_ char *cmd = NULL;

	assert_int_equal(path_prefix_root(f->root, "/sys/block/pmem0", &dir), 0);
	assert_true(asprintf(&cmd, "rm -rf '%s'", dir) > 0);
	assert_int_equal(system(cmd), 0);
	put(f, "/proc/self/mountinfo", "22 1 254:0 / / rw - ext4 /dev/vda rw\n");
	gather(f, LAB_MEMMAP, &p);
	assert_codes(&p, "kept-memory-no-device kept-memory-dir-not-pmem");
}

static void test_pmem_not_dax(void **state) {
	Fixture *f = *state;
	_cleanup_(pmem_facts_done) PmemFacts p = {};
	_cleanup_(pmem_facts_done) PmemFacts q = {};

	put(f, "/proc/self/mountinfo",
	    "22 1 254:0 / / rw,relatime - ext4 /dev/vda rw\n"
	    "61 22 259:0 / " RAM_DIR " rw,relatime - ext4 /dev/pmem0 rw,dax=never\n");
	gather(f, LAB_MEMMAP, &p);
	assert_codes(&p, "kept-memory-not-dax");
	assert_non_null(strstr(p.reasons.items[0].text, "dax=never"));
	/* dax=inode leaves it to per-file flags: not enough for VM RAM. */
	put(f, "/proc/self/mountinfo",
	    "61 22 259:0 / " RAM_DIR " rw,relatime - xfs /dev/pmem0 rw,dax=inode\n");
	gather(f, LAB_MEMMAP, &q);
	assert_codes(&q, "kept-memory-not-dax");
}

/* The backing directory on the root disk; then the policy points elsewhere. */
static void test_pmem_dir_not_pmem(void **state) {
	Fixture *f = *state;
	_cleanup_(pmem_facts_done) PmemFacts p = {};
	_cleanup_(pmem_facts_done) PmemFacts q = {};
	PmemOptions o = { .root = f->root,
		          .staged_cmdline = LAB_MEMMAP,
		          .backend = "kexec_load",
		          .backing_dir = "/srv/vm-ram" };

	put(f, "/etc/libvirt/qemu.conf", "memory_backing_dir = '/srv/ram'\n");
	gather(f, LAB_MEMMAP, &p);
	assert_codes(&p, "kept-memory-dir-not-pmem");
	assert_string_equal(p.backing_dir, "/srv/ram");
	assert_string_equal(p.mount.mount_point, "/");

	assert_int_equal(pmem_facts_gather(&o, &q), 0);
	assert_string_equal(q.backing_dir, "/srv/vm-ram");
	assert_string_equal(q.backing_dir_from, "policy");
	assert_codes(&q, "kept-memory-dir-not-pmem");
}

/* What a read-only view of the backing directory gives (upgraded.service's
 * ProtectSystem=strict without ReadWritePaths= for it): a child in its own mount
 * namespace binds the directory read-only over itself. 0: the expected reason. */
static int read_only_child(const Fixture *f) {
	_cleanup_(pmem_facts_done) PmemFacts p = {};
	_cleanup_free_ char *dir = NULL, *got = NULL;
	PmemOptions o = { .root = f->root, .staged_cmdline = LAB_MEMMAP, .backend = "kexec_load" };

	if (path_prefix_root(f->root, RAM_DIR, &dir) < 0)
		return 2;
	/* "none" for the source and type the kernel ignores here: memcheck reads both. */
	if (unshare(CLONE_NEWNS) < 0 || mount("none", "/", "none", MS_REC | MS_PRIVATE, NULL) < 0 ||
	    mount(dir, dir, "none", MS_BIND, NULL) < 0 ||
	    mount("none", dir, "none", MS_REMOUNT | MS_BIND | MS_RDONLY, NULL) < 0)
		return 77;
	if (pmem_facts_gather(&o, &p) < 0)
		return 2;
	got = codes(&p.reasons);
	if (!streq(got, "kept-memory-dir-read-only") ||
	    !strstr(p.reasons.items[0].text, "Read-only file system") ||
	    !strstr(p.reasons.items[0].text, "ReadWritePaths=" RAM_DIR))
		return fprintf(stderr, "got '%s': %s\n", got,
		               p.reasons.n ? p.reasons.items[0].text : "-"),
		       1;
	return 0;
}

static void test_pmem_dir_read_only(void **state) {
	Fixture *f = *state;
	int status;
	pid_t pid;

	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(read_only_child(f));
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	if (WEXITSTATUS(status) == 77)
		skip(); /* no CAP_SYS_ADMIN for a mount namespace */
	assert_int_equal(WEXITSTATUS(status), 0);
}

/* A symlinked backing directory resolves below the root to the DAX mount. */
static void test_pmem_symlinked_dir(void **state) {
	Fixture *f = *state;
	_cleanup_(pmem_facts_done) PmemFacts p = {};
	_cleanup_free_ char *link = NULL;
	_cleanup_free_ char *target = NULL;

	assert_int_equal(path_prefix_root(f->root, "/srv/ram", &link), 0);
	assert_int_equal(path_prefix_root(f->root, RAM_DIR, &target), 0);
	put(f, "/srv/.keep", "");
	assert_int_equal(symlink(target, link), 0);
	put(f, "/etc/libvirt/qemu.conf", "memory_backing_dir=\"/srv/ram\"\n");
	gather(f, LAB_MEMMAP, &p);
	assert_codes(&p, "kept-memory-ready");
}

static void test_pmem_cmdline_missing(void **state) {
	Fixture *f = *state;
	_cleanup_(pmem_facts_done) PmemFacts p = {};
	_cleanup_(pmem_facts_done) PmemFacts q = {};
	PmemOptions o = { .root = f->root,
		          .staged_cmdline = "root=/dev/vda " LAB_MEMMAP,
		          .cmdline_added = LAB_MEMMAP,
		          .backend = "kexec_load" };

	gather(f, "root=/dev/vda memmap=1G!5G", &p);
	assert_codes(&p, "kept-memory-cmdline");
	assert_non_null(strstr(p.reasons.items[0].text, "memmap=2048M!5120M"));
	/* Carried over at stage: said, not blocking. */
	assert_int_equal(pmem_facts_gather(&o, &q), 0);
	assert_codes(&q, "kept-memory-cmdline-carried kept-memory-ready");
}

static void test_pmem_unknown_backend(void **state) {
	Fixture *f = *state;
	_cleanup_(pmem_facts_done) PmemFacts p = {};
	PmemOptions o = { .root = f->root, .staged_cmdline = LAB_MEMMAP, .backend = "other" };

	assert_int_equal(pmem_facts_gather(&o, &p), 0);
	assert_codes(&p, "kept-memory-loader");
}

/* ---- parsers ---- */

static void test_pmem_memmap_parse(void **state) {
	struct mem_range r[4];
	size_t n = 0;

	assert_int_equal(pmem_memmap_parse("a memmap=256M!4G memmap=1G$2G,0x1000!0x2000 "
	                                   "xmemmap=1G!1G memmap=256m!4608M memmap=!4G "
	                                   "memmap=4G memmap=exactmap memmap=1G!1Gx",
	                                   r, 4, &n),
	                 0);
	assert_int_equal(n, 3);
	assert_int_equal(r[0].start, 0x100000000);
	assert_int_equal(r[0].end, 0x10fffffff);
	assert_int_equal(r[1].start, 0x2000);
	assert_int_equal(r[1].end, 0x2fff);
	assert_int_equal(r[2].start, 0x120000000);
	assert_int_equal(pmem_memmap_parse("memmap=1!1,1!2,1!3 memmap=1!4,1!5", r, 4, &n), -E2BIG);
	/* Overflow refused, not wrapped. */
	assert_int_equal(pmem_memmap_parse("memmap=16E!0 memmap=2!0xffffffffffffffff", r, 4, &n),
	                 0);
	assert_int_equal(n, 0);
}

static void test_pmem_cmdline_carry(void **state) {
	char *out = NULL, *added = NULL;

	assert_int_equal(pmem_cmdline_carry("BOOT_IMAGE=/v root=/dev/vda memmap=2G!5G "
	                                    "memmap=1G$3G crashkernel=384M",
	                                    "root=/dev/vda quiet", &out, &added),
	                 0);
	assert_string_equal(out, "root=/dev/vda quiet memmap=2G!5G");
	assert_string_equal(added, "memmap=2G!5G");
	free(out);
	free(added);
	/* Already there (spelled differently): nothing to add. */
	assert_int_equal(
	        pmem_cmdline_carry("memmap=2G!5G", "memmap=2048M!0x140000000", &out, &added), 0);
	assert_null(out);
	assert_null(added);
	/* Empty staged line; two words. */
	assert_int_equal(pmem_cmdline_carry("memmap=1G!4G memmap=1G!6G", "", &out, &added), 0);
	assert_string_equal(out, "memmap=1G!4G memmap=1G!6G");
	free(out);
	free(added);
}

static void test_pmem_mountinfo(void **state) {
	static const char t[] =
	        "garbage line\n"
	        "22 1 254:0 / / rw - ext4 /dev/vda rw\n"
	        "30 22 259:1 / /mnt/a\\040b rw - ext4 /dev/pmem1 rw,dax\n"
	        "31 22 259:0 / /var/lib rw - ext4 /dev/pmem0 rw\n"
	        "32 22 259:2 / /var/lib rw master:3 - xfs /dev/pmem2 rw,dax=always\n"
	        "33 22 259:3 / /var/libx rw - ext4 /dev/pmem3 rw\n";
	PmemMount m = {};

	assert_int_equal(pmem_mountinfo_find(t, strlen(t), "/var/lib/libvirt/qemu/ram", &m), 0);
	assert_string_equal(m.mount_point, "/var/lib"); /* the later one, mounted over */
	assert_string_equal(m.source, "/dev/pmem2");
	assert_string_equal(m.fstype, "xfs");
	assert_int_equal(m.minor, 2);
	assert_string_equal(m.options, "rw,rw,dax=always");
	pmem_mount_done(&m);
	assert_int_equal(pmem_mountinfo_find(t, strlen(t), "/mnt/a b/c", &m), 0);
	assert_string_equal(m.mount_point, "/mnt/a b");
	pmem_mount_done(&m);
	assert_int_equal(pmem_mountinfo_find(t, strlen(t), "/etc", &m), 0);
	assert_string_equal(m.mount_point, "/");
	pmem_mount_done(&m);
	assert_int_equal(pmem_mountinfo_find("x\n1 2 3\n", 8, "/", &m), -EBADMSG);
	assert_int_equal(pmem_mountinfo_find(t + 13, 40, "/", &m), 0); /* cut in a line */
	pmem_mount_done(&m);
	assert_int_equal(
	        pmem_mountinfo_find("22 1 254:0 / /srv rw - ext4 /dev/vda rw\n", 40, "/etc", &m),
	        -ENOENT);
}

static void test_pmem_qemu_conf(void **state) {
	static const char t[] = "#memory_backing_dir = \"/commented\"\n"
	                        "memory_backing_dir_x = \"/other\"\n"
	                        "  memory_backing_dir   =   \"/first\"\n"
	                        "memory_backing_dir = '/second'  # comment\n"
	                        "memory_backing_dir = \"/unterminated\n";
	char *d = NULL;

	assert_int_equal(pmem_qemu_conf_backing_dir(t, strlen(t), &d), 0);
	assert_string_equal(d, "/second");
	free(d);
	assert_int_equal(pmem_qemu_conf_backing_dir("", 0, &d), 0);
	assert_null(d);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_pmem_ready_host, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pmem_no_region, setup, teardown),
		cmocka_unit_test(test_pmem_bare_root),
		cmocka_unit_test_setup_teardown(test_pmem_hidden, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pmem_outside_ram, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pmem_no_device, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pmem_not_dax, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pmem_dir_not_pmem, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pmem_dir_read_only, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pmem_symlinked_dir, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pmem_cmdline_missing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pmem_unknown_backend, setup, teardown),
		cmocka_unit_test(test_pmem_memmap_parse),
		cmocka_unit_test(test_pmem_cmdline_carry),
		cmocka_unit_test(test_pmem_mountinfo),
		cmocka_unit_test(test_pmem_qemu_conf),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
