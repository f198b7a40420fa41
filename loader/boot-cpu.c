/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "boot-cpu.h"
#include "fileio.h"
#include "macros.h"
#include "string-util.h"

#define CPUINFO_MAX (16U << 20) /* 4096 CPUs of about 1.5 KiB each, with room */

static int parse_u32(const char *s, size_t n, uint32_t *ret) {
	char buf[24], *end;
	unsigned long long v;

	if (n == 0 || n >= sizeof(buf))
		return -EBADMSG;
	memcpy(buf, s, n);
	buf[n] = '\0';
	if (buf[0] == '-' || buf[0] == '+')
		return -EBADMSG;
	errno = 0;
	v = strtoull(buf, &end, 0);
	if (errno != 0 || *end != '\0' || v > UINT32_MAX)
		return -EBADMSG;
	*ret = (uint32_t)v;
	return 0;
}

/* The value of "key : value" when line (of length n) is that key's line, else NULL. */
static const char *cpuinfo_value(const char *line, size_t n, const char *key, size_t *ret_n) {
	size_t k = strlen(key);
	const char *p = line + k, *end = line + n;

	if (n <= k || strncmp(line, key, k) != 0 || (*p != ' ' && *p != '\t' && *p != ':'))
		return NULL;
	while (p < end && (*p == ' ' || *p == '\t'))
		p++;
	if (p == end || *p++ != ':')
		return NULL;
	while (p < end && (*p == ' ' || *p == '\t'))
		p++;
	*ret_n = (size_t)(end - p);
	return p;
}

int boot_cpu_parse_cpuinfo(const char *text, uint32_t *ret) {
	bool in_cpu0 = false;
	const char *v;
	size_t vn;

	for (const char *line = text; line && *line;) {
		const char *nl = strchr(line, '\n');
		size_t n = nl ? (size_t)(nl - line) : strlen(line);
		uint32_t cpu;

		if ((v = cpuinfo_value(line, n, "processor", &vn)))
			in_cpu0 = parse_u32(v, vn, &cpu) == 0 && cpu == 0;
		else if (in_cpu0 && (v = cpuinfo_value(line, n, "apicid", &vn)))
			return parse_u32(v, vn, ret);
		line = nl ? nl + 1 : NULL;
	}
	return -EBADMSG;
}

int boot_cpu_parse_cmdline(const char *cmdline, uint32_t *ret) {
	const size_t k = strlen(BOOT_CPU_PARAM);
	bool found = false;
	uint32_t v = 0;

	/* Words split at blanks; a quoted value is not a number either way. */
	for (const char *p = cmdline; p && *p;) {
		size_t n;

		p += strspn(p, " \t\n");
		n = strcspn(p, " \t\n");
		if (n > k && strncmp(p, BOOT_CPU_PARAM, k) == 0) {
			if (parse_u32(p + k, n - k, &v) < 0)
				return -EBADMSG;
			found = true;
		}
		p += n;
	}
	if (!found)
		return -ENOENT;
	*ret = v;
	return 0;
}

int boot_cpu_read(const char *root, BootCpu *ret) {
	_cleanup_free_ char *cpuinfo = NULL, *cmdline = NULL;
	BootCpu b = {};
	size_t size;
	int r;

	*ret = b;
	r = read_root_file(root, "/proc/cpuinfo", CPUINFO_MAX, &cpuinfo, &size);
	if (r == -ENOMEM)
		return r;
	if (r < 0 || boot_cpu_parse_cpuinfo(cpuinfo, &b.running) < 0)
		return 0;
	r = read_root_file(root, "/proc/cmdline", 65536, &cmdline, &size);
	if (r == -ENOMEM)
		return r;
	if (r < 0 || boot_cpu_parse_cmdline(cmdline, &b.bsp) < 0)
		b.bsp = b.running;
	b.known = true;
	*ret = b;
	return 0;
}
