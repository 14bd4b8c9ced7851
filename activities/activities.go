// Package activities holds capflow's Temporal activities: Resolve (the
// same checks as `plan check`), RunTool (one step), Finalize (reports).
// They are the only code of a run that touches the outside world.
package activities

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/llm"
	"github.com/capflow/capflow/internal/policy"
	"github.com/capflow/capflow/internal/project"
	"github.com/capflow/capflow/internal/registry"
	"github.com/capflow/capflow/internal/step"
	"github.com/capflow/capflow/internal/wfapi"
)

// Activities holds the dependencies of every activity.
type Activities struct {
	// Project is the worker's project, loaded the way the CLI loads it.
	Project *project.Project
	// Exec runs steps (RunTool, RunInline). Its manifests, artifact store
	// and host queue are the worker's, which the other activities use too.
	Exec   *step.Executor
	Logger hclog.Logger
	// SearchAttributes is true when the server knows CapflowPlan and
	// CapflowStatus (the worker checks at start-up).
	SearchAttributes bool
	// Router turns request text into a plan (nil: routing unavailable).
	Router Router
	// Model, when set, stands in for every agent step's provider (plan
	// tests: the case's scripted answers).
	Model func(step string, round int) llm.Client

	// HostWait is recorded in each run it resolves (ResolveResult.HostWait).
	HostWait time.Duration
	// SegmentEvents is the history length at which a run continues as
	// new (0: wfapi.DefaultSegmentEvents).
	SegmentEvents int
	// EagerSteps is recorded in each run it resolves
	// (ResolveResult.EagerSteps).
	EagerSteps int
	// Heartbeats lets a running tool ride out a Temporal outage: the
	// worker's client (nil: a failed heartbeat stops the tool, as the SDK
	// does).
	Heartbeats Heartbeater
	// Tracer records each attempt of a step as a span (nil: not traced).
	Tracer trace.Tracer

	mu         sync.Mutex
	stepsCache *stepsCache
}

// Router is what the Route activity needs of the request router.
type Router interface {
	Route(ctx context.Context, request string, inputs map[string]any) (*wfapi.RouteResult, error)
}

// registry loads the registry, its manifests remembered for RunTool.
func (a *Activities) registry() (*registry.Registry, error) { return a.Exec.Registry() }

// checker is what `plan check` checks against: the registry and the
// project's policy.
func (a *Activities) checker() (*registry.Registry, *policy.Policy, error) {
	reg, err := a.registry()
	if err != nil {
		return nil, nil, err
	}
	pol, err := a.Project.Policy()
	if err != nil {
		return nil, nil, caperr.As(err, caperr.ConfigError)
	}
	return reg, pol, nil
}

// Host answers this worker's host queue and the run's folder here (a run
// whose host was lost moves to the host of whichever worker answers).
func (a *Activities) Host(ctx context.Context, workflowID string) (*wfapi.HostInfo, error) {
	dir, err := a.runFolder(ctx, workflowID, "")
	if err != nil {
		return nil, appError(err)
	}
	return &wfapi.HostInfo{Queue: a.Exec.HostQueue, RunDir: dir, SharedStore: a.Exec.Artifacts != nil && a.Exec.Artifacts.Shared}, nil
}

// elsewhere refuses an activity that runs on a worker other than the
// run's host (host: the run's host queue; "": any), when it is a local
// activity or localOnly is false: the run's folder and processes are not
// here. The workflow then runs it as a regular activity there.
func (a *Activities) elsewhere(ctx context.Context, host string, localOnly bool) error {
	if host == "" || host == a.Exec.HostQueue || !activity.IsActivity(ctx) || (localOnly && !activity.GetInfo(ctx).IsLocalActivity) {
		return nil
	}
	// Benign: the SDK logs it at debug and counts no failed activity (the
	// workflow runs it on the host next, as designed).
	return temporal.NewApplicationErrorWithOptions(fmt.Sprintf("the run's host is %s, this worker is %s", host, a.Exec.HostQueue), wfapi.ErrWrongHost,
		temporal.ApplicationErrorOptions{NonRetryable: true, Category: temporal.ApplicationErrorCategoryBenign})
}
