package engine

// Stats is a snapshot of the engine's load.
type Stats struct {
	Running  int `json:"running"`
	Queued   int `json:"queued"`
	Capacity int `json:"capacity"`
}
