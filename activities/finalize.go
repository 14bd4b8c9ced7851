package activities

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/plan"
	"github.com/capflow/capflow/internal/report"
	"github.com/capflow/capflow/internal/runfolder"
	"github.com/capflow/capflow/internal/runtimekit"
	"github.com/capflow/capflow/internal/step"
	"github.com/capflow/capflow/internal/wfapi"
	"github.com/capflow/capflow/internal/whatnext"
)

// Finalize writes report.json and report.md into the run's folder. What
// the workflow left out to keep its payloads small is read back here: the
// resolution and steps stored at Resolve, the steps of earlier segments
// (Checkpoint), the envelopes stored by RunTool.
func (a *Activities) Finalize(ctx context.Context, in wfapi.FinalizeInput) (*wfapi.Finalized, error) {
	if in.Resolved != nil && in.Resolved.RunDir != "" {
		if err := a.elsewhere(ctx, in.Resolved.HostQueue, true); err != nil {
			return nil, err
		}
	}
	recorded := ""
	if in.Resolved != nil {
		recorded = in.Resolved.RunDir
	}
	dir, err := a.runFolder(ctx, in.Result.WorkflowID, recorded)
	if err != nil {
		return nil, appError(err)
	}
	a.dropForeignFiles(&in)
	if err := runfolder.Make(dir); err != nil {
		return nil, appError(caperr.As(err, caperr.ObservabilityError))
	}
	paths := &wfapi.ReportPaths{JSON: filepath.Join(dir, "report.json"), Markdown: filepath.Join(dir, "report.md")}
	res := in.Result
	rr, err := a.complete(ctx, in, dir, &res)
	if err != nil {
		// What is stored elsewhere (a lost host's folder) is missing: the
		// report is still written, with what the workflow knows.
		a.Logger.Warn("report incomplete", "workflow_id", in.Result.WorkflowID, "error", err)
		res.Message += " (report incomplete: " + err.Error() + ")"
		rr = in.Resolved
	}
	if rr != nil && len(rr.Outputs) > 0 {
		res.Outputs = outputs(rr, &res)
	}
	res.Report = *paths
	res.Next = whatnext.OfWith(&res, withOf(rr))
	// The run's trace, when the worker traces: this activity's span is in it.
	if sc := trace.SpanContextFromContext(ctx); sc.HasTraceID() {
		res.TraceID = sc.TraceID().String()
	}
	doc := report.Document{Result: res, Resolved: rr, Cleanup: a.cleanup(dir), Transitions: step.Transitions(dir, res.Steps)}
	if err := runfolder.WriteJSON(paths.JSON, doc, len(res.Steps) <= report.IndentedSteps); err != nil {
		return nil, appError(caperr.As(err, caperr.ObservabilityError))
	}
	if err := runfolder.WriteAtomic(paths.Markdown, []byte(report.Markdown(doc))); err != nil {
		return nil, appError(caperr.As(err, caperr.ObservabilityError))
	}
	a.storeReport(ctx, in.Result.WorkflowID, paths)
	// What to do next, made here from every step: the result a large run
	// trims keeps no failed step's envelope to make it from (the first
	// MaxNext; the report has them all).
	out := wfapi.Finalized{ReportPaths: *paths, Outputs: res.Outputs, TraceID: res.TraceID, Next: res.Next[:min(len(res.Next), wfapi.MaxNext)]}
	if in.Segments > 0 {
		// The workflow knows only its last segment in full: the result's
		// steps come from here, trimmed as the workflow would.
		t := res
		t.Steps = slices.Clone(res.Steps)
		wfapi.Trim(&t, wfapi.MaxResultBytes)
		out.Steps = &wfapi.StepsAnswer{Steps: t.Steps, Counts: t.StepCounts, Omitted: t.StepsOmitted}
	}
	return &out, nil
}

// storeReport puts the run's report into a shared artifact store, where a
// console or CLI on another host reads it (project.RunReport). A failure is
// a warning: the report is in the run's folder.
func (a *Activities) storeReport(ctx context.Context, id string, paths *wfapi.ReportPaths) {
	if a.Exec.Artifacts == nil || !a.Exec.Artifacts.Shared {
		return
	}
	for _, file := range []string{paths.JSON, paths.Markdown} {
		raw, err := os.ReadFile(file)
		if err == nil {
			err = a.Exec.Artifacts.PutRecord(ctx, report.RecordName(id, filepath.Base(file)), raw)
		}
		if err != nil {
			a.Logger.Warn("report not stored", "workflow_id", id, "file", file, "error", err)
		}
	}
}

