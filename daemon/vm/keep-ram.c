/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The keep-ram strategy's steps on the daemon's side; see keep-ram.h for the order and
 * docs/vms.md for the design. Every step runs on a worker thread of vm-orchestrate.c with its
 * own libvirt connection.
 */

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>
#include <time.h>

#include <libvirt/libvirt-qemu.h>
#include <libvirt/libvirt.h>

#include "keep-ram.h"
#include "keep-ram-entry.h"
#include "keep-ram-fs.h"
#include "vm-internal.h"
#include "fileio.h"
#include "macros.h"
#include "string-util.h"

static KeptRam *kept_ram_of(VmResult *r) {
	if (!r->kept_ram)
		r->kept_ram = calloc(1, sizeof(KeptRam));
	return r->kept_ram;
}

int keep_ram_backing_dir_from_conf(const char *conf_path, char **ret_dir) {
	_cleanup_free_ char *text = NULL;
	char *line, *save = NULL, *dir = NULL;
	int r;

	r = read_file_full(conf_path, 1024 * 1024, &text, NULL);
	if (r < 0 && r != -ENOENT)
		return r;
	for (line = text ? strtok_r(text, "\n", &save) : NULL; line;
	     line = strtok_r(NULL, "\n", &save)) {
		char *p = strstrip(line), *q;

		if (strncmp(p, "memory_backing_dir", strlen("memory_backing_dir")) != 0)
			continue;
		p = strstrip(p + strlen("memory_backing_dir"));
		if (*p != '=')
			continue;
		p = strstrip(p + 1);
		if (*p != '"' || !(q = strchr(p + 1, '"')))
			return -EBADMSG;
		free(dir);
		dir = strndup(p + 1, (size_t)(q - p - 1));
		if (!dir)
			return -ENOMEM;
	}
	*ret_dir = dir ?: strdup(KEEP_RAM_BACKING_DIR_DEFAULT);
	return *ret_dir ? 0 : -ENOMEM;
}

static int config_backing_dir(const KeepRamConfig *cfg, char **ret) {
	if (cfg && cfg->backing_dir) {
		*ret = strdup(cfg->backing_dir);
		return *ret ? 0 : -ENOMEM;
	}
	return keep_ram_backing_dir_from_conf(KEEP_RAM_QEMU_CONF, ret);
}

/* The live domain's facts from its XML (libvirt's elements only: keep-ram-xml.h). */
static int domain_xml(virDomainPtr dom, KeepRamXml *ret) {
	_cleanup_free_ char *xml = virDomainGetXMLDesc(dom, 0);

	if (!xml)
		return -EIO;
	return keep_ram_xml_parse(xml, strlen(xml), ret);
}

/* The running domain's memory directory and RAM file, opened and checked: *ret_dir_fd,
 * *ret_fd, their stat, and the file's path. -EOPNOTSUPP with a reason when it has none. */
static int open_ram_file(virDomainPtr dom, const char *backing_dir, int *ret_fd,
                         struct stat *ret_st, char **ret_path, char **ret_reason) {
	_cleanup_free_ char *dir = NULL;
	_cleanup_close_ int dfd = -EBADF;
	KeepRamXml x;
	int k;

	*ret_reason = NULL;
	k = domain_xml(dom, &x);
	if (k < 0)
		return asprintf(ret_reason, "cannot read the domain: %s",
		                k == -EIO ? vm_last_error() : strerror(-k)) < 0
		               ? -ENOMEM
		               : -EIO;
	if (!x.shared_file_memory) {
		keep_ram_xml_done(&x);
		return asprintf(ret_reason,
		                "its RAM is not a shared file (<memoryBacking> needs "
		                "<source type='file'/> and <access mode='shared'/>)") < 0
		               ? -ENOMEM
		               : -EOPNOTSUPP;
	}
	if (x.id < 0) {
		keep_ram_xml_done(&x);
		return asprintf(ret_reason, "domain is not running") < 0 ? -ENOMEM : -EOPNOTSUPP;
	}
	dfd = keep_ram_domain_dir_open(backing_dir, x.id, x.name, &dir);
	k = dfd < 0 ? dfd : keep_ram_ram_file_open(dfd, ret_st);
	if (k < 0) {
		k = asprintf(ret_reason,
		             "no RAM file %s/[libvirt/qemu/]%d-<name>/" KEEP_RAM_RAM_FILE
		             " (NUMA cells and memory devices are not supported): %s",
		             backing_dir, x.id, strerror(-k)) < 0
		            ? -ENOMEM
		            : -EOPNOTSUPP;
		keep_ram_xml_done(&x);
		return k;
	}
	keep_ram_xml_done(&x);
	*ret_fd = k;
	if (asprintf(ret_path, "%s/" KEEP_RAM_RAM_FILE, dir) < 0) {
		close(*ret_fd);
		return -ENOMEM;
	}
	return 0;
}

