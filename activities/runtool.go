package activities

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/hashicorp/go-hclog"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/envelope"
	"github.com/capflow/capflow/internal/manifest"
	"github.com/capflow/capflow/internal/plan"
	"github.com/capflow/capflow/internal/toolrun"
	"github.com/capflow/capflow/internal/wfapi"
)

// MaxInlineData is the largest envelope data carried in history; larger
// data is written to <run>/<step>/data.json and passed by reference, so no
// payload nears Temporal's limits (2 MB hard, 512 KB warning).
const MaxInlineData = 256 << 10

// MaxStoredData bounds a stored output a consumer will read back.
const MaxStoredData = 256 << 20

// runTool runs one attempt of a step. A failed tool becomes an
// ApplicationError whose type is the contract code (non-retryable codes
// are final) and whose details carry the envelope.
func (a *Activities) runTool(ctx context.Context, in wfapi.RunToolInput) (*wfapi.RunToolResult, error) {
	if err := a.wrongHost(ctx, in.Host); err != nil {
		return nil, err
	}
	// Beats from the start to the end: fetching inputs from the store,
	// digesting input files, storing outputs and the cache entry can take
	// longer than a heartbeat timeout too (command tools get one by
	// default, preflight.CommandHeartbeat).
	hb := startBeats(ctx, activity.GetInfo(ctx).Attempt+in.AttemptsBefore)
	defer hb.stop()
	// Before anything is read or written: the folder is this run's, and
	// every stored output it names lies in it.
	runDir, err := a.runFolder(ctx, in.WorkflowID, in.RunDir)
	if err != nil {
		return nil, appError(err)
	}
	in.RunDir = runDir
	if err := a.unspill(ctx, runDir, &in); err != nil {
		return nil, appError(err)
	}
	if err := a.localize(ctx, &in); err != nil {
		return nil, appError(err)
	}
	r := a.newStepRun(ctx, in)
	b := envelope.NewBuilder(in.Step.Tool)
	m, err := a.manifest(in.Step.Tool, in.Step.Version, in.Step.Digest)
	if err != nil {
		return r.fail(b.FailErr(err, nil))
	}
	inputs, err := r.evalInputs(a)
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
	if in.Step.Idempotent {
		key, why = a.cacheKey(m, rawIn, inputs)
	}
	res, note := a.earlierResult(ctx, r, key, why, inputsSHA)
	if res != nil {
		return res, nil
	}
	if !in.Step.Idempotent {
		if err := r.claimStart(activity.GetInfo(ctx).WorkflowExecution.RunID); err != nil {
			return r.fail(b.FailErr(err, nil))
		}
	}
	inMap, _ := inputs.(map[string]any)
	mode, err := a.sandboxMode(m)
	if err != nil {
		return r.fail(b.FailErr(err, nil))
	}
	ctx, ride := a.rideOutOutages(ctx, hb.details)
	defer ride()
	env := a.Runner.Run(ctx, toolrun.Request{
		Manifest: m, Inputs: inMap, RunID: in.WorkflowID, StepID: in.Step.ID, Attempt: int(r.attempt),
		Root: a.Project.Root(), RunDir: in.RunDir, Workdir: r.stepDir,
		Secrets:    toolrun.SecretsFromEnv(m, os.LookupEnv),
		OnFeedback: hb.feedback, OnStderr: hb.stderr, Sandbox: mode,
	})
	if w := nearTimeout(time.Since(r.began), activity.GetInfo(ctx).StartToCloseTimeout); w != nil {
		env.Feedback = append(env.Feedback, *w)
	}
	if note != nil {
		env.Feedback = append(env.Feedback, *note)
	}
	if !env.Success {
		if ctx.Err() != nil && env.Error != nil && env.Error.Code == caperr.Cancelled {
			return nil, temporal.NewCanceledError(&wfapi.RunToolResult{Attempt: r.attempt})
		}
		return r.fail(env)
	}
	return a.succeeded(ctx, r, m, env, inputsSHA, key)
}

