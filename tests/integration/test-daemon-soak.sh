#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Soak: many stage/commit/rollback cycles through the real daemon on a private bus, with two
# real TCG counter guests of a private libvirtd (daemon-vms-lib.sh), the recording kexec
# backend and the recording kexec trigger. Nothing may grow.
#
#   1. UPGRADED_SOAK_CYCLES (default 50) cycles on ONE daemon process. Each stages the kernel,
#      commits (both VMs paused and checkpointed by managed save, the handoff record synced,
#      the trigger fired) and rolls back: the trigger cannot write its record (a non-empty
#      directory stands at its path, so its rename fails), which is "systemd refused the
#      kexec" before the point of no return. Every 5th cycle a Cancel is sent as soon as the
#      first managed save image appears instead (it lands in the saves, or after them: the
#      update then ends failed as above). After each cycle: the update failed (or cancelled),
#      both VMs running, never paused, their counters continued, no managed save image and
#      an empty save directory, and `upgradectl commit --wait` ended within 30 s of the end
#      the record on disk shows (else it is stopped and the cycle counts as bad).
#      Measured per cycle: the daemon's open fds (/proc/PID/fd), VmRSS, VmHWM, threads, the
#      files and bytes under --root's /var/lib/upgraded (updates/, reports/, everything else)
#      and /run/upgraded, the sizes of the cycle's own record and report, and the cycle's time.
#      The daemon runs with [Reports] Keep=3: every finished update prunes the oldest beyond
#      it, so after cycle 3 the daemon holds 3 updates on disk and in memory, and the files
#      and memory must stay level from the warm-up on.
#   2. UPGRADED_SOAK_FULL (default cycles / 10) full updates: commit to the point of no
#      return, the daemon restarted "as the new kernel" restores both VMs (done), then
#      restarted as the old kernel again, which reads the Keep= records left.
#
# FAIL when something grows (after a warm-up of 5 cycles, the last 10 cycles against cycles
# 5-15; judged only with at least 25 cycles; docs/reliability.md, "Soak", has the figures):
#   - fds and threads: the last window's maximum above the early window's maximum;
#   - VmRSS: the last window's median more than 256 KiB above the early window's median;
#     VmHWM: more than 256 KiB above the early window's maximum (before Keep= applied within
#     one process, every update stayed in memory: about +150 KiB a cycle failed this);
#   - files: after each cycle, updates/ holds exactly the records of the newest Keep= updates
#     and reports/ the reports of the failed ones among them (a cancelled update has no
#     report, docs/report.md); any other file under /var/lib/upgraded or /run/upgraded
#     appearing or staying is growth; a record or report of the last window more than 10 %
#     (+ 256 bytes) bigger than the early ones too.
# usage: test-daemon-soak.sh UPGRADED UPGRADECTL BUS_CONF_IN BUS_POLICY MAKE_BZIMAGE VALIDATE SCHEMA COUNTER_BIN
set -uo pipefail

CYCLES=${UPGRADED_SOAK_CYCLES:-50}
FULL=${UPGRADED_SOAK_FULL:-$((CYCLES / 10))}
KEEP=3 # [Reports] Keep=: pruned at each start and after every finished update
UPGRADED_CONF=$'[Reports]\nKeep='$KEEP$'\n'
. "$(dirname "$0")/daemon-vms-lib.sh"
SAVE_DIR=/var/lib/libvirt/qemu/save
STATE=$ROOT/var/lib/upgraded
RUN=$ROOT/run/upgraded
BLOCKER=$RUN/kexec-requested.json
vms_setup
check "daemon starts" start_daemon old
t_soak=$SECONDS

state() { "$CTL" show "$1" -p State --value; }
now_ms() { date +%s%3N; }
# Neither VM paused nor shut off: both running.
both_running() { [ "$(V domstate vm-a)" = running ] && [ "$(V domstate vm-b)" = running ]; }
# Files of a directory tree as "PATH SIZE" lines, relative to it.
tree() { [ -d "$1" ] && (cd "$1" && find . -type f -printf '%P %s\n' | sort); }
sum() { awk '{ n++; b += $2 } END { print n + 0, b + 0 }'; } # "PATH SIZE" lines -> FILES BYTES
# The daemon's figures: FDS RSS_KIB HWM_KIB THREADS
proc_figures() {
        local fds
        fds=$(find "/proc/$DAEMON_PID/fd" -mindepth 1 -maxdepth 1 | wc -l)
        awk -v fds="$fds" '/^VmRSS:/ { r = $2 } /^VmHWM:/ { h = $2 } /^Threads:/ { t = $2 }
                END { print fds, r, h, t }' "/proc/$DAEMON_PID/status"
}
fd_targets() { find "/proc/$DAEMON_PID/fd" -mindepth 1 -maxdepth 1 -printf '%l\n' | sed 's/[0-9]\+/N/g' | sort | uniq -c; }

