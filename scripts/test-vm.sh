#!/usr/bin/env bash
# test-vm.sh: run pyexec's jail suites and a `pyexec serve` smoke test on a
# cgroup v2 only host, as root, in a container-like cgroup namespace and
# rootless. `make test-vm` runs it.
#
# The host boots Debian's stock kernel (linux-image-amd64, unpacked from the
# .deb that `apt-get download` fetches) in QEMU. The guest's root file system
# is this machine's own / shared read-only over 9p under a tmpfs overlay, so
# the guest has the same Go, Python and libraries; only cgroup2 is mounted at
# /sys/fs/cgroup, laid out as systemd lays it out (init.scope, system.slice,
# one delegated cgroup per service). The work directory is shared
# read-write: it carries the binaries in and the logs out. The guest side is
# scripts/vm/init.sh (PID 1) and scripts/vm/checks.sh (the checks).
#
# Needs root, a Debian-like host (apt), Go and /usr/bin/python3. Missing
# Debian packages (qemu-system-x86 and a few tools) are installed with apt.
# Nothing is downloaded but Debian packages; the guest has no network.
#
# Environment:
#   TESTVM_DIR   work directory (default /tmp/testvm); logs end up in $TESTVM_DIR/out
#   SUITES       Go packages run as root (default "e2e sandbox pool engine.fleet engine.executions
#                engine.sessions engine sandbox.cgroups", the longest first; a dot stands for a
#                slash: engine.executions is internal/engine/executions)
#   PARTS        which groups of checks run (default "root container rootless restarts"); the
#                suites of SUITES run in part root, so time one with SUITES=pool PARTS=root
#   ACCEL        auto | kvm | tcg (auto: KVM when /dev/kvm can run a stock kernel)
#   VM_CPUS      vCPUs (default: nproc); VM_MEM guest memory (default 8G)
#   VM_CPU       the CPU model QEMU emulates under TCG (default max; NumPy's wheels need
#                SSE4.2, so not qemu64)
#   VM_TIMEOUT   seconds before the VM is stopped (default 3600), every boot included
#   VM_STALL     seconds of a silent guest console (no heartbeat, no kernel line) before the VM
#                is stopped as stuck (default 600); it is booted once more when at least
#                VM_RETRY_MIN seconds (default 2100) of VM_TIMEOUT are left
#   SUITE_TIMEOUT  seconds one Go suite may take in the guest (default 1800; the
#                suites run side by side, so each takes longer than alone)
#   SUITE_JOBS   how many Go suites run at once in the guest (default 1: two at once
#                failed on 2026-11-29, see docs/testing.md; the longest are first in SUITES)
# Exit status: 0 when every check ran and passed; 1 when one failed or the
# guest did not finish; 2 when the host cannot run the VM.
set -euo pipefail

SRC=$(cd "$(dirname "$0")/.." && pwd)
W=${TESTVM_DIR:-/tmp/testvm}
SUITES=${SUITES-"e2e sandbox pool engine.fleet engine.executions engine.sessions engine sandbox.cgroups"}
PARTS=${PARTS-"root container rootless restarts"}
ACCEL=${ACCEL:-auto}
VM_CPUS=${VM_CPUS:-$(nproc)}
VM_MEM=${VM_MEM:-8G}
VM_CPU=${VM_CPU:-max}
VM_TIMEOUT=${VM_TIMEOUT:-3600}
VM_STALL=${VM_STALL:-600}
VM_RETRY_MIN=${VM_RETRY_MIN:-2100}
SUITE_TIMEOUT=${SUITE_TIMEOUT:-1800}
SUITE_JOBS=${SUITE_JOBS:-1}

t0=$(date +%s)
log() { echo "[test-vm $(($(date +%s) - t0))s] $*"; }
die() { echo "test-vm: $*" >&2; exit 2; }

