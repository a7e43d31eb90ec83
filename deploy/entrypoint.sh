#!/bin/sh
# Entry point of the pyexec image. Container runtimes mount /sys/fs/cgroup
# read-only unless the container is privileged. In a private cgroup
# namespace (--cgroupns=private, the default on cgroup v2 hosts) a fresh
# cgroup2 mount shows only the container's own cgroup, so mounting it again
# read-write gives pyexec its subtree and nothing above it. Needs
# CAP_SYS_ADMIN and an AppArmor profile that allows mount (docs/deploy.md).
set -eu
if [ "$(stat -fc %T /sys/fs/cgroup 2> /dev/null)" = cgroup2fs ] && ! [ -w /sys/fs/cgroup/cgroup.procs ]; then
  if [ "$(cat /proc/self/cgroup)" != "0::/" ]; then
    echo "pyexec-entrypoint: /sys/fs/cgroup is read-only and the container shares the host's cgroup namespace: run it with --cgroupns=private" >&2
    exit 1
  fi
  umount /sys/fs/cgroup
  mount -t cgroup2 -o nosuid,nodev,noexec cgroup2 /sys/fs/cgroup
fi
exec /usr/local/bin/pyexec "$@"
