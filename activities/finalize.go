package activities

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"

	"go.temporal.io/sdk/temporal"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/report"
	"github.com/capflow/capflow/internal/wfapi"
)

// Finalize writes report.json and report.md into the run's folder.
func (a *Activities) Finalize(ctx context.Context, in wfapi.FinalizeInput) (*wfapi.ReportPaths, error) {
	dir := a.runDir(in.Result.WorkflowID)
	if in.Resolved != nil && in.Resolved.RunDir != "" {
		dir = in.Resolved.RunDir
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, temporal.NewApplicationError(err.Error(), string(caperr.ObservabilityError))
	}
	paths := &wfapi.ReportPaths{JSON: filepath.Join(dir, "report.json"), Markdown: filepath.Join(dir, "report.md")}
	res := in.Result
	if in.Resolved != nil && len(in.Resolved.Outputs) > 0 {
		res.Outputs = outputs(in.Resolved, &res)
	}
	res.Report = *paths
	doc := report.Document{Result: res, Resolved: in.Resolved}
	js, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, temporal.NewApplicationError(err.Error(), string(caperr.InternalError))
	}
	if err := writeAtomic(paths.JSON, append(js, '\n')); err != nil {
		return nil, temporal.NewApplicationError(err.Error(), string(caperr.ObservabilityError))
	}
	if err := writeAtomic(paths.Markdown, []byte(report.Markdown(doc))); err != nil {
		return nil, temporal.NewApplicationError(err.Error(), string(caperr.ObservabilityError))
	}
	out := *paths
	out.Outputs = res.Outputs
	return &out, nil
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
		scope, _, err := loadScope(rr.Inputs, referencedBy(tpl, deps))
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

func writeAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