[ "$(id -u)" = 0 ] || die "run as root (QEMU's 9p export of / and the guest's checks need it)"
case $W in /*) ;; *) die "TESTVM_DIR must be an absolute path" ;; esac
command -v go > /dev/null || export PATH=/usr/local/go/bin:$PATH
command -v go > /dev/null || die "Go is needed"
[ -x /usr/bin/python3 ] || die "/usr/bin/python3 is needed (the jails run it)"
mkdir -p "$W"

# --- 1. host packages -------------------------------------------------------
apt_updated=no
apt_update() {
  [ $apt_updated = yes ] && return
  timeout 600 apt-get update -q >> "$W/apt.log" 2>&1 || die "apt-get update failed (see $W/apt.log)"
  apt_updated=yes
}
need=()
for p in qemu-system-x86 busybox-static kmod cpio jq curl util-linux; do
  dpkg -s "$p" > /dev/null 2>&1 || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  log "installing ${need[*]}"
  apt_update
  DEBIAN_FRONTEND=noninteractive timeout 900 apt-get install -y -q --no-install-recommends "${need[@]}" \
    >> "$W/apt.log" 2>&1 || die "installing ${need[*]} failed (see $W/apt.log)"
fi

# --- 2. the kernel: Debian's linux-image-amd64, unpacked --------------------
if ! ls "$W"/kernel/boot/vmlinuz-* > /dev/null 2>&1; then
  apt-cache show linux-image-amd64 > /dev/null 2>&1 || apt_update
  pkg=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
  [ -n "$pkg" ] || die "apt knows no linux-image-amd64"
  log "downloading $pkg"
  rm -rf "$W/kernel.deb.d" "$W/kernel"
  mkdir -p "$W/kernel.deb.d"
  (cd "$W/kernel.deb.d" && timeout 600 apt-get download "$pkg" >> "$W/apt.log" 2>&1) || die "apt-get download $pkg failed"
  dpkg-deb -x "$W"/kernel.deb.d/*.deb "$W/kernel"
  rm -rf "$W/kernel.deb.d"
fi
VMLINUZ=$(ls "$W"/kernel/boot/vmlinuz-* | head -1)
KVER=${VMLINUZ##*/vmlinuz-}
depmod -b "$W/kernel" "$KVER"

# --- 3. the code under test: built here, run in a copy of the working tree -
# The binaries are built in this tree, where Go's build cache knows every
# package already (make test built pyexec from it); the guest runs them in a
# copy, as it cannot see this tree when it is under /tmp, and the copy keeps
# the guest's test runs (which write next to their sources) off the checkout.
log "copying the working tree and building pyexec and the test binaries ($SUITES; sandbox rootless)"
rm -rf "$W/src" "$W/bin" "$W/out"
mkdir -p "$W/src" "$W/bin" "$W/out"
(cd "$SRC" && git ls-files -z --cached --others --exclude-standard |
  tar --null --ignore-failed-read -T - -cf - 2> /dev/null) | tar xf - -C "$W/src"
