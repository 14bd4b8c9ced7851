package project

import (
	"context"
	"path/filepath"

	"github.com/capflow/capflow/internal/beneath"
	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/report"
)

// RunReport reads one of a run's report files (the path its result names,
// at most max bytes): from this project's runs folder when it is there,
// else from the shared artifact store the worker put it in. Nothing
// outside the runs folder is read, whatever path the result names.
func (p *Project) RunReport(ctx context.Context, workflowID, file string, max int64) ([]byte, error) {
	raw, err := p.runsFile(file, max)
	if err == nil {
		return raw, nil
	}
	if p.Config.Artifacts.URL == "" {
		return nil, err
	}
	st, serr := p.Artifacts(ctx)
	if serr != nil {
		return nil, err
	}
	defer st.Close()
	raw, serr = st.GetRecord(ctx, report.RecordName(workflowID, filepath.Base(file)), max)
	if serr != nil {
		return nil, caperr.New(caperr.InvalidInput, "%v; not in %s either: %v", err, st, serr)
	}
	return raw, nil
}

// runsFile reads a file of the runs folder, at most max bytes, opened
// beneath that folder (a link out of it is refused).
func (p *Project) runsFile(file string, max int64) ([]byte, error) {
	runs := filepath.Clean(p.Config.Abs(p.Config.RunsDir))
	rel, ok := beneath.Rel(runs, file)
	if !ok || rel == "." || !filepath.IsAbs(file) {
		return nil, caperr.New(caperr.InvalidInput, "%s is not in this project's runs folder %s", file, runs)
	}
	raw, err := beneath.ReadFile(runs, rel, max, "report")
	if err != nil {
		return nil, caperr.New(caperr.InvalidInput, "%s is not readable here: %v", file, err)
	}
	return raw, nil
}
