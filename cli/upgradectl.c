/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * upgradectl: drives org.upgraded.Upgrade1. Every verb has a man-page style
 * --help; exit codes are listed in `upgradectl --help` and docs/dbus-api.md.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-bus.h>

#include "cli-bus.h"
#include "config.h"
#include "log.h"
#include "macros.h"
#include "string-util.h"
#include "terminal.h"
#include "upgrade-bus.h"
#include "upgradectl.h"

#define WAIT_TIMEOUT_USEC (10ULL * 60 * 1000000) /* --wait-timeout= default */
#define PARSE_GO_ON       (-1)                   /* parse_argv(): run the verb */

CliJsonFormat arg_json = CLI_JSON_OFF;
static bool arg_ask_password = true;
static bool arg_pager = true;
bool arg_legend = true;
bool arg_wait = false;
bool arg_value = false;
bool arg_reuse_cmdline = false;
bool arg_dry_run = false;
uint64_t arg_wait_timeout = WAIT_TIMEOUT_USEC;
static const char *arg_host = NULL;
bool arg_html = false;
const char *arg_output = NULL;
const char *arg_initrd = NULL;
const char *arg_cmdline = NULL;
char **arg_properties = NULL;

/* The verb options given (-h, -H, --no-ask-password, --no-pager and --version go with every
 * verb): a verb
 * refuses one it does not take, rather than ignore it (`commit --json` without --dry-run
 * would commit). */
enum {
	OPT_JSON = 1u << 0,
	OPT_WAIT = 1u << 1,
	OPT_VALUE = 1u << 2,
	OPT_PROPERTY = 1u << 3,
	OPT_INITRD = 1u << 4,
	OPT_CMDLINE = 1u << 5,
	OPT_REUSE_CMDLINE = 1u << 6,
	OPT_DRY_RUN = 1u << 7,
	OPT_WAIT_TIMEOUT = 1u << 8,
	OPT_HTML = 1u << 9,
	OPT_OUTPUT = 1u << 10,
	OPT_NO_LEGEND = 1u << 11,
};
static const char *const option_names[] = {
	"--json",          "--wait",    "--value",        "--property", "--initrd", "--cmdline",
	"--reuse-cmdline", "--dry-run", "--wait-timeout", "--html",     "--output", "--no-legend",
};
static unsigned arg_given = 0;

typedef struct Verb {
	const char *name;
	unsigned min_args, max_args;
	int (*run)(sd_bus *bus, char **args, unsigned n);
	const char *help;
	unsigned options; /* OPT_* it takes */
	bool pager;       /* long human output: paged on a terminal (--no-pager) */
} Verb;

/* ---- internal functions ---- */

