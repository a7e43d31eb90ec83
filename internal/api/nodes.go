package api

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/pyexec/pyexec/internal/engine"
)

// NodesEngine is the engine of a server that knows the nodes of its fleet
// (*engine.Engine); without it, /api/v1/nodes is not served.
type NodesEngine interface {
	// Nodes lists the live nodes, this one included, by name.
	Nodes() []engine.NodeInfo
}

// NodeInfo is one live node of the fleet, from its latest heartbeat.
type NodeInfo struct {
	Name            string  `json:"name" doc:"The node's name (pyexec serve --node-name)"`
	Instance        string  `json:"instance" doc:"Random id of this run of the node; a restart gets a new one"`
	Version         string  `json:"version,omitempty" doc:"The node's pyexec version"`
	StartedAt       Time    `json:"started_at"`
	HeartbeatAt     Time    `json:"heartbeat_at" doc:"When the node wrote this heartbeat, by its own clock; nodes write one every 2s"`
	Draining        bool    `json:"draining" doc:"The node is stopping: it takes no new work and finishes what it runs"`
	Capacity        int     `json:"capacity" doc:"Executions that may run at once on the node (--max-concurrency)"`
	Running         int     `json:"running" doc:"Executions running on the node"`
	Queued          int     `json:"queued" doc:"Executions admitted by the node and waiting for a slot"`
	QueueSize       int     `json:"queue_size" doc:"Executions that may wait on the node (--queue-size)"`
	Sessions        int     `json:"sessions" doc:"Live sessions on the node"`
	SessionCapacity int     `json:"session_capacity" doc:"Sessions the node may hold (--max-sessions)"`
	WarmJails       *int    `json:"warm_jails,omitempty" doc:"Warm jails ready to take; absent when the node has no warm pool"`
	CPUs            int     `json:"cpus" doc:"CPUs of the node's host"`
	Load1           float64 `json:"load1" doc:"1-minute load average of the node's host"`
}

// NodeList answers GET /api/v1/nodes.
type NodeList struct {
	Nodes []NodeInfo `json:"nodes" doc:"Every live node, this one included, by name"`
}

type nodesOutput struct{ Body NodeList }

func (s *Server) registerNodes(hapi huma.API, ne NodesEngine) {
	o := op(hapi, "list-nodes", http.MethodGet, "/api/v1/nodes", "List the live nodes of the fleet",
		http.StatusUnauthorized, http.StatusInternalServerError)
	o.Tags = []string{"service"}
	o.Description = "Every node that sent a heartbeat within --node-lost-after, as this node last saw it. " +
		"A node that stops gracefully leaves the list at once; one that dies leaves it when another node declares it lost. " +
		"Needs an API key when the server has keys (any key, as for /metrics); /health and /readyz stay open."
	huma.Register(hapi, o, func(context.Context, *struct{}) (*nodesOutput, error) {
		list := ne.Nodes()
		out := &nodesOutput{Body: NodeList{Nodes: make([]NodeInfo, len(list))}}
		for i, n := range list {
			out.Body.Nodes[i] = NodeInfo{
				Name: n.Name, Instance: n.Instance, Version: n.Version,
				StartedAt: wireTime(n.StartedAt), HeartbeatAt: wireTime(n.HeartbeatAt), Draining: n.Draining,
				Capacity: n.Capacity, Running: n.Running, Queued: n.Queued, QueueSize: n.QueueSize,
				Sessions: n.Sessions, SessionCapacity: n.SessionCapacity, WarmJails: n.WarmJails,
				CPUs: n.CPUs, Load1: n.Load1,
			}
		}
		return out, nil
	})
}
