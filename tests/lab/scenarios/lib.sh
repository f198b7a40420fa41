# SPDX-License-Identifier: LGPL-2.1-or-later
# shellcheck shell=bash
#
# Helpers for lab scenarios (sourced by every phase script, in the lab host).
#
#   lab_marker EVENT [k=v ...]      print "UPGRADED-LAB: EVENT k=v" on the serial console;
#                                   the runner timestamps it with the host's clock
#   lab_log TEXT                    a line to the console and the phase log (no marker)
#   lab_check NAME COND-COMMAND...  run a check, record "check NAME ok|fail" (marker + checks.txt)
#   lab_start_counter_vm NAME       define and start a nested counter VM in libvirt
#   lab_start_mem_vm NAME MIB [TEMPLATE]
#                                   the same with memguest (vm-guest/, docs/vms.md): MIB MiB
#                                   of RAM filled with data it verifies itself (mg_verify,
#                                   mg_status...); TEMPLATE domain-shared.xml for shared
#                                   file-backed RAM (default domain.xml)
#   lab_mem_verify NAME             a memguest VM verifies its memory (mg_verify, 1200 s at
#                                   most): its line logged, a mem-verify marker with the guest's
#                                   ticks and seconds and the wall seconds; mg_verify's status
#   lab_wait_counters MIN [TIMEOUT] wait until every counter VM's counter is >= MIN
#   lab_counter NAME                print a counter VM's current counter value
#   lab_counter_vms                 list the counter VMs this host defined
#   lab_wait_vms_running [TIMEOUT]  wait until every counter VM is running and counting
#   lab_kexec_load                  kexec -l the new kernel with the running cmdline
#   lab_wait_report [TIMEOUT]       wait until upgraded wrote a report (default 300 s)
#   lab_stamps MODE IMPLS           purgatory's upgraded.stamps= in /proc/cmdline has mode MODE
#                                   (v|f|p), an implementation in IMPLS (a regex class, e.g.
#                                   "[saxg]" or "-") and ordered TSC values (stamps.txt + marker)
#   lab_policy_fast                 the drop-in an operator writes for a host whose machine-check
#                                   and EDAC counts are unknown: Mode=fast, AllowFast=yes
#                                   (check-config.txt), then restarts the daemon, which reads
#                                   its policy when it starts
#   lab_report_says MODE            the newest report names the kexec_load backend, handoff
#                                   mode MODE and result success
#   lab_check_loader_report MODE    checks after a handoff through our loader: a report was
#                                   written, says kexec_load, MODE and success; the daemon is
#                                   idle; saves `upgradectl report --json`. Fails if any failed
#   lab_critical_chain [UNIT FILE]  once the boot finished: `systemd-analyze critical-chain
#                                   UNIT` (default: the unit the newest report's chain ends
#                                   at, critical-chain-new.txt, "unit: UNIT" first) and
#                                   the old boot's unit stop entries (unit-stops-old.json), which
#                                   the runner holds the report's critical_path against; the
#                                   baseline names libvirt-guests.service for the benchmark
#   lab_collect                     copy journals (journal-old.txt, journal-new.txt), upgraded's
#                                   reports (reports/*.json), virsh list, failed units and each
#                                   unit's start and up time (boot-timeline-PHASE.txt) to results
#   lab_finish pass|fail [REASON]   collect, print "scenario-done", destroy the counter VMs,
#                                   power the lab host off (ends the run)
#   lab_next_boot                   the new kernel's phase of a scenario with AFTER_NEW=reboot
#                                   (lab.conf): collect, destroy the counter VMs (their
#                                   counters are measured on the update's two kernels only),
#                                   print "next-boot" and reboot; the runner boots the same
#                                   disks once more (phase again), whose again.sh finishes
#   lab_next_panic                  the new kernel's phase of a scenario with AFTER_NEW=panic
#                                   (lab.conf), once it staged again: collect, print
#                                   "next-panic" and crash the kernel (sysrq c); the crash
#                                   kernel runs phase "panic" (panic.sh), whose lab_finish
#                                   ends the run
#   lab_libvirt_unit                the libvirt daemon that runs the host's QEMU VMs: virtqemud.service
#                                   where the host uses libvirt's modular daemons (enabled, or
#                                   its socket), else libvirtd.service; restart it to make
#                                   libvirt read a new hook or qemu.conf
#   lab_unit_mono UNIT              a unit's ActiveEnterTimestampMonotonic (usec, 0: never)
#   lab_journal_mono MESSAGE_ID     the monotonic usec of this boot's last journal entry
#                                   with that MESSAGE_ID (empty when there is none)
#
# Files: results go under $LAB_RESULTS (/lab-results, the results disk the
# runner reads back); $LAB_PAYLOAD (/lab-payload) is the read-only payload
# disk; its lab.env (sourced here) sets LAB_KERNEL_OLD, LAB_KERNEL_NEW,
# LAB_RELEASE (bookworm|trixie), LAB_SCENARIO, LAB_COUNTER_ADDR, LAB_COUNTER_MAGIC,
# LAB_SAMPLE_INTERVAL.
# LAB_PHASE (old|panic|new|again) is set by the phase runner (guest/run-phase); panic is
# the crash kernel of the panic scenario (upgraded.panic=1 on its command line), again
# the old kernel booted once more after a refused handoff, or after the new kernel's
# reboot (AFTER_NEW=reboot, LAB_AFTER_NEW in lab.env).

