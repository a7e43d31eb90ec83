package api

import (
	"net/http"
	"strconv"
	"sync"
)

// followerLimits caps the event streams open at once on this server, per
// execution and per API key. Each stream holds only a few events (see
// engine.Follow), so the caps bound the memory that following can take.
type followerLimits struct {
	perExecution, perKey int

	mu    sync.Mutex
	byID  map[string]int
	byKey map[string]int
}

func newFollowerLimits(perExecution, perKey int) *followerLimits {
	return &followerLimits{perExecution: perExecution, perKey: perKey,
		byID: make(map[string]int), byKey: make(map[string]int)}
}

// acquire counts one more stream of execution id for key, or answers 429
// when either cap is reached. release must be called once the stream ends.
func (l *followerLimits) acquire(id, key string) (release func(), err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.byKey[key] >= l.perKey:
		return nil, tooManyFollowers("too many event streams open for this API key (at most %d at once); retry later", l.perKey)
	case l.byID[id] >= l.perExecution:
		return nil, tooManyFollowers("too many followers of this execution (at most %d at once); retry later", l.perExecution)
	}
	l.byID[id]++
	l.byKey[key]++
	var once sync.Once
	return func() { once.Do(func() { l.release(id, key) }) }, nil
}

func (l *followerLimits) release(id, key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.byID[id]--; l.byID[id] == 0 {
		delete(l.byID, id)
	}
	if l.byKey[key]--; l.byKey[key] == 0 {
		delete(l.byKey, key)
	}
}

func tooManyFollowers(format string, limit int) *Error {
	e := errorf(http.StatusTooManyRequests, format, limit)
	e.headers = http.Header{"Retry-After": {strconv.Itoa(retryAfterSeconds)}}
	return e
}
