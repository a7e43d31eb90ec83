package config

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// TestProblemsNameSettingsAsGiven: a setting given as a flag is named by
// that flag in its error, and so are the settings the error points to;
// one given by its variable is named by variables.
func TestProblemsNameSettingsAsGiven(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"flags", []string{"--allow-network"}, nil,
			"--allow-network (PYEXEC_ALLOW_NETWORK): needs an allow list (--network-allow or --network-policy)"},
		{"variables", nil, map[string]string{"PYEXEC_ALLOW_NETWORK": "1"},
			"PYEXEC_ALLOW_NETWORK: needs an allow list (PYEXEC_NETWORK_ALLOW or PYEXEC_NETWORK_POLICY)"},
		{"a flag needing another", []string{"--network-default"}, nil, "--network-default (PYEXEC_NETWORK_DEFAULT): needs --allow-network"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := load(t, tt.args, tt.env)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Validate() = %v, want %q", err, tt.want)
			}
		})
	}
}

// TestProblemsNameRealSettings: every variable a validation error names,
// in its label or its text, is that of a flag (the flag form is derived
// from it) or one of the variables without a flag.
func TestProblemsNameRealSettings(t *testing.T) {
	c := Default()
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	c.Bind(fs)
	known := map[string]bool{}
	fs.VisitAll(func(f *pflag.Flag) { known[EnvName(f.Name)] = true })
	for _, v := range EnvironmentOnly() {
		known[v.Name] = true
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	call := regexp.MustCompile(`bad\("(PYEXEC_[A-Z0-9_]+)", "([^"]*)"`)
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range call.FindAllStringSubmatch(string(src), -1) {
			for _, v := range append([]string{m[1]}, envMention.FindAllString(m[2], -1)...) {
				if !known[v] {
					t.Errorf("%s: a validation error names %s, which is no setting", f, v)
				}
			}
		}
	}
}
