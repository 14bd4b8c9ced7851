package plantest

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/hashicorp/go-hclog"

	"github.com/capflow/capflow/activities"
	"github.com/capflow/capflow/internal/artifacts"
	"github.com/capflow/capflow/internal/builtin"
	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/config"
	"github.com/capflow/capflow/internal/manifest"
	"github.com/capflow/capflow/internal/plan"
	"github.com/capflow/capflow/internal/preflight"
	"github.com/capflow/capflow/internal/project"
	"github.com/capflow/capflow/internal/registry"
	"github.com/capflow/capflow/internal/schema"
	"github.com/capflow/capflow/internal/step"
	"github.com/capflow/capflow/internal/yamldoc"
)

// Suite is a plan made ready to test: resolved against the project's
// tools, with a result generated for each step from its tool's output
// schema.
type Suite struct {
	Plan   *plan.Plan
	File   string
	Report *preflight.Report
	value  any
	// schemas: each step's tool's output schema (none when it declares
	// none), which the case's data must match.
	schemas map[string]*schema.Schema
	reg     *registry.Registry
	// results are the generated results, by tool@version (a sub-plan's
	// steps are resolved only when its child runs).
	mu      sync.Mutex
	results map[string]generatedResult
	proj    *project.Project
	log     hclog.Logger
	runsDir string
}

// Prepare loads and checks planFile in the project of cfg.
func Prepare(cfg *config.Config, planFile string, log hclog.Logger) (*Suite, error) {
	data, err := yamldoc.ReadFile(planFile, planFile)
	if err != nil {
		return nil, err
	}
	p, probs := plan.Parse(planFile, data)
	if len(probs) > 0 {
		return nil, probs
	}
	doc, _ := yamldoc.Parse(planFile, data)
	runs, err := os.MkdirTemp("", "capflow-plan-test-")
	if err != nil {
		return nil, caperr.Wrap(caperr.ObservabilityError, err, "a folder for the test runs")
	}
	c := *cfg
	c.RunsDir = runs
	proj := project.New(&c, log, io.Discard)
	s := &Suite{Plan: p, File: planFile, value: doc.Root.Interface(), runsDir: runs, proj: proj, log: log,
		schemas: map[string]*schema.Schema{}, results: map[string]generatedResult{}}
	if err := s.resolve(proj); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// resolve checks the plan as a run would and generates each step's result.
func (s *Suite) resolve(proj *project.Project) error {
	reg, err := proj.Registry()
	if err != nil {
		return err
	}
	pol, err := proj.Policy()
	if err != nil {
		return err
	}
	// A plan with gaps or policy violations is tested too: its run ends
	// as a real one would, with nothing run, and a case may expect that.
	s.Report = proj.Check(s.Plan, nil, reg, pol, true)
	if s.Report.Status == preflight.Invalid {
		// As plan check says it, with positions in the plan's file (the
		// workflow, given the plan as a value, would lose them).
		var probs caperr.Problems
		for _, p := range s.Report.Problems {
			probs = append(probs, caperr.New(p.Code, "%s", p.Message).At(p.File, p.Line, p.Column, p.Field))
		}
		if len(probs) > 0 {
			return probs
		}
	}
	s.reg = reg
	for _, r := range s.Report.Resolution {
		if r.Manifest == nil || r.Manifest.OutputSchema == nil {
			continue
		}
		// The registry compiled it when it loaded the manifest.
		if sch, vs := schema.Compile(r.Manifest.OutputSchema); len(vs) == 0 {
			s.schemas[r.StepID] = sch
		}
	}
	return nil
}

// generatedResult is a tool's generated result, and why its output schema
// refuses it ("" when it does not).
type generatedResult struct {
	data    any
	refused string
}

// resultOf is the generated result of a tool (an empty object for a tool
// the registry does not know).
func (s *Suite) resultOf(tool, version string) generatedResult {
	key := tool + "@" + version
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.results[key]; ok {
		return r
	}
	r := generatedResult{data: map[string]any{}}
	if m := s.reg.Tool(tool, version); m != nil && m.OutputSchema != nil {
		r.data = generated(m.OutputSchema)
		if sch, vs := schema.Compile(m.OutputSchema); len(vs) == 0 {
			if bad := sch.Validate(r.data); len(bad) > 0 {
				r.refused = fmt.Sprintf("%s: %s", yamldoc.FieldPath(bad[0].Path), bad[0].Message)
			}
		}
	}
	s.results[key] = r
	return r
}

// activities are the worker's, with the case's stand-in for every tool.
func (s *Suite) activities(t *tools) *activities.Activities {
	// An agent step's conversation is kept by digest, as on a worker: in
	// a store of the test runs' own.
	store, _ := artifacts.Open(context.Background(), artifacts.Options{StateDir: s.runsDir})
	return &activities.Activities{Project: s.proj, Logger: s.log, SegmentEvents: s.proj.Config.Temporal.SegmentEvents,
		Exec: &step.Executor{Project: s.proj, Logger: s.log, Tool: t, Given: true, Artifacts: store}, Model: t.model}
}

// Close removes the test runs' folders.
func (s *Suite) Close() { _ = os.RemoveAll(s.runsDir) }

// waitsForPerson reports whether a step's tool waits for a person's
// decision (a builtin's declared trait: flow.approve's), as the run
// resolves it.
func (s *Suite) waitsForPerson(id string) bool {
	for _, r := range s.Report.Resolution {
		if r.StepID == id && r.Manifest != nil {
			return r.Manifest.Entrypoint.Type == manifest.EntryBuiltin && builtin.TraitsOf(r.Manifest.Entrypoint.Name).WaitsForPerson
		}
	}
	return false
}