static int exit_code_for_error(const sd_bus_error *e) {
	static const struct {
		const char *name;
		int code;
	} map[] = {
		{ UPGRADE_ERROR_INVALID_PATH, EXIT_REJECTED },
		{ UPGRADE_ERROR_NOT_ALLOWED_PATH, EXIT_REJECTED },
		{ UPGRADE_ERROR_UNSAFE_FILE, EXIT_REJECTED },
		{ UPGRADE_ERROR_INVALID_IMAGE, EXIT_REJECTED },
		{ UPGRADE_ERROR_IMAGE_TOO_LARGE, EXIT_REJECTED },
		{ UPGRADE_ERROR_INVALID_CMDLINE, EXIT_REJECTED },
		{ UPGRADE_ERROR_INVALID_OPTION, EXIT_REJECTED },
		{ UPGRADE_ERROR_INVALID_ID, EXIT_REJECTED },
		{ UPGRADE_ERROR_INVALID_VM_NAME, EXIT_REJECTED },
		{ UPGRADE_ERROR_POLICY_REFUSED, EXIT_REFUSED },
		{ UPGRADE_ERROR_NO_SUCH_VM, EXIT_NOT_FOUND },
		{ UPGRADE_ERROR_NO_SAVED_STATE, EXIT_NOT_FOUND },
		{ UPGRADE_ERROR_VM_RUNNING, EXIT_BAD_STATE },
		{ UPGRADE_ERROR_PERMISSION_DENIED, EXIT_PERMISSION },
		{ SD_BUS_ERROR_ACCESS_DENIED, EXIT_PERMISSION },
		{ UPGRADE_ERROR_NO_SUCH_UPDATE, EXIT_NOT_FOUND },
		{ UPGRADE_ERROR_NO_SUCH_REPORT, EXIT_NOT_FOUND },
		{ UPGRADE_ERROR_ALREADY_STAGED, EXIT_BAD_STATE },
		{ UPGRADE_ERROR_BAD_STATE, EXIT_BAD_STATE },
		{ UPGRADE_ERROR_KEXEC_UNAVAILABLE, EXIT_NO_KEXEC },
		{ UPGRADE_ERROR_KEXEC_FAILED, EXIT_NO_KEXEC },
		{ UPGRADE_ERROR_LIBVIRT_TIMEOUT, EXIT_LIBVIRT_TIMEOUT },
		{ SD_BUS_ERROR_SERVICE_UNKNOWN, EXIT_NO_SERVICE },
		{ SD_BUS_ERROR_NAME_HAS_NO_OWNER, EXIT_NO_SERVICE },
		{ SD_BUS_ERROR_NO_REPLY, EXIT_NO_SERVICE },
	};

	for (size_t i = 0; i < ELEMENTSOF(map); i++)
		if (sd_bus_error_has_name(e, map[i].name))
			return map[i].code;
	return EXIT_FAILED;
}

/* Prints "<what>: <message> (<error name>)" and returns the exit code. */
int cli_fail_bus(const char *what, const sd_bus_error *e, int r) {
	if (sd_bus_error_is_set(e)) {
		fprintf(stderr, "%s%s: %s (%s)%s\n", term_color(stderr, TERM_COLOR_RED), what,
		        e->message ?: "", e->name, term_normal(stderr));
		/* The bus's own text ("... not provided by any .service files") says no more. */
		if (sd_bus_error_has_names(e, SD_BUS_ERROR_SERVICE_UNKNOWN,
		                           SD_BUS_ERROR_NAME_HAS_NO_OWNER))
			fprintf(stderr,
			        "upgraded is not running%s%s, or not installed there: see "
			        "`systemctl status upgraded.service`%s.\n",
			        arg_host ? " on " : "", strempty(arg_host),
			        arg_host ? " on that host" : "");
		return exit_code_for_error(e);
	}
	fprintf(stderr, "%s%s: %s%s\n", term_color(stderr, TERM_COLOR_RED), what, strerror(-r),
	        term_normal(stderr));
	return EXIT_FAILED;
}

int cli_call_string(sd_bus *bus, const char *method, const char *arg, char **ret, sd_bus_error *e) {
	_cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
	const char *s;
	int r;

	if (arg)
		r = sd_bus_call_method(bus, UPGRADE_BUS_NAME, UPGRADE_OBJECT_PATH,
		                       UPGRADE_MANAGER_IFACE, method, e, &reply, "s", arg);
	else
		r = sd_bus_call_method(bus, UPGRADE_BUS_NAME, UPGRADE_OBJECT_PATH,
		                       UPGRADE_MANAGER_IFACE, method, e, &reply, NULL);
	if (r < 0)
		return r;
	r = sd_bus_message_read(reply, "s", &s);
	if (r < 0)
		return r;
	*ret = strdup(s);
	return *ret ? 0 : -ENOMEM;
}

/* ---- help ---- */

#define EXIT_STATUS_TEXT                                                                        \
	"EXIT STATUS\n"                                                                         \
	"    0  success\n"                                                                      \
	"    1  the operation or the update failed\n"                                           \
	"    2  invalid command line\n"                                                         \
	"    3  the daemon rejected the input (InvalidPath, NotAllowedPath, UnsafeFile,\n"      \
	"       InvalidImage, InvalidCmdline, InvalidOption, InvalidId)\n"                      \
	"    4  permission denied (root or polkit action org.upgraded.Upgrade1.<verb>)\n"       \
	"    5  no such update or report\n"                                                     \
	"    6  wrong state (AlreadyStaged, BadState)\n"                                        \
	"    7  kexec unavailable or the kernel refused to load the image\n"                    \
	"    8  upgraded is not reachable on the system bus, or stopped during --wait\n"        \
	"    9  the policy refused the commit (PolicyRefused; see commit --dry-run)\n"          \
	"   10  --wait or watch: --wait-timeout= passed before the update ended (it goes on)\n" \
	"   11  libvirtd did not answer within the daemon's deadline (LibvirtTimeout)\n"

