package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSessionCreateRequirementsAndProgress(t *testing.T) {
	var got map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/api/v1/sessions" {
			t.Errorf("request %s %s", r.Method, r.URL.Path)
		}
		b, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(b, &got); err != nil {
			t.Errorf("body %s: %v", b, err)
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "event: install\ndata: {\"type\":\"install\",\"data\":\"Installed six\"}\n\n"+
			"event: session\ndata: {\"session_id\":\"ses_1\",\"state\":\"idle\"}\n\n")
	}))
	defer srv.Close()
	reqFile := filepath.Join(t.TempDir(), "requirements.txt")
	if err := os.WriteFile(reqFile, []byte("numpy>=1,<3\ntomli\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		name               string
		args               []string
		wantRequirements   string
		wantCode           int
		wantStdout, errHas string
	}{
		{name: "repeated -r and @FILE", args: []string{"-r", "six", "--requirements", "@" + reqFile},
			wantRequirements: "six\nnumpy>=1,<3\ntomli\n", wantStdout: "ses_1\n", errHas: "install: Installed six"},
		{name: "quiet shows no install lines", args: []string{"-q", "-r", "six"},
			wantRequirements: "six\n", wantStdout: "ses_1\n"},
		{name: "two lines in one -r is refused", args: []string{"-r", "six\nnumpy"}, wantCode: exitClientError,
			errHas: "is not one requirement"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got = nil
			code, stdout, stderr := runCLI(append([]string{"--server", srv.URL, "session", "create"}, tc.args...)...)
			if code != tc.wantCode || stdout != tc.wantStdout || (tc.errHas == "") != (stderr == "") || !strings.Contains(stderr, tc.errHas) {
				t.Errorf("exit %d stdout %q stderr %q", code, stdout, stderr)
			}
			if tc.wantRequirements != "" && got["requirements"] != tc.wantRequirements {
				t.Errorf("requirements sent %q, want %q", got["requirements"], tc.wantRequirements)
			}
		})
	}
}
