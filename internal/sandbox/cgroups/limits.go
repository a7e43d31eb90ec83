package cgroups

// Limits are what a jail's cgroup bounds.
type Limits struct {
	MemoryBytes int64   // memory, no swap
	Pids        int64   // tasks: processes and threads
	CPUs        float64 // CPU bandwidth in cores (0.5 = half a core)
}
