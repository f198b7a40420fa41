# SPDX-License-Identifier: LGPL-2.1-or-later
# shellcheck shell=bash
#
# The Secure Boot host's crash kernel: the panic image kexec_file_load loaded at the
# second stage (new.sh), booted by the crash of the kernel it was staged on. It is the
# staged kernel itself (same release), so only the panic mark on its command line
# tells it apart: upgraded must recognise the crash kernel and leave the staged
# update alone (docs/state-machine.md, "The panic path": a staged record is not
# reloaded there), and the kernel is locked down again under Secure Boot.
. /lab-payload/scenarios/lib.sh

ok=true
cat /proc/cmdline >"$LAB_RESULTS/cmdline-crash.txt"
lab_check crash-kernel-is-staged test "$(uname -r)" = "$LAB_KERNEL_NEW" || ok=false
lab_check crash-kernel-mark grep -qw 'upgraded\.panic=1' /proc/cmdline || ok=false
lab_check crash-kernel-locked-down grep -q '\[integrity\]' /sys/kernel/security/lockdown || ok=false
lab_wait_daemon() {
        local i
        for ((i = 0; i < 240; i++)); do
                upgradectl --json status >"$LAB_RESULTS/describe-crash.json" 2>/dev/null && return 0
                sleep 0.5
        done
        return 1
}
lab_check daemon-answers lab_wait_daemon || ok=false
lab_check describe-panic-kernel grep -Eq '"panic_kernel": ?true' "$LAB_RESULTS/describe-crash.json" ||
        ok=false
journalctl -b 0 -u upgraded.service --no-pager >"$LAB_RESULTS/journal-crash-upgraded.txt" 2>&1
lab_check staged-left-alone grep -q 'is staged; not reloaded on the crash kernel' \
        "$LAB_RESULTS/journal-crash-upgraded.txt" || ok=false
# The second update's record is still staged (the first one's is done).
lab_check record-still-staged sh -c 'grep -Elq "\"state\": ?\"staged\"" \
        /var/lib/upgraded/updates/*.json' || ok=false
lab_check nothing-loaded-here grep -qx 0 /sys/kernel/kexec_loaded || ok=false
if $ok; then
        lab_finish pass
else
        lab_finish fail lockdown-crash-kernel-checks-failed
fi
