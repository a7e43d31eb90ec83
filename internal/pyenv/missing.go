package pyenv

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

// missingTTL is how long a detected import that no index had is left out
// without asking the indexes again.
const missingTTL = 10 * time.Minute

// probeTimeout bounds one question to an index.
const indexProbeTimeout = 10 * time.Second

func skipNote(name string) string {
	return fmt.Sprintf("skipping %s: the code imports it but no package index has it", name)
}

// without returns s less the distributions named.
func (s Set) without(names []string) Set {
	var out Set
	for _, r := range s {
		if !slices.Contains(names, r.Name) {
			out = append(out, r)
		}
	}
	return out
}

// withoutKnownMissing drops the detected imports that an index recently
// said it does not have.
func (m *Environments) withoutKnownMissing(set Set) (Set, []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var drop []string
	for _, r := range set {
		if t, ok := m.missing[r.Name]; ok && r.Source == FromDetection {
			if time.Since(t) < missingTTL {
				drop = append(drop, r.Name)
			} else {
				delete(m.missing, r.Name)
			}
		}
	}
	if len(drop) == 0 {
		return set, nil
	}
	return set.without(drop), drop
}

// missingDetected asks the indexes about the requirements of set that
// were only detected in the code, after a build of set failed, and
// returns those that no index has. Explicit requirements are never asked
// about: their failure is the user's to see. An index that cannot be
// asked counts as having the distribution.
func (m *Environments) missingDetected(ctx context.Context, set Set) []string {
	var missing []string
	for _, r := range set {
		if r.Source != FromDetection {
			continue
		}
		if has, err := m.indexesHave(ctx, r.Name); err != nil {
			m.log.Warn("asking the package index about a detected import", "name", r.Name, "err", err)
		} else if !has {
			missing = append(missing, r.Name)
		}
	}
	if len(missing) > 0 {
		m.mu.Lock()
		for _, n := range missing {
			m.missing[n] = time.Now()
		}
		m.mu.Unlock()
	}
	return missing
}

// indexesHave reports whether the index or an extra index has a project
// page for name (PEP 503: 404 means no such project).
func (m *Environments) indexesHave(ctx context.Context, name string) (bool, error) {
	for _, ix := range append([]string{m.cfg.IndexURL}, m.cfg.ExtraIndexURLs...) {
		u, err := url.Parse(strings.TrimRight(ix, "/") + "/" + name + "/")
		if err != nil {
			return false, err
		}
		if u.Scheme == "file" {
			return true, nil // a local index: the installer's word stands
		}
		status, err := m.probe(ctx, u)
		if err != nil {
			return false, err
		}
		switch {
		case status == http.StatusOK:
			return true, nil
		case status != http.StatusNotFound && status != http.StatusGone:
			return false, fmt.Errorf("%s answered %d", u.Redacted(), status)
		}
	}
	return false, nil
}

// probe fetches the project page u and returns its status.
func (m *Environments) probe(ctx context.Context, u *url.URL) (int, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if slices.Contains(m.cfg.TrustedHosts, u.Hostname()) || slices.Contains(m.cfg.TrustedHosts, u.Host) {
		tr.TLSClientConfig = &tls.Config{InsecureSkipVerify: true} // the operator's choice for this host
	}
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(ctx, indexProbeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Accept", "application/vnd.pypi.simple.v1+json, text/html;q=0.1")
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}
