/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "process-util.h"
#include "time-util.h"

#define POLL_NSEC (20 * 1000 * 1000) /* between two looks at the child */

static void child_exec(char *const argv[]) {
	int null = open("/dev/null", O_RDONLY | O_CLOEXEC);

	if (null < 0 || dup2(null, STDIN_FILENO) < 0 || dup2(STDERR_FILENO, STDOUT_FILENO) < 0)
		_exit(127);
	execv(argv[0], argv);
	_exit(127);
}

static int exit_status(int wstatus) {
	if (WIFEXITED(wstatus))
		return WEXITSTATUS(wstatus);
	return WIFSIGNALED(wstatus) ? 128 + WTERMSIG(wstatus) : 255;
}

int spawn_wait(char *const argv[], uint64_t timeout_usec, int *ret_status) {
	uint64_t deadline = now_monotonic_usec() + timeout_usec;
	const struct timespec pause = { .tv_nsec = POLL_NSEC };
	int wstatus;
	pid_t pid, r;

	if (!argv || !argv[0] || argv[0][0] != '/')
		return -EINVAL;
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0)
		child_exec(argv);

	for (;;) {
		r = waitpid(pid, &wstatus, WNOHANG);
		if (r == pid)
			break;
		if (r < 0 && errno != EINTR)
			return -errno;
		if (now_monotonic_usec() >= deadline) {
			(void)kill(pid, SIGKILL);
			while (waitpid(pid, &wstatus, 0) < 0 && errno == EINTR)
				;
			return -ETIMEDOUT;
		}
		(void)nanosleep(&pause, NULL);
	}
	if (ret_status)
		*ret_status = exit_status(wstatus);
	return 0;
}
