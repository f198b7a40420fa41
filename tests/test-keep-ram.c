/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * keep-ram's pieces without libvirt: the manifest entry, the generation mark, the hook's
 * "start begin" decision (link back or refuse), the digest, the record's JSON form.
 * Everything runs on files in a temporary directory.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#include "fileio.h"
#include "keep-ram-entry.h"
#include "keep-ram.h"
#include "macros.h"

#define UUID "0b3d8f2e-5c1a-4e6b-9a7d-2f4c6e8a0b1c"

typedef struct Fixture {
	char dir[64];
	char *state, *backing, *kept, *image;
	bool xattrs;
} Fixture;

static char *join(const char *a, const char *b) {
	char *s;

	assert_true(asprintf(&s, "%s/%s", a, b) >= 0);
	return s;
}

static void write_bytes(const char *path, size_t size, unsigned char fill) {
	_cleanup_free_ unsigned char *buf = malloc(size ?: 1);

	assert_non_null(buf);
	memset(buf, fill, size);
	assert_int_equal(write_file_atomic(path, buf, size, 0600), 0);
}

static int setup(void **state) {
	Fixture *f = calloc(1, sizeof(*f));
	_cleanup_free_ char *keep_dir = NULL;

	strcpy(f->dir, "/tmp/test-keep-ram.XXXXXX");
	if (!mkdtemp(f->dir))
		return -1;
	f->state = join(f->dir, "state");
	f->backing = join(f->dir, "ram");
	keep_dir = join(f->backing, "upgraded-keep");
	f->kept = join(keep_dir, UUID ".ram");
	f->image = join(f->dir, "vm.save");
	assert_int_equal(mkdir_p(keep_dir, 0700), 0);
	write_bytes(f->kept, 65536, 0xa5);
	f->xattrs = keep_ram_mark_set(f->kept, "u1:" UUID ":00") == 0;
	*state = f;
	return 0;
}

static int teardown(void **state) {
	Fixture *f = *state;
	_cleanup_free_ char *cmd = NULL;

	if (asprintf(&cmd, "rm -rf '%s'", f->dir) >= 0)
		(void)!system(cmd);
	free(f->state);
	free(f->backing);
	free(f->kept);
	free(f->image);
	free(f);
	return 0;
}

/* The entry the daemon would write for the fixture's kept file. */
static KeepRamEntry fixture_entry(Fixture *f) {
	struct stat st;
	KeepRamEntry e = {
		.uuid = UUID,
		.name = (char *)"vm",
		.kept_path = f->kept,
		.generation = (char *)"u1:" UUID ":00",
		.backing_dir = f->backing,
		.qmp_socket = (char *)"/run/upgraded/keep-ram/" UUID "/qmp",
		.save_image = f->image,
	};

	assert_int_equal(stat(f->kept, &st), 0);
	e.size = (uint64_t)st.st_size;
	e.inode = (uint64_t)st.st_ino;
	return e;
}

static void test_entry_roundtrip(void **state) {
	Fixture *f = *state;
	KeepRamEntry e = fixture_entry(f), back = {};
	_cleanup_free_ char *text = NULL;

	assert_int_equal(keep_ram_entry_format(&e, &text), 0);
	assert_int_equal(keep_ram_entry_parse(text, &back), 0);
	assert_string_equal(back.uuid, UUID);
	assert_string_equal(back.kept_path, f->kept);
	assert_string_equal(back.generation, e.generation);
	assert_int_equal(back.size, e.size);
	assert_int_equal(back.inode, e.inode);
	keep_ram_entry_done(&back);

	assert_int_equal(keep_ram_entry_write(f->state, &e), 0);
	assert_int_equal(keep_ram_entry_read(f->state, UUID, &back), 0);
	assert_string_equal(back.save_image, f->image);
	keep_ram_entry_done(&back);
	assert_int_equal(keep_ram_entry_remove(f->state, UUID), 0);
	assert_int_equal(keep_ram_entry_read(f->state, UUID, &back), -ENOENT);
	assert_int_equal(keep_ram_entry_remove(f->state, UUID), 0);
}

