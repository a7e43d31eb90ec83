#!/bin/bash
# The checks of the test VM, run by init.sh as root on a cgroup v2 only
# host. Every check appends one line to $OUT/results.txt, "PASS <name>: …"
# or "FAIL <name>: …", and summary.txt tells the story; the last line of
# results.txt is END when every part ran to its end. The parts ($PARTS):
#   root       pyexec doctor, the Go suites ($SUITES) and a serve smoke test,
#              each in its own delegated service cgroup
#   container  doctor and the smoke test in a private cgroup + mount
#              namespace whose cgroup root is the service cgroup
#   rootless   doctor, the smoke test and the sandbox suite as a non-root
#              user in a cgroup delegated to it as systemd delegates one
#   restarts   ten starts of serve by one supervisor in one service cgroup
# The Go suites of every part run first, $SUITE_JOBS at a time (a suite runs
# one jail at a time, which leaves the other vCPU idle under emulation), each
# apart from the others; each part then tells its suites' results in its
# place.
# Leftovers are counted after every suite and server: processes anywhere in
# the service's cgroup subtree and jail cgroups (names ending in 24 hex
# digits).
set -u
OUT=$W/out BIN=$W/bin CG=/sys/fs/cgroup
R=$OUT/results.txt S=$OUT/summary.txt
RL_UID=${ROOTLESS_UID:-4242} RL_USER=pyexec-rl RL_HOME=/tmp/pyexec-rl
SERVE_FLAGS=(--base-packages - --prepare-base=false --no-detect-imports --provision-tools=false)

# --- reporting -----------------------------------------------------------------
say() { echo "$*" | tee -a "$S"; }
result() { # PASS|FAIL name detail
  echo "$1 $2: $3" >> "$R"
  say "  $1 $2: $3"
}
check() { # name detail test-command...: PASS when the command succeeds
  local name=$1 detail=$2
  shift 2
  if "$@"; then result PASS "$name" "$detail"; else result FAIL "$name" "$detail"; fi
}
now() { date +%s; }

# --- cgroups ---------------------------------------------------------------------
# The tree systemd builds: PID 1 in init.scope, controllers enabled down to
# the slices; a Delegate=yes service gets them in its own cgroup.
layout() {
  mkdir -p $CG/init.scope $CG/system.slice $CG/user.slice
  local p
  for p in $(cat $CG/cgroup.procs); do echo "$p" > $CG/init.scope/cgroup.procs 2> /dev/null; done
  echo "+cpu +memory +pids +io" > $CG/cgroup.subtree_control
  echo "+cpu +memory +pids +io" > $CG/system.slice/cgroup.subtree_control
  echo "+cpu +memory +pids" > $CG/user.slice/cgroup.subtree_control
}
service() { # name -> the path of a fresh system.slice/<name>.service
  local d=$CG/system.slice/$1.service
  mkdir -p "$d"
  echo "$d"
}
# user_service name -> a cgroup delegated to the rootless user as systemd
# delegates user@UID.service: the directory and its cgroup.procs,
# cgroup.subtree_control and cgroup.threads belong to the user.
user_service() {
  local u=$CG/user.slice/user-$RL_UID.slice m d f
  m=$u/user@$RL_UID.service
  d=$m/app.slice/$1.service
  mkdir -p "$d"
  echo "+cpu +memory +pids" > "$u/cgroup.subtree_control"
  echo "+cpu +memory +pids" > "$m/cgroup.subtree_control"
  echo "+cpu +memory +pids" > "$m/app.slice/cgroup.subtree_control"
  for x in "$m" "$m/app.slice" "$d"; do
    chown "$RL_UID:$RL_UID" "$x"
    for f in cgroup.procs cgroup.subtree_control cgroup.threads; do chown "$RL_UID:$RL_UID" "$x/$f"; done
  done
  echo "$d"
}
in_cgroup() { # dir cmd...: cmd as a process that starts in dir
  local d=$1 f
  shift
  # A process started there before may have made dir an inner cgroup (its
  # jails below, itself moved to a leaf): processes may then only join a
  # leaf, so a second start (a suite's re-run) gets a fresh leaf of dir,
  # owned as dir is.
  if [ -n "$(cat "$d/cgroup.subtree_control")" ]; then
    d=$(mktemp -d "$d/again.XXXX")
    for f in "$d" "$d"/cgroup.procs "$d"/cgroup.subtree_control "$d"/cgroup.threads; do
      chown --reference="$(dirname "$d")" "$f"
    done
  fi
  (echo $BASHPID > "$d/cgroup.procs" && exec "$@")
}
# Wrappers, commands that exec what follows them (so a server keeps its pid):
# AS_USER runs it as the rootless user with a clean environment;
# CONTAINER in a new cgroup namespace rooted at the current cgroup and a new
# mount namespace with cgroup2 mounted again (what `docker run
# --cgroupns=private` gives a container, with /sys/fs/cgroup writable).
AS_USER=(setpriv --reuid="$RL_UID" --regid="$RL_UID" --clear-groups --inh-caps=-all
  env -i HOME="$RL_HOME" USER=$RL_USER PATH="$PATH" LANG=C.UTF-8 TMPDIR=/tmp)
