/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * upgradectl's verbs that show the service: status, list, describe, report, show; and the
 * printing of the policy's decisions that commit --dry-run shares.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <json-c/json.h>
#include <systemd/sd-bus.h>

#include "cli-json.h"
#include "json-util.h"
#include "macros.h"
#include "policy.h"
#include "report-html.h"
#include "report-print.h"
#include "report-schema.h"
#include "string-util.h"
#include "terminal.h"
#include "upgrade-bus.h"
#include "upgradectl.h"

/* The handoff reasons are stored as one "; "-joined line: one per line here. */
void cli_print_joined(const char *indent, const char *text) {
	const char *p = text;

	if (!text)
		return;
	while (*p) {
		size_t n = strcspn(p, ";");

		printf("%s%.*s\n", indent, (int)n, p);
		p += n;
		while (*p == ';' || *p == ' ')
			p++;
	}
}

/* word padded to width, in the colour of its outcome on a terminal. */
static void print_state(const char *word, int width) {
	TermColor c = term_color_of_state(word);

	printf("%s%-*s%s", term_color(stdout, c), width, strna(word),
	       c != TERM_COLOR_NONE ? term_normal(stdout) : "");
}

/* The VM decisions and the preconditions verdict (Update.decisions / PlanCommit). */
void cli_print_decisions(json_object *d, const char *indent) {
	json_object *vms = NULL, *verdict = NULL, *reasons = NULL, *allowed = NULL;

	if (!d)
		return;
	vms = cli_jarray(d, "vms");
	if (cli_jarray_length(vms) > 0) {
		printf("%sVMs (%s):\n", indent, strna(cli_jstr(d, "libvirt_uri")));
		for (size_t i = 0; i < cli_jarray_length(vms); i++) {
			json_object *v = json_object_array_get_idx(vms, i), *refused = NULL;

			json_object_object_get_ex(v, "refused", &refused);
			printf("%s  %-24s %-10s %-9s", indent, strna(cli_jstr(v, "name")),
			       strna(cli_jstr(v, "strategy")), strna(cli_jstr(v, "state")));
			if (json_object_get_boolean(refused)) {
				fputc(' ', stdout);
				print_state("REFUSED", 0);
			}
			fputc('\n', stdout);
			if (json_object_object_get_ex(v, "reasons", &reasons)) {
				_cleanup_free_ char *p = NULL;

				if (asprintf(&p, "%s    ", indent) >= 0)
					(void)policy_reasons_format_json(reasons, p, stdout);
			}
		}
	} else
		printf("%sVMs: none\n", indent);
	if (json_object_object_get_ex(d, "verdict", &verdict)) {
		json_object_object_get_ex(verdict, "allowed", &allowed);
		printf("%sPreconditions: %s%s%s\n", indent,
		       term_color(stdout, json_object_get_boolean(allowed) ? TERM_COLOR_GREEN
		                                                           : TERM_COLOR_RED),
		       json_object_get_boolean(allowed) ? "met" : "NOT met, the commit is refused",
		       term_normal(stdout));
		if (json_object_object_get_ex(verdict, "reasons", &reasons)) {
			_cleanup_free_ char *p = NULL;

			if (asprintf(&p, "%s  ", indent) >= 0)
				(void)policy_reasons_format_json(reasons, p, stdout);
		}
	}
}

/* One update's kernel version and when its commit was requested, for list ("-": never
 * committed, or the bus does not say). */
static void list_row_facts(sd_bus *bus, const char *path, char **ret_version,
                           char when[static 32]) {
	uint64_t started = 0;
	time_t t;
	struct tm tm;

	*ret_version = NULL;
	(void)sd_bus_get_property_string(bus, UPGRADE_BUS_NAME, path, UPGRADE_UPDATE_IFACE,
	                                 "KernelVersion", NULL, ret_version);
	(void)sd_bus_get_property_trivial(bus, UPGRADE_BUS_NAME, path, UPGRADE_UPDATE_IFACE,
	                                  "Started", NULL, 't', &started);
	t = (time_t)(started / 1000000);
	if (started == 0 || !localtime_r(&t, &tm) ||
	    strftime(when, 32, "%Y-%m-%d %H:%M:%S", &tm) == 0)
		snprintf(when, 32, "-");
}

