/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * Prints the generic timer's virtual count and frequency (CNTVCT_EL0,
 * CNTFRQ_EL0; Linux lets user space read both) as "E2E: counter COUNT FREQ".
 * The arm64 end-to-end test's guest prints it right before `kexec -e`; the host
 * timestamps the line, which puts purgatory's stamps (the same counter) on the
 * host's clock (tests/arm64_e2e.py).
 */

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>

int main(void) {
	uint64_t count, freq;

	__asm__ volatile("isb; mrs %0, cntvct_el0" : "=r"(count));
	__asm__ volatile("mrs %0, cntfrq_el0" : "=r"(freq));
	printf("E2E: counter %016" PRIx64 " %08" PRIx64 "\n", count, freq);
	return fflush(stdout) == 0 ? 0 : 1;
}
