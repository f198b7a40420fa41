/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * keep-ram's guard against the people who can write near it (docs/vms.md, "Threat model"): the
 * QEMU user who owns the RAM file and the domain's memory directory, a VM's owner who writes
 * the domain XML, and a process that opened the RAM file before it was kept. Everything runs
 * on files in a temporary directory; the QEMU user is played by a child process that drops to
 * an unprivileged uid (QEMU_UID). Needs root (chown, the trusted.* mark, the immutable flag):
 * skipped otherwise.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <fcntl.h>
#include <grp.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>

#include "fileio.h"
#include "keep-ram-digest.h"
#include "keep-ram-fs.h"
#include "keep-ram-hook.h"
#include "macros.h"

#define UUID     "0b3d8f2e-5c1a-4e6b-9a7d-2f4c6e8a0b1c"
#define GEN      "u1:" UUID ":00"
#define QEMU_UID 64999
#define QEMU_GID 64998
#define RAM_SIZE 65536
#define DOM_ID   5

typedef struct Fixture {
	char dir[64];
	char *root, *state, *backing, *doms, *image, *victim;
	int keep_fd;
	KeepRamEntry e; /* what the daemon wrote for the kept file */
} Fixture;

static char *join(const char *a, const char *b) {
	char *s;

	assert_true(asprintf(&s, "%s/%s", a, b) >= 0);
	return s;
}

