package executions

import (
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

// SettleLost marks failed with reason node_lost every unfinished
// execution that the lost node ran or held (record.Node) and that no node
// answers for; silentFor is how long the node was silent, for the
// message. A final write that races with it (a kill, or the node's own outcome
// if it was only cut off) wins or loses as a whole: the record changes
// from unfinished to final once.
func (e *Service) SettleLost(node string, silentFor time.Duration) (int, error) {
	settled := 0
	for _, st := range []run.Status{run.StatusPending, run.StatusRunning} {
		opts := store.ListOptions{Limit: 100, Status: string(st), AllOwners: true, Match: unfinishedOn(node)}
		for {
			lctx, cancel := storeCtx()
			page, next, err := e.st.List(lctx, opts)
			cancel()
			if err != nil {
				return settled, err
			}
			for _, ent := range page {
				ok, err := e.settleOne(node, ent.Key, silentFor)
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
func (e *Service) settleOne(node, id string, silentFor time.Duration) (bool, error) {
	sctx, cancel := storeCtx()
	defer cancel()
	if owned, err := e.ownedAnywhere(sctx, id); err != nil || owned {
		return false, err
	}
	msg := fmt.Sprintf(msgNodeSilent, node, silentFor)
	r, ok, err := e.transition(sctx, id, func(r *Record) bool {
		if r.Status.Final() || r.Node != node {
			return false
		}
		run.Fail(&r.Execution, run.ReasonNodeLost, msg, run.ExitKilled)
		r.FinishedAt = ptr(run.Now())
		return true
	})
	if errors.Is(err, run.ErrNotFound) {
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
			Status run.Status `json:"status"`
			Node   string     `json:"node"`
		}
		return json.Unmarshal(value, &s) == nil && !s.Status.Final() && s.Node == node
	}
}