CONTAINER=(unshare --cgroup --mount --propagation private bash -c
  'umount /sys/fs/cgroup && mount -t cgroup2 -o nosuid,nodev,noexec,nsdelegate cgroup2 /sys/fs/cgroup && exec "$@"' container)
procs_under() { # dir -> number of processes in dir and below
  find "$1" -name cgroup.procs -exec cat {} + 2> /dev/null | wc -w
}
jails_under() { # dir -> number of jail cgroups in dir and below
  find "$1" -mindepth 1 -type d 2> /dev/null | grep -cE '[0-9a-f]{24}$'
}
tree_under() { # dir -> its cgroups, relative, jail ids shortened, one line
  find "$1" -mindepth 1 -type d 2> /dev/null | sed "s|^$1||;s|[0-9a-f]\{24\}$|<jail>|" | sort | uniq -c |
    awk '{print $2 ($1 > 1 ? "×" $1 : "")}' | tr '\n' ' '
}
depth_below() { # pid dir -> how many levels below dir the pid's cgroup is
  local rel
  rel=$(sed -n 's/^0:://p' "/proc/$1/cgroup" 2> /dev/null)
  rel=${rel#"${2#"$CG"}"}
  if [ -z "$rel" ]; then echo 0; else echo "$rel" | awk -F/ '{print NF - 1}'; fi
}
# leftovers name dir: no process and no jail cgroup left in dir.
leftovers() {
  local p j
  p=$(procs_under "$2")
  j=$(jails_under "$2")
  check "$1" "$p processes and $j jail cgroups left; cgroups there: $(tree_under "$2")" [ "$p" = 0 -a "$j" = 0 ]
}

# --- what is run ---------------------------------------------------------------------
# doctor name wrapper...: `pyexec doctor` through the wrapper.
doctor() {
  local name=$1
  shift
  # The data dir is the one its server would use (a rootless user cannot
  # write the default ./data under /).
  "$@" timeout 300 "$BIN/pyexec" doctor --data-dir "/tmp/$name.data" > "$OUT/$name.doctor.txt" 2>&1
  local rc=$?
  check "$name.doctor" "rc=$rc; $(grep -iE '^cgroup' "$OUT/$name.doctor.txt" | tr -s ' ' | head -2 | tr '\n' ' ')" \
    [ $rc = 0 ]
  grep -E 'MISSING|absent|rror' "$OUT/$name.doctor.txt" | sed 's/^/    /' | head -8 | tee -a "$S"
}

# suite name pkg cg wrapper...: one Go test binary, run in its package
# directory as `go test` runs it; then the leftovers in cg.
# SUITE_ENV: what the suites are told about emulation. A fork costs tens of
# times its native cost, so each kind of jail runs one fork bomb alone and
# six at once (not three alone) with a pids limit of 64 and a wall time of
# 12 s (24 s at once) to reach it and end; a bomb runs until its wall time,
# so that is what the test costs (the log says when each reached the limit:
# on 2026-11-29 within 0.8 s alone and 3.2 s six at once on a quiet host,
# of the 20 s and 40 s the VM gave them then, which cost 187 s; 2.6 s and
# 12.5 s on a host loaded by other work).
# PYEXEC_TEST_FORK_WAIT: the pool's tests wait up to 4 minutes, not one, for a fork server that
# imports numpy, pandas and matplotlib to serve (2026-11-29, host loaded by other work:
# TestSmallMemoryLimitGetsAnExecutionThatCopiedNothing missed the minute twice).
SUITE_ENV=(env PYEXEC_TEST_FORK_BOMBS=1 PYEXEC_TEST_FORK_BOMB_PIDS=64 PYEXEC_TEST_FORK_BOMB_WALL=12s PYEXEC_TEST_FORK_WAIT=4m)
# POOL_NATIVE: the pool's tests of copying ahead (precopy), left out here:
# page faults, the pages an execution holds of its own and the interpreter
# a forked execution sees, with a fork server that imports numpy, pandas
# and matplotlib (minutes under emulation) and no limit or cgroup in what
# they assert. They took 143, 91, 89 and 47 s of the pool's 562 s on
# 2026-11-29. The one with a memory limit
# (TestSmallMemoryLimitGetsAnExecutionThatCopiedNothing) runs here.
POOL_NATIVE='TestForkedExecutionCopiesAhead|TestLeanAndPlainExecutionsCopyNothing|TestCopyingAheadLeavesNothingBehind|TestFailedProbeLeavesTheServerServing'
# HOSTILE_NATIVE: the hostile programs (the sandbox's TestHostilePrograms)
# whose outcome is the seccomp filter, the namespaces, the mounts and the
# credentials, not a limit or a cgroup: here they run in cold jails only
# (the filter tables against this stock kernel), not again in warm and
# forked ones (98 cases, 64 s of the 100 s those took on 2026-11-29); the limits,
# signals, floods, daemons and the jail's own cgroup view run in all three.
# A name is cut at its first slash (read /etc/shadow is read_).
HOSTILE_NATIVE="read_|list_|escape_with|write_outside|chmod_|binary_input|tcp_|udp_|dns_|raw_socket|packet_socket|vsock_socket"
HOSTILE_NATIVE+="|netlink_|abstract_unix|filesystem_unix|loopback_inside|ptrace|process_vm_readv|mount|unshare_|clone_into|setns"
HOSTILE_NATIVE+="|chroot_|keyctl|bpf|io_uring|perf_event|kernel_modules|open_by_handle|reboot,|personality|TIOCSTI|foreign_syscall"
HOSTILE_NATIVE+="|x32_syscall|become_root|no_capabilities|server_environment|only_harmless|inotify_|fanotify_|dnotify_|page-cache"
HOSTILE_NATIVE+="|reading_a_shared"
suite() {
  local name=$1 pkg=$2 cg=$3 extra=() t=$(now) rc log=$OUT/$1.log
  shift 3
  # The VM is there for what depends on the kernel's cgroups, and emulation makes every interpreter
  # start cost ~30 times its native cost (0.3 s), so the suites leave out tests that do not depend on
  # them; make test runs all of them. e2e runs only its tests of a server's end on the host: SIGTERM,
  # a second signal and kill -9 with the restart's sweep of jail cgroups, and forked sessions. Left
  # out, with what they took here on 2026-11-29: old Pythons' timestamps 338 s, the terminal REPL
  # 237 s, README 85 s, the CLI 150 s, Ctrl-C 90 s, the store's history 32 s; the fleet (its 2 s
  # heartbeats and 7 s fairness bound are native wall-clock bounds), the crash test (a restart in 2 s,
  # a backlog in 5 s) and TestEnvironments (uv and ruff come from PyPI; no network). engine.sessions:
  # thousands of cells (213 s), and sixteen forks of a 64 MiB session (a race in how a fork fails,
  # not the cgroup: its memory limit only makes the child end); engine.executions: plots, rich
  # outputs and environments (161 s).
  # pool: POOL_NATIVE; sandbox:
  # HOSTILE_NATIVE in warm and forked jails, and the relay's 30,000 fetches of its pipes, a protocol
  # test (68 s).
  case $pkg in
  e2e) extra=(-test.run '^(TestSIGTERMLeavesNothing|TestKillRestartSweeps|TestSecondSignalForcesStop|TestForkedSessions)$') ;;
  pool) extra=(-test.skip "^($POOL_NATIVE)\$") ;;
  # The two workspace tests count overlay mounts in a jail's mountinfo; the guest's own root is an
  # overlay (init.sh), which adds one to each count there (2026-11-29: failed twice). They test mount
  # namespaces, not cgroups, and run in make test.
  sandbox) extra=(-test.skip "^TestRelayServesEveryFetch\$|^TestWorkspaceMountInEveryJail\$|^TestWorkspaceNotReachableFromOtherJails\$|^TestHostilePrograms\$/^(warm|forked)\$/^($HOSTILE_NATIVE)") ;;
  engine.sessions) extra=(-test.skip '^(TestSessionOutlivesThousandsOfCells|TestForkWhoseChildEndsMidWrite)$') ;;
  engine.executions) extra=(-test.skip '^(TestRichOutputsOnTheRealJail|TestFigureIsTheSameEverywhere|TestEnvironmentsEndToEnd)$') ;;
  esac
  local dir=$SRC/internal/${pkg//.//}
  [ "$pkg" = e2e ] && dir=$SRC/e2e
  (cd "$dir" && "$@" "${SUITE_ENV[@]}" timeout -k 10 $((SUITE_TIMEOUT + 60)) "$BIN/$pkg.test" -test.v -test.count=1 \
    -test.timeout "${SUITE_TIMEOUT}s" "${extra[@]}") > "$log" 2>&1
  rc=$?
  n() { grep -cE "$1" "$log"; }
  local detail="rc=$rc in $(($(now) - t))s; tests $(n '^--- PASS') passed, $(n '^--- FAIL') failed, $(n '^--- SKIP') skipped (with subtests $(n '^\s*--- PASS') / $(n '^\s*--- FAIL') / $(n '^\s*--- SKIP'))"
  grep -E '^\s*--- FAIL' "$log" | sed 's/ ([0-9.]*s)$//;s/^/    /' | head -30 | tee -a "$S"
  grep -E 'left things behind|^panic:|test timed out|outlived' -A4 "$log" | sed 's/^/    /' | head -12 | tee -a "$S"
  # Under emulation a test with a wall-clock bound can miss it once: the
  # tests that failed run once more, alone. They pass only if they pass
  # then, and the summary names them as flaky. A panic, a timeout of the
  # suite or anything left behind is never retried.
  local failed
  failed=$(grep -E '^--- FAIL' "$log" | awk '{print $3}' | paste -sd'|')
  if [ $rc != 0 ] && [ -n "$failed" ] && ! grep -qE 'left things behind|^panic:|test timed out|outlived' "$log"; then
    (cd "$dir" && "$@" "${SUITE_ENV[@]}" timeout -k 10 $((SUITE_TIMEOUT + 60)) "$BIN/$pkg.test" -test.v -test.count=1 \
      -test.timeout "${SUITE_TIMEOUT}s" -test.run "^($failed)\$") > "$OUT/$name.rerun.log" 2>&1
    rc=$?
    if [ $rc = 0 ]; then
      detail="$detail; flaky: $failed failed once and passed when run again alone"
    else
      detail="$detail; $failed failed again when run alone (rc=$rc, $OUT/$name.rerun.log)"
    fi
  fi
  check "$name" "$detail" [ $rc = 0 ]
  sleep 1
  leftovers "$name.leftovers" "$cg"
}

