package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/capflow/capflow/client"
	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/runctl"
	"github.com/capflow/capflow/internal/whatnext"
)

// The JSON API the page reads (docs/console.md). Errors are
// {"code", "message"} with the HTTP status of their code.

func (s *Server) api(mux *http.ServeMux) {
	mux.HandleFunc("GET /api/runs", s.needsTemporal(s.listRuns))
	// A run's progress (its result once it ended), its resolved plan, and
	// what Temporal says of it (running activities with their heartbeats:
	// a step's stderr tail).
	mux.HandleFunc("GET /api/runs/{id}", s.needsTemporal(s.answer("progress of", s.progress)))
	mux.HandleFunc("GET /api/runs/{id}/graph", s.answer("graph of", func(ctx context.Context, id string) (any, error) {
		l, err := s.layout(ctx, id, nil)
		return l.graph, err
	}))
	mux.HandleFunc("GET /api/runs/{id}/describe", s.needsTemporal(s.answer("describe", s.describe)))
	mux.HandleFunc("GET /api/runs/{id}/graph.svg", s.needsTemporal(s.getGraphSVG))
	// Which steps each group node of the drawn graph holds (?expand=: as
	// graph.svg's).
	mux.HandleFunc("GET /api/runs/{id}/groups", func(w http.ResponseWriter, r *http.Request) {
		s.answer("groups of", func(ctx context.Context, id string) (any, error) {
			l, err := s.layout(ctx, id, expandParam(r))
			return map[string]any{"groups": l.groups}, err
		})(w, r)
	})
	mux.HandleFunc("GET /api/runs/{id}/states", s.needsTemporal(s.answer("states of", s.states)))
	mux.HandleFunc("GET /api/runs/{id}/timeline", s.answer("timeline of", s.timeline))
	mux.HandleFunc("GET /api/runs/{id}/report", s.getReport)
	mux.HandleFunc("GET /api/runs/{id}/steps/{step}/inputs", s.getInputs)
	mux.HandleFunc("GET /api/runs/{id}/artifacts/{sha256}", s.getArtifact)
	mux.HandleFunc("POST /api/runs/{id}/{action}", s.needsTemporal(s.control))
	mux.HandleFunc("GET /api/plans", s.listPlans)
	mux.HandleFunc("GET /api/plans/check", s.checkPlan)
	mux.HandleFunc("GET /api/plans/graph.svg", s.planSVG)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(v)
}

// runError is a failed request about run id as the page reads it: 404
// for a run Temporal does not have, 502 naming the server when Temporal
// does not answer (the page's banner), else the code's status.
func (s *Server) runError(w http.ResponseWriter, id string, err error, what string) {
	switch {
	case errors.As(err, new(*client.NotFound)):
		writeError(w, http.StatusNotFound, caperr.New(caperr.InvalidInput, "no run with ID %q here: it never started in this namespace, or Temporal removed it after its retention", id))
	case client.Unreachable(err) && s.temporalDown(context.Background()) == nil:
		// Temporal answers; the run's workers did not (a query needs one).
		writeError(w, http.StatusGatewayTimeout, caperr.Wrap(caperr.DependencyUnavailable, err,
			"the workers of run %s did not answer in time (a local step holds its workflow task, or no worker is up for it): capflow status %s says which", id, id))
	case client.Unreachable(err):
		writeError(w, http.StatusBadGateway, s.unreachable(err))
	default:
		writeError(w, 0, runctl.RunError(id, err, what))
	}
}

// unreachable says Temporal does not answer, naming where the console
// looks for it.
func (s *Server) unreachable(err error) error {
	return caperr.Wrap(caperr.DependencyUnavailable, err, "Temporal at %s does not answer; the console tries again every few seconds", s.o.Temporal)
}

func writeError(w http.ResponseWriter, status int, err error) {
	code := caperr.CodeOf(err)
	if status == 0 {
		switch code {
		case caperr.InvalidInput, caperr.SchemaViolation:
			status = http.StatusBadRequest
		case caperr.DependencyUnavailable:
			status = http.StatusBadGateway
		default:
			status = http.StatusInternalServerError
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"code": string(code), "message": err.Error()})
}

func reqCtx(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), 20*time.Second)
}

// listRuns answers []client.RunInfo, newest first; ?status= and ?plan=
// filter (by capflow's search attributes).
func (s *Server) listRuns(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := reqCtx(r)
	defer cancel()
	where, err := runFilter(r.URL.Query().Get("status"), r.URL.Query().Get("plan"))
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	runs, err := s.o.Client.List(ctx, where, 200)
	if err != nil {
		writeError(w, http.StatusBadGateway, s.unreachable(err))
		return
	}
	if runs == nil {
		runs = []client.RunInfo{}
	}
	writeJSON(w, runs)
}

