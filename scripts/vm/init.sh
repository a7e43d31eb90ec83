#!/bin/bash
# PID 1 of the test VM (scripts/test-vm.sh boots it). / is the host's /
# (read-only 9p) under a tmpfs overlay, /tmp a fresh tmpfs, the directory
# of this script the host's work directory (read-write 9p). Mounts what a
# systemd host has, with only the unified cgroup hierarchy, runs checks.sh
# and powers the VM off.
W=$(dirname "$(readlink -f "$0")")
export W
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root LANG=C.UTF-8
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts -o newinstance,ptmxmode=0666
mount -t tmpfs -o mode=1777 tmpfs /dev/shm
mount -t tmpfs -o mode=0755 tmpfs /run
mount -t tmpfs -o mode=1777 tmpfs /var/tmp
# systemd's options for the unified hierarchy.
mount -t cgroup2 -o nosuid,nodev,noexec,nsdelegate,memory_recursiveprot cgroup2 /sys/fs/cgroup
ip link set lo up 2> /dev/null || busybox ip link set lo up
hostname testvm
. "$W/guest.env"
echo "guest: Linux $(uname -r), $(nproc) CPUs, up $(cut -d' ' -f1 /proc/uptime)s"
timeout -k 10 $((${SUITE_TIMEOUT:-1200} * 6)) bash "$W/checks.sh" 2>&1 | tee "$W/out/guest.log"
echo "guest: checks exited ${PIPESTATUS[0]}"
sync
/bin/busybox poweroff -f