# start_serve name cg port wrapper... -> SPID: `pyexec serve` through the
# wrapper, started in cg (where this shell is when cg is ""); waits until it
# answers.
SPID=
start_serve() {
  local name=$1 cg=$2 port=$3 i
  shift 3
  mkdir -p /tmp/$name.data
  chmod 777 /tmp/$name.data
  ({ [ -z "$cg" ] || echo $BASHPID > "$cg/cgroup.procs"; } && exec "$@" "$BIN/pyexec" serve --port "$port" \
    --data-dir /tmp/$name.data --env-dir /var/tmp/$name.envs "${SERVE_FLAGS[@]}") >> "$OUT/$name.serve.log" 2>&1 &
  SPID=$!
  for i in $(seq 1 240); do
    curl -sf -m 5 "localhost:$port/health" > /dev/null 2>&1 && return 0
    kill -0 $SPID 2> /dev/null || break
    sleep 0.5
  done
  return 1
}
# stop_serve -> rc of serve after SIGTERM (255 when it had to be killed).
stop_serve() {
  local i
  kill -TERM "$SPID" 2> /dev/null
  for i in $(seq 1 120); do kill -0 "$SPID" 2> /dev/null || break; sleep 0.5; done
  if kill -0 "$SPID" 2> /dev/null; then
    kill -KILL "$SPID"
    wait "$SPID" 2> /dev/null
    return 255
  fi
  wait "$SPID"
}
# expect name port json jq-test: one eval whose result must pass jq-test.
expect() {
  local name=$1 port=$2 req=$3 test=$4 t body
  t=$(date +%s.%N)
  body=$(curl -s -m 180 "localhost:$port/api/v1/eval" -H 'Content-Type: application/json' -d "$req")
  echo "$body" > "$OUT/$name.json"
  check "$name" "$(printf '%.1f' "$(echo "$(date +%s.%N) - $t" | bc)")s: $(echo "$body" |
    jq -c '{status,reason,exit_code,stdout:(.stdout // "" | .[0:60]),stderr:(.stderr // "" | .[-120:]),error}' 2> /dev/null ||
    echo "$body" | head -c 300)" jq -e "$test" <<< "$body" > /dev/null 2>&1
}
# smoke name cg port wrapper...: serve, five evals, SIGTERM, leftovers.
smoke() {
  local name=$1 cg=$2 port=$3 t rc
  shift 3
  t=$(now)
  if ! start_serve "$name" "$cg" "$port" "$@"; then
    local why="exited before it answered /health"
    kill -0 "$SPID" 2> /dev/null && why="did not answer /health within 120s"
    result FAIL "$name.serve" "$why; log: $(tail -2 "$OUT/$name.serve.log" | cut -c1-300 | tr '\n' ' ')"
    stop_serve
    leftovers "$name.serve.leftovers" "$cg"
    return
  fi
  result PASS "$name.serve" "up after $(($(now) - t))s in $(sed -n 's/^0:://p' /proc/$SPID/cgroup)"
  expect "$name.print" "$port" '{"code":"print(1)"}' '.status == "completed" and .stdout == "1\n"'
  expect "$name.oom" "$port" '{"code":"x = bytearray(200*1024*1024)\nprint(len(x))","config":{"memory_mb":64}}' \
    '.reason == "oom"'
  expect "$name.forkbomb" "$port" '{"code":"import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass","config":{"timeout_seconds":5}}' \
    '.status != "completed" and (.reason == "timeout" or .reason == "oom")'
  expect "$name.timeout" "$port" '{"code":"import time\nprint(1, flush=True)\ntime.sleep(60)","config":{"timeout_seconds":8}}' \
    '.reason == "timeout" and .timed_out == true and .stdout == "1\n"'
  expect "$name.own-cgroup" "$port" '{"code":"print(open(\"/proc/self/cgroup\").read().strip())"}' \
    '.status == "completed" and .stdout == "0::/\n"'
  expect "$name.after" "$port" '{"code":"print(sum(range(10)))"}' '.stdout == "45\n"'
  say "    while serving: $(tree_under "$cg")"
  t=$(now)
  stop_serve
  rc=$?
  check "$name.sigterm" "serve exited rc=$rc $(($(now) - t))s after SIGTERM" [ $rc = 0 ]
  grep -E 'level=(WARN|ERROR)' "$OUT/$name.serve.log" | cut -c1-240 | head -5 | sed 's/^/    log: /' | tee -a "$S"
  sleep 1
  leftovers "$name.serve.leftovers" "$cg"
}

