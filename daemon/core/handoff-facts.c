/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "architecture.h"
#include "cmdline.h"
#include "fileio.h"
#include "handoff-facts.h"
#include "kmsg.h"
#include "macros.h"
#include "path-util.h"
#include "string-util.h"

#define HEALTH_HW_ERROR    "[Hardware Error]"
#define HEALTH_MCE_DIR     "/sys/devices/system/machinecheck"
#define HEALTH_EDAC_MC_DIR "/sys/devices/system/edac/mc"
#define HEALTH_GHES_DIR    "/sys/bus/platform/drivers/GHES"
#define HEALTH_COUNTER_MAX 64
#define HEALTH_IOMMU_DIR   "/sys/class/iommu"
#define HEALTH_GROUPS_DIR  "/sys/kernel/iommu_groups"

static bool add_u64(uint64_t *sum, uint64_t v) {
	if (*sum > UINT64_MAX - v)
		return false;
	*sum += v;
	return true;
}

/* The per-CPU numbers after "NAME:" up to the first word that is not a number
 * (the row's description). */
static int sum_interrupt_row(const char *p, uint64_t *ret) {
	uint64_t sum = 0;
	bool any = false;

	for (;;) {
		unsigned long long v;
		char *end;

		p += strspn(p, " \t");
		if (*p < '0' || *p > '9')
			break;
		errno = 0;
		v = strtoull(p, &end, 10);
		if (errno != 0 || (*end != ' ' && *end != '\t' && *end != '\n' && *end != '\0') ||
		    !add_u64(&sum, v))
			return -EBADMSG;
		any = true;
		p = end;
	}
	if (!any)
		return -EBADMSG;
	*ret = sum;
	return 0;
}

int health_parse_interrupts(const char *text, uint64_t *ret) {
	static const char *const rows[] = { "MCE:", "THR:", "DFR:" };
	uint64_t sum = 0;
	bool have_mce = false;

	if (!text || !ret)
		return -EINVAL;
	for (const char *line = text; *line;) {
		const char *nl = strchr(line, '\n');
		const char *p = line + strspn(line, " ");

		for (size_t i = 0; i < ELEMENTSOF(rows); i++) {
			uint64_t v;
			int r;

			if (strncmp(p, rows[i], strlen(rows[i])) != 0)
				continue;
			r = sum_interrupt_row(p + strlen(rows[i]), &v);
			if (r < 0)
				return r;
			if (!add_u64(&sum, v))
				return -EBADMSG;
			if (i == 0)
				have_mce = true;
		}
		if (!nl)
			break;
		line = nl + 1;
	}
	if (!have_mce)
		return -ENOENT;
	*ret = sum;
	return 0;
}

int health_count_kmsg_hw_errors(const char *text, size_t size, uint64_t *ret) {
	uint64_t count = 0, next_seq = 0;
	const char *p = text, *end = text + size;

	if (!text || !ret)
		return -EINVAL;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *eol = nl ?: end;
		const char *semi, *comma;
		unsigned long long seq;
		char *e;

		if (*p == ' ' || p == eol) { /* a continuation (dictionary) line */
			p = nl ? nl + 1 : end;
			continue;
		}
		/* "PRI,SEQ,TS,FLAGS;MSG" */
		semi = memchr(p, ';', (size_t)(eol - p));
		comma = memchr(p, ',', (size_t)(eol - p));
		if (!semi || !comma || comma > semi || comma[1] < '0' || comma[1] > '9')
			return -EBADMSG;
		errno = 0;
		seq = strtoull(comma + 1, &e, 10);
		if (errno != 0 || e > semi || (*e != ',' && *e != ';'))
			return -EBADMSG;
		if (seq != next_seq)
			return -ESTALE;
		next_seq = seq + 1;
		if (memmem(semi + 1, (size_t)(eol - semi - 1), HEALTH_HW_ERROR,
		           strlen(HEALTH_HW_ERROR)))
			count++;
		p = nl ? nl + 1 : end;
	}
	*ret = count;
	return 0;
}

static int read_counter(const char *dir, const char *mc, const char *name, uint64_t *ret) {
	_cleanup_free_ char *path = NULL, *data = NULL;
	unsigned long long v;
	char sub[HEALTH_COUNTER_MAX + 32];

	snprintf(sub, sizeof(sub), "%s/%s", mc, name);
	if (path_join(dir, sub, &path) < 0)
		return -ENOMEM;
	if (read_file_full(path, HEALTH_COUNTER_MAX, &data, NULL) < 0 ||
	    safe_atou64(strstrip(data), &v) < 0)
		return -EBADMSG;
	*ret = v;
	return 0;
}