LAB_PAYLOAD=${LAB_PAYLOAD:-/lab-payload}
. "$LAB_PAYLOAD/lab.env"
LAB_RESULTS=${LAB_RESULTS:-/lab-results}
LAB_STATE=/var/lib/upgraded-lab
LAB_CONSOLE=${LAB_CONSOLE:-/dev/ttyS0}
LAB_COUNTER_IMAGES=/var/lib/libvirt/images
# memguest's helpers (mg_*), where the payload has them (not in the sampler's copy).
[ -f "$LAB_PAYLOAD/vm-guest/memguest-lib.sh" ] && . "$LAB_PAYLOAD/vm-guest/memguest-lib.sh"

lab_marker() {
        # One write(2) per line so it is not interleaved with other writers.
        local line="UPGRADED-LAB: $*" up _
        printf '%s\n' "$line" >"$LAB_CONSOLE"
        read -r up _ </proc/uptime
        printf '%s %s\n' "$up" "$line" >>"$LAB_RESULTS/markers-${LAB_PHASE:-boot}.txt"
}

lab_log() {
        printf 'lab: %s\n' "$*" >"$LAB_CONSOLE"
        printf '%s\n' "$*" >>"$LAB_RESULTS/log-${LAB_PHASE:-boot}.txt"
}

lab_check() {
        local name=$1
        shift
        if "$@"; then
                lab_marker check "$name" ok
                echo "$name ok" >>"$LAB_RESULTS/checks.txt"
                return 0
        fi
        lab_marker check "$name" fail
        echo "$name fail" >>"$LAB_RESULTS/checks.txt"
        return 1
}

lab_counter_vms() {
        [ -f "$LAB_STATE/counter-vms" ] && cat "$LAB_STATE/counter-vms"
        return 0
}

