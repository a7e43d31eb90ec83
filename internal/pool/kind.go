package pool

import (
	"strings"
	"time"

	"github.com/pyexec/pyexec/internal/sandbox"
)

// kind is the warm jails of one warm spec, for code that needs only the
// standard library (lean) or for any.
type kind struct {
	key      string
	spec     sandbox.Spec
	lean     bool // forked from its fork server's lean server (see forking)
	ready    []*warmJail
	building int
	want     int // target number of ready jails
	max      int // what want may grow to (Config.Max, or NetworkMax)
	lastUsed time.Time
	failed   int64
	failing  bool          // its last build failed (needs)
	retired  bool          // dropped by the janitor; its refiller ends
	refill   chan struct{} // kicks the kind's refiller
	fork     *forking      // the kind's fork server (Config.ForkServer), shared; nil: none
}

// kind returns the kind of spec (lean: for code that needs only the
// standard library), creating it (and its refiller) on first use. Lean code
// of an environment known to have none of the preloads gets the kind of
// any code: its fork server is the same. nil: the request runs cold (the
// kinds with network are all taken, or the pool is closing).
func (p *Pool) kind(spec sandbox.Spec, lean bool) *kind {
	key := p.kindKey(spec)
	p.mu.Lock()
	defer p.mu.Unlock()
	if lean {
		if k, ok := p.kinds[key]; ok && k.fork != nil && k.fork.bare.Load() {
			lean = false
		} else {
			key += "/lean"
		}
	}
	k, ok := p.kinds[key]
	if !ok && p.ctx.Err() != nil {
		// Closing: no new refiller may join the wait group Close waits on.
		return nil
	}
	if !ok && spec.Network {
		// A request's own things (collect globs, say) are in the key:
		// a client could otherwise make network kinds, each with jails
		// of its own, until the warm cap is theirs. It runs cold.
		if shapes := p.networkShapes(); !shapes[shape(key)] && len(shapes) >= p.cfg.NetworkMax {
			return nil
		}
	}
	if !ok {
		k = &kind{key: key, spec: spec, lean: lean, want: p.cfg.Min, max: p.cfg.Max, refill: make(chan struct{}, 1)}
		if spec.Network {
			// Few of them (network.go).
			k.max = p.cfg.NetworkMax
			k.want = min(k.want, k.max)
		}
		if p.cfg.ForkServer && p.forkable(spec) {
			k.fork = p.forkingFor(spec)
		}
		p.kinds[key] = k
		p.wg.Add(1)
		go p.refiller(k)
	}
	k.lastUsed = time.Now()
	if k.fork != nil {
		k.fork.lastUsed = k.lastUsed
	}
	return k
}

// take removes a ready warm jail of k, or returns nil and asks for more.
//
// Refilling costs CPU (a fork, namespaces, mounts, a cgroup) that the
// execution just taken would compete with on a small machine. So while k
// still has a jail ready after this one, the refill waits for the
// execution to end: take then returns later true and the caller kicks
// k.refill itself once its run is over. Taking the last ready jail refills
// at once and lets k keep one more, so that one request at a time always
// finds a spare and never waits on a refill.
func (p *Pool) take(k *kind) (w *warmJail, later bool) {
	p.mu.Lock()
	for len(k.ready) > 0 && w == nil {
		w = k.ready[0]
		k.ready = k.ready[1:]
		p.warm--
		if w.dead() { // died while waiting: never hand it out
			// Removed in the background, as the jail manager's Wait
			// (at shutdown) knows.
			w.proc.Kill()
			p.jails.Release(w.jail)
			w = nil
		}
	}
	spare := len(k.ready) > 0
	if !spare && k.want < k.max {
		k.want++ // demand reached or outran the kind's size
	}
	p.mu.Unlock()
	if w != nil && spare {
		return w, true
	}
	kick(k.refill)
	return w, false
}