# --- the Go suites, side by side -------------------------------------------------
# alone name -> ALONE, the wrapper that keeps a suite apart from the suites
# beside it: its own temporary directory (the sandbox suite counts the
# pyexec-work-* dirs there) and its own mount namespace (it compares the
# mount table before and after), so that what one suite makes is never
# counted as another's leftover.
alone() {
  mkdir -p "/tmp/$1.tmp"
  ALONE=(unshare --mount --propagation private env TMPDIR="/tmp/$1.tmp")
}

# rootless_user: the non-root user of part_rootless, with a home.
rootless_user() {
  grep -q "^$RL_USER:" /etc/passwd || {
    echo "$RL_USER:x:$RL_UID:$RL_UID:pyexec rootless test:$RL_HOME:/bin/bash" >> /etc/passwd
    echo "$RL_USER:x:$RL_UID:" >> /etc/group
  }
  mkdir -p "$RL_HOME"
  chown "$RL_UID:$RL_UID" "$RL_HOME"
}

# start_suite name pkg cg wrapper...: suite in the background, its results
# and summary in files of its own until tell_suite. At most $SUITE_JOBS
# suites run at once (default 1). Side by side was measured on 2026-11-29:
# all nine at once left e2e's servers unhealthy after 30 s and fleet
# heartbeats late; two at once still took e2e's servers 25-40 s to start and
# the pool's precopy tests missed their fork server, failing again when run
# again. One at a time is what passed before (1,818 s for the whole VM).
start_suite() {
  local name=$1
  while [ "$(jobs -rp | wc -l)" -ge "${SUITE_JOBS:-1}" ]; do wait -n; done
  (R=$OUT/$name.results S=$OUT/$name.summary
    : > "$R"
    : > "$S"
    suite "$@" > /dev/null) &
}

