/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-journal.h>
#include <systemd/sd-login.h>
#include <systemd/sd-messages.h>

#include "macros.h"
#include "path-util.h"
#include "time-util.h"
#include "systemd-record.h"

#define SYSTEMD_DEST      "org.freedesktop.systemd1"
#define SYSTEMD_PATH      "/org/freedesktop/systemd1"
#define SYSTEMD_MANAGER   "org.freedesktop.systemd1.Manager"
#define SYSTEMD_UNIT      "org.freedesktop.systemd1.Unit"
#define JOURNAL_ENTRY_MAX 100000 /* entries looked at, however many the boot logged */

int systemd_own_unit(char **ret) {
	_cleanup_free_ char *unit = NULL;
	int r = sd_pid_get_unit(0, &unit);

	if (r < 0)
		return r;
	if (strlen(unit) <= strlen(".service") ||
	    !streq(unit + strlen(unit) - strlen(".service"), ".service"))
		return -ENODATA;
	*ret = TAKE_PTR(unit);
	return 0;
}

typedef struct Reader {
	sd_bus *bus;
	uint64_t deadline;
	sd_bus_error error; /* the first failure, for the report */
} Reader;

static int reader_get_times(Reader *rd, const char *path, UnitTimes *t) {
	int r;

	r = sd_bus_get_property_trivial(rd->bus, SYSTEMD_DEST, path, SYSTEMD_UNIT,
	                                "InactiveExitTimestampMonotonic", &rd->error, 't',
	                                &t->activating_us);
	if (r >= 0)
		r = sd_bus_get_property_trivial(rd->bus, SYSTEMD_DEST, path, SYSTEMD_UNIT,
		                                "ActiveEnterTimestampMonotonic", &rd->error, 't',
		                                &t->activated_us);
	if (r >= 0)
		r = sd_bus_get_property_strv(rd->bus, SYSTEMD_DEST, path, SYSTEMD_UNIT, "After",
		                             &rd->error, &t->after);
	return r;
}

/* UnitTimesLookup over D-Bus: GetUnit, then the unit's two timestamps and After=. Only
 * loaded units are asked for: GetUnit does not load one that is not. */
static int lookup_unit(const char *unit, UnitTimes *ret, void *userdata) {
	_cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
	sd_bus_error e = SD_BUS_ERROR_NULL;
	Reader *rd = userdata;
	UnitTimes t = {};
	const char *path;
	int r;

	if (now_monotonic_usec() > rd->deadline)
		return -ETIMEDOUT;
	r = sd_bus_call_method(rd->bus, SYSTEMD_DEST, SYSTEMD_PATH, SYSTEMD_MANAGER, "GetUnit", &e,
	                       &reply, "s", unit);
	if (r < 0) {
		bool unknown = sd_bus_error_has_name(&e, "org.freedesktop.systemd1.NoSuchUnit");

		if (!unknown && !sd_bus_error_is_set(&rd->error))
			sd_bus_error_move(&rd->error, &e);
		sd_bus_error_free(&e);
		return unknown ? -ENOENT : r;
	}
	r = sd_bus_message_read(reply, "o", &path);
	if (r < 0)
		return r;
	r = reader_get_times(rd, path, &t);
	if (r < 0) {
		unit_times_done(&t);
		return r;
	}
	*ret = t;
	return 0;
}

static int reader_open(Reader *rd, const char *bus_address) {
	int r;

	if (!bus_address)
		r = sd_bus_open_system(&rd->bus);
	else {
		r = sd_bus_new(&rd->bus);
		if (r >= 0)
			r = sd_bus_set_address(rd->bus, bus_address);
		if (r >= 0)
			r = sd_bus_set_bus_client(rd->bus, true);
		if (r >= 0)
			r = sd_bus_start(rd->bus);
	}
	if (r >= 0)
		r = sd_bus_set_method_call_timeout(rd->bus, SYSTEMD_RECORD_CALL_USEC);
	return r;
}

int systemd_unit_chain_read(const char *bus_address, const char *target, UnitChain *ret,
                            uint64_t *ret_userspace_us, char **ret_why) {
	Reader rd = { .deadline = now_monotonic_usec() + SYSTEMD_RECORD_DEADLINE_USEC,
		      .error = SD_BUS_ERROR_NULL };
	uint64_t userspace = 0;
	int r;

	r = reader_open(&rd, bus_address);
	if (r < 0) {
		if (asprintf(ret_why, "cannot connect to the bus: %s", strerror(-r)) < 0)
			*ret_why = NULL;
		goto out;
	}
	r = sd_bus_get_property_trivial(rd.bus, SYSTEMD_DEST, SYSTEMD_PATH, SYSTEMD_MANAGER,
	                                "UserspaceTimestampMonotonic", &rd.error, 't', &userspace);
	if (r >= 0)
		r = unit_chain_build(target, lookup_unit, &rd, ret);
	if (r < 0) {
		int k;

		if (r == -ENOENT)
			k = asprintf(ret_why, "systemd knows no unit %s", target);
		else if (r == -ENODATA)
			k = asprintf(ret_why, "%s never became active in this boot", target);
		else if (r == -ETIMEDOUT)
			k = asprintf(ret_why, "systemd did not answer within %llu s",
			             SYSTEMD_RECORD_DEADLINE_USEC / 1000000);
		else
			k = asprintf(ret_why, "cannot read the unit times from systemd: %s",
			             sd_bus_error_is_set(&rd.error) ? rd.error.message
			                                            : strerror(-r));
		if (k < 0)
			*ret_why = NULL;
		goto out;
	}
	*ret_userspace_us = userspace;
out:
	sd_bus_error_free(&rd.error);
	sd_bus_flush_close_unref(rd.bus);
	return r;
}