func kick(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// refiller keeps k at its wanted size until the pool closes or the kind
// is retired. Builds run concurrently, at most one per CPU over the whole
// pool (p.builds), so that a burst refills in parallel.
func (p *Pool) refiller(k *kind) {
	defer p.wg.Done()
	for {
		for {
			ok, given := p.needs(k)
			if given != nil {
				p.wg.Add(1)
				go func() {
					defer p.wg.Done()
					given.discard()
				}()
			}
			if !ok {
				break
			}
			select {
			case p.builds <- struct{}{}:
			case <-p.ctx.Done():
				p.unreserve(k)
				return
			}
			p.wg.Add(1)
			go func() {
				defer p.wg.Done()
				defer func() { <-p.builds }()
				p.build(k)
			}()
		}
		select {
		case <-p.ctx.Done():
			return
		case <-k.refill:
		}
		p.mu.Lock()
		retired := k.retired
		p.mu.Unlock()
		if retired {
			return
		}
	}
}

// build makes one warm jail for k (its place was reserved by needs).
func (p *Pool) build(k *kind) {
	var w *warmJail
	var err error
	forked := false
	if k.fork != nil {
		w, forked, err = p.fork(k)
	}
	if !forked {
		if w, err = startWarm(p.ctx, p.jails, k.spec); err == nil {
			p.prepareLink(w, k.spec)
		}
	}
	if err != nil {
		p.unreserve(k)
		p.mu.Lock()
		k.failed++
		k.failing = true
		p.mu.Unlock()
		if p.ctx.Err() == nil {
			p.cfg.Logger.Warn("building a warm jail", "python", describe(k.spec), "err", err)
			select {
			case <-p.ctx.Done():
			case <-time.After(time.Second): // do not spin on a broken kind
			}
			kick(k.refill)
		}
		return
	}
	p.mu.Lock()
	k.building--
	k.failing = false
	if p.ctx.Err() != nil || k.want == 0 {
		p.warm--
		p.mu.Unlock()
		w.discard()
		return
	}
	k.ready = append(k.ready, w)
	short := len(k.ready)+k.building < k.want
	p.mu.Unlock()
	if short {
		// At the cap, needs trades one place at a time: the next.
		kick(k.refill)
	}
}

// unreserve gives back a place needs reserved.
func (p *Pool) unreserve(k *kind) {
	p.mu.Lock()
	k.building--
	p.warm--
	p.mu.Unlock()
}

// needs reports (and reserves) whether k should build one more jail.
//
// At the cap on all kinds' warm jails (MaxWarm), a kind short of what it
// wants may take the place of a ready jail of another kind (placeFor):
// so a kind whose requests come one after another keeps its spare (see
// take) even when other kinds grew first, as long as the cap leaves room
// for two per kind in use. One such trade is in flight per kind at a
// time, and none for a kind whose last build failed, so that a broken
// kind does not destroy others' jails for nothing. given is the jail
// whose place was taken, already out of the pool, for the caller to
// discard.
func (p *Pool) needs(k *kind) (ok bool, given *warmJail) {
	p.mu.Lock()
	defer p.mu.Unlock()
	held := len(k.ready) + k.building
	if p.ctx.Err() != nil || k.retired || held >= k.want {
		return false, nil
	}
	if p.warm >= p.cfg.MaxWarm {
		if k.building > 0 || k.failing {
			return false, nil
		}
		if given = p.placeFor(k, held); given == nil {
			return false, nil
		}
	}
	k.building++
	p.warm++
	return true, given
}

// placeFor takes out of the pool, for kind k holding held, the newest
// ready jail of the kind holding the most, if that kind holds at least
// two more than k and keeps one ready: the kinds short of what they want
// end up within one of each other, and a place never moves back and
// forth between two of them. Between kinds holding as many, one without
// network gives its place (removing a network jail's device contends
// with the next one's). nil if no kind qualifies. p.mu is held.
func (p *Pool) placeFor(k *kind, held int) *warmJail {
	var from *kind
	most := 0
	for _, o := range p.kinds {
		n := len(o.ready) + o.building
		if o == k || len(o.ready) < 2 || n < held+2 {
			continue
		}
		if from == nil || n > most || (n == most && from.spec.Network && !o.spec.Network) {
			from, most = o, n
		}
	}
	if from == nil {
		return nil
	}
	w := from.ready[len(from.ready)-1]
	from.ready = from.ready[:len(from.ready)-1]
	p.warm--
	return w
}

// janitor shrinks kinds nobody used for a while and retires empty ones,
// and replaces warm jails that died while waiting.
func (p *Pool) janitor() {
	defer p.wg.Done()
	t := time.NewTicker(min(p.cfg.Idle/4, 30*time.Second))
	defer t.Stop()
	for {
		select {
		case <-p.ctx.Done():
			return
		case <-t.C:
		}
		var drop []*warmJail
		p.mu.Lock()
		for key, k := range p.kinds {
			for i := 0; i < len(k.ready); i++ {
				if k.ready[i].dead() {
					drop = append(drop, k.ready[i])
					k.ready = append(k.ready[:i], k.ready[i+1:]...)
					p.warm--
					i--
				}
			}
			if time.Since(k.lastUsed) < p.cfg.Idle {
				continue
			}
			k.want = 0
			drop = append(drop, k.ready...)
			p.warm -= len(k.ready)
			k.ready = nil
			if k.building == 0 {
				delete(p.kinds, key)
				k.retired = true
				if k.fork != nil {
					// Its last use was the kind's, Idle ago: with no
					// other user, idleForks below ends it at once.
					k.fork.uses--
				}
				kick(k.refill)
			}
		}
		unused := p.idleForks()
		p.mu.Unlock()
		for _, w := range drop {
			w.discard()
		}
		for _, f := range unused {
			p.closeFork(f)
		}
		for _, k := range p.snapshot() {
			kick(k.refill) // replace what died
		}
	}
}

func (p *Pool) snapshot() []*kind {
	p.mu.Lock()
	defer p.mu.Unlock()
	ks := make([]*kind, 0, len(p.kinds))
	for _, k := range p.kinds {
		ks = append(ks, k)
	}
	return ks
}

// networkShapes returns the shapes (see shape) of the kinds with network.
// Called with p.mu held.
func (p *Pool) networkShapes() map[string]bool {
	shapes := map[string]bool{}
	for _, k := range p.kinds {
		if k.spec.Network {
			shapes[shape(k.key)] = true
		}
	}
	return shapes
}

// shape is what the kind of key is made for, whatever code it serves: a
// kind for code that needs only the standard library and the kind for
// any code of the same spec have one shape, and fork from one fork
// server's two servers (forking).
func shape(key string) string { return strings.TrimSuffix(key, "/lean") }
