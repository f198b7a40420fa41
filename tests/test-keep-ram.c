/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * keep-ram's pieces without libvirt and without privileges: the manifest entry, the facts read
 * from a domain XML (and the text a VM's owner controls, which must never count), the digest,
 * the record's JSON form, libvirt's memory_backing_dir. The file operations and the hook's guard
 * are in test-keep-ram-guard.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <fcntl.h>
#include <sys/stat.h>

#include "fileio.h"
#include "keep-ram-entry.h"
#include "keep-ram-xml.h"
#include "keep-ram.h"
#include "macros.h"

#define UUID "0b3d8f2e-5c1a-4e6b-9a7d-2f4c6e8a0b1c"

typedef struct Fixture {
	char dir[64];
	char *state;
} Fixture;

static char *join(const char *a, const char *b) {
	char *s;

	assert_true(asprintf(&s, "%s/%s", a, b) >= 0);
	return s;
}

static int setup(void **state) {
	Fixture *f = calloc(1, sizeof(*f));

	strcpy(f->dir, "/tmp/test-keep-ram.XXXXXX");
	if (!mkdtemp(f->dir))
		return -1;
	f->state = join(f->dir, "state");
	*state = f;
	return 0;
}

static int teardown(void **state) {
	Fixture *f = *state;
	_cleanup_free_ char *cmd = NULL;

	if (asprintf(&cmd, "rm -rf '%s'", f->dir) >= 0)
		(void)!system(cmd);
	free(f->state);
	free(f);
	return 0;
}

static KeepRamEntry fixture_entry(Fixture *f) {
	return (KeepRamEntry){
		.uuid = UUID,
		.name = (char *)"vm",
		.kept_path = (char *)"/ram/upgraded-keep/" UUID ".ram",
		.size = 65536,
		.inode = 12,
		.generation = (char *)"u1:" UUID ":00",
		.backing_dir = (char *)"/ram",
		.qmp_socket = (char *)"/run/upgraded/keep-ram/" UUID "/qmp",
		.save_image = (char *)"/var/lib/libvirt/qemu/save/vm.save",
		.owner_uid = 64055,
		.owner_gid = 108,
		.owner_mode = 0644,
		.keep_dir_dev = 2049,
		.keep_dir_inode = 77,
	};
}

static void test_entry_roundtrip(void **state) {
	Fixture *f = *state;
	KeepRamEntry e = fixture_entry(f), back = {};
	_cleanup_free_ char *text = NULL;

	assert_int_equal(keep_ram_entry_format(&e, &text), 0);
	assert_int_equal(keep_ram_entry_parse(text, &back), 0);
	assert_string_equal(back.uuid, UUID);
	assert_string_equal(back.kept_path, e.kept_path);
	assert_string_equal(back.generation, e.generation);
	assert_int_equal(back.size, e.size);
	assert_int_equal(back.inode, e.inode);
	assert_int_equal(back.owner_uid, 64055);
	assert_int_equal(back.owner_gid, 108);
	assert_int_equal(back.owner_mode, 0644);
	assert_int_equal(back.keep_dir_dev, 2049);
	assert_int_equal(back.keep_dir_inode, 77);
	assert_null(back.digest);
	assert_null(back.verified);
	keep_ram_entry_done(&back);

	/* With a digest and the guard's mark. */
	e.digest_mode = (char *)"full";
	e.digest = (char *)"ab";
	e.verified = e.generation;
	free(text);
	assert_int_equal(keep_ram_entry_format(&e, &text), 0);
	assert_int_equal(keep_ram_entry_parse(text, &back), 0);
	assert_string_equal(back.digest_mode, "full");
	assert_string_equal(back.digest, "ab");
	assert_string_equal(back.verified, e.generation);
	keep_ram_entry_done(&back);
	e = fixture_entry(f);

	assert_int_equal(keep_ram_entry_write(f->state, &e), 0);
	assert_int_equal(keep_ram_entry_read(f->state, UUID, &back), 0);
	assert_string_equal(back.save_image, e.save_image);
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
	/* An entry of the version before the seal (no owner, no keep directory): never trusted. */
	{
		static const char old[] = "uuid=" UUID "\nname=vm\nkept=/k\nsize=1\ninode=2\n"
		                          "generation=g\nbacking_dir=/r\nqmp_socket=/s\n"
		                          "save_image=/i\n";
		_cleanup_free_ char *with_owner = NULL;

		assert_int_equal(keep_ram_entry_parse(old, &back), -EBADMSG);
		assert_true(asprintf(&with_owner, "%sowner=1:2:644\n", old) > 0);
		assert_int_equal(keep_ram_entry_parse(with_owner, &back), -EBADMSG);
		free(with_owner);
		assert_true(asprintf(&with_owner, "%sowner=1:2:9\nkeep_dir=1:2\n", old) > 0);
		assert_int_equal(keep_ram_entry_parse(with_owner, &back), -EBADMSG); /* not octal */
		free(with_owner);
		assert_true(asprintf(&with_owner, "%sowner=1:2\nkeep_dir=1:2\n", old) > 0);
		assert_int_equal(keep_ram_entry_parse(with_owner, &back), -EBADMSG);
		free(with_owner);
		assert_true(asprintf(&with_owner, "%sowner=1:2:644\nkeep_dir=1:2\n", old) > 0);
		assert_int_equal(keep_ram_entry_parse(with_owner, &back), 0);
		keep_ram_entry_done(&back);
		/* a digest needs its mode, and the other way round */
		free(with_owner);
		assert_true(asprintf(&with_owner, "%sowner=1:2:644\nkeep_dir=1:2\ndigest=ab\n",
		                     old) > 0);
		assert_int_equal(keep_ram_entry_parse(with_owner, &back), -EBADMSG);
	}
	e.digest = (char *)"ab";
	assert_int_equal(keep_ram_entry_format(&e, &text), -EINVAL);
}

/* A domain XML as libvirt formats one: name, uuid, then the owner's text, then the rest. */
#define XML_HEAD(id)                                                                              \
	"<domain type='qemu' id='" id "' xmlns:qemu='" KEEP_RAM_QEMU_NS "'>\n  <name>vm</name>\n" \
	"  <uuid>" UUID "</uuid>\n"

static void test_xml_facts(void **state) {
	static const char xml[] = XML_HEAD(
	        "12") "  <memoryBacking><source type='file'/><access mode='shared'/>"
	              "</memoryBacking>\n"
	              "  <seclabel type='dynamic' model='apparmor'><label>x</label></seclabel>\n"
	              "  <seclabel type='dynamic' model='dac'><label>+64055:+108</label>"
	              "</seclabel>\n"
	              "  <qemu:commandline><qemu:arg value='-chardev'/>"
	              "<qemu:arg value='socket,id=a,path=/x'/></qemu:commandline>\n"
	              "</domain>\n";
	KeepRamXml x;

	assert_int_equal(keep_ram_xml_parse(xml, strlen(xml), &x), 0);
	assert_string_equal(x.uuid, UUID);
	assert_int_equal(x.id, 12);
	assert_string_equal(x.name, "vm");
	assert_true(x.shared_file_memory);
	assert_true(x.has_dac_owner);
	assert_int_equal(x.dac_uid, 64055);
	assert_int_equal(x.dac_gid, 108);
	assert_true(keep_ram_xml_has_qemu_arg(&x, "socket,id=a,path=/x"));
	assert_false(keep_ram_xml_has_qemu_arg(&x, "socket,id=a"));
	keep_ram_xml_done(&x);

	/* Not running: no id; names in a DAC label. */
	{
		static const char off[] =
		        "<domain type='qemu'><uuid>" UUID "</uuid><seclabel model='dac'>"
		        "<label>root:root</label></seclabel></domain>";
		assert_int_equal(keep_ram_xml_parse(off, strlen(off), &x), 0);
		assert_int_equal(x.id, -1);
		assert_int_equal(x.dac_uid, 0);
		assert_false(x.shared_file_memory);
		keep_ram_xml_done(&x);
	}
}

/* What a VM's owner writes (title, description, metadata, another namespace) never counts. */
static void test_xml_owner_text_ignored(void **state) {
	static const char sock[] = "socket,id=" KEEP_RAM_QMP_CHARDEV_ID ",path=/usr/bin/x,"
	                           "server=on,wait=on";
	static const char xml[] =
	        "<domain type='qemu' id='3'>\n  <name>vm</name>\n"
	        "  <title>socket,id=" KEEP_RAM_QMP_CHARDEV_ID ",path=/usr/bin/x,</title>\n"
	        "  <description>&lt;uuid&gt;11111111-2222-3333-4444-555555555555&lt;/uuid&gt; "
	        "socket,id=" KEEP_RAM_QMP_CHARDEV_ID ",path=/usr/bin/x,server=on,wait=on"
	        "</description>\n"
	        "  <metadata><m:x xmlns:m='urn:m'><uuid>11111111-2222-3333-4444-555555555555</uuid>"
	        "<memoryBacking><source type='file'/><access mode='shared'/></memoryBacking>"
	        "<seclabel model='dac'><label>+0:+0</label></seclabel>"
	        "<qemu:commandline xmlns:qemu='" KEEP_RAM_QEMU_NS
	        "'><qemu:arg value='socket,id=" KEEP_RAM_QMP_CHARDEV_ID
	        ",path=/usr/bin/x,server=on,wait=on'/></qemu:commandline>"
	        "</m:x></metadata>\n"
	        "  <uuid>" UUID "</uuid>\n"
	        "  <q:commandline xmlns:q='urn:not-qemu'><q:arg "
	        "value='socket,id=" KEEP_RAM_QMP_CHARDEV_ID
	        ",path=/usr/bin/x,server=on,wait=on'/></q:commandline>\n"
	        "</domain>\n";
	KeepRamXml x;

	assert_int_equal(keep_ram_xml_parse(xml, strlen(xml), &x), 0);
	assert_string_equal(x.uuid, UUID);
	assert_false(x.shared_file_memory);
	assert_false(x.has_dac_owner);
	assert_null(x.qemu_args);
	assert_false(keep_ram_xml_has_qemu_arg(&x, sock));
	keep_ram_xml_done(&x);
}

static void test_xml_rejects(void **state) {
	static const char *const bad[] = {
		"",
		"<domain",
		"<domain type='qemu'><uuid>short</uuid></domain>",
		"<domain type='qemu'></domain>",
		"<dom type='qemu'><uuid>" UUID "</uuid></dom>",
		"<m:domain xmlns:m='urn:x'><uuid>" UUID "</uuid></m:domain>",
		/* entities: never expanded, a DOCTYPE is never libvirt's */
		"<!DOCTYPE domain [<!ENTITY a 'aaaa'>]><domain><uuid>" UUID
		"</uuid><name>&a;</name>"
		"</domain>",
		"<!DOCTYPE domain SYSTEM 'file:///etc/passwd'><domain><uuid>" UUID
		"</uuid></domain>",
		"<domain><uuid>" UUID "</uuid><seclabel model='dac'><label>+1:</label></seclabel>"
		"</domain>",
		"<domain><uuid>" UUID "</uuid><seclabel model='dac'><label>nobody-x-y:+1</label>"
		"</seclabel></domain>",
		"<domain><uuid>" UUID "</uuid><seclabel model='dac'><label>+99999999999:+1</label>"
		"</seclabel></domain>",
	};
	KeepRamXml x;

	for (size_t i = 0; i < ELEMENTSOF(bad); i++)
		assert_true(keep_ram_xml_parse(bad[i], strlen(bad[i]), &x) < 0);
	assert_int_equal(keep_ram_xml_parse("<domain/>", KEEP_RAM_XML_MAX + 1, &x), -EFBIG);
}

static void test_chardev_arg(void **state) {
	_cleanup_free_ char *sock = NULL, *arg = NULL;

	assert_int_equal(keep_ram_qmp_socket_path(NULL, UUID, &sock), 0);
	assert_string_equal(sock, "/run/upgraded/keep-ram/" UUID "/qmp");
	free(sock);
	assert_int_equal(keep_ram_qmp_socket_path("/tmp/r", UUID, &sock), 0);
	assert_string_equal(sock, "/tmp/r/run/upgraded/keep-ram/" UUID "/qmp");
	assert_int_equal(keep_ram_qmp_socket_path(NULL, "../../etc", &sock), -EINVAL);
	assert_int_equal(keep_ram_qmp_chardev_arg("", UUID, &arg), 0);
	assert_string_equal(arg, "socket,id=" KEEP_RAM_QMP_CHARDEV_ID
	                         ",path=/run/upgraded/keep-ram/" UUID "/qmp,server=on,wait=on");
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
		      .start_attempts = 2,
		      .seal = KEPT_RAM_SEAL_DIGEST_FORCED };
	struct json_object *o = json_object_new_object(), *bad;
	KeptRam *back = NULL;

	for (int m = 0; m < _KEPT_RAM_SEAL_MAX; m++)
		assert_int_equal(kept_ram_seal_from_string(kept_ram_seal_to_string(m)), m);
	assert_int_equal(kept_ram_seal_from_string("sealed"), _KEPT_RAM_SEAL_INVALID);
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
	assert_int_equal(back->seal, KEPT_RAM_SEAL_DIGEST_FORCED);
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
		cmocka_unit_test(test_xml_facts),
		cmocka_unit_test(test_xml_owner_text_ignored),
		cmocka_unit_test(test_xml_rejects),
		cmocka_unit_test(test_chardev_arg),
		cmocka_unit_test_setup_teardown(test_digest, setup, teardown),
		cmocka_unit_test_setup_teardown(test_kept_ram_json, setup, teardown),
		cmocka_unit_test_setup_teardown(test_backing_dir_from_conf, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
