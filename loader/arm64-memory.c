/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The arm64 machine's memory from /proc/iomem, and the crash kernel's ELF core
 * header (arm64-memory.h). */

#include <elf.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arm64-memory.h"
#include "fileio.h"
#include "macros.h"
#include "string-util.h"

#define ARM64_MAX_CPUS 4096
#define NAME_MAX_LEN   64

static int add(struct mem_range *r, size_t max, size_t *n, uint64_t a, uint64_t b) {
	if (*n >= max)
		return -E2BIG;
	r[(*n)++] = (struct mem_range){ a, b, 0 };
	return 0;
}

int arm64_memory_parse_iomem(const char *data, size_t size, struct arm64_memory *m) {
	_cleanup_free_ char *copy = strndup(data, size);
	char *line, *save = NULL;
	bool any = false, hidden = true;

	if (!copy)
		return -ENOMEM;
	memset(m, 0, sizeof(*m));
	for (line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		unsigned long long a, b;
		char name[NAME_MAX_LEN];
		int r = 0;

		if (sscanf(line, " %llx-%llx : %63[^\n]", &a, &b, name) != 3)
			continue;
		any = true;
		if (a != 0 || b != 0)
			hidden = false;
		if (b < a || (a == 0 && b == 0))
			continue;
		if (line[0] != ' ' && streq(name, IOMEM_SYSTEM_RAM))
			r = add(m->ram, ARM64_MEMORY_MAX_RAM, &m->nr_ram, a, b);
		else if (streq(name, IOMEM_RESERVED))
			r = add(m->reserved, ARM64_MEMORY_MAX_RESERVED, &m->nr_reserved, a, b);
		else if (streq(name, IOMEM_CRASH))
			r = add(m->crash, ARM64_MEMORY_MAX_CRASH, &m->nr_crash, a, b);
		if (r < 0)
			return r;
	}
	return any && hidden ? -EPERM : 0;
}

int arm64_memory_read_iomem(const char *root, struct arm64_memory *m) {
	_cleanup_free_ char *data = NULL;
	size_t size;
	int r;

	r = read_root_file(root, "/proc/iomem", IOMEM_MAX_SIZE, &data, &size);
	if (r == -ENOENT) {
		memset(m, 0, sizeof(*m));
		return 0;
	}
	if (r < 0)
		return r;
	return arm64_memory_parse_iomem(data, size, m);
}

void arm64_memory_digest(const struct arm64_memory *m, uint8_t ret[static SHA256_DIGEST_SIZE]) {
	const struct mem_range *lists[] = { m->ram, m->reserved, m->crash };
	const size_t counts[] = { m->nr_ram, m->nr_reserved, m->nr_crash };
	struct sha256_ctx c;

	sha256_init(&c);
	for (size_t k = 0; k < ELEMENTSOF(lists); k++) {
		sha256_update(&c, &counts[k], sizeof(counts[k]));
		for (size_t i = 0; i < counts[k]; i++) {
			sha256_update(&c, &lists[k][i].start, sizeof(lists[k][i].start));
			sha256_update(&c, &lists[k][i].end, sizeof(lists[k][i].end));
		}
	}
	sha256_final(&c, ret);
}

/* One "ADDR SIZE" note: /sys/kernel/vmcoreinfo ("%llx %x"), or a CPU's crash_notes
 * (hex address) with crash_notes_size (decimal). false when absent or malformed. */
static bool read_note(const char *root, const char *path, const char *size_path, uint64_t *addr,
                      uint64_t *size) {
	_cleanup_free_ char *d = NULL, *ds = NULL;
	unsigned long long a, s;
	size_t n;

	if (read_root_file(root, path, 256, &d, &n) < 0)
		return false;
	if (!size_path)
		return sscanf(d, "%llx %llx", &a, &s) == 2 && a && s &&
		       (*addr = a, *size = s, true);
	if (read_root_file(root, size_path, 256, &ds, &n) < 0)
		return false;
	return sscanf(d, "%llx", &a) == 1 && sscanf(ds, "%llu", &s) == 1 && a && s &&
	       (*addr = a, *size = s, true);
}

/* The notes' (address, size) pairs into notes[0..max): vmcoreinfo first, then CPU 0, 1,
 * ... up to the first CPU without crash notes. */
