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
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
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
	// ErrTooManyShares: the session's port has MaxSharesPerPort live
	// URLs, or the key MaxSharesPerKey URLs held (429).
	ErrTooManyShares = errors.New("too many preview URLs")
)

// Caps on the preview URLs the server holds, so that one key cannot grow
// them without bound.
const (
	// MaxSharesPerPort bounds the live (unrevoked, unexpired) URLs of one
	// session's port.
	MaxSharesPerPort = 16
	// MaxSharesPerKey bounds the URLs held for one key's sessions: live
	// ones, and revoked ones until they would have expired (they still
	// answer "revoked" until then).
	MaxSharesPerKey = 256
)

// KeyFile is the name of the signing key in the data directory.
const KeyFile = "preview.key"

const (
	keyLen = 32 // HMAC-SHA256 key
	idLen  = 10 // share id: the issuer's tag, then random bytes
	// tagLen bytes of a share id name the node that issued it (IssuerTag),
	// under the signature like the rest of the id: any node of a fleet
	// reads where a token was issued without asking the others, and a
	// token that names another node is refused there, by its MAC.
	tagLen = 4
	// labelLen random bytes name a share on a wildcard preview host; not
	// secret (it is in DNS and TLS), only distinct.
	labelLen = 10
	macLen   = 20 // truncated HMAC-SHA256
)

// tokenEncoding writes tokens as one lower-case DNS label (48 characters
// of a-z2-7), so that a wildcard preview host can carry it as its first
// label, where case is not kept.
var tokenEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// LoadKey reads the signing key of preview URLs from dir/KeyFile, making
// a random one (mode 0600) when there is none. A key file that is not a
// regular file of the server's own user (a symbolic link included), or
// that others may read or write, is refused rather than used: whoever
// reads it could sign a URL.
func LoadKey(dir string) ([]byte, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("preview key: %w", err)
	}
	p := filepath.Join(dir, KeyFile)
	b, err := readKey(p)
	if errors.Is(err, fs.ErrNotExist) {
		b, err = newKey(p)
		if !errors.Is(err, fs.ErrExist) {
			return b, err
		}
		// Another server on this data dir made it first: read its key.
		b, err = readKey(p)
	}
	if err != nil {
		return nil, err
	}
	if len(b) != keyLen {
		return nil, fmt.Errorf("the preview key %s holds %d bytes, want %d", p, len(b), keyLen)
	}
	return b, nil
}