// cleanup stops every process the run still owns, whatever its status
// (docs/runtime.md); a process whose ownership cannot be verified is left
// alone and listed.
func (a *Activities) cleanup(runDir string) *report.Cleanup {
	reg, err := runtimekit.ReadRegistry(runDir)
	if err != nil {
		// The record is unreadable: what the run started is still found,
		// by the token each of its servers carries, and the report says so.
		stopped := runtimekit.Sweep(runDir, 5*time.Second)
		a.Logger.Warn("cleanup", "run_dir", runDir, "error", err, "stopped", stopped)
		return &report.Cleanup{Stopped: append([]int{}, stopped...), Skipped: []report.CleanupSkipped{},
			Note: fmt.Sprintf("%v; the run's processes were found by their ownership token instead (%d stopped)", err, len(stopped))}
	}
	if len(reg.Processes) == 0 {
		return nil
	}
	res, err := runtimekit.Stop(runDir, "", 5*time.Second)
	if err != nil {
		a.Logger.Warn("cleanup", "run_dir", runDir, "error", err)
	}
	c := &report.Cleanup{Stopped: res.Stopped, Skipped: []report.CleanupSkipped{}}
	for _, sk := range res.Skipped {
		if !strings.Contains(sk.Reason, "is gone") {
			c.Skipped = append(c.Skipped, report.CleanupSkipped{PID: sk.PID, Name: sk.Name, Reason: sk.Reason})
		}
	}
	if len(c.Skipped) > 0 {
		// A record that does not verify (edited to name another process)
		// is left alone, but the run's real servers still carry its token:
		// they are found by it and stopped (the hostile audit's M2).
		swept := runtimekit.Sweep(runDir, 5*time.Second)
		c.Stopped = append(c.Stopped, swept...)
		c.Note = fmt.Sprintf("%d record(s) did not verify and were left alone; the run's processes were found by their ownership token instead (%d stopped)", len(c.Skipped), len(swept))
	}
	return c
}

// complete fills in what the workflow left out of the finalize input:
// the stored resolution, earlier segments' steps, stored envelopes.
func (a *Activities) complete(ctx context.Context, in wfapi.FinalizeInput, dir string, res *wfapi.Result) (*wfapi.ResolveResult, error) {
	rr := in.Resolved
	if om := res.Omitted; om != nil {
		var full wfapi.Preflight
		err := a.Exec.InRun(in.Result.WorkflowID, om.File)
		var raw []byte
		if err == nil {
			raw, err = os.ReadFile(om.File)
		}
		if err == nil {
			err = json.Unmarshal(raw, &full)
		}
		if err != nil {
			return nil, fmt.Errorf("the run's gaps and problems are unreadable: %v", err)
		}
		res.Gaps, res.Problems = full.Gaps, full.Problems
		if res.Policy != nil {
			p := *res.Policy
			p.Violations = full.Violations
			res.Policy = &p
		}
		if rr != nil {
			c := *rr
			c.Gaps, c.Problems, c.Policy = res.Gaps, res.Problems, res.Policy
			rr = &c
		}
	}
	if rr != nil && rr.StepsRef != nil && (len(rr.Steps) < rr.StepsRef.Count || rr.Resolution == nil) {
		ref, err := a.localSteps(ctx, in.Result.WorkflowID, *rr.StepsRef)
		if err != nil {
			return nil, err
		}
		st, err := a.readStoredSteps(ref)
		if err != nil {
			return nil, err
		}
		c := *rr
		c.Steps, c.Resolution = st.Steps, st.Resolution
		rr = &c
		res.Resolution = st.Resolution
	} else if rr != nil && len(res.Resolution) == 0 {
		// A later segment's result starts without the resolution; steps
		// never stored carried it here.
		res.Resolution = rr.Resolution
	}
	if in.Segments > 0 && rr != nil {
		if err := a.allSegments(ctx, in, dir, rr, res); err != nil {
			return nil, err
		}
	}
	step.FillEnvelopes(res.Steps)
	return rr, nil
}