# tell_suite name: a suite's results, in the part that ran it.
tell_suite() {
  cat "$OUT/$1.results" >> "$R"
  tee -a "$S" < "$OUT/$1.summary"
}

# start_suites: every part's Go suites at once, each in its own cgroup.
start_suites() {
  local p cg
  if [[ " $PARTS " == *" root "* ]]; then
    for p in $SUITES; do
      cg=$(service "$p-test")
      alone "root.$p"
      start_suite "root.$p" "$p" "$cg" in_cgroup "$cg" "${ALONE[@]}"
    done
  fi
  if [[ " $PARTS " == *" rootless "* ]]; then
    rootless_user
    cg=$(user_service sandbox-test)
    # Its own TMPDIR too; its mount table is the host's, where the suites
    # beside it mount nothing (theirs are private).
    mkdir -p /tmp/rootless.sandbox.tmp
    chown "$RL_UID:$RL_UID" /tmp/rootless.sandbox.tmp
    start_suite rootless.sandbox sandbox "$cg" in_cgroup "$cg" "${AS_USER[@]}" env TMPDIR=/tmp/rootless.sandbox.tmp
  fi
  wait
}

# --- the parts --------------------------------------------------------------------------
part_root() {
  say "== as root, each step alone in a system.slice service (Delegate=yes)"
  doctor root in_cgroup "$(service pyexec-doctor)"
  local p
  for p in $SUITES; do tell_suite "root.$p"; done
  smoke root "$(service pyexec)" 8080
}

