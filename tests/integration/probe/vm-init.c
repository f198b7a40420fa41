/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * PID 1 of the throwaway initramfs in which run-on-kernel.py boots another
 * kernel (the lab's 6.1) under QEMU: mounts what the probe test needs, runs it,
 * prints its exit status on the console and powers off.
 */
#include <stdio.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/wait.h>
#include <unistd.h>

int main(void) {
	pid_t pid;
	int status = 0;

	(void)mount("proc", "/proc", "proc", 0, NULL);
	(void)mount("sysfs", "/sys", "sysfs", 0, NULL);
	(void)mount("devtmpfs", "/dev", "devtmpfs", 0, NULL);
	(void)mount("tmpfs", "/tmp", "tmpfs", 0, NULL);

	pid = fork();
	if (pid == 0) {
		execl("/test", "/test", (char *)NULL);
		_exit(127);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid)
		status = 126 << 8;
	printf("PROBE-TEST-EXIT=%d\n",
	       WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
	fflush(stdout);
	sync();
	reboot(RB_POWER_OFF);
	return 0;
}
