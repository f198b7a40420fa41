# SPDX-License-Identifier: LGPL-2.1-or-later
"""A real kexec between Debian's arm64 cloud kernels in qemu-system-aarch64 (TCG),
shared by tests/test-loader-arm64-qemu.py and tests/bench-loader-arm64-tcg.py.

The old kernel (linux-image-6.1.0-47-cloud-arm64) boots -M virt
-cpu max,pauth-impdef=on directly (-kernel) or through UEFI (QEMU_EFI.fd) on a
busybox initramfs that holds the new kernel's Image (6.1.0-57), a small initrd
for it, kexec-tools' arm64 binary and, when given, our arm64 loader-tool. Its
/init loads the new kernel the way the boot's `e2e.case=` asks (kexec-tools,
verified or -i; our loader, verified, fast, or with a segment corrupted after
hashing), prints a mark and runs `kexec -e`. The host reads the serial console
line by line and timestamps each line as it arrives (the external clock).

Debian packages are fetched once with `apt-get download` and unpacked into
CACHE/<package>_<version>/ (the cache is keyed by the version the archive has
now: a new upload is a new directory). Debian's arm64 kexec-tools links
libxenctrl, which pulls a dozen Xen libraries; the initramfs gets a stand-in
(tests/arm64-e2e-xenctrl.c) whose xc_interface_open() fails, which is what
kexec-tools sees on a host without Xen."""
import os
import re
import resource
import select
import shutil
import stat
import subprocess
import tempfile
import time

OLD_PKG = "linux-image-6.1.0-47-cloud-arm64"
NEW_PKG = "linux-image-6.1.0-57-cloud-arm64"
BUSYBOX_PKG = "busybox-static"
KEXEC_PKG = "kexec-tools"
EFI_FIRMWARE = "/usr/share/qemu-efi-aarch64/QEMU_EFI.fd"
LIB_DIRS = ["/usr/aarch64-linux-gnu/lib", "/usr/lib/aarch64-linux-gnu", "/lib/aarch64-linux-gnu"]
CONSOLE = "console=ttyAMA0"
# The new kernel: earlycon so its banner is printed at once (the external clock's
# end point), panic=-1 so a failure resets instead of hanging.
NEW_CMDLINE = CONSOLE + " earlycon panic=-1 rdinit=/init e2e.new=1"
MARK_EXEC = "E2E: kexec -e"
MARK_LOADED = "E2E: loaded"
MARK_LOAD_FAILED = "E2E: load failed"
MARK_SKIP = "E2E: case not supported"

# The old kernel's /init. `e2e.case=` names how the new kernel is loaded.
OLD_INIT = r"""#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
export LD_LIBRARY_PATH=/lib
case=$(sed -n 's/.*e2e\.case=\([^ ]*\).*/\1/p' /proc/cmdline)
new="@NEW_CMDLINE@"
echo "E2E: case $case on $(uname -r)"
[ -x /sbin/e2e-probe ] && /sbin/e2e-probe "$case"
case "$case" in
kexec-verified) kexec -l /boot/Image --initrd=/boot/new.cpio --append="$new" ;;
kexec-fast) kexec -l -i /boot/Image --initrd=/boot/new.cpio --append="$new" ;;
ours-verified|ours-fast|ours-corrupt)
	[ -x /sbin/loader-tool ] || { echo "@MARK_SKIP@"; poweroff -f; }
	mode=verified; extra=
	[ "$case" = ours-fast ] && mode=fast
	[ "$case" = ours-corrupt ] && extra=--test-corrupt-digest
	loader-tool load --mode $mode $extra --initrd /boot/new.cpio --cmdline "$new" /boot/Image
	;;
*) false ;;
esac
if [ $? -ne 0 ]; then
	echo "@MARK_LOAD_FAILED@"
	poweroff -f
fi
echo "@MARK_LOADED@"
echo "@MARK_EXEC@"
/sbin/counter
kexec -e
echo "@MARK_LOAD_FAILED@: kexec -e returned"
poweroff -f
"""

# The new kernel's /init, should it get that far: say so and stop.
NEW_INIT = """#!/bin/busybox sh
/bin/busybox mount -t proc proc /proc
echo "E2E: new kernel init $(/bin/busybox uname -r): $(/bin/busybox cat /proc/cmdline)"
/bin/busybox poweroff -f
"""


class Skip(Exception):
    """The test cannot run here (no QEMU, no cache and no archive)."""


