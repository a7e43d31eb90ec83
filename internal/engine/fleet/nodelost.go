package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/pyexec/pyexec/internal/store"
)

// watchMembers starts following the nodes' heartbeats. It returns once
// the entries that exist now are known (recovery asks which nodes are
// alive), with the channel of the changes that follow and the function
// that ends the watch.
func (m *Membership) watchMembers(ctx context.Context) (<-chan store.MemberEvent, context.CancelFunc, error) {
	wctx, cancel := context.WithCancel(m.stopping)
	ch, err := m.st.WatchMembers(wctx)
	if err != nil {
		cancel()
		return nil, nil, err
	}
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				cancel()
				return nil, nil, errors.New("the watch of the nodes' heartbeats ended")
			}
			if ev.Synced {
				return ch, cancel, nil
			}
			m.seeMember(ev)
		case <-ctx.Done():
			cancel()
			return nil, nil, ctx.Err()
		}
	}
}

// seeMember records one change of another node's heartbeat entry.
func (m *Membership) seeMember(ev store.MemberEvent) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if ev.Key == m.cfg.Node {
		if (ev.Deleted || lostBy(ev.Value) != "") && !m.draining.Load() {
			// Its next heartbeat writes the entry again; what it ran was
			// settled as node_lost by the survivor that removed it.
			m.log.Error("another node declared this node lost: it saw no heartbeat from it for too long; "+
				"this node's sessions end here, to resume elsewhere", "node", ev.Key, "node_lost_after", m.cfg.NodeLostAfter)
			if m.deps.OnSelfLost != nil {
				go m.deps.OnSelfLost()
			}
		}
		if !ev.Deleted && ev.Revision > m.rev && instanceOf(ev.Value) != m.instance {
			m.log.Error("another process writes this node's heartbeat: two nodes have the same --node-name", "node", ev.Key)
		}
		return
	}
	if ev.Deleted {
		delete(m.peers, ev.Key)
		return
	}
	var info NodeInfo
	if err := json.Unmarshal(ev.Value, &info); err != nil {
		m.log.Warn("ignoring an unreadable heartbeat", "node", ev.Key, "err", err)
		return
	}
	m.peers[ev.Key] = &peer{info: info, rev: ev.Revision, seen: time.Now()}
}

func instanceOf(value []byte) string {
	var info NodeInfo
	if json.Unmarshal(value, &info) != nil {
		return ""
	}
	return info.Instance
}

func lostBy(value []byte) string {
	var info NodeInfo
	if json.Unmarshal(value, &info) != nil {
		return ""
	}
	return info.LostBy
}

// followMembers applies the watch's changes until it ends.
func (m *Membership) followMembers(ch <-chan store.MemberEvent) {
	for ev := range ch {
		m.seeMember(ev)
	}
}

// NodeAlive reports whether name has a heartbeat entry that this node saw
// within Config.NodeLostAfter. This node counts as alive.
func (m *Membership) NodeAlive(name string) bool {
	if name == m.cfg.Node {
		return true
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	p, ok := m.peers[name]
	return ok && p.info.LostBy == "" && time.Since(p.seen) < m.cfg.NodeLostAfter
}

// watchSilence declares lost every node whose heartbeat this node has not
// seen for Config.NodeLostAfter, until ctx ends. The mark a survivor
// leaves on a node it declared lost counts as a heartbeat: if that
// survivor dies before it has settled the lost node's executions and
// removed the mark, the mark falls silent in turn and another survivor
// takes the claim over.
func (m *Membership) watchSilence(ctx context.Context) {
	t := time.NewTicker(m.cfg.NodeLostAfter / 20)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, s := range m.silent() {
			m.claim(ctx, s)
		}
	}
}

// silentPeer is a node to declare lost: its name, the revision of the
// last entry seen from it, and that entry.
type silentPeer struct {
	name string
	rev  uint64
	info NodeInfo
}

