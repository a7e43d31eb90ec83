package fleetsess

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/engine/enginetest"
	"github.com/pyexec/pyexec/internal/sandbox"
	"github.com/pyexec/pyexec/internal/snapshot"
	"github.com/pyexec/pyexec/internal/store"
)

// testMaxPayload is small so that a 2 MiB file crosses nodes through the
// object store, as a 64 MiB one does on a real fleet.
const testMaxPayload = 1 << 20

var alice = engine.Caller{Name: "alice"}

// fleetServer starts one in-process NATS server with JetStream: the
// fleet's shared store and message bus.
func fleetServer(t testing.TB) *server.Server {
	t.Helper()
	srv, err := server.NewServer(&server.Options{ServerName: "fleet", DontListen: true, JetStream: true,
		StoreDir: t.TempDir(), MaxPayload: testMaxPayload, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("NATS server not ready")
	}
	t.Cleanup(func() {
		srv.Shutdown()
		srv.WaitForShutdown()
	})
	return srv
}

// node is one pyexec node of a test fleet: a real engine (its executions
// in a store of its own, its sessions in real jails) and a Router on its
// own connection to the fleet's server.
type node struct {
	name string
	eng  *engine.Engine
	r    *Router
	nc   *nats.Conn
	reg  *store.NATS
}

func startNode(t testing.TB, srv *server.Server, name string, maxSessions int) *node {
	t.Helper()
	return startNodeWith(t, srv, name, engine.SessionConfig{Max: maxSessions, DefaultMemoryBytes: 64 << 20})
}

// startNodeWith is startNode with its sessions configured by sc.
func startNodeWith(t testing.TB, srv *server.Server, name string, sc engine.SessionConfig) *node {
	t.Helper()
	return startNodeOpts(t, srv, name, sc, false)
}

// startNodeOpts is startNodeWith whose engine, when parks, saves its idle
// sessions at its shutdown (Close) for the fleet to take back.
func startNodeOpts(t testing.TB, srv *server.Server, name string, sc engine.SessionConfig, parks bool) *node {
	t.Helper()
	ctx := context.Background()
	nc, err := nats.Connect("", nats.InProcessServer(srv), nats.Name(name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	reg, err := store.Open(ctx, nc, store.Config{MaxRecordBytes: testMaxPayload / 2})
	if err != nil {
		t.Fatal(err)
	}
	r, err := New(Config{Node: name, Conn: nc, Registry: reg, Blobs: reg, CheckEvery: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	// Cleanups run last first: the router closes after the engine.
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Errorf("closing the router of %s: %v", name, err)
		}
	})
	// Snapshots go to the fleet's store, under the fleet's one key.
	key, err := snapshot.LoadKey(srv.JetStreamConfig().StoreDir)
	if err != nil {
		t.Fatal(err)
	}
	eng := enginetest.Start(t, engine.Config{DefaultTimeout: 20 * time.Second,
		Sessions:  sc,
		Snapshots: engine.SnapshotConfig{Key: key, SpoolDir: t.TempDir()}},
		func(_ *store.NATS, jails *sandbox.Manager) engine.Deps {
			d := engine.Deps{Jails: jails, Snapshots: reg, OnSessionEnd: r.SessionEnded,
				OnSessionCheckpoint: r.SessionCheckpointed, OnSessionCell: r.SessionCells}
			if parks {
				d.OnSessionPark = r.SessionParked
			}
			return d
		})
	if err := r.Start(ctx, eng); err != nil {
		t.Fatal(err)
	}
	return &node{name: name, eng: eng, r: r, nc: nc, reg: reg}
}

func (n *node) create(t testing.TB) engine.Session {
	t.Helper()
	s, err := n.r.CreateSession(context.Background(), engine.SessionRequest{Requirements: "-", Caller: alice.Name})
	if err != nil {
		t.Fatalf("create via %s: %v", n.name, err)
	}
	return s
}

func (n *node) cell(t testing.TB, id, code string) engine.CellResult {
	t.Helper()
	res, err := n.r.ExecuteCell(context.Background(), id, alice, engine.CellRequest{Code: code, EvalLastExpr: true, Timeout: 20 * time.Second})
	if err != nil {
		t.Fatalf("cell %q via %s: %v", code, n.name, err)
	}
	return res
}

func TestSessionServedByAnotherNode(t *testing.T) {
	srv := fleetServer(t)
	a, b := startNode(t, srv, "a", 4), startNode(t, srv, "b", 4)
	ctx := context.Background()
	s := a.create(t)
	if a.eng.LiveSessions() != 1 || b.eng.LiveSessions() != 0 {
		t.Fatalf("a session created via a with room should live on a: a %d, b %d", a.eng.LiveSessions(), b.eng.LiveSessions())
	}

	b.cell(t, s.ID, "x = 1")
	if res := b.cell(t, s.ID, "print(x)"); res.Stdout != "1\n" || res.ExecutionCount != 2 {
		t.Fatalf("state across cells via b: stdout %q, count %d", res.Stdout, res.ExecutionCount)
	}
	if res := b.cell(t, s.ID, "1/0"); res.ErrorType != "ZeroDivisionError" || res.ExitCode != 1 {
		t.Fatalf("a Python exception via b: %+v", res.Execution)
	}
	info, err := b.r.GetSession(ctx, s.ID, alice)
	if err != nil || info.ExecutionCount != 3 || info.ID != s.ID {
		t.Fatalf("get via b: %+v, %v", info, err)
	}

	t.Run("files", func(t *testing.T) {
		data := bytes.Repeat([]byte("0123456789abcdef"), 2<<20/16) // over max_payload
		if err := b.r.PutSessionFile(ctx, s.ID, alice, "big.bin", data); err != nil {
			t.Fatalf("put via b: %v", err)
		}
		if res := a.cell(t, s.ID, "import os; os.path.getsize('big.bin')"); res.Result == nil || *res.Result != "2097152" {
			t.Fatalf("the file put via b, seen by the session: %+v", res.Execution)
		}
		got, err := b.r.ReadSessionFile(ctx, s.ID, alice, "big.bin")
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("read via b: %d bytes, %v", len(got), err)
		}
		files, err := b.r.ListSessionFiles(ctx, s.ID, alice)
		if err != nil || len(files) != 1 || files[0].Path != "big.bin" || files[0].Size != int64(len(data)) {
			t.Fatalf("list via b: %+v, %v", files, err)
		}
		_, err = b.r.ReadSessionFile(ctx, s.ID, alice, "missing.txt")
		if !errors.Is(err, engine.ErrFileNotFound) {
			t.Fatalf("a missing file via b: %v, want ErrFileNotFound", err)
		}
	})

	t.Run("errors are the owner's", func(t *testing.T) {
		_, err := b.r.GetSession(ctx, s.ID, engine.Caller{Name: "mallory"})
		if !errors.Is(err, engine.ErrSessionNotFound) {
			t.Fatalf("another caller via b: %v, want ErrSessionNotFound", err)
		}
		_, err = b.r.ExecuteCell(ctx, s.ID, alice, engine.CellRequest{Code: "1", Timeout: -time.Second})
		if !errors.Is(err, engine.ErrInvalid) || !strings.Contains(err.Error(), "must not be negative") {
			t.Fatalf("an invalid cell via b: %v, want the engine's ErrInvalid text", err)
		}
		_, err = b.r.GetSession(ctx, "ses_nonexistent", alice)
		if !errors.Is(err, engine.ErrSessionNotFound) {
			t.Fatalf("an unknown id via b: %v", err)
		}
	})

	t.Run("interrupt and busy", func(t *testing.T) {
		done := make(chan engine.CellResult, 1)
		go func() {
			res, _ := a.r.ExecuteCell(ctx, s.ID, alice, engine.CellRequest{Code: "import time\nfor _ in range(300): time.sleep(0.1)", Timeout: 20 * time.Second})
			done <- res
		}()
		waitBusy(t, b, s.ID)
		if _, err := b.r.ExecuteCell(ctx, s.ID, alice, engine.CellRequest{Code: "2"}); !errors.Is(err, engine.ErrSessionBusy) {
			t.Fatalf("a second cell via b while one runs: %v, want ErrSessionBusy", err)
		}
		// An interrupt that comes before the driver has started the cell
		// is dropped (docs/sessions.md): repeat it until the cell ends.
		tick := time.NewTicker(300 * time.Millisecond)
		defer tick.Stop()
		timeout := time.After(10 * time.Second)
	wait:
		for {
			if err := b.r.InterruptSession(ctx, s.ID, alice); err != nil {
				t.Fatalf("interrupt via b: %v", err)
			}
			select {
			case res := <-done:
				if res.ErrorType != "KeyboardInterrupt" || res.SessionEnded {
					t.Fatalf("the interrupted cell: %+v", res)
				}
				break wait
			case <-tick.C:
			case <-timeout:
				t.Fatal("the cell did not end after interrupts via b")
			}
		}
		if res := b.cell(t, s.ID, "x"); res.Result == nil || *res.Result != "1" {
			t.Fatalf("variables after the interrupt: %+v", res.Execution)
		}
	})

	t.Run("listing is fleet-wide", func(t *testing.T) {
		own := b.create(t) // b has room: it lives on b
		list := a.r.ListSessions(ctx, alice)
		if len(list) != 2 || list[0].ID != s.ID || list[1].ID != own.ID {
			t.Fatalf("alice's sessions listed via a: %+v", list)
		}
		if l := a.r.ListSessions(ctx, engine.Caller{Name: "mallory"}); len(l) != 0 {
			t.Fatalf("mallory sees %d of alice's sessions", len(l))
		}
		if err := a.r.DeleteSession(ctx, own.ID, alice); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("restart and delete", func(t *testing.T) {
		info, err := b.r.RestartSession(ctx, s.ID, alice)
		if err != nil || info.Restarts != 1 || info.ExecutionCount != 0 {
			t.Fatalf("restart via b: %+v, %v", info, err)
		}
		if res := b.cell(t, s.ID, "'x' in globals()"); res.Result == nil || *res.Result != "False" {
			t.Fatalf("variables after a restart: %+v", res.Execution)
		}
		if err := b.r.DeleteSession(ctx, s.ID, alice); err != nil {
			t.Fatalf("delete via b: %v", err)
		}
		if a.eng.LiveSessions() != 0 {
			t.Fatalf("a still holds %d sessions after the delete via b", a.eng.LiveSessions())
		}
		for _, n := range []*node{a, b} {
			if _, err := n.r.GetSession(ctx, s.ID, alice); !errors.Is(err, engine.ErrSessionNotFound) {
				t.Fatalf("get via %s after the delete: %v, want ErrSessionNotFound", n.name, err)
			}
		}
		if _, _, err := a.reg.GetSession(ctx, s.ID); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("the registry still has the deleted session: %v", err)
		}
	})
}

func waitBusy(t *testing.T, via *node, id string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if info, err := via.r.GetSession(context.Background(), id, alice); err == nil && info.State == engine.SessionBusy {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("the session never became busy")
}

// kill cuts a node off the fleet as kill -9 would: its connection goes,
// its sessions' interpreters are left to the test's cleanup.
func (n *node) kill() { n.nc.Close() }

func TestSessionOfALostNode(t *testing.T) {
	srv := fleetServer(t)
	a, b := startNode(t, srv, "a", 4), startNode(t, srv, "b", 4)
	ctx := context.Background()
	idle, busy := a.create(t), a.create(t)

	cellErr := make(chan error, 1)
	go func() {
		_, err := b.r.ExecuteCell(ctx, busy.ID, alice, engine.CellRequest{Code: "import time; time.sleep(60)", Timeout: 60 * time.Second})
		cellErr <- err
	}()
	waitBusy(t, b, busy.ID)
	a.kill()
	start := time.Now()

	select {
	case err := <-cellErr:
		assertLost(t, err, busy.ID)
		if d := time.Since(start); d > 3*time.Second {
			t.Fatalf("the waiting cell learnt of the loss after %s", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a cell waiting on a killed node hangs")
	}
	for range 2 { // the first finds no responders, the second reads the registry
		_, err := b.r.GetSession(ctx, idle.ID, alice)
		assertLost(t, err, idle.ID)
	}
	e, _, err := b.reg.GetSession(ctx, idle.ID)
	if err != nil || e.Ended != ReasonNodeLost {
		t.Fatalf("registry entry of the lost session: %+v, %v", e, err)
	}
	if l := b.r.ListSessions(ctx, alice); len(l) != 0 {
		t.Fatalf("lost sessions are still listed: %+v", l)
	}
}

func assertLost(t *testing.T, err error, id string) {
	t.Helper()
	if !errors.Is(err, engine.ErrSessionEnded) || !strings.Contains(err.Error(), "node_lost: the node running this session stopped") ||
		!strings.Contains(err.Error(), id) {
		t.Fatalf("got %v, want ErrSessionEnded naming %s and node_lost", err, id)
	}
}

func TestSessionOfANodeThatShutDown(t *testing.T) {
	srv := fleetServer(t)
	a, b := startNode(t, srv, "a", 4), startNode(t, srv, "b", 4)
	ctx := context.Background()
	s := a.create(t)
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := a.eng.Close(cctx); err != nil {
		t.Fatal(err)
	}
	if err := a.r.Close(); err != nil {
		t.Fatal(err)
	}
	_, err := b.r.ExecuteCell(ctx, s.ID, alice, engine.CellRequest{Code: "1"})
	if !errors.Is(err, engine.ErrSessionEnded) || !strings.Contains(err.Error(), "node_shutdown: the node running this session shut down") {
		t.Fatalf("a cell in a session whose node shut down: %v", err)
	}
}

func TestSessionPlacement(t *testing.T) {
	srv := fleetServer(t)
	a, b := startNode(t, srv, "a", 1), startNode(t, srv, "b", 2)
	ctx := context.Background()
	first := a.create(t)
	second, err := a.r.CreateSession(ctx, engine.SessionRequest{Requirements: "-", Caller: alice.Name})
	if err != nil {
		t.Fatalf("a full node forwards the create: %v", err)
	}
	if a.eng.LiveSessions() != 1 || b.eng.LiveSessions() != 1 {
		t.Fatalf("sessions per node: a %d, b %d; want 1 and 1", a.eng.LiveSessions(), b.eng.LiveSessions())
	}
	if res := a.cell(t, second.ID, "y = 6 * 7\ny"); res.Result == nil || *res.Result != "42" {
		t.Fatalf("the placed session via a: %+v", res.Execution)
	}
	if e, _, err := a.reg.GetSession(ctx, second.ID); err != nil || e.Node != "b" {
		t.Fatalf("registry entry of the placed session: %+v, %v; want node b", e, err)
	}
	if e, _, err := a.reg.GetSession(ctx, first.ID); err != nil || e.Node != "a" || e.Owner != alice.Name {
		t.Fatalf("registry entry of the local session: %+v, %v; want node a, owner alice", e, err)
	}
	third := a.create(t)
	if b.eng.LiveSessions() != 2 {
		t.Fatalf("b holds %d sessions, want 2", b.eng.LiveSessions())
	}
	_, err = a.r.CreateSession(ctx, engine.SessionRequest{Requirements: "-", Caller: alice.Name})
	if !errors.Is(err, engine.ErrTooManySessions) || !strings.Contains(err.Error(), "no other node of the fleet has a free slot") {
		t.Fatalf("a full fleet: %v, want ErrTooManySessions", err)
	}
	// A freed slot on b is offered again.
	if err := a.r.DeleteSession(ctx, third.ID, alice); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err = a.r.CreateSession(ctx, engine.SessionRequest{Requirements: "-", Caller: alice.Name})
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("create after a slot freed on b: %v", err)
	}
}

// TestRegistryFollowsTheEngine: a session the engine reaps (idle timeout)
// leaves the registry, and the other nodes answer 404 for it, as one node
// did before fleets.
func TestRegistryFollowsTheEngine(t *testing.T) {
	srv := fleetServer(t)
	a, b := startNode(t, srv, "a", 4), startNode(t, srv, "b", 4)
	ctx := context.Background()
	s, err := a.r.CreateSession(ctx, engine.SessionRequest{Requirements: "-", Caller: alice.Name, IdleTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.reg.GetSession(ctx, s.ID); err != nil {
		t.Fatalf("the new session is not in the registry: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, _, err := b.reg.GetSession(ctx, s.ID)
		if errors.Is(err, store.ErrNotFound) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the reaped session is still in the registry: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := b.r.GetSession(ctx, s.ID, alice); !errors.Is(err, engine.ErrSessionNotFound) {
		t.Fatalf("a reaped session via b: %v, want ErrSessionNotFound", err)
	}
}

// A node the fleet declared lost (members' heartbeat silence, reported
// through Deps.OnNodeLost) may still hold its NATS connection, hung: its
// sessions end for every client at once instead of making them wait on a
// node that does not answer.
func TestSessionOfANodeDeclaredLost(t *testing.T) {
	srv := fleetServer(t)
	a, b := startNode(t, srv, "a", 4), startNode(t, srv, "b", 4)
	ctx := context.Background()
	s, other, busy := a.create(t), b.create(t), a.create(t)
	cellErr := make(chan error, 1)
	go func() {
		_, err := b.r.ExecuteCell(ctx, busy.ID, alice, engine.CellRequest{Code: "import time; time.sleep(60)", Timeout: 60 * time.Second})
		cellErr <- err
	}()
	waitBusy(t, b, busy.ID)
	b.r.NodeLost("a")
	_, err := b.r.ExecuteCell(ctx, s.ID, alice, engine.CellRequest{Code: "1"})
	assertLost(t, err, s.ID)
	select {
	case err := <-cellErr: // a call already waiting on the node ends too
		assertLost(t, err, busy.ID)
	case <-time.After(5 * time.Second):
		t.Fatal("a cell waiting on a node declared lost still waits")
	}
	if res := b.cell(t, other.ID, "print(2)"); res.Stdout != "2\n" {
		t.Fatalf("a session of a live node after another's loss: %+v", res)
	}
}

// TestParkedSessionPastItsLifetime: a session saved by its node's
// shutdown that its node is taking back answers "retry later" on the
// other nodes, but once past its lifetime it is lost: its node will not
// take it back, and no caller waits on it for ever.
func TestParkedSessionPastItsLifetime(t *testing.T) {
	srv := fleetServer(t)
	a, b := startNode(t, srv, "a", 4), startNode(t, srv, "b", 4)
	ctx := context.Background()
	s := a.create(t)
	a.kill()
	park := func(expires time.Time) {
		t.Helper()
		e, rev, err := b.reg.GetSession(ctx, s.ID)
		if err != nil {
			t.Fatal(err)
		}
		// its node claimed it at its start: the others leave it to it
		e.Hibernation, e.ExpiresAt, e.TakenAt = "snap_parked", expires, time.Now()
		if err := b.reg.UpdateSession(ctx, e, rev); err != nil {
			t.Fatal(err)
		}
	}
	park(time.Now().Add(time.Hour))
	if _, err := b.r.GetSession(ctx, s.ID, alice); !errors.Is(err, engine.ErrUnavailable) {
		t.Fatalf("a parked session within its lifetime, claimed by its node: %v, want ErrUnavailable", err)
	}
	park(time.Now().Add(-time.Second))
	_, err := b.r.GetSession(ctx, s.ID, alice)
	assertLost(t, err, s.ID)
}