// layout lays the run's plan out once for each set of groups a person
// opened (a run's plan does not change): interchangeable steps grouped.
func (s *Server) layout(ctx context.Context, id string, expand []string) (laidOut, error) {
	base, err := s.laidOut(ctx, id+"|", func() (*client.Graph, []string, error) {
		if e := s.endedRun(ctx, id); e != nil {
			return e.graph, nil, nil
		}
		qctx, cancel := context.WithTimeout(ctx, queryWait)
		defer cancel()
		g, err := s.o.Client.Get(id).Graph(qctx)
		return g, nil, err
	})
	// Only the plan's own groups open, up to MaxOpenedSteps steps in all:
	// a request cannot make the console lay out anything else.
	if expand = openable(expand, base.groups); err != nil || len(expand) == 0 {
		return base, err
	}
	return s.laidOut(ctx, id+"|"+strings.Join(expand, ","), func() (*client.Graph, []string, error) { return base.graph, expand, nil })
}

// MaxOpenedSteps bounds the steps of the groups drawn open at once.
const MaxOpenedSteps = 5000

// openable keeps the groups of groups in expand while their steps add up
// to MaxOpenedSteps at most.
func openable(expand []string, groups map[string][]string) []string {
	var out []string
	n := 0
	for _, id := range expand {
		if m, ok := groups[id]; ok && n+len(m) <= MaxOpenedSteps {
			out, n = append(out, id), n+len(m)
		}
	}
	return out
}

// laidOut lays out the graph graphOf answers (with the groups it names
// open) once per key, one layout at a time.
func (s *Server) laidOut(ctx context.Context, key string, graphOf func() (*client.Graph, []string, error)) (laidOut, error) {
	if l, ok := s.svg.get(key); ok {
		return l, nil
	}
	s.layoutMu.Lock() // one replay of an ended run's history, not one per request
	defer s.layoutMu.Unlock()
	if l, ok := s.svg.get(key); ok {
		return l, nil
	}
	g, expand, err := graphOf()
	if err != nil {
		return laidOut{}, err
	}
	c := Collapse(g, expand...)
	svg, err := SVG(ctx, c)
	if err != nil {
		return laidOut{}, caperr.Wrap(caperr.InternalError, err, "layout")
	}
	l := laidOut{svg: svg, groups: c.Groups, graph: g}
	if len(g.Steps) > 0 {
		s.svg.put(key, l)
	}
	return l, nil
}

func (s *Server) getGraphSVG(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := reqCtx(r)
	defer cancel()
	l, err := s.layout(ctx, r.PathValue("id"), expandParam(r))
	if err != nil {
		s.runError(w, r.PathValue("id"), err, "graph of")
		return
	}
	w.Header().Set("Content-Type", "image/svg+xml")
	_, _ = w.Write(l.svg)
}

// control sends a run-control request: pause, resume, cancel, decide
// (body client.DecideRequest), rerun (body {"from": STEP}). The answer is
// client.ControlAnswer (rerun: {"workflow_id"}).
func (s *Server) control(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := reqCtx(r)
	defer cancel()
	id, action := r.PathValue("id"), r.PathValue("action")
	var body struct {
		client.DecideRequest
		From string `json:"from"`
	}
	if r.ContentLength != 0 {
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10)).Decode(&body); err != nil {
			writeError(w, http.StatusBadRequest, caperr.New(caperr.InvalidInput, "the request body is not JSON: %v", err))
			return
		}
	}
	// Who decided is the console (a body cannot say someone else did).
	body.By = "console"
	ans, err := s.act(ctx, id, action, body.DecideRequest, body.From)
	if err != nil {
		writeError(w, 0, err)
		return
	}
	s.log.Info("control", "run", id, "action", action, "by", body.By)
	writeJSON(w, ans)
}

func (s *Server) act(ctx context.Context, id, action string, req client.DecideRequest, from string) (any, error) {
	run := s.o.Client.Get(id)
	var ans *client.ControlAnswer
	var err error
	switch action {
	case "pause":
		ans, err = run.Pause(ctx, req.By)
	case "resume":
		ans, err = run.Resume(ctx, req.By)
	case "cancel":
		if err = run.Cancel(ctx); err == nil {
			return map[string]string{"message": "cancel requested"}, nil
		}
	case "decide":
		if err = runctl.CheckTimeout(req.Timeout); err != nil {
			return nil, err
		}
		ans, err = run.DecideOnce(ctx, req)
	case "rerun":
		return s.rerun(ctx, id, from)
	default:
		return nil, caperr.New(caperr.InvalidInput, "unknown action %q: pause, resume, cancel, decide or rerun", action)
	}
	if err != nil {
		return nil, runctl.UpdateError(id, err)
	}
	return ans, nil
}

