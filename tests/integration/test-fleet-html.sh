#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# `upgradectl report --html` (docs/fleet.md) rendered by a real browser: the daemon on a private
# bus serves two reports, the one of an update it just finished (recorded kexec) and a real
# lab run's report (tests/fuzz/report/seed-lab-measured.json, put where the daemon keeps its
# reports; GetReport reads it like its own). upgradectl writes each page; Debian's headless
# Chromium, with networking off and a throw-away profile, dumps its DOM and takes a
# screenshot. The test checks the DOM (one bar per VM, the phase labels, purgatory and boot
# gaps where the report has them), that the file refers to nothing outside itself, and the
# picture (its size, that it is not blank, that the bars' colours are in it).
#
# A third page, another lab run's report (seed-lab-critical-path.json), holds its critical path:
# the row in the timeline and the two tables, unit for unit; `upgradectl report` prints it too.
#
# usage: test-fleet-html.sh UPGRADED UPGRADECTL BUS_CONF_IN POLICY_CONF MAKE_BZIMAGE LAB_REPORT
#                           CHAIN_REPORT
set -uo pipefail

UPGRADED=$1 CTL=$2 BUS_CONF_IN=$3 POLICY=$4 MAKE_BZIMAGE=$5 LAB_REPORT=$6 CHAIN_REPORT=$7
WIDTH=1280 HEIGHT=1000

. "$(dirname "$0")/lib.sh"
test_begin fleet-html "private dbus-daemon, root-owned images" dbus-daemon busctl python3 chromium
DBUS_PID= DAEMON_PID=
. "$(dirname "$0")/fleet-lib.sh"
trap 'fleet_cleanup "$DAEMON_PID $DBUS_PID" "$T/chromium.log"' EXIT

# render NAME: NAME.html -> NAME.dom (the DOM after parsing) and NAME.png (WIDTHxHEIGHT).
# Chromium exits by itself when done; --headless runs it without a display.
render() {
        local flags=(--headless --no-sandbox --disable-gpu --disable-quic --no-first-run
                --disable-background-networking --disable-component-update --disable-sync
                --disable-extensions --hide-scrollbars --user-data-dir="$T/profile-$1"
                --window-size="$WIDTH,$HEIGHT")
        # Not on the test's bus: the browser has nothing to say to it.
        local env=(env -u DBUS_SYSTEM_BUS_ADDRESS -u DBUS_SESSION_BUS_ADDRESS)
        timeout 120 "${env[@]}" chromium "${flags[@]}" --dump-dom "file://$T/$1.html" \
                >"$T/$1.dom" 2>>"$T/chromium.log" &&
                timeout 120 "${env[@]}" chromium "${flags[@]}" --screenshot="$T/$1.png" \
                        "file://$T/$1.html" >>"$T/chromium.log" 2>&1
}

# picture NAME COLOUR...: the PNG is WIDTHxHEIGHT, not blank, and holds each colour (#rrggbb).
picture() {
        python3 - "$T/$1.png" "$WIDTH" "$HEIGHT" "${@:2}" <<'EOF'
import struct, sys, zlib
path, w_want, h_want, colours = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
data = open(path, "rb").read()
assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
pos, idat, ihdr = 8, b"", None
while pos < len(data):
    n, kind = struct.unpack(">I4s", data[pos:pos + 8])
    body = data[pos + 8:pos + 8 + n]
    if kind == b"IHDR": ihdr = struct.unpack(">IIBBBBB", body)
    if kind == b"IDAT": idat += body
    pos += 12 + n
w, h, depth, ctype = ihdr[:4]
assert (w, h) == (w_want, h_want), "size %dx%d, want %dx%d" % (w, h, w_want, h_want)
assert depth == 8 and ctype in (2, 6), "unexpected PNG format %d/%d" % (depth, ctype)
bpp = 3 if ctype == 2 else 4
raw, stride, rows, prev = zlib.decompress(idat), w * bpp, [], bytearray(w * bpp)
for y in range(h):                      # undo the PNG row filters (RFC 2083 §6)
    f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
    for i in range(stride):
        a = line[i - bpp] if i >= bpp else 0
        b, c = prev[i], prev[i - bpp] if i >= bpp else 0
        if f == 1: line[i] = (line[i] + a) & 255
        elif f == 2: line[i] = (line[i] + b) & 255
        elif f == 3: line[i] = (line[i] + (a + b) // 2) & 255
        elif f == 4:
            p = a + b - c; pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
    rows.append(bytes(line)); prev = line
seen, ink = {}, 0
for line in rows:
    for x in range(0, stride, bpp):
        px = line[x:x + 3]
        seen[px] = seen.get(px, 0) + 1
        ink += px != b"\xff\xff\xff"
share = ink / (w * h)
print("# %s: %dx%d, %.1f%% non-white, %d colours" % (path.rsplit("/", 1)[1], w, h, 100 * share, len(seen)))
assert share > 0.03, "nearly blank"
for c in colours:
    px = bytes.fromhex(c.lstrip("#"))
    assert seen.get(px, 0) >= 50, "colour %s (%d pixels) missing" % (c, seen.get(px, 0))
EOF
}

# dom NAME PYTHON-EXPR: the expression holds for the dumped DOM (d: its text).
dom() { python3 -c "import re,sys; d=open(sys.argv[1]).read(); sys.exit(0 if ($2) else 1)" "$T/$1.dom"; }

fleet_root
start_bus "$BUS_CONF_IN" "$POLICY"
check "the daemon starts" fleet_start_daemon start
check "an update through the recorded kexec and 'the new kernel'" fleet_update
LAB_ID=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["id"])' "$LAB_REPORT")
cp "$LAB_REPORT" "$ROOT/var/lib/upgraded/reports/$LAB_ID.json"
CHAIN_ID=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["id"])' "$CHAIN_REPORT")
cp "$CHAIN_REPORT" "$ROOT/var/lib/upgraded/reports/$CHAIN_ID.json"
check "report ID --html writes the critical path run's page" bash -c "'$CTL' report '$CHAIN_ID' --html >'$T/chain.html'"

