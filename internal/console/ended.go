package console

import (
	"context"
	"encoding/json"
	"time"

	"github.com/capflow/capflow/client"
	"github.com/capflow/capflow/internal/report"
	"github.com/capflow/capflow/internal/wfapi"
)

// MaxReportJSON bounds a report.json the console reads an ended run from.
const MaxReportJSON = 256 << 20

// ended is what the console keeps of an ended run: its plan as a graph and
// every step's final state (neither changes any more).
type ended struct {
	graph  *client.Graph
	states []client.StepState
	// steps are every step's times, when the report had them (a large
	// run's result leaves most steps out): the timeline's rows.
	steps []client.StepResult
}

// endedRun is the run's graph and states when it has ended, read from its
// report.json (in this project's runs folder or the shared store): a query of an ended run makes
// a worker replay its whole history, seconds for thousands of steps. When
// the report is not on this host, the run is asked both at once. Nil while
// the run is open or cannot be asked (the caller asks and reports why).
func (s *Server) endedRun(ctx context.Context, id string) *ended {
	if e, ok := s.ended.Load(id); ok {
		return e
	}
	s.endedMu.Lock() // one read of a large report, not one per request
	defer s.endedMu.Unlock()
	if e, ok := s.ended.Load(id); ok {
		return e
	}
	res := s.endedResult(ctx, id)
	if res == nil {
		return nil
	}
	start := time.Now()
	e := s.fromReport(ctx, id, res.Report.JSON)
	s.log.Debug("ended run", "run", id, "from_report", e != nil, "took", time.Since(start))
	if e == nil {
		if e = s.asked(ctx, id); e == nil {
			return nil
		}
	}
	s.ended.Store(id, e)
	return e
}

// fromReport reads an ended run's graph and states from its report.json.
func (s *Server) fromReport(ctx context.Context, id, file string) *ended {
	raw, err := s.o.Project.RunReport(ctx, id, file, MaxReportJSON)
	if err != nil {
		return nil
	}
	var doc report.Document
	if json.Unmarshal(raw, &doc) != nil || doc.Result.WorkflowID != id || doc.Resolved == nil {
		return nil
	}
	e := &ended{graph: wfapi.GraphOf(doc.Resolved)}
	final := make(map[string]client.StepState, len(doc.Result.Steps))
	for _, st := range doc.Result.Steps {
		final[st.ID] = st.Status
		e.steps = append(e.steps, client.StepResult{ID: st.ID, Status: st.Status, StartedAt: st.StartedAt, EndedAt: st.EndedAt, Attempts: st.Attempts})
	}
	for _, st := range e.graph.Steps {
		state, ok := final[st.ID]
		if !ok {
			state = client.StepPending
		}
		e.states = append(e.states, state)
	}
	return e
}

// asked is an ended run's graph and states as the run answers them: two
// replays of its history, side by side.
func (s *Server) asked(ctx context.Context, id string) *ended {
	run := s.o.Client.Get(id)
	e := &ended{}
	var gerr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.graph, gerr = run.Graph(ctx)
	}()
	st, err := run.States(ctx)
	<-done
	if err != nil || gerr != nil {
		return nil
	}
	e.states = st
	return e
}