// earlierResult is a result that stands for this attempt: a rerun's
// reuse of its earlier run, or the cache's (key and why: cacheKey's).
// note says why the cache had none, when the step asked it.
func (a *Activities) earlierResult(ctx context.Context, r *stepRun, key, why, inputsSHA string) (*wfapi.RunToolResult, *envelope.Feedback) {
	in := r.in
	if in.Step.ReuseFrom != "" && in.Step.Item == nil {
		if res := a.reuse(in.Step, inputsSHA, key, r.stepDir, r.log); res != nil {
			res.Attempt, res.CacheKey = r.attempt, key
			fit(res, r.stepDir)
			return res, nil
		}
	}
	if in.Step.CacheTTL == 0 || a.Artifacts == nil {
		return nil, nil
	}
	if why != "" {
		return nil, &envelope.Feedback{Phase: "cache", Level: envelope.LevelInfo, Message: "not cached: " + why, Timestamp: envelope.Timestamp(envelope.Now())}
	}
	return a.fromCache(ctx, r, key)
}

// succeeded keeps a succeeded attempt: the files its data names stored
// (with a shared store, or for the cache), its result cached under key
// (when it has one), its data in the store.
func (a *Activities) succeeded(ctx context.Context, r *stepRun, m *manifest.Manifest, env envelope.Envelope, inputsSHA, key string) (*wfapi.RunToolResult, error) {
	store := a.Artifacts != nil && (a.Artifacts.Shared || r.in.Step.CacheTTL > 0)
	arts, err := a.outputFiles(ctx, m, env.Data, r.stepDir, store)
	if caperr.CodeOf(err) == caperr.InvalidInput {
		return r.fail(envelope.NewBuilder(r.in.Step.Tool).FailErr(err, nil))
	}
	if err != nil && a.Artifacts != nil && a.Artifacts.Shared {
		return nil, appError(err)
	}
	// An entry without the files its data names would send a later hit
	// to this run's paths: not cached when they could not be stored.
	if key != "" && r.in.Step.CacheTTL > 0 && a.Artifacts != nil && err == nil {
		if fb := a.toCache(ctx, r, key, m, env, arts); fb != nil {
			env.Feedback = append(env.Feedback, *fb)
		}
	}
	res := r.succeed(env, inputsSHA)
	res.Artifacts, res.CacheKey = arts, key
	if err := a.publish(ctx, res); err != nil {
		return nil, appError(err)
	}
	return res, nil
}

// stepRun is one attempt of one step (or item) in RunTool.
type stepRun struct {
	in          wfapi.RunToolInput
	attempt     int32 // counting the attempts it made as a local activity
	maxAttempts int32
	stepDir     string
	began       time.Time
	log         hclog.Logger
	// lost names producers whose stored output this step found missing.
	lost []string
}

func (a *Activities) newStepRun(ctx context.Context, in wfapi.RunToolInput) *stepRun {
	info := activity.GetInfo(ctx)
	// Attempts a step made as a local activity before it continued as a
	// regular one count too: the tool and the attempt story see one series.
	r := &stepRun{in: in, attempt: info.Attempt + in.AttemptsBefore, began: time.Now(), stepDir: stepFolder(in.RunDir, in.Step)}
	if info.RetryPolicy != nil {
		r.maxAttempts = info.RetryPolicy.MaximumAttempts + in.AttemptsBefore
	}
	r.log = a.Logger.Named("runtool").With("workflow_id", in.WorkflowID, "step", in.Step.ID, "attempt", r.attempt)
	return r
}

// evalInputs evaluates the step's with. References are evaluated here,
// not in the workflow: large outputs of earlier steps live in files, which
// workflow code may not read. An item whose list is stored by reference
// reads that list through the worker's cache, so only what the step's
// with references is loaded.
func (r *stepRun) evalInputs(a *Activities) (any, error) {
	in, step := r.in, r.in.Step
	if id, path := a.foreignOutcome(in.WorkflowID, in.Deps); id != "" {
		// Another host's file (a run that moved) or a forged path: never
		// read; the producer runs again here when it may.
		r.lost = append(r.lost, id)
		return nil, caperr.New(caperr.ObservabilityError, "the stored output of step %s, %s, is not in this run's folder", id, path)
	}
	deps := in.Deps
	if it := step.Item; it != nil && !it.HasValue {
		deps = referencedBy(step.With, in.Deps)
	}
	scope, lostID, err := loadScope(in.Inputs, deps)
	if err != nil {
		r.lose(lostID)
		return nil, err
	}
	movedFiles(scope, deps)
	if it := step.Item; it != nil {
		item := it.Value
		if !it.HasValue {
			if item, lostID, err = a.itemOf(in.Inputs, referencedBy(it.ForEach, in.Deps), it.ForEach, it.Index); err != nil {
				r.lose(lostID)
				return nil, err
			}
		}
		scope.Item, scope.ItemName, scope.Index = item, it.ItemName, it.Index
	}
	inputs, err := scope.Eval(step.With)
	if err != nil {
		return nil, caperr.New(caperr.InvalidInput, "cannot evaluate the step's inputs: %s", err.Error())
	}
	return inputs, nil
}