static size_t read_notes(const char *root, uint64_t (*notes)[2], size_t max) {
	size_t n = 0;

	if (read_note(root, "/sys/kernel/vmcoreinfo", NULL, &notes[n][0], &notes[n][1]))
		n++;
	for (unsigned cpu = 0; cpu < ARM64_MAX_CPUS && n < max; cpu++) {
		char p[96], ps[96];

		snprintf(p, sizeof(p), "/sys/devices/system/cpu/cpu%u/crash_notes", cpu);
		snprintf(ps, sizeof(ps), "/sys/devices/system/cpu/cpu%u/crash_notes_size", cpu);
		if (!read_note(root, p, ps, &notes[n][0], &notes[n][1]))
			break;
		n++;
	}
	return n;
}

/* The System RAM of m minus its crash reservation, into out (at most max ranges). */
static int ram_outside_crash(const struct arm64_memory *m, struct mem_range *out, size_t max,
                             size_t *ret_n) {
	size_t n = 0;

	for (size_t i = 0; i < m->nr_ram; i++) {
		uint64_t a = m->ram[i].start, b = m->ram[i].end;

		/* Cut every crash range out of [a, b]; the ranges are few and sorted. */
		for (size_t k = 0; k < m->nr_crash && a <= b; k++) {
			const struct mem_range *c = &m->crash[k];

			if (c->end < a || c->start > b)
				continue;
			if (c->start > a && add(out, max, &n, a, c->start - 1) < 0)
				return -E2BIG;
			if (c->end >= b)
				a = b + 1;
			else
				a = c->end + 1;
		}
		if (a <= b && add(out, max, &n, a, b) < 0)
			return -E2BIG;
	}
	*ret_n = n;
	return 0;
}

int arm64_memory_elfcorehdr(const char *root, const struct arm64_memory *m, uint8_t **ret,
                            size_t *ret_size) {
	struct mem_range loads[ARM64_MEMORY_MAX_RAM + ARM64_MEMORY_MAX_CRASH];
	_cleanup_free_ uint64_t(*notes)[2] = NULL;
	size_t nr_loads, nr_notes, size;
	Elf64_Ehdr *eh;
	Elf64_Phdr *ph;
	uint8_t *buf;
	int r;

	r = ram_outside_crash(m, loads, ELEMENTSOF(loads), &nr_loads);
	if (r < 0)
		return r;
	notes = calloc(ARM64_MAX_CPUS + 1, sizeof(*notes));
	if (!notes)
		return -ENOMEM;
	nr_notes = read_notes(root, notes, ARM64_MAX_CPUS + 1);
	size = sizeof(Elf64_Ehdr) + (nr_notes + nr_loads) * sizeof(Elf64_Phdr);
	buf = calloc(1, size);
	if (!buf)
		return -ENOMEM;
	eh = (Elf64_Ehdr *)buf;
	memcpy(eh->e_ident, ELFMAG, SELFMAG);
	eh->e_ident[EI_CLASS] = ELFCLASS64;
	eh->e_ident[EI_DATA] = ELFDATA2LSB;
	eh->e_ident[EI_VERSION] = EV_CURRENT;
	eh->e_ident[EI_OSABI] = ELFOSABI_NONE;
	eh->e_type = ET_CORE;
	eh->e_machine = EM_AARCH64;
	eh->e_version = EV_CURRENT;
	eh->e_phoff = sizeof(Elf64_Ehdr);
	eh->e_ehsize = sizeof(Elf64_Ehdr);
	eh->e_phentsize = sizeof(Elf64_Phdr);
	eh->e_phnum = (Elf64_Half)(nr_notes + nr_loads);
	ph = (Elf64_Phdr *)(buf + sizeof(Elf64_Ehdr));
	for (size_t i = 0; i < nr_notes; i++, ph++)
		*ph = (Elf64_Phdr){ .p_type = PT_NOTE,
			            .p_offset = notes[i][0],
			            .p_paddr = notes[i][0],
			            .p_filesz = notes[i][1],
			            .p_memsz = notes[i][1] };
	for (size_t i = 0; i < nr_loads; i++, ph++) {
		uint64_t len = loads[i].end - loads[i].start + 1;

		*ph = (Elf64_Phdr){ .p_type = PT_LOAD,
			            .p_flags = PF_R | PF_W | PF_X,
			            .p_offset = loads[i].start,
			            .p_paddr = loads[i].start,
			            .p_filesz = len,
			            .p_memsz = len,
			            .p_align = 0 };
	}
	*ret = buf;
	*ret_size = size;
	return 0;
}
