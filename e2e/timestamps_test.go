package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// timestampRuns is how many executions TestTimestampsParseOnOldPythons
// makes; issue 13 saw 14 to 20 failures in 100 calls before the fix.
const timestampRuns = 1000

// parseTimes is run by each old interpreter over the collected times: it
// parses each as python-executor's Python client does
// (datetime.fromisoformat after stripping a trailing "Z") and as a client
// that keeps the zone does, and prints the count or the first failures.
const parseTimes = `import json, sys
from datetime import datetime
times = json.load(open(sys.argv[1]))
bad = []
for s in times:
    for text in (s.rstrip("Z"), s[:-1] + "+00:00" if s.endswith("Z") else s):
        try:
            datetime.fromisoformat(text)
        except ValueError as e:
            bad.append("%s: %s" % (text, e))
if bad:
    print("\n".join(bad[:10]))
    sys.exit(1)
print(len(times))
`

// TestTimestampsParseOnOldPythons: every time pyexec writes over 1,000
// executions — results, records, listings, live events, a session — parses
// with datetime.fromisoformat on Python 3.9 and 3.10, the versions whose
// fromisoformat takes only 3 or 6 fractional digits (python-executor's
// Python client parses with it).
func TestTimestampsParseOnOldPythons(t *testing.T) {
	needRoot(t)
	s := startServer(t, t.TempDir())
	var (
		mu    sync.Mutex
		times []string
	)
	keep := func(body []byte) error {
		var v any
		if err := json.Unmarshal(body, &v); err != nil {
			return fmt.Errorf("not JSON: %w: %s", err, body)
		}
		found := collectTimes(v, nil)
		mu.Lock()
		times = append(times, found...)
		mu.Unlock()
		return nil
	}
	mustKeep := func(body []byte, err error) {
		t.Helper()
		if err == nil {
			err = keep(body)
		}
		if err != nil {
			t.Fatal(err)
		}
	}

	// Each run's code differs, so import detection (a jail of its own
	// per new code) is turned off: the runs measure the fork server.
	start := time.Now()
	ids := make([]string, timestampRuns)
	var wg sync.WaitGroup
	const workers = 2
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < timestampRuns; i += workers {
				body, err := postJSON(s.url+"/api/v1/eval", fmt.Sprintf(`{"code":"print(%d)","requirements_txt":"-"}`, i))
				if err != nil {
					t.Errorf("run %d: %v", i, err)
					return
				}
				var r struct {
					ID     string `json:"execution_id"`
					Status string `json:"status"`
					Stdout string `json:"stdout"`
				}
				if err := json.Unmarshal(body, &r); err != nil || r.Status != "completed" || r.Stdout != fmt.Sprintf("%d\n", i) {
					t.Errorf("run %d: %s", i, body)
					return
				}
				ids[i] = r.ID
				if err := keep(body); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	elapsed := time.Since(start)
	t.Logf("%d executions in %v (%v each, %d at a time)", timestampRuns, elapsed.Round(time.Millisecond), (elapsed / timestampRuns).Round(time.Microsecond), workers)

	for i := 0; i < timestampRuns; i += 50 {
		mustKeep(getJSON(s.url+"/api/v1/executions/"+ids[i], ""))
		events, err := getJSON(s.url+"/api/v1/executions/"+ids[i]+"/events", "application/x-ndjson")
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(bytes.NewReader(events))
		for sc.Scan() {
			mustKeep(sc.Bytes(), nil)
		}
	}
	mustKeep(getJSON(s.url+"/api/v1/executions?limit=100", ""))
	session, err := postJSON(s.url+"/api/v1/sessions", `{}`)
	mustKeep(session, err)
	var ses struct {
		ID string `json:"session_id"`
	}
	if err := json.Unmarshal(session, &ses); err != nil || ses.ID == "" {
		t.Fatalf("session: %s", session)
	}
	mustKeep(getJSON(s.url+"/api/v1/sessions/"+ses.ID, ""))
	mustKeep(getJSON(s.url+"/api/v1/sessions", ""))

	// Each run has created_at, started_at and finished_at.
	if len(times) < 3*timestampRuns {
		t.Fatalf("collected %d times, want at least %d", len(times), 3*timestampRuns)
	}
	file := filepath.Join(t.TempDir(), "times.json")
	data, _ := json.Marshal(times)
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, version := range []string{"3.9", "3.10"} {
		t.Run("python "+version, func(t *testing.T) {
			python := pyenvPython(version)
			if python == "" {
				t.Skipf("no pyenv interpreter %s is installed (pyenv versions)", version)
			}
			out, err := exec.Command(python, "-c", parseTimes, file).CombinedOutput()
			if err != nil || strings.TrimSpace(string(out)) != fmt.Sprint(len(times)) {
				t.Fatalf("%s: %v\n%s", python, err, out)
			}
			t.Logf("%s parsed all %d times", python, len(times))
		})
	}
}

// collectTimes appends the strings under time keys ("…_at", "time",
// "last_activity") anywhere in v.
func collectTimes(v any, out []string) []string {
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if s, ok := v[k].(string); ok && (strings.HasSuffix(k, "_at") || k == "time" || k == "last_activity") {
				out = append(out, s)
			} else {
				out = collectTimes(v[k], out)
			}
		}
	case []any:
		for _, x := range v {
			out = collectTimes(x, out)
		}
	}
	return out
}

// pyenvPython is the path of pyenv's interpreter MAJOR.MINOR, or "".
func pyenvPython(version string) string {
	root := os.Getenv("PYENV_ROOT")
	if out, err := exec.Command("pyenv", "root").Output(); err == nil {
		root = strings.TrimSpace(string(out))
	}
	if root == "" {
		home, _ := os.UserHomeDir()
		root = filepath.Join(home, ".pyenv")
	}
	matches, _ := filepath.Glob(filepath.Join(root, "versions", version+".*", "bin", "python"+version))
	if len(matches) == 0 {
		return ""
	}
	sort.Strings(matches)
	return matches[len(matches)-1]
}

// postJSON sends a JSON body and returns a 200 or 201 answer; a 429
// (the server's queue is full) is retried.
func postJSON(url, body string) ([]byte, error) {
	for {
		resp, err := http.Post(url, "application/json", strings.NewReader(body))
		if err != nil {
			return nil, err
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch {
		case err != nil:
			return nil, err
		case resp.StatusCode == http.StatusTooManyRequests:
			time.Sleep(20 * time.Millisecond)
		case resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusCreated:
			return b, nil
		default:
			return nil, fmt.Errorf("POST %s: %d %s", url, resp.StatusCode, b)
		}
	}
}

// getJSON fetches url with an optional Accept header; only a 200 is an
// answer.
func getJSON(url, accept string) ([]byte, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %d %s", url, resp.StatusCode, b)
	}
	return b, nil
}
