// Command maxpayload measures what a NATS server's max_payload costs
// pyexec: for each value of -payloads it starts a JetStream server in
// process with that limit (with -servers 3, a cluster of three on
// loopback, and the store replicated three times) and one
// `pyexec serve --nats` on it, then times
// -n sync executions (POST /api/v1/eval) of each kind: print(1), one that
// prints 5 MiB, and one that shows a 3 MB rich output (an HTML display,
// which goes into the record and a display event: above the server's
// max_payload both spill to the object store). It prints the median and
// mean latency per kind and payload. It is a measurement tool, not a
// test; it needs root (jails).
//
//	go build -o bin/pyexec ./cmd/pyexec
//	go run ./bench/maxpayload -pyexec bin/pyexec -n 20 [-servers 3]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pyexec/pyexec/client"
	"github.com/pyexec/pyexec/internal/testserver"
)

// kind is one execution measured.
type kind struct {
	name, code string
	check      func(*client.ExecutionResult) error
}

// kinds are the executions measured.
func kinds() []kind {
	return []kind{
		{"print(1)", "print(1)", func(r *client.ExecutionResult) error {
			return expect(r.Stdout == "1\n", "stdout %q", r.Stdout)
		}},
		{"5 MiB of stdout", "import sys\nsys.stdout.write('x' * (5 << 20))\n", func(r *client.ExecutionResult) error {
			return expect(len(r.Stdout) == 5<<20, "%d bytes of stdout", len(r.Stdout))
		}},
		{"3 MB rich output", "class Big:\n    def _repr_html_(self):\n        return 'z' * 3000000\ndisplay(Big())\n", func(r *client.ExecutionResult) error {
			html := ""
			if len(r.Outputs) == 1 {
				html, _ = r.Outputs[0].Text("text/html")
			}
			return expect(len(html) == 3000000, "%d outputs, %d bytes of HTML", len(r.Outputs), len(html))
		}},
	}
}

func expect(ok bool, format string, args ...any) error {
	if ok {
		return nil
	}
	return fmt.Errorf("unexpected result: "+format, args...)
}

func main() {
	os.Exit(run())
}

func run() int {
	binary := flag.String("pyexec", "bin/pyexec", "pyexec binary to measure")
	payloads := flag.String("payloads", "1048576,8388608", "NATS max_payload values in bytes, comma separated")
	n := flag.Int("n", 20, "executions of each kind per payload")
	servers := flag.Int("servers", 1, "NATS servers: 1, or 3 clustered (the store then keeps 3 replicas)")
	flag.Parse()
	if *servers != 1 && *servers != 3 {
		fmt.Fprintln(os.Stderr, "maxpayload: -servers is 1 or 3")
		return 2
	}
	bin, err := filepath.Abs(*binary)
	if err != nil {
		fmt.Fprintln(os.Stderr, "maxpayload:", err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	fmt.Printf("%d sync executions per kind, one node on %d JetStream server(s) in process\n\n", *n, *servers)
	fmt.Println("| max_payload | execution | median ms | mean ms |")
	fmt.Println("|---:|---|---:|---:|")
	for f := range strings.SplitSeq(*payloads, ",") {
		mp, err := strconv.ParseInt(strings.TrimSpace(f), 10, 32)
		if err != nil {
			fmt.Fprintf(os.Stderr, "maxpayload: bad payload %q\n", f)
			return 2
		}
		if err := measure(ctx, bin, int32(mp), *n, *servers); err != nil {
			fmt.Fprintf(os.Stderr, "maxpayload: max_payload %d: %v\n", mp, err)
			return 1
		}
	}
	return 0
}

// measure runs every kind n times on fresh NATS servers with max_payload
// mp and a fresh node, and prints a row per kind.
func measure(ctx context.Context, bin string, mp int32, n, servers int) error {
	nats, err := testserver.NewCluster("pyexec-maxpayload", servers, "", mp)
	if err != nil {
		return err
	}
	defer nats.Close()
	if err := nats.StartAll(); err != nil {
		return err
	}
	parent := fmt.Sprintf("pyexec-maxpayload-%d", os.Getpid())
	// The node waits for JetStream's leader itself (it starts in any order).
	srv, err := testserver.RunInNewDir(ctx, "pyexec-maxpayload-", testserver.Config{Binary: bin, CgroupParent: parent,
		Flags: []string{"--nats", nats.URLs()[0], "--nats-replicas", strconv.Itoa(servers), "--node-name", "bench",
			"--prepare-base=false", "--provision-tools=false"}})
	if err != nil {
		return err
	}
	defer func() {
		_ = srv.Close()
		_ = testserver.RemoveCgroups(parent)
	}()
	c := client.New(srv.URL, client.WithTimeout(2*time.Minute))
	for _, k := range kinds() {
		// One run first, not counted: the warm pool fills for this kind.
		if _, err := c.Eval(ctx, &client.SimpleExecRequest{Code: k.code}); err != nil {
			return err
		}
		var took []time.Duration
		for range n {
			start := time.Now()
			r, err := c.Eval(ctx, &client.SimpleExecRequest{Code: k.code})
			if err != nil {
				return err
			}
			if r.Status != client.StatusCompleted {
				return fmt.Errorf("%s: %s %s", k.name, r.Status, r.Error)
			}
			if err := k.check(r); err != nil {
				return fmt.Errorf("%s: %w", k.name, err)
			}
			took = append(took, time.Since(start))
		}
		slices.Sort(took)
		var sum time.Duration
		for _, d := range took {
			sum += d
		}
		fmt.Printf("| %d | %s | %.0f | %.0f |\n", mp, k.name, ms(took[len(took)/2]), ms(sum/time.Duration(len(took))))
	}
	return nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
