/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "handoff-mode.h"
#include "macros.h"
#include "purgatory-abi.h"

static const char *const handoff_mode_table[_HANDOFF_MODE_MAX] = {
	[HANDOFF_MODE_VERIFIED] = "verified",
	[HANDOFF_MODE_FAST] = "fast",
};

const char *handoff_mode_to_string(HandoffMode m) {
	return m >= 0 && m < _HANDOFF_MODE_MAX ? handoff_mode_table[m] : NULL;
}

HandoffMode handoff_mode_from_string(const char *s) {
	for (int i = 0; s && i < _HANDOFF_MODE_MAX; i++)
		if (streq(handoff_mode_table[i], s))
			return (HandoffMode)i;
	return _HANDOFF_MODE_INVALID;
}

uint32_t handoff_mode_to_purgatory(HandoffMode m) {
	return m == HANDOFF_MODE_FAST ? PURGATORY_MODE_FAST : PURGATORY_MODE_VERIFIED;
}
