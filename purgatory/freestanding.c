/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * The few libc symbols a compiler may emit calls to in freestanding code,
 * and the MMIO accessors (purgatory.h), for every purgatory blob. The UART
 * is mapped as Device memory (arm64) or uncached (x86_64): a volatile access
 * is one access, in program order.
 */

#include <stddef.h>

#include "purgatory.h"

uint32_t purgatory_arch_mmio_read(uint64_t addr, unsigned width) {
	if (width == 1)
		return *(volatile uint8_t *)(uintptr_t)addr;
	return *(volatile uint32_t *)(uintptr_t)addr;
}

void purgatory_arch_mmio_write(uint64_t addr, unsigned width, uint32_t value) {
	if (width == 1)
		*(volatile uint8_t *)(uintptr_t)addr = (uint8_t)value;
	else
		*(volatile uint32_t *)(uintptr_t)addr = value;
}

void *memcpy(void *dst, const void *src, size_t n);
void *memset(void *dst, int c, size_t n);
void *memmove(void *dst, const void *src, size_t n);
int memcmp(const void *a, const void *b, size_t n);

void *memcpy(void *dst, const void *src, size_t n) {
	unsigned char *d = dst;
	const unsigned char *s = src;

	while (n--)
		*d++ = *s++;
	return dst;
}

void *memmove(void *dst, const void *src, size_t n) {
	unsigned char *d = dst;
	const unsigned char *s = src;

	if (d < s)
		while (n--)
			*d++ = *s++;
	else
		while (n--)
			d[n] = s[n];
	return dst;
}

void *memset(void *dst, int c, size_t n) {
	unsigned char *d = dst;

	while (n--)
		*d++ = (unsigned char)c;
	return dst;
}

int memcmp(const void *a, const void *b, size_t n) {
	const unsigned char *x = a, *y = b;

	for (; n; n--, x++, y++)
		if (*x != *y)
			return *x - *y;
	return 0;
}
