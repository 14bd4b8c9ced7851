// Package step runs one attempt of one step or item: the only code that
// runs a tool for a run. Inputs are evaluated from what earlier steps
// stored, an earlier result (a rerun's reuse, the cache) may stand for the
// attempt, the tool runs confined by the policy, and its envelope, files,
// cache entry and artifacts are kept in the step's folder and the store.
// The RunTool and RunInline activities call it (they add Temporal's side:
// heartbeats, outages, error conversion), and so do plan tests, with a
// Tool that answers with given results. It imports nothing of Temporal.
package step

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/capflow/capflow/internal/artifacts"
	"github.com/capflow/capflow/internal/cache"
	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/envelope"
	"github.com/capflow/capflow/internal/manifest"
	"github.com/capflow/capflow/internal/project"
	"github.com/capflow/capflow/internal/registry"
	"github.com/capflow/capflow/internal/sandbox"
	"github.com/capflow/capflow/internal/toolrun"
	"github.com/capflow/capflow/internal/wfapi"
)

// Tool runs a step's tool: *toolrun.Runner, or plan tests' stand-in.
type Tool interface {
	Run(ctx context.Context, req toolrun.Request) envelope.Envelope
}

// Executor holds what every attempt needs, and the worker's caches.
type Executor struct {
	// Project is the worker's project, loaded the way the CLI loads it.
	Project *project.Project
	Tool    Tool
	Logger  hclog.Logger
	// Artifacts is the store of step outputs (nil: none).
	Artifacts *artifacts.Store
	// HostQueue is this worker's host queue (an inline command step of a
	// run on another host is not run here).
	HostQueue string
	// Given is true when Tool answers with given results, not a tool's
	// (plan tests): the files their data names are neither checked nor
	// stored, and nothing is cached.
	Given bool
	// Slots keeps tools' limits across runs and workers (nil: not kept).
	Slots Slots
	// InlineStepTime bounds one inline evaluation (0:
	// wfapi.InlineStepTime); tests of what inline steps do, not of the
	// bound, give it room on a loaded machine.
	InlineStepTime time.Duration

	mu      sync.Mutex
	earlier *earlier                      // the report a rerun reuses from
	tools   map[string]*manifest.Manifest // digest -> manifest
	listed  *registry.Registry            // the last registry whose tools are in tools
	lists   map[string][]any              // for_each lists read from stored outputs
	digests cache.Memo                    // file digests of cache keys, by stat
}

// Attempt is what the caller knows of one attempt.
type Attempt struct {
	// Number counts from 1, attempts made as a local activity first
	// included; Max is the last one (0: unknown).
	Number, Max int32
	// RunID is the Temporal run that starts it: a non-idempotent step's
	// start is claimed in its name (started.go).
	RunID string
	// Timeout is its start-to-close timeout (0: none): an attempt that used
	// most of it carries a warning.
	Timeout time.Duration
	// OnFeedback and OnStderr see the tool's live feedback and stderr.
	OnFeedback func(envelope.Feedback)
	OnStderr   func(line string)
	// Bind is the context the attempt runs in from its tool's start to its
	// end, and that end (an activity's rides out server outages); nil: ctx.
	Bind func(ctx context.Context) (context.Context, func())
	// Lease is how long a slot of the tool's limits stays the attempt's
	// without a renewal (0: DefaultLease): its heartbeat timeout.
	Lease time.Duration
}

// Failed is a failed attempt: the tool's failure, with its contract code
// and its result (the envelope, cut to fit history). Other errors are the
// attempt's own (a folder, the store), coded by caperr.
type Failed struct {
	Code       caperr.Code
	Idempotent bool
	Result     *wfapi.RunToolResult
}

func (f *Failed) Error() string { return f.Result.Envelope.Message }

// Retryable is the retry rule: the code is retryable, the tool is
// idempotent, and the tool (or capflow, for a code it does not know) did
// not mark the failure final.
func (f *Failed) Retryable() bool {
	return caperr.Lookup(f.Code).Retryable && f.Idempotent && !notRetryable(f.Result.Envelope.Error)
}

// notRetryable: a failure marked not to retry although its code is
// retryable.
func notRetryable(e *envelope.ErrorInfo) bool {
	return e != nil && e.Code == caperr.ToolFailure && !e.Retryable
}