func (s *Server) rerun(ctx context.Context, id, from string) (any, error) {
	in, opts, prev, err := runctl.Rerun(ctx, s.o.Client, id, from, "")
	if err != nil {
		return nil, err
	}
	opts.ID = runctl.NewWorkflowID(prev.Plan)
	run, err := s.o.Client.StartWith(ctx, opts, in)
	if err != nil {
		return nil, caperr.Wrap(caperr.DependencyUnavailable, err, "start the rerun")
	}
	return map[string]string{"workflow_id": run.ID, "message": opts.Summary}, nil
}

// answer serves what ask says of the run the path names.
func (s *Server) answer(what string, ask func(ctx context.Context, id string) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := reqCtx(r)
		defer cancel()
		id := r.PathValue("id")
		v, err := ask(ctx, id)
		if err != nil {
			s.runError(w, id, err, what)
			return
		}
		writeJSON(w, v)
	}
}

// progress is a run's progress while it runs; once it ended, its result
// (read from history: a query of an ended run makes a worker replay it
// all, seconds for thousands of steps).
func (s *Server) progress(ctx context.Context, id string) (any, error) { return s.result(ctx, id) }

// result is progress typed: what the API's handlers read of a run.
func (s *Server) result(ctx context.Context, id string) (*client.Result, error) {
	res := s.endedResult(ctx, id)
	if res == nil {
		var err error
		if res, err = s.o.Client.Get(id).ProgressNow(ctx); err != nil {
			return nil, err
		}
	}
	res.Next = whatnext.For(res)
	return res, nil
}

// endedResult is an ended run's result, read from its history's last event;
// nil while it runs (or when it cannot be read).
func (s *Server) endedResult(ctx context.Context, id string) *client.Result {
	if info, err := s.o.Client.Describe(ctx, id); err != nil || info.Open {
		return nil
	}
	res, err := s.o.Client.Get(id).Wait(ctx)
	if err != nil {
		return nil
	}
	return res
}

// states answers every step's state; an ended run's from its report when
// this host has it (asking costs a replay).
func (s *Server) states(ctx context.Context, id string) (any, error) {
	if e := s.endedRun(ctx, id); e != nil {
		return e.states, nil
	}
	qctx, cancel := context.WithTimeout(ctx, queryWait)
	defer cancel()
	return s.o.Client.Get(id).States(qctx)
}

// queryWait bounds a query of a running run: its worker answers from
// memory at once, unless a local step holds the run's task or no worker is
// up (then the page says so, instead of waiting out the request).
const queryWait = 8 * time.Second

// runFilter is the visibility query of ?status= and ?plan=: a status is
// one of client.RunStatuses, a plan name a plain name (no quote, no
// backslash: a value is never spliced into the query's syntax).
func runFilter(status, plan string) (string, error) {
	var where []string
	if status != "" {
		if !slices.Contains(client.RunStatuses, client.RunStatus(status)) {
			return "", caperr.New(caperr.InvalidInput, "status %q: one of %v", status, client.RunStatuses)
		}
		where = append(where, client.StatusFilter(client.RunStatus(status)))
	}
	if plan != "" {
		if strings.ContainsAny(plan, "'\\\"\x00\n\r") {
			return "", caperr.New(caperr.InvalidInput, "plan %q: a plan's name holds no quote, backslash or line break", plan)
		}
		where = append(where, fmt.Sprintf("CapflowPlan = '%s'", plan))
	}
	return strings.Join(where, " AND "), nil
}

// groupID is a group's or chain's node id (Collapse's).
var groupID = regexp.MustCompile(`^(group|chain):[1-9][0-9]{0,5}$`)

// expandParam is ?expand=: the groups a person opened, sorted, each once;
// anything that is not a group's id is dropped (a client names nothing
// else here), and at most 32 are kept.
func expandParam(r *http.Request) []string {
	var out []string
	for _, id := range strings.Split(r.URL.Query().Get("expand"), ",") {
		if groupID.MatchString(id) && !slices.Contains(out, id) && len(out) < 32 {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// described is what Temporal says of a run, and for each running step
// where its attempt is, in words (client.PendingActivity.Line).
type described struct {
	*client.RunInfo
	Lines map[string]string `json:"lines,omitempty"`
}

func (s *Server) describe(ctx context.Context, id string) (any, error) {
	info, err := s.o.Client.Describe(ctx, id)
	if err != nil {
		return nil, err
	}
	d := described{RunInfo: info, Lines: map[string]string{}}
	now := time.Now()
	for _, pa := range info.Pending {
		if pa.Step != "" {
			d.Lines[pa.Step] = pa.Line(now)
		}
	}
	return d, nil
}