static void test_entry_rejects_bad_input(void **state) {
	Fixture *f = *state;
	KeepRamEntry e = fixture_entry(f), back = {};
	_cleanup_free_ char *text = NULL;

	/* A value with a newline would inject a key: never written. */
	e.name = (char *)"vm\nkept=/etc/passwd";
	assert_int_equal(keep_ram_entry_format(&e, &text), -EINVAL);
	e = fixture_entry(f);
	assert_int_equal(keep_ram_entry_format(&e, &text), 0);

	assert_int_equal(keep_ram_entry_parse("uuid=" UUID "\n", &back), -EBADMSG);
	assert_int_equal(keep_ram_entry_parse("garbage\n", &back), -EBADMSG);
	assert_int_equal(keep_ram_entry_parse("", &back), -EBADMSG);
	assert_int_equal(keep_ram_entry_parse("uuid=../../etc\n", &back), -EBADMSG);
	assert_int_equal(keep_ram_entry_read(f->state, "../x", &back), -EINVAL);
	/* A key twice is malformed, an unknown key is ignored. */
	{
		_cleanup_free_ char *twice = NULL, *extra = NULL;
		assert_true(asprintf(&twice, "%sname=other\n", text) > 0);
		assert_int_equal(keep_ram_entry_parse(twice, &back), -EBADMSG);
		assert_true(asprintf(&extra, "%sfuture=1\n", text) > 0);
		assert_int_equal(keep_ram_entry_parse(extra, &back), 0);
		keep_ram_entry_done(&back);
	}
}

static void test_mark_check(void **state) {
	Fixture *f = *state;
	KeepRamEntry e = fixture_entry(f);
	char *why = NULL;

	if (!f->xattrs)
		skip(); /* /tmp without user xattrs */
	assert_int_equal(keep_ram_entry_check_file(&e, &why), 0);
	assert_null(why);

	e.generation = (char *)"u2:" UUID ":00";
	assert_int_equal(keep_ram_entry_check_file(&e, &why), -ESTALE);
	assert_non_null(strstr(why, "expected 'u2:"));
	free(why);
	e = fixture_entry(f);

	e.size++;
	assert_int_equal(keep_ram_entry_check_file(&e, &why), -EFBIG);
	free(why);
	e = fixture_entry(f);

	e.inode++;
	assert_int_equal(keep_ram_entry_check_file(&e, &why), -ESTALE);
	free(why);
	e = fixture_entry(f);

	assert_int_equal(removexattr(f->kept, KEEP_RAM_XATTR), 0);
	assert_int_equal(keep_ram_entry_check_file(&e, &why), -ENODATA);
	free(why);

	assert_int_equal(unlink(f->kept), 0);
	assert_int_equal(keep_ram_entry_check_file(&e, &why), -ENOENT);
	assert_non_null(strstr(why, "missing"));
	free(why);
}

