package egress

import (
	"net/netip"
	"sync"
)

// nameTable hands out the addresses the jail's DNS answers with: one
// address per allowed name, from 198.19.0.0/16, never a real one. A
// connection to such an address says exactly which name the payload
// meant, so its TLS server name or HTTP Host can be checked against it,
// and the egress dials the real addresses it checked when it resolved the
// name: what a later answer of the name's DNS says cannot change them.
type nameTable struct {
	mu     sync.Mutex
	byName map[string]*nameEntry
	byAddr map[netip.Addr]*nameEntry
	next   uint32
	// failed holds the names whose resolution was refused or failed:
	// they are answered NXDOMAIN again without asking upstream.
	failed map[string]bool
	// lookups counts the upstream resolutions begun.
	lookups int
}

// nameEntry is immutable once added: connections read it without the
// table's lock.
type nameEntry struct {
	name  string
	synth netip.Addr
	real  []netip.Addr // public IPv4 addresses only
}

// synthBase is the first address of the synthetic range, 198.19.0.0.
const synthBase = 198<<24 | 19<<16

// synthCount is how many names one execution may resolve.
const synthCount = 1<<16 - 2

// maxLookups bounds the upstream resolutions of one execution: a payload
// allowed a wildcard cannot make the server ask its resolver for endless
// names (nor carry data out in them).
const maxLookups = 1024

func newNameTable() *nameTable {
	return &nameTable{byName: map[string]*nameEntry{}, byAddr: map[netip.Addr]*nameEntry{}, failed: map[string]bool{}}
}

// beginLookup tells whether name may be resolved upstream now: not when
// it failed before in this execution, nor once maxLookups were begun.
func (t *nameTable) beginLookup(name string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.failed[name] || t.lookups >= maxLookups {
		return false
	}
	t.lookups++
	return true
}

// fail remembers that name did not resolve to an allowed address.
func (t *nameTable) fail(name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.failed[name] = true
}

// lookupName returns the entry of a name resolved before.
func (t *nameTable) lookupName(name string) *nameEntry {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.byName[name]
}

// entries returns every name resolved so far.
func (t *nameTable) entries() []*nameEntry {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]*nameEntry, 0, len(t.byName))
	for _, en := range t.byName {
		out = append(out, en)
	}
	return out
}

// lookupAddr returns the name a synthetic address stands for.
func (t *nameTable) lookupAddr(a netip.Addr) *nameEntry {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.byAddr[a]
}

// add records name's real addresses and returns its entry; nil when the
// range is exhausted. The first resolution of a name wins: a second one
// (two flows asking at once) gets the entry unchanged, so the addresses
// checked for a connection never change under it.
func (t *nameTable) add(name string, real []netip.Addr) *nameEntry {
	t.mu.Lock()
	defer t.mu.Unlock()
	if en := t.byName[name]; en != nil {
		return en
	}
	if t.next >= synthCount {
		return nil
	}
	t.next++
	n := synthBase + t.next
	en := &nameEntry{name: name, real: real,
		synth: netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)})}
	t.byName[name], t.byAddr[en.synth] = en, en
	return en
}

// isSynthetic reports whether a is in the synthetic range.
func isSynthetic(a netip.Addr) bool {
	return a.Is4() && a.As4()[0] == 198 && a.As4()[1] == 19
}
