package activities

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/config"
	"github.com/capflow/capflow/internal/project"
	"github.com/capflow/capflow/internal/step"
	"github.com/capflow/capflow/internal/toolrun"
	"github.com/capflow/capflow/internal/wfapi"
	"github.com/capflow/capflow/wire"
)

func newActivities(t testing.TB) (*Activities, string) {
	t.Helper()
	root := t.TempDir()
	cfg, err := config.Load(config.Options{Project: root})
	if err != nil {
		t.Fatal(err)
	}
	proj := project.New(cfg, nil, nil)
	a := &Activities{Project: proj, Logger: hclog.NewNullLogger(), Exec: &step.Executor{Project: proj, Logger: hclog.NewNullLogger(), Tool: &toolrun.Runner{}}}
	return a, root
}

// testRun is the workflow ID the test activity environment gives every
// activity: run folders derive from it.
const testRun = "default-test-workflow-id"

func env(a *Activities) *testsuite.TestActivityEnvironment {
	var s testsuite.WorkflowTestSuite
	e := s.NewTestActivityEnvironment()
	e.RegisterActivity(a)
	return e
}

// resolved is Resolve's answer for plan, run as testRun.
func resolved(t *testing.T, e *testsuite.TestActivityEnvironment, a *Activities, plan map[string]any) wfapi.ResolveResult {
	t.Helper()
	v, err := e.ExecuteActivity(a.Resolve, wfapi.ResolveInput{Plan: plan, WorkflowID: testRun})
	if err != nil {
		t.Fatal(err)
	}
	var rr wfapi.ResolveResult
	_ = v.Get(&rr)
	return rr
}

func TestResolveAndRun(t *testing.T) {
	a, root := newActivities(t)
	os.WriteFile(filepath.Join(root, "a.txt"), []byte("abc"), 0o644)
	e := env(a)
	plan := map[string]any{"name": "p", "steps": []any{
		map[string]any{"id": "sum", "capability": "file.checksum", "with": map[string]any{"path": "${inputs.file}"}},
	}, "inputs": map[string]any{"file": map[string]any{"type": "string"}}}
	v, err := e.ExecuteActivity(a.Resolve, wfapi.ResolveInput{Plan: plan, Inputs: map[string]any{"file": "a.txt"}, WorkflowID: testRun})
	if err != nil {
		t.Fatal(err)
	}
	var rr wfapi.ResolveResult
	_ = v.Get(&rr)
	if rr.Status != "ready" || len(rr.Steps) != 1 || rr.Steps[0].Tool != "file-checksum" || !strings.HasPrefix(rr.Steps[0].Digest, "sha256:") {
		t.Fatalf("%+v", rr)
	}
	if filepath.Dir(rr.RunDir) != filepath.Join(root, ".capflow/runs") {
		t.Fatalf("a workflow id must not escape runs_dir: %s", rr.RunDir)
	}
	st := rr.Steps[0]
	in := wfapi.RunToolInput{WorkflowID: testRun, RunDir: rr.RunDir, Inputs: rr.Inputs,
		Step: wfapi.StepCall{ID: st.ID, Tool: st.Tool, Version: st.Version, Digest: st.Digest, Idempotent: st.Idempotent, With: st.With}}
	v, err = e.ExecuteActivity(a.RunTool, in)
	if err != nil {
		t.Fatal(err)
	}
	var out wfapi.RunToolResult
	_ = v.Get(&out)
	if !out.Envelope.Success || out.Envelope.Data.(map[string]any)["sha256"] != "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" {
		t.Fatalf("%+v", out)
	}

	// Another run's ID is refused; a recorded folder that is not this
	// worker's gives way to it; a stored output outside the run folder is
	// never read (lost data: the producer runs again).
	_, err = e.ExecuteActivity(a.RunTool, wfapi.RunToolInput{WorkflowID: "another-run", Step: in.Step, Inputs: in.Inputs})
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || app.Type() != string(caperr.InvalidInput) || !app.NonRetryable() {
		t.Fatalf("another run: %v", err)
	}
	v, err = e.ExecuteActivity(a.RunTool, wfapi.RunToolInput{WorkflowID: testRun, RunDir: "/", Step: in.Step, Inputs: in.Inputs})
	if err != nil {
		t.Fatal(err)
	}
	_ = v.Get(&out)
	if rel, _ := filepath.Rel(rr.RunDir, out.EnvelopeFile); out.EnvelopeFile == "" || strings.HasPrefix(rel, "..") {
		t.Fatalf("a recorded folder / was used: %s", out.EnvelopeFile)
	}
	_, err = e.ExecuteActivity(a.RunTool, wfapi.RunToolInput{WorkflowID: testRun, Step: in.Step, Inputs: in.Inputs,
		Deps: map[string]wfapi.StepOutcome{"x": {Success: true, DataFile: "/etc/passwd"}}})
	var details wfapi.RunToolResult
	if !errors.As(err, &app) || app.Type() != string(caperr.ObservabilityError) || app.Details(&details) != nil || len(details.LostData) != 1 {
		t.Fatalf("a foreign stored output: %v %+v", err, details)
	}
	if _, err := os.Stat("/steps"); err == nil {
		t.Fatal("a step folder was made under /")
	}

	// A digest that no longer matches: refused, not retried.
	in.Step.Digest = "sha256:0000"
	_, err = e.ExecuteActivity(a.RunTool, in)
	if !errors.As(err, &app) || app.Type() != "CONFIG_ERROR" || !app.NonRetryable() || !strings.Contains(app.Message(), "changed since the plan was resolved") {
		t.Fatalf("changed manifest: %v", err)
	}
}

