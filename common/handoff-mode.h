/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * How the next kernel is handed over: THE one type from the policy's decision through
 * the state machine and the kexec backends to the loader, which writes it into
 * purgatory's parameters (purgatory-abi.h, PURGATORY_MODE_*). Strings only at the
 * boundaries: the update record, the report, the bus.
 */

#include <stdint.h>

typedef enum HandoffMode {
	HANDOFF_MODE_VERIFIED, /* purgatory checks every segment's SHA-256 */
	HANDOFF_MODE_FAST,     /* no check (planned update, the policy said so) */
	_HANDOFF_MODE_MAX,
	_HANDOFF_MODE_INVALID = -22, /* -EINVAL: not decided (yet) */
} HandoffMode;

/* The bit of mode in a set of modes (KexecBackend.supported_modes). */
#define HANDOFF_MODE_BIT(m) (1u << (unsigned)(m))

/* The purgatory's number for mode (purgatory-abi.h, PURGATORY_MODE_*), which numbers the modes
 * the other way round: the one conversion. Anything but HANDOFF_MODE_FAST verifies. */
uint32_t handoff_mode_to_purgatory(HandoffMode m);

/* "verified", "fast"; NULL for anything else. */
const char *handoff_mode_to_string(HandoffMode m);
/* _HANDOFF_MODE_INVALID for anything else (also NULL). */
HandoffMode handoff_mode_from_string(const char *s);
