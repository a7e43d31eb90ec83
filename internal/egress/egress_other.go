//go:build !linux

package egress

import (
	"context"
	"errors"
	"os"
)

// ErrUnsupported says egress needs Linux (TUN devices, network namespaces).
var ErrUnsupported = errors.New("network egress needs Linux")

// Egress is unavailable off Linux: Serve fails, so a jail never gets a
// route out.
type Egress struct{}

// New returns an Egress that cannot serve.
func New(Config, Grant, Hooks) *Egress { return &Egress{} }

// Serve fails with ErrUnsupported.
func (e *Egress) Serve(*os.File) error { return ErrUnsupported }

// Close does nothing.
func (e *Egress) Close() error { return nil }

// Stats are always zero.
func (e *Egress) Stats() Stats { return Stats{} }

// Sync returns at once: there are no events.
func (e *Egress) Sync(context.Context) bool { return true }