func TestLargeOutputsGoToFiles(t *testing.T) {
	a, root := newActivities(t)
	big := strings.Repeat("x", 300<<10)
	os.WriteFile(filepath.Join(root, "big.txt"), []byte(big), 0o644)
	e := env(a)
	reg, _ := a.registry()
	m := reg.Tool("file-read", "")
	runDir := filepath.Join(root, ".capflow/runs", testRun)
	v, err := e.ExecuteActivity(a.RunTool, wfapi.RunToolInput{WorkflowID: testRun, RunDir: runDir,
		Step: wfapi.StepCall{ID: "read", Tool: m.Name, Version: m.Version, Digest: m.Digest, Idempotent: true, With: map[string]any{"path": "big.txt"}}})
	if err != nil {
		t.Fatal(err)
	}
	var out wfapi.RunToolResult
	_ = v.Get(&out)
	if out.DataFile == "" || out.Envelope.Data.(map[string]any)["data_file"] != out.DataFile {
		t.Fatalf("large data not offloaded: %+v", out.Envelope.Data)
	}
	// A later step reads it back through its reference.
	w := reg.Tool("file-write", "")
	_, err = e.ExecuteActivity(a.RunTool, wfapi.RunToolInput{WorkflowID: testRun, RunDir: runDir,
		Deps: map[string]wfapi.StepOutcome{"read": {Success: true, DataFile: out.DataFile}},
		Step: wfapi.StepCall{ID: "write", Tool: w.Name, Version: w.Version, Digest: w.Digest, With: map[string]any{"path": "copy.txt", "content": "${steps.read.data.content}"}}})
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "copy.txt")); len(b) != len(big) {
		t.Fatalf("copy has %d bytes", len(b))
	}
	if len(out.DataSHA256) != 64 {
		t.Fatalf("stored output without a digest: %q", out.DataSHA256)
	}
	// Altered or missing: OBSERVABILITY_ERROR naming the file, and the
	// producer named for the workflow to re-run.
	os.WriteFile(out.DataFile, []byte(`{"content":"forged"}`), 0o644)
	for _, why := range []string{"was altered", "is missing"} {
		_, err = e.ExecuteActivity(a.RunTool, wfapi.RunToolInput{WorkflowID: testRun, RunDir: runDir,
			Deps: map[string]wfapi.StepOutcome{"read": {Success: true, DataFile: out.DataFile, DataSHA256: out.DataSHA256}},
			Step: wfapi.StepCall{ID: "write2", Tool: w.Name, Version: w.Version, Digest: w.Digest, With: map[string]any{"path": "copy2.txt", "content": "${steps.read.data.content}"}}})
		var app *temporal.ApplicationError
		var details wfapi.RunToolResult
		if !errors.As(err, &app) || app.Type() != string(caperr.ObservabilityError) || !strings.Contains(app.Error(), why) || !strings.Contains(app.Error(), out.DataFile) {
			t.Fatalf("%s: want OBSERVABILITY_ERROR naming the file, got %v", why, err)
		}
		if app.Details(&details) != nil || len(details.LostData) != 1 || details.LostData[0] != "read" {
			t.Fatalf("%s: lost data not reported: %+v", why, details)
		}
		os.Remove(out.DataFile)
	}
	if _, err := os.Stat(filepath.Join(root, "copy2.txt")); err == nil {
		t.Fatal("a step ran on forged input")
	}
}

