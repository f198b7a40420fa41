/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * upgradectl's verbs that move an update or a VM: stage, commit (and its dry run), watch,
 * cancel, restore-vm. --wait and watch follow the update (follow.c).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <json-c/json.h>
#include <systemd/sd-bus.h>

#include "cli-json.h"
#include "follow.h"
#include "json-util.h"
#include "macros.h"
#include "string-util.h"
#include "terminal.h"
#include "upgrade-bus.h"
#include "upgradectl.h"

/* Follows path until it ends (f: subscribed before the call that started the work; NULL:
 * now) and returns the exit code. */
static int follow_exit_code(FollowOutcome o);
static int follow_path(sd_bus *bus, const char *path, Follow *f) {
	_cleanup_(follow_freep) Follow *own = NULL;
	int r;

	if (!f) {
		r = follow_new(bus, &own);
		if (r < 0)
			return cli_fail_bus("Subscribing to progress failed", NULL, r);
		f = own;
	}
	return follow_exit_code(follow_update(f, path, arg_wait_timeout));
}

/* The exit code of a followed update. */
static int follow_exit_code(FollowOutcome o) {
	switch (o) {
	case FOLLOW_HANDOFF:
	case FOLLOW_DONE:
		return EXIT_OK;
	case FOLLOW_TIMEOUT:
		return EXIT_WAIT_TIMEOUT;
	case FOLLOW_DAEMON_GONE:
		return EXIT_NO_SERVICE;
	default:
		return EXIT_FAILED;
	}
}

/* ---- verbs ---- */

/* Stage answers once the files are read and the image loaded: up to 1.25 GiB (the kernel and
 * initrd limits, docs/dbus-api.md) from a slow disk, more than sd-bus's default 25 s. */
#define STAGE_CALL_TIMEOUT_USEC (300ULL * 1000000ULL)

int verb_stage(sd_bus *bus, char **args, unsigned n) {
	_cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
	_cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL, *reply = NULL;
	const char *id, *path;
	int r;

	if (arg_cmdline && arg_reuse_cmdline) {
		fprintf(stderr, "--cmdline= and --reuse-cmdline exclude each other.\n");
		return EXIT_USAGE;
	}
	r = sd_bus_message_new_method_call(bus, &m, UPGRADE_BUS_NAME, UPGRADE_OBJECT_PATH,
	                                   UPGRADE_MANAGER_IFACE, "Stage");
	if (r >= 0)
		r = sd_bus_message_append(m, "sss", args[0], strempty(arg_initrd),
		                          strempty(arg_cmdline));
	if (r >= 0)
		r = arg_reuse_cmdline
		            ? sd_bus_message_append(m, "a{sv}", 1, "reuse-cmdline", "b", 1)
		            : sd_bus_message_append(m, "a{sv}", 0);
	if (r < 0)
		return cli_fail_bus("Building the request failed", NULL, r);
	r = sd_bus_call(bus, m, STAGE_CALL_TIMEOUT_USEC, &e, &reply);
	if (r < 0)
		return cli_fail_bus("Stage failed", &e, r);
	r = sd_bus_message_read(reply, "so", &id, &path);
	if (r < 0)
		return cli_fail_bus("Bad reply", NULL, r);
	printf("%s\n", id);
	fflush(stdout);
	if (arg_wait)
		return follow_path(bus, path, NULL);
	return EXIT_OK;
}

static int commit_dry_run(sd_bus *bus, const char *id) {
	_cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
	_cleanup_(json_object_putp) json_object *o = NULL;
	_cleanup_free_ char *json = NULL;
	json_object *h = NULL, *allowed = NULL, *d = NULL;
	int r;

	r = cli_call_string(bus, "PlanCommit", id, &json, &e);
	if (r < 0)
		return cli_fail_bus("Planning the commit failed", &e, r);
	o = json_tokener_parse(json);
	if (!o)
		return cli_fail_bus("Bad reply", NULL, -EBADMSG);
	json_object_object_get_ex(o, "allowed", &allowed);
	if (arg_json) {
		_cleanup_(json_object_putp) json_object *snake = cli_json_snake_keys(o);

		if (!snake)
			return cli_fail_bus("Reading the reply failed", NULL, -ENOMEM);
		cli_json_print(snake, arg_json, stdout);
	} else {
		json_object_object_get_ex(o, "handoff", &h);
		json_object_object_get_ex(o, "decisions", &d);
		printf("Update %s: dry run, nothing changed.\n", strna(cli_jstr(o, "id")));
		printf("Handoff: %s\n", strna(cli_jstr(h, "mode")));
		cli_print_joined("  ", cli_jstr(h, "reason"));
		cli_print_decisions(d, "");
		printf("Commit would %s%s%s.\n",
		       term_color(stdout, json_object_get_boolean(allowed) ? TERM_COLOR_GREEN
		                                                           : TERM_COLOR_RED),
		       json_object_get_boolean(allowed) ? "proceed" : "be REFUSED",
		       term_normal(stdout));
	}
	return json_object_get_boolean(allowed) ? EXIT_OK : EXIT_REFUSED;
}