func (r *stepRun) lose(id string) {
	if id != "" {
		r.lost = append(r.lost, id)
	}
}

// fail ends the attempt with the tool's failed envelope: recorded in the
// step folder, cut to fit history, and returned as an ApplicationError of
// its code (retryable only when the code is and the tool is idempotent).
func (r *stepRun) fail(env envelope.Envelope) (*wfapi.RunToolResult, error) {
	code := caperr.ToolFailure
	if env.Error != nil {
		code = env.Error.Code
	}
	why := notRetried(code, r.in.Step.Idempotent, r.attempt, r.maxAttempts)
	if why == "" && notRetryable(env.Error) && r.attempt < r.maxAttempts {
		why = "not retried: the failure is marked final (retryable: false)"
	}
	if why != "" {
		env.Message += " (" + why + ")"
		env.Feedback = append(env.Feedback, envelope.Feedback{Phase: "retry", Level: envelope.LevelInfo, Message: why, Timestamp: envelope.Timestamp(envelope.Now())})
	}
	item := r.in.Step.Item != nil
	if !item {
		if story := attemptStory(r.stepDir, r.attempt, r.maxAttempts, r.began, fmt.Sprintf("failed (%s)", code)); story != nil {
			env.Feedback = append(env.Feedback, *story)
		}
		recordAttempt(r.stepDir, attemptRecord{Attempt: r.attempt, Code: code, Message: env.Message, Started: r.began, Ended: time.Now()})
	}
	res := &wfapi.RunToolResult{Envelope: env, Attempt: r.attempt, LostData: r.lost}
	if !item {
		res.EnvelopeFile = storeEnvelope(r.stepDir, env)
	}
	fit(res, r.stepDir)
	r.log.Info("step failed", "code", code, "idempotent", r.in.Step.Idempotent, "message", res.Envelope.Message)
	return nil, StepFailed(code, r.in.Step.Idempotent, res)
}

// succeed keeps a succeeded attempt's envelope: its data by reference when
// large, the whole envelope in the run's journal (or, when it must be cut,
// a file beside the step's folder: envelopes.go), the result cut to fit.
func (r *stepRun) succeed(env envelope.Envelope, inputsSHA string) *wfapi.RunToolResult {
	res := &wfapi.RunToolResult{Envelope: env, Attempt: r.attempt, InputsSHA256: inputsSHA}
	if raw, _ := json.Marshal(env.Data); len(raw) > MaxInlineData {
		storeData(res, r.stepDir, raw)
	}
	if r.in.Step.Item == nil {
		if story := attemptStory(r.stepDir, r.attempt, r.maxAttempts, r.began, "succeeded"); story != nil {
			res.Envelope.Feedback = append(res.Envelope.Feedback, *story)
		}
		if _, cut := res.Envelope.Bounded(""); cut {
			res.EnvelopeFile = storeEnvelope(r.stepDir, res.Envelope)
		} else {
			res.EnvelopeFile = appendJournal(r.in.RunDir, r.in.Step.ID, res.Envelope)
		}
	}
	fit(res, r.stepDir)
	r.log.Debug("step succeeded", "duration_ms", env.DurationMS)
	return res
}

// MaxResultPayload bounds a step's result in history: past it, its data
// travels by reference whatever its size (docs/limits.md).
const MaxResultPayload = 384 << 10