check "report --html -o writes the page of the last update" "$CTL" report --html -o "$T/own.html"
check "report ID --html writes the lab run's page to stdout" bash -c "'$CTL' report '$LAB_ID' --html >'$T/lab.html'"
check "-o without --html is refused" bash -c "! '$CTL' report -o '$T/x.html' 2>/dev/null && [ ! -e '$T/x.html' ]"
for page in own lab chain; do
        check "$page: no URL, no script, no external reference in the file" \
                bash -c "! grep -qiE 'https?:|//|<script|src=|href=|@import|url\\(' '$T/$page.html'"
        check "$page: Chromium renders it (DOM and screenshot)" render "$page"
        check "$page: the DOM has the timeline SVG" dom "$page" "'<svg id=\"timeline\"' in d"
done

# Our own update: one VM ("test", libvirt's test driver). "The new kernel" is this machine's
# same boot, so there is no common time axis: no phases, the VM bar on the wall clock.
check "own: one bar per VM, named" dom own "len(re.findall(r'class=\"vm\" data-vm=\"', d)) == 1 and 'data-vm=\"test\"' in d"
check "own: says what is missing instead of drawing it" \
        dom own "'no phases: the kernels share no time axis' in d and 'no purgatory stamps on the axis' in d and '<td>timebase</td>' in d"
check "own: a picture of the right size, not blank, the VM bar drawn" picture own "#76b7b2"

# The lab run: two VMs, four phases, purgatory, five boot gaps, whiskers (+- 1.000 s).
check "lab: one bar per VM (2), each named" \
        dom lab "len(re.findall(r'class=\"vm\" data-vm=\"', d)) == 2 and 'data-vm=\"lab-counter-1\"' in d and 'data-vm=\"lab-counter-2\"' in d"
for phase in pre-handoff handoff boot-to-daemon post-boot; do
        check "lab: phase '$phase' drawn and labelled" \
                dom lab "'data-name=\"$phase\"' in d and re.search(r'>$phase</text>', d)"
done
check "lab: purgatory's verification slice (3.533 s, untrusted stamps)" \
        dom lab "'verify 3.533 s (untrusted stamps)' in d"
check "lab: the five largest boot gaps drawn, listed with what ended the first (2.224 s)" \
        dom lab "len(re.findall(r'<g class=\"boot-gap\">', d)) == 5 and re.search(r'<td class=\"n\">2.224 s</td><td class=\"n\">2.422 s</td><td>Freeing initrd memory: 14956K</td>', d)"
check "lab: uncertainty whiskers on the estimated times" \
        dom lab "len(re.findall(r'<g class=\"whisker\">', d)) >= 5"
check "lab: each VM's downtime with its +- and source" \
        dom lab "'140.980 s +- 1.000 (mixed)' in d and '138.040 s +- 1.000 (mixed)' in d"
check "lab: a picture of the right size with every kind of bar" \
        picture lab "#4e79a7" "#f28e2b" "#59a14f" "#e15759" "#9c755f" "#76b7b2"
# The critical path run: every unit of each side listed in its table, in the report's order,
# the chain's units that took time drawn in the timeline's row; the text report prints both.
units() { python3 -c 'import json,sys; print(" ".join(u["unit"] for u in (json.load(open(sys.argv[1]))["critical_path"][sys.argv[2]] or {}).get("units", [])))' "$CHAIN_REPORT" "$1"; }
table_units() { python3 -c 'import re,sys; d=open(sys.argv[1]).read(); t=d.split("id=\"" + sys.argv[2] + "\"", 1)[1].split("</table>", 1)[0]; print(" ".join(re.findall(r"<tr><td>([^<]+)</td>", t)))' "$T/chain.dom" "$1"; }
check "chain: the report has both sides (a real lab run)" test -n "$(units new_kernel)" -a -n "$(units old_kernel)"
check "chain: the new kernel's chain listed unit for unit" test "$(table_units critical-chain)" = "$(units new_kernel)"
check "chain: the old kernel's stops listed unit for unit" test "$(table_units old-kernel-stops)" = "$(units old_kernel)"
check "chain: the units that took time are bars in the 'Critical path' row" \
        dom chain "re.search(r'>Critical path</text>', d) and len(re.findall(r'<g class=\"unit-start\">', d)) == $(python3 -c 'import json,sys; print(sum(1 for u in json.load(open(sys.argv[1]))["critical_path"]["new_kernel"]["units"] if u["time_ns"] > 0))' "$CHAIN_REPORT")"
"$CTL" report "$CHAIN_ID" >"$T/chain.txt"
check "chain: upgradectl report prints the chain up to upgraded.service and the old kernel's stops" \
        bash -c "grep -q '^Critical chain on the new kernel, up to upgraded.service:' '$T/chain.txt' && grep -q '^Units the old kernel stopped after the reboot request' '$T/chain.txt' && grep -qE ' libvirtd.service\$' '$T/chain.txt'"
if [ -n "${UPGRADED_TEST_KEEP_HTML:-}" ]; then
        mkdir -p "$UPGRADED_TEST_KEEP_HTML" && cp "$T"/*.html "$T"/*.png "$UPGRADED_TEST_KEEP_HTML/"
fi

echo "1..$n"
[ "$failures" -eq 0 ]