int keep_ram_ram_file(virDomainPtr dom, const char *backing_dir, char **ret_path,
                      char **ret_reason) {
	_cleanup_close_ int fd = -EBADF;
	struct stat st;

	return open_ram_file(dom, backing_dir, &fd, &st, ret_path, ret_reason);
}

char *keep_ram_blocker(virDomainPtr dom, const KeepRamConfig *cfg) {
	_cleanup_free_ char *backing = NULL, *ram = NULL;
	char *why = NULL;

	if (config_backing_dir(cfg, &backing) < 0)
		return strdup("cannot read libvirt's memory_backing_dir from " KEEP_RAM_QEMU_CONF);
	if (keep_ram_ram_file(dom, backing, &ram, &why) < 0)
		return why ?: strdup("out of memory");
	if (cfg && cfg->on_kept_memory && !cfg->on_kept_memory(ram, &why, cfg->userdata))
		return why ?: strdup("its RAM file is not on memory that survives the kexec");
	return NULL;
}

/* x-ignore-shared in the running QEMU, through libvirt's monitor passthrough. */
static int set_ignore_shared(virDomainPtr dom, bool on) {
	_cleanup_free_ char *out = NULL;
	char cmd[256];

	snprintf(cmd, sizeof(cmd),
	         "{\"execute\":\"migrate-set-capabilities\",\"arguments\":{\"capabilities\":"
	         "[{\"capability\":\"x-ignore-shared\",\"state\":%s}]}}",
	         on ? "true" : "false");
	if (virDomainQemuMonitorCommand(dom, cmd, &out, 0) < 0)
		return -EIO;
	return out && strstr(out, "\"return\"") ? 0 : -EIO;
}

static int make_generation(const KeepRamConfig *cfg, const char *uuid, char **ret) {
	uint64_t nonce;

	if (getrandom(&nonce, sizeof(nonce), 0) != sizeof(nonce))
		return -errno;
	return asprintf(ret, "%s:%s:%016" PRIx64, cfg && cfg->update_id ? cfg->update_id : "-",
	                uuid, nonce) < 0
	               ? -ENOMEM
	               : 0;
}

/* keep-ram's own directory on the RAM file's filesystem: <backing>/upgraded-keep, where the
 * record's path says it is (<keep dir>/<uuid>.ram). */
static int kept_keep_dir(const KeptRam *k, bool create, char **ret_reason) {
	_cleanup_free_ char *backing = k && k->path ? strdup(k->path) : NULL;
	char *slash;

	for (int i = 0; backing && i < 2; i++)
		if ((slash = strrchr(backing, '/')))
			*slash = 0;
	if (!backing || !*backing)
		return -EINVAL;
	return keep_ram_keep_dir_open(backing, create, ret_reason);
}

/* Builds the manifest entry of r from what before_save learned. */
static int write_entry(const KeepRamConfig *cfg, const char *backing, const char *save_dir,
                       const VmResult *r, const struct stat *ram, const struct stat *keep_dir) {
	const KeptRam *k = r->kept_ram;
	_cleanup_free_ char *sock = NULL, *image = NULL;
	KeepRamEntry e = { .size = k->size,
		           .inode = k->inode,
		           .owner_uid = ram->st_uid,
		           .owner_gid = ram->st_gid,
		           .owner_mode = ram->st_mode & 07777,
		           .keep_dir_dev = (uint64_t)keep_dir->st_dev,
		           .keep_dir_inode = (uint64_t)keep_dir->st_ino };

	if (keep_ram_qmp_socket_path(cfg ? cfg->root : NULL, r->uuid, &sock) < 0 ||
	    asprintf(&image, "%s/%s.save", save_dir ?: VM_SAVE_DIR_DEFAULT, r->name) < 0)
		return -ENOMEM;
	memcpy(e.uuid, r->uuid, sizeof(e.uuid));
	e.name = r->name;
	e.kept_path = k->path;
	e.generation = k->generation;
	e.backing_dir = (char *)backing;
	e.qmp_socket = sock;
	e.save_image = image;
	return keep_ram_entry_write(k->state_dir, &e);
}

