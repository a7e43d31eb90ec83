package api

import (
	"archive/tar"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/pyexec/pyexec/internal/engine"
)

// TestStdinEncoding: stdin is text, or with stdin_encoding base64 the
// base64 of any bytes, in eval bodies and exec metadata alike; a bad
// encoding or bad base64 is a 400 naming the field.
func TestStdinEncoding(t *testing.T) {
	raw := "\x00\xff binary \x80\n"
	b64 := base64.StdEncoding.EncodeToString([]byte(raw))
	tarData := makeTar(t, tar.FormatPAX, tarEntry{Name: "main.py", Body: "print(1)"})
	tests := []struct {
		name     string
		stdin    string
		encoding string
		wantCode int
		want     engine.BinaryString
		wantErr  string
	}{
		{name: "text", stdin: "hello\n", wantCode: 200, want: "hello\n"},
		{name: "explicit utf-8", stdin: "naïve", encoding: "utf-8", wantCode: 200, want: "naïve"},
		{name: "base64", stdin: b64, encoding: "base64", wantCode: 200, want: engine.BinaryString(raw)},
		{name: "bad base64", stdin: "not base64!", encoding: "base64", wantCode: 400, wantErr: "stdin is not valid base64"},
		{name: "unknown encoding", stdin: "x", encoding: "hex", wantCode: 400, wantErr: "stdin_encoding must be utf-8 or base64"},
	}
	for _, tt := range tests {
		for _, via := range []string{"eval", "exec"} {
			t.Run(tt.name+" via "+via, func(t *testing.T) {
				eng := newFakeEngine()
				ts := newTestServer(t, eng, nil)
				fields := map[string]any{"stdin": tt.stdin, "stdin_encoding": tt.encoding}
				var code int
				var resp []byte
				if via == "eval" {
					fields["code"] = "print(1)"
					body, _ := json.Marshal(fields)
					code, _, resp = call(t, ts, http.MethodPost, "/api/v1/eval", "application/json", body, nil)
				} else {
					meta, _ := json.Marshal(fields)
					ct, body := multipartBody(t, tarData, string(meta), metaJSONPart)
					code, _, resp = call(t, ts, http.MethodPost, "/api/v1/exec/sync", ct, body, nil)
				}
				if code != tt.wantCode || !strings.Contains(string(resp), tt.wantErr) {
					t.Fatalf("HTTP %d %s, want %d with %q", code, resp, tt.wantCode, tt.wantErr)
				}
				if tt.wantCode != 200 {
					return
				}
				if req, ok := eng.lastRequest(); !ok || req.Stdin != tt.want {
					t.Errorf("the engine got stdin %q, want %q", req.Stdin, tt.want)
				}
			})
		}
	}
}