def check_cache_dir(path):
    """Root unpacks packages here and boots what it finds: the directory must be
    ours and writable by nobody else."""
    os.makedirs(path, mode=0o755, exist_ok=True)
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o022:
        raise Skip("cache directory '%s' is not a directory owned by us and writable only "
                   "by us: refusing it" % path)


def archive_versions(pkgs):
    """{package: candidate version} of the arm64 packages in the configured
    archive (one apt-cache run: each costs seconds); absent ones are left out."""
    r = subprocess.run(["apt-cache", "show", "--no-all-versions"] + [p + ":arm64" for p in pkgs],
                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    return dict(re.findall(r"^Package: (\S+)\n(?:.+\n)*?Version: (\S+)$", r.stdout, re.M))


def fetch(cache, pkg, version):
    """CACHE/<pkg>_<version>/ holding the unpacked arm64 package, downloaded
    once; without the archive (version None), the newest cached version.
    Returns (dir, version)."""
    if version is None:
        have = sorted(d for d in os.listdir(cache) if d.startswith(pkg + "_"))
        if not have:
            raise Skip("%s:arm64 is neither in the archive nor in %s" % (pkg, cache))
        d = have[-1]
        return os.path.join(cache, d), d.split("_", 1)[1].replace("%3a", ":")
    d = os.path.join(cache, "%s_%s" % (pkg, version.replace(":", "%3a")))
    if os.path.isdir(d):
        return d, version
    with tempfile.TemporaryDirectory(dir=cache, prefix=".fetch.") as tmp:
        os.chmod(tmp, 0o755)  # apt's download user writes here
        r = subprocess.run(["apt-get", "download", "%s:arm64=%s" % (pkg, version)], cwd=tmp,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        debs = [f for f in os.listdir(tmp) if f.endswith(".deb")]
        if r.returncode != 0 or len(debs) != 1:
            raise Skip("apt-get download %s:arm64 failed:\n%s" % (pkg, r.stdout))
        root = os.path.join(tmp, "root")
        subprocess.run(["dpkg-deb", "-x", os.path.join(tmp, debs[0]), root], check=True)
        os.rename(root, d)
    return d, version


def kernel_release(pkg):
    return pkg[len("linux-image-"):]


def needed(path):
    """The DT_NEEDED names of an ELF file."""
    out = subprocess.run(["readelf", "-d", path], check=True, stdout=subprocess.PIPE,
                         text=True).stdout
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)


def library_closure(binaries, provided):
    """{soname: path} for every library the binaries need, found in provided
    ({soname: path}) or LIB_DIRS; raises Skip for a missing one."""
    found, todo = {}, list(binaries)
    while todo:
        for name in needed(todo.pop()):
            if name in found:
                continue
            path = provided.get(name) or next(
                (os.path.join(d, name) for d in LIB_DIRS if os.path.exists(os.path.join(d, name))),
                None)
            if path is None:
                raise Skip("arm64 library %s not found (tools/install-deps arm64)" % name)
            found[name] = os.path.realpath(path)
            todo.append(found[name])
    return found


class Cpio:
    """An uncompressed newc archive (the kernel unpacks it without a
    decompressor), built in memory, device nodes included, no root needed."""

    def __init__(self):
        self.data = bytearray()
        self.ino = 1

    def _entry(self, name, mode, body=b"", rdev=(0, 0)):
        fields = [self.ino, mode, 0, 0, 1, 0, len(body), 0, 0, rdev[0], rdev[1],
                  len(name) + 1, 0]
        self.ino += 1
        self.data += b"070701" + b"".join(b"%08x" % f for f in fields) + name.encode() + b"\0"
        self.data += bytes(-len(self.data) % 4) + body + bytes(-len(body) % 4)

    def dir(self, name):
        self._entry(name, stat.S_IFDIR | 0o755)

    def file(self, name, body, mode=0o644):
        self._entry(name, stat.S_IFREG | mode, bytes(body))

    def symlink(self, name, target):
        self._entry(name, stat.S_IFLNK | 0o777, target.encode())

    def chardev(self, name, major, minor):
        self._entry(name, stat.S_IFCHR | 0o600, rdev=(major, minor))

    def bytes(self):
        self._entry("TRAILER!!!", 0)
        return bytes(self.data) + bytes(-len(self.data) % 512)


def base_cpio(busybox, init):
    c = Cpio()
    for d in ("bin", "sbin", "lib", "boot", "dev", "proc", "sys", "tmp"):
        c.dir(d)
    c.chardev("dev/console", 5, 1)
    with open(busybox, "rb") as f:
        c.file("bin/busybox", f.read(), 0o755)
    c.symlink("bin/sh", "busybox")
    c.file("init", init.encode(), 0o755)
    return c


def build_initramfs(work, kernels, busybox_dir, kexec_dir, xenctrl, counter, loader_tool=None):
    """WORK/old.cpio: busybox, kexec, its libraries (libxenctrl's stand-in), the
    counter tool (tests/arm64-e2e-counter.c), the new kernel's Image and
    initrd, and loader-tool when given. Returns its path and the initrd's size."""
    busybox = os.path.join(busybox_dir, "bin/busybox")
    new = base_cpio(busybox, NEW_INIT).bytes()
    init = OLD_INIT.replace("@NEW_CMDLINE@", NEW_CMDLINE)
    for name in ("MARK_SKIP", "MARK_LOAD_FAILED", "MARK_LOADED", "MARK_EXEC"):
        init = init.replace("@%s@" % name, globals()[name])
    c = base_cpio(busybox, init)
    kexec = os.path.join(kexec_dir, "sbin/kexec")
    binaries = {"sbin/kexec": kexec, "sbin/counter": counter}
    if loader_tool:
        binaries["sbin/loader-tool"] = loader_tool
    libs = library_closure(binaries.values(), {"libxenctrl.so.4.17": xenctrl})
    for name, path in list(binaries.items()) + [("lib/" + n, p) for n, p in libs.items()]:
        with open(path, "rb") as f:
            c.file(name, f.read(), 0o755)
    c.file("boot/new.cpio", new)
    with open(os.path.join(kernels[NEW_PKG], "boot", "vmlinuz-" + kernel_release(NEW_PKG)),
              "rb") as f:
        c.file("boot/Image", f.read())
    path = os.path.join(work, "old.cpio")
    with open(path, "wb") as f:
        f.write(c.bytes())
    return path, len(new)


def prepare(cache, xenctrl, counter, loader_tool=None, work=None):
    """Fetches what the guests need; returns a dict of paths and versions."""
    if not shutil.which("qemu-system-aarch64"):
        raise Skip("qemu-system-aarch64 not installed")
    check_cache_dir(cache)
    env = {"work": work, "versions": {}, "kernels": {}}
    dirs = {}
    pkgs = (OLD_PKG, NEW_PKG, BUSYBOX_PKG, KEXEC_PKG)
    archive = archive_versions(pkgs)
    for pkg in pkgs:
        dirs[pkg], env["versions"][pkg] = fetch(cache, pkg, archive.get(pkg))
    env["kernels"] = {p: dirs[p] for p in (OLD_PKG, NEW_PKG)}
    env["old_image"] = os.path.join(dirs[OLD_PKG], "boot", "vmlinuz-" + kernel_release(OLD_PKG))
    env["initramfs"], env["new_initrd_size"] = build_initramfs(
        work, env["kernels"], dirs[BUSYBOX_PKG], dirs[KEXEC_PKG], xenctrl, counter, loader_tool)
    img = os.path.join(dirs[NEW_PKG], "boot", "vmlinuz-" + kernel_release(NEW_PKG))
    env["new_image_size"] = os.path.getsize(img)
    return env


def qemu_argv(env, case, uefi, smp=1):
    argv = ["qemu-system-aarch64", "-M", "virt", "-cpu", "max,pauth-impdef=on", "-smp", str(smp),
            "-m", "1024", "-display", "none", "-monitor", "none", "-nic", "none",
            "-no-reboot", "-serial", "stdio", "-kernel", env["old_image"],
            "-initrd", env["initramfs"],
            "-append", "%s panic=-1 rdinit=/init e2e.case=%s" % (CONSOLE, case)]
    if uefi:
        argv += ["-bios", EFI_FIRMWARE]
    return argv


def boot(env, case, uefi, stop, timeout=240, smp=1):
    """Boots the old kernel for CASE on SMP CPUs and reads the serial console until
    stop(lines) is true, QEMU exits, or TIMEOUT s pass. Returns (lines as
    [(host monotonic seconds, text)], QEMU's exit code or None if it was
    stopped, t0 = when QEMU was started, QEMU's CPU seconds)."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    p = subprocess.Popen(qemu_argv(env, case, uefi, smp), stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    lines, buf, rc = [], b"", None
    try:
        while True:
            left = t0 + timeout - time.monotonic()
            if left <= 0:
                lines.append((time.monotonic(), "E2E-HOST: timeout after %d s" % timeout))
                break
            ready, _, _ = select.select([p.stdout], [], [], min(left, 1.0))
            if not ready:
                continue
            chunk = os.read(p.stdout.fileno(), 65536)
            now = time.monotonic()
            if not chunk:  # QEMU closed its output: it is exiting
                try:
                    p.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    pass
                break
            buf += chunk
            *done, buf = buf.split(b"\n")
            lines += [(now, l.decode(errors="replace").rstrip("\r")) for l in done]
            if stop(lines):
                break
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        else:
            rc = p.returncode
        if buf:
            lines.append((time.monotonic(), buf.decode(errors="replace")))
    ru2 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = ru2.ru_utime + ru2.ru_stime - ru.ru_utime - ru.ru_stime
    return lines, rc, t0, cpu


def banner_re(pkg, version):
    """The banner of PKG's kernel, with the Debian version of the package."""
    return re.compile(r"Linux version %s .*Debian %s " %
                      (re.escape(kernel_release(pkg)), re.escape(version.split(":")[-1])))


def find(lines, pattern, after=None):
    """The first (time, text) matching pattern, after the line AFTER if given."""
    start = lines.index(after) + 1 if after else 0
    rx = re.compile(pattern) if isinstance(pattern, str) else pattern
    return next((l for l in lines[start:] if rx.search(l[1])), None)


CPUS_UP_RE = re.compile(r"smp: Brought up \d+ nodes?, (\d+) CPUs?")


def new_kernel_up(env, cpus=False):
    """A stop() for boot(): the new kernel printed its banner and command line
    (and, with cpus, how many CPUs it brought up)."""
    rx = banner_re(NEW_PKG, env["versions"][NEW_PKG])

    def stop(lines):
        b = find(lines, rx)
        if b is None or find(lines, r"Kernel command line:", b) is None:
            return False
        return not cpus or find(lines, CPUS_UP_RE, b) is not None
    return stop


STAMPS_RE = re.compile(r"upgraded\.stamps=([0-9a-f]{16}),([0-9a-f]{16}),([0-9a-f]{16}),"
                       r"([vfp-]),(.),([0-9a-f]{8}),([0-9a-f]{2}),([0-9a-f]{2})")


def stamps(cmdline_line):
    """(E, V, J in seconds, mode, impl, CPUs that hashed, CPUs left on) from the
    new kernel's command line, or None."""
    m = STAMPS_RE.search(cmdline_line)
    if not m:
        return None
    hz = int(m.group(6), 16)
    if not hz:
        return None
    e, v, j = (int(m.group(i), 16) / hz for i in (1, 2, 3))
    return e, v, j, m.group(4), m.group(5), int(m.group(7), 16), int(m.group(8), 16)


def summarize(env, lines):
    """What one handoff shows on the console, by the external clock:
    exec (the mark before `kexec -e`), starting (kexec_core's last line),
    banner and cmdline of the new kernel, the stamps (seconds of CNTVCT_EL0),
    the CPUs the new kernel brought up, and the mismatch line. Missing ones
    are None."""
    s = {"exec": find(lines, re.escape(MARK_EXEC))}
    s["starting"] = find(lines, r"kexec_core: Starting new kernel", s["exec"]) if s["exec"] \
        else None
    s["banner"] = find(lines, banner_re(NEW_PKG, env["versions"][NEW_PKG]))
    s["cmdline"] = find(lines, r"Kernel command line:", s["banner"]) if s["banner"] else None
    s["stamps"] = stamps(s["cmdline"][1]) if s["cmdline"] else None
    up = find(lines, CPUS_UP_RE, s["banner"]) if s["banner"] else None
    s["cpus_up"] = int(CPUS_UP_RE.search(up[1]).group(1)) if up else None
    c = find(lines, r"^E2E: counter [0-9a-f]{16} [0-9a-f]{8}$", s["exec"]) if s["exec"] \
        else None
    # The counter as the host read it: (host seconds, guest counter seconds).
    s["counter"] = (c[0], int(c[1].split()[2], 16) / int(c[1].split()[3], 16)) \
        if c and int(c[1].split()[3], 16) else None
    s["mismatch"] = find(lines, r"upgraded purgatory: .*(mismatch|non-zero byte).*resetting")
    s["old_banner"] = find(lines, banner_re(OLD_PKG, env["versions"][OLD_PKG]))
    s["skip"] = find(lines, re.escape(MARK_SKIP))
    s["load_failed"] = find(lines, re.escape(MARK_LOAD_FAILED))
    return s