/* The paths, the mode and the mark of a VM about to keep its RAM. */
static int kept_ram_prepare(const KeepRamConfig *cfg, const char *backing, VmResult *r) {
	KeptRam *k = r->kept_ram;

	k->digest_mode = cfg ? cfg->digest : KEEP_RAM_DIGEST_MARK;
	if (asprintf(&k->path, "%s/" KEEP_RAM_KEEP_SUBDIR "/%s.ram", backing, r->uuid) < 0 ||
	    asprintf(&k->state_dir, "%s%s", strempty(cfg ? cfg->root : NULL), KEEP_RAM_STATE_DIR) <
	            0)
		return -ENOMEM;
	return make_generation(cfg, r->uuid, &k->generation);
}

int keep_ram_before_save(virDomainPtr dom, const KeepRamConfig *cfg, const char *save_dir,
                         VmResult *r) {
	_cleanup_free_ char *backing = NULL, *ram = NULL, *why = NULL;
	_cleanup_close_ int fd = -EBADF, keep = -EBADF;
	KeptRam *k = kept_ram_of(r);
	struct stat st, kst;
	int e;

	if (!k || config_backing_dir(cfg, &backing) < 0)
		return -ENOMEM;
	e = open_ram_file(dom, backing, &fd, &st, &ram, &why);
	if (e < 0) {
		vm_result_set_error(r, "keep-ram: %s", strna(why));
		return e;
	}
	e = kept_ram_prepare(cfg, backing, r);
	if (e < 0)
		return e;
	/* 1. root's keep directory on the same filesystem (a hard link cannot leave it). */
	keep = keep_ram_keep_dir_open(backing, true, &why);
	if (keep < 0 || fstat(keep, &kst) < 0) {
		vm_result_set_error(r, "keep-ram: %s", why ?: strerror(errno));
		return keep < 0 ? keep : -errno;
	}
	/* 2. The hard link, the file root's alone from now on, the generation mark. */
	e = keep_ram_keep_file(fd, &st, keep, r->uuid, k->generation);
	if (e < 0) {
		vm_result_set_error(r,
		                    "keep-ram: cannot keep '%s' as '%s' (" KEEP_RAM_XATTR "): %s",
		                    ram, k->path, strerror(-e));
		return e;
	}
	k->size = (uint64_t)st.st_size;
	k->inode = (uint64_t)st.st_ino;
	/* 3. The entry the hook reads, 4. the capability: the save then skips the RAM. */
	e = write_entry(cfg, backing, save_dir, r, &st, &kst);
	if (e < 0) {
		vm_result_set_error(r, "keep-ram: cannot write its manifest entry: %s",
		                    strerror(-e));
		return e;
	}
	if (set_ignore_shared(dom, true) < 0) {
		vm_result_set_error(r, "keep-ram: cannot turn on x-ignore-shared: %s",
		                    vm_last_error());
		return -EIO;
	}
	return 0;
}

/* The saved XML gets the extra monitor the hook's helper connects to. libvirt keeps it only
 * in the image: the persistent definition does not change. */
static int define_saved_xml(virDomainPtr dom, const VmResult *r, const char *root) {
	_cleanup_free_ char *xml = NULL, *out = NULL, *arg = NULL;
	KeepRamXml x;
	bool has;
	char *end;

	if (keep_ram_qmp_chardev_arg(root, r->uuid, &arg) < 0)
		return -ENOMEM;
	xml = virDomainManagedSaveGetXMLDesc(dom, VIR_DOMAIN_SAVE_IMAGE_XML_SECURE);
	if (!xml)
		return -EIO;
	if (keep_ram_xml_parse(xml, strlen(xml), &x) < 0)
		return -EBADMSG;
	has = keep_ram_xml_has_qemu_arg(&x, arg);
	keep_ram_xml_done(&x);
	if (has)
		return 0; /* restored by keep-ram before: its live XML has it already */
	end = strstr(xml, "</domain>");
	if (!end)
		return -EBADMSG;
	*end = 0;
	if (asprintf(&out,
	             "%s<qemu:commandline xmlns:qemu='" KEEP_RAM_QEMU_NS "'>"
	             "<qemu:arg value='-chardev'/><qemu:arg value='%s'/><qemu:arg value='-mon'/>"
	             "<qemu:arg value='chardev=" KEEP_RAM_QMP_CHARDEV_ID ",mode=control'/>"
	             "</qemu:commandline></domain>\n",
	             xml, arg) < 0)
		return -ENOMEM;
	return virDomainManagedSaveDefineXML(dom, out, 0) < 0 ? -EIO : 0;
}