#define COMMON_OPTIONS_TEXT                                                                     \
	"    --no-ask-password  Do not ask for a password (polkit interactive authorization)\n" \
	"    --no-pager         Do not pipe the output into a pager\n"                          \
	"    -H, --host=[USER@]HOST[:PORT]  Talk to upgraded on HOST over SSH\n"                \
	"    -h, --help         Show this help\n"

static const Verb verbs[] = {
	{ "stage", 1, 1, verb_stage,
	  "NAME\n    upgradectl stage - validate and preload a kernel for a live update\n\n"
	  "SYNOPSIS\n    upgradectl stage KERNEL [--initrd=FILE] [--cmdline=STRING | "
	  "--reuse-cmdline] [--wait]\n\n"
	  "DESCRIPTION\n"
	  "    Asks upgraded to stage KERNEL: the paths must be absolute, normalized and below\n"
	  "    /boot or /var/lib/upgraded/images; the files must be regular files owned by\n"
	  "    root, not writable by group or others, and the kernel a 64-bit x86 bzImage.\n"
	  "    Size, mtime and SHA-256 are recorded, the image is loaded into the kernel\n"
	  "    (and as crash image when crashkernel= memory is reserved), and the update is\n"
	  "    persisted as \"staged\". Prints the new update's id on standard output.\n\n"
	  "OPTIONS\n"
	  "    --initrd=FILE      Initial ramdisk to pass to the new kernel\n"
	  "    --cmdline=STRING   Kernel command line (no control characters, at most 2047\n"
	  "                       bytes, no upgraded.* parameters)\n"
	  "    --reuse-cmdline    Use the running kernel's command line (/proc/cmdline)\n"
	  "                       without BOOT_IMAGE= and upgraded.* parameters\n"
	  "    --wait             Print the update's phase when staging is done\n"
	  "    --wait-timeout=SEC Stop waiting after SEC seconds (default 600, 0: no "
	  "limit)\n" COMMON_OPTIONS_TEXT "\n" EXIT_STATUS_TEXT "\nEXAMPLES\n"
	  "    upgradectl stage /boot/vmlinuz-6.1.0-57-cloud-amd64 \\\n"
	  "        --initrd=/boot/initrd.img-6.1.0-57-cloud-amd64 --reuse-cmdline\n",
	  OPT_INITRD | OPT_CMDLINE | OPT_REUSE_CMDLINE | OPT_WAIT | OPT_WAIT_TIMEOUT },
	{ "commit", 0, 1, verb_commit,
	  "NAME\n    upgradectl commit - hand the machine over to the staged kernel\n\n"
	  "SYNOPSIS\n    upgradectl commit [ID] [--wait [--wait-timeout=SEC] [--no-legend] | "
	  "--dry-run [--json[=MODE]]]\n\n"
	  "DESCRIPTION\n"
	  "    Commits the staged update (or update ID): the pre-handoff steps run, the\n"
	  "    handoff record is persisted and synced, then systemd is asked to start\n"
	  "    kexec.target. Once systemd accepted that request there is no way back; any\n"
	  "    failure before it rolls back and marks the update failed. The call returns\n"
	  "    at once with the update's object path; --wait follows its progress.\n\n"
	  "OPTIONS\n"
	  "    --wait             Print each phase until the kexec is requested or the\n"
	  "                       update failed, then each VM's strategy and result; while\n"
	  "                       VMs are saved, their bytes, rate, an estimate of the time\n"
	  "                       left and the time elapsed since the commit began\n"
	  "    --wait-timeout=SEC Stop waiting after SEC seconds (default 600, 0: no limit)\n"
	  "                       with exit status 10; the update goes on\n"
	  "    --dry-run          Change nothing: print the handoff mode, each VM's\n"
	  "                       strategy and the preconditions, with the policy's reasons\n"
	  "                       (exit 9 when the commit would be refused)\n"
	  "    --json[=MODE]      With --dry-run: print the decisions as JSON, on one line\n"
	  "                       (short, also plain --json) or indented (pretty)\n"
	  "    --no-legend        With --wait: no header over the table of VM "
	  "results\n" COMMON_OPTIONS_TEXT "\n" EXIT_STATUS_TEXT
	  "\nEXAMPLES\n    upgradectl commit --wait\n",
	  OPT_WAIT | OPT_WAIT_TIMEOUT | OPT_DRY_RUN | OPT_JSON | OPT_NO_LEGEND },
	{ "watch", 0, 1, verb_watch,
	  "NAME\n    upgradectl watch - follow an update in flight\n\n"
	  "SYNOPSIS\n    upgradectl watch [ID] [--wait-timeout=SEC] [--no-legend]\n\n"
	  "DESCRIPTION\n"
	  "    Attaches to update ID, or to the one in flight (committing, or completing on\n"
	  "    the new kernel while its VMs are restored), and prints what commit --wait\n"
	  "    prints: each phase, each VM's result, the bytes saved or restored per VM with\n"
	  "    the rate and an estimate of the time left, and the time elapsed. Ends when\n"
	  "    the kexec is requested or the update ended (0 done or handed off, 1 failed\n"
	  "    or cancelled), or after --wait-timeout= (10).\n\n"
	  "OPTIONS\n"
	  "    --wait-timeout=SEC Stop after SEC seconds (default 600, 0: no limit)\n"
	  "    --no-legend        No header over the table of VM results\n" COMMON_OPTIONS_TEXT
	  "\n" EXIT_STATUS_TEXT "\nEXAMPLES\n    upgradectl watch\n",
	  OPT_WAIT_TIMEOUT | OPT_NO_LEGEND },
	{ "restore-vm", 1, 1, verb_restore_vm,
	  "NAME\n    upgradectl restore-vm - restore one VM from its kept saved state\n\n"
	  "SYNOPSIS\n    upgradectl restore-vm NAME\n\n"
	  "DESCRIPTION\n"
	  "    When a VM could not be restored after an update, its managed save image is\n"
	  "    kept on disk. This asks upgraded to restore the libvirt domain NAME from it\n"
	  "    and resume it, and records the outcome in the update's VM results. Refused\n"
	  "    for an unknown domain (NoSuchVM, exit 5), a domain without saved state\n"
	  "    (NoSavedState, exit 5), a running domain (VMRunning, exit 6), and while an\n"
	  "    update commits or completes (BadState, exit 6: past the point of no return\n"
	  "    the image belongs to the new kernel and is kept).\n\n"
	  "OPTIONS\n" COMMON_OPTIONS_TEXT "\n" EXIT_STATUS_TEXT
	  "\nEXAMPLES\n    upgradectl restore-vm web-1\n",
	  0 },
	{ "cancel", 0, 1, verb_cancel,
	  "NAME\n    upgradectl cancel - drop a staged update\n\n"
	  "SYNOPSIS\n    upgradectl cancel [ID]\n\n"
	  "DESCRIPTION\n"
	  "    Cancels the staged update (or update ID) and unloads its image. A commit\n"
	  "    before the point of no return (phase pre-handoff) is stopped too: running VM\n"
	  "    saves are aborted, every VM resumes, no saved image is left, and the update\n"
	  "    ends \"cancelled\" (watch it to see when). From the handoff record on it is\n"
	  "    refused (BadState, exit 6).\n\n"
	  "OPTIONS\n" COMMON_OPTIONS_TEXT "\n" EXIT_STATUS_TEXT
	  "\nEXAMPLES\n    upgradectl cancel\n",
	  0 },
	{ "status", 0, 0, verb_status,
	  "NAME\n    upgradectl status - show the service state and the known updates\n\n"
	  "SYNOPSIS\n    upgradectl status [--json[=MODE]] [--no-legend]\n\n"
	  "DESCRIPTION\n"
	  "    Prints the state, the running and staged kernels, the kexec backend (and\n"
	  "    why it is unusable, if it is), the last report, and a table of updates.\n"
	  "    On a terminal, failed and refused are shown in red, cancelled and an\n"
	  "    unusable backend in yellow, done in green.\n\n"
	  "OPTIONS\n"
	  "    --json[=MODE]      Print Describe() with its keys in snake_case, on one line\n"
	  "                       (short, also plain --json) or indented (pretty)\n"
	  "    --no-legend        No header over the table of updates\n" COMMON_OPTIONS_TEXT
	  "\n" EXIT_STATUS_TEXT "\nEXAMPLES\n    upgradectl status\n",
	  OPT_JSON | OPT_NO_LEGEND, true },
	{ "list", 0, 0, verb_list,
	  "NAME\n    upgradectl list - list updates\n\n"
	  "SYNOPSIS\n    upgradectl list [--json[=MODE]] [--no-legend]\n\n"
	  "DESCRIPTION\n    Lists every update known to upgraded, oldest first: id, state, when "
	  "its\n"
	  "    commit was requested (local time; - when never committed) and the kernel\n"
	  "    version. --json gives id, state and the update's object path.\n\n"
	  "OPTIONS\n"
	  "    --json[=MODE]      Print a JSON array, on one line (short, also plain --json)\n"
	  "                       or indented (pretty)\n"
	  "    --no-legend        No header line and no count at the end\n" COMMON_OPTIONS_TEXT
	  "\n" EXIT_STATUS_TEXT "\nEXAMPLES\n    upgradectl list --no-legend\n",
	  OPT_JSON | OPT_NO_LEGEND, true },
	{ "report", 0, 1, verb_report,
	  "NAME\n    upgradectl report - show the report of a finished update\n\n"
	  "SYNOPSIS\n    upgradectl report [ID] [--json[=MODE] | --html [-o FILE]]\n\n"
	  "DESCRIPTION\n"
	  "    Shows the report of update ID, or of the last finished update: result, old\n"
	  "    and new kernel, backend, handoff mode and why the policy chose it, the\n"
	  "    timebase and its uncertainty, the host blackout and the VM downtime (every\n"
	  "    such figure is an estimate, printed with its +- uncertainty), purgatory's\n"
	  "    verification time, the boot analysis, the figures that are missing and why,\n"
	  "    and a timeline of the phases (t = 0 is the reboot request; times marked ~\n"
	  "    carry the timebase uncertainty). The schema is docs/report.schema.json\n"
	  "    (schema 2), documented in docs/report.md; a report written in schema 1\n"
	  "    prints too. Each VM has one downtime, with its source.\n\n"
	  "OPTIONS\n"
	  "    --json[=MODE]      Print GetReport(), on one line (short, also plain --json)\n"
	  "                       or indented (pretty); its keys are the schema's\n"
	  "    --html             One self-contained HTML page (inline SVG, no network\n"
	  "                       access): the phases, purgatory, boot gaps, a bar per VM\n"
	  "    -o, --output=FILE  Write the page to FILE instead of stdout\n" COMMON_OPTIONS_TEXT
	  "\n" EXIT_STATUS_TEXT "\nEXAMPLES\n    upgradectl report --json | jq .phases\n"
	  "    upgradectl -H root@host1 report --html -o host1.html\n",
	  OPT_JSON | OPT_HTML | OPT_OUTPUT, true },
	{ "show", 0, 1, verb_show,
	  "NAME\n    upgradectl show - print bus properties\n\n"
	  "SYNOPSIS\n    upgradectl show [ID] [-p NAME]... [--value]\n\n"
	  "DESCRIPTION\n"
	  "    Prints the Manager's properties as NAME=VALUE, or those of update ID. NAME is\n"
	  "    the D-Bus property's name (State, KernelVersion), as -p takes it.\n\n"
	  "OPTIONS\n"
	  "    -p, --property=NAME  Only this property (repeatable)\n"
	  "    --value              Print values only\n" COMMON_OPTIONS_TEXT "\n" EXIT_STATUS_TEXT
	  "\nEXAMPLES\n    upgradectl show -p State --value\n",
	  OPT_PROPERTY | OPT_VALUE, true },
	{ "describe", 0, 0, verb_describe,
	  "NAME\n    upgradectl describe - the complete service state as JSON\n\n"
	  "SYNOPSIS\n    upgradectl describe [--json[=MODE]]\n\n"
	  "DESCRIPTION\n"
	  "    Prints Describe(): state, kernels, backend, allowed directories, the settings\n"
	  "    in effect and every update record, with every key in snake_case\n"
	  "    (running_kernel, backend.crash_kernel_reserved; the daemon names them as\n"
	  "    its D-Bus properties). Indented, or as --json=MODE says.\n\n"
	  "OPTIONS\n"
	  "    --json[=MODE]      On one line (short, also plain --json) or indented "
	  "(pretty)\n" COMMON_OPTIONS_TEXT "\n" EXIT_STATUS_TEXT
	  "\nEXAMPLES\n    upgradectl describe --json | jq .running_kernel\n",
	  OPT_JSON, true },
};