// Cancelled is returned, with the attempt's number in its result, when
// the attempt's context ended the tool.
type Cancelled struct{ Result *wfapi.RunToolResult }

func (c *Cancelled) Error() string { return "the step was cancelled" }

// MaxDataInHistory is the largest envelope data carried in history; larger
// data is written to <run>/<step>/data.json and passed by reference, so no
// payload nears Temporal's limits (2 MB hard, 512 KB warning).
const MaxDataInHistory = 256 << 10

// MaxStoredData bounds a stored output a consumer will read back.
const MaxStoredData = 256 << 20

// Run runs one attempt of a step in the run folder in.RunDir (the caller
// checked it is the run's). A tool's failure is a *Failed.
func (e *Executor) Run(ctx context.Context, in wfapi.RunToolInput, at Attempt) (*wfapi.RunToolResult, error) {
	if err := e.localize(ctx, &in); err != nil {
		return nil, err
	}
	r := e.newStepRun(in, at)
	b := envelope.NewBuilder(in.Step.Tool)
	m, err := e.Manifest(in.Step.Tool, in.Step.Version, in.Step.Digest)
	if err != nil {
		return r.fail(b.FailErr(err, nil))
	}
	inputs, err := r.evalInputs(e)
	if err != nil {
		return r.fail(b.FailErr(err, nil))
	}
	// encoding/json sorts keys: equal inputs give equal digests.
	rawIn, _ := json.Marshal(inputs)
	inSum := sha256.Sum256(rawIn)
	inputsSHA := hex.EncodeToString(inSum[:])
	// Only an idempotent step has a key: only its result may stand for
	// another run of it (a rerun's reuse, the cache).
	key, why := "", ""
	if in.Step.Idempotent && !e.Given {
		key, why = e.cacheKey(m, rawIn, inputs)
	}
	res, note := e.earlierResult(ctx, r, key, why, inputsSHA)
	if res != nil {
		return res, nil
	}
	// A slot of the tool's limits before the start is claimed: a worker
	// that dies waiting leaves nothing started.
	release, waited, err := e.takeSlots(ctx, r, m, inputs)
	defer release()
	if err != nil {
		if ctx.Err() != nil {
			return nil, &Cancelled{Result: &wfapi.RunToolResult{Attempt: r.attempt}}
		}
		return r.fail(b.FailErr(err, nil))
	}
	if !in.Step.Idempotent {
		if err := r.claimStart(at.RunID); err != nil {
			return r.fail(b.FailErr(err, nil))
		}
	}
	// From the tool's start to the attempt's end (its files stored, its
	// cache entry written), the caller's context: an activity's rides out
	// a server outage.
	if at.Bind != nil {
		var end func()
		ctx, end = at.Bind(ctx)
		defer end()
	}
	// The write folders are taken before the tool starts and read beneath
	// after it ends: a folder swapped for a link meanwhile leads nowhere.
	folders, err := sandbox.OpenWrites(m.Sandbox, e.Project.Root(), e.Project.Config.Protected()...)
	if err != nil {
		return r.fail(b.FailErr(caperr.New(caperr.ConfigError, "%s: %v", m.File, err), nil))
	}
	defer folders.Close()
	r.folders = folders
	env, err := e.runTool(ctx, r, m, inputs)
	if err != nil {
		return r.fail(b.FailErr(err, nil))
	}
	for _, n := range []*envelope.Feedback{waited, note} {
		if n != nil {
			env.Feedback = append(env.Feedback, *n)
		}
	}
	if !env.Success {
		if ctx.Err() != nil && env.Error != nil && env.Error.Code == caperr.Cancelled {
			return nil, &Cancelled{Result: &wfapi.RunToolResult{Attempt: r.attempt}}
		}
		return r.fail(env)
	}
	return e.succeeded(ctx, r, m, env, inputsSHA, key)
}