/*
 * QEMU has exited: the kept file becomes immutable, and nobody may hold it open for writing
 * any more (a descriptor or a shared mapping taken while it was the QEMU user's). If somebody
 * does, or it cannot be told, a full digest guards it instead of the mark alone.
 */
static int seal(KeptRam *k, const char *uuid, int *ret_fd) {
	_cleanup_free_ char *why = NULL, *name = NULL;
	_cleanup_close_ int keep = -EBADF, fd = -EBADF;
	struct stat st;
	int w, i;

	keep = kept_keep_dir(k, false, &why);
	if (keep < 0)
		return keep;
	if (asprintf(&name, "%s.ram", uuid) < 0)
		return -ENOMEM;
	fd = openat(keep, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode) || (uint64_t)st.st_ino != k->inode || st.st_uid != 0)
		return -ESTALE;
	i = keep_ram_set_immutable(fd, true);
	w = keep_ram_has_writers(fd);
	if (w != 0) {
		k->seal = KEPT_RAM_SEAL_DIGEST_FORCED;
		k->digest_mode = KEEP_RAM_DIGEST_FULL;
	} else
		k->seal = i >= 0 ? KEPT_RAM_SEAL_IMMUTABLE : KEPT_RAM_SEAL_ROOT_OWNED;
	*ret_fd = TAKE_FD(fd);
	return 0;
}

/* The entry's digest (and, verified, the mark that the guard checked it just now). */
static int entry_set_digest(const KeptRam *k, const char *uuid, bool verified) {
	KeepRamEntry e = {};
	int rc;

	rc = keep_ram_entry_read(k->state_dir, uuid, &e);
	if (rc < 0)
		return rc;
	free(e.digest_mode);
	free(e.digest);
	free(e.verified);
	e.digest_mode = k->digest ? strdup(keep_ram_digest_mode_to_string(k->digest_mode)) : NULL;
	e.digest = k->digest ? strdup(k->digest) : NULL;
	e.verified = verified ? strdup(k->generation) : NULL;
	rc = (k->digest && (!e.digest_mode || !e.digest)) || (verified && !e.verified)
	             ? -ENOMEM
	             : keep_ram_entry_write(k->state_dir, &e);
	keep_ram_entry_done(&e);
	return rc;
}

int keep_ram_after_save(virDomainPtr dom, const KeepRamConfig *cfg, VmResult *r) {
	KeptRam *k = r->kept_ram;
	_cleanup_close_ int fd = -EBADF;
	usec_t t0;
	int e;

	if (!k)
		return -EINVAL;
	if (define_saved_xml(dom, r, cfg ? cfg->root : NULL) < 0) {
		vm_result_set_error(r,
		                    "keep-ram: cannot add the restore monitor to the saved XML: %s",
		                    vm_last_error());
		return -EIO;
	}
	e = seal(k, r->uuid, &fd);
	if (e < 0) {
		vm_result_set_error(r, "keep-ram: cannot seal the kept file '%s': %s", k->path,
		                    strerror(-e));
		return e;
	}
	if (k->digest_mode == KEEP_RAM_DIGEST_MARK)
		return 0;
	t0 = vm_now(CLOCK_MONOTONIC);
	e = keep_ram_digest_fd(fd, k->digest_mode, cfg ? cfg->digest_threads : 0, &k->digest);
	k->digest_usec = vm_now(CLOCK_MONOTONIC) - t0;
	if (e < 0) {
		vm_result_set_error(r, "keep-ram: cannot hash '%s': %s", k->path, strerror(-e));
		return e;
	}
	/* The hook checks the digest too, where the daemon's guard did not. */
	return entry_set_digest(k, r->uuid, false);
}

/* Gives the RAM file back to QEMU's user (idempotent: the hook may have done it), removes the
 * link and the entry: the RAM file lives on only as QEMU's own (or not at all). */
static void forget(const KeptRam *k, const char *uuid) {
	_cleanup_close_ int keep = kept_keep_dir(k, false, NULL), fd = -EBADF;
	_cleanup_free_ char *name = NULL;
	KeepRamEntry e = {};

	if (keep >= 0 && asprintf(&name, "%s.ram", uuid) >= 0 && k->state_dir &&
	    keep_ram_entry_read(k->state_dir, uuid, &e) >= 0 &&
	    (fd = openat(keep, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)) >= 0) {
		struct stat st;

		if (fstat(fd, &st) >= 0 && S_ISREG(st.st_mode) && (uint64_t)st.st_ino == e.inode) {
			(void)keep_ram_set_immutable(fd, false);
			(void)keep_ram_give_back(fd, &e);
		}
	}
	keep_ram_entry_done(&e);
	if (keep >= 0)
		(void)keep_ram_forget_file(keep, uuid);
	if (k->state_dir)
		(void)keep_ram_entry_remove(k->state_dir, uuid);
}