export GOFLAGS="${GOFLAGS:-} -buildvcs=false"
(cd "$SRC" && go build -o "$W/bin/pyexec" ./cmd/pyexec)
for p in $(printf '%s\n' $SUITES sandbox | sort -u); do
  case $p in e2e) dir=./e2e ;; *) dir=./internal/${p//.//} ;; esac
  [ -d "$W/src/$dir" ] || die "no package $dir for suite $p"
  (cd "$SRC" && go test -c -o "$W/bin/$p.test" "$dir")
done
# What the guest needs: the settings, the binary e2e runs (PYEXEC_BINARY,
# so that e2e does not build it again, under emulation, with every source
# read over 9p) and the Go toolchain (offline, with this machine's now warm
# caches) for what a test may build.
{
  for v in SUITES PARTS SUITE_TIMEOUT SUITE_JOBS; do printf 'export %s=%q\n' "$v" "${!v}"; done
  printf 'export SRC=%q PYEXEC_BINARY=%q\n' "$W/src" "$W/bin/pyexec"
  for v in GOCACHE GOMODCACHE GOROOT; do printf 'export %s=%q\n' "$v" "$(go env "$v")"; done
  printf 'export PATH=%q:$PATH GOFLAGS=-buildvcs=false GOPROXY=off GOTOOLCHAIN=local\n' "$(go env GOROOT)/bin"
} > "$W/guest.env"
cp "$SRC"/scripts/vm/init.sh "$SRC"/scripts/vm/checks.sh "$W/"

# --- 4. the initramfs: busybox and the modules for 9p and overlayfs --------
rm -rf "$W/initramfs"
mkdir -p "$W/initramfs"/{bin,mods,proc,sys,dev,lower,upper,newroot}
cp "$(command -v busybox)" "$W/initramfs/bin/busybox"
order=""
for m in $(for mod in virtio_pci 9pnet_virtio 9p overlay; do
             modprobe -d "$W/kernel" -S "$KVER" --show-depends "$mod" | awk '$1 == "insmod" {print $2}'
           done); do
  b=$(basename "$m")
  case " $order " in *" $b "*) continue ;; esac
  cp "$m" "$W/initramfs/mods/"
  order="$order $b"
done
cat > "$W/initramfs/init" << INIT
#!/bin/busybox sh
# Stage one: mount the host's / (read-only) under a tmpfs overlay, a fresh
# /tmp, the work directory and the kernel's modules, then run init.sh.
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc; mount -t sysfs sysfs /sys; mount -t devtmpfs devtmpfs /dev
for m in $order; do insmod /mods/\$m || echo "initramfs: insmod \$m failed"; done
fail() { echo "initramfs: \$*"; poweroff -f; }
mount -t 9p -o trans=virtio,version=9p2000.L,ro,cache=loose,msize=512000 hostroot /lower || fail "9p root"
mount -t tmpfs -o size=6g,mode=0755 tmpfs /upper
mkdir -p /upper/data /upper/work
mount -t overlay overlay -o lowerdir=/lower,upperdir=/upper/data,workdir=/upper/work /newroot || fail overlay
mount -t tmpfs -o mode=1777,size=4g tmpfs /newroot/tmp
mkdir -p /newroot$W /newroot/lib/modules/$KVER
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 testvm /newroot$W || fail "9p $W"
mount --bind /newroot$W/kernel/lib/modules/$KVER /newroot/lib/modules/$KVER
umount /proc /sys
mount --move /dev /newroot/dev
exec switch_root /newroot /bin/bash $W/init.sh
INIT
chmod +x "$W/initramfs/init"
(cd "$W/initramfs" && find . | cpio -o -H newc --quiet | gzip -1 > "$W/initramfs.gz")

# --- 5. boot -----------------------------------------------------------------
# A /dev/kvm backed by kvm_pvm (KVM without VMX/SVM, as in some sandboxes)
# runs only PVM-built guest kernels: TCG there.
if [ "$ACCEL" = auto ]; then
  if [ -d /sys/module/kvm_pvm ] || ! [ -w /dev/kvm ]; then ACCEL=tcg; else ACCEL=kvm; fi
fi
case $ACCEL in
  kvm) accel=(-enable-kvm -cpu host) ;;
  tcg) accel=(-accel tcg,thread=multi -cpu "$VM_CPU") ;;
  *) die "ACCEL must be auto, kvm or tcg" ;;
