package preview

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func testShares(t *testing.T) (*Shares, *time.Time) {
	t.Helper()
	key, err := LoadKey(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewShares(key, time.Hour, "node-a")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	s.now = func() time.Time { return now }
	return s, &now
}

func TestShareOpensItsTargetOnly(t *testing.T) {
	s, now := testShares(t)
	a := Target{Session: "ses_a", Owner: "alice", Port: 8000}
	sh, err := s.Issue(a)
	if err != nil {
		t.Fatal(err)
	}
	if len(sh.Token) > 63 || strings.ToLower(sh.Token) != sh.Token {
		t.Errorf("token %q is not one lower-case DNS label", sh.Token)
	}
	if got, err := s.Check(sh.Token); err != nil || got.Target != a {
		t.Fatalf("Check = %+v, %v; want %+v", got, err, a)
	}
	// A host name's case is not kept: the token still works upper-cased.
	if got, err := s.Check(strings.ToUpper(sh.Token)); err != nil || got.Target != a {
		t.Errorf("upper-case token: %+v, %v", got, err)
	}
	// Any altered character (its id or its signature) opens nothing.
	for i := range sh.Token {
		b := []byte(sh.Token)
		b[i] = map[bool]byte{true: 'b', false: 'a'}[b[i] == 'a']
		if _, err := s.Check(string(b)); !errors.Is(err, ErrUnknownShare) {
			t.Fatalf("token altered at %d: %v", i, err)
		}
	}
	for _, bad := range []string{"", "x", sh.Token + "a", sh.Token[:len(sh.Token)-1], "../" + sh.Token} {
		if _, err := s.Check(bad); !errors.Is(err, ErrUnknownShare) {
			t.Errorf("Check(%q) = %v", bad, err)
		}
	}
	// Another server (another key) does not know it.
	other, _ := testShares(t)
	if _, err := other.Check(sh.Token); !errors.Is(err, ErrUnknownShare) {
		t.Errorf("another server: %v", err)
	}

	// Expiry.
	*now = now.Add(time.Hour)
	if _, err := s.Check(sh.Token); !errors.Is(err, ErrExpired) {
		t.Errorf("after its TTL: %v, want ErrExpired", err)
	}
}

func TestShareRevokeAndForget(t *testing.T) {
	s, _ := testShares(t)
	a8000, _ := s.Issue(Target{Session: "ses_a", Owner: "alice", Port: 8000})
	a8001, _ := s.Issue(Target{Session: "ses_a", Owner: "alice", Port: 8001})
	b8000, _ := s.Issue(Target{Session: "ses_b", Owner: "bob", Port: 8000})
	if n := s.Revoke("ses_a", 8000); n != 1 {
		t.Errorf("revoked %d, want 1", n)
	}
	if _, err := s.Check(a8000.Token); !errors.Is(err, ErrRevoked) {
		t.Errorf("revoked: %v", err)
	}
	if n := s.Revoke("ses_a", 8000); n != 0 {
		t.Errorf("revoked again: %d, want 0", n)
	}
	for _, tok := range []string{a8001.Token, b8000.Token} {
		if _, err := s.Check(tok); err != nil {
			t.Errorf("another port's or session's share was revoked too: %v", err)
		}
	}
	s.Forget("ses_a")
	if _, err := s.Check(a8001.Token); !errors.Is(err, ErrUnknownShare) {
		t.Errorf("a share of an ended session: %v", err)
	}
	if _, err := s.Check(b8000.Token); err != nil {
		t.Errorf("another session's share: %v", err)
	}
}

func TestLoadKey(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	k1, err := LoadKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(filepath.Join(dir, KeyFile))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v, %v; want mode 0600", st.Mode(), err)
	}
	k2, err := LoadKey(dir)
	if err != nil || string(k1) != string(k2) {
		t.Fatalf("the key changed on a second load (%v)", err)
	}
	if err := os.Chmod(filepath.Join(dir, KeyFile), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadKey(dir); err == nil || !strings.Contains(err.Error(), "0600") {
		t.Errorf("a key others may read: %v, want refused", err)
	}
	// A link to a key of the right mode is not followed.
	other := filepath.Join(t.TempDir(), "data")
	if _, err := LoadKey(other); err != nil {
		t.Fatal(err)
	}
	linked := filepath.Join(t.TempDir(), "linked")
	if err := os.MkdirAll(linked, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(other, KeyFile), filepath.Join(linked, KeyFile)); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadKey(linked); err == nil || !strings.Contains(err.Error(), "not a link") {
		t.Errorf("a key behind a symbolic link: %v, want refused", err)
	}
	if os.Geteuid() == 0 { // only root can give the file to another user
		if err := os.Chown(filepath.Join(other, KeyFile), 65534, 65534); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadKey(other); err == nil || !strings.Contains(err.Error(), "not owned") {
			t.Errorf("a key of another user: %v, want refused", err)
		}
	}
}

// TestLoadKeyConcurrently: servers starting at once on one data dir all
// end up with the one key that took the name.
func TestLoadKeyConcurrently(t *testing.T) {
	dir := t.TempDir()
	keys := make([][]byte, 8)
	errs := make([]error, 8)
	var wg sync.WaitGroup
	for i := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			keys[i], errs[i] = LoadKey(dir)
		}()
	}
	wg.Wait()
	for i := range keys {
		if errs[i] != nil || string(keys[i]) != string(keys[0]) {
			t.Fatalf("load %d: %v (same key as the first: %v)", i, errs[i], string(keys[i]) == string(keys[0]))
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("%d files left in the data dir, want the key only", len(entries))
	}
}

