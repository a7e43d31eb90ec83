package config

import (
	"time"

	"github.com/spf13/pflag"
)

// Members tunes how the nodes of a fleet watch each other.
type Members struct {
	// NodeLostAfter is how long a node may write no heartbeat before the
	// others declare it lost and fail its unfinished executions with
	// reason node_lost. Nodes write one every 2s.
	NodeLostAfter time.Duration
}

// minNodeLostAfter is two heartbeats: one late write must not make a node
// lost.
const minNodeLostAfter = 4 * time.Second

func defaultMembers() Members { return Members{NodeLostAfter: 10 * time.Second} }

func (m *Members) bind(fs *pflag.FlagSet) {
	fs.Var(secondsValue{&m.NodeLostAfter}, "node-lost-after", "")
	describe(fs, "node-lost-after", "how long a fleet node may send no heartbeat (one every 2s) before another node declares it lost and fails its running executions (node_lost)")
}

func (c *Config) validateMembers(bad func(env, format string, args ...any)) {
	if c.Members.NodeLostAfter < minNodeLostAfter || c.Members.NodeLostAfter > time.Hour {
		bad("PYEXEC_NODE_LOST_AFTER", "must be %v-1h (at least two heartbeats), got %v", minNodeLostAfter, c.Members.NodeLostAfter)
	}
}