// runTool runs the step's tool, confined as the policy says.
func (e *Executor) runTool(ctx context.Context, r *stepRun, m *manifest.Manifest, inputs any) (envelope.Envelope, error) {
	mode, net, err := e.reach(m)
	if err != nil {
		return envelope.Envelope{}, err
	}
	at := r.at
	inMap, _ := inputs.(map[string]any)
	in := r.in
	env := e.Tool.Run(ctx, toolrun.Request{
		Manifest: m, Inputs: inMap, RunID: in.WorkflowID, StepID: in.Step.ID, Label: label(in.Step), Attempt: int(r.attempt),
		Root: e.Project.Root(), RunDir: in.RunDir, Workdir: r.stepDir, Records: r.recDir,
		Secrets:    toolrun.SecretsFromEnv(m, os.LookupEnv),
		OnFeedback: at.OnFeedback, OnStderr: at.OnStderr, Sandbox: mode, Net: net, Folders: r.folders,
	})
	if w := nearTimeout(time.Since(r.began), at.Timeout); w != nil {
		env.Feedback = append(env.Feedback, *w)
	}
	return env, nil
}

// earlierResult is a result that stands for this attempt: a rerun's
// reuse of its earlier run, or the cache's (key and why: cacheKey's).
// note says why the cache had none, when the step asked it.
func (e *Executor) earlierResult(ctx context.Context, r *stepRun, key, why, inputsSHA string) (*wfapi.RunToolResult, *envelope.Feedback) {
	in := r.in
	var damage *envelope.Feedback
	if in.Step.ReuseFrom != "" && in.Step.Item == nil {
		var res *wfapi.RunToolResult
		if res, damage = e.reuse(in.Step, inputsSHA, key, r.stepDir, r.recDir, r.log); res != nil {
			res.Attempt, res.CacheKey = r.attempt, key
			fit(res, r.stepDir, r.recDir)
			return res, nil
		}
	}
	if damage != nil {
		return nil, damage
	}
	if in.Step.CacheTTL == 0 || e.Artifacts == nil {
		return nil, nil
	}
	if why != "" {
		return nil, &envelope.Feedback{Phase: "cache", Level: envelope.LevelInfo, Message: "not cached: " + why, Timestamp: envelope.Timestamp(envelope.Now())}
	}
	return e.fromCache(ctx, r, key)
}

// succeeded keeps a succeeded attempt: the files its data names stored
// (with a shared store, or for the cache), its result cached under key
// (when it has one), its data in the store.
func (e *Executor) succeeded(ctx context.Context, r *stepRun, m *manifest.Manifest, env envelope.Envelope, inputsSHA, key string) (*wfapi.RunToolResult, error) {
	var arts []wfapi.Artifact
	var err error
	if !e.Given {
		store := e.Artifacts != nil && (e.Artifacts.Shared || r.in.Step.CacheTTL > 0)
		arts, err = e.outputFiles(ctx, m, env.Data, r.stepDir, r.folders, store)
	}
	if caperr.CodeOf(err) == caperr.InvalidInput {
		return r.fail(envelope.NewBuilder(r.in.Step.Tool).FailErr(err, nil))
	}
	if err != nil && e.Artifacts != nil && e.Artifacts.Shared {
		return nil, err
	}
	// An entry without the files its data names would send a later hit
	// to this run's paths: not cached when they could not be stored.
	if key != "" && r.in.Step.CacheTTL > 0 && e.Artifacts != nil && err == nil {
		if fb := e.toCache(ctx, r, key, m, env, arts); fb != nil {
			env.Feedback = append(env.Feedback, *fb)
		}
	}
	res := r.succeed(env, inputsSHA)
	res.Artifacts, res.CacheKey = arts, key
	if err := e.publish(ctx, res); err != nil {
		return nil, err
	}
	return res, nil
}

// stepRun is one attempt of one step (or item).
type stepRun struct {
	in          wfapi.RunToolInput
	at          Attempt
	attempt     int32
	maxAttempts int32
	stepDir     string
	// recDir keeps the engine's records of the step (recordsFolder).
	recDir string
	began  time.Time
	log    hclog.Logger
	// lost names producers whose stored output this step found missing.
	lost []string
	// folders are the tool's write folders, held open around its run.
	folders sandbox.Folders
}

func (e *Executor) newStepRun(in wfapi.RunToolInput, at Attempt) *stepRun {
	r := &stepRun{in: in, at: at, attempt: max(at.Number, 1), maxAttempts: at.Max, began: time.Now(),
		stepDir: stepFolder(in.RunDir, in.Step), recDir: recordsFolder(in.RunDir, in.Step)}
	log := e.Logger
	if log == nil {
		log = hclog.NewNullLogger()
	}
	r.log = log.Named("step").With("workflow_id", in.WorkflowID, "step", in.Step.ID, "attempt", r.attempt)
	return r
}