static int sum_edac_dir(DIR *d, const char *dir, uint64_t *ret) {
	struct dirent *de;
	uint64_t sum = 0;
	bool any = false;

	while ((de = readdir(d))) {
		const char *n = de->d_name;
		uint64_t ce, ue;

		/* mc<N> only: the directory also holds attributes (e.g. "power"). */
		if (strncmp(n, "mc", 2) != 0 || n[2] == '\0' ||
		    strspn(n + 2, "0123456789") != strlen(n + 2) || strlen(n) > HEALTH_COUNTER_MAX)
			continue;
		if (read_counter(dir, n, "ce_count", &ce) < 0 ||
		    read_counter(dir, n, "ue_count", &ue) < 0 || !add_u64(&sum, ce) ||
		    !add_u64(&sum, ue))
			return -EBADMSG;
		any = true;
	}
	if (!any)
		return -ENOENT;
	*ret = sum;
	return 0;
}

int health_edac_errors(const char *dir, uint64_t *ret) {
	DIR *d;
	int r;

	if (!dir || !ret)
		return -EINVAL;
	d = opendir(dir);
	if (!d)
		return -errno;
	r = sum_edac_dir(d, dir, ret);
	closedir(d);
	return r;
}

/* The kernel log's "[Hardware Error]" records since boot. */
static int count_logged(const char *root, uint64_t *ret, const char **ret_why) {
	_cleanup_free_ char *path = NULL, *kmsg = NULL;
	size_t size = 0;
	int r;

	r = path_prefix_root(root, "/dev/kmsg", &path);
	if (r < 0)
		return r;
	r = kmsg_read_all(path, &kmsg, &size);
	if (r >= 0)
		r = health_count_kmsg_hw_errors(kmsg, size, ret);
	if (r == -ESTALE)
		*ret_why = "the kernel log is not complete since boot";
	else if (r < 0)
		*ret_why = "the kernel log (/dev/kmsg) is unreadable";
	return r;
}

/* x86: the MCE, THR and DFR interrupts plus the logged records. */
static int gather_x86(const char *root, uint64_t *ret, const char **ret_why) {
	_cleanup_free_ char *dir = NULL, *path = NULL, *text = NULL;
	uint64_t irqs, logged;
	int r;

	r = path_prefix_root(root, HEALTH_MCE_DIR, &dir);
	if (r < 0)
		return r;
	if (access(dir, F_OK) < 0) {
		*ret_why = "the kernel does not handle machine checks (no " HEALTH_MCE_DIR ")";
		return -ENOENT;
	}
	r = path_prefix_root(root, "/proc/interrupts", &path);
	if (r < 0)
		return r;
	r = read_file_full(path, 1 << 20, &text, NULL);
	if (r >= 0)
		r = health_parse_interrupts(text, &irqs);
	if (r < 0) {
		*ret_why = "/proc/interrupts has no readable machine-check rows";
		return r;
	}
	r = count_logged(root, &logged, ret_why);
	if (r < 0)
		return r;
	if (!add_u64(&irqs, logged))
		return -EBADMSG;
	*ret = irqs;
	return 0;
}

/* Whether the directory path below root has an entry whose name starts with prefix
 * (NULL: any entry but "." and ".."). */
static bool has_entry(const char *root, const char *path, const char *prefix) {
	_cleanup_free_ char *dir = NULL;
	struct dirent *de;
	bool any = false;
	DIR *d;

	if (path_prefix_root(root, path, &dir) < 0)
		return false;
	d = opendir(dir);
	if (!d)
		return false;
	while (!any && (de = readdir(d)))
		any = prefix ? strncmp(de->d_name, prefix, strlen(prefix)) == 0
		             : de->d_name[0] != '.';
	closedir(d);
	return any;
}

/* arm64: no machine-check exception; synchronous external aborts, SErrors and
 * the RAS extension's records reach the kernel through firmware (APEI GHES),
 * which logs each as a "[Hardware Error]" record. Without a bound GHES device
 * nothing reports them, so the count is unknown. */
static int gather_arm64(const char *root, uint64_t *ret, const char **ret_why) {
	/* A bound GHES device is a GHES.<N> link in the platform driver's directory. */
	if (!has_entry(root, HEALTH_GHES_DIR, "GHES.")) {
		*ret_why = "no firmware error source (APEI GHES) reports synchronous external "
		           "aborts, SErrors or RAS errors to this kernel";
		return -ENOENT;
	}
	return count_logged(root, ret, ret_why);
}

int health_hw_errors(const char *root, const char *arch, uint64_t *ret, const char **ret_why) {
	const char *why = "unreadable";
	uint64_t n = 0;
	int r;

	if (!arch || !ret || !ret_why)
		return -EINVAL;
	if (streq(arch, "x86_64"))
		r = gather_x86(root, &n, &why);
	else if (streq(arch, "arm64"))
		r = gather_arm64(root, &n, &why);
	else {
		why = "no hardware error source is known for this architecture";
		r = -EOPNOTSUPP;
	}
	if (r < 0) {
		*ret_why = why;
		return r;
	}
	*ret = n;
	return 0;
}