# The counter of a VM, in decimal; fails when the VM is not there or the
# memory does not hold the counter's magic.
lab_counter() {
        local out
        out=$(virsh -q qemu-monitor-command --hmp "$1" "xp /2wx $LAB_COUNTER_ADDR" 2>/dev/null) || return 1
        out=${out//$'\r'/}
        # "0000000000000500: 0x43424c55 0x0000004c"
        set -- $out
        [ "${2:-}" = "$LAB_COUNTER_MAGIC" ] || return 1
        printf '%d\n' "${3:-x}" 2>/dev/null
}

lab_start_counter_vm() {
        local name=$1 img=$LAB_COUNTER_IMAGES/$1.img
        mkdir -p "$LAB_COUNTER_IMAGES" "$LAB_STATE"
        cp "$LAB_PAYLOAD/counter-vm/counter.img" "$img"
        sed -e "s|@NAME@|$name|g" -e "s|@IMAGE@|$img|g" \
                "$LAB_PAYLOAD/counter-vm/domain.xml" >"$LAB_STATE/$name.xml"
        virsh -q define "$LAB_STATE/$name.xml" >/dev/null || return 1
        virsh -q start "$name" >/dev/null || return 1
        echo "$name" >>"$LAB_STATE/counter-vms"
        lab_marker vm-started "$name"
}

lab_start_mem_vm() {
        local name=$1 mib=$2 template=${3:-domain.xml}
        mkdir -p "$LAB_COUNTER_IMAGES" "$LAB_STATE"
        mg_define "$name" "$LAB_PAYLOAD/vm-guest/memguest.img" "$LAB_PAYLOAD/vm-guest/$template" \
                "$mib" "$LAB_COUNTER_IMAGES" || return 1
        echo "$name" >>"$LAB_STATE/counter-vms"
        lab_marker vm-started "$name" memguest mib="$mib"
}

lab_mem_verify() {
        local out rc t0=$SECONDS
        out=$(mg_verify "$1" 1200)
        rc=$?
        lab_log "$1: $out"
        mg_status "$1"
        lab_marker mem-verify "$1" rc=$rc ticks="$MG_VERIFY_TICKS" \
                guest_s="$(mg_seconds "$MG_VERIFY_TICKS")" wall_s=$((SECONDS - t0))
        return $rc
}

lab_wait_counters() {
        local min=$1 timeout=${2:-120} t0=$SECONDS name v ok
        while [ $((SECONDS - t0)) -lt "$timeout" ]; do
                ok=true
                for name in $(lab_counter_vms); do
                        v=$(lab_counter "$name") || v=-1
                        [ "$v" -ge "$min" ] || ok=false
                done
                $ok && return 0
                sleep 0.5
        done
        lab_log "counters did not reach $min within ${timeout} s"
        return 1
}

# Every counter VM is running and its counter advances.
lab_wait_vms_running() {
        local timeout=${1:-300} t0=$SECONDS name a b ok
        while [ $((SECONDS - t0)) -lt "$timeout" ]; do
                ok=true
                for name in $(lab_counter_vms); do
                        [ "$(virsh -q domstate "$name" 2>/dev/null)" = running ] || ok=false
                done
                if $ok; then
                        for name in $(lab_counter_vms); do
                                a=$(lab_counter "$name") || a=-1
                                sleep 0.3
                                b=$(lab_counter "$name") || b=-1
                                [ "$a" -ge 0 ] && [ "$b" -gt "$a" ] || ok=false
                        done
                        $ok && return 0
                fi
                sleep 0.5
        done
        return 1
}

lab_kexec_load() {
        kexec -l "/boot/vmlinuz-$LAB_KERNEL_NEW" --initrd="/boot/initrd.img-$LAB_KERNEL_NEW" \
                --reuse-cmdline || return 1
        [ "$(cat /sys/kernel/kexec_loaded)" = 1 ] || return 1
        lab_marker kexec-loaded "$LAB_KERNEL_NEW"
}

lab_wait_report() {
        local i
        for ((i = 0; i < ${1:-300} * 2; i++)); do
                compgen -G '/var/lib/upgraded/reports/*.json' >/dev/null && return 0
                sleep 0.5
        done
        return 1
}

# E,V,J as 16 lowercase hex digits, then mode and implementation (docs/purgatory.md).
lab_policy_fast() {
        mkdir -p /etc/upgraded/upgraded.conf.d
        cat >/etc/upgraded/upgraded.conf.d/50-lab-fast.conf <<'CONF'
[Handoff]
Mode=fast
AllowFast=yes
CONF
        upgraded --check-config >"$LAB_RESULTS/check-config.txt" 2>&1
        systemctl restart upgraded.service
}

lab_stamps() {
        local s
        s=$(tr ' ' '\n' </proc/cmdline | sed -n 's/^upgraded\.stamps=//p' | tail -n 1)
        printf '%s\n' "$s" >"$LAB_RESULTS/stamps.txt"
        [[ $s =~ ^([0-9a-f]{16}),([0-9a-f]{16}),([0-9a-f]{16}),$1,$2$ ]] || return 1
        local e=$((16#${BASH_REMATCH[1]})) v=$((16#${BASH_REMATCH[2]})) j=$((16#${BASH_REMATCH[3]}))
        # Unsigned order through the shell's signed 64-bit integers is fine for TSC
        # values below 2^63 (years of uptime).
        lab_marker purgatory-stamps mode="$1" entry="$e" verified="$v" jump="$j" \
                verify_ticks=$((v - e))
        [ "$e" -gt 0 ] && [ "$v" -ge "$e" ] && [ "$j" -ge "$v" ]
}

# The lab image has no JSON tool: match the keys upgraded writes, with or
# without the space json-c puts after the colon.
lab_report_says() {
        local f
        f=$(compgen -G '/var/lib/upgraded/reports/*.json' | sort | tail -n 1)
        grep -Eq '"name": ?"kexec_load"' "$f" &&
                grep -Eq '"mode": ?"'"$1"'"' "$f" &&
                grep -Eq '"result": ?"success"' "$f"
}

lab_check_loader_report() {
        local ok=0
        lab_check report-written lab_wait_report || ok=1
        lab_check "report-kexec-load-$1" lab_report_says "$1" || ok=1
        lab_check daemon-idle sh -c 'upgradectl show -p State --value | grep -qx idle' || ok=1
        upgradectl report --json >"$LAB_RESULTS/upgradectl-report.json" 2>&1 || ok=1
        return $ok
}

lab_libvirt_unit() {
        local u
        for u in virtqemud.service virtqemud.socket; do
                if systemctl -q is-enabled "$u" 2>/dev/null || systemctl -q is-active "$u"; then
                        echo virtqemud.service
                        return 0
                fi
        done
        echo libvirtd.service
}

lab_critical_chain() {
        local unit=${1:-} out=${2:-critical-chain-new.txt} fin chain='' u
        if [ -z "$unit" ]; then
                # The newest report's new-kernel chain, target first.
                chain=$(upgradectl report --json | tr -d ' \n' |
                        sed -n 's/.*"new_kernel":{"target":\(.*\)"old_kernel":.*/\1/p' |
                        grep -o '"unit":"[^"]*"' | sed 's/.*:"//; s/"$//' | tac)
                unit=$(head -n 1 <<<"$chain")
                unit=${unit:-upgraded.service}
        fi
        for _ in $(seq 600); do
                fin=$(systemctl show -p FinishTimestampMonotonic --value)
                [ "${fin:-0}" != 0 ] && break
                sleep 0.5
        done
        { echo "unit: $unit"; systemd-analyze critical-chain --no-pager "$unit" 2>&1; } \
                >"$LAB_RESULTS/$out" || return 1
        # Every other unit of the report's chain: where systemd-analyze parts from the report
        # by design, the runner goes on comparing from there.
        if [ -n "$chain" ]; then
                mkdir -p "$LAB_RESULTS/critical-chain-units"
                for u in $(tail -n +2 <<<"$chain"); do
                        { echo "unit: $u"; systemd-analyze critical-chain --no-pager "$u" 2>&1; } \
                                >"$LAB_RESULTS/critical-chain-units/$u.txt"
                done
        fi
        # PID 1's "Stopping" and "Stopped" entries of the old boot.
        journalctl --no-pager -b -1 _PID=1 MESSAGE_ID=de5b426a63be47a7b6ac3eaac82e2f6f \
                MESSAGE_ID=9d1aaa27d60140bd96365438aad20286 -o json \
                >"$LAB_RESULTS/unit-stops-old.json" 2>&1
}

lab_collect() {
        journalctl --no-pager -o short-monotonic -b 0 >"$LAB_RESULTS/journal-$LAB_PHASE.txt" 2>&1
        # After the new kernel's reboot the previous boot is the new kernel's: its
        # journal-new.txt is there already, and journal-old.txt must stay the old one's.
        if [ "$LAB_PHASE" = again ] && [ -e "$LAB_RESULTS/journal-new.txt" ]; then
                :
        elif [ "$LAB_PHASE" != old ]; then
                journalctl --no-pager -o short-monotonic -b -1 >"$LAB_RESULTS/journal-old.txt" 2>&1
        fi
        journalctl --no-pager --list-boots >"$LAB_RESULTS/boots.txt" 2>&1
        if [ -d /var/lib/upgraded/reports ]; then
                mkdir -p "$LAB_RESULTS/reports"
                cp -a /var/lib/upgraded/reports/. "$LAB_RESULTS/reports/" 2>/dev/null
        fi
        virsh -q list --all >"$LAB_RESULTS/virsh-list-$LAB_PHASE.txt" 2>&1
        systemctl --no-pager --failed >"$LAB_RESULTS/failed-units-$LAB_PHASE.txt" 2>&1
        lab_boot_timeline >"$LAB_RESULTS/boot-timeline-$LAB_PHASE.txt" 2>&1
        return 0
}

# Where this boot's time went: when userspace started, and for every service,
# socket and target that ran, when it began activating and when it was up, in
# seconds of CLOCK_MONOTONIC (0 = this kernel's start), sorted by start.
# Read with systemctl show, which does not wait for the boot to finish as
# systemd-analyze does (lab_critical_chain waits for it).
lab_boot_timeline() {
        local units
        systemctl show -p InitRDTimestampMonotonic -p UserspaceTimestampMonotonic \
                -p FinishTimestampMonotonic
        echo "start_s   up_s      unit"
        units=$(systemctl list-units --all --plain --no-legend --type=service,socket,target |
                awk '{print $1}')
        # shellcheck disable=SC2086
        systemctl show -p Id -p InactiveExitTimestampMonotonic \
                -p ActiveEnterTimestampMonotonic $units |
                awk -F= '
                $1 == "Id" { id = $2 }
                $1 == "InactiveExitTimestampMonotonic" { s = $2 }
                $1 == "ActiveEnterTimestampMonotonic" { a = $2 }
                /^$/ { if (s > 0) printf "%9.3f %9.3f %s\n", s / 1e6, a / 1e6, id; s = a = 0 }
                END { if (s > 0) printf "%9.3f %9.3f %s\n", s / 1e6, a / 1e6, id }' |
                sort -n
}

lab_unit_mono() {
        systemctl show -p ActiveEnterTimestampMonotonic --value "$1" 2>/dev/null
}

lab_journal_mono() {
        journalctl -b 0 -o export MESSAGE_ID="$1" 2>/dev/null |
                sed -n 's/^__MONOTONIC_TIMESTAMP=//p' | tail -n 1
}

lab_next_boot() {
        local vm
        lab_collect
        for vm in $(lab_counter_vms); do
                virsh -q destroy "$vm" >/dev/null 2>&1
        done
        # The sampler of the next boot has no VM to sample.
        mv "$LAB_STATE/counter-vms" "$LAB_STATE/counter-vms.$LAB_PHASE" 2>/dev/null
        lab_marker next-boot phase="$LAB_PHASE"
        sync
        umount "$LAB_RESULTS" 2>/dev/null
        systemctl --no-block reboot
}

lab_next_panic() {
        lab_collect
        lab_marker next-panic phase="$LAB_PHASE"
        sync
        umount "$LAB_RESULTS" 2>/dev/null
        # On the boot CPU, as in the panic scenario: after a panic elsewhere the boot CPU
        # stays parked in the dead kernel and may wake to reset the host (docs/loader.md,
        # "The boot CPU"), which would make this phase's verdict a matter of luck.
        taskset -c 0 sh -c 'echo c >/proc/sysrq-trigger'
}

lab_finish() {
        local status=$1 reason=${2:-}
        reason=${reason// /_}
        local vm
        lab_collect
        printf '%s %s\n' "$status" "$reason" >"$LAB_RESULTS/guest-verdict.txt"
        lab_marker scenario-done status="$status" phase="$LAB_PHASE" ${reason:+reason="$reason"}
        # The run is over: the VMs need no saving on the way down.
        for vm in $(lab_counter_vms); do
                virsh -q destroy "$vm" >/dev/null 2>&1
        done
        sync
        umount "$LAB_RESULTS" 2>/dev/null
        systemctl --no-block poweroff
}
