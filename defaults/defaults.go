// Package defaults holds the defaults that capflow's configuration, its
// worker and workflow, and the client package share, each defined once.
// It imports nothing, so any of them (and a service outside capflow) can
// use it.
package defaults

import "time"

const (
	// TaskQueue is the task queue workers poll and clients start runs on.
	TaskQueue = "capflow"
	// Namespace and Address are the Temporal namespace and frontend.
	Namespace = "default"
	Address   = "localhost:7233"
	// SegmentEvents is the history length at which a run continues as
	// new (docs/limits.md).
	SegmentEvents = 5000
	// HostWait is how long a run's step waits for a worker on the run's
	// host before the host is taken as lost.
	HostWait = 15 * time.Minute
)