// storeData writes a step's data to <step>/data.json and puts a reference
// in its place.
func storeData(res *wfapi.RunToolResult, stepDir string, raw []byte) {
	if os.MkdirAll(stepDir, 0o755) != nil {
		return
	}
	p := filepath.Join(stepDir, "data.json")
	if writeAtomic(p, raw) != nil {
		return
	}
	sum := sha256.Sum256(raw)
	res.DataFile, res.DataSHA256 = p, hex.EncodeToString(sum[:])
	res.Envelope.Data = map[string]any{"data_file": p, "bytes": len(raw)}
	res.Envelope.Feedback = append(res.Envelope.Feedback, envelope.Feedback{Phase: "output", Level: envelope.LevelInfo,
		Message: fmt.Sprintf("data (%d bytes) stored in %s and passed by reference", len(raw), p), Timestamp: envelope.Timestamp(envelope.Now())})
}

// fit bounds what a step's result carries into history, whatever the
// tool printed: the envelope cut to its limits (the whole one is kept in
// the step folder), then its data by reference when the result is still
// past MaxResultPayload.
func fit(res *wfapi.RunToolResult, stepDir string) {
	bounded, cut := res.Envelope.Bounded(res.EnvelopeFile)
	if cut && res.EnvelopeFile == "" {
		// An item keeps its envelope only when it had to be cut.
		res.EnvelopeFile = storeEnvelope(stepDir, res.Envelope)
		bounded, _ = res.Envelope.Bounded(res.EnvelopeFile)
	}
	res.Envelope = bounded
	if res.DataFile == "" && res.Envelope.Data != nil && res.Envelope.Size() > MaxResultPayload {
		if raw, err := json.Marshal(res.Envelope.Data); err == nil {
			storeData(res, stepDir, raw)
			res.Envelope, _ = res.Envelope.Bounded(res.EnvelopeFile)
		}
	}
	// JSON escapes (<, >, &, control bytes) can grow text sixfold: keep
	// the latest feedback entries until the encoded envelope fits.
	for fb := res.Envelope.Feedback; len(fb) > 1 && res.Envelope.Size() > MaxResultPayload; fb = res.Envelope.Feedback {
		res.Envelope.Feedback = fb[len(fb)/2:]
	}
}

// EnvelopeSuffix names the file beside a step's folder that keeps its
// envelope (<run>/steps/<id>.envelope.json): the report reads it there
// when the workflow left it out. Beside, not in: a builtin step that
// touches no file has no folder, and one less folder a step is one of a
// fast step's largest costs.
const EnvelopeSuffix = ".envelope.json"

// envelopePath is where the envelope of the step (or item) whose folder
// is stepDir is kept.
func envelopePath(stepDir string) string { return filepath.Clean(stepDir) + EnvelopeSuffix }

// listOf evaluates a for_each source to its list.
func listOf(scope plan.Scope, src any) ([]any, error) {
	v, err := scope.Eval(src)
	if err != nil {
		return nil, caperr.New(caperr.InvalidInput, "for_each: %v", err)
	}
	list, ok := v.([]any)
	if !ok {
		return nil, caperr.New(caperr.InvalidInput, "for_each: the value is a %T, not a list", v)
	}
	return list, nil
}

// itemOf returns element index of a for_each list. Lists read from stored
// outputs are cached per worker, keyed by the digests of what they read:
// ten thousand items must not parse the same file ten thousand times.
func (a *Activities) itemOf(inputs map[string]any, deps map[string]wfapi.StepOutcome, src any, index int) (any, string, error) {
	key, _ := json.Marshal(src)
	for _, id := range slices.Sorted(maps.Keys(deps)) {
		key = append(key, []byte("|"+id+":"+deps[id].DataSHA256)...)
	}
	a.mu.Lock()
	list, ok := a.lists[string(key)]
	a.mu.Unlock()
	if !ok {
		scope, lostID, err := loadScope(inputs, deps)
		if err != nil {
			return nil, lostID, err
		}
		if list, err = listOf(scope, src); err != nil {
			return nil, "", err
		}
		a.mu.Lock()
		if a.lists == nil || len(a.lists) > 16 {
			a.lists = map[string][]any{}
		}
		a.lists[string(key)] = list
		a.mu.Unlock()
	}
	if index < 0 || index >= len(list) {
		return nil, "", caperr.New(caperr.InvalidInput, "for_each: item %d of a %d-item list", index, len(list))
	}
	return list[index], "", nil
}
