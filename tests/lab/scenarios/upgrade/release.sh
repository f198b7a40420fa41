# SPDX-License-Identifier: LGPL-2.1-or-later
# shellcheck shell=bash
#
# The release the update ran on (new.sh, on every release; sourced after kv_report is read):
#   rl_checks   the host is $LAB_RELEASE; upgraded resolves all its libraries (on trixie: it
#               is the build of trixie's compiler, not bookworm's binary); the report names
#               both kernels of the release's pair; upgraded.service is ordered after the
#               libvirt daemon this host runs (monolithic libvirtd or modular virtqemud),
#               which is active. Writes release.txt: os-release, systemd's version, the
#               libvirt units' states and systemd-analyze security of upgraded.service.
rl_os() {
        (. /etc/os-release && [ "$VERSION_CODENAME" = "$LAB_RELEASE" ])
}

rl_libraries() {
        ldd /usr/sbin/upgraded >"$LAB_RESULTS/ldd-upgraded.txt" 2>&1 &&
                ! grep -q 'not found' "$LAB_RESULTS/ldd-upgraded.txt"
}

# The compiler's mark in .comment: trixie's GCC is 14, bookworm's 12.
rl_built_for_trixie() {
        grep -aEq 'GCC: \(Debian 14\.' /usr/sbin/upgraded
}

# kv_report: new.sh's `upgradectl report --json`, on one line.
# shellcheck disable=SC2154
rl_report_kernel() { # rl_report_kernel old_kernel|new_kernel RELEASE
        grep -o "\"$1\":{[^}]*}" <<<"$kv_report" | grep -qF "\"version\":\"$2"
}

rl_after_libvirt() {
        systemctl show -p After --value upgraded.service | tr ' ' '\n' | grep -qx "$rl_libvirt"
}

rl_checks() {
        local ok=0 u
        rl_libvirt=$(lab_libvirt_unit)
        lab_marker libvirt-daemon unit="$rl_libvirt" release="$LAB_RELEASE"
        {
                cat /etc/os-release
                systemctl --version | head -n 1
                for u in libvirtd.service libvirtd.socket virtqemud.service virtqemud.socket; do
                        echo "$u enabled=$(systemctl is-enabled "$u" 2>&1) active=$(systemctl is-active "$u")"
                done
                systemd-analyze security --no-pager upgraded.service
        } >"$LAB_RESULTS/release.txt" 2>&1
        lab_check "release-is-$LAB_RELEASE" rl_os || ok=1
        lab_check upgraded-libraries-resolve rl_libraries || ok=1
        if [ "$LAB_RELEASE" = trixie ]; then
                lab_check upgraded-built-for-trixie rl_built_for_trixie || ok=1
        fi
        lab_check report-names-old-kernel rl_report_kernel old_kernel "$LAB_KERNEL_OLD" || ok=1
        lab_check report-names-new-kernel rl_report_kernel new_kernel "$LAB_KERNEL_NEW" || ok=1
        lab_check "libvirt-daemon-active-$rl_libvirt" systemctl -q is-active "$rl_libvirt" || ok=1
        lab_check upgraded-after-libvirt-daemon rl_after_libvirt || ok=1
        return $ok
}