esac
log "booting Linux $KVER with $ACCEL, $VM_CPUS vCPUs, $VM_MEM, at most ${VM_TIMEOUT}s"
t_boot=$(date +%s)
# boot seconds: the VM in the background (QPID), at most seconds.
boot() {
  timeout -k 10 "$1" qemu-system-x86_64 "${accel[@]}" -smp "$VM_CPUS" -m "$VM_MEM" \
    -nographic -no-reboot -nic none \
    -kernel "$VMLINUZ" -initrd "$W/initramfs.gz" -append "console=ttyS0 panic=-1 loglevel=4" \
    -virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
    -virtfs local,path="$W",mount_tag=testvm,security_model=none,multidevs=remap \
    < /dev/null > "$W/console.log" 2>&1 &
  QPID=$!
}
# The guest writes a heartbeat on its console every 2 minutes
# (scripts/vm/checks.sh), and kernel messages come there too: a console
# silent for VM_STALL seconds is a guest that no longer runs (on
# 2026-11-29 a CI run's guest went silent five minutes in and was stopped
# at the hour). It is stopped then, and booted once more if the time left
# allows a whole run (VM_RETRY_MIN seconds); the summary says so.
attempt=1
while :; do
  left=$((VM_TIMEOUT - ($(date +%s) - t_boot)))
  boot "$left"
  stalled=no
  while kill -0 "$QPID" 2> /dev/null; do
    sleep 15
    age=$(($(date +%s) - $(stat -c %Y "$W/console.log")))
    if [ "$age" -gt "$VM_STALL" ]; then
      stalled=yes
      log "the guest's console has been silent for ${age}s: stopping it"
      kill "$QPID"
      break
    fi
  done
  qrc=0
  wait "$QPID" || qrc=$?
  left=$((VM_TIMEOUT - ($(date +%s) - t_boot)))
  if [ $stalled = yes ] && [ $attempt = 1 ] && [ "$left" -ge "$VM_RETRY_MIN" ]; then
    rm -rf "$W/out.stalled" && mv "$W/out" "$W/out.stalled" && cp "$W/console.log" "$W/out.stalled/console.log"
    mkdir -p "$W/out"
    STALLED_ONCE="the first boot's guest went silent after $(($(date +%s) - t_boot))s and was stopped (its console and logs: $W/out.stalled); this is the second boot"
    log "booting again, ${left}s left"
    attempt=2
    continue
  fi
  break
done
log "VM ended after $(($(date +%s) - t_boot))s (qemu rc $qrc); console in $W/console.log"

# --- 6. summary ----------------------------------------------------------------
R=$W/out/results.txt
echo
echo "==== pyexec on cgroup v2 ($ACCEL, $VM_CPUS vCPUs): $(cat "$W/out/kernel.txt" 2> /dev/null || echo "kernel $KVER")"
[ -z "${STALLED_ONCE:-}" ] || echo "NOTE: $STALLED_ONCE"
[ $stalled = no ] || echo "the guest's console was silent for ${VM_STALL}s: the VM was stopped as stuck"
if [ ! -s "$R" ]; then
  echo "no results: the guest did not run its checks; the console ends with:"
  tail -30 "$W/console.log"
  # What the guest wrote before it stopped: the end of each log of its suites.
  for f in "$W"/out/*.log; do
    [ -s "$f" ] && { echo "-- ${f##*/} ends with:"; tail -5 "$f"; }
  done
  exit 1
fi
cat "$W/out/summary.txt"
pass=$(grep -c '^PASS ' "$R" || true)
fail=$(grep -c '^FAIL ' "$R" || true)
finished=yes
grep -qx 'END' "$R" || finished=no
echo "----"
echo "$pass checks passed, $fail failed; guest finished: $finished; whole run $(($(date +%s) - t0))s; logs in $W/out"
[ $finished = yes ] || echo "the guest stopped in part \"$(grep '^==' "$W/out/summary.txt" | tail -1)\", writing $(ls -t "$W/out" | head -1)"
if grep -q '^PASS .*flaky:' "$R"; then
  echo "flaky (failed once, passed when run again alone):"
  grep '^PASS .*flaky:' "$R" | sed 's/^PASS \([^:]*\):.*flaky: \([^;]*\).*/  \1: \2/'
fi
if [ "$fail" -gt 0 ]; then
  echo "failed:"
  grep '^FAIL ' "$R" | sed 's/^FAIL /  /'
fi
[ "$fail" = 0 ] && [ $finished = yes ]
