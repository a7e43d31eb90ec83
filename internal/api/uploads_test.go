package api

import (
	"archive/tar"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// cpuTime is the user plus system CPU this process has used.
func cpuTime(t *testing.T) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestUploadPathBounds: paths of uploaded files are held to the workspace
// path bounds with a 400 naming the entry and the bound; a tree as deep as
// the bounds allow is written and read back intact; a deep hostile archive
// costs the server next to nothing; and a tar made with `tar -C dir .`
// (which holds a "./" entry) runs.
func TestUploadPathBounds(t *testing.T) {
	ts := newRealServer(t)
	const meta = `{"entrypoint":"main.py"}`
	deepDir := strings.Repeat("d/", 63) // 63 directories: with the file, 64 components
	readDeep := tarEntry{Name: "main.py", Body: "print(open('" + deepDir + "deep.txt').read())\n"}
	post := func(t *testing.T, tarData []byte) (int, []byte) {
		t.Helper()
		ct, body := multipartBody(t, tarData, meta, metaJSONPart)
		code, _, resp := call(t, ts, http.MethodPost, "/api/v1/exec/sync", ct, body, nil)
		return code, resp
	}

	t.Run("3000 nested directories in 10 KiB are refused at once", func(t *testing.T) {
		tarData := makeTar(t, tar.FormatPAX, tarEntry{Name: "main.py", Body: "pass\n"},
			tarEntry{Name: strings.Repeat("a/", 3000) + "x.py", Body: "x"})
		if len(tarData) > 12<<10 {
			t.Fatalf("the archive is %d bytes, want about 10 KiB", len(tarData))
		}
		before, start := cpuTime(t), time.Now()
		code, resp := post(t, tarData)
		cpu, wall := cpuTime(t)-before, time.Since(start)
		if code != http.StatusBadRequest || !strings.Contains(string(resp), `tar entry \"a/a/a/`) ||
			!strings.Contains(string(resp), "(6004 bytes)") || !strings.Contains(string(resp), "path is 6004 bytes long; the limit is 1024") {
			t.Fatalf("%d %s", code, resp)
		}
		if cpu > 100*time.Millisecond {
			t.Errorf("refusing it cost %v of CPU (wall %v), want at most 100ms", cpu, wall)
		}
		t.Logf("refused in %v wall, %v CPU", wall, cpu)
	})

	refused := []struct {
		name, path, want string
	}{
		{"too deep", strings.Repeat("d/", 64) + "x.py", "path has more than 64 components"},
		{"too long", strings.Repeat(strings.Repeat("n", 200)+"/", 6) + "x.py", "bytes long; the limit is 1024"},
		{"a name too long", strings.Repeat("n", 256) + ".py", "path component of 259 bytes; the limit is 255"},
	}
	for _, c := range refused {
		t.Run("refused: "+c.name, func(t *testing.T) {
			code, resp := post(t, makeTar(t, tar.FormatPAX, tarEntry{Name: "main.py", Body: "pass\n"}, tarEntry{Name: c.path, Body: "x"}))
			if code != http.StatusBadRequest || !strings.Contains(string(resp), "tar entry") || !strings.Contains(string(resp), c.want) {
				t.Fatalf("%d %s, want 400 with %q", code, resp, c.want)
			}
		})
	}

	t.Run("as deep as allowed is written intact", func(t *testing.T) {
		code, resp := post(t, makeTar(t, tar.FormatPAX, readDeep,
			tarEntry{Name: deepDir + "deep.txt", Body: "at the bottom"},
			tarEntry{Name: deepDir[:len(deepDir)-2] + "side.txt", Body: "beside"},
			tarEntry{Name: strings.Repeat("n", 255), Body: "long name"}))
		r := decode[ExecutionResult](t, resp)
		if code != http.StatusOK || r.Status != "completed" || r.Stdout != "at the bottom\n" {
			t.Fatalf("%d %s", code, resp)
		}
	})

	t.Run("eval files as deep as allowed", func(t *testing.T) {
		req, _ := json.Marshal(map[string]any{"files": []map[string]string{
			{"name": "main.py", "content": "print(open('" + deepDir + "deep.txt').read())"},
			{"name": deepDir + "deep.txt", "content": "eval bottom"}}})
		code, _, resp := call(t, ts, http.MethodPost, "/api/v1/eval", "application/json", req, nil)
		if r := decode[ExecutionResult](t, resp); code != http.StatusOK || r.Stdout != "eval bottom\n" {
			t.Fatalf("%d %s", code, resp)
		}
		req, _ = json.Marshal(map[string]any{"code": "pass", "files": []map[string]string{{"name": deepDir + "d/x", "content": "x"}}})
		code, _, resp = call(t, ts, http.MethodPost, "/api/v1/eval", "application/json", req, nil)
		if code != http.StatusBadRequest || !strings.Contains(string(resp), "files[0].name") || !strings.Contains(string(resp), "more than 64 components") {
			t.Fatalf("%d %s", code, resp)
		}
	})

	t.Run("a tar made with tar -C dir . runs", func(t *testing.T) {
		dir := t.TempDir()
		src := filepath.Join(dir, "src")
		for p, body := range map[string]string{"main.py": "import pkg.util\nprint(pkg.util.X)\n", "pkg/util.py": "X = 'from ./'\n"} {
			if err := os.MkdirAll(filepath.Dir(filepath.Join(src, p)), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(src, p), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		archive := filepath.Join(dir, "x.tar")
		if out, err := exec.Command("tar", "-cf", archive, "-C", src, ".").CombinedOutput(); err != nil {
			t.Skipf("no usable tar command: %v %s", err, out)
		}
		tarData, err := os.ReadFile(archive)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(tarData[:100]), "./") {
			t.Fatalf("the archive does not start with a ./ entry: %q", tarData[:100])
		}
		code, resp := post(t, tarData)
		if r := decode[ExecutionResult](t, resp); code != http.StatusOK || r.Stdout != "from ./\n" {
			t.Fatalf("%d %s", code, resp)
		}
	})
}

// TestSessionUploadPathBounds: the same bounds hold for a file put into a
// session's workspace, and a file as deep as they allow lands intact.
func TestSessionUploadPathBounds(t *testing.T) {
	ts := newSessionServer(t)
	js := "application/json"
	code, _, body := call(t, ts, http.MethodPost, "/api/v1/sessions", js, []byte(`{}`), nil)
	if code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, body)
	}
	base := "/api/v1/sessions/" + decode[SessionInfo](t, body).SessionID
	deep := strings.Repeat("d/", 63) + "deep.txt"

	before, start := cpuTime(t), time.Now()
	code, _, body = call(t, ts, http.MethodPut, base+"/files/"+strings.Repeat("a/", 3000)+"x", "", []byte("x"), nil)
	cpu := cpuTime(t) - before
	if code != http.StatusBadRequest || !strings.Contains(string(body), "path is 6001 bytes long; the limit is 1024") {
		t.Fatalf("3000 levels: %d %s", code, body)
	}
	if cpu > 100*time.Millisecond {
		t.Errorf("refusing 3000 levels cost %v of CPU (wall %v), want at most 100ms", cpu, time.Since(start))
	}
	code, _, body = call(t, ts, http.MethodPut, base+"/files/d/"+deep, "", []byte("x"), nil)
	if code != http.StatusBadRequest || !strings.Contains(string(body), "more than 64 components") {
		t.Fatalf("65 levels: %d %s", code, body)
	}

	for _, p := range []string{deep, strings.Repeat("d/", 62) + "side.txt"} {
		if code, _, body := call(t, ts, http.MethodPut, base+"/files/"+p, "", []byte("bottom of "+p[len(p)-8:]), nil); code != http.StatusCreated {
			t.Fatalf("put %s: %d %s", p, code, body)
		}
	}
	code, _, body = call(t, ts, http.MethodPost, base+"/execute", js,
		[]byte(`{"code":"import os\nprint(open('`+deep+`').read(), os.stat('`+strings.Repeat("d/", 62)+`d').st_uid == os.getuid())"}`), nil)
	if r := decode[CellResult](t, body); code != http.StatusOK || r.Stdout != "bottom of deep.txt True\n" {
		t.Fatalf("execute: %d %s", code, body)
	}
	code, _, body = call(t, ts, http.MethodGet, base+"/files/"+deep, "", nil, nil)
	if code != http.StatusOK || string(body) != "bottom of deep.txt" {
		t.Fatalf("get: %d %s", code, body)
	}
}