// TestShareCaps: a port holds MaxSharesPerPort live URLs and a key
// MaxSharesPerKey; revoking frees the port's, expiring the key's.
func TestShareCaps(t *testing.T) {
	s, now := testShares(t)
	a := Target{Session: "ses_a", Owner: "alice", Port: 8000}
	for i := range MaxSharesPerPort {
		if _, err := s.Issue(a); err != nil {
			t.Fatalf("URL %d: %v", i, err)
		}
	}
	if _, err := s.Issue(a); !errors.Is(err, ErrTooManyShares) {
		t.Fatalf("URL %d of a port: %v", MaxSharesPerPort+1, err)
	}
	other := a
	other.Port = 8001
	if _, err := s.Issue(other); err != nil {
		t.Errorf("another port: %v", err)
	}
	if n := s.Revoke("ses_a", 8000); n != MaxSharesPerPort {
		t.Errorf("revoked %d", n)
	}
	if _, err := s.Issue(a); err != nil {
		t.Errorf("after a revoke: %v", err)
	}
	// Revoked URLs still count for the key until they would have expired.
	for i := 0; ; i++ {
		_, err := s.Issue(Target{Session: fmt.Sprintf("ses_%d", i), Owner: "alice", Port: 80})
		if errors.Is(err, ErrTooManyShares) {
			if held := MaxSharesPerPort + 2 + i; held != MaxSharesPerKey {
				t.Errorf("the key was refused at %d URLs, want %d", held, MaxSharesPerKey)
			}
			break
		}
		if err != nil || i > MaxSharesPerKey {
			t.Fatalf("URL %d of the key: %v", i, err)
		}
	}
	if _, err := s.Issue(Target{Session: "ses_b", Owner: "bob", Port: 80}); err != nil {
		t.Errorf("another key: %v", err)
	}
	*now = now.Add(s.TTL())
	if _, err := s.Issue(a); err != nil {
		t.Errorf("once the key's URLs expired: %v", err)
	}
	s.mu.Lock()
	held := len(s.byOwner["alice"])
	s.mu.Unlock()
	if held != 1 {
		t.Errorf("the key still holds %d URLs after they expired", held)
	}
}

// closedSoon says whether c's peer end is closed within a second.
func closedSoon(c net.Conn) bool {
	_ = c.SetReadDeadline(time.Now().Add(time.Second))
	_, err := c.Read(make([]byte, 1))
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrClosedPipe)
}

