// Command followers measures what following costs the server: for each N
// of -n it starts a fresh `pyexec serve`, submits one execution that prints
// -print bytes (capped by the server at -cap), has N SSE clients follow it
// from the start, and samples the server's resident set until every
// follower has the final status. It reports the peak RSS growth over the
// idle server and against the growth with one follower measured in the
// same run, and checks that every follower saw the same complete stream
// and that the outcome was recorded. It is a measurement tool, not a test.
//
//	go build -o bin/pyexec ./cmd/pyexec
//	go run ./bench/followers -pyexec bin/pyexec -n 1,10,60
package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pyexec/pyexec/internal/testserver"
)

func main() {
	os.Exit(run())
}

func run() int {
	binary := flag.String("pyexec", "bin/pyexec", "pyexec binary to measure")
	counts := flag.String("n", "1,10,60", "follower counts, comma separated; the first is the baseline")
	size := flag.Int64("print", 32<<20, "bytes the execution prints")
	limit := flag.Int64("cap", 10<<20, "the server's --max-output-bytes")
	slow := flag.Int("slow", 3, "followers that pause 2ms after each event (never more than N-1)")
	flag.Parse()

	var ns []int
	for f := range strings.SplitSeq(*counts, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "followers: bad count %q\n", f)
			return 2
		}
		ns = append(ns, n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()

	fmt.Printf("execution printing %d MiB, output cap %d MiB; peak server RSS over the idle server\n\n", *size>>20, *limit>>20)
	fmt.Println("| followers | idle RSS | peak RSS growth | vs first row | events each | outcome | followers done | time |")
	fmt.Println("|---|---|---|---|---|---|---|---|")
	var base int64
	for i, n := range ns {
		m, err := measure(ctx, *binary, n, min(*slow, n-1), *size, *limit)
		if err != nil {
			fmt.Fprintln(os.Stderr, "followers:", err)
			return 1
		}
		if i == 0 {
			base = m.growth
		}
		fmt.Printf("| %d | %d MiB | %+d MiB | %+d MiB | %d | %s | %d/%d | %.1f s |\n", n, m.idle>>20, m.growth>>20,
			(m.growth-base)>>20, m.events, m.outcome, m.complete, n, m.elapsed.Seconds())
	}
	return 0
}

// measurement is one row.
type measurement struct {
	idle, growth int64
	events       int
	outcome      string
	complete     int // followers whose stream was whole and the same as the others'
	elapsed      time.Duration
}

func measure(ctx context.Context, binary string, n, slow int, size, limit int64) (measurement, error) {
	s, err := startServer(ctx, binary, "--max-output-bytes", strconv.FormatInt(limit, 10),
		"--max-followers", strconv.Itoa(n), "--max-followers-per-key", strconv.Itoa(n))
	if err != nil {
		return measurement{}, err
	}
	defer s.Close()
	var m measurement
	// One small run first, so that the idle figure includes what any
	// first execution sets up.
	if _, err := s.submitAndWait(ctx, "print('warm')"); err != nil {
		return m, err
	}
	time.Sleep(time.Second)
	if m.idle, err = s.RSS(); err != nil {
		return m, err
	}
	peak := s.sampleRSS()

	start := time.Now()
	id, err := s.submit(ctx, program(size))
	if err != nil {
		return m, err
	}
	streams := make([]stream, n)
	var wg sync.WaitGroup
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: n}}
	for i := range streams {
		pause := time.Duration(0)
		if i < slow {
			pause = 2 * time.Millisecond
		}
		wg.Go(func() { streams[i] = follow(ctx, client, s.URL, id, pause) })
	}
	wg.Wait()
	m.elapsed = time.Since(start)
	m.growth = peak() - m.idle

	rec, err := s.result(ctx, id)
	if err != nil {
		return m, err
	}
	m.outcome = rec.Status
	if rec.Status == "failed" {
		m.outcome += " (" + rec.Reason + ")"
	}
	m.events = streams[0].events
	for _, st := range streams {
		if st.err == nil && st.last == rec.Status && st.digest == streams[0].digest {
			m.complete++
		} else if st.err != nil {
			fmt.Fprintln(os.Stderr, "followers: a follower failed:", st.err)
		}
	}
	return m, nil
}

// program prints size bytes of numbered 1 KiB lines after a pause that
// lets the followers attach.
func program(size int64) string {
	return fmt.Sprintf("import sys, time\ntime.sleep(1)\nfor i in range(%d):\n    sys.stdout.write('%%08d' %% i + 'x' * 1015 + '\\n')\n", size>>10)
}

