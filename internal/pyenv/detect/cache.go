package detect

import (
	"container/list"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"sync"

	"github.com/pyexec/pyexec/internal/pyenv/interp"
)

// maxCachedRecords bounds the imports and calls the cache holds over all
// its entries, so that a few huge answers cannot hold the server's memory.
const maxCachedRecords = 200_000

// cache keeps the detector's recent answers, least recently used out
// first, within an entry count and maxCachedRecords.
type cache struct {
	mu      sync.Mutex
	max     int
	records int
	lru     *list.List // of *cached, most recent first
	entries map[string]*list.Element
}

type cached struct {
	key     string
	an      *Analysis
	records int
}

func newCache(max int) *cache {
	return &cache{max: max, lru: list.New(), entries: map[string]*list.Element{}}
}

func analysisKey(in interp.Interpreter, files []File, entry string) string {
	h := sha256.New()
	var n [8]byte
	put := func(b []byte) {
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	put([]byte(in.Path))
	put([]byte(in.Full))
	put([]byte(entry))
	for _, f := range files {
		put([]byte(f.Path))
		put(f.Data)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func (c *cache) lookup(key string) *Analysis {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[key]; ok {
		c.lru.MoveToFront(el)
		return el.Value.(*cached).an
	}
	return nil
}

func (c *cache) store(key string, an *Analysis) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.entries[key]; ok {
		return
	}
	n := len(an.AllImports) + len(an.Calls) + 1
	c.entries[key] = c.lru.PushFront(&cached{key: key, an: an, records: n})
	c.records += n
	for c.lru.Len() > c.max || c.records > maxCachedRecords && c.lru.Len() > 1 {
		last := c.lru.Back()
		c.lru.Remove(last)
		old := last.Value.(*cached)
		delete(c.entries, old.key)
		c.records -= old.records
	}
}
