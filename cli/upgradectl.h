/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * What upgradectl's files share; not a library. The files, by concern:
 *   upgradectl.c         the options, the verb table with each verb's --help, main()
 *   upgradectl-update.c  the verbs that move an update or a VM: stage, commit, watch,
 *                        cancel, restore-vm
 *   upgradectl-show.c    the verbs that show the service: status, list, describe,
 *                        report, show
 *   terminal.c           colour and the pager on a terminal
 */

#include <stdbool.h>
#include <stdint.h>
#include <json-c/json.h>
#include <systemd/sd-bus.h>

#include "cli-json.h"

/* Exit codes (documented in the help text and docs/dbus-api.md). */
enum {
	EXIT_OK = 0,
	EXIT_FAILED = 1,           /* the operation or the update failed */
	EXIT_USAGE = 2,            /* bad command line */
	EXIT_REJECTED = 3,         /* the daemon rejected the input */
	EXIT_PERMISSION = 4,       /* not authorized */
	EXIT_NOT_FOUND = 5,        /* no such update or report */
	EXIT_BAD_STATE = 6,        /* already staged / wrong state */
	EXIT_NO_KEXEC = 7,         /* kexec unavailable or the kernel refused to load */
	EXIT_NO_SERVICE = 8,       /* upgraded is not reachable */
	EXIT_REFUSED = 9,          /* the policy refused the commit */
	EXIT_WAIT_TIMEOUT = 10,    /* --wait / watch: --wait-timeout= passed first */
	EXIT_LIBVIRT_TIMEOUT = 11, /* libvirtd did not answer within the daemon's deadline */
};

/* The command line (upgradectl.c). */
extern CliJsonFormat arg_json; /* CLI_JSON_OFF: human output */
extern bool arg_legend;        /* false: --no-legend */
extern bool arg_wait;
extern bool arg_value;
extern bool arg_reuse_cmdline;
extern bool arg_dry_run;
extern uint64_t arg_wait_timeout;
extern bool arg_html;
extern const char *arg_output;
extern const char *arg_initrd;
extern const char *arg_cmdline;
extern char **arg_properties;

/* upgradectl.c */
/* Prints "<what>: <message> (<error name>)" and returns the exit code. */
int cli_fail_bus(const char *what, const sd_bus_error *e, int r);
int cli_call_string(sd_bus *bus, const char *method, const char *arg, char **ret, sd_bus_error *e);

/* upgradectl-update.c */
int verb_stage(sd_bus *bus, char **args, unsigned n);
int verb_commit(sd_bus *bus, char **args, unsigned n);
int verb_watch(sd_bus *bus, char **args, unsigned n);
int verb_cancel(sd_bus *bus, char **args, unsigned n);
int verb_restore_vm(sd_bus *bus, char **args, unsigned n);

/* upgradectl-show.c */
/* The handoff reasons are stored as one "; "-joined line: one per line here. */
void cli_print_joined(const char *indent, const char *text);
/* The VM decisions and the preconditions verdict (Update.decisions / PlanCommit). */
void cli_print_decisions(json_object *d, const char *indent);
int verb_status(sd_bus *bus, char **args, unsigned n);
int verb_list(sd_bus *bus, char **args, unsigned n);
int verb_describe(sd_bus *bus, char **args, unsigned n);
int verb_report(sd_bus *bus, char **args, unsigned n);
int verb_show(sd_bus *bus, char **args, unsigned n);
