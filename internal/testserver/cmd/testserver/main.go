// Command testserver is the launcher of the test suites that are not
// written in Go (python/tests, clients/typescript/test, python/fuzz-api.sh):
// it starts one `pyexec serve` as internal/testserver does for e2e and the
// benches, and cleans up after it, so that no suite repeats that logic.
//
//	testserver [flags] [-- serve flags... [-- command args...]]
//
// The server runs on a free loopback port with a fresh data directory and
// a cgroup parent of its own; the serve flags come after those, so they
// win. Once /health answers, testserver prints one JSON line on stdout:
//
//	{"url": "http://127.0.0.1:PORT", "api_key": "…", "binary": "…", "pid": N, "data_dir": "…", "cgroup_parent": "…"}
//
// Without a command it then waits until its standard input ends (the suite
// that started it closed the pipe, or died) or it gets SIGTERM or SIGINT.
// With a command it runs it, with PYEXEC_TEST_URL, PYEXEC_TEST_API_KEY and
// PYEXEC_BINARY in its environment, and exits with its status.
//
// Then it stops the server (SIGTERM, waiting -stop-timeout for the drain),
// removes the cgroup parent and the data directory, and reports on stderr
// what was left: processes and jail cgroups below the cgroup parent. It
// exits 1 when the server did not start or had to be killed; the suite
// decides what a leftover means.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"syscall"
	"time"

	"github.com/pyexec/pyexec/internal/testserver"
)

func main() { os.Exit(run(os.Args[1:])) }

// ready is the JSON line printed once the server answers.
type ready struct {
	URL          string `json:"url"`
	APIKey       string `json:"api_key,omitempty"`
	Binary       string `json:"binary"`
	Pid          int    `json:"pid"`
	DataDir      string `json:"data_dir"`
	CgroupParent string `json:"cgroup_parent"`
}

func run(args []string) int {
	fs := flag.NewFlagSet("testserver", flag.ContinueOnError)
	keyName := fs.String("api-key", "", "start the server with one API key of this name (a random key, printed)")
	logPath := fs.String("log", "", "also write the server's output to this file")
	startTimeout := fs.Duration("start-timeout", testserver.DefaultTimeout, "how long the server has to answer /health")
	stopTimeout := fs.Duration("stop-timeout", 40*time.Second, "how long the server may drain after SIGTERM before it is killed")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	serveFlags, command := fs.Args(), []string(nil)
	if i := slices.Index(serveFlags, "--"); i >= 0 {
		serveFlags, command = serveFlags[:i], serveFlags[i+1:]
	}

	tmp, err := os.MkdirTemp("", "pyexec-testserver-bin-")
	if err != nil {
		return fail(err)
	}
	defer os.RemoveAll(tmp)
	binary, err := testserver.Binary(tmp)
	if err != nil {
		return fail(err)
	}
	dir, err := testserver.DataDir("pyexec-testserver-")
	if err != nil {
		return fail(err)
	}
	defer os.RemoveAll(dir)
	parent := fmt.Sprintf("pyexec-testserver-%d", os.Getpid())
	var key string
	if *keyName != "" {
		b := make([]byte, 16)
		_, _ = rand.Read(b) // never fails (crypto/rand)
		key = hex.EncodeToString(b)
		serveFlags = append([]string{"--api-keys", *keyName + ":" + key}, serveFlags...)
	}
	srv := testserver.New(testserver.Config{Binary: binary, Dir: dir, CgroupParent: parent, Flags: serveFlags,
		StartTimeout: *startTimeout, StopTimeout: *stopTimeout})

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	status := serve(ctx, srv, *logPath, ready{APIKey: key, Binary: binary, DataDir: dir, CgroupParent: parent}, command)
	if err := testserver.RemoveCgroups(parent); err != nil {
		fmt.Fprintln(os.Stderr, "testserver: removing the cgroup parent:", err)
	}
	if left := testserver.Leftovers(parent); len(left) > 0 {
		fmt.Fprintln(os.Stderr, "testserver: the server left these behind:")
		for _, l := range left {
			fmt.Fprintln(os.Stderr, "  "+l)
		}
	}
	return status
}

// serve runs the server until the command ends, stdin ends or ctx is
// done; it returns the exit status.
func serve(ctx context.Context, srv *testserver.Server, logPath string, info ready, command []string) int {
	err := srv.Start(ctx)
	if logPath != "" && srv.Logs != nil {
		defer func() { _ = os.WriteFile(logPath, []byte(srv.Logs.String()), 0o644) }()
	}
	if err != nil {
		return fail(err)
	}
	info.URL, info.Pid = srv.URL, srv.Pid()
	line, _ := json.Marshal(info)
	fmt.Println(string(line))

	status := 0
	if len(command) > 0 {
		status = runCommand(ctx, command, info)
	} else {
		waitForEnd(ctx)
	}
	if err := srv.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "testserver:", err)
		return 1
	}
	if code := srv.Cmd.ProcessState.ExitCode(); code != 0 {
		fmt.Fprintf(os.Stderr, "testserver: the server exited with %d:\n%s", code, srv.Logs)
	}
	return status
}

// runCommand runs the command with the server's address in its
// environment and returns its exit status; the launcher's SIGTERM or
// SIGINT is passed on to it as SIGTERM.
func runCommand(ctx context.Context, command []string, info ready) int {
	cmd := exec.CommandContext(ctx, command[0], command[1:]...)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.Env = append(os.Environ(), "PYEXEC_TEST_URL="+info.URL, "PYEXEC_TEST_API_KEY="+info.APIKey, "PYEXEC_BINARY="+info.Binary)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		if ee.ExitCode() < 0 { // ended by a signal
			return 128 + int(ee.Sys().(syscall.WaitStatus).Signal())
		}
		return ee.ExitCode()
	default:
		fmt.Fprintln(os.Stderr, "testserver:", err)
		return 1
	}
}

// waitForEnd returns when stdin ends or ctx is done.
func waitForEnd(ctx context.Context) {
	eof := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(eof)
	}()
	select {
	case <-eof:
	case <-ctx.Done():
	}
}

func fail(err error) int {
	fmt.Fprintln(os.Stderr, "testserver:", err)
	return 1
}
