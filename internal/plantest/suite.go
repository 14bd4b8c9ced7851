package plantest

import (
	"fmt"
	"io"
	"os"

	"github.com/hashicorp/go-hclog"

	"github.com/capflow/capflow/activities"
	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/config"
	"github.com/capflow/capflow/internal/plan"
	"github.com/capflow/capflow/internal/preflight"
	"github.com/capflow/capflow/internal/project"
	"github.com/capflow/capflow/internal/schema"
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
	// outputs and schemas: each step's generated result and its tool's
	// output schema (nil when the tool declares none).
	outputs map[string]any
	schemas map[string]*schema.Schema
	// ungenerated: steps whose generated result their schema refuses
	// (a pattern, a length): why, for the case that needs one.
	ungenerated map[string]string
	acts        *activities.Activities
	runsDir     string
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
	s := &Suite{Plan: p, File: planFile, value: doc.Root.Interface(), runsDir: runs,
		outputs: map[string]any{}, schemas: map[string]*schema.Schema{}, ungenerated: map[string]string{},
		acts: &activities.Activities{Project: proj, Logger: log}}
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
	for _, r := range s.Report.Resolution {
		if r.Manifest == nil {
			continue
		}
		doc := r.Manifest.OutputSchema
		s.outputs[r.StepID] = generated(doc)
		if doc != nil {
			// The registry compiled it when it loaded the manifest.
			if sch, vs := schema.Compile(doc); len(vs) == 0 {
				s.schemas[r.StepID] = sch
				if bad := sch.Validate(s.outputs[r.StepID]); len(bad) > 0 {
					s.ungenerated[r.StepID] = fmt.Sprintf("%s: %s", yamldoc.FieldPath(bad[0].Path), bad[0].Message)
				}
			}
		}
	}
	return nil
}

// Close removes the test runs' folders.
func (s *Suite) Close() { _ = os.RemoveAll(s.runsDir) }