static void test_domain_dir_and_xml(void **state) {
	Fixture *f = *state;
	_cleanup_free_ char *d7 = join(f->backing, "libvirt/qemu/7-vm"),
	                    *d17 = join(f->backing, "libvirt/qemu/17-other"), *found = NULL;
	char uuid[KEEP_RAM_UUID_LEN + 1];
	int id;

	assert_int_equal(mkdir_p(d7, 0700), 0);
	assert_int_equal(mkdir_p(d17, 0700), 0);
	assert_int_equal(keep_ram_domain_dir(f->backing, 7, &found), 0);
	assert_string_equal(found, d7);
	free(found);
	found = NULL;
	assert_int_equal(keep_ram_domain_dir(f->backing, 1, &found), -ENOENT);
	assert_int_equal(keep_ram_domain_dir(f->backing, -1, &found), -EINVAL);
	/* libvirt's built-in default layout: <backing>/<id>-<name>, no libvirt/qemu. */
	{
		_cleanup_free_ char *d9 = join(f->backing, "9-plain"),
		                    *d9b = join(f->backing, "libvirt/qemu/9-other");

		assert_int_equal(mkdir_p(d9, 0700), 0);
		assert_int_equal(keep_ram_domain_dir(f->backing, 9, &found), 0);
		assert_string_equal(found, d9);
		free(found);
		found = NULL;
		/* Both layouts for one id: the named-directory layout is the live one. */
		assert_int_equal(mkdir_p(d9b, 0700), 0);
		assert_int_equal(keep_ram_domain_dir(f->backing, 9, &found), 0);
		assert_string_equal(found, d9b);
		free(found);
		found = NULL;
		/* Two entries for one id in one place: no guess. */
		_cleanup_free_ char *d9c = join(f->backing, "libvirt/qemu/9-third");
		assert_int_equal(mkdir_p(d9c, 0700), 0);
		assert_int_equal(keep_ram_domain_dir(f->backing, 9, &found), -EEXIST);
	}

	assert_int_equal(keep_ram_xml_facts("<domain type='qemu' id='12'>\n  <name>vm</name>\n"
	                                    "  <uuid>" UUID "</uuid>\n</domain>",
	                                    uuid, &id),
	                 0);
	assert_string_equal(uuid, UUID);
	assert_int_equal(id, 12);
	assert_int_equal(keep_ram_xml_facts("<domain type=\"qemu\"><uuid>" UUID "</uuid></domain>",
	                                    uuid, &id),
	                 0);
	assert_int_equal(id, -1);
	/* an id elsewhere (a device's) is not the domain's */
	assert_int_equal(keep_ram_xml_facts("<domain type='qemu'><uuid>" UUID "</uuid>"
	                                    "<x id='3'/></domain>",
	                                    uuid, &id),
	                 0);
	assert_int_equal(id, -1);
	assert_int_equal(
	        keep_ram_xml_facts("<domain type='qemu'><uuid>short</uuid></domain>", uuid, &id),
	        -EBADMSG);
	assert_int_equal(keep_ram_xml_facts("<domain type='qemu'><uuid>" UUID, uuid, &id),
	                 -EBADMSG);

	/* The extra monitor's socket, as keep_ram_after_save() writes it into the saved XML. */
	{
		char *sock = NULL;
		assert_int_equal(keep_ram_xml_qmp_socket(
		                         "<qemu:arg value='socket,id=" KEEP_RAM_QMP_CHARDEV_ID
		                         ",path=/run/upgraded/keep-ram/x.qmp,server=on,wait=on'/>",
		                         &sock),
		                 0);
		assert_string_equal(sock, "/run/upgraded/keep-ram/x.qmp");
		free(sock);
		assert_int_equal(keep_ram_xml_qmp_socket("<domain/>", &sock), -ENOENT);
		assert_int_equal(keep_ram_xml_qmp_socket(
		                         "socket,id=" KEEP_RAM_QMP_CHARDEV_ID ",path=/x'/>", &sock),
		                 -EBADMSG);
	}
}

