package workflows

import (
	"compress/gzip"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/capflow/capflow/internal/telemetry"
	"github.com/capflow/capflow/internal/wfapi"
	"github.com/capflow/capflow/workflows/agentrun"
	"github.com/capflow/capflow/workflows/limit"
)

// TestReplayCommittedHistories replays histories recorded from real runs
// (make record-histories). A change to PlanWorkflow that breaks
// determinism fails here before it can break running workflows. Files
// named broken-*.json were altered on purpose and must fail.
func TestReplayCommittedHistories(t *testing.T) {
	files, _ := filepath.Glob("testdata/histories/*.json")
	zipped, _ := filepath.Glob("testdata/histories/*.json.gz")
	files = append(files, zipped...)
	if len(files) < 5 {
		t.Fatalf("want the committed histories, found %d", len(files))
	}
	// A worker that traces (internal/telemetry) replays the same histories:
	// its spans never change a workflow's commands, and a replay exports
	// nothing (the spans went out when the runs ran).
	exported := tracetest.NewInMemoryExporter()
	tracing, err := telemetry.WithExporter(exported, "replay")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if spans := exported.GetSpans(); len(spans) > 0 {
			t.Errorf("replaying exported %d spans, the first %q", len(spans), spans[0].Name)
		}
	})
	var traced []interceptor.WorkerInterceptor
	for _, i := range tracing.Interceptors() {
		traced = append(traced, i)
	}
	for _, f := range files {
		for _, variant := range []struct {
			name string
			opts worker.WorkflowReplayerOptions
		}{
			// The deadlock detector times a workflow task's code (1 s): on
			// this shared 2-core machine a megabyte history under load can
			// pass that; what this test checks is determinism.
			{"", worker.WorkflowReplayerOptions{DisableDeadlockDetection: true}},
			{"/traced", worker.WorkflowReplayerOptions{Interceptors: traced, DisableDeadlockDetection: true}},
		} {
			t.Run(filepath.Base(f)+variant.name, func(t *testing.T) {
				replayOne(t, f, variant.opts)
			})
		}
	}
}

// replayOne replays file, expecting failure when it is a broken-* one.
func replayOne(t *testing.T, f string, opts worker.WorkflowReplayerOptions) {
	r, err := worker.NewWorkflowReplayerWithOptions(opts)
	if err != nil {
		t.Fatal(err)
	}
	registerWorkflows(r)
	broken := strings.HasPrefix(filepath.Base(f), "broken-")
	err = replay(r, f, broken)
	switch {
	case broken && err == nil:
		t.Fatal("an altered history replayed cleanly: the replay test cannot detect non-determinism")
	case !broken && err != nil:
		t.Fatalf("replay failed (non-deterministic change to PlanWorkflow?): %v", err)
	}
}

// registerWorkflows registers the worker's workflows on a replayer.
func registerWorkflows(r worker.WorkflowReplayer) {
	r.RegisterWorkflowWithOptions(PlanWorkflow, workflow.RegisterOptions{Name: wfapi.WorkflowType})
	r.RegisterWorkflowWithOptions(ItemsWorkflow, workflow.RegisterOptions{Name: wfapi.ItemsWorkflowType})
	r.RegisterWorkflowWithOptions(limit.Workflow, workflow.RegisterOptions{Name: wfapi.LimitWorkflowType})
	r.RegisterWorkflowWithOptions(agentrun.Workflow, workflow.RegisterOptions{Name: wfapi.AgentWorkflowType})
}

// replay replays one history under its original workflow ID (sub-plan
// child IDs derive from it), read from its first child workflow's ID:
// <id>.<step> for a sub-plan, <id>.<step>.items-N for a for_each batch.
// A replay meant to fail (quiet) logs nothing: its panic and stack would
// bury a real failure's line.
func replay(r worker.WorkflowReplayer, file string, quiet bool) error {
	fh, err := os.Open(file)
	if err != nil {
		return err
	}
	defer fh.Close()
	var in io.Reader = fh
	if strings.HasSuffix(file, ".gz") {
		// Histories of runs with large inputs are megabytes: kept gzipped.
		zr, err := gzip.NewReader(fh)
		if err != nil {
			return err
		}
		in = zr
	}
	hist, err := client.HistoryFromJSON(in, client.HistoryJSONOptions{})
	if err != nil {
		return err
	}
	id := "ReplayId"
	for _, ev := range hist.GetEvents() {
		if a := ev.GetStartChildWorkflowExecutionInitiatedEventAttributes(); a != nil {
			child := batchSuffix.ReplaceAllString(a.GetWorkflowId(), "")
			if i := strings.LastIndex(child, "."); i > 0 {
				id = child[:i]
			}
			break
		}
	}
	var logger log.Logger
	if quiet {
		logger = log.NewStructuredLogger(slog.New(slog.DiscardHandler))
	}
	return r.ReplayWorkflowHistoryWithOptions(logger, hist, worker.ReplayWorkflowHistoryOptions{OriginalExecution: workflow.Execution{ID: id, RunID: "replay"}})
}

// batchSuffix ends a for_each batch's child workflow ID.
var batchSuffix = regexp.MustCompile(`\.items-[0-9]+$`)