static void help(void) {
	printf("NAME\n    upgradectl - control live kernel updates (upgraded)\n\n"
	       "SYNOPSIS\n    upgradectl [OPTIONS...] [VERB [ARGS...]]\n\n"
	       "VERBS (without one: status)\n"
	       "    stage KERNEL       Validate and preload a kernel\n"
	       "    commit [ID]        Hand over to the staged kernel (kexec)\n"
	       "    cancel [ID]        Drop the staged update, or stop a commit before the\n"
	       "                       point of no return\n"
	       "    watch [ID]         Follow an update in flight\n"
	       "    restore-vm NAME    Restore one VM from its kept saved state\n"
	       "    status             Service state and updates\n"
	       "    list               List updates\n"
	       "    report [ID]        Report of a finished update\n"
	       "    show [ID]          Bus properties\n"
	       "    describe           Complete state as JSON\n\n"
	       "    `upgradectl VERB --help` describes each verb.\n\n"
	       "OPTIONS\n"
	       "    --json[=MODE]      JSON output (status, list, report, describe, commit\n"
	       "                       --dry-run): short (one line; plain --json) or pretty;\n"
	       "                       keys in snake_case\n"
	       "    --no-legend        No table headers and footers (list, status, commit, watch)\n"
	       "    --wait             Follow progress (stage, commit)\n"
	       "    --wait-timeout=SEC Limit of --wait and watch (default 600, 0: none; exit 10)\n"
	       "    --version          Show the version\n" COMMON_OPTIONS_TEXT "\n" EXIT_STATUS_TEXT
	       "\nENVIRONMENT\n"
	       "    DBUS_SYSTEM_BUS_ADDRESS  The bus to talk to (default: the system bus; not\n"
	       "                             with -H, which runs `ssh -xT [-p PORT] [USER@]HOST\n"
	       "                             systemd-stdio-bridge` like systemctl -H)\n"
	       "    SYSTEMD_PAGER, PAGER     The pager of status, list, report, show and describe\n"
	       "                             on a terminal (default less; \"\" or cat: none)\n"
	       "    SYSTEMD_LESS             less's options (default FRSXMK)\n"
	       "    SYSTEMD_COLORS           1 or 0: colour on or off whatever the output is\n"
	       "    NO_COLOR                 When set, no colour (a terminal gets colour)\n");
}

