/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The real probe on this machine's kernel. A child process has a thread named
 * like a QEMU vCPU ("CPU 0/TCG") that busy-loops on a shared counter; the test
 * stops it with SIGSTOP and continues it with SIGCONT, stamping
 * CLOCK_MONOTONIC itself, and checks the probe's last-ran / first-ran figures
 * against what it observed. Also checks that every unavailable path (not root,
 * disabled, no BTF, unusable BTF) gives its named reason and a working,
 * degraded probe instead of a crash.
 *
 * Root only (exit 77 otherwise).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <systemd/sd-event.h>

#include "../check.h"
#include "bootlog.h"
#include "kmsg.h"
#include "macros.h"
#include "probe-loader.h"
#include "timebase.h"

/*
 * Tolerances.
 * CLOCK_TOL_NS: bpf_ktime_get_ns() and clock_gettime(CLOCK_MONOTONIC) read the
 *   same timekeeper (the fast NMI-safe copy vs the seqlocked one); they agree to
 *   well under a microsecond. 100 us leaves room and still catches a wrong clock
 *   (CLOCK_BOOTTIME, REALTIME) or a wrong field by orders of magnitude.
 * STOP_TOL_NS: the stopping thread wakes the parent's waitpid() from inside
 *   do_signal_stop() and calls schedule() right after; if it is preempted in
 *   between (a loaded, shared 2-core machine), its sleeping switch-out comes one
 *   scheduling latency later. 20 ms covers that; the typical value is printed.
 */
#define CLOCK_TOL_NS 100000ULL
#define STOP_TOL_NS  20000000ULL
#define DOWN_NS      150000000ULL /* how long the stand-in vCPU stays stopped */
#define ROUNDS       3

static int failures;
static const char *dump_dir; /* --dump DIR: write every JSON fragment there (schema test) */

struct shared {
	volatile uint64_t counter;
	volatile pid_t tid;
};

static void dump(const char *name, struct json_object *j) {
	_cleanup_free_ char *path = NULL;

	if (!dump_dir || !j)
		return;
	CHECK(asprintf(&path, "%s/%s.json", dump_dir, name) > 0, "asprintf");
	CHECK(path && json_object_to_file_ext(path, j, JSON_C_TO_STRING_PRETTY) == 0, "writing %s",
	      strna(path));
}

