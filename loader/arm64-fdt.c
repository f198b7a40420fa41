/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * The arm64 device tree through libfdt (arm64-fdt.h): read, checked, asked, and
 * copied with a rewritten /chosen.
 */

#include <errno.h>
#include <libfdt.h>
#include <stdlib.h>
#include <string.h>

#include "arm64-fdt.h"
#include "fileio.h"
#include "macros.h"
#include "purgatory-abi.h"

/* Room the edits of /chosen may take beyond the input and the command line:
 * seeds, initrd and crash properties with their names and tags. */
#define REWRITE_SLACK 4096

static const char *const error_table[_ARM64_FDT_ERR_MAX] = {
	[ARM64_FDT_OK] = "valid device tree",
	[ARM64_FDT_ERR_READ] =
	        "the running kernel's device tree (/sys/firmware/fdt) cannot be read",
	[ARM64_FDT_ERR_TOO_LARGE] =
	        "the device tree is larger than the 2 MiB the boot protocol allows",
	[ARM64_FDT_ERR_INVALID] = "the device tree is malformed (libfdt's check refuses it)",
	[ARM64_FDT_ERR_RANGES] =
	        "a /memory, /reserved-memory or /memreserve/ range is malformed or too many",
	[ARM64_FDT_ERR_REWRITE] = "the device tree's /chosen node could not be rewritten",
};

const char *arm64_fdt_error_to_string(Arm64FdtError e) {
	return (unsigned)e < _ARM64_FDT_ERR_MAX ? error_table[e] : NULL;
}

Arm64FdtError arm64_fdt_check(const void *fdt, size_t size) {
	if (size < sizeof(struct fdt_header) || fdt_check_header(fdt) != 0)
		return ARM64_FDT_ERR_INVALID;
	if (fdt_totalsize(fdt) > ARM64_FDT_MAX_SIZE)
		return ARM64_FDT_ERR_TOO_LARGE;
	if (fdt_totalsize(fdt) > size || fdt_check_full(fdt, size) != 0)
		return ARM64_FDT_ERR_INVALID;
	return ARM64_FDT_OK;
}

int arm64_fdt_read(const char *root, uint8_t **ret, size_t *ret_size, Arm64FdtError *ret_error) {
	_cleanup_free_ char *data = NULL;
	Arm64FdtError e;
	size_t size;
	int r;

	r = read_root_file(root, ARM64_FDT_PATH, ARM64_FDT_MAX_SIZE, &data, &size);
	if (r < 0) {
		*ret_error = r == -EFBIG ? ARM64_FDT_ERR_TOO_LARGE : ARM64_FDT_ERR_READ;
		return r;
	}
	e = arm64_fdt_check(data, size);
	if (e != ARM64_FDT_OK) {
		*ret_error = e;
		return e == ARM64_FDT_ERR_TOO_LARGE ? -EFBIG : -EBADMSG;
	}
	*ret_error = ARM64_FDT_OK;
	*ret = (uint8_t *)TAKE_PTR(data);
	*ret_size = size;
	return 0;
}

static int cmp_range(const void *a, const void *b) {
	const struct mem_range *x = a, *y = b;
	return (x->start > y->start) - (x->start < y->start);
}

static uint64_t read_cells(const fdt32_t *p, int n) {
	uint64_t v = 0;

	for (int i = 0; i < n; i++)
		v = v << 32 | fdt32_to_cpu(p[i]);
	return v;
}

/* Appends the (address, size) pairs of node's reg, in the cells of parent. */
static Arm64FdtError add_reg(const void *fdt, int parent, int node, struct mem_range *ret,
                             size_t max, size_t *n) {
	int ac = fdt_address_cells(fdt, parent), sc = fdt_size_cells(fdt, parent), len;
	const fdt32_t *reg = fdt_getprop(fdt, node, "reg", &len);

	if (!reg)
		return ARM64_FDT_OK;
	if (ac < 1 || ac > 2 || sc < 0 || sc > 2 || len < 0 || len % (4 * (ac + sc)) != 0)
		return ARM64_FDT_ERR_RANGES;
	for (int i = 0; i < len / 4; i += ac + sc) {
		uint64_t a = read_cells(reg + i, ac), s = read_cells(reg + i + ac, sc);

		if (s == 0)
			continue;
		if (*n >= max || a + s - 1 < a)
			return ARM64_FDT_ERR_RANGES;
		ret[(*n)++] = (struct mem_range){ a, a + s - 1, 0 };
	}
	return ARM64_FDT_OK;
}