/* Fills the hardware and EDAC error facts of f from the files below root, for f's
 * architecture; leaves the other fields alone. */
static void gather_health(const char *root, HandoffFacts *f) {
	_cleanup_free_ char *edac = NULL;
	uint64_t n;
	int r;

	if (health_hw_errors(root, f->architecture, &n, &f->mce_unknown) >= 0) {
		f->have_mce = true;
		f->mce_errors = n;
	}
	r = path_prefix_root(root, HEALTH_EDAC_MC_DIR, &edac);
	if (r >= 0)
		r = health_edac_errors(edac, &n);
	if (r >= 0) {
		f->have_edac = true;
		f->edac_errors = n;
	} else
		f->edac_unknown = r == -ENOENT ? "no EDAC driver watches the memory (no memory "
		                                 "controller in " HEALTH_EDAC_MC_DIR ")"
		                               : "an EDAC counter is unreadable";
}

/* The first entry of dir that is not "." or "..", or NULL. */
static struct dirent *first_entry(DIR *d) {
	struct dirent *de;

	while ((de = readdir(d)))
		if (de->d_name[0] != '.')
			return de;
	return NULL;
}

static bool iommu_unit_registered(const char *root) {
	return has_entry(root, HEALTH_IOMMU_DIR, NULL);
}

static bool domain_type_translates(const char *type) {
	static const char *const translating[] = { "DMA", "DMA-FQ", "unmanaged", "blocked" };

	for (size_t i = 0; i < ELEMENTSOF(translating); i++)
		if (streq(type, translating[i]))
			return true;
	return false;
}

/* Every group translates; false without any group. */
static bool iommu_groups_translate(const char *root) {
	_cleanup_free_ char *dir = NULL;
	struct dirent *de;
	bool any = false, all = true;
	DIR *d;

	if (path_prefix_root(root, HEALTH_GROUPS_DIR, &dir) < 0)
		return false;
	d = opendir(dir);
	if (!d)
		return false;
	while (all && (de = first_entry(d))) {
		_cleanup_free_ char *p = NULL, *type = NULL;

		any = true;
		all = asprintf(&p, "%s/%s/type", dir, de->d_name) >= 0 &&
		      read_file_full(p, HEALTH_COUNTER_MAX, &type, NULL) >= 0 &&
		      domain_type_translates(strstrip(type));
	}
	closedir(d);
	return any && all;
}

static bool cmdline_asks_passthrough(const char *root) {
	static const char *const words[] = { "iommu=pt", "iommu.passthrough=1",
		                             "iommu.passthrough=y", "iommu.passthrough=Y",
		                             "iommu.passthrough=on" };
	_cleanup_free_ char *path = NULL, *data = NULL;

	if (path_prefix_root(root, "/proc/cmdline", &path) < 0 ||
	    read_file_full(path, 1 << 16, &data, NULL) < 0)
		return false; /* the groups' types still tell */
	for (size_t i = 0; i < ELEMENTSOF(words); i++)
		if (cmdline_has_word(strstrip(data), words[i]))
			return true;
	return false;
}

bool health_iommu_translates(const char *root) {
	return iommu_unit_registered(root) && iommu_groups_translate(root) &&
	       !cmdline_asks_passthrough(root);
}

/* Facts the policy asks for that are cheap and honest to give at commit time;
 * everything not measured stays zero ("unknown"), which never allows fast. */
void handoff_facts_gather(const char *root, const KexecBackend *backend, HandoffFacts *f) {
	_cleanup_free_ char *path = NULL;
	unsigned long long taint;

	*f = (HandoffFacts){ .digests_at_stage = true, .architecture = UPGRADED_ARCHITECTURE };
	/* A backend whose loaded image holds the very bytes hashed at stage (kexec_load:
	 * the files are not read again, so later changes to them cannot matter) and that
	 * checks its placement against the memory map the host has now. */
	if (backend->holds_staged_bytes && backend->holds_staged_bytes()) {
		f->files_unchanged = true;
		f->memory_map_unchanged =
		        backend->memory_map_unchanged && backend->memory_map_unchanged(root) > 0;
	}
	/* DMA translated for every device: not merely an IOMMU present (iommu=pt). */
	f->iommu_enabled = health_iommu_translates(root);
	/* Hardware (x86: machine-check) and EDAC memory errors since boot, where the kernel
	 * counts them; otherwise why not. */
	gather_health(root, f);
	if (path_prefix_root(root, "/proc/sys/kernel/tainted", &path) >= 0 &&
	    read_u64_file(path, &taint) >= 0) {
		f->have_taint = true;
		f->taint = taint;
	}
}