static uint64_t now_ns(void) {
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static double ms(int64_t ns) {
	return (double)ns / 1e6;
}

static void *busy_loop(void *arg) {
	struct shared *sh = arg;

	pthread_setname_np(pthread_self(), "CPU 0/TCG");
	sh->tid = (pid_t)syscall(SYS_gettid);
	for (;;)
		sh->counter++;
	return NULL;
}

static pid_t spawn_stand_in(struct shared *sh) {
	pid_t pid = fork();
	pthread_t t;

	if (pid != 0)
		return pid;
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	prctl(PR_SET_NAME, "qemu-stand-in");
	if (pthread_create(&t, NULL, busy_loop, sh) != 0)
		_exit(1);
	for (;;)
		pause();
}

/* Spins until the busy thread visibly advances; returns the moment it was seen. */
static uint64_t wait_until_running(struct shared *sh, uint64_t *ret_before) {
	uint64_t c = sh->counter, t0 = now_ns(), t;

	if (ret_before)
		*ret_before = t0;
	while (sh->counter == c) {
		t = now_ns();
		if (t - t0 > 5000000000ULL)
			return 0;
	}
	return now_ns();
}

static int on_probe_io(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
	Probe *p = userdata;
	int r = probe_consume(p);

	CHECK(r >= 0, "probe_consume: %s", strerror(-r));
	return 0;
}

/* Runs the event loop for about ns, so ring-buffer events are consumed the way
 * the daemon consumes them. */
static void pump(sd_event *e, uint64_t ns) {
	uint64_t end = now_ns() + ns;

	for (uint64_t t = now_ns(); t < end; t = now_ns())
		(void)sd_event_run(e, (end - t) / 1000 + 1);
}

static void test_stand_in(void) {
	_cleanup_(probe_closep) Probe *p = NULL;
	sd_event *e = NULL;
	sd_event_source *src = NULL;
	struct json_object *j = NULL;
	struct shared *sh;
	ProbeVmResult res;
	uint32_t vm;
	pid_t child;
	int r, status;

	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED) {
		CHECK(false, "mmap: %m");
		return;
	}
	child = spawn_stand_in(sh);
	CHECK(child > 0, "fork: %m");
	while (sh->tid == 0)
		usleep(1000);

	r = probe_open(NULL, &p);
	if (r != 1) {
		const char *detail = NULL;
		CHECK(r == 1, "probe unavailable as root: %s (%s)",
		      probe_unavailable_to_string(p ? probe_unavailable(p, &detail) : 0),
		      strna(detail));
		goto out_kill;
	}
	CHECK(probe_add_vm(p, "stand-in", &vm) == 0, "add vm");
	/* The real discovery path: QEMU's vCPU thread names under /proc/pid/task. */
	r = probe_track_qemu(p, vm, child);
	CHECK(r == 1, "probe_track_qemu found %d threads, expected 1", r);

	CHECK(sd_event_default(&e) >= 0, "sd_event_default");
	CHECK(probe_fd(p) >= 0, "probe_fd");
	CHECK(sd_event_add_io(e, &src, probe_fd(p), EPOLLIN, on_probe_io, p) >= 0, "add_io");
	pump(e, 50000000ULL);

	for (int round = 0; round < ROUNDS; round++) {
		uint64_t w1, ta, tb, tc, w2, td, te, last_ran, first_ran;

		/* 1. "Pause": the window opens, the thread is seen running, then stopped. */
		CHECK(probe_window_start(p, vm, &w1) == 0, "window start");
		tb = wait_until_running(sh, &ta);
		CHECK(tb != 0, "stand-in never ran");
		CHECK(kill(child, SIGSTOP) == 0, "SIGSTOP: %m");
		CHECK(waitpid(child, &status, WUNTRACED) == child && WIFSTOPPED(status), "stop");
		tc = now_ns();
		pump(e, 100000000ULL);
		CHECK(probe_result(p, vm, &res) == 0, "result");
		last_ran = res.last_ran_ns;
		CHECK(res.available && res.n_threads == 1 && res.n_running == 0,
		      "available=%d threads=%u running=%u", res.available, res.n_threads,
		      res.n_running);
		CHECK(last_ran + CLOCK_TOL_NS >= ta, "last ran %.3f ms before it was seen running",
		      ms((int64_t)(ta - last_ran)));
		CHECK(last_ran <= tc + STOP_TOL_NS, "last ran %.3f ms after the stop was confirmed",
		      ms((int64_t)(last_ran - tc)));

		/* Stopped means stopped: the figure does not move while it is. */
		pump(e, 50000000ULL);
		CHECK(probe_result(p, vm, &res) == 0 && res.last_ran_ns == last_ran,
		      "last ran moved while stopped");

		/* 2. "Resume": a new window while stopped, then SIGCONT. */
		CHECK(probe_window_start(p, vm, &w2) == 0, "window start");
		pump(e, DOWN_NS);
		td = now_ns();
		CHECK(kill(child, SIGCONT) == 0, "SIGCONT: %m");
		te = wait_until_running(sh, NULL);
		CHECK(te != 0, "stand-in never ran after SIGCONT");
		CHECK(waitpid(child, &status, WCONTINUED) == child, "continued");
		pump(e, 20000000ULL);
		CHECK(probe_result(p, vm, &res) == 0, "result");
		first_ran = res.first_ran_ns;
		CHECK(first_ran != 0, "no first run recorded");
		CHECK(first_ran + CLOCK_TOL_NS >= td, "first ran %.3f ms before SIGCONT",
		      ms((int64_t)(td - first_ran)));
		CHECK(first_ran <= te + CLOCK_TOL_NS,
		      "first ran %.3f ms after the test saw it running",
		      ms((int64_t)(first_ran - te)));
		CHECK(res.window_ns == w2, "window");

		printf("round %d: last ran %+.3f ms after seen running, %+.3f ms vs stop "
		       "confirmed; "
		       "first ran %+.3f ms after SIGCONT, %+.3f ms before seen running; "
		       "probe downtime %.3f ms, observed [%.3f, %.3f] ms\n",
		       round, ms((int64_t)(last_ran - ta)), ms((int64_t)(last_ran - tc)),
		       ms((int64_t)(first_ran - td)), ms((int64_t)(te - first_ran)),
		       ms((int64_t)(first_ran - last_ran)), ms((int64_t)(td - tc)),
		       ms((int64_t)(te - ta)));
		CHECK(first_ran - last_ran >= td - tc - STOP_TOL_NS &&
		              first_ran - last_ran <= te - ta + CLOCK_TOL_NS,
		      "downtime outside what the test observed");
	}

	/* The ring buffer reached the event loop: first-sleep and first-run events. */
	CHECK(probe_to_json(p, &j) == 0, "json");
	if (j) {
		struct json_object *ev = NULL;
		CHECK(json_object_object_get_ex(j, "events", &ev) &&
		              json_object_get_uint64(ev) >= 2 * ROUNDS,
		      "events: %s", json_object_to_json_string(ev));
		printf("%s\n", json_object_to_json_string_ext(j, JSON_C_TO_STRING_PRETTY));
		dump("probe-available", j);
		json_object_put(j);
	}

	/* The thread's death is seen (QEMU exits after a save). */
	kill(child, SIGKILL);
	waitpid(child, &status, 0);
	child = 0;
	pump(e, 50000000ULL);
	CHECK(probe_result(p, vm, &res) == 0 && res.n_exited == 1, "exited=%u", res.n_exited);

	sd_event_source_unref(src);
	sd_event_unref(e);
out_kill:
	if (child > 0) {
		kill(child, SIGKILL);
		waitpid(child, &status, 0);
	}
	munmap(sh, sizeof(*sh));
}