/* The options the verb does not take, and the combinations it refuses: the exit code, or
 * EXIT_OK. */
static int check_verb_options(const Verb *verb) {
	unsigned extra = arg_given & ~verb->options;

	for (size_t i = 0; i < ELEMENTSOF(option_names); i++)
		if (extra & (1u << i)) {
			fprintf(stderr, "'%s' does not take %s; see upgradectl %s --help.\n",
			        verb->name, option_names[i], verb->name);
			return EXIT_USAGE;
		}
	if (streq(verb->name, "commit") && arg_json && !arg_dry_run) {
		fprintf(stderr, "commit --json prints the dry run's decisions: it needs --dry-run "
		                "(a commit without it would hand the host over).\n");
		return EXIT_USAGE;
	}
	if (streq(verb->name, "commit") && arg_dry_run &&
	    (arg_given & (OPT_WAIT | OPT_WAIT_TIMEOUT))) {
		fprintf(stderr,
		        "commit --dry-run changes nothing: there is nothing to --wait for.\n");
		return EXIT_USAGE;
	}
	if ((arg_given & OPT_WAIT_TIMEOUT) && !arg_wait && !streq(verb->name, "watch") &&
	    !arg_dry_run) {
		fprintf(stderr, "--wait-timeout= limits --wait (or watch): add --wait.\n");
		return EXIT_USAGE;
	}
	if (arg_output && !arg_html) {
		fprintf(stderr, "-o/--output= writes the page of report --html only.\n");
		return EXIT_USAGE;
	}
	return EXIT_OK;
}