typedef struct Entries {
	UnitStopEntry *e;
	size_t n;
} Entries;

static void entries_done(Entries *l) {
	for (size_t i = 0; i < l->n; i++)
		free((char *)l->e[i].unit);
	free(l->e);
}

/* The current entry's UNIT= and kind, appended to l (entries without UNIT= are skipped). */
static int entries_add(sd_journal *j, Entries *l) {
	const void *d;
	size_t len;
	uint64_t usec;
	sd_id128_t boot;
	UnitStopEntry *e;
	bool stopped;
	int r;

	r = sd_journal_get_data(j, "MESSAGE_ID", &d, &len);
	if (r < 0)
		return r == -ENOENT ? 0 : r;
	stopped =
	        len == strlen("MESSAGE_ID=") + 32 && memcmp((const char *)d + strlen("MESSAGE_ID="),
	                                                    SD_MESSAGE_UNIT_STOPPED_STR, 32) == 0;
	r = sd_journal_get_monotonic_usec(j, &usec, &boot);
	if (r < 0)
		return r;
	r = sd_journal_get_data(j, "UNIT", &d, &len);
	if (r < 0)
		return r == -ENOENT ? 0 : r;
	e = reallocarray(l->e, l->n + 1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	l->e = e;
	e[l->n] = (UnitStopEntry){ .unit = strndup((const char *)d + strlen("UNIT="),
		                                   len - strlen("UNIT=")),
		                   .kind = stopped ? UNIT_STOP_END : UNIT_STOP_BEGIN,
		                   .monotonic_us = usec };
	if (!e[l->n].unit)
		return -ENOMEM;
	l->n++;
	return 0;
}

static int journal_open(const char *root, sd_journal **ret) {
	_cleanup_free_ char *dir = NULL;
	int r;

	if (!root || streq(root, "/"))
		return sd_journal_open(ret, SD_JOURNAL_LOCAL_ONLY | SD_JOURNAL_SYSTEM);
	r = path_join(root, "/var/log/journal", &dir);
	if (r < 0)
		return r;
	return sd_journal_open_directory(ret, dir, 0);
}

static int journal_matches(sd_journal *j, const char *boot_id) {
	_cleanup_free_ char *boot = NULL;
	int r;

	if (asprintf(&boot, "_BOOT_ID=%s", boot_id) < 0)
		return -ENOMEM;
	r = sd_journal_add_match(j, boot, 0);
	if (r >= 0)
		r = sd_journal_add_match(j, "_PID=1", 0);
	if (r >= 0)
		r = sd_journal_add_match(j, "MESSAGE_ID=" SD_MESSAGE_UNIT_STOPPING_STR, 0);
	if (r >= 0)
		r = sd_journal_add_match(j, "MESSAGE_ID=" SD_MESSAGE_UNIT_STOPPED_STR, 0);
	return r;
}

int journal_unit_stops_read(const char *root, const char *boot_id, uint64_t cut_us, UnitStops *ret,
                            char **ret_why) {
	sd_journal *j = NULL;
	Entries l = {};
	uint64_t deadline = now_monotonic_usec() + SYSTEMD_RECORD_DEADLINE_USEC;
	size_t seen = 0;
	int r;

	r = journal_open(root, &j);
	if (r < 0) {
		if (asprintf(ret_why, "cannot open the journal: %s", strerror(-r)) < 0)
			*ret_why = NULL;
		return r;
	}
	r = journal_matches(j, boot_id);
	while (r >= 0 && seen++ < JOURNAL_ENTRY_MAX) {
		r = sd_journal_next(j);
		if (r <= 0)
			break;
		if (now_monotonic_usec() > deadline) {
			r = -ETIMEDOUT;
			break;
		}
		r = entries_add(j, &l);
	}
	if (r >= 0 && l.n == 0)
		r = -ENODATA;
	if (r >= 0)
		r = unit_stops_build(l.e, l.n, cut_us, ret);
	if (r < 0 &&
	    asprintf(ret_why, "%s",
	             r == -ENODATA
	                     ? "the journal holds no unit stops of the old boot (is it persistent?)"
	             : r == -ETIMEDOUT ? "reading the journal took too long"
	                               : strerror(-r)) < 0)
		*ret_why = NULL;
	entries_done(&l);
	sd_journal_close(j);
	return r;
}
