package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
)

// cellAPI answers a session's execute with a cell that showed a plot.
func cellAPI(t *testing.T) string {
	t.Helper()
	cell, err := json.Marshal(map[string]any{
		"execution_id": "exe_c", "session_id": "sess_1", "execution_count": 3, "status": "completed", "exit_code": 0,
		"stdout": "drawn\n",
		"outputs": []map[string]any{
			{"type": "display", "data": map[string]string{"text/plain": "<Figure>", "image/png": base64.StdEncoding.EncodeToString(tinyPNG(t))}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/sessions/sess_1/execute", func(w http.ResponseWriter, _ *http.Request) { w.Write(cell) })
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestSessionExecShowsAndSavesPlots: a cell's plot is noted as run notes
// it, --outputs-dir saves it, and --json keeps the cell's count and
// session.
func TestSessionExecShowsAndSavesPlots(t *testing.T) {
	url := cellAPI(t)
	dir := filepath.Join(t.TempDir(), "plots")
	code, stdout, stderr := runCLI("session", "exec", "sess_1", "plt.show()", "--server", url, "--outputs-dir", dir)
	if code != 0 || stdout != "drawn\n" || stderr != "[image/png 3x2]\n" {
		t.Fatalf("exit %d stdout %q stderr %q; want the plot noted on stderr", code, stdout, stderr)
	}
	if got, err := os.ReadFile(filepath.Join(dir, "output-1.png")); err != nil || !bytes.Equal(got, tinyPNG(t)) {
		t.Errorf("saved plot: %v (%d bytes)", err, len(got))
	}

	code, stdout, _ = runCLI("session", "exec", "sess_1", "plt.show()", "--server", url, "--json")
	var cell struct {
		SessionID      string           `json:"session_id"`
		ExecutionCount int              `json:"execution_count"`
		Outputs        []map[string]any `json:"outputs"`
	}
	if err := json.Unmarshal([]byte(stdout), &cell); err != nil || code != 0 {
		t.Fatalf("exit %d, --json printed %q: %v", code, stdout, err)
	}
	if cell.SessionID != "sess_1" || cell.ExecutionCount != 3 || len(cell.Outputs) != 1 {
		t.Errorf("--json cell %+v, want session sess_1, count 3 and the plot", cell)
	}
}
