package preview

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Errors of a preview URL's token. The API answers all three 403: the
// URL names a session and port the viewer may no longer reach.
var (
	// ErrUnknownShare: the token was never issued by this server (or was
	// altered), or it was issued before the server restarted (shares are
	// kept in memory only, as the sessions they reach are).
	ErrUnknownShare = errors.New("this preview URL is not valid on this server")
	// ErrRevoked: the owner revoked the URL.
	ErrRevoked = errors.New("this preview URL was revoked")
	// ErrExpired: the URL's time (--preview-ttl) is over.
	ErrExpired = errors.New("this preview URL has expired")
)

// KeyFile is the name of the signing key in the data directory.
const KeyFile = "preview.key"

const (
	keyLen = 32 // HMAC-SHA256 key
	idLen  = 10 // random share id
	macLen = 20 // truncated HMAC-SHA256
)

// tokenEncoding writes tokens as one lower-case DNS label (48 characters
// of a-z2-7), so that a wildcard preview host can carry it as its first
// label, where case is not kept.
var tokenEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// LoadKey reads the signing key of preview URLs from dir/KeyFile, making
// a random one (mode 0600) when there is none. A key file that others
// than its owner may read or write is refused rather than used: whoever
// reads it could sign a URL.
func LoadKey(dir string) ([]byte, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("preview key: %w", err)
	}
	p := filepath.Join(dir, KeyFile)
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		b, err = newKey(p)
		if !errors.Is(err, fs.ErrExist) {
			return b, err
		}
		// Another server on this data dir made it first: read its key.
		b, err = os.ReadFile(p)
	}
	if err != nil {
		return nil, fmt.Errorf("reading the preview key: %w", err)
	}
	st, err := os.Stat(p)
	if err != nil {
		return nil, fmt.Errorf("reading the preview key: %w", err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("the preview key %s has mode %v: others may read it; make it 0600", p, st.Mode().Perm())
	}
	if len(b) != keyLen {
		return nil, fmt.Errorf("the preview key %s holds %d bytes, want %d", p, len(b), keyLen)
	}
	return b, nil
}

// newKey writes a random key to a new file p (mode 0600). fs.ErrExist:
// p exists already.
func newKey(p string) ([]byte, error) {
	b := make([]byte, keyLen)
	if _, err := rand.Read(b); err != nil {
		return nil, err
	}
	// The file is written in full before it takes the name: a server
	// reading it meanwhile never sees half a key.
	tmp, err := os.CreateTemp(filepath.Dir(p), KeyFile+".*")
	if err != nil {
		return nil, fmt.Errorf("creating the preview key: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return nil, fmt.Errorf("writing the preview key: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return nil, fmt.Errorf("writing the preview key: %w", err)
	}
	if err := os.Link(tmp.Name(), p); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil, err
		}
		return nil, fmt.Errorf("creating the preview key: %w", err)
	}
	return b, nil
}

// Target is what a share opens: one port of one session, for as long as
// the session's owner may use it.
type Target struct {
	Session string
	Owner   string // the API key name that owns the session
	Port    int
}

// Share is one issued preview URL.
type Share struct {
	Target
	Token   string
	Expires time.Time
}

type share struct {
	Share
	revoked bool
}

// Shares issues, checks and revokes preview URLs. A token is a random id
// and an HMAC of the id, target and expiry under the server's key; the
// share itself is kept here, so a token works only while this server
// holds it unrevoked and unexpired. Safe for concurrent use.
type Shares struct {
	key []byte
	ttl time.Duration
	now func() time.Time

	mu     sync.Mutex
	shares map[string]*share // by hex id
}

// NewShares returns Shares signing with key (LoadKey) and issuing URLs
// valid for ttl.
func NewShares(key []byte, ttl time.Duration) (*Shares, error) {
	if len(key) != keyLen {
		return nil, fmt.Errorf("preview key: %d bytes, want %d", len(key), keyLen)
	}
	if ttl <= 0 {
		return nil, errors.New("preview URL lifetime must be positive")
	}
	return &Shares{key: key, ttl: ttl, now: time.Now, shares: make(map[string]*share)}, nil
}

// TTL is how long an issued URL works.
func (s *Shares) TTL() time.Duration { return s.ttl }

// mac signs id, t and expires.
func (s *Shares) mac(id []byte, t Target, expires time.Time) []byte {
	h := hmac.New(sha256.New, s.key)
	var n [10]byte
	binary.BigEndian.PutUint16(n[:2], uint16(t.Port))
	binary.BigEndian.PutUint64(n[2:], uint64(expires.Unix()))
	h.Write(id)
	h.Write(n[:])
	// Lengths first: no two (session, owner) pairs sign alike.
	fmt.Fprintf(h, "%d:%s%d:%s", len(t.Session), t.Session, len(t.Owner), t.Owner)
	return h.Sum(nil)[:macLen]
}

// Issue makes a preview URL token for t.
func (s *Shares) Issue(t Target) (Share, error) {
	id := make([]byte, idLen)
	if _, err := rand.Read(id); err != nil {
		return Share{}, err
	}
	now := s.now()
	expires := now.Add(s.ttl).Truncate(time.Second)
	token := tokenEncoding.EncodeToString(append(id, s.mac(id, t, expires)...))
	sh := Share{Target: t, Token: token, Expires: expires}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.prune(now)
	s.shares[hex.EncodeToString(id)] = &share{Share: sh}
	return sh, nil
}

// Check returns the target of token: ErrUnknownShare, ErrRevoked or
// ErrExpired when it opens nothing.
func (s *Shares) Check(token string) (Target, error) {
	token = strings.ToLower(token)
	if len(token) != tokenEncoding.EncodedLen(idLen+macLen) {
		return Target{}, ErrUnknownShare
	}
	raw, err := tokenEncoding.DecodeString(token)
	if err != nil || len(raw) != idLen+macLen {
		return Target{}, ErrUnknownShare
	}
	id, mac := raw[:idLen], raw[idLen:]
	s.mu.Lock()
	sh, ok := s.shares[hex.EncodeToString(id)]
	var cp share
	if ok {
		cp = *sh
	}
	s.mu.Unlock()
	if !ok || !hmac.Equal(mac, s.mac(id, cp.Target, cp.Expires)) {
		return Target{}, ErrUnknownShare
	}
	switch {
	case cp.revoked:
		return Target{}, ErrRevoked
	case !s.now().Before(cp.Expires):
		return Target{}, ErrExpired
	}
	return cp.Target, nil
}

// Revoke ends every share of session's port (every port for port 0) and
// says how many were still open.
func (s *Shares) Revoke(session string, port int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	now := s.now()
	for _, sh := range s.shares {
		if sh.Session == session && (port == 0 || sh.Port == port) && !sh.revoked {
			sh.revoked = true
			if now.Before(sh.Expires) {
				n++
			}
		}
	}
	return n
}

// Forget drops the shares of a session that ended: its URLs are unknown
// from then on.
func (s *Shares) Forget(session string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, sh := range s.shares {
		if sh.Session == session {
			delete(s.shares, id)
		}
	}
}

// prune drops expired shares; they would only say "expired". s.mu held.
func (s *Shares) prune(now time.Time) {
	for id, sh := range s.shares {
		if !now.Before(sh.Expires) {
			delete(s.shares, id)
		}
	}
}