// TestShareClosesItsConns: what a URL opened is closed when it is revoked,
// when it expires and when its session ends; the owner's other URLs and
// other sessions keep theirs.
func TestShareClosesItsConns(t *testing.T) {
	key, err := LoadKey(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewShares(key, 2*time.Second, "node-a") // a real clock: expiry must fire
	if err != nil {
		t.Fatal(err)
	}
	attach := func(t Target) (share Share, viewer net.Conn, err error) {
		share, err = s.Issue(t)
		if err != nil {
			return share, nil, err
		}
		app, viewer := net.Pipe()
		_, err = s.Attach(share.Token, app)
		return share, viewer, err
	}
	_, revoked, err1 := attach(Target{Session: "ses_a", Owner: "alice", Port: 8000})
	_, kept, err2 := attach(Target{Session: "ses_a", Owner: "alice", Port: 8001})
	_, ended, err3 := attach(Target{Session: "ses_b", Owner: "alice", Port: 8000})
	if err := errors.Join(err1, err2, err3); err != nil {
		t.Fatal(err)
	}
	s.Revoke("ses_a", 8000)
	if !closedSoon(revoked) {
		t.Error("a revoked URL's connection stayed open")
	}
	s.Forget("ses_b")
	if !closedSoon(ended) {
		t.Error("an ended session's URL connection stayed open")
	}
	_ = kept.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if _, err := kept.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("another URL's connection: %v", err)
	}
	_ = kept.SetReadDeadline(time.Now().Add(3 * time.Second))
	if _, err := kept.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Errorf("at its URL's expiry: %v, want closed", err)
	}
	// A URL revoked between its check and its dial opens nothing.
	sh, err := s.Issue(Target{Session: "ses_c", Owner: "alice", Port: 80})
	if err != nil {
		t.Fatal(err)
	}
	s.Revoke("ses_c", 0)
	app, viewer := net.Pipe()
	if _, err := s.Attach(sh.Token, app); !errors.Is(err, ErrRevoked) {
		t.Errorf("Attach after revoke: %v", err)
	}
	if !closedSoon(viewer) {
		t.Error("a connection for a revoked URL was left open")
	}
}

// TestIssuerNamesItsNode: every token names, in any case, the node that
// issued it, inside the signed id: a token altered to name another node
// opens nothing, and tokens of two nodes name two nodes.
func TestIssuerNamesItsNode(t *testing.T) {
	s, _ := testShares(t)
	key, err := LoadKey(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	other, err := NewShares(key, time.Hour, "node-b")
	if err != nil {
		t.Fatal(err)
	}
	if IssuerTag("node-a") == IssuerTag("node-b") {
		t.Fatal("two nodes have one tag")
	}
	a := Target{Session: "ses_a", Owner: "alice", Port: 8000}
	for range 3 {
		sh, err := s.Issue(a)
		if err != nil {
			t.Fatal(err)
		}
		for _, tok := range []string{sh.Token, strings.ToUpper(sh.Token)} {
			if tag, ok := Issuer(tok); !ok || tag != IssuerTag("node-a") {
				t.Errorf("Issuer(%q) = %q, %v; want node-a's %s", tok, tag, ok, IssuerTag("node-a"))
			}
		}
		if !strings.HasPrefix(sh.ID, IssuerTag("node-a")) {
			t.Errorf("share id %s does not begin with its node's tag", sh.ID)
		}
		// The id, tag included, is signed: the same token naming node-b
		// opens nothing.
		raw, _ := tokenEncoding.DecodeString(sh.Token)
		tag, _ := hex.DecodeString(IssuerTag("node-b"))
		copy(raw, tag)
		if _, err := s.Check(tokenEncoding.EncodeToString(raw)); !errors.Is(err, ErrUnknownShare) {
			t.Errorf("a token re-tagged to another node: %v", err)
		}
	}
	sh, err := other.Issue(a)
	if err != nil {
		t.Fatal(err)
	}
	if tag, _ := Issuer(sh.Token); tag != IssuerTag("node-b") {
		t.Errorf("node-b's token names %s", tag)
	}
	if _, err := s.Check(sh.Token); !errors.Is(err, ErrUnknownShare) {
		t.Errorf("node-b's token on node-a: %v", err)
	}
	for _, bad := range []string{"", sh.Token[:len(sh.Token)-1], sh.Token + "a", strings.Repeat("1", len(sh.Token))} {
		if tag, ok := Issuer(bad); ok {
			t.Errorf("Issuer(%q) = %q, want no token", bad, tag)
		}
	}
}