void keep_ram_abandon(virDomainPtr dom, VmResult *r) {
	if (!r->kept_ram || !r->kept_ram->path)
		return;
	if (virDomainIsActive(dom) == 1)
		(void)set_ignore_shared(dom, false);
	forget(r->kept_ram, r->uuid);
}

int keep_ram_before_checkpoint(virDomainPtr dom) {
	KeepRamXml x;
	bool shared;

	if (domain_xml(dom, &x) < 0)
		return 0;
	shared = x.shared_file_memory;
	keep_ram_xml_done(&x);
	return shared ? set_ignore_shared(dom, false) : 0;
}

/* The entry against the handoff record: the same file, mark and digest. */
static int entry_matches_record(const KeepRamEntry *e, const KeptRam *k, char **ret_reason) {
	if (streq(e->generation, k->generation) && streq(e->kept_path, k->path) &&
	    e->size == k->size && e->inode == k->inode &&
	    streq(strempty(e->digest), strempty(k->digest)))
		return 0;
	return asprintf(ret_reason,
	                "its manifest entry (generation '%s') is not the one of the handoff record "
	                "(generation '%s')",
	                e->generation, k->generation) < 0
	               ? -ENOMEM
	               : -ESTALE;
}

/* The digest of the open kept file against the record's. */
static int verify_digest(int fd, const KeptRam *k, char **ret_reason) {
	_cleanup_free_ char *digest = NULL;
	int rc = keep_ram_digest_fd(fd, k->digest_mode, 0, &digest);

	if (rc < 0)
		return asprintf(ret_reason, "cannot hash '%s': %s", k->path, strerror(-rc)) < 0
		               ? -ENOMEM
		               : rc;
	if (!streq(digest, k->digest))
		return asprintf(ret_reason, "%s digest of '%s' is %s, %s at the save",
		                keep_ram_digest_mode_to_string(k->digest_mode), k->path, digest,
		                k->digest) < 0
		               ? -ENOMEM
		               : -EBADMSG;
	return 0;
}

int keep_ram_verify(VmResult *r, char **ret_reason) {
	KeptRam *k = r->kept_ram;
	_cleanup_close_ int keep = -EBADF, fd = -EBADF;
	KeepRamEntry e = {};
	usec_t t0 = vm_now(CLOCK_MONOTONIC);
	int rc;

	*ret_reason = NULL;
	if (!k || !k->path || !k->state_dir || !k->generation)
		return asprintf(ret_reason, "the record has no kept RAM") < 0 ? -ENOMEM : -EBADMSG;
	rc = keep_ram_entry_read(k->state_dir, r->uuid, &e);
	if (rc < 0)
		return asprintf(ret_reason, "its keep-ram manifest entry in %s is unreadable: %s",
		                k->state_dir, strerror(-rc)) < 0
		               ? -ENOMEM
		               : rc;
	rc = entry_matches_record(&e, k, ret_reason);
	if (rc >= 0) {
		keep = kept_keep_dir(k, false, ret_reason);
		rc = keep < 0 ? keep : keep_ram_kept_open(keep, &e, &fd, ret_reason);
	}
	keep_ram_entry_done(&e);
	if (rc >= 0 && k->digest && k->digest_mode != KEEP_RAM_DIGEST_MARK) {
		rc = verify_digest(fd, k, ret_reason);
		/* Immutable and root's since: the hook need not hash it again. */
		if (rc >= 0)
			(void)entry_set_digest(k, r->uuid, true);
	}
	k->verify_usec = vm_now(CLOCK_MONOTONIC) - t0;
	return rc;
}

void keep_ram_restored(virDomainPtr dom, VmResult *r) {
	if (!r->kept_ram || !r->kept_ram->path)
		return;
	/* The hook's helper turns it off after the incoming migration too; this covers a
	 * helper that died. A later plain managed save must write the RAM again. */
	(void)set_ignore_shared(dom, false);
	forget(r->kept_ram, r->uuid);
}

bool keep_ram_race_lost(const char *libvirt_error) {
	return libvirt_error && strstr(libvirt_error, "x-ignore-shared");
}