/* The QEMU user, from the DAC label libvirt hands the hook; the socket's own directory. */
static void test_dac_owner_and_socket(void **state) {
	_cleanup_free_ char *sock = NULL;
	uid_t uid = 1;
	gid_t gid = 1;

	assert_int_equal(keep_ram_qmp_socket_path(NULL, UUID, &sock), 0);
	assert_string_equal(sock, "/run/upgraded/keep-ram/" UUID "/qmp");
	free(sock);
	assert_int_equal(keep_ram_qmp_socket_path("/tmp/r", UUID, &sock), 0);
	assert_string_equal(sock, "/tmp/r/run/upgraded/keep-ram/" UUID "/qmp");

	/* As libvirt 9.0 writes it for a running domain: the selinux/apparmor label first. */
	assert_int_equal(keep_ram_xml_dac_owner(
	                         "<domain type='kvm' id='3'><seclabel type='dynamic' "
	                         "model='apparmor' relabel='yes'><label>libvirt-" UUID
	                         "</label></seclabel><seclabel type='dynamic' model='dac' "
	                         "relabel='yes'>\n<label>+64055:+108</label>\n<imagelabel>+64055:"
	                         "+108</imagelabel>\n</seclabel></domain>",
	                         &uid, &gid),
	                 0);
	assert_int_equal(uid, 64055);
	assert_int_equal(gid, 108);
	/* Names, as a static label may give them. */
	assert_int_equal(keep_ram_xml_dac_owner("<seclabel type=\"static\" model=\"dac\">"
	                                        "<label>root:root</label></seclabel>",
	                                        &uid, &gid),
	                 0);
	assert_int_equal(uid, 0);
	assert_int_equal(gid, 0);
	assert_int_equal(keep_ram_xml_dac_owner("<domain><seclabel type='dynamic' model='dac'>"
	                                        "</seclabel></domain>",
	                                        &uid, &gid),
	                 -ENOENT);
	assert_int_equal(keep_ram_xml_dac_owner("<domain/>", &uid, &gid), -ENOENT);
	assert_int_equal(keep_ram_xml_dac_owner("<seclabel model='dac'><label>+1:</label>"
	                                        "</seclabel>",
	                                        &uid, &gid),
	                 -EBADMSG);
	assert_int_equal(keep_ram_xml_dac_owner("<seclabel model='dac'><label>+1:+x</label>"
	                                        "</seclabel>",
	                                        &uid, &gid),
	                 -EBADMSG);
	assert_int_equal(keep_ram_xml_dac_owner("<seclabel model='dac'><label>no-such-user-x:+1"
	                                        "</label></seclabel>",
	                                        &uid, &gid),
	                 -EBADMSG);
	assert_int_equal(keep_ram_xml_dac_owner("<seclabel model='dac'><label>+99999999999:+1"
	                                        "</label></seclabel>",
	                                        &uid, &gid),
	                 -EBADMSG);
}

/* The hook's decision, on the fixture: 1 = linked back, negative = refused. */
static int hook_start(Fixture *f, int id, char **ret_ram) {
	_cleanup_free_ char *xml = NULL, *msg = NULL, *dir = NULL;
	KeepRamEntry got = {};
	int k;

	assert_true(asprintf(&dir, "%s/libvirt/qemu/%d-vm", f->backing, id) > 0);
	assert_int_equal(mkdir_p(dir, 0700), 0);
	assert_true(asprintf(&xml,
	                     "<domain type='qemu' id='%d'><name>vm</name><uuid>" UUID
	                     "</uuid></domain>",
	                     id) > 0);
	k = keep_ram_hook_start(f->state, xml, &got, &msg);
	if (k > 0) {
		assert_string_equal(got.uuid, UUID);
		keep_ram_entry_done(&got);
	}
	if (ret_ram)
		*ret_ram = join(dir, "pc.ram");
	return k;
}

static void test_hook_links_back_or_refuses(void **state) {
	Fixture *f = *state;
	KeepRamEntry e = fixture_entry(f);
	_cleanup_free_ char *ram = NULL;
	struct stat a, b;

	if (!f->xattrs)
		skip();
	/* No entry: not ours. */
	assert_int_equal(hook_start(f, 3, NULL), 0);
	/* An entry but no managed save image: a fresh boot, nothing linked. */
	assert_int_equal(keep_ram_entry_write(f->state, &e), 0);
	assert_int_equal(hook_start(f, 4, &ram), 0);
	assert_int_equal(access(ram, F_OK), -1);
	free(ram);

	/* The restore: linked into the NEW id's directory, the same inode. */
	write_bytes(f->image, 16, 0);
	assert_int_equal(hook_start(f, 5, &ram), 1);
	assert_int_equal(stat(ram, &a), 0);
	assert_int_equal(stat(f->kept, &b), 0);
	assert_int_equal(a.st_ino, b.st_ino);
	free(ram);

	/* A wrong mark: refused, nothing linked, nothing deleted. */
	assert_int_equal(keep_ram_mark_set(f->kept, "u9:" UUID ":ff"), 0);
	assert_true(hook_start(f, 6, &ram) < 0);
	assert_int_equal(access(ram, F_OK), -1);
	assert_int_equal(access(f->kept, F_OK), 0);
	assert_int_equal(access(f->image, F_OK), 0);
	free(ram);

	/* The file missing: refused. */
	assert_int_equal(unlink(f->kept), 0);
	assert_true(hook_start(f, 7, &ram) < 0);
	assert_int_equal(access(ram, F_OK), -1);
	free(ram);
	ram = NULL;

	/* No memory directory for the id libvirt gave: refused, not guessed. */
	write_bytes(f->kept, 65536, 0xa5);
	e = fixture_entry(f);
	assert_int_equal(keep_ram_mark_set(f->kept, e.generation), 0);
	assert_int_equal(keep_ram_entry_write(f->state, &e), 0);
	{
		_cleanup_free_ char *msg = NULL;
		KeepRamEntry got = {};
		assert_true(keep_ram_hook_start(f->state,
		                                "<domain type='qemu' id='99'><uuid>" UUID
		                                "</uuid></domain>",
		                                &got, &msg) < 0);
		assert_non_null(strstr(msg, "refusing"));
	}
}

