/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Describe latency: calls org.upgraded.Upgrade1.Manager.Describe (or METHOD, another method
 * without arguments: ListUpdates) every INTERVAL ms on one bus connection until
 * SIGINT/SIGTERM or DURATION s, then prints the count and the p50, p99 and maximum latency in
 * ms, after the method's name in lower case. A call that gets no answer within 30 s counts as
 * 30000 ms.
 * usage: bench-describe DURATION_S [INTERVAL_MS [METHOD]]   (bus: $DBUS_SYSTEM_BUS_ADDRESS)
 * Run by tests/integration/bench-describe.sh (make bench) while a commit saves VMs and while
 * libvirtd hangs, by bench-stage.sh during a Stage of the largest initrd, and by
 * test-daemon-stage-job.sh (the slowest answer during a Stage).
 */
#include <ctype.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <systemd/sd-bus.h>

#define MAX_SAMPLES 100000

static volatile sig_atomic_t stop;

static void on_signal(int sig) {
	stop = 1;
}

static double now_ms(void) {
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b) {
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

int main(int argc, char *argv[]) {
	static double samples[MAX_SAMPLES];
	sd_bus *bus = NULL;
	double end, interval;
	size_t n = 0, failed = 0;
	const char *method;
	char name[64];
	int r;

	if (argc < 2) {
		fprintf(stderr, "usage: bench-describe DURATION_S [INTERVAL_MS [METHOD]]\n");
		return 2;
	}
	end = now_ms() + atof(argv[1]) * 1e3;
	interval = argc > 2 ? atof(argv[2]) : 20;
	method = argc > 3 ? argv[3] : "Describe";
	for (r = 0; method[r] && r < (int)sizeof(name) - 1; r++)
		name[r] = (char)tolower((unsigned char)method[r]);
	name[r] = '\0';
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	r = sd_bus_open_system(&bus);
	if (r < 0) {
		fprintf(stderr, "bus: %d\n", r);
		return 1;
	}
	(void)sd_bus_set_method_call_timeout(bus, 30ULL * 1000000);
	while (!stop && now_ms() < end && n < MAX_SAMPLES) {
		sd_bus_error e = SD_BUS_ERROR_NULL;
		sd_bus_message *reply = NULL;
		double t0 = now_ms();

		r = sd_bus_call_method(bus, "org.upgraded.Upgrade1", "/org/upgraded/Upgrade1",
		                       "org.upgraded.Upgrade1.Manager", method, &e, &reply, NULL);
		samples[n++] = now_ms() - t0;
		if (r < 0)
			failed++;
		sd_bus_error_free(&e);
		sd_bus_message_unref(reply);
		usleep((useconds_t)(interval * 1e3));
	}
	sd_bus_flush_close_unref(bus);
	if (n == 0) {
		printf("no samples\n");
		return 1;
	}
	qsort(samples, n, sizeof(double), cmp_double);
	printf("%s: n=%zu failed=%zu p50=%.1f ms p99=%.1f ms max=%.1f ms\n", name, n, failed,
	       samples[n / 2], samples[(n * 99) / 100 < n ? (n * 99) / 100 : n - 1],
	       samples[n - 1]);
	return failed > 0;
}