func TestFinalizeWritesReports(t *testing.T) {
	a, _ := newActivities(t)
	e := env(a)
	res := wfapi.Result{Status: "partial-complete", Plan: "p", WorkflowID: testRun, Message: "gaps",
		Gaps: []wire.Gap{{StepID: "dl", MissingCapability: "youtube.download", Reason: "no_capability_match", Priority: "high", ProposedToolName: "youtube-download"}}}
	v, err := e.ExecuteActivity(a.Finalize, wfapi.FinalizeInput{Result: res})
	if err != nil {
		t.Fatal(err)
	}
	var paths wfapi.Finalized
	_ = v.Get(&paths)
	md, _ := os.ReadFile(paths.Markdown)
	js, _ := os.ReadFile(paths.JSON)
	if !strings.Contains(string(md), "partial-complete") || !strings.Contains(string(md), "youtube-download") || !strings.Contains(string(js), `"status": "partial-complete"`) {
		t.Fatalf("md:\n%s\njson:\n%s", md, js)
	}
}

func TestResolveInvalidPlan(t *testing.T) {
	a, _ := newActivities(t)
	v, err := env(a).ExecuteActivity(a.Resolve, wfapi.ResolveInput{Plan: map[string]any{"name": "bad", "steps": []any{map[string]any{"id": "A B"}}}, WorkflowID: testRun})
	if err != nil {
		t.Fatal(err)
	}
	var rr wfapi.ResolveResult
	_ = v.Get(&rr)
	if rr.Status != "invalid" || len(rr.Problems) < 2 {
		t.Fatalf("%+v", rr)
	}
}

// An item whose list is stored by reference reads it through the worker's
// cache: the second item does not read the file again.
func TestItemFromAStoredList(t *testing.T) {
	a, root := newActivities(t)
	e := env(a)
	reg, _ := a.registry()
	m := reg.Tool("file-checksum", "")
	os.WriteFile(filepath.Join(root, "a.txt"), []byte("A"), 0o644)
	os.WriteFile(filepath.Join(root, "b.txt"), []byte("B"), 0o644)
	raw := []byte(`{"files":["a.txt","b.txt"]}`)
	list := filepath.Join(root, ".capflow/runs", testRun, "steps/find/data.json")
	os.MkdirAll(filepath.Dir(list), 0o755)
	os.WriteFile(list, raw, 0o644)
	sum := sha256.Sum256(raw)
	deps := map[string]wfapi.StepOutcome{"find": {Success: true, DataFile: list, DataSHA256: hex.EncodeToString(sum[:])}}
	run := func(index int) (string, error) {
		v, err := e.ExecuteActivity(a.RunTool, wfapi.RunToolInput{WorkflowID: testRun, RunDir: filepath.Join(root, ".capflow/runs", testRun), Deps: deps,
			Step: wfapi.StepCall{ID: "sum", Tool: m.Name, Version: m.Version, Digest: m.Digest, Idempotent: true, With: map[string]any{"path": "${item}"},
				Item: &wfapi.ItemCall{ForEach: "${steps.find.data.files}", ItemName: "item", Index: index}}})
		if err != nil {
			return "", err
		}
		var out wfapi.RunToolResult
		_ = v.Get(&out)
		return out.Envelope.Data.(map[string]any)["path"].(string), nil
	}
	if p, err := run(0); err != nil || filepath.Base(p) != "a.txt" {
		t.Fatalf("item 0: %v %v", p, err)
	}
	os.Remove(list) // cached: the next item needs no file
	if p, err := run(1); err != nil || filepath.Base(p) != "b.txt" {
		t.Fatalf("item 1: %v %v", p, err)
	}
}

