/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The keep-ram strategy's steps on the daemon's side; see keep-ram.h for the order and
 * docs/vms.md for the design. Every step runs on a worker thread of vm-orchestrate.c with its
 * own libvirt connection.
 */

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>

#include <libvirt/libvirt-qemu.h>
#include <libvirt/libvirt.h>

#include "keep-ram.h"
#include "keep-ram-entry.h"
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

/* Whether the XML's <memoryBacking> asks for a shared file (libvirt's own formatting). */
static bool xml_shared_file_memory(const char *xml) {
	const char *b = strstr(xml, "<memoryBacking>"),
	           *e = b ? strstr(b, "</memoryBacking>") : NULL;
	_cleanup_free_ char *block = b && e ? strndup(b, (size_t)(e - b)) : NULL;

	return block && strstr(block, "<source type='file'") &&
	       strstr(block, "<access mode='shared'");
}

int keep_ram_ram_file(virDomainPtr dom, const char *backing_dir, char **ret_path,
                      char **ret_reason) {
	_cleanup_free_ char *xml = virDomainGetXMLDesc(dom, 0), *dir = NULL, *path = NULL;
	unsigned id = virDomainGetID(dom);
	struct stat st;
	int k;

	*ret_reason = NULL;
	if (!xml)
		return asprintf(ret_reason, "cannot read the domain: %s", vm_last_error()) < 0
		               ? -ENOMEM
		               : -EIO;
	if (!xml_shared_file_memory(xml))
		return asprintf(ret_reason,
		                "its RAM is not a shared file (<memoryBacking> needs "
		                "<source type='file'/> and <access mode='shared'/>)") < 0
		               ? -ENOMEM
		               : -EOPNOTSUPP;
	if (id == (unsigned)-1)
		return asprintf(ret_reason, "domain is not running") < 0 ? -ENOMEM : -EOPNOTSUPP;
	k = keep_ram_domain_dir(backing_dir, (int)id, &dir);
	if (k >= 0 && asprintf(&path, "%s/pc.ram", dir) < 0)
		return -ENOMEM;
	if (k < 0 || stat(path, &st) < 0 || !S_ISREG(st.st_mode))
		return asprintf(ret_reason,
		                "no RAM file %s/[libvirt/qemu/]%u-*/pc.ram (NUMA cells "
		                "and memory devices are not supported)",
		                backing_dir, id) < 0
		               ? -ENOMEM
		               : -EOPNOTSUPP;
	*ret_path = TAKE_PTR(path);
	return 0;
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

/* Builds the manifest entry of r from what before_save learned. */
static int write_entry(const KeepRamConfig *cfg, const char *backing, const char *save_dir,
                       const VmResult *r) {
	const KeptRam *k = r->kept_ram;
	_cleanup_free_ char *sock = NULL, *image = NULL;
	KeepRamEntry e = { .size = k->size, .inode = k->inode };

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

int keep_ram_before_save(virDomainPtr dom, const KeepRamConfig *cfg, const char *save_dir,
                         VmResult *r) {
	_cleanup_free_ char *backing = NULL, *ram = NULL, *why = NULL, *keep_dir = NULL;
	KeptRam *k = kept_ram_of(r);
	struct stat st;
	int e;

	if (!k || config_backing_dir(cfg, &backing) < 0)
		return -ENOMEM;
	e = keep_ram_ram_file(dom, backing, &ram, &why);
	if (e < 0) {
		vm_result_set_error(r, "keep-ram: %s", strna(why));
		return e;
	}
	k->digest_mode = cfg ? cfg->digest : KEEP_RAM_DIGEST_MARK;
	if (asprintf(&keep_dir, "%s/%s", backing, KEEP_RAM_KEEP_SUBDIR) < 0 ||
	    asprintf(&k->path, "%s/%s.ram", keep_dir, r->uuid) < 0 ||
	    asprintf(&k->state_dir, "%s%s", strempty(cfg ? cfg->root : NULL), KEEP_RAM_STATE_DIR) <
	            0)
		return -ENOMEM;
	e = make_generation(cfg, r->uuid, &k->generation);
	if (e < 0)
		return e;

	/* 1. The hard link: same filesystem as the RAM file, which libvirt deletes at the stop. */
	e = mkdir_p(keep_dir, 0700);
	if (e >= 0 && unlink(k->path) < 0 && errno != ENOENT)
		e = -errno;
	if (e >= 0 && link(ram, k->path) < 0)
		e = -errno;
	if (e < 0) {
		vm_result_set_error(r, "keep-ram: cannot link '%s' to '%s': %s", ram, k->path,
		                    strerror(-e));
		return e;
	}
	/* 2. The generation mark on the file, its size and inode. */
	e = keep_ram_mark_set(k->path, k->generation);
	if (e >= 0 && stat(k->path, &st) < 0)
		e = -errno;
	if (e < 0) {
		vm_result_set_error(r, "keep-ram: cannot mark '%s' (%s): %s", k->path,
		                    KEEP_RAM_XATTR, strerror(-e));
		return e;
	}
	k->size = (uint64_t)st.st_size;
	k->inode = (uint64_t)st.st_ino;
	/* 3. The entry the hook reads, 4. the capability: the save then skips the RAM. */
	e = write_entry(cfg, backing, save_dir, r);
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
	_cleanup_free_ char *xml = NULL, *out = NULL, *sock = NULL;
	char *end;

	if (keep_ram_qmp_socket_path(root, r->uuid, &sock) < 0)
		return -ENOMEM;
	xml = virDomainManagedSaveGetXMLDesc(dom, VIR_DOMAIN_SAVE_IMAGE_XML_SECURE);
	if (!xml)
		return -EIO;
	if (strstr(xml, KEEP_RAM_QMP_CHARDEV_ID))
		return 0; /* restored by keep-ram before: its live XML has it already */
	end = strstr(xml, "</domain>");
	if (!end)
		return -EBADMSG;
	*end = 0;
	if (asprintf(&out,
	             "%s<qemu:commandline xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'>"
	             "<qemu:arg value='-chardev'/><qemu:arg value='socket,id=%s,path=%s,"
	             "server=on,wait=on'/><qemu:arg value='-mon'/>"
	             "<qemu:arg value='chardev=%s,mode=control'/></qemu:commandline></domain>\n",
	             xml, KEEP_RAM_QMP_CHARDEV_ID, sock, KEEP_RAM_QMP_CHARDEV_ID) < 0)
		return -ENOMEM;
	return virDomainManagedSaveDefineXML(dom, out, 0) < 0 ? -EIO : 0;
}

int keep_ram_after_save(virDomainPtr dom, const KeepRamConfig *cfg, VmResult *r) {
	KeptRam *k = r->kept_ram;
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
	if (k->digest_mode == KEEP_RAM_DIGEST_MARK)
		return 0;
	t0 = vm_now(CLOCK_MONOTONIC);
	e = keep_ram_digest_file(k->path, k->digest_mode, cfg ? cfg->digest_threads : 0,
	                         &k->digest);
	k->digest_usec = vm_now(CLOCK_MONOTONIC) - t0;
	if (e < 0)
		vm_result_set_error(r, "keep-ram: cannot hash '%s': %s", k->path, strerror(-e));
	return e;
}

/* Removes the link and the entry: the RAM file lives on only as QEMU's own (or not at all). */
static void forget(const KeptRam *k, const char *uuid) {
	if (k->path)
		(void)unlink(k->path);
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
	_cleanup_free_ char *xml = virDomainGetXMLDesc(dom, 0);

	if (!xml || !xml_shared_file_memory(xml))
		return 0;
	return set_ignore_shared(dom, false);
}

int keep_ram_verify(VmResult *r, char **ret_reason) {
	KeptRam *k = r->kept_ram;
	_cleanup_free_ char *digest = NULL;
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
	if (!streq(e.generation, k->generation) || !streq(e.kept_path, k->path) ||
	    e.size != k->size || e.inode != k->inode)
		rc = asprintf(ret_reason,
		              "its manifest entry (generation '%s') is not the one of "
		              "the handoff record (generation '%s')",
		              e.generation, k->generation) < 0
		             ? -ENOMEM
		             : -ESTALE;
	else
		rc = keep_ram_entry_check_file(&e, ret_reason);
	keep_ram_entry_done(&e);
	if (rc >= 0 && k->digest && k->digest_mode != KEEP_RAM_DIGEST_MARK) {
		rc = keep_ram_digest_file(k->path, k->digest_mode, 0, &digest);
		if (rc < 0)
			rc = asprintf(ret_reason, "cannot hash '%s': %s", k->path, strerror(-rc)) <
			                     0
			             ? -ENOMEM
			             : rc;
		else if (!streq(digest, k->digest))
			rc = asprintf(ret_reason, "%s digest of '%s' is %s, %s at the save",
			              keep_ram_digest_mode_to_string(k->digest_mode), k->path,
			              digest, k->digest) < 0
			             ? -ENOMEM
			             : -EBADMSG;
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
