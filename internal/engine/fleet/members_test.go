package fleet_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/engine/fleet"
	"github.com/pyexec/pyexec/internal/engine/runtest"
	"github.com/pyexec/pyexec/internal/store"
)

// startNATSServers starts n clustered nats-servers with JetStream on
// loopback (one plain server when n is 1) and returns their client URLs.
// They stop when the test ends.
func startNATSServers(t *testing.T, n int) []string {
	t.Helper()
	clusterPorts := make([]int, n)
	for i := range clusterPorts {
		clusterPorts[i] = freePort(t)
	}
	var urls []string
	for i := range n {
		opts := &server.Options{
			ServerName: fmt.Sprintf("n%d", i), Host: "127.0.0.1", Port: -1, NoSigs: true, NoLog: true,
			JetStream: true, StoreDir: t.TempDir(), MaxPayload: store.EmbeddedMaxPayload,
		}
		if n > 1 {
			opts.Cluster = server.ClusterOpts{Name: "pyexec-test", Host: "127.0.0.1", Port: clusterPorts[i]}
			for j, p := range clusterPorts {
				if j != i {
					opts.Routes = append(opts.Routes, server.RoutesFromStr("nats://127.0.0.1:"+strconv.Itoa(p))...)
				}
			}
		}
		srv, err := server.NewServer(opts)
		if err != nil {
			t.Fatal(err)
		}
		go srv.Start()
		t.Cleanup(func() {
			srv.Shutdown()
			srv.WaitForShutdown()
		})
		if !srv.ReadyForConnections(10 * time.Second) {
			t.Fatal("nats-server did not start")
		}
		urls = append(urls, srv.ClientURL())
	}
	for _, url := range urls {
		waitJetStream(t, url)
	}
	return urls
}