/* The trace_all setting (const volatile rodata, fixed at load) adds one event per
 * switch; without it and without a window, a sleeping thread produces none. */
static void test_trace_all(void) {
	pid_t self = (pid_t)syscall(SYS_gettid);
	int counts[2] = { -1, -1 };

	for (int trace = 0; trace <= 1; trace++) {
		_cleanup_(probe_closep) Probe *p = NULL;
		ProbeOptions o = { .trace_all = trace };
		ProbeVmResult res;
		uint32_t vm;
		int r;

		r = probe_open(&o, &p);
		CHECK(r == 1, "probe_open: %d", r);
		if (r != 1)
			return;
		CHECK(probe_add_vm(p, "self", &vm) == 0, "add vm");
		CHECK(probe_track_tid(p, vm, self) == 0, "track self");
		for (int i = 0; i < 20; i++)
			usleep(1000); /* each sleep: one switch out, one switch in */
		counts[trace] = probe_consume(p);
		CHECK(probe_result(p, vm, &res) == 0 && res.n_threads == 1 && res.run_ns > 0 &&
		              res.last_out_ns > 0,
		      "result");
	}
	printf("events for 20 sleeps: %d without trace_all, %d with\n", counts[0], counts[1]);
	CHECK(counts[0] == 0, "events without trace_all: %d", counts[0]);
	/* Two switches a sleep, give or take: under load a sleep whose timer fires before
	 * schedule() switches nothing, and a preemption adds two. At least one a sleep. */
	CHECK(counts[1] >= 20, "events with trace_all: %d", counts[1]);
}

