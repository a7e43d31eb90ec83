package executions

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/egress"
	"github.com/pyexec/pyexec/internal/egress/egresstest"
	"github.com/pyexec/pyexec/internal/engine/run"
	"github.com/pyexec/pyexec/internal/engine/runtest"
)

// TestNetworkEgress runs executions with network through the engine in a
// closed test world (egresstest): the payload reaches what the policy
// allows, each attempt is an event in the stream and the record, a
// request's list narrows the operator's, and a limit ends the execution
// with reason network_limit.
func TestNetworkEgress(t *testing.T) {
	if ranIsolated(t) {
		return
	}
	w := egresstest.New(t)
	allow, err := egress.ParseRules([]string{"allowed.test", "other.test", "big.test"})
	if err != nil {
		t.Fatal(err)
	}
	guard, err := egress.NewGuard([]uint16{uint16(w.API.Addr().(*net.TCPAddr).Port)})
	if err != nil {
		t.Fatal(err)
	}
	netCfg := &egress.Config{Policy: egress.Policy{Allow: allow}, Guard: guard, Resolver: egress.StaticResolver(w.Hosts),
		Limits: egress.Limits{BytesIn: 1 << 20, ConnectTimeout: 3 * time.Second}}
	e := start(t, t.TempDir(), nodeConfig{exec: Config{Run: run.Config{AllowNetwork: true, Network: netCfg}}}, runtest.Jails(t))
	ctx := context.Background()
	get := func(host, path string) run.Request {
		r := py("import urllib.request\ntry:\n    print(urllib.request.urlopen('http://" + host + path + "', timeout=10).read()[:40].decode())\n" +
			"except Exception as e:\n    print(type(e).__name__)\n")
		r.Network = true
		return r
	}

	t.Run("allowed, with events in the stream and the record", func(t *testing.T) {
		id, err := e.eng.Submit(ctx, get("allowed.test", "/"))
		if err != nil {
			t.Fatal(err)
		}
		events, err := follow(ctx, e.eng, id, 0)
		if err != nil {
			t.Fatal(err)
		}
		var streamed []run.NetworkEvent
		for ev := range events {
			if ev.Type == EventNetwork {
				var ne run.NetworkEvent
				if err := json.Unmarshal([]byte(ev.Data), &ne); err != nil {
					t.Fatalf("network event %q: %v", ev.Data, err)
				}
				streamed = append(streamed, ne)
			}
		}
		x, err := getExec(ctx, e.eng, id)
		if err != nil {
			t.Fatal(err)
		}
		if x.Status != run.StatusCompleted || x.Stdout != "hello allowed.test\n" {
			t.Fatalf("status %s stdout %q stderr %q", x.Status, x.Stdout, x.Stderr)
		}
		relayed := func(ev run.NetworkEvent) bool {
			return ev.Proto == "tcp" && ev.Host == "allowed.test" && ev.Port == 80 && ev.Verdict == egress.VerdictAllow &&
				ev.BytesOut > 0 && ev.BytesIn > 0
		}
		if !slices.ContainsFunc(x.NetworkEvents, relayed) {
			t.Errorf("the record has no relayed connection: %+v", x.NetworkEvents)
		}
		if !slices.ContainsFunc(streamed, relayed) {
			t.Errorf("the stream has no relayed connection: %+v", streamed)
		}
	})

	t.Run("a request's list narrows the operator's", func(t *testing.T) {
		r := get("allowed.test", "/")
		r.NetworkAllow = []string{"other.test"}
		x, err := e.eng.RunSync(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		if x.Stdout != "URLError\n" {
			t.Errorf("stdout %q, want URLError (stderr %q)", x.Stdout, x.Stderr)
		}
		denied := func(ev run.NetworkEvent) bool {
			return ev.Proto == "dns" && ev.Host == "allowed.test" && ev.Reason == egress.ReasonNotAllowed
		}
		if !slices.ContainsFunc(x.NetworkEvents, denied) {
			t.Errorf("no refused lookup of allowed.test: %+v", x.NetworkEvents)
		}
	})

	t.Run("a request cannot widen the operator's list", func(t *testing.T) {
		r := get(egresstest.PublicHost, "/")
		r.NetworkAllow = []string{egresstest.PublicHost}
		x, err := e.eng.RunSync(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		if x.Stdout != "URLError\n" {
			t.Errorf("stdout %q, want URLError (stderr %q)", x.Stdout, x.Stderr)
		}
	})

	t.Run("going over the bytes limit ends the execution", func(t *testing.T) {
		x, err := e.eng.RunSync(ctx, get("big.test", "/big"))
		if err != nil {
			t.Fatal(err)
		}
		if x.Status != run.StatusFailed || x.Reason != run.ReasonNetworkLimit {
			t.Errorf("status %s reason %q error %q, want failed/%s", x.Status, x.Reason, x.Error, run.ReasonNetworkLimit)
		}
	})

	t.Run("an empty list is refused, never read as the operator's", func(t *testing.T) {
		r := get("allowed.test", "/")
		r.NetworkAllow = []string{}
		if _, err := e.eng.Submit(ctx, r); !errors.Is(err, run.ErrInvalid) {
			t.Errorf("async: %v, want ErrInvalid", err)
		}
		if _, err := e.eng.RunSync(ctx, r); !errors.Is(err, run.ErrInvalid) {
			t.Errorf("sync: %v, want ErrInvalid", err)
		}
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		var back run.Request
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if back.NetworkAllow == nil {
			t.Error("an empty list came back from JSON as no list")
		}
	})

	t.Run("a bad rule is the request's error", func(t *testing.T) {
		r := get("allowed.test", "/")
		r.NetworkAllow = []string{"allowed.test:0"}
		if _, err := e.eng.RunSync(ctx, r); err == nil {
			t.Error("a bad rule was accepted")
		}
	})
}

// ranIsolated runs the calling test again in a network namespace of its
// own, where its test world lives, when this process is root and not in
// one yet; true means it did (and failed t if that run failed), so the
// caller returns.
func ranIsolated(t *testing.T) bool {
	t.Helper()
	return egresstest.RanIsolated(t)
}