part_container() {
  say "== container-like: private cgroup and mount namespaces rooted at the service cgroup"
  local cg
  cg=$(service container-doctor)
  say "    /proc/self/cgroup inside: $(in_cgroup "$cg" "${CONTAINER[@]}" cat /proc/self/cgroup)"
  doctor container in_cgroup "$cg" "${CONTAINER[@]}"
  smoke container "$(service container)" 8081 "${CONTAINER[@]}"
}

part_rootless() {
  say "== rootless: uid $RL_UID in user@$RL_UID.service/app.slice (delegated to it)"
  rootless_user
  say "    user.max_user_namespaces=$(cat /proc/sys/user/max_user_namespaces)$( [ -f /proc/sys/kernel/unprivileged_userns_clone ] && echo ", kernel.unprivileged_userns_clone=$(cat /proc/sys/kernel/unprivileged_userns_clone)")"
  doctor rootless in_cgroup "$(user_service pyexec-doctor)" "${AS_USER[@]}"
  local cg
  cg=$(user_service pyexec)
  smoke rootless "$cg" 8082 "${AS_USER[@]}"
  tell_suite rootless.sandbox
}

# The supervisor of part_restarts: ten servers one after the other, the
# first and the last asked for one eval; prints the depth of each server's
# cgroup below cg.
supervise() {
  local cg=$1 i d t
  for i in $(seq 1 10); do
    t=$(date +%s%N)
    if ! start_serve restarts "" 8083; then
      echo "start $i: no answer"
      stop_serve
      continue
    fi
    [ "$i" = 1 -o "$i" = 10 ] && curl -s -m 120 localhost:8083/api/v1/eval -H 'Content-Type: application/json' \
      -d '{"code":"print(1)"}' | jq -r '"start '$i': eval " + .status' 2> /dev/null
    d=$(depth_below "$SPID" "$cg")
    echo "depth $d $(sed -n 's/^0:://p' /proc/$SPID/cgroup)"
    echo "start $i: up and asked in $((($(date +%s%N) - t) / 1000000)) ms"
    t=$(date +%s%N)
    stop_serve || echo "start $i: serve exited rc=$?"
    echo "start $i: stopped in $((($(date +%s%N) - t) / 1000000)) ms"
  done
}

