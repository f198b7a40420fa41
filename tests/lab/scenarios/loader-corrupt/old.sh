# SPDX-License-Identifier: LGPL-2.1-or-later
# shellcheck shell=bash
#
# A verified handoff with a wrong staged digest, old kernel. One counter VM,
# so the host has state worth keeping. For this boot only (a runtime drop-in),
# upgraded.service runs the test build that flips one bit of the kernel
# segment's recorded digest; the installed daemon is untouched and is what
# runs again after the reset. The policy's default (no IOMMU here, AllowFast=no)
# is a verified handoff, which the dry run must confirm: purgatory then hashes
# the kernel segment, finds the mismatch, prints it and resets the machine.
. /lab-payload/scenarios/lib.sh
set -e

lab_check test-binary-not-installed sh -c "! grep -q upgraded-test-corrupt-digest \
        '$LAB_RESULTS/installed-files.txt'"
# Not below /run: Debian's initramfs mounts it noexec. The drop-in that
# uses it is in /run, so it is gone after the reset.
install -D -m 0755 "$LAB_TEST_BINARY" /usr/local/lib/upgraded-lab/upgraded-test-corrupt-digest
mkdir -p /run/systemd/system/upgraded.service.d
cat >/run/systemd/system/upgraded.service.d/50-lab-corrupt-digest.conf <<'CONF'
[Service]
ExecStart=
ExecStart=/usr/local/lib/upgraded-lab/upgraded-test-corrupt-digest
CONF
systemctl daemon-reload
systemctl restart upgraded.service
pid=$(systemctl show -p MainPID --value upgraded.service)
lab_check daemon-is-test-build sh -c "readlink /proc/$pid/exe | grep -q upgraded-test-corrupt-digest"

lab_start_counter_vm lab-counter-1
lab_wait_counters 60 180
lab_marker counter-before lab-counter-1 "$(lab_counter lab-counter-1)"

upgradectl stage "/boot/vmlinuz-$LAB_KERNEL_NEW" --initrd "/boot/initrd.img-$LAB_KERNEL_NEW" \
        --reuse-cmdline >"$LAB_RESULTS/stage.txt" 2>&1
lab_check image-loaded grep -qx 1 /sys/kernel/kexec_loaded
upgradectl commit --dry-run >"$LAB_RESULTS/commit-dry-run.txt" 2>&1 || true
lab_check dry-run-verified grep -qx 'Handoff: verified' "$LAB_RESULTS/commit-dry-run.txt"
lab_marker old-kernel-kexec method=upgraded-loader-corrupt-digest
upgradectl commit --wait >"$LAB_RESULTS/commit.txt" 2>&1 || true