// The resolved steps travel in the Resolve result when small, packed when
// only their packed form is small, and otherwise by reference alone (the
// workflow loads pages); every form holds the same steps as resolved.json.
func TestResolveCarriesStepsBySize(t *testing.T) {
	steps := func(n int, with func(i int) map[string]any) map[string]any {
		list := make([]any, n)
		for i := range list {
			list[i] = map[string]any{"id": fmt.Sprintf("s%05d", i), "capability": "text.render", "with": with(i)}
		}
		return map[string]any{"name": "sizes", "steps": list}
	}
	same := func(int) map[string]any { return map[string]any{"template": "ok"} }
	// Each step's own with is large: packing shares nothing of it.
	own := func(i int) map[string]any {
		return map[string]any{"template": fmt.Sprintf("%d %s", i, strings.Repeat("x", 300))}
	}
	for _, c := range []struct {
		name           string
		plan           map[string]any
		inline, packed bool
	}{
		{"small", steps(3, same), true, false},
		{"many similar steps", steps(1500, same), false, true},
		// Packed, they would still make the result too large.
		{"too many similar steps", steps(8000, same), false, false},
		{"large steps", steps(1000, own), false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, _ := newActivities(t)
			v, err := env(a).ExecuteActivity(a.Resolve, wfapi.ResolveInput{Plan: c.plan})
			if err != nil {
				t.Fatal(err)
			}
			var rr wfapi.ResolveResult
			_ = v.Get(&rr)
			st, err := a.readStoredSteps(*rr.StepsRef)
			if err != nil {
				t.Fatal(err)
			}
			n := len(c.plan["steps"].([]any))
			if len(st.Steps) != n || rr.StepsRef.Count != n {
				t.Fatalf("stored %d steps (ref counts %d), want %d", len(st.Steps), rr.StepsRef.Count, n)
			}
			if got := len(rr.Steps) > 0; got != c.inline {
				t.Fatalf("steps inline: %v, want %v", got, c.inline)
			}
			if got := rr.PackedSteps != nil; got != c.packed {
				t.Fatalf("steps packed: %v, want %v", got, c.packed)
			}
			if rr.PlanValue != nil {
				t.Fatal("the result repeats the plan the input holds")
			}
			carried := rr.Steps
			if rr.PackedSteps != nil {
				if carried, err = rr.PackedSteps.Unpack(); err != nil {
					t.Fatal(err)
				}
				if raw, _ := json.Marshal(rr); len(raw) > wfapi.InlineStepsBytes {
					t.Fatalf("the Resolve result is %d bytes", len(raw))
				}
			}
			if carried != nil && !reflect.DeepEqual(carried, st.Steps) {
				t.Fatal("the carried steps differ from the stored ones")
			}
			// A workflow that carries its steps gets steps that travel as
			// they are without a file; the others are stored as before.
			a, _ = newActivities(t) // a run folder of its own
			v, err = env(a).ExecuteActivity(a.Resolve, wfapi.ResolveInput{Plan: c.plan, CarrySteps: true})
			if err != nil {
				t.Fatal(err)
			}
			var cr wfapi.ResolveResult
			_ = v.Get(&cr)
			_, statErr := os.Stat(filepath.Join(cr.RunDir, "resolved.json"))
			if stored := cr.StepsRef != nil; stored == c.inline || stored != (statErr == nil) {
				t.Fatalf("carried: stored %v (ref %+v, file: %v), want %v", stored, cr.StepsRef, statErr, !c.inline)
			}
			if c.inline && !reflect.DeepEqual(cr.Steps, st.Steps) {
				t.Fatal("the carried steps differ from the stored ones")
			}
			if _, err := os.Stat(cr.RunDir); c.inline && !os.IsNotExist(err) {
				t.Fatalf("Resolve made the run's folder for nothing: %v", err)
			}
		})
	}
}

// A RunTool attempt naming another host than this worker's (a local or an
// eager one) is refused before anything runs; one naming this worker's
// host runs. A regular Finalize is not refused: it runs wherever the
// workflow sent it (a lost host's run ends elsewhere).
func TestRunToolOnAnotherHostIsRefused(t *testing.T) {
	a, root := newActivities(t)
	a.Exec.HostQueue = "capflow@here"
	spans := tracetest.NewSpanRecorder()
	a.Tracer = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans)).Tracer("test")
	os.WriteFile(filepath.Join(root, "a.txt"), []byte("abc"), 0o644)
	e := env(a)
	plan := map[string]any{"name": "p", "steps": []any{
		map[string]any{"id": "sum", "capability": "file.checksum", "with": map[string]any{"path": "a.txt"}}}}
	rr := resolved(t, e, a, plan)
	st := rr.Steps[0]
	in := wfapi.RunToolInput{WorkflowID: testRun, RunDir: rr.RunDir, Host: "capflow@elsewhere",
		Step: wfapi.StepCall{ID: st.ID, Tool: st.Tool, Version: st.Version, Digest: st.Digest, Idempotent: st.Idempotent, With: st.With}}
	_, err := e.ExecuteActivity(a.RunTool, in)
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || app.Type() != wfapi.ErrWrongHost || !app.NonRetryable() {
		t.Fatalf("another host's attempt: %v", err)
	}
	if _, err := os.Stat(filepath.Join(rr.RunDir, "steps")); err == nil {
		t.Fatal("the refused attempt made a step folder")
	}
	if n := len(spans.Ended()); n != 0 {
		t.Fatalf("the refused attempt was traced as an attempt (%d spans): the tool never ran", n)
	}
	in.Host = a.Exec.HostQueue
	if _, err := e.ExecuteActivity(a.RunTool, in); err != nil {
		t.Fatalf("this host's attempt: %v", err)
	}
	if ended := spans.Ended(); len(ended) != 1 || ended[0].Name() != "sum attempt 1" {
		t.Fatalf("this host's attempt: spans %v", ended)
	}
	rr.HostQueue = "capflow@elsewhere"
	if _, err := e.ExecuteActivity(a.Finalize, wfapi.FinalizeInput{Resolved: &rr, Result: wfapi.Result{Status: wfapi.StatusPassed}}); err != nil {
		t.Fatalf("a regular Finalize was refused: %v", err)
	}
}
