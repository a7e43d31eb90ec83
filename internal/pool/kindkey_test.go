package pool

import (
	"strings"
	"testing"

	"github.com/pyexec/pyexec/internal/runner"
	"github.com/pyexec/pyexec/internal/sandbox"
)

func kindKeySpec() sandbox.Spec {
	return sandbox.Spec{
		Argv:   runner.Argv("/usr/bin/python3", runner.Options{}),
		Env:    []string{"PATH=/usr/bin", "HOME=/tmp", "LANG=C.UTF-8"},
		Dir:    "/work",
		Mounts: []sandbox.Mount{{Source: "/opt/env", Target: "/opt/env"}},
	}
}

// TestKindKeySeparatesKinds: specs that differ anywhere fixed at start are
// different kinds (a warm jail of one must never serve the other), and the
// driver source counts by its content, wherever its copy lives.
func TestKindKeySeparatesKinds(t *testing.T) {
	p := New(nil, Config{})
	defer p.Close()
	base := kindKeySpec()
	key := p.kindKey(base)

	copied := kindKeySpec()
	copied.Argv[3] = strings.Clone(runner.DriverSource())
	if got := p.kindKey(copied); got != key {
		t.Errorf("the same driver source at another address: kind %s, want %s", got, key)
	}
	changes := map[string]func(*sandbox.Spec){
		"another mount":       func(s *sandbox.Spec) { s.Mounts[0].Source = "/opt/other" },
		"another environment": func(s *sandbox.Spec) { s.Env[2] = "LANG=C" },
		"another driver":      func(s *sandbox.Spec) { s.Argv[3] = runner.DriverSource() + "\n" },
		"the driver's digest in its place": func(s *sandbox.Spec) {
			s.Argv[3] = string(p.driverSum[:])
		},
		"network": func(s *sandbox.Spec) { s.Network = true },
	}
	for name, change := range changes {
		s := kindKeySpec()
		change(&s)
		if p.kindKey(s) == key {
			t.Errorf("%s: the same kind", name)
		}
	}
}

// BenchmarkKindKey is the naming of a request's kind, which every request
// pays: its argv carries the whole driver source.
func BenchmarkKindKey(b *testing.B) {
	p := New(nil, Config{})
	defer p.Close()
	s := kindKeySpec()
	b.ReportAllocs()
	for b.Loop() {
		p.kindKey(s)
	}
}