// stream is what one follower saw.
type stream struct {
	digest [sha256.Size]byte
	events int
	last   string // data of the last status event
	err    error
}

// follow reads the SSE stream of id to its end, keeping a digest of the
// frames (heartbeats left out).
func follow(ctx context.Context, client *http.Client, url, id string, pause time.Duration) stream {
	var st stream
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/api/v1/executions/"+id+"/events", nil)
	if err != nil {
		return stream{err: err}
	}
	resp, err := client.Do(req)
	if err != nil {
		return stream{err: err}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		return stream{err: fmt.Errorf("events: HTTP %d: %s", resp.StatusCode, body)}
	}
	h := sha256.New()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	var typ string
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 || line[0] == ':' {
			continue
		}
		h.Write(line)
		h.Write([]byte{'\n'})
		switch {
		case bytes.HasPrefix(line, []byte("event: ")):
			typ = string(line[len("event: "):])
			st.events++
		case bytes.HasPrefix(line, []byte("data: ")) && typ == "status":
			var ev struct{ Data string }
			if err := json.Unmarshal(line[len("data: "):], &ev); err != nil {
				return stream{err: err}
			}
			st.last = ev.Data
		}
		if pause > 0 && bytes.HasPrefix(line, []byte("data: ")) {
			time.Sleep(pause)
		}
	}
	st.err = sc.Err()
	copy(st.digest[:], h.Sum(nil))
	return st
}

// server is one `pyexec serve` on a free loopback port.
type server struct {
	*testserver.Server
}

func startServer(ctx context.Context, binary string, extra ...string) (*server, error) {
	flags := append([]string{"--log-level", "warn", "--prepare-base=false"}, extra...)
	s, err := testserver.RunInNewDir(ctx, "pyexec-bench-followers-", testserver.Config{Binary: binary,
		CgroupParent: fmt.Sprintf("pyexec-bench-followers-%d", os.Getpid()), Flags: flags})
	if err != nil {
		return nil, err
	}
	return &server{s}, nil
}

// sampleRSS samples the resident set every 10ms until the returned
// function is called, which reports the peak.
func (s *server) sampleRSS() func() int64 {
	stop, done := make(chan struct{}), make(chan struct{})
	var peak int64
	go func() {
		defer close(done)
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			if v, err := s.RSS(); err == nil {
				peak = max(peak, v)
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	return func() int64 {
		close(stop)
		<-done
		return peak
	}
}

// record is the part of an ExecutionResult the bench reads.
type record struct {
	ID     string `json:"execution_id"`
	Status string `json:"status"`
	Reason string `json:"reason"`
}

func (s *server) submit(ctx context.Context, code string) (string, error) {
	var tarBuf bytes.Buffer
	tw := tar.NewWriter(&tarBuf)
	if err := tw.WriteHeader(&tar.Header{Name: "main.py", Mode: 0o644, Size: int64(len(code))}); err != nil {
		return "", err
	}
	if _, err := io.WriteString(tw, code); err != nil {
		return "", err
	}
	if err := tw.Close(); err != nil {
		return "", err
	}
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	if err := mw.WriteField("metadata", `{"entrypoint":"main.py","config":{"timeout_seconds":300}}`); err != nil {
		return "", err
	}
	fw, err := mw.CreateFormFile("tar", "code.tar")
	if err != nil {
		return "", err
	}
	if _, err := fw.Write(tarBuf.Bytes()); err != nil {
		return "", err
	}
	if err := mw.Close(); err != nil {
		return "", err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+"/api/v1/exec/async", &body)
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		b, _ := io.ReadAll(resp.Body)
		return "", fmt.Errorf("submit: HTTP %d: %s", resp.StatusCode, b)
	}
	var r record
	return r.ID, json.NewDecoder(resp.Body).Decode(&r)
}

// result reads the record of id; the stdout it carries is discarded.
func (s *server) result(ctx context.Context, id string) (record, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/api/v1/executions/"+id, nil)
	if err != nil {
		return record{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return record{}, err
	}
	defer resp.Body.Close()
	var r record
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return record{}, fmt.Errorf("result of %s: %w", id, err)
	}
	return r, nil
}

// submitAndWait submits code and polls until its record is final.
func (s *server) submitAndWait(ctx context.Context, code string) (record, error) {
	id, err := s.submit(ctx, code)
	if err != nil {
		return record{}, err
	}
	for {
		r, err := s.result(ctx, id)
		if err != nil {
			return r, err
		}
		if r.Status != "pending" && r.Status != "running" {
			return r, nil
		}
		select {
		case <-ctx.Done():
			return r, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}