Arm64FdtError arm64_fdt_memory(const void *fdt, struct mem_range *ret, size_t max, size_t *ret_n) {
	size_t n = 0;
	int node;

	for (node = fdt_node_offset_by_prop_value(fdt, -1, "device_type", "memory", 7); node >= 0;
	     node = fdt_node_offset_by_prop_value(fdt, node, "device_type", "memory", 7)) {
		Arm64FdtError e = add_reg(fdt, fdt_parent_offset(fdt, node), node, ret, max, &n);
		if (e != ARM64_FDT_OK)
			return e;
	}
	qsort(ret, n, sizeof(*ret), cmp_range);
	*ret_n = n;
	return ARM64_FDT_OK;
}

Arm64FdtError arm64_fdt_reserved(const void *fdt, struct mem_range *ret, size_t max,
                                 size_t *ret_n) {
	int nrsv = fdt_num_mem_rsv(fdt), parent, node;
	size_t n = 0;

	for (int i = 0; i < nrsv; i++) {
		uint64_t a, s;

		if (fdt_get_mem_rsv(fdt, i, &a, &s) != 0 || (s && a + s - 1 < a) || n >= max)
			return ARM64_FDT_ERR_RANGES;
		if (s)
			ret[n++] = (struct mem_range){ a, a + s - 1, 0 };
	}
	parent = fdt_path_offset(fdt, "/reserved-memory");
	if (parent >= 0)
		fdt_for_each_subnode(node, fdt, parent) {
			Arm64FdtError e = add_reg(fdt, parent, node, ret, max, &n);
			if (e != ARM64_FDT_OK)
				return e;
		}
	qsort(ret, n, sizeof(*ret), cmp_range);
	*ret_n = n;
	return ARM64_FDT_OK;
}

/* The console behind /chosen/stdout-path ("/pl011@9000000", or an alias, with or
 * without ":115200n8"): a PL011, or a 16550 by its reg-shift. */
static void find_console(const void *fdt, struct arm64_fdt_platform *p) {
	int chosen = fdt_path_offset(fdt, "/chosen"), len, node, parent, ac;
	const char *path, *colon;
	const fdt32_t *reg, *shift;

	if (chosen < 0)
		return;
	path = fdt_getprop(fdt, chosen, "stdout-path", &len);
	if (!path || len < 2 || path[len - 1] != '\0')
		return;
	colon = strchr(path, ':');
	node = fdt_path_offset_namelen(fdt, path, colon ? (int)(colon - path) : len - 1);
	if (node < 0)
		return;
	parent = fdt_parent_offset(fdt, node);
	ac = parent >= 0 ? fdt_address_cells(fdt, parent) : -1;
	reg = fdt_getprop(fdt, node, "reg", &len);
	if (!reg || ac < 1 || ac > 2 || len < 4 * ac)
		return;
	if (fdt_node_check_compatible(fdt, node, "arm,pl011") == 0)
		p->console_kind = PURGATORY_CONSOLE_PL011;
	else if (fdt_node_check_compatible(fdt, node, "ns16550a") == 0 ||
	         fdt_node_check_compatible(fdt, node, "ns16550") == 0 ||
	         fdt_node_check_compatible(fdt, node, "snps,dw-apb-uart") == 0) {
		shift = fdt_getprop(fdt, node, "reg-shift", &len);
		p->console_kind = shift && len == 4 && fdt32_to_cpu(*shift) == 2
		                          ? PURGATORY_CONSOLE_NS16550_32
		                          : PURGATORY_CONSOLE_NS16550_8;
	} else
		return;
	p->console_base = read_cells(reg, ac);
}

