package interp

import "strings"

// VersionFromImage maps a docker_image of the old API to a Python version:
// "python:3.12-slim", "docker.io/library/python:3.12.1-bookworm" and
// "python:3.11@sha256:…" give "3.12", "3.12" and "3.11". It reports false
// for images whose repository is not named python or whose tag names no
// MAJOR.MINOR version ("python", "python:latest", "python:3", "pypy:3.10");
// the caller then uses the default interpreter. A version that is named but
// not installed ("python:2.7") is returned as is, so that Lookup rejects it.
func VersionFromImage(image string) (string, bool) {
	image = strings.TrimSpace(image)
	if i := strings.IndexByte(image, '@'); i >= 0 {
		image = image[:i]
	}
	slash := strings.LastIndexByte(image, '/')
	colon := strings.LastIndexByte(image, ':')
	if colon <= slash { // no tag (a colon before the last slash is a registry port)
		return "", false
	}
	repo, tag := image[:colon], image[colon+1:]
	if repo[slash+1:] != "python" {
		return "", false
	}
	if i := strings.IndexByte(tag, '-'); i >= 0 {
		tag = tag[:i]
	}
	m, ok := parseMinor(tag)
	if !ok {
		return "", false
	}
	return m.String(), true
}