int verb_list(sd_bus *bus, char **args, unsigned n) {
	_cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
	_cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
	_cleanup_(json_object_putp) json_object *a = json_object_new_array();
	const char *id, *state, *path;
	unsigned count = 0;
	int r;

	r = sd_bus_call_method(bus, UPGRADE_BUS_NAME, UPGRADE_OBJECT_PATH, UPGRADE_MANAGER_IFACE,
	                       "ListUpdates", &e, &reply, NULL);
	if (r < 0)
		return cli_fail_bus("ListUpdates failed", &e, r);
	r = sd_bus_message_enter_container(reply, 'a', "(sso)");
	if (r < 0)
		return cli_fail_bus("Bad reply", NULL, r);
	if (!arg_json && arg_legend)
		printf("%-16s  %-10s  %-19s  %s\n", "ID", "STATE", "COMMITTED", "KERNEL");
	while ((r = sd_bus_message_read(reply, "(sso)", &id, &state, &path)) > 0) {
		if (arg_json) {
			json_object *o = json_object_new_object();

			json_object_object_add(o, "id", json_object_new_string(id));
			json_object_object_add(o, "state", json_object_new_string(state));
			json_object_object_add(o, "object", json_object_new_string(path));
			json_object_array_add(a, o);
		} else {
			_cleanup_free_ char *version = NULL;
			char when[32];

			list_row_facts(bus, path, &version, when);
			printf("%-16s  ", id);
			print_state(state, 10);
			printf("  %-19s  %s\n", when, version && *version ? version : "-");
		}
		count++;
	}
	if (r < 0)
		return cli_fail_bus("Bad reply", NULL, r);
	if (arg_json)
		cli_json_print(a, arg_json, stdout);
	else if (arg_legend)
		printf("\n%u update(s).\n", count);
	return EXIT_OK;
}

/* Describe() with its keys in snake_case (the daemon names them as its D-Bus properties):
 * the one form upgradectl reads and prints. An exit code on failure. */
static int describe_snake(sd_bus *bus, json_object **ret) {
	_cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
	_cleanup_(json_object_putp) json_object *o = NULL;
	_cleanup_free_ char *json = NULL;
	int r;

	r = cli_call_string(bus, "Describe", NULL, &json, &e);
	if (r < 0)
		return cli_fail_bus("Describe failed", &e, r);
	o = json_tokener_parse(json);
	if (!o)
		return cli_fail_bus("Bad reply", NULL, -EBADMSG);
	*ret = cli_json_snake_keys(o);
	return *ret ? EXIT_OK : cli_fail_bus("Reading the reply failed", NULL, -ENOMEM);
}

int verb_describe(sd_bus *bus, char **args, unsigned n) {
	_cleanup_(json_object_putp) json_object *o = NULL;
	int r;

	r = describe_snake(bus, &o);
	if (r != EXIT_OK)
		return r;
	cli_json_print(o, arg_json ?: CLI_JSON_PRETTY, stdout);
	return EXIT_OK;
}

/* The newest update's reasons and results: why it is (or was) handed over so. */
static void print_newest_update(json_object *u) {
	json_object *d = NULL, *vms = NULL;

	printf("\nUpdate %s:\n", strna(cli_jstr(u, "id")));
	if (cli_jstr(u, "handoff")) {
		printf("  Handoff: %s\n", cli_jstr(u, "handoff"));
		cli_print_joined("    ", cli_jstr(u, "handoff_reason"));
	}
	if (cli_jstr(u, "error"))
		printf("  %sError: %s%s\n", term_color(stdout, TERM_COLOR_RED),
		       cli_jstr(u, "error"), term_normal(stdout));
	if (json_object_object_get_ex(u, "decisions", &d) && d)
		cli_print_decisions(d, "  ");
	vms = cli_jarray(u, "vms");
	if (!vms)
		return;
	printf("  VM results:\n");
	for (size_t i = 0; i < cli_jarray_length(vms); i++) {
		json_object *v = json_object_array_get_idx(vms, i);

		printf("    %-24s %-10s ", strna(cli_jstr(v, "name")),
		       strna(cli_jstr(v, "strategy")));
		print_state(cli_jstr(v, "result"), 12);
		printf(" %s\n", strempty(cli_jstr(v, "error")));
	}
}

