# SPDX-License-Identifier: LGPL-2.1-or-later
# shellcheck shell=bash
#
# The upgrade scenario's checks (upgrade/new.sh), which also require `Shutdown: fast` in the
# report when old.sh's drop-in is there.
. /lab-payload/scenarios/upgrade/new.sh
