package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/pyexec/pyexec/internal/engine/run"
	"github.com/pyexec/pyexec/internal/store"
)

// msgNodeSilent is the error of an execution whose node was declared lost
// by another node.
const msgNodeSilent = "node %s stopped answering while this execution was running (no heartbeat for %s)"

// watchMembers starts following the nodes' heartbeats. It returns once
// the entries that exist now are known (recovery asks which nodes are
// alive), with the channel of the changes that follow and the function
// that ends the watch.
func (e *Engine) watchMembers(ctx context.Context) (<-chan store.MemberEvent, context.CancelFunc, error) {
	wctx, cancel := context.WithCancel(e.stopping)
	ch, err := e.st.WatchMembers(wctx)
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
			e.seeMember(ev)
		case <-ctx.Done():
			cancel()
			return nil, nil, ctx.Err()
		}
	}
}

// seeMember records one change of another node's heartbeat entry.
func (e *Engine) seeMember(ev store.MemberEvent) {
	m := e.mem
	m.mu.Lock()
	defer m.mu.Unlock()
	if ev.Key == e.cfg.Node {
		if (ev.Deleted || lostBy(ev.Value) != "") && !m.draining.Load() {
			// Its next heartbeat writes the entry again; what it ran was
			// settled as node_lost by the survivor that removed it.
			e.log.Error("another node declared this node lost: it saw no heartbeat from it for too long", "node", ev.Key,
				"node_lost_after", e.cfg.NodeLostAfter)
		}
		if !ev.Deleted && ev.Revision > m.rev && instanceOf(ev.Value) != m.instance {
			e.log.Error("another process writes this node's heartbeat: two nodes have the same --node-name", "node", ev.Key)
		}
		return
	}
	if ev.Deleted {
		delete(m.peers, ev.Key)
		return
	}
	var info NodeInfo
	if err := json.Unmarshal(ev.Value, &info); err != nil {
		e.log.Warn("ignoring an unreadable heartbeat", "node", ev.Key, "err", err)
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
func (e *Engine) followMembers(ch <-chan store.MemberEvent) {
	for ev := range ch {
		e.seeMember(ev)
	}
}

// nodeAlive reports whether name has a heartbeat entry that this node saw
// within Config.NodeLostAfter. This node counts as alive.
func (e *Engine) nodeAlive(name string) bool {
	if name == e.cfg.Node {
		return true
	}
	e.mem.mu.Lock()
	defer e.mem.mu.Unlock()
	p, ok := e.mem.peers[name]
	return ok && p.info.LostBy == "" && time.Since(p.seen) < e.cfg.NodeLostAfter
}

// watchSilence declares lost every node whose heartbeat this node has not
// seen for Config.NodeLostAfter, until ctx ends. The mark a survivor
// leaves on a node it declared lost counts as a heartbeat: if that
// survivor dies before it has settled the lost node's executions and
// removed the mark, the mark falls silent in turn and another survivor
// takes the claim over.
func (e *Engine) watchSilence(ctx context.Context) {
	t := time.NewTicker(e.cfg.NodeLostAfter / 20)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, s := range e.silent() {
			e.claim(ctx, s)
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
func (e *Engine) silent() []silentPeer {
	e.mem.mu.Lock()
	defer e.mem.mu.Unlock()
	var list []silentPeer
	for name, p := range e.mem.peers {
		if time.Since(p.seen) >= e.cfg.NodeLostAfter && p.tried != p.rev {
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
func (e *Engine) claim(ctx context.Context, s silentPeer) {
	cctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	mark, err := json.Marshal(NodeInfo{Name: s.name, Instance: s.info.Instance, StartedAt: s.info.StartedAt,
		HeartbeatAt: s.info.HeartbeatAt, LostBy: e.cfg.Node})
	if err != nil {
		e.log.Error("encoding a lost node's mark", "err", err)
		return
	}
	markRev, err := e.st.UpdateMember(cctx, s.name, mark, s.rev)
	if errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrNotFound) {
		markRev, err = e.claimExpired(cctx, s.name, mark)
	}
	switch {
	case errors.Is(err, store.ErrConflict), errors.Is(err, store.ErrNotFound):
		// Another survivor claimed it, or it wrote again, or it left: the
		// watch says which.
		return
	case err != nil:
		e.log.Warn("declaring a silent node lost", "node", s.name, "err", err)
		e.mem.mu.Lock()
		if p, ok := e.mem.peers[s.name]; ok && p.rev == s.rev {
			p.tried = 0 // try again at the next tick
		}
		e.mem.mu.Unlock()
		return
	}
	if s.info.LostBy != "" {
		e.log.Warn("taking over the claim on a lost node: the node that declared it lost fell silent", "node", s.name,
			"claimed_by", s.info.LostBy)
	} else {
		e.log.Warn("node lost: no heartbeat", "node", s.name, "for", e.cfg.NodeLostAfter, "last_heartbeat", s.info.HeartbeatAt)
	}
	n, err := e.settleLost(s.name)
	if err != nil {
		// The mark stays: it falls silent, and a survivor (this one,
		// maybe) claims the node again.
		e.log.Error("settling the executions of a lost node", "node", s.name, "settled", n, "err", err)
		return
	}
	e.log.Warn("executions of a lost node marked failed/node_lost", "node", s.name, "count", n)
	if e.deps.OnNodeLost != nil {
		e.deps.OnNodeLost(s.name)
	}
	rctx, rcancel := context.WithTimeout(ctx, storeTimeout)
	defer rcancel()
	if err := e.st.RemoveMember(rctx, s.name, markRev); err != nil && !errors.Is(err, store.ErrConflict) {
		e.log.Warn("removing a lost node's mark", "node", s.name, "err", err)
	}
}

// claimExpired claims a silent node whose entry is gone although the
// watch said nothing: it expired (the bucket's TTL, store.MemberTTL, may
// be shorter than Config.NodeLostAfter), which no watch reports. The mark
// is then created, which again only one survivor can do. An entry that is
// still there (the node wrote again, or another survivor claimed it) is
// left to the watch: ErrConflict.
func (e *Engine) claimExpired(ctx context.Context, name string, mark []byte) (uint64, error) {
	_, err := e.st.GetMember(ctx, name)
	if err == nil {
		return 0, store.ErrConflict
	}
	if !errors.Is(err, store.ErrNotFound) {
		return 0, err
	}
	rev, err := e.st.CreateMember(ctx, name, mark)
	if errors.Is(err, store.ErrExists) {
		return 0, store.ErrConflict
	}
	return rev, err
}

// settleLost marks failed with reason node_lost every unfinished execution
// that the lost node ran or held (record.Node) and that no node answers
// for. A final write that races with it (a kill, or the node's own outcome
// if it was only cut off) wins or loses as a whole: the record changes
// from unfinished to final once.
func (e *Engine) settleLost(node string) (int, error) {
	settled := 0
	for _, st := range []Status{StatusPending, StatusRunning} {
		opts := store.ListOptions{Limit: 100, Status: string(st), AllOwners: true, Match: unfinishedOn(node)}
		for {
			lctx, cancel := storeCtx()
			page, next, err := e.st.List(lctx, opts)
			cancel()
			if err != nil {
				return settled, err
			}
			for _, ent := range page {
				ok, err := e.settleOne(node, ent.Key)
				if err != nil {
					return settled, err
				}
				if ok {
					settled++
				}
			}
			if next == "" {
				break
			}
			opts.Cursor = next
		}
	}
	return settled, nil
}

// settleOne marks one execution of a lost node failed/node_lost unless a
// node answers for it; it reports whether it did.
func (e *Engine) settleOne(node, id string) (bool, error) {
	sctx, cancel := storeCtx()
	defer cancel()
	if owned, err := e.ownedAnywhere(sctx, id); err != nil || owned {
		return false, err
	}
	msg := fmt.Sprintf(msgNodeSilent, node, e.cfg.NodeLostAfter)
	r, ok, err := e.transition(sctx, id, func(r *record) bool {
		if r.Status.Final() || r.Node != node {
			return false
		}
		run.Fail(&r.Execution, ReasonNodeLost, msg, run.ExitKilled)
		r.FinishedAt = ptr(run.Now())
		return true
	})
	if errors.Is(err, ErrNotFound) {
		return false, nil // expired or evicted meanwhile
	}
	if err != nil || !ok {
		return false, err
	}
	e.log.Warn("execution lost with its node", "execution_id", id, "node", node)
	e.ended(sctx, r)
	return true, nil
}

// unfinishedOn matches the records of node that are pending or running.
func unfinishedOn(node string) func([]byte) bool {
	return func(value []byte) bool {
		var s struct {
			Status Status `json:"status"`
			Node   string `json:"node"`
		}
		return json.Unmarshal(value, &s) == nil && !s.Status.Final() && s.Node == node
	}
}
