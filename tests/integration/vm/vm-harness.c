/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Helpers of the VM integration tests and the keep-ram benchmark (vm-harness.h). */

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <libvirt/libvirt-qemu.h>
#include <libvirt/libvirt.h>

#include "vm-harness.h"

#define LINUX_KEY_V 47

double harness_now(void) {
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int64_t harness_read_word(virConnectPtr conn, const char *name, unsigned long addr) {
	virDomainPtr d = virDomainLookupByName(conn, name);
	char cmd[64], *out = NULL, *colon;
	int64_t v = -1;

	if (!d)
		return -1;
	snprintf(cmd, sizeof(cmd), "xp /1wx %#lx", addr);
	if (virDomainQemuMonitorCommand(d, cmd, &out, VIR_DOMAIN_QEMU_MONITOR_COMMAND_HMP) == 0 &&
	    (colon = strchr(out, ':')))
		v = (int64_t)strtoul(colon + 1, NULL, 16);
	free(out);
	virDomainFree(d);
	return v;
}

int harness_state(virConnectPtr conn, const char *name) {
	virDomainPtr d = virDomainLookupByName(conn, name);
	int state = -1, reason;

	if (d) {
		virDomainGetState(d, &state, &reason, 0);
		virDomainFree(d);
	}
	return state;
}

int harness_has_image(virConnectPtr conn, const char *name) {
	virDomainPtr d = virDomainLookupByName(conn, name);
	int r = -1;

	if (d) {
		r = virDomainHasManagedSaveImage(d, 0);
		virDomainFree(d);
	}
	return r;
}

int harness_define_and_start(virConnectPtr conn, const char *image, const char *name, unsigned mib,
                             bool shared) {
	char img[512], xml[2048], cmd[1100];
	virDomainPtr d;
	int r;

	snprintf(img, sizeof(img), "%s/%s.img", getenv("LIBVIRT_TEST_WORKDIR"), name);
	snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", image, img);
	if (system(cmd) != 0)
		return -1;
	snprintf(xml, sizeof(xml),
	         "<domain type='qemu'><name>%s</name><memory unit='MiB'>%u</memory>%s"
	         "<vcpu>1</vcpu><os><type arch='x86_64' machine='pc'>hvm</type>"
	         "<boot dev='hd'/></os><on_poweroff>destroy</on_poweroff>"
	         "<on_reboot>destroy</on_reboot><on_crash>destroy</on_crash><devices>"
	         "<emulator>/usr/bin/qemu-system-x86_64</emulator>"
	         "<disk type='file' device='disk'><driver name='qemu' type='raw'/>"
	         "<source file='%s'/><target dev='hda' bus='ide'/></disk>"
	         "<controller type='usb' model='none'/><memballoon model='none'/>"
	         "</devices></domain>",
	         name, mib,
	         shared ? "<memoryBacking><source type='file'/><access mode='shared'/>"
	                  "</memoryBacking>"
	                : "",
	         img);
	d = virDomainDefineXML(conn, xml);
	if (!d)
		return -1;
	r = virDomainCreate(d);
	virDomainFree(d);
	return r;
}

static int cmp_double(const void *a, const void *b) {
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

double harness_median(double *v, int n) {
	qsort(v, (size_t)n, sizeof(double), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int64_t harness_mg_wait(virConnectPtr conn, const char *name, unsigned long addr, int64_t want,
                        bool at_least, double timeout) {
	double end = harness_now() + timeout;
	int64_t v;

	do {
		v = harness_read_word(conn, name, addr);
		if (at_least ? v >= want : v == want)
			return v;
		usleep(250000);
	} while (harness_now() < end);
	return v;
}

bool harness_mg_verify(virConnectPtr conn, const char *name, const char *phase) {
	virDomainPtr d = virDomainLookupByName(conn, name);
	unsigned int key = LINUX_KEY_V;
	int64_t n = harness_read_word(conn, name, MG_VERIFIES), done;
	double t0 = harness_now();
	bool ok;

	if (!d || n < 0 || virDomainSendKey(d, VIR_KEYCODE_SET_LINUX, 100, &key, 1, 0) < 0) {
		if (d)
			virDomainFree(d);
		return false;
	}
	virDomainFree(d);
	done = harness_mg_wait(conn, name, MG_VERIFIES, n + 1, true, 300);
	ok = done >= n + 1 && harness_read_word(conn, name, MG_LAST) == MG_VERIFY_OK;
	printf("  %s: %s verified %" PRId64 " MiB: %s (%.1f s)\n", phase, name,
	       harness_read_word(conn, name, MG_MIB), ok ? "ok" : "BAD", harness_now() - t0);
	return ok;
}
