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
	return paths, nil
}

func writeAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
