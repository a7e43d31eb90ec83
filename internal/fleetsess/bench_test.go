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
	req := engine.CellRequest{Code: "x += 1", Timeout: 20 * time.Second}
	ctx := context.Background()
	for _, bc := range []struct {
		name string
		run  func(id string) (engine.CellResult, error)
	}{
		{"engine", func(id string) (engine.CellResult, error) { return a.eng.ExecuteCell(ctx, id, alice, req) }},
		{"router-local", func(id string) (engine.CellResult, error) { return a.r.ExecuteCell(ctx, id, alice, req) }},
		{"router-forwarded", func(id string) (engine.CellResult, error) { return other.r.ExecuteCell(ctx, id, alice, req) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			// A session per run: a session's interpreter does not live
			// through many thousands of cells (see the report of this
			// branch), and each run starts from the same state.
			s := a.create(b)
			defer a.r.DeleteSession(ctx, s.ID, alice)
			a.cell(b, s.ID, "x = 0")
			for b.Loop() {
				if _, err := bc.run(s.ID); err != nil {
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
