package console

import (
	"context"
	"path/filepath"
	"time"

	"github.com/capflow/capflow/client"
	"github.com/capflow/capflow/internal/beneath"
	"github.com/capflow/capflow/internal/report"
	"github.com/capflow/capflow/internal/runfolder"
)

// Timeline is a run's steps in time, as the run page draws them: each
// step's start and end, and its failed attempts (from its folder, when
// the run's folder is on this host).
type Timeline struct {
	// Now is when the console answered: a running step's bar ends there.
	Now   string         `json:"now"`
	Steps []TimelineStep `json:"steps"`
}

// TimelineStep is one step's row.
type TimelineStep struct {
	ID        string           `json:"id"`
	Status    string           `json:"status"`
	StartedAt string           `json:"started_at,omitempty"`
	EndedAt   string           `json:"ended_at,omitempty"`
	Attempts  int              `json:"attempts,omitempty"`
	Failed    []report.Attempt `json:"failed_attempts,omitempty"`
}

// maxAttemptsFile bounds the attempts file the console reads of a step.
const maxAttemptsFile = 1 << 20

// timeline answers the run's timeline: an ended run's every step (from
// its report), a running one's the steps its progress lists (a run of
// thousands leaves out the succeeded and pending ones while it runs).
func (s *Server) timeline(ctx context.Context, id string) (any, error) {
	var steps []client.StepResult
	if e := s.endedRun(ctx, id); e != nil && e.steps != nil {
		steps = e.steps
	} else {
		res, err := s.result(ctx, id)
		if err != nil {
			return nil, err
		}
		steps = res.Steps
	}
	runDir := s.o.Project.RunDir(id)
	out := Timeline{Now: time.Now().UTC().Format(time.RFC3339Nano), Steps: make([]TimelineStep, 0, len(steps))}
	for _, st := range steps {
		out.Steps = append(out.Steps, timelineStep(runDir, st))
	}
	return out, nil
}

// timelineStep is a step's row; a step that took more than one attempt
// has its failed ones read from its records, beneath the run's folder.
func timelineStep(runDir string, st client.StepResult) TimelineStep {
	row := TimelineStep{ID: st.ID, Status: string(st.Status), StartedAt: st.StartedAt, EndedAt: st.EndedAt, Attempts: st.Attempts}
	if st.Attempts > 1 {
		recDir := runfolder.Records(runDir, st.ID, -1)
		if raw, err := beneath.ReadFile(runDir, filepath.Join(recDir, report.AttemptsFileName), maxAttemptsFile, "attempts"); err == nil {
			row.Failed = report.ParseAttempts(raw)
		}
	}
	return row
}