// silent lists the nodes silent for too long that this node did not try
// to declare lost yet at their current revision.
func (m *Membership) silent() []silentPeer {
	m.mu.Lock()
	defer m.mu.Unlock()
	var list []silentPeer
	for name, p := range m.peers {
		if time.Since(p.seen) >= m.cfg.NodeLostAfter && p.tried != p.rev {
			p.tried = p.rev
			list = append(list, silentPeer{name: name, rev: p.rev, info: p.info})
		}
	}
	return list
}

// claim declares a silent node lost. Every survivor tries, by replacing
// the node's entry at the revision it last saw with a mark naming itself
// (NodeInfo.LostBy): the store lets exactly one of them succeed, and a
// node that wrote a newer heartbeat meanwhile is not replaced. The one
// that succeeded settles the lost node's executions, then removes the
// mark.
func (m *Membership) claim(ctx context.Context, s silentPeer) {
	cctx, cancel := context.WithTimeout(ctx, claimTimeout)
	defer cancel()
	mark, err := json.Marshal(NodeInfo{Name: s.name, Instance: s.info.Instance, StartedAt: s.info.StartedAt,
		HeartbeatAt: s.info.HeartbeatAt, LostBy: m.cfg.Node})
	if err != nil {
		m.log.Error("encoding a lost node's mark", "err", err)
		return
	}
	markRev, err := m.st.UpdateMember(cctx, s.name, mark, s.rev)
	if errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrNotFound) {
		markRev, err = m.claimExpired(cctx, s.name, mark)
	}
	switch {
	case errors.Is(err, store.ErrConflict), errors.Is(err, store.ErrNotFound):
		// Another survivor claimed it, or it wrote again, or it left: the
		// watch says which.
		return
	case err != nil:
		m.log.Warn("declaring a silent node lost", "node", s.name, "err", err)
		m.mu.Lock()
		if p, ok := m.peers[s.name]; ok && p.rev == s.rev {
			p.tried = 0 // try again at the next tick
		}
		m.mu.Unlock()
		return
	}
	if s.info.LostBy != "" {
		m.log.Warn("taking over the claim on a lost node: the node that declared it lost fell silent", "node", s.name,
			"claimed_by", s.info.LostBy)
	} else {
		m.log.Warn("node lost: no heartbeat", "node", s.name, "for", m.cfg.NodeLostAfter, "last_heartbeat", s.info.HeartbeatAt)
	}
	n, err := m.deps.Settle(s.name, m.cfg.NodeLostAfter)
	if err != nil {
		// The mark stays: it falls silent, and a survivor (this one,
		// maybe) claims the node again.
		m.log.Error("settling the executions of a lost node", "node", s.name, "settled", n, "err", err)
		return
	}
	m.log.Warn("executions of a lost node marked failed/node_lost", "node", s.name, "count", n)
	if m.deps.OnLost != nil {
		m.deps.OnLost(s.name)
	}
	rctx, rcancel := context.WithTimeout(ctx, claimTimeout)
	defer rcancel()
	if err := m.st.RemoveMember(rctx, s.name, markRev); err != nil && !errors.Is(err, store.ErrConflict) {
		m.log.Warn("removing a lost node's mark", "node", s.name, "err", err)
	}
}

// claimExpired claims a silent node whose entry is gone although the
// watch said nothing: it expired (the bucket's TTL, store.MemberTTL, may
// be shorter than Config.NodeLostAfter), which no watch reports. The mark
// is then created, which again only one survivor can do. An entry that is
// still there (the node wrote again, or another survivor claimed it) is
// left to the watch: ErrConflict.
func (m *Membership) claimExpired(ctx context.Context, name string, mark []byte) (uint64, error) {
	_, err := m.st.GetMember(ctx, name)
	if err == nil {
		return 0, store.ErrConflict
	}
	if !errors.Is(err, store.ErrNotFound) {
		return 0, err
	}
	rev, err := m.st.CreateMember(ctx, name, mark)
	if errors.Is(err, store.ErrExists) {
		return 0, store.ErrConflict
	}
	return rev, err
}
