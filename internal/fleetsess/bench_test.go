package fleetsess

import (
	"context"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/engine"
)

// BenchmarkSessionCell is the cost of a cell `x += 1` called on the node
// holding the session (the engine directly, and through the Router: the
// same path, no NATS) and on another node (forwarded over NATS).
func BenchmarkSessionCell(b *testing.B) {
	srv := fleetServer(b)
	a, other := startNode(b, srv, "a", 4), startNode(b, srv, "b", 4)
	s := a.create(b)
	a.cell(b, s.ID, "x = 0")
	req := engine.CellRequest{Code: "x += 1", Timeout: 20 * time.Second}
	for _, bc := range []struct {
		name string
		run  func() (engine.CellResult, error)
	}{
		{"engine", func() (engine.CellResult, error) { return a.eng.ExecuteCell(context.Background(), s.ID, alice, req) }},
		{"router-local", func() (engine.CellResult, error) { return a.r.ExecuteCell(context.Background(), s.ID, alice, req) }},
		{"router-forwarded", func() (engine.CellResult, error) {
			return other.r.ExecuteCell(context.Background(), s.ID, alice, req)
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := bc.run(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkSessionCreate is a create on this node through the engine and
// through the Router (which adds the registry write).
func BenchmarkSessionCreate(b *testing.B) {
	srv := fleetServer(b)
	a := startNode(b, srv, "a", 4)
	req := engine.SessionRequest{Requirements: "-", Caller: alice.Name}
	for _, bc := range []struct {
		name   string
		create func() (engine.Session, error)
	}{
		{"engine", func() (engine.Session, error) { return a.eng.CreateSession(context.Background(), req) }},
		{"router", func() (engine.Session, error) { return a.r.CreateSession(context.Background(), req) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				s, err := bc.create()
				if err != nil {
					b.Fatal(err)
				}
				if err := a.r.DeleteSession(context.Background(), s.ID, alice); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