void arm64_fdt_platform(const void *fdt, struct arm64_fdt_platform *ret) {
	struct arm64_fdt_platform p = { .console_kind = PURGATORY_CONSOLE_PORT,
		                        .reset_method = PURGATORY_RESET_ARCH };
	int psci = fdt_path_offset(fdt, "/psci"), len;
	const char *method = psci >= 0 ? fdt_getprop(fdt, psci, "method", &len) : NULL;

	find_console(fdt, &p);
	if (p.console_base == 0)
		p.console_kind = PURGATORY_CONSOLE_PORT;
	if (method && len == 4 && memcmp(method, "hvc", 4) == 0)
		p.reset_method = PURGATORY_RESET_PSCI_HVC;
	else if (method && len == 4 && memcmp(method, "smc", 4) == 0)
		p.reset_method = PURGATORY_RESET_PSCI_SMC;
	*ret = p;
}

/* PURGATORY_PSCI_* of a /psci node that speaks PSCI 0.2 or later. */
static uint32_t psci_conduit(const void *fdt) {
	int psci = fdt_path_offset(fdt, "/psci"), len;
	const char *method;

	if (psci < 0 || (fdt_node_check_compatible(fdt, psci, "arm,psci-0.2") != 0 &&
	                 fdt_node_check_compatible(fdt, psci, "arm,psci-1.0") != 0))
		return PURGATORY_PSCI_NONE;
	method = fdt_getprop(fdt, psci, "method", &len);
	if (method && len == 4 && memcmp(method, "hvc", 4) == 0)
		return PURGATORY_PSCI_HVC;
	if (method && len == 4 && memcmp(method, "smc", 4) == 0)
		return PURGATORY_PSCI_SMC;
	return PURGATORY_PSCI_NONE;
}

/* A property that is exactly the string want (with its NUL). */
static bool prop_is(const void *fdt, int node, const char *name, const char *want) {
	int len;
	const char *v = fdt_getprop(fdt, node, name, &len);

	return v && len == (int)strlen(want) + 1 && memcmp(v, want, (size_t)len) == 0;
}

/* The MPIDR in a cpu node's reg, by /cpus' #address-cells (1 or 2). */
static bool cpu_mpidr(const void *fdt, int node, int ac, uint64_t *ret) {
	int len;
	const fdt32_t *reg = fdt_getprop(fdt, node, "reg", &len);

	if (!reg || ac < 1 || ac > 2 || len != 4 * ac)
		return false;
	*ret = read_cells(reg, ac);
	return true;
}

void arm64_fdt_cpus(const void *fdt, struct arm64_fdt_cpus *ret) {
	struct arm64_fdt_cpus c = { .psci_conduit = psci_conduit(fdt) };
	int cpus = fdt_path_offset(fdt, "/cpus"), node, ac;

	if (c.psci_conduit == PURGATORY_PSCI_NONE || cpus < 0) {
		*ret = (struct arm64_fdt_cpus){ .psci_conduit = PURGATORY_PSCI_NONE };
		return;
	}
	ac = fdt_address_cells(fdt, cpus);
	fdt_for_each_subnode(node, fdt, cpus) {
		uint64_t mpidr;

		if (!prop_is(fdt, node, "device_type", "cpu") ||
		    !prop_is(fdt, node, "enable-method", "psci") ||
		    (fdt_getprop(fdt, node, "status", NULL) &&
		     !prop_is(fdt, node, "status", "okay")) ||
		    !cpu_mpidr(fdt, node, ac, &mpidr))
			continue;
		if (c.nr == PURGATORY_MAX_CPUS) {
			c.truncated = true;
			break;
		}
		c.mpidr[c.nr++] = mpidr;
	}
	*ret = c;
}

