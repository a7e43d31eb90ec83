//go:build !linux

package sandbox

import (
	"context"
	"fmt"
	"net"
	"os"
	"runtime"
)

// Manager is unavailable off Linux: every constructor fails loudly.
type Manager struct{}

// Jail is unavailable off Linux.
type Jail struct{}

// New fails: jails need Linux namespaces, cgroups and seccomp.
func New(Config) (*Manager, error) {
	return nil, fmt.Errorf("%w: %s", ErrUnsupported, runtime.GOOS)
}

// IsInit is always false off Linux.
func IsInit() bool { return false }

// Init never runs off Linux.
func Init() int { return 2 }

// Sweep has nothing to sweep.
func (m *Manager) Sweep() (int, error) { return 0, ErrUnsupported }

// Run fails with ErrUnsupported.
func (m *Manager) Run(context.Context, Spec, OutputFunc) (Result, error) {
	return Result{}, ErrUnsupported
}

// Prepare fails with ErrUnsupported.
func (m *Manager) Prepare(context.Context, Base) (*Jail, error) { return nil, ErrUnsupported }

// Run fails with ErrUnsupported.
func (j *Jail) Run(context.Context, Spec, OutputFunc) (Result, error) {
	return Result{}, ErrUnsupported
}

// Start fails with ErrUnsupported.
func (j *Jail) Start(context.Context, Spec, OutputFunc) (*Process, error) {
	return nil, ErrUnsupported
}

// Process is unavailable off Linux.
type Process struct{}

// Wait never runs off Linux.
func (p *Process) Wait() Result {
	return Result{Status: StatusSetupError, Reason: ErrUnsupported.Error()}
}

// Close does nothing.
func (m *Manager) Close() error { return nil }

// Release does nothing.
func (m *Manager) Release(*Jail) {}

// Wait does nothing.
func (m *Manager) Wait() {}

// Close does nothing.
func (j *Jail) Close() error { return nil }

// Check is one isolation layer as found on this host.
type Check struct {
	Layer    string `json:"layer"`
	OK       bool   `json:"ok"`
	Required bool   `json:"required"`
	Detail   string `json:"detail"`
}

// Probe reports that no layer is available off Linux.
func Probe(Config) []Check {
	return []Check{{Layer: "linux", Required: true, Detail: "pyexec jails need Linux; this is " + runtime.GOOS}}
}

// Workspace fails with ErrUnsupported.
func (p *Process) Workspace() (*os.Root, error) { return nil, ErrUnsupported }

// WriteFiles fails with ErrUnsupported.
func (p *Process) WriteFiles([]File) error { return ErrUnsupported }

// DialInside reports ErrUnsupported.
func (j *Jail) DialInside(context.Context, int) (net.Conn, error) { return nil, ErrUnsupported }

// ListenInside reports ErrUnsupported.
func (j *Jail) ListenInside(string, string) (net.Listener, error) { return nil, ErrUnsupported }

// PayloadOwner reports the invalid ids -1, -1.
func (m *Manager) PayloadOwner() (uid, gid int) { return -1, -1 }