static const Verb *find_verb(const char *name) {
	for (size_t i = 0; i < ELEMENTSOF(verbs); i++)
		if (streq(verbs[i].name, name))
			return &verbs[i];
	return NULL;
}

enum {
	ARG_VERSION = 0x100,
	ARG_JSON,
	ARG_NO_ASK_PASSWORD,
	ARG_WAIT,
	ARG_VALUE,
	ARG_INITRD,
	ARG_CMDLINE,
	ARG_REUSE_CMDLINE,
	ARG_DRY_RUN,
	ARG_WAIT_TIMEOUT,
	ARG_HTML,
	ARG_NO_PAGER,
	ARG_NO_LEGEND,
};

/* One verb option into arg_* and arg_given: PARSE_GO_ON, or the exit code to return. */
static int set_verb_option(int c, const char *value) {
	unsigned long long sec;

	switch (c) {
	case ARG_HTML:
		arg_html = true;
		arg_given |= OPT_HTML;
		break;
	case 'o':
		arg_output = value;
		arg_given |= OPT_OUTPUT;
		break;
	case ARG_JSON: {
		int f = cli_json_format_from_string(value);

		if (f < 0) {
			fprintf(stderr, "--json= takes short or pretty, not '%s'.\n", value);
			return EXIT_USAGE;
		}
		arg_json = f;
		arg_given |= OPT_JSON;
		break;
	}
	case ARG_NO_LEGEND:
		arg_legend = false;
		arg_given |= OPT_NO_LEGEND;
		break;
	case ARG_WAIT:
		arg_wait = true;
		arg_given |= OPT_WAIT;
		break;
	case ARG_VALUE:
		arg_value = true;
		arg_given |= OPT_VALUE;
		break;
	case 'p':
		arg_given |= OPT_PROPERTY;
		if (strv_extend(&arg_properties, value) < 0)
			return EXIT_FAILED;
		break;
	case ARG_DRY_RUN:
		arg_dry_run = true;
		arg_given |= OPT_DRY_RUN;
		break;
	case ARG_WAIT_TIMEOUT:
		arg_given |= OPT_WAIT_TIMEOUT;
		if (safe_atou64(value, &sec) < 0 || sec > 7 * 24 * 3600) {
			fprintf(stderr, "--wait-timeout= takes seconds (0: no limit), not '%s'.\n",
			        value);
			return EXIT_USAGE;
		}
		arg_wait_timeout = sec * 1000000ULL;
		break;
	case ARG_INITRD:
		arg_initrd = value;
		arg_given |= OPT_INITRD;
		break;
	case ARG_CMDLINE:
		arg_cmdline = value;
		arg_given |= OPT_CMDLINE;
		break;
	case ARG_REUSE_CMDLINE:
		arg_reuse_cmdline = true;
		arg_given |= OPT_REUSE_CMDLINE;
		break;
	default:
		return EXIT_USAGE;
	}
	return PARSE_GO_ON;
}