# wait_commit ID PID: waits for `commit --wait` (PID) to exit, COMMIT_RC its status. It reads
# the update's record on disk, not the bus: a call of ours would wake a follower that missed
# the end. Returns 1 (PID ended by SIGTERM) when the record ended 30 s before PID did not.
wait_commit() {
        local ended=
        while kill -0 "$2" 2>/dev/null; do
                if [ -z "$ended" ] && head -n 5 "$STATE/updates/$1.json" 2>/dev/null | grep -qE '"state": *"(failed|cancelled|done)"'; then
                        ended=$SECONDS
                fi
                if [ -n "$ended" ] && [ $((SECONDS - ended)) -ge 30 ]; then
                        kill "$2"
                        wait "$2"
                        COMMIT_RC=$?
                        return 1
                fi
                sleep 0.1
        done
        wait "$2"
        COMMIT_RC=$?
}

# ---- 1. rollbacks on one daemon process ----
# The trigger's rename onto a non-empty directory fails: the commit rolls back.
mkdir -p "$BLOCKER/keep"
printf 'cycle\tkind\tsecs\tfds\trss_kib\thwm_kib\tthreads\tupd_files\tupd_bytes\trep_files\trep_bytes\tother_files\tother_bytes\trun_files\tid\trecord_b\treport_b\n' >"$T/soak.tsv"
: >"$T/ids"
: >"$T/reported"
cancels_landed=0 cancels_late=0 cycle_failures=0
# The records and reports Keep= leaves: the newest KEEP updates', the failed ones' reports.
kept_expected() {
        tail -n "$KEEP" "$T/ids" >"$T/kept-ids"
        (sed 's|.*|updates/&.json|' "$T/kept-ids" && grep -xFf "$T/kept-ids" "$T/reported" | sed 's|.*|reports/&.json|') | sort
}
# Exactly those under updates/ and reports/; the prune follows the end on the daemon's loop:
# a few seconds for it.
kept_files() {
        local want
        want=$(kept_expected)
        for _ in $(seq 50); do
                [ "$(tree "$STATE" | grep -E '^(updates|reports)/' | cut -d' ' -f1)" = "$want" ] && return 0
                sleep 0.1
        done
        return 1
}
cycle() { # cycle N: one stage/commit/rollback; 0 when everything after it is as it must be
        local i=$1 kind=rollback id before_a before_b t0 rc commit_pid f slack secs st
        [ $((i % 5)) -eq 0 ] && kind=cancel
        t0=$(now_ms)
        id=$("$CTL" stage "/boot/vmlinuz-$NEW" --cmdline="root=/dev/vda1 ro") || {
                echo "# cycle $i: stage failed"
                return 1
        }
        echo "$id" >>"$T/ids"
        before_a=$(counter vm-a) before_b=$(counter vm-b)
        "$CTL" commit --wait >"$T/commit.out" 2>&1 &
        commit_pid=$!
        if [ "$kind" = cancel ]; then
                for _ in $(seq 3000); do
                        f=$(find "$SAVE_DIR" -name '*.save' -printf '%f\n' | head -n 1)
                        [ -n "$f" ] && break
                        kill -0 "$commit_pid" 2>/dev/null || break
                        sleep 0.01
                done
                "$CTL" cancel "$id" >"$T/cancel.out" 2>&1
        fi
        local bad=()
        wait_commit "$id" "$commit_pid" || bad+=("commit --wait still waiting 30 s after the update ended on disk; ended by SIGTERM")
        rc=$COMMIT_RC
        st=$(state "$id")
        secs=$(($(now_ms) - t0))
        secs=$((secs / 1000)).$(printf '%03d' $((secs % 1000)))
        # At most ~18.2 ticks a second pass, paused or not (+ the reads' own time).
        slack=$((${secs%.*} * 20 + 60))
        [ "$rc" -eq 1 ] || bad+=("commit --wait exit $rc, not 1")
        case $kind/$st in
        rollback/failed)
                "$CTL" show "$id" -p Error --value | grep -qE 'refused the kexec reboot|requesting the kexec reboot failed' ||
                        bad+=("error: $("$CTL" show "$id" -p Error --value)")
                grep -q 'VM vm-a (checkpoint): saved' "$T/commit.out" && grep -q 'VM vm-b (checkpoint): saved' "$T/commit.out" &&
                        grep -qE '^ *90% +handoff$' "$T/commit.out" || bad+=("not both VMs checkpointed before the handoff")
                ;;
        cancel/cancelled) cancels_landed=$((cancels_landed + 1)) ;;
        cancel/failed) cancels_late=$((cancels_late + 1)) ;;
        *) bad+=("$kind ended $st") ;;
        esac
        both_running || bad+=("vm-a $(V domstate vm-a), vm-b $(V domstate vm-b)")
        continued "$before_a" "$before_b" "$slack" >"$T/continued.out" || bad+=("counters: $(cat "$T/continued.out")")
        no_image vm-a vm-b || bad+=("a managed save image left")
        f=$(find "$SAVE_DIR" -mindepth 1 -printf '%f ')
        [ -z "$f" ] || bad+=("save directory: $f")
        # A failed update's report is on disk once it ended; a cancelled one has none (docs/report.md).
        if [ "$st" = failed ]; then
                echo "$id" >>"$T/reported"
                [ -s "$STATE/reports/$id.json" ] || bad+=("no report")
        else
                [ ! -e "$STATE/reports/$id.json" ] || bad+=("a report for a cancelled update")
        fi
        kept_files || bad+=("not the newest $KEEP records and their reports: $(tree "$STATE" | cut -d' ' -f1 | tr '\n' ' ')")
        local upd rep other run own_rec own_rep=0
        own_rec=$(stat -c %s "$STATE/updates/$id.json")
        [ "$st" != failed ] || own_rep=$(stat -c %s "$STATE/reports/$id.json")
        upd=$(tree "$STATE/updates" | sum) rep=$(tree "$STATE/reports" | sum)
        other=$(tree "$STATE" | grep -vE '^(updates|reports)/' | sum)
        run=$(tree "$RUN" | wc -l)
        read -r fds rss hwm thr < <(proc_figures)
        printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$i" "$kind" "$secs" "$fds" "$rss" "$hwm" "$thr" \
                "${upd// /$'\t'}" "${rep// /$'\t'}" "${other// /$'\t'}" "$run"$'\t'"$id"$'\t'"$own_rec"$'\t'"$own_rep" >>"$T/soak.tsv"
        echo "# cycle $i $kind ($st) ${secs} s: fds $fds, rss $rss KiB, hwm $hwm KiB, threads $thr;" \
                "updates/ ${upd/ / files } B, reports/ ${rep/ / files } B, other ${other/ / files } B;" \
                "run/ $run files; $(sed 's/^# //' "$T/continued.out" | head -n 1)"
        [ "$kind/$st" != cancel/cancelled ] || sed -n 's/^/#   cancel: /p' "$T/cancel.out" | head -n 2
        if [ ${#bad[@]} -gt 0 ]; then
                printf '#   BAD: %s\n' "${bad[@]}"
                sed 's/^/#   commit: /' "$T/commit.out"
                return 1
        fi
        return 0
}
read -r fds rss hwm thr < <(proc_figures)
echo "# the daemon before cycle 1 (no record yet): fds $fds, rss $rss KiB, hwm $hwm KiB, threads $thr"
rss_fresh=$rss
for ((i = 1; i <= CYCLES; i++)); do
        cycle "$i" || cycle_failures=$((cycle_failures + 1))
        [ "$i" -eq 1 ] && { fd_targets >"$T/fds-1.txt"; tree "$STATE" | grep -vE '^(updates|reports)/' >"$T/other-1.txt"; tree "$RUN" >"$T/run-1.txt"; }
        [ "$i" -eq 5 ] && fd_targets >"$T/fds-warm.txt"
done
check "$CYCLES cycles: every update rolled back, both VMs running and continued, no image ($cycle_failures bad)" \
        test "$cycle_failures" -eq 0
echo "# cancels: $cancels_landed landed in the commit (cancelled), $cancels_late came after it had failed"
check "the daemon survived every cycle" kill -0 "$DAEMON_PID"
fd_targets >"$T/fds-end.txt"
echo "# the daemon's fds after cycle 1 -> after warm-up (cycle 5) -> at the end:"
diff "$T/fds-1.txt" "$T/fds-warm.txt" | sed 's/^/#   1->5: /'
diff "$T/fds-warm.txt" "$T/fds-end.txt" | sed 's/^/#   5->end: /'

# The files: exactly one record and one report per update, nothing else left behind.
check "updates/ holds the records of the newest Keep=$KEEP of $(wc -l <"$T/ids") updates, reports/ the failed ones' reports, nothing more" \
        kept_files
tree "$STATE" | grep -vE '^(updates|reports)/' >"$T/other.txt"
check "nothing else under /var/lib/upgraded came or went after cycle 1 ($(wc -l <"$T/other.txt") files)" \
        test "$(cut -d' ' -f1 "$T/other.txt")" = "$(cut -d' ' -f1 "$T/other-1.txt")"
sed 's/^/#   other: /' "$T/other.txt"
tree "$RUN" >"$T/run.txt"
check "the same files under /run/upgraded as after cycle 1 ($(wc -l <"$T/run.txt"))" \
        test "$(cut -d' ' -f1 "$T/run.txt")" = "$(cut -d' ' -f1 "$T/run-1.txt")"
sed 's/^/#   run: /' "$T/run.txt"

# Growth, judged from the table.
python3 - "$T/soak.tsv" "$STATE" >"$T/growth.out" <<'PY'
import os, statistics, sys
rows = [l.rstrip('\n').split('\t') for l in open(sys.argv[1])]
head, rows = rows[0], rows[1:]
col = {h: i for i, h in enumerate(head)}
def vals(name, rs): return [float(r[col[name]]) for r in rs]
n = len(rows)
ends = [r for r in rows if r[col['kind']] == 'rollback'] or rows
ends = [ends[0], ends[-1]]
print(f"# first -> last rollback cycle ({ends[0][0]} -> {ends[1][0]}): fds {ends[0][col['fds']]} -> {ends[1][col['fds']]}, "
      f"rss {ends[0][col['rss_kib']]} -> {ends[1][col['rss_kib']]} KiB, "
      f"hwm {ends[0][col['hwm_kib']]} -> {ends[1][col['hwm_kib']]} KiB, "
      f"threads {ends[0][col['threads']]} -> {ends[1][col['threads']]}, "
      f"files under /var/lib/upgraded {int(ends[0][col['upd_files']]) + int(ends[0][col['rep_files']]) + int(ends[0][col['other_files']])}"
      f" -> {int(ends[1][col['upd_files']]) + int(ends[1][col['rep_files']]) + int(ends[1][col['other_files']])}, "
      f"bytes {int(ends[0][col['upd_bytes']]) + int(ends[0][col['rep_bytes']]) + int(ends[0][col['other_bytes']])}"
      f" -> {int(ends[1][col['upd_bytes']]) + int(ends[1][col['rep_bytes']]) + int(ends[1][col['other_bytes']])}")
secs = vals('secs', rows)
print(f"# cycle time: median {statistics.median(secs):.2f} s, min {min(secs):.2f} s, max {max(secs):.2f} s, total {sum(secs):.0f} s")
if n < 25:
    print(f"# growth: {n} cycles are too few to judge (25 at least)")
    sys.exit(0)
early, late = rows[4:15], rows[-10:]
bad = []
for name in ('fds', 'threads'):
    e, l = max(vals(name, early)), max(vals(name, late))
    print(f"# {name}: cycles 5-15 max {e:.0f}, last 10 max {l:.0f}")
    if l > e: bad.append(f"{name} grew: {e:.0f} -> {l:.0f}")
e, l = statistics.median(vals('rss_kib', early)), statistics.median(vals('rss_kib', late))
slope = (l - e) / (n - 5 - 10)
print(f"# VmRSS: cycles 5-15 median {e:.0f} KiB, last 10 median {l:.0f} KiB ({slope:+.1f} KiB/cycle)")
if l > e + 256: bad.append(f"VmRSS grew: {e:.0f} -> {l:.0f} KiB")
e, l = max(vals('hwm_kib', early)), max(vals('hwm_kib', late))
print(f"# VmHWM: cycles 5-15 max {e:.0f} KiB, last 10 max {l:.0f} KiB")
if l > e + 256: bad.append(f"VmHWM grew: {e:.0f} -> {l:.0f} KiB")
# The files under /var/lib/upgraded: as many and as big late as early (Keep= holds them).
def files(r): return sum(int(r[col[k]]) for k in ('upd_files', 'rep_files', 'other_files'))
def fbytes(r): return sum(int(r[col[k]]) for k in ('upd_bytes', 'rep_bytes', 'other_bytes'))
e, l = max(map(files, early)), max(map(files, late))
eb, lb = max(map(fbytes, early)), max(map(fbytes, late))
print(f"# files under /var/lib/upgraded: cycles 5-15 max {e} ({eb} B), last 10 max {l} ({lb} B)")
if l > e: bad.append(f"files grew: {e} -> {l}")
if lb > eb * 1.1 + 256: bad.append(f"bytes under /var/lib/upgraded grew: {eb} -> {lb}")
# Each cycle's own record and report: the same size late as early (the same kind of cycle).
for d, c in (('updates', 'record_b'), ('reports', 'report_b')):
    def size(r): return int(r[col[c]])
    e = statistics.median(size(r) for r in early if r[col['kind']] == 'rollback')
    l = statistics.median(size(r) for r in late if r[col['kind']] == 'rollback')
    print(f"# {d}/<id>.json of a rollback: cycles 5-15 median {e:.0f} B, last 10 median {l:.0f} B")
    if l > e * 1.1 + 256: bad.append(f"{d} per cycle grew: {e:.0f} -> {l:.0f} B")
for b in bad: print(f"# GROWTH: {b}")
sys.exit(1 if bad else 0)
PY
rc=$?
cat "$T/growth.out"
check "nothing grows over $CYCLES cycles (fds, threads, VmRSS, VmHWM, per-cycle files)" test "$rc" -eq 0
echo "# the table:"
column -t -s $'\t' "$T/soak.tsv" | sed 's/^/#   /'

# ---- 2. full updates: the point of no return, the new kernel, the old one again ----
rm -rf "$BLOCKER"
full_restored() { continued "$@" && no_image vm-a vm-b; }
for ((k = 1; k <= FULL; k++)); do
        t0=$(now_ms)
        id=$("$CTL" stage "/boot/vmlinuz-$NEW" --cmdline="root=/dev/vda1 ro")
        before_a=$(counter vm-a) before_b=$(counter vm-b)
        "$CTL" commit --wait >"$T/commit.out" 2>&1
        rc=$?
        check "full $k: commit --wait reaches the point of no return (exit $rc)" \
                bash -c "[ $rc -eq 0 ] && [ \"\$('$CTL' show '$id' -p Phase --value)\" = handoff-requested ] && grep -q '\"id\":\"$id\"' '$RUN/kexec-requested.json'"
        stop_daemon
        check "full $k: the new kernel's daemon starts" start_new_kernel_daemon "new$k"
        wait_update_ended "$id" 120
        check "full $k: the update is done" test "$(state "$id")" = "done"
        ms=$(($(now_ms) - t0))
        check "full $k: both running, counters continued, no image" \
                full_restored "$before_a" "$before_b" $((ms * 20 / 1000 + 60))
        stop_daemon
        check "full $k: the old kernel's daemon starts again" start_daemon "old$k"
        records=$(tree "$STATE/updates" | wc -l) kept=$((CYCLES + k < KEEP ? CYCLES + k : KEEP))
        check "full $k: it pruned the finished updates to Keep=$KEEP ($records records, $(tree "$STATE/reports" | wc -l) reports)" \
                test "$records" -eq "$kept"
        read -r fds rss hwm thr < <(proc_figures)
        echo "# full $k: $((ms / 1000)).$(printf '%03d' $((ms % 1000))) s; the restarted daemon: fds $fds, rss $rss KiB, hwm $hwm KiB, threads $thr;" \
                "$(((rss - rss_fresh) / records)) KiB per record it holds over the fresh daemon's $rss_fresh KiB"
done
if [ "$FULL" -gt 0 ]; then
        check "after $FULL full updates: one record and one report per update, nothing else" \
                test "$(tree "$STATE" | cut -d' ' -f1 | sed 's|^[a-z]*/[^/]*\.json$|ok|' | sort -u)" = ok
        check "updates/ holds what Keep=$KEEP keeps ($kept)" test "$(tree "$STATE/updates" | wc -l)" -eq "$kept"
fi
stop_daemon
echo "# soak: $CYCLES cycles + $FULL full updates in $((SECONDS - t_soak)) s; load average $(cut -d' ' -f1-3 /proc/loadavg)"

echo "1..$n"
[ "$failures" -eq 0 ]
