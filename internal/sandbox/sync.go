package sandbox

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
)

// The parent ↔ init protocol. Each message is one JSON object on one line.
//
//	parent (spawn)                          init (PID 1 of the jail)
//	  start init in new namespaces ───────▶ (waits on fdControl)
//	  place it in its cgroup
//	  msgSetup{mounts, network, ...} ─────▶ build root, pivot_root
//	                               ◀─────── msgReady | msgError
//	  (the jail now waits: a warm pool keeps it here)
//	  set cgroup limits for the payload
//	  msgExec{argv, env, files, ...} ─────▶ mount /work /tmp /dev/shm, write files,
//	                                        rlimits, caps, no_new_privs,
//	                                        Landlock, seccomp, fork+exec payload
//	                               ◀─────── msgStarted | msgError
//	  feed stdin, read output, timers
//	                               ◀─────── msgExit{exited, code, signal}
//	  (with Spec.Collect: init kills what the payload left, walks /work)
//	                               ◀─────── msgFile{path, mode, data} ...
//	                               ◀─────── msgCollected{omitted}
//	  SIGKILL init (kills the whole pid namespace), remove the cgroup
//
// Init never trusts anything but the parent's pipe; the payload never sees
// either pipe (they are close-on-exec in init, CVE-2024-21626).

// Inherited file descriptors of init, in the order of exec.Cmd.ExtraFiles.
const (
	fdControl  = 3 // parent → init messages
	fdStatus   = 4 // init → parent messages
	fdStdin    = 5 // payload stdin (read end)
	fdStdout   = 6 // payload stdout (write end)
	fdStderr   = 7 // payload stderr (write end)
	fdChannel  = 8 // payload result channel (write end), becomes the payload's fd 3
	fdRequests = 9 // payload request pipe (read end), becomes the payload's fd 4
	// fdForkSock is a unix SOCK_SEQPACKET socket to the parent, given only
	// to a fork server's jail; it becomes the payload's fd 4 instead of the
	// request pipe (execMsg.ForkServer), and the fork server receives the
	// descriptors of each execution on it.
	fdForkSock = 10
)

type msgKind string

const (
	kindSetup     msgKind = "setup"
	kindReady     msgKind = "ready"
	kindExec      msgKind = "exec"
	kindStarted   msgKind = "started"
	kindExit      msgKind = "exit"
	kindError     msgKind = "error"
	kindFile      msgKind = "file"
	kindCollected msgKind = "collected"
)

// message is the envelope of every protocol message; exactly one of the
// pointer fields is set, matching Kind.
type message struct {
	Kind    msgKind     `json:"kind"`
	Setup   *setupMsg   `json:"setup,omitempty"`
	Exec    *execMsg    `json:"exec,omitempty"`
	Started *startedMsg `json:"started,omitempty"`
	Exit    *exitInfo   `json:"exit,omitempty"`
	Error   *initError  `json:"error,omitempty"`

	File      *fileMsg      `json:"file,omitempty"`
	Collected *collectedMsg `json:"collected,omitempty"`
}

// setupMsg is everything init needs to build the root.
type setupMsg struct {
	RootDir  string  `json:"root_dir"` // host directory the new root is mounted on
	Mounts   []Mount `json:"mounts"`
	Network  bool    `json:"network"`
	UID      int     `json:"uid"`
	GID      int     `json:"gid"`
	Hostname string  `json:"hostname"`
	// Unsafe: no namespaces were created; init builds nothing and only
	// applies rlimits before starting the payload.
	Unsafe bool   `json:"unsafe"`
	Layers Layers `json:"layers"`
	// Slot is the host directory init binds at /workspace as a slave
	// (slots_linux.go); empty: the jail has no /workspace.
	Slot string `json:"slot,omitempty"`
}

// execMsg is everything init needs to start the payload.
type execMsg struct {
	Argv    []string `json:"argv"`
	Env     []string `json:"env"`
	Dir     string   `json:"dir"`
	Files   []File   `json:"files"`
	Limits  Limits   `json:"limits"`
	Channel bool     `json:"channel"`
	// Requests gives the payload fd 4, the read end of the request pipe.
	Requests bool     `json:"requests,omitempty"`
	Collect  *Collect `json:"collect,omitempty"` // with defaults applied
	// ForkServer starts the payload as a fork server (Template): it stays
	// uid 0 with only forkServerCaps, without Landlock and seccomp, which
	// each execution it forks applies to itself before any user code.
	ForkServer bool `json:"fork_server,omitempty"`
}

type startedMsg struct {
	Pid int `json:"pid"` // the payload's pid inside the jail
}

// initError is a failure inside init, sent as a structured message since
// Go error types do not survive a process boundary.
type initError struct {
	Step    string `json:"step"` // which setup step failed, e.g. "pivot_root"
	Message string `json:"message"`
}

func (e *initError) Error() string { return e.Step + ": " + e.Message }

// wire reads and writes protocol messages on a pair of pipes.
type wire struct {
	r *bufio.Reader
	w io.Writer
}

// newWire reads through a buffer of bufio's default size: every message is
// one short JSON line (ReadBytes joins a longer one across refills), and a
// larger buffer was a large-object allocation per execution.
func newWire(r io.Reader, w io.Writer) *wire {
	return &wire{r: bufio.NewReader(r), w: w}
}

func (c *wire) send(m message) error {
	b, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("encoding %s message: %w", m.Kind, err)
	}
	b = append(b, '\n')
	if _, err := c.w.Write(b); err != nil {
		return fmt.Errorf("sending %s message: %w", m.Kind, err)
	}
	return nil
}

func (c *wire) recv() (message, error) {
	var m message
	line, err := c.r.ReadBytes('\n')
	if err != nil {
		if err == io.EOF && len(line) == 0 {
			return m, io.EOF
		}
		return m, fmt.Errorf("reading message: %w", err)
	}
	if err := json.Unmarshal(line, &m); err != nil {
		return m, fmt.Errorf("decoding message: %w", err)
	}
	return m, nil
}

// expect receives one message and checks its kind; an error message from
// init is returned as *initError.
func (c *wire) expect(kind msgKind) (message, error) {
	m, err := c.recv()
	if err != nil {
		return m, err
	}
	if m.Kind == kindError && m.Error != nil {
		return m, m.Error
	}
	if m.Kind != kind {
		return m, fmt.Errorf("protocol: got %q message, want %q", m.Kind, kind)
	}
	return m, nil
}
