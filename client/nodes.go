package client

import (
	"context"
	"net/http"
	"time"
)

// Node is one live node of a pyexec fleet, from its latest heartbeat.
type Node struct {
	Name     string `json:"name"`
	Instance string `json:"instance"`
	Version  string `json:"version,omitempty"`
	// StartedAt and HeartbeatAt are by the node's own clock.
	StartedAt   time.Time `json:"started_at"`
	HeartbeatAt time.Time `json:"heartbeat_at"`
	// Draining: the node is stopping and takes no new work.
	Draining        bool `json:"draining"`
	Capacity        int  `json:"capacity"`
	Running         int  `json:"running"`
	Queued          int  `json:"queued"`
	QueueSize       int  `json:"queue_size"`
	Sessions        int  `json:"sessions"`
	SessionCapacity int  `json:"session_capacity"`
	// WarmJails is nil when the node has no warm pool.
	WarmJails *int    `json:"warm_jails,omitempty"`
	CPUs      int     `json:"cpus"`
	Load1     float64 `json:"load1"`
}

// NodeList answers ListNodes.
type NodeList struct {
	Nodes []Node `json:"nodes"`
}

// ListNodes lists the live nodes of the server's fleet (GET
// /api/v1/nodes), the server itself included, by name.
func (c *Client) ListNodes(ctx context.Context) (*NodeList, error) {
	var res NodeList
	if err := c.call(ctx, http.MethodGet, "/api/v1/nodes", nil, "", 0, &res); err != nil {
		return nil, err
	}
	return &res, nil
}
