/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Following an update object (follow.h). Phases and VM results come from PropertiesChanged
 * (every phase is printed, even those gone by before the current one could be read); the
 * transfers (Update.VMTransfers) at most once a second per VM.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <systemd/sd-bus.h>

#include "follow.h"
#include "macros.h"
#include "string-util.h"
#include "terminal.h"
#include "upgrade-bus.h"
#include "upgradectl.h"

#define FOLLOW_CALL_TIMEOUT_USEC (5ULL * 1000000)
#define TRANSFER_EVERY_USEC      (1000ULL * 1000)
#define MIB                      (1024.0 * 1024.0)

struct Follow {
	sd_bus *bus;
	bool changed;
	bool transfers_changed;
	char *result;
	char *last_phase;
	char **vm_seen;   /* "name:result" already printed */
	bool daemon_gone; /* upgraded left the bus (stopped, crashed) */
	uint64_t started; /* Update.Started, CLOCK_REALTIME µs; 0: unknown */
	uint64_t last_transfers;
};

static uint64_t now_usec(clockid_t clock) {
	struct timespec ts;

	clock_gettime(clock, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

static int get_string_property(sd_bus *bus, const char *path, const char *name, char **ret) {
	_cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;

	return sd_bus_get_property_string(bus, UPGRADE_BUS_NAME, path, UPGRADE_UPDATE_IFACE, name,
	                                  &e, ret);
}

static int get_trivial_property(sd_bus *bus, const char *path, const char *name, char type,
                                void *ret) {
	_cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;

	return sd_bus_get_property_trivial(bus, UPGRADE_BUS_NAME, path, UPGRADE_UPDATE_IFACE, name,
	                                   &e, type, ret);
}

static bool strv_has(char **l, const char *s) {
	STRV_FOREACH (k, l)
		if (streq(*k, s))
			return true;
	return false;
}

/* One line per VM whose result changed (Update.VMs carried by PropertiesChanged). */
static void follow_print_vms(Follow *f, sd_bus_message *m) {
	const char *name, *strategy, *result;

	if (sd_bus_message_enter_container(m, 'v', "a(sss)") < 0)
		return;
	if (sd_bus_message_enter_container(m, 'a', "(sss)") < 0)
		return;
	while (sd_bus_message_read(m, "(sss)", &name, &strategy, &result) > 0) {
		_cleanup_free_ char *key = NULL;

		if (asprintf(&key, "%s:%s", name, result) < 0 || strv_has(f->vm_seen, key))
			continue;
		printf("      VM %s (%s): %s%s%s\n", name, strategy,
		       term_color(stdout, term_color_of_state(result)), result,
		       term_normal(stdout));
		fflush(stdout);
		(void)strv_extend(&f->vm_seen, key);
	}
	(void)sd_bus_message_exit_container(m);
	(void)sd_bus_message_exit_container(m);
}

static void follow_print(Follow *f, const char *phase, uint32_t progress) {
	if (!phase || streq_ptr(phase, f->last_phase))
		return;
	printf("%3u%%  %s\n", progress, phase);
	fflush(stdout);
	free(f->last_phase);
	f->last_phase = strdup(phase);
}

/* Prints every phase the signal carries: the daemon may pass through several
 * before we could ask for the current one. */
static int on_properties_changed(sd_bus_message *m, void *userdata, sd_bus_error *e) {
	Follow *f = userdata;
	const char *iface, *name, *phase = NULL;
	uint32_t progress = 0;
	int r;

	f->changed = true;
	if (sd_bus_message_read(m, "s", &iface) < 0 || !streq(iface, UPGRADE_UPDATE_IFACE))
		return 0;
	if (sd_bus_message_enter_container(m, 'a', "{sv}") < 0)
		return 0;
	while ((r = sd_bus_message_enter_container(m, 'e', "sv")) > 0) {
		if (sd_bus_message_read(m, "s", &name) < 0)
			return 0;
		if (streq(name, "Phase"))
			r = sd_bus_message_read(m, "v", "s", &phase);
		else if (streq(name, "Progress"))
			r = sd_bus_message_read(m, "v", "u", &progress);
		else if (streq(name, "VMTransfers")) {
			f->transfers_changed = true;
			r = sd_bus_message_skip(m, "v");
		} else if (streq(name, "VMs")) {
			/* The phase first: it changed before the VMs did. */
			follow_print(f, phase, progress);
			follow_print_vms(f, m);
			r = 0;
		} else
			r = sd_bus_message_skip(m, "v");
		if (r < 0 || sd_bus_message_exit_container(m) < 0)
			return 0;
	}
	follow_print(f, phase, progress);
	return 0;
}

static int on_finished(sd_bus_message *m, void *userdata, sd_bus_error *e) {
	Follow *f = userdata;
	const char *result;

	if (sd_bus_message_read(m, "s", &result) >= 0 && !f->result)
		f->result = strdup(result);
	f->changed = true;
	return 0;
}

/* The daemon's name lost its owner: it stopped or died while we followed. */
static int on_name_owner_changed(sd_bus_message *m, void *userdata, sd_bus_error *e) {
	Follow *f = userdata;
	const char *name, *old_owner, *new_owner;

	if (sd_bus_message_read(m, "sss", &name, &old_owner, &new_owner) >= 0 &&
	    streq(name, UPGRADE_BUS_NAME) && !*new_owner)
		f->daemon_gone = true;
	return 0;
}

static int add_follow_matches(sd_bus *bus, Follow *f) {
	int r;

	r = sd_bus_match_signal(bus, NULL, "org.freedesktop.DBus", "/org/freedesktop/DBus",
	                        "org.freedesktop.DBus", "NameOwnerChanged", on_name_owner_changed,
	                        f);
	if (r < 0)
		return r;

	r = sd_bus_add_match(
	        bus, NULL,
	        "type='signal',sender='" UPGRADE_BUS_NAME "',"
	        "interface='org.freedesktop.DBus.Properties',member='PropertiesChanged',"
	        "path_namespace='/org/upgraded/Upgrade1/update'",
	        on_properties_changed, f);
	if (r < 0)
		return r;
	return sd_bus_add_match(bus, NULL,
	                        "type='signal',sender='" UPGRADE_BUS_NAME
	                        "',interface='" UPGRADE_UPDATE_IFACE "',member='Finished'",
	                        on_finished, f);
}

/* The update's VMs property: one line per VM. */
static void print_update_vms(sd_bus *bus, const char *path) {
	_cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
	_cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
	const char *name, *strategy, *result;
	bool header = false;

	if (sd_bus_get_property(bus, UPGRADE_BUS_NAME, path, UPGRADE_UPDATE_IFACE, "VMs", &e,
	                        &reply, "a(sss)") < 0 ||
	    sd_bus_message_enter_container(reply, 'a', "(sss)") < 0)
		return;
	while (sd_bus_message_read(reply, "(sss)", &name, &strategy, &result) > 0) {
		if (!header && arg_legend)
			printf("%-24s  %-10s  %s\n", "VM", "STRATEGY", "RESULT");
		header = true;
		printf("%-24s  %-10s  %s%s%s\n", name, strategy,
		       term_color(stdout, term_color_of_state(result)), result,
		       term_normal(stdout));
	}
}

/* "12.3 MiB" */
static void format_bytes(uint64_t b, char *buf, size_t n) {
	snprintf(buf, n, "%.1f MiB", (double)b / MIB);
}

/* One line per VM moving bytes: done / total, rate, an estimate of what is left, elapsed.
 * A finished transfer is printed once more, then no more. */
static void print_transfers(Follow *f, const char *path) {
	_cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
	_cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
	const char *name, *kind;
	uint64_t done, total, rate, started, now = now_usec(CLOCK_MONOTONIC);

	if (now - f->last_transfers < TRANSFER_EVERY_USEC)
		return;
	f->transfers_changed = false;
	f->last_transfers = now;
	if (sd_bus_get_property(f->bus, UPGRADE_BUS_NAME, path, UPGRADE_UPDATE_IFACE, "VMTransfers",
	                        &e, &reply, "a(sstttt)") < 0 ||
	    sd_bus_message_enter_container(reply, 'a', "(sstttt)") < 0)
		return;
	while (sd_bus_message_read(reply, "(sstttt)", &name, &kind, &done, &total, &rate,
	                           &started) > 0) {
		_cleanup_free_ char *key = NULL;
		char d[32], t[32] = "?", left[48] = "";
		double elapsed =
		        f->started ? (double)(now_usec(CLOCK_REALTIME) - f->started) / 1e6 : 0;

		if (asprintf(&key, "%s:%s:end", name, kind) < 0 || strv_has(f->vm_seen, key))
			continue;
		if (total > 0 && done >= total)
			(void)strv_extend(&f->vm_seen, key);
		format_bytes(done, d, sizeof(d));
		if (total > 0)
			format_bytes(total, t, sizeof(t));
		if (total > done && rate > 0)
			snprintf(left, sizeof(left), ", ~%.0f s left (estimate)",
			         (double)(total - done) / (double)rate);
		if (done == 0 && rate == 0)
			/* libvirt gives no figures for this one (a restore): its size and time. */
			printf("      VM %s %s: %s, running for %.1f s [%.1f s]\n", name, kind, t,
			       (double)(now_usec(CLOCK_REALTIME) - started) / 1e6, elapsed);
		else
			printf("      VM %s %s: %s of %s at %.1f MiB/s%s [%.1f s]\n", name, kind, d,
			       t, (double)rate / MIB, left, elapsed);
	}
	fflush(stdout);
}

/* The update's current state; prints a new phase. Returns < 0 on a bus error, 1 when it
 * reached an end (*ret set), 0 otherwise. */
static int follow_poll(Follow *f, const char *path, FollowOutcome *ret) {
	_cleanup_free_ char *phase = NULL, *state = NULL, *error = NULL;
	uint32_t progress = 0;
	int r;

	r = get_string_property(f->bus, path, "Phase", &phase);
	if (r < 0)
		return r;
	(void)get_trivial_property(f->bus, path, "Progress", 'u', &progress);
	(void)get_trivial_property(f->bus, path, "Started", 't', &f->started);
	(void)get_string_property(f->bus, path, "State", &state);
	(void)get_string_property(f->bus, path, "Error", &error);
	/* Phases that went by during these calls are in the queue: print them (in order)
	 * before deciding on the polled state. */
	while ((r = sd_bus_process(f->bus, NULL)) > 0)
		;
	if (r < 0)
		return r;
	if (!f->last_phase)
		follow_print(f, phase, progress);
	if (streq_ptr(phase, "handoff-requested") || streq_ptr(state, "failed") ||
	    streq_ptr(state, "done") || streq_ptr(state, "cancelled"))
		print_update_vms(f->bus, path);
	if (streq_ptr(phase, "handoff-requested")) {
		printf("kexec requested: the system is now booting the new kernel.\n");
		*ret = FOLLOW_HANDOFF;
		return 1;
	}
	if (streq_ptr(state, "failed")) {
		fprintf(stderr, "%sUpdate failed: %s%s\n", term_color(stderr, TERM_COLOR_RED),
		        strna(error), term_normal(stderr));
		*ret = FOLLOW_FAILED;
		return 1;
	}
	if (streq_ptr(state, "cancelled")) {
		printf("Update cancelled%s%s.\n", error ? ": " : "", strempty(error));
		*ret = FOLLOW_CANCELLED;
		return 1;
	}
	if (streq_ptr(state, "done") || streq_ptr(state, "staged")) {
		*ret = FOLLOW_DONE;
		return 1;
	}
	return 0;
}

int follow_new(sd_bus *bus, Follow **ret) {
	Follow *f = calloc(1, sizeof(*f));
	int r;

	if (!f)
		return -ENOMEM;
	f->bus = bus;
	r = add_follow_matches(bus, f);
	if (r < 0) {
		free(f);
		return r;
	}
	*ret = f;
	return 0;
}

Follow *follow_free(Follow *f) {
	if (!f)
		return NULL;
	free(f->result);
	free(f->last_phase);
	strv_free(f->vm_seen);
	free(f);
	return NULL;
}

FollowOutcome follow_update(Follow *f, const char *path, uint64_t timeout_usec) {
	uint64_t deadline = timeout_usec ? now_usec(CLOCK_MONOTONIC) + timeout_usec : UINT64_MAX;
	FollowOutcome outcome;
	int r;

	/* Signals that arrived while the method call was pending come first... */
	while ((r = sd_bus_process(f->bus, NULL)) > 0)
		;
	if (r < 0)
		goto bus_error;
	/* ...then the current state, in case the match came too late for some. */
	f->changed = true;
	/* Short calls: a daemon that died is noticed within FOLLOW_CALL_TIMEOUT_USEC. */
	(void)sd_bus_set_method_call_timeout(f->bus, FOLLOW_CALL_TIMEOUT_USEC);

	for (;;) {
		uint64_t now = now_usec(CLOCK_MONOTONIC);

		if (f->daemon_gone) {
			fprintf(stderr,
			        "upgraded stopped while the update was in phase '%s'; it resolves "
			        "the update when it starts again (see upgradectl status).\n",
			        strna(f->last_phase));
			return FOLLOW_DAEMON_GONE;
		}
		if (now >= deadline) {
			fprintf(stderr,
			        "Stopped waiting after %.0f s (--wait-timeout); the update goes on "
			        "(upgradectl watch follows it again).\n",
			        (double)timeout_usec / 1e6);
			return FOLLOW_TIMEOUT;
		}
		if (f->changed) {
			f->changed = false;
			r = follow_poll(f, path, &outcome);
			if (r == -ETIMEDOUT) {
				f->changed = true; /* busy or dead: the signals will say */
				continue;
			}
			if (r < 0)
				goto bus_error;
			if (r > 0)
				return outcome;
		}
		if (f->transfers_changed)
			print_transfers(f, path);

		r = sd_bus_process(f->bus, NULL);
		if (r < 0)
			goto bus_error;
		/* follow_poll() dispatches what came during its calls: a change it saw there
		 * (the last one: the update's end), or the daemon's death (NameOwnerChanged), is
		 * not waited for again. */
		if (r > 0 || f->changed || f->daemon_gone)
			continue;
		r = sd_bus_wait(f->bus,
		                MIN(deadline - now,
		                    f->transfers_changed ? TRANSFER_EVERY_USEC : UINT64_MAX));
		if (r < 0)
			goto bus_error;
	}
bus_error:
	/* The name has no owner any more (the daemon died between two calls): say so as when
	 * its NameOwnerChanged arrives first. */
	if (r == -EHOSTUNREACH || r == -ECONNRESET || r == -ENXIO) {
		fprintf(stderr,
		        "upgraded stopped while the update was in phase '%s'; it resolves "
		        "the update when it starts again (see upgradectl status).\n",
		        strna(f->last_phase));
		return FOLLOW_DAEMON_GONE;
	}
	fprintf(stderr, "Following the update failed: %s\n", strerror(-r));
	return FOLLOW_BUS_ERROR;
}