// readKey reads the key file p, checked as LoadKey says on the file it
// opened (no link followed).
func readKey(p string) ([]byte, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("reading the preview key %s (it must be a regular file, not a link): %w", p, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("reading the preview key: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("the preview key %s is not a regular file", p)
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); !ok || int(sys.Uid) != os.Geteuid() {
		return nil, fmt.Errorf("the preview key %s is not owned by this server's user (uid %d)", p, os.Geteuid())
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("the preview key %s has mode %v: others may read it; make it 0600", p, st.Mode().Perm())
	}
	b, err := io.ReadAll(io.LimitReader(f, keyLen+1))
	if err != nil {
		return nil, fmt.Errorf("reading the preview key: %w", err)
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
	// ID names the share where its token must not appear (logs); it is
	// not enough to open it.
	ID string
	// Label is the share's own host label on a wildcard preview host: a
	// random name that is not secret (it reaches DNS, TLS and the app's
	// third parties), unlike Token, which stays in the path.
	Label   string
	Token   string
	Expires time.Time
}

type share struct {
	Share
	revoked bool
	conns   map[*SharedConn]struct{} // open through this share
}

// Shares issues, checks and revokes preview URLs, and closes what was
// opened through one when it ends. A token is a random id and an HMAC of
// the id, target and expiry under the server's key; the share itself is
// kept here, so a token works only while this server holds it unrevoked
// and unexpired. Safe for concurrent use.
type Shares struct {
	key []byte
	tag []byte // IssuerTag of this node, the first bytes of every id
	ttl time.Duration
	now func() time.Time

	mu        sync.Mutex
	shares    map[string]*share            // by ID
	bySession map[string]map[string]*share // session → ID → share
	byOwner   map[string]map[string]*share // owner → ID → share
}

// NewShares returns Shares of the node named node, signing with key
// (LoadKey) and issuing URLs valid for ttl.
func NewShares(key []byte, ttl time.Duration, node string) (*Shares, error) {
	if len(key) != keyLen {
		return nil, fmt.Errorf("preview key: %d bytes, want %d", len(key), keyLen)
	}
	if ttl <= 0 {
		return nil, errors.New("preview URL lifetime must be positive")
	}
	tag, _ := hex.DecodeString(IssuerTag(node))
	return &Shares{key: key, tag: tag, ttl: ttl, now: time.Now, shares: make(map[string]*share),
		bySession: make(map[string]map[string]*share), byOwner: make(map[string]map[string]*share)}, nil
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

// Issue makes a preview URL token for t. ErrTooManyShares past
// MaxSharesPerPort or MaxSharesPerKey. It costs the URLs t's owner holds,
// not every URL of the server: that owner's expired ones are dropped here.
func (s *Shares) Issue(t Target) (Share, error) {
	raw := make([]byte, idLen+labelLen)
	copy(raw, s.tag)
	if _, err := rand.Read(raw[tagLen:]); err != nil {
		return Share{}, err
	}
	id, label := raw[:idLen], raw[idLen:]
	now := s.now()
	expires := now.Add(s.ttl).Truncate(time.Second)
	token := tokenEncoding.EncodeToString(append(id, s.mac(id, t, expires)...))
	sh := Share{Target: t, ID: hex.EncodeToString(id), Label: tokenEncoding.EncodeToString(label),
		Token: token, Expires: expires}
	s.mu.Lock()
	defer s.mu.Unlock()
	held, live := 0, 0
	for _, o := range s.byOwner[t.Owner] {
		if !now.Before(o.Expires) {
			s.drop(o)
			continue
		}
		held++
		if !o.revoked && o.Session == t.Session && o.Port == t.Port {
			live++
		}
	}
	if live >= MaxSharesPerPort {
		return Share{}, fmt.Errorf("%w: port %d of this session has %d live ones (revoke them first)", ErrTooManyShares, t.Port, MaxSharesPerPort)
	}
	if held >= MaxSharesPerKey {
		return Share{}, fmt.Errorf("%w: this key holds %d (revoked ones count until they would have expired)", ErrTooManyShares, MaxSharesPerKey)
	}
	if _, taken := s.shares[sh.ID]; taken {
		// 48 random bits of an id: once in 2^48 issues per share held.
		return Share{}, errors.New("preview: a new URL drew the id of another; ask again")
	}
	n := &share{Share: sh}
	s.shares[sh.ID] = n
	index(s.bySession, t.Session, n)
	index(s.byOwner, t.Owner, n)
	return sh, nil
}

func index(m map[string]map[string]*share, k string, sh *share) {
	if m[k] == nil {
		m[k] = make(map[string]*share)
	}
	m[k][sh.ID] = sh
}

func unindex(m map[string]map[string]*share, k string, sh *share) {
	delete(m[k], sh.ID)
	if len(m[k]) == 0 {
		delete(m, k)
	}
}

// drop forgets sh; what is open through it is the caller's to close
// (closers). s.mu held.
func (s *Shares) drop(sh *share) {
	delete(s.shares, sh.ID)
	unindex(s.bySession, sh.Session, sh)
	unindex(s.byOwner, sh.Owner, sh)
}

// Check returns the share of token: ErrUnknownShare, ErrRevoked or
// ErrExpired when it opens nothing.
func (s *Shares) Check(token string) (Share, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sh, err := s.check(token)
	if err != nil {
		return Share{}, err
	}
	return sh.Share, nil
}

// check finds the share of token. s.mu held.
func (s *Shares) check(token string) (*share, error) {
	token = strings.ToLower(token)
	if len(token) != tokenEncoding.EncodedLen(idLen+macLen) {
		return nil, ErrUnknownShare
	}
	raw, err := tokenEncoding.DecodeString(token)
	if err != nil || len(raw) != idLen+macLen {
		return nil, ErrUnknownShare
	}
	id, mac := raw[:idLen], raw[idLen:]
	sh, ok := s.shares[hex.EncodeToString(id)]
	if !ok || !hmac.Equal(mac, s.mac(id, sh.Target, sh.Expires)) {
		return nil, ErrUnknownShare
	}
	switch {
	case sh.revoked:
		return nil, ErrRevoked
	case !s.now().Before(sh.Expires):
		return nil, ErrExpired
	}
	return sh, nil
}

// IssuerTag is the tag (hex) that the ids of the preview URLs issued by
// node begin with. It is a digest of the name, not a secret: two names of
// one fleet share a tag with odds of 2^-32.
func IssuerTag(node string) string {
	h := sha256.Sum256([]byte("pyexec preview issuer\x00" + node))
	return hex.EncodeToString(h[:tagLen])
}

// Issuer is the IssuerTag of the node that issued token, as the token
// says: it proves nothing (only that node checks the signature), it only
// names where to ask. ok is false for what is no token at all.
func Issuer(token string) (tag string, ok bool) {
	token = strings.ToLower(token)
	if len(token) != tokenEncoding.EncodedLen(idLen+macLen) {
		return "", false
	}
	raw, err := tokenEncoding.DecodeString(token)
	if err != nil || len(raw) != idLen+macLen {
		return "", false
	}
	return hex.EncodeToString(raw[:tagLen]), true
}

// Attach ties c, a connection opened for token's viewer, to its share:
// the returned connection is closed when the share is revoked, expires
// or its session ends (Forget), whatever it carries meanwhile. A token
// that opens nothing any more closes c and says why.
func (s *Shares) Attach(token string, c net.Conn) (net.Conn, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sh, err := s.check(token)
	if err != nil {
		_ = c.Close()
		return nil, err
	}
	sc := &SharedConn{Conn: c, s: s, sh: sh}
	if sh.conns == nil {
		sh.conns = make(map[*SharedConn]struct{})
	}
	sh.conns[sc] = struct{}{}
	sc.timer = time.AfterFunc(sh.Expires.Sub(s.now()), func() { _ = sc.Close() })
	return sc, nil
}

// SharedConn is a connection opened through a share (Attach).
type SharedConn struct {
	net.Conn
	s     *Shares
	sh    *share
	timer *time.Timer
}

// Close closes the connection and unties it from its share.
func (c *SharedConn) Close() error {
	c.s.mu.Lock() // Attach sets timer under it
	c.timer.Stop()
	delete(c.sh.conns, c)
	c.s.mu.Unlock()
	return c.Conn.Close()
}

// Revoke ends every share of session's port (every port for port 0),
// closes what is open through them, and says how many were still open.
func (s *Shares) Revoke(session string, port int) int {
	s.mu.Lock()
	n := 0
	now := s.now()
	var open []*SharedConn
	for _, sh := range s.bySession[session] {
		if (port == 0 || sh.Port == port) && !sh.revoked {
			sh.revoked = true
			if now.Before(sh.Expires) {
				n++
			}
			open = appendConns(open, sh)
		}
	}
	s.mu.Unlock()
	closeAll(open)
	return n
}

// Forget drops the shares of a session that ended, and closes what is
// open through them: its URLs are unknown from then on.
func (s *Shares) Forget(session string) {
	s.mu.Lock()
	var open []*SharedConn
	for _, sh := range s.bySession[session] {
		open = appendConns(open, sh)
		s.drop(sh)
	}
	s.mu.Unlock()
	closeAll(open)
}

func appendConns(open []*SharedConn, sh *share) []*SharedConn {
	for c := range sh.conns {
		open = append(open, c)
	}
	return open
}

// closeAll closes conns; s.mu not held (Close takes it).
func closeAll(conns []*SharedConn) {
	for _, c := range conns {
		_ = c.Close()
	}
}