/* A degraded probe must name its reason, refuse BPF calls by error and still record marks. */
static void check_degraded(Probe *p, int r, ProbeUnavailable want, const char *what) {
	struct json_object *j = NULL, *reason = NULL;
	const char *detail = NULL;
	ProbeVmResult res;
	uint32_t vm;

	CHECK(r == 0, "%s: probe_open returned %d", what, r);
	if (!p)
		return;
	CHECK(probe_unavailable(p, &detail) == want, "%s: reason %s, expected %s", what,
	      probe_unavailable_to_string(probe_unavailable(p, NULL)),
	      probe_unavailable_to_string(want));
	CHECK(detail && *detail, "%s: no detail", what);
	printf("%s: %s: %s\n", what, probe_unavailable_to_string(probe_unavailable(p, NULL)),
	       strna(detail));
	CHECK(probe_fd(p) == -EOPNOTSUPP, "%s: fd", what);
	CHECK(probe_consume(p) == -EOPNOTSUPP, "%s: consume", what);
	CHECK(probe_add_vm(p, "vm", &vm) == 0, "%s: add vm", what);
	CHECK(probe_track_tid(p, vm, getpid()) == -EOPNOTSUPP, "%s: track", what);
	CHECK(probe_mark(p, vm, PROBE_MARK_PAUSE) == 0, "%s: mark", what);
	CHECK(probe_window_start(p, vm, NULL) == 0, "%s: window", what);
	CHECK(probe_result(p, vm, &res) == 0 && !res.available && res.marks[PROBE_MARK_PAUSE] != 0,
	      "%s: result", what);
	CHECK(probe_to_json(p, &j) == 0, "%s: json", what);
	CHECK(j && json_object_object_get_ex(j, "reason", &reason) &&
	              streq(json_object_get_string(reason), probe_unavailable_to_string(want)),
	      "%s: json reason", what);
	if (want != PROBE_NO_PRIVILEGE) { /* that one runs as nobody */
		char name[64];
		snprintf(name, sizeof(name), "probe-%s", probe_unavailable_to_string(want));
		dump(name, j);
	}
	json_object_put(j);
}

static void test_unavailable(void) {
	ProbeOptions o = {};
	char bad[] = "/tmp/test-probe-btf.XXXXXX";
	Probe *p = NULL;
	pid_t pid;
	int fd, r, status;

	o.disabled = true;
	r = probe_open(&o, &p);
	check_degraded(p, r, PROBE_DISABLED, "disabled");
	p = probe_close(p);

	o = (ProbeOptions){ .btf_path = "/nonexistent/btf/vmlinux" };
	r = probe_open(&o, &p);
	check_degraded(p, r, PROBE_NO_BTF, "no BTF");
	p = probe_close(p);

	/* A file that is not BTF: the load fails by name, nothing crashes. */
	fd = mkstemp(bad);
	CHECK(fd >= 0, "mkstemp: %m");
	CHECK(write(fd, "not BTF at all\n", 15) == 15, "write");
	close(fd);
	o = (ProbeOptions){ .btf_path = bad };
	r = probe_open(&o, &p);
	check_degraded(p, r, PROBE_LOAD_FAILED, "unusable BTF");
	p = probe_close(p);
	unlink(bad);

	/* Not root: the kernel refuses bpf(). Run in a child that drops to nobody. */
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		failures = 0;
		if (setresgid(65534, 65534, 65534) < 0 || setresuid(65534, 65534, 65534) < 0)
			_exit(2);
		r = probe_open(NULL, &p);
		check_degraded(p, r, PROBE_NO_PRIVILEGE, "not root");
		probe_close(p);
		fflush(stdout);
		_exit(failures ? 1 : 0);
	}
	CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0,
	      "not-root child failed (status %d)", status);
}