/* Deletes prop from node; absent is fine. */
static int delprop(void *fdt, int node, const char *name) {
	int r = fdt_delprop(fdt, node, name);
	return r == -FDT_ERR_NOTFOUND ? 0 : r;
}

/* The edits of /chosen, in a blob opened with room to spare. */
static int edit_chosen(void *fdt, const struct arm64_fdt_chosen *c) {
	int node = fdt_path_offset(fdt, "/chosen"), r;

	if (node == -FDT_ERR_NOTFOUND)
		node = fdt_add_subnode(fdt, 0, "chosen");
	if (node < 0)
		return node;
	r = fdt_setprop_string(fdt, node, "bootargs", c->bootargs);
	if (r == 0 && c->initrd_end > c->initrd_start) {
		r = fdt_setprop_u64(fdt, node, "linux,initrd-start", c->initrd_start);
		if (r == 0)
			r = fdt_setprop_u64(fdt, node, "linux,initrd-end", c->initrd_end);
	} else if (r == 0) {
		r = delprop(fdt, node, "linux,initrd-start");
		if (r == 0)
			r = delprop(fdt, node, "linux,initrd-end");
	}
	if (r == 0)
		r = fdt_setprop(fdt, node, "kaslr-seed", c->kaslr_seed, sizeof(c->kaslr_seed));
	if (r == 0)
		r = fdt_setprop(fdt, node, "rng-seed", c->rng_seed, sizeof(c->rng_seed));
	if (r == 0)
		r = delprop(fdt, node, "linux,elfcorehdr");
	if (r == 0)
		r = delprop(fdt, node, "linux,usable-memory-range");
	if (r == 0 && c->panic) {
		/* Both in the root's #address-cells/#size-cells, as the kernel reads them. */
		r = fdt_appendprop_addrrange(fdt, 0, node, "linux,elfcorehdr", c->elfcorehdr_addr,
		                             c->elfcorehdr_size);
		for (size_t i = 0; r == 0 && i < c->nr_usable; i++)
			r = fdt_appendprop_addrrange(fdt, 0, node, "linux,usable-memory-range",
			                             c->usable[i].start,
			                             c->usable[i].end - c->usable[i].start + 1);
	}
	return r;
}

Arm64FdtError arm64_fdt_rewrite(const void *fdt, const struct arm64_fdt_chosen *c, uint8_t **ret,
                                size_t *ret_size, size_t *ret_bootargs_off) {
	_cleanup_free_ uint8_t *out = NULL;
	size_t room;
	const char *v;
	int node;

	if (fdt_check_header(fdt) != 0)
		return ARM64_FDT_ERR_INVALID;
	room = (size_t)fdt_totalsize(fdt) + strlen(c->bootargs) + 1 + REWRITE_SLACK +
	       c->nr_usable * 32;
	if (fdt_totalsize(fdt) > ARM64_FDT_MAX_SIZE || room > ARM64_FDT_MAX_SIZE + REWRITE_SLACK)
		return ARM64_FDT_ERR_TOO_LARGE;
	out = calloc(1, room);
	if (!out)
		return ARM64_FDT_ERR_TOO_LARGE;
	if (fdt_open_into(fdt, out, (int)room) != 0)
		return ARM64_FDT_ERR_INVALID;
	if (edit_chosen(out, c) != 0)
		return ARM64_FDT_ERR_REWRITE;
	if (fdt_pack(out) != 0)
		return ARM64_FDT_ERR_REWRITE;
	if (fdt_totalsize(out) > ARM64_FDT_MAX_SIZE)
		return ARM64_FDT_ERR_TOO_LARGE;
	node = fdt_path_offset(out, "/chosen");
	v = node >= 0 ? fdt_getprop(out, node, "bootargs", NULL) : NULL;
	if (!v)
		return ARM64_FDT_ERR_REWRITE;
	*ret_bootargs_off = (size_t)((const uint8_t *)v - out);
	*ret_size = fdt_totalsize(out);
	*ret = TAKE_PTR(out);
	return ARM64_FDT_OK;
}
