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

# Whether the host's QEMU offers the migration mode cpr-reboot (keep-ram's supported form on
# QEMU >= 8.2, docs/lab.md): asked of QMP on a running counter VM (its schema's MigMode
# values), not inferred from a version. Recorded, not checked: keep-ram does not use it yet.
rl_qmp_cpr() {
        local vm schema version offered=no
        vm=$(lab_counter_vms | head -n 1)
        [ -n "$vm" ] || return 0
        schema=$(virsh qemu-monitor-command "$vm" '{"execute":"query-qmp-schema"}' 2>&1)
        version=$(virsh qemu-monitor-command "$vm" '{"execute":"query-version"}' 2>&1 |
                grep -o '"qemu":{[^}]*}')
        version=$(for k in major minor micro; do
                grep -o "\"$k\": *[0-9]*" <<<"$version" | grep -o '[0-9]*$'
        done | paste -sd. -)
        grep -q '"cpr-reboot"' <<<"$schema" && offered=yes
        virsh qemu-monitor-command "$vm" '{"execute":"query-migrate-parameters"}' \
                >"$LAB_RESULTS/qmp-migrate-parameters.json" 2>&1
        lab_marker qmp-cpr-reboot offered=$offered qemu="$version" vm="$vm"
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
        rl_qmp_cpr
        return $ok
}