part_restarts() {
  say "== ten restarts of serve by one supervisor in system.slice/restarts.service"
  local cg
  cg=$(service restarts)
  # The supervisor runs in the service cgroup, as a shell script or a
  # process manager would, and starts each server where it is itself.
  in_cgroup "$cg" bash -c "$(declare -f supervise start_serve stop_serve depth_below); $(declare -p BIN OUT CG SERVE_FLAGS);
    supervise $cg" > "$OUT/restarts.txt" 2>&1
  local depths starts
  depths=$(awk '/^depth/ {print $2}' "$OUT/restarts.txt" | tr '\n' ' ')
  starts=$(grep -c '^depth' "$OUT/restarts.txt")
  check restarts.depth "$starts of 10 servers answered, $(grep -c 'eval completed' "$OUT/restarts.txt") of 2 evals completed; depth of their cgroups below the service: $depths" \
    [ "$starts" = 10 -a "$(grep -c 'eval completed' "$OUT/restarts.txt")" = 2 -a "$(echo "$depths" | tr ' ' '\n' | grep . | sort -u | wc -l)" = 1 ]
  grep -vE '^depth|eval completed|ms$' "$OUT/restarts.txt" | head -5 | sed 's/^/    /' | tee -a "$S"
  say "    up in $(awk '/up and asked in/ {printf "%.1f ", $(NF-1) / 1000}' "$OUT/restarts.txt")s; stopped in $(awk '/stopped in/ {printf "%.1f ", $(NF-1) / 1000}' "$OUT/restarts.txt")s"
  grep -A1 '^Error' "$OUT/restarts.serve.log" | tail -2 | cut -c1-300 | sed 's/^/    log: /' | tee -a "$S"
  say "    deepest server cgroup: $(awk '/^depth/ {print $3}' "$OUT/restarts.txt" | tail -1)"
  sleep 1
  leftovers restarts.leftovers "$cg"
}

