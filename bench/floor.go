package main

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"os/exec"
	"strconv"
	"strings"

	"github.com/pyexec/pyexec/internal/runner"
)

// floorSource measures the kernel's part of a forked execution step by
// step, against a bare spawn (see its header).
//
//go:embed floor.py
var floorSource string

// floorSteps are floor.py's steps in its order, with what each adds.
var floorSteps = []struct{ key, what string }{
	{"fork", "fork of a lean-fork-server-sized interpreter; the child exits"},
	{"ns", "+ mount, IPC and UTS namespaces"},
	{"net", "+ a network namespace, loopback up"},
	{"mounts", "+ three tmpfs and a new /proc"},
	{"reaper", "+ a pid namespace and the second fork (reaper and payload)"},
	{"code", "+ the payload compiles and runs `print(1)` and encodes a report"},
}

type floorResult struct {
	Iterations int                `json:"iterations"`
	AnonKiB    int                `json:"anon_kib"`
	CPU        map[string]float64 `json:"cpu_ms"`
	Machine    map[string]float64 `json:"machine_ms"`
}

// runFloor prints what P3 allows per execution (half a bare spawn's CPU:
// twice its throughput when CPU is what runs out) next to what the jail's
// structure alone costs the kernel, measured with python in one run,
// interleaved in rounds.
func runFloor(ctx context.Context, python string, rounds, perRound int) int {
	out, err := exec.CommandContext(ctx, python, "-B", "-c", floorSource, runner.DriverSource(),
		strconv.Itoa(rounds), strconv.Itoa(perRound)).Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			err = fmt.Errorf("%w: %s", err, ee.Stderr)
		}
		fmt.Println("bench: floor:", err)
		return 1
	}
	var r floorResult
	if err := json.Unmarshal(out, &r); err != nil {
		fmt.Println("bench: floor:", err)
		return 1
	}
	bare := r.CPU["bare"]
	var b strings.Builder
	fmt.Fprintf(&b, "floor of a forked execution — %s, %d iterations per step, interleaved; this process %d KiB anonymous\n\n",
		python, r.Iterations, r.AnonKiB)
	b.WriteString("| step | CPU ms (process tree) | CPU ms (machine) |\n|---|---|---|\n")
	fmt.Fprintf(&b, "| bare `python -I -S -c pass` | %.2f | %.2f |\n", bare, r.Machine["bare"])
	for _, s := range floorSteps {
		fmt.Fprintf(&b, "| %s | %.2f | %.2f |\n", s.what, r.CPU[s.key], r.Machine[s.key])
	}
	budget := bare / 2
	fmt.Fprintf(&b, "\nP3 (≥ 2× bare spawns at full CPU) allows %.2f ms of CPU per execution, all of it: server, jail, Python.\n", budget)
	for _, k := range []string{"reaper", "code"} {
		fmt.Fprintf(&b, "Up to %q, with no cgroup, Landlock, seccomp or server: %.2f ms (%.0f%% of that budget; machine %.2f ms).\n",
			k, r.CPU[k], 100*r.CPU[k]/budget, r.Machine[k])
	}
	fmt.Print(b.String())
	return 0
}