// waitJetStream waits until JetStream answers through url: a cluster
// does once it has elected its meta leader.
func waitJetStream(t *testing.T, url string) {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := js.AccountInfo(ctx)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("JetStream does not answer through %s: %v", url, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// fleetNode is one engine of a fleet, on its own connection.
type fleetNode struct {
	name string
	nc   *nats.Conn
	st   *store.NATS
	eng  *engine.Engine
	lost atomic.Int32 // nodes this node declared lost
	// selfLost counts the times it learnt another node declared it lost.
	selfLost atomic.Int32
}

// startNode connects to url and starts an engine named name with the
// store replicated replicas times. Opening the store is retried while a
// fresh cluster elects its leaders.
func startNode(t *testing.T, url, name string, replicas int) (*fleetNode, error) {
	t.Helper()
	nc, err := nats.Connect(url, nats.Name(name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	ctx := context.Background()
	var st *store.NATS
	deadline := time.Now().Add(2 * time.Minute)
	for {
		octx, cancel := context.WithTimeout(ctx, 20*time.Second)
		st, err = store.Open(octx, nc, store.Config{Replicas: replicas})
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("opening the store on %s: %v", url, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	n := &fleetNode{name: name, nc: nc, st: st}
	n.eng, err = engine.New(engine.Config{Node: name, URL: nodeURL(name)}, engine.Deps{Store: st, Runner: &runtest.Runner{}, Interpreters: runtest.Interpreters{},
		Driver: runtest.PlainDriver{}, OnNodeLost: func(string) { n.lost.Add(1) },
		OnSelfLost: func() { n.selfLost.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.eng.Start(ctx); err != nil {
		return nil, err
	}
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		n.eng.Close(cctx)
	})
	return n, nil
}

// nodeURL is the URL test node name advertises: none for c.
func nodeURL(name string) string {
	if name == "c" {
		return ""
	}
	return "http://" + name + ".node.test:8080"
}

func mustStartNode(t *testing.T, url, name string, replicas int) *fleetNode {
	t.Helper()
	n, err := startNode(t, url, name, replicas)
	if err != nil {
		t.Fatalf("starting node %s: %v", name, err)
	}
	return n
}

// crash kills the node as kill -9 would: its connection drops (its
// subscriptions and heartbeats end), then the engine is abandoned and can
// record nothing more.
func (n *fleetNode) crash(t *testing.T) {
	t.Helper()
	n.nc.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	n.eng.Close(ctx)
}

func nodeNames(list []fleet.NodeInfo) []string {
	var names []string
	for _, n := range list {
		names = append(names, n.Name)
	}
	return names
}

func sameNames(got []fleet.NodeInfo, want ...string) bool {
	return fmt.Sprint(nodeNames(got)) == fmt.Sprint(want)
}

// TestNodesSeeEachOther checks the heartbeats: every node lists every
// live node with its capacity, and a node that stops gracefully is
// dropped at once, without being declared lost.
func TestNodesSeeEachOther(t *testing.T) {
	url := startNATSServers(t, 1)[0]
	a := mustStartNode(t, url, "a", 1)
	b := mustStartNode(t, url, "b", 1)
	c := mustStartNode(t, url, "c", 1)
	for _, n := range []*fleetNode{a, b, c} {
		runtest.WaitFor(t, n.name+" to see every node", func() bool { return sameNames(n.eng.Nodes(), "a", "b", "c") })
	}
	for _, info := range a.eng.Nodes() {
		if info.Instance == "" || info.Capacity < 1 || info.QueueSize < 1 || info.HeartbeatAt.IsZero() || info.StartedAt.IsZero() ||
			info.SessionCapacity < 1 || info.CPUs < 1 || info.Draining {
			t.Errorf("heartbeat of %s as a sees it: %+v", info.Name, info)
		}
	}

	// Each advertises its URL to the others (previews are relayed there).
	for _, n := range []string{"a", "b"} {
		if u, err := b.eng.NodeURL(n); err != nil || u != nodeURL(n) {
			t.Errorf("b's URL of %s: %q, %v; want %s", n, u, err, nodeURL(n))
		}
	}
	if _, err := a.eng.NodeURL("c"); err == nil || !strings.Contains(err.Error(), "node c advertises no URL (start it with --advertise-url)") {
		t.Errorf("the URL of c, which advertises none: %v", err)
	}
	if _, err := a.eng.NodeURL("z"); err == nil || !strings.Contains(err.Error(), "node z is not alive in the fleet") {
		t.Errorf("the URL of a node never seen: %v", err)
	}

	stopped := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.eng.Close(ctx); err != nil {
		t.Fatal(err)
	}
	runtest.WaitFor(t, "c to be dropped", func() bool {
		return sameNames(a.eng.Nodes(), "a", "b") && sameNames(b.eng.Nodes(), "a", "b")
	})
	if d := time.Since(stopped); d > time.Second {
		t.Errorf("a stopped node was listed for %s after it left", d)
	}
	if _, err := a.eng.NodeURL("c"); err == nil || !strings.Contains(err.Error(), "node c is not alive in the fleet") {
		t.Errorf("the URL of c, which left: %v", err)
	}
	time.Sleep(fleet.DefaultNodeLostAfter + time.Second)
	if n := a.lost.Load() + b.lost.Load(); n != 0 {
		t.Errorf("a node that left gracefully was declared lost %d times", n)
	}
}

// TestNodeNameInUse checks that a second node with the name of a live
// node refuses to start, and that the name is free again at once after
// its node crashed.
func TestNodeNameInUse(t *testing.T) {
	url := startNATSServers(t, 1)[0]
	a := mustStartNode(t, url, "a", 1)
	if _, err := startNode(t, url, "a", 1); !errors.Is(err, fleet.ErrNodeNameInUse) {
		t.Fatalf("second node named a: got %v, want fleet.ErrNodeNameInUse", err)
	}
	if !sameNames(a.eng.Nodes(), "a") {
		t.Fatalf("the refused node disturbed the first: nodes %v", nodeNames(a.eng.Nodes()))
	}
	a.crash(t)
	began := time.Now()
	again := mustStartNode(t, url, "a", 1)
	if d := time.Since(began); d > 2*time.Second {
		t.Errorf("restarting a crashed node took %s", d)
	}
	if got := again.eng.Nodes(); len(got) != 1 || got[0].Instance == "" {
		t.Errorf("nodes after the restart: %+v", got)
	}
}

// TestLostNodeIsDeclaredOnce runs three nodes on a three-server cluster
// with the store replicated three times. Node a crashes with an execution
// running: within NodeLostAfter and a little more it is failed/node_lost
// (by exactly one of the two survivors, which both race to declare a
// lost), followers see it end, and the survivors' own executions are not
// touched.
func TestLostNodeIsDeclaredOnce(t *testing.T) {
	urls := startNATSServers(t, 3)
	// The first node creates the replicated assets; the others find them.
	nodes := []*fleetNode{mustStartNode(t, urls[0], "a", 3), mustStartNode(t, urls[1], "b", 3), mustStartNode(t, urls[2], "c", 3)}
	a, b, c := nodes[0], nodes[1], nodes[2]
	for _, n := range nodes {
		runtest.WaitFor(t, n.name+" to see every node", func() bool { return sameNames(n.eng.Nodes(), "a", "b", "c") })
	}

	ctx := context.Background()
	ids := make(map[string]chan string)
	for _, n := range []*fleetNode{a, b} {
		ch := make(chan string, 1)
		ids[n.name] = ch
		go func() {
			x, err := n.eng.RunSync(ctx, runtest.Script("block"))
			if err == nil && n != a {
				ch <- string(x.Status)
			}
		}()
	}
	var onA, onB string
	runtest.WaitFor(t, "an execution running on a and one on b", func() bool {
		onA, onB = runningOn(t, c.eng, "a"), runningOn(t, c.eng, "b")
		return onA != "" && onB != ""
	})
	follow, err := c.eng.Follow(ctx, tester, onA, 0)
	if err != nil {
		t.Fatal(err)
	}

	a.crash(t)
	crashed := time.Now()
	// Settling takes NodeLostAfter from a's last heartbeat, the bound
	// checked below: the wait itself gives a loaded or emulated host room
	// to say how long it took rather than time out first.
	runtest.WaitForWithin(t, fleet.DefaultNodeLostAfter+20*time.Second, "a's execution to be settled",
		func() bool { return statusOf(t, b.eng, onA).Final() })
	took := time.Since(crashed)
	x, err := c.eng.Get(ctx, tester, onA)
	if err != nil {
		t.Fatal(err)
	}
	if x.Status != engine.StatusFailed || x.Reason != engine.ReasonNodeLost || x.Node != "a" || x.FinishedAt == nil {
		t.Errorf("a's execution after a was lost: status %s reason %q node %q", x.Status, x.Reason, x.Node)
	}
	if took > fleet.DefaultNodeLostAfter+2*time.Second {
		t.Errorf("a's execution was settled %s after the crash, want within %s and a little", took, fleet.DefaultNodeLostAfter)
	}
	t.Logf("settled %s after the crash: %s", took, x.Error)
	var last engine.Event
	for ev := range follow {
		last = ev
	}
	if last.Type != engine.EventStatus || last.Data != string(engine.StatusFailed) {
		t.Errorf("a follower of a's execution ended on %+v, want status failed", last)
	}
	runtest.WaitFor(t, "a to be dropped", func() bool {
		return sameNames(b.eng.Nodes(), "b", "c") && sameNames(c.eng.Nodes(), "b", "c")
	})
	time.Sleep(time.Second) // a slower survivor would have claimed by now
	if n := b.lost.Load() + c.lost.Load(); n != 1 {
		t.Errorf("a was declared lost %d times, want once", n)
	}
	if st := statusOf(t, c.eng, onB); st != engine.StatusRunning {
		t.Errorf("b's execution is %s after a was lost, want running", st)
	}
	if _, err := b.eng.Kill(ctx, tester, onB); err != nil {
		t.Fatal(err)
	}
	if got := <-ids["b"]; got != string(engine.StatusKilled) {
		t.Errorf("b's execution ended %s, want killed", got)
	}
}

// runningOn returns the id of an execution running on node, "" if none.
func runningOn(t *testing.T, e *engine.Engine, node string) string {
	t.Helper()
	list, _, err := e.List(context.Background(), engine.ListOptions{Status: engine.StatusRunning, Limit: 100, AllOwners: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range list {
		if x.Node == node {
			return x.ID
		}
	}
	return ""
}

// TestRecoveryLeavesLiveNodesAlone checks what a starting node settles:
// an unfinished execution of a node that is gone, not one whose node is
// alive, even when that node does not (yet) answer for it.
func TestRecoveryLeavesLiveNodesAlone(t *testing.T) {
	url := startNATSServers(t, 1)[0]
	b := mustStartNode(t, url, "b", 1)
	ctx := context.Background()
	record := func(node string) string { return runningRecord(t, b.st, node) }
	ofLive, ofGone := record("b"), record("gone")

	d := mustStartNode(t, url, "d", 1)
	if st := statusOf(t, d.eng, ofLive); st != engine.StatusRunning {
		t.Errorf("the live node's execution is %s after another node started, want running", st)
	}
	x, err := d.eng.Get(ctx, tester, ofGone)
	if err != nil {
		t.Fatal(err)
	}
	if x.Status != engine.StatusFailed || x.Reason != engine.ReasonNodeLost {
		t.Errorf("the gone node's execution is %s/%q after a node started, want failed/node_lost", x.Status, x.Reason)
	}
}

// TestAbandonedClaimIsTakenOver plays a survivor that declared node a
// lost and died before it settled a's executions: its mark on a's entry
// falls silent in turn, and another node takes the claim over and
// settles them.
func TestAbandonedClaimIsTakenOver(t *testing.T) {
	url := startNATSServers(t, 1)[0]
	b := mustStartNode(t, url, "b", 1)
	ctx := context.Background()
	mark, err := json.Marshal(fleet.NodeInfo{Name: "a", Instance: "gone", LostBy: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.st.CreateMember(ctx, "a", mark); err != nil {
		t.Fatal(err)
	}
	id := runningRecord(t, b.st, "a")
	if !sameNames(b.eng.Nodes(), "b") {
		t.Errorf("a node marked lost is listed: %v", nodeNames(b.eng.Nodes()))
	}
	deadline := time.Now().Add(fleet.DefaultNodeLostAfter + 2*time.Second)
	for statusOf(t, b.eng, id) == engine.StatusRunning {
		if time.Now().After(deadline) {
			t.Fatal("the lost node's execution is still running: nobody took the abandoned claim over")
		}
		time.Sleep(50 * time.Millisecond)
	}
	x, err := b.eng.Get(ctx, tester, id)
	if err != nil {
		t.Fatal(err)
	}
	if x.Status != engine.StatusFailed || x.Reason != engine.ReasonNodeLost {
		t.Errorf("the lost node's execution: %s/%q, want failed/node_lost", x.Status, x.Reason)
	}
	runtest.WaitFor(t, "the mark to be removed", func() bool {
		_, err := b.st.GetMember(ctx, "a")
		return errors.Is(err, store.ErrNotFound)
	})
	if n := b.lost.Load(); n != 1 {
		t.Errorf("b declared a lost %d times, want once", n)
	}
}

// TestNodeLearnsItWasDeclaredLost: a live node whose entry another node
// marked lost (its heartbeat was late) is told so (Deps.OnSelfLost), so
// that it stops serving what may now resume elsewhere.
func TestNodeLearnsItWasDeclaredLost(t *testing.T) {
	url := startNATSServers(t, 1)[0]
	b := mustStartNode(t, url, "b", 1)
	ctx := context.Background()
	mark, err := json.Marshal(fleet.NodeInfo{Name: "b", LostBy: "x"})
	if err != nil {
		t.Fatal(err)
	}
	for { // b's own heartbeat may land between the read and the write
		e, err := b.st.GetMember(ctx, "b")
		if err != nil {
			t.Fatal(err)
		}
		_, err = b.st.UpdateMember(ctx, "b", mark, e.Revision)
		if err == nil {
			break
		}
		if !errors.Is(err, store.ErrConflict) {
			t.Fatal(err)
		}
	}
	runtest.WaitFor(t, "b to learn it was declared lost", func() bool { return b.selfLost.Load() > 0 })
}
