# SPDX-License-Identifier: LGPL-2.1-or-later
# shellcheck shell=bash
#
# The boot after the update's boot (lab.conf AFTER_NEW=reboot): a plain boot, no handoff
# mark on the command line. Nothing of the deferral survives: the generator wrote nothing,
# there is no waiter, and lab-defer.timer (old.sh) started as usual, without a drop-in.
. /lab-payload/scenarios/lib.sh

ok=true
no_defer_dropins() {
        ! compgen -G '/run/systemd/generator/*.d/50-upgraded-defer.conf' >/dev/null &&
                [ ! -e /run/systemd/generator/upgraded-defer.service ]
}
timer_normal() { # timer_normal UNIT: active, loaded without any drop-in of ours
        local _
        for _ in $(seq 120); do systemctl -q is-active "$1" && break; sleep 0.5; done
        systemctl -q is-active "$1" || return 1
        lab_marker normal-unit "$1" active_usec="$(lab_unit_mono "$1")" \
                upgraded_usec="$(lab_unit_mono upgraded.service)"
        ! systemctl show -p DropInPaths --value "$1" | grep -q upgraded-defer
}
lab_check next-boot-kernel test "$(uname -r)" = "$LAB_KERNEL_OLD" || ok=false
lab_check next-boot-no-handoff-mark sh -c '! grep -qw "upgraded\.handoff=1" /proc/cmdline' ||
        ok=false
lab_check next-boot-no-defer-dropins no_defer_dropins || ok=false
lab_check next-boot-no-waiter \
        test "$(systemctl show -p LoadState --value upgraded-defer.service)" = not-found || ok=false
lab_check next-boot-lab-timer-normal timer_normal lab-defer.timer || ok=false
if [ "$(systemctl show -p UnitFileState --value apt-daily.timer)" = enabled ]; then
        lab_check next-boot-apt-daily-normal timer_normal apt-daily.timer || ok=false
fi
ls -R /run/systemd/generator >"$LAB_RESULTS/generator-again.txt" 2>&1
if $ok; then
        lab_finish pass
else
        lab_finish fail next-boot-checks-failed
fi