/* Runs fn(arg) in a child as the QEMU user; its result (0 or 1) is the child's exit status. */
static int as_qemu_user(int (*fn)(Fixture *f), Fixture *f) {
	pid_t pid = fork();
	int status;

	assert_true(pid >= 0);
	if (pid == 0) {
		if (setgroups(0, NULL) < 0 || setresgid(QEMU_GID, QEMU_GID, QEMU_GID) < 0 ||
		    setresuid(QEMU_UID, QEMU_UID, QEMU_UID) < 0)
			_exit(99);
		_exit(fn(f));
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	return WEXITSTATUS(status);
}

/* The domain's memory directory for id, made by "libvirt" and given to the QEMU user. */
static char *make_domain_dir(Fixture *f, int id, const char *name) {
	_cleanup_free_ char *entry = NULL;
	char *d;

	assert_true(asprintf(&entry, "%d-%s", id, name) > 0);
	d = join(f->doms, entry);
	assert_int_equal(mkdir_p(d, 0700), 0);
	assert_int_equal(chown(d, QEMU_UID, QEMU_GID), 0);
	return d;
}

/* The RAM file QEMU made in a domain directory: the QEMU user's, 0600, filled with fill. */
static void make_ram_file(const char *dir, unsigned char fill) {
	_cleanup_free_ char *path = join(dir, KEEP_RAM_RAM_FILE);
	_cleanup_free_ unsigned char *buf = malloc(RAM_SIZE);

	memset(buf, fill, RAM_SIZE);
	assert_int_equal(write_file_atomic(path, buf, RAM_SIZE, 0600), 0);
	assert_int_equal(chown(path, QEMU_UID, QEMU_GID), 0);
}

/* What keep_ram_before_save() does with a running domain's RAM file: kept and root's, its
 * entry written. */
static void keep(Fixture *f, const char *dom_dir) {
	_cleanup_close_ int dfd = open(dom_dir, O_RDONLY | O_DIRECTORY), fd = -EBADF;
	struct stat st, kst;

	assert_true(dfd >= 0);
	fd = keep_ram_ram_file_open(dfd, &st);
	assert_true(fd >= 0);
	assert_int_equal(st.st_uid, QEMU_UID);
	assert_int_equal(keep_ram_keep_file(fd, &st, f->keep_fd, UUID, GEN), 0);
	assert_int_equal(fstat(f->keep_fd, &kst), 0);
	f->e = (KeepRamEntry){ .uuid = UUID,
		               .name = strdup("vm"),
		               .kept_path = join(f->backing, KEEP_RAM_KEEP_SUBDIR "/" UUID ".ram"),
		               .size = RAM_SIZE,
		               .inode = st.st_ino,
		               .generation = strdup(GEN),
		               .backing_dir = strdup(f->backing),
		               .qmp_socket = strdup("/s"),
		               .save_image = strdup(f->image),
		               .owner_uid = st.st_uid,
		               .owner_gid = st.st_gid,
		               .owner_mode = st.st_mode & 07777,
		               .keep_dir_dev = kst.st_dev,
		               .keep_dir_inode = kst.st_ino };
	assert_int_equal(keep_ram_entry_write(f->state, &f->e), 0);
}

static int setup(void **state) {
	Fixture *f = calloc(1, sizeof(*f));
	_cleanup_free_ char *dom = NULL;

	*state = f;
	if (geteuid() != 0)
		return 0; /* each test skips */
	strcpy(f->dir, "/tmp/test-keep-ram-guard.XXXXXX");
	if (!mkdtemp(f->dir) || chmod(f->dir, 0755) < 0) /* the QEMU user passes through */
		return -1;
	f->root = join(f->dir, "root");
	assert_true(asprintf(&f->state, "%s%s", f->root, KEEP_RAM_STATE_DIR) > 0);
	f->backing = join(f->dir, "ram");
	f->doms = join(f->backing, "libvirt/qemu");
	f->image = join(f->dir, "vm.save");
	f->victim = join(f->dir, "victim");
	assert_int_equal(mkdir_p(f->doms, 0755), 0);
	assert_int_equal(mkdir_p(f->victim, 0755), 0);
	f->keep_fd = keep_ram_keep_dir_open(f->backing, true, NULL);
	assert_true(f->keep_fd >= 0);
	dom = make_domain_dir(f, 1, "vm");
	make_ram_file(dom, 0xa5);
	keep(f, dom);
	/* QEMU exited and libvirt removed its directory: only the kept link is left, sealed as
	 * keep_ram_after_save() seals it. */
	{
		_cleanup_free_ char *ram = join(dom, KEEP_RAM_RAM_FILE);
		_cleanup_close_ int fd = -EBADF;

		assert_int_equal(unlink(ram), 0);
		assert_int_equal(rmdir(dom), 0);
		fd = openat(f->keep_fd, UUID ".ram", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		assert_true(fd >= 0);
		assert_int_equal(keep_ram_set_immutable(fd, true), 0);
		assert_int_equal(keep_ram_has_writers(fd), 0);
	}
	return 0;
}

static int teardown(void **state) {
	Fixture *f = *state;
	_cleanup_free_ char *cmd = NULL;

	if (f->dir[0]) {
		/* The immutable flag, or rm cannot remove the kept file. */
		_cleanup_close_ int fd = openat(f->keep_fd, UUID ".ram", O_RDONLY | O_NOFOLLOW);
		if (fd >= 0)
			(void)keep_ram_set_immutable(fd, false);
		if (asprintf(&cmd, "rm -rf '%s'", f->dir) >= 0)
			(void)!system(cmd);
	}
	if (f->keep_fd > 0)
		close(f->keep_fd);
	keep_ram_entry_done(&f->e);
	free(f->root);
	free(f->state);
	free(f->backing);
	free(f->doms);
	free(f->image);
	free(f->victim);
	free(f);
	return 0;
}

#define NEEDS_ROOT()                \
	do {                        \
		if (geteuid() != 0) \
			skip();     \
	} while (0)

static int kept_fd(Fixture *f) {
	int fd = openat(f->keep_fd, UUID ".ram", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);

	assert_true(fd >= 0);
	return fd;
}

/* The guard on the fixture's entry: 0, or the negative errno; the reason printed. */
static int guard(Fixture *f) {
	_cleanup_free_ char *why = NULL;
	int fd = -EBADF, k;

	k = keep_ram_kept_open(f->keep_fd, &f->e, &fd, &why);
	if (fd >= 0)
		close(fd);
	if (k < 0) {
		assert_non_null(why);
		print_message("  guard: %s\n", why);
	}
	return k;
}

/* ---- the QEMU user against the kept file ---- */

static int qemu_user_writes_kept(Fixture *f) {
	_cleanup_free_ char *path = join(f->backing, KEEP_RAM_KEEP_SUBDIR "/" UUID ".ram");
	int fd = open(path, O_RDWR);

	/* Any success is a breach: exit 1. */
	if (fd >= 0)
		return 1;
	if (setxattr(path, "user.upgraded.generation", GEN, strlen(GEN), 0) == 0)
		return 1;
	if (setxattr(path, KEEP_RAM_XATTR, "x", 1, 0) == 0)
		return 1;
	if (rename(path, "/tmp/x") == 0)
		return 1;
	return 0;
}

static void test_kept_is_roots_alone(void **state) {
	Fixture *f = *state;
	_cleanup_close_ int fd = -EBADF;
	struct stat st;
	char mark[128];
	ssize_t n;

	NEEDS_ROOT();
	fd = kept_fd(f);
	assert_int_equal(fstat(fd, &st), 0);
	assert_int_equal(st.st_uid, 0);
	assert_int_equal(st.st_gid, 0);
	assert_int_equal(st.st_mode & 07777, KEEP_RAM_KEPT_MODE);
	n = fgetxattr(fd, KEEP_RAM_XATTR, mark, sizeof(mark) - 1);
	assert_true(n > 0);
	mark[n] = 0;
	assert_string_equal(mark, GEN);
	/* The keep directory: root's, nothing for others. */
	assert_int_equal(fstat(f->keep_fd, &st), 0);
	assert_int_equal(st.st_uid, 0);
	assert_int_equal(st.st_mode & 0777, 0700);
	assert_int_equal(as_qemu_user(qemu_user_writes_kept, f), 0);
	assert_int_equal(guard(f), 0);
}

/* A descriptor the QEMU user opened while the file was still its own. */
static void test_writer_before_the_seal(void **state) {
	Fixture *f = *state;
	_cleanup_free_ char *dom = make_domain_dir(f, 7, "other");
	_cleanup_free_ char *ram = join(dom, KEEP_RAM_RAM_FILE);
	_cleanup_close_ int held = -EBADF, fd = -EBADF;
	void *map;

	NEEDS_ROOT();
	assert_int_equal(guard(f), 0);
	/* A second kept file, held open for writing and mapped shared before it was kept. */
	make_ram_file(dom, 0x11);
	held = open(ram, O_RDWR | O_CLOEXEC);
	assert_true(held >= 0);
	fd = open(ram, O_RDONLY | O_CLOEXEC);
	assert_int_equal(fchown(fd, 0, 0), 0);
	assert_int_equal(keep_ram_has_writers(fd), 1);
	map = mmap(NULL, RAM_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, held, 0);
	assert_true(map != MAP_FAILED);
	close(held);
	held = -EBADF;
	/* The descriptor is gone, the writable mapping still holds the file open for writing. */
	assert_int_equal(keep_ram_has_writers(fd), 1);
	munmap(map, RAM_SIZE);
	assert_int_equal(keep_ram_has_writers(fd), 0);

	/* The guard sees a writer of the fixture's own kept file the same way. */
	{
		_cleanup_close_ int k = kept_fd(f), w = -EBADF;
		assert_int_equal(keep_ram_set_immutable(k, false), 0);
		w = openat(f->keep_fd, UUID ".ram", O_RDWR | O_CLOEXEC);
		assert_true(w >= 0);
		assert_int_equal(guard(f), -EPERM);
	}
	assert_int_equal(guard(f), 0);
}

/* Whatever changed since the save, by root or not, is refused; nothing is deleted. */
static void test_guard_refusals(void **state) {
	Fixture *f = *state;
	_cleanup_close_ int fd = -EBADF;
	_cleanup_free_ char *kept = join(f->backing, KEEP_RAM_KEEP_SUBDIR "/" UUID ".ram"),
	                    *away = join(f->dir, "away.ram");

	NEEDS_ROOT();
	fd = kept_fd(f);
	assert_int_equal(keep_ram_set_immutable(fd, false), 0);
	/* another mark, the old user.* mark only, no mark */
	assert_int_equal(fsetxattr(fd, KEEP_RAM_XATTR, "u9:x", 4, 0), 0);
	assert_int_equal(guard(f), -ESTALE);
	assert_int_equal(fremovexattr(fd, KEEP_RAM_XATTR), 0);
	assert_int_equal(fsetxattr(fd, "user.upgraded.generation", GEN, strlen(GEN), 0), 0);
	assert_int_equal(guard(f), -ENODATA);
	assert_int_equal(fsetxattr(fd, KEEP_RAM_XATTR, GEN, strlen(GEN), 0), 0);
	assert_int_equal(guard(f), 0);
	/* given away, opened up */
	assert_int_equal(fchown(fd, QEMU_UID, QEMU_GID), 0);
	assert_int_equal(guard(f), -EPERM);
	assert_int_equal(fchown(fd, 0, 0), 0);
	assert_int_equal(fchmod(fd, 0644), 0);
	assert_int_equal(guard(f), -EPERM);
	assert_int_equal(fchmod(fd, KEEP_RAM_KEPT_MODE), 0);
	/* grown, another inode */
	f->e.size++;
	assert_int_equal(guard(f), -EFBIG);
	f->e.size--;
	f->e.inode++;
	assert_int_equal(guard(f), -ESTALE);
	f->e.inode--;
	/* a symbolic link in its place, then missing */
	assert_int_equal(rename(kept, away), 0);
	assert_int_equal(symlink(away, kept), 0);
	assert_int_equal(guard(f), -EPERM);
	assert_int_equal(unlink(kept), 0);
	assert_int_equal(guard(f), -ENOENT);
	assert_int_equal(rename(away, kept), 0);
	assert_int_equal(guard(f), 0);
}

/* ---- the keep directory and the domain's memory directory ---- */

static int qemu_user_makes_keep_dir(Fixture *f) {
	_cleanup_free_ char *d = join(f->dir, "ram2/" KEEP_RAM_KEEP_SUBDIR);
	return mkdir(d, 0700) == 0 ? 0 : 1;
}

static void test_keep_dir_made_by_another(void **state) {
	Fixture *f = *state;
	_cleanup_free_ char *ram2 = join(f->dir, "ram2"), *why = NULL,
	                    *kd = join(ram2, KEEP_RAM_KEEP_SUBDIR);

	NEEDS_ROOT();
	/* A memory_backing_dir the QEMU user can write: it makes the keep directory first. */
	assert_int_equal(mkdir(ram2, 0755), 0);
	assert_int_equal(chown(ram2, QEMU_UID, QEMU_GID), 0);
	assert_int_equal(as_qemu_user(qemu_user_makes_keep_dir, f), 0);
	assert_int_equal(keep_ram_keep_dir_open(ram2, true, &why), -EPERM);
	print_message("  %s\n", why);
	free(why);
	why = NULL;
	/* root's, but open to others */
	assert_int_equal(rmdir(kd), 0);
	assert_int_equal(mkdir(kd, 0755), 0);
	assert_int_equal(keep_ram_keep_dir_open(ram2, true, &why), -EPERM);
	free(why);
	why = NULL;
	/* a link to root's own directory elsewhere */
	assert_int_equal(rmdir(kd), 0);
	assert_int_equal(symlink(f->backing, kd), 0);
	assert_int_equal(keep_ram_keep_dir_open(ram2, true, &why), -EPERM);
	free(why);
	why = NULL;
	assert_int_equal(unlink(kd), 0);
	assert_int_equal(keep_ram_keep_dir_open(ram2, false, &why), -ENOENT);
	free(why);
	why = NULL;
	{
		int fd = keep_ram_keep_dir_open(ram2, true, NULL);
		assert_true(fd >= 0);
		close(fd);
	}
}

static void test_domain_dir_exact(void **state) {
	Fixture *f = *state;
	_cleanup_free_ char *d9 = make_domain_dir(f, 9, "vm"), *d19 = make_domain_dir(f, 19, "vm"),
	                    *path = NULL, *lnk = join(f->doms, "8-vm"),
	                    *longname = make_domain_dir(f, 4, "a-very-long-domain-n"),
	                    *utf8 = make_domain_dir(f, 6,
	                                            "\xc3\xa9t\xc3\xa9-dom\xc3\xa1in-with-a-lo");
	int fd;

	NEEDS_ROOT();
	fd = keep_ram_domain_dir_open(f->backing, 9, "vm", &path);
	assert_true(fd >= 0);
	close(fd);
	assert_string_equal(path, d9);
	/* another VM's directory is never taken for this one's */
	assert_int_equal(keep_ram_domain_dir_open(f->backing, 9, "vm2", NULL), -ENOENT);
	assert_int_equal(keep_ram_domain_dir_open(f->backing, 1, "vm", NULL), -ENOENT);
	/* a link named like the domain's directory */
	assert_int_equal(symlink(d19, lnk), 0);
	assert_int_equal(keep_ram_domain_dir_open(f->backing, 8, "vm", NULL), -ENOTDIR);
	/* libvirt's short name: 20 characters */
	fd = keep_ram_domain_dir_open(f->backing, 4, "a-very-long-domain-name-indeed", NULL);
	assert_true(fd >= 0);
	close(fd);
	fd = keep_ram_domain_dir_open(f->backing, 6,
	                              "\xc3\xa9t\xc3\xa9-dom\xc3\xa1in-with-a-long-name", NULL);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(keep_ram_domain_dir_open(f->backing, 9, "../x", NULL), -EINVAL);
	assert_int_equal(keep_ram_domain_dir_open(f->backing, -1, "vm", NULL), -EINVAL);
	(void)longname;
	(void)utf8;
}

/* ---- the hook ---- */

static char *domain_xml(int id, const char *extra) {
	char *x;

	assert_true(asprintf(&x,
	                     "<domain type='qemu' id='%d' xmlns:qemu='" KEEP_RAM_QEMU_NS "'>"
	                     "<name>vm</name><uuid>" UUID "</uuid>%s</domain>",
	                     id, extra ?: "") > 0);
	return x;
}

static int hook(Fixture *f, const char *xml, KeepRamHookStart *ret) {
	_cleanup_free_ char *msg = NULL;
	KeepRamHookStart s = {};
	int k = keep_ram_hook_start(f->root, xml, strlen(xml), &s, &msg);

	if (msg)
		print_message("  hook: %s\n", msg);
	if (ret)
		*ret = s;
	else
		keep_ram_hook_start_done(&s);
	return k;
}

static void test_hook_links_back(void **state) {
	Fixture *f = *state;
	_cleanup_free_ char *dom = make_domain_dir(f, DOM_ID, "vm"),
	                    *xml = domain_xml(DOM_ID, NULL), *ram = join(dom, KEEP_RAM_RAM_FILE);
	KeepRamHookStart s;
	struct stat a, b;

	NEEDS_ROOT();
	/* No managed save image: a fresh boot, nothing linked. */
	assert_int_equal(hook(f, xml, &s), 0);
	assert_false(s.linked);
	assert_false(s.monitor);
	keep_ram_hook_start_done(&s);
	assert_int_equal(access(ram, F_OK), -1);

	assert_int_equal(write_file_atomic(f->image, "img", 3, 0600), 0);
	assert_int_equal(hook(f, xml, &s), 0);
	assert_true(s.linked);
	assert_int_equal(s.socket_uid, QEMU_UID);
	keep_ram_hook_start_done(&s);
	/* The same inode, given back to the QEMU user as it was. */
	assert_int_equal(stat(ram, &a), 0);
	assert_int_equal(fstatat(f->keep_fd, UUID ".ram", &b, 0), 0);
	assert_int_equal(a.st_ino, b.st_ino);
	assert_int_equal(a.st_uid, QEMU_UID);
	assert_int_equal(a.st_gid, QEMU_GID);
	assert_int_equal(a.st_mode & 07777, 0600);
}

static void test_hook_refusals(void **state) {
	Fixture *f = *state;
	_cleanup_free_ char *other = make_domain_dir(f, DOM_ID, "victim-vm"),
	                    *xml = domain_xml(DOM_ID, NULL), *lnk = NULL, *ram = NULL;
	struct stat st;

	NEEDS_ROOT();
	assert_int_equal(write_file_atomic(f->image, "img", 3, 0600), 0);
	/* Only another VM's directory with the new id: never linked into it. */
	assert_true(hook(f, xml, NULL) < 0);
	ram = join(other, KEEP_RAM_RAM_FILE);
	assert_int_equal(access(ram, F_OK), -1);
	/* The domain's directory name as a link to that other directory: refused. */
	assert_true(asprintf(&lnk, "%s/%d-vm", f->doms, DOM_ID) > 0);
	assert_int_equal(symlink(other, lnk), 0);
	assert_true(hook(f, xml, NULL) < 0);
	assert_int_equal(access(ram, F_OK), -1);
	/* Nothing changed: the kept file is still sealed and passes the guard. */
	assert_int_equal(guard(f), 0);
	assert_int_equal(fstatat(f->keep_fd, UUID ".ram", &st, 0), 0);
	assert_int_equal(st.st_uid, 0);

	/* A keep directory that is not the one the entry recorded. */
	f->e.keep_dir_inode++;
	assert_int_equal(keep_ram_entry_write(f->state, &f->e), 0);
	assert_int_equal(unlink(lnk), 0);
	free(lnk);
	lnk = make_domain_dir(f, DOM_ID, "vm");
	assert_true(hook(f, xml, NULL) < 0);
	f->e.keep_dir_inode--;
	assert_int_equal(keep_ram_entry_write(f->state, &f->e), 0);
	assert_int_equal(hook(f, xml, NULL), 0);
}

static void test_hook_digest(void **state) {
	Fixture *f = *state;
	_cleanup_free_ char *dom = NULL, *xml = domain_xml(DOM_ID, NULL), *hex = NULL;
	_cleanup_close_ int fd = -EBADF;

	NEEDS_ROOT();
	dom = make_domain_dir(f, DOM_ID, "vm");
	assert_non_null(dom);
	assert_int_equal(write_file_atomic(f->image, "img", 3, 0600), 0);
	fd = kept_fd(f);
	assert_int_equal(keep_ram_digest_fd(fd, KEEP_RAM_DIGEST_FULL, 1, &hex), 0);
	/* The digest at the save, then a byte changed by root behind the seal. */
	f->e.digest_mode = strdup("full");
	f->e.digest = strdup(hex);
	assert_int_equal(keep_ram_entry_write(f->state, &f->e), 0);
	{
		_cleanup_close_ int w = -EBADF;
		assert_int_equal(keep_ram_set_immutable(fd, false), 0);
		w = openat(f->keep_fd, UUID ".ram", O_WRONLY | O_CLOEXEC);
		assert_int_equal(pwrite(w, "x", 1, 100), 1);
	}
	assert_true(hook(f, xml, NULL) < 0);
	/* The daemon's guard verified this generation: the hook does not hash again. */
	f->e.verified = strdup(GEN);
	assert_int_equal(keep_ram_entry_write(f->state, &f->e), 0);
	assert_int_equal(hook(f, xml, NULL), 0);
}

/* The extra monitor: only keep-ram's own argument for this uuid, never a path from the XML. */
static void test_hook_monitor_only_ours(void **state) {
	Fixture *f = *state;
	_cleanup_free_ char *ours = NULL, *x1 = NULL, *x2 = NULL, *x3 = NULL, *arg = NULL,
	                    *victim_file = join(f->victim, "x"), *sockdir = NULL;
	KeepRamHookStart s;
	struct stat before, after;

	NEEDS_ROOT();
	assert_int_equal(write_file_atomic(victim_file, "v", 1, 0644), 0);
	assert_int_equal(stat(f->victim, &before), 0);
	assert_int_equal(keep_ram_entry_remove(f->state, UUID), 0);
	assert_true(asprintf(&arg,
	                     "<description>socket,id=" KEEP_RAM_QMP_CHARDEV_ID
	                     ",path=%s,</description>"
	                     "<qemu:commandline><qemu:arg value='-chardev'/>"
	                     "<qemu:arg value='socket,id=" KEEP_RAM_QMP_CHARDEV_ID
	                     ",path=%s,server=on,wait=on'/></qemu:commandline>",
	                     victim_file, victim_file) > 0);
	x1 = domain_xml(DOM_ID, arg);
	assert_int_equal(hook(f, x1, &s), 0);
	assert_false(s.monitor);
	keep_ram_hook_start_done(&s);
	/* and the victim is as it was */
	assert_int_equal(stat(f->victim, &after), 0);
	assert_int_equal(after.st_uid, before.st_uid);
	assert_int_equal(after.st_mode, before.st_mode);
	assert_int_equal(access(victim_file, F_OK), 0);

	/* Ours: the path is derived from the uuid under root's run directory. */
	assert_int_equal(keep_ram_qmp_chardev_arg(f->root, UUID, &ours), 0);
	free(arg);
	assert_true(asprintf(&arg, "<qemu:commandline><qemu:arg value='%s'/></qemu:commandline>",
	                     ours) > 0);
	x2 = domain_xml(DOM_ID, arg);
	assert_int_equal(hook(f, x2, &s), 0);
	assert_true(s.monitor);
	assert_non_null(strstr(s.socket, "/run/upgraded/keep-ram/" UUID "/qmp"));
	/* the same argument in a foreign namespace: not ours */
	keep_ram_hook_start_done(&s);
	free(arg);
	assert_true(asprintf(&arg,
	                     "<q:commandline xmlns:q='urn:x'><q:arg value='%s'/></q:commandline>",
	                     ours) > 0);
	x3 = domain_xml(DOM_ID, arg);
	assert_int_equal(hook(f, x3, &s), 0);
	assert_false(s.monitor);
	keep_ram_hook_start_done(&s);

	/* Its directory: root's parents, the uuid's own given to the QEMU user. */
	assert_int_equal(keep_ram_socket_dir_prepare(f->root, UUID, QEMU_UID, QEMU_GID), 0);
	assert_true(asprintf(&sockdir, "%s" KEEP_RAM_RUN_DIR "/" UUID, f->root) > 0);
	assert_int_equal(stat(sockdir, &after), 0);
	assert_int_equal(after.st_uid, QEMU_UID);
	assert_int_equal(after.st_mode & 0777, 0700);
	/* a parent someone else owns is refused, never repaired */
	{
		_cleanup_free_ char *kr = NULL;
		assert_true(asprintf(&kr, "%s" KEEP_RAM_RUN_DIR, f->root) > 0);
		assert_int_equal(chown(kr, QEMU_UID, QEMU_GID), 0);
		assert_int_equal(keep_ram_socket_dir_prepare(f->root, UUID, QEMU_UID, QEMU_GID),
		                 -EPERM);
		assert_int_equal(chown(kr, 0, 0), 0);
	}
	assert_int_equal(keep_ram_socket_dir_prepare(f->root, "../../etc", 0, 0), -EINVAL);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_kept_is_roots_alone, setup, teardown),
		cmocka_unit_test_setup_teardown(test_writer_before_the_seal, setup, teardown),
		cmocka_unit_test_setup_teardown(test_guard_refusals, setup, teardown),
		cmocka_unit_test_setup_teardown(test_keep_dir_made_by_another, setup, teardown),
		cmocka_unit_test_setup_teardown(test_domain_dir_exact, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hook_links_back, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hook_refusals, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hook_digest, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hook_monitor_only_ours, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