/* Parses the options into arg_*; returns PARSE_GO_ON, or the exit code to return at once
 * (--version, an invalid option). */
static int parse_argv(int argc, char *argv[], bool *ret_want_help) {
	static const struct option options[] = {
		{ "help", no_argument, NULL, 'h' },
		{ "host", required_argument, NULL, 'H' },
		{ "html", no_argument, NULL, ARG_HTML },
		{ "output", required_argument, NULL, 'o' },
		{ "version", no_argument, NULL, ARG_VERSION },
		{ "json", optional_argument, NULL, ARG_JSON },
		{ "no-pager", no_argument, NULL, ARG_NO_PAGER },
		{ "no-legend", no_argument, NULL, ARG_NO_LEGEND },
		{ "no-ask-password", no_argument, NULL, ARG_NO_ASK_PASSWORD },
		{ "wait", no_argument, NULL, ARG_WAIT },
		{ "value", no_argument, NULL, ARG_VALUE },
		{ "property", required_argument, NULL, 'p' },
		{ "initrd", required_argument, NULL, ARG_INITRD },
		{ "cmdline", required_argument, NULL, ARG_CMDLINE },
		{ "reuse-cmdline", no_argument, NULL, ARG_REUSE_CMDLINE },
		{ "dry-run", no_argument, NULL, ARG_DRY_RUN },
		{ "wait-timeout", required_argument, NULL, ARG_WAIT_TIMEOUT },
		{},
	};
	int c, r;

	while ((c = getopt_long(argc, argv, "hH:o:p:", options, NULL)) >= 0)
		switch (c) {
		case 'h':
			*ret_want_help = true;
			break;
		case 'H':
			arg_host = optarg;
			break;
		case ARG_VERSION:
			printf("upgradectl %s\n", PACKAGE_VERSION);
			return EXIT_OK;
		case ARG_NO_ASK_PASSWORD:
			arg_ask_password = false;
			break;
		case ARG_NO_PAGER:
			arg_pager = false;
			break;
		default:
			r = set_verb_option(c, optarg);
			if (r != PARSE_GO_ON)
				return r;
		}

	return PARSE_GO_ON;
}

