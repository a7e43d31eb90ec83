package main

import (
	"fmt"
	"strings"
	"testing"
)

// TestSecretFlag: --secret (repeatable) reaches the server as
// config.secrets, from run, eval and submit alike, and asks for network;
// --network-allow narrows it as usual. session create sends both the
// same way, in the session's request.
func TestSecretFlag(t *testing.T) {
	api := &fakeAPI{t: t, result: resOK}
	url := api.start()
	script := writeScript(t, "job.py", "")
	calls := [][]string{
		{"run", "--server", url, script, "--secret", "GITHUB_TOKEN", "--secret", "LLM_KEY"},
		{"eval", "--server", url, "--secret", "GITHUB_TOKEN", "--secret", "LLM_KEY", "2+2"},
		{"submit", "--server", url, script, "--secret", "GITHUB_TOKEN", "--secret", "LLM_KEY"},
	}
	for i, args := range calls {
		if code, _, stderr := runCLI(args...); code != 0 {
			t.Fatalf("%s: exit %d: %s", args[0], code, stderr)
		}
		r := api.requests()[i]
		cfg, _ := r.metadata["config"].(map[string]any)
		if r.body != nil {
			cfg, _ = r.body["config"].(map[string]any)
		}
		if fmt.Sprint(cfg["secrets"]) != "[GITHUB_TOKEN LLM_KEY]" || cfg["network_disabled"] != false {
			t.Errorf("%s: config = %v, want both secrets and network on", args[0], cfg)
		}
	}
	if code, _, stderr := runCLI("run", "--server", url, script, "--secret", "GITHUB_TOKEN", "--network-allow", "api.github.com:443"); code != 0 {
		t.Fatalf("--secret with --network-allow: exit %d: %s", code, stderr)
	}
	cfg := api.requests()[len(calls)].metadata["config"].(map[string]any)
	if fmt.Sprint(cfg["secrets"]) != "[GITHUB_TOKEN]" || fmt.Sprint(cfg["network"]) != "map[allow:[api.github.com:443]]" {
		t.Errorf("config = %v, want the secret and the allow list", cfg)
	}
	if code, _, _ := runCLI("run", "--server", url, script); code != 0 || api.requests()[len(calls)+1].metadata["config"].(map[string]any)["secrets"] != nil {
		t.Errorf("a run without --secret sent secrets (exit %d)", code)
	}
	n := len(api.requests())
	runCLI("session", "create", "--server", url, "--secret", "GITHUB_TOKEN", "--network-allow", "api.github.com:443")
	var sent map[string]any
	for _, r := range api.requests()[n:] {
		if r.method == "POST" && strings.HasPrefix(r.path, "/api/v1/sessions") {
			sent = r.body
		}
	}
	if fmt.Sprint(sent["secrets"]) != "[GITHUB_TOKEN]" || sent["network_disabled"] != false ||
		fmt.Sprint(sent["network"]) != "map[allow:[api.github.com:443]]" {
		t.Errorf("session create --secret --network-allow sent %v, want the secret, network on and the allow list", sent)
	}
}
