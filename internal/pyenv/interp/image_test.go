package interp

import "testing"

func TestVersionFromImage(t *testing.T) {
	cases := []struct {
		image string
		want  string // "" means not mapped
	}{
		{"python:3.12-slim", "3.12"},
		{"python:3.12", "3.12"},
		{"python:3.11-alpine3.19", "3.11"},
		{"python:3.12.1-slim-bookworm", "3.12"},
		{"python:3.13.0rc1-bookworm", "3.13"},
		{"python:3.10@sha256:0123456789abcdef", "3.10"},
		{"docker.io/library/python:3.13", "3.13"},
		{"registry.local:5000/python:3.12-slim", "3.12"},
		{" python:3.12-slim ", "3.12"},
		{"python:2.7-slim", "2.7"}, // mapped, then rejected by Lookup
		{"python", ""},
		{"python:latest", ""},
		{"python:slim", ""},
		{"python:3", ""},
		{"python:3-slim", ""},
		{"pypy:3.10", ""},
		{"mypython:3.12", ""},
		{"registry.local:5000/python", ""},
		{"python:3.x", ""},
		{"", ""},
	}
	for _, tc := range cases {
		t.Run(tc.image, func(t *testing.T) {
			got, ok := VersionFromImage(tc.image)
			if ok != (tc.want != "") || got != tc.want {
				t.Errorf("VersionFromImage(%q) = %q, %v; want %q", tc.image, got, ok, tc.want)
			}
		})
	}
}
