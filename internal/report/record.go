package report

import "github.com/capflow/capflow/internal/runfolder"

// RecordName is where a run's report file (report.json, report.md) is kept
// in a shared artifact store, so a console or CLI on another host than the
// run's reads it: reports/<run folder>/<file>.
func RecordName(workflowID, file string) string {
	return "reports/" + runfolder.Name(workflowID) + "/" + file
}