static char *digest(const char *path, KeepRamDigestMode m, unsigned threads) {
	char *hex = NULL;

	assert_int_equal(keep_ram_digest_file(path, m, threads, &hex), 0);
	return hex;
}

static void test_digest(void **state) {
	Fixture *f = *state;
	_cleanup_free_ char *small = join(f->dir, "abc"), *big = join(f->dir, "big");
	char *a, *b;
	int fd;

	/* Known answer, computed independently with Python's hashlib from the definition
	 * (SHA-256 of the little-endian 64-bit size and the chunk digests):
	 * sha256(pack('<Q', 3) + sha256(b'abc').digest()). */
	assert_int_equal(write_file_atomic(small, "abc", 3, 0600), 0);
	a = digest(small, KEEP_RAM_DIGEST_FULL, 1);
	assert_string_equal(a, "80a67215aff0c585b6c055e38aa04b76d4b208e2d0c3eb31bfd02822ae62e1c0");
	free(a);
	assert_int_equal(keep_ram_digest_file(small, KEEP_RAM_DIGEST_MARK, 1, &a), -EINVAL);

	/* 130 MiB (three chunks, sparse): the same digest on 1 and 4 threads. */
	fd = open(big, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, 130LL << 20), 0);
	assert_int_equal(pwrite(fd, "x", 1, 100LL << 20), 1);
	a = digest(big, KEEP_RAM_DIGEST_FULL, 1);
	b = digest(big, KEEP_RAM_DIGEST_FULL, 4);
	assert_string_equal(a, b);
	free(b);
	b = digest(big, KEEP_RAM_DIGEST_SAMPLED, 3);
	assert_string_not_equal(a, b);

	/* A byte changed: the full digest sees it anywhere; the sampled one only inside its
	 * samples (first 4 KiB of every 256 KiB). */
	assert_int_equal(pwrite(fd, "y", 1, (100LL << 20) + 8192), 1);
	{
		char *a2 = digest(big, KEEP_RAM_DIGEST_FULL, 2),
		     *b2 = digest(big, KEEP_RAM_DIGEST_SAMPLED, 2);
		assert_string_not_equal(a, a2);
		assert_string_equal(b, b2);
		free(b2);
		assert_int_equal(pwrite(fd, "z", 1, (100LL << 20) + 4095), 1);
		b2 = digest(big, KEEP_RAM_DIGEST_SAMPLED, 2);
		assert_string_not_equal(b, b2);
		free(a2);
		free(b2);
	}
	close(fd);
	free(a);
	free(b);
	assert_int_equal(keep_ram_digest_file("/nonexistent", KEEP_RAM_DIGEST_FULL, 1, &a),
	                 -ENOENT);
}

