/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The measurement (daemon/measure/measure.c) of the VM steps: the VM library's exact moments
 * (VmEvent) mark the probe's windows, and each VM's vCPU threads are followed.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"
#include "measure.h"
#include "string-util.h"
#include "vm.h"
#include "vm-steps-internal.h"

/* QEMU's pid of a running domain, which libvirt's QEMU driver keeps in
 * /run/libvirt/qemu/<name>.pid. -ENOENT without it (another driver, tests): that VM
 * simply has no vCPU figures. The file is libvirt's, like the connection's URI: not
 * under --root (and /proc, where the probe finds the threads, is not either). */
static int qemu_pid(const char *name, pid_t *ret) {
	_cleanup_free_ char *path = NULL, *data = NULL;
	unsigned long long pid;
	int r;

	if (!name || !*name || strchr(name, '/'))
		return -EINVAL;
	if (asprintf(&path, "/run/libvirt/qemu/%s.pid", name) < 0)
		return -ENOMEM;
	r = read_file_full(path, 64, &data, NULL);
	if (r < 0)
		return r;
	if (safe_atou64(strstrip(data), &pid) < 0 || pid == 0 || pid > INT32_MAX)
		return -EBADMSG;
	*ret = (pid_t)pid;
	return 0;
}

/* Before the first pause: the probe follows each VM's vCPU threads. */
void vms_measure_track(VmWiring *w, const VmPlanEntry *e, size_t n) {
	Measure *m = w->measure;
	pid_t pid;

	if (!m)
		return;
	for (size_t i = 0; i < n; i++)
		if (qemu_pid(e[i].name, &pid) >= 0)
			(void)measure_vm_tracking(m, e[i].name, pid);
}

/* The VM library's exact moments (VmEvent), on whichever thread does the step: the
 * probe window opens right before each pause and each resume; on the new kernel the
 * restored QEMU's vCPU threads are tracked before the resume lets them run. */
void vms_on_vm_event(const VmResult *r, VmEvent e, void *userdata) {
	VmWiring *w = userdata;
	Measure *m = w->measure;
	pid_t pid;

	if (!m)
		return;
	switch (e) {
	case VM_EVENT_PAUSING:
	case VM_EVENT_RESUMING:
		(void)measure_window_start(m, r->name);
		break;
	case VM_EVENT_PAUSED:
		(void)measure_mark(m, r->name, PROBE_MARK_PAUSE);
		break;
	case VM_EVENT_RESTORED:
		(void)measure_mark(m, r->name, PROBE_MARK_RESTORE);
		if (qemu_pid(r->name, &pid) >= 0)
			(void)measure_vm_tracking(m, r->name, pid);
		break;
	case VM_EVENT_RESUMED:
		(void)measure_mark(m, r->name, PROBE_MARK_RESUME);
		break;
	default:
		break;
	}
}
