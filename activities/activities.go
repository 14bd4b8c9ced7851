// Package activities holds capflow's Temporal activities: Resolve (the
// same checks as `plan check`), RunTool (one step), Finalize (reports).
// They are the only code of a run that touches the outside world.
package activities

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/hashicorp/go-hclog"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/capflow/capflow/internal/artifacts"
	"github.com/capflow/capflow/internal/cache"
	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/manifest"
	"github.com/capflow/capflow/internal/project"
	"github.com/capflow/capflow/internal/registry"
	"github.com/capflow/capflow/internal/runfolder"
	"github.com/capflow/capflow/internal/toolrun"
	"github.com/capflow/capflow/internal/wfapi"
)

// Activities holds the dependencies of every activity.
type Activities struct {
	// Project is the worker's project, loaded the way the CLI loads it.
	Project *project.Project
	Runner  *toolrun.Runner
	Logger  hclog.Logger
	// SearchAttributes is true when the server knows CapflowPlan and
	// CapflowStatus (the worker checks at start-up).
	SearchAttributes bool
	// Router turns request text into a plan (nil: routing unavailable).
	Router Router

	// Artifacts is the store of step outputs (nil: none).
	Artifacts *artifacts.Store

	// HostQueue is this worker's host queue: Resolve names it, and the
	// run's steps go there (one host per run).
	HostQueue string
	// HostWait is recorded in each run it resolves (ResolveResult.HostWait).
	HostWait time.Duration
	// SegmentEvents is the history length at which a run continues as
	// new (0: wfapi.DefaultSegmentEvents).
	SegmentEvents int
	// Heartbeats lets a running tool ride out a Temporal outage: the
	// worker's client (nil: a failed heartbeat stops the tool, as the SDK
	// does).
	Heartbeats Heartbeater
	// Tracer records each attempt of a step as a span (nil: not traced).
	Tracer trace.Tracer
	// InlineStepTime bounds one inline evaluation (0:
	// wfapi.InlineStepTime); tests of what inline steps do, not of the
	// bound, give it room on a loaded machine.
	InlineStepTime time.Duration

	mu         sync.Mutex
	stepsCache *stepsCache
	earlier    *earlier                      // the report a rerun reuses from
	tools      map[string]*manifest.Manifest // digest -> manifest
	lists      map[string][]any              // for_each lists read from stored outputs
	digests    cache.Memo                    // file digests of cache keys, by stat
	policyMode modeMemo                      // the policy's sandbox mode, by stat
}

// Router is what the Route activity needs of the request router.
type Router interface {
	Route(ctx context.Context, request string, inputs map[string]any) (plan any, kind, id, message string, err error)
}

// registry loads the registry (cheap: the cache in state_dir) and
// remembers every manifest by digest for RunTool.
func (a *Activities) registry() (*registry.Registry, error) {
	reg, err := a.Project.Registry()
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.tools == nil {
		a.tools = map[string]*manifest.Manifest{}
	}
	for _, m := range reg.Tools {
		a.tools[m.Digest] = m
	}
	return reg, nil
}

// manifest returns the exact manifest a step was resolved to. A tool
// whose manifest changed since resolution is refused: the run executes
// what its history recorded, or nothing.
func (a *Activities) manifest(name, version, digest string) (*manifest.Manifest, error) {
	a.mu.Lock()
	m := a.tools[digest]
	a.mu.Unlock()
	if m != nil {
		return m, nil
	}
	reg, err := a.registry()
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	m = a.tools[digest]
	a.mu.Unlock()
	if m != nil {
		return m, nil
	}
	if cur := reg.Tool(name, version); cur != nil {
		return nil, caperr.New(caperr.ConfigError, "tool %s@%s changed since the plan was resolved (digest %s, now %s)", name, version, short(digest), short(cur.Digest))
	}
	return nil, caperr.New(caperr.ToolNotFound, "tool %s@%s is not available on this worker", name, version)
}

func short(d string) string {
	if len(d) > 19 {
		return d[:19]
	}
	return d
}

// safeName keeps step ids from escaping their folder (runfolder.Safe).
func safeName(s string) string { return runfolder.Safe(s) }

// Host answers this worker's host queue and the run's folder here (a run
// whose host was lost moves to the host of whichever worker answers).
func (a *Activities) Host(ctx context.Context, workflowID string) (*wfapi.HostInfo, error) {
	dir, err := a.runFolder(ctx, workflowID, "")
	if err != nil {
		return nil, appError(err)
	}
	return &wfapi.HostInfo{Queue: a.HostQueue, RunDir: dir, SharedStore: a.Artifacts != nil && a.Artifacts.Shared}, nil
}

// wrongHost refuses a local activity that runs on a worker other than the
// run's host (host: the run's host queue): the run's folder and processes
// are not here. The workflow then runs it as a regular activity there.
func (a *Activities) wrongHost(ctx context.Context, host string) error {
	if host == "" || host == a.HostQueue || !activity.IsActivity(ctx) || !activity.GetInfo(ctx).IsLocalActivity {
		return nil
	}
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf("the run's host is %s, this worker is %s", host, a.HostQueue), wfapi.ErrWrongHost, nil)
}
