package api

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/config"
	"github.com/pyexec/pyexec/internal/engine"
)

// TestHealthToolsAndLintAvailability: /health reports the tools, and
// /api/v1/tools offers lint_python unless lint is unavailable.
func TestHealthToolsAndLintAvailability(t *testing.T) {
	for _, lint := range []string{"ready", "starting", "unavailable"} {
		t.Run(lint, func(t *testing.T) {
			c := config.Default()
			if err := c.Validate(); err != nil {
				t.Fatal(err)
			}
			tools := ToolsHealth{Lint: lint, Installer: "pip",
				UV:   ToolHealth{State: "absent", Detail: "uv is not on $PATH"},
				Ruff: ToolHealth{State: "provisioning", Source: "provisioned", Version: "0.17.6"}}
			s, err := New(newFakeEngine(), Options{Config: c, Version: "test", Isolation: "jail", Heartbeat: 20 * time.Millisecond,
				Tools: func() ToolsHealth { return tools }})
			if err != nil {
				t.Fatal(err)
			}
			ts := httptest.NewServer(s.Handler())
			defer ts.Close()

			_, _, body := call(t, ts, http.MethodGet, "/health", "", nil, nil)
			h := decode[healthBody](t, body)
			if h.Tools == nil || *h.Tools != tools {
				t.Errorf("/health tools = %+v, want %+v", h.Tools, tools)
			}
			_, _, body = call(t, ts, http.MethodGet, "/api/v1/tools?format=anthropic", "", nil, nil)
			list := decode[struct {
				Tools []map[string]any `json:"tools"`
			}](t, body)
			offered := false
			for _, tool := range list.Tools {
				offered = offered || tool["name"] == "lint_python"
			}
			if want := lint != "unavailable"; offered != want {
				t.Errorf("lint %s: lint_python offered %v, want %v", lint, offered, want)
			}
		})
	}
}

// TestUnavailableIs503: a request for what is still being set up (ruff
// being fetched) is 503 with Retry-After and the reason.
func TestUnavailableIs503(t *testing.T) {
	err := engineError(slog.New(slog.DiscardHandler), fmt.Errorf("%w: lint is starting: ruff is being fetched", engine.ErrUnavailable))
	var e *Error
	if !asError(err, &e) || e.Status != http.StatusServiceUnavailable || e.headers.Get("Retry-After") == "" ||
		!strings.HasPrefix(e.Message, "lint is starting") {
		t.Errorf("engineError = %#v", err)
	}
}

func asError(err error, target **Error) bool {
	e, ok := err.(*Error)
	*target = e
	return ok
}