// allSegments gathers the steps of every segment of a run that continued
// as new: each segment's checkpoint, then this segment's.
func (a *Activities) allSegments(ctx context.Context, in wfapi.FinalizeInput, dir string, rr *wfapi.ResolveResult, res *wfapi.Result) error {
	byID := map[string]wfapi.StepResult{}
	for n := 1; n <= in.Segments; n++ {
		var part []wfapi.StepResult
		var err error
		if n <= len(in.Checkpoints) {
			err = a.readBlob(ctx, dir, in.Checkpoints[n-1], &part)
		} else {
			// A run recorded before checkpoints carried their digests.
			var raw []byte
			if raw, err = segmentSteps(dir, n); err == nil {
				err = json.Unmarshal(raw, &part)
			}
		}
		if err != nil {
			return fmt.Errorf("segment %d of the run is unreadable: %v", n, err)
		}
		for _, s := range part {
			byID[s.ID] = s
		}
	}
	for _, s := range res.Steps {
		byID[s.ID] = s
	}
	all := make([]wfapi.StepResult, 0, len(rr.Steps))
	for _, s := range rr.Steps {
		if r, ok := byID[s.ID]; ok {
			all = append(all, r)
		}
	}
	res.Steps = all
	return nil
}

// dropForeignFiles forgets the stored files a result names outside the
// run's folder on this worker: a run that moved host names files of the
// lost one, and no history value makes the report read a file elsewhere.
func (a *Activities) dropForeignFiles(in *wfapi.FinalizeInput) {
	id := in.Result.WorkflowID
	steps := slices.Clone(in.Result.Steps)
	for i := range steps {
		s := &steps[i]
		if a.Exec.InRun(id, s.DataFile) != nil {
			s.DataFile, s.DataSHA256 = "", ""
		}
		if a.Exec.InRun(id, s.EnvelopeFile) != nil {
			s.EnvelopeFile = ""
		}
	}
	in.Result.Steps = steps
}

// Checkpoint writes one segment's ended steps for the final report (runs
// recorded before checkpoints became blobs).
func (a *Activities) Checkpoint(ctx context.Context, in wfapi.CheckpointInput) error {
	dir, err := a.runFolder(ctx, "", in.RunDir)
	if err != nil {
		return appError(err)
	}
	in.RunDir = dir
	raw, err := json.Marshal(in.Steps)
	if err == nil {
		err = os.MkdirAll(filepath.Dir(segmentFile(in.RunDir, in.Segment)), 0o755)
	}
	if err == nil {
		err = runfolder.WriteAtomic(segmentFile(in.RunDir, in.Segment), raw)
	}
	if err != nil {
		return appError(caperr.Wrap(caperr.ObservabilityError, err, "cannot write the segment's steps"))
	}
	return nil
}

func segmentFile(runDir string, n int) string {
	return filepath.Join(runDir, "segments", fmt.Sprintf("%d.json", n))
}

// readsFailedData reports whether tpl reads the data of a step that did
// not succeed (${steps.ID.success} of one is false, and fine to read).
func readsFailedData(tpl any, deps map[string]wfapi.StepOutcome) bool {
	failed := false
	plan.EachRef(tpl, func(string) {}, func(id string, data bool) {
		if o, ok := deps[id]; ok && data && !o.Success {
			failed = true
		}
	})
	return failed
}

// outputs evaluates the plan's outputs over the ended run: a step that did
// not succeed, or a path its data lacks, gives null (the message says so
// in the report's notes).
func outputs(rr *wfapi.ResolveResult, res *wfapi.Result) map[string]any {
	deps := map[string]wfapi.StepOutcome{}
	for _, s := range res.Steps {
		o := wfapi.StepOutcome{Success: s.Status == wfapi.StepSucceeded, Status: s.Status, DataFile: s.DataFile}
		if s.Envelope != nil && s.DataFile == "" {
			o.Data = s.Envelope.Data
		}
		deps[s.ID] = o
	}
	out := map[string]any{}
	for name, tpl := range rr.Outputs {
		// Each output reads only its own steps: an unreadable stored
		// output elsewhere must not blank it.
		if readsFailedData(tpl, deps) {
			out[name] = nil // a step that did not succeed gives null (docs/plans.md), not its data
			continue
		}
		scope, _, err := step.LoadScope(rr.Inputs, step.ReferencedBy(tpl, deps))
		if err != nil {
			out[name] = nil
			continue
		}
		v, err := scope.Eval(tpl)
		if err != nil {
			out[name] = nil
			continue
		}
		out[name] = v
	}
	return out
}

// withOf gives what-next each step's inputs as the plan writes them.
func withOf(rr *wfapi.ResolveResult) whatnext.With {
	if rr == nil {
		return nil
	}
	return func(id string) map[string]any {
		for _, s := range rr.Steps {
			if s.ID == id {
				return s.With
			}
		}
		return nil
	}
}