/* The pure parsers on this machine's real kernel: /dev/kmsg and /proc/cpuinfo. */
static void test_this_kernel(void) {
	_cleanup_free_ char *kmsg = NULL, *cpuinfo = NULL;
	struct json_object *j = NULL;
	TimebaseCpu cpu;
	TimebaseSample s;
	size_t size = 0;
	Bootlog b;
	FILE *f;

	CHECK(kmsg_read_all("/dev/kmsg", &kmsg, &size) == 0, "read /dev/kmsg: %m");
	if (!kmsg)
		return;
	CHECK(bootlog_parse(kmsg, size, &b) == 0, "parse kmsg");
	CHECK(b.n_messages > 0, "no kernel messages");
	/* with the start of the log still in the buffer, the hand-over to init is in it */
	CHECK(b.first_seq > 0 || b.has_init, "no init marker in a complete log");
	CHECK(bootlog_to_json(&b, &j) == 0, "bootlog json");
	printf("this kernel's boot: %s\n", json_object_to_json_string(j));
	dump("bootlog", j);
	json_object_put(j);
	bootlog_done(&b);

	f = fopen("/proc/cpuinfo", "re");
	if (f) {
		size_t n = 0;
		CHECK(getdelim(&cpuinfo, &n, '\0', f) > 0, "read cpuinfo");
		fclose(f);
	}
	CHECK(timebase_cpu_parse(cpuinfo, kmsg, &cpu) == 0, "cpu parse");
	CHECK(timebase_sample_now(&s) == 0, "sample");
	printf("this machine's TSC: constant=%d nonstop=%d unstable=%d %llu kHz (%s, %u ppm); "
	       "sample skew %llu ns\n",
	       cpu.constant_tsc, cpu.nonstop_tsc, cpu.tsc_unstable, (unsigned long long)cpu.tsc_khz,
	       strna(cpu.tsc_khz_source), cpu.tsc_khz_ppm, (unsigned long long)s.skew_ns);

	/* A handoff without a kexec: two samples 1 s apart on this kernel, the second
	 * one presented as a "new kernel" whose clock started B after the first. The
	 * TSC timebase must find B within its stated uncertainty. This checks the
	 * arithmetic and the kmsg frequency against this kernel's CLOCK_MONOTONIC (both
	 * derive from the same calibration here, so it is a consistency check, not an
	 * absolute accuracy measurement). */
	{
		const uint64_t B = 300000000ULL;
		TimebaseInput in = { .cpu = cpu };
		Timebase tb;
		int64_t err;

		CHECK(timebase_sample_now(&in.old_reboot) == 0, "sample");
		usleep(1000000);
		CHECK(timebase_sample_now(&in.new_start) == 0, "sample");
		in.new_start.monotonic_ns -= in.old_reboot.monotonic_ns + B;
		if (!(cpu.constant_tsc && cpu.nonstop_tsc && !cpu.tsc_unstable && cpu.tsc_khz)) {
			/* e.g. a kernel booted with tsc=unstable: the TSC timebase is refused
			 * here as on the lab's TCG hosts, the other two are still checked. */
			printf("TSC not trusted on this machine: no TSC timebase fragment\n");
			goto distrusted;
		}
		CHECK(timebase_compute(&in, &tb) == 0, "compute");
		CHECK(tb.kind == TIMEBASE_TSC, "timebase %s", timebase_kind_to_string(tb.kind));
		err = tb.new_origin_ns - (int64_t)B;
		printf("TSC timebase over %.3f s: origin off by %+.3f us (%.1f ppm), stated +-%.3f "
		       "us\n",
		       (double)tb.tsc_gap_ns / 1e9, (double)err / 1e3,
		       (double)err * 1e6 / (double)tb.tsc_gap_ns, (double)tb.uncertainty_ns / 1e3);
		CHECK((uint64_t)(err < 0 ? -err : err) <= tb.uncertainty_ns,
		      "off by %lld ns, more than the stated %llu", (long long)err,
		      (unsigned long long)tb.uncertainty_ns);
		CHECK(timebase_to_json(&tb, &in, &j) == 0, "timebase json");
		dump("timebase-tsc", j);
		json_object_put(j);

distrusted:
		/* the same samples as the lab sees them (TSC distrusted), with a stamp */
		in.cpu.tsc_unstable = true;
		in.stamps.entry = in.old_reboot.tsc + 1000;
		CHECK(timebase_compute(&in, &tb) == 0 && tb.kind == TIMEBASE_REALTIME, "realtime");
		CHECK(timebase_to_json(&tb, &in, &j) == 0, "timebase json");
		dump("timebase-realtime", j);
		json_object_put(j);

		/* and a new kernel whose realtime lies before the reboot request */
		in.new_start.realtime_ns = in.old_reboot.realtime_ns - 10000000000ULL;
		CHECK(timebase_compute(&in, &tb) == 0 && tb.kind == TIMEBASE_NONE, "none");
		CHECK(timebase_to_json(&tb, &in, &j) == 0, "timebase json");
		dump("timebase-none", j);
		json_object_put(j);
	}
}

int main(int argc, char *argv[]) {
	if (geteuid() != 0) {
		printf("not root: skipping the probe integration test\n");
		return 77;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 3 && streq(argv[1], "--dump"))
		dump_dir = argv[2];
	else if (argc != 1) {
		fprintf(stderr, "usage: %s [--dump DIR]\n", argv[0]);
		return 2;
	}
	test_unavailable();
	test_stand_in();
	test_trace_all();
	test_this_kernel();
	if (failures) {
		fprintf(stderr, "%d check(s) failed\n", failures);
		return 1;
	}
	printf("ok\n");
	return 0;
}