: > "$R"
: > "$S"
echo "Linux $(uname -r), $(nproc) vCPUs, cgroup2 only ($(awk '$3 ~ /cgroup/ {print $3}' /proc/self/mounts | sort -u | tr '\n' ' '))" > "$OUT/kernel.txt"
layout
# Every interpreter comes over 9p: its first start reads the standard
# library through an emulated CPU, which can outlast serve's 10 s probe of
# an interpreter. Start each once, as a long-running host would have.
t=$(now)
for py in /usr/bin/python3 /usr/local/bin/python3* /root/.pyenv/versions/*/bin/python; do
  [ -x "$py" ] && timeout 300 "$py" -c 'import json, sysconfig, site' > /dev/null 2>&1
done
say "interpreters started once in $(($(now) - t))s"
# The binaries come over 9p from the work directory, where every start of a
# server, a suite or a jail's init reads them again; the guest runs copies
# in its tmpfs. The guest tells what one start of pyexec costs from each.
exec_times() { # binary -> how long each of three starts of it took, in ms
  local i t
  for i in 1 2 3; do
    t=$(date +%s%N)
    "$1" version > /dev/null 2>&1
    printf '%d ' $((($(date +%s%N) - t) / 1000000))
  done
}
from9p=$(exec_times "$BIN/pyexec")
t=$(date +%s%N)
mkdir -p /tmp/pyexec-bin
cp "$BIN"/* /tmp/pyexec-bin/
t=$((($(date +%s%N) - t) / 1000000))
say "three starts of pyexec version: ${from9p}ms from 9p, $(exec_times /tmp/pyexec-bin/pyexec)ms from tmpfs (the binaries copied there in $t ms)"
BIN=/tmp/pyexec-bin
export PYEXEC_BINARY=$BIN/pyexec
t=$(date +%s%N)
for i in 1 2 3 4 5; do /usr/bin/python3 -I -S -c pass; done
t1=$(date +%s%N)
for i in 1 2 3 4 5; do /usr/bin/python3 -c 'import json, re, decimal'; done
say "five bare interpreter starts $((($t1 - t) / 5000000)) ms each; with imports $((($(date +%s%N) - t1) / 5000000)) ms each"
say "root cgroup controllers: $(cat $CG/cgroup.controllers); parts: $PARTS; suites: $SUITES"
# heartbeat: every HEARTBEAT seconds (default 120), a line on the serial
# console, written there directly and not through the 9p work directory:
# when the guest stops writing its logs, the console still says whether it
# runs, what it runs and what waits. (On 2026-11-29 a CI run's guest wrote
# nothing for the hour after its first test began; its console had no line
# to tell a stuck guest from a slow one.)
heartbeat() {
  local t0 up load d newest
  t0=$(now)
  while sleep "${HEARTBEAT:-120}"; do
    up=$(($(now) - t0))
    load=$(cut -d' ' -f1-3 /proc/loadavg)
    d=$(timeout 10 ps -eo stat=,pid=,wchan:24=,comm= 2> /dev/null | awk '$1 ~ /^D/ {printf "%s(%s,%s) ", $4, $2, $3}' | head -c 300)
    newest=$(timeout 5 ls -t "$OUT" 2> /dev/null | head -1)
    echo "heartbeat +${up}s load $load mem_avail $(awk '/MemAvailable/ {print int($2/1024) "M"}' /proc/meminfo)" \
      "busiest: $(timeout 10 ps -eo comm=,time= --sort=-time 2> /dev/null | head -3 | tr -s ' ' | paste -sd, -)" \
      "uninterruptible: ${d:-none}; newest log $newest: $(timeout 5 tail -c 200 "$OUT/$newest" 2> /dev/null | tail -1 | cut -c1-160)" \
      > /dev/console
  done
}
# Not a job of this shell: start_suite counts and waits for its jobs.
(heartbeat > /dev/null 2>&1 & echo $! > /tmp/heartbeat.pid)
say "== the Go suites of every part, side by side (told in their parts below)"
t=$(now)
start_suites
say "   (the suites took $(($(now) - t))s)"
for part in $PARTS; do
  t=$(now)
  "part_$part"
  say "   ($part took $(($(now) - t))s)"
done
kill "$(cat /tmp/heartbeat.pid)" 2> /dev/null
echo END >> "$R"
