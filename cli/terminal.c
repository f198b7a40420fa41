/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * upgradectl on a terminal: colour for outcomes and a pager for long output, as systemctl
 * does (terminal.h says when each applies).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "macros.h"
#include "string-util.h"
#include "terminal.h"

#define ANSI_RED    "\x1b[0;1;31m"
#define ANSI_YELLOW "\x1b[0;1;33m"
#define ANSI_GREEN  "\x1b[0;1;32m"
#define ANSI_NORMAL "\x1b[0m"

static bool color_stdout = false, color_stderr = false;
static pid_t pager_pid = 0;

/* $SYSTEMD_COLORS: 1 forced on, 0 forced off, -1 not set (or a value it does not know). */
static int colors_forced(void) {
	static const char *const on[] = { "1", "yes", "true", "on", "16", "256", "24bit" };
	static const char *const off[] = { "0", "no", "false", "off" };
	const char *e = getenv("SYSTEMD_COLORS");

	if (!e)
		return -1;
	for (size_t i = 0; i < ELEMENTSOF(on); i++)
		if (streq(e, on[i]))
			return 1;
	for (size_t i = 0; i < ELEMENTSOF(off); i++)
		if (streq(e, off[i]))
			return 0;
	return -1;
}

static bool colors_for_fd(int fd) {
	int forced = colors_forced();
	const char *term = getenv("TERM");

	if (forced >= 0)
		return forced;
	if (getenv("NO_COLOR") || (term && streq(term, "dumb")))
		return false;
	return isatty(fd);
}

void terminal_init(void) {
	color_stdout = colors_for_fd(STDOUT_FILENO);
	color_stderr = colors_for_fd(STDERR_FILENO);
}

static bool colors_on(FILE *f) {
	return (f == stdout && color_stdout) || (f == stderr && color_stderr);
}

const char *term_color(FILE *f, TermColor color) {
	if (!colors_on(f))
		return "";
	switch (color) {
	case TERM_COLOR_RED:
		return ANSI_RED;
	case TERM_COLOR_YELLOW:
		return ANSI_YELLOW;
	case TERM_COLOR_GREEN:
		return ANSI_GREEN;
	default:
		return "";
	}
}

const char *term_normal(FILE *f) {
	return colors_on(f) ? ANSI_NORMAL : "";
}

TermColor term_color_of_state(const char *state) {
	static const struct {
		const char *word;
		TermColor color;
	} map[] = {
		{ "failed", TERM_COLOR_RED },      { "refused", TERM_COLOR_RED },
		{ "REFUSED", TERM_COLOR_RED },     { "rollback", TERM_COLOR_RED },
		{ "rolled-back", TERM_COLOR_RED }, { "cancelled", TERM_COLOR_YELLOW },
		{ "unusable", TERM_COLOR_YELLOW }, { "done", TERM_COLOR_GREEN },
		{ "success", TERM_COLOR_GREEN },   { "resumed", TERM_COLOR_GREEN },
		{ "met", TERM_COLOR_GREEN },
	};

	for (size_t i = 0; state && i < ELEMENTSOF(map); i++)
		if (streq(state, map[i].word))
			return map[i].color;
	return TERM_COLOR_NONE;
}

/* In the pager's child: the pager named by the environment, else less, more, or a copy. */
static _noreturn_ void pager_exec(const char *cmd) {
	const char *less = getenv("SYSTEMD_LESS");
	char buf[4096];
	ssize_t n;

	(void)signal(SIGPIPE, SIG_DFL);
	(void)setenv("LESS", less ?: "FRSXMK", 1);
	if (cmd)
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
	else {
		execlp("less", "less", (char *)NULL);
		execlp("more", "more", (char *)NULL);
	}
	/* No pager could be started: the output still reaches the terminal. */
	while ((n = read(STDIN_FILENO, buf, sizeof(buf))) > 0)
		if (write(STDOUT_FILENO, buf, (size_t)n) != n)
			break;
	_exit(cmd ? 127 : 0);
}

int pager_open(bool enabled) {
	const char *cmd = getenv("SYSTEMD_PAGER");
	int fd[2];
	pid_t pid;

	if (!cmd)
		cmd = getenv("PAGER");
	if (!enabled || pager_pid > 0 || !isatty(STDOUT_FILENO) ||
	    (cmd && (cmd[strspn(cmd, " \t")] == '\0' || streq(cmd, "cat"))))
		return 0;
	fflush(stdout);
	if (pipe2(fd, O_CLOEXEC) < 0)
		return -errno;
	pid = fork();
	if (pid < 0) {
		int r = -errno;

		close(fd[0]);
		close(fd[1]);
		return r;
	}
	if (pid == 0) {
		if (dup2(fd[0], STDIN_FILENO) < 0)
			_exit(127);
		pager_exec(cmd);
	}
	if (dup2(fd[1], STDOUT_FILENO) < 0) {
		int r = -errno;

		close(fd[0]);
		close(fd[1]);
		(void)kill(pid, SIGTERM);
		(void)waitpid(pid, NULL, 0);
		return r;
	}
	close(fd[0]);
	close(fd[1]);
	/* A pager quit before the end makes our writes fail, not kill us. */
	(void)signal(SIGPIPE, SIG_IGN);
	pager_pid = pid;
	return 1;
}

void pager_close(void) {
	if (pager_pid <= 0)
		return;
	fflush(stdout);
	/* The pager reads to the end of its input: stdout is its last writer. */
	(void)close(STDOUT_FILENO);
	while (waitpid(pager_pid, NULL, 0) < 0 && errno == EINTR)
		;
	pager_pid = 0;
}