int verb_status(sd_bus *bus, char **args, unsigned n) {
	_cleanup_(json_object_putp) json_object *o = NULL;
	json_object *b = NULL, *ups = NULL, *pl;
	bool usable;
	int r;

	r = describe_snake(bus, &o);
	if (r != EXIT_OK)
		return r;
	if (arg_json) {
		cli_json_print(o, arg_json, stdout);
		return EXIT_OK;
	}
	b = cli_jobj(o, "backend");
	usable = json_object_get_boolean(cli_jobj(b, "usable"));

	printf("         State: %s\n", strna(cli_jstr(o, "state")));
	printf("Running kernel: %s\n", strna(cli_jstr(o, "running_kernel")));
	printf(" Staged kernel: %s\n",
	       *strempty(cli_jstr(o, "staged_kernel")) ? cli_jstr(o, "staged_kernel") : "-");
	printf("       Backend: %s%s%s%s%s%s%s\n", strna(cli_jstr(b, "name")),
	       term_color(stdout, usable ? TERM_COLOR_NONE : TERM_COLOR_YELLOW),
	       usable ? "" : " (unusable: ", usable ? "" : strna(cli_jstr(b, "reason")),
	       usable ? "" : ")", usable ? "" : term_normal(stdout),
	       json_object_get_boolean(cli_jobj(b, "test_only")) ? " [TEST ONLY]" : "");
	if (usable && json_object_get_boolean(cli_jobj(b, "fallback")))
		printf("                (fallback: %s)\n", strna(cli_jstr(b, "reason")));
	pl = cli_jobj(o, "platform");
	printf("      Platform: %s, Secure Boot %s, lockdown %s\n", strna(cli_jstr(pl, "firmware")),
	       strna(cli_jstr(pl, "secure_boot")), strna(cli_jstr(pl, "lockdown")));
	printf("   Last report: %s\n",
	       *strempty(cli_jstr(o, "last_report")) ? cli_jstr(o, "last_report") : "-");

	ups = cli_jarray(o, "updates");
	if (cli_jarray_length(ups) == 0)
		return EXIT_OK;
	fputc('\n', stdout);
	if (arg_legend)
		printf("%-16s  %-10s  %-17s  %-24s  %s\n", "ID", "STATE", "PHASE", "VERSION",
		       "KERNEL");
	for (size_t i = 0; i < cli_jarray_length(ups); i++) {
		json_object *u = json_object_array_get_idx(ups, i);

		printf("%-16s  ", strna(cli_jstr(u, "id")));
		print_state(cli_jstr(u, "state"), 10);
		printf("  %-17s  %-24s  %s\n", strna(cli_jstr(u, "phase")),
		       strna(cli_jstr(u, "kernel_version")),
		       strna(cli_jstr(cli_jobj(u, "kernel"), "path")));
	}
	print_newest_update(json_object_array_get_idx(ups, cli_jarray_length(ups) - 1));
	return EXIT_OK;
}

int verb_report(sd_bus *bus, char **args, unsigned n) {
	_cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
	_cleanup_(json_object_putp) json_object *o = NULL;
	_cleanup_free_ char *json = NULL;
	int r;

	r = cli_call_string(bus, "GetReport", n > 0 ? args[0] : "", &json, &e);
	if (r < 0)
		return cli_fail_bus("GetReport failed", &e, r);
	o = json_tokener_parse(json);
	if (!o)
		return cli_fail_bus("Bad report", NULL, -EBADMSG);
	/* Its keys are the schema's (snake_case already), and left as they are. */
	if (arg_json) {
		cli_json_print(o, arg_json, stdout);
		return EXIT_OK;
	}
	/* People read schema 2: a schema-1 report (written before it) is mapped onto it. */
	r = report_upgrade(o, NULL);
	if (r == -EPROTONOSUPPORT)
		return cli_fail_bus("Report of a schema this upgradectl does not know (newer?); "
		                    "--json prints it",
		                    NULL, r);
	if (r < 0)
		return cli_fail_bus("Bad report", NULL, r);
	if (arg_html) {
		r = report_html_write(o, arg_output);
		return r < 0 ? cli_fail_bus("Cannot write the HTML report", NULL, r) : EXIT_OK;
	}

	report_print(o, stdout);
	return EXIT_OK;
}

