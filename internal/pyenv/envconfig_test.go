package pyenv

import (
	"slices"
	"strings"
	"testing"
)

func TestParseBaseList(t *testing.T) {
	tests := []struct {
		name, in string
		want     []string
		wantErr  string
	}{
		{name: "commas", in: "numpy,pandas, requests", want: []string{"numpy", "pandas", "requests"}},
		{name: "spaces", in: " numpy  scipy ", want: []string{"numpy", "scipy"}},
		{name: "comma inside a specifier", in: "scipy>=1.11,<2,numpy", want: []string{"scipy>=1.11,<2", "numpy"}},
		{name: "none", in: "-", want: []string{}},
		{name: "empty", in: "", want: []string{}},
		{name: "not a requirement", in: "numpy,-e .", wantErr: "line"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseBaseList(tt.in)
			if tt.wantErr != "" {
				if err == nil {
					t.Fatalf("ParseBaseList(%q) = %v, want an error", tt.in, got)
				}
				return
			}
			if err != nil || !slices.Equal(got, tt.want) || got == nil {
				t.Fatalf("ParseBaseList(%q) = %#v, %v; want %#v", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestMountableDir(t *testing.T) {
	tests := []struct {
		dir     string
		wantErr string
	}{
		{dir: "/var/lib/pyexec/envs"},
		{dir: "/var/tmp/pyexec-envs"},
		{dir: "/tmp/x/envs", wantErr: "under /tmp"},
		{dir: "/work/data/envs", wantErr: "under /work"},
		{dir: "data/envs", wantErr: "not a clean absolute path"},
		{dir: "/var/lib/../tmp", wantErr: "not a clean absolute path"},
	}
	for _, tt := range tests {
		t.Run(tt.dir, func(t *testing.T) {
			err := MountableDir(tt.dir)
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("MountableDir(%q) = %v, want %q", tt.dir, err, tt.wantErr)
			}
		})
	}
}

func TestParsePolicy(t *testing.T) {
	tests := []struct {
		name, in string
		rules    int
		wantErr  string
	}{
		{name: "rules", in: `{"rules":[{"name":"no-subprocess","action":"deny","imports":["subprocess"]},{"name":"eval","action":"warn","calls":["eval"],"message":"avoid eval"}]}`, rules: 2},
		{name: "empty", in: `{"rules":[]}`},
		{name: "misspelt field", in: `{"rules":[{"name":"x","action":"deny","import":["os"]}]}`, wantErr: `unknown field "import"`},
		{name: "bad action", in: `{"rules":[{"name":"x","action":"block","imports":["os"]}]}`, wantErr: "neither deny nor warn"},
		{name: "trailing data", in: `{"rules":[]} {}`, wantErr: "trailing data"},
		{name: "not JSON", in: `rules = []`, wantErr: "policy:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := ParsePolicy([]byte(tt.in))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || len(p.Rules) != tt.rules {
				t.Fatalf("ParsePolicy = %+v, %v", p, err)
			}
		})
	}
}