int main(int argc, char *argv[]) {
	_cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
	const Verb *verb = NULL;
	bool want_help = false;
	unsigned n;
	int r, ret;

	log_set_prefix("upgradectl");
	terminal_init();
	r = parse_argv(argc, argv, &want_help);
	if (r != PARSE_GO_ON)
		return r;

	if (want_help) {
		verb = optind < argc ? find_verb(argv[optind]) : NULL;
		if (verb)
			fputs(verb->help, stdout);
		else
			help();
		ret = EXIT_OK;
		goto out;
	}
	/* No verb: the service's status, as systemctl and its siblings do. */
	verb = find_verb(optind < argc ? argv[optind] : "status");
	if (!verb) {
		fprintf(stderr, "Unknown verb '%s'; see upgradectl --help.\n", argv[optind]);
		ret = EXIT_USAGE;
		goto out;
	}
	ret = check_verb_options(verb);
	if (ret != EXIT_OK)
		goto out;

	n = optind < argc ? (unsigned)(argc - optind - 1) : 0;
	if (n < verb->min_args || n > verb->max_args) {
		fprintf(stderr, "'%s' takes %u to %u argument(s); see upgradectl %s --help.\n",
		        verb->name, verb->min_args, verb->max_args, verb->name);
		ret = EXIT_USAGE;
		goto out;
	}

	r = cli_bus_open(arg_host, &bus);
	if (r < 0) {
		ret = r == -EINVAL ? EXIT_USAGE : EXIT_NO_SERVICE;
		goto out;
	}
	(void)sd_bus_set_allow_interactive_authorization(bus, arg_ask_password);
	if (verb->pager && !arg_html)
		(void)pager_open(arg_pager);
	ret = verb->run(bus, optind < argc ? argv + optind + 1 : argv + argc, n);
	pager_close();
out:
	strv_free(arg_properties);
	return ret;
}