static int print_property(sd_bus_message *m, const char *name) {
	const char *contents, *s;
	char type;
	uint32_t u;
	int b, r;

	r = sd_bus_message_peek_type(m, &type, &contents);
	if (r < 0)
		return r;
	r = sd_bus_message_enter_container(m, 'v', contents);
	if (r < 0)
		return r;
	if (arg_value)
		name = NULL;
	if (streq(contents, "s") || streq(contents, "o")) {
		r = sd_bus_message_read_basic(m, contents[0], &s);
		if (r >= 0)
			printf("%s%s%s\n", name ?: "", name ? "=" : "", s);
	} else if (streq(contents, "u")) {
		r = sd_bus_message_read_basic(m, 'u', &u);
		if (r >= 0)
			printf("%s%s%u\n", name ?: "", name ? "=" : "", u);
	} else if (streq(contents, "b")) {
		r = sd_bus_message_read_basic(m, 'b', &b);
		if (r >= 0)
			printf("%s%s%s\n", name ?: "", name ? "=" : "", b ? "yes" : "no");
	} else
		r = sd_bus_message_skip(m, contents);
	if (r < 0)
		return r;
	return sd_bus_message_exit_container(m);
}

static bool wanted(const char *name) {
	if (!arg_properties)
		return true;
	STRV_FOREACH (p, arg_properties)
		if (streq(*p, name))
			return true;
	return false;
}

int verb_show(sd_bus *bus, char **args, unsigned n) {
	_cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
	_cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
	_cleanup_free_ char *path = NULL;
	const char *iface = UPGRADE_MANAGER_IFACE, *name;
	bool any = false;
	int r;

	if (n > 0) {
		if (strlen(args[0]) != 16 || strspn(args[0], "0123456789abcdef") != 16) {
			fprintf(stderr, "'%s' is not an update id (16 hex digits).\n", args[0]);
			return EXIT_USAGE;
		}
		if (asprintf(&path, "%s/%s", UPGRADE_UPDATE_PREFIX, args[0]) < 0)
			return EXIT_FAILED;
		iface = UPGRADE_UPDATE_IFACE;
	}
	r = sd_bus_call_method(bus, UPGRADE_BUS_NAME, path ?: UPGRADE_OBJECT_PATH,
	                       "org.freedesktop.DBus.Properties", "GetAll", &e, &reply, "s", iface);
	if (r < 0) {
		if (path && sd_bus_error_has_names(&e, SD_BUS_ERROR_UNKNOWN_OBJECT,
		                                   SD_BUS_ERROR_UNKNOWN_INTERFACE)) {
			fprintf(stderr, "No update '%s'.\n", args[0]);
			return EXIT_NOT_FOUND;
		}
		return cli_fail_bus("Reading properties failed", &e, r);
	}
	r = sd_bus_message_enter_container(reply, 'a', "{sv}");
	while (r >= 0 && (r = sd_bus_message_enter_container(reply, 'e', "sv")) > 0) {
		r = sd_bus_message_read(reply, "s", &name);
		if (r < 0)
			break;
		if (wanted(name)) {
			r = print_property(reply, name);
			any = true;
		} else
			r = sd_bus_message_skip(reply, "v");
		if (r < 0)
			break;
		r = sd_bus_message_exit_container(reply);
	}
	if (r < 0)
		return cli_fail_bus("Bad reply", NULL, r);
	if (arg_properties && !any) {
		fprintf(stderr, "No such property.\n");
		return EXIT_NOT_FOUND;
	}
	return EXIT_OK;
}