int verb_commit(sd_bus *bus, char **args, unsigned n) {
	_cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
	_cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
	_cleanup_(follow_freep) Follow *f = NULL;
	const char *path;
	int r;

	if (arg_dry_run)
		return commit_dry_run(bus, n > 0 ? args[0] : "");

	if (arg_wait) {
		r = follow_new(bus, &f);
		if (r < 0)
			return cli_fail_bus("Subscribing to progress failed", NULL, r);
	}
	r = sd_bus_call_method(bus, UPGRADE_BUS_NAME, UPGRADE_OBJECT_PATH, UPGRADE_MANAGER_IFACE,
	                       "Commit", &e, &reply, "sa{sv}", n > 0 ? args[0] : "", 0);
	if (r < 0) {
		/* The daemon left before it answered (the Commit job persists before it replies):
		 * its next start resolves whatever the commit had begun. */
		if (sd_bus_error_has_name(&e, SD_BUS_ERROR_NO_REPLY)) {
			fprintf(stderr,
			        "upgraded stopped before it answered Commit; it resolves the "
			        "update when it starts again (see upgradectl status).\n");
			return EXIT_NO_SERVICE;
		}
		return cli_fail_bus("Commit failed", &e, r);
	}
	r = sd_bus_message_read(reply, "o", &path);
	if (r < 0)
		return cli_fail_bus("Bad reply", NULL, r);
	if (!arg_wait) {
		printf("%s\n", path);
		return EXIT_OK;
	}
	return follow_path(bus, path, f);
}

/* The update to watch: ID, or the one in flight (committing, completing; else staged). */
static int watch_pick(sd_bus *bus, const char *id, char **ret_path) {
	_cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
	_cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
	const char *uid, *state, *path;
	_cleanup_free_ char *pick = NULL;
	int r, rank = 0;

	r = sd_bus_call_method(bus, UPGRADE_BUS_NAME, UPGRADE_OBJECT_PATH, UPGRADE_MANAGER_IFACE,
	                       "ListUpdates", &e, &reply, NULL);
	if (r < 0)
		return cli_fail_bus("Listing the updates failed", &e, r);
	r = sd_bus_message_enter_container(reply, 'a', "(sso)");
	if (r < 0)
		return cli_fail_bus("Bad reply", NULL, r);
	while (sd_bus_message_read(reply, "(sso)", &uid, &state, &path) > 0) {
		int k = *id ? streq(uid, id) * 3
		        : streq(state, "committing") || streq(state, "completing") ? 2
		        : streq(state, "staged")                                   ? 1
		                                                                   : 0;

		if (k > rank) {
			rank = k;
			free(pick);
			pick = strdup(path);
			if (!pick)
				return EXIT_FAILED;
		}
	}
	if (!pick) {
		fprintf(stderr, *id ? "No update '%s'.\n" : "No update in flight.%s\n", id);
		return EXIT_NOT_FOUND;
	}
	*ret_path = TAKE_PTR(pick);
	return EXIT_OK;
}

int verb_watch(sd_bus *bus, char **args, unsigned n) {
	_cleanup_(follow_freep) Follow *f = NULL;
	_cleanup_free_ char *path = NULL;
	int r;

	r = follow_new(bus, &f);
	if (r < 0)
		return cli_fail_bus("Subscribing to progress failed", NULL, r);
	r = watch_pick(bus, n > 0 ? args[0] : "", &path);
	if (r != EXIT_OK)
		return r;
	return follow_path(bus, path, f);
}

int verb_cancel(sd_bus *bus, char **args, unsigned n) {
	_cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
	int r;

	r = sd_bus_call_method(bus, UPGRADE_BUS_NAME, UPGRADE_OBJECT_PATH, UPGRADE_MANAGER_IFACE,
	                       "Cancel", &e, NULL, "s", n > 0 ? args[0] : "");
	if (r < 0)
		return cli_fail_bus("Cancel failed", &e, r);
	return EXIT_OK;
}
int verb_restore_vm(sd_bus *bus, char **args, unsigned n) {
	_cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
	int r;

	r = sd_bus_call_method(bus, UPGRADE_BUS_NAME, UPGRADE_OBJECT_PATH, UPGRADE_MANAGER_IFACE,
	                       "RestoreVM", &e, NULL, "s", args[0]);
	if (r < 0)
		return cli_fail_bus("Restoring the VM failed", &e, r);
	printf("VM '%s' restored and running.\n", args[0]);
	return EXIT_OK;
}