static void test_kept_ram_json(void **state) {
	KeptRam k = { .path = (char *)"/ram/upgraded-keep/x.ram",
		      .state_dir = (char *)"/var/lib/upgraded/keep-ram",
		      .size = 1ULL << 30,
		      .inode = 12,
		      .generation = (char *)"u:x:1",
		      .digest_mode = KEEP_RAM_DIGEST_SAMPLED,
		      .digest = (char *)"ab",
		      .digest_usec = 5,
		      .start_attempts = 2 };
	struct json_object *o = json_object_new_object(), *bad;
	KeptRam *back = NULL;

	for (int m = 0; m < _KEEP_RAM_DIGEST_MAX; m++)
		assert_int_equal(
		        keep_ram_digest_mode_from_string(keep_ram_digest_mode_to_string(m)), m);
	assert_int_equal(keep_ram_digest_mode_from_string("none"), _KEEP_RAM_DIGEST_INVALID);

	kept_ram_add_json(&k, o);
	assert_int_equal(kept_ram_from_vm_json(o, &back), 0);
	assert_non_null(back);
	assert_string_equal(back->path, k.path);
	assert_string_equal(back->digest, "ab");
	assert_int_equal(back->size, k.size);
	assert_int_equal(back->digest_mode, KEEP_RAM_DIGEST_SAMPLED);
	assert_int_equal(back->start_attempts, 2);
	assert_null(back->fallback_reason);
	kept_ram_free(back);

	/* sampled without its digest: malformed */
	json_object_object_get_ex(o, "kept_ram", &bad);
	json_object_object_add(bad, "digest", NULL);
	assert_int_equal(kept_ram_from_vm_json(o, &back), -EBADMSG);
	json_object_put(o);

	/* A checkpoint fallback carries only its reason. */
	o = json_object_new_object();
	kept_ram_add_json(&(KeptRam){ .fallback_reason = (char *)"not shared" }, o);
	assert_int_equal(kept_ram_from_vm_json(o, &back), 0);
	assert_string_equal(back->fallback_reason, "not shared");
	assert_null(back->path);
	kept_ram_free(back);
	json_object_put(o);

	o = json_object_new_object();
	kept_ram_add_json(NULL, o);
	assert_int_equal(kept_ram_from_vm_json(o, &back), 0);
	assert_null(back);
	json_object_put(o);
}

static void test_backing_dir_from_conf(void **state) {
	Fixture *f = *state;
	_cleanup_free_ char *conf = join(f->dir, "qemu.conf");
	char *dir = NULL;
	const char *text = "# memory_backing_dir = \"/commented\"\nuser = \"root\"\n"
	                   "memory_backing_dir = \"/mnt/pmem/vm\"\n";

	assert_int_equal(keep_ram_backing_dir_from_conf(conf, &dir), 0);
	assert_string_equal(dir, KEEP_RAM_BACKING_DIR_DEFAULT);
	free(dir);
	assert_int_equal(write_file_atomic(conf, text, strlen(text), 0600), 0);
	assert_int_equal(keep_ram_backing_dir_from_conf(conf, &dir), 0);
	assert_string_equal(dir, "/mnt/pmem/vm");
	free(dir);
	assert_int_equal(write_file_atomic(conf, "memory_backing_dir = /x\n", 24, 0600), 0);
	assert_int_equal(keep_ram_backing_dir_from_conf(conf, &dir), -EBADMSG);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_entry_roundtrip, setup, teardown),
		cmocka_unit_test_setup_teardown(test_entry_rejects_bad_input, setup, teardown),
		cmocka_unit_test_setup_teardown(test_mark_check, setup, teardown),
		cmocka_unit_test_setup_teardown(test_domain_dir_and_xml, setup, teardown),
		cmocka_unit_test(test_dac_owner_and_socket),
		cmocka_unit_test_setup_teardown(test_hook_links_back_or_refuses, setup, teardown),
		cmocka_unit_test_setup_teardown(test_digest, setup, teardown),
		cmocka_unit_test_setup_teardown(test_kept_ram_json, setup, teardown),
		cmocka_unit_test_setup_teardown(test_backing_dir_from_conf, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
