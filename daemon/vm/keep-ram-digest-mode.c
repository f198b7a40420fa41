/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The digest mode's one string table (keep-ram-digest.h): the configuration, the handoff record,
 * the report and the manifest entry spell it through these two. */

#include "keep-ram-digest.h"
#include "macros.h"

static const char *const digest_table[_KEEP_RAM_DIGEST_MAX] = {
	[KEEP_RAM_DIGEST_MARK] = "mark",
	[KEEP_RAM_DIGEST_SAMPLED] = "sampled",
	[KEEP_RAM_DIGEST_FULL] = "full",
};

const char *keep_ram_digest_mode_to_string(KeepRamDigestMode m) {
	return (unsigned)m < _KEEP_RAM_DIGEST_MAX ? digest_table[m] : NULL;
}

KeepRamDigestMode keep_ram_digest_mode_from_string(const char *s) {
	for (int i = 0; s && i < _KEEP_RAM_DIGEST_MAX; i++)
		if (streq(s, digest_table[i]))
			return (KeepRamDigestMode)i;
	return _KEEP_RAM_DIGEST_INVALID;
}
