/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Authorization of the mutating methods: root, or polkit's yes for the method's own action
 * (docs/dbus-api.md lists which method needs which), asked asynchronously.
 */
#include <errno.h>
#include <stdlib.h>
#include <systemd/sd-bus.h>

#include "bus.h"
#include "macros.h"
#include "upgrade-bus.h"

#define POLKIT_NAME         "org.freedesktop.PolicyKit1"
#define POLKIT_PATH         "/org/freedesktop/PolicyKit1/Authority"
#define POLKIT_IFACE        "org.freedesktop.PolicyKit1.Authority"
#define POLKIT_INTERACTIVE  1u
/* Interactive authentication waits for a human. */
#define POLKIT_TIMEOUT_USEC (5ULL * 60 * 1000000)

typedef struct PendingAuth {
	Manager *manager;
	sd_bus_message *message;
	AuthContinuation cont;
	const char *action; /* static */
	bool interactive;
} PendingAuth;

static void pending_auth_free(void *userdata) {
	PendingAuth *p = userdata;

	if (!p)
		return;
	sd_bus_message_unref(p->message);
	free(p);
}

/* Replies to m from a continuation's outcome (used after async polkit). */
static void reply_outcome(sd_bus_message *m, int r, sd_bus_error *error) {
	if (r >= 0)
		return;
	if (sd_bus_error_is_set(error))
		(void)sd_bus_reply_method_error(m, error);
	else
		(void)sd_bus_reply_method_errno(m, r, NULL);
}

static int polkit_reply(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
	_cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
	PendingAuth *p = userdata;
	const sd_bus_error *e;
	int authorized = 0, challenge = 0, r;

	e = sd_bus_message_get_error(reply);
	if (e) {
		if (sd_bus_error_has_names(e, SD_BUS_ERROR_SERVICE_UNKNOWN,
		                           SD_BUS_ERROR_NAME_HAS_NO_OWNER))
			r = sd_bus_error_setf(&error, UPGRADE_ERROR_PERMISSION_DENIED,
			                      "Only root may do this: polkit is not running to "
			                      "authorize action %s.",
			                      p->action);
		else
			r = sd_bus_error_setf(&error, UPGRADE_ERROR_PERMISSION_DENIED,
			                      "Authorization check for action %s failed: %s",
			                      p->action, e->message ?: e->name);
		reply_outcome(p->message, r, &error);
		return 0;
	}

	r = sd_bus_message_enter_container(reply, 'r', "bba{ss}");
	if (r >= 0)
		r = sd_bus_message_read(reply, "bb", &authorized, &challenge);
	if (r < 0) {
		r = sd_bus_error_setf(&error, UPGRADE_ERROR_PERMISSION_DENIED,
		                      "Unexpected reply from polkit for action %s.", p->action);
		reply_outcome(p->message, r, &error);
		return 0;
	}
	if (!authorized) {
		r = sd_bus_error_setf(&error, UPGRADE_ERROR_PERMISSION_DENIED,
		                      challenge && !p->interactive
		                              ? "Action %s needs interactive authentication "
		                                "(try without --no-ask-password)."
		                              : "Not authorized for action %s.",
		                      p->action);
		reply_outcome(p->message, r, &error);
		return 0;
	}

	r = sd_bus_message_rewind(p->message, true);
	if (r >= 0)
		r = p->cont(p->message, p->manager, &error);
	reply_outcome(p->message, r, &error);
	return 0; /* p is freed with the slot */
}

int bus_authorize(Manager *mgr, sd_bus_message *m, const char *action, AuthContinuation cont,
                  sd_bus_error *error) {
	_cleanup_(sd_bus_creds_unrefp) sd_bus_creds *creds = NULL;
	_cleanup_(sd_bus_message_unrefp) sd_bus_message *q = NULL;
	sd_bus_slot *slot = NULL;
	PendingAuth *p;
	const char *sender;
	bool interactive;
	uid_t uid;
	int r;

	/* Only what the bus daemon vouches for: the effective uid it took with SO_PEERCRED
	 * when the caller connected (GetConnectionCredentials' UnixUserID, which sd-bus
	 * files under EUID). No SD_BUS_CREDS_AUGMENT: that fills gaps from /proc/PID, and a
	 * caller that exits and whose PID is reused by another process would be judged by
	 * that process's uid. */
	r = sd_bus_query_sender_creds(m, SD_BUS_CREDS_EUID, &creds);
	if (r < 0)
		return r;
	r = sd_bus_creds_get_euid(creds, &uid);
	if (r < 0)
		return sd_bus_error_setf(error, UPGRADE_ERROR_PERMISSION_DENIED,
		                         "Cannot identify the caller: %s.", strerror(-r));
	if (uid == 0) {
		r = sd_bus_message_rewind(m, true);
		if (r < 0)
			return r;
		return cont(m, mgr, error);
	}

	sender = sd_bus_message_get_sender(m);
	if (!sender)
		return sd_bus_error_setf(error, UPGRADE_ERROR_PERMISSION_DENIED,
		                         "Cannot identify the caller.");
	interactive = sd_bus_message_get_allow_interactive_authorization(m) > 0;
	r = sd_bus_message_new_method_call(mgr->bus, &q, POLKIT_NAME, POLKIT_PATH, POLKIT_IFACE,
	                                   "CheckAuthorization");
	if (r >= 0)
		r = sd_bus_message_append(q, "(sa{sv})s", "system-bus-name", 1, "name", "s", sender,
		                          action);
	if (r >= 0)
		r = sd_bus_message_append(q, "a{ss}us", 0, interactive ? POLKIT_INTERACTIVE : 0u,
		                          "");
	if (r < 0)
		return r;

	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	*p = (PendingAuth){ .manager = mgr,
		            .message = sd_bus_message_ref(m),
		            .cont = cont,
		            .action = action,
		            .interactive = interactive };
	r = sd_bus_call_async(mgr->bus, &slot, q, polkit_reply, p, POLKIT_TIMEOUT_USEC);
	if (r < 0) {
		pending_auth_free(p);
		return r;
	}
	r = bus_slot_own(slot, p, pending_auth_free);
	if (r < 0)
		return r;
	return 1;
}
